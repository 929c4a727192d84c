#!/usr/bin/env bash
# Build what the GPU machine runs (it has no Rust toolchain): the release `kiln` binary and
# the release test executables, built with the gpu-tests feature (so the GPU tests run
# there instead of being ignored), stripped, into .device/ (git-ignored). The peers' script
# (scripts/peer_bench.py) travels with the checkout.
# Usage: scripts/device-bundle.sh
# (TESTS="kiln--gemm kiln-monitor--alerts ..." builds only those test executables, named as
# gpu-check.sh names them, for a rerun of part of the suite: much faster than all of them.)
# Then, on the GPU machine, with .device/ carried along: `bash scripts/gpu-check.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .device && mkdir -p .device/bin .device/tests
cargo build --release -p kiln-cli
cp "${CARGO_TARGET_DIR:-target}/release/kiln" .device/bin/kiln
# The test executables of the crates that have GPU tests (or, for kiln-testkit, the skip
# counter gpu-check.sh proves first), built in release; the CPU-only crates' tests run in
# CI and would not fit the carried folder's 64 MiB. Names: <crate>--<target>[-lib].
GPU_CRATES="kiln kiln-cli kiln-cuda kiln-monitor kiln-testkit"
# Single test targets of other crates that have GPU tests (crate:target).
GPU_TARGETS="kiln-service:user_kernel_worker"
sel=(--workspace)
if [ -n "${TESTS:-}" ]; then
  # cargo takes each target flag once and applies it to every package named, so this may
  # build a few executables more than asked (gpu-check.sh's TESTS= then picks)
  sel=(--lib); declare -A seen=()
  # gpu-check.sh proves the skip counter with the testkit's own test first
  for t in kiln-testkit--kiln_testkit-lib $TESTS; do
    crate="${t%%--*}"; target="${t#*--}"
    [ -n "${seen[p$crate]:-}" ] || { sel+=(-p "$crate"); seen[p$crate]=1; }
    if [[ "$target" != *-lib ]] && [ -z "${seen[t$target]:-}" ]; then sel+=(--test "$target"); seen[t$target]=1; fi
  done
fi
cargo test --release "${sel[@]}" --features gpu-tests --no-run --message-format=json 2>/dev/null \
  | GPU_CRATES="$GPU_CRATES" GPU_TARGETS="$GPU_TARGETS" python3 -c '
import json, sys, os, shutil
keep = set(os.environ["GPU_CRATES"].split())
targets = set(os.environ["GPU_TARGETS"].split())
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        crate = os.path.basename(os.path.dirname(m["manifest_path"]))
        if crate not in keep and crate + ":" + m["target"]["name"] not in targets:
            continue
        exe = m["executable"]
        name = m["target"]["name"] + ("-lib" if "lib" in m["target"]["kind"] else "")
        shutil.copy(exe, os.path.join(".device/tests", crate + "--" + name))
'
strip .device/bin/* .device/tests/* 2>/dev/null || true
# The carried folder is limited to 64 MiB: the test executables travel as an xz tarball
# and gpu-check.sh / sanitize.sh unpack it on the GPU machine with Python's tarfile (no xz
# binary needed there). At -9 xz's 64 MiB window finds the code the executables share:
# 88 executables of 252 MB pack to 24 MB (40 MB at -6, gzip kept 0.4).
tar -C .device -cf - tests | xz -T0 -9 > .device/tests.tar.xz && rm -rf .device/tests
# The binary travels compressed too (28 MiB stripped, 7 packed): with the tests and the
# checkout it would pass the 64 MiB a call may carry. gpu-all.sh unpacks it into .device/bin.
xz -T0 -6 -c .device/bin/kiln > .device/kiln.xz
cp scripts/gpu-check.sh .device/
# compute-sanitizer for scripts/sanitize.sh (PyPI's nvidia-cuda-sanitizer-api, ~4.5 MiB packed)
# only on request: the lent GPU machines have the toolkit's own under /usr/local/cuda/bin,
# which sanitize.sh finds, and the bundle with it passes the carry budget.
if [ "${KILN_BUNDLE_SANITIZER:-0}" = 1 ]; then
  mkdir -p .device/sanitizer
  if cs=$(bash scripts/fetch-sanitizer.sh); then cp "$cs" .device/sanitizer/; else
    echo "warning: compute-sanitizer not fetched; scripts/sanitize.sh needs one on the GPU machine" >&2; fi
fi
du -sh .device
size=$(du -cm .device/kiln.xz .device/tests.tar.xz .device/gpu-check.sh | tail -n 1 | cut -f1)
if [ "$size" -ge 60 ]; then echo "bundle is ${size} MiB: over the 60 MiB budget" >&2; exit 1; fi
ls -la .device/bin; echo "$(tar -tJf .device/tests.tar.xz | grep -c -v /$) test executables in .device/tests.tar.xz"
