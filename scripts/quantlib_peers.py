#!/usr/bin/env python3
"""QuantLib's CPU times for the finance rows of docs/performance.md (issue 20): the peer the
issue names for time to accuracy. One core (QuantLib's engines are single-threaded).

    python3 -m venv /tmp/ql && /tmp/ql/bin/pip install QuantLib
    /tmp/ql/bin/python scripts/quantlib_peers.py

Rows: Heston European (Fang-Oosterlee case) by the analytic engine and by Monte Carlo
(MCEuropeanHestonEngine, 256 steps a year, pseudo-random) at a fixed path count, with the
path rate and the time that rate gives to a standard error of 1e-4 x price (scaled by
(se/target)^2, as the Numba peer is); the Black-Scholes European (S=K=100, r=0.05, sigma=0.2,
T=1, 256 steps) the same way; the American put of Longstaff & Schwartz (S=36, K=40, r=0.06,
sigma=0.2, T=1) by MCAmericanEngine (50 steps, 2^16 paths, polynomial order 2) and by a
10,000-step CRR tree. Prints one JSON object a row.
"""
import json
import time

import QuantLib as ql

today = ql.Date(4, 12, 2026)
ql.Settings.instance().evaluationDate = today
dc = ql.Actual365Fixed()
cal = ql.NullCalendar()
mat = today + 365


def flat(r):
    return ql.YieldTermStructureHandle(ql.FlatForward(today, r, dc))


def timed(f):
    t = time.perf_counter()
    v = f()
    return v, time.perf_counter() - t


def row(**kw):
    print(json.dumps(kw), flush=True)


# Heston, Fang & Oosterlee
spot = ql.QuoteHandle(ql.SimpleQuote(100.0))
proc = ql.HestonProcess(flat(0.0), flat(0.0), spot, 0.0175, 1.5768, 0.0398, 0.5751, -0.5711)
model = ql.HestonModel(proc)
opt = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Call, 100.0), ql.EuropeanExercise(mat))
opt.setPricingEngine(ql.AnalyticHestonEngine(model))
p, t = timed(opt.NPV)
row(peer="quantlib", what="heston european analytic", price=p, seconds=t)
for paths in (4096, 16384):
    eng = ql.MCEuropeanHestonEngine(proc, "pseudorandom", timeSteps=256, requiredSamples=paths, seed=42)
    opt.setPricingEngine(eng)
    p, t = timed(opt.NPV)
    se = opt.errorEstimate()
    target = 1e-4 * p
    row(peer="quantlib", what="heston european mc (256 steps)", paths=paths, price=p, std_error=se,
        seconds=t, paths_per_s=paths / t, path_steps_per_s=paths * 256 / t,
        seconds_to_se_1e4rel=t * (se / target) ** 2)

# Black-Scholes European, 256 steps
bsp = ql.BlackScholesMertonProcess(ql.QuoteHandle(ql.SimpleQuote(100.0)), flat(0.0), flat(0.05),
                                   ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, cal, 0.2, dc)))
eu = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Call, 100.0), ql.EuropeanExercise(mat))
eu.setPricingEngine(ql.AnalyticEuropeanEngine(bsp))
exact = eu.NPV()
for paths in (16384,):
    eu.setPricingEngine(ql.MCEuropeanEngine(bsp, "pseudorandom", timeSteps=256, requiredSamples=paths, seed=42))
    p, t = timed(eu.NPV)
    se = eu.errorEstimate()
    row(peer="quantlib", what="bs european mc (256 steps)", paths=paths, price=p, exact=exact, std_error=se,
        seconds=t, path_steps_per_s=paths * 256 / t, seconds_to_se_1e4rel=t * (se / (1e-4 * exact)) ** 2)

# American put, Longstaff & Schwartz
ap = ql.BlackScholesMertonProcess(ql.QuoteHandle(ql.SimpleQuote(36.0)), flat(0.0), flat(0.06),
                                  ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, cal, 0.2, dc)))
am = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Put, 40.0), ql.AmericanExercise(today, mat))
am.setPricingEngine(ql.BinomialVanillaEngine(ap, "crr", 10000))
p, t = timed(am.NPV)
row(peer="quantlib", what="american put crr tree 10000 steps (continuous exercise)", price=p, seconds=t)
am.setPricingEngine(ql.MCAmericanEngine(ap, "pseudorandom", timeSteps=50, polynomOrder=2,
                                        polynomType=ql.LsmBasisSystem.Monomial, requiredSamples=65536, seed=42))
p, t = timed(am.NPV)
row(peer="quantlib", what="american put lsm 2^16 paths x 50 steps", price=p, std_error=am.errorEstimate(),
    seconds=t, seconds_scaled_to_2p20_paths=t * 16)
