//! The error type of kiln-io: every variant names the file and says what to do about it.

use std::path::{Path, PathBuf};

/// `Result` with kiln-io's [`IoError`].
pub type Result<T, E = IoError> = std::result::Result<T, E>;

/// Every failure reading or writing a file. Each variant carries the path it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The file name's extension names no format kiln can read or write here.
    #[error("{}: unknown file extension; {what} files must end in one of: {supported}", path.display())]
    UnknownExtension {
        /// The file.
        path: PathBuf,
        /// What was being read or written (`image`, `volume`).
        what: &'static str,
        /// The extensions accepted, e.g. `.png .tif .tiff .npy`.
        supported: &'static str,
    },
    /// The file to read does not exist.
    #[error("{}: file not found; check the path and the working directory", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The file exists but is not a valid file of its format: truncated, corrupt, or another
    /// format under a misleading extension.
    #[error("{}: not a valid {format} file (truncated or corrupt?): {reason}; re-export or re-copy the file", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The format it was read as (`PNG`, `TIFF`, `NPY`, `NIfTI`).
        format: &'static str,
        /// What the decoder reported.
        reason: String,
    },
    /// The file reads well but what it says breaks the format's rules (an option CSV whose
    /// header names an unknown column): the file is not damaged; its content must change.
    #[error("{}: {reason}", path.display())]
    Content {
        /// The file.
        path: PathBuf,
        /// The format it was read as (`option CSV`).
        format: &'static str,
        /// What is wrong and what to write instead.
        reason: String,
    },
    /// The pixel layout (channel count, bit depth, sample format) is one the format or kiln
    /// does not support.
    #[error("{}: unsupported pixel type {found} for {format}; supported: {supported}", path.display())]
    UnsupportedPixelType {
        /// The file.
        path: PathBuf,
        /// The format (`PNG`, `TIFF`, `NPY`).
        format: &'static str,
        /// The pixel type found or asked for, e.g. `2-channel f32`.
        found: String,
        /// What would be accepted.
        supported: String,
    },
    /// The element type of an array or volume is one kiln does not read.
    #[error("{}: unsupported {format} element type {found}; supported: {supported}", path.display())]
    UnsupportedDtype {
        /// The file.
        path: PathBuf,
        /// The format (`NPY`, `NIfTI`).
        format: &'static str,
        /// The type found, as the file spells it (e.g. `'<i8'`, `Complex64`).
        found: String,
        /// What would be accepted.
        supported: &'static str,
    },
    /// The array has a number of dimensions the caller cannot use (for example a 2-D array
    /// where a volume was asked for).
    #[error("{}: unsupported shape {shape:?} ({} dimensions); expected {expected}", path.display(), shape.len())]
    UnsupportedDimensionality {
        /// The file.
        path: PathBuf,
        /// The shape found.
        shape: Vec<usize>,
        /// What would be accepted, e.g. `(H, W) or (H, W, C) with C in 1..=4`.
        expected: &'static str,
    },
    /// The image has no pixels (zero width or height).
    #[error("{}: empty image ({height}x{width}); an image must be at least 1x1", path.display())]
    EmptyImage {
        /// The file.
        path: PathBuf,
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
    },
    /// The encoder refused the data (a limit of the format or of the encoder).
    #[error("{}: could not encode {format}: {reason}", path.display())]
    Encode {
        /// The file being written.
        path: PathBuf,
        /// The format (`PNG`, `TIFF`, `NPY`, `NIfTI`).
        format: &'static str,
        /// What the encoder reported.
        reason: String,
    },
    /// Decoding would need more memory than kiln-io allows for one file.
    #[error("{}: decoding needs more than {limit} bytes; the file is too large or its header is corrupt", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file's header says it decodes to more elements than the caller allows: refused
    /// before decoding (a small compressed file may claim a huge image).
    #[error("{}: decodes to {elements} elements ({shape:?} by its header); the limit is {limit}", path.display())]
    TooManyElements {
        /// The file.
        path: PathBuf,
        /// The decoded shape its header gives.
        shape: Vec<usize>,
        /// Elements of that shape.
        elements: u64,
        /// The most elements allowed.
        limit: u64,
    },
    /// The operating system failed to read, write or rename the file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file (or the directory the temporary file was created in).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl IoError {
    /// The file the error concerns.
    pub fn path(&self) -> &Path {
        match self {
            IoError::UnknownExtension { path, .. }
            | IoError::NotFound { path }
            | IoError::Corrupt { path, .. }
            | IoError::Content { path, .. }
            | IoError::UnsupportedPixelType { path, .. }
            | IoError::UnsupportedDtype { path, .. }
            | IoError::UnsupportedDimensionality { path, .. }
            | IoError::EmptyImage { path, .. }
            | IoError::Encode { path, .. }
            | IoError::TooLarge { path, .. }
            | IoError::TooManyElements { path, .. }
            | IoError::Io { path, .. } => path,
        }
    }

    /// Maps an OS error on `path`: `NotFound` becomes [`IoError::NotFound`], the rest
    /// [`IoError::Io`].
    pub(crate) fn os(path: &Path, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            IoError::NotFound {
                path: path.to_owned(),
            }
        } else {
            IoError::Io {
                path: path.to_owned(),
                source,
            }
        }
    }

    /// Shorthand for [`IoError::Corrupt`].
    pub(crate) fn corrupt(path: &Path, format: &'static str, reason: impl ToString) -> Self {
        IoError::Corrupt {
            path: path.to_owned(),
            format,
            reason: reason.to_string(),
        }
    }
}

impl From<IoError> for kiln_core::Error {
    /// OS-level failures (missing file, permissions, disk full) become
    /// [`kiln_core::Error::Io`]; everything about the file's content or name becomes
    /// [`kiln_core::Error::InvalidArgument`] with the full message.
    fn from(e: IoError) -> Self {
        match e {
            IoError::Io { path, source } => kiln_core::Error::Io { path, source },
            IoError::NotFound { path } => kiln_core::Error::Io {
                path,
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "file not found"),
            },
            other => kiln_core::Error::InvalidArgument {
                op: "kiln-io".into(),
                reason: other.to_string(),
            },
        }
    }
}
