//! `kiln demo`'s table on the CPU: every check compares with a reference for the thing it
//! priced, and a column that does not apply to a row reads `-`, never `NaN`.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use std::path::PathBuf;
use std::process::Command;

/// The binary under test: `KILN_BIN` (for the device bundle) or the one cargo built.
fn bin() -> PathBuf {
    std::env::var_os("KILN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kiln")))
}

#[test]
fn demo_table_checks_each_price_against_its_own_reference() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["demo", "--device", "cpu", "--size", "quick", "--reps", "1"])
        .env("KILN_CACHE_DIR", d.path())
        .env_remove("KILN_DEVICES")
        .env_remove("KILN_CONFIG")
        .output()
        .expect("run kiln");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains("NaN"), "a column printed NaN:\n{out}");
    let line = |op: &str| {
        out.lines()
            .find(|l| l.starts_with(op))
            .unwrap_or_else(|| panic!("no `{op}` row:\n{out}"))
    };
    // the arithmetic Asian has no closed form: it is checked against a reference price of
    // the arithmetic Asian itself, not the geometric one's closed form (5.04978)
    let asian = line("mc asian arithmetic call (cv)");
    assert!(
        asian.contains(" ok ") && asian.contains("vs Sobol reference 5.24293"),
        "{asian}"
    );
    let geo = line("mc asian geometric call");
    assert!(geo.contains("vs closed form 5.04978"), "{geo}");
    // rows with no f64 reference (filters, transposes, pricing) print `-` there
    let euro = line("mc european call");
    assert!(euro.contains(" - "), "{euro}");
}
