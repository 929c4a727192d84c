#!/usr/bin/env bash
# Rank filters and morphology on the GPU machine, in one run.
#
# Here (the build machine):  bash scripts/rank-gpu-check.sh --build
#   builds the release test executables `rank` and `bench_rank` into .device/rank/ (ignored
#   by git; carry it: run(carry=[".device"], ...)).
# There (the GPU machine, repository root):  bash scripts/rank-gpu-check.sh
#   1. the rank tests with KILN_REQUIRE_GPU=1 (scipy fixtures on the GPU, GPU == CPU on
#      random inputs for every algorithm, mode and dtype);
#   2. bench_rank: median 3x3 / 5x5 on 1080p u8, median 51 on 5120^2 u8, grey erosion and
#      dilation 15x15 on 4096^2 u8 (CUDA events, warm-up, medians; each result checked
#      against the CPU first);
#   3. the peers on the same inputs (scripts/rank_peers.py: cupyx.scipy.ndimage, OpenCV's
#      medianBlur on all cores), each peer's output checked against kiln's;
#   and prints a table last. Logs go to $OUT (or ./gpu-out).
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--build" ]; then
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
  mkdir -p .device/rank
  cargo test --release -p kiln --features gpu-tests --test rank --test bench_rank --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("rank", "bench_rank"):
        shutil.copy(m["executable"], ".device/rank/" + m["target"]["name"])
        print("copied", m["target"]["name"])
'
  strip .device/rank/rank .device/rank/bench_rank 2>/dev/null
  ls -la .device/rank
  exit 0
fi

out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
export KILN_REQUIRE_GPU=1 KILN_SKIP_LOG="$out/skips.log"; : > "$KILN_SKIP_LOG"
export KILN_CACHE_DIR; KILN_CACHE_DIR="${KILN_CACHE_DIR:-$(mktemp -d)}"
R=.device/rank
summary=()

# the fixtures are read from the source tree (CARGO_MANIFEST_DIR is baked in at build time)
export KILN_RANK_FIXTURES="$PWD/crates/kiln/tests/fixtures/rank"
if "$R/rank" --test-threads=2 > "$out/rank-tests.log" 2>&1; then summary+=("rank tests: ok"); else
  summary+=("rank tests: FAILED (rank-tests.log)"); fi
summary+=("$(grep -E '^test result' "$out/rank-tests.log" | head -1)")
summary+=("GPU test $(bash scripts/count-skips.sh "$KILN_SKIP_LOG" | head -n 1) (must be 0)")

bd="$(mktemp -d)"
KILN_RANK_BENCH_DIR="$bd" "$R/bench_rank" --ignored --nocapture --test-threads=1 > "$out/rank-bench.log" 2>&1
summary+=("bench_rank rc=$?")
python3 scripts/rank_peers.py "$bd" "$out/rank-bench.log" > "$out/rank-peers.txt" 2>&1
summary+=("peers rc=$?")
rm -rf "$bd"

grep -v '^test .* ok$' "$out/rank-tests.log" | grep -E 'FAILED|panicked|differ|SKIP' | head -20
echo "==== kiln ===="; grep -vE '^(BENCH|running|test |$)' "$out/rank-bench.log" | head -20
echo "==== peers (peer/kiln > 1: kiln faster) ===="; cat "$out/rank-peers.txt"
echo "==== summary ===="; printf '%s\n' "${summary[@]}"
