//! The file handling the row-file commands share (`kiln price`, `kiln implied-vol`): a CSV
//! of rows in, a CSV of results out, and the bad rows either listed on stderr with nothing
//! written (exit 4) or, with `--skip-invalid`, written to `<output stem>.errors.csv` beside
//! the output (always written then, header only when there are none, so it never shows a
//! previous run's rows).

use std::path::{Path, PathBuf};

use kiln::Error;
use kiln_io::options_csv::{self, RowError};

/// A row-file command's input, output and errors file.
pub(crate) struct RowFiles<'a> {
    /// The command, as messages name it (`kiln price`).
    cmd: &'static str,
    input: &'a Path,
    output: &'a Path,
    errors: PathBuf,
    /// What the command does to a row (`price`, `solve`), for the hint to skip bad rows.
    verb: &'static str,
}

impl<'a> RowFiles<'a> {
    /// The files of `cmd`; `stem` names the errors file where the output has no stem.
    pub(crate) fn new(
        cmd: &'static str,
        verb: &'static str,
        input: &'a Path,
        output: &'a Path,
        stem: &str,
    ) -> Self {
        RowFiles {
            cmd,
            input,
            output,
            errors: errors_path(output, stem),
            verb,
        }
    }

    /// `<output stem>.errors.csv` beside the output.
    pub(crate) fn errors(&self) -> &Path {
        &self.errors
    }

    /// Refuses an output or errors file that would replace the input (`what`: what the
    /// output holds, `prices`).
    pub(crate) fn check_outputs(&self, what: &str) -> Result<(), Error> {
        for out in [self.output, self.errors.as_path()] {
            if is_same_file(self.input, out) {
                return Err(Error::invalid(
                    self.cmd,
                    format!("{} is the input file; write the {what} elsewhere", out.display()),
                ));
            }
        }
        Ok(())
    }

    /// Every bad row on stderr, naming the input file, then the error that makes the exit
    /// code 4.
    pub(crate) fn fail_invalid(&self, errors: &[RowError], total: usize) -> anyhow::Error {
        for e in errors {
            eprintln!("invalid: {}: {e}", self.input.display());
        }
        Error::invalid(
            self.cmd,
            format!(
                "{} of {total} rows of {} are invalid (listed above); nothing was written. Fix them, or \
                 pass --skip-invalid to {} the rest and list these in {}",
                errors.len(),
                self.input.display(),
                self.verb,
                self.errors.display()
            ),
        )
        .into()
    }

    /// Writes the errors file (`row,id,reason`; header only when `errors` is empty).
    pub(crate) fn write_errors(&self, errors: &[RowError]) -> Result<(), Error> {
        options_csv::write_errors(&self.errors, errors).map_err(io_error("--output"))
    }

    /// The warning after a `--skip-invalid` run that skipped rows (none when none were).
    pub(crate) fn warn_skipped(&self, skipped: usize, total: usize) {
        if skipped > 0 {
            eprintln!(
                "warning: {skipped} invalid row{} skipped ({skipped} of {total} rows of {}); listed in {}",
                if skipped == 1 { "" } else { "s" },
                self.input.display(),
                self.errors.display()
            );
        }
    }
}

/// `<stem>.errors.csv` beside `output` (`default_stem` where it has none).
fn errors_path(output: &Path, default_stem: &str) -> PathBuf {
    let stem = output
        .file_stem()
        .map_or_else(|| default_stem.into(), |s| s.to_string_lossy().into_owned());
    output.with_file_name(format!("{stem}.errors.csv"))
}

/// Whether writing `out` would replace `input` (compared after resolving links).
fn is_same_file(input: &Path, out: &Path) -> bool {
    let Ok(a) = std::fs::canonicalize(input) else {
        return false;
    };
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), out.file_name()) {
        (Ok(d), Some(n)) => d.join(n) == a,
        _ => false,
    }
}

/// A file error as an exit-code-4 error whose message names the flag and the path (flattened
/// to text: `Error::Io`'s message would repeat its source under `{:#}`).
pub(crate) fn io_error(flag: &'static str) -> impl Fn(kiln_io::IoError) -> Error {
    move |e| Error::invalid(flag, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_file_sits_beside_the_output() {
        assert_eq!(
            errors_path(Path::new("out/prices.csv"), "prices"),
            Path::new("out/prices.errors.csv")
        );
        assert_eq!(
            errors_path(Path::new("book"), "prices"),
            Path::new("book.errors.csv")
        );
        assert_eq!(errors_path(Path::new(""), "vols"), Path::new("vols.errors.csv"));
    }

    #[test]
    fn an_output_naming_the_input_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("book.csv");
        std::fs::write(&input, "x\n").unwrap();
        let f = RowFiles::new("kiln price", "price", &input, &input, "prices");
        let e = f.check_outputs("prices").unwrap_err().to_string();
        assert!(e.contains("is the input file; write the prices elsewhere"), "{e}");
        let out = d.path().join("p.csv");
        let f = RowFiles::new("kiln price", "price", &input, &out, "prices");
        assert!(f.check_outputs("prices").is_ok());
        assert_eq!(f.errors(), d.path().join("p.errors.csv"));
    }
}
