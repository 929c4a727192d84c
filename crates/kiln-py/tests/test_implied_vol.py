"""kiln.implied_vol: round trips against kiln.price's closed form, NumPy broadcasting, NaN
and a reason code per quote without a volatility, bad arguments; device="cpu" (the default)
and device="auto" (a GPU where one is usable) agree."""

import numpy as np
import pytest

import kiln


def test_round_trip_through_the_closed_form():
    strikes = np.array([70.0, 90.0, 100.0, 115.0, 150.0])
    maturities = np.array([3.0, 0.5, 1.0, 2.0, 5.0])
    vols = np.array([0.3, 0.2, 0.35, 0.6, 1.2])
    for kind in ("call", "put"):
        r = kiln.price({"spot": 100.0, "strike": strikes, "rate": 0.03, "dividend": 0.01,
                        "volatility": vols, "maturity": maturities, "option_type": kind})
        got = kiln.implied_vol(r["price"], 100.0, strikes, maturities, rate=0.03, dividend=0.01,
                               kind=kind)
        assert got.dtype == np.float64 and got.shape == (5,)
        # kiln.price's closed form (libm's erfc) is accurate to a few ulp of the price:
        # the volatility comes back to about that over vega.
        np.testing.assert_allclose(got, vols, rtol=0, atol=1e-9)


def test_broadcasting_and_scalars():
    price = np.array([[10.45], [5.57]])          # (2, 1)
    kind = np.array(["call", "put"])[:, None]     # (2, 1)
    strike = np.array([100.0, 100.0, 100.0])      # (3,)
    v = kiln.implied_vol(price, 100.0, strike, 1.0, rate=0.05, kind=kind)
    assert v.shape == (2, 3)
    assert np.all(np.isfinite(v)) and np.all(np.abs(v - 0.2) < 1e-3)
    np.testing.assert_array_equal(v[:, 0], v[:, 2])
    s = kiln.implied_vol(10.45, 100.0, 100.0, 1.0, rate=0.05)
    assert np.ndim(s) == 0 and abs(float(s) - 0.1999844480109435) < 1e-15


def test_nan_and_a_reason_where_no_volatility_exists():
    price = np.array([10.45, 1.0, 99.0, 0.0, 20.0, np.nan, 5.0])
    spot = np.array([100.0, 100.0, 100.0, 100.0, 80.0, 100.0, 100.0])
    strike = np.array([100.0, 50.0, 100.0, 300.0, 100.0, 100.0, 100.0])
    maturity = np.array([1.0, 1.0, 1.0, 0.1, 1.0, 1.0, -1.0])
    kind = np.array(["call", "call", "put", "call", "put", "call", "call"])
    rate = np.array([0.05, 0.05, 0.05, 0.05, 0.0, 0.05, 0.05])
    v, why = kiln.implied_vol(price, spot, strike, maturity, rate=rate, kind=kind,
                              return_reasons=True)
    assert list(why) == ["", "below_intrinsic", "above_upper_bound", "not_positive",
                         "at_intrinsic", "not_finite", "not_positive"]
    assert np.isfinite(v[0]) and np.all(np.isnan(v[1:]))
    s, r = kiln.implied_vol(1.0, 100.0, 50.0, 1.0, return_reasons=True)
    assert np.isnan(s) and r == "below_intrinsic"


def test_bad_arguments_raise():
    with pytest.raises(kiln.InvalidInputError, match="call' or 'put"):
        kiln.implied_vol(5.0, 100.0, 100.0, 1.0, kind="straddle")
    with pytest.raises(kiln.InvalidInputError, match="call' or 'put"):
        kiln.implied_vol(5.0, 100.0, 100.0, 1.0, kind=1)
    with pytest.raises(kiln.InvalidInputError, match="broadcast"):
        kiln.implied_vol([5.0, 6.0], 100.0, [90.0, 100.0, 110.0], 1.0)
    with pytest.raises(kiln.InvalidInputError, match="must be numbers"):
        kiln.implied_vol("five", 100.0, 100.0, 1.0)


def test_a_large_book_is_solved_in_order():
    rng = np.random.default_rng(7)
    n = 20_000
    strike = 100.0 * np.exp(rng.uniform(-0.5, 0.5, n))
    vol = rng.uniform(0.1, 0.8, n)
    t = rng.uniform(0.1, 2.0, n)
    kind = np.where(rng.uniform(size=n) < 0.5, "call", "put")
    calls = kiln.price({"spot": 100.0, "strike": strike, "rate": 0.02, "volatility": vol,
                        "maturity": t, "option_type": "call"})["price"]
    puts = kiln.price({"spot": 100.0, "strike": strike, "rate": 0.02, "volatility": vol,
                       "maturity": t, "option_type": "put"})["price"]
    price = np.where(kind == "call", calls, puts)
    got = kiln.implied_vol(price, 100.0, strike, t, rate=0.02, kind=kind)
    ok = np.isfinite(got)
    assert ok.mean() > 0.999
    # kiln.price's closed form carries an absolute error of a few ulp of the spot, which
    # moves the volatility of a far out-of-the-money quote (small vega) by much more: so
    # where vega is large the volatility comes back, and everywhere the price does.
    again = kiln.price({"spot": 100.0, "strike": strike[ok], "rate": 0.02, "volatility": got[ok],
                        "maturity": t[ok], "option_type": kind[ok]})
    np.testing.assert_allclose(again["price"], price[ok], rtol=0, atol=1e-11)
    vega = kiln.price({"spot": 100.0, "strike": strike, "rate": 0.02, "volatility": vol,
                       "maturity": t})["vega"]
    big_vega = ok & (vega > 1.0)
    np.testing.assert_allclose(got[big_vega], vol[big_vega], rtol=0, atol=1e-11)


def test_device_cpu_and_auto_agree():
    price = [10.45, 1.0, 5.57, 0.0]
    strike = [100.0, 50.0, 100.0, 100.0]
    kind = ["call", "call", "put", "put"]
    cpu, rc = kiln.implied_vol(price, 100.0, strike, 1.0, rate=0.05, kind=kind,
                               return_reasons=True, device="cpu")
    default = kiln.implied_vol(price, 100.0, strike, 1.0, rate=0.05, kind=kind)
    np.testing.assert_array_equal(default, cpu)
    auto, ra = kiln.implied_vol(price, 100.0, strike, 1.0, rate=0.05, kind=kind,
                                return_reasons=True, device="auto")
    np.testing.assert_allclose(auto, cpu, rtol=1e-14)
    assert list(ra) == list(rc) == ["", "below_intrinsic", "", "not_positive"]
