#!/usr/bin/env bash
# Implied volatility on a GPU machine: the GPU test executable (10^6 quotes against the CPU
# solver, rates for a book in device memory and host to host), then what a user sees:
# `kiln implied-vol` on a 10^6-quote CSV with --device cpu and --device cuda, whole-process
# wall time, and the two output files compared.
# Needs .device/bin/kiln (release) and the test executable at $IV (default
# .device/t/implied_vol_gpu: `cargo test --release --features gpu-tests -p kiln --test
# implied_vol_gpu --no-run`, stripped); python3 with numpy and scipy there.
set -u
cd "$(dirname "$0")/.."
K=${KILN_BIN:-$PWD/.device/bin/kiln}
IV=${IV:-.device/t/implied_vol_gpu}
out=${OUT:-/tmp/iv-out}; mkdir -p "$out"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
rc=0
if [ -x "$IV" ]; then
  KILN_REQUIRE_GPU=1 "$IV" --nocapture --test-threads=1 2>&1 | tee "$out/implied-vol-gpu-test.txt" | grep -E "^test |result|quotes/s|rate"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
d=$(mktemp -d)
python3 - "$d/quotes.csv" <<'PY'
import sys
import numpy as np
from scipy.special import ndtr
n = 1_000_000
g = np.random.default_rng(32)
s = g.uniform(50, 150, n); k = s * np.exp(g.uniform(-1, 1, n)); t = g.uniform(0.02, 3, n)
r = g.uniform(-0.01, 0.06, n); q = g.uniform(0, 0.04, n); v = g.uniform(0.05, 1.0, n)
call = g.random(n) < 0.5
f = s * np.exp((r - q) * t); sd = v * np.sqrt(t)
d1 = np.log(f / k) / sd + sd / 2; d2 = d1 - sd
c = np.exp(-r * t) * (f * ndtr(d1) - k * ndtr(d2)); p = np.exp(-r * t) * (k * ndtr(-d2) - f * ndtr(-d1))
price = np.where(call, c, p)
with open(sys.argv[1], "w") as fh:
    fh.write("id,type,price,spot,strike,rate,dividend,maturity\n")
    for i in range(n):
        # (float(): NumPy 2's repr of its scalars is `np.float64(...)`)
        fh.write(f"q{i},{'call' if call[i] else 'put'},{float(price[i])!r},{float(s[i])!r},"
                 f"{float(k[i])!r},{float(r[i])!r},{float(q[i])!r},{float(t[i])!r}\n")
PY
for dev in cpu cuda cuda; do
  t0=$(date +%s.%N)
  "$K" --device "$dev" implied-vol --input "$d/quotes.csv" --output "$d/vols-$dev.csv" --skip-invalid --json > "$d/$dev.json" 2> "$d/$dev.err"
  r=$?; t1=$(date +%s.%N)
  echo "kiln --device $dev implied-vol, 10^6 quotes: rc=$r, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') s whole process" | tee -a "$out/implied-vol-cli.txt"
  [ $r = 0 ] || { rc=1; head -5 "$d/$dev.err"; }
done
python3 - "$d/vols-cpu.csv" "$d/vols-cuda.csv" <<'PY' | tee -a "$out/implied-vol-cli.txt"
import csv, sys
a = list(csv.DictReader(open(sys.argv[1]))); b = list(csv.DictReader(open(sys.argv[2])))
same = sum(x == y for x, y in zip(a, b))
worst = 0.0
for x, y in zip(a, b):
    if x.get("volatility") and y.get("volatility"):
        worst = max(worst, abs(float(x["volatility"]) - float(y["volatility"])) / float(x["volatility"]))
print(f"rows {len(a)} / {len(b)}, identical {same}, worst relative volatility difference {worst:.3e}")
if len(a) < 10**6 or len(a) != len(b):
    sys.exit("the outputs do not hold a row a quote")
PY
rm -rf "$d"
exit $rc
