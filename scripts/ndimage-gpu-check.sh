#!/usr/bin/env bash
# The ndimage (linear) check on the GPU machine, run from the repository root after the
# binaries travelled in .device/ (see "Build here" below). Prints a short table last.
#   1. the ndimage GPU tests with KILN_REQUIRE_GPU=1 (scipy fixtures on CUDA, GPU vs CPU on
#      random inputs, the CLI on the real image/volume, kiln's existing imaging GPU tests);
#   2. gaussian sigma=4 3-D on 512^3: kiln (CUDA events) vs cupyx.scipy.ndimage (goal >= 3x);
#   3. cross4 1080x1920 (goal <= 12 us) and 3x3x3 on 512^3 (goal <= 0.35 ms) from
#      bench_gpu's imaging bench, and one `ncu --clock-control none` profile of each kernel
#      (key lines printed).
#
# Build here (CPU machine), then carry .device:
#   cargo build --release -p kiln-cli
#   cargo test --release -p kiln --features gpu-tests --test ndimage_fixtures --test ndimage_bench --test bench_gpu \
#     --test imaging_gpu --no-run
#   cargo test --release -p kiln-cli --features gpu-tests --test ndimage --no-run
#   mkdir -p .device/bin .device/ndtests && cp target/release/kiln .device/bin/ &&
#   for t in ndimage_fixtures ndimage_bench bench_gpu imaging_gpu ndimage; do
#     cp "$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)" .device/ndtests/$t; done
#   strip .device/bin/* .device/ndtests/*
# Run there: bash scripts/ndimage-gpu-check.sh   (logs under $OUT or ./ndimage-out)
set -u
out="${OUT:-$PWD/ndimage-out}"; mkdir -p "$out"
B=.device/bin; T=.device/ndtests
export KILN_REQUIRE_GPU=1 KILN_BIN="$PWD/$B/kiln"
# every skip lands in one file (kiln_testkit), counted by scripts/count-skips.sh
export KILN_SKIP_LOG="$out/skips.log"; : > "$KILN_SKIP_LOG"
export KILN_CACHE_DIR; KILN_CACHE_DIR="$(mktemp -d)"
rows=()

# 1. tests (the fixture tests find tests/fixtures and tests/data from the repository root)
for t in ndimage_fixtures imaging_gpu ndimage; do
  [ -x "$T/$t" ] || { rows+=("test $t: MISSING"); continue; }
  if "$T/$t" --test-threads=4 > "$out/test-$t.log" 2>&1; then r=ok; else r=FAILED; fi
  rows+=("test $t: $r ($(grep -m1 '^test result' "$out/test-$t.log"))")
  grep -h 'scipy cases, worst' "$out/test-$t.log" | sed 's/^/  /' >> "$out/worst.txt"
done
rows+=("GPU test $(bash scripts/count-skips.sh "$KILN_SKIP_LOG" | head -n 1) (must be 0)")

# 2. gaussian sigma=4 512^3, kiln then cupyx
"$T/ndimage_bench" --ignored --nocapture --test-threads=1 > "$out/bench-gauss.log" 2>&1
kiln_ms=$(grep -o '"workload": "gaussian3d_s4_512", "peer": "kiln", "ms": [0-9.]*' "$out/bench-gauss.log" | awk '{print $NF}')
python3 - > "$out/cupyx-gauss.log" 2>&1 <<'PY'
import cupy as cp, numpy as np
from cupyx.scipy import ndimage as cnd
x = cp.random.default_rng(4).uniform(-1, 1, (512, 512, 512), dtype=cp.float32)
y = cnd.gaussian_filter(x, 4.0)
cp.cuda.Device().synchronize()
ts = []
for _ in range(10):
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(); cnd.gaussian_filter(x, 4.0, output=y); b.record(); b.synchronize()
    ts.append(cp.cuda.get_elapsed_time(a, b))
print("CUPYX gaussian3d_s4_512 ms %.4f" % sorted(ts)[len(ts) // 2])
PY
cupy_ms=$(awk '/^CUPYX/ {print $NF}' "$out/cupyx-gauss.log")
ratio=$(awk -v a="${cupy_ms:-0}" -v b="${kiln_ms:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
rows+=("gaussian sigma=4 512^3: kiln ${kiln_ms:-?} ms, cupyx ${cupy_ms:-?} ms, ratio ${ratio}x (goal >= 3)")

# 3. cross4 and 3x3x3 from bench_gpu, then ncu on each kernel
"$T/bench_gpu" bench_imaging_and_transpose --ignored --nocapture --test-threads=1 > "$out/bench-imaging.log" 2>&1
c4=$(grep -o '"workload": "stencil5_1080x1920", "peer": "kiln", "ms": [0-9.]*' "$out/bench-imaging.log" | awk '{print $NF}')
k3=$(grep -o '"workload": "conv3d_512", "peer": "kiln", "ms": [0-9.]*' "$out/bench-imaging.log" | awk '{print $NF}')
rows+=("cross4 1080x1920: ${c4:-?} ms (goal <= 0.012)")
rows+=("3x3x3 512^3: ${k3:-see bench-imaging.log} ms (goal <= 0.35)")
NCU=/usr/local/cuda/bin/ncu
if [ -x "$NCU" ]; then
  for k in filter2d_k3r4_f32 filter2d_k3r8_f32 filter3d_k3_f32; do
    "$NCU" --clock-control none -k "$k" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      "$T/bench_gpu" bench_imaging_and_transpose --ignored --test-threads=1 > "$out/ncu-$k.txt" 2>&1
    rows+=("ncu $k: $(grep -E '^\s+(Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Compute \(SM\) Throughput)' "$out/ncu-$k.txt" | awk '{$1=$1}1' | paste -sd';' | cut -c1-300)")
  done
else
  rows+=("ncu: not found at $NCU")
fi

echo "==== worst errors (fraction of the documented bound) ===="; cat "$out/worst.txt" 2>/dev/null
for t in ndimage_fixtures imaging_gpu ndimage; do
  grep -q 'FAILED\|panicked' "$out/test-$t.log" 2>/dev/null && { echo "==== $t (failures) ===="; grep -v '^test .* ok$' "$out/test-$t.log" | tail -n 40; }
done
echo "==== ndimage summary ===="; printf '%s\n' "${rows[@]}"
