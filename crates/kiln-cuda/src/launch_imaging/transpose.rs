//! The 2-D transpose launcher (`kernels/transpose.cu`).

use super::{grid, BLOCK, MAX_AXIS};
use crate::kernels::{Kernel, ScalarType};
use crate::launch::Arg;
use crate::op::Op;
use crate::pool::DeviceBuffer;
use crate::CudaBackend;
use cudarc::driver::LaunchConfig;
use kiln_core::backend::Element;
use kiln_core::{Error, Result};

/// Transpose a row-major `rows × cols` matrix `x` of 32- or 16-bit elements into `out`.
///
/// Launch (kernels/transpose.cu): `transpose_b32` (64×64 tiles, 16 elements a thread) /
/// `transpose_b16` (64×64 tiles moved as 32-bit words; rows and cols even, else
/// `transpose_h_b16`, 32×32 tiles), block 32×8, grid `(min(ceil(cols/T), 2^31-1),
/// min(ceil(rows/T), 65535))` for tile size T, with grid-stride loops over tiles.
pub struct Transpose<'a, T> {
    /// The input, `rows * cols` elements.
    pub x: &'a DeviceBuffer<T>,
    /// The input's rows.
    pub rows: usize,
    /// The input's columns.
    pub cols: usize,
    /// The output, `cols × rows`.
    pub out: &'a mut DeviceBuffer<T>,
}

impl<T: Element> Op for Transpose<'_, T> {
    type Output = ();

    fn run(self, cuda: &CudaBackend) -> Result<()> {
        let Transpose { x, rows, cols, out } = self;
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid("transpose", "rows*cols overflows"))?;
        kiln_core::backend::check_same_len("transpose input", n, x.len())?;
        kiln_core::backend::check_same_len("transpose output", n, out.len())?;
        if n == 0 {
            return Ok(());
        }
        if rows > MAX_AXIS || cols > MAX_AXIS {
            return Err(Error::invalid("transpose", "rows and cols must be below 2^31"));
        }
        let pairs = rows % 2 == 0 && cols % 2 == 0 && x.device_ptr() % 4 == 0 && out.device_ptr() % 4 == 0;
        let id = match std::mem::size_of::<T>() {
            4 => Kernel::TRANSPOSE_B32,
            2 if pairs => Kernel::TRANSPOSE_B16,
            2 => Kernel::TRANSPOSE_H_B16,
            b => {
                return Err(Error::invalid(
                    "transpose",
                    format!("{b}-byte elements are not supported"),
                ))
            }
        };
        let tile = if id == Kernel::TRANSPOSE_B32 || id == Kernel::TRANSPOSE_B16 {
            64
        } else {
            32
        };
        let cfg = LaunchConfig {
            grid_dim: (
                cols.div_ceil(tile).min(i32::MAX as usize) as u32,
                grid(rows.div_ceil(tile)),
                1,
            ),
            block_dim: BLOCK,
            shared_mem_bytes: 0,
        };
        let (ri, ci) = (rows as i32, cols as i32);
        // transpose_b16 moves pairs of 16-bit elements as 32-bit words.
        let (xa, ya) = if id == Kernel::TRANSPOSE_B16 {
            (
                Arg::ptr(x.device_ptr(), ScalarType::U32),
                Arg::ptr(out.device_ptr(), ScalarType::U32),
            )
        } else {
            (Arg::tensor(x), Arg::tensor(out))
        };
        // Sizes: both buffers hold exactly rows*cols elements of the kernel's width
        // (checked) and are distinct; the kernel guards every access with r < rows, c < cols
        // (both fit i32, checked). transpose_b16 reads and writes 32-bit words: it runs only
        // when rows and cols are even (every row starts on a word) and both addresses are
        // 4-byte aligned (checked).
        cuda.launch(id, cfg, &[xa, ya, ri.into(), ci.into()])
    }
}
