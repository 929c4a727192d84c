"""Users' CUDA C++ kernels with CuPy's API: ``RawModule`` and ``RawKernel``.

A source is compiled by NVRTC for the device's exact architecture on first use and cached on
disk under the same content hash as kiln's own kernels (a second process compiles nothing);
C++ template kernels are named by ``name_expressions``; compiled modules (cubin, PTX, fatbin)
load from a file or from bytes. A launch checks each argument against the kernel's parameter
list where kiln can read it from the source, else against the parameter sizes the driver
reports, and runs on the arrays' library's current stream. Errors are CuPy's: see
``_rawerrors.py``.

Where CuPy is loaded, sources compile with CuPy's include options (its headers such as
``<cupy/complex.cuh>``, its bundled CCCL and the CUDA toolkit's headers), as
``cupy.RawModule`` compiles them, so a source written for CuPy compiles unchanged.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import os
import re
import sys

import numpy as np

from . import _native
from ._rawerrors import CompileException, CUDADriverError  # noqa: F401  (re-exported)
from ._userkernel import DeviceArray, KernelArgumentError, _cupy_ndarray, _dtype_name, _on_gpu, _stream_ptr

# CuPy's translate_cucomplex: its include line, and the headers CuPy puts before the source
_CUCOMPLEX_INCLUDE = re.compile(r"\s*#\s*include\s*<\s*cuComplex\.h\s*>")
_CUPY_HEADERS = ("cupy/complex.cuh", "cupy/carray.cuh", "cupy/atomics.cuh",
                 "cupy/math_constants.h", "cupy/cuComplex_bridge.h")
# NumPy scalar types kiln converts as typed scalars; other NumPy scalars (complex, long
# double, structured) go as their bytes, to parameters kiln knows by size only
_SCALARS = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "bfloat16", "float32", "float64"}
_ATTRIBUTES = ("max_threads_per_block", "shared_size_bytes", "const_size_bytes",
               "local_size_bytes", "num_regs", "ptx_version", "binary_version",
               "cache_mode_ca", "max_dynamic_shared_size_bytes",
               "preferred_shared_memory_carveout")
_SETTABLE = ("max_dynamic_shared_size_bytes", "preferred_shared_memory_carveout")
# The native reading of a call (``_RawFunction.call``); off with KILN_RAWKERNEL_NATIVE_CALL=0
_NATIVE_CALL = os.environ.get("KILN_RAWKERNEL_NATIVE_CALL", "1") != "0"
# options asking for relocatable device code (dynamic parallelism), linked with libcudadevrt
_RDC = re.compile(r"^--?(dc|device-c|(rdc|relocatable-device-code)(=|\s+)true)$")


def _check_backend(backend, jitify):
    if backend != "nvrtc":
        raise ValueError(
            f"backend={backend!r}: kiln compiles with NVRTC only; use backend='nvrtc' (the "
            "default)")
    if jitify:
        raise NotImplementedError(
            "jitify=True: kiln compiles with NVRTC alone, without Jitify; give NVRTC the "
            "headers' directories with options=('-I<dir>',) instead")


def _check_options(options):
    if isinstance(options, str):
        raise TypeError(f"options must be a tuple of strings, e.g. ({options!r},)")
    options = tuple(options)
    for o in options:
        if not isinstance(o, str):
            raise TypeError(f"options must be strings, got {o!r}")
    return options


def _current_device():
    """CuPy's current device where CuPy is loaded, else 0."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            return int(cupy.cuda.runtime.getDevice())
        except Exception:  # a CuPy without a usable device: kiln reports its own error
            pass
    return 0


def _cupy_include_dir():
    """CuPy's header directory (``cupy/_core/include``), found without importing CuPy."""
    cupy = sys.modules.get("cupy")
    origin = getattr(cupy, "__file__", None)
    if origin is None:
        try:
            spec = importlib.util.find_spec("cupy")
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    if not origin:
        return None
    inc = os.path.join(os.path.dirname(origin), "_core", "include")
    return inc if os.path.isdir(inc) else None


_CUDA_ROOTS = ("CUDA_PATH", "CUDA_HOME")


def _cuda_roots():
    return [r for r in [os.environ.get(v) for v in _CUDA_ROOTS] + ["/usr/local/cuda"] if r]


def _cuda_include_dir():
    for root in _cuda_roots():
        if os.path.isfile(os.path.join(root, "include", "cuda.h")):
            return os.path.join(root, "include")
    return None


def _device_runtime(options):
    """The CUDA toolkit's ``libcudadevrt.a`` where ``options`` ask for relocatable device
    code (``-dc``, ``-rdc=true``: dynamic parallelism), which kiln links with it, as CuPy
    does; else None."""
    if not any(_RDC.match(o.strip()) for o in options):
        return None
    for root in _cuda_roots():
        for sub in ("lib64", "lib"):
            path = os.path.join(root, sub, "libcudadevrt.a")
            if os.path.isfile(path):
                return path
    if "cupy" in sys.modules:
        try:
            return importlib.import_module("cupy.cuda.compiler")._get_cudadevrt_path()
        except Exception:  # CuPy cannot find it either: the error below
            pass
    raise ValueError(
        "relocatable device code (-dc, -rdc=true) is linked with the CUDA toolkit's "
        "libcudadevrt.a, which kiln cannot find: set CUDA_PATH to the toolkit's root")


def _compile_options(options, required=False):
    """``options`` with CuPy's include options where CuPy is loaded (or ``required``, for
    translate_cucomplex): CuPy's own ``assemble_cupy_compiler_options`` when it has it, else
    its headers, its bundled CCCL and the CUDA toolkit's headers."""
    if "cupy" in sys.modules:
        try:
            core = importlib.import_module("cupy._core.core")
            return tuple(core.assemble_cupy_compiler_options(tuple(options)))
        except Exception:  # an older or partial CuPy: the directories by hand, below
            pass
    elif not required:
        return tuple(options)
    inc = _cupy_include_dir()
    if inc is None:
        if required:
            raise ValueError(
                "translate_cucomplex=True compiles cuComplex.h code with CuPy's headers "
                "(cupy/cuComplex_bridge.h), and CuPy is not installed; install it, or include "
                "<cuComplex.h> from the CUDA toolkit with options=('-I<cuda>/include',)")
        return tuple(options)
    cccl = tuple(f"-I{os.path.join(inc, 'cupy', '_cccl', d)}" for d in ("cub", "thrust", "libcudacxx")
                 if os.path.isdir(os.path.join(inc, "cupy", "_cccl", d)))
    cuda = _cuda_include_dir()
    return cccl + tuple(options) + (f"-I{inc}",) + ((f"-I{cuda}",) if cuda else ())


def _translate_cucomplex(code):
    """CuPy's translate_cucomplex: ``#include <cuComplex.h>`` becomes CuPy's bridge header,
    which maps cuComplex's types and functions onto CuPy's ``complex<T>``."""
    lines = [
        "#include <cupy/cuComplex_bridge.h>  // translate_cucomplex\n"
        if _CUCOMPLEX_INCLUDE.match(line) else line
        for line in code.splitlines(keepends=True)
    ]
    return "".join(f"#include <{h}>\n" for h in _CUPY_HEADERS) + "".join(lines)


class GlobalPointer:
    """A module's global variable on the device (``RawModule.get_global`` without CuPy):
    ``ptr`` (its address, also ``int(p)``), ``size`` in bytes and ``device_id``; it keeps the
    module loaded, and passes as a pointer argument to a kernel. With CuPy loaded,
    ``get_global`` returns a ``cupy.cuda.MemoryPointer`` instead, as CuPy does."""

    __slots__ = ("ptr", "size", "device_id", "_owner")

    def __init__(self, ptr, size, device_id, owner):
        self.ptr, self.size, self.device_id, self._owner = int(ptr), int(size), int(device_id), owner

    def __int__(self):
        return self.ptr

    def __repr__(self):
        return f"GlobalPointer(ptr=0x{self.ptr:x}, size={self.size}, device_id={self.device_id})"


def _is_memory_pointer(a):
    """CuPy's ``MemoryPointer`` (or kiln's ``GlobalPointer``): an address, no array."""
    if isinstance(a, GlobalPointer):
        return True
    return (type(a).__module__.split(".")[0] == "cupy" and type(a).__name__ == "MemoryPointer"
            and hasattr(a, "ptr"))


def _dim3(v, what):
    if type(v) is tuple and len(v) == 1 and type(v[0]) is int and v[0] >= 0:
        return (v[0], 1, 1)  # the common call, `k((blocks,), (threads,), args)`
    if isinstance(v, (int, np.integer)):
        v = (v,)
    v = tuple(map(int, v))
    if not 1 <= len(v) <= 3:
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, got {v}")
    return v + (1,) * (3 - len(v))


def _raw_args(args):
    """``(launch arguments, owners)`` from a RawKernel call's ``args`` tuple: device arrays
    and pointers as ``("ptr", address, dtype, length)``, NumPy scalars as typed scalars (or
    their bytes), Python ints untyped, floats as float64, complex numbers as complex128's
    bytes; ``owners`` are the arguments that hold device memory."""
    out, owners = [], []
    nd = _cupy_ndarray()
    for k, a in enumerate(args):
        if nd is not None and type(a) is nd:
            # CuPy's own array, the common argument: its attributes directly (its
            # __cuda_array_interface__ builds a dictionary a call)
            out.append(("ptr", a.data.ptr, _dtype_name(a.dtype), a.size))
            owners.append(a)
        elif a is None:
            out.append(("ptr", 0, None, 0))
        elif isinstance(a, (bool, np.bool_)):
            out.append(("scalar", "bool", bool(a)))
        elif isinstance(a, np.generic):
            name = _dtype_name(type(a))
            if name in _SCALARS:
                out.append(("scalar", name, a.item()))
            else:
                out.append(("bytes", a.tobytes(), name))
        elif isinstance(a, int):
            if not -(1 << 127) <= a < (1 << 127):
                raise KernelArgumentError(f"argument {k}: the integer {a} is beyond any C type")
            out.append(("int", a))
        elif isinstance(a, float):
            out.append(("scalar", "float64", a))
        elif isinstance(a, complex):
            out.append(("bytes", np.complex128(a).tobytes(), "complex128"))
        elif isinstance(a, np.ndarray):
            raise KernelArgumentError(
                f"argument {k}: a NumPy array is host memory; a CUDA kernel needs a device array "
                "(kiln.asarray(x, device='cuda'), cupy.asarray(x), torch.as_tensor(x, device='cuda'))"
            )
        elif _on_gpu(a):
            cai = None if isinstance(a, _native.Tensor) else getattr(a, "__cuda_array_interface__", None)
            if cai is not None:
                # the address, dtype and size are all a raw launch needs (strides do not
                # matter to a pointer), read without DeviceArray's checks of the layout
                out.append(("ptr", int(cai["data"][0]), _dtype_name(cai["typestr"]),
                            math.prod(cai["shape"])))
            else:
                d = DeviceArray(a, f"argument {k}")
                out.append(("ptr", d.ptr, d.dtype.name, math.prod(d.shape)))
            owners.append(a)
        elif _is_memory_pointer(a):
            out.append(("ptr", int(a.ptr), None, 0))
            owners.append(a)
        else:
            raise KernelArgumentError(
                f"argument {k}: unsupported type {type(a).__name__}; pass a CUDA array (CuPy, "
                "torch, kiln, or anything with __cuda_array_interface__), a cupy.cuda."
                "MemoryPointer, a NumPy scalar or a Python number")
    return out, owners


def _device_of(owners):
    nd = _cupy_ndarray()
    for a in owners:
        if nd is not None and type(a) is nd:
            return a.device.id
        if isinstance(a, _native.Tensor):
            return int(a.device.split(":")[1]) if ":" in a.device else 0
        if _is_memory_pointer(a):
            return int(getattr(a, "device_id", 0))
        dev = getattr(a, "__dlpack_device__", None)
        if dev is not None:
            try:
                return int(dev()[1])
            except Exception:  # a producer that cannot say: the next argument's device
                pass
    return _current_device()


def _memory_pointer(ptr, size, owner, device):
    """A module global as CuPy returns it (a ``MemoryPointer`` over ``UnownedMemory`` that
    keeps the module alive) where CuPy is loaded, else a :class:`GlobalPointer`."""
    if "cupy" in sys.modules:
        try:
            from cupy.cuda.memory import MemoryPointer, UnownedMemory

            return MemoryPointer(UnownedMemory(ptr, size, owner, device), 0)
        except ImportError:
            pass
    return GlobalPointer(ptr, size, device, owner)


class RawModule:
    """A CUDA C++ module, as ``cupy.RawModule``: ``get_function(name)`` returns a
    :class:`RawKernel` of it, ``get_global(name)`` a pointer to a global variable.

    ``code`` is CUDA C++ (compiled with NVRTC for the device's exact architecture on first
    use, cached on disk: a second process compiles nothing), or the bytes of a compiled
    module (cubin, PTX, fatbin); ``path`` a compiled module's file. ``name_expressions``
    names C++ kernels that are not ``extern "C"`` (template instantiations such as
    ``"my_kernel<float>"``), each then a valid ``get_function`` name. A compile error is
    ``kiln.CompileException`` (NVRTC's log), a name the module lacks ``kiln.CUDADriverError``
    (``CUDA_ERROR_NOT_FOUND``); both are CuPy's classes too where CuPy is loaded."""

    def __init__(self, code=None, *, path=None, options=(), backend="nvrtc",
                 translate_cucomplex=False, enable_cooperative_groups=False,
                 name_expressions=None, jitify=None, log_stream=None):
        if (code is None) == (path is None):
            raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
        _check_backend(backend, jitify)
        if code is not None and not isinstance(code, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"code must be CUDA C++ source (str) or a compiled module (bytes), "
                            f"not {type(code).__name__}")
        binary = path is not None or not isinstance(code, str)
        if name_expressions is not None:
            if isinstance(name_expressions, str):
                raise TypeError("name_expressions must be a sequence of strings, e.g. "
                                f"[{name_expressions!r}]")
            if binary:
                raise ValueError("need CUDA C++ code for the requested kernels")
            name_expressions = tuple(name_expressions)
            if not all(isinstance(e, str) for e in name_expressions):
                raise TypeError("name_expressions must be strings")
        if translate_cucomplex and binary:
            raise ValueError("translate_cucomplex applies to CUDA C++ code, not a compiled module")
        self.code = code
        self.file_path = None if path is None else os.fspath(path)
        self.options = () if path is not None else _check_options(options)
        self.backend = backend
        self.translate_cucomplex = bool(translate_cucomplex)
        self.enable_cooperative_groups = bool(enable_cooperative_groups)
        self.name_expressions = name_expressions
        self.jitify = jitify
        self._log_stream = log_stream
        self._modules = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_modules"] = {}
        state["_log_stream"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._modules = {}

    def _compiled_source(self):
        """The source and options NVRTC gets."""
        code = self.code
        if self.translate_cucomplex:
            code = _translate_cucomplex(code)
        return code, _compile_options(self.options, required=self.translate_cucomplex)

    def _module(self, device, log_stream=None):
        """The native module on ``device``, loaded on first use (compiled afresh when
        ``log_stream`` is given, to have a log to write)."""
        log_stream = log_stream if log_stream is not None else self._log_stream
        m = self._modules.get(device)
        if m is not None and log_stream is None:
            return m
        if self.file_path is not None:
            m = _native._RawModule.from_file(self.file_path, device)
        elif not isinstance(self.code, str):
            m = _native._RawModule.from_image(bytes(self.code), device, "image")
        else:
            code, options = self._compiled_source()
            m = _native._RawModule(code, list(options), device, list(self.name_expressions or ()),
                                   log_stream is not None, _device_runtime(options))
            if log_stream is not None:
                log_stream.write(m.log or "")
                self._log_stream = None
        self._modules[device] = m
        return m

    def compile(self, log_stream=None):
        """Compile now (on the current device) rather than at the first use; with
        ``log_stream`` (a text stream such as ``sys.stdout``), compile even if the cache
        holds the module, and write NVRTC's log (its warnings) there."""
        self._module(_current_device(), log_stream)

    def get_function(self, name):
        """The kernel ``name`` (an ``extern "C"`` name or one of ``name_expressions``),
        loaded on the current device now: a name the module lacks raises
        ``CUDADriverError`` (``CUDA_ERROR_NOT_FOUND``)."""
        if not isinstance(name, str):
            raise TypeError(f"a kernel name is a str, not {type(name).__name__}")
        k = RawKernel._of_module(self, name)
        k._function(_current_device())
        return k

    def get_global(self, name):
        """The device address of the global (``__device__`` or ``__constant__``) variable
        ``name``: a ``cupy.cuda.MemoryPointer`` where CuPy is loaded (wrap it as
        ``cupy.ndarray(shape, dtype, memptr)``), else a :class:`GlobalPointer`."""
        device = _current_device()
        m = self._module(device)
        ptr, size = m.get_global(name)
        return _memory_pointer(ptr, size, m, device)


class RawKernel:
    """A user's CUDA kernel, as ``cupy.RawKernel``: ``k(grid, block, args, shared_mem=0,
    stream=None)``. ``args`` are CUDA arrays (CuPy, torch, kiln tensors, anything with
    ``__cuda_array_interface__``; any dtype), ``cupy.cuda.MemoryPointer``s and scalars
    (NumPy scalars for an exact C type; Python ints and floats converted exactly or
    refused), checked against the kernel's parameter list, or, where kiln cannot read it
    from the source (macros, templates, compiled modules), against the parameter sizes the
    driver reports. The launch runs on ``stream`` or the arrays' library's current stream,
    with ``cuLaunchCooperativeKernel`` where ``enable_cooperative_groups``. The kernel's
    attributes are ``attributes`` (a dict) and one property each, as in CuPy."""

    def __init__(self, code, name, options=(), backend="nvrtc", *, translate_cucomplex=False,
                 enable_cooperative_groups=False, jitify=None):
        _check_backend(backend, jitify)
        if not isinstance(name, str):
            raise TypeError(f"a kernel name is a str, not {type(name).__name__}")
        self.code = code
        self.name = self.__name__ = name
        self.options = _check_options(options)
        self.backend = backend
        self.translate_cucomplex = bool(translate_cucomplex)
        self.enable_cooperative_groups = bool(enable_cooperative_groups)
        self.jitify = jitify
        self.file_path = None
        self.name_expressions = None
        self._mod = None
        self._functions = {}
        self._last = None  # the native function of the last launch's device

    @classmethod
    def _of_module(cls, mod, name):
        k = cls.__new__(cls)
        k.code, k.name, k.__name__ = mod.code, name, name
        k.options, k.backend = mod.options, mod.backend
        k.translate_cucomplex = mod.translate_cucomplex
        k.enable_cooperative_groups = mod.enable_cooperative_groups
        k.jitify = mod.jitify
        k.file_path, k.name_expressions = mod.file_path, mod.name_expressions
        k._mod, k._functions, k._last = mod, {}, None
        return k

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_functions"] = {}
        state["_last"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._functions = {}
        self._last = None

    def _module_of(self):
        if self._mod is None:
            self._mod = RawModule(code=self.code, options=self.options, backend=self.backend,
                                  translate_cucomplex=self.translate_cucomplex,
                                  enable_cooperative_groups=self.enable_cooperative_groups)
        return self._mod

    def _function(self, device, log_stream=None):
        f = self._functions.get(device)
        if f is None or log_stream is not None:
            f = self._functions[device] = self._module_of()._module(device, log_stream).function(self.name)
        return f

    @property
    def kernel(self):
        """The compiled kernel on the current device (compiles it if needed)."""
        return self._function(_current_device())

    def compile(self, log_stream=None):
        """Compile now rather than at the first launch; with ``log_stream``, compile even if
        the cache holds the module, and write NVRTC's log there."""
        self._functions = {}
        self._last = None
        self._function(_current_device(), log_stream)

    @property
    def attributes(self):
        """The kernel's attributes on the current device, as CuPy's dict: max_threads_per_block,
        shared_size_bytes, const_size_bytes, local_size_bytes, num_regs, ptx_version,
        binary_version, cache_mode_ca, max_dynamic_shared_size_bytes,
        preferred_shared_memory_carveout."""
        return dict(self.kernel.attributes())

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None):
        # the common call (CuPy arrays or kiln tensors on the device of the last call,
        # NumPy scalars, Python numbers) is read and launched in one native step; the rest
        # takes the general path below, which knows every argument and words every error
        last = self._last
        if last is not None and _NATIVE_CALL and last.call(grid, block, args, shared_mem, stream,
                                          self.enable_cooperative_groups):
            return
        if not isinstance(args, (tuple, list)):
            raise TypeError("args must be a tuple")
        launch, owners = _raw_args(args)
        f = self._function(_device_of(owners))
        f.launch(
            _dim3(grid, "grid"), _dim3(block, "block"), launch, int(shared_mem),
            _stream_ptr(stream, owners[0] if owners else None),
            self.enable_cooperative_groups,
        )
        self._last = f


def _attribute(name):
    def get(self):
        return self.kernel.attributes()[name]

    def put(self, value):
        self.kernel.set_attribute(name, int(value))

    doc = f"The kernel's ``{name}`` on the current device (cuFuncGetAttribute)"
    if name in _SETTABLE:
        return property(get, put, doc=doc + "; settable (cuFuncSetAttribute).")
    return property(get, doc=doc + ".")


for _name in _ATTRIBUTES:
    setattr(RawKernel, _name, _attribute(_name))
del _name
