//! [`Runtime`]: backend selection and fallback.

use kiln_core::{Backend, BackendKind, Config, DeviceRequest, Error, Result, UnaryOp};
use kiln_cpu::CpuBackend;
use kiln_cuda::{discovery, CudaBackend, KernelCache};

/// The backend a runtime drives.
#[derive(Debug)]
pub enum Engine {
    /// The CPU.
    Cpu(CpuBackend),
    /// One CUDA device.
    Cuda(Box<CudaBackend>),
}

/// The entry point: holds the selected backend and why it was selected.
#[derive(Debug)]
pub struct Runtime {
    engine: Engine,
    requested: DeviceRequest,
    fallback_reason: Option<String>,
}

impl Runtime {
    /// A CPU runtime (never fails).
    pub fn cpu() -> Self {
        Runtime {
            engine: Engine::Cpu(CpuBackend::new()),
            requested: DeviceRequest::Cpu,
            fallback_reason: None,
        }
    }

    /// Select a backend for `request` under `config`'s device policy.
    ///
    /// `auto` falls back to the CPU (logging one warning with the reason, available from
    /// [`Runtime::fallback_reason`]); `cuda` and `cuda:N` return the `NoDevice` error instead.
    pub fn new(request: DeviceRequest, config: &Config) -> Result<Self> {
        if request == DeviceRequest::Cpu {
            return Ok(Runtime::cpu());
        }
        match Self::open_cuda(request, config) {
            Ok(b) => Ok(Runtime {
                engine: Engine::Cuda(Box::new(b)),
                requested: request,
                fallback_reason: None,
            }),
            Err(e) if request == DeviceRequest::Auto && !e.is_sticky() => {
                let reason = e.to_string();
                tracing::warn!("no usable GPU, running on the CPU: {reason}");
                Ok(Runtime {
                    engine: Engine::Cpu(CpuBackend::new()),
                    requested: request,
                    fallback_reason: Some(reason),
                })
            }
            Err(e) => Err(e),
        }
    }

    fn open_cuda(request: DeviceRequest, config: &Config) -> Result<CudaBackend> {
        let probe = discovery::probe()?;
        if !kiln_cuda::nvrtc::available() {
            return Err(Error::NoDevice(kiln_core::NoDeviceReason::NvrtcNotFound));
        }
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
    }

    /// The backend in use.
    pub fn backend(&self) -> &dyn Backend {
        match &self.engine {
            Engine::Cpu(c) => c,
            Engine::Cuda(c) => c.as_ref(),
        }
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
        self.backend().kind()
    }

    /// `cpu` or `cuda:N`.
    pub fn device_name(&self) -> String {
        self.backend().name()
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
        self.backend().unary_f32(op, x, out)
    }

    /// `op` applied element-wise to `x`.
    pub fn unary(&self, op: UnaryOp, x: &[f32]) -> Result<Vec<f32>> {
        let mut out = vec![f32::NAN; x.len()];
        self.unary_into(op, x, &mut out)?;
        Ok(out)
    }

    /// Element-wise logistic sigmoid.
    pub fn sigmoid(&self, x: &[f32]) -> Result<Vec<f32>> {
        self.unary(UnaryOp::Sigmoid, x)
    }
}
