#!/usr/bin/env bash
# pending-gpu-check.sh: the GPU work not yet run on a GPU (kiln_cuda::preview), in two parts
# that each fit one device call (600 s), both with KILN_GPU_PREVIEW=1.
# Part a: the EDT device path (edt-gpu-check.sh) and the GPU test executables of the exact
# (scipy-arithmetic) linear filters, the imaging fixtures, the grouped implied-volatility
# solver and the American barrier Longstaff-Schwartz engine.
# Part b: the 512^3 gaussian fast against exact, the American barrier bench, the
# implied-volatility rates (grouped against one pass, the outlined-libm variant), the Python
# ndimage GPU tests, peer_bench's ndfilter and interp (kiln against cupyx), the job
# service's throughput on the host's 16 cores (scripts/service-throughput.sh) and ncu of the
# lower-map implied-volatility solve.
# Here (build machine):
#   TESTS="kiln--edt_gpu kiln--ndimage_exact_gpu kiln--ndimage_fixtures kiln--imaging_gpu \
#     kiln--ndimage_bench kiln-cli--ndimage kiln--implied_vol_gpu kiln--american_barrier_gpu \
#     kiln--american_gpu" bash scripts/device-bundle.sh
#   bash scripts/py-device-wheel.sh
# On the GPU machine (device run, carry [".device"]):
#   OUT=$OUT bash scripts/pending-gpu-check.sh a     then     OUT=$OUT bash scripts/pending-gpu-check.sh b
# (part q: the bitwise tests, the Python GPU tests and peer_bench's edt and ndfilter alone)
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p "$O"
part=${1:-a}
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
[ -f .device/tests.tar.xz ] && [ ! -d .device/tests ] && python3 -c 'import tarfile; tarfile.open(".device/tests.tar.xz").extractall(".device")'
site=/tmp/kiln-py-site
if [ ! -d "$site/kiln" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/wheels/kiln-*.whl || exit 1
fi
export PYTHONPATH="$site" PYTHONUNBUFFERED=1 KILN_GPU_PREVIEW=1
if [ "$part" = q ]; then
  # the bitwise tests and the two peer comparisons alone, for a short lease
  echo "######## tests"
  OUT=$O/gpu TESTS="kiln--edt_gpu kiln--ndimage_exact_gpu kiln--implied_vol_gpu kiln--american_barrier_gpu kiln--american_gpu kiln--imaging_gpu" \
    timeout 240 bash scripts/gpu-check.sh --demo-size quick 2>&1 | tail -14
  echo "######## python"
  (cd crates/kiln-py && KILN_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider \
    tests/test_ndimage_distance_gpu.py tests/test_ndimage_gpu.py 2>&1 | tail -6)
  echo "######## peers: edt, ndfilter"
  timeout 150 python3 scripts/peer_bench.py --only edt,ndfilter --json "$O/peer-q.json" 2>&1 | tail -24
elif [ "$part" = a ]; then
  echo "######## edt"
  OUT=$O/edt timeout 330 bash scripts/edt-gpu-check.sh 2>&1 | grep -vE "^test .* ok$" | tail -45
  echo "######## tests"
  OUT=$O/gpu TESTS="kiln--ndimage_exact_gpu kiln--ndimage_fixtures kiln--imaging_gpu kiln-cli--ndimage kiln--implied_vol_gpu kiln--american_barrier_gpu kiln--american_gpu" \
    timeout 220 bash scripts/gpu-check.sh --demo-size quick 2>&1 | tail -14
else
  echo "######## gaussian 512^3 fast vs exact"
  KILN_REQUIRE_GPU=1 timeout 100 .device/tests/kiln--ndimage_bench --ignored --nocapture --test-threads=1 gaussian3d 2>&1 | grep -E "BENCH|test result|panicked|differ"
  echo "######## american barrier bench"
  KILN_REQUIRE_GPU=1 timeout 60 .device/tests/kiln--american_barrier_gpu --ignored --nocapture bench_american_barrier 2>&1 | grep -vE "^test .* ok$" | tail -6
  echo "######## implied vol"
  KILN_REQUIRE_GPU=1 timeout 90 .device/tests/kiln--implied_vol_gpu --nocapture --test-threads=1 2>&1 | grep -E "quotes/s|bit for bit|test result|panicked|rate"
  KILN_NVRTC_EXTRA=-DKILN_IV_OUTLINE_LIBM KILN_REQUIRE_GPU=1 timeout 60 .device/tests/kiln--implied_vol_gpu gpu_book_rate --nocapture --test-threads=1 2>&1 | grep -E "quotes/s|test result|panicked"
  echo "######## python ndimage gpu"
  (cd crates/kiln-py && KILN_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_ndimage_gpu.py tests/test_ndimage_interp_gpu.py 2>&1 | tail -6)
  echo "######## peers: ndfilter, interp"
  timeout 150 python3 scripts/peer_bench.py --only ndfilter,interp --json "$O/peer-nd.json" 2>&1 | tail -22
  echo "######## service throughput on this host's cores (CPU workers, SQLite synchronous=FULL)"
  nproc
  KILN=.device/bin/kiln SECS=8 timeout 100 bash scripts/service-throughput.sh "$O/service-throughput.jsonl" 2>&1 | tail -8
  echo "######## ncu implied vol"
  timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:implied_vol_solve_lower --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats .device/tests/kiln--implied_vol_gpu gpu_book_rate --nocapture > "$O/ncu-iv.txt" 2>&1
  grep -E "Duration|Throughput|Achieved Occupancy|Stall|Warp Cycles" "$O/ncu-iv.txt" | head -20
fi
echo done
