"""kiln.RawKernel / kiln.RawModule launches on a CUDA device with CuPy arrays, for what CuPy's
test_raw.py needs beyond extern "C" kernels: C++ templates by name expression, kernels whose
parameter types kiln cannot read (checked by the sizes the driver reports), complex values,
attributes, module globals, compiled modules from bytes and files, CuPy's exceptions,
cooperative launches, NVRTC's log and pickling. Skips without a GPU (fails instead with
KILN_REQUIRE_GPU=1); scripts/py-gpu-check.sh runs it."""

import io
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import kiln
from kiln import _native

from test_gpu import cupy  # noqa: F401  (fixture)

TEMPLATE = r"""
template<typename T>
__global__ void my_sqrt(T* input, int N) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < N) input[x] *= input[x];
}
__global__ void my_func(double* input, int N) {
  unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x < N) input[x] *= input[x];
}
"""

MACRO = r"""
#define TYPE double
extern "C" __global__ void add(const TYPE* x, TYPE* y, \
                               unsigned int n) {
    unsigned int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) y[i] += x[i];
}
"""

COMPLEX = r"""
struct c64 { float re, im; };
struct c128 { double re, im; };
extern "C" __global__ void add64(const c64* a, c64 s, c64* out, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) { out[i].re = a[i].re + s.re; out[i].im = a[i].im + s.im; }
}
extern "C" __global__ void add128(const c128* a, c128 s, c128* out, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) { out[i].re = a[i].re + s.re; out[i].im = a[i].im + s.im; }
}
"""

CONST = r"""
extern "C"{
__constant__ float some_array[100];
__global__ void multiply_by_const(float* x, int N) {
    int id = threadIdx.x + blockIdx.x * blockDim.x;
    if (id < N) x[id] *= some_array[id];
}
}
"""

GRID_SYNC = r"""
#include <cooperative_groups.h>
extern "C" __global__ void grid_sync(const float* x1, const float* x2, float* y, int n) {
    namespace cg = cooperative_groups;
    cg::grid_group grid = cg::this_grid();
    int size = gridDim.x * blockDim.x;
    int tid = blockDim.x * blockIdx.x + threadIdx.x;
    for (int i = tid; i < n; i += size) y[i] = x1[i];
    cg::sync(grid);
    for (int i = n - 1 - tid; i >= 0; i -= size) y[i] += x2[i];
}
"""

SUM = r"""
extern "C" __global__ void test_sum(const float* x1, const float* x2, float* y, unsigned int N) {
    int tid = blockDim.x * blockIdx.x + threadIdx.x;
    int unused;  // NVRTC warns
    if (tid < N) y[tid] = x1[tid] + x2[tid];
}
"""


def _arch(cupy):
    return f"sm_{cupy.cuda.Device().compute_capability}"


def test_template_kernels_by_name_expression(cupy):
    names = ["my_sqrt<int>", "my_sqrt<float>", "my_sqrt<unsigned int>", "my_func"]
    mod = kiln.RawModule(code=TEMPLATE, name_expressions=names)
    for name, dtype in zip(names, (cupy.int32, cupy.float32, cupy.uint32, cupy.float64)):
        x = cupy.arange(1, 11, dtype=dtype)
        k = mod.get_function(name)
        k((1,), (10,), (x, 10))
        np.testing.assert_array_equal(cupy.asnumpy(x), np.arange(1, 11, dtype=dtype) ** 2)
    # a scalar template argument gives a typed parameter list: the wrong array is refused
    with pytest.raises(kiln.InvalidInputError, match="pointer to int"):
        mod.get_function("my_sqrt<int>")((1,), (10,), (cupy.zeros(10, cupy.float32), 10))
    # not instantiated, or not named: the driver's CUDA_ERROR_NOT_FOUND, as CuPy raises
    for missing in ("my_sqrt<double>", "nothing"):
        with pytest.raises(cupy.cuda.driver.CUDADriverError, match="named symbol not found") as ex:
            mod.get_function(missing)
        assert isinstance(ex.value, kiln.CUDADriverError) and ex.value.status == 500
        assert "CUDA_ERROR_NOT_FOUND" in str(ex.value)


def test_kernels_kiln_cannot_read_are_checked_by_size(cupy):
    k = kiln.RawKernel(MACRO, "add")
    x, y = cupy.arange(100, dtype=cupy.float64), cupy.ones(100, dtype=cupy.float64)
    k((1,), (128,), (x, y, 100))
    np.testing.assert_array_equal(cupy.asnumpy(y), np.arange(100) + 1.0)
    with pytest.raises(kiln.InvalidInputError, match="4 bytes|takes 4"):
        k((1,), (128,), (x, y, np.int64(100)))
    with pytest.raises(kiln.InvalidInputError, match="takes 3 arguments"):
        k((1,), (128,), (x, y))
    assert k.kernel.param_sizes == [8, 8, 4] and k.kernel.params is None


def test_complex_values_pass_by_size(cupy):
    m = kiln.RawModule(code=COMPLEX)
    a = (cupy.arange(50) + 1j * cupy.arange(50)).astype(cupy.complex64)
    out = cupy.zeros_like(a)
    m.get_function("add64")((1,), (64,), (a, np.complex64(2 + 3j), out, 50))
    np.testing.assert_array_equal(cupy.asnumpy(out), cupy.asnumpy(a) + np.complex64(2 + 3j))
    a2, out2 = a.astype(cupy.complex128), cupy.zeros(50, cupy.complex128)
    m.get_function("add128")((1,), (64,), (a2, 1 - 2j, out2, 50))
    np.testing.assert_array_equal(cupy.asnumpy(out2), cupy.asnumpy(a2) + (1 - 2j))
    with pytest.raises(kiln.InvalidInputError, match="16"):
        m.get_function("add64")((1,), (64,), (a, 2 + 3j, out, 50))


def test_attributes_read_and_set(cupy):
    k = kiln.RawKernel(SUM, "test_sum")
    attrs = k.attributes
    assert set(attrs) == {"max_threads_per_block", "shared_size_bytes", "const_size_bytes",
                          "local_size_bytes", "num_regs", "ptx_version", "binary_version",
                          "cache_mode_ca", "max_dynamic_shared_size_bytes",
                          "preferred_shared_memory_carveout"}
    assert k.num_regs > 0 and k.max_threads_per_block > 0 and k.shared_size_bytes == 0
    assert k.binary_version == int(cupy.cuda.Device().compute_capability)
    k.max_dynamic_shared_size_bytes = 64 * 1024
    assert k.max_dynamic_shared_size_bytes == 64 * 1024
    k.preferred_shared_memory_carveout = 50
    assert k.preferred_shared_memory_carveout == 50
    with pytest.raises(kiln.InvalidInputError, match="max_dynamic_shared_size_bytes"):
        k.max_dynamic_shared_size_bytes = 1 << 30
    with pytest.raises(kiln.InvalidInputError, match="0..=100"):
        k.preferred_shared_memory_carveout = 101
    # a launch with more than 48 KiB of dynamic shared memory still works after the cap was set
    x = cupy.ones(64, cupy.float32)
    y = cupy.zeros(64, cupy.float32)
    k((1,), (64,), (x, x, y, 64), shared_mem=60 * 1024)
    assert float(y.sum()) == 128.0


def test_globals_are_cupy_memory_pointers(cupy):
    mod = kiln.RawModule(code=CONST)
    ker = mod.get_function("multiply_by_const")
    mem_ptr = mod.get_global("some_array")
    assert isinstance(mem_ptr, cupy.cuda.MemoryPointer) and mem_ptr.ptr != 0
    const_arr = cupy.ndarray((100,), cupy.float32, mem_ptr)
    data = cupy.arange(100, dtype=cupy.float32)
    const_arr[...] = data
    out = cupy.ones(100, dtype=cupy.float32)
    ker((1,), (100,), (out, cupy.int32(100)))
    assert bool((data == out).all())
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="CUDA_ERROR_NOT_FOUND"):
        mod.get_global("no_such_global")


def test_compiled_modules_load_from_bytes_and_files(cupy, tmp_path):
    cubin, _, _ = _native._raw_compile(SUM, [], _arch(cupy))
    x1, x2 = cupy.arange(100, dtype=cupy.float32), cupy.ones(100, dtype=cupy.float32)
    for mod in (kiln.RawModule(code=cubin), kiln.RawModule(path=_write(tmp_path, cubin))):
        y = cupy.zeros(100, dtype=cupy.float32)
        k = mod.get_function("test_sum")
        k((1,), (128,), (x1, x2, y, 100))
        np.testing.assert_array_equal(cupy.asnumpy(y), np.arange(100) + 1.0)
        assert k.kernel.params is None  # no source: checked by size
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="CUDA_ERROR_FILE_NOT_FOUND"):
        kiln.RawModule(path=str(tmp_path / "missing.cubin")).get_function("k")
    with pytest.raises(kiln.CUDADriverError, match="CUDA_ERROR_INVALID_IMAGE|CUDA_ERROR_"):
        kiln.RawModule(code=b"not a module").get_function("k")


def _write(tmp_path, data):
    p = tmp_path / "sum.cubin"
    p.write_bytes(data)
    return str(p)


def test_compile_errors_are_cupys_compile_exception(cupy):
    k = kiln.RawKernel('extern "C" __global__ void f() {\n  undefined_thing();\n}', "f")
    with pytest.raises(cupy.cuda.compiler.CompileException) as ex:
        k((1,), (1,), ())
    assert isinstance(ex.value, kiln.CompileException)
    assert "undefined_thing" in ex.value.get_message() and "(2)" in str(ex.value)


def test_compile_with_log_stream_writes_nvrtc_warnings(cupy):
    for obj in (kiln.RawKernel(SUM, "test_sum"), kiln.RawModule(code=SUM)):
        log = io.StringIO()
        obj.compile(log_stream=log)  # compiled afresh even though the cache holds it
        assert "warning" in log.getvalue() and "unused" in log.getvalue()


def test_cooperative_launch_synchronises_the_grid(cupy):
    n = 100 * 100
    x1 = cupy.arange(n, dtype=cupy.float32)
    x2 = cupy.ones(n, dtype=cupy.float32)
    for k in (kiln.RawKernel(GRID_SYNC, "grid_sync", enable_cooperative_groups=True),
              kiln.RawModule(code=GRID_SYNC, enable_cooperative_groups=True).get_function("grid_sync")):
        y = cupy.zeros(n, dtype=cupy.float32)
        k(((n + 255) // 256,), (256,), (x1, x2, y, n))
        np.testing.assert_array_equal(cupy.asnumpy(y), np.arange(n, dtype=np.float32) + 1)
    # a grid that cannot be resident at once is the driver's error, not a hang
    with pytest.raises(kiln.CUDADriverError, match="COOPERATIVE_LAUNCH_TOO_LARGE"):
        k((1 << 20,), (1024,), (x1, x2, y, n))


def test_dynamic_parallelism_links_the_device_runtime(cupy):
    # CuPy's _test_source4: -dc compiles relocatable code, linked with libcudadevrt
    src = r'''extern "C"{
    __global__ void test_kernel_inner(float *arr, int N) {
        unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
        if (tid < N) arr[tid] = 1.0;
    }
    __global__ void test_kernel(float *arr, int N, int inner_blk) {
        unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;
        if (tid < N/inner_blk) test_kernel_inner<<<1, inner_blk>>>(arr+tid*inner_blk, inner_blk);
    }
    }'''
    ker = kiln.RawKernel(src, "test_kernel", options=("-dc",))
    n, inner = 169, 13
    x = cupy.zeros((n,), dtype=cupy.float32)
    ker((1,), (n // inner,), (x, n, inner))
    assert bool((x == 1.0).all())
    # without -dc NVRTC refuses the device-side launch
    with pytest.raises(cupy.cuda.compiler.CompileException):
        kiln.RawKernel(src, "test_kernel")((1,), (n // inner,), (x, n, inner))


def test_memory_pointers_and_null_pointers(cupy):
    src = r'''extern "C" __global__ void my_func(void* input, const float* maybe, int N) {
      double* arr = (double*)(input);
      unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
      if (x < N) arr[x] = 3.0 * arr[x] - 8.0 + (maybe ? 1.0 : 0.0);
    }'''
    ker = kiln.RawModule(code=src).get_function("my_func")
    a = cupy.ones((100,), dtype=cupy.float64)
    memptr = cupy.cuda.memory.alloc(100 * 8)
    memptr.copy_from(a.data, 100 * 8)
    b = cupy.ndarray((100,), cupy.float64, memptr=memptr)
    ker((1,), (100,), (memptr, None, 100))
    assert bool((b == -5.0).all())


def test_a_pickled_kernel_runs_in_another_process(cupy, tmp_path):
    k = kiln.RawKernel(SUM, "test_sum", enable_cooperative_groups=True)
    x = cupy.ones(10, cupy.float32)
    k((1,), (10,), (x, x, cupy.zeros(10, cupy.float32), 10))  # compiled before pickling
    (tmp_path / "k.pkl").write_bytes(pickle.dumps(k))
    script = (
        "import pickle, cupy as cp\n"
        "k = pickle.load(open('k.pkl', 'rb'))\n"
        "a = cp.arange(100, dtype=cp.float32); c = cp.empty_like(a)\n"
        "k((1,), (100,), (a, a, c, 100))\n"
        "assert cp.allclose(a + a, c) and k.enable_cooperative_groups\n"
    )
    (tmp_path / "run.py").write_text(script)
    subprocess.run([sys.executable, "run.py"], cwd=tmp_path, check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


MIXED = r"""
extern "C" __global__ void mixed(const float* x, float* out, int n, float a, double b,
                                 long long c, unsigned int u, bool f, short s,
                                 unsigned char uc, const float* maybe) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * a + (float)b + (float)c + (float)u + (f ? 1.0f : 0.0f)
                        + (float)s + (float)uc + (maybe ? maybe[i] : 100.0f);
}
"""


def test_the_native_call_launches_as_the_general_path(cupy):
    """The second call of a kernel is read natively (``_RawFunction.call``); each kind of
    argument it knows gives the general path's result, and what it does not know (a list of
    arguments, a named stream object, kiln tensors, a bad argument count) still runs or fails
    as the general path does."""
    k = kiln.RawKernel(MIXED, "mixed", options=("--fmad=false",))  # NumPy's roundings
    n = 1000
    x = cupy.asarray(np.random.default_rng(7).standard_normal(n, dtype=np.float32))
    out = cupy.zeros(n, cupy.float32)
    args = (x, out, np.int32(n), np.float32(1.5), 0.25, np.int64(-3), np.uint32(4), True,
            np.int16(-2), np.uint8(7), None)
    # float32 sums in the kernel's order
    head = x.get() * np.float32(1.5) + np.float32(0.25) - 3 + 4 + 1 - 2 + 7
    want = head + 100
    k(((n + 127) // 128,), (128,), args)  # general path; remembers the function
    first = out.get()
    np.testing.assert_array_equal(first, want.astype(np.float32))
    assert k._last is not None
    out.fill(0)
    assert k._last.call(((n + 127) // 128,), (128,), args, 0, None, False)
    np.testing.assert_array_equal(out.get(), first)
    # Python ints and a grid as an int, a stream object, arguments as a list
    out.fill(0)
    k((n + 127) // 128, 128, (x, out, n, np.float32(1.5), 0.25, -3, 4, True, np.int16(-2),
                               np.uint8(7), x), stream=cupy.cuda.Stream.null)
    np.testing.assert_array_equal(out.get(), head + x.get())
    out.fill(0)
    k(((n + 127) // 128,), (128,), list(args))
    np.testing.assert_array_equal(out.get(), first)
    # kiln tensors as the arrays
    kx = kiln.asarray(x.get(), device="cuda")
    kout = kiln.asarray(np.zeros(n, np.float32), device="cuda")
    k(((n + 127) // 128,), (128,), (kx,) + (kout,) + args[2:])
    kiln.synchronize()
    np.testing.assert_array_equal(kout.numpy(), first)
    # a wrong count: the same error as a kernel's first (general) call
    with pytest.raises(Exception) as native:
        k((1,), (128,), args[:-1])
    with pytest.raises(Exception) as general:
        kiln.RawKernel(MIXED, "mixed", options=("--fmad=false",))((1,), (128,), args[:-1])
    assert type(native.value) is type(general.value)
    assert str(native.value) == str(general.value)
