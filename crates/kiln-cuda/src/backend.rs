//! The CUDA backend: one context and stream on one device, modules loaded from the cubin
//! cache, and the launchers.
#![allow(unsafe_code)]

mod load;

use crate::cache::{CacheEvent, KernelCache};
use crate::discovery::DeviceInfo;
use crate::kernels::Kernel;
use crate::nvrtc;
use crate::pool::{DeviceBuffer, DevicePool, MemoryStats, PinnedPool};
use cudarc::driver::{result::DriverError, sys, CudaContext, CudaFunction, CudaStream};
use kiln_core::{cuda_code_name, Error, MemoryLimit, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One program load (a kernel alone: `kernels::Program`): where its cubin came from and
/// what loading it cost.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ModuleLoad {
    /// The cache lookup (hit, or compiled by NVRTC).
    pub cache: CacheEvent,
    /// Milliseconds in `cuModuleLoadData`.
    pub load_ms: f64,
}

/// A CUDA device ready for work.
pub struct CudaBackend {
    info: DeviceInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The stream graph captures record on (ops of the capturing thread go there, so other
    /// threads keep using `stream` undisturbed; see `graph.rs`).
    capture_stream: Arc<CudaStream>,
    pool: Arc<DevicePool>,
    pinned: Arc<PinnedPool>,
    cache: KernelCache,
    nvrtc: (i32, i32),
    /// Loaded programs by name, each filled once (backend/load.rs).
    modules: Mutex<HashMap<&'static str, load::Slot>>,
    /// Functions already looked up: `cuModuleGetFunction` is a driver call, and a launch of
    /// a tiny kernel must cost little more than `cuLaunchKernel` itself.
    functions: Mutex<HashMap<Kernel, CudaFunction>>,
    /// Blocks of a kernel resident per SM at a block size, from the driver's occupancy
    /// calculator (grid-stride kernels launch exactly one full wave).
    resident: Mutex<HashMap<(Kernel, u32), u32>>,
    loads: Mutex<Vec<ModuleLoad>>,
    /// Users' modules by cache key (source, options, arch, NVRTC version), each filled once
    /// (backend/load.rs, `user_module`).
    user_modules: Mutex<HashMap<[u8; 32], load::UserSlot>>,
    /// The cuBLAS handle and its workspace, made on the first GEMM (gemm.rs).
    pub(crate) blas: Mutex<Option<crate::gemm::Blas>>,
    /// One graph capture at a time on this backend's stream.
    capture: Mutex<()>,
    /// The pool of user streams ([`CudaBackend::new_stream`]), created on first use.
    pub(crate) user_streams: Box<[std::sync::OnceLock<Arc<CudaStream>>]>,
    /// Round-robin cursor over `user_streams`.
    pub(crate) next_stream: std::sync::atomic::AtomicUsize,
    /// Host memory that queued copies still read (staging buffers, pinned sources), each
    /// held until the event recorded after its last copy has passed (transfer.rs).
    pub(crate) in_flight: Mutex<Vec<crate::transfer::Held>>,
    context_ms: f64,
    nvrtc_wait_ms: f64,
    probe_ms: f64,
}

/// Where a backend's creation went, in milliseconds ([`CudaBackend::startup`]).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Startup {
    /// The driver's initialisation and device listing (`discovery::probe`), where the
    /// caller timed it ([`CudaBackend::with_probe_ms`]).
    pub probe_ms: f64,
    /// Creating the context.
    pub context_ms: f64,
    /// Waiting for libnvrtc after the context was made (it loads beside both).
    pub nvrtc_wait_ms: f64,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.name())
            .field("arch", &self.info.arch())
            .finish()
    }
}

impl CudaBackend {
    /// Create a context on `info`'s device and verify, by UUID, that it is the device the
    /// policy admitted. Needs libnvrtc for kernels. The device pool holds at most `limit`.
    ///
    /// libnvrtc (110 MB) is opened on a thread of its own while the context is created
    /// ([`crate::libs::preload`]; a caller may have started it earlier, beside the driver's
    /// initialisation), and waited for after.
    pub fn new(info: &DeviceInfo, cache: KernelCache, limit: Option<MemoryLimit>) -> Result<Self> {
        crate::libs::preload(crate::libs::Lib::Nvrtc);
        let dev = format!("cuda:{}", info.desc.ordinal);
        let t0 = Instant::now();
        let ctx = CudaContext::new(info.desc.ordinal).map_err(|e| cuda_err("cuCtxCreate", &dev, e))?;
        let context_ms = t0.elapsed().as_secs_f64() * 1e3;
        let t1 = Instant::now();
        let nvrtc = nvrtc::version().ok_or(Error::NoDevice(kiln_core::NoDeviceReason::NvrtcNotFound))?;
        let nvrtc_wait_ms = t1.elapsed().as_secs_f64() * 1e3;
        let uuid = ctx.uuid().map_err(|e| cuda_err("cuDeviceGetUuid", &dev, e))?;
        let got = kiln_core::device::format_uuid(&uuid.bytes.map(|b| b as u8));
        if !got.eq_ignore_ascii_case(&info.desc.uuid) {
            return Err(Error::invalid(
                "device policy",
                format!(
                    "context on {dev} has UUID {got}, but discovery saw {}; the device order changed (CUDA_VISIBLE_DEVICES?) - refusing to run",
                    info.desc.uuid
                ),
            ));
        }
        // A non-default stream: the legacy default stream would serialise with every other
        // stream (pipelines and graph capture need real streams).
        let stream = ctx
            .new_stream()
            .map_err(|e| cuda_err("cuStreamCreate", &dev, e))?;
        let capture_stream = ctx
            .new_stream()
            .map_err(|e| cuda_err("cuStreamCreate", &dev, e))?;
        let pool = DevicePool::new(
            ctx.clone(),
            dev.clone(),
            limit.map(|l| l.bytes(info.desc.total_memory)),
        );
        let pinned = PinnedPool::new(ctx.clone());
        Ok(CudaBackend {
            info: info.clone(),
            pinned,
            ctx,
            stream,
            capture_stream,
            pool,
            cache,
            nvrtc,
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            resident: Mutex::new(HashMap::new()),
            loads: Mutex::new(Vec::new()),
            user_modules: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
            capture: Mutex::new(()),
            user_streams: (0..crate::streams::USER_STREAMS)
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            next_stream: std::sync::atomic::AtomicUsize::new(0),
            in_flight: Mutex::new(Vec::new()),
            context_ms,
            nvrtc_wait_ms,
            probe_ms: 0.0,
        })
    }

    /// The device.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// `cuda:N`: how errors, the profiler and logs name this device.
    pub fn name(&self) -> String {
        format!("cuda:{}", self.info.desc.ordinal)
    }

    /// Milliseconds context creation took.
    pub fn context_ms(&self) -> f64 {
        self.context_ms
    }

    /// Records how long the driver probe before [`Self::new`] took, for [`Self::startup`].
    pub fn with_probe_ms(mut self, ms: f64) -> Self {
        self.probe_ms = ms;
        self
    }

    /// Where this backend's creation went.
    pub fn startup(&self) -> Startup {
        Startup {
            probe_ms: self.probe_ms,
            context_ms: self.context_ms,
            nvrtc_wait_ms: self.nvrtc_wait_ms,
        }
    }

    /// NVRTC's version in use.
    pub fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc
    }

    /// The stream kiln's ops run on.
    ///
    /// While this thread captures a graph on this backend ([`CudaBackend::capture`]) that is
    /// the capture stream, so the ops the capture closure calls are recorded, not run.
    /// Otherwise, inside [`CudaBackend::with_stream`] on this thread, it is that user stream;
    /// else kiln's main stream.
    pub fn stream(&self) -> &Arc<CudaStream> {
        if CAPTURING.with(|c| c.get()) == self.id() {
            return &self.capture_stream;
        }
        let (id, slot) = crate::streams::CURRENT.with(|c| c.get());
        if id == self.id() {
            if let Some(s) = self.user_streams.get(slot).and_then(|s| s.get()) {
                return s;
            }
        }
        &self.stream
    }

    /// kiln's stream, never the capture stream: where graphs replay.
    pub fn main_stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The capture stream (`graph.rs`).
    pub(crate) fn capture_stream(&self) -> &Arc<CudaStream> {
        &self.capture_stream
    }

    pub(crate) fn id(&self) -> usize {
        self as *const Self as usize
    }

    /// Whether this thread is capturing a graph on this backend.
    pub fn is_capturing_here(&self) -> bool {
        CAPTURING.with(|c| c.get()) == self.id()
    }

    /// Route this thread's ops on this backend to the capture stream (or back).
    pub(crate) fn set_capturing_here(&self, on: bool) {
        CAPTURING.with(|c| c.set(if on { self.id() } else { 0 }));
    }

    /// Every module load so far.
    pub fn module_loads(&self) -> Vec<ModuleLoad> {
        lock(&self.loads).clone()
    }

    /// Free and total device memory in bytes.
    pub fn mem_info(&self) -> Result<(u64, u64)> {
        let (f, t) = self.ctx.mem_get_info().map_err(|e| self.err("cuMemGetInfo", e))?;
        Ok((f as u64, t as u64))
    }

    pub(crate) fn err(&self, op: &str, e: DriverError) -> Error {
        cuda_err(op, &self.name(), e)
    }

    /// Blocks of `k` that fit on one SM at once with `threads`-thread blocks and no dynamic
    /// shared memory (at least 1), from `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
    pub fn resident_blocks_per_sm(&self, k: Kernel, threads: u32) -> Result<u32> {
        if let Some(&n) = lock(&self.resident).get(&(k, threads)) {
            return Ok(n);
        }
        let f = self.function(k)?;
        // The occupancy query needs this thread's current context, which a function already
        // loaded by another thread does not set (seen on the H200: CUDA_ERROR_INVALID_CONTEXT
        // when a test thread's first call was a kernel choice).
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))?;
        let n = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
            .map_err(|e| self.err("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?
            .max(1);
        lock(&self.resident).insert((k, threads), n);
        Ok(n)
    }

    /// The device's caching pool.
    pub fn pool(&self) -> &Arc<DevicePool> {
        &self.pool
    }

    /// The pinned host memory pool (staging buffers).
    pub fn pinned_pool(&self) -> &Arc<PinnedPool> {
        &self.pinned
    }

    /// The pool's counters.
    pub fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    /// Release cached, unused device memory; returns the bytes released.
    pub fn empty_cache(&self) -> u64 {
        self.pool.empty_cache()
    }

    /// An uninitialised device buffer of `n` elements on kiln's stream.
    pub fn alloc<T: Copy>(&self, n: usize) -> Result<DeviceBuffer<T>> {
        self.pool.alloc(self.stream(), n)
    }

    /// Copy a host slice to a new device buffer.
    pub fn upload(&self, x: &[f32]) -> Result<DeviceBuffer<f32>> {
        self.upload_slice(x)
    }

    /// Copy a device buffer into a host slice of the same length (waits for it).
    pub fn download(&self, x: &DeviceBuffer<f32>, out: &mut [f32]) -> Result<()> {
        x.copy_to_host(out, self.stream())
    }

    /// A new device buffer filled with NaN, so an element a kernel fails to write is caught.
    pub fn alloc_poisoned(&self, n: usize) -> Result<DeviceBuffer<f32>> {
        self.upload(&vec![f32::NAN; n])
    }

    /// Held while a graph capture runs (see `graph.rs`): captures on one backend take turns.
    pub(crate) fn capture_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        lock(&self.capture)
    }

    /// Wait for all work on kiln's stream.
    pub fn synchronize(&self) -> Result<()> {
        if self.is_capturing_here() {
            return Err(Error::Capture {
                op: "synchronize".into(),
                reason: "a capture records work without running it, so there is nothing to wait for; read results after Graph::launch".into(),
            });
        }
        self.stream
            .synchronize()
            .map_err(|e| self.err("cuStreamSynchronize", e))
    }

    /// Time `f` with CUDA events on kiln's stream: `warmup` untimed runs, then `reps` timed
    /// ones; returns each rep's milliseconds.
    pub fn time_ms(&self, warmup: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
        for _ in 0..warmup {
            f()?;
        }
        self.synchronize()?;
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut out = Vec::with_capacity(reps);
        for _ in 0..reps {
            let a = self
                .ctx
                .new_event(flags)
                .map_err(|e| self.err("cuEventCreate", e))?;
            let b = self
                .ctx
                .new_event(flags)
                .map_err(|e| self.err("cuEventCreate", e))?;
            a.record(&self.stream).map_err(|e| self.err("cuEventRecord", e))?;
            f()?;
            b.record(&self.stream).map_err(|e| self.err("cuEventRecord", e))?;
            out.push(a.elapsed_ms(&b).map_err(|e| self.err("cuEventElapsedTime", e))? as f64);
        }
        Ok(out)
    }
}

thread_local! {
    /// The backend (by address) this thread is capturing a graph on, or 0.
    static CAPTURING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these maps inconsistent (inserts are
    // single operations), so a poisoned lock is still safe to use.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Map a driver error to kiln's error.
pub fn cuda_err(op: &str, device: &str, e: DriverError) -> Error {
    let code = e.0 as i32;
    Error::Cuda {
        op: op.into(),
        device: device.into(),
        code,
        name: cuda_code_name(code),
    }
}
