//! Option pricing on the CPU: Monte Carlo ([`mc`]), the numeric reference for the GPU
//! kernels (same Philox streams, same f32 path arithmetic).
//!
//! The closed forms and the Monte Carlo finishing math both engines share live in
//! [`kiln_core::finance`]; they are re-exported here so `kiln_cpu::finance::{bsm, finish,
//! BlockSums, ..}` keep working.

pub mod american;
pub mod american_barrier;
pub mod american_rainbow;
mod backend;
pub mod basket;
pub mod heston;
pub mod mc;
mod paths;
mod qmc;

pub use american::{price_american, price_american_portfolio};
pub use american_barrier::{price_american_barrier, price_american_barrier_portfolio};
pub use american_rainbow::{price_american_rainbow, price_american_rainbow_portfolio};
pub use backend::CpuFinance;
pub use basket::{price_basket, price_basket_mc, simulate_basket_blocks};
pub use heston::{price_heston, price_heston_mc, simulate_heston_blocks};
pub use kiln_core::finance::analytic;
pub use kiln_core::finance::{
    block_count, bsm, control_mean, finish, geometric_asian, norm_cdf, norm_pdf, price_analytic, BlockSums,
    Bsm, BLOCK_SAMPLES,
};
pub use mc::{price_mc, price_portfolio, price_portfolio_from, simulate_blocks};
