//! Option pricing on the CPU: closed forms ([`analytic`]) and Monte Carlo ([`mc`]), the
//! numeric reference for the GPU kernels (same Philox streams, same f32 path arithmetic).

pub mod analytic;
pub mod mc;
mod paths;

pub use analytic::{bsm, geometric_asian, norm_cdf, norm_pdf, price_analytic, Bsm};
pub use mc::{
    block_count, control_mean, finish, price_mc, price_portfolio, simulate_blocks, BlockSums, BLOCK_SAMPLES,
};
