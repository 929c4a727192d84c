#!/usr/bin/env python3
"""Heston calibration, kiln against QuantLib (the peer issue 32 names): the same surface, the
same start, both fits timed in one run, printing times, vol RMSEs, parameters and the ratio.

    python3 -m venv /tmp/ql && /tmp/ql/bin/pip install QuantLib numpy maturin
    /tmp/ql/bin/maturin build --release -m crates/kiln-py/Cargo.toml -i /tmp/ql/bin/python -o /tmp/w
    /tmp/ql/bin/pip install /tmp/w/kiln-*.whl
    /tmp/ql/bin/python scripts/heston-calib-vs-quantlib.py [--repeats N] [--json]

Time an optimised kiln: a `--profile dev` wheel runs kiln-core unoptimised (dozens of times
slower); `--release`, or `--profile dev --config profile.dev.package.kiln-core.opt-level=3`
where the dev profile's dependencies are built already.

Surfaces:
- dax: the DAX implied vols of 5 July 2002 (13 strikes x 8 maturities, spot 4468.17; A. Sepp
  2003) exactly as QuantLib's test-suite/hestonmodel.cpp testDAXCalibration builds them: a
  ZeroCurve, maturities of whole weeks on the TARGET calendar, out-of-the-money options
  (HestonModelHelper's choice), the implied-vol error, AnalyticHestonEngine with 64
  Gauss-Laguerre nodes, LevenbergMarquardt(1e-8, 1e-8, 1e-8) and EndCriteria(400, 40, 1e-8,
  1e-8, 1e-8); published sum of squared vol errors 177.2 (vol points squared).
- synthetic: 200 quotes (8 maturities from 13 weeks to 4 years x 25 strikes from 70 to 130,
  spot 100, flat rate 2%, dividend 1%) whose vols
  are those of QuantLib's adaptive-quadrature Heston prices at known parameters; both fits
  should recover them.

kiln gets each quote's year fraction and zero rate from QuantLib's own curve, so both price
the same contracts. Only the calibration call is timed (QuantLib: model.calibrate; kiln:
kiln.calibrate_heston, argument checks and JSON included), the median of --repeats runs,
each from the same start. QuantLib runs on one thread; kiln prices the quotes on every core
of the machine (the child run with --kiln-threads 1 times kiln on one: RAYON_NUM_THREADS is
read once, when kiln's thread pool starts, so it needs a process of its own).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import QuantLib as ql

import kiln

START = dict(kappa=1.0, theta=0.1, xi=0.5, rho=-0.5, v0=0.1)
TRUTH = dict(kappa=2.1, theta=0.05, xi=0.45, rho=-0.62, v0=0.035)


def dax_surface():
    """(today, curve, dividend curve, spot, [(period, strike, vol)]) of testDAXCalibration."""
    today = ql.Date(5, ql.July, 2002)
    dc = ql.Actual365Fixed()
    days = [13, 41, 75, 165, 256, 345, 524, 703]
    rates = [0.0357, 0.0349, 0.0341, 0.0355, 0.0359, 0.0368, 0.0386, 0.0401]
    curve = ql.ZeroCurve([today] + [today + d for d in days], [0.0357] + rates, dc)
    strikes = [3400, 3600, 3800, 4000, 4200, 4400, 4500, 4600, 4800, 5000, 5200, 5400, 5600]
    v = [0.6625, 0.4875, 0.4204, 0.3667, 0.3431, 0.3267, 0.3121, 0.3121,
         0.6007, 0.4543, 0.3967, 0.3511, 0.3279, 0.3154, 0.2984, 0.2921,
         0.5084, 0.4221, 0.3718, 0.3327, 0.3155, 0.3027, 0.2919, 0.2889,
         0.4541, 0.3869, 0.3492, 0.3149, 0.2963, 0.2926, 0.2819, 0.2800,
         0.4060, 0.3607, 0.3330, 0.2999, 0.2887, 0.2811, 0.2751, 0.2775,
         0.3726, 0.3396, 0.3108, 0.2781, 0.2788, 0.2722, 0.2661, 0.2686,
         0.3550, 0.3277, 0.3012, 0.2781, 0.2781, 0.2661, 0.2661, 0.2681,
         0.3428, 0.3209, 0.2958, 0.2740, 0.2688, 0.2627, 0.2580, 0.2620,
         0.3302, 0.3062, 0.2799, 0.2631, 0.2573, 0.2533, 0.2504, 0.2544,
         0.3343, 0.2959, 0.2705, 0.2540, 0.2504, 0.2464, 0.2448, 0.2462,
         0.3460, 0.2845, 0.2624, 0.2463, 0.2425, 0.2385, 0.2373, 0.2422,
         0.3857, 0.2860, 0.2578, 0.2399, 0.2357, 0.2327, 0.2312, 0.2351,
         0.3976, 0.2860, 0.2607, 0.2356, 0.2297, 0.2268, 0.2241, 0.2320]
    quotes = [(ql.Period((days[m] + 3) // 7, ql.Weeks), float(k), v[s * 8 + m])
              for s, k in enumerate(strikes) for m in range(8)]
    return today, ql.TARGET(), curve, ql.FlatForward(today, 0.0, dc), 4468.17, quotes


def synthetic_surface():
    """200 vols of QuantLib's Heston prices at TRUTH (adaptive Gauss-Lobatto, 1e-12)."""
    today = ql.Date(7, ql.January, 2026)
    dc = ql.Actual365Fixed()
    curve, div = ql.FlatForward(today, 0.02, dc), ql.FlatForward(today, 0.01, dc)
    spot = 100.0
    ql.Settings.instance().evaluationDate = today
    model = heston_model(curve, div, spot, TRUTH)
    engine = ql.AnalyticHestonEngine(model, 1e-12, 100000)
    quotes = []
    for w in (13, 26, 39, 52, 78, 104, 156, 208):
        for j in range(25):
            k = 70.0 + 60.0 * j / 24
            date = ql.NullCalendar().advance(today, ql.Period(w, ql.Weeks))
            t = dc.yearFraction(today, date)
            fwd = spot * div.discount(t) / curve.discount(t)
            kind = ql.Option.Call if k >= fwd else ql.Option.Put
            opt = ql.VanillaOption(ql.PlainVanillaPayoff(kind, k), ql.EuropeanExercise(date))
            opt.setPricingEngine(engine)
            price = opt.NPV()
            vol = kiln.implied_vol(price, spot, k, t, curve.zeroRate(t, ql.Continuous).rate(),
                                   div.zeroRate(t, ql.Continuous).rate(),
                                   "call" if kind == ql.Option.Call else "put")
            quotes.append((ql.Period(w, ql.Weeks), k, float(vol)))
    return today, ql.NullCalendar(), curve, div, spot, quotes


SURFACES = {"dax": dax_surface, "synthetic": synthetic_surface}


def heston_model(curve, div, spot, p):
    proc = ql.HestonProcess(ql.YieldTermStructureHandle(curve), ql.YieldTermStructureHandle(div),
                            ql.QuoteHandle(ql.SimpleQuote(spot)), p["v0"], p["kappa"], p["theta"],
                            p["xi"], p["rho"])
    return ql.HestonModel(proc)


def params_of(model):
    theta, kappa, xi, rho, v0 = list(model.params())
    return dict(kappa=kappa, theta=theta, xi=xi, rho=rho, v0=v0)


def quantlib_fit(surface):
    """QuantLib's calibration from START: (seconds, params, RMSE in vol points)."""
    today, cal, curve, div, spot, quotes = surface
    ql.Settings.instance().evaluationDate = today
    model = heston_model(curve, div, spot, START)
    engine = ql.AnalyticHestonEngine(model, 64)
    helpers = []
    for period, k, vol in quotes:
        h = ql.HestonModelHelper(period, cal, spot, k, ql.QuoteHandle(ql.SimpleQuote(vol)),
                                 ql.YieldTermStructureHandle(curve), ql.YieldTermStructureHandle(div),
                                 ql.BlackCalibrationHelper.ImpliedVolError)
        h.setPricingEngine(engine)
        helpers.append(h)
    lm = ql.LevenbergMarquardt(1e-8, 1e-8, 1e-8)
    t0 = time.perf_counter()
    model.calibrate(helpers, lm, ql.EndCriteria(400, 40, 1e-8, 1e-8, 1e-8))
    seconds = time.perf_counter() - t0
    sse = sum((100.0 * h.calibrationError()) ** 2 for h in helpers)
    return seconds, params_of(model), math.sqrt(sse / len(helpers))


def kiln_inputs(surface):
    """The surface as kiln's columns: the contracts QuantLib's helpers price."""
    today, cal, curve, div, spot, quotes = surface
    dc = ql.Actual365Fixed()
    cols = dict(quotes=[], strike=[], maturity=[], rate=[], dividend=[], kind=[])
    for period, k, vol in quotes:
        t = dc.yearFraction(today, cal.advance(today, period))
        r = curve.zeroRate(t, ql.Continuous).rate()
        q = div.zeroRate(t, ql.Continuous).rate()
        # HestonModelHelper's choice: a call where K e^{-rT} >= S e^{-qT}, else a put
        call = k * curve.discount(t) >= spot * div.discount(t)
        for name, x in (("quotes", vol), ("strike", k), ("maturity", t), ("rate", r),
                        ("dividend", q), ("kind", "call" if call else "put")):
            cols[name].append(x)
    return spot, cols


def kiln_fit(surface):
    spot, c = kiln_inputs(surface)
    t0 = time.perf_counter()
    fit = kiln.calibrate_heston(c["quotes"], spot, c["strike"], c["maturity"], c["rate"],
                                c["dividend"], c["kind"], quoted="vol", target="vol", start=START)
    seconds = time.perf_counter() - t0
    return seconds, fit["params"], fit["rmse_vol_points"], fit["iterations"], fit["feller"]


def median_run(f, surface, repeats):
    runs = [f(surface) for _ in range(repeats)]
    return statistics.median(r[0] for r in runs), runs[-1]


def rel_error(p):
    return max(abs(p[k] - TRUTH[k]) / abs(TRUTH[k]) for k in TRUTH)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--surfaces", default="dax,synthetic")
    ap.add_argument("--json", action="store_true", help="one JSON object a surface")
    ap.add_argument("--kiln-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    for name in args.surfaces.split(","):
        surface = SURFACES[name]()
        if args.kiln_only:
            sec, _ = median_run(kiln_fit, surface, args.repeats)
            print(json.dumps(dict(surface=name, seconds=sec)))
            continue
        kl_s, (_, kl_p, kl_rmse, kl_it, kl_feller) = median_run(kiln_fit, surface, args.repeats)
        ql_s, (_, ql_p, ql_rmse) = median_run(quantlib_fit, surface, args.repeats)
        child = subprocess.run([sys.executable, __file__, "--kiln-only", "--surfaces", name,
                                "--repeats", str(args.repeats)],
                               env=dict(os.environ, RAYON_NUM_THREADS="1"),
                               capture_output=True, text=True, check=True)
        kl1_s = json.loads(child.stdout.strip().splitlines()[-1])["seconds"]
        row = dict(surface=name, quotes=len(surface[5]), cores=os.cpu_count(),
                   repeats=args.repeats, start=START,
                   quantlib=dict(version=ql.__version__, seconds=ql_s, rmse_vol_points=ql_rmse,
                                 params=ql_p),
                   kiln=dict(seconds=kl_s, seconds_one_thread=kl1_s, rmse_vol_points=kl_rmse,
                             iterations=kl_it, feller=kl_feller, params=kl_p),
                   speedup=ql_s / kl_s, speedup_one_thread=ql_s / kl1_s)
        if name == "synthetic":
            row["quantlib"]["max_rel_error_vs_truth"] = rel_error(ql_p)
            row["kiln"]["max_rel_error_vs_truth"] = rel_error(kl_p)
        if args.json:
            print(json.dumps(row), flush=True)
            continue
        print(f"== {name}: {row['quotes']} quotes, start {START}, median of {args.repeats}, "
              f"{row['cores']} cores")
        print(f"{'':10} {'seconds':>10} {'RMSE vol pt':>12}  kappa, theta, xi, rho, v0")
        for who, s, rmse, p in (("QuantLib", ql_s, ql_rmse, ql_p), ("kiln", kl_s, kl_rmse, kl_p)):
            ps = ", ".join(f"{p[k]:.6g}" for k in ("kappa", "theta", "xi", "rho", "v0"))
            print(f"{who:10} {s:10.4f} {rmse:12.4f}  {ps}")
        print(f"kiln on one thread: {kl1_s:.4f} s")
        print(f"QuantLib / kiln: {row['speedup']:.1f}x (all cores), "
              f"{row['speedup_one_thread']:.1f}x (one thread)")
        if name == "synthetic":
            print(f"largest relative parameter error against the truth: QuantLib "
                  f"{row['quantlib']['max_rel_error_vs_truth']:.2e}, kiln "
                  f"{row['kiln']['max_rel_error_vs_truth']:.2e}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
