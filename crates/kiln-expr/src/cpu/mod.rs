//! The CPU evaluator: a typed kernel body compiled to a register program over chunks of
//! lanes, run on rayon's pool.

mod complex;
pub(crate) mod exec;
pub(crate) mod io;
pub(crate) mod num;
pub(crate) mod program;

/// Lanes per chunk: large enough that each instruction's loop amortises its dispatch and
/// vectorises, small enough that a program's registers stay in L1/L2.
pub(crate) const CHUNK: usize = 4096;
