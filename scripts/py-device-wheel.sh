#!/usr/bin/env bash
# Build the release abi3 wheel for the GPU machine into .device/wheels/ (git-ignored; carry
# ".device"). Uses maturin from PATH, else the venv scripts/py-ci.sh made.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device/wheels
rm -f .device/wheels/kiln-*.whl
maturin=${MATURIN:-$(command -v maturin || echo "${CARGO_TARGET_DIR:-target}/py-venv/bin/maturin")}
"$maturin" build --release -m crates/kiln-py/Cargo.toml -o .device/wheels --compatibility linux --strip
ls -la .device/wheels
