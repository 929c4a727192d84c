#!/usr/bin/env bash
# pending-gpu-check.sh: one device call for the GPU work not yet run on a GPU: the EDT
# device path (edt-gpu-check.sh), the exact (scipy-arithmetic) linear filters, and the
# implied-volatility solver grouped by way (grouped against one pass, both rates, the
# outlined-libm variant, ncu of the lower-map solve).
# Here (build machine):
#   TESTS="kiln--edt_gpu kiln--ndimage_exact_gpu kiln--ndimage_fixtures kiln--imaging_gpu \
#     kiln--ndimage_bench kiln-cli--ndimage kiln--implied_vol_gpu" bash scripts/device-bundle.sh
#   bash scripts/py-device-wheel.sh
# On the GPU machine (device run, carry [".device"]): OUT=$OUT bash scripts/pending-gpu-check.sh
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p "$O"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
echo "######## 1. edt"
OUT=$O/edt timeout 330 bash scripts/edt-gpu-check.sh 2>&1 | grep -vE "^test .* ok$" | tail -45
echo "######## 2. tests"
OUT=$O/gpu TESTS="kiln--ndimage_exact_gpu kiln--ndimage_fixtures kiln--imaging_gpu kiln-cli--ndimage kiln--implied_vol_gpu" timeout 200 bash scripts/gpu-check.sh --demo-size quick 2>&1 | tail -14
echo "######## 3. gaussian 512^3 fast vs exact"
KILN_REQUIRE_GPU=1 timeout 120 .device/tests/kiln--ndimage_bench --ignored --nocapture --test-threads=1 gaussian3d 2>&1 | grep -E "BENCH|test result|panicked|differ"
echo "######## 4. implied vol"
KILN_REQUIRE_GPU=1 timeout 120 .device/tests/kiln--implied_vol_gpu --nocapture --test-threads=1 2>&1 | grep -E "quotes/s|bit for bit|test result|panicked|rate"
KILN_NVRTC_EXTRA=-DKILN_IV_OUTLINE_LIBM KILN_REQUIRE_GPU=1 timeout 120 .device/tests/kiln--implied_vol_gpu gpu_book_rate --nocapture --test-threads=1 2>&1 | grep -E "quotes/s|test result|panicked"
echo "######## 5. python ndimage gpu"
export PYTHONPATH=/tmp/kiln-py-site
(cd crates/kiln-py && KILN_REQUIRE_GPU=1 timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_ndimage_gpu.py tests/test_ndimage_interp_gpu.py 2>&1 | tail -6)
echo "######## 6. ncu implied vol"
/usr/local/cuda/bin/ncu --clock-control none -k regex:implied_vol_solve_lower --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats .device/tests/kiln--implied_vol_gpu gpu_book_rate --nocapture > "$O/ncu-iv.txt" 2>&1
grep -E "Duration|Throughput|Achieved Occupancy|Stall|Warp Cycles" "$O/ncu-iv.txt" | head -20
echo done
