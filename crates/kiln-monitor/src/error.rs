//! kiln-monitor's errors. The CLI maps them to its exit codes.

/// What can go wrong in monitoring.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// NVML (`libnvidia-ml`) is missing or did not initialise; the reason says which.
    #[error("{0}")]
    NvmlUnavailable(String),
    /// An NVML call failed.
    #[error("NVML {what} failed: {reason}")]
    Nvml {
        /// The call, e.g. `power limit constraints of GPU 0`.
        what: String,
        /// NVML's message.
        reason: String,
    },
    /// A bad argument or configuration value.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was wrong, e.g. `power limit`.
        what: String,
        /// Why.
        reason: String,
    },
    /// The webhook could not be reached or answered with an error.
    #[error("webhook {url}: {reason}")]
    Webhook {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
}

/// kiln-monitor's result.
pub type Result<T> = std::result::Result<T, Error>;
