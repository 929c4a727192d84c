//! The error of the steps that write files: kiln's own error where kiln reports one, plus
//! what writing and drawing can fail with.

use std::path::PathBuf;

/// A failure writing a report, a JSON document or a plot.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// kiln's error: an invalid argument or input file.
    #[error(transparent)]
    Kiln(#[from] kiln::Error),
    /// The report could not be serialized.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An output's folder could not be created.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An output file could not be written.
    #[error("writing {}: {error}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The plot could not be drawn.
    #[error("{}{message}", panel.map_or(String::new(), |p| format!("{p} panel: ")))]
    Plot {
        /// The panel being drawn (`roofline`, `efficiency`, `peers`), if the failure was in one.
        panel: Option<&'static str>,
        /// plotters' message.
        message: String,
    },
}

impl Error {
    /// The kiln error this is, if it is one (for mapping errors to exit codes).
    pub fn kiln(&self) -> Option<&kiln::Error> {
        match self {
            Error::Kiln(e) => Some(e),
            _ => None,
        }
    }
}

/// A result with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Write `text` to `path`, creating its folder first.
pub(crate) fn write_file(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).map_err(|error| Error::Write {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_as_before_the_move() {
        let e = Error::Plot {
            panel: Some("roofline"),
            message: "boom".into(),
        };
        assert_eq!(e.to_string(), "roofline panel: boom");
        let e = Error::Plot {
            panel: None,
            message: "boom".into(),
        };
        assert_eq!(e.to_string(), "boom");
        let k = Error::from(kiln::Error::invalid("bench", "bad"));
        assert!(k.kiln().is_some());
        assert_eq!(k.to_string(), "bench: invalid argument: bad");
    }

    #[test]
    fn write_file_creates_the_folder_and_names_the_file_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/c.txt");
        write_file(&p, "x").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "x");
        // a folder where the file should go
        let e = write_file(dir.path(), "x").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("writing {}: ", dir.path().display())),
            "{e}"
        );
    }
}
