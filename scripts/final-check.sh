#!/usr/bin/env bash
# One short run on the GPU machine for what a change's last check needs: the GPU tests of
# tensors and imaging, compute-sanitizer memcheck on the stream tests, the monitor against
# real NVML (a scrape while a workload runs), and the CLI and batch measurements with their
# peers (scripts/bench-cli.sh). Logs under $OUT. The test executables in .device/t.tar.gz
# are built with `cargo test --release --features gpu-tests -p kiln --test tensor --test
# tensor_streams --test imaging_gpu --no-run` (and kiln-monitor's sampling_cost likewise):
# without the feature their GPU tests are ignored.
set -u
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
B="$PWD/.device/bin/kiln"; T=.device/t
mkdir -p $T && tar -C $T -xzf .device/t.tar.gz
export KILN_REQUIRE_GPU=1 KILN_CACHE_DIR; KILN_CACHE_DIR=$(mktemp -d)
"$B" cache warm > /dev/null 2>&1
for t in tensor tensor_streams imaging_gpu; do
  s=$(date +%s); timeout 150 $T/$t --test-threads=4 > "$out/t-$t.log" 2>&1; rc=$?
  echo "TEST $t rc=$rc $(( $(date +%s) - s ))s $(grep -h 'test result' "$out/t-$t.log" | tail -1)"
  [ $rc != 0 ] && grep -E "panicked|FAILED|assert|left|right" "$out/t-$t.log" | head -20
done
cs=/usr/local/cuda/bin/compute-sanitizer
timeout 150 $cs --tool memcheck --error-exitcode 99 --print-limit 5 $T/tensor_streams a_dropped_tensor a_chain pinned --test-threads=1 > "$out/san-memcheck.log" 2>&1
echo "MEMCHECK rc=$? $(grep -h 'ERROR SUMMARY' "$out/san-memcheck.log" | tail -1)"; grep -m6 -A3 "^========= [A-Z]" "$out/san-memcheck.log" | head -24
# monitor
timeout 20 "$B" monitor --once --json > "$out/monitor-once.json" 2>&1; echo "MONITOR once rc=$?"
python3 -c "import json;d=json.load(open('$out/monitor-once.json'));print(json.dumps(d)[:1200])"
timeout 60 $T/sampling_cost --include-ignored --nocapture 2>&1 | grep -v "^test .* ok$" | tail -12
"$B" monitor --listen 127.0.0.1:9400 > "$out/listen.txt" 2>&1 & mp=$!
sleep 2
scrape() { python3 -c "import urllib.request;t=urllib.request.urlopen('http://127.0.0.1:9400/metrics',timeout=5).read().decode();print(t)"; }
scrape > "$out/scrape-idle.txt"
( "$B" demo --device cuda --size full --reps 20 > /dev/null 2>&1 & echo $! > "$out/demo.pid" )
sleep 5; scrape > "$out/scrape-busy.txt"; sleep 3; scrape > "$out/scrape-busy2.txt"
kill "$(cat "$out/demo.pid")" 2>/dev/null; kill $mp 2>/dev/null
for f in idle busy busy2; do echo "SCRAPE $f: $(grep -E '^kiln_gpu_(utilization_percent|memory_used_bytes|power_usage_watts|sm_clock_mhz)\{' "$out/scrape-$f.txt" | sed 's/{[^}]*}//' | tr '\n' ' ')"; done
python3 - "$out/scrape-busy.txt" docs/monitoring.md <<'PY'
import re, sys
text = open(sys.argv[1]).read(); doc = open(sys.argv[2]).read()
names = sorted(set(re.findall(r"kiln_gpu_[a-z_]+[a-z]", doc)))
present = [n for n in names if re.search(r"^" + n + r"[{ ]", text, re.M)]
print("DOC NAMES present in a real scrape: %d of %d; missing: %s" % (len(present), len(names), [n for n in names if n not in present]))
PY
# the CLI and the batch, with the peers
KILN="$B" LOOP_FRAMES=40 timeout 200 bash scripts/bench-cli.sh 2>&1 | tail -25
