#!/usr/bin/env bash
# On the GPU machine (issue 14): the sampling cost per sample and per NVML call, the CLI's
# monitor test with a real scrape (every docs name, this process's attribution), and a
# series of scrapes while a sustained GPU workload runs (utilization, memory, power, clocks
# moving). Needs .device/bin/kiln and the test executables under $T (sampling_cost, monitor).
# Usage: T=.device/t bash scripts/monitor-check.sh   (logs under $OUT or ./gpu-out)
set -u
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
B="${KILN:-$PWD/.device/bin/kiln}"; T="${T:-.device/t}"
export KILN_REQUIRE_GPU=1
timeout 120 "$T/sampling_cost" --include-ignored --nocapture > "$out/sampling_cost.log" 2>&1
echo "SAMPLING rc=$?"; grep -E "one sample|sampler CPU|: GPU [0-9]+: energy|^FIELD|panicked" "$out/sampling_cost.log"
KILN_BIN="$B" timeout 120 "$T/monitor" --nocapture --test-threads=1 > "$out/monitor-test.log" 2>&1
echo "MONITOR TESTS rc=$? $(grep -h 'test result' "$out/monitor-test.log" | tail -1)"
grep -E "every kiln_gpu|missing|panicked" "$out/monitor-test.log" | head -5
"$B" monitor --listen 127.0.0.1:9400 --interval 250ms > "$out/listen.txt" 2>&1 & mp=$!
sleep 1.5
scrape() { python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9400/metrics',timeout=5).read().decode())"; }
show() { echo "SCRAPE $1: $(grep -E '^kiln_gpu_(utilization_percent|memory_used_bytes|power_usage_watts|sm_clock_mhz|pcie_rx_bytes_per_second)\{' "$out/scrape-$1.txt" | sed 's/{[^}]*}//;s/kiln_gpu_//' | tr '\n' ' ')"; }
scrape > "$out/scrape-idle.txt"; show idle
"$B" gemm --m 8192 --n 8192 --k 8192 --precision f32 --reps 300 --device cuda > "$out/gemm.txt" 2>&1 & gp=$!
for i in 1 2 3 4; do sleep 1; scrape > "$out/scrape-busy$i.txt"; show busy$i; done
wait $gp; echo "workload rc=$? $(tail -1 "$out/gemm.txt")"
sleep 1; scrape > "$out/scrape-after.txt"; show after
kill $mp 2>/dev/null
python3 - "$out/scrape-busy2.txt" docs/monitoring.md <<'PY'
import re, sys
text = open(sys.argv[1]).read(); doc = open(sys.argv[2]).read()
names = sorted(set(re.findall(r"kiln_gpu_[a-z_]+[a-z]", doc)))
present = [n for n in names if re.search(r"^" + n + r"[{ ]", text, re.M)]
print("DOC NAMES in the busy scrape: %d of %d; missing: %s" % (len(present), len(names), [n for n in names if n not in present]))
PY
