#!/usr/bin/env bash
# compute-sanitizer over the GPU test executables and `kiln demo`: memcheck, racecheck,
# initcheck and synccheck. Run on the GPU machine from the repository root after
# scripts/device-bundle.sh built .device/ here and it travelled along (the bundle carries
# compute-sanitizer from PyPI's nvidia-cuda-sanitizer-api wheel, as a .tar.xz: the GPU
# machine has no network). Logs go to $OUT/sanitize (or ./gpu-out/sanitize); one summary
# line per tool is printed last. Exit status 0 only when every run is clean.
#
# Usage: bash scripts/sanitize.sh [--tools memcheck,racecheck,initcheck,synccheck]
#                                 [--only REGEX] [--skip REGEX] [--timeout SECONDS]
#                                 [--jobs N] [--test-args "ARGS"] [--split-tests REGEX]
#                                 [--no-demo]
#   --only REGEX   run only the test executables whose name matches (e.g. 'elementwise|imaging')
#   --skip REGEX   leave out the test executables whose name matches
#   --timeout S    per run (default 420); a run past it counts as failed
#   --jobs N       runs at once (default 1): the sanitizers are mostly CPU-bound, so several
#                  tools or executables can share the GPU; every run has its own log
#   --test-args A  extra arguments for every test executable (a libtest name filter, --skip X)
#   --split-tests REGEX  run each test of the executables whose name matches in a process of
#                  its own (`EXE --exact TEST`), so --jobs spreads one slow executable's tests
#                  over the machine (racecheck over finance_gpu / imaging_gpu runs past 520 s
#                  as one process, 6-330 s a test); their `::cpu` twins are left out
# Environment: COMPUTE_SANITIZER=/path/to/compute-sanitizer overrides the bundled one.
set -u
# device-bundle.sh ships the test executables gzipped
[ -f .device/tests.tar.xz ] && [ ! -d .device/tests ] && python3 -c 'import tarfile; tarfile.open(".device/tests.tar.xz").extractall(".device")'

out="${OUT:-$PWD/gpu-out}/sanitize"; mkdir -p "$out"
tools="memcheck,racecheck,initcheck,synccheck"; only=""; skip=""; per_run=420; demo=1; jobs=1; test_args=""
split=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tools) tools="$2"; shift ;;
    --only) only="$2"; shift ;;
    --skip) skip="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --test-args) test_args="$2"; shift ;;
    --split-tests) split="$2"; shift ;;
    --timeout) per_run="$2"; shift ;;
    --no-demo) demo=0 ;;
    *) echo "sanitize.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# Find compute-sanitizer: the override, the bundle, PATH, the CUDA toolkit.
cs="${COMPUTE_SANITIZER:-}"
if [ -z "$cs" ] && [ -f .device/sanitizer/compute-sanitizer.tar.xz ]; then
  dir=$(mktemp -d)
  tar -xJf .device/sanitizer/compute-sanitizer.tar.xz -C "$dir"
  # the toolkit's layout (scripts/fetch-sanitizer.sh): the tool, TreeLauncherSubreaper and
  # the injection libraries in one directory
  cs="$dir/compute-sanitizer"
fi
[ -z "$cs" ] && cs=$(command -v compute-sanitizer || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$cs" ] || ! "$cs" --version > "$out/version.txt" 2>&1; then
  echo "sanitize.sh: no usable compute-sanitizer (bundle .device/sanitizer/, PATH, /usr/local/cuda); see docs/gpu-testing.md" >&2
  cat "$out/version.txt" 2>/dev/null >&2
  exit 3
fi

B=.device/bin; T=.device/tests
# KILN_UNDER_SANITIZER: the slowest tests leave out their largest shapes (kiln::testing)
export KILN_REQUIRE_GPU=1 KILN_BIN="$PWD/$B/kiln" KILN_UNDER_SANITIZER=1
export KILN_CACHE_DIR; KILN_CACHE_DIR="$(mktemp -d)"
# Compile every module once outside the sanitizer, so the runs below load cubins from the cache.
"$B/kiln" cache warm > "$out/cache-warm.txt" 2>&1

targets=()
for t in "$T"/*; do
  name=$(basename "$t")
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then continue; fi
  if [ -n "$skip" ] && [[ "$name" =~ $skip ]]; then continue; fi
  if [ -n "$split" ] && [[ "$name" =~ $split ]]; then
    # one target a test: "EXE|TEST" (libtest --list prints "NAME: test")
    while IFS= read -r tn; do
      [[ "$tn" == *::cpu ]] || targets+=("$t|$tn")
    done < <("$t" --list 2>/dev/null | sed -n 's/: test$//p')
  else
    targets+=("$t")
  fi
done
[ "$demo" = 1 ] && targets+=("demo")

IFS=',' read -r -a tool_list <<< "$tools"

# A target's name in the log file names: kiln-demo, EXE, or EXE--TEST (':' as '_').
target_name() {
  case "$1" in
    demo) echo kiln-demo ;;
    *'|'*) local e="${1%%|*}" tn="${1#*|}"; echo "$(basename "$e")--${tn//:/_}" ;;
    *) basename "$1" ;;
  esac
}

# One run: the tool over one target; its log and exit status land in $out.
run_one() {
  local tool="$1" t="$2" name cmd
  name=$(target_name "$t")
  if [ "$t" = demo ]; then cmd=("$B/kiln" demo --device cuda --size quick --reps 3)
  # shellcheck disable=SC2206 # the extra arguments are split on purpose
  elif [[ "$t" == *'|'* ]]; then cmd=("${t%%|*}" --exact "${t#*|}" --test-threads=1 $test_args)
  # shellcheck disable=SC2206
  else cmd=("$t" --test-threads=2 $test_args); fi
  local log="$out/$tool--$name.log" t0 rc; t0=$(date +%s)
  # The tool's reports go to one file per process (%p): on stdout they would be mixed into
  # the output of the kiln processes the CLI tests start and parse.
  rm -f "$out/$tool--$name".*.san
  timeout "$per_run" "$cs" --tool "$tool" --error-exitcode 99 --print-limit 50 \
    --log-file "$out/$tool--$name.%p.san" "${cmd[@]}" > "$log" 2>&1
  rc=$?
  for f in "$out/$tool--$name".*.san; do [ -f "$f" ] && { echo "==== $(basename "$f")"; cat "$f"; } >> "$log"; done
  rm -f "$out/$tool--$name".*.san
  echo "$rc $(( $(date +%s) - t0 ))" > "$out/$tool--$name.rc"
}

t_all=$(date +%s)
for tool in "${tool_list[@]}"; do
  for t in "${targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.5; done
    run_one "$tool" "$t" &
  done
done
wait

summary=(); all_clean=1
for tool in "${tool_list[@]}"; do
  clean=0; dirty=0; failed=0; nocuda=0; errors=0; dirty_names=""; failed_names=""; secs=0
  for t in "${targets[@]}"; do
    name=$(target_name "$t")
    log="$out/$tool--$name.log"
    read -r rc took < "$out/$tool--$name.rc"
    secs=$((secs + took))
    # memcheck/initcheck/synccheck: "ERROR SUMMARY: N errors"; racecheck: "(N errors, M warnings)"
    n=$(grep -hoE 'ERROR SUMMARY: [0-9]+|\([0-9]+ errors' "$log" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
    # a CPU-only executable: no process of the run made a CUDA call (a CLI test's own
    # process makes none, the kiln processes it starts do and print a summary)
    if grep -q 'Target application terminated before first instrumented API call' "$log" \
      && ! grep -qE 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" && [ "$rc" != 99 ]; then
      nocuda=$((nocuda+1))
    elif [ "$rc" = 99 ] || [ "$n" -gt 0 ]; then
      dirty=$((dirty+1)); errors=$((errors+n)); dirty_names="$dirty_names $name"
    elif [ "$rc" != 0 ]; then
      failed=$((failed+1)); failed_names="$failed_names $name(rc=$rc)"
    else
      clean=$((clean+1))
    fi
  done
  line="$tool: $clean clean, $dirty with findings ($errors errors), $failed failed, $nocuda without CUDA calls; ${secs} s of runs"
  [ -n "$dirty_names" ] && line="$line; findings:$dirty_names"
  [ -n "$failed_names" ] && line="$line; failed:$failed_names"
  [ $((dirty+failed)) -gt 0 ] && all_clean=0
  summary+=("$line")
done
summary+=("wall: $(( $(date +%s) - t_all )) s with --jobs $jobs")

for l in "$out"/*.log; do
  if grep -qE 'ERROR SUMMARY: [1-9]|\([1-9][0-9]* errors' "$l"; then
    echo "==== $(basename "$l") (first findings)"; grep -m 12 -E '^========= (Invalid|Uninitialized|Race|Barrier|Error|    at|Program hit)' "$l"
  fi
done
echo "==== $(head -n 4 "$out/version.txt" | tail -n 1)"
echo "==== sanitize summary (logs: $out)"
printf '%s\n' "${summary[@]}"
[ "$all_clean" = 1 ]
