#!/usr/bin/env bash
# scipy-suite-gpu.sh: scipy's own ndimage tests on CuPy arrays, on the GPU machine. scipy
# runs its array-API cases on CuPy when SCIPY_ARRAY_API='["cupy"]' (ids ending in [cupy]).
# Two modes (scripts/scipy-suite.sh's): the baseline, scipy itself (which hands CuPy arrays
# to cupyx.scipy.ndimage), and kiln.ndimage in scipy.ndimage's place. Output: each mode's
# summary; for the CuPy cases, how many use a kiln function and pass with scipy+cupyx, how
# many of those pass with kiln, and the commonest failures.
#
# Here (build machine; the GPU machine has no network):
#   bash scripts/py-device-wheel.sh                    (the release wheel into .device/wheels/)
#   python3 -m pip install --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_17_x86_64 --target .device/deps \
#     hypothesis sortedcontainers attrs pytest-timeout  (the GPU machine's Python; hypothesis
#                                                        has a native part)
# On the GPU machine (device run, carry [".device"]):
#   bash scripts/scipy-suite-gpu.sh [-k cupy]          (SUITE_S: a time limit, default 900 s;
#                                                        PARALLEL=1 runs both modes at once)
set -u
cd "$(dirname "$0")/.."
T=/tmp/scipy-suite-gpu
rm -rf "$T"; mkdir -p "$T/deps"; cp -r .device/deps/. "$T/deps/"
site=/tmp/kiln-py-site
if [ ! -d "$site/kiln" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .device/wheels/kiln-*.whl || exit 1
fi
export SCIPY_ARRAY_API='["cupy"]' PY=python3 T PYTHONPATH="$site"
timeout "${SUITE_S:-900}" bash scripts/scipy-suite.sh "$@" 2>&1 | tail -40
python3 - <<'PY'
import json
from collections import Counter
base = json.load(open("/tmp/scipy-suite-gpu/results_scipy.json"))["results"]
kiln = json.load(open("/tmp/scipy-suite-gpu/results_kiln.json"))["results"]
ids = [i for i in base if "cupy" in i and base[i].get("outcome") == "passed" and base[i].get("calls")]
ok = [i for i in ids if kiln.get(i, {}).get("outcome") == "passed"]
print(f"CuPy cases using kiln functions, passing with scipy+cupyx: {len(ids)}; with kiln: {len(ok)}")
bad = Counter(i.split("::")[0] + " " + (kiln.get(i, {}).get("msg") or "")[:100].replace("\n", " ")
              for i in ids if i not in ok)
for m, c in bad.most_common(25):
    print(c, m)
PY
