//! `kiln bench`: ceilings first, then each suite's workloads — verified against the CPU
//! reference before they are timed — with medians and percentiles, floors and efficiency,
//! a JSON report (docs/bench-schema.md), the peers merged, a regression gate and plots.

mod cmd;
mod finance;
mod gate;
mod harness;
mod imaging;
mod peers;
mod plot;
mod report;
mod schema;
mod suites;
mod verify;

pub use cmd::{run, Args};
