"""``kiln.ndimage``'s statistics over labels: scipy.ndimage's ``sum_labels`` (``sum``),
``mean``, ``variance``, ``standard_deviation``, ``minimum``, ``maximum``, ``median``,
``minimum_position``, ``maximum_position``, ``extrema``, ``center_of_mass``, ``histogram`` and
``labeled_comprehension``.

These are NumPy code with scipy 1.17's semantics (``scipy/ndimage/_measurements.py``,
BSD-3-Clause) step for step: the same reductions in the same order, so sums round as scipy's
(``numpy.bincount`` accumulates in float64 in row-major order), results have scipy's types
(a NumPy scalar for no or a scalar ``index``, a float64 array for an array ``index``, a list of
tuples for positions), and where several elements tie for a minimum or maximum the same one is
reported (scipy's array-``index`` path takes the first in ``argsort``'s order, its scalar path
the first in row-major order). The rules for ``labels`` and ``index``:
- no ``labels``: the whole input; ``labels`` without ``index``: every element with a label
  above 0; a scalar ``index``: the elements of that label;
- an array ``index``: one result per entry (0, or NaN for the mean and variance, where a label
  has no element). Labels of an integer type that fit in ``intp`` and lie in ``0..labels.size``
  are used as bin numbers (an ``index`` is converted to ``intp``, so ``1.5`` reads label 1);
  others (negative, larger, float, bool) go through ``numpy.unique``;
- ``input`` and ``labels`` broadcast against each other.
"""

from __future__ import annotations

from ._errors import InvalidInputError
from ._ndimage_measure import _cpu


def _np():
    import numpy as np

    return np


def _safe_int(dt):
    """Whether labels of ``dt`` index ``numpy.bincount`` directly (scipy's test)."""
    np = _np()
    size = np.dtype(int).itemsize
    return ((np.issubdtype(dt, np.signedinteger) and dt.itemsize <= size)
            or (np.issubdtype(dt, np.unsignedinteger) and dt.itemsize < size))


def _stats(fname, input, labels=None, index=None, centered=False):
    """(count, sum) per selected group, and the sum of squared deviations from the group's
    mean when ``centered``."""
    np = _np()
    input = np.asarray(_cpu(input, fname))

    def group(v):
        if centered:
            c = v - v.mean()
            return v.size, v.sum(), (c * c.conjugate()).sum()
        return v.size, v.sum()

    if labels is None:
        return group(input)
    labels = np.asarray(_cpu(labels, fname, "labels"))
    input, labels = np.broadcast_arrays(input, labels)
    if index is None:
        return group(input[labels > 0])
    index = _cpu(index, fname, "index")
    if np.isscalar(index):
        return group(input[labels == index])

    def centred_sums(bins):
        means = sums / counts
        c = input - means[bins]
        return np.bincount(bins.ravel(), weights=(c * c.conjugate()).ravel())

    if not _safe_int(labels.dtype) or labels.min() < 0 or labels.max() > labels.size:
        uniq, bins = np.unique(labels, return_inverse=True)
        bins = np.reshape(bins, (-1,))
        counts = np.bincount(bins)
        sums = np.bincount(bins, weights=input.ravel())
        if centered:
            sums_c = centred_sums(bins.reshape(labels.shape))
        idxs = np.searchsorted(uniq, index)
        idxs[idxs >= uniq.size] = 0
        found = uniq[idxs] == index
    else:
        counts = np.bincount(labels.ravel())
        sums = np.bincount(labels.ravel(), weights=input.ravel())
        if centered:
            sums_c = centred_sums(labels)
        idxs = np.asanyarray(index, np.int_).copy()
        found = (idxs >= 0) & (idxs < counts.size)
        idxs[~found] = 0
    counts = counts[idxs]
    counts[~found] = 0
    sums = sums[idxs]
    sums[~found] = 0
    if not centered:
        return counts, sums
    sums_c = sums_c[idxs]
    sums_c[~found] = 0
    return counts, sums, sums_c


def sum_labels(input, labels=None, index=None):
    """scipy.ndimage.sum_labels: the sum of each selected group."""
    return _stats("sum_labels", input, labels, index)[1]


def sum(input, labels=None, index=None):  # noqa: A001  (scipy's name)
    """scipy.ndimage.sum: ``sum_labels``."""
    return _stats("sum", input, labels, index)[1]


def mean(input, labels=None, index=None):
    """scipy.ndimage.mean: the mean of each selected group."""
    np = _np()
    count, total = _stats("mean", input, labels, index)
    return total / np.asanyarray(count).astype(np.float64)


def variance(input, labels=None, index=None):
    """scipy.ndimage.variance: the population variance of each selected group."""
    np = _np()
    count, _, sq = _stats("variance", input, labels, index, centered=True)
    return sq / np.asanyarray(count).astype(float)


def standard_deviation(input, labels=None, index=None):
    """scipy.ndimage.standard_deviation: the square root of ``variance``."""
    return _np().sqrt(variance(input, labels, index))


def _select(fname, input, labels=None, index=None, find_min=False, find_max=False,
            find_min_positions=False, find_max_positions=False, find_median=False):
    """The requested of [min, min position, max, max position, median] (flat positions)."""
    np = _np()
    input = np.asanyarray(_cpu(input, fname))
    find_positions = find_min_positions or find_max_positions
    positions = np.arange(input.size).reshape(input.shape) if find_positions else None

    def group(vals, pos):
        r = []
        if find_min:
            r.append(vals.min())
        if find_min_positions:
            r.append(pos[vals == vals.min()][0])
        if find_max:
            r.append(vals.max())
        if find_max_positions:
            r.append(pos[vals == vals.max()][0])
        if find_median:
            r.append(np.median(vals))
        return r

    if labels is None:
        return group(input, positions)
    labels = np.asarray(_cpu(labels, fname, "labels"))
    input, labels = np.broadcast_arrays(input, labels)
    if index is None:
        sel = labels > 0
        return group(input[sel], positions[sel] if find_positions else None)
    index = _cpu(index, fname, "index")
    if np.isscalar(index):
        sel = labels == index
        return group(input[sel], positions[sel] if find_positions else None)
    index = np.asarray(index)
    if not _safe_int(labels.dtype) or labels.min() < 0 or labels.max() > labels.size:
        uniq, labels = np.unique(labels, return_inverse=True)
        idxs = np.searchsorted(uniq, index)
        idxs[idxs >= uniq.size] = 0
        found = uniq[idxs] == index
    else:
        idxs = np.asanyarray(index, np.int_).copy()
        found = (idxs >= 0) & (idxs <= labels.max())
    idxs[~found] = labels.max() + 1
    if find_median:
        order = np.lexsort((input.ravel(), labels.ravel()))
    else:
        order = input.ravel().argsort()
    input = input.ravel()[order]
    labels = labels.ravel()[order]
    if find_positions:
        positions = positions.ravel()[order]
    top = labels.max() + 2
    r = []
    # the first in sorted order wins the minimum (written last, from the reversed order)
    if find_min:
        v = np.zeros(top, input.dtype)
        v[labels[::-1]] = input[::-1]
        r.append(v[idxs])
    if find_min_positions:
        v = np.zeros(top, int)
        v[labels[::-1]] = positions[::-1]
        r.append(v[idxs])
    if find_max:
        v = np.zeros(top, input.dtype)
        v[labels] = input
        r.append(v[idxs])
    if find_max_positions:
        v = np.zeros(top, int)
        v[labels] = positions
        r.append(v[idxs])
    if find_median:
        locs = np.arange(len(labels))
        lo = np.zeros(top, np.int_)
        lo[labels[::-1]] = locs[::-1]
        hi = np.zeros(top, np.int_)
        hi[labels] = locs
        lo, hi = lo[idxs], hi[idxs]
        step = (hi - lo) // 2
        lo += step
        hi -= step
        if np.issubdtype(input.dtype, np.integer) or np.issubdtype(input.dtype, np.bool_):
            r.append((input[lo].astype("d") + input[hi].astype("d")) / 2.0)
        else:
            r.append((input[lo] + input[hi]) / 2.0)
    return r


def minimum(input, labels=None, index=None):
    """scipy.ndimage.minimum: the smallest value of each selected group."""
    return _select("minimum", input, labels, index, find_min=True)[0]


def maximum(input, labels=None, index=None):
    """scipy.ndimage.maximum: the largest value of each selected group."""
    return _select("maximum", input, labels, index, find_max=True)[0]


def median(input, labels=None, index=None):
    """scipy.ndimage.median: the median of each selected group."""
    return _select("median", input, labels, index, find_median=True)[0]


def _unravel(input, flat):
    """Flat positions as index tuples (NumPy integers), as scipy forms them."""
    np = _np()
    dims = np.array(np.asarray(input).shape)
    prod = np.cumprod([1] + list(dims[:0:-1]))[::-1]
    if np.isscalar(flat):
        return tuple(flat // prod % dims)
    return [tuple(v) for v in flat.reshape(-1, 1) // prod % dims]


def minimum_position(input, labels=None, index=None):
    """scipy.ndimage.minimum_position: where each selected group has its minimum."""
    input = _cpu(input, "minimum_position")
    return _unravel(input, _select("minimum_position", input, labels, index,
                                   find_min_positions=True)[0])


def maximum_position(input, labels=None, index=None):
    """scipy.ndimage.maximum_position: where each selected group has its maximum."""
    input = _cpu(input, "maximum_position")
    return _unravel(input, _select("maximum_position", input, labels, index,
                                   find_max_positions=True)[0])


def extrema(input, labels=None, index=None):
    """scipy.ndimage.extrema: (minimums, maximums, minimum positions, maximum positions)."""
    input = _cpu(input, "extrema")
    mins, minp, maxs, maxp = _select("extrema", input, labels, index, find_min=True,
                                     find_max=True, find_min_positions=True,
                                     find_max_positions=True)
    return mins, maxs, _unravel(input, minp), _unravel(input, maxp)


def center_of_mass(input, labels=None, index=None):
    """scipy.ndimage.center_of_mass: the value-weighted mean coordinates of each selected
    group."""
    np = _np()
    input = np.asarray(_cpu(input, "center_of_mass"))
    norm = sum_labels(input, labels, index)
    grids = np.ogrid[[slice(0, n) for n in input.shape]]
    res = [sum_labels(input * grids[d].astype(float), labels, index) / norm
           for d in range(input.ndim)]
    if np.isscalar(res[0]):
        return tuple(res)
    return [tuple(v) for v in np.array(res).T]


def labeled_comprehension(input, labels, index, func, out_dtype, default,
                          pass_positions=False):
    """scipy.ndimage.labeled_comprehension: ``func`` of each selected group's values (and
    flat positions), into an ``out_dtype`` array (``default`` where a label has none)."""
    np = _np()
    scalar = np.isscalar(index)
    input = np.asarray(_cpu(input, "labeled_comprehension"))
    positions = np.arange(input.size).reshape(input.shape) if pass_positions else None
    if labels is None:
        if index is not None:
            raise InvalidInputError("labeled_comprehension: index without defined labels")
        flat = input.ravel()
        return func(flat) if not pass_positions else func(flat, positions.ravel())
    labels = np.asarray(_cpu(labels, "labeled_comprehension", "labels"))
    try:
        input, labels = np.broadcast_arrays(input, labels)
    except ValueError as e:
        raise InvalidInputError("labeled_comprehension: input and labels must have the same "
                                "shape (excepting dimensions with width 1)") from e
    if index is None:
        sel = labels > 0
        return func(input[sel]) if not pass_positions else func(input[sel], positions[sel])
    index = np.atleast_1d(_cpu(index, "labeled_comprehension", "index"))
    if np.any(index.astype(labels.dtype).astype(index.dtype) != index):
        raise InvalidInputError(f"labeled_comprehension: Cannot convert index values from "
                                f"<{index.dtype}> to <{labels.dtype}> (labels' type) without "
                                f"loss of precision")
    index = index.astype(labels.dtype)
    sel = (labels >= index.min()) & (labels <= index.max())
    labels, input = labels[sel], input[sel]
    if pass_positions:
        positions = positions[sel]
    order = labels.argsort()
    labels, input = labels[order], input[order]
    inputs = [input] if not pass_positions else [input, positions[order]]
    index_order = index.argsort()
    sorted_index = index[index_order]
    temp = np.empty(index.shape, out_dtype)
    temp[:] = default
    lo = np.searchsorted(labels, sorted_index, side="left")
    hi = np.searchsorted(labels, sorted_index, side="right")
    for i, a, b in zip(range(sorted_index.size), lo, hi):
        if a != b:
            temp[i] = func(*[v[a:b] for v in inputs])
    out = np.zeros(index.shape, out_dtype)
    out[index_order] = temp
    return out[0] if scalar else out


def histogram(input, min, max, bins, labels=None, index=None):  # noqa: A002  (scipy's names)
    """scipy.ndimage.histogram: ``numpy.histogram`` counts over ``bins`` equal bins from
    ``min`` to ``max`` of each selected group (an object array of them for an array
    ``index``)."""
    np = _np()
    edges = np.linspace(min, max, bins + 1)
    return labeled_comprehension(input, labels, index, lambda v: np.histogram(v, edges)[0],
                                 object, None, pass_positions=False)
