//! CUDA graphs: capture a sequence of kiln ops on the backend's stream once, replay it with
//! one launch.
//!
//! A graph replays fixed device addresses, as `torch.cuda.CUDAGraph` does with its static
//! tensors: new inputs are written into the buffers the capture used ([`Graph::write`]) and
//! results read from them after [`Graph::launch`] ([`Graph::read`]).
//!
//! Memory safety of replays does not depend on the caller keeping those buffers: every block
//! whose address a kernel received during capture is recorded by the pool
//! ([`crate::pool::DevicePool`]), and a buffer dropped while a graph holds its block gives
//! the block back only when the last such graph is dropped. So a replay can never write
//! into memory that was handed to someone else.
//!
//! What cannot be captured fails with [`Error::Capture`] naming it, the capture is
//! abandoned, and the stream works as before:
//! - host copies (`copy_from_host`, `copy_to_host`, upload/download): a graph would bake in
//!   the host address, and a download waits for the stream;
//! - a wait for the stream (`synchronize`);
//! - a device allocation the pool cannot serve from its cache (the capture would need
//!   `cuMemAlloc`): allocate buffers, or run the ops once, before capturing.
//!
//! On sm_90 and above (with a driver of CUDA 12.3 or later; `KILN_GRAPH_PDL=0` turns it
//! off) a capture launches kiln's element-wise kernels with programmatic dependent launch, so a chain of small kernels
//! replays with the next launch overlapping the kernel ahead of it ([`crate::graph_pdl`]);
//! results are bitwise those of the plain path, which [`GraphOptions`] can ask for.
//!
//! The capture-isolation trap (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`, raised when cudarc's
//! per-slice event tracking inserts a wait on a buffer last used on another stream) does not
//! arise: pool buffers are raw pointers, so cudarc inserts no cross-stream event waits into
//! the capture.
#![allow(unsafe_code)]

use crate::pool::{DeviceBuffer, DevicePool, GraphRefs};
use crate::{cuda_err, CudaBackend};
use cudarc::driver::{result, sys, CudaGraph, CudaStream};
use kiln_core::{Error, Result};
use std::sync::Arc;
use std::time::Instant;

/// How [`CudaBackend::capture_with`] records and instantiates a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphOptions {
    /// Launch the kernels that support it with programmatic dependent launch
    /// ([`crate::graph_pdl`]). Ignored where the device or driver lacks it
    /// ([`CudaBackend::pdl_supported`]); [`Graph::programmatic_launches`] says what was
    /// used. Default: on where supported, unless `KILN_GRAPH_PDL=0`.
    pub pdl: bool,
    /// Instantiate for device launch (`CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH`): the
    /// graph may then also be launched from a kernel; replays from the host work as before.
    /// Device graphs have restrictions of their own: where the driver refuses one,
    /// [`CudaBackend::capture_with`] returns its error from `cuStreamEndCapture`. Kept to
    /// compare replay costs; default: off.
    pub device_launch: bool,
}

/// A captured, instantiated graph of kiln ops, replayable on the backend's stream.
pub struct Graph {
    exec: CudaGraph,
    nodes: usize,
    programmatic: usize,
    refs: Option<GraphRefs>,
    pool: Arc<DevicePool>,
    stream: Arc<CudaStream>,
    device: String,
    capture_ms: f64,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.device)
            .field("nodes", &self.nodes)
            .field("programmatic", &self.programmatic)
            .field("blocks", &self.refs.as_ref().map_or(0, GraphRefs::len))
            .finish()
    }
}

impl CudaBackend {
    /// Capture the ops `f` enqueues on this backend into a graph (nothing runs while
    /// capturing). While `f` runs, this thread's ops on this backend go to a private capture
    /// stream, so other threads' work on the backend's stream neither lands in the graph nor
    /// breaks the capture; replays run on the backend's stream, in order with other work
    /// there. Buffers must exist before the capture (see the module docs for what cannot be
    /// captured).
    ///
    /// ```no_run
    /// # fn demo(b: &kiln_cuda::CudaBackend) -> kiln_core::Result<()> {
    /// use kiln_core::backend::MapOp;
    /// use kiln_cuda::ops::Map;
    /// let mut x = b.alloc::<f32>(1024)?;
    /// let mut y = b.alloc::<f32>(1024)?;
    /// let g = b.capture(|b| {
    ///     let op = MapOp::ScaleShift { a: 2.0, b: 1.0 };
    ///     b.run(Map { op, x: &x, out: &mut y })?;
    ///     let op = MapOp::Unary(kiln_core::UnaryOp::Sigmoid);
    ///     b.run(Map { op, x: &y, out: &mut x })
    /// })?;
    /// let input = vec![0.5f32; 1024];
    /// let mut out = vec![0f32; 1024];
    /// g.write(&mut x, &input)?;
    /// g.launch()?;
    /// g.read(&x, &mut out)?;
    /// # Ok(()) }
    /// ```
    pub fn capture(&self, f: impl FnOnce(&CudaBackend) -> Result<()>) -> Result<Graph> {
        self.capture_with(self.graph_options(), f)
    }

    /// The options [`Self::capture`] uses on this device: programmatic dependent launch
    /// where the device and driver support it (unless `KILN_GRAPH_PDL=0`), host launch.
    pub fn graph_options(&self) -> GraphOptions {
        GraphOptions {
            pdl: self.pdl_supported() && crate::graph_pdl::pdl_opted_in(),
            device_launch: false,
        }
    }

    /// [`Self::capture`] with explicit options.
    pub fn capture_with(
        &self,
        opts: GraphOptions,
        f: impl FnOnce(&CudaBackend) -> Result<()>,
    ) -> Result<Graph> {
        if self.is_capturing_here() {
            return Err(Error::Capture {
                op: "a second capture".into(),
                reason: "this thread is already capturing on this backend (captures do not nest)".into(),
            });
        }
        // captures on one backend take turns; other threads' eager work goes on meanwhile
        let _turn = self.capture_guard();
        let stream = self.capture_stream().clone();
        let device = self.name_string();
        let err = |op: &str, e| cuda_err(op, &device, e);
        let t0 = Instant::now();
        // Thread-local mode on a stream only this thread uses while capturing: no other
        // thread's work can land in the capture or invalidate it.
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| err("cuStreamBeginCapture", e))?;
        self.pool().begin_capture(&stream);
        self.set_capturing_here(true);
        crate::graph_pdl::begin(self, opts.pdl && self.pdl_supported());
        let body = f(self);
        let programmatic = crate::graph_pdl::end();
        self.set_capturing_here(false);
        let flags = if opts.device_launch {
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
        } else {
            sys::CUgraphInstantiate_flags(0)
        };
        // always end the capture, so the stream leaves capture mode whatever happened
        let ended = stream.end_capture(flags);
        let keep = body.is_ok() && matches!(ended, Ok(Some(_)));
        let refs = self.pool().end_capture(keep);
        body?;
        let exec = match ended {
            Ok(Some(g)) => g,
            Ok(None) => {
                return Err(Error::Capture {
                    op: "the op sequence".into(),
                    reason: "nothing was enqueued on the stream".into(),
                })
            }
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED => {
                return Err(Error::Capture {
                    op: "the op sequence".into(),
                    reason: "the driver invalidated the capture (an operation that cannot be captured ran on the stream)".into(),
                })
            }
            Err(e) => return Err(err("cuStreamEndCapture", e)),
        };
        // from here on, dropping `g` on an error gives the held blocks back
        let mut g = Graph {
            exec,
            nodes: 0,
            programmatic,
            refs: Some(refs),
            pool: self.pool().clone(),
            stream: self.main_stream().clone(),
            device,
            capture_ms: 0.0,
        };
        // SAFETY: the graph handle is owned by `g.exec` and alive; a null node array asks
        // only for the count, which the driver writes into `g.nodes`.
        unsafe { sys::cuGraphGetNodes(g.exec.cu_graph(), std::ptr::null_mut(), &mut g.nodes) }
            .result()
            .map_err(|e| cuda_err("cuGraphGetNodes", &g.device, e))?;
        if g.nodes == 0 {
            return Err(Error::Capture {
                op: "the op sequence".into(),
                reason: "nothing was enqueued on the stream, so there is nothing to replay".into(),
            });
        }
        // upload now (on the stream it replays on), so the first replay is not slower
        g.stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("cuCtxSetCurrent", &g.device, e))?;
        // SAFETY: `g.exec` is a live executable graph and `g.stream` a live stream of the
        // same context (bound above).
        unsafe { result::graph::upload(g.exec.cu_graph_exec(), g.stream.cu_stream()) }
            .map_err(|e| cuda_err("cuGraphUpload", &g.device, e))?;
        g.capture_ms = t0.elapsed().as_secs_f64() * 1e3;
        Ok(g)
    }

    fn name_string(&self) -> String {
        format!("cuda:{}", self.info().desc.ordinal)
    }
}

impl Graph {
    /// Enqueue one replay on the backend's stream (asynchronous, like any kiln op).
    pub fn launch(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| cuda_err("cuCtxSetCurrent", &self.device, e))?;
        // SAFETY: the executable graph is alive (owned by `self.exec`) and every device block
        // it addresses is held by the pool until `self` is dropped; the stream belongs to the
        // context the graph was captured in.
        unsafe { result::graph::launch(self.exec.cu_graph_exec(), self.stream.cu_stream()) }
            .map_err(|e| cuda_err("cuGraphLaunch", &self.device, e))
    }

    /// Nodes in the graph (one per kernel launch or copy captured).
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Kernel launches captured with programmatic dependent launch (0 where it was off or
    /// unsupported, or no captured kernel supports it).
    pub fn programmatic_launches(&self) -> usize {
        self.programmatic
    }

    /// Distinct device blocks the graph reads or writes (held until the graph is dropped).
    pub fn blocks(&self) -> usize {
        self.refs.as_ref().map_or(0, GraphRefs::len)
    }

    /// Milliseconds the capture, instantiation and upload took.
    pub fn capture_ms(&self) -> f64 {
        self.capture_ms
    }

    /// Copy new input into a buffer the graph uses, ordered before the next replay on the
    /// stream.
    pub fn write<T: Copy>(&self, dst: &mut DeviceBuffer<T>, src: &[T]) -> Result<()> {
        dst.copy_from_host(src, &self.stream)
    }

    /// Copy a buffer out after the replays queued so far (waits for them).
    pub fn read<T: Copy>(&self, src: &DeviceBuffer<T>, dst: &mut [T]) -> Result<()> {
        src.copy_to_host(dst, &self.stream)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if let Some(refs) = self.refs.take() {
            // blocks return to the stream's free list; later work on the stream is ordered
            // after any replay still running, so reuse cannot race it
            self.pool.release_graph(refs);
        }
    }
}
