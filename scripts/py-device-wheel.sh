#!/usr/bin/env bash
# Build the release abi3 wheel for the GPU machine into .device/wheels/ (git-ignored; carry
# ".device"). Needs maturin (pip install maturin).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device/wheels
rm -f .device/wheels/kiln-*.whl
maturin build --release -m crates/kiln-py/Cargo.toml -o .device/wheels --compatibility linux
ls -la .device/wheels
