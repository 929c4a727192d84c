//! kiln-bench: the benchmark harness behind `kiln bench`.
//!
//! Design: a run ([`run`]) measures the hardware's ceilings first ([`ceilings`]), then plans
//! each selected suite's cases ([`suites`]) for the runtime's device and sizes and runs them
//! one by one: every case verifies its output against the CPU reference ([`verify`]) before
//! it is timed (CUDA events on a GPU, wall clock on the CPU, [`harness`]), and its row gets
//! a floor and an efficiency from the ceiling that bounds it. The result is a [`Report`]
//! (the JSON document of docs/bench-schema.md, [`schema`]) that the later steps read without
//! a device: the peers' times merged ([`peers`]), the regression gate ([`gate`]), an SVG
//! ([`plot`]) and docs/kernels.md ([`report`]).
//!
//! The library prints nothing: progress reaches the caller as [`Event`]s, results come back
//! as values, and failures as [`kiln::Error`] (kiln's own: bad arguments or input files,
//! device failures) or, where output files are written, this crate's [`Error`]. Tables,
//! exit codes and the command line are the `kiln` binary's.
#![deny(missing_docs)]

pub mod ceilings;
mod error;
mod finance;
pub mod gate;
pub mod harness;
mod imaging;
pub mod peers;
pub mod plot;
pub mod report;
mod runner;
pub mod schema;
pub mod suites;
pub mod verify;

pub use error::{Error, Result};
pub use runner::{run, Event, Options, Outcome};
pub use schema::Report;
