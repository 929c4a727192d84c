//! Users' own CUDA C++ kernels (CuPy's `RawModule`/`RawKernel`): a source compiled by NVRTC
//! for the device's exact `sm_XX`, cached on disk beside kiln's own programs, loaded once per
//! backend, and launched with checked arguments on the stream kiln's ops use.
//!
//! - [`UserSource`]: the source, the user's NVRTC options, validated (kiln picks the arch,
//!   so `-arch`/`--gpu-architecture` are refused), and C++ name expressions
//!   (`my_kernel<float>`) whose mangled symbols NVRTC reports, as one cache [`Unit`]: the
//!   cache key is the same SHA-256 over name, source, options, arch and NVRTC version as
//!   kiln's programs', so a second call or a second process compiles nothing.
//! - [`UserModule`]: the loaded cubin and the parameter lists of its `__global__` functions
//!   ([`signature`]); [`UserModule::function`] looks one up by its `extern "C"` name or
//!   its name expression. [`UserModule::load`] compiles or reads a source with name
//!   expressions (the cache entry holds the lowered names with the cubin) and
//!   [`UserModule::from_image`] / [`UserModule::from_file`] load a cubin, PTX or fatbin.
//! - [`UserFunction::launch`]: checks the argument count, each argument against its
//!   parameter (buffers of the pointed-to dtype, scalars converted exactly; where the
//!   source's declaration cannot be read, against the parameter sizes the driver reports),
//!   and the launch shape against the device's and the function's limits; then launches on
//!   [`CudaBackend::stream`] (the capture stream while this thread captures a graph) inside a
//!   profiler range `user:<name>`, mapping errors as kiln's launchers do, so a sticky fault
//!   is classified the same way.
#![allow(unsafe_code)]

mod args;
mod function;
mod load;
pub mod resources;
pub mod signature;

use args::{convert, convert_sized, Value};
pub use args::{BufferArg, ExternalArg, KernelArg, Scalar};
pub use function::{FunctionAttributes, UserFunction};

use crate::cache::{KernelCache, Unit};
use crate::{nvrtc, CudaBackend};
use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::{CudaContext, CudaModule, CudaStream, DevicePtr, DriverError};
use kiln_core::{Error, Result};
pub use signature::{Param, ParamType, ScalarType, Signature};
use std::collections::BTreeMap;
use std::sync::Arc;

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
    name_expressions: Vec<String>,
    /// `options` and one `--kiln-name-expression=` entry per name expression (and one
    /// `--kiln-device-link=` per linked library): the options of the cache key, never given
    /// to NVRTC (a source with other name expressions is another entry, since its entry
    /// holds the lowered names too; a linked one holds the linked code).
    key_options: Vec<String>,
    /// Libraries relocatable device code is linked with.
    device_link: Vec<std::path::PathBuf>,
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
            key_options: all.clone(),
            options: all,
            name_expressions: Vec::new(),
            device_link: Vec::new(),
        })
    }

    /// Whether the options ask for relocatable device code (`-dc`, `-rdc=true`: what a
    /// kernel launching kernels, dynamic parallelism, needs). Such a source loads only
    /// through [`UserModule::load`] after [`UserSource::with_device_runtime`], which links
    /// it.
    pub fn relocatable(&self) -> bool {
        self.options.iter().any(|o| is_relocatable(o))
    }

    /// The same source linked, after NVRTC, with the device runtime library at `path`
    /// (`libcudadevrt.a` of the CUDA toolkit, `lib64/` under its root) by the driver's
    /// linker (`cuLinkCreate`): what relocatable device code needs before it loads. The
    /// library's path, size and modification time are part of the cache key.
    pub fn with_device_runtime(mut self, path: &std::path::Path) -> Result<Self> {
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::invalid(OP, format!("device runtime library {}: {e}", path.display())))?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        self.key_options.push(format!(
            "--kiln-device-link={}:{}:{mtime}",
            path.display(),
            meta.len()
        ));
        self.device_link.push(path.to_path_buf());
        Ok(self)
    }

    /// The libraries [`UserModule::load`] links the compiled code with.
    pub fn device_link(&self) -> &[std::path::PathBuf] {
        &self.device_link
    }

    /// The same source with C++ name expressions (`my_kernel<float>`, `ns::k`, a
    /// non-`extern "C"` kernel's plain name): NVRTC instantiates each and reports its mangled
    /// symbol, so [`UserModule::function`] finds the kernel by the expression. Each must be
    /// non-empty and free of NUL bytes; repeats are dropped.
    pub fn with_name_expressions(mut self, exprs: &[String]) -> Result<Self> {
        let mut kept: Vec<String> = Vec::new();
        for e in exprs {
            if e.trim().is_empty() || e.contains('\0') {
                return Err(Error::invalid(
                    OP,
                    format!("name expression {e:?}: give a kernel's C++ name, e.g. \"my_kernel<float>\""),
                ));
            }
            if !kept.contains(e) {
                kept.push(e.clone());
            }
        }
        self.key_options
            .retain(|o| !o.starts_with("--kiln-name-expression="));
        self.key_options
            .extend(kept.iter().map(|e| format!("--kiln-name-expression={e}")));
        self.name_expressions = kept;
        Ok(self)
    }

    /// The name expressions, in the order given.
    pub fn name_expressions(&self) -> &[String] {
        &self.name_expressions
    }

    /// The source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The unit NVRTC compiles (its options are NVRTC's).
    pub fn unit(&self) -> Unit<'_> {
        Unit {
            name: &self.name,
            source: &self.source,
            options: &self.options,
        }
    }

    /// The unit the cache keys the compiled module by: [`UserSource::unit`], plus the name
    /// expressions when there are any.
    pub fn key_unit(&self) -> Unit<'_> {
        Unit {
            name: &self.name,
            source: &self.source,
            options: &self.key_options,
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
        KernelCache::key(&self.key_unit(), arch, version)
    }

    /// Compile to a cubin for `arch` (no GPU needed, only libnvrtc). A source that does not
    /// compile is [`Error::Compile`] with NVRTC's log, whose lines name `<name>.cu(line)`.
    /// A missing header (kiln gives NVRTC no include path, and NVRTC alone has no
    /// `cuda_fp16.h`) adds a hint to the log.
    pub fn compile(&self, arch: &str) -> Result<Vec<u8>> {
        self.compile_full(arch).map(|c| c.cubin)
    }

    /// [`UserSource::compile`] with NVRTC's log (its warnings) and the symbol each name
    /// expression was lowered to.
    ///
    /// Relocatable device code ([`UserSource::relocatable`]) compiles only where it will be
    /// linked ([`UserSource::with_device_runtime`]): loaded as it is, it would fail.
    pub fn compile_full(&self, arch: &str) -> Result<nvrtc::Compiled> {
        if self.relocatable() && self.device_link.is_empty() {
            return Err(Error::invalid(
                OP,
                "relocatable device code (-dc, -rdc=true: what dynamic parallelism needs) must be linked with the device runtime, libcudadevrt: load it with UserModule::load after UserSource::with_device_runtime (Python does so by itself)",
            ));
        }
        let file = format!("{}.cu", self.name);
        nvrtc::compile_named(&self.unit(), &file, arch, &[], &self.name_expressions)
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

/// Whether option `o` asks for relocatable device code (`-dc`, `--device-c`, `-rdc=true`,
/// `--relocatable-device-code=true`), which must be linked before it loads.
fn is_relocatable(o: &str) -> bool {
    let value = o.split_once(['=', ' ']).map(|(_, v)| v.trim());
    match option_name(o) {
        "dc" | "device-c" => true,
        "rdc" | "relocatable-device-code" => value == Some("true"),
        _ => false,
    }
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

/// A user's compiled source (or a loaded cubin, PTX or fatbin), on one backend.
pub struct UserModule {
    module: Arc<CudaModule>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    backend: usize,
    device: String,
    limits: DeviceLimits,
    name: String,
    /// The source (empty for a module loaded from a binary).
    source: String,
    /// Whether it was loaded from a binary, so has no source to read signatures from.
    binary: bool,
    kernels: BTreeMap<String, std::result::Result<Signature, String>>,
    /// Each name expression's mangled symbol.
    lowered: BTreeMap<String, String>,
}

impl std::fmt::Debug for UserModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserModule")
            .field("name", &self.name)
            .field("kernels", &self.kernels.keys().collect::<Vec<_>>())
            .field("lowered", &self.lowered)
            .finish()
    }
}

impl UserModule {
    pub(crate) fn new(module: Arc<CudaModule>, backend: &CudaBackend, src: &UserSource) -> Result<Self> {
        let mut m = Self::bare(module, backend, &src.name, false)?;
        m.source = src.source.clone();
        m.kernels = signature::kernels(&src.source);
        Ok(m)
    }

    fn bare(module: Arc<CudaModule>, backend: &CudaBackend, name: &str, binary: bool) -> Result<Self> {
        let stream = backend.stream().clone();
        Ok(UserModule {
            module,
            ctx: stream.context().clone(),
            stream,
            backend: backend.id(),
            device: backend.name(),
            limits: DeviceLimits::of(backend)?,
            name: name.into(),
            source: String::new(),
            binary,
            kernels: BTreeMap::new(),
            lowered: BTreeMap::new(),
        })
    }

    /// The module's name (`user_<kernel>`, as [`UserSource::name`]; a file's name for a
    /// module loaded from one).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `__global__` functions found in the source, each with its signature or why it
    /// could not be parsed (none for a module loaded from a binary).
    pub fn kernels(&self) -> &BTreeMap<String, std::result::Result<Signature, String>> {
        &self.kernels
    }

    /// The symbol each name expression was lowered to.
    pub fn lowered_names(&self) -> &BTreeMap<String, String> {
        &self.lowered
    }

    /// The kernel `name`: an `extern "C"` symbol, or one of the module's name expressions
    /// (a template instantiation such as `my_kernel<float>`, a C++ kernel's plain name).
    /// Its arguments are checked against the parameter list read from the source; where that
    /// cannot be read (a macro in the declaration, a template argument that is not a scalar
    /// type, a module loaded from a binary), against the parameter sizes the driver reports
    /// (CUDA 12.4 and later; before that such a kernel is launched only after
    /// [`UserFunction::with_signature`]). A name the module lacks is
    /// [`Error::InvalidArgument`] naming the kernels it has.
    pub fn function(&self, name: &str) -> Result<UserFunction> {
        self.find(name)?
            .ok_or_else(|| Error::invalid(OP, self.missing(name)))
    }

    /// [`UserModule::function`] as CuPy's `get_function` reports a name the module lacks:
    /// the driver's `CUDA_ERROR_NOT_FOUND` ([`Error::Cuda`], code 500), with the same
    /// explanation.
    pub fn get_function(&self, name: &str) -> Result<UserFunction> {
        self.find(name)?.ok_or_else(|| {
            let e = DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND);
            load::driver_err(
                &format!("cuModuleGetFunction(`{name}`)"),
                &self.device,
                e,
                &self.missing(name),
            )
        })
    }

    fn missing(&self, name: &str) -> String {
        let mut found: Vec<&str> = self.kernels.keys().map(String::as_str).collect();
        found.extend(self.lowered.keys().map(String::as_str));
        found.sort_unstable();
        found.dedup();
        format!(
            "no kernel `{name}` in module `{}` (found: {}); a kernel must be declared `extern \"C\" __global__` so its name is not mangled, or be named in the module's name expressions (a template: `my_kernel<float>`)",
            self.name,
            if found.is_empty() { "none".into() } else { found.join(", ") }
        )
    }

    fn find(&self, name: &str) -> Result<Option<UserFunction>> {
        if name.contains('\0') {
            // (cudarc's lookup would panic on it)
            return Err(Error::invalid(
                OP,
                format!("kernel name {name:?} contains a NUL byte"),
            ));
        }
        let symbol = self.lowered.get(name).map_or(name, String::as_str);
        let f = match self.module.load_function(symbol) {
            Ok(f) => f,
            Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND => return Ok(None),
            Err(e) => {
                return Err(load::driver_err(
                    &format!("cuModuleGetFunction(`{name}`)"),
                    &self.device,
                    e,
                    "",
                ))
            }
        };
        let sig = self.declared(name);
        UserFunction::new(
            f,
            self.ctx.clone(),
            self.backend,
            &self.device,
            self.limits,
            name,
            sig,
        )
        .map(Some)
    }

    /// The parameter list of kernel `name` read from the source, or why there is none.
    fn declared(&self, name: &str) -> std::result::Result<Vec<Param>, String> {
        if self.binary {
            return Err(
                "the module was loaded from a binary (cubin, PTX, fatbin): there is no source to read its parameter list from"
                    .into(),
            );
        }
        if self.lowered.contains_key(name) && name.contains('<') {
            return signature::instantiate(&self.source, name).ok_or_else(|| {
                format!(
                    "`{name}` instantiates a template with arguments kiln does not substitute (it does for type parameters given scalar types)"
                )
            });
        }
        match self.kernels.get(name) {
            Some(Ok(s)) => Ok(s.params.clone()),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!(
                "no declaration of `{name}` was found in the source (a macro, or a name in a namespace?)"
            )),
        }
    }

    /// The address and size of the module's global (`__device__` or `__constant__`)
    /// variable `name` (`cuModuleGetGlobal`), valid while the module is loaded. A name the
    /// module lacks is the driver's `CUDA_ERROR_NOT_FOUND` ([`Error::Cuda`]).
    pub fn global(&self, name: &str) -> Result<(u64, usize)> {
        if name.contains('\0') {
            return Err(Error::invalid(
                OP,
                format!("global name {name:?} contains a NUL byte"),
            ));
        }
        let call = format!("cuModuleGetGlobal(`{name}`)");
        self.ctx
            .bind_to_thread()
            .map_err(|e| load::driver_err(&call, &self.device, e, ""))?;
        let view = self.module.get_global(name, &self.stream).map_err(|e| {
            load::driver_err(
                &call,
                &self.device,
                e,
                &format!("no global variable `{name}` in module `{}`", self.name),
            )
        })?;
        let len = view.len();
        let (ptr, _sync) = view.device_ptr(&self.stream);
        Ok((ptr, len))
    }
}

#[cfg(test)]
#[path = "user/tests.rs"]
mod tests;
