//! NVRTC: compile one [`Program`] (a kernel alone, or a whole module), or a user's source
//! ([`crate::user`]), to a cubin for an exact `sm_XX`, through one function ([`compile`]).
//!
//! cudarc's safe NVRTC layer only returns PTX, and its `result` layer has no cubin getter, so
//! this module (one of the three FFI modules: nvrtc, discovery, backend) calls
//! `nvrtcGetCUBIN` through `cudarc::nvrtc::sys`. A cubin loads without the driver's JIT,
//! which is what makes a warm start cost nothing.
#![allow(unsafe_code)]

use crate::cache::Unit;
use crate::kernels::Program;
use cudarc::nvrtc::{result, sys};
use kiln_core::{Error, Result};
use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};

/// Options every program is compiled with (part of the cache key).
pub const OPTIONS: &[&str] = &["--std=c++17", "-lineinfo"];

/// A program's NVRTC options but the arch: [`OPTIONS`], its module's own
/// ([`Module::options`](crate::kernels::Module::options)), the definitions that select its
/// kernel and, last, any in `KILN_NVRTC_EXTRA` (the cache key covers them all).
pub fn options(program: Program) -> Vec<String> {
    OPTIONS
        .iter()
        .chain(program.module().options)
        .map(|s| s.to_string())
        .chain(program.defines())
        .chain(extra_options())
        .collect()
}

/// `KILN_NVRTC_EXTRA`, split on whitespace: a developer's knob for experiments on the GPU
/// machine without a rebuild (a register cap `-maxrregcount=80`, a `-D` a kernel reads),
/// applied to every program and part of every cache key, so cubins built with and without
/// it never mix. Unset or empty in production.
pub(crate) fn extra_options() -> Vec<String> {
    std::env::var("KILN_NVRTC_EXTRA")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

static COMPILES: AtomicU64 = AtomicU64::new(0);

/// How many times this process has invoked NVRTC's compiler (cache hits do not count).
pub fn compiles_this_process() -> u64 {
    COMPILES.load(Ordering::Relaxed)
}

/// Whether `libnvrtc` can be loaded. cudarc panics on first use of a missing library, so
/// every caller checks this first. Loaded once and kept ([`crate::libs`]).
pub fn available() -> bool {
    crate::libs::present(crate::libs::Lib::Nvrtc)
}

/// NVRTC's (major, minor) version, or `None` when the library is missing.
pub fn version() -> Option<(i32, i32)> {
    if !available() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above); both pointers are valid for writes.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    (r == sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// Owns an `nvrtcProgram` and destroys it on every path out.
struct NvrtcProgram(sys::nvrtcProgram);

impl Drop for NvrtcProgram {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed exactly once.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

fn nvrtc_err(module: &str, arch: &str, what: &str, e: impl std::fmt::Debug) -> Error {
    Error::Compile {
        module: module.into(),
        arch: arch.into(),
        log: format!("{what}: {e:?}"),
    }
}

/// Compile `program` (a kernel alone, or a whole module) for `arch` (e.g. `sm_90`) and
/// return the cubin. The compiler's log is kept in the error. Programs may be compiled on
/// several threads at once (NVRTC is thread-safe across programs).
pub fn compile_cubin(program: impl Into<Program>, arch: &str) -> Result<Vec<u8>> {
    compile_program(program.into(), arch, &[]).map(|(cubin, _)| cubin)
}

/// Compile `program` for `arch` with ptxas's verbose report and return that report: per
/// kernel, the registers, spill stores and loads, stack frame and shared memory. Needs only
/// libnvrtc, no GPU, so kernels can be checked for spills on a machine without one
/// (`cargo run -p kiln-cuda --example ptxas_info`).
pub fn ptxas_info(program: impl Into<Program>, arch: &str) -> Result<String> {
    compile_program(program.into(), arch, &["--ptxas-options=-v".to_string()]).map(|(_, log)| log)
}

fn compile_program(program: Program, arch: &str, extra: &[String]) -> Result<(Vec<u8>, String)> {
    let options = options(program);
    let unit = crate::coldstart::unit(program, &options);
    compile(&unit, &format!("{}.cu", program.module().name), arch, extra)
}

/// Compile one cache [`Unit`] (kiln's own programs and users' sources alike) for `arch`:
/// the unit's options, then `--gpu-architecture=arch`, then `extra` (which is not part of
/// the cache key, so only for reports such as ptxas's). `file` names the source in NVRTC's
/// log (`file(line): error: ...`). Returns the cubin and the compiler's log; a failed
/// compile is [`Error::Compile`] carrying the log, named after `unit.name`.
pub fn compile(unit: &Unit, file: &str, arch: &str, extra: &[String]) -> Result<(Vec<u8>, String)> {
    compile_named(unit, file, arch, extra, &[]).map(|c| (c.cubin, c.log))
}

/// What [`compile_named`] returns.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The cubin.
    pub cubin: Vec<u8>,
    /// NVRTC's log (warnings; empty when there are none).
    pub log: String,
    /// The symbol each name expression was lowered to, in the order given.
    pub lowered: Vec<String>,
}

/// [`compile`] with C++ name expressions (`my_kernel<float>`, `ns::f`): each is added to the
/// program before compiling (`nvrtcAddNameExpression`, which also instantiates a template)
/// and its mangled symbol read back after (`nvrtcGetLoweredName`), so a kernel that is not
/// `extern "C"` can be looked up in the loaded module. An expression NVRTC cannot parse
/// fails the compile, with NVRTC's log.
pub fn compile_named(
    unit: &Unit,
    file: &str,
    arch: &str,
    extra: &[String],
    name_expressions: &[String],
) -> Result<Compiled> {
    if !available() {
        return Err(Error::NoDevice(kiln_core::NoDeviceReason::NvrtcNotFound));
    }
    let module = unit.name;
    let src = CString::new(unit.source).map_err(|e| nvrtc_err(module, arch, "source has a NUL byte", e))?;
    let name = CString::new(file).map_err(|e| nvrtc_err(module, arch, "name", e))?;
    let prog = NvrtcProgram(
        result::create_program(&src, Some(&name))
            .map_err(|e| nvrtc_err(module, arch, "nvrtcCreateProgram", e))?,
    );
    let exprs = name_expressions
        .iter()
        .map(|e| {
            CString::new(e.as_str())
                .map_err(|err| nvrtc_err(module, arch, "name expression has a NUL byte", err))
        })
        .collect::<Result<Vec<CString>>>()?;
    for e in &exprs {
        // SAFETY: `prog` is a live program not compiled yet; `e` is NUL-terminated and NVRTC
        // copies it.
        unsafe { sys::nvrtcAddNameExpression(prog.0, e.as_ptr()) }
            .result()
            .map_err(|err| nvrtc_err(module, arch, &format!("nvrtcAddNameExpression({e:?})"), err))?;
    }
    let mut opts = unit.options.to_vec();
    opts.push(format!("--gpu-architecture={arch}"));
    opts.extend(extra.iter().cloned());
    COMPILES.fetch_add(1, Ordering::Relaxed);
    // SAFETY: `prog` is a live program; the options are NUL-free Strings.
    let compiled = unsafe { result::compile_program(prog.0, &opts) };
    if let Err(e) = compiled {
        // SAFETY: `prog` is live; the log is NUL-terminated by NVRTC.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|v| c_chars_to_string(&v))
            .unwrap_or_else(|_| "(no log)".into());
        return Err(Error::Compile {
            module: module.into(),
            arch: arch.into(),
            log: format!("{e:?} with options {opts:?}\n{log}"),
        });
    }
    let mut size = 0usize;
    // SAFETY: `prog` compiled successfully; `size` is valid for writes.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(|e| nvrtc_err(module, arch, "nvrtcGetCUBINSize (is the arch an sm_XX?)", e))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` holds exactly the `size` bytes NVRTC reported for this program.
    unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut c_char) }
        .result()
        .map_err(|e| nvrtc_err(module, arch, "nvrtcGetCUBIN", e))?;
    // SAFETY: `prog` is live; the log is NUL-terminated by NVRTC.
    let log = unsafe { result::get_program_log(prog.0) }
        .map(|v| c_chars_to_string(&v))
        .unwrap_or_default();
    let mut lowered = Vec::with_capacity(exprs.len());
    for e in &exprs {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `prog` compiled successfully with `e` added; `name` is valid for writes.
        unsafe { sys::nvrtcGetLoweredName(prog.0, e.as_ptr(), &mut name) }
            .result()
            .map_err(|err| nvrtc_err(module, arch, &format!("nvrtcGetLoweredName({e:?})"), err))?;
        if name.is_null() {
            return Err(nvrtc_err(
                module,
                arch,
                &format!("nvrtcGetLoweredName({e:?})"),
                "no name",
            ));
        }
        // SAFETY: NVRTC returned a NUL-terminated string owned by `prog`, which is still live;
        // it is copied before `prog` is destroyed.
        lowered.push(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned());
    }
    Ok(Compiled { cubin, log, lowered })
}

fn c_chars_to_string(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}
