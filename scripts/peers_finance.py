#!/usr/bin/env python3
"""Numba's time to a target standard error on kiln's finance workloads (European and
arithmetic Asian call, S=K=100, r=0.05, sigma=0.2, T=1, 256 steps), from peer_bench.py's
own kernels: it measures their path rate (paths/ms on 2^24 x 256, as peer_bench.py runs
them), and scales it to the paths plain Monte Carlo needs for the target, using the payoff
standard deviation kiln's Philox run measured (the same estimator, the same variance).

  python3 scripts/peers_finance.py [--peer-bench scripts/peer_bench.py] \
      --euro PRICE SD --asian PRICE SD --rel 1e-4

Prints one JSON line per workload and a table last. QuantLib (if importable): its MC engine's
time for the European at a small path count, scaled the same way (one CPU core).
"""
import argparse
import importlib.util
import json
import time


def load(path):
    spec = importlib.util.spec_from_file_location("peer_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def quantlib_rate(steps):
    try:
        import QuantLib as ql
    except ImportError:
        return None
    today = ql.Date(1, 1, 2024)
    ql.Settings.instance().evaluationDate = today
    dc = ql.Actual360()
    proc = ql.BlackScholesMertonProcess(
        ql.QuoteHandle(ql.SimpleQuote(100.0)),
        ql.YieldTermStructureHandle(ql.FlatForward(today, 0.0, dc)),
        ql.YieldTermStructureHandle(ql.FlatForward(today, 0.05, dc)),
        ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, ql.NullCalendar(), 0.2, dc)))
    opt = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Call, 100.0), ql.EuropeanExercise(today + 360))
    n = 1 << 14
    opt.setPricingEngine(ql.MCEuropeanEngine(proc, "pseudorandom", timeSteps=steps, requiredSamples=n, seed=42))
    t = time.perf_counter()
    opt.NPV()
    return n / ((time.perf_counter() - t) * 1e3)  # paths per ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-bench", default="scripts/peer_bench.py")
    ap.add_argument("--euro", nargs=2, type=float, required=True, metavar=("PRICE", "SD"))
    ap.add_argument("--asian", nargs=2, type=float, required=True, metavar=("PRICE", "SD"))
    ap.add_argument("--rel", type=float, default=1e-4)
    a = ap.parse_args()
    pb = load(a.peer_bench)
    pb.monte_carlo(False)
    rows = []
    for wl, (price, sd) in (("mc_european", a.euro), ("mc_asian_arith", a.asian)):
        r = [x for x in pb.RESULTS if x["workload"] == wl and x["peer"] == "numba-kernel"][0]
        rate = r["paths"] / r["ms"]
        need = (sd / (a.rel * price)) ** 2
        rows.append({"workload": wl, "peer": "numba-kernel", "paths_per_ms": round(rate, 1),
                     "paths_needed": int(need), "ms_to_target": round(need / rate, 2)})
    q = quantlib_rate(256)
    if q is not None:
        need = (a.euro[1] / (a.rel * a.euro[0])) ** 2
        rows.append({"workload": "mc_european", "peer": "quantlib-cpu-1core", "paths_per_ms": round(q, 3),
                     "paths_needed": int(need), "ms_to_target": round(need / q, 1)})
    else:
        print("QuantLib not importable: skipped")
    for row in rows:
        print(json.dumps(row))
    print("%-16s %-20s %14s %14s %14s" % ("workload", "peer", "paths/ms", "paths needed", "ms to target"))
    for r in rows:
        print("%-16s %-20s %14s %14s %14s" % (r["workload"], r["peer"], r["paths_per_ms"], r["paths_needed"], r["ms_to_target"]))


if __name__ == "__main__":
    main()
