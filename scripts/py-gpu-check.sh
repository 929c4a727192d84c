#!/usr/bin/env bash
# Run kiln's Python GPU tests and benches on the GPU machine (python3 with torch, CuPy, JAX,
# numpy, scipy and pytest there; no network, no Rust). Build the wheel here first:
#   scripts/py-device-wheel.sh            (a release wheel into .device/wheels/)
# then, on the GPU machine (device run, carry [".device"]):
#   bash scripts/py-gpu-check.sh
# Installs the carried wheel with --no-deps into a target dir (the machine's numpy, torch,
# ... stay in use), runs tests/test_gpu.py, tests/test_ndimage_gpu.py and
# tests/test_ndimage_interp_gpu.py with KILN_REQUIRE_GPU=1
# (a skip is a failure; torch/CuPy cases of test_ndimage_gpu skip if those do not import),
# the CPU suites (test_cpu.py, test_ndimage.py), then scripts/py-bench.py, CuPy's user-kernel
# tests (crates/kiln-py/cupy_suite, --device gpu) and scripts/userkernel-bench.py; logs under
# $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kiln-py-out}
mkdir -p "$out"
site=/tmp/kiln-py-site
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/wheels/kiln-*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c "import kiln, json; print(json.dumps(kiln.doctor(), indent=1))" | tee "$out/py-doctor.txt"
: > "$out/py-skips.log"
(cd crates/kiln-py && KILN_REQUIRE_GPU=1 KILN_SKIP_LOG="$out/py-skips.log" python3 -m pytest -q -ra -p no:cacheprovider tests/test_gpu.py tests/test_ndimage_gpu.py tests/test_ndimage_interp_gpu.py tests/test_ndimage_distance_gpu.py tests/test_userkernel_gpu.py tests/test_raw_gpu.py tests/test_examples.py) 2>&1 | tee "$out/py-gpu-tests.txt"
gpu_rc=${PIPESTATUS[0]}
# a skip under KILN_REQUIRE_GPU=1 is a test that did not run: it fails the GPU step
bash scripts/count-skips.sh "$out/py-skips.log" | tee -a "$out/py-gpu-tests.txt" || gpu_rc=1
(cd crates/kiln-py && python3 -m pytest -q -p no:cacheprovider tests/test_cpu.py tests/test_ndimage.py) 2>&1 | tail -3 | tee "$out/py-cpu-tests.txt"
cpu_rc=${PIPESTATUS[0]}
python3 scripts/py-bench.py "$out/py-bench.json" 2>&1 | tee "$out/py-bench.txt"
bench_rc=${PIPESTATUS[0]}
# CuPy's own tests of the user-kernel classes, on CuPy arrays with kiln's classes patched in
python3 crates/kiln-py/cupy_suite/run.py --device gpu --json "$out/cupy-suite.json" 2>&1 | tail -40 | tee "$out/cupy-suite.txt"
cupy_rc=${PIPESTATUS[0]}
# users' kernels against CuPy's: ElementwiseKernel at 2^28, RawKernel call overhead, first call
python3 scripts/userkernel-bench.py "$out/userkernel-bench.json" 2>&1 | tail -12 | tee "$out/userkernel-bench.txt"
uk_rc=${PIPESTATUS[0]}
if [ -x .device/bin/kiln ]; then
  # the Rust calls the bench rows compare with (imaging cross4 16384^2, finance European)
  .device/bin/kiln bench --suite imaging --sizes full 2>&1 | grep -i "cross4\|stencil5" | tee "$out/rust-bench.txt"
  .device/bin/kiln bench --suite finance --sizes full 2>&1 | grep -i "european" | tee -a "$out/rust-bench.txt"
fi
echo "py-gpu-check: gpu tests rc=$gpu_rc cpu tests rc=$cpu_rc bench rc=$bench_rc cupy suite rc=$cupy_rc user-kernel bench rc=$uk_rc"
[ "$gpu_rc" = 0 ] && [ "$cpu_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$cupy_rc" = 0 ] && [ "$uk_rc" = 0 ]
