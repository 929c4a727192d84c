"""``kiln.price(..., greeks=True)``: Monte Carlo Greeks against the closed forms and against
``kiln price --method mc --greeks`` (the same bits), closed-form Greeks against the
Black-Scholes-Merton formulas written out here, and bad input as ``InvalidInputError``."""
import csv
import json
import os
import shutil
import subprocess
from math import erf, exp, log, pi, sqrt

import numpy as np
import pytest

import kiln

GREEKS = ("delta", "gamma", "vega", "theta", "rho")


def bsm_greeks(s, k, r, q, v, t, call=True):
    """Black-Scholes-Merton delta, gamma, vega, theta (-dV/dT) and rho, by hand."""
    n = lambda z: 0.5 * (1 + erf(z / sqrt(2)))
    pdf = lambda z: exp(-z * z / 2) / sqrt(2 * pi)
    d1 = (log(s / k) + (r - q + v * v / 2) * t) / (v * sqrt(t))
    d2 = d1 - v * sqrt(t)
    dq, dr = exp(-q * t), exp(-r * t)
    gamma = dq * pdf(d1) / (s * v * sqrt(t))
    vega = s * dq * pdf(d1) * sqrt(t)
    decay = -s * dq * pdf(d1) * v / (2 * sqrt(t))
    if call:
        return dict(delta=dq * n(d1), gamma=gamma, vega=vega,
                    theta=decay - r * k * dr * n(d2) + q * s * dq * n(d1), rho=k * t * dr * n(d2))
    return dict(delta=-dq * n(-d1), gamma=gamma, vega=vega,
                theta=decay + r * k * dr * n(-d2) - q * s * dq * n(-d1), rho=-k * t * dr * n(-d2))


EURO = dict(spot=100.0, strike=105.0, rate=0.03, dividend=0.01, volatility=0.25, maturity=1.0)
FO_HESTON = dict(model="heston", kappa=1.5768, theta=0.0398, xi=0.5751, rho=-0.5711, v0=0.0175)
SPREAD = dict(style="basket", strike=0.0, rate=0.1, maturity=0.1,
              assets=[dict(spot=22.0, volatility=0.2, dividend=0.06, weight=1.0),
                      dict(spot=20.0, volatility=0.25, dividend=0.04, weight=-1.0)],
              correlation=[[1.0, -0.5], [-0.5, 1.0]])
# one option of every kind; the CSV rows below are the same options
BOOK = [
    EURO,
    dict(option_type="put", style="asian_arithmetic", spot=100.0, strike=100.0, rate=0.02,
         volatility=0.3, maturity=0.5, fixings=6),
    dict(style="barrier_down_out", spot=100.0, strike=100.0, rate=0.03, dividend=0.01,
         volatility=0.25, maturity=0.75, barrier=85.0),
    dict(spot=100.0, strike=100.0, rate=0.0, maturity=1.0, **FO_HESTON),
    dict(option_type="put", style="american", spot=36.0, strike=40.0, rate=0.06, volatility=0.2,
         maturity=1.0, fixings=4),
    SPREAD,
]
BOOK_CSV = """\
id,type,style,spot,strike,rate,dividend,volatility,maturity,fixings,barrier,model,kappa,theta,xi,rho,v0,basket,average
e,call,european,100,105,0.03,0.01,0.25,1.0,,,,,,,,,,
a,put,asian_arithmetic,100,100,0.02,0,0.3,0.5,6,,,,,,,,,
b,call,barrier_down_out,100,100,0.03,0.01,0.25,0.75,,85,,,,,,,,
h,call,european,100,100,0.0,0,,1.0,,,heston,1.5768,0.0398,0.5751,-0.5711,0.0175,,
am,put,american,36,40,0.06,0,0.2,1.0,4,,,,,,,,,
sp,call,basket,,0,0.1,,,0.1,,,,,,,,,pair.csv,arithmetic
"""
PAIR_CSV = """\
asset,weight,spot,volatility,dividend,A,B
A,1,22,0.2,0.06,1,-0.5
B,-1,20,0.25,0.04,-0.5,1
"""


def test_mc_greeks_are_within_4_standard_errors_of_the_closed_form():
    puts = dict(EURO, option_type="put", strike=95.0)
    r = kiln.price([EURO, puts], "mc", greeks=True, paths=1 << 14, steps=1, seed=5)
    cf = kiln.price([EURO, puts], "analytic", greeks=True)
    for g in GREEKS:
        z = (r[g] - cf[g]) / r[f"{g}_se"]
        assert np.all(r[f"{g}_se"] > 0) and np.all(np.abs(z) <= 4.0), (g, r[g], cf[g], z)
    # the closed form is Black-Scholes-Merton's, standard error 0
    for i, (o, call) in enumerate([(EURO, True), (puts, False)]):
        want = bsm_greeks(o["spot"], o["strike"], o["rate"], o["dividend"], o["volatility"],
                          o["maturity"], call)
        for g in GREEKS:
            assert abs(cf[g][i] - want[g]) <= 1e-10 * max(1.0, abs(want[g])), (g, cf[g][i], want[g])
            assert cf[f"{g}_se"][i] == 0.0
    # the price column is the price's own run, as without greeks
    plain = kiln.price([EURO, puts], "mc", paths=1 << 14, steps=1, seed=5)
    np.testing.assert_array_equal(r["price"], plain["price"])
    np.testing.assert_array_equal(r["std_error"], plain["std_error"])


def test_mc_greeks_are_reproducible_and_every_kind_has_them():
    a = kiln.price(BOOK, "mc", greeks=True, paths=2048, steps=8, seed=7)
    b = kiln.price(BOOK, "mc", greeks=True, paths=2048, steps=8, seed=7)
    for g in GREEKS:
        np.testing.assert_array_equal(a[g], b[g])
        np.testing.assert_array_equal(a[f"{g}_se"], b[f"{g}_se"])
    assert a["asset_greeks"] == b["asset_greeks"]
    c = kiln.price(BOOK, "mc", greeks=True, paths=2048, steps=8, seed=8)
    assert not np.array_equal(a["delta"][:5], c["delta"][:5])
    # single-asset options: the columns, and the same numbers as one-entry lists
    for i in range(5):
        for g in ("delta", "gamma", "vega"):
            assert np.isfinite(a[g][i]) and a[f"{g}_se"][i] > 0
            assert a["asset_greeks"][i][g] == [a[g][i]]
            assert a["asset_greeks"][i][f"{g}_se"] == [a[f"{g}_se"][i]]
    assert np.all(np.isfinite(a["theta"])) and np.all(np.isfinite(a["rho"]))
    # the spread's Greeks per asset: long the first leg, short the second
    sp = a["asset_greeks"][5]
    assert all(len(sp[k]) == 2 for k in sp)
    assert sp["delta"][0] > 0 > sp["delta"][1]
    assert min(sp["delta_se"] + sp["gamma_se"] + sp["vega_se"]) > 0
    assert all(np.isnan(a[g][5]) for g in ("delta", "gamma", "vega", "delta_se"))
    # a Heston option's vega is dV/dv0: positive for a call
    assert a["vega"][3] > 0
    # batches and bumps are the caller's: other batches, other numbers
    d = kiln.price([EURO], "mc", greeks=True, paths=2048, steps=1, seed=7, batches=8,
                   spot_bump=0.05, vol_bump=0.02, rate_bump=1e-2, time_bump=0.01)
    e = kiln.price([EURO], "mc", greeks=True, paths=2048, steps=1, seed=7)
    assert all(d[g][0] != e[g][0] for g in GREEKS)


def _kiln_cli():
    """The `kiln` CLI: $KILN_CLI, on PATH, or in the Cargo target directory; None if absent."""
    if os.environ.get("KILN_CLI"):
        return os.environ["KILN_CLI"]
    found = shutil.which("kiln")
    if found:
        return found
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for base in (os.environ.get("CARGO_TARGET_DIR"), os.path.join(repo, "target")):
        for profile in ("debug", "release"):
            p = base and os.path.join(base, profile, "kiln")
            if p and os.access(p, os.X_OK):
                return p
    return None


def test_mc_greeks_are_the_cli_s_bits(tmp_path):
    cli = _kiln_cli()
    if cli is None:
        if os.environ.get("KILN_REQUIRE_CLI") == "1":
            pytest.fail("KILN_REQUIRE_CLI=1 but no kiln CLI (set KILN_CLI or build kiln-cli)")
        pytest.skip("no kiln CLI binary (set KILN_CLI, or cargo build -p kiln-cli)")
    (tmp_path / "book.csv").write_text(BOOK_CSV)
    (tmp_path / "pair.csv").write_text(PAIR_CSV)
    out, summary = tmp_path / "out.csv", tmp_path / "summary.json"
    with open(summary, "w") as f:
        subprocess.run([cli, "price", "--input", str(tmp_path / "book.csv"), "--output", str(out),
                        "--method", "mc", "--greeks", "--paths", "2048", "--steps", "8",
                        "--seed", "7", "--device", "cpu", "--json"], check=True, stdout=f)
    r = kiln.price(BOOK, "mc", greeks=True, paths=2048, steps=8, seed=7, device="cpu")
    rows = list(csv.DictReader(open(out)))
    assert len(rows) == len(BOOK)
    cols = ("price", "std_error") + GREEKS + tuple(f"{g}_se" for g in GREEKS)
    for i, row in enumerate(rows):
        for k in cols:
            # the CLI writes shortest round-trip decimals, an empty cell for a basket's columns
            want = float(row[k]) if row[k] else float("nan")
            got = r[k][i]
            assert got == want or (np.isnan(got) and np.isnan(want)), (row["id"], k, got, want)
    cli_assets = json.loads(summary.read_text())["asset_greeks"]
    assert len(cli_assets) == 1 and cli_assets[0].pop("id") == "sp"
    assert cli_assets[0] == r["asset_greeks"][5]


def test_analytic_greeks_need_a_closed_form_for_every_greek():
    barrier = dict(EURO, style="barrier_up_out", barrier=130.0)
    # without greeks=True the barrier's Greeks but theta come back, theta NaN
    part = kiln.price([barrier], "analytic")
    assert np.isfinite(part["delta"][0]) and np.isnan(part["theta"][0])
    with pytest.raises(kiln.InvalidInputError, match=r"option 1: .*no closed-form theta for barrier_up_out"):
        kiln.price([EURO, barrier], "analytic", greeks=True)
    with pytest.raises(kiln.InvalidInputError, match="theta for asian_geometric"):
        kiln.price([dict(EURO, style="asian_geometric", fixings=12)], "analytic", greeks=True)
    with pytest.raises(kiln.InvalidInputError, match="heston european"):
        kiln.price([dict(spot=100.0, strike=100.0, rate=0.0, maturity=1.0, **FO_HESTON)],
                   "analytic", greeks=True)
    with pytest.raises(kiln.InvalidInputError, match=r"basket \(arithmetic\)"):
        kiln.price([SPREAD], "analytic", greeks=True)
    r = kiln.price([EURO], "analytic", greeks=True)
    assert r["asset_greeks"] == [dict(delta=[r["delta"][0]], delta_se=[0.0], gamma=[r["gamma"][0]],
                                      gamma_se=[0.0], vega=[r["vega"][0]], vega_se=[0.0])]


@pytest.mark.parametrize("kwargs, match", [
    (dict(batches=1), "batches = 1; it must be 2 to 4096"),
    (dict(batches=5000), "batches = 5000"),
    (dict(batches=-3), "batches = -3"),
    (dict(batches=1 << 70), "batches = "),
    (dict(batches=2.5), "batches must be a whole number"),
    (dict(batches="32"), "batches must be a whole number"),
    (dict(spot_bump=0.0), "spot_bump = 0"),
    (dict(vol_bump=float("nan")), "vol_bump = NaN"),
    (dict(rate_bump=0.5), "rate_bump = 0.5"),
    (dict(time_bump=-1.0), "time_bump = -1"),
    (dict(spot_bump="big"), "spot_bump must be a real number"),
])
def test_bad_greek_knobs_are_invalid_input(kwargs, match):
    with pytest.raises(kiln.InvalidInputError, match=match):
        kiln.price([EURO], "mc", greeks=True, paths=1024, **kwargs)


def test_greek_combinations_that_mean_nothing_are_refused():
    with pytest.raises(kiln.InvalidInputError, match="give greeks=True"):
        kiln.price([EURO], "mc", paths=1024, batches=8)
    with pytest.raises(kiln.InvalidInputError, match="method=\"analytic\" gives the closed forms"):
        kiln.price([EURO], "analytic", greeks=True, spot_bump=0.02)
    with pytest.raises(kiln.InvalidInputError, match="no target_se"):
        kiln.price([EURO], "mc", greeks=True, paths=1024, target_se=1e-3)
    with pytest.raises(kiln.InvalidInputError, match="greeks must be True or False"):
        kiln.price([EURO], "mc", greeks="yes")
    # an option priced but with nothing to bump (Heston's v0 = 0) is an error naming it
    flat = dict(spot=100.0, strike=100.0, rate=0.0, maturity=1.0, **dict(FO_HESTON, v0=0.0))
    assert np.isfinite(kiln.price([flat], "mc", paths=1024)["price"][0])
    with pytest.raises(kiln.InvalidInputError, match="option 1: Greeks: .*v0\\) 0; Greeks need both > 0"):
        kiln.price([EURO, flat], "mc", greeks=True, paths=1024)


def test_cross_gammas_are_stulz_s_differenced_and_leave_the_rest_alone():
    pair = [dict(spot=100.0, volatility=0.3, dividend=0.01, weight=1.0),
            dict(spot=95.0, volatility=0.2, dividend=0.02, weight=1.0)]
    rb = dict(style="basket", average="max", strike=100.0, rate=0.03, maturity=1.0, assets=pair,
              correlation=[[1.0, 0.4], [0.4, 1.0]])
    kw = dict(paths=1 << 16, steps=1, seed=1982)
    r = kiln.price([rb, EURO], "mc", greeks=True, cross_gamma=True, **kw)
    plain = kiln.price([rb, EURO], "mc", greeks=True, **kw)
    for g in GREEKS:
        np.testing.assert_array_equal(r[g], plain[g])
        np.testing.assert_array_equal(r[f"{g}_se"], plain[f"{g}_se"])
    a = r["asset_greeks"][0]
    assert "cross_gamma" not in plain["asset_greeks"][0]
    m, se = np.array(a["cross_gamma"]), np.array(a["cross_gamma_se"])
    assert m.shape == (2, 2) and m[0, 1] == m[1, 0] and se[0, 1] == se[1, 0] > 0
    assert m.diagonal().tolist() == a["gamma"] and se.diagonal().tolist() == a["gamma_se"]
    # Stulz's closed form (kiln's analytic max rainbow), four-point mixed difference
    h = (1e-3 * 100.0, 1e-3 * 95.0)

    def v(a1, a2):
        assets = [dict(pair[0], spot=100.0 + a1 * h[0]), dict(pair[1], spot=95.0 + a2 * h[1])]
        return kiln.price([dict(rb, assets=assets)], "analytic")["price"][0]

    want = (v(1, 1) - v(1, -1) - v(-1, 1) + v(-1, -1)) / (4 * h[0] * h[1])
    assert abs(want) > 4 * se[0, 1]  # a cross gamma the check can tell from 0
    assert abs(m[0, 1] - want) <= 4 * se[0, 1], (m[0, 1], se[0, 1], want)
    # a single-asset option's matrix is its gamma
    e = r["asset_greeks"][1]
    assert e["cross_gamma"] == [[r["gamma"][1]]] and e["cross_gamma_se"] == [[r["gamma_se"][1]]]
    with pytest.raises(kiln.InvalidInputError, match="cross_gamma must be True or False"):
        kiln.price([rb], "mc", greeks=True, cross_gamma="yes")
    with pytest.raises(kiln.InvalidInputError, match="give greeks=True"):
        kiln.price([rb], "mc", cross_gamma=True)
    with pytest.raises(kiln.InvalidInputError, match="gives the closed forms"):
        kiln.price([EURO], "analytic", greeks=True, cross_gamma=True)


def test_gpu_greeks_are_the_cpu_s_bits(gpu):
    kw = dict(paths=2049 * 8, steps=8, seed=7, greeks=True, batches=8, cross_gamma=True)
    g = kiln.price(BOOK, "mc", device=gpu.device, **kw)
    c = kiln.price(BOOK, "mc", device="cpu", **kw)
    assert g["device"].startswith("cuda") and c["device"] == "cpu"
    for k in ("price", "std_error") + GREEKS + tuple(f"{x}_se" for x in GREEKS):
        np.testing.assert_array_equal(g[k], c[k], err_msg=k)
    assert len(g["asset_greeks"]) == len(c["asset_greeks"]) == len(BOOK)
    for i, (a, b) in enumerate(zip(g["asset_greeks"], c["asset_greeks"])):
        assert a.keys() == b.keys() and "cross_gamma" in a
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"option {i} {k}")
