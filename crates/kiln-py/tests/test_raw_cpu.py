"""kiln.RawKernel / kiln.RawModule without a GPU: CuPy's exception classes (with and without
CuPy loaded), the keyword arguments CuPy accepts and the ones kiln refuses, argument packing,
pickling, and NVRTC compiles (name expressions, compile errors) where libnvrtc loads.
The launches are in test_raw_gpu.py."""

import io
import os
import pickle
import sys
import types

import numpy as np
import pytest

import kiln
from kiln import _native, _rawerrors, _rawkernel

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

TEMPLATE = r"""
template<typename T>
__global__ void my_sqrt(T* input, int N) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < N) input[x] *= input[x];
}
__global__ void my_func(double* input, int N) {}
"""


def _nvrtc_or_skip():
    try:
        _native._raw_compile('extern "C" __global__ void k() {}', [], "sm_80")
    except kiln.NoDeviceError as e:
        if os.environ.get("KILN_REQUIRE_NVRTC") == "1":
            pytest.fail(f"KILN_REQUIRE_NVRTC=1 but {e}")
        pytest.skip(f"libnvrtc cannot be loaded: {e}")


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in for CuPy's exception classes (CuPy's constructors and bases), loaded as
    ``cupy`` so kiln's errors take them as bases, as they do with the real CuPy."""

    class CompileException(Exception):
        def __init__(self, msg, source, name, options, backend="nvrtc"):
            self._msg = msg
            super().__init__()

        def __str__(self):
            return self._msg

    class CUDADriverError(RuntimeError):
        def __init__(self, status):
            raise AssertionError("kiln must not call CuPy's constructor (it asks the driver)")

    # CuPy's layout: `cupy.cuda.compiler` is a module of its own, while `cupy.cuda.driver`
    # is cupy_backends' module bound as an attribute in cupy/cuda/__init__.py, so
    # sys.modules has no "cupy.cuda.driver" and importing that name fails
    cupy = types.ModuleType("cupy")
    cuda = types.ModuleType("cupy.cuda")
    compiler = types.ModuleType("cupy.cuda.compiler")
    driver = types.ModuleType("cupy_backends.cuda.api.driver")
    compiler.CompileException = CompileException
    driver.CUDADriverError = CUDADriverError
    cupy.cuda, cuda.compiler, cuda.driver = cuda, compiler, driver
    for name, mod in [("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.compiler", compiler),
                      ("cupy_backends.cuda.api.driver", driver)]:
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "cupy.cuda.driver", raising=False)
    return types.SimpleNamespace(CompileException=CompileException, CUDADriverError=CUDADriverError)


def test_error_classes_without_cupy(monkeypatch):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    e = _rawerrors._compile_error("log: error", "src", "k.cu", ["-DX"])
    assert type(e) is kiln.CompileException
    assert isinstance(e, kiln.KilnError) and str(e) == e.get_message() == "log: error"
    assert (e.source, e.name, e.options, e.backend) == ("src", "k.cu", ("-DX",), "nvrtc")
    d = _rawerrors._driver_error(500, "CUDA_ERROR_NOT_FOUND: named symbol not found")
    assert type(d) is kiln.CUDADriverError and d.status == 500
    assert isinstance(d, (kiln.KilnError, RuntimeError))
    assert str(d).startswith("CUDA_ERROR_NOT_FOUND")
    fault = _rawerrors._driver_error(700, "CUDA_ERROR_ILLEGAL_ADDRESS: ...", "fault")
    assert isinstance(fault, kiln.DeviceFaultError) and isinstance(fault, kiln.CUDADriverError)
    oom = _rawerrors._driver_error(2, "CUDA_ERROR_OUT_OF_MEMORY: ...", "oom")
    assert isinstance(oom, (kiln.OutOfMemoryError, MemoryError, kiln.CUDADriverError))
    for x in (e, d, fault, oom):
        y = pickle.loads(pickle.dumps(x))
        assert type(y) is type(x) and str(y) == str(x)
    buf = io.StringIO()
    _rawerrors._compile_error("boom", "line one\nline two", "k.cu", ["-DX"]).dump(buf)
    assert "NVRTC compilation error: boom" in buf.getvalue() and "2 line two" in buf.getvalue()


def test_errors_are_cupys_classes_when_cupy_is_loaded(fake_cupy):
    e = _rawerrors._compile_error("k.cu(3): error: precision not supported", "src", "k.cu", [])
    assert isinstance(e, fake_cupy.CompileException) and isinstance(e, kiln.CompileException)
    assert "precision not supported" in str(e) and e.get_message() == str(e)
    d = _rawerrors._driver_error(500, "CUDA_ERROR_NOT_FOUND: named symbol not found (k)")
    assert isinstance(d, fake_cupy.CUDADriverError) and isinstance(d, kiln.CUDADriverError)
    assert d.status == 500 and "named symbol not found" in str(d)
    fault = _rawerrors._driver_error(719, "CUDA_ERROR_LAUNCH_FAILED: ...", "fault")
    assert isinstance(fault, (fake_cupy.CUDADriverError, kiln.DeviceFaultError))
    with pytest.raises(fake_cupy.CUDADriverError):
        raise d
    # one class per combination, named as kiln's
    assert type(_rawerrors._driver_error(1, "x")) is type(d)
    assert type(d).__name__ == "CUDADriverError"


def test_keyword_arguments_cupy_accepts_and_kiln_refuses():
    with pytest.raises(TypeError, match="Exactly one"):
        kiln.RawModule()
    with pytest.raises(TypeError, match="Exactly one"):
        kiln.RawModule(code=SAXPY, path="test.cubin")
    with pytest.raises(ValueError, match="NVRTC only"):
        kiln.RawModule(code=SAXPY, backend="nvcc")
    with pytest.raises(ValueError, match="NVRTC only"):
        kiln.RawKernel(SAXPY, "saxpy", backend="nvcc")
    with pytest.raises(NotImplementedError, match="Jitify"):
        kiln.RawKernel(SAXPY, "saxpy", jitify=True)
    with pytest.raises(NotImplementedError, match="Jitify"):
        kiln.RawModule(code=SAXPY, jitify=True)
    with pytest.raises(ValueError, match="CUDA C\\+\\+ code"):
        kiln.RawModule(path="k.cubin", name_expressions=["k<int>"])
    with pytest.raises(TypeError, match="sequence of strings"):
        kiln.RawModule(code=TEMPLATE, name_expressions="my_sqrt<int>")
    with pytest.raises(TypeError, match="tuple of strings"):
        kiln.RawKernel(SAXPY, "saxpy", options="-DN=1")
    with pytest.raises(TypeError, match="code must be"):
        kiln.RawModule(code=3)
    # accepted as CuPy accepts them (jitify=False and None: NVRTC alone)
    k = kiln.RawKernel(SAXPY, "saxpy", ("-DN=1",), "nvrtc", translate_cucomplex=False,
                       enable_cooperative_groups=True, jitify=False)
    assert k.enable_cooperative_groups and k.options == ("-DN=1",) and k.__name__ == "saxpy"
    m = kiln.RawModule(code=TEMPLATE, options=("-std=c++17",), name_expressions=("my_sqrt<int>",),
                       enable_cooperative_groups=False, jitify=None)
    assert m.name_expressions == ("my_sqrt<int>",)
    assert kiln.RawModule(path=os.path.join("some", "k.cubin")).file_path.endswith("k.cubin")
    assert kiln.RawModule(code=b"\x7fELF").code == b"\x7fELF"


def test_translate_cucomplex_uses_cupys_bridge_header():
    src = "#include <cuComplex.h>\n  # include < cuComplex.h >\nextern \"C\" __global__ void k() {}\n"
    out = _rawkernel._translate_cucomplex(src)
    assert "cuComplex.h" not in out.replace("cuComplex_bridge.h", "")
    assert out.count("#include <cupy/cuComplex_bridge.h>") == 3  # the prelude's and two lines
    assert out.startswith("#include <cupy/complex.cuh>\n")
    assert out.endswith("extern \"C\" __global__ void k() {}\n")


def test_cupy_include_options_only_where_cupy_is_loaded(monkeypatch, fake_cupy):
    core = types.ModuleType("cupy._core.core")
    core.assemble_cupy_compiler_options = lambda opts: ("-I/cccl",) + opts + ("-I/cupy/include",)
    monkeypatch.setitem(sys.modules, "cupy._core", types.ModuleType("cupy._core"))
    monkeypatch.setitem(sys.modules, "cupy._core.core", core)
    assert _rawkernel._compile_options(("-DN=1",)) == ("-I/cccl", "-DN=1", "-I/cupy/include")
    monkeypatch.delitem(sys.modules, "cupy")
    assert _rawkernel._compile_options(("-DN=1",)) == ("-DN=1",)


class _CAI:
    """Any producer of __cuda_array_interface__ (Numba, ...)."""

    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": typestr, "version": 3}


def test_arguments_are_described_as_cupy_passes_them():
    MemoryPointer = type("MemoryPointer", (), {"__module__": "cupy.cuda.memory"})
    mp = MemoryPointer()
    mp.ptr, mp.device_id = 0x7000, 0
    gp = kiln.GlobalPointer(0x8000, 400, 0, None)
    args = (None, True, np.bool_(False), np.float32(1.5), np.int8(-3), np.uint64(7),
            np.float16(0.5), 100, -(2**40), 2.5, 2 + 3j, np.complex64(1 - 2j),
            _CAI(0x9000, (3, 4), "<f8"), _CAI(0xA000, (5,), "<c8"), mp, gp)
    out, owners = _rawkernel._raw_args(args)
    assert out[:12] == [
        ("ptr", 0, None, 0), ("scalar", "bool", True), ("scalar", "bool", False),
        ("scalar", "float32", 1.5), ("scalar", "int8", -3), ("scalar", "uint64", 7),
        ("scalar", "float16", 0.5), ("int", 100), ("int", -(2**40)), ("scalar", "float64", 2.5),
        ("bytes", np.complex128(2 + 3j).tobytes(), "complex128"),
        ("bytes", np.complex64(1 - 2j).tobytes(), "complex64"),
    ]
    assert out[12:] == [("ptr", 0x9000, "float64", 12), ("ptr", 0xA000, "complex64", 5),
                        ("ptr", 0x7000, None, 0), ("ptr", 0x8000, None, 0)]
    assert owners[2:] == [mp, gp] and _rawkernel._device_of([mp]) == 0
    with pytest.raises(kiln.KernelArgumentError, match="host memory"):
        _rawkernel._raw_args((np.zeros(3),))
    with pytest.raises(kiln.KernelArgumentError, match="beyond any C type"):
        _rawkernel._raw_args((1 << 200,))
    with pytest.raises(kiln.KernelArgumentError, match="unsupported type list"):
        _rawkernel._raw_args(([1, 2],))
    assert int(gp) == 0x8000 and "size=400" in repr(gp)


def test_kernels_and_modules_pickle_without_their_compiled_code():
    k = kiln.RawKernel(SAXPY, "saxpy", options=("-DN=1",), enable_cooperative_groups=True)
    k._functions[0] = object()  # stands for a loaded function: never pickled
    k2 = pickle.loads(pickle.dumps(k))
    assert (k2.code, k2.name, k2.options, k2.enable_cooperative_groups) == (SAXPY, "saxpy", ("-DN=1",), True)
    assert k2._functions == {}
    m = kiln.RawModule(code=TEMPLATE, name_expressions=["my_sqrt<int>"], log_stream=io.StringIO())
    m._modules[0] = object()
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.name_expressions == ("my_sqrt<int>",) and m2._modules == {}
    g = kiln.RawKernel._of_module(m2, "my_sqrt<int>")
    g2 = pickle.loads(pickle.dumps(g))
    assert g2.name == "my_sqrt<int>" and g2._mod.code == TEMPLATE


def test_attributes_are_cupys_properties():
    for name in ("max_threads_per_block", "shared_size_bytes", "const_size_bytes",
                 "local_size_bytes", "num_regs", "ptx_version", "binary_version",
                 "cache_mode_ca", "max_dynamic_shared_size_bytes",
                 "preferred_shared_memory_carveout"):
        prop = getattr(kiln.RawKernel, name)
        assert isinstance(prop, property), name
        assert (prop.fset is not None) == (name in ("max_dynamic_shared_size_bytes",
                                                    "preferred_shared_memory_carveout")), name


def test_name_expressions_compile_to_their_symbols():
    _nvrtc_or_skip()
    cubin, log, mapping = _native._raw_compile(
        TEMPLATE, [], "sm_90", ["my_sqrt<int>", "my_sqrt<float>", "my_func", "my_sqrt<int>"])
    assert mapping == {"my_sqrt<int>": "_Z7my_sqrtIiEvPT_i",
                       "my_sqrt<float>": "_Z7my_sqrtIfEvPT_i", "my_func": "_Z7my_funcPdi"}
    assert cubin[:4] == b"\x7fELF" and all(s.encode() in cubin for s in mapping.values())
    with pytest.raises(kiln.CompileException, match="name expression"):
        _native._raw_compile(TEMPLATE, [], "sm_90", ["my_sqrt<not_a_type>"])


def test_compile_errors_carry_nvrtc_log_and_warnings_come_back():
    _nvrtc_or_skip()
    # CuPy's _test_source3 with an unsupported PRECISION
    src = "#if PRECISION == 2\n#define TYPE double\n#else\n#error precision not supported\n#endif\n"
    with pytest.raises(kiln.CompileException) as ex:
        _native._raw_compile(src, ["-DPRECISION=3"], "sm_90")
    e = ex.value
    assert "precision not supported" in str(e) and "(4)" in e.get_message()
    assert e.source == src and "-DPRECISION=3" in e.options and e.name.endswith(".cu")
    _, log, _ = _native._raw_compile(
        'extern "C" __global__ void k(float* y) { int j; y[0] = 1; }', [], "sm_80")
    assert "warning" in log and '"j"' in log
    # relocatable device code compiles only where it is linked with the device runtime
    with pytest.raises(kiln.InvalidInputError, match="libcudadevrt"):
        _native._raw_compile(SAXPY, ["-dc"], "sm_90")


def test_relocatable_code_finds_the_device_runtime(monkeypatch, tmp_path):
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert _rawkernel._device_runtime(("-DN=1", "-rdc=false")) is None
    monkeypatch.setattr(_rawkernel, "_cuda_roots", lambda: [str(tmp_path)])
    with pytest.raises(ValueError, match="CUDA_PATH"):
        _rawkernel._device_runtime(("-dc",))
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libcudadevrt.a").write_bytes(b"!<arch>\n")
    for rdc in ("-dc", "--device-c", "-rdc=true", "--relocatable-device-code=true"):
        assert _rawkernel._device_runtime(("-DN=1", rdc)) == str(tmp_path / "lib64" / "libcudadevrt.a")
