#!/usr/bin/env bash
# On the GPU machine, from the repo root, after scripts/device-bundle.sh built .device/ here:
# what issue 12 measures that gpu-check.sh does not. Cold starts on fresh kernel caches
# (`kiln filter2d`, `kiln gemm`, `kiln price --method mc`: first run against a warm second run,
# and `kiln cache warm`), the host-to-host tensor paths (bench_tensor) and the peers' user
# paths in the same call, and compute-sanitizer on the tensor stream tests.
# Usage: bash scripts/tensor-check.sh   (logs under $OUT or ./gpu-out; a summary last)
set -u
[ -f .device/tests.tar.xz ] && [ ! -d .device/tests ] && python3 -c 'import tarfile; tarfile.open(".device/tests.tar.xz").extractall(".device")'
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
B="$PWD/.device/bin/kiln"; T=.device/tests
export KILN_REQUIRE_GPU=1
work=$(mktemp -d)
summary=()
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"

# inputs
python3 - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/big.npy", np.random.default_rng(1).random((8192, 8192), dtype=np.float32))
with open(f"{d}/book.csv", "w") as f:
    f.write("maturity,id,type,style,spot,strike,rate,dividend,volatility,fixings,barrier\n")
    for i in range(100):
        f.write(f"1,o{i},call,european,100,{80 + i * 0.4:.1f},0.05,0.02,0.2,,\n")
PY

# cold start: each command on a fresh cache, then again on the now warm cache
cold() {
  local name="$1"; shift
  local cache; cache=$(mktemp -d)
  local t0 t1 t2 rc1 rc2
  t0=$(date +%s.%N); KILN_CACHE_DIR="$cache" "$B" "$@" > "$out/cold-$name.txt" 2>&1; rc1=$?
  t1=$(date +%s.%N); KILN_CACHE_DIR="$cache" "$B" "$@" > "$out/warm-$name.txt" 2>&1; rc2=$?
  t2=$(date +%s.%N)
  summary+=("cold start $name: first $(secs "$t0" "$t1") s (rc $rc1), warm $(secs "$t1" "$t2") s (rc $rc2), cubins $(ls "$cache" | wc -l)")
}
cold filter2d filter2d --input "$work/big.npy" --kernel gaussian:2 --output "$work/o.npy" --device cuda
cold filter2d-cross4 filter2d --input "$work/big.npy" --kernel cross4 --output "$work/o2.npy" --device cuda
cold gemm gemm --m 4096 --n 4096 --k 4096 --precision bf16 --device cuda
cold price-mc price --input "$work/book.csv" --output "$work/p.csv" --method mc --paths 1000000 --device cuda
cache=$(mktemp -d)
t0=$(date +%s.%N); KILN_CACHE_DIR="$cache" "$B" cache warm --json > "$out/cache-warm.json" 2> "$out/cache-warm.err"; rc=$?; t1=$(date +%s.%N)
summary+=("kiln cache warm, fresh cache: $(secs "$t0" "$t1") s wall (rc $rc), $(ls "$cache" | wc -l) cubins")
KILN_CACHE_DIR=$(mktemp -d) "$B" doctor > "$out/doctor-cold.txt" 2>&1
summary+=("doctor on a fresh cache: $(grep -i -m2 'cold\|warm' "$out/doctor-cold.txt" | tr '\n' ' ')")

# host-to-host paths and the peers, same call
export KILN_CACHE_DIR="$cache"
timeout 300 "$T/kiln--bench_tensor" --ignored --nocapture > "$out/bench_tensor.log" 2>&1
summary+=("bench_tensor rc=$?")
PYTHONUNBUFFERED=1 timeout 300 python3 scripts/peer_bench.py --only h2d,user_paths --json "$out/peers-user.json" > "$out/peers-user.txt" 2>&1
summary+=("peers h2d,user_paths rc=$?")

# sanitizer on the stream-ordering tests (a dropped tensor read on another stream; a chain)
cs=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  timeout 240 "$cs" --tool "$tool" --error-exitcode 99 --print-limit 20 "$T/kiln--tensor_streams" a_dropped_tensor a_chain pinned --test-threads=1 > "$out/san-$tool.log" 2>&1
  summary+=("compute-sanitizer $tool on tensor_streams (dropped tensor, chain, pinned): rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/san-$tool.log" | tail -1)")
done

printf '%s\n' "${summary[@]}"
grep -h '^BENCH' "$out/bench_tensor.log"
grep -v '^{' "$out/peers-user.txt" | tail -10
