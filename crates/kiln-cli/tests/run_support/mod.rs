//! Running the `kiln` binary under test from a CLI test: the binary (`KILN_BIN` for the
//! device bundle, else the one cargo built), a command run in a directory with a kernel
//! cache of its own and no devices or configuration taken from the environment, and its
//! stderr as text. Each test file is its own crate and uses part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
pub fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

/// `kiln COMMAND.. ARGS..` in `dir` (the command words first, e.g. `["--device", "cpu",
/// "risk"]`), its kernel cache under `dir/cache`, `KILN_DEVICES` and `KILN_CONFIG` unset.
pub fn run_in(dir: &Path, command: &[&str], args: &[&str]) -> Output {
    Command::new(bin())
        .args(command)
        .args(args)
        .current_dir(dir)
        .env("KILN_CACHE_DIR", dir.join("cache"))
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .expect("run kiln")
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
