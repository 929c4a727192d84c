#!/usr/bin/env bash
# CI's Python step: a virtualenv with maturin, pytest, numpy and scipy from PyPI; the kiln
# wheel built with maturin (profile `dev`: the workspace's dependencies are built optimised
# there and shared with `cargo test`, so only pyo3, dlpark and kiln-py compile here); pip
# install; pytest; CuPy's user-kernel tests on the CPU path. Exit 5 from pytest (no tests
# collected) fails the step.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${KILN_PY_VENV:-${CARGO_TARGET_DIR:-target}/py-venv}
# absolute: pytest runs from crates/kiln-py
case "$venv" in /*) ;; *) venv="$PWD/$venv" ;; esac
py=${PYTHON:-python3}
start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "maturin>=1.7,<2" pytest numpy scipy array-api-strict
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/maturin" build --profile dev -m crates/kiln-py/Cargo.toml -i "$venv/bin/python" -o "$wheels" -q
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$wheels"/kiln-*.whl
set +e
(cd crates/kiln-py && "$venv/bin/python" -m pytest -q -ra tests)
rc=$?
set -e
# CuPy's own tests of ElementwiseKernel and ReductionKernel, on kiln's CPU path with NumPy
# arrays (crates/kiln-py/cupy_suite/README.md): every counted case passes or is listed with
# its reason; the GPU run of all three files is in scripts/py-gpu-check.sh.
cupy_rc=0
"$venv/bin/python" crates/kiln-py/cupy_suite/run.py --device cpu --min-pass 0 || cupy_rc=$?
echo "== python step took $(( $(date +%s) - start )) s (pytest exit $rc, CuPy suite exit $cupy_rc)"
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
[ "$rc" -eq 0 ] && exit "$cupy_rc"
exit "$rc"
