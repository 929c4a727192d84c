#!/usr/bin/env bash
# The finance GPU check (issue 20), one run on the GPU machine: the GPU tests of the Sobol engine
# and the Philox engine (KILN_REQUIRE_GPU=1), then time to a standard error of 1e-4 x price
# for the European and the arithmetic Asian call (S=K=100, r=0.05, sigma=0.2, T=1, 256 steps)
# with Sobol + Brownian bridge vs Philox through `kiln price --target-se`, and Numba's time
# to the same accuracy from peer_bench.py's kernels (scripts/peers_finance.py).
#
# Needs (carried, built on the CPU machine): .device/bin/kiln (release), .device/t.tar.gz
# holding the release test executables finance_qmc_gpu and finance_gpu under those names.
# The Numba peer comes from scripts/peer_bench.py, which travels with the checkout. Logs under $OUT.
# Not measured here (not implemented yet): Heston QE paths/s, Longstaff-Schwartz timing.
set -u
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
B="$PWD/.device/bin/kiln"; T=.device/t
mkdir -p $T && [ -f .device/t.tar.gz ] && tar -C $T -xzf .device/t.tar.gz
export KILN_REQUIRE_GPU=1 KILN_CACHE_DIR; KILN_CACHE_DIR=$(mktemp -d)
"$B" cache warm > /dev/null 2>&1
for t in finance_qmc_gpu finance_gpu; do
  [ -x $T/$t ] || { echo "TEST $t: missing $T/$t"; continue; }
  s=$(date +%s); timeout 240 $T/$t --test-threads=2 > "$out/t-$t.log" 2>&1; rc=$?
  echo "TEST $t rc=$rc $(( $(date +%s) - s ))s $(grep -h 'test result' "$out/t-$t.log" | tail -1)"
  [ $rc != 0 ] && grep -E "panicked|FAILED|assert|left|right" "$out/t-$t.log" | head -20
done
# time to accuracy: one option a file, each generator from its own starting paths
w="$out/tta"; mkdir -p "$w"
printf 'id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\neuro,call,european,100,100,0.05,0,0.2,1,,\n' > "$w/euro.csv"
printf 'id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier\nasian,call,asian_arithmetic,100,100,0.05,0,0.2,1,256,\n' > "$w/asian.csv"
declare -A SD PRICE
for case in euro asian; do
  for rng in sobol philox; do
    if [ $rng = sobol ]; then start=16384; reps="--replicates 16"; else start=1048576; reps=""; fi
    # warm (module load), then the measured run
    "$B" price --input "$w/$case.csv" --output "$w/$case-$rng.csv" --method mc --device cuda --rng $rng \
      --paths 16384 --steps 256 > /dev/null 2>&1
    timeout 200 "$B" price --input "$w/$case.csv" --output "$w/$case-$rng.csv" --method mc --device cuda \
      --rng $rng $reps --paths $start --steps 256 --target-se 1e-4rel --json > "$w/$case-$rng.json" 2> "$w/$case-$rng.err"
    echo "TTA $case $rng rc=$? $(python3 -c "
import csv,json
s=json.load(open('$w/$case-$rng.json')); r=list(csv.DictReader(open('$w/$case-$rng.csv')))[0]
print('paths<=%s rounds=%s seconds=%.4f price=%s se=%s' % (s['max_paths_used'], s['rounds'], s['seconds'], r['price'], r['std_error']))" 2>&1)"
  done
  # the payoff's standard deviation for the plain estimator, from a fixed Philox run
  "$B" price --input "$w/$case.csv" --output "$w/$case-sd.csv" --method mc --device cuda --rng philox \
    --paths 4194304 --steps 256 > /dev/null 2>&1
  read -r p sd < <(python3 -c "
import csv; r=list(csv.DictReader(open('$w/$case-sd.csv')))[0]; print(r['price'], float(r['std_error'])*4194304**0.5)")
  PRICE[$case]=$p; SD[$case]=$sd
done
if [ -f scripts/peer_bench.py ]; then
  timeout 300 python3 scripts/peers_finance.py --peer-bench scripts/peer_bench.py \
    --euro ${PRICE[euro]} ${SD[euro]} --asian ${PRICE[asian]} ${SD[asian]} --rel 1e-4 > "$out/peers-finance.log" 2>&1
  echo "PEERS rc=$?"; tail -5 "$out/peers-finance.log"
else
  echo "PEERS skipped: scripts/peer_bench.py missing"
fi
