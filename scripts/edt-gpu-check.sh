#!/usr/bin/env bash
# edt-gpu-check.sh: scipy.ndimage.distance_transform_edt on the GPU (kernels/distance.cu):
# bits first, then speed beside cupyx, then where the time goes.
#
# Here (build machine):
#   TESTS="kiln--edt_gpu" bash scripts/device-bundle.sh   (the test executable, .device/)
#   bash scripts/py-device-wheel.sh                        (the release wheel, .device/wheels/)
# On the GPU machine (device run, carry [".device"]):
#   bash scripts/edt-gpu-check.sh
# Runs the bitwise test (random masks of 1 to 4 axes, every sampling kind, against
# kiln-core's edt), the Python tests against scipy, the test under compute-sanitizer's
# memcheck, `edt_gpu --ignored bench_edt` (512^3 and 4096^2, each checked against the CPU
# first), `peer_bench.py --only edt` (kiln against cupyx on the same CuPy masks) and ncu's
# time and throughput per kernel on a 512^3 mask. Logs under $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kiln-edt-out}
mkdir -p "$out"
exec > >(tee -a "$out/edt-gpu-check.log") 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
[ -f .device/tests.tar.xz ] && [ ! -d .device/tests ] && python3 -c 'import tarfile; tarfile.open(".device/tests.tar.xz").extractall(".device")'
t=.device/tests/kiln--edt_gpu
site=/tmp/kiln-py-site
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/wheels/kiln-*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 KILN_GPU_PREVIEW=1
rc=0
echo "== bitwise against the CPU"
KILN_REQUIRE_GPU=1 timeout 300 "$t" --nocapture --test-threads=1 || rc=1
echo "== Python against scipy"
(cd crates/kiln-py && KILN_REQUIRE_GPU=1 timeout 300 python3 -m pytest -q -p no:cacheprovider \
   tests/test_ndimage_distance_gpu.py) || rc=1
echo "== compute-sanitizer memcheck"
KILN_REQUIRE_GPU=1 timeout 240 /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
  --error-exitcode 9 "$t" --test-threads=1 refuses > "$out/sanitizer.txt" 2>&1 || rc=1
tail -3 "$out/sanitizer.txt"
echo "== bench"
KILN_REQUIRE_GPU=1 timeout 300 "$t" --ignored --nocapture --test-threads=1 bench_edt || rc=1
timeout 300 python3 scripts/peer_bench.py --only edt --json "$out/peer-edt.json" || rc=1
cat > /tmp/kiln-edt-ncu.py <<'PY'
import cupy as cp, numpy as np, kiln.ndimage as knd
x = cp.asarray(np.random.default_rng(5).random((512,) * 3) < 0.5)
knd.distance_transform_edt(x, return_indices=True)
cp.cuda.Device().synchronize()
PY
/usr/local/cuda/bin/ncu --clock-control none --target-processes all -k regex:edt_ \
  --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,dram__bytes.sum \
  python3 /tmp/kiln-edt-ncu.py > "$out/ncu-edt.txt" 2>&1
grep -E "^  edt_|duration|throughput|sectors|bytes" "$out/ncu-edt.txt" | sed -E "s/ +/ /g"
echo "edt-gpu-check: rc=$rc"
exit $rc
