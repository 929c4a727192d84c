//! Private files: the data dir and its `blobs/` are `0700`, the database (with its WAL and
//! shared-memory files), uploaded blobs and result blobs `0600`, so other users of the host
//! read no tenant's data.
//!
//! Three layers: the server and its workers set the umask to `077` ([`restrict_umask`]), so
//! any file either creates (SQLite's own included) is private; the files the service
//! creates itself are opened with an explicit `0600` ([`FILE_MODE`]); and at start
//! [`prepare_data_dir`] checks the modes already on disk. A mode looser than these is
//! tightened with a warning, not refused: such files come from a default umask of an earlier
//! start, and refusing would stop the service where nothing can be done but the same chmod.

use std::path::{Path, PathBuf};

/// The mode of the data dir and `blobs/`.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file the service keeps.
pub const FILE_MODE: u32 = 0o600;

/// Sets this process's umask to `077` (inherited by the workers it starts).
pub fn restrict_umask() {
    #[cfg(unix)]
    rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o077));
}

/// Creates `data_dir` and `data_dir/blobs` (`0700`) if missing and tightens the modes of
/// both, the SQLite files and every file in `blobs/`; returns one line per path tightened
/// (`path: 0755 -> 0700`), each also logged as a warning. A path whose mode cannot be
/// changed (not this user's) is left with a warning; only failing to create the
/// directories is an error.
pub fn prepare_data_dir(data_dir: &Path) -> Result<Vec<String>, String> {
    let blobs = data_dir.join("blobs");
    create_private_dir(data_dir)?;
    create_private_dir(&blobs)?;
    let mut paths: Vec<(PathBuf, u32)> = vec![(data_dir.to_path_buf(), DIR_MODE), (blobs.clone(), DIR_MODE)];
    for f in ["jobs.sqlite3", "jobs.sqlite3-wal", "jobs.sqlite3-shm"] {
        paths.push((data_dir.join(f), FILE_MODE));
    }
    if let Ok(rd) = std::fs::read_dir(&blobs) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                paths.push((e.path(), FILE_MODE));
            }
        }
    }
    let mut tightened = Vec::new();
    for (p, mode) in paths {
        match tighten(&p, mode) {
            Ok(Some(line)) => {
                tracing::warn!("{line}: it was readable or writable by others; tightened");
                tightened.push(line);
            }
            Ok(None) => {}
            // a path this user does not own, such as a volume's mount point (Kubernetes'
            // fsGroup makes it root:GROUP 2775): left as it is; what the service creates
            // under it is private
            Err(e) => tracing::warn!("{e}; left as it is"),
        }
    }
    Ok(tightened)
}

/// `path`'s mode made at most `mode` (group and other bits cleared); a line saying so when
/// it changed, `None` when it was already private or does not exist.
pub fn tighten(path: &Path, mode: u32) -> Result<Option<String>, String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let old = meta.permissions().mode() & 0o7777;
        if old & !mode == 0 {
            return Ok(None);
        }
        let new = old & mode;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(new))
            .map_err(|e| format!("{}: cannot make it private ({new:04o}): {e}", path.display()))?;
        Ok(Some(format!("{}: mode {old:04o} -> {new:04o}", path.display())))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(None)
    }
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, DIR_MODE);
    b.create(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Options that create a file `0600` (read and write).
pub fn private_create() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, FILE_MODE);
    o
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777)
    }

    /// Loose modes left on disk are tightened at start, each with a line; private ones are
    /// left alone.
    #[test]
    fn loose_modes_are_tightened_with_a_warning() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("data");
        std::fs::create_dir_all(d.join("blobs")).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(d.join("jobs.sqlite3"), b"x").unwrap();
        std::fs::set_permissions(d.join("jobs.sqlite3"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(d.join("blobs/b_1.npy"), b"x").unwrap();
        std::fs::set_permissions(d.join("blobs/b_1.npy"), std::fs::Permissions::from_mode(0o666)).unwrap();
        let lines = prepare_data_dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&d.join("blobs")), 0o700);
        assert_eq!(mode(&d.join("jobs.sqlite3")), 0o600);
        assert_eq!(mode(&d.join("blobs/b_1.npy")), 0o600);
        assert!(
            lines.iter().any(|l| l.ends_with("mode 0755 -> 0700")),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.ends_with("mode 0666 -> 0600")),
            "{lines:?}"
        );
        assert!(prepare_data_dir(&d).unwrap().is_empty());
        // a file made through private_create is 0600 whatever the umask
        let f = d.join("blobs/b_2.png");
        drop(private_create().open(&f).unwrap());
        assert_eq!(mode(&f), 0o600);
    }
}
