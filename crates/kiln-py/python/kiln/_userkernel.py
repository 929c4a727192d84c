"""Users' own kernels with CuPy's API: ``ElementwiseKernel`` and ``ReductionKernel`` (and
the array handling ``RawKernel`` and ``RawModule``, in ``_rawkernel.py``, share).

A kernel runs where its arrays live. Arrays on a CUDA device (kiln tensors, torch, CuPy,
JAX; shared through DLPack, on the caller's current stream) run the fused CUDA kernel kiln
generates and compiles with NVRTC (cached on disk like kiln's own kernels). NumPy arrays and
kiln CPU tensors run the same kernel on the CPU: kiln compiles the expression (a C subset)
into a vectorised, multi-threaded evaluator, so one kernel runs on a machine without a GPU
and its GPU result can be checked against the CPU. Results come back in the caller's type.

The calling conventions, argument rules and error types are CuPy's, so that code written for
CuPy runs after ``import kiln as cupy``-style renaming of the kernel classes (kiln runs
CuPy's own tests of these classes: ``crates/kiln-py/cupy_suite``).
"""

from __future__ import annotations

import re
import sys

import numpy as np

from . import _native
from ._errors import InvalidInputError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
# DLPack device types that are CUDA memory: CUDA, CUDA host (pinned), CUDA managed
_CUDA_DEVICES = (2, 3, 13)


class KernelArgumentError(InvalidInputError, TypeError):
    """A kernel call whose arguments do not fit its parameters (count or types): a kiln
    ``InvalidInputError`` that is also a ``TypeError``, as CuPy raises."""


def _check_name(name):
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f'Invalid kernel name: "{name}"')


def _retype(e):
    """CuPy raises TypeError for argument counts and types: re-raise those as such."""
    msg = str(e)
    if msg.startswith(("Wrong number of arguments", "Type is mismatched", "Output arguments")):
        return KernelArgumentError(msg)
    return e


def _on_gpu(x):
    if isinstance(x, _native.Tensor):
        return x.device != "cpu"
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None:
        return hasattr(x, "__cuda_array_interface__")
    try:
        return dev()[0] in _CUDA_DEVICES
    except Exception:  # a producer that cannot say: not a CUDA array
        return False


# numpy's dtype names by dtype, typestr or scalar type: `dtype.name` is a Python-level
# property costing microseconds, asked once an argument a call
_DTYPE_NAMES = {}


def _dtype_name(key):
    name = _DTYPE_NAMES.get(key)
    if name is None:
        name = _DTYPE_NAMES[key] = np.dtype(key).name
    return name


def _is_scalar(x):
    return isinstance(x, (bool, int, float, complex, np.generic))


def _scalar_desc(x):
    if isinstance(x, np.generic):
        return ("scalar", _dtype_name(type(x)))
    if isinstance(x, bool):
        return ("scalar", "bool")
    if isinstance(x, int):
        return ("scalar", "int64")
    if isinstance(x, float):
        return ("scalar", "float64")
    return ("scalar", "complex128")


def _host_array(x, what):
    """A NumPy view of a host argument (kiln CPU tensors shared, not copied)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, _native.Tensor):
        return np.from_dlpack(x)
    raise KernelArgumentError(
        f"{what}: unsupported type {type(x).__name__}; pass a NumPy array, a kiln tensor, a "
        "CUDA array (torch, CuPy, JAX) or a scalar"
    )


class DeviceArray:
    """A CUDA array as a kernel argument: its address, dtype, shape and strides (in
    elements), and the object that keeps its memory alive (read from
    ``__cuda_array_interface__``: CuPy, torch, Numba, JAX; or a kiln tensor)."""

    __slots__ = ("ptr", "dtype", "name", "shape", "strides", "contiguous", "owner", "stream")

    def __init__(self, x, what):
        self.owner = x
        nd = _cupy_ndarray()
        if nd is not None and type(x) is nd:
            # CuPy's own array, the common argument: its attributes directly (its
            # __cuda_array_interface__ builds a dictionary a call); the same fields
            self.ptr, self.dtype, self.shape = x.data.ptr, x.dtype, x.shape
            self.name = _dtype_name(self.dtype)
            self.strides = _c_strides(self.shape)
            self.contiguous = x.flags.c_contiguous
            self.stream = None
            if not self.contiguous:
                item = self.dtype.itemsize
                if any(b % item for b in x.strides):
                    raise KernelArgumentError(f"{what}: strides {x.strides} are not whole elements")
                self.strides = tuple(b // item for b in x.strides)
            return
        if isinstance(x, _native.Tensor):
            self.ptr, self.dtype, self.shape = x.data_ptr, np.dtype(x.dtype), tuple(x.shape)
            self.name = _dtype_name(self.dtype)
            self.strides = _c_strides(self.shape)
            self.contiguous = True
            self.stream = None
            return
        cai = getattr(x, "__cuda_array_interface__", None)
        if cai is None:
            raise KernelArgumentError(
                f"{what}: a CUDA array without __cuda_array_interface__ ({type(x).__name__}); "
                "pass a CuPy array, a torch tensor or a kiln tensor"
            )
        self.ptr = int(cai["data"][0])
        typestr = cai["typestr"]
        self.dtype = np.dtype(typestr)
        self.name = _dtype_name(typestr)
        self.shape = tuple(map(int, cai["shape"]))
        item = self.dtype.itemsize
        self.strides = _c_strides(self.shape)
        if cai.get("strides") is None:
            self.contiguous = True  # CAI: no strides means C order
        else:
            if any(b % item for b in cai["strides"]):
                raise KernelArgumentError(f"{what}: strides {cai['strides']} are not whole elements")
            strides = tuple(int(b) // item for b in cai["strides"])
            self.contiguous = strides == self.strides
            self.strides = strides
        # CAI v3: the stream the producer last used (None: already synchronised)
        self.stream = cai.get("stream")


def _cupy_ndarray():
    """CuPy's ndarray type where the caller has imported CuPy, else None (kiln never imports
    it for this)."""
    cp = sys.modules.get("cupy")
    return getattr(cp, "ndarray", None) if cp is not None else None


def _c_strides(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(out))


def _contiguous(x):
    """A C-contiguous copy of a CUDA array, by its own library."""
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy.ascontiguousarray(x)
    if mod == "torch":
        return x.contiguous()
    raise KernelArgumentError(f"a non-contiguous {type(x).__name__}; make it contiguous first")


def _empty_like_caller(like, shape, dtype):
    """A new CUDA array of the caller's library (CuPy, torch; kiln for kiln tensors)."""
    mod = type(like).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy.empty(shape, dtype=dtype)
    if mod == "torch":
        import torch

        t = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
        return torch.empty(shape, dtype=t, device=like.device)
    if isinstance(like, _native.Tensor):
        return _native.Runtime(like.device).zeros(list(shape), np.dtype(dtype).name)
    raise KernelArgumentError(
        f"cannot allocate the outputs for a {type(like).__name__} input; pass the outputs too"
    )


class _Call:
    """One call's arguments split by device and described for the native binder."""

    def __init__(self, args, nin, what):
        self.gpu = any(_on_gpu(a) for a in args if not _is_scalar(a))
        self.like = next((a for a in args if not _is_scalar(a)), None)
        self.values = []
        self.descs = []
        for k, a in enumerate(args):
            name = f"{what} argument {k}"
            if _is_scalar(a):
                self.values.append(a)
                self.descs.append(_scalar_desc(a))
            elif self.gpu:
                if not _on_gpu(a):
                    raise KernelArgumentError(
                        f"{name} is on the host while other arguments are on a CUDA device; "
                        "move it first (kiln.asarray(x, device='cuda'))"
                    )
                d = DeviceArray(a, name)
                if not d.contiguous:
                    # the generated kernels address same-shaped arrays as C-contiguous
                    if k >= nin:
                        raise KernelArgumentError(
                            f"{name}: an output CUDA array must be C-contiguous"
                        )
                    d = DeviceArray(_contiguous(a), name)
                self.values.append(d)
                self.descs.append(("array", d.name, d.shape))
            else:
                h = _host_array(a, name)
                self.values.append(h)
                self.descs.append(("array", _dtype_name(h.dtype), h.shape))
        self.ins, self.in_descs = self.values[:nin], self.descs[:nin]
        self.outs, self.out_descs = self.values[nin:], self.descs[nin:]


class ElementwiseKernel:
    """User-defined element-wise kernel, as ``cupy.ElementwiseKernel``.

    ``in_params`` and ``out_params`` are ``[raw] TYPE NAME`` lists (``TYPE`` a dtype name or
    a placeholder such as ``T``, bound from the arguments); ``operation`` is the loop body in
    C, run for every element of the broadcast shape with each non-raw parameter naming its
    element, ``i`` the flat index and ``_ind.size()`` the size. Call with the inputs (and
    optionally every output); ``size=`` when every array is raw.
    """

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True,
                 preamble="", no_return=False, return_tuple=False, **kwargs):
        _check_name(name)
        self.name = self.__name__ = name
        self.operation = operation
        self.preamble = preamble
        self.reduce_dims = reduce_dims
        self.no_return = no_return
        self.return_tuple = return_tuple
        self.kwargs = kwargs
        self.options = tuple(kwargs.get("options", ()))
        self._k = _native._ElementwiseKernel(in_params, out_params, operation, name, preamble)
        self.nin, self.nout = self._k.nin, self._k.nout
        self.nargs = self.nin + self.nout
        self._cached_codes = {}
        self._binds = {}

    def __call__(self, *args, size=None, block_size=None, stream=None, **kwargs):
        if not kwargs and size is None and block_size is None:
            # the common call (CuPy arrays or kiln tensors, numbers) read natively; None:
            # nothing launched, take the general path below
            fast = self._k.call_fast(args, None, None, stream, self.options)
            if fast is not None:
                results, fresh = fast
                if fresh is not None:
                    self._cached_codes[fresh[0]] = fresh[1]
                if self.no_return:
                    return None
                if self.nout == 1 and not self.return_tuple:
                    return results[0]
                return tuple(results)
        if kwargs:
            raise TypeError(f"Wrong arguments {kwargs}")
        if block_size is not None and block_size <= 0:
            raise ValueError("block_size must be greater than zero")
        if len(args) not in (self.nin, self.nargs):
            raise KernelArgumentError(
                f"Wrong number of arguments for {self.name!r}. It must be either {self.nin} or "
                f"{self.nargs} (with outputs), but given {len(args)}."
            )
        c = _Call(args, self.nin, self.name)
        shape, out_dtypes = _bound(
            self._binds, (tuple(c.descs), size), lambda: self._k.bind(c.in_descs, c.out_descs, size)
        )
        key = tuple(d[1] for d in c.descs if d[0] == "array")
        outs = list(c.outs)
        if c.gpu:
            made = [] if outs else [_empty_like_caller(c.like, shape, dt) for dt in out_dtypes]
            outs = outs or [DeviceArray(o, "output") for o in made]
            src = self._k.launch_gpu(
                c.ins, outs, size, block_size, _stream_ptr(stream, c.like),
                _device_of([c.like]), list(self.options), bool(c.outs),
                key not in self._cached_codes,
            )
            if src is not None:
                self._cached_codes[key] = src
            results = made or list(args[self.nin:])
        else:
            if not outs:
                outs = [np.empty(shape, dtype=dt) for dt in out_dtypes]
            work = [o if o.flags.c_contiguous else np.ascontiguousarray(o) for o in outs]
            self._k.call_cpu(c.ins, work, size, bool(c.outs))
            for o, w in zip(outs, work):
                if o is not w:
                    np.copyto(o, w)
            if key not in self._cached_codes:
                # generated once per binding (setdefault would build the source every call)
                self._cached_codes[key] = self._k.cuda_source(c.in_descs, c.out_descs, size)
            results = outs if not c.outs else list(args[self.nin:])
        if self.no_return:
            return None
        if self.nout == 1 and not self.return_tuple:
            return results[0]
        return tuple(results)


class ReductionKernel:
    """User-defined reduction kernel, as ``cupy.ReductionKernel``.

    For every output element: ``a = identity``, then ``a = reduce_expr`` over the mapped
    inputs (``map_expr``) along the reduced axes (``a`` and ``b`` the two operands), then
    ``post_map_expr`` assigns the outputs from ``a``. Call with the inputs, ``axis=``
    (``None``, an int or a tuple) and ``keepdims=``.
    """

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity,
                 name="reduce_kernel", reduce_type=None, reduce_dims=True, preamble="",
                 options=()):
        _check_name(name)
        self.name = self.__name__ = name
        self.identity = identity
        self.map_expr, self.reduce_expr, self.post_map_expr = map_expr, reduce_expr, post_map_expr
        self.reduce_type = reduce_type
        self.preamble = preamble
        self.options = tuple(options)
        self._k = _native._ReductionKernel(
            in_params, out_params, map_expr, reduce_expr, post_map_expr,
            None if identity is None else str(identity), name, reduce_type, preamble,
        )
        self.nin, self.nout = self._k.nin, self._k.nout
        self.nargs = self.nin + self.nout
        self._cached_codes = {}
        self._binds = {}

    def __call__(self, *args, out=None, axis=None, keepdims=False, stream=None, **kwargs):
        if kwargs:
            raise TypeError(f"Wrong arguments {kwargs}")
        if len(args) not in (self.nin, self.nargs):
            raise KernelArgumentError(f"Wrong number of arguments for {self.name}")
        if out is not None:
            if self.nout != 1:
                raise NotImplementedError("out= with several outputs")
            if len(args) != self.nin:
                raise ValueError("cannot specify 'out' as both a positional and keyword argument")
            args = args + (out,)
        if isinstance(axis, (list, tuple)):
            axis = tuple(int(a) for a in axis)
        elif axis is not None:
            axis = (int(axis),)
        c = _Call(args, self.nin, self.name)
        shape, out_dtypes = _bound(
            self._binds,
            (tuple(c.descs), axis, bool(keepdims)),
            lambda: self._k.bind(c.in_descs, c.out_descs, axis, bool(keepdims)),
        )
        key = tuple(d[1] for d in c.in_descs if d[0] == "array")
        outs = list(c.outs)
        if c.gpu:
            made = [] if outs else [_empty_like_caller(c.like, shape, dt) for dt in out_dtypes]
            outs = outs or [DeviceArray(o, "output") for o in made]
            src = self._k.launch_gpu(
                c.ins, outs, axis, bool(keepdims), _stream_ptr(stream, c.like),
                _device_of([c.like]), list(self.options), key not in self._cached_codes,
            )
            if src is not None:
                self._cached_codes[key] = src
            results = made or list(args[self.nin:])
        else:
            if not outs:
                outs = [np.empty(shape, dtype=dt) for dt in out_dtypes]
            work = [o if o.flags.c_contiguous else np.ascontiguousarray(o) for o in outs]
            self._k.call_cpu(c.ins, work, axis, bool(keepdims))
            for o, w in zip(outs, work):
                if o is not w:
                    np.copyto(o, w)
            if key not in self._cached_codes:
                self._cached_codes[key] = self._k.cuda_source(
                    c.in_descs, c.out_descs, axis, bool(keepdims))
            results = outs if not c.outs else list(args[self.nin:])
        if self.nout == 1:
            return results[0]
        return tuple(results)


_BINDS_KEPT = 256


def _bound(binds, key, bind):
    """The output shape and dtypes of a call with argument descriptions ``key`` (dtypes,
    shapes, ``size`` or the axes): bound once per description, then found again."""
    try:
        return binds[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable description: bind every time
        key = None
    try:
        r = bind()
    except InvalidInputError as e:
        raise _retype(e) from None
    if key is not None:
        if len(binds) >= _BINDS_KEPT:
            binds.clear()
        binds[key] = r
    return r


def _stream_ptr(stream, like):
    """The CUstream to launch on: ``stream`` (an int or an object with ``.ptr`` or
    ``.cuda_stream``), else the current stream of the first array's library (CuPy, torch),
    else kiln's current stream (``None``)."""
    if stream is not None:
        for attr in ("ptr", "cuda_stream"):
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        return int(stream)
    mod = type(like).__module__.split(".")[0] if like is not None else ""
    if mod == "cupy":
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if mod == "torch":
        import torch

        return int(torch.cuda.current_stream(like.device).cuda_stream)
    return None


def _device_of(arrays):
    for a in arrays:
        if isinstance(a, _native.Tensor):
            return int(a.device.split(":")[1]) if ":" in a.device else 0
        dev = getattr(a, "__dlpack_device__", None)
        if dev is not None:
            try:
                return int(dev()[1])
            except Exception:
                pass
    return 0
