//! Loading kernels: each kernel is its own NVRTC program ([`Program`]), looked up in the
//! cubin cache, compiled on a miss, and loaded into the context on first use. Programs load
//! independently: a per-program slot makes two threads asking for one program compile it
//! once while other programs compile meanwhile, and [`CudaBackend::prepare`] compiles a set
//! of kernels on several threads at once.

use super::{lock, CudaBackend, ModuleLoad};
use crate::cache::CacheEvent;
use crate::coldstart;
use crate::kernels::{Kernel, Program};
use crate::nvrtc;
use crate::user::{UserModule, UserSource};
use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;
use kiln_core::Result;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One program's module, filled by the first thread that loads it.
pub(super) type Slot = Arc<Mutex<Option<Arc<CudaModule>>>>;

/// One user source's module, filled by the first thread that loads it.
pub(super) type UserSlot = Arc<Mutex<Option<Arc<UserModule>>>>;

impl CudaBackend {
    /// Load a program (a kernel alone, or a whole module) from the cubin cache, compiling
    /// it on a miss, and return its module.
    pub fn module(&self, program: impl Into<Program>) -> Result<Arc<CudaModule>> {
        self.module_for(program.into(), &self.info.arch())
    }

    /// [`Self::module`] compiled for `arch` (a program that needs an architecture's
    /// `a`-suffixed features, e.g. `sm_90a`, on this device); one arch per program.
    pub(crate) fn module_for(&self, p: Program, arch: &str) -> Result<Arc<CudaModule>> {
        let slot = lock(&self.modules).entry(p.name()).or_default().clone();
        let mut slot = lock(&slot);
        if let Some(md) = slot.as_ref() {
            return Ok(md.clone());
        }
        let options = nvrtc::options(p);
        let (cubin, event) =
            self.cache
                .get_or_compile(&coldstart::unit(p, &options), arch, self.nvrtc, || {
                    nvrtc::compile_cubin(p, arch)
                })?;
        let md = self.load_cubin(cubin, event)?;
        *slot = Some(md.clone());
        Ok(md)
    }

    /// Load a cubin into the context and record the load.
    fn load_cubin(&self, cubin: Vec<u8>, event: CacheEvent) -> Result<Arc<CudaModule>> {
        let t0 = Instant::now();
        let md = self
            .ctx
            .load_module(Ptx::from_binary(cubin))
            .map_err(|e| self.err("cuModuleLoadData", e))?;
        lock(&self.loads).push(ModuleLoad {
            cache: event,
            load_ms: t0.elapsed().as_secs_f64() * 1e3,
        });
        Ok(md)
    }

    /// A user's CUDA C++ `source` compiled with NVRTC `options` (validated: see
    /// [`UserSource::new`]) for this device's exact arch, through the cubin cache kiln's own
    /// programs use (a second call, or a second process, compiles nothing), and loaded once
    /// per backend: a later call with the same source and options returns the same module.
    ///
    /// ```no_run
    /// # fn demo(b: &kiln_cuda::CudaBackend) -> kiln_core::Result<()> {
    /// use kiln_cuda::user::KernelArg;
    /// let m = b.user_module(r#"extern "C" __global__ void fill(float* y, float v, int n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = v;
    /// }"#, &[])?;
    /// let fill = m.function("fill")?;
    /// let y = b.alloc::<f32>(1000)?;
    /// fill.launch(b, (4, 1, 1), (256, 1, 1), 0, &[KernelArg::buffer(&y), 2.5f32.into(), 1000i32.into()])?;
    /// # Ok(()) }
    /// ```
    pub fn user_module(&self, source: &str, options: &[String]) -> Result<Arc<UserModule>> {
        let src = UserSource::new(source, options)?;
        let arch = self.info.arch();
        let key = src.key(&arch, self.nvrtc);
        let slot = lock(&self.user_modules).entry(key).or_default().clone();
        let mut slot = lock(&slot);
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        let (cubin, event) = self
            .cache
            .get_or_compile(&src.unit(), &arch, self.nvrtc, || src.compile(&arch))?;
        let md = self.load_cubin(cubin, event)?;
        let m = Arc::new(UserModule::new(md, self, &src)?);
        *slot = Some(m.clone());
        Ok(m)
    }

    /// The function for a kernel (its program loaded first).
    pub fn function(&self, k: Kernel) -> Result<CudaFunction> {
        if let Some(f) = lock(&self.functions).get(&k) {
            return Ok(f.clone());
        }
        let f = self
            .module(k)?
            .load_function(k.symbol())
            .map_err(|e| self.err(k.symbol(), e))?;
        lock(&self.functions).insert(k, f.clone());
        Ok(f)
    }

    /// Load every kernel of `kernels` not loaded yet, compiling cache misses on up to one
    /// thread per CPU at once (longest estimated compile first), so a caller that needs
    /// several kernels waits about as long as the slowest, not the sum. The first error is
    /// returned after every thread has stopped.
    pub fn prepare(&self, kernels: &[Kernel]) -> Result<()> {
        let todo: Vec<Kernel> = {
            let have = lock(&self.functions);
            kernels
                .iter()
                .copied()
                .filter(|k| !have.contains_key(k))
                .collect()
        };
        coldstart::run_parallel(&todo, |&k| self.function(k).map(|_| ()))
    }

    /// Compile (or load) every kernel, in parallel, as `kiln cache warm` does.
    pub fn warm(&self) -> Result<()> {
        self.prepare(Kernel::ALL)
    }
}
