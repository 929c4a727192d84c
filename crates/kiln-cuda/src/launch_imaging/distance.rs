//! Launchers for `kernels/distance.cu`: scipy.ndimage.distance_transform_edt of a mask in
//! device memory (1 to 4 axes, row-major, a zero byte is background): the float64 distances
//! and int32 feature coordinates kiln-core's `edt` computes, bit for bit.
//!
//! One launch a pass, axis 0 first, on the current stream; a pass's features go from one
//! scratch buffer to the other (pass d holds d + 1 int32 planes), and the last pass writes
//! the caller's indices (if wanted) and distances. Scratch besides: the sites' stack, an
//! int32 and an f64 an element. For 3 axes that is 24 bytes an element (3.2 GB for a 512^3
//! volume). See `distance.cu` for the algorithm.

#![allow(unsafe_code)]

use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::imaging::distance::{edt_pass_flags, edt_sampling};
use kiln_core::{Error, Result};

const OP: &str = "distance_transform_edt";
/// The most axes the kernels take (`EDT_MAXR`).
pub const EDT_MAX_AXES: usize = 4;

/// A grid-stride launch over `lines` lines, a thread each.
fn lines_cfg(lines: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (lines.div_ceil(256).clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// scipy.ndimage.distance_transform_edt of the `shape` mask at device address `mask` (one
/// byte an element, zero is background), `sampling` the spacing along each axis (`None`: 1),
/// into the float64 array at `distances` and the `ndim` int32 planes at `indices` (each 0
/// when not wanted; at least one is given), as kiln-core's `edt` computes them.
///
/// The fields are private and the constructor, [`EdtRaw::new`], is `unsafe`: running the op
/// dereferences the addresses, whose validity only the caller can promise.
pub struct EdtRaw<'a> {
    mask: u64,
    shape: &'a [usize],
    sampling: Option<&'a [f64]>,
    distances: u64,
    indices: u64,
}

impl<'a> EdtRaw<'a> {
    /// The op (see [`EdtRaw`]).
    ///
    /// # Safety
    ///
    /// `mask` must address `shape`'s product of bytes, `distances` (unless 0) as many f64s
    /// and `indices` (unless 0) `shape.len()` times as many int32s, device memory of the
    /// context of the backend that runs the op, the outputs distinct from each other and
    /// from the mask, their writes and reads by other streams ordered before the run (the
    /// caller synchronises them), live until the run returns.
    pub unsafe fn new(
        mask: u64,
        shape: &'a [usize],
        sampling: Option<&'a [f64]>,
        distances: u64,
        indices: u64,
    ) -> Self {
        EdtRaw {
            mask,
            shape,
            sampling,
            distances,
            indices,
        }
    }
}

impl Op for EdtRaw<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let EdtRaw {
            mask,
            shape,
            sampling,
            distances,
            indices,
        } = self;
        let r = shape.len();
        if !(1..=EDT_MAX_AXES).contains(&r) {
            return Err(Error::invalid(
                OP,
                format!("{r} axes: on the GPU the transform takes 1 to {EDT_MAX_AXES} (use a host array)"),
            ));
        }
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .filter(|&n| n < i32::MAX as usize)
            .ok_or_else(|| {
                Error::invalid(
                    OP,
                    format!("the shape {shape:?} has 2^31 - 1 elements or more: use a host array"),
                )
            })?;
        let s = edt_sampling(sampling, r)?;
        if distances == 0 && indices == 0 {
            return Err(Error::invalid(OP, "neither distances nor indices asked for"));
        }
        if n == 0 {
            return Ok(());
        }
        if mask == 0 {
            return Err(Error::invalid(OP, "a null device address"));
        }
        let flags = edt_pass_flags(shape, &s);
        let dims = small_buf(cuda, &shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
        let samp = small_buf(cuda, &s)?;
        // the features between passes (ping-pong: pass d writes its d + 1 planes to `a`
        // when d is even, to `b` when odd); the last pass writes the caller's indices, or
        // none (only the distances), except a one-axis scan, which needs a plane to sweep
        // (`a` where the caller wants no indices)
        let last_to_caller = |d: usize| d == r - 1 && !(r == 1 && flags[0].scan_first && indices == 0);
        let planes = |parity: usize| {
            (0..r)
                .filter(|&d| d % 2 == parity && !last_to_caller(d))
                .map(|d| (d + 1) * n)
                .max()
        };
        let alloc = |len: Option<usize>| len.map(|l| cuda.alloc::<i32>(l)).transpose();
        let a = alloc(planes(0))?;
        let b = alloc(planes(1))?;
        let needs_stack = flags.iter().any(|f| !f.scan_first) || r > 1;
        let sg: Option<DeviceBuffer<i32>> = needs_stack.then(|| cuda.alloc(n)).transpose()?;
        let sw: Option<DeviceBuffer<f64>> = needs_stack.then(|| cuda.alloc(n)).transpose()?;
        let i32p = |addr: u64| Arg::ptr(addr, ScalarType::I32);
        let addr = |o: &Option<DeviceBuffer<i32>>| o.as_ref().map_or(0, |b| b.device_ptr());
        let target = |d: usize| -> u64 {
            match (last_to_caller(d), d % 2) {
                (true, _) => indices,
                (false, 0) => addr(&a),
                _ => addr(&b),
            }
        };
        for (d, f) in flags.iter().enumerate() {
            let len = shape[d];
            let lines = n / len;
            let last = d == r - 1;
            let dist = if last { distances } else { 0 };
            let dst = target(d);
            if d == 0 && f.scan_first {
                // Sizes: `mask` holds n bytes (the caller's contract), `dst` at least n
                // int32s (plane 0), `dist` n f64s when not 0 (only when r == 1); the
                // kernel touches t + i * lines for t < lines, i < len: below n.
                cuda.launch(
                    Kernel::EDT_SCAN0,
                    lines_cfg(lines),
                    &[
                        Arg::ptr(mask, ScalarType::U8),
                        i32p(dst),
                        Arg::ptr(if r == 1 { dist } else { 0 }, ScalarType::F64),
                        (lines as i64).into(),
                        (len as i32).into(),
                        s[0].into(),
                    ],
                )?;
                continue;
            }
            let src = if d == 0 { 0 } else { target(d - 1) };
            let (Some(sg), Some(sw)) = (&sg, &sw) else {
                return Err(Error::invalid(OP, "the stack buffers are missing"));
            };
            // Sizes: `src` holds planes 0..d and `dst` planes 0..=d of n int32s each (both
            // `planes` long, or the caller's r planes), `sg`/`sw` n entries (a line's stack
            // has at most len entries, at l * lines + t < len * lines = n), `dims`/`samp`
            // r values; every element index is below n.
            cuda.launch(
                Kernel::EDT_PASS,
                lines_cfg(lines),
                &[
                    Arg::ptr(if d == 0 { mask } else { 0 }, ScalarType::U8),
                    i32p(src),
                    i32p(dst),
                    Arg::buf(sg),
                    Arg::buf(sw),
                    Arg::ptr(dist, ScalarType::F64),
                    Arg::buf(&dims),
                    Arg::buf(&samp),
                    (r as i32).into(),
                    (d as i32).into(),
                    (n as i64).into(),
                    i32::from(f.fast_delta).into(),
                ],
            )?;
        }
        cuda.synchronize()
    }
}

/// A small host table in a device buffer.
fn small_buf<T: Copy + Default + Send + Sync + 'static>(
    cuda: &CudaBackend,
    v: &[T],
) -> Result<DeviceBuffer<T>> {
    super::rank::small_table(cuda, v)
}

/// [`EdtRaw`] of a u8 mask in a buffer of the backend into buffers of the backend: the
/// distances (`n` f64s) and the indices (`ndim * n` int32s), each optional (lengths checked).
pub struct Edt<'a> {
    /// The mask (zero is background).
    pub mask: &'a DeviceBuffer<u8>,
    /// The shape, 1 to 4 axes.
    pub shape: &'a [usize],
    /// The spacing along each axis (`None`: 1).
    pub sampling: Option<&'a [f64]>,
    /// The distances, if wanted.
    pub distances: Option<&'a mut DeviceBuffer<f64>>,
    /// The indices (`ndim` planes), if wanted.
    pub indices: Option<&'a mut DeviceBuffer<i32>>,
}

impl Op for Edt<'_> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Edt {
            mask,
            shape,
            sampling,
            distances,
            indices,
        } = self;
        let n: usize = shape.iter().product();
        let bad = |what: &str, got: usize, want: usize| {
            Error::invalid(
                OP,
                format!("shape {shape:?}: the {what} has {got} elements, not {want}"),
            )
        };
        if mask.len() != n {
            return Err(bad("mask", mask.len(), n));
        }
        if let Some(d) = &distances {
            if d.len() != n {
                return Err(bad("distance buffer", d.len(), n));
            }
        }
        if let Some(i) = &indices {
            if i.len() != n * shape.len() {
                return Err(bad("index buffer", i.len(), n * shape.len()));
            }
        }
        // SAFETY: the buffers are the running backend's allocations of the lengths checked
        // above, distinct (the outputs are borrowed mutably), used on its current stream,
        // and live for the run, which waits for its kernels before returning.
        let op = unsafe {
            EdtRaw::new(
                mask.device_ptr(),
                shape,
                sampling,
                distances.map_or(0, |d| d.device_ptr()),
                indices.map_or(0, |i| i.device_ptr()),
            )
        };
        cuda.run(op)
    }
}
