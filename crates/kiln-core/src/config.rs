//! Configuration: compiled-in defaults, then a TOML file, then `KILN_*` environment
//! variables, validated once into [`Config`]. Each effective value remembers where it came
//! from so that `kiln doctor` can show it.
//!
//! File (`KILN_CONFIG`, else `$XDG_CONFIG_HOME/kiln/config.toml` when it exists):
//! ```toml
//! [devices]
//! allowed = [0, "GPU-5a3f09c1-12ab-34cd-56ef-0123456789ab"]   # or "0,1", or "all"
//! min_compute_capability = "7.0"
//! [cache]
//! dir = "/var/cache/kiln"
//! [memory]
//! gpu_limit = "8GiB"          # or "50%" of the device, or bytes
//! cpu_budget = "2GiB"         # host bytes one CPU op may allocate (OOM-adaptive batching)
//! ```
//! Environment: `KILN_DEVICES`, `KILN_MIN_COMPUTE_CAPABILITY`, `KILN_CACHE_DIR`,
//! `KILN_GPU_MEMORY_LIMIT`, `KILN_CPU_MEMORY_BUDGET`.

use crate::device::{parse_allowed_list, DevicePolicy, DeviceSelector};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where an effective setting came from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// kiln's compiled-in default.
    Default,
    /// The TOML file at this path.
    File(PathBuf),
    /// This environment variable.
    Env(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "file {}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
        }
    }
}

/// The validated, effective configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Which devices may be used and the minimum compute capability.
    pub devices: DevicePolicy,
    /// The kernel cache directory.
    pub cache_dir: PathBuf,
    /// How much device memory kiln's pool may hold.
    pub gpu_memory_limit: Option<MemoryLimit>,
    /// Bytes of host memory one CPU op may allocate (`None`: unlimited).
    pub cpu_memory_budget: Option<u64>,
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// Provenance of each setting, keyed by its dotted name.
    pub sources: BTreeMap<String, Source>,
}

/// A device-memory limit: bytes, or a fraction of the device's memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryLimit {
    /// At most this many bytes.
    Bytes(u64),
    /// At most this fraction (0, 1] of the device's total memory.
    Fraction(f64),
}

impl MemoryLimit {
    /// Parse `8GiB`, `512MiB`, `1.5GB`, `1048576`, or `50%`.
    pub fn parse(s: &str) -> std::result::Result<MemoryLimit, String> {
        let t = s.trim();
        let bad = || format!("`{t}` is not a memory size; write e.g. 8GiB, 512MiB, 2GB, 1048576 or 50%");
        if let Some(p) = t.strip_suffix('%') {
            let f: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(f > 0.0 && f <= 100.0) {
                return Err(format!("`{t}`: a percentage must be in (0, 100]"));
            }
            return Ok(MemoryLimit::Fraction(f / 100.0));
        }
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: f64 = num.parse().map_err(|_| bad())?;
        let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kib" => 1024.0,
            "kb" => 1e3,
            "m" | "mib" => 1024.0 * 1024.0,
            "mb" => 1e6,
            "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
            "gb" => 1e9,
            "t" | "tib" => 1024f64.powi(4),
            "tb" => 1e12,
            _ => return Err(bad()),
        };
        let bytes = n * mult;
        if !(bytes >= 1.0 && bytes.is_finite()) {
            return Err(format!("`{t}`: the limit must be at least 1 byte"));
        }
        Ok(MemoryLimit::Bytes(bytes as u64))
    }

    /// The limit in bytes on a device of `total` bytes.
    pub fn bytes(self, total: u64) -> u64 {
        match self {
            MemoryLimit::Bytes(b) => b,
            MemoryLimit::Fraction(f) => (total as f64 * f) as u64,
        }
    }
}

impl std::fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryLimit::Bytes(b) => write!(f, "{b} B"),
            MemoryLimit::Fraction(x) => write!(f, "{}% of the device", x * 100.0),
        }
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    devices: Option<RawDevices>,
    cache: Option<RawCache>,
    memory: Option<RawMemory>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    gpu_limit: Option<String>,
    cpu_budget: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDevices {
    allowed: Option<toml::Value>,
    min_compute_capability: Option<toml::Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCache {
    dir: Option<PathBuf>,
}

/// The default kernel cache directory: `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`, else a
/// directory under the system temp dir.
pub fn default_cache_dir() -> PathBuf {
    dirs::cache_dir()
        .map(|d| d.join("kiln"))
        .unwrap_or_else(|| std::env::temp_dir().join("kiln-cache"))
}

/// The config file read when `KILN_CONFIG` is unset: `$XDG_CONFIG_HOME/kiln/config.toml`.
pub fn default_config_file() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("kiln").join("config.toml"))
}

fn parse_cc(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("`{s}` is not a compute capability; write MAJOR.MINOR, e.g. 7.0 or 9.0");
    let (a, b) = s.trim().split_once('.').ok_or_else(bad)?;
    let major: u32 = a.parse().map_err(|_| bad())?;
    let minor: u32 = b.parse().map_err(|_| bad())?;
    if !(1..=20).contains(&major) || minor > 9 {
        return Err(bad());
    }
    Ok((major, minor))
}

impl Default for Config {
    fn default() -> Self {
        let mut sources = BTreeMap::new();
        for k in [
            "devices.allowed",
            "devices.min_compute_capability",
            "cache.dir",
            "memory.gpu_limit",
            "memory.cpu_budget",
        ] {
            sources.insert(k.to_string(), Source::Default);
        }
        Config {
            devices: DevicePolicy::default(),
            cache_dir: default_cache_dir(),
            gpu_memory_limit: None,
            cpu_memory_budget: None,
            file: None,
            sources,
        }
    }
}

impl Config {
    /// Load from the process environment: `explicit` (a `--config` flag) or `KILN_CONFIG` or
    /// the default file if it exists, then the `KILN_*` variables.
    pub fn load(explicit: Option<&Path>) -> Result<Config> {
        let env = |k: &str| std::env::var(k).ok();
        let file = explicit
            .map(Path::to_path_buf)
            .or_else(|| env("KILN_CONFIG").map(PathBuf::from));
        let (file, must_exist) = match file {
            Some(f) => (Some(f), true),
            None => (default_config_file().filter(|f| f.is_file()), false),
        };
        Self::load_from(file.as_deref(), must_exist, &env)
    }

    /// Load with an explicit file and environment lookup (used by tests).
    pub fn load_from(
        file: Option<&Path>,
        must_exist: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config> {
        let mut cfg = Config::default();
        if let Some(path) = file {
            match std::fs::read_to_string(path) {
                Ok(text) => cfg.apply_file(path, &text)?,
                Err(e) if !must_exist && e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::Io {
                        path: path.to_path_buf(),
                        source: e,
                    })
                }
            }
        }
        cfg.apply_env(env)?;
        Ok(cfg)
    }

    fn apply_file(&mut self, path: &Path, text: &str) -> Result<()> {
        let src = Source::File(path.to_path_buf());
        let err = |key: &str, value: String, reason: String| Error::Config {
            source_name: path.display().to_string(),
            key: key.into(),
            value,
            reason,
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            err(
                "(file)",
                String::new(),
                format!("not valid kiln TOML: {}", e.message()),
            )
        })?;
        self.file = Some(path.to_path_buf());
        if let Some(d) = raw.devices {
            if let Some(v) = d.allowed {
                let list = allowed_from_toml(&v).map_err(|r| err("devices.allowed", v.to_string(), r))?;
                self.devices.allowed = list;
                self.sources.insert("devices.allowed".into(), src.clone());
            }
            if let Some(v) = d.min_compute_capability {
                let s = match &v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Float(f) => format!("{f:.1}"),
                    other => other.to_string(),
                };
                self.devices.min_compute_capability =
                    parse_cc(&s).map_err(|r| err("devices.min_compute_capability", v.to_string(), r))?;
                self.sources
                    .insert("devices.min_compute_capability".into(), src.clone());
            }
        }
        if let Some(c) = raw.cache {
            if let Some(dir) = c.dir {
                if dir.as_os_str().is_empty() {
                    return Err(err("cache.dir", String::new(), "must not be empty".into()));
                }
                self.cache_dir = dir;
                self.sources.insert("cache.dir".into(), src.clone());
            }
        }
        if let Some(m) = raw.memory {
            if let Some(v) = m.gpu_limit {
                self.gpu_memory_limit =
                    Some(MemoryLimit::parse(&v).map_err(|r| err("memory.gpu_limit", v.clone(), r))?);
                self.sources.insert("memory.gpu_limit".into(), src.clone());
            }
            if let Some(v) = m.cpu_budget {
                self.cpu_memory_budget =
                    Some(cpu_budget(&v).map_err(|r| err("memory.cpu_budget", v.clone(), r))?);
                self.sources.insert("memory.cpu_budget".into(), src);
            }
        }
        Ok(())
    }

    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        let err = |key: &str, value: &str, reason: String| Error::Config {
            source_name: format!("environment variable {key}"),
            key: key.into(),
            value: value.into(),
            reason,
        };
        if let Some(v) = env("KILN_DEVICES") {
            self.devices.allowed = parse_allowed_list(&v).map_err(|r| err("KILN_DEVICES", &v, r))?;
            self.sources
                .insert("devices.allowed".into(), Source::Env("KILN_DEVICES".into()));
        }
        if let Some(v) = env("KILN_MIN_COMPUTE_CAPABILITY") {
            self.devices.min_compute_capability =
                parse_cc(&v).map_err(|r| err("KILN_MIN_COMPUTE_CAPABILITY", &v, r))?;
            self.sources.insert(
                "devices.min_compute_capability".into(),
                Source::Env("KILN_MIN_COMPUTE_CAPABILITY".into()),
            );
        }
        if let Some(v) = env("KILN_CACHE_DIR") {
            if v.trim().is_empty() {
                return Err(err("KILN_CACHE_DIR", &v, "must not be empty".into()));
            }
            self.cache_dir = PathBuf::from(v);
            self.sources
                .insert("cache.dir".into(), Source::Env("KILN_CACHE_DIR".into()));
        }
        if let Some(v) = env("KILN_CPU_MEMORY_BUDGET") {
            self.cpu_memory_budget = Some(cpu_budget(&v).map_err(|r| err("KILN_CPU_MEMORY_BUDGET", &v, r))?);
            self.sources.insert(
                "memory.cpu_budget".into(),
                Source::Env("KILN_CPU_MEMORY_BUDGET".into()),
            );
        }
        if let Some(v) = env("KILN_GPU_MEMORY_LIMIT") {
            self.gpu_memory_limit =
                Some(MemoryLimit::parse(&v).map_err(|r| err("KILN_GPU_MEMORY_LIMIT", &v, r))?);
            self.sources.insert(
                "memory.gpu_limit".into(),
                Source::Env("KILN_GPU_MEMORY_LIMIT".into()),
            );
        }
        Ok(())
    }

    /// The effective settings as `(key, value, source)` rows, for `kiln doctor`.
    pub fn rows(&self) -> Vec<(String, String, String)> {
        let src = |k: &str| {
            self.sources
                .get(k)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "default".into())
        };
        let (a, b) = self.devices.min_compute_capability;
        vec![
            (
                "devices.allowed".into(),
                self.devices.describe(),
                src("devices.allowed"),
            ),
            (
                "devices.min_compute_capability".into(),
                format!("{a}.{b}"),
                src("devices.min_compute_capability"),
            ),
            (
                "cache.dir".into(),
                self.cache_dir.display().to_string(),
                src("cache.dir"),
            ),
            (
                "memory.gpu_limit".into(),
                self.gpu_memory_limit
                    .map(|l| l.to_string())
                    .unwrap_or_else(|| "none".into()),
                src("memory.gpu_limit"),
            ),
            (
                "memory.cpu_budget".into(),
                self.cpu_memory_budget
                    .map(|b| format!("{b} B"))
                    .unwrap_or_else(|| "none".into()),
                src("memory.cpu_budget"),
            ),
        ]
    }
}

fn cpu_budget(s: &str) -> std::result::Result<u64, String> {
    match MemoryLimit::parse(s)? {
        MemoryLimit::Bytes(b) => Ok(b),
        MemoryLimit::Fraction(_) => Err("the CPU budget takes bytes (e.g. 2GiB), not a percentage".into()),
    }
}

fn allowed_from_toml(v: &toml::Value) -> std::result::Result<Option<Vec<DeviceSelector>>, String> {
    match v {
        toml::Value::String(s) => parse_allowed_list(s),
        toml::Value::Integer(i) if *i >= 0 => Ok(Some(vec![DeviceSelector::Ordinal(*i as usize)])),
        toml::Value::Array(items) => items
            .iter()
            .map(|it| match it {
                toml::Value::Integer(i) if *i >= 0 => Ok(DeviceSelector::Ordinal(*i as usize)),
                toml::Value::String(s) => s.parse(),
                other => Err(format!("`{other}` is neither an ordinal nor a UUID string")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(format!(
            "`{other}` is not a device list; use an array of ordinals and UUID strings, or \"all\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn defaults() {
        let c = Config::load_from(None, false, &env_of(&[])).unwrap();
        assert_eq!(c.devices.allowed, None);
        assert_eq!(c.devices.min_compute_capability, (7, 0));
        assert_eq!(c.sources["cache.dir"], Source::Default);
    }

    #[test]
    fn file_overrides_defaults_and_env_overrides_file() {
        let f = write("[devices]\nallowed = [1, \"GPU-5a3f09c1-12ab-34cd-56ef-0123456789ab\"]\nmin_compute_capability = \"8.0\"\n[cache]\ndir = \"/tmp/from-file\"\n");
        let c = Config::load_from(Some(f.path()), true, &env_of(&[])).unwrap();
        assert_eq!(c.devices.allowed.as_ref().unwrap().len(), 2);
        assert_eq!(c.devices.min_compute_capability, (8, 0));
        assert_eq!(c.cache_dir, PathBuf::from("/tmp/from-file"));
        assert_eq!(c.sources["cache.dir"], Source::File(f.path().to_path_buf()));

        let c = Config::load_from(
            Some(f.path()),
            true,
            &env_of(&[("KILN_DEVICES", "0"), ("KILN_CACHE_DIR", "/tmp/from-env")]),
        )
        .unwrap();
        assert_eq!(c.devices.allowed, Some(vec![DeviceSelector::Ordinal(0)]));
        assert_eq!(c.cache_dir, PathBuf::from("/tmp/from-env"));
        // not overridden by env: stays from the file
        assert_eq!(c.devices.min_compute_capability, (8, 0));
        assert_eq!(c.sources["devices.allowed"], Source::Env("KILN_DEVICES".into()));
        assert_eq!(
            c.sources["devices.min_compute_capability"],
            Source::File(f.path().to_path_buf())
        );
    }

    #[test]
    fn malformed_values_are_clear_errors() {
        for (k, v) in [
            ("KILN_DEVICES", "0,,1"),
            ("KILN_DEVICES", "GPU-nothex"),
            ("KILN_DEVICES", "-1"),
            ("KILN_MIN_COMPUTE_CAPABILITY", "nine"),
            ("KILN_MIN_COMPUTE_CAPABILITY", "9"),
            ("KILN_MIN_COMPUTE_CAPABILITY", "9.10"),
            ("KILN_CACHE_DIR", ""),
            ("KILN_GPU_MEMORY_LIMIT", "lots"),
            ("KILN_GPU_MEMORY_LIMIT", "0"),
            ("KILN_GPU_MEMORY_LIMIT", "150%"),
            ("KILN_GPU_MEMORY_LIMIT", "8 XB"),
            ("KILN_CPU_MEMORY_BUDGET", "50%"),
        ] {
            let e = Config::load_from(None, false, &env_of(&[(k, v)])).unwrap_err();
            let s = e.to_string();
            assert!(matches!(e, Error::Config { .. }), "{k}={v}: {s}");
            assert!(s.contains(k), "{s}");
        }
        for text in [
            "[devices]\nallowed = 1.5\n",
            "[devices]\nallowed = [true]\n",
            "[devices]\nmin_compute_capability = \"x\"\n",
            "[devicez]\n",
            "[devices]\nalowed = [0]\n",
            "not toml at all [",
        ] {
            let f = write(text);
            let e = Config::load_from(Some(f.path()), true, &env_of(&[])).unwrap_err();
            assert!(matches!(e, Error::Config { .. }), "{text}: {e}");
        }
    }

    #[test]
    fn missing_explicit_file_is_an_error_but_missing_default_is_not() {
        let p = Path::new("/nonexistent/kiln/config.toml");
        assert!(matches!(
            Config::load_from(Some(p), true, &env_of(&[])).unwrap_err(),
            Error::Io { .. }
        ));
        assert!(Config::load_from(Some(p), false, &env_of(&[])).is_ok());
    }

    #[test]
    fn memory_limits_parse() {
        assert_eq!(MemoryLimit::parse("8GiB").unwrap(), MemoryLimit::Bytes(8 << 30));
        assert_eq!(
            MemoryLimit::parse("512 MiB").unwrap(),
            MemoryLimit::Bytes(512 << 20)
        );
        assert_eq!(
            MemoryLimit::parse("2GB").unwrap(),
            MemoryLimit::Bytes(2_000_000_000)
        );
        assert_eq!(
            MemoryLimit::parse("1048576").unwrap(),
            MemoryLimit::Bytes(1 << 20)
        );
        assert_eq!(MemoryLimit::parse("50%").unwrap(), MemoryLimit::Fraction(0.5));
        assert_eq!(MemoryLimit::Fraction(0.5).bytes(1000), 500);
        let f = write("[memory]\ngpu_limit = \"25%\"\n");
        let c = Config::load_from(
            Some(f.path()),
            true,
            &env_of(&[("KILN_GPU_MEMORY_LIMIT", "1GiB")]),
        )
        .unwrap();
        assert_eq!(c.gpu_memory_limit, Some(MemoryLimit::Bytes(1 << 30)));
        let c = Config::load_from(Some(f.path()), true, &env_of(&[])).unwrap();
        assert_eq!(c.gpu_memory_limit, Some(MemoryLimit::Fraction(0.25)));
    }

    #[test]
    fn float_capability_in_file_is_accepted() {
        let f = write("[devices]\nmin_compute_capability = 8.6\n");
        let c = Config::load_from(Some(f.path()), true, &env_of(&[])).unwrap();
        assert_eq!(c.devices.min_compute_capability, (8, 6));
    }
}
