//! One kernel of a user's module: its parameters (typed, or known by size only), the
//! argument and launch-shape checks, the launch (plain or cooperative) and the function's
//! attributes.

use super::load::driver_err;
use super::{convert, convert_sized, signature, DeviceLimits, KernelArg, Param, Value, OP};
use crate::CudaBackend;
use cudarc::driver::sys::CUfunction_attribute as FA;
use cudarc::driver::{sys, CudaContext, CudaFunction, LaunchConfig};
use kiln_core::{Error, Result};
use std::sync::{Arc, Mutex};

/// One kernel of a [`super::UserModule`], ready to launch (cheap to clone).
#[derive(Clone)]
pub struct UserFunction {
    inner: Arc<FnInner>,
    /// Shared, so a clone (launch caches hand out clones on every launch) copies no list.
    params: Arc<Params>,
    cooperative: bool,
}

/// What a launch's arguments are checked against.
#[derive(Clone, Debug)]
enum Params {
    /// The parameter list, read from the source or declared.
    Typed(Vec<Param>),
    /// Only the parameter sizes the driver reports, and why the types are unknown.
    Sized(Vec<usize>, String),
    /// Nothing (a driver older than CUDA 12.4 and no readable declaration): why.
    Unknown(String),
}

struct FnInner {
    func: CudaFunction,
    ctx: Arc<CudaContext>,
    backend: usize,
    device: String,
    name: String,
    /// What the driver says the parameters occupy, in bytes (`None` where the driver is older
    /// than CUDA 12.4, which has no `cuFuncGetParamInfo`).
    driver_sizes: Option<Vec<usize>>,
    limits: DeviceLimits,
    max_threads: u32,
    static_shared: u32,
    /// The function's dynamic shared memory cap (raised on demand, never lowered by a
    /// launch; a lock so two launches raising it at once cannot leave it below either's
    /// need).
    dynamic_cap: Mutex<u32>,
}

/// A kernel's attributes as the driver reports them (`cuFuncGetAttribute`; CuPy's
/// `RawKernel.attributes`). Versions are `10 * major + minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FunctionAttributes {
    /// Threads per block the kernel can be launched with (its registers allowing).
    pub max_threads_per_block: i32,
    /// Static shared memory per block, bytes.
    pub shared_size_bytes: i32,
    /// Constant memory the kernel uses, bytes.
    pub const_size_bytes: i32,
    /// Local memory per thread, bytes.
    pub local_size_bytes: i32,
    /// Registers per thread.
    pub num_regs: i32,
    /// The PTX ISA version it was compiled from.
    pub ptx_version: i32,
    /// The binary's architecture (90 for sm_90).
    pub binary_version: i32,
    /// Whether it was compiled with `-Xptxas --dlcm=ca` (1) or not (0).
    pub cache_mode_ca: i32,
    /// The most dynamic shared memory a launch may ask for, bytes (settable).
    pub max_dynamic_shared_size_bytes: i32,
    /// The shared-memory carve-out preferred, percent of the unified L1/shared memory, or -1
    /// for no preference (settable).
    pub preferred_shared_memory_carveout: i32,
}

impl std::fmt::Debug for UserFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserFunction")
            .field("name", &self.inner.name)
            .field("params", &self.params)
            .field("cooperative", &self.cooperative)
            .finish()
    }
}

impl UserFunction {
    pub(super) fn new(
        func: CudaFunction,
        ctx: Arc<CudaContext>,
        backend: usize,
        device: &str,
        limits: DeviceLimits,
        name: &str,
        params: std::result::Result<Vec<Param>, String>,
    ) -> Result<Self> {
        let attr = |a: FA| {
            func.get_attribute(a)
                .map(|v| v.max(0) as u32)
                .map_err(|e| driver_err(&format!("cuFuncGetAttribute({name})"), device, e, ""))
        };
        // With a parsed list of n parameters only indices 0..n are asked for: asking past the
        // last parameter is how the count is found, and that call's error would show under
        // compute-sanitizer's memcheck as an API error of every checked kernel. Where the
        // sizes disagree (or nothing was parsed), the whole list is read.
        let parsed_len = params.as_ref().ok().map(Vec::len);
        let mut driver_sizes = driver_param_sizes(&func, parsed_len);
        if let (Ok(p), Some(s)) = (&params, &driver_sizes) {
            if !p.iter().map(|p| p.ty.size_bytes()).eq(s.iter().copied()) {
                driver_sizes = driver_param_sizes(&func, None);
            }
        }
        let inner = FnInner {
            max_threads: attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_shared: attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            dynamic_cap: Mutex::new(attr(FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?),
            driver_sizes,
            limits,
            func,
            ctx,
            backend,
            device: device.into(),
            name: name.into(),
        };
        let f = UserFunction {
            inner: Arc::new(inner),
            params: Arc::new(Params::Unknown(String::new())),
            cooperative: false,
        };
        // a parsed list the driver contradicts is not used (with_signature can replace it)
        let params = match params {
            Ok(p) => match f.clone().checked(p, "the parameter list parsed from the source") {
                Ok(typed) => typed.params,
                Err(e) => Arc::new(f.untyped(e.to_string())),
            },
            Err(why) => Arc::new(f.untyped(why)),
        };
        Ok(UserFunction { params, ..f })
    }

    fn untyped(&self, why: String) -> Params {
        match &self.inner.driver_sizes {
            Some(sizes) => Params::Sized(sizes.clone(), why),
            None => Params::Unknown(why),
        }
    }

    /// The kernel's name (as it was looked up: an `extern "C"` name or a name expression).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The parameters arguments are checked against, or why there are none (then, where the
    /// driver reports them, arguments are checked against [`UserFunction::param_sizes`]).
    pub fn params(&self) -> std::result::Result<&[Param], &str> {
        match &*self.params {
            Params::Typed(p) => Ok(p),
            Params::Sized(_, why) | Params::Unknown(why) => Err(why),
        }
    }

    /// The parameter sizes in bytes the driver reports (`cuFuncGetParamInfo`, CUDA 12.4 and
    /// later), or `None` on an older driver.
    pub fn param_sizes(&self) -> Option<&[usize]> {
        self.inner.driver_sizes.as_deref()
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

    /// The same kernel launched with `cuLaunchCooperativeKernel` (`on`) or `cuLaunchKernel`:
    /// a cooperative launch lets the kernel synchronise its whole grid
    /// (`cooperative_groups::this_grid().sync()`), and fails with
    /// `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` where the grid's blocks cannot all be
    /// resident at once.
    pub fn cooperative(&self, on: bool) -> UserFunction {
        UserFunction {
            cooperative: on,
            ..self.clone()
        }
    }

    /// Whether launches are cooperative.
    pub fn is_cooperative(&self) -> bool {
        self.cooperative
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
        self.params = Arc::new(Params::Typed(params));
        Ok(self)
    }

    /// The kernel's attributes (`cuFuncGetAttribute`).
    pub fn attributes(&self) -> Result<FunctionAttributes> {
        let a = |x: FA| self.attribute(x);
        Ok(FunctionAttributes {
            max_threads_per_block: a(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            shared_size_bytes: a(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            const_size_bytes: a(FA::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            local_size_bytes: a(FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            num_regs: a(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            ptx_version: a(FA::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: a(FA::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
            cache_mode_ca: a(FA::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA)?,
            max_dynamic_shared_size_bytes: a(FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?,
            preferred_shared_memory_carveout: a(FA::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)?,
        })
    }

    fn attribute(&self, a: FA) -> Result<i32> {
        self.inner.func.get_attribute(a).map_err(|e| {
            driver_err(
                &format!("cuFuncGetAttribute({a:?}, {})", self.name()),
                &self.inner.device,
                e,
                "",
            )
        })
    }

    /// Let launches ask for up to `bytes` of dynamic shared memory
    /// (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`): at most what a block can have
    /// on the device less the kernel's static shared memory. Launches raise it on demand
    /// too, so this is needed only to read it back or to lower it.
    pub fn set_max_dynamic_shared_size_bytes(&self, bytes: i32) -> Result<()> {
        let most = self
            .inner
            .limits
            .shared_optin
            .saturating_sub(self.inner.static_shared);
        if bytes < 0 || bytes as u32 > most {
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{}`: max_dynamic_shared_size_bytes = {bytes}: must be 0..={most} (a block's {} B on {} less the kernel's {} B of static shared memory)",
                    self.name(),
                    self.inner.limits.shared_optin,
                    self.inner.device,
                    self.inner.static_shared
                ),
            ));
        }
        let mut cap = crate::backend::lock(&self.inner.dynamic_cap);
        self.set_attribute(FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)?;
        *cap = bytes as u32;
        Ok(())
    }

    /// The preferred shared-memory carve-out, percent of the unified L1/shared memory
    /// (0..=100), or -1 for the driver's default
    /// (`CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`, a hint).
    pub fn set_preferred_shared_memory_carveout(&self, percent: i32) -> Result<()> {
        if !(-1..=100).contains(&percent) {
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{}`: preferred_shared_memory_carveout = {percent}: give a percentage 0..=100, or -1 for the default",
                    self.name()
                ),
            ));
        }
        self.set_attribute(FA::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent)
    }

    fn set_attribute(&self, a: FA, v: i32) -> Result<()> {
        let call = format!("cuFuncSetAttribute({a:?}, {})", self.name());
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(|e| driver_err(&call, &self.inner.device, e, ""))?;
        self.inner
            .func
            .set_attribute(a, v)
            .map_err(|e| driver_err(&call, &self.inner.device, e, ""))
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
        self.same_backend(backend)?;
        let values = self.check_args(args)?;
        let cfg = self.check_shape(backend, grid, block, shared_mem)?;
        let op = format!("user:{}", self.name());
        let stream = backend.stream().clone();
        let _range = backend.range_on(&op, &stream);
        // SAFETY: one argument per parameter, each of the parameter's size (the count and
        // types were checked against the parsed or declared list, and that list's sizes
        // against the driver's where it reports them; or the sizes against the driver's),
        // so the driver reads exactly the values given, which live until the launch
        // returns. Pointer arguments are live device blocks borrowed by `args` for the
        // enqueue; a block freed afterwards returns to the pool only after this stream's work
        // (stream-ordered pool, recorded uses). The stream is the backend's own.
        unsafe { self.enqueue(&values, cfg, stream.cu_stream()) }
            .map_err(|e| driver_err(&op, &backend.name(), e, ""))
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
        self.same_backend(backend)?;
        let values = self.check_args(args)?;
        let cfg = self.check_shape(backend, grid, block, shared_mem)?;
        // SAFETY: as `launch`'s, with the stream and the pointers' memory the caller's
        // contract.
        unsafe { self.enqueue(&values, cfg, stream as sys::CUstream) }
            .map_err(|e| driver_err(&format!("user:{}", self.name()), &backend.name(), e, ""))
    }

    fn same_backend(&self, backend: &CudaBackend) -> Result<()> {
        if backend.id() != self.inner.backend {
            return Err(Error::invalid(
                OP,
                format!(
                    "kernel `{}` was loaded on another backend than {}; load its module on this one",
                    self.name(),
                    backend.name()
                ),
            ));
        }
        Ok(())
    }

    /// Launch with the checked `values` on `stream`, cooperatively where asked.
    ///
    /// # Safety
    ///
    /// `values` are one per parameter, each of its size; `stream` is 0 or a live stream of
    /// the function's context; pointer values address memory valid until the kernel has run.
    unsafe fn enqueue(
        &self,
        values: &[Value],
        cfg: LaunchConfig,
        stream: sys::CUstream,
    ) -> std::result::Result<(), cudarc::driver::DriverError> {
        self.inner.ctx.bind_to_thread()?;
        let mut params: Vec<*mut std::ffi::c_void> = values.iter().map(|v| v.as_param()).collect();
        let f = self.inner.func.cu_function();
        let (g, b, s) = (cfg.grid_dim, cfg.block_dim, cfg.shared_mem_bytes);
        // SAFETY: the function belongs to this context (bound above); one parameter address
        // per value, each living in `values` until the call returns (the driver copies them);
        // the rest is the caller's contract.
        unsafe {
            if self.cooperative {
                cudarc::driver::result::launch_cooperative_kernel(f, g, b, s, stream, &mut params)
            } else {
                cudarc::driver::result::launch_kernel(f, g, b, s, stream, &mut params)
            }
        }
    }

    fn check_args(&self, args: &[KernelArg<'_>]) -> Result<Vec<Value>> {
        let name = self.name();
        let count = |n: usize, list: String| {
            Err(Error::invalid(
                OP,
                format!("kernel `{name}` takes {n} arguments ({list}), got {}", args.len()),
            ))
        };
        match &*self.params {
            Params::Typed(params) => {
                if params.len() != args.len() {
                    let list: Vec<&str> = params.iter().map(|p| p.text.as_str()).collect();
                    return count(params.len(), list.join(", "));
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
            Params::Sized(sizes, why) => {
                if sizes.len() != args.len() {
                    let list: Vec<String> = sizes.iter().map(|s| format!("{s} B")).collect();
                    return count(
                        sizes.len(),
                        format!("of {} as the driver reports them", list.join(", ")),
                    );
                }
                sizes
                    .iter()
                    .zip(args)
                    .enumerate()
                    .map(|(i, (&size, a))| {
                        convert_sized(size, a).map_err(|e| {
                            Error::invalid(
                                OP,
                                format!(
                                    "kernel `{name}` argument {}: {e} (kiln checks this kernel's arguments by size only: {why})",
                                    i + 1
                                ),
                            )
                        })
                    })
                    .collect()
            }
            Params::Unknown(why) => Err(Error::invalid(
                OP,
                format!(
                    "kernel `{name}`: its parameter list could not be parsed ({why}) and this driver (before CUDA 12.4) does not report parameter sizes, so its arguments cannot be checked; declare it with UserFunction::with_signature(\"const float* x, int n\") (the text between its parentheses)"
                ),
            )),
        }
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
            self.set_attribute(
                FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_mem as i32,
            )?;
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
/// the driver predates it (CUDA 12.4): the first `known` of them where the count is known,
/// else all (asking until the driver answers that the index is past the last).
fn driver_param_sizes(f: &CudaFunction, known: Option<usize>) -> Option<Vec<usize>> {
    let mut version = 0;
    // SAFETY: `version` is valid for writes; cuDriverGetVersion needs no context.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().ok()?;
    if version < 12040 {
        return None;
    }
    let mut sizes = Vec::new();
    // a kernel's parameters fit in 32 KiB, so there are at most that many
    for i in 0..known.unwrap_or(32768) {
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
