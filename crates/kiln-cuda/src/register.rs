//! A caller's `Vec` page-locked in place (`cuMemHostRegister`): copies to and from it run
//! as one DMA each at the link's speed, with no staging buffers and no host copy.
//!
//! When this beats staging: registering costs time per page (about 58 ms per GiB on huge
//! pages, 74 ms on small ones, register and unregister together, measured on the H200
//! machine), so it loses to the staged copies (~27 ms per GiB once the staging buffers
//! exist) for one copy in a warm process, and wins where one buffer carries both
//! directions in a fresh process, whose staged copies first allocate their pinned buffers:
//! the CLI's one-file filter reads into a `Vec`, uploads it, and downloads the result into
//! the same `Vec` (docs/performance.md, "first use"). Written by hand: cudarc has no safe
//! registration.
#![allow(unsafe_code)]

use crate::backend::{cuda_err, CudaBackend};
use cudarc::driver::{sys, CudaContext};
use kiln_core::Error;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A `Vec` registered with the driver as page-locked memory (see the module docs); it is
/// unregistered on drop or by [`RegisteredVec::into_vec`].
pub struct RegisteredVec<T> {
    v: Vec<T>,
    ctx: Arc<CudaContext>,
}

impl<T: Copy> RegisteredVec<T> {
    /// Unregisters and gives the vector back. A failure to unregister is ignored: the pages
    /// then stay locked until the context goes, and nothing else changes.
    pub fn into_vec(mut self) -> Vec<T> {
        let v = std::mem::take(&mut self.v);
        let _ = self.unregister(&v);
        v
    }

    fn unregister(&self, v: &[T]) -> kiln_core::Result<()> {
        if v.is_empty() {
            return Ok(());
        }
        self.ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("bind", "host", e))?;
        // SAFETY: `v`'s address was registered by `CudaBackend::register_vec` and not yet
        // unregistered (into_vec takes the vector out, so Drop sees an empty one).
        unsafe { sys::cuMemHostUnregister(v.as_ptr() as *mut std::ffi::c_void) }
            .result()
            .map_err(|e| cuda_err("cuMemHostUnregister", "host", e))
    }
}

impl<T> Deref for RegisteredVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.v
    }
}

impl<T> DerefMut for RegisteredVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.v
    }
}

impl<T> Drop for RegisteredVec<T> {
    fn drop(&mut self) {
        if self.v.is_empty() || self.ctx.bind_to_thread().is_err() {
            return;
        }
        // SAFETY: as in `unregister`: the address is registered and still owned here.
        let _ = unsafe { sys::cuMemHostUnregister(self.v.as_mut_ptr() as *mut std::ffi::c_void) };
    }
}

impl CudaBackend {
    /// `v` page-locked in place, or `v` back with the driver's error (out of lockable
    /// memory, registration unsupported), so the caller can stage its copies instead.
    /// Copies to and from the result take the direct path of `upload_into` and
    /// `download_into` (one DMA, waited for).
    #[allow(clippy::result_large_err)]
    pub fn register_vec<T: Copy>(&self, v: Vec<T>) -> std::result::Result<RegisteredVec<T>, (Vec<T>, Error)> {
        let bytes = std::mem::size_of_val(&v[..]);
        let ctx = self.main_stream().context().clone();
        if bytes == 0 {
            return Ok(RegisteredVec { v, ctx });
        }
        if let Err(e) = ctx.bind_to_thread() {
            return Err((v, cuda_err("bind", "host", e)));
        }
        // SAFETY: [ptr, ptr + bytes) is the vector's live allocation; it stays where it is
        // (the vector is owned by the guard and never grown) until it is unregistered, by
        // `into_vec` or on drop, both before the allocation is freed.
        let r = unsafe {
            sys::cuMemHostRegister_v2(
                v.as_ptr() as *mut std::ffi::c_void,
                bytes,
                sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        };
        match r.result() {
            Ok(()) => Ok(RegisteredVec { v, ctx }),
            Err(e) => Err((v, cuda_err("cuMemHostRegister", "host", e))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::discovery;

    /// Registered both ways: the direct path's copies round-trip exactly, and the vector
    /// comes back unregistered (registering it again succeeds).
    #[test]
    #[cfg_attr(
        not(feature = "gpu-tests"),
        ignore = "needs a GPU: cargo test --features gpu-tests"
    )]
    fn a_registered_vec_round_trips_and_registers_again() {
        if let Some(reason) = discovery::no_gpu_reason() {
            kiln_testkit::skip_unless_required(
                kiln_testkit::REQUIRE_GPU,
                "a_registered_vec_round_trips_and_registers_again",
                &reason,
            );
            return;
        }
        let p = discovery::probe().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let b = crate::CudaBackend::new(&p.devices[0], crate::KernelCache::new(dir.path()), None).unwrap();
        let n = (9 << 20) + 7; // over DIRECT_BYTES, odd
        let x: Vec<f32> = (0..n).map(|i| (i % 977) as f32 * 0.5 - 3.0).collect();
        let mut reg = b.register_vec(x.clone()).map_err(|(_, e)| e).unwrap();
        assert!(crate::transfer::is_pinned(&reg));
        let d = b.upload(&reg).unwrap();
        reg.iter_mut().for_each(|v| *v = f32::NAN);
        b.download(&d, &mut reg).unwrap();
        assert_eq!(&reg[..], &x[..]);
        let v = reg.into_vec();
        assert!(!crate::transfer::is_pinned(&v));
        let again = b.register_vec(v).map_err(|(_, e)| e).unwrap();
        assert_eq!(again.len(), n);
    }
}
