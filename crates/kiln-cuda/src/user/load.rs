//! Loading users' modules other than through [`CudaBackend::user_module`]: a source with C++
//! name expressions (its cache entry holds the lowered names before the cubin), relocatable
//! device code linked with the device runtime (dynamic parallelism; the entry holds the
//! linked cubin), a fresh compile whose NVRTC log the caller wants (CuPy's
//! `compile(log_stream=...)`), and binaries (a cubin, PTX or fatbin, in memory or in a file). These modules are the caller's to keep
//! (kiln's Python classes keep one per device), not entries of the backend's per-source map.

use super::{UserModule, UserSource, OP};
use crate::cache::KernelCache;
use crate::CudaBackend;
use cudarc::driver::{sys, DriverError};
use cudarc::nvrtc::Ptx;
use kiln_core::{Error, Result};
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The first bytes of a cache entry that holds lowered names before the cubin.
const LOWERED: &[u8; 8] = b"KILNLOWR";

/// A driver error as kiln's [`Error::Cuda`], its `op` naming the call, the driver's own
/// description of the code (`named symbol not found`) and `detail` where given, and its
/// `name` the driver's symbolic name where kiln's table lacks the code
/// (`CUDA_ERROR_FILE_NOT_FOUND`).
pub(crate) fn driver_err(call: &str, device: &str, e: DriverError, detail: &str) -> Error {
    // (cudarc panics on a missing library; without a driver there is no description)
    let driver = crate::libs::present(crate::libs::Lib::Cuda);
    let text = |s: std::result::Result<&std::ffi::CStr, DriverError>| {
        s.map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
    };
    let what = if driver {
        text(e.error_string())
    } else {
        String::new()
    };
    let mut op = call.to_string();
    if !what.is_empty() {
        op = format!("{op}: {what}");
    }
    if !detail.is_empty() {
        op = format!("{op} ({detail})");
    }
    match crate::cuda_err(&op, device, e) {
        Error::Cuda {
            op,
            device,
            code,
            name,
        } => {
            let known = if driver {
                text(e.error_name())
            } else {
                String::new()
            };
            let name = if name == format!("CUDA_ERROR_{code}") && !known.is_empty() {
                known
            } else {
                name
            };
            Error::Cuda {
                op,
                device,
                code,
                name,
            }
        }
        other => other,
    }
}

/// A module's compiled code: the cubin and each name expression's symbol, in order.
fn encode(lowered: &[(String, String)], cubin: &[u8]) -> Vec<u8> {
    let mut out = LOWERED.to_vec();
    out.extend((lowered.len() as u32).to_le_bytes());
    for (expr, sym) in lowered {
        for s in [expr, sym] {
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
        }
    }
    out.extend(cubin);
    out
}

/// The symbols and cubin of an [`encode`]d entry, if it is one and names exactly `exprs`.
fn decode<'a>(bytes: &'a [u8], exprs: &[String]) -> Option<(Vec<String>, &'a [u8])> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
        *rest = tail;
        Some(head)
    }
    fn word(rest: &mut &[u8]) -> Option<usize> {
        Some(u32::from_le_bytes(take(rest, 4)?.try_into().ok()?) as usize)
    }
    let mut rest = bytes.strip_prefix(LOWERED.as_slice())?;
    if word(&mut rest)? != exprs.len() {
        return None;
    }
    let mut lowered = Vec::with_capacity(exprs.len());
    for want in exprs {
        let n = word(&mut rest)?;
        if take(&mut rest, n)? != want.as_bytes() {
            return None;
        }
        let n = word(&mut rest)?;
        lowered.push(String::from_utf8(take(&mut rest, n)?.to_vec()).ok()?);
    }
    Some((lowered, rest))
}

impl UserModule {
    /// Compile `src` for `backend`'s arch and load it, with its name expressions' symbols:
    /// read from `cache` (the backend's cache directory, `Config::cache_dir`) where an entry
    /// exists, else compiled and stored; with `fresh`, compiled whatever the cache holds, and
    /// NVRTC's log (its warnings) returned too. A compile error is [`Error::Compile`] with
    /// NVRTC's log.
    pub fn load(
        backend: &CudaBackend,
        cache: &KernelCache,
        src: &UserSource,
        fresh: bool,
    ) -> Result<(Arc<UserModule>, Option<String>)> {
        let arch = backend.info().arch();
        let exprs = src.name_expressions();
        // compiled, and linked where the source asks for it
        let build = || -> Result<crate::nvrtc::Compiled> {
            let mut c = src.compile_full(&arch)?;
            if !src.device_link().is_empty() {
                c.cubin = device_link(backend, &c.cubin, src)?;
            }
            Ok(c)
        };
        let (cubin, lowered, log) = if fresh {
            let c = build()?;
            (c.cubin, c.lowered, Some(c.log))
        } else {
            let (bytes, _event) =
                cache.get_or_compile(&src.key_unit(), &arch, backend.nvrtc_version(), || {
                    let c = build()?;
                    Ok(if exprs.is_empty() {
                        c.cubin
                    } else {
                        let pairs: Vec<(String, String)> = exprs.iter().cloned().zip(c.lowered).collect();
                        encode(&pairs, &c.cubin)
                    })
                })?;
            if exprs.is_empty() {
                (bytes, Vec::new(), None)
            } else if let Some((lowered, cubin)) = decode(&bytes, exprs) {
                (cubin.to_vec(), lowered, None)
            } else {
                // an entry of this key that is not in this form: compile rather than trust it
                tracing::warn!(
                    module = src.name(),
                    "cached module without its lowered names; recompiling"
                );
                let c = build()?;
                (c.cubin, c.lowered, None)
            }
        };
        let md = backend
            .stream()
            .context()
            .load_module(Ptx::from_binary(cubin))
            .map_err(|e| driver_err("cuModuleLoadData", &backend.name(), e, src.name()))?;
        let mut m = UserModule::new(md, backend, src)?;
        m.lowered = exprs.iter().cloned().zip(lowered).collect();
        Ok((Arc::new(m), log))
    }

    /// Load a compiled module from memory (`cuModuleLoadData`): a cubin, a fatbin, or PTX
    /// text (which the driver compiles for the device). `name` names it in messages. Its
    /// kernels are looked up by symbol and their arguments checked by the sizes the driver
    /// reports. An image the driver cannot load is its error ([`Error::Cuda`]:
    /// `CUDA_ERROR_INVALID_IMAGE`, `CUDA_ERROR_NO_BINARY_FOR_GPU`, ...).
    pub fn from_image(backend: &CudaBackend, image: &[u8], name: &str) -> Result<UserModule> {
        if image.is_empty() {
            return Err(Error::invalid(OP, format!("module `{name}`: the image is empty")));
        }
        // PTX is read as a C string: end it (a cubin or fatbin ignores what follows it)
        let mut data = image.to_vec();
        data.push(0);
        let md = backend
            .stream()
            .context()
            .load_module(Ptx::from_binary(data))
            .map_err(|e| driver_err("cuModuleLoadData", &backend.name(), e, name))?;
        UserModule::bare(md, backend, name, true)
    }

    /// Load a compiled module from the file at `path` (`cuModuleLoad`: a `.cubin`, `.ptx`
    /// or `.fatbin`), as [`UserModule::from_image`]. A missing file is the driver's
    /// `CUDA_ERROR_FILE_NOT_FOUND`.
    pub fn from_file(backend: &CudaBackend, path: &str) -> Result<UserModule> {
        if path.is_empty() || path.contains('\0') {
            return Err(Error::invalid(
                OP,
                format!("module path {path:?}: give a file's path"),
            ));
        }
        let md = backend
            .stream()
            .context()
            .load_module(Ptx::from_file(path))
            .map_err(|e| driver_err("cuModuleLoad", &backend.name(), e, path))?;
        let name = std::path::Path::new(path)
            .file_name()
            .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
        UserModule::bare(md, backend, &name, true)
    }
}

/// Owns a pending link and destroys it on every path out.
struct LinkState(sys::CUlinkState);

impl Drop for LinkState {
    fn drop(&mut self) {
        // SAFETY: the state came from cuLinkCreate and is destroyed exactly once; the linked
        // image it owned was copied out before.
        let _ = unsafe { sys::cuLinkDestroy(self.0) };
    }
}

/// Link relocatable `image` (NVRTC's cubin of a `-dc` compile) with `src`'s device runtime
/// libraries by the driver's linker, into a cubin that loads. The linker's error log is kept
/// in the error.
fn device_link(backend: &CudaBackend, image: &[u8], src: &UserSource) -> Result<Vec<u8>> {
    let device = backend.name();
    let fail = |call: &str, e: sys::CUresult, log: &[u8]| {
        let log = log.split(|&b| b == 0).next().unwrap_or_default();
        driver_err(call, &device, DriverError(e), String::from_utf8_lossy(log).trim())
    };
    backend
        .stream()
        .context()
        .bind_to_thread()
        .map_err(|e| driver_err("cuCtxSetCurrent", &device, e, ""))?;
    let mut log = vec![0u8; 16 * 1024];
    let mut opts = [
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // the buffer's address, and its size passed as a pointer-sized value (the JIT options'
    // convention)
    let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    let mut raw: sys::CUlinkState = std::ptr::null_mut();
    // SAFETY: two options with their values (the log buffer outlives the link state, which
    // `state` destroys before `log` is dropped); `raw` is valid for writes; the context is
    // bound to this thread.
    let r = unsafe { sys::cuLinkCreate_v2(2, opts.as_mut_ptr(), vals.as_mut_ptr(), &mut raw) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(fail("cuLinkCreate", r, &[]));
    }
    let state = LinkState(raw);
    let name =
        CString::new(format!("{}.cubin", src.name())).map_err(|e| Error::invalid(OP, e.to_string()))?;
    // SAFETY: `image` is a live slice of `image.len()` bytes the linker only reads (the
    // signature's `*mut` notwithstanding) during the call; `name` is NUL-terminated; no
    // options.
    let r = unsafe {
        sys::cuLinkAddData_v2(
            state.0,
            sys::CUjitInputType::CU_JIT_INPUT_CUBIN,
            image.as_ptr() as *mut c_void,
            image.len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(fail("cuLinkAddData", r, &log));
    }
    for lib in src.device_link() {
        let path = CString::new(lib.to_string_lossy().as_bytes())
            .map_err(|_| Error::invalid(OP, format!("library path {} has a NUL byte", lib.display())))?;
        // SAFETY: `path` is NUL-terminated and outlives the call; no options.
        let r = unsafe {
            sys::cuLinkAddFile_v2(
                state.0,
                sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                path.as_ptr(),
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            return Err(fail(&format!("cuLinkAddFile({})", lib.display()), r, &log));
        }
    }
    let (mut out, mut size): (*mut c_void, usize) = (std::ptr::null_mut(), 0);
    // SAFETY: both outputs are valid for writes; the image they describe belongs to `state`.
    let r = unsafe { sys::cuLinkComplete(state.0, &mut out, &mut size) };
    if r != sys::CUresult::CUDA_SUCCESS || out.is_null() {
        let r = if out.is_null() && r == sys::CUresult::CUDA_SUCCESS {
            sys::CUresult::CUDA_ERROR_UNKNOWN
        } else {
            r
        };
        return Err(fail("cuLinkComplete", r, &log));
    }
    // SAFETY: the linker returned `size` bytes at `out`, owned by `state`, which is still
    // live; they are copied before `state` is destroyed.
    let linked = unsafe { std::slice::from_raw_parts(out as *const u8, size) }.to_vec();
    drop(state);
    Ok(linked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowered_names_round_trip_and_foreign_entries_are_refused() {
        let exprs = vec!["k<float>".to_string(), "k<int>".to_string()];
        let pairs: Vec<(String, String)> = exprs
            .iter()
            .cloned()
            .zip(["_Z1kIfEvv".to_string(), "_Z1kIiEvv".to_string()])
            .collect();
        let bytes = encode(&pairs, b"\x7fELFcubin");
        let (lowered, cubin) = decode(&bytes, &exprs).unwrap();
        assert_eq!(lowered, ["_Z1kIfEvv", "_Z1kIiEvv"]);
        assert_eq!(cubin, b"\x7fELFcubin");
        // another list of expressions, a bare cubin, a truncated entry: not this module's
        assert!(decode(&bytes, &exprs[..1]).is_none());
        assert!(decode(&bytes, &["k<double>".to_string(), "k<int>".to_string()]).is_none());
        assert!(decode(b"\x7fELF and a cubin", &exprs).is_none());
        for n in 0..bytes.len() - b"\x7fELFcubin".len() {
            assert!(decode(&bytes[..n], &exprs).is_none(), "{n}");
        }
    }

    #[test]
    fn driver_errors_name_the_call_and_the_code() {
        let e = driver_err(
            "cuModuleGetFunction(`k`)",
            "cuda:0",
            DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NOT_FOUND),
            "no kernel `k`",
        );
        let msg = e.to_string();
        assert!(
            msg.contains("CUDA_ERROR_NOT_FOUND") && msg.contains("no kernel `k`"),
            "{msg}"
        );
        assert!(!e.is_sticky());
    }
}
