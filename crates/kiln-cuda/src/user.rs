//! Users' own CUDA C++ kernels (CuPy's `RawModule`/`RawKernel`): a source compiled by NVRTC
//! for the device's exact `sm_XX`, cached on disk beside kiln's own programs, loaded once per
//! backend, and launched with checked arguments on the stream kiln's ops use.
//!
//! - [`UserSource`]: the source and the user's NVRTC options, validated (kiln picks the
//!   arch, so `-arch`/`--gpu-architecture` are refused), as one cache [`Unit`]: the cache key
//!   is the same SHA-256 over name, source, options, arch and NVRTC version as kiln's
//!   programs', so a second call or a second process compiles nothing.
//! - [`UserModule`]: the loaded cubin and the parameter lists of its `__global__` functions
//!   ([`signature`]); [`UserModule::function`] looks one up.
//! - [`UserFunction::launch`]: checks the argument count, each argument against its
//!   parameter (buffers of the pointed-to dtype, scalars converted exactly), and the launch
//!   shape against the device's and the function's limits; then launches on
//!   [`CudaBackend::stream`] (the capture stream while this thread captures a graph) inside a
//!   profiler range `user:<name>`, mapping errors as kiln's launchers do, so a sticky fault
//!   is classified the same way.
#![allow(unsafe_code)]

mod args;
pub mod resources;
pub mod signature;

use args::{convert, Value};
pub use args::{BufferArg, ExternalArg, KernelArg, Scalar};

use crate::cache::{KernelCache, Unit};
use crate::{nvrtc, CudaBackend};
use cudarc::driver::sys::{CUdevice_attribute as A, CUfunction_attribute as FA};
use cudarc::driver::{sys, CudaFunction, CudaModule, LaunchConfig, PushKernelArg};
use kiln_core::{Backend, Error, Result};
pub use signature::{Param, ParamType, ScalarType, Signature};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The op name user-kernel errors carry.
const OP: &str = "raw kernel";

/// Options every user source gets unless it sets its own: line info for profilers and
/// compute-sanitizer, and the C++ standard kiln's own kernels use.
const DEFAULT_OPTIONS: &[&str] = &["-lineinfo", "--std=c++17"];

/// A user's source with its validated NVRTC options: one unit of the cubin cache.
#[derive(Clone, Debug)]
pub struct UserSource {
    name: String,
    source: String,
    options: Vec<String>,
}

impl UserSource {
    /// Validate `options` and build the full option list: `-lineinfo` and `--std=c++17`
    /// unless `options` gives its own `-std`, then `options` in order, then any
    /// `KILN_NVRTC_EXTRA` (as for kiln's programs). The unit is named `user_<kernel>` after
    /// the alphabetically first `__global__` function (`user` when none is found): the
    /// prefix of its cache file and the module name of a compile error.
    pub fn new(source: &str, options: &[String]) -> Result<Self> {
        validate_options(options)?;
        let has_std = options.iter().any(|o| option_name(o) == "std");
        let mut all: Vec<String> = DEFAULT_OPTIONS
            .iter()
            .filter(|d| {
                let replaced = has_std && option_name(d) == "std";
                let given = options.iter().any(|o| o == *d);
                !replaced && !given
            })
            .map(|s| s.to_string())
            .collect();
        all.extend(options.iter().cloned());
        all.extend(nvrtc::extra_options());
        // (a kernel's name is ASCII; 64 characters keep the cache file's name short)
        let name = match signature::kernels(source).keys().next() {
            Some(k) => format!("user_{}", &k[..k.len().min(64)]),
            None => "user".into(),
        };
        Ok(UserSource {
            name,
            source: source.into(),
            options: all,
        })
    }

    /// The cache unit.
    pub fn unit(&self) -> Unit<'_> {
        Unit {
            name: &self.name,
            source: &self.source,
            options: &self.options,
        }
    }

    /// The unit's name (`user_<kernel>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The NVRTC options it compiles with, the arch apart.
    pub fn options(&self) -> &[String] {
        &self.options
    }

    /// The cache key for `arch` and NVRTC `version` (also the backend's key for the loaded
    /// module).
    pub fn key(&self, arch: &str, version: (i32, i32)) -> [u8; 32] {
        KernelCache::key(&self.unit(), arch, version)
    }

    /// Compile to a cubin for `arch` (no GPU needed, only libnvrtc). A source that does not
    /// compile is [`Error::Compile`] with NVRTC's log, whose lines name `<name>.cu(line)`.
    /// A missing header (kiln gives NVRTC no include path, and NVRTC alone has no
    /// `cuda_fp16.h`) adds a hint to the log.
    pub fn compile(&self, arch: &str) -> Result<Vec<u8>> {
        nvrtc::compile(&self.unit(), &format!("{}.cu", self.name), arch, &[])
            .map(|(c, _)| c)
            .map_err(|e| match e {
                Error::Compile { module, arch, log } if log.contains("could not open source file") => Error::Compile {
                    module,
                    arch,
                    log: format!(
                        "{log}\nkiln passes NVRTC no include path: add one to the options for the CUDA headers, e.g. -I/usr/local/cuda/include"
                    ),
                },
                e => e,
            })
    }
}

/// An option's name without its dashes and value: `--gpu-architecture=sm_90` ->
/// `gpu-architecture`, `-std=c++17` -> `std`, `-DN=4` -> `DN`.
fn option_name(o: &str) -> &str {
    let o = o.trim_start_matches('-');
    o.split(['=', ' ', '\t']).next().unwrap_or(o)
}

/// Refuse what kiln decides itself or what cannot be an option.
fn validate_options(options: &[String]) -> Result<()> {
    for o in options {
        let bad = |why: &str| Err(Error::invalid(OP, format!("NVRTC option `{o}`: {why}")));
        if o.trim().is_empty() {
            return bad("an empty option; leave it out");
        }
        if o.contains('\0') {
            return bad("contains a NUL byte");
        }
        if !o.starts_with('-') {
            return bad("options start with `-` (e.g. `-DN=4`, `--use_fast_math`, `-std=c++17`); give one option per string");
        }
        if matches!(option_name(o), "arch" | "gpu-architecture" | "gpu-name") {
            return bad("kiln compiles for the device's exact architecture (sm_XX of its compute capability); remove this option");
        }
    }
    Ok(())
}

/// The device limits a launch shape is checked against (read once per module).
#[derive(Clone, Copy, Debug)]
struct DeviceLimits {
    block: [u32; 3],
    grid: [u32; 3],
    /// Shared memory a block can have once a function opts in.
    shared_optin: u32,
}

impl DeviceLimits {
    fn of(b: &CudaBackend) -> Result<Self> {
        let dev = |a: A| -> Result<u32> {
            b.stream()
                .context()
                .attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| b.err("cuDeviceGetAttribute", e))
        };
        Ok(DeviceLimits {
            block: [
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            grid: [
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                dev(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            shared_optin: dev(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        })
    }
}

/// A user's compiled source, loaded on one backend.
pub struct UserModule {
    module: Arc<CudaModule>,
    backend: usize,
    device: String,
    limits: DeviceLimits,
    name: String,
    kernels: BTreeMap<String, std::result::Result<Signature, String>>,
}

impl std::fmt::Debug for UserModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserModule")
            .field("name", &self.name)
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl UserModule {
    pub(crate) fn new(module: Arc<CudaModule>, backend: &CudaBackend, src: &UserSource) -> Result<Self> {
        Ok(UserModule {
            module,
            backend: backend.id(),
            device: backend.name(),
            limits: DeviceLimits::of(backend)?,
            name: src.name.clone(),
            kernels: signature::kernels(&src.source),
        })
    }

    /// The module's name (`user_<kernel>`, as [`UserSource::name`]).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `__global__` functions found in the source, each with its signature or why it
    /// could not be parsed.
    pub fn kernels(&self) -> &BTreeMap<String, std::result::Result<Signature, String>> {
        &self.kernels
    }

    /// The kernel `name` (an `extern "C"` symbol). Its arguments are checked against the
    /// parameter list parsed from the source; a kernel whose list could not be parsed can be
    /// launched only after [`UserFunction::with_signature`].
    pub fn function(&self, name: &str) -> Result<UserFunction> {
        if name.contains('\0') {
            // (cudarc's lookup would panic on it)
            return Err(Error::invalid(
                OP,
                format!("kernel name {name:?} contains a NUL byte"),
            ));
        }
        let f = self.module.load_function(name).map_err(|_| {
            let found: Vec<&str> = self.kernels.keys().map(String::as_str).collect();
            Error::invalid(
                OP,
                format!(
                    "no kernel `{name}` in module `{}` (found: {}); a kernel must be declared `extern \"C\" __global__` so its name is not mangled",
                    self.name,
                    if found.is_empty() { "none".into() } else { found.join(", ") }
                ),
            )
        })?;
        let sig = match self.kernels.get(name) {
            Some(Ok(s)) => Ok(s.params.clone()),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!(
                "no declaration of `{name}` was found in the source (a macro?)"
            )),
        };
        UserFunction::new(f, self.backend, &self.device, self.limits, name, sig)
    }
}

/// One kernel of a [`UserModule`], ready to launch (cheap to clone).
#[derive(Clone)]
pub struct UserFunction {
    inner: Arc<FnInner>,
    params: std::result::Result<Vec<Param>, String>,
}

struct FnInner {
    func: CudaFunction,
    backend: usize,
    name: String,
    /// What the driver says the parameters occupy, in bytes (`None` where the driver is older
    /// than CUDA 12.4, which has no `cuFuncGetParamInfo`).
    driver_sizes: Option<Vec<usize>>,
    limits: DeviceLimits,
    max_threads: u32,
    static_shared: u32,
    /// The function's dynamic shared memory cap (raised on demand, never lowered; a lock
    /// so two launches raising it at once cannot leave it below either's need).
    dynamic_cap: Mutex<u32>,
}

impl std::fmt::Debug for UserFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserFunction")
            .field("name", &self.inner.name)
            .field("params", &self.params)
            .finish()
    }
}

impl UserFunction {
    fn new(
        func: CudaFunction,
        backend: usize,
        device: &str,
        limits: DeviceLimits,
        name: &str,
        params: std::result::Result<Vec<Param>, String>,
    ) -> Result<Self> {
        let attr = |a: FA| {
            func.get_attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| crate::cuda_err(&format!("cuFuncGetAttribute({name})"), device, e))
        };
        let inner = FnInner {
            max_threads: attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_shared: attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            dynamic_cap: Mutex::new(attr(FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?),
            driver_sizes: driver_param_sizes(&func),
            limits,
            func,
            backend,
            name: name.into(),
        };
        let f = UserFunction {
            inner: Arc::new(inner),
            params: Err(String::new()),
        };
        // a parsed list the driver contradicts is not used (with_signature can replace it)
        let params = params.and_then(|p| {
            f.clone()
                .checked(p, "the parameter list parsed from the source")
                .map(|f| f.params)
                .map_err(|e| e.to_string())
                .and_then(|p| p)
        });
        Ok(UserFunction { params, ..f })
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The parameters arguments are checked against, or why there are none.
    pub fn params(&self) -> std::result::Result<&[Param], &str> {
        self.params.as_deref().map_err(String::as_str)
    }

    /// The same kernel with the parameter list `params` (written as between a declaration's
    /// parentheses, e.g. `"const float* x, float* y, int n"`) in place of the one parsed from
    /// the source: for kernels whose declaration kiln cannot read (templates instantiated
    /// under an `extern "C"` wrapper, macros). kiln cannot check this list against the
    /// kernel's code; where the driver reports parameter sizes (CUDA 12.4 and later) their
    /// count and sizes are checked against it.
    pub fn with_signature(&self, params: &str) -> Result<UserFunction> {
        let p = signature::parse_params(params)
            .map_err(|e| Error::invalid(OP, format!("{}: {e}", self.name())))?;
        self.clone().checked(p, "the declared parameter list")
    }

    fn checked(mut self, params: Vec<Param>, what: &str) -> Result<Self> {
        if let Some(sizes) = &self.inner.driver_sizes {
            let ours: Vec<usize> = params.iter().map(|p| p.ty.size_bytes()).collect();
            if &ours != sizes {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "kernel `{}`: {what} gives parameters of {ours:?} bytes but the compiled kernel's are {sizes:?}; declare it with UserFunction::with_signature",
                        self.name()
                    ),
                ));
            }
        }
        self.params = Ok(params);
        Ok(self)
    }

    /// Launch on `backend` (the one whose module this is): a `grid` of `block`s with
    /// `shared_mem` bytes of dynamic shared memory. Arguments are checked first (count, each
    /// against its parameter), then the shape against the limits; nothing is launched on an
    /// error. Queued on [`CudaBackend::stream`], like kiln's ops: the caller orders buffers
    /// written on other streams ([`crate::CudaStorage::use_on`]).
    ///
    /// What the kernel does with its pointers is the kernel's own business: an access out of
    /// bounds faults on the device (a sticky error, surfaced at the next host read or
    /// synchronisation) or corrupts other device data; it cannot reach host memory.
    pub fn launch(
        &self,
        backend: &CudaBackend,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem: u32,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        let name = self.name();
        if backend.id() != self.inner.backend {
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{name}` was loaded on another backend than {}; load its module on this one",
                    backend.name()
                ),
            ));
        }
        let values = self.check_args(args)?;
        let cfg = self.check_shape(backend, grid, block, shared_mem)?;
        let op = format!("user:{name}");
        let stream = backend.stream().clone();
        let _range = backend.range_on(&op, &stream);
        let mut l = stream.launch_builder(&self.inner.func);
        for v in &values {
            match v {
                Value::Bool(x) => l.arg(x),
                Value::I8(x) => l.arg(x),
                Value::I16(x) => l.arg(x),
                Value::I32(x) => l.arg(x),
                Value::I64(x) => l.arg(x),
                Value::U8(x) => l.arg(x),
                Value::U16(x) => l.arg(x),
                Value::U32(x) => l.arg(x),
                Value::U64(x) => l.arg(x),
                Value::F32(x) => l.arg(x),
                Value::F64(x) => l.arg(x),
            };
        }
        // SAFETY: one argument per parameter, each of the parameter's size (the count and
        // types were checked against the parsed or declared list, and that list's sizes
        // against the driver's where it reports them), so the driver reads exactly the values
        // pushed, which live until the launch returns. Pointer arguments are live device
        // blocks borrowed by `args` for the enqueue; a block freed afterwards returns to the
        // pool only after this stream's work (stream-ordered pool, recorded uses).
        unsafe { l.launch(cfg) }.map_err(|e| crate::cuda_err(&op, &backend.name(), e))?;
        Ok(())
    }

    /// [`UserFunction::launch`] on `stream`, a stream another library owns in this
    /// backend's context (CuPy's or torch's current stream, so the kernel is ordered with the
    /// caller's own work without an event in either direction), or 0, the legacy default
    /// stream. The same checks of the arguments, grid, block and shared memory; no profiler
    /// range (kiln's profiler records on its own streams). Errors map as kiln's launches do,
    /// a sticky fault included.
    ///
    /// # Safety
    ///
    /// `stream` must be 0 or a live `CUstream` of this backend's context, and every pointer
    /// argument (buffers, [`KernelArg::external`] arrays) must address device memory of that
    /// context that stays valid until the kernel has run in `stream`'s order.
    pub unsafe fn launch_on_stream(
        &self,
        backend: &CudaBackend,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem: u32,
        args: &[KernelArg<'_>],
        stream: u64,
    ) -> Result<()> {
        let name = self.name();
        if backend.id() != self.inner.backend {
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{name}` was loaded on another backend than {}; load its module on this one",
                    backend.name()
                ),
            ));
        }
        let values = self.check_args(args)?;
        let cfg = self.check_shape(backend, grid, block, shared_mem)?;
        let op = format!("user:{name}");
        backend
            .stream()
            .context()
            .bind_to_thread()
            .map_err(|e| crate::cuda_err(&op, &backend.name(), e))?;
        let mut params: Vec<*mut std::ffi::c_void> = values.iter().map(|v| v.as_param()).collect();
        // SAFETY: the function belongs to this backend's context (checked above); one
        // parameter address per checked value, each living in `values` until the call returns
        // (cuLaunchKernel copies them); the stream and the pointers' memory are the caller's
        // contract.
        unsafe {
            cudarc::driver::result::launch_kernel(
                self.inner.func.cu_function(),
                cfg.grid_dim,
                cfg.block_dim,
                cfg.shared_mem_bytes,
                stream as cudarc::driver::sys::CUstream,
                &mut params,
            )
        }
        .map_err(|e| crate::cuda_err(&op, &backend.name(), e))
    }

    fn check_args(&self, args: &[KernelArg<'_>]) -> Result<Vec<Value>> {
        let name = self.name();
        let params = self.params.as_ref().map_err(|why| {
            Error::invalid(
                OP,
                format!(
                    "kernel `{name}`: its parameter list could not be parsed ({why}), so its arguments cannot be checked; declare it with UserFunction::with_signature(\"const float* x, int n\") (the text between its parentheses)"
                ),
            )
        })?;
        if params.len() != args.len() {
            let list: Vec<&str> = params.iter().map(|p| p.text.as_str()).collect();
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{name}` takes {} arguments ({}), got {}",
                    params.len(),
                    list.join(", "),
                    args.len()
                ),
            ));
        }
        params
            .iter()
            .zip(args)
            .enumerate()
            .map(|(i, (p, a))| {
                convert(p, a).map_err(|why| {
                    Error::invalid(
                        OP,
                        format!("kernel `{name}` argument {} (`{}`): {why}", i + 1, p.text),
                    )
                })
            })
            .collect()
    }

    fn check_shape(
        &self,
        b: &CudaBackend,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_mem: u32,
    ) -> Result<LaunchConfig> {
        let name = self.name();
        let bad = |why: String| Err(Error::invalid(OP, format!("kernel `{name}`: {why}")));
        let (g, k) = ([grid.0, grid.1, grid.2], [block.0, block.1, block.2]);
        if g.contains(&0) || k.contains(&0) {
            return bad(format!("grid {grid:?} and block {block:?} must be at least 1 in every dimension (an empty launch does nothing: skip it)"));
        }
        let threads = k.iter().map(|&x| u64::from(x)).product::<u64>();
        let max_threads = self.inner.max_threads;
        if threads > u64::from(max_threads) {
            return bad(format!(
                "block {block:?} has {threads} threads; this kernel can run at most {max_threads} per block on {} (the device's and the kernel's register limit)",
                b.name()
            ));
        }
        let l = &self.inner.limits;
        let dims = [
            ("block x", k[0], l.block[0]),
            ("block y", k[1], l.block[1]),
            ("block z", k[2], l.block[2]),
            ("grid x", g[0], l.grid[0]),
            ("grid y", g[1], l.grid[1]),
            ("grid z", g[2], l.grid[2]),
        ];
        for (what, v, max) in dims {
            if v > max {
                return bad(format!("{what} = {v} exceeds the device's maximum {max}"));
            }
        }
        let static_shared = self.inner.static_shared;
        let optin = l.shared_optin;
        if u64::from(shared_mem) + u64::from(static_shared) > u64::from(optin) {
            return bad(format!(
                "{shared_mem} B of dynamic shared memory plus the kernel's {static_shared} B of static shared memory exceed the {optin} B a block can have on {}",
                b.name()
            ));
        }
        let mut cap = crate::backend::lock(&self.inner.dynamic_cap);
        if shared_mem > *cap {
            // above the default cap (48 KiB less the static part) the function must opt in
            b.stream()
                .context()
                .bind_to_thread()
                .map_err(|e| b.err("cuCtxSetCurrent", e))?;
            self.inner
                .func
                .set_attribute(
                    FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_mem as i32,
                )
                .map_err(|e| {
                    b.err(
                        &format!("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {name})"),
                        e,
                    )
                })?;
            *cap = shared_mem;
        }
        Ok(LaunchConfig {
            grid_dim: grid,
            block_dim: block,
            shared_mem_bytes: shared_mem,
        })
    }
}

/// The parameter sizes the driver reports for `f` (`cuFuncGetParamInfo`), or `None` where
/// the driver predates it (CUDA 12.4).
fn driver_param_sizes(f: &CudaFunction) -> Option<Vec<usize>> {
    let mut version = 0;
    // SAFETY: `version` is valid for writes; cuDriverGetVersion needs no context.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().ok()?;
    if version < 12040 {
        return None;
    }
    let mut sizes = Vec::new();
    // a kernel's parameters fit in 32 KiB, so there are at most that many
    for i in 0..32768usize {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: the function handle is live (its module is held by `f`); the driver (12.4 or
        // later, checked above) has this entry point; both outputs are valid for writes. An
        // index past the last parameter returns an error, which ends the list.
        let r = unsafe { sys::cuFuncGetParamInfo(f.cu_function(), i, &mut offset, &mut size) };
        match r {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size),
            // past the last parameter
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => break,
            // anything else: the driver cannot say, so nothing is checked against it
            _ => return None,
        }
    }
    Some(sizes)
}

#[cfg(test)]
#[path = "user/tests.rs"]
mod tests;
