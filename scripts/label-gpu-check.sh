#!/usr/bin/env bash
# label-gpu-check.sh: scipy.ndimage.label on the GPU, bits and speed, with and without the
# run-overlap skip (the default; KILN_LABEL_SKIP=0 turns it off, 1 keeps it on).
#
# Here (build machine):
#   cargo test --release -p kiln --features gpu-tests --test label_gpu --no-run
#     (copy the test executable to .device/tests/label_gpu)
#   bash scripts/py-device-wheel.sh         (the release wheel into .device/wheels/)
# On the GPU machine (device run, carry [".device"]):
#   bash scripts/label-gpu-check.sh
# Runs the bitwise test (every shape, density and connectivity against kiln-core's labels)
# and the Python label tests in both modes, then `peer_bench.py --only label` (kiln against
# cupyx on the same masks, labels checked against scipy) and ncu's time per kernel, in both
# modes. Logs under $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/kiln-label-out}
mkdir -p "$out"
exec > >(tee -a "$out/label-gpu-check.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
site=/tmp/kiln-py-site
rm -rf "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/wheels/kiln-*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
cat > /tmp/kiln-label-ncu.py <<'PY'
import cupy as cp, numpy as np, scipy.ndimage as snd, kiln.ndimage as knd
rng = np.random.default_rng(11)
for shape, d in (((4096, 4096), 0.5), ((256,) * 3, 0.3)):
    h = rng.random(shape) < d
    x = cp.asarray(h)
    knd.label(x, snd.generate_binary_structure(len(shape), 1))
    cp.cuda.Device().synchronize()
PY
rc=0
for skip in 0 1; do
  echo "== KILN_LABEL_SKIP=$skip"
  export KILN_LABEL_SKIP=$skip
  KILN_REQUIRE_GPU=1 timeout 120 .device/tests/label_gpu || rc=1
  (cd crates/kiln-py && KILN_REQUIRE_GPU=1 timeout 120 python3 -m pytest -q -p no:cacheprovider \
     tests/test_ndimage_gpu.py -k label) || rc=1
  timeout 120 python3 scripts/peer_bench.py --only label --json "$out/label-skip$skip.json" || rc=1
  /usr/local/cuda/bin/ncu --clock-control none --target-processes all -k regex:label_ \
    --metrics gpu__time_duration.sum python3 /tmp/kiln-label-ncu.py > "$out/ncu-skip$skip.txt" 2>&1
  grep -E "^  label_|gpu__time_duration" "$out/ncu-skip$skip.txt" | sed -E "s/\(.*//; s/ +/ /g" | paste -d" " - -
done
echo "label-gpu-check: rc=$rc"
exit $rc
