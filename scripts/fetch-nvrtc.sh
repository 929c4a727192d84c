#!/usr/bin/env bash
# Fetch libnvrtc (CUDA 13.0) from PyPI's nvidia-cuda-nvrtc wheel into target/nvrtc, so the
# kernels can be compiled (not run) on a machine without a GPU: CI uses this to check every
# kernel module compiles for every supported arch. Prints the lib dir on success.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/nvrtc
if [ ! -f "$dest/nvidia/cu13/lib/libnvrtc.so.13" ]; then
  mkdir -p "$dest"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dest" "nvidia-cuda-nvrtc==13.0.*" >&2
  (cd "$dest" && python3 -m zipfile -e nvidia_cuda_nvrtc-*.whl . && rm -f nvidia_cuda_nvrtc-*.whl)
fi
echo "$PWD/$dest/nvidia/cu13/lib"
