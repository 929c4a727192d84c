"""kiln: GPU compute with a CPU fallback, zero-copy with PyTorch, CuPy, NumPy and JAX.

Every op takes a ``kiln.Tensor`` or any array that speaks DLPack (``torch.Tensor``,
``cupy.ndarray``, ``numpy.ndarray``, ``jax.Array``), runs on the device the data lives on
and returns a ``kiln.Tensor`` there, or the caller's type with ``out_type="like"``. Arrays on
a CUDA device or on the host are used in place (no copy): a NumPy array's memory is shared,
as the array API's ``from_dlpack`` asks.

>>> import numpy as np, kiln
>>> img = np.random.default_rng(0).random((64, 64), dtype=np.float32)
>>> out = kiln.filter2d(img, "cross4", mode="reflect", out_type="like")
>>> type(out).__name__, out.shape
('ndarray', (64, 64))

On a GPU with torch::

    x = torch.rand(4096, 4096, device="cuda")
    y = kiln.filter2d(x, "gaussian:2", out_type="like")   # a torch tensor, no copies
"""

from __future__ import annotations

import contextlib
import json as _json

from . import _native
from ._errors import (
    DeviceFaultError,
    InvalidInputError,
    KilnError,
    NoDeviceError,
    OutOfMemoryError,
)
from ._native import (
    Runtime,
    Stream,
    Tensor,
    __version__,
    doctor,
    empty_cache,
    from_dlpack,
    memory_stats,
    synchronize,
)

__all__ = [
    "Runtime", "Stream", "Tensor", "KilnError", "OutOfMemoryError", "DeviceFaultError",
    "InvalidInputError", "NoDeviceError", "from_dlpack", "asarray", "zeros", "sigmoid", "tanh",
    "relu", "exp", "scale_shift", "clamp", "axpy", "transpose", "cast", "matmul", "filter2d",
    "filter3d", "correlate", "price", "risk", "implied_vol", "calibrate_heston", "memory_stats",
    "empty_cache", "synchronize", "doctor", "profile", "profiler_report", "ndimage",
    "ElementwiseKernel", "ReductionKernel", "RawKernel", "RawModule", "KernelArgumentError",
    "CompileException", "CUDADriverError", "GlobalPointer", "__version__",
]


def _as_input(x):
    """A kiln tensor or a DLPack array as is; anything else through numpy (a copy)."""
    if isinstance(x, Tensor) or hasattr(x, "__dlpack__"):
        return x
    import numpy as np

    return np.ascontiguousarray(np.asarray(x))


def _like(result: Tensor, like, out_type):
    """``result`` as ``out_type``: None/"kiln" keeps the kiln tensor, "like" converts to the
    type of ``like`` (torch, cupy, numpy, jax) through DLPack, without a copy."""
    if out_type is None or out_type == "kiln":
        return result
    if out_type != "like":
        raise InvalidInputError(f"out_type must be None, 'kiln' or 'like', not {out_type!r}")
    if isinstance(like, Tensor):
        return result
    mod = type(like).__module__.split(".")[0]
    if mod == "torch":
        import torch

        return torch.from_dlpack(result)
    if mod == "cupy":
        import cupy

        return cupy.from_dlpack(result)
    if mod in ("jax", "jaxlib"):
        import jax.dlpack

        return jax.dlpack.from_dlpack(result)
    import numpy as np

    return np.from_dlpack(result.cpu() if result.is_cuda else result)


def asarray(x, device: str | None = None, dtype: str | None = None) -> Tensor:
    """``x`` (kiln tensor, DLPack array, or anything numpy takes) as a kiln tensor on
    ``device`` (default: where it is), copied only when it must move; ``dtype`` casts.

    >>> kiln.asarray([[1.0, 2.0]], dtype="float32").shape
    (1, 2)
    """
    return _native.asarray(_as_input(x), device, dtype)


def zeros(shape, dtype: str = "float32", device: str = "auto") -> Tensor:
    """A zero-filled tensor of ``shape`` on ``device``."""
    return Runtime(device).zeros(list(shape), dtype)


def _map(op, x, a=0.0, b=0.0, out_type=None):
    return _like(_native.map(_as_input(x), op, a, b), x, out_type)


def sigmoid(x, *, out_type=None):
    """``1 / (1 + exp(-x))`` element-wise (float32, float16, bfloat16; f32 arithmetic)."""
    return _map("sigmoid", x, out_type=out_type)


def tanh(x, *, out_type=None):
    """``tanh(x)`` element-wise."""
    return _map("tanh", x, out_type=out_type)


def relu(x, *, out_type=None):
    """``max(x, 0)`` element-wise (NaN stays NaN)."""
    return _map("relu", x, out_type=out_type)


def exp(x, *, out_type=None):
    """``exp(x)`` element-wise."""
    return _map("exp", x, out_type=out_type)


def scale_shift(x, a: float, b: float, *, out_type=None):
    """``a * x + b`` element-wise (one f32 fma)."""
    return _map("scale_shift", x, a, b, out_type=out_type)


def clamp(x, lo: float, hi: float, *, out_type=None):
    """``min(max(x, lo), hi)`` element-wise (NaN stays NaN; ``lo <= hi``)."""
    return _map("clamp", x, lo, hi, out_type=out_type)


def axpy(a: float, x, y, *, out_type=None):
    """``a * x + y`` (same shape, dtype, device; one fma rounded once)."""
    return _like(_native.axpy(a, _as_input(x), _as_input(y)), x, out_type)


def transpose(x, *, out_type=None):
    """The transpose of a 2-D array (a new contiguous array)."""
    return _like(_native.transpose(_as_input(x)), x, out_type)


def cast(x, dtype: str, *, out_type=None):
    """Every element converted to ``dtype`` (see ``Tensor.cast``)."""
    return _like(_native.cast(_as_input(x), dtype), x, out_type)


def matmul(a, b, precision: str = "f32", *, out_type=None):
    """``a @ b`` for ``(m, k)·(k, n)`` or batched ``(z, m, k)·(z, k, n)`` (a 2-D operand is
    broadcast over the batch). ``precision``: ``f32``, ``tf32`` (float32 storage), ``bf16``,
    ``f16`` (bfloat16 / float16 storage); f32 accumulation.

    >>> a = np.ones((2, 3), np.float32); kiln.matmul(a, a.T.copy(), out_type="like")
    array([[3., 3.],
           [3., 3.]], dtype=float32)
    """
    return _like(_native.matmul(_as_input(a), _as_input(b), precision), a, out_type)


def _weights(weights, ndim):
    """A preset name, or (flat float list, k) from an array of weights."""
    if isinstance(weights, str):
        return weights, None
    import numpy as np

    if hasattr(weights, "__dlpack__") and not isinstance(weights, np.ndarray):
        weights = np.from_dlpack(weights.cpu() if hasattr(weights, "cpu") else weights)
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != ndim or len(set(w.shape)) != 1:
        raise InvalidInputError(
            f"weights must be a {ndim}-D array with equal sides (k x ... x k, k odd), got shape {w.shape}"
        )
    return np.ascontiguousarray(w).ravel().tolist(), w.shape[0]


def _check_scipy_args(origin, output, axes):
    if axes is not None:
        raise InvalidInputError("axes= is not supported: kiln filters every axis of each plane/volume")
    if any(o != 0 for o in (origin if isinstance(origin, (tuple, list)) else (origin,))):
        raise InvalidInputError("origin must be 0: kiln centres the kernel (shift the result instead)")
    if output is not None and str(output) not in ("float32", "<class 'numpy.float32'>", "f32"):
        raise InvalidInputError("output= must be None or float32: kiln filters float32 data into a new array")


def filter2d(input, weights, output=None, mode: str = "reflect", cval: float = 0.0, origin=0, *,
             path: str = "auto", channel_axis=None, axes=None, out_type=None):
    """Correlate ``input`` with a ``k×k`` kernel as ``scipy.ndimage.correlate`` does.

    ``input``: float32 ``(h, w)``, a batch ``(n, h, w)`` (each plane on its own), or
    ``(h, w, c)`` with ``channel_axis=-1``. ``weights``: a ``k×k`` array (k odd, <= 31) or a
    preset name (``cross4``, ``box:K``, ``gaussian:SIGMA``, ``sobel-x``, ``sobel-y``,
    ``laplacian``, ``sharpen``). ``mode``: ``reflect`` (default), ``constant`` (with
    ``cval``), ``nearest``, ``mirror``, ``wrap`` (and scipy's ``grid-*`` synonyms).
    ``origin`` must be 0; other scipy options raise ``InvalidInputError``. ``path``:
    ``auto`` (1-D passes where the kernel is separable), ``direct`` (scipy bit for bit on the
    CPU) or ``separable``.

    >>> img = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> kiln.filter2d(img, np.full((3, 3), 1 / 9), out_type="like").shape
    (4, 4)
    """
    _check_scipy_args(origin, output, axes)
    if channel_axis not in (None, -1, 2):
        raise InvalidInputError("channel_axis must be None or -1 (channels last, (h, w, c))")
    w, k = _weights(weights, 2)
    out = _native.filter2d(_as_input(input), w, k, mode, float(cval), path, channel_axis is not None)
    return _like(out, input, out_type)


def filter3d(input, weights, output=None, mode: str = "reflect", cval: float = 0.0, origin=0, *,
             path: str = "auto", axes=None, out_type=None):
    """Correlate a float32 ``(d, h, w)`` volume with a ``k×k×k`` kernel (k in 3, 5, 7) as
    ``scipy.ndimage.correlate`` does; ``weights`` is an array or a preset (``box:K``,
    ``gaussian:SIGMA``, ``laplacian``). Modes as in ``filter2d``."""
    _check_scipy_args(origin, output, axes)
    w, k = _weights(weights, 3)
    out = _native.filter3d(_as_input(input), w, k, mode, float(cval), path)
    return _like(out, input, out_type)


def correlate(input, weights, output=None, mode: str = "reflect", cval: float = 0.0, origin=0, *,
              out_type=None):
    """``scipy.ndimage.correlate``'s signature: ``filter2d`` for 2-D weights (on 2-D input
    or a batch of planes), ``filter3d`` for 3-D weights."""
    import numpy as np

    nd = 2 if isinstance(weights, str) else np.ndim(weights)
    fn = filter2d if nd == 2 else filter3d
    return fn(input, weights, output, mode, cval, origin, out_type=out_type)


_OPTION_FIELDS = ("option_type", "style", "spot", "strike", "rate", "dividend", "volatility",
                  "maturity", "fixings", "barrier", "rebate", "model", "kappa", "theta", "xi",
                  "rho", "v0", "assets", "correlation", "average")
# fields a record may leave out (None or NaN: not given), e.g. a column of a mixed book
_OPTIONAL_FIELDS = ("volatility", "fixings", "barrier", "rebate", "model", "kappa", "theta", "xi",
                    "rho", "v0", "correlation", "average")


def _records(options):
    """Option records from a list of dicts or a dict of columns (arrays or scalars)."""
    if isinstance(options, dict):
        import numpy as np

        cols = {k: np.atleast_1d(np.asarray(v)) for k, v in options.items()}
        n = max(len(c) for c in cols.values())
        recs = []
        for i in range(n):
            recs.append({k: (c[i] if len(c) > 1 else c[0]).item() for k, c in cols.items()})
        options = recs
    out = []
    for i, o in enumerate(options):
        o = dict(o)
        unknown = set(o) - set(_OPTION_FIELDS)
        if unknown:
            raise InvalidInputError(f"option {i}: unknown fields {sorted(unknown)}; fields: {_OPTION_FIELDS}")
        for k in _OPTIONAL_FIELDS:
            v = o.get(k)
            if v is None or (isinstance(v, float) and v != v):
                o.pop(k, None)
        o.setdefault("option_type", "call")
        o.setdefault("style", "european")
        # a basket's and an American rainbow's dividends are their assets'; the rainbow's
        # fixings (exercise dates) are required, so no default
        if o["style"] not in ("basket", "american_rainbow"):
            o.setdefault("dividend", 0.0)
            o.setdefault("fixings", None)
            o.setdefault("barrier", None)
        out.append(o)
    return out


def price(options, method: str = "analytic", *, paths: int = 1 << 16, steps: int = 64,
          seed: int = 0x6B696C6E, antithetic: bool = False, control_variate: bool = False,
          fast_math: bool = False, device: str | None = None, rng: str = "philox",
          replicates: int | None = None, target_se=None, max_paths: int | None = None,
          greeks: bool = False, batches: int | None = None, spot_bump: float | None = None,
          vol_bump: float | None = None, rate_bump: float | None = None,
          time_bump: float | None = None, cross_gamma: bool | None = None):
    """Price a book of options by closed form (``method="analytic"``) or Monte Carlo
    (``"mc"``, on the GPU where there is one; the CPU gives the same bits). The same book
    priced by ``kiln price`` (the same rows in a CSV, the same flags) gives the same bits:
    option ``i`` uses Monte Carlo stream ``i``.

    ``options``: a list of dicts, or a dict of columns (arrays broadcast against scalars),
    with fields ``spot, strike, rate, volatility, maturity`` and optionally ``option_type``
    (``call``/``put``), ``style`` (``european``, ``asian_arithmetic``, ``asian_geometric``,
    ``barrier_up_out``, ... , ``american``, ``american_barrier_up_out``, ...: an American
    barrier, its ``fixings`` the exercise dates), ``dividend``, ``fixings``, ``barrier``,
    ``rebate``, and ``model`` (``bs``, the default, or ``heston`` with ``kappa, theta, xi,
    rho, v0``; a Heston option needs no ``volatility``). A field that is ``None`` or NaN is
    not given. A basket (records only) is ``style="basket"`` with ``option_type, strike,
    rate, maturity``, ``average`` (``"arithmetic"``, the default, ``"geometric"``, or
    ``"max"`` / ``"min"``), ``assets`` (a list of dicts: ``spot, volatility, weight``,
    optionally ``dividend`` and ``name``) and ``correlation`` (N lists of N numbers); its
    payoff is on ``sum(w_i S_i(T))`` (any weights: ``1, -1`` is the spread ``S1 - S2``, any
    strike), ``W prod(S_i(T)^(w_i/W))`` or ``max``/``min`` of ``w_i S_i(T)`` (a rainbow), as
    ``kiln price``'s basket rows. An American rainbow (records only, ``method="mc"`` only)
    is ``style="american_rainbow"`` with a basket's fields, ``average`` ``"max"`` or
    ``"min"`` and ``fixings``, its exercise dates (required): a Bermudan call or put on the
    largest or smallest ``w_i S_i``, priced by Longstaff-Schwartz on the CPU engine.
    ``fixings`` are the averaging dates of an Asian, the monitoring dates of a
    barrier (none: continuous) and the exercise dates of an American (none: any time; the
    tree prices that, Monte Carlo uses ``steps`` dates). What each method does per kind is
    in docs/finance.md: American analytic is a 2,000-step binomial tree, Monte Carlo is
    Longstaff-Schwartz; Heston analytic is the semi-analytic European, Monte Carlo is
    Andersen's QE.

    ``rng``: ``"philox"`` or ``"sobol"`` (randomised quasi-Monte Carlo, ``replicates``
    random shifts, 16 by default, give the standard error). ``target_se``: grow the paths
    from ``paths`` until each standard error meets it: a float (absolute) or a string
    (``"1e-4rel"``, ``"0.01%"``: relative to the price), up to ``max_paths`` (default
    2^32); Black-Scholes options only. ``replicates`` without ``rng="sobol"`` and
    ``max_paths`` without ``target_se`` raise ``InvalidInputError`` (nothing would read them).

    ``greeks=True``: every option's delta, gamma, vega, theta and rho with standard errors.
    With ``method="mc"`` they are Monte Carlo Greeks by bump and revalue with common random
    numbers over ``batches`` independent sub-runs (docs/finance.md; ``kiln price --method mc
    --greeks`` gives the same bits for the same rows and flags): ``batches`` (default 32,
    2 to 4096), ``spot_bump`` and ``vol_bump`` (relative, default 0.01; Heston's vega is
    ``dV/dv0``), ``rate_bump`` (absolute, default 1e-3) and ``time_bump`` (years, default
    1/365, at most half the maturity used); every kind has them, at about ``4 n + 4`` times
    the price's cost for ``n`` assets; not with ``target_se``. ``cross_gamma=True`` adds
    each option's ``d²V/dS_i dS_j`` (``n (n - 1)`` more valuations) to ``asset_greeks`` as
    ``cross_gamma`` and ``cross_gamma_se``: ``n x n`` lists, the diagonal its gammas. With
    ``method="analytic"`` they are the closed forms (standard error 0), an error naming the
    style where it lacks one (e.g. barriers have no closed-form theta). Vega and rho per
    1.0, theta per year.

    Returns a dict of numpy arrays: ``price``, ``std_error``, ``delta``, ``gamma``,
    ``vega``, ``theta``, ``rho`` (NaN where the method gives none), ``ci95_low``,
    ``paths_used``; with ``target_se`` also ``met`` (bool per option), ``rounds`` and
    ``seconds``. With ``greeks=True`` also ``delta_se``, ``gamma_se``, ``vega_se``,
    ``theta_se``, ``rho_se`` and ``asset_greeks``: a list with one dict per option of lists
    per asset (``delta``, ``delta_se``, ``gamma``, ``gamma_se``, ``vega``, ``vega_se``; one
    entry for a single-asset option). A basket of several assets has NaN in the ``delta``,
    ``gamma`` and ``vega`` columns and its per-asset Greeks in ``asset_greeks``.

    >>> r = kiln.price({"spot": 100.0, "strike": [90.0, 110.0], "rate": 0.03,
    ...                 "volatility": 0.2, "maturity": 1.0})
    >>> r["price"].shape, bool(r["price"][0] > r["price"][1])
    ((2,), True)
    """
    import numpy as np

    if replicates is not None and rng != "sobol":
        raise InvalidInputError("replicates needs rng='sobol' (Philox runs have no replicates)")
    if max_paths is not None and target_se is None:
        raise InvalidInputError("max_paths caps a target_se run; give target_se too, or set paths")
    replicates = 16 if replicates is None else replicates
    max_paths = 1 << 32 if max_paths is None else max_paths
    for name, flag in (("greeks", greeks), ("cross_gamma", cross_gamma)):
        if not isinstance(flag, (bool, np.bool_)) and not (name == "cross_gamma" and flag is None):
            raise InvalidInputError(f"{name} must be True or False, got {flag!r}")
    batches, spot_bump, vol_bump, rate_bump, time_bump = _greek_knobs(
        batches=batches, spot_bump=spot_bump, vol_bump=vol_bump, rate_bump=rate_bump,
        time_bump=time_bump)
    recs = _records(options)
    if target_se is not None and not isinstance(target_se, str):
        target_se = repr(float(target_se))
    r = _native.price(_json.dumps(recs), method, paths, steps, seed, antithetic, control_variate,
                      fast_math, device, 0, rng, replicates, target_se, max_paths, bool(greeks),
                      batches, spot_bump, vol_bump, rate_bump, time_bump,
                      None if cross_gamma is None else bool(cross_gamma))
    out = {}
    for k, v in r.items():
        out[k] = v if k in ("device", "rounds", "seconds", "asset_greeks") else np.asarray(v)
    return out


def _greek_knobs(**knobs):
    """The Monte Carlo Greeks' knobs checked for type (``batches`` a whole number, the bumps
    real numbers; None: the default); the native layer checks their ranges."""
    import operator

    out = []
    for name, v in knobs.items():
        if v is None:
            out.append(None)
        elif name == "batches":
            try:
                if isinstance(v, bool):
                    raise TypeError
                b = operator.index(v)
            except TypeError:
                raise InvalidInputError(f"batches must be a whole number (2 to 4096), got {v!r}") from None
            if not -(1 << 63) <= b < (1 << 63):
                raise InvalidInputError(f"batches = {b}; it must be 2 to 4096")
            out.append(b)
        else:
            try:
                if isinstance(v, (bool, str, bytes)):
                    raise TypeError
                out.append(float(v))
            except (TypeError, ValueError):
                raise InvalidInputError(f"{name} must be a real number, got {v!r}") from None
    return out


_POSITION_FIELDS = ("underlying", "quantity", "id")
_SCENARIO_FIELDS = ("scenario", "underlying", "spot_shift", "spot_shift_kind", "vol_shift",
                    "rate_shift")


def _rows(rows, what):
    """A list of dicts from a list of dicts or a dict of columns (arrays or scalars)."""
    if isinstance(rows, dict):
        import numpy as np

        cols = {k: np.atleast_1d(np.asarray(v)) for k, v in rows.items()}
        n = max(len(c) for c in cols.values())
        return [{k: (c[i] if len(c) > 1 else c[0]).item() for k, c in cols.items()}
                for i in range(n)]
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise InvalidInputError(f"{what} must be a list of dicts or a dict of columns")
    return [dict(r) for r in rows]


def risk(book, scenarios, levels=(0.95, 0.99), method: str = "analytic", *,
         paths: int = 20_000, steps: int = 64, seed: int = 0x6B696C6E, tree_steps: int = 2000,
         matrix: bool = True, device: str | None = None):
    """Portfolio risk by full revaluation: every position of ``book`` re-priced under every
    scenario, the P&L per scenario, VaR and expected shortfall at ``levels``.

    ``book``: the option records ``kiln.price`` takes (a list of dicts or a dict of columns;
    every kind: Black-Scholes styles, ``american``, ``basket``, ``model="heston"``) plus
    ``underlying`` (the name scenarios shock; None: only the ``"*"`` shock), ``quantity``
    (default 1, negative for short) and ``id``. A basket's assets are shocked by their
    ``name``; the position's ``underlying`` shocks its rate.

    ``scenarios``: one record per scenario and underlying, the rows of ``kiln risk``'s
    scenario CSV: ``scenario`` (a name), ``underlying`` (a name, or ``"*"`` for every
    underlying the scenario does not name; the default), ``spot_shift`` (with
    ``spot_shift_kind`` ``"relative"``, the default: S(1+x); ``"absolute"``: S+x),
    ``vol_shift`` (added to the volatility; under Heston to sqrt(v0) and sqrt(theta)) and
    ``rate_shift`` (added to the rate); a missing shift is 0.

    ``method``: ``"analytic"`` values each option by its closed form where its kind has one
    (the American by a ``tree_steps`` binomial tree) and by Monte Carlo otherwise;
    ``"mc"`` values every option by Monte Carlo (``paths``, ``steps``, ``seed``). Monte
    Carlo uses common random numbers: option ``i`` draws stream ``i`` in the base and in
    every scenario.

    VaR and ES (losses, positive for a loss): with ``L = -pnl``,
    ``var[k] == np.quantile(L, levels[k])`` (NumPy's default 'linear') and
    ``es[k] == L[L >= var[k]].mean()``, bit for bit.

    Returns a dict: ``pnl`` (float64, one per scenario), ``matrix`` (float64, scenarios x
    positions, quantities included; None with ``matrix=False``), ``scenarios`` (names),
    ``base`` and ``base_std_error`` (per position, one unit), ``valuation``
    (``"analytic"``/``"mc"`` per position), ``levels``, ``var``, ``es``, ``tail`` (losses
    averaged by ES), ``gpu_options`` and ``device``.

    >>> r = kiln.risk([{"spot": 100.0, "strike": 100.0, "rate": 0.03, "volatility": 0.2,
    ...                 "maturity": 1.0, "underlying": "A", "quantity": 10}],
    ...               [{"scenario": "down", "underlying": "A", "spot_shift": -0.1},
    ...                {"scenario": "up", "underlying": "A", "spot_shift": 0.1}],
    ...               levels=[0.5])
    >>> bool(r["pnl"][0] < 0 < r["pnl"][1])
    True
    """
    import numpy as np

    rows = _rows(book, "book")
    pos = []
    for r in rows:
        pos.append({k: r.pop(k) for k in _POSITION_FIELDS if k in r})
        for k in ("underlying", "id"):
            v = pos[-1].get(k)
            if v is not None and not isinstance(v, str):
                pos[-1][k] = str(v)
    recs = _records(rows)
    for r, p in zip(recs, pos):
        r.update(p)
    scen = _rows(scenarios, "scenarios")
    for i, s in enumerate(scen):
        for k, v in list(s.items()):
            if v is None or (isinstance(v, float) and v != v):
                s.pop(k)
    levels = [float(a) for a in np.atleast_1d(np.asarray(levels, dtype=float))]
    r = _native.risk(_json.dumps(recs), _json.dumps(scen), levels, method, paths, steps, seed,
                     tree_steps, matrix, device)
    out = dict(r)
    out["pnl"] = np.frombuffer(r["pnl"], dtype="<f8").copy()
    if r["matrix"] is not None:
        out["matrix"] = np.frombuffer(r["matrix"], dtype="<f8").reshape(len(out["pnl"]), -1).copy()
    for k in ("base", "base_std_error", "levels", "var", "es"):
        out[k] = np.asarray(r[k], dtype=float)
    out["tail"] = np.asarray(r["tail"], dtype=np.int64)
    return out


# The reason codes of ``implied_vol``, by the index the native module returns (0: solved).
_NO_VOLATILITY = ("", "not_finite", "not_positive", "out_of_range", "below_intrinsic",
                  "at_intrinsic", "above_upper_bound")


def implied_vol(price, spot, strike, maturity, rate=0.0, dividend=0.0, kind="call", *,
                return_reasons: bool = False, device: str | None = None):
    """Black-Scholes implied volatility of European options, each argument a number or an
    array (NumPy broadcasting): the ``sigma`` whose price ``e^{-rT} Black(S e^{(r-q)T}, K,
    sigma, T)`` equals ``price`` (discounted). ``rate`` and ``dividend`` are continuously
    compounded per year, ``maturity`` in years, ``kind`` ``"call"`` or ``"put"`` (or an
    array of them). Jaeckel's "Let's Be Rational": machine precision for any moneyness and
    total volatility (where the price hardly moves with sigma, deep in the money or at total
    volatilities of several units, a float64 price determines sigma only to about 1e-16
    price / vega). ``device`` None or ``"cpu"`` solves on the CPU's cores (no GPU start or
    kernel compile for a small call); ``"auto"``, ``"cuda"`` or ``"cuda:N"`` on that
    device's GPU (``"auto"``: the CPU where none is usable), which agrees with the CPU to
    what an ulp of input rounding allows (a few ulp; a price within rounding of its
    intrinsic value or bound may get another reason).

    Returns a float64 array of the broadcast shape (a scalar for scalar inputs), NaN where a
    quote has no volatility; with ``return_reasons=True`` also an array of reason codes, ``""``
    where solved, else ``"not_finite"`` (an input is NaN or infinite), ``"not_positive"``
    (price, spot, strike or maturity <= 0), ``"out_of_range"`` (the forward or discount factor
    overflows), ``"below_intrinsic"``, ``"at_intrinsic"`` (no time value left) or
    ``"above_upper_bound"`` (price >= S e^{-qT} for a call, K e^{-rT} for a put). ``kind``
    other than call/put raises ``InvalidInputError``.

    >>> v = kiln.implied_vol([10.45, 1.0], 100.0, [100.0, 50.0], 1.0, rate=0.05)
    >>> round(float(v[0]), 6), bool(v[1] != v[1])
    (0.199984, True)
    """
    import numpy as np

    kinds = np.asarray(kind)
    if kinds.dtype.kind not in "UO":
        raise InvalidInputError(f"kind must be 'call' or 'put' (or an array of them), got {kind!r}")
    try:
        nums = [np.asarray(a, dtype=np.float64) for a in (price, spot, strike, maturity, rate, dividend)]
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"implied_vol: price, spot, strike, maturity, rate and dividend must be numbers: {e}") from None
    try:
        *nums, kinds = np.broadcast_arrays(*nums, kinds)
    except ValueError as e:
        raise InvalidInputError(f"implied_vol: the arguments do not broadcast together: {e}") from None
    shape = nums[0].shape
    names = np.char.lower(kinds.astype(str))
    bad = ~np.isin(names, ("call", "put"))
    if bad.any():
        raise InvalidInputError(f"kind must be 'call' or 'put', got {str(kinds[bad].flat[0])!r}")
    cols = [np.ascontiguousarray(a, dtype="<f8").tobytes() for a in nums]
    is_put = np.ascontiguousarray(names == "put", dtype=np.uint8).tobytes()
    vols, codes = _native.implied_vol(*cols, is_put, device)
    vol = np.frombuffer(vols, dtype="<f8").astype(np.float64).reshape(shape)
    if shape == ():
        vol = vol[()]
    if not return_reasons:
        return vol
    reasons = np.array(_NO_VOLATILITY)[np.frombuffer(codes, dtype=np.uint8)].reshape(shape)
    return vol, (reasons[()] if shape == () else reasons)


def calibrate_heston(quotes, spot, strike, maturity, rate=0.0, dividend=0.0, kind="call", *,
                     quoted="price", weights=None, start=None, target="vol",
                     max_iterations=200) -> dict:
    """Fit Heston's ``kappa, theta, xi, rho, v0`` to European quotes by Levenberg-Marquardt on
    the semi-analytic price with its exact gradient, on the CPU's cores (there is no GPU
    pricer of a surface); the GIL is released during the fit.

    ``quotes`` holds one value per quote: discounted prices (``quoted="price"``) or
    Black-Scholes implied vols (``quoted="vol"``, 0.2 for 20%). ``spot``, ``strike``,
    ``maturity`` (years), ``rate``, ``dividend`` (continuously compounded per year), ``kind``
    (``"call"`` or ``"put"``) and ``weights`` (``>= 0``, default 1) are numbers or arrays
    that broadcast with ``quotes`` (NumPy broadcasting), as ``implied_vol``'s arguments do.
    ``target`` says what is fitted: ``"vol"`` (weighted implied-vol differences, the default)
    or ``"price"`` (weighted price differences). ``start`` is ``(kappa, theta, xi, rho, v0)``
    or a dict of them (default ``(1, 0.1, 0.5, -0.5, 0.1)``).

    Returns a dict: ``params`` and ``start`` (dicts of the five), ``feller`` (whether ``2
    kappa theta >= xi^2``), ``rmse_vol_points`` (100 x the RMSE of the model prices' implied
    vols against the quotes', unweighted; None where no quote has both), ``vol_quotes`` (the
    quotes it counts), ``rmse_price``, ``cost`` (half the sum of squared weighted residuals),
    ``target``, ``iterations``, ``evaluations``, ``stop`` (``"gradient"``, ``"step"``,
    ``"relative_reduction"``, ``"zero_residual"`` or ``"max_iterations"``) and ``quotes``
    (one dict per quote in input order: ``market_price``, ``model_price``, ``price_error``,
    ``market_vol``, ``model_vol``, ``vol_error_points``, ``weight``). Bad input raises
    ``InvalidInputError`` naming the argument, or the quote by its index in the flattened
    broadcast arrays.

    >>> fit = kiln.calibrate_heston(vols, 100.0, strikes, maturities, rate=0.02, quoted="vol",
    ...                             kind=np.where(strikes < 100, "put", "call"))
    >>> fit["params"]["kappa"], fit["rmse_vol_points"], fit["feller"]
    """
    import numpy as np

    def bad(msg):
        return InvalidInputError(f"calibrate_heston: {msg}")

    for name, v, ok in (("quoted", quoted, ("price", "vol")), ("target", target, ("price", "vol"))):
        if not isinstance(v, str) or v not in ok:
            raise bad(f"{name} must be 'price' or 'vol', got {v!r}")
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, (int, np.integer)) or max_iterations < 1:
        raise bad(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
    kinds = np.asarray(kind)
    if kinds.dtype.kind not in "UO":
        raise bad(f"kind must be 'call' or 'put' (or an array of them), got {kind!r}")
    try:
        nums = [np.asarray(a, dtype=np.float64) for a in
                (quotes, spot, strike, maturity, rate, dividend, 1.0 if weights is None else weights)]
    except (TypeError, ValueError) as e:
        raise bad(f"quotes, spot, strike, maturity, rate, dividend and weights must be numbers: {e}") from None
    try:
        *nums, kinds = np.broadcast_arrays(*nums, kinds)
    except ValueError as e:
        raise bad(f"the arguments do not broadcast together: {e}") from None
    names = np.char.lower(kinds.astype(str))
    wrong = ~np.isin(names, ("call", "put"))
    if wrong.any():
        raise bad(f"kind must be 'call' or 'put', got {str(kinds[wrong].flat[0])!r}")
    fields = ("kappa", "theta", "xi", "rho", "v0")
    if isinstance(start, dict):
        missing = [k for k in fields if k not in start]
        if missing:
            raise bad(f"start lacks {', '.join(missing)}; give kappa, theta, xi, rho, v0")
        start = [start[k] for k in fields]
    if start is not None:
        try:
            start = [float(x) for x in start]
        except (TypeError, ValueError):
            raise bad(f"start must be 5 numbers (kappa, theta, xi, rho, v0) or a dict of them, got {start!r}") from None
        if len(start) != 5:
            raise bad(f"start has {len(start)} numbers; give kappa, theta, xi, rho, v0")
    value, spot_, strike_, mat, rate_, div, weight = (c.ravel().tolist() for c in nums)
    out = _native.calibrate_heston(spot_, strike_, mat, rate_, div, value, weight,
                                   (names == "call").ravel().tolist(), quoted, target, start,
                                   int(max_iterations))
    return _json.loads(out)


@contextlib.contextmanager
def profile():
    """Record kiln's profiler ranges inside the block; ``profiler_report()`` reads them."""
    _native.profiler_reset()
    _native.profiler_enable(True)
    try:
        yield
    finally:
        _native.profiler_enable(False)


def profiler_report() -> dict:
    """The aggregated profiler ranges recorded so far."""
    return _native.profiler_report()


from . import ndimage  # noqa: E402  (scipy.ndimage's functions: kiln.ndimage)
from ._rawkernel import (  # noqa: E402  (users' CUDA C++ kernels with CuPy's API)
    CompileException,
    CUDADriverError,
    GlobalPointer,
    RawKernel,
    RawModule,
)
from ._userkernel import (  # noqa: E402  (users' kernels with CuPy's API)
    ElementwiseKernel,
    KernelArgumentError,
    ReductionKernel,
)
