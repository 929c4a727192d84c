//! Programmatic dependent launch (PDL) for captured kernel chains, sm_90 and above.
//!
//! In a graph, a kernel normally starts only after the kernel before it has finished and its
//! writes have been flushed; for tiny kernels that gap is most of a replay's time. A kernel
//! launched with `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` (through
//! `cuLaunchKernelEx`) while a stream is captured becomes a node whose incoming edge is
//! programmatic: the driver may launch it as soon as the kernel ahead of it signals
//! `griddepcontrol.launch_dependents`, and the kernel itself waits with
//! `griddepcontrol.wait` before it reads anything the earlier one wrote. Results are
//! therefore those of a plain launch, bit for bit.
//!
//! That wait is a property of the kernel's source, so only the kernels listed in
//! [`PDL_KERNELS`] (their sources call `pdl_enter` first; a test checks) are launched this
//! way, and only where every node the launch will depend on is a kernel node (programmatic
//! edges are kernel-to-kernel): the first node of a graph and a kernel after a copy, a memset
//! or a join from one keep their full dependency, as every other kernel does. The attribute is used
//! only while this thread captures with PDL on ([`crate::GraphOptions`]): eager launches are
//! unchanged. It needs compute capability 9.0 and a driver of CUDA 12.3 or later (programmatic
//! edges from stream capture), checked at run time ([`CudaBackend::pdl_supported`]); elsewhere captures use
//! the plain launch path.
#![allow(unsafe_code)]

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::CudaBackend;
use cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig};
use kiln_core::Result;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

/// Kernels whose source waits for its prerequisite grids (`griddepcontrol.wait`, map.cu's
/// `pdl_enter`) before touching memory: the only ones launched with programmatic stream
/// serialization.
pub const PDL_KERNELS: &[Kernel] = &[
    Kernel::MAP_F32,
    Kernel::MAP_F16,
    Kernel::MAP_BF16,
    Kernel::AXPY_F32,
    Kernel::AXPY_F16,
    Kernel::AXPY_BF16,
];

/// The lowest compute capability with `griddepcontrol` (Hopper).
pub const PDL_MIN_COMPUTE_CAPABILITY: (u32, u32) = (9, 0);

/// The lowest driver API version whose stream capture turns the attribute into programmatic
/// graph edges (CUDA 12.3).
pub const PDL_MIN_DRIVER: i32 = 12030;

thread_local! {
    /// The backend (its id) whose capture on this thread launches with PDL; 0 for none.
    static PDL_HERE: Cell<usize> = const { Cell::new(0) };
    /// Programmatic launches recorded by this thread's current capture.
    static PDL_LAUNCHES: Cell<usize> = const { Cell::new(0) };
}

/// The driver's API version (`cuDriverGetVersion`), read once; 0 where it cannot be read.
fn driver_version() -> i32 {
    static V: OnceLock<i32> = OnceLock::new();
    *V.get_or_init(|| {
        let mut v = 0;
        // SAFETY: a plain query writing one int; it needs no context, and a backend exists
        // (so the driver library is loaded and initialised) whenever this is reached.
        match unsafe { sys::cuDriverGetVersion(&mut v) }.result() {
            Ok(()) => v,
            Err(_) => 0,
        }
    })
}

/// Whether captures on a device of compute capability `cc` under a driver of API version
/// `driver` can use PDL.
pub fn pdl_possible(cc: (u32, u32), driver: i32) -> bool {
    cc >= PDL_MIN_COMPUTE_CAPABILITY && driver >= PDL_MIN_DRIVER
}

/// Marks this thread's capture on `b` as launching with PDL (or not), and zeroes the count.
pub(crate) fn begin(b: &CudaBackend, on: bool) {
    PDL_HERE.with(|c| c.set(if on { b.id() } else { 0 }));
    PDL_LAUNCHES.with(|c| c.set(0));
}

/// Ends this thread's PDL capture; returns how many launches were programmatic.
pub(crate) fn end() -> usize {
    PDL_HERE.with(|c| c.set(0));
    PDL_LAUNCHES.with(|c| c.replace(0))
}

/// Whether a launch of `k` on `stream` by `b` goes through [`CudaBackend::launch_programmatic`]:
/// this thread captures on `b` with PDL on, on the capture stream, `k` waits for its
/// prerequisites, and every node it will depend on is a kernel.
pub(crate) fn applies(b: &CudaBackend, stream: &Arc<CudaStream>, k: Kernel) -> bool {
    PDL_HERE.with(|c| c.get()) == b.id()
        && b.is_capturing_here()
        && Arc::ptr_eq(stream, b.capture_stream())
        && PDL_KERNELS.contains(&k)
        && follows_kernels(stream)
}

/// Whether the capturing `stream`'s next node will depend on kernel nodes only (and on at
/// least one). Any failed query answers `false`: the plain launch is always correct.
fn follows_kernels(stream: &CudaStream) -> bool {
    let mut status = u32::MAX;
    let mut deps: *const sys::CUgraphNode = std::ptr::null();
    let mut edges: *const sys::CUgraphEdgeData = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: `stream` is a live stream of the context bound on this thread (the capture
    // binds it). The status is written as the C enum's int into a u32 (no Rust enum is
    // materialised from the driver's value); id and graph are optional outputs (null);
    // edge data is asked for, as the driver requires once edges carry programmatic data.
    // The symbol exists on every driver that passes the gate (CUDA 12.3 and later).
    let r = unsafe {
        sys::cuStreamGetCaptureInfo_v3(
            stream.cu_stream(),
            (&mut status as *mut u32).cast(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut deps,
            &mut edges,
            &mut n,
        )
    };
    let active = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE as u32;
    if r != sys::CUresult::CUDA_SUCCESS || status != active || n == 0 || deps.is_null() {
        return false;
    }
    // SAFETY: the driver returned `n` node handles at `deps`, valid until the next call on
    // the stream; they are read before any.
    let nodes = unsafe { std::slice::from_raw_parts(deps, n) };
    nodes.iter().all(|&node| {
        let mut t = u32::MAX;
        // SAFETY: `node` is a node of the graph being captured; the type is written as the
        // C enum's int into a u32.
        let r = unsafe { sys::cuGraphNodeGetType(node, (&mut t as *mut u32).cast()) };
        r == sys::CUresult::CUDA_SUCCESS && t == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL as u32
    })
}

/// The address of one argument's value, as `cuLaunchKernelEx`'s parameter array wants it.
fn param_ptr(a: &Arg<'_>) -> *mut c_void {
    let p: *const c_void = match a {
        Arg::Ptr { addr, .. } => (addr as *const u64).cast(),
        Arg::I32(v) => (v as *const i32).cast(),
        Arg::U32(v) => (v as *const u32).cast(),
        Arg::I64(v) => (v as *const i64).cast(),
        Arg::U64(v) => (v as *const u64).cast(),
        Arg::F32(v) => (v as *const f32).cast(),
        Arg::F64(v) => (v as *const f64).cast(),
        Arg::Struct(s) => s.as_param(),
    };
    p.cast_mut()
}

impl CudaBackend {
    /// Whether captures on this device can use PDL (compute capability 9.0 and a driver of
    /// CUDA 12.3 or later).
    pub fn pdl_supported(&self) -> bool {
        pdl_possible(self.info().desc.compute_capability, driver_version())
    }

    /// Whether captures on this device use PDL by default, and why, in a line (`kiln doctor`).
    pub fn pdl_status(&self) -> String {
        let (ma, mi) = self.info().desc.compute_capability;
        let d = driver_version();
        let drv = format!("{}.{}", d / 1000, (d % 1000) / 10);
        if self.pdl_supported() && !pdl_opted_in() {
            format!("off: KILN_GRAPH_PDL=0 (cc {ma}.{mi}, driver API {drv} support it)")
        } else if self.pdl_supported() {
            format!("on (cc {ma}.{mi}, driver API {drv}): captured chains of element-wise kernels launch with programmatic dependent launch")
        } else if (ma, mi) < PDL_MIN_COMPUTE_CAPABILITY {
            format!("off: needs compute capability 9.0, this device is {ma}.{mi}")
        } else {
            format!("off: needs a driver of CUDA 12.3 or later, this one is {drv}")
        }
    }

    /// Launch `f` (kernel `k`, loaded in this context) on `stream` with programmatic stream
    /// serialization. Same contract as [`CudaBackend::launch_on`], whose checks have run.
    pub(crate) fn launch_programmatic(
        &self,
        stream: &Arc<CudaStream>,
        f: &CudaFunction,
        k: Kernel,
        cfg: LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let mut params: Vec<*mut c_void> = args.iter().map(param_ptr).collect();
        // SAFETY: an all-zero attribute value is a valid (empty) union of plain integers.
        let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
        value.programmaticStreamSerializationAllowed = 1;
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value,
        };
        let config = sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| self.err("cuCtxSetCurrent", e))?;
        // SAFETY: `f` is `k` loaded into this backend's context (bound above) and `stream`
        // belongs to it. `params` holds one pointer per declared parameter, in order, each to
        // a value of the declared type that lives in `args` until this call returns (the
        // driver copies parameter values at launch; `launch_on` checked them against `k`'s
        // declaration). `config` and `attr` live on this frame through the call. The memory
        // behind the pointers is `launch_on`'s documented contract, met by its caller; the
        // kernel waits for its prerequisite grids before reading it (`PDL_KERNELS`).
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                f.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| self.launch_err(k, e))?;
        PDL_LAUNCHES.with(|c| c.set(c.get() + 1));
        Ok(())
    }
}

/// Whether captures may use programmatic dependent launch: yes unless `KILN_GRAPH_PDL=0`
/// (to compare, or to rule it out).
pub(crate) fn pdl_opted_in() -> bool {
    !std::env::var("KILN_GRAPH_PDL").is_ok_and(|v| v.trim() == "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pdl_kernel_waits_for_its_prerequisites() {
        for k in PDL_KERNELS {
            let src = k.module().source;
            assert!(
                src.contains("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");"),
                "{}: its module has no griddepcontrol.wait",
                k.symbol()
            );
            // the wait comes before the body reads memory: map_body starts with it
            let body = src.find("void map_body").expect("map_body");
            let first = src[body..].find('{').expect("body") + body;
            assert!(
                src[first..]
                    .trim_start_matches('{')
                    .trim_start()
                    .starts_with("pdl_enter();"),
                "{}: map_body must call pdl_enter() first",
                k.symbol()
            );
        }
    }

    #[test]
    fn pdl_needs_hopper_and_a_driver_of_cuda_12_3() {
        assert!(pdl_possible((9, 0), 12030));
        assert!(pdl_possible((10, 0), 13000));
        assert!(!pdl_possible((8, 9), 13000));
        assert!(!pdl_possible((9, 0), 12020));
    }
}
