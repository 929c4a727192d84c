"""kiln.risk: VaR and ES equal to NumPy's on the returned P&L (bit for bit), every P&L
entry equal to re-pricing the shocked records with kiln.price, Monte Carlo with common
random numbers, bad input refused naming the record and field; the GPU grid against the
CPU where a GPU is usable."""

import math

import numpy as np
import pytest

import kiln


def _book(rng, n):
    """A mixed book of n positions: an arithmetic Asian (Monte Carlo) first, then random
    Europeans, barriers, geometric Asians, Heston Europeans, Americans and a basket."""
    book = [{"option_type": "call", "style": "asian_arithmetic", "spot": 100.0, "strike": 100.0,
             "rate": 0.03, "volatility": 0.25, "maturity": 1.0, "fixings": 6,
             "underlying": "A", "quantity": 2.0}]
    for i in range(n - 1):
        k = i % 6
        r = {"option_type": "call" if rng.random() < 0.5 else "put",
             "spot": float(rng.uniform(60, 140)), "strike": float(rng.uniform(60, 140)),
             "rate": float(rng.uniform(-0.01, 0.06)), "dividend": float(rng.uniform(0, 0.03)),
             "volatility": float(rng.uniform(0.15, 0.5)), "maturity": float(rng.uniform(0.2, 2.5)),
             "underlying": ["A", "B", None][i % 3], "quantity": float(rng.uniform(-5, 5)),
             "id": f"o{i}"}
        if k == 1:
            r["style"] = "barrier_up_out" if r["option_type"] == "call" else "barrier_down_out"
            r["barrier"] = r["spot"] * (1.4 if r["option_type"] == "call" else 0.6)
        elif k == 2:
            r["style"], r["fixings"] = "asian_geometric", 12
        elif k == 3:
            r.update(model="heston", kappa=1.7, theta=0.05, xi=0.45, rho=-0.5, v0=0.04)
            r.pop("volatility")
        elif k == 4:
            r["style"] = "american"
        elif k == 5:
            r = {"option_type": "call", "style": "basket", "average": "geometric",
                 "strike": 95.0, "rate": 0.02, "maturity": 1.0, "underlying": "B", "quantity": 3.0,
                 "assets": [{"name": "A", "spot": 100.0, "volatility": 0.25, "weight": 0.6},
                            {"name": "B", "spot": 90.0, "volatility": 0.3, "weight": 0.4}],
                 "correlation": [[1.0, 0.3], [0.3, 1.0]]}
        book.append(r)
    return book


def _scenarios(rng, m):
    rows = []
    for j in range(m):
        name = f"s{j}"
        rows.append({"scenario": name, "underlying": "A", "spot_shift": float(rng.uniform(-0.2, 0.2)),
                     "vol_shift": float(rng.uniform(-0.05, 0.1)), "rate_shift": float(rng.uniform(-0.01, 0.01))})
        rows.append({"scenario": name, "underlying": "B", "spot_shift": float(rng.uniform(-10, 10)),
                     "spot_shift_kind": "absolute", "vol_shift": float(rng.uniform(-0.05, 0.05))})
        if j % 2:
            rows.append({"scenario": name, "underlying": "*", "spot_shift": float(rng.uniform(-0.05, 0.05)),
                         "rate_shift": float(rng.uniform(-0.005, 0.005))})
    return rows


def _shock(scen_rows, name, underlying):
    """(spot shift, kind, vol shift, rate shift) of `underlying` in scenario `name`."""
    by = {r["underlying"]: r for r in scen_rows if r["scenario"] == name}
    r = by.get(underlying) if underlying is not None else None
    if r is None:
        r = by.get("*", {})
    return (r.get("spot_shift", 0.0), r.get("spot_shift_kind", "relative"),
            r.get("vol_shift", 0.0), r.get("rate_shift", 0.0))


def _move(s, x, kind):
    return s * (1.0 + x) if kind == "relative" else s + x


def _shocked(rec, scen_rows, name):
    """The record as kiln.price takes it, under scenario `name` (docs/finance.md's rules)."""
    r = {k: v for k, v in rec.items() if k not in ("underlying", "quantity", "id")}
    x, kind, dv, dr = _shock(scen_rows, name, rec.get("underlying"))
    r["rate"] = r["rate"] + dr
    if r.get("style") == "basket":
        assets = []
        for a in r["assets"]:
            ax, akind, adv, _ = _shock(scen_rows, name, a.get("name"))
            assets.append(dict(a, spot=_move(a["spot"], ax, akind), volatility=a["volatility"] + adv))
        r["assets"] = assets
        return r
    r["spot"] = _move(r["spot"], x, kind)
    if r.get("model") == "heston":
        r["v0"] = (math.sqrt(r["v0"]) + dv) ** 2
        r["theta"] = (math.sqrt(r["theta"]) + dv) ** 2
    else:
        r["volatility"] = r["volatility"] + dv
    return r


def test_var_and_es_are_numpys_on_the_returned_pnl():
    rng = np.random.default_rng(7)
    book = [{"option_type": "put" if i % 2 else "call", "spot": float(rng.uniform(80, 120)),
             "strike": float(rng.uniform(80, 120)), "rate": 0.02, "volatility": float(rng.uniform(0.1, 0.4)),
             "maturity": float(rng.uniform(0.1, 2)), "underlying": "AB"[i % 2],
             "quantity": float(rng.uniform(-10, 10))} for i in range(37)]
    scen = _scenarios(rng, 1013)
    levels = [0.9, 0.95, 0.975, 0.99, 0.999]
    r = kiln.risk(book, scen, levels=levels, device="cpu")
    pnl = r["pnl"]
    assert pnl.shape == (1013,) and pnl.dtype == np.float64
    np.testing.assert_allclose(r["matrix"].sum(axis=1), pnl, rtol=1e-12, atol=1e-9)
    loss = -pnl
    for k, a in enumerate(levels):
        var = np.quantile(loss, a)
        es = loss[loss >= var].mean()
        assert r["var"][k] == var, (a, r["var"][k], var)
        assert r["es"][k] == es, (a, r["es"][k], es)
        assert r["tail"][k] == int((loss >= var).sum())


def test_pnl_is_repricing_the_shocked_records_with_kiln_price():
    rng = np.random.default_rng(11)
    book = _book(rng, 13)
    scen = _scenarios(rng, 9)
    r = kiln.risk(book, scen, levels=[0.9], paths=4099, steps=6, tree_steps=2000, device="cpu")
    assert r["valuation"][0] == "mc" and all(v == "analytic" for v in r["valuation"][1:])
    names = r["scenarios"]
    assert names == [f"s{j}" for j in range(9)]
    recs = [{k: v for k, v in b.items() if k not in ("underlying", "quantity", "id")} for b in book]
    base = np.concatenate([kiln.price(recs[:1], "mc", paths=4099, steps=6, device="cpu")["price"],
                           kiln.price(recs[1:], "analytic", device="cpu")["price"]])
    np.testing.assert_array_equal(r["base"], base)
    qty = np.array([b.get("quantity", 1.0) for b in book])
    for j, name in enumerate(names):
        shocked = [_shocked(b, scen, name) for b in book]
        mc = kiln.price(shocked[:1], "mc", paths=4099, steps=6, device="cpu")["price"]
        an = kiln.price(shocked[1:], "analytic", device="cpu")["price"]
        want = qty * (np.concatenate([mc, an]) - base)
        np.testing.assert_allclose(r["matrix"][j], want, rtol=1e-12, atol=1e-12)


def test_bad_input_is_refused_naming_the_record_and_field():
    book = [{"spot": 100.0, "strike": 100.0, "rate": 0.03, "volatility": 0.2, "maturity": 1.0,
             "underlying": "A", "quantity": 1.0}]
    ok = [{"scenario": "s", "underlying": "A", "spot_shift": 0.1}]
    with pytest.raises(kiln.InvalidInputError, match=r"scenario record 1: unknown field `spot`"):
        kiln.risk(book, ok + [{"scenario": "t", "spot": 0.1}])
    with pytest.raises(kiln.InvalidInputError) as e:
        kiln.risk(book, ok + [{"scenario": "t", "spot_shift": "x"},
                              {"scenario": "u", "spot_shift_kind": "sideways"},
                              {"scenario": "s", "underlying": "A"}])
    msg = str(e.value)
    assert "record 1: spot_shift" in msg and "record 2: spot_shift_kind" in msg, msg
    assert "record 3" in msg and "already in record 0" in msg, msg
    with pytest.raises(kiln.InvalidInputError, match=r"option 0: quantity"):
        kiln.risk([dict(book[0], quantity="lots")], ok)
    with pytest.raises(kiln.InvalidInputError, match=r"option `x` in scenario `crash`.*spot"):
        kiln.risk([dict(book[0], id="x")],
                  [{"scenario": "crash", "underlying": "A", "spot_shift": -150, "spot_shift_kind": "absolute"}])
    with pytest.raises(kiln.InvalidInputError, match=r"level 1"):
        kiln.risk(book, ok, levels=[1.0])
    with pytest.raises(kiln.InvalidInputError, match=r"> -1"):
        kiln.risk(book, [{"scenario": "s", "spot_shift": -1.0}])


def test_gpu_grid_matches_the_cpu(gpu):
    rng = np.random.default_rng(3)
    n, m = 2001, 517
    book = {"option_type": np.where(rng.random(n) < 0.5, "call", "put"),
            "spot": rng.uniform(50, 150, n), "strike": rng.uniform(50, 150, n),
            "rate": rng.uniform(0, 0.05, n), "volatility": rng.uniform(0.1, 0.6, n),
            "maturity": rng.uniform(0.05, 3, n), "underlying": np.array(["A", "B", "C"])[np.arange(n) % 3],
            "quantity": rng.uniform(-3, 3, n)}
    scen = _scenarios(rng, m)
    c = kiln.risk(book, scen, device="cpu", matrix=False)
    g = kiln.risk(book, scen, device="cuda", matrix=False)
    assert g["gpu_options"] == n
    scale = np.abs(book["quantity"]).sum() * 100
    np.testing.assert_allclose(g["pnl"], c["pnl"], rtol=0, atol=1e-12 * scale)
