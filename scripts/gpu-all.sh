#!/usr/bin/env bash
# Every GPU check in one device call, its logs packed into one file: the device tool brings
# back only a handful of files from $OUT, so the logs travel as $OUT/gpu-all.tar.gz and the
# summaries go to stdout. Runs, for what was carried:
# - .device/kiln.xz + .device/tests.tar.xz (scripts/device-bundle.sh): gpu-check.sh (every GPU
#   test executable, KILN_REQUIRE_GPU=1, skips counted), kernel-check-gpu.sh (compute-
#   sanitizer on users' kernels);
# - .device/kiln.xz (unpacked to .device/bin/kiln): `kiln kernels --json` (kernels.json: the attributes docs/kernels.md
#   renders; copy it to docs/bench/ and regenerate the page);
# - .device/wheels (scripts/py-device-wheel.sh): py-gpu-check.sh (the Python GPU tests,
#   CuPy's own user-kernel tests, the user-kernel bench against CuPy).
# The Rust bundle (about 32 MB packed) and the wheel (4 MB) fit one call's carry with the
# checkout: carry [".device/kiln.xz", ".device/tests.tar.xz", ".device/gpu-check.sh",
# ".device/wheels"] (the binary is unpacked here). Each part runs alone when only its files
# travel.
set -u
cd "$(dirname "$0")/.."
final="${OUT:-$PWD/gpu-out}"; mkdir -p "$final"
work=$(mktemp -d); export OUT="$work"
if [ -f .device/kiln.xz ] && [ ! -x .device/bin/kiln ]; then
  mkdir -p .device/bin
  python3 -c "import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], 'wb'))" \
    .device/kiln.xz .device/bin/kiln && chmod +x .device/bin/kiln
fi
if [ -f .device/tests.tar.xz ] || [ -d .device/tests ]; then
  bash scripts/gpu-check.sh > "$work/gpu-check.txt" 2>&1; echo "gpu-check rc=$?"
  sed -n '/==== summary/,$p' "$work/gpu-check.txt"
  PATH="$PATH:/usr/local/cuda/bin" bash scripts/kernel-check-gpu.sh > "$work/kernel-check.txt" 2>&1
  echo "kernel-check-gpu rc=$?"; grep -E "exit [0-9]+ \(want" "$work/kernel-check.txt"
fi
if [ -x .device/bin/kiln ]; then
  .device/bin/kiln kernels --json > "$work/kernels.json" 2> "$work/kernels.err"; echo "kiln kernels rc=$?"
fi
if [ -d .device/wheels ]; then
  bash scripts/py-gpu-check.sh > "$work/py-gpu-check.txt" 2>&1; echo "py-gpu-check rc=$?"
  tail -n 4 "$work/py-gpu-tests.txt" 2>/dev/null; tail -n 3 "$work/cupy-suite.txt" 2>/dev/null
  cat "$work/userkernel-bench.txt" 2>/dev/null
fi
tar -C "$work" -czf "$final/gpu-all.tar.gz" . && echo "logs: gpu-all.tar.gz ($(du -h "$final/gpu-all.tar.gz" | cut -f1))"
