//! Stable exit codes. Scripts depend on these: change none, only add.

use kiln::Error;
use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// An unexpected failure (a bug, or an I/O error outside kiln's control).
pub const INTERNAL: u8 = 1;
// 2 is clap's usage error.
/// The requested device cannot be used (no driver, no device, not allowed, too old).
pub const NO_DEVICE: u8 = 3;
/// Invalid input, arguments or configuration.
pub const INVALID: u8 = 4;
/// A result failed verification against the CPU reference.
pub const VERIFY: u8 = 5;
/// Out of GPU memory after the cache was emptied.
pub const OOM: u8 = 6;
/// A recoverable CUDA error.
pub const CUDA: u8 = 7;
/// A sticky CUDA error: the context is poisoned; restart the process.
pub const STICKY: u8 = 8;
/// `kiln bench --baseline`: a workload is slower than the baseline by more than allowed.
pub const REGRESSION: u8 = 9;

/// Map an error chain to its exit code: by the first kiln error in it (kiln-bench's error
/// counts when it wraps one), else [`INTERNAL`].
pub fn code_for(e: &anyhow::Error) -> ExitCode {
    ExitCode::from(code_of(e))
}

/// [`code_for`] as a number (a batch reports each file's).
pub fn code_of(e: &anyhow::Error) -> u8 {
    e.chain()
        .find_map(|c| {
            c.downcast_ref::<Error>().or_else(|| {
                c.downcast_ref::<kiln_bench::Error>()
                    .and_then(kiln_bench::Error::kiln)
            })
        })
        .map(|k| match k {
            Error::NoDevice(_) | Error::LibraryNotFound { .. } => NO_DEVICE,
            Error::InvalidArgument { .. }
            | Error::ShapeMismatch { .. }
            | Error::Config { .. }
            | Error::Unsupported { .. }
            | Error::Capture { .. } => INVALID,
            Error::Verification { .. } => VERIFY,
            Error::OutOfMemory { .. } => OOM,
            Error::Cuda { .. } if k.is_sticky() => STICKY,
            Error::Cuda { code: 2, .. } => OOM,
            Error::Cuda { .. } | Error::Compile { .. } | Error::Collective { .. } => CUDA,
            Error::Io { .. } => INVALID,
            Error::Cache { .. } => INTERNAL,
        })
        .unwrap_or(INTERNAL)
}
