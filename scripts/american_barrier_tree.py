#!/usr/bin/env python3
"""An independent, plain-Python reimplementation of kiln's American barrier tree
(kiln-core's finance::american::barrier) and the step tables docs/finance.md quotes: the
plain tree's layer bias, the parent-node interpolation that counts the barrier twice, the
child-node correction kiln uses, and the edge value with exercise at every step.

Usage: python3 scripts/american_barrier_tree.py   (standard library only; ~1 minute)

One tree per call (kiln averages two step counts); the barrier's European closed form is
Haug's (Reiner-Rubinstein with rebate), as kiln's finance::barrier."""
from math import erfc, exp, log, sqrt


def ncdf(x):
    return 0.5 * erfc(-x / sqrt(2.0))


def bsm(call, s, x, r, q, v, t):
    d1 = (log(s / x) + (r - q + 0.5 * v * v) * t) / (v * sqrt(t))
    d2 = d1 - v * sqrt(t)
    if call:
        return s * exp(-q * t) * ncdf(d1) - x * exp(-r * t) * ncdf(d2)
    return x * exp(-r * t) * ncdf(-d2) - s * exp(-q * t) * ncdf(-d1)


def barrier(call, up, knock_in, s, x, h, rebate, r, q, v, t):
    """Haug's continuously monitored single barrier with rebate (section 4.17.1)."""
    if (up and s >= h) or (not up and s <= h):
        return bsm(call, s, x, r, q, v, t) if knock_in else rebate
    b = r - q
    vt = v * sqrt(t)
    mu = (b - 0.5 * v * v) / (v * v)
    lam = sqrt(mu * mu + 2 * r / (v * v))
    x1 = log(s / x) / vt + (1 + mu) * vt
    x2 = log(s / h) / vt + (1 + mu) * vt
    y1 = log(h * h / (s * x)) / vt + (1 + mu) * vt
    y2 = log(h / s) / vt + (1 + mu) * vt
    z = log(h / s) / vt + lam * vt
    phi = 1 if call else -1
    eta = -1 if up else 1
    carry, df, hs = exp((b - r) * t), exp(-r * t), h / s
    a = phi * s * carry * ncdf(phi * x1) - phi * x * df * ncdf(phi * x1 - phi * vt)
    bb = phi * s * carry * ncdf(phi * x2) - phi * x * df * ncdf(phi * x2 - phi * vt)
    c = phi * s * carry * hs ** (2 * (mu + 1)) * ncdf(eta * y1) - phi * x * df * hs ** (2 * mu) * ncdf(eta * y1 - eta * vt)
    d = phi * s * carry * hs ** (2 * (mu + 1)) * ncdf(eta * y2) - phi * x * df * hs ** (2 * mu) * ncdf(eta * y2 - eta * vt)
    e = rebate * df * (ncdf(eta * x2 - eta * vt) - hs ** (2 * mu) * ncdf(eta * y2 - eta * vt))
    f = rebate * (hs ** (mu + lam) * ncdf(eta * z) + hs ** (mu - lam) * ncdf(eta * z - 2 * eta * lam * vt))
    table = {
        (1, 0, 1, 1): c + e, (1, 0, 1, 0): a - bb + d + e, (1, 1, 1, 1): a + e, (1, 1, 1, 0): bb - c + d + e,
        (0, 0, 1, 1): bb - c + d + e, (0, 0, 1, 0): a + e, (0, 1, 1, 1): a - bb + d + e, (0, 1, 1, 0): c + e,
        (1, 0, 0, 1): a - c + f, (1, 0, 0, 0): bb - d + f, (1, 1, 0, 1): f, (1, 1, 0, 0): a - bb + c - d + f,
        (0, 0, 0, 1): a - bb + c - d + f, (0, 0, 0, 0): f, (0, 1, 0, 1): bb - d + f, (0, 1, 0, 0): a - c + f,
    }
    return table[(int(call), int(up), int(knock_in), int(x > h))]


def tree(call, up, knock_in, s0, k, h, rebate, r, q, v, t, per_date, dates, mode="child", edge=True):
    """One smoothed CRR tree, `per_date` steps a date; `mode`: "none" (plain), "parent"
    (the live node next to the barrier interpolated), "child" (kiln's: the knocked child
    replaced by the line through the barrier and the other child)."""
    n = per_date * dates
    dt = t / n
    u = exp(v * sqrt(dt))
    p = (exp((r - q) * dt) - 1 / u) / (u - 1 / u)
    disc = exp(-r * dt)
    pu, pd = disc * p, disc * (1 - p)
    pay = (lambda s: max(s - k, 0.0)) if call else (lambda s: max(k - s, 0.0))
    knocked = (lambda s: s >= h) if up else (lambda s: s <= h)

    def price(i, j):
        return s0 * u ** (2 * j - i)

    last = n - 1
    date = last % per_date == 0
    val, van = [], []
    for j in range(last + 1):
        s = price(last, j)
        e = bsm(call, s, k, r, q, v, dt)
        w = max(e, pay(s)) if date else e
        if knocked(s):
            x = w if knock_in else rebate
        else:
            x = barrier(call, up, knock_in, s, k, h, rebate, r, q, v, dt)
            if date and not knock_in:
                x = max(x, pay(s))
        val.append(x)
        van.append(w)
    du = log(u)
    kv_edge = max(rebate, pay(h)) if (edge and per_date == 1) else rebate
    for i in range(last - 1, -1, -1):
        date = i % per_date == 0
        for j in range(i + 1):
            s = price(i, j)
            w0, w1, v0, v1 = van[j], van[j + 1], val[j], val[j + 1]
            if knock_in:
                c = pu * w1 + pd * w0
                van[j] = max(c, pay(s)) if date else c
            if knocked(s):
                val[j] = van[j] if knock_in else rebate
                continue
            k0, k1 = (w0, w1) if knock_in else (kv_edge, kv_edge)
            if mode == "child":
                if up and knocked(s * u):
                    a = log(s * u / h)
                    v1 = k1 - (v0 - k0) * a / (2 * du - a)
                elif not up and knocked(s / u):
                    a = log(h * u / s)
                    v0 = k0 - (v1 - k1) * a / (2 * du - a)
            c = pu * v1 + pd * v0
            live = max(c, pay(s)) if (date and not knock_in) else c
            if mode == "parent" and knocked(s * u if up else s / u):
                # the live value (barrier on the knocked child's layer) and the knocked one
                # (barrier on this node), weighted by the barrier's place between them
                kv = van[j] if knock_in else rebate
                frac = min(max((log(h / s) if up else log(s / h)) / du, 0.0), 1.0)
                live = kv + (live - kv) * frac
            val[j] = live
    return val[0]


def main():
    # Haug's Table 4-13 down-and-out call: S 100, X 100, H 95, rebate 3, T 0.5, r 0.08,
    # q 0.04, vol 0.25; one exercise date (the European barrier)
    args = (True, False, False, 100.0, 100.0, 95.0, 3.0, 0.08, 0.04, 0.25, 0.5)
    print("closed form", round(barrier(*args[:3], *args[3:]), 6))
    for mode in ("none", "parent", "child"):
        print(mode, [round(tree(*args, n, 1, mode=mode), 4) for n in (400, 800, 1600)])
    # a down-and-out put exercisable at every step: S = K = 40, H = 36, r 0.06, vol 0.2, T 1
    put = (False, False, False, 40.0, 40.0, 36.0, 0.0, 0.06, 0.0, 0.2, 1.0)
    print("edge max(rebate, payoff)", [round(tree(*put, 1, n), 4) for n in (250, 500, 1000)])
    print("edge rebate", [round(tree(*put, 1, n, edge=False), 3) for n in (500, 1000, 2000)])


if __name__ == "__main__":
    main()
