//! [`Runtime`]: backend selection and fallback.

use crate::adaptive::{AdaptiveReport, CpuBudget};
use kiln_core::{BackendKind, Config, DeviceRequest, Error, Result, UnaryOp};
use kiln_cpu::CpuBackend;
use kiln_cuda::{discovery, CudaBackend, KernelCache};
use std::sync::Arc;

/// The backend a runtime drives.
#[derive(Debug)]
pub enum Engine {
    /// The CPU.
    Cpu(CpuBackend),
    /// One CUDA device.
    Cuda(Arc<CudaBackend>),
}

/// The entry point: holds the selected backend and why it was selected.
#[derive(Debug)]
pub struct Runtime {
    engine: Engine,
    requested: DeviceRequest,
    fallback_reason: Option<String>,
    cpu_budget: Option<Arc<CpuBudget>>,
}

impl Runtime {
    /// A CPU runtime (never fails).
    pub fn cpu() -> Self {
        Runtime {
            engine: Engine::Cpu(CpuBackend::new()),
            requested: DeviceRequest::Cpu,
            fallback_reason: None,
            cpu_budget: None,
        }
    }

    /// Limit the host memory one CPU op may allocate (`None`: unlimited); ops over it fail
    /// with `OutOfMemory` like a GPU would, which [`Runtime::run_adaptive`] recovers from.
    pub fn with_cpu_budget(mut self, bytes: Option<u64>) -> Self {
        self.cpu_budget = bytes.map(|b| Arc::new(CpuBudget::new(b)));
        self
    }

    /// Select a backend for `request` under `config`'s device policy.
    ///
    /// `auto` falls back to the CPU (logging one warning with the reason, available from
    /// [`Runtime::fallback_reason`]); `cuda` and `cuda:N` return the `NoDevice` error instead.
    pub fn new(request: DeviceRequest, config: &Config) -> Result<Self> {
        let budget = config.cpu_memory_budget;
        if request == DeviceRequest::Cpu {
            return Ok(Runtime::cpu().with_cpu_budget(budget));
        }
        match Self::open_cuda(request, config) {
            Ok(b) => Ok(Runtime {
                engine: Engine::Cuda(Arc::new(b)),
                requested: request,
                fallback_reason: None,
                cpu_budget: None,
            }
            .with_cpu_budget(budget)),
            Err(e) if request == DeviceRequest::Auto && !e.is_sticky() => {
                let reason = e.to_string();
                tracing::warn!("no usable GPU, running on the CPU: {reason}");
                Ok(Runtime {
                    engine: Engine::Cpu(CpuBackend::new()),
                    requested: request,
                    fallback_reason: Some(reason),
                    cpu_budget: None,
                }
                .with_cpu_budget(budget))
            }
            Err(e) => Err(e),
        }
    }

    fn open_cuda(request: DeviceRequest, config: &Config) -> Result<CudaBackend> {
        // libnvrtc loads on its own thread beside the driver's initialisation and the
        // context's creation; CudaBackend::new waits for it (NvrtcNotFound where it is
        // missing). Not where there is no driver: a CPU fallback never needs it.
        use kiln_cuda::libs::{preload, present, Lib};
        if present(Lib::Cuda) {
            preload(Lib::Nvrtc);
        }
        let t = std::time::Instant::now();
        let probe = discovery::probe()?;
        let probe_ms = t.elapsed().as_secs_f64() * 1e3;
        let descs: Vec<_> = probe.devices.iter().map(|d| d.desc.clone()).collect();
        let ordinal = config
            .devices
            .select(request, &descs)?
            .ok_or_else(|| Error::invalid("device", "the CPU was selected where a GPU was asked for"))?;
        let info = probe
            .devices
            .iter()
            .find(|d| d.desc.ordinal == ordinal)
            .ok_or_else(|| Error::invalid("device", format!("cuda:{ordinal} vanished after discovery")))?;
        CudaBackend::new(info, KernelCache::new(&config.cache_dir), config.gpu_memory_limit)
            .map(|b| b.with_probe_ms(probe_ms))
    }

    /// The engine, to reach backend-specific features.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The CUDA backend, if one is in use.
    pub fn cuda(&self) -> Option<&CudaBackend> {
        match &self.engine {
            Engine::Cuda(c) => Some(c),
            Engine::Cpu(_) => None,
        }
    }

    /// CPU or CUDA.
    pub fn kind(&self) -> BackendKind {
        match &self.engine {
            Engine::Cpu(_) => BackendKind::Cpu,
            Engine::Cuda(_) => BackendKind::Cuda,
        }
    }

    /// `cpu` or `cuda:N`.
    pub fn device_name(&self) -> String {
        match &self.engine {
            Engine::Cpu(c) => c.name(),
            Engine::Cuda(c) => c.name(),
        }
    }

    /// What was asked for.
    pub fn requested(&self) -> DeviceRequest {
        self.requested
    }

    /// The device pool's counters (`None` on the CPU).
    pub fn memory_stats(&self) -> Option<kiln_cuda::pool::MemoryStats> {
        self.cuda().map(|c| c.memory_stats())
    }

    /// Release cached device memory; returns the bytes released (0 on the CPU).
    pub fn empty_cache(&self) -> u64 {
        self.cuda().map(|c| c.empty_cache()).unwrap_or(0)
    }

    /// Why `auto` fell back to the CPU, if it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// `out[i] = op(x[i])` into a caller's buffer.
    pub fn unary_into(&self, op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.map_into(kiln_core::backend::MapOp::Unary(op), x, out)
    }

    /// Reserve `bytes` of the CPU budget for `op` while the guard lives (no-op on a GPU
    /// runtime or without a budget).
    pub fn reserve_host(&self, op: &str, bytes: u64) -> Result<Option<crate::adaptive::Reservation<'_>>> {
        match (&self.engine, &self.cpu_budget) {
            (Engine::Cpu(_), Some(b)) => b.reserve(op, bytes).map(Some),
            _ => Ok(None),
        }
    }

    /// Run `f` over `items` in batches, halving the batch on out-of-memory (after emptying
    /// the device cache) and resuming at the failed batch; see
    /// [`run_adaptive`](crate::adaptive::run_adaptive).
    pub fn run_adaptive<T, R>(
        &self,
        items: &[T],
        initial_batch: usize,
        f: impl FnMut(&[T]) -> Result<Vec<R>>,
    ) -> Result<(Vec<R>, AdaptiveReport)> {
        crate::adaptive::run_adaptive(
            items,
            initial_batch,
            || {
                self.empty_cache();
            },
            f,
        )
    }

    /// `op` applied element-wise to `x`.
    pub fn unary(&self, op: UnaryOp, x: &[f32]) -> Result<Vec<f32>> {
        let _r = self.reserve_host(op.name(), (x.len() * 4) as u64)?;
        // the pages faulted in by all cores first, on huge pages where the kernel has them
        kiln_cuda::transfer::host_vec_then(x.len(), |out| self.unary_into(op, x, out))
    }

    /// Element-wise logistic sigmoid.
    pub fn sigmoid(&self, x: &[f32]) -> Result<Vec<f32>> {
        self.unary(UnaryOp::Sigmoid, x)
    }
}
