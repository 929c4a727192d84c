#!/usr/bin/env bash
# Count the skips recorded in a skip log (KILN_SKIP_LOG: one line a skip, written by
# kiln_testkit::skip and by the Python tests' conftest), list them, and exit 1 when there
# is any. The GPU runners use it: with KILN_REQUIRE_GPU=1 a GPU test fails instead of
# skipping, so a skip left in the log is a test that did not run (libnccl absent, a peer
# library missing, ...), and the run fails.
# Usage: bash scripts/count-skips.sh LOG   (prints "skips: N", then the skipped tests)
set -u
log="${1:?usage: count-skips.sh LOG}"
n=0
[ -f "$log" ] && n=$(grep -c . "$log")
echo "skips: $n"
[ "$n" = 0 ] && exit 0
sed 's/^/  SKIPPED /' "$log"
exit 1
