//! A naive matrix product as a raw CUDA kernel (`kernels/matmul_naive.cu`): what a 2-D
//! launch looks like from Rust, how tensors and scalars are passed to a kernel, and why an
//! output is poisoned before the launch (an element the kernel forgets stays NaN).

use kiln::{Arg, Result, Runtime};

/// The kernel's source, compiled by NVRTC on first use and cached on disk.
pub const SOURCE: &str = include_str!("../kernels/matmul_naive.cu");

/// The kernel's block side (a 16×16 block, one thread per element of C).
const BLOCK: u32 = 16;

/// `C = A · B` for row-major `a` (m×k) and `b` (k×n) on `rt`'s GPU; returns C (m×n,
/// row-major). An error on a CPU runtime (raw kernels need a GPU) or when a slice's length
/// does not match its shape.
pub fn matmul(rt: &Runtime, a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Result<Vec<f32>> {
    let kernel = rt.raw_kernel(SOURCE, "matmul_naive", &[])?;
    let ta = rt.tensor(a, &[m, k])?;
    let tb = rt.tensor(b, &[k, n])?;
    // NaN everywhere: an element the kernel never writes fails any comparison.
    let tc = rt.tensor(&vec![f32::NAN; m * n], &[m, n])?;
    let dim = |x: usize| {
        i32::try_from(x).map_err(|_| kiln::Error::invalid("matmul_naive", format!("{x} does not fit an int")))
    };
    let grid = (
        n.div_ceil(BLOCK as usize) as u32,
        m.div_ceil(BLOCK as usize) as u32,
        1,
    );
    kernel.launch(
        grid,
        (BLOCK, BLOCK, 1),
        0,
        &[
            Arg::from(&ta),
            Arg::from(&tb),
            Arg::from(&tc),
            dim(m)?.into(),
            dim(n)?.into(),
            dim(k)?.into(),
        ],
    )?;
    // The launch is queued on the current stream; reading C waits for it (and reports an
    // error the kernel raised, such as an out-of-bounds access).
    tc.to_vec::<f32>()
}
