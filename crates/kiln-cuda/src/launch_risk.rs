//! Portfolio risk on the GPU (`kernels/risk.cu`): the P&L of a book of European
//! Black-Scholes options under every scenario, summed per scenario, a block per scenario.
//!
//! The book goes up as columns ([`BsGridBook`]: seven f64 inputs, the host's base price,
//! a put flag and the underlying's slot per option), the shocks as a scenario x slot grid
//! ([`ShockGrid`]), and one f64 total per scenario comes back. The kernel's f64 arithmetic
//! is kiln-core's `bsm` operation for operation (`--fmad=false`); CUDA's `exp`, `log` and
//! `erfc` may differ from the host's libm by an ulp or a few, so totals agree with the CPU's
//! to about 1e-13 of the book's gross value, not bitwise. The caller (the facade's
//! `Runtime::risk`) checks every shocked spot and volatility is positive first.

use cudarc::driver::LaunchConfig;
use kiln_core::{Error, Result};

use crate::kernels::Kernel;
use crate::launch::Arg;
use crate::op::Op;
use crate::CudaBackend;

/// The kernel's inputs: kiln-core's, the finance backend interface's types.
pub use kiln_core::storage::{BsGridBook, ShockGrid};

const OP: &str = "risk_bs_grid";
const THREADS: u32 = 256;

/// `total[s] = sum_i qty[i] * (bsm(option i under scenario s) - base[i])` for every
/// scenario, on the GPU (module docs). Sizes and slots are checked first (an
/// `InvalidArgument` naming what is wrong); waits for the result.
///
/// Launch (kernels/risk.cu): `risk_bs_grid_f64`, one 256-thread CTA a scenario (grid
/// `n_scen`, at most 2^31 - 1), its threads striding over the options.
pub struct RiskBsGrid<'a> {
    /// The book, as columns.
    pub book: &'a BsGridBook<'a>,
    /// The scenarios' shocks, a scenario x slot grid.
    pub grid: &'a ShockGrid<'a>,
}

impl Op for RiskBsGrid<'_> {
    type Output = Vec<f64>;

    fn run(self, cuda: &CudaBackend) -> Result<Vec<f64>> {
        let RiskBsGrid { book, grid } = self;
        let n = book.spot.len();
        let cols = [
            ("strike", book.strike.len()),
            ("rate", book.rate.len()),
            ("dividend", book.dividend.len()),
            ("vol", book.vol.len()),
            ("maturity", book.maturity.len()),
            ("qty", book.qty.len()),
            ("base", book.base.len()),
            ("put", book.put.len()),
            ("und", book.und.len()),
        ];
        for (name, len) in cols {
            if len != n {
                return Err(Error::invalid(
                    OP,
                    format!("column {name} has {len} entries, spot has {n}"),
                ));
            }
        }
        let cells = (grid.n_und as usize)
            .checked_mul(grid.n_scen)
            .ok_or_else(|| Error::invalid(OP, "scenario grid too large"))?;
        for (name, len) in [
            ("spot_shift", grid.spot_shift.len()),
            ("spot_abs", grid.spot_abs.len()),
            ("vol_shift", grid.vol_shift.len()),
            ("rate_shift", grid.rate_shift.len()),
        ] {
            if len != cells {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "{name} has {len} entries; {} scenarios x {} slots need {cells}",
                        grid.n_scen, grid.n_und
                    ),
                ));
            }
        }
        if let Some(i) = book.und.iter().position(|&u| u >= grid.n_und) {
            return Err(Error::invalid(
                OP,
                format!(
                    "option {i}: underlying slot {} >= {} slots",
                    book.und[i], grid.n_und
                ),
            ));
        }
        if grid.n_scen > i32::MAX as usize {
            return Err(Error::invalid(
                OP,
                format!("{} scenarios; at most 2^31 - 1", grid.n_scen),
            ));
        }
        let mut total = vec![0.0f64; grid.n_scen];
        if grid.n_scen == 0 {
            return Ok(total);
        }
        let up = |x: &[f64]| cuda.upload_slice(x);
        let (spot, strike, rate, dividend) = (
            up(book.spot)?,
            up(book.strike)?,
            up(book.rate)?,
            up(book.dividend)?,
        );
        let (vol, maturity, qty, base) = (up(book.vol)?, up(book.maturity)?, up(book.qty)?, up(book.base)?);
        let put = cuda.upload_slice(book.put)?;
        let und = cuda.upload_slice(book.und)?;
        let spot_shift = up(grid.spot_shift)?;
        let spot_abs = cuda.upload_slice(grid.spot_abs)?;
        let vol_shift = up(grid.vol_shift)?;
        let rate_shift = up(grid.rate_shift)?;
        let out = cuda.alloc::<f64>(grid.n_scen)?;
        let cfg = LaunchConfig {
            grid_dim: (grid.n_scen as u32, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // Sizes: every option column holds n entries and the kernel reads i < n; every grid
        // array holds n_scen * n_und entries and the kernel reads s * n_und + und[i] with
        // s < n_scen and und[i] < n_und (checked above); total holds n_scen.
        let args = [
            Arg::buf(&spot),
            Arg::buf(&strike),
            Arg::buf(&rate),
            Arg::buf(&dividend),
            Arg::buf(&vol),
            Arg::buf(&maturity),
            Arg::buf(&qty),
            Arg::buf(&base),
            Arg::buf(&put),
            Arg::buf(&und),
            (n as u64).into(),
            Arg::buf(&spot_shift),
            Arg::buf(&spot_abs),
            Arg::buf(&vol_shift),
            Arg::buf(&rate_shift),
            grid.n_und.into(),
            (grid.n_scen as u64).into(),
            Arg::buf(&out),
        ];
        cuda.launch(Kernel::RISK_BS_GRID_F64, cfg, &args)?;
        out.copy_to_host(&mut total, cuda.stream())?;
        Ok(total)
    }
}
