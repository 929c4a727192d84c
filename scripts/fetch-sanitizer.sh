#!/usr/bin/env bash
# Fetch compute-sanitizer (CUDA 13.0) from PyPI's nvidia-cuda-sanitizer-api wheel and repack
# it as target/sanitizer/compute-sanitizer.tar.xz (bin/ + lib/ as in the wheel: the binary
# finds its injection libraries there; ~41 MiB unpacked, ~4.5 MiB packed), for
# scripts/device-bundle.sh to carry to the GPU machine, which has no network. Prints the
# archive's path on success.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=target/sanitizer
tarball="$dest/compute-sanitizer.tar.xz"
if [ ! -f "$tarball" ]; then
  mkdir -p "$dest"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "nvidia-cuda-sanitizer-api==13.0.*" >&2
  (cd "$tmp" && python3 -m zipfile -e nvidia_cuda_sanitizer_api-*.whl x)
  root="$tmp/x/nvidia/cu13"
  chmod +x "$root/bin/compute-sanitizer"
  "$root/bin/compute-sanitizer" --version >&2
  cp "$tmp/x/"nvidia_cuda_sanitizer_api-*.dist-info/licenses/License.txt "$root/LICENSE.txt" 2>/dev/null || true
  tar -C "$root" -cf - bin lib $( [ -f "$root/LICENSE.txt" ] && echo LICENSE.txt ) | xz -9 -T2 > "$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
fi
echo "$PWD/$tarball"
