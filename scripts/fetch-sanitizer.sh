#!/usr/bin/env bash
# Fetch compute-sanitizer from PyPI's nvidia-cuda-sanitizer-api wheel and repack it as
# target/sanitizer/compute-sanitizer.tar.xz, for scripts/device-bundle.sh to carry to the GPU
# machine, which has no network. Prints the archive's path on success.
#
# Which wheel: only 13.5.25 (compute-sanitizer 2026.4) ships the whole tool. The 13.0-13.4
# wheels carry bin/compute-sanitizer and the injection libraries but not the
# TreeLauncherSubreaper executable the tool execs to start its target, so every run there ends
# "Target application terminated before first instrumented API call" (strace: execve of
# .../TreeLauncherSubreaper fails with ENOENT) - the failure recorded on 2026-12-02 (b98af3c).
# The archive holds the wheel's compute-sanitizer/ directory as is (the tool, its libraries and
# x86/ in one place, docs left out), ~43 MiB unpacked, ~5 MiB packed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=13.5.25
dest=target/sanitizer
tarball="$dest/compute-sanitizer.tar.xz"
stamp="$dest/version"
if [ ! -f "$tarball" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$version" ]; then
  mkdir -p "$dest"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "nvidia-cuda-sanitizer-api==$version" >&2
  (cd "$tmp" && python3 -m zipfile -e nvidia_cuda_sanitizer_api-*.whl x)
  root="$tmp/x/nvidia/cu13/compute-sanitizer"
  [ -f "$root/TreeLauncherSubreaper" ] || { echo "fetch-sanitizer: $version wheel lacks TreeLauncherSubreaper" >&2; exit 1; }
  # zipfile -e drops the executable bits
  chmod +x "$root/compute-sanitizer" "$root"/TreeLauncher* "$root"/x86/TreeLauncher*
  "$root/compute-sanitizer" --version >&2
  rm -rf "$root/docs" "$root/include"
  cp "$tmp/x/"nvidia_cuda_sanitizer_api-*.dist-info/licenses/License.txt "$root/LICENSE.txt" 2>/dev/null || true
  tar -C "$root" -cf - . | xz -9 -T2 > "$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
  echo "$version" > "$stamp"
fi
echo "$PWD/$tarball"
