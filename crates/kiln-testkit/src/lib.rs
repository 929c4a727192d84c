//! Test support shared by every kiln crate: a skip is printed with its reason and counted,
//! and a `KILN_REQUIRE_*` switch turns it into a failure.
//!
//! A test that cannot run here (no GPU, no libnvrtc, no C++ compiler, no PostgreSQL) calls
//! [`skip_unless_required`] with the switch that makes it mandatory. The skip is printed on
//! stderr as `SKIP <test>: <reason>` and, when `KILN_SKIP_LOG` names a file, appended to it
//! as one line, so a runner counts skips by reading that file instead of a test's captured
//! output (the test harness hides the output of passing tests). A skip that cannot be
//! written to the log fails the test: a skip must never go uncounted.
//!
//! Which tests need a GPU is also decided at build time: GPU tests carry
//! `#[cfg_attr(not(feature = "gpu-tests"), ignore = "...")]`, so a plain `cargo test`
//! reports them as ignored and `cargo test --features gpu-tests` (what
//! `scripts/gpu-check.sh` runs) runs them. This crate holds the runtime half only.
#![deny(missing_docs)]

use std::io::Write;

/// The environment variable naming the file every skip is appended to.
pub const SKIP_LOG_ENV: &str = "KILN_SKIP_LOG";

/// The switch that makes GPU tests fail instead of skipping.
pub const REQUIRE_GPU: &str = "KILN_REQUIRE_GPU";

/// Whether the switch `var` is set to `1`.
pub fn required(var: &str) -> bool {
    std::env::var(var).as_deref() == Ok("1")
}

/// Record a skip of `test`: print it, and append it to the file named by `KILN_SKIP_LOG`
/// when that is set. Panics when the log cannot be written, so that no skip goes uncounted.
pub fn skip(test: &str, reason: &str) {
    let reason = reason.replace('\n', " ");
    eprintln!("SKIP {test}: {reason}");
    let Some(path) = std::env::var_os(SKIP_LOG_ENV) else {
        return;
    };
    // One write of one short line with O_APPEND: lines from tests running on several
    // threads or processes do not interleave.
    let line = format!("{test}\t{reason}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!(
            "{test} skipped ({reason}) but the skip could not be recorded in {SKIP_LOG_ENV}={}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

/// Skip `test` for `reason`, or fail it when the switch `var` (`KILN_REQUIRE_GPU`,
/// `KILN_REQUIRE_NVRTC`, ...) is `1`.
pub fn skip_unless_required(var: &str, test: &str, reason: &str) {
    if required(var) {
        panic!("{var}=1 but {test} cannot run: {reason}");
    }
    skip(test, reason);
}

/// A C++ compiler for the host-emulation tests (`$CXX`, else `c++`, `g++` or `clang++`,
/// the first that runs), or `None` after skipping `test` (failing it when
/// `KILN_REQUIRE_CXX=1`).
pub fn cxx_or_skip(test: &str) -> Option<String> {
    let mut names: Vec<String> = std::env::var("CXX").into_iter().collect();
    names.extend(["c++", "g++", "clang++"].map(String::from));
    let found = names.into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        skip_unless_required(
            "KILN_REQUIRE_CXX",
            test,
            "no C++ compiler (c++, g++ or clang++; or set CXX)",
        );
    }
    found
}

/// The number of skips recorded in a skip log (0 when the file does not exist).
pub fn count_skips(log: &std::path::Path) -> std::io::Result<usize> {
    match std::fs::read_to_string(log) {
        Ok(s) => Ok(s.lines().filter(|l| !l.trim().is_empty()).count()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The counter counts: a test that skips in a child process (so this process's
    /// environment is untouched) leaves one line per skip in the log.
    #[test]
    fn every_skip_is_appended_to_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.log");
        assert_eq!(count_skips(&log).unwrap(), 0);
        for _ in 0..2 {
            let o = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "tests::skip_in_a_child", "--ignored", "--nocapture"])
                .env(SKIP_LOG_ENV, &log)
                .env("KILN_TESTKIT_CHILD", "1")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        assert_eq!(count_skips(&log).unwrap(), 2);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("child\ta deliberate skip\n"), "{text}");
        // and the GPU runners' counter (scripts/count-skips.sh) sees both and fails
        let (out, ok) = count_with_script(&log);
        assert!(out.starts_with("skips: 2\n") && !ok, "{out}");
        let (out, ok) = count_with_script(&dir.path().join("none.log"));
        assert!(out.starts_with("skips: 0") && ok, "{out}");
    }

    /// Runs scripts/count-skips.sh on `log`: its output and whether it exited 0.
    fn count_with_script(log: &std::path::Path) -> (String, bool) {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/count-skips.sh");
        let o = std::process::Command::new("bash")
            .arg(script)
            .arg(log)
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            o.status.success(),
        )
    }

    /// Only meaningful as the child of the tests around it (`KILN_TESTKIT_CHILD=1`).
    #[test]
    #[ignore = "the child process of the skip-log tests"]
    fn skip_in_a_child() {
        if std::env::var("KILN_TESTKIT_CHILD").as_deref() == Ok("1") {
            skip_unless_required("KILN_REQUIRE_TESTKIT", "child", "a deliberate\nskip");
        }
    }

    /// A switch set to 1 turns the skip into a failure, and nothing is counted.
    #[test]
    fn a_required_skip_fails() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips.log");
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tests::skip_in_a_child", "--ignored"])
            .env(SKIP_LOG_ENV, &log)
            .env("KILN_TESTKIT_CHILD", "1")
            .env("KILN_REQUIRE_TESTKIT", "1")
            .output()
            .unwrap();
        assert!(!o.status.success(), "a required skip must fail");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains("KILN_REQUIRE_TESTKIT=1 but child cannot run"),
            "{out}"
        );
        assert_eq!(count_skips(&log).unwrap(), 0);
    }

    /// A log that cannot be written fails the skip.
    #[test]
    fn an_unwritable_log_fails_the_skip() {
        let dir = tempfile::tempdir().unwrap();
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "tests::skip_in_a_child", "--ignored"])
            .env(SKIP_LOG_ENV, dir.path()) // a directory: cannot be opened for appending
            .env("KILN_TESTKIT_CHILD", "1")
            .output()
            .unwrap();
        assert!(!o.status.success(), "a skip that cannot be counted must fail");
    }
}
