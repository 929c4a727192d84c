//! Launchers for `kernels/label.cu`: scipy.ndimage.label of a `(d, h, w)` array in device
//! memory into an int32 array of the same shape, the labels kiln-core's `label` writes
//! (numbered in row-major order of each group's first element) and their count.
//!
//! The arrays are addresses, not storages: labels are int32 and the input may be any
//! type NumPy's truth applies to (bool and u8, u16, f32, f64, i32, i64 here), which kiln's
//! storage dtypes do not cover; the Python layer passes CuPy's or torch's arrays this way.
//! Seven launches on the current stream (six when the structure has no neighbour), then the
//! count is read back (which waits for them). See `label.cu` for the algorithm and why the
//! result is scipy's numbering.

#![allow(unsafe_code)]

use super::rank::{check_dims, flat_offsets, small_table};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::{Error, Result};

const OP: &str = "label";
/// Elements a block of the count and number kernels covers (`LBL_TILE`).
const TILE: usize = 1024;

/// The element type of a labelling input (read as its truth: non-zero, NaN included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelInput {
    /// `uint8` or `bool`.
    U8,
    /// `uint16`.
    U16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
}

impl LabelInput {
    /// The type of a NumPy dtype name, if labelling on the GPU reads it (`int8`, `uint32`
    /// and the rest go through the host).
    pub fn from_name(name: &str) -> Option<LabelInput> {
        Some(match name {
            "bool" | "uint8" => LabelInput::U8,
            "uint16" => LabelInput::U16,
            "float32" => LabelInput::F32,
            "float64" => LabelInput::F64,
            "int32" => LabelInput::I32,
            "int64" => LabelInput::I64,
            _ => return None,
        })
    }

    /// `label_local`'s code and the pointer's element type.
    fn code(self) -> (i32, ScalarType) {
        match self {
            LabelInput::U8 => (0, ScalarType::U8),
            LabelInput::U16 => (1, ScalarType::U16),
            LabelInput::F32 => (2, ScalarType::F32),
            LabelInput::F64 => (3, ScalarType::F64),
            LabelInput::I32 => (4, ScalarType::I32),
            LabelInput::I64 => (5, ScalarType::I64),
        }
    }
}

/// A grid-stride launch over `n` elements.
fn stride_cfg(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(256).clamp(1, 1 << 20) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The `(td, th, tw)` tile of `label_local` and `label_border` for a `(d, h, w)` shape: at
/// most 1,024 elements (`LBL_TILE_ELEMS`), rows of 32 (a warp's coalesced run) unless the
/// array is one row; every extent a power of two (the kernels index a tile by shifts).
fn label_tile(shape: [usize; 3]) -> [usize; 3] {
    match shape {
        [1, 1, _] => [1, 1, 1024],
        [1, _, _] => [1, 32, 32],
        _ => [4, 8, 32],
    }
}

fn tile_cfg(blocks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// scipy.ndimage.label of the `shape` array at device address `src` (row-major, elements
/// of `input`) with the structure whose neighbours are `offsets` (each `[dz, dy, dx]`,
/// every neighbour of the centre, either half or both: the ones before the centre are
/// used), written into the int32 array at device address `out`; a run returns the number
/// of labels. Queued on the current stream and waited for.
///
/// The fields are private and the constructor, [`LabelRaw::new`], is `unsafe`: running the
/// op dereferences the two addresses, whose validity only the caller can promise.
///
/// Launch (kernels/label.cu): `label_local` and (several tiles, a neighbour) `label_border`
/// over tiles of at most 1,024 elements, 256 threads a block; `label_compress`,
/// `label_scan` (one block), `label_number` over 1,024-element blocks; `label_resolve`
/// grid-stride; then the count is read back.
pub struct LabelRaw<'a> {
    src: u64,
    input: LabelInput,
    shape: [usize; 3],
    offsets: &'a [[isize; 3]],
    out: u64,
}

impl<'a> LabelRaw<'a> {
    /// The op labelling `src` into `out` (see [`LabelRaw`]).
    ///
    /// # Safety
    ///
    /// `src` must address `shape`'s product of `input` elements and `out` as many int32s,
    /// device memory of the context of the backend that runs the op, distinct, whose
    /// writes and reads by other streams are ordered before the run (the caller
    /// synchronises them), live until the run returns.
    pub unsafe fn new(
        src: u64,
        input: LabelInput,
        shape: [usize; 3],
        offsets: &'a [[isize; 3]],
        out: u64,
    ) -> Self {
        LabelRaw {
            src,
            input,
            shape,
            offsets,
            out,
        }
    }
}

impl Op for LabelRaw<'_> {
    type Output = usize;

    fn run(self, cuda: &CudaBackend) -> Result<usize> {
        let LabelRaw {
            src,
            input,
            shape,
            offsets,
            out,
        } = self;
        let n: usize = shape.iter().product();
        if n == 0 {
            return Ok(0);
        }
        check_dims(OP, shape, n)?;
        // L holds indices below n and -(number + 1) down to -(n + 1)
        if n >= i32::MAX as usize {
            return Err(Error::invalid(
                OP,
                format!("{n} elements: labelling on the GPU takes fewer than 2^31 - 1; use a host array"),
            ));
        }
        if src == 0 || out == 0 {
            return Err(Error::invalid(OP, "a null device address"));
        }
        let mut before: Vec<[isize; 3]> = offsets
            .iter()
            .copied()
            .filter(|o| *o < [0, 0, 0] && o.iter().all(|v| v.abs() <= 1))
            .collect();
        before.sort();
        before.dedup();
        let flat = flat_offsets(OP, &before)?;
        let table = small_table(cuda, &flat)?;
        let blocks = n.div_ceil(TILE);
        let counts: DeviceBuffer<i32> = cuda.alloc(blocks)?;
        let total: DeviceBuffer<i32> = cuda.alloc(1)?;
        // the union-find's parents (the output receives the labels at the end)
        let parents: DeviceBuffer<i32> = cuda.alloc(n)?;
        let (code, elem) = input.code();
        let tile = label_tile(shape);
        let tiles: usize = (0..3).map(|a| shape[a].div_ceil(tile[a])).product();
        let [d, h, w] = shape.map(|a| a as i32);
        let [td, th, tw] = tile.map(|a| a as i32);
        let ni = n as i32;
        let l = || Arg::ptr(parents.device_ptr(), ScalarType::I32);
        let offs = || Arg::ptr(table.device_ptr(), ScalarType::I32);
        // at most 13 (the neighbours before the centre of a 3x3x3 structure: offsets of
        // -1..=1, filtered above), the size of label_local's shared table (LBL_MAX_NB)
        let cnt = before.len() as i32;
        // a structure joining left neighbours: label_local starts each row run as one tree;
        // 2 also links two runs once where they overlap (label.cu; bitwise against the CPU
        // on an H100, tests/label_gpu.rs). KILN_LABEL_SKIP=0 links every pair (mode 1), for
        // comparison
        let run = match before.contains(&[0, 0, -1]) {
            false => 0i32,
            true if std::env::var("KILN_LABEL_SKIP").is_ok_and(|v| v == "0") => 1,
            true => 2,
        };
        // Sizes: `src` holds n elements of `elem` and `out` n int32s (the caller's
        // contract), `parents` n int32s, `table` 3 * before.len() int32s, `counts` blocks,
        // `total` one; the tile kernels touch only elements inside the shape (each checks
        // x < w, y < h, z < d, and `tiles` blocks cover the shape once), the others bound
        // their indices by n (or nb for the scan).
        cuda.launch(
            Kernel::LABEL_LOCAL,
            tile_cfg(tiles),
            &[
                Arg::ptr(src, elem),
                code.into(),
                l(),
                d.into(),
                h.into(),
                w.into(),
                td.into(),
                th.into(),
                tw.into(),
                offs(),
                cnt.into(),
                run.into(),
            ],
        )?;
        if tiles > 1 && cnt > 0 {
            cuda.launch(
                Kernel::LABEL_BORDER,
                tile_cfg(tiles),
                &[
                    l(),
                    d.into(),
                    h.into(),
                    w.into(),
                    td.into(),
                    th.into(),
                    tw.into(),
                    offs(),
                    cnt.into(),
                    run.into(),
                ],
            )?;
        }
        let c = || Arg::ptr(counts.device_ptr(), ScalarType::I32);
        cuda.launch(Kernel::LABEL_COMPRESS, tile_cfg(blocks), &[l(), ni.into(), c()])?;
        cuda.launch(
            Kernel::LABEL_SCAN,
            tile_cfg(1),
            &[
                c(),
                (blocks as i32).into(),
                Arg::ptr(total.device_ptr(), ScalarType::I32),
            ],
        )?;
        cuda.launch(Kernel::LABEL_NUMBER, tile_cfg(blocks), &[l(), ni.into(), c()])?;
        cuda.launch(
            Kernel::LABEL_RESOLVE,
            stride_cfg(n),
            &[l(), Arg::ptr(out, ScalarType::I32), ni.into()],
        )?;
        let mut count = [0i32];
        cuda.download_into(&total, &mut count, cuda.stream(), OP)?;
        Ok(count[0] as usize)
    }
}

/// [`LabelRaw`] of a u8 mask in a buffer of the backend into an int32 buffer, both of
/// `shape`'s product of elements (checked); a run returns the number of labels.
pub struct Label<'a> {
    /// The mask (non-zero is foreground).
    pub mask: &'a DeviceBuffer<u8>,
    /// `[d, h, w]`.
    pub shape: [usize; 3],
    /// The structure's neighbours, each `[dz, dy, dx]` (see [`LabelRaw`]).
    pub offsets: &'a [[isize; 3]],
    /// The labels.
    pub out: &'a mut DeviceBuffer<i32>,
}

impl Op for Label<'_> {
    type Output = usize;

    fn run(self, cuda: &CudaBackend) -> Result<usize> {
        let Label {
            mask,
            shape,
            offsets,
            out,
        } = self;
        let n: usize = shape.iter().product();
        if mask.len() != n || out.len() != n {
            return Err(Error::invalid(
                OP,
                format!(
                    "shape {shape:?} has {n} elements, the mask {} and the output {}",
                    mask.len(),
                    out.len()
                ),
            ));
        }
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: both buffers are the running backend's allocations of n elements (checked
        // above), distinct (one is borrowed mutably), used on its current stream, and live
        // for the run, which waits for its kernels before returning.
        let op = unsafe {
            LabelRaw::new(
                mask.device_ptr(),
                LabelInput::U8,
                shape,
                offsets,
                out.device_ptr(),
            )
        };
        cuda.run(op)
    }
}
