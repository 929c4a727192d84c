//! The error type shared by every kiln crate, and the CUDA result-code table.
//!
//! Backends share this enum (rather than each owning one) because the facade must treat
//! `OutOfMemory` and sticky CUDA failures the same way whichever backend raised them.

use std::fmt;
use std::path::PathBuf;

/// `Result` with kiln's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why no CUDA device can be used. Each reason says what the user can do about it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NoDeviceReason {
    /// `libcuda.so` could not be loaded: no NVIDIA driver is installed or it is not on the
    /// loader path.
    DriverNotFound,
    /// The driver loaded but `cuInit` failed (for example the kernel module is not loaded).
    DriverInitFailed {
        /// The CUDA result code and name.
        detail: String,
    },
    /// The driver reports no CUDA device.
    NoDevices,
    /// The library needed to compile kernels (`libnvrtc`) could not be loaded.
    NvrtcNotFound,
    /// Devices exist, but none is in the allowed list (`devices.allowed` / `KILN_DEVICES`).
    NotAllowed {
        /// The policy in force, as the user wrote it.
        policy: String,
        /// The devices that were seen, as `ordinal:UUID`.
        seen: Vec<String>,
    },
    /// Every allowed device is below the minimum compute capability.
    CapabilityTooLow {
        /// The minimum in force, `major.minor`.
        minimum: String,
        /// The devices that were seen, as `ordinal:name:cc`.
        seen: Vec<String>,
    },
    /// `cuda:N` named an ordinal that does not exist.
    NoSuchOrdinal {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices exist.
        count: usize,
    },
}

impl NoDeviceReason {
    /// Whether the reason is that this machine has no GPU to use: no NVIDIA driver, or a
    /// driver that reports no device. Every other reason (a driver that fails to start, a
    /// missing libnvrtc, a policy that allows no device) is a fault of a machine that has a
    /// GPU, which GPU tests report as a failure rather than a skip.
    pub fn means_no_gpu(&self) -> bool {
        matches!(self, NoDeviceReason::DriverNotFound | NoDeviceReason::NoDevices)
    }
}

impl fmt::Display for NoDeviceReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoDeviceReason::DriverNotFound => write!(
                f,
                "NVIDIA driver not found (libcuda.so could not be loaded); install the driver or add its directory to LD_LIBRARY_PATH"
            ),
            NoDeviceReason::DriverInitFailed { detail } => write!(
                f,
                "the NVIDIA driver failed to initialise ({detail}); check `nvidia-smi` and that the kernel module is loaded"
            ),
            NoDeviceReason::NoDevices => write!(f, "the NVIDIA driver reports no CUDA device"),
            NoDeviceReason::NvrtcNotFound => write!(
                f,
                "libnvrtc (the CUDA runtime compiler) could not be loaded; install the CUDA toolkit's nvrtc package or add it to LD_LIBRARY_PATH"
            ),
            NoDeviceReason::NotAllowed { policy, seen } => write!(
                f,
                "no device is allowed by the device policy `{policy}` (seen: {}); change KILN_DEVICES or devices.allowed",
                seen.join(", ")
            ),
            NoDeviceReason::CapabilityTooLow { minimum, seen } => write!(
                f,
                "no allowed device has compute capability >= {minimum} (seen: {}); lower devices.min_compute_capability only if you know the kernels support it",
                seen.join(", ")
            ),
            NoDeviceReason::NoSuchOrdinal { ordinal, count } => write!(
                f,
                "device cuda:{ordinal} does not exist ({count} CUDA device(s) found)"
            ),
        }
    }
}

/// Every failure kiln reports. Variants carry what a user needs to act on them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument is out of range or inconsistent (sizes, kernel shape, options).
    #[error("{op}: invalid argument: {reason}")]
    InvalidArgument {
        /// The operation that rejected it.
        op: String,
        /// What is wrong and what would be accepted.
        reason: String,
    },
    /// Two shapes that must agree do not.
    #[error("{op}: shape mismatch: expected {expected:?}, got {got:?}")]
    ShapeMismatch {
        /// The operation.
        op: String,
        /// The shape required.
        expected: Vec<usize>,
        /// The shape given.
        got: Vec<usize>,
    },
    /// No CUDA device can be used; see the reason.
    #[error("no usable CUDA device: {0}")]
    NoDevice(NoDeviceReason),
    /// The operation has no implementation on this backend.
    #[error("{op} is not implemented on the {backend} backend")]
    Unsupported {
        /// The operation.
        op: String,
        /// The backend, `cpu` or `cuda:N`.
        backend: String,
    },
    /// Something was asked of a stream while it was being captured into a CUDA graph that a
    /// graph cannot hold (a host copy, a wait, new device memory). The capture is abandoned;
    /// the stream is usable again.
    #[error("graph capture: {op} cannot be captured: {reason}")]
    Capture {
        /// What was attempted.
        op: String,
        /// Why a graph cannot hold it, and what to do instead.
        reason: String,
    },
    /// Device memory ran out even after the cache was emptied.
    #[error(
        "{op}: out of GPU memory on {device}: requested {requested} B, free {free} B of {total} B, \
         kiln holds {reserved} B reserved{}; reduce the batch size, set KILN_GPU_MEMORY_LIMIT, or free other GPU processes",
        limit.map(|l| format!(", limit {l} B")).unwrap_or_default()
    )]
    OutOfMemory {
        /// The operation.
        op: String,
        /// The device, `cuda:N`.
        device: String,
        /// Bytes requested.
        requested: u64,
        /// Bytes free on the device when it failed.
        free: u64,
        /// Bytes on the device.
        total: u64,
        /// Bytes kiln's pool held.
        reserved: u64,
        /// kiln's own limit, if one is set.
        limit: Option<u64>,
    },
    /// A CUDA driver call failed.
    #[error("{op}: CUDA error {code} ({name}) on {device}{}", if is_sticky_cuda_code(*code) { "; the CUDA context is poisoned: restart the process" } else { "" })]
    Cuda {
        /// The operation or driver call.
        op: String,
        /// The device, `cuda:N`.
        device: String,
        /// The CUresult code.
        code: i32,
        /// Its symbolic name, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
        name: String,
    },
    /// NVRTC could not compile a kernel module. The log is the compiler's own.
    #[error("compiling kernel module `{module}` for {arch} failed:\n{log}")]
    Compile {
        /// The kernel module (one `.cu` file).
        module: String,
        /// The target, e.g. `sm_90`.
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// The configuration (file or environment) is malformed.
    #[error("configuration error in {source_name}: `{key}` = `{value}`: {reason}")]
    Config {
        /// Where the bad value came from: the file path or the environment variable.
        source_name: String,
        /// The setting.
        key: String,
        /// The value as written.
        value: String,
        /// What is wrong and what is accepted.
        reason: String,
    },
    /// The kernel cache could not be read or written.
    #[error("kernel cache at {}: {reason}", path.display())]
    Cache {
        /// The cache file or directory.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
    /// A result failed verification against the reference.
    #[error("{op}: verification failed: {detail}")]
    Verification {
        /// The operation.
        op: String,
        /// The error measured and the tolerance.
        detail: String,
    },
    /// A library a requested feature needs could not be loaded (e.g. `libnccl` for a
    /// collective). Nothing else is affected: the rest of kiln runs without it.
    #[error("{op}: {library} could not be loaded; {hint}")]
    LibraryNotFound {
        /// The operation that needed it.
        op: String,
        /// The library, e.g. `libnccl.so.2`.
        library: String,
        /// What to install or set so it is found.
        hint: String,
    },
    /// A collective (NCCL) call failed.
    #[error("{op} on {devices}: NCCL failed: {detail}")]
    Collective {
        /// The collective or NCCL call.
        op: String,
        /// The devices of the group, e.g. `cuda:0,cuda:1`.
        devices: String,
        /// NCCL's result code.
        detail: String,
    },
    /// An I/O error with the path it concerns.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether this error leaves the CUDA context unusable for the rest of the process.
    ///
    /// Sticky errors (illegal address, device assert, launch failure, ...) cannot be recovered
    /// in-process: the only recovery is a fresh process, which is why the service runs GPU work
    /// in supervised workers.
    pub fn is_sticky(&self) -> bool {
        match self {
            Error::Cuda { code, .. } => is_sticky_cuda_code(*code),
            _ => false,
        }
    }

    /// Whether retrying after freeing memory (or with a smaller batch) may succeed.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::OutOfMemory { .. }) || matches!(self, Error::Cuda { code: 2, .. })
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(op: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op: op.into(),
            reason: reason.into(),
        }
    }
}

/// CUresult codes after which the CUDA docs say "the process must be terminated and
/// relaunched" (plus the uncorrectable hardware errors, which leave the context unusable).
const STICKY: &[(i32, &str)] = &[
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE"),
    (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE"),
    (225, "CUDA_ERROR_CONTAINED"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT"),
    (710, "CUDA_ERROR_ASSERT"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE"),
    (718, "CUDA_ERROR_INVALID_PC"),
    (719, "CUDA_ERROR_LAUNCH_FAILED"),
    (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED"),
    (911, "CUDA_ERROR_EXTERNAL_DEVICE"),
];

/// Recoverable codes that kiln names in messages.
const RECOVERABLE: &[(i32, &str)] = &[
    (0, "CUDA_SUCCESS"),
    (1, "CUDA_ERROR_INVALID_VALUE"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY"),
    (3, "CUDA_ERROR_NOT_INITIALIZED"),
    (4, "CUDA_ERROR_DEINITIALIZED"),
    (34, "CUDA_ERROR_STUB_LIBRARY"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE"),
    (100, "CUDA_ERROR_NO_DEVICE"),
    (101, "CUDA_ERROR_INVALID_DEVICE"),
    (200, "CUDA_ERROR_INVALID_IMAGE"),
    (201, "CUDA_ERROR_INVALID_CONTEXT"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU"),
    (218, "CUDA_ERROR_INVALID_PTX"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
    (400, "CUDA_ERROR_INVALID_HANDLE"),
    (500, "CUDA_ERROR_NOT_FOUND"),
    (600, "CUDA_ERROR_NOT_READY"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"),
    (720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE"),
    (800, "CUDA_ERROR_NOT_PERMITTED"),
    (801, "CUDA_ERROR_NOT_SUPPORTED"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"),
    (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"),
    (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"),
    (909, "CUDA_ERROR_TIMEOUT"),
    (999, "CUDA_ERROR_UNKNOWN"),
];

/// Whether a CUresult code poisons the context (see [`Error::is_sticky`]).
pub fn is_sticky_cuda_code(code: i32) -> bool {
    STICKY.iter().any(|&(c, _)| c == code)
}

/// The symbolic name of a CUresult code, or `CUDA_ERROR_<code>` for codes kiln does not list.
pub fn cuda_code_name(code: i32) -> String {
    STICKY
        .iter()
        .chain(RECOVERABLE)
        .find(|&&(c, _)| c == code)
        .map(|&(_, n)| n.to_string())
        .unwrap_or_else(|| format!("CUDA_ERROR_{code}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(code: i32) -> Error {
        Error::Cuda {
            op: "launch".into(),
            device: "cuda:0".into(),
            code,
            name: cuda_code_name(code),
        }
    }

    #[test]
    fn sticky_table_matches_the_cuda_docs() {
        // The codes the CUDA docs name as context-poisoning.
        for code in [
            700, 702, 710, 714, 715, 716, 717, 718, 719, 214, 220, 225, 810, 911,
        ] {
            assert!(cuda(code).is_sticky(), "{code} must be sticky");
        }
        // Errors the process recovers from in place.
        for code in [
            1, 2, 3, 100, 101, 200, 209, 218, 400, 600, 701, 720, 801, 905, 999,
        ] {
            assert!(!cuda(code).is_sticky(), "{code} must not be sticky");
        }
    }

    #[test]
    fn names_and_messages() {
        assert_eq!(cuda_code_name(700), "CUDA_ERROR_ILLEGAL_ADDRESS");
        assert_eq!(cuda_code_name(2), "CUDA_ERROR_OUT_OF_MEMORY");
        assert_eq!(cuda_code_name(12345), "CUDA_ERROR_12345");
        assert!(cuda(719).to_string().contains("restart the process"));
        assert!(!cuda(2).to_string().contains("restart"));
        assert!(cuda(2).is_out_of_memory());
        assert!(!Error::invalid("x", "y").is_sticky());
    }

    #[test]
    fn oom_message_says_what_to_do() {
        let e = Error::OutOfMemory {
            op: "alloc".into(),
            device: "cuda:0".into(),
            requested: 1 << 30,
            free: 1 << 20,
            total: 1 << 34,
            reserved: 1 << 33,
            limit: Some(1 << 33),
        };
        let s = e.to_string();
        assert!(s.contains("requested 1073741824 B") && s.contains("limit 8589934592 B"));
        assert!(s.contains("reduce the batch size"));
        assert!(e.is_out_of_memory());
    }
}
