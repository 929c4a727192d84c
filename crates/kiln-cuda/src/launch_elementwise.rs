//! The element-wise ops (`kernels/map.cu`): `MapOp` ([`Map`], [`MapOn`], [`Unary`]) and
//! [`Axpy`] on f32, f16 and bf16 storage with f32 arithmetic.
//!
//! Launch shape: 256-thread blocks over 16-byte vectors (4 f32 or 8 halves a thread a
//! step, 2 steps' loads in flight, streaming cache hints). The maps launch one block per
//! 256 x 2 vectors (every thread one step). On the H200 (sigmoid 2^28, 2026-12-02): f32
//! 0.516 ms this way against 0.554 ms for one full wave of grid-striding blocks (98% vs 92%
//! of the copy rate), f16 0.263 vs 0.296, bf16 0.309 vs 0.330: a wave of long-lived threads
//! keeps fewer loads in flight per SM than a stream of short blocks does. axpy launches one
//! full wave: as many blocks per SM as the occupancy calculator says fit at once, at most 8,
//! at least one, grid-striding. The `n % V` tail runs scalar. Buffers are whole pool
//! allocations (512-byte aligned), so vector accesses are aligned; sizes are checked before
//! every launch.
#![allow(unsafe_code)]

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::CudaStream;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use kiln_core::backend::{check_same_len, Element, MapOp, UnaryOp};
use kiln_core::{DType, Error, Result};
use std::sync::Arc;

/// Threads per block of the element-wise kernels.
const THREADS: u32 = 256;
/// Vectors each thread loads before its first store (`U` of map.cu's map_* and axpy_*).
const UNROLL: u64 = 2;

fn grid_for(cuda: &CudaBackend, k: Kernel, n: u64, bytes: usize) -> Result<LaunchConfig> {
    grid_shaped(cuda, k, n, bytes, false)
}

/// `flat`: enough blocks for every thread to take one step of [`UNROLL`] vectors; else
/// at most one full wave.
fn grid_shaped(cuda: &CudaBackend, k: Kernel, n: u64, bytes: usize, flat: bool) -> Result<LaunchConfig> {
    let vecs = n.div_ceil((16 / bytes) as u64);
    let want = vecs.div_ceil(THREADS as u64 * UNROLL);
    let blocks = if flat {
        want.clamp(1, i32::MAX as u64) as u32
    } else {
        // one full wave: more blocks than fit at once leave a partial second wave (the
        // H200 ran map_f32 at 6 resident blocks/SM while kiln launched 8: 0.591 ms for
        // 2^28)
        let per_sm = u64::from(cuda.resident_blocks_per_sm(k, THREADS)?.min(8));
        let sms = (cuda.info().desc.multiprocessors as u64).max(1);
        want.clamp(1, sms * per_sm) as u32
    };
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// `out[i] = op(x[i])` on device buffers of equal length.
///
/// Launch: `map_{f32,f16,bf16}`, one 256-thread block per 256 × 2 vectors (module docs).
pub struct Map<'a, T> {
    /// The map.
    pub op: MapOp,
    /// The input.
    pub x: &'a DeviceBuffer<T>,
    /// The output, as long as the input.
    pub out: &'a mut DeviceBuffer<T>,
}

impl<T: Element> Op for Map<'_, T> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Map { op, x, out } = self;
        check_same_len(op.name(), x.len(), out.len())?;
        let n = x.len();
        cuda.run(MapOn {
            stream: cuda.stream(),
            op,
            x,
            out,
            n,
        })
    }
}

/// `out[i] = op(x[i])` for `i < n` on `stream` (both buffers hold at least `n`): the
/// pipeline's launcher, which runs chunks on several streams and a short last chunk.
///
/// Launch: as [`Map`]'s, on `stream`.
pub struct MapOn<'a, T> {
    /// The stream the map runs on.
    pub stream: &'a Arc<CudaStream>,
    /// The map.
    pub op: MapOp,
    /// The input, at least `n` elements.
    pub x: &'a DeviceBuffer<T>,
    /// The output, at least `n` elements.
    pub out: &'a mut DeviceBuffer<T>,
    /// The elements mapped.
    pub n: usize,
}

impl<T: Element> Op for MapOn<'_, T> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let MapOn {
            stream,
            op,
            x,
            out,
            n,
        } = self;
        op.validate()?;
        if n > x.len() || n > out.len() {
            return Err(Error::invalid(
                op.name(),
                format!(
                    "n = {n} exceeds the buffers ({} and {} elements)",
                    x.len(),
                    out.len()
                ),
            ));
        }
        if n == 0 {
            return Ok(());
        }
        let k = match T::DTYPE {
            DType::F32 => Kernel::MAP_F32,
            DType::F16 => Kernel::MAP_F16,
            DType::BF16 => Kernel::MAP_BF16,
            d => return Err(Error::invalid(op.name(), format!("storage {d} is not supported"))),
        };
        let n = n as u64;
        let cfg = grid_shaped(cuda, k, n, std::mem::size_of::<T>(), true)?;
        let (code, (a, b)) = (op.code(), op.params());
        // Sizes: the kernel reads x[0..n] and writes out[0..n]; both pool buffers hold at
        // least n elements of T (checked above), start on 512-byte boundaries (16-byte
        // vector accesses are aligned) and are distinct (one & and one &mut).
        let args = [
            Arg::tensor(x),
            Arg::tensor(out),
            n.into(),
            code.into(),
            a.into(),
            b.into(),
        ];
        cuda.launch_on(stream, k, cfg, &args)
    }
}

/// `out[i] = op(x[i])` for a unary `op` on f32 buffers of equal length (whole allocations,
/// so 16-byte aligned): every unary op runs through the generic map kernel ([`Map`]).
pub struct Unary<'a> {
    /// The unary op.
    pub op: UnaryOp,
    /// The input.
    pub x: &'a DeviceBuffer<f32>,
    /// The output, as long as the input.
    pub out: &'a mut DeviceBuffer<f32>,
}

impl Op for Unary<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Unary { op, x, out } = self;
        cuda.run(Map {
            op: MapOp::Unary(op),
            x,
            out,
        })
    }
}

/// Benchmark probe: host milliseconds to enqueue `launches` launches of the f32 map kernel
/// (`op`, ping-ponging between `x` and `y`, one block) straight through cudarc's launcher,
/// with none of kiln's checks, lookups or profiler hooks: the driver's share of an eager
/// launch, set against [`Map`]'s. Waits for the work at the end.
#[doc(hidden)]
pub struct MapLaunchProbe<'a> {
    /// The map.
    pub op: MapOp,
    /// One buffer.
    pub x: &'a mut DeviceBuffer<f32>,
    /// The other, as long.
    pub y: &'a mut DeviceBuffer<f32>,
    /// Launches to time.
    pub launches: usize,
}

impl Op for MapLaunchProbe<'_> {
    type Output = f64;

    fn run(self, cuda: &CudaBackend) -> Result<f64> {
        let MapLaunchProbe { op, x, y, launches } = self;
        op.validate()?;
        check_same_len(op.name(), x.len(), y.len())?;
        let f = cuda.function(Kernel::MAP_F32)?;
        let (code, (pa, pb)) = (op.code(), op.params());
        let (xp, yp, n) = (x.device_ptr(), y.device_ptr(), x.len() as u64);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let stream = cuda.stream();
        cuda.synchronize()?;
        let t0 = std::time::Instant::now();
        for i in 0..launches {
            let (src, dst) = if i % 2 == 0 { (&xp, &yp) } else { (&yp, &xp) };
            let mut l = stream.launch_builder(&f);
            l.arg(src).arg(dst).arg(&n).arg(&code).arg(&pa).arg(&pb);
            // SAFETY: the probe bypasses `launch` on purpose (it times the driver alone); its
            // arguments are map_f32's declared ones (x, y, n, op, a, b). Both buffers hold n
            // elements (checked equal), are distinct live pool allocations borrowed mutably
            // for the whole probe, and the kernel grid-strides over n from a single block.
            unsafe { l.launch(cfg) }.map_err(|e| cuda.launch_err(Kernel::MAP_F32, e))?;
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        cuda.synchronize()?;
        Ok(ms)
    }
}

/// `y[i] = a * x[i] + y[i]` on device buffers of equal length.
///
/// Launch: `axpy_{f32,f16,bf16}`, one full wave of 256-thread blocks (module docs).
pub struct Axpy<'a, T> {
    /// The scale, finite.
    pub a: f32,
    /// The input.
    pub x: &'a DeviceBuffer<T>,
    /// The accumulator, as long as the input.
    pub y: &'a mut DeviceBuffer<T>,
}

impl<T: Element> Op for Axpy<'_, T> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Axpy { a, x, y } = self;
        if !a.is_finite() {
            return Err(Error::invalid("axpy", format!("a = {a} must be finite")));
        }
        check_same_len("axpy", x.len(), y.len())?;
        if x.is_empty() {
            return Ok(());
        }
        let k = match T::DTYPE {
            DType::F32 => Kernel::AXPY_F32,
            DType::F16 => Kernel::AXPY_F16,
            DType::BF16 => Kernel::AXPY_BF16,
            d => return Err(Error::invalid("axpy", format!("storage {d} is not supported"))),
        };
        let n = x.len() as u64;
        let cfg = grid_for(cuda, k, n, std::mem::size_of::<T>())?;
        // Sizes: as in MapOn: x[0..n] read, y[0..n] read and written, both exactly n
        // elements (checked), aligned pool allocations, distinct.
        cuda.launch(k, cfg, &[Arg::tensor(x), Arg::tensor(y), n.into(), a.into()])
    }
}
