//! What kiln-bench alone needs beyond the user surface: the backends' engines called
//! directly, so a benchmark times exactly one engine and checks it against another. Not
//! for users: the ops are on [`Runtime`](crate::Runtime) and [`Tensor`](crate::Tensor).

/// The Monte Carlo launch cut to its Philox words or normals, to cost each part of a path
/// step (the [`McProbeTotals`](crate::device::ops::McProbeTotals) op).
pub use kiln_cuda::McProbe;

/// The CPU engines, kiln's numerical reference, without a runtime.
pub mod cpu {
    /// Element-wise map of a host slice into another, on every core.
    pub use kiln_cpu::elementwise::map;

    /// Tiled transpose of a row-major matrix, on every core.
    pub use kiln_cpu::elementwise::transpose;

    /// 2-D correlation on a given path (direct or separable) into a caller's buffer.
    pub use kiln_cpu::imaging::filter2d_into;

    /// 3-D correlation on a given path into a caller's buffer.
    pub use kiln_cpu::imaging::filter3d_into;

    /// One option's Monte Carlo price on the CPU engine (bit for bit the GPU's).
    pub use kiln_cpu::finance::price_mc;
}
