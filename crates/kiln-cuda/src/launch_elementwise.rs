//! Launchers for the element-wise family (`kernels/map.cu`): `MapOp` and axpy on f32, f16
//! and bf16 storage with f32 arithmetic.
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
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use kiln_core::backend::{check_same_len, Element, MapOp};
use kiln_core::{DType, Error, Result};

/// Threads per block of the element-wise kernels.
const THREADS: u32 = 256;
/// Vectors each thread loads before its first store (`U` of map.cu's map_* and axpy_*).
const UNROLL: u64 = 2;

impl CudaBackend {
    /// A new device buffer of `n` NaNs of the storage type (an unwritten element is caught).
    pub fn alloc_poisoned_as<T: Element>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        self.upload_slice(&vec![T::from_f32(f32::NAN); n])
    }

    fn grid_for(&self, k: Kernel, n: u64, bytes: usize) -> Result<LaunchConfig> {
        self.grid_shaped(k, n, bytes, false)
    }

    /// `flat`: enough blocks for every thread to take one step of [`UNROLL`] vectors; else
    /// at most one full wave.
    fn grid_shaped(&self, k: Kernel, n: u64, bytes: usize, flat: bool) -> Result<LaunchConfig> {
        let vecs = n.div_ceil((16 / bytes) as u64);
        let want = vecs.div_ceil(THREADS as u64 * UNROLL);
        let blocks = if flat {
            want.clamp(1, i32::MAX as u64) as u32
        } else {
            // one full wave: more blocks than fit at once leave a partial second wave (the
            // H200 ran map_f32 at 6 resident blocks/SM while kiln launched 8: 0.591 ms for
            // 2^28)
            let per_sm = u64::from(self.resident_blocks_per_sm(k, THREADS)?.min(8));
            let sms = (self.info().desc.multiprocessors as u64).max(1);
            want.clamp(1, sms * per_sm) as u32
        };
        Ok(LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        })
    }

    /// `out[i] = op(x[i])` on device buffers of equal length.
    pub fn map_device<T: Element>(
        &self,
        op: MapOp,
        x: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
    ) -> Result<()> {
        check_same_len(op.name(), x.len(), out.len())?;
        self.map_device_on(self.stream(), op, x, out, x.len())
    }

    /// `out[i] = op(x[i])` for `i < n` on `stream` (both buffers hold at least `n`): the
    /// pipeline's launcher, which runs chunks on several streams and a short last chunk.
    pub fn map_device_on<T: Element>(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        op: MapOp,
        x: &DeviceBuffer<T>,
        out: &mut DeviceBuffer<T>,
        n: usize,
    ) -> Result<()> {
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
        let cfg = self.grid_shaped(k, n, std::mem::size_of::<T>(), true)?;
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
        self.launch_on(stream, k, cfg, &args)
    }

    /// Benchmark probe: host milliseconds to enqueue `launches` launches of the f32 map
    /// kernel (`op`, ping-ponging between `x` and `y`, one block) straight through cudarc's
    /// launcher, with none of kiln's checks, lookups or profiler hooks: the driver's share of
    /// an eager launch, set against [`Self::map_device`]'s. Waits for the work at the end.
    #[doc(hidden)]
    pub fn raw_launch_probe_ms(
        &self,
        op: MapOp,
        x: &mut DeviceBuffer<f32>,
        y: &mut DeviceBuffer<f32>,
        launches: usize,
    ) -> Result<f64> {
        op.validate()?;
        check_same_len(op.name(), x.len(), y.len())?;
        let f = self.function(Kernel::MAP_F32)?;
        let (code, (pa, pb)) = (op.code(), op.params());
        let (xp, yp, n) = (x.device_ptr(), y.device_ptr(), x.len() as u64);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let stream = self.stream();
        self.synchronize()?;
        let t0 = std::time::Instant::now();
        for i in 0..launches {
            let (src, dst) = if i % 2 == 0 { (&xp, &yp) } else { (&yp, &xp) };
            let mut l = stream.launch_builder(&f);
            l.arg(src).arg(dst).arg(&n).arg(&code).arg(&pa).arg(&pb);
            // SAFETY: the probe bypasses `launch` on purpose (it times the driver alone); its
            // arguments are map_f32's declared ones (x, y, n, op, a, b). Both buffers hold n
            // elements (checked equal), are distinct live pool allocations borrowed mutably
            // for the whole probe, and the kernel grid-strides over n from a single block.
            unsafe { l.launch(cfg) }.map_err(|e| self.launch_err(Kernel::MAP_F32, e))?;
        }
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        self.synchronize()?;
        Ok(ms)
    }

    /// `y[i] = a * x[i] + y[i]` on device buffers of equal length.
    pub fn axpy_device<T: Element>(
        &self,
        a: f32,
        x: &DeviceBuffer<T>,
        y: &mut DeviceBuffer<T>,
    ) -> Result<()> {
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
        let cfg = self.grid_for(k, n, std::mem::size_of::<T>())?;
        // Sizes: as in map_device: x[0..n] read, y[0..n] read and written, both exactly n
        // elements (checked), aligned pool allocations, distinct.
        self.launch(k, cfg, &[Arg::tensor(x), Arg::tensor(y), n.into(), a.into()])
    }
}
