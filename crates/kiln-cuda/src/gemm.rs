//! GEMM on CUDA: cuBLAS for every precision, and kiln's own f32 kernels (`kernels/gemm.cu`:
//! the tiled SIMT kernel and the seed's naive baseline). Layout: [`kiln_core::linalg`].
//!
//! cuBLAS is reached through cudarc's `cublas::result`/`sys` layer because kiln's pool hands
//! out raw device pointers, which cudarc's safe `CudaBlas` (built on `CudaSlice`) cannot
//! take. The library is loaded dynamically: its presence is checked before the first call
//! (cudarc panics on a missing library), so a machine without libcublas gets an
//! `Unsupported` error naming the fix, never a panic. One handle per backend, made on the
//! first GEMM, bound to the backend's current stream (kiln's, a user stream, or this thread's
//! graph-capture stream) with a 32 MiB workspace from the pool per stream, so cuBLAS never
//! allocates on its own, a GEMM can be captured into a graph once one has run, and GEMMs
//! on two streams never share a workspace.
//!
//! Row-major through column-major cuBLAS: a row-major `m x n` `C` is the column-major
//! `n x m` matrix `Cᵀ = op(B)ᵀ·op(A)ᵀ`, and a row-major stored matrix read column-major is
//! its transpose. So kiln calls cuBLAS with the operands swapped (`B` first), `m` and `n`
//! swapped and each operand's own transpose flag, with no copies.
#![allow(unsafe_code)]

use crate::gemm_wgmma::WgmmaVariant;
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::ops::Transpose;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::cublas::result::{self as blas, CublasError};
use cudarc::cublas::sys;
use cudarc::driver::{CudaStream, LaunchConfig};
use kiln_core::backend::{bf16, Element};
use kiln_core::linalg::{Gemm, GemmImpl, GemmPrecision};
use kiln_core::{Error, Result};
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// The cuBLAS workspace: NVIDIA's recommendation for Hopper (smaller GPUs use less of it).
const WORKSPACE_BYTES: usize = 32 << 20;
/// Largest m, n, k: cuBLAS takes `int`, and the kernels form `m0 + 127` in `int`.
const MAX_DIM: usize = i32::MAX as usize - 256;
/// CUDA's limit on grid y and z (the kernels grid-stride past it).
const MAX_GRID_YZ: usize = 65535;

/// A cuBLAS handle on one backend's stream, with the workspace it was given.
pub(crate) struct Blas {
    handle: sys::cublasHandle_t,
    stream: Arc<CudaStream>,
    // The stream the handle is bound to now (`CudaBackend::stream()` at the last call: a
    // graph capture on this thread uses a capture stream).
    bound: sys::cudaStream_t,
    // One workspace per stream the handle has been bound to, held for the handle's life
    // and dropped (returned to the pool) after it is destroyed. Per stream, because two
    // streams' GEMMs run at once (two executor workers on one GPU, a user's streams) and
    // one shared workspace would be written by both: cuBLAS's own advice for a handle used
    // on several streams. Streams are the backend's few (main, capture, user slots).
    workspaces: Vec<(sys::cudaStream_t, DeviceBuffer<u8>)>,
}

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it are not
// concurrent; kiln only reaches it through the backend's `Mutex<Option<Blas>>`.
unsafe impl Send for Blas {}

impl Drop for Blas {
    fn drop(&mut self) {
        let _ = self.stream.context().bind_to_thread();
        // SAFETY: the handle came from cublasCreate and is destroyed exactly once, here; no
        // call on it can be in flight (the mutex is held by whoever drops it).
        if let Err(e) = unsafe { blas::destroy_handle(self.handle) } {
            tracing::error!("cublasDestroy failed: {e:?}");
        }
    }
}

/// Whether libcublas and libcublasLt (which libcublas loads) can be loaded.
pub fn cublas_available() -> bool {
    use crate::libs::{present, Lib};
    present(Lib::Cublas) && present(Lib::CublasLt)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The slot is replaced in one assignment, so a panic elsewhere leaves it consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn cublas_type(p: GemmPrecision) -> sys::cudaDataType {
    match p {
        GemmPrecision::F32 | GemmPrecision::Tf32 => sys::cudaDataType::CUDA_R_32F,
        GemmPrecision::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        GemmPrecision::F16 => sys::cudaDataType::CUDA_R_16F,
    }
}

fn compute_type(p: GemmPrecision) -> sys::cublasComputeType_t {
    match p {
        GemmPrecision::Tf32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    }
}

fn op(t: bool) -> sys::cublasOperation_t {
    if t {
        sys::cublasOperation_t::CUBLAS_OP_T
    } else {
        sys::cublasOperation_t::CUBLAS_OP_N
    }
}

/// The tiled kernel for a layout: float4 loads when `vec`, else the scalar-load kernel.
fn tiled_kernel(vec: bool, ta: bool, tb: bool) -> Kernel {
    use Kernel as K;
    match (vec, ta, tb) {
        (false, false, false) => K::GEMM_TILED_NN_S_F32,
        (false, false, true) => K::GEMM_TILED_NT_S_F32,
        (false, true, false) => K::GEMM_TILED_TN_S_F32,
        (false, true, true) => K::GEMM_TILED_TT_S_F32,
        (true, false, false) => K::GEMM_TILED_NN_F32,
        (true, false, true) => K::GEMM_TILED_NT_F32,
        (true, true, false) => K::GEMM_TILED_TN_F32,
        (true, true, true) => K::GEMM_TILED_TT_F32,
    }
}

/// Checks `g` against the index ranges cuBLAS and the kernels take.
fn check_limits(g: &Gemm) -> Result<()> {
    let too_big = [g.m, g.n, g.k].iter().any(|&d| d > MAX_DIM) || g.batch > i32::MAX as usize;
    let strides = [g.stride_a, g.stride_b, g.m.saturating_mul(g.n)];
    if too_big || strides.iter().any(|&s| s > i64::MAX as usize) {
        return Err(Error::invalid(
            "gemm",
            format!("{g}: the GPU takes m, n, k below 2^31 - 256 and batch below 2^31"),
        ));
    }
    Ok(())
}

impl CudaBackend {
    /// A cuBLAS failure as kiln's error. A failed execution may hide a sticky CUDA error:
    /// the stream is asked, and a driver error it reports is returned instead.
    fn blas_err(&self, call: &str, e: CublasError) -> Error {
        use sys::cublasStatus_t as S;
        let what = format!("{call}: {:?}", e.0);
        match e.0 {
            S::CUBLAS_STATUS_INVALID_VALUE => {
                Error::invalid("gemm", format!("cuBLAS rejected the arguments ({what})"))
            }
            S::CUBLAS_STATUS_NOT_SUPPORTED | S::CUBLAS_STATUS_ARCH_MISMATCH => Error::Unsupported {
                op: format!("gemm ({what}: this precision needs a newer GPU or cuBLAS)"),
                backend: self.name(),
            },
            S::CUBLAS_STATUS_ALLOC_FAILED => {
                let (free, total) = self.mem_info().unwrap_or((0, 0));
                let m = self.memory_stats();
                Error::OutOfMemory {
                    op: what,
                    device: self.name(),
                    requested: 0,
                    free,
                    total,
                    reserved: m.reserved_bytes,
                    limit: self.pool().limit(),
                }
            }
            _ => match self.stream().synchronize() {
                Err(d) => crate::cuda_err(&what, &self.name(), d),
                Ok(()) => Error::Cuda {
                    op: what,
                    device: self.name(),
                    code: 999,
                    name: kiln_core::cuda_code_name(999),
                },
            },
        }
    }

    /// The backend's cuBLAS handle, made on first use.
    fn blas(&self) -> Result<MutexGuard<'_, Option<Blas>>> {
        let mut slot = lock(&self.blas);
        if slot.is_some() {
            return Ok(slot);
        }
        if !cublas_available() {
            return Err(Error::Unsupported {
                op: "gemm through cuBLAS (libcublas.so / libcublasLt.so could not be loaded: install \
                     CUDA's cuBLAS or add its directory to LD_LIBRARY_PATH, or run kiln's own f32 kernel)"
                    .into(),
                backend: self.name(),
            });
        }
        // kiln's main stream's workspace, made here (a capture cannot take new memory, and
        // a capture's GEMMs use this one: see `bind_blas`)
        let main_ws = self.alloc::<u8>(WORKSPACE_BYTES)?;
        let stream = self.stream().clone();
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| crate::cuda_err("cuCtxSetCurrent", &self.name(), e))?;
        let handle = blas::create_handle().map_err(|e| self.blas_err("cublasCreate", e))?;
        // From here the handle is owned by `b`: an error below destroys it.
        let mut b = Blas {
            handle,
            stream,
            bound: std::ptr::null_mut(),
            workspaces: vec![(self.main_stream().cu_stream() as sys::cudaStream_t, main_ws)],
        };
        self.bind_blas(&mut b)?;
        *slot = Some(b);
        Ok(slot)
    }

    /// Point the handle at `self.stream()` (kiln's stream, a user stream, or this thread's
    /// capture stream) if it is not there yet, with that stream's own workspace (made on
    /// its first GEMM). cublasSetStream resets the workspace to cuBLAS's own pool, so kiln's
    /// is set again after it.
    fn bind_blas(&self, b: &mut Blas) -> Result<()> {
        let s = self.stream().cu_stream() as sys::cudaStream_t;
        if b.bound == s {
            return Ok(());
        }
        // A capture's GEMMs are recorded, not run, and replay on kiln's main stream in its
        // order: they use the main stream's workspace (made with the handle, since a capture
        // cannot take new memory from the pool).
        let key = if s == self.capture_stream().cu_stream() as sys::cudaStream_t {
            self.main_stream().cu_stream() as sys::cudaStream_t
        } else {
            s
        };
        let ws = match b.workspaces.iter().position(|(k, _)| *k == key) {
            Some(i) => b.workspaces[i].1.device_ptr(),
            None => {
                let w = self.alloc::<u8>(WORKSPACE_BYTES)?;
                let ptr = w.device_ptr();
                b.workspaces.push((key, w));
                ptr
            }
        };
        // SAFETY: the handle is live and locked; the stream is one of this backend's, which
        // outlive the handle (the backend owns both).
        unsafe { blas::set_stream(b.handle, s) }.map_err(|e| self.blas_err("cublasSetStream", e))?;
        // SAFETY: the workspace is a live pool block of WORKSPACE_BYTES owned by `b` for the
        // handle's life (512-byte aligned: cuBLAS needs 256), used by this stream's GEMMs
        // only, in that stream's order (a capture's replay on kiln's main stream, in its
        // order, with its workspace).
        unsafe { sys::cublasSetWorkspace_v2(b.handle, ws as *mut c_void, WORKSPACE_BYTES) }
            .result()
            .map_err(|e| self.blas_err("cublasSetWorkspace", e))?;
        b.bound = s;
        Ok(())
    }
}

/// `C = op(A)·op(B)` for every batch on device buffers (layout: [`kiln_core::linalg`]).
/// `imp` picks cuBLAS (every precision) or kiln's tiled / naive f32 kernels, or (bf16, one
/// product, compute capability 9.0) kiln's wgmma kernel; the buffers must hold exactly
/// `gemm.len_a()`, `gemm.len_b()` and `gemm.len_c()` elements of `precision`'s storage.
///
/// Launch: cuBLAS (`cublasGemmEx` / `cublasGemmStridedBatchedEx` on the backend's handle,
/// bound to the current stream); kiln's tiled f32 kernels (256 threads, 128×128 tiles, grid
/// `(ceil(n/128), min(ceil(m/128), 65535), min(batch, 65535))`) or the naive one (16×16
/// blocks); the wgmma kernel (see [`crate::gemm_wgmma`]).
pub struct MatMul<'a, T> {
    /// `A`, `gemm.len_a()` elements.
    pub a: &'a DeviceBuffer<T>,
    /// `B`, `gemm.len_b()` elements.
    pub b: &'a DeviceBuffer<T>,
    /// `C`, `gemm.len_c()` elements, distinct from both.
    pub c: &'a mut DeviceBuffer<T>,
    /// The shape, transposes and batch.
    pub gemm: &'a Gemm,
    /// The precision.
    pub precision: GemmPrecision,
    /// The implementation.
    pub imp: GemmImpl,
}

impl<T: Element> Op for MatMul<'_, T> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let MatMul {
            a,
            b,
            c,
            gemm: g,
            precision: p,
            imp,
        } = self;
        kiln_core::linalg::check_storage::<T>(p)?;
        let len_c = g.validate(a.len(), b.len())?;
        kiln_core::backend::check_same_len("gemm output", len_c, c.len())?;
        check_limits(g)?;
        match imp {
            GemmImpl::Library => gemm_cublas(cuda, a.device_ptr(), b.device_ptr(), c.device_ptr(), g, p),
            GemmImpl::Tiled | GemmImpl::Naive if p != GemmPrecision::F32 => Err(Error::invalid(
                "gemm",
                format!(
                    "kiln's {} kernel is f32 only; {p} runs through cuBLAS (the library implementation)",
                    imp.name()
                ),
            )),
            GemmImpl::Tiled | GemmImpl::Naive => {
                gemm_kernel(cuda, a.device_ptr(), b.device_ptr(), c.device_ptr(), g, imp)
            }
            GemmImpl::Wgmma => gemm_wgmma_layouts(cuda, [a, b], c, g, p, WgmmaVariant::from_env()?),
        }
    }
}

/// [`MatMul`] on kiln's wgmma kernel (bf16, one product, compute capability 9.0) with the
/// variant named here instead of the one `KILN_WGMMA_VARIANT` names: how benchmarks and
/// tests compare the variants in one process.
pub struct WgmmaMatMul<'a> {
    /// `A`, `gemm.len_a()` elements.
    pub a: &'a DeviceBuffer<bf16>,
    /// `B`, `gemm.len_b()` elements.
    pub b: &'a DeviceBuffer<bf16>,
    /// `C`, `gemm.len_c()` elements, distinct from both.
    pub c: &'a mut DeviceBuffer<bf16>,
    /// The shape and transposes (a batch is refused).
    pub gemm: &'a Gemm,
    /// The kernel variant.
    pub variant: WgmmaVariant,
}

impl Op for WgmmaMatMul<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let WgmmaMatMul {
            a,
            b,
            c,
            gemm: g,
            variant,
        } = self;
        let len_c = g.validate(a.len(), b.len())?;
        kiln_core::backend::check_same_len("gemm output", len_c, c.len())?;
        check_limits(g)?;
        gemm_wgmma_layouts(cuda, [a, b], c, g, GemmPrecision::Bf16, variant)
    }
}

/// Host round trip of [`MatMul`]: upload, multiply into a NaN-poisoned buffer (an element
/// the kernel misses stays NaN), download; a run returns `C`.
pub struct MatMulHost<'a, T> {
    /// `A`, `gemm.len_a()` elements.
    pub a: &'a [T],
    /// `B`, `gemm.len_b()` elements.
    pub b: &'a [T],
    /// The shape, transposes and batch.
    pub gemm: &'a Gemm,
    /// The precision.
    pub precision: GemmPrecision,
    /// The implementation.
    pub imp: GemmImpl,
}

impl<T: Element> Op for MatMulHost<'_, T> {
    type Output = Vec<T>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<T>> {
        let MatMulHost {
            a,
            b,
            gemm: g,
            precision: p,
            imp,
        } = self;
        kiln_core::linalg::check_storage::<T>(p)?;
        let len_c = g.validate(a.len(), b.len())?;
        check_limits(g)?;
        let da = cuda.upload_slice(a)?;
        let db = cuda.upload_slice(b)?;
        let mut dc = cuda.alloc_poisoned_as::<T>(len_c)?;
        cuda.run(MatMul {
            a: &da,
            b: &db,
            c: &mut dc,
            gemm: g,
            precision: p,
            imp,
        })?;
        let mut out = vec![T::from_f32(0.0); len_c];
        dc.copy_to_host(&mut out, cuda.stream())?;
        Ok(out)
    }
}

/// kiln's wgmma kernel for any transpose pair of one product. Each operand is read as
/// stored when TMA can take its rows (a multiple of 8 elements); an operand whose stored
/// rows cannot (an odd m with A transposed, an odd n with B as stored) is first
/// transposed into a pool buffer whose rows run along k (the `Transpose` op).
fn gemm_wgmma_layouts<T: Element>(
    cuda: &CudaBackend,
    [a, b]: [&DeviceBuffer<T>; 2],
    c: &mut DeviceBuffer<T>,
    g: &Gemm,
    p: GemmPrecision,
    variant: WgmmaVariant,
) -> Result<()> {
    if p != GemmPrecision::Bf16 {
        return Err(Error::invalid(
            "gemm",
            format!("kiln's wgmma kernel is bf16 only; {p} runs through cuBLAS (the library implementation) or, for f32, kiln's tiled kernel"),
        ));
    }
    if g.batch != 1 {
        return Err(Error::invalid(
            "gemm",
            format!("kiln's wgmma kernel takes one product, not a batch of {}; batches run through cuBLAS (the library implementation)", g.batch),
        ));
    }
    // a stored `k x rows` operand copied to `rows x k` (rows along k)
    let k_major = |x: &DeviceBuffer<T>, rows: usize| -> Result<DeviceBuffer<T>> {
        let mut t = cuda.alloc::<T>(rows * g.k)?;
        cuda.run(Transpose {
            x,
            rows: g.k,
            cols: rows,
            out: &mut t,
        })?;
        Ok(t)
    };
    let a_t = (g.trans_a && g.m % 8 != 0).then(|| k_major(a, g.m)).transpose()?;
    let b_t = (!g.trans_b && g.n % 8 != 0)
        .then(|| k_major(b, g.n))
        .transpose()?;
    let (pa, ta) = a_t
        .as_ref()
        .map_or((a.device_ptr(), g.trans_a), |t| (t.device_ptr(), false));
    let (pb, tb) = b_t
        .as_ref()
        .map_or((b.device_ptr(), g.trans_b), |t| (t.device_ptr(), true));
    // `pa` holds op(A) (m x k, stored k x m when `ta`) and `pb` op(B) (stored n x k when
    // `tb`, else k x n): a packed product, whose lengths validate checked, or a
    // transposed copy of exactly that many; `c` holds m x n. The copies go back to the
    // pool after the launch is enqueued, in this stream's order.
    crate::gemm_wgmma::wgmma_ptr(cuda, pa, pb, c.device_ptr(), [g.m, g.n, g.k], ta, tb, variant)
}

/// cuBLAS on pointers whose buffers were checked to hold `g`'s extents.
fn gemm_cublas(cuda: &CudaBackend, a: u64, b: u64, c: u64, g: &Gemm, p: GemmPrecision) -> Result<()> {
    let mut slot = cuda.blas()?;
    let Some(h) = slot.as_mut() else {
        return Err(Error::invalid("gemm", "cuBLAS handle missing after creation"));
    };
    cuda.bind_blas(h)?;
    h.stream
        .context()
        .bind_to_thread()
        .map_err(|e| crate::cuda_err("cuCtxSetCurrent", &cuda.name(), e))?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    let ty = cublas_type(p);
    // Column-major view (module docs): C'(n x m) = op(B)' · op(A)'.
    let (m, n, k) = (g.n as i32, g.m as i32, g.k as i32);
    let (lda, ldb, ldc) = (g.ldb() as i32, g.lda() as i32, g.n as i32);
    let (ta, tb) = (op(g.trans_b), op(g.trans_a));
    let alpha_p = &alpha as *const f32 as *const c_void;
    let beta_p = &beta as *const f32 as *const c_void;
    let algo = sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT;
    if g.batch == 1 {
        // SAFETY: `b` (cuBLAS's A) holds k*n elements read with leading dimension ldb()
        // (checked by validate), `a` holds m*k with lda(), `c` holds m*n written with
        // ldc = n; all are live pool buffers of `p`'s storage type on the handle's stream
        // (kiln's), c distinct from both (&mut); alpha/beta are host f32 (pointer mode
        // host, compute type 32F) alive for the call; the handle is locked.
        unsafe {
            blas::gemm_ex(
                h.handle,
                ta,
                tb,
                m,
                n,
                k,
                alpha_p,
                b as *const c_void,
                ty,
                lda,
                a as *const c_void,
                ty,
                ldb,
                beta_p,
                c as *mut c_void,
                ty,
                ldc,
                compute_type(p),
                algo,
            )
        }
        .map_err(|e| cuda.blas_err("cublasGemmEx", e))
    } else {
        let (sa, sb, sc) = (g.stride_b as i64, g.stride_a as i64, (g.m * g.n) as i64);
        // SAFETY: as above for every batch z < batch: the operands start at z*stride
        // inside their buffers (validate checked (batch-1)*stride + extent == len), C's
        // batches are disjoint (stride m*n), the batch count fits i32 (check_limits).
        unsafe {
            blas::gemm_strided_batched_ex(
                h.handle,
                ta,
                tb,
                m,
                n,
                k,
                alpha_p,
                b as *const c_void,
                ty,
                lda,
                sa,
                a as *const c_void,
                ty,
                ldb,
                sb,
                beta_p,
                c as *mut c_void,
                ty,
                ldc,
                sc,
                g.batch as i32,
                compute_type(p),
                algo,
            )
        }
        .map_err(|e| cuda.blas_err("cublasGemmStridedBatchedEx", e))
    }
}

/// kiln's tiled or naive f32 kernel (launch shapes at the top of `kernels/gemm.cu`).
fn gemm_kernel(cuda: &CudaBackend, a: u64, b: u64, c: u64, g: &Gemm, imp: GemmImpl) -> Result<()> {
    let (lda, ldb) = (g.lda(), g.ldb());
    let vec = [lda, ldb, g.stride_a, g.stride_b].iter().all(|v| v % 4 == 0) && a % 16 == 0 && b % 16 == 0;
    let id = if imp == GemmImpl::Naive {
        Kernel::GEMM_NAIVE_F32
    } else {
        tiled_kernel(vec, g.trans_a, g.trans_b)
    };
    let zs = g.batch.min(MAX_GRID_YZ) as u32;
    let cfg = if id == Kernel::GEMM_NAIVE_F32 {
        LaunchConfig {
            grid_dim: (
                g.m.div_ceil(16) as u32,
                g.n.div_ceil(16).min(MAX_GRID_YZ) as u32,
                zs,
            ),
            block_dim: (16, 16, 1),
            shared_mem_bytes: 0,
        }
    } else {
        LaunchConfig {
            grid_dim: (
                g.n.div_ceil(128) as u32,
                g.m.div_ceil(128).min(MAX_GRID_YZ) as u32,
                zs,
            ),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    };
    let (m, n, k) = (g.m as i32, g.n as i32, g.k as i32);
    let (lda, ldb, ldc) = (lda as i64, ldb as i64, g.n as i64);
    let (sa, sb, sc) = (g.stride_a as i64, g.stride_b as i64, (g.m * g.n) as i64);
    let (batch, ta, tb) = (g.batch as i32, g.trans_a as i32, g.trans_b as i32);
    // Sizes: every element read is (z*stride + an index below the stored extent) of A
    // or B, inside the buffers (validate: (batch-1)*stride + extent == len); every
    // write is inside C (batch*m*n, checked), guarded by m < M, n < N in the kernel. The
    // float4 kernels run only when lda, ldb, both strides are multiples of 4 and A, B are
    // 16-byte aligned (checked above; C's vector stores check their own alignment). All
    // sizes fit i32 (check_limits) and the grid's y and z are clamped (the kernels
    // grid-stride).
    let args = [
        Arg::ptr(a, ScalarType::F32),
        Arg::ptr(b, ScalarType::F32),
        Arg::ptr(c, ScalarType::F32),
        m.into(),
        n.into(),
        k.into(),
        lda.into(),
        ldb.into(),
        ldc.into(),
        sa.into(),
        sb.into(),
        sc.into(),
        batch.into(),
        ta.into(),
        tb.into(),
    ];
    cuda.launch(id, cfg, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_presence_never_panic() {
        let _ = cublas_available();
        assert!(check_limits(&Gemm::new(8192, 8192, 8192).batched(4)).is_ok());
        assert!(check_limits(&Gemm::new(1 << 31, 1, 1)).is_err());
        assert!(check_limits(&Gemm::new(1, 1, 1).batched(1 << 31)).is_err());
    }
}
