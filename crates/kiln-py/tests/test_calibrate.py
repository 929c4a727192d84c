"""kiln.calibrate_heston: known parameters recovered from a surface priced by kiln.price's
semi-analytic Heston (as prices and as implied vols, weighted), the result dict's fields,
bad arguments raising InvalidInputError with a message naming them, and the GIL released
during the fit."""

import threading

import numpy as np
import pytest

import kiln

TRUTH = {"kappa": 2.1, "theta": 0.05, "xi": 0.45, "rho": -0.62, "v0": 0.035}
START = (1.0, 0.1, 0.5, -0.5, 0.1)
SPOT, RATE, DIV = 100.0, 0.02, 0.01


def surface():
    """60 out-of-the-money quotes (5 maturities x 12 strikes) priced at TRUTH."""
    t, k = np.meshgrid([0.25, 0.5, 1.0, 1.5, 2.5], 70.0 + 6.0 * np.arange(12), indexing="ij")
    strike, maturity = k.ravel(), t.ravel()
    kind = np.where(strike < SPOT, "put", "call")
    r = kiln.price({"spot": SPOT, "strike": strike, "rate": RATE, "dividend": DIV,
                    "maturity": maturity, "option_type": kind, "model": "heston", **TRUTH})
    return r["price"], strike, maturity, kind


def assert_recovered(fit, rtol):
    for name, want in TRUTH.items():
        got = fit["params"][name]
        assert abs(got - want) <= rtol * abs(want), (name, got, want, fit["stop"], fit["iterations"])


def test_recovers_known_parameters_from_prices():
    price, strike, maturity, kind = surface()
    fit = kiln.calibrate_heston(price, SPOT, strike, maturity, RATE, DIV, kind, start=START)
    assert_recovered(fit, 1e-6)
    assert fit["rmse_vol_points"] < 1e-6 and fit["rmse_price"] < 1e-8
    assert fit["vol_quotes"] == 60 and fit["target"] == "vol"
    assert fit["feller"] is True  # 2 kappa theta = 0.21 >= xi^2 = 0.2025
    assert fit["stop"] in ("gradient", "step", "relative_reduction", "zero_residual")
    assert fit["start"] == dict(zip(("kappa", "theta", "xi", "rho", "v0"), START))
    assert 1 <= fit["iterations"] <= fit["evaluations"]
    assert set(fit) >= {"params", "start", "feller", "rmse_vol_points", "vol_quotes",
                        "rmse_price", "cost", "target", "iterations", "evaluations", "stop",
                        "quotes"}
    q = fit["quotes"]
    assert len(q) == 60
    assert set(q[0]) == {"market_price", "model_price", "price_error", "market_vol",
                         "model_vol", "vol_error_points", "weight"}
    np.testing.assert_allclose([x["market_price"] for x in q], price, rtol=0, atol=0)
    np.testing.assert_allclose([x["model_price"] for x in q], price, rtol=0, atol=1e-8)


def test_recovers_from_weighted_vols_and_fits_prices():
    price, strike, maturity, kind = surface()
    vols = kiln.implied_vol(price, SPOT, strike, maturity, RATE, DIV, kind)
    weights = 1.0 + np.arange(60) % 3
    fit = kiln.calibrate_heston(vols, SPOT, strike, maturity, RATE, DIV, kind, quoted="vol",
                                weights=weights, start=dict(zip(TRUTH, START)))
    assert_recovered(fit, 1e-6)
    assert [x["weight"] for x in fit["quotes"][:4]] == [1.0, 2.0, 3.0, 1.0]
    fit = kiln.calibrate_heston(price, SPOT, strike, maturity, RATE, DIV, kind, target="price",
                                start=START)
    assert fit["target"] == "price"
    assert_recovered(fit, 1e-5)


def test_argument_errors_name_the_argument():
    price, strike, maturity, kind = surface()
    cases = [
        (dict(quoted="iv"), "quoted must be 'price' or 'vol'"),
        (dict(target="prices"), "target must be 'price' or 'vol'"),
        (dict(max_iterations=0), "max_iterations must be an integer >= 1"),
        (dict(start=(1.0, 0.1, 0.5)), "start has 3 numbers"),
        (dict(start={"kappa": 1.0}), "start lacks theta, xi, rho, v0"),
        (dict(start=(1.0, 0.1, -0.5, -0.5, 0.1)), "xi = -0.5"),
        (dict(kind="straddle"), "kind must be 'call' or 'put'"),
        (dict(weights=-np.ones(60)), "quote 0: weight = -1"),
        (dict(strike=strike[:7]), "do not broadcast"),
        (dict(quotes=np.where(np.arange(60) == 5, 0.0, price)), "quote 5: price = 0"),
        (dict(quotes=price[:4], strike=strike[:4], maturity=maturity[:4], kind=kind[:4]),
         "at least 5"),
    ]
    for override, want in cases:
        args = dict(quotes=price, spot=SPOT, strike=strike, maturity=maturity, rate=RATE,
                    dividend=DIV, kind=kind, start=START)
        args.update(override)
        with pytest.raises(kiln.InvalidInputError, match=want.replace("(", r"\(")):
            kiln.calibrate_heston(**args)
    # a call dearer than the spot has no implied vol: a vol fit names it, a price fit takes it
    dear = price.copy()
    dear[59] = 2 * SPOT
    with pytest.raises(kiln.InvalidInputError, match="quote 59: price 200 has no implied volatility"):
        kiln.calibrate_heston(dear, SPOT, strike, maturity, RATE, DIV, kind, start=START)
    fit = kiln.calibrate_heston(dear, SPOT, strike, maturity, RATE, DIV, kind, target="price",
                                start=START, max_iterations=3)
    assert fit["iterations"] <= 3 and fit["quotes"][59]["market_vol"] is None


def test_the_gil_is_released_during_the_fit():
    price, strike, maturity, kind = surface()
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        for _ in range(3):
            kiln.calibrate_heston(price, SPOT, strike, maturity, RATE, DIV, kind, start=START)
    finally:
        done.set()
        t.join()
    # the ticker ran while the fits held no GIL (a held GIL would starve it to a handful)
    assert len(ticks) > 10, len(ticks)
