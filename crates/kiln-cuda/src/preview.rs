//! GPU paths whose kernels pass their bitwise tests in host emulation and NVRTC compiles in
//! CI but have not yet run on a GPU stay off by default: `KILN_GPU_PREVIEW=1` turns them on
//! (the GPU test suite sets it, `scripts/gpu-check.sh`). Off, each falls back to what kiln
//! did before it: a path a GPU has verified, the host, or a clear refusal.
//!
//! Under the gate:
//! - the exact linear ndimage filters of f32 and f64 tensors (`NdimageLinearExact`; off: f32
//!   tensors take the fast f32 kernels, f64 tensors are refused), and with them the Python
//!   route of CuPy/torch float32 and float64 arrays to scipy's bits on the device;
//! - the implied-volatility book grouped by the solver's way (`SolveImpliedVol`; off: the
//!   one-pass kernel, `SolveImpliedVolOnePass`, which has the same bits);
//! - American barrier options by Longstaff-Schwartz on the GPU (`PriceAmericanBarrier`;
//!   off: refused, priced on the CPU engine);
//! - the Python device route of `distance_transform_edt` (read by kiln's Python package).
//!
//! A path leaves this list in the commit that records its GPU run.

/// The environment variable that turns the preview paths on (`1`).
pub const PREVIEW_ENV: &str = "KILN_GPU_PREVIEW";

/// Whether `KILN_GPU_PREVIEW=1`, read at each call (a test or a user may set it after start).
pub fn preview() -> bool {
    std::env::var_os(PREVIEW_ENV).is_some_and(|v| v == "1")
}
