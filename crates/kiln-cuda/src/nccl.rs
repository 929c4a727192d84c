//! NCCL collectives over kiln storages: all-reduce (sum), all-gather and broadcast across
//! the GPUs of one process ([`NcclGroup`], one rank per device, `ncclCommInitAll`).
//!
//! libnccl is loaded at run time (cudarc's `nccl` feature under `dynamic-loading`): a binary
//! runs where it is absent, and asking for a group there is
//! [`Error::LibraryNotFound`] (checked with [`available`] before any NCCL symbol is touched,
//! since cudarc panics on a missing library). NVLink SHARP multicast is off unless the user
//! chose otherwise: [`NcclGroup::new`] sets `NCCL_NVLS_ENABLE=0` when it is unset.
//!
//! Ordering: each rank's collective is queued on its device's current stream
//! ([`CudaBackend::stream`]), after the writers of its inputs and outputs
//! ([`CudaStorage::use_on`]); the ranks' calls are issued between `ncclGroupStart` and
//! `ncclGroupEnd` from the calling thread. FFI: cudarc's `nccl::result` layer, because the
//! safe `Comm` takes cudarc slices and kiln's storages are pool blocks (raw pointers).
#![allow(unsafe_code)]

use std::sync::Arc;

use cudarc::nccl::{result, sys};
use kiln_core::storage::BackendStorage;
use kiln_core::{DType, Error, Result};

use crate::{CudaBackend, CudaStorage};

/// The library a collective needs.
pub const LIBRARY: &str = "libnccl.so.2";

/// Whether libnccl can be loaded.
pub fn available() -> bool {
    crate::libs::present(crate::libs::Lib::Nccl)
}

/// The error for a collective asked for where libnccl is absent.
pub fn missing(op: &str) -> Error {
    Error::LibraryNotFound {
        op: op.into(),
        library: LIBRARY.into(),
        hint: "install NCCL (e.g. the libnccl2 package or the nvidia-nccl wheel) and add its directory to LD_LIBRARY_PATH"
            .into(),
    }
}

/// Sets `NCCL_NVLS_ENABLE=0` unless the variable is set (kiln keeps NVLink multicast off by
/// default; a user who sets the variable decides). Called before a communicator is made.
pub fn default_nvls_off() {
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        // edition 2021: safe, but racy with threads reading the environment; kiln calls it
        // before NCCL starts its own threads.
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
    }
}

fn nccl_type(op: &str, d: DType) -> Result<sys::ncclDataType_t> {
    Ok(match d {
        DType::F32 => sys::ncclDataType_t::ncclFloat32,
        DType::F64 => sys::ncclDataType_t::ncclFloat64,
        DType::F16 => sys::ncclDataType_t::ncclFloat16,
        DType::BF16 => sys::ncclDataType_t::ncclBfloat16,
        DType::U8 => sys::ncclDataType_t::ncclUint8,
        DType::U16 => {
            return Err(Error::Unsupported {
                op: format!("{op} on u16 tensors (NCCL has no 16-bit integer type)"),
                backend: "nccl".into(),
            })
        }
    })
}

/// One communicator per device of the group, in rank order.
pub struct NcclGroup {
    ranks: Vec<(Arc<CudaBackend>, sys::ncclComm_t)>,
    names: String,
}

impl std::fmt::Debug for NcclGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclGroup").field("devices", &self.names).finish()
    }
}

impl Drop for NcclGroup {
    fn drop(&mut self) {
        for (_, comm) in &self.ranks {
            // SAFETY: each comm came from ncclCommInitAll and is destroyed once, here; work
            // queued on it completes before the destroy returns (NCCL's contract).
            let _ = unsafe { result::comm_destroy(*comm) };
        }
    }
}

impl NcclGroup {
    /// A group over `devs` (rank `i` is `devs[i]`; distinct devices, at least one).
    pub fn new(devs: Vec<Arc<CudaBackend>>) -> Result<Self> {
        let names = devs.iter().map(|d| d.name()).collect::<Vec<_>>().join(",");
        if devs.is_empty() {
            return Err(Error::invalid("nccl", "a group needs at least one device"));
        }
        let ordinals: Vec<i32> = devs
            .iter()
            .map(|d| d.main_stream().context().ordinal() as i32)
            .collect();
        for (i, o) in ordinals.iter().enumerate() {
            if ordinals[..i].contains(o) {
                return Err(Error::invalid(
                    "nccl",
                    format!("cuda:{o} is named twice in {names}: one rank per device"),
                ));
            }
        }
        if !available() {
            return Err(missing("nccl group"));
        }
        default_nvls_off();
        let n = devs.len();
        let mut comms: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); n];
        // SAFETY: `comms` holds `n` slots and `ordinals` `n` device ordinals (checked
        // distinct); libnccl is loaded (checked above).
        unsafe { result::comm_init_all(comms.as_mut_ptr(), n as i32, ordinals.as_ptr()) }.map_err(|e| {
            Error::Collective {
                op: "ncclCommInitAll".into(),
                devices: names.clone(),
                detail: format!("{:?}", e.0),
            }
        })?;
        Ok(NcclGroup {
            ranks: devs.into_iter().zip(comms).collect(),
            names,
        })
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.ranks.len()
    }

    /// The device of each rank.
    pub fn devices(&self) -> Vec<Arc<CudaBackend>> {
        self.ranks.iter().map(|(d, _)| d.clone()).collect()
    }

    fn fail(&self, op: &str, e: result::NcclError) -> Error {
        Error::Collective {
            op: op.into(),
            devices: self.names.clone(),
            detail: format!("{:?}", e.0),
        }
    }

    /// Checks one storage per rank, on that rank's device, of one dtype, each holding
    /// `len` elements.
    fn check(&self, op: &str, what: &str, bufs: &[&CudaStorage], len: usize, dtype: DType) -> Result<()> {
        if bufs.len() != self.size() {
            return Err(Error::invalid(
                op,
                format!("{} {what} buffers for {} ranks", bufs.len(), self.size()),
            ));
        }
        for (r, (b, (dev, _))) in bufs.iter().zip(&self.ranks).enumerate() {
            if !Arc::ptr_eq(b.backend(), dev) {
                return Err(Error::invalid(
                    op,
                    format!("rank {r}'s {what} is not on {}", dev.name()),
                ));
            }
            if b.dtype() != dtype || b.len() != len {
                return Err(Error::ShapeMismatch {
                    op: format!("{op}: rank {r}'s {what} ({})", b.dtype()),
                    expected: vec![len],
                    got: vec![b.len()],
                });
            }
        }
        Ok(())
    }

    /// Runs `call(rank, comm, stream)` for every rank inside one NCCL group, each on its
    /// device's current stream after the writers of `bufs`.
    fn grouped(
        &self,
        op: &str,
        bufs: &[&[&CudaStorage]],
        call: impl Fn(
            usize,
            sys::ncclComm_t,
            sys::cudaStream_t,
        ) -> std::result::Result<result::NcclStatus, result::NcclError>,
    ) -> Result<()> {
        for (r, (dev, _)) in self.ranks.iter().enumerate() {
            for set in bufs {
                set[r].use_on(dev.stream())?;
            }
        }
        result::group_start().map_err(|e| self.fail("ncclGroupStart", e))?;
        let mut first = None;
        for (r, (dev, comm)) in self.ranks.iter().enumerate() {
            if let Err(e) = call(r, *comm, dev.stream().cu_stream() as sys::cudaStream_t) {
                first.get_or_insert(e);
            }
        }
        let end = result::group_end();
        if let Some(e) = first {
            return Err(self.fail(op, e));
        }
        end.map(|_| ()).map_err(|e| self.fail("ncclGroupEnd", e))
    }

    /// `recv[r] = Σ_ranks send[·]` on every rank (elementwise sum; NCCL's reduction order).
    pub fn all_reduce_sum(&self, send: &[&CudaStorage], recv: &[&CudaStorage]) -> Result<()> {
        let (len, dtype) = first_of("all_reduce", send)?;
        self.check("all_reduce", "input", send, len, dtype)?;
        self.check("all_reduce", "output", recv, len, dtype)?;
        let t = nccl_type("all_reduce", dtype)?;
        self.grouped("ncclAllReduce", &[send, recv], |r, comm, stream| {
            // SAFETY: send[r] and recv[r] hold `len` elements of `t` on rank r's device
            // (checked), are live pool blocks ordered on `stream` by `use_on`, and stay alive
            // past the call (the caller holds them; the pool frees a block only after its
            // streams' work).
            unsafe {
                result::all_reduce(
                    send[r].device_ptr() as *const _,
                    recv[r].device_ptr() as *mut _,
                    len,
                    t,
                    sys::ncclRedOp_t::ncclSum,
                    comm,
                    stream,
                )
            }
        })
    }

    /// `recv[r] = send[0] ++ send[1] ++ ...` (rank order) on every rank; each `recv[r]` holds
    /// `size · len(send)` elements.
    pub fn all_gather(&self, send: &[&CudaStorage], recv: &[&CudaStorage]) -> Result<()> {
        let (len, dtype) = first_of("all_gather", send)?;
        self.check("all_gather", "input", send, len, dtype)?;
        self.check("all_gather", "output", recv, len * self.size(), dtype)?;
        let t = nccl_type("all_gather", dtype)?;
        self.grouped("ncclAllGather", &[send, recv], |r, comm, stream| {
            // SAFETY: send[r] holds `len` and recv[r] `len · size` elements of `t` on rank
            // r's device (checked), ordered on `stream` by `use_on`, alive past the call.
            unsafe {
                result::all_gather(
                    send[r].device_ptr() as *const _,
                    recv[r].device_ptr() as *mut _,
                    len,
                    t,
                    comm,
                    stream,
                )
            }
        })
    }

    /// `buf[r] = buf[root]` on every rank (in place).
    pub fn broadcast(&self, root: usize, bufs: &[&CudaStorage]) -> Result<()> {
        if root >= self.size() {
            return Err(Error::invalid(
                "broadcast",
                format!("root {root} is not a rank of a group of {}", self.size()),
            ));
        }
        let (len, dtype) = first_of("broadcast", bufs)?;
        self.check("broadcast", "buffer", bufs, len, dtype)?;
        let t = nccl_type("broadcast", dtype)?;
        self.grouped("ncclBroadcast", &[bufs], |r, comm, stream| {
            let p = bufs[r].device_ptr();
            // SAFETY: bufs[r] holds `len` elements of `t` on rank r's device (checked),
            // ordered on `stream` by `use_on`, alive past the call; in place (send = recv)
            // is NCCL's documented in-place broadcast.
            unsafe { result::broadcast(p as *const _, p as *mut _, len, t, root as i32, comm, stream) }
        })
    }
}

fn first_of(op: &str, bufs: &[&CudaStorage]) -> Result<(usize, DType)> {
    bufs.first()
        .map(|b| (b.len(), b.dtype()))
        .ok_or_else(|| Error::invalid(op, "no buffer given"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_a_typed_error_that_says_what_to_install() {
        // probing never panics, with or without libnccl
        let present = available();
        let e = missing("all_reduce");
        assert!(matches!(e, Error::LibraryNotFound { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("all_reduce") && msg.contains("libnccl.so.2") && msg.contains("install NCCL"),
            "{msg}"
        );
        assert!(!e.is_sticky());
        println!("libnccl present: {present}");
    }

    #[test]
    fn nvls_stays_off_unless_the_user_chose() {
        default_nvls_off();
        // set by kiln or by the user before: either way it is set now, and a second call
        // leaves it alone
        let v = std::env::var("NCCL_NVLS_ENABLE");
        assert!(v.is_ok());
        default_nvls_off();
        assert_eq!(std::env::var("NCCL_NVLS_ENABLE"), v);
    }
}
