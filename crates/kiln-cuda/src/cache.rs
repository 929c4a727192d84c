//! The on-disk cubin cache.
//!
//! Key: SHA-256 of (format version, program name, source, NVRTC options, arch, NVRTC
//! version), so a change to any of them misses; a kernel compiled alone differs from its
//! module by its `-D` options. File: `{program}-{arch}-{key[..16]}.cubin` holding a header
//! (magic, format version, payload length, SHA-256 of the payload, the full key) and the
//! cubin. Writes go to a temp file in the same directory and are renamed into place, so a
//! reader never sees half a file; a file that fails any header check is recompiled with a
//! warning and overwritten, never trusted and never a crash.

use kiln_core::{Error, Result};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const MAGIC: &[u8; 8] = b"KILNCUBN";
const FORMAT: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 32 + 32;

/// What a lookup did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Loaded from disk; NVRTC was not called.
    Hit,
    /// Not on disk: compiled and stored.
    Compiled,
    /// On disk but invalid: recompiled and overwritten.
    Recompiled {
        /// Why the stored entry was rejected.
        reason: String,
    },
    /// Compiled, but the cache could not be written (the cubin is still used).
    CompiledNotStored {
        /// Why the write failed.
        reason: String,
    },
}

/// What a cubin is compiled from, as the cache keys it (the arch and NVRTC version apart).
#[derive(Clone, Copy, Debug)]
pub struct Unit<'a> {
    /// The program's name (a kernel's symbol, or a module's name): the file's prefix.
    pub name: &'a str,
    /// The CUDA C++ source.
    pub source: &'a str,
    /// NVRTC's options but the arch (`nvrtc::options`).
    pub options: &'a [String],
}

/// One lookup's record, for `kiln doctor` and the profiler.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CacheEvent {
    /// The program: a kernel's symbol, or a module's name when compiled whole.
    pub program: String,
    /// The target arch.
    pub arch: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Milliseconds spent (reading, or compiling and writing).
    pub ms: f64,
    /// The cache file.
    pub path: PathBuf,
}

/// A cache file as `kiln cache list` shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CacheEntry {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// `None` when valid, else why it would be rejected.
    pub problem: Option<String>,
}

/// The cache directory and its operations.
#[derive(Clone, Debug)]
pub struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    /// A cache rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        KernelCache { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key of a unit for an arch and NVRTC version.
    pub fn key(unit: &Unit, arch: &str, nvrtc: (i32, i32)) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"kiln-cubin-cache\0");
        h.update(FORMAT.to_le_bytes());
        h.update(unit.name.as_bytes());
        h.update(b"\0");
        h.update(unit.source.as_bytes());
        h.update(b"\0");
        for o in unit.options {
            h.update(o.as_bytes());
            h.update(b"\0");
        }
        h.update(arch.as_bytes());
        h.update(format!("\0nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
        h.finalize().into()
    }

    /// The file a key lives in.
    pub fn path_for(&self, name: &str, arch: &str, key: &[u8; 32]) -> PathBuf {
        self.dir
            .join(format!("{name}-{arch}-{}.cubin", &hex::encode(key)[..16]))
    }

    /// Whether a valid entry for `unit` is on disk (what a lookup would load without
    /// compiling).
    pub fn contains(&self, unit: &Unit, arch: &str, nvrtc: (i32, i32)) -> bool {
        let key = Self::key(unit, arch, nvrtc);
        std::fs::read(self.path_for(unit.name, arch, &key))
            .is_ok_and(|bytes| decode(&bytes, Some(&key)).is_ok())
    }

    /// Whether the directory exists (or can be created) and accepts a file.
    pub fn check_writable(&self) -> std::result::Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("cannot create: {e}"))?;
        tempfile::NamedTempFile::new_in(&self.dir)
            .map(|_| ())
            .map_err(|e| format!("not writable: {e}"))
    }

    /// Return the cubin for `unit`, from disk if a valid entry exists, else from `compile`
    /// (which is then stored). Lookups of different units may run on several threads at
    /// once; each entry is written atomically.
    pub fn get_or_compile(
        &self,
        unit: &Unit,
        arch: &str,
        nvrtc: (i32, i32),
        compile: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<(Vec<u8>, CacheEvent)> {
        let t0 = Instant::now();
        let key = Self::key(unit, arch, nvrtc);
        let path = self.path_for(unit.name, arch, &key);
        let event = |outcome, t0: Instant| CacheEvent {
            program: unit.name.into(),
            arch: arch.into(),
            outcome,
            ms: t0.elapsed().as_secs_f64() * 1e3,
            path: path.clone(),
        };
        let rejected = match std::fs::read(&path) {
            Ok(bytes) => match decode(&bytes, Some(&key)) {
                Ok(cubin) => return Ok((cubin.to_vec(), event(Outcome::Hit, t0))),
                Err(reason) => {
                    tracing::warn!(path = %path.display(), %reason, "kernel cache entry rejected; recompiling");
                    Some(reason)
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                let reason = format!("unreadable: {e}");
                tracing::warn!(path = %path.display(), %reason, "kernel cache entry rejected; recompiling");
                Some(reason)
            }
        };
        let cubin = compile()?;
        let outcome = match self.store(&path, &key, &cubin) {
            Ok(()) => match rejected {
                Some(reason) => Outcome::Recompiled { reason },
                None => Outcome::Compiled,
            },
            Err(reason) => {
                tracing::warn!(dir = %self.dir.display(), %reason, "kernel cache not written");
                Outcome::CompiledNotStored { reason }
            }
        };
        Ok((cubin, event(outcome, t0)))
    }

    fn store(&self, path: &Path, key: &[u8; 32], cubin: &[u8]) -> std::result::Result<(), String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(|e| e.to_string())?;
        tmp.write_all(&encode(key, cubin)).map_err(|e| e.to_string())?;
        tmp.as_file().sync_all().map_err(|e| e.to_string())?;
        tmp.persist(path).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Every `.cubin` in the directory with its validity.
    pub fn entries(&self) -> Result<Vec<CacheEntry>> {
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::Io {
                    path: self.dir.clone(),
                    source: e,
                })
            }
        };
        let mut out = Vec::new();
        for ent in rd.flatten() {
            let path = ent.path();
            if path.extension().and_then(|e| e.to_str()) != Some("cubin") {
                continue;
            }
            let (bytes, problem) = match std::fs::read(&path) {
                Ok(b) => (b.len() as u64, decode(&b, None).err()),
                Err(e) => (0, Some(e.to_string())),
            };
            out.push(CacheEntry { path, bytes, problem });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Remove every `.cubin` kiln wrote; returns how many were removed.
    pub fn clear(&self) -> Result<usize> {
        let mut n = 0;
        for e in self.entries()? {
            std::fs::remove_file(&e.path).map_err(|source| Error::Io {
                path: e.path.clone(),
                source,
            })?;
            n += 1;
        }
        Ok(n)
    }
}

fn encode(key: &[u8; 32], cubin: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + cubin.len());
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&FORMAT.to_le_bytes());
    v.extend_from_slice(&(cubin.len() as u64).to_le_bytes());
    v.extend_from_slice(&Sha256::digest(cubin));
    v.extend_from_slice(key);
    v.extend_from_slice(cubin);
    v
}

/// Validate a cache file and return its payload.
fn decode<'a>(b: &'a [u8], key: Option<&[u8; 32]>) -> std::result::Result<&'a [u8], String> {
    if b.len() < HEADER {
        return Err(format!(
            "truncated: {} bytes, shorter than the {HEADER}-byte header",
            b.len()
        ));
    }
    if &b[0..8] != MAGIC {
        return Err("not a kiln cubin cache file (bad magic)".into());
    }
    let mut u32b = [0u8; 4];
    u32b.copy_from_slice(&b[8..12]);
    let format = u32::from_le_bytes(u32b);
    if format != FORMAT {
        return Err(format!("cache format {format}, expected {FORMAT}"));
    }
    let mut u64b = [0u8; 8];
    u64b.copy_from_slice(&b[12..20]);
    let len = u64::from_le_bytes(u64b);
    let payload = &b[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!(
            "truncated: payload {} bytes, header says {len}",
            payload.len()
        ));
    }
    if Sha256::digest(payload).as_slice() != &b[20..52] {
        return Err("checksum mismatch (corrupt entry)".into());
    }
    if let Some(k) = key {
        if &b[52..84] != k {
            return Err("key mismatch (entry belongs to other source/options)".into());
        }
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const SRC: &str = "extern \"C\" __global__ void k() {}";

    /// A unit named `test` with `SRC` and `options`.
    fn unit(options: &[String]) -> Unit<'_> {
        Unit {
            name: "test",
            source: SRC,
            options,
        }
    }

    fn opts(o: &[&str]) -> Vec<String> {
        o.iter().map(|s| s.to_string()).collect()
    }

    fn fake_cubin() -> Vec<u8> {
        (0..5000u32).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn second_lookup_is_a_hit_and_does_not_compile() {
        let dir = tempfile::tempdir().unwrap();
        let c = KernelCache::new(dir.path().join("nested"));
        let calls = Cell::new(0);
        let compile = || {
            calls.set(calls.get() + 1);
            Ok(fake_cubin())
        };
        let x = opts(&["-x"]);
        assert!(!c.contains(&unit(&x), "sm_90", (13, 0)));
        let (a, e1) = c.get_or_compile(&unit(&x), "sm_90", (13, 0), compile).unwrap();
        assert_eq!(e1.outcome, Outcome::Compiled);
        assert_eq!(e1.program, "test");
        assert!(c.contains(&unit(&x), "sm_90", (13, 0)));
        assert!(!c.contains(&unit(&x), "sm_80", (13, 0)));
        let (b, e2) = c
            .get_or_compile(&unit(&x), "sm_90", (13, 0), || -> Result<Vec<u8>> {
                panic!("must not compile")
            })
            .unwrap();
        assert_eq!(e2.outcome, Outcome::Hit);
        assert_eq!(a, b);
        assert_eq!(calls.get(), 1);
        assert_eq!(c.entries().unwrap().len(), 1);
        assert!(c.entries().unwrap()[0].problem.is_none());
    }

    #[test]
    fn key_covers_name_source_options_arch_and_nvrtc() {
        let (a, b) = (opts(&["-a"]), opts(&["-a", "-DKILN_K_k"]));
        let k = KernelCache::key(&unit(&a), "sm_90", (13, 0));
        let changed = Unit {
            source: "changed",
            ..unit(&a)
        };
        let renamed = Unit {
            name: "other",
            ..unit(&a)
        };
        assert_ne!(k, KernelCache::key(&changed, "sm_90", (13, 0)));
        assert_ne!(k, KernelCache::key(&renamed, "sm_90", (13, 0)));
        assert_ne!(k, KernelCache::key(&unit(&b), "sm_90", (13, 0)));
        assert_ne!(k, KernelCache::key(&unit(&a), "sm_80", (13, 0)));
        assert_ne!(k, KernelCache::key(&unit(&a), "sm_90", (13, 1)));
        assert_eq!(k, KernelCache::key(&unit(&a), "sm_90", (13, 0)));
    }

    #[test]
    fn corrupt_or_truncated_entries_are_recompiled_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let c = KernelCache::new(dir.path());
        let (good, _) = c
            .get_or_compile(&unit(&[]), "sm_90", (13, 0), || Ok(fake_cubin()))
            .unwrap();
        let key = KernelCache::key(&unit(&[]), "sm_90", (13, 0));
        let path = c.path_for("test", "sm_90", &key);
        let full = std::fs::read(&path).unwrap();
        let damages: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", full[..full.len() / 2].to_vec()),
            ("truncated", full[..10].to_vec()),
            ("checksum", {
                let mut v = full.clone();
                let last = v.len() - 1;
                v[last] ^= 0xff;
                v
            }),
            ("magic", {
                let mut v = full.clone();
                v[0] = b'X';
                v
            }),
            ("truncated", Vec::new()),
        ];
        for (what, bytes) in damages {
            std::fs::write(&path, &bytes).unwrap();
            assert!(c.entries().unwrap()[0].problem.is_some());
            assert!(!c.contains(&unit(&[]), "sm_90", (13, 0)));
            let (cubin, ev) = c
                .get_or_compile(&unit(&[]), "sm_90", (13, 0), || Ok(fake_cubin()))
                .unwrap();
            assert_eq!(cubin, good);
            match ev.outcome {
                Outcome::Recompiled { reason } => assert!(reason.contains(what), "{what}: {reason}"),
                o => panic!("{what}: expected Recompiled, got {o:?}"),
            }
            // and the entry is whole again
            assert_eq!(std::fs::read(&path).unwrap(), full);
        }
        assert_eq!(c.clear().unwrap(), 1);
        assert!(c.entries().unwrap().is_empty());
    }

    #[test]
    fn unwritable_cache_still_returns_the_cubin() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        // a directory path under a regular file can never be created
        let c = KernelCache::new(file.join("cache"));
        let (cubin, ev) = c
            .get_or_compile(&unit(&[]), "sm_90", (13, 0), || Ok(fake_cubin()))
            .unwrap();
        assert_eq!(cubin, fake_cubin());
        assert!(matches!(ev.outcome, Outcome::CompiledNotStored { .. }));
        assert!(c.check_writable().is_err());
    }

    #[test]
    fn compile_errors_propagate() {
        let dir = tempfile::tempdir().unwrap();
        let c = KernelCache::new(dir.path());
        let e = c
            .get_or_compile(&unit(&[]), "sm_90", (13, 0), || {
                Err(Error::Compile {
                    module: "test".into(),
                    arch: "sm_90".into(),
                    log: "error: expected ;".into(),
                })
            })
            .unwrap_err();
        assert!(e.to_string().contains("expected ;"));
        assert!(c.entries().unwrap().is_empty());
    }
}
