//! Embeds the git commit the binary was built from as `KILN_GIT_COMMIT` (for `kiln bench`
//! reports): `git rev-parse --short=12 HEAD`, with `-dirty` when tracked files differ from
//! it, or `unknown` outside a git checkout or without git.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty =
                git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        _ => "unknown".to_string(),
    };
    println!("cargo:rustc-env=KILN_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves (a commit, a checkout) or the index changes (staging, which
    // is also how a commit changes what is dirty).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = PathBuf::from(dir);
        for f in ["HEAD", "index", "packed-refs"] {
            let p = dir.join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let p = dir.join(r);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
