#!/usr/bin/env bash
# The CLI's user paths, timed as a user waits for them (issue 12 item 5), with the peers in
# the same run. Run on the GPU machine from the repo root with the release binary at
# .device/bin/kiln (scripts/device-bundle.sh builds it; carry .device):
#   bash scripts/bench-cli.sh
# It makes its inputs itself (python3 with numpy and PIL): an 8192^2 f32 .npy and 1,000
# 1080p u8 gray PNG frames like peer_bench.py's user_paths ones, then prints one line per
# measurement, each starting with "BENCH":
#   - whole-process wall of `kiln filter2d --device cuda` and `--device cpu` on the .npy
#     (gaussian:2, reflect), median of 3 after one warm-up with a warm kernel cache, and
#     the part of each run after the context is up (read + filter + write from kiln's
#     --json timings: first use in a fresh process, so module loads and first allocations
#     count; bench_tensor's in-process row is the warm figure);
#   - the cupyx script (np.load -> cupyx.scipy.ndimage.gaussian_filter(sigma 2, reflect,
#     truncate 4) -> np.save) as a whole process (`python3 script.py`, imports included),
#     median of 3 after a warm-up, and in one warm process (median of 3);
#   - the batch over the frames on cuda and on cpu: frames/s and the stage report;
#   - a PIL + cupyx loop over the first 200 frames (frames/s).
# Settings (environment): KILN (binary), SIDE (8192), FRAMES (1000), LOOP_FRAMES (200),
# DEVICES ("cuda cpu"), WORK (scratch directory; removed at the end unless KEEP=1), PEERS
# (1; 0 skips the cupyx rows, for a second run that varies only kiln's environment).
# About 3 minutes on the H200 machine. Exit status: 0, or 1 if a kiln run failed.
set -u
cd "$(dirname "$0")/.."
KILN=${KILN:-.device/bin/kiln}
SIDE=${SIDE:-8192}
FRAMES=${FRAMES:-1000}
LOOP_FRAMES=${LOOP_FRAMES:-200}
DEVICES=${DEVICES:-cuda cpu}
WORK=${WORK:-$(mktemp -d /tmp/bench-cli.XXXXXX)}
KILN=$(realpath "$KILN" 2>/dev/null || echo "$KILN")
status=0

say() { echo "BENCH $*"; }
note() { echo "# $*"; }
fail() { echo "BENCH-ERROR $*"; status=1; }
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT

[ -x "$KILN" ] || { echo "no kiln binary at $KILN (build it with scripts/device-bundle.sh)" >&2; exit 2; }
python3 -c 'import numpy, PIL' 2>/dev/null || { echo "python3 needs numpy and PIL" >&2; exit 2; }
have_cupy=0
[ "${PEERS:-1}" = 1 ] && python3 -c 'import cupy, cupyx.scipy.ndimage' 2>/dev/null && have_cupy=1
mkdir -p "$WORK/frames"
export KILN_CACHE_DIR="$WORK/cache"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
note "$("$KILN" --version 2>&1 | head -1), $(nproc) cores, GPU: ${gpu:-none}, work in $WORK"

# ---- inputs -----------------------------------------------------------------------------
t=$(date +%s)
python3 - "$WORK" "$SIDE" "$FRAMES" <<'EOF' || { echo "input generation failed" >&2; exit 2; }
import sys, os
import numpy as np
from multiprocessing import Pool
work, side, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
np.save(f"{work}/big.npy", np.random.default_rng(1).random((side, side), dtype=np.float32))
yy, xx = np.mgrid[0:1080, 0:1920]
base = 128 + 60 * np.sin(xx / 40.0) * np.cos(yy / 55.0)

def frame(i):
    from PIL import Image
    rng = np.random.default_rng(1000 + i)
    f = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
    Image.fromarray(f).save(f"{work}/frames/f{i:04d}.png")

with Pool(os.cpu_count()) as p:
    p.map(frame, range(frames), chunksize=8)
EOF
note "inputs: ${SIDE}^2 f32 .npy ($(du -h "$WORK/big.npy" | cut -f1)), $FRAMES 1080p u8 PNG frames ($(du -sh "$WORK/frames" | cut -f1)) in $(( $(date +%s) - t )) s"

# Median of the numbers on stdin.
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
# Wall seconds of a command (its output to $WORK/last.out / .err).
wall() {
  local s e
  s=$(date +%s%N)
  "$@" > "$WORK/last.out" 2> "$WORK/last.err"
  local rc=$?
  e=$(date +%s%N)
  echo "$(( (e - s) / 1000 ))e-6"
  return $rc
}
json_field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {'d': d}))" "$@"; }

# ---- one file, whole process ------------------------------------------------------------
for dev in $DEVICES; do
  args=(filter2d --device "$dev" --input "$WORK/big.npy" --kernel gaussian:2 --mode reflect --output "$WORK/out_$dev.npy" --json)
  if ! wall "$KILN" "${args[@]}" > /dev/null; then
    fail "kiln filter2d --device $dev (warm-up): $(tail -2 "$WORK/last.err")"
    continue
  fi
  times=(); inproc=(); outside=()
  for _ in 1 2 3; do
    s=$(wall "$KILN" "${args[@]}") || { fail "kiln filter2d --device $dev: $(tail -2 "$WORK/last.err")"; continue 2; }
    times+=("$s")
    inproc+=("$(json_field "$WORK/last.out" "round(sum(d['timings'][k] for k in ('read_s','filter_s','write_s')), 4)")")
    # the wall outside the command's own clock: process start, argument parsing, exit
    outside+=("$(json_field "$WORK/last.out" "round($s - d['total_seconds'], 4)")")
  done
  t_med=$(printf '%s\n' "${times[@]}" | median)
  i_med=$(printf '%s\n' "${inproc[@]}" | median)
  # (runtime_parts, on cuda: the probe, the context and the wait for libnvrtc, in ms)
  tm=$(json_field "$WORK/last.out" "' '.join(f'{k}={v:.3f}' if isinstance(v, (int, float)) else k + '=' + ','.join(f'{a}:{b:.1f}ms' for a, b in v.items()) for k, v in d['timings'].items())")
  say "$(printf 'filter2d_npy_%s_whole_process %s %.3f s (median of 3: %s)' "$SIDE" "$dev" "$t_med" "$(printf '%.3f ' "${times[@]}")")"
  say "$(printf 'filter2d_npy_%s_first_use %s %.3f s (read+filter+write in a fresh process, context excluded; median of 3; last run: %s)' "$SIDE" "$dev" "$i_med" "$tm")"
  say "$(printf 'filter2d_npy_%s_outside_the_command %s %.3f s (whole-process wall minus the command'"'"'s total_seconds: start, parsing, exit; median of 3)' "$SIDE" "$dev" "$(printf '%s\n' "${outside[@]}" | median)")"
done

# ---- the cupyx script -------------------------------------------------------------------
if [ $have_cupy = 1 ]; then
  cat > "$WORK/cupyx_npy.py" <<EOF
import numpy as np
import cupy as cp
import cupyx.scipy.ndimage as cnd
a = np.load("$WORK/big.npy")
o = cnd.gaussian_filter(cp.asarray(a), 2.0, mode="reflect", truncate=4.0)
np.save("$WORK/out_cupyx.npy", cp.asnumpy(o))
EOF
  wall python3 "$WORK/cupyx_npy.py" > /dev/null || fail "cupyx script: $(tail -2 "$WORK/last.err")"
  times=()
  for _ in 1 2 3; do times+=("$(wall python3 "$WORK/cupyx_npy.py")"); done
  say "$(printf 'filter2d_npy_%s_whole_process cupyx-script %.3f s (python3 script.py, imports included; median of 3: %s)' "$SIDE" "$(printf '%s\n' "${times[@]}" | median)" "$(printf '%.3f ' "${times[@]}")")"
  python3 - "$WORK" <<'EOF'
import sys, time
import numpy as np, cupy as cp, cupyx.scipy.ndimage as cnd
w = sys.argv[1]
def run():
    a = np.load(f"{w}/big.npy")
    o = cnd.gaussian_filter(cp.asarray(a), 2.0, mode="reflect", truncate=4.0)
    np.save(f"{w}/out_cupyx.npy", cp.asnumpy(o))
run()
ts = []
for _ in range(3):
    t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
print("BENCH filter2d_npy_in_process cupyx-warm %.3f s (median of 3 in one warm process: %s)"
      % (sorted(ts)[1], " ".join("%.3f" % x for x in ts)))
EOF
  if [ -f "$WORK/out_cuda.npy" ]; then
    python3 -c "
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
print('# kiln cuda vs cupyx output: max |diff| %.3g' % float(np.abs(a - b).max()))" "$WORK/out_cuda.npy" "$WORK/out_cupyx.npy"
  fi
else
  note "cupy not importable: the cupyx rows are skipped"
fi
rm -f "$WORK"/out_*.npy

# ---- batch ------------------------------------------------------------------------------
for dev in $DEVICES; do
  rm -rf "$WORK/out"
  if ! "$KILN" filter2d --device "$dev" --input "$WORK/frames" --kernel gaussian:2 --output "$WORK/out" --json \
      > "$WORK/batch_$dev.json" 2> "$WORK/batch_$dev.err"; then
    fail "batch --device $dev: $(grep -v '^error: .*(read\|filter\|write)' "$WORK/batch_$dev.err" | tail -3)"
    continue
  fi
  python3 - "$WORK/batch_$dev.json" "$dev" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
st = ", ".join("%s %.1f s busy of %d = %.0f%%" % (k, v["busy_s"], v["threads"], 100 * v["utilisation"])
               for k, v in d["stages"].items())
print("BENCH png_frames_1080p_gaussian2_batch %s %.1f frames/s (%d/%d files in %.2f s; bound by %s; %s)"
      % (sys.argv[2], d["frames_per_s"], d["ok"], d["files"], d["seconds"], d["bound_by"], st))
EOF
  note "$(tail -1 "$WORK/batch_$dev.err")"
done

# ---- the PIL + cupyx loop ---------------------------------------------------------------
if [ $have_cupy = 1 ] && [ "$LOOP_FRAMES" -gt 0 ]; then
  python3 - "$WORK" "$LOOP_FRAMES" <<'EOF'
import sys, os, glob, time
import numpy as np, cupy as cp, cupyx.scipy.ndimage as cnd
from PIL import Image
w, n = sys.argv[1], int(sys.argv[2])
files = sorted(glob.glob(f"{w}/frames/*.png"))[:n]
os.makedirs(f"{w}/outc", exist_ok=True)
cnd.gaussian_filter(cp.zeros((1080, 1920), cp.float32), 2.0)  # kernels compiled, context up
cp.cuda.Device().synchronize()
t = time.perf_counter()
for f in files:
    a = np.asarray(Image.open(f), dtype=np.float32)
    o = cnd.gaussian_filter(cp.asarray(a), 2.0, mode="reflect", truncate=4.0)
    Image.fromarray(np.clip(np.rint(cp.asnumpy(o)), 0, 255).astype(np.uint8)).save(f.replace("frames", "outc"))
s = time.perf_counter() - t
print("BENCH png_frames_1080p_gaussian2_loop pil-cupyx %.1f frames/s (%d frames in %.2f s)" % (len(files) / s, len(files), s))
EOF
fi
exit $status
