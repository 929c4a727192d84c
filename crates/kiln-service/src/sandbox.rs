//! What a worker process may see and do: the environment the supervisor starts it with
//! ([`worker_env`]: an allow-list, so no store URL, token or other secret of the server's
//! environment reaches code that decodes tenants' files) and the protections the worker
//! applies to itself before it reads any job ([`apply`]): an address-space limit
//! (`RLIMIT_AS`, CPU workers), `no_new_privs` and a seccomp filter.
//!
//! The seccomp filter is a deny-list (the listed syscalls fail with `EPERM`; everything else
//! is allowed), not an allow-list: the CUDA driver, NVRTC and NCCL make syscalls (ioctls on
//! the device files, `mmap` of device memory, threads, sockets for NCCL's proxy) that vary
//! with the driver version, and an allow-list that misses one takes every GPU worker down.
//! The denied calls are those a worker never needs and an exploited decoder would want:
//! debugging or reading other processes (`ptrace`, `process_vm_readv/writev`), changing
//! namespaces or mounts (`clone` with namespace flags too; `clone3`, whose flags a filter
//! cannot read, answers `ENOSYS` so the C library falls back to `clone`), loading kernel
//! code (modules, BPF, kexec), the kernel keyring,
//! perf events, and, on CPU workers, running other programs (`execve`; GPU workers keep it
//! because the CUDA driver may run `nvidia-modprobe` to create its device files).

use std::ffi::OsString;

/// Environment variables a worker gets from the server's environment; every other variable
/// (a store URL, tokens, cloud credentials) is dropped. kiln's own settings that are not
/// secrets are the `KILN_*` names listed in [`WORKER_KILN_VARS`].
pub const WORKER_VARS: [&str; 13] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "LD_LIBRARY_PATH",
    "RUST_BACKTRACE",
    "XDG_CACHE_HOME",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_CACHE_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "ASAN_OPTIONS",
    "LSAN_OPTIONS",
];

/// The `KILN_*` settings a worker reads (kiln's core config, logging, profiling, CUDA
/// switches). Not passed: `KILN_STORE_URL`, `KILN_TOKENS_FILE`, `KILN_TOKEN`, `KILN_SERVER`,
/// `KILN_SERVICE_CONFIG`, `KILN_SERVE_*`, `KILN_ALLOW_FAULT_INJECTION` (the server's).
pub const WORKER_KILN_VARS: [&str; 14] = [
    "KILN_LOG",
    "KILN_CONFIG",
    "KILN_DEVICES",
    "KILN_MIN_COMPUTE_CAPABILITY",
    "KILN_CACHE_DIR",
    "KILN_CPU_MEMORY_BUDGET",
    "KILN_GPU_MEMORY_LIMIT",
    "KILN_SYNC",
    "KILN_PROFILE",
    "KILN_NVRTC_EXTRA",
    "KILN_POISON_ALLOC",
    "KILN_MED_U8X4",
    "KILN_REQUIRE_GPU",
    "KILN_UNDER_SANITIZER",
];

/// The variables of `vars` a worker may have (see [`WORKER_VARS`]), plus `NCCL_*` (NCCL's
/// tuning switches for multi-GPU workers).
pub fn worker_env(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            WORKER_VARS.contains(&k.as_ref())
                || WORKER_KILN_VARS.contains(&k.as_ref())
                || k.starts_with("NCCL_")
        })
        .collect()
}

/// The address-space limit a CPU worker gets for `max_elements` (`workers.memory_limit =
/// "auto"`): 1 GiB for the program, its libraries and the runtime, 80 MiB per CPU for thread
/// stacks and malloc arenas (reserved address space, mostly never touched), and 64 bytes
/// per allowed element (an input decoded from u8 to f32, the copies a job makes, its output
/// and the result file written back).
pub fn auto_memory_limit(max_elements: u64) -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    (1u64 << 30)
        .saturating_add(cpus.saturating_mul(80 << 20))
        .saturating_add(max_elements.saturating_mul(64))
}

/// `workers.memory_limit`: the address-space limit of each CPU worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryLimit {
    /// [`auto_memory_limit`] of `limits.max_elements` (the default).
    Auto,
    /// No limit (`"none"`).
    Off,
    /// This many bytes (an integer, or a string such as `"8GiB"`, `"512MiB"`).
    Bytes(u64),
}

impl MemoryLimit {
    /// Parse `auto`, `none`, or bytes with an optional `KiB`/`MiB`/`GiB` suffix.
    pub fn parse(s: &str) -> Result<MemoryLimit, String> {
        let t = s.trim();
        match t {
            "auto" => return Ok(MemoryLimit::Auto),
            "none" | "off" => return Ok(MemoryLimit::Off),
            _ => {}
        }
        let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
            Some(i) => (&t[..i], t[i..].trim()),
            None => (t, ""),
        };
        let shift = match unit {
            "" | "B" => 0,
            "KiB" => 10,
            "MiB" => 20,
            "GiB" => 30,
            _ => {
                return Err(format!(
                    "workers.memory_limit = `{s}`: use auto, none, or bytes such as 8GiB"
                ))
            }
        };
        num.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1 << shift))
            .filter(|&n| n > 0)
            .map(MemoryLimit::Bytes)
            .ok_or_else(|| format!("workers.memory_limit = `{s}`: use auto, none, or bytes such as 8GiB"))
    }

    /// The limit in bytes for `max_elements` (`None`: off).
    pub fn bytes(self, max_elements: u64) -> Option<u64> {
        match self {
            MemoryLimit::Auto => Some(auto_memory_limit(max_elements)),
            MemoryLimit::Off => None,
            MemoryLimit::Bytes(b) => Some(b),
        }
    }
}

impl<'de> serde::Deserialize<'de> for MemoryLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(0) => Err(serde::de::Error::custom(
                "workers.memory_limit = 0; use \"none\" for no limit",
            )),
            Raw::N(n) => Ok(MemoryLimit::Bytes(n)),
            Raw::S(s) => MemoryLimit::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// What a worker asks of [`apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxOptions {
    /// `RLIMIT_AS` in bytes (`None`: none).
    pub memory_limit: Option<u64>,
    /// Whether the worker drives a GPU (no `RLIMIT_AS`, `execve` allowed; see the module
    /// docs).
    pub gpu: bool,
    /// `no_new_privs` and the seccomp filter (`workers.sandbox`).
    pub sandbox: bool,
}

/// Applies the protections of `opts` to this process; returns a line saying which are
/// active (the worker sends it in its ready message), or why one could not be applied.
pub fn apply(opts: &SandboxOptions) -> Result<String, String> {
    let mut active = Vec::new();
    match (opts.memory_limit, opts.gpu) {
        (Some(_), true) => active.push(
            "memory limit: off (GPU worker: the CUDA driver reserves address space far beyond \
             host memory, so RLIMIT_AS would stop the context from being created)"
                .to_string(),
        ),
        (Some(bytes), false) => {
            use rustix::process::{setrlimit, Resource, Rlimit};
            setrlimit(
                Resource::As,
                Rlimit {
                    current: Some(bytes),
                    maximum: Some(bytes),
                },
            )
            .map_err(|e| format!("setrlimit(RLIMIT_AS, {bytes}): {e}"))?;
            active.push(format!("memory limit: RLIMIT_AS {} MiB", bytes >> 20));
        }
        (None, _) => active.push("memory limit: off".into()),
    }
    if opts.sandbox {
        rustix::thread::set_no_new_privs(true).map_err(|e| format!("prctl(PR_SET_NO_NEW_PRIVS): {e}"))?;
        active.push("no_new_privs".into());
        active.push(seccomp::install(opts.gpu)?);
    } else {
        active.push("sandbox: off (workers.sandbox = false)".into());
    }
    Ok(active.join(", "))
}

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod seccomp {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;

    /// Syscalls no worker makes (see the module docs).
    const DENIED: &[(&str, libc::c_long)] = &[
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
        ("mount", libc::SYS_mount),
        ("umount2", libc::SYS_umount2),
        ("pivot_root", libc::SYS_pivot_root),
        ("chroot", libc::SYS_chroot),
        ("unshare", libc::SYS_unshare),
        ("setns", libc::SYS_setns),
        ("kexec_load", libc::SYS_kexec_load),
        ("kexec_file_load", libc::SYS_kexec_file_load),
        ("init_module", libc::SYS_init_module),
        ("finit_module", libc::SYS_finit_module),
        ("delete_module", libc::SYS_delete_module),
        ("bpf", libc::SYS_bpf),
        ("perf_event_open", libc::SYS_perf_event_open),
        ("keyctl", libc::SYS_keyctl),
        ("add_key", libc::SYS_add_key),
        ("request_key", libc::SYS_request_key),
        ("reboot", libc::SYS_reboot),
        ("swapon", libc::SYS_swapon),
        ("swapoff", libc::SYS_swapoff),
        ("acct", libc::SYS_acct),
        ("settimeofday", libc::SYS_settimeofday),
        ("clock_settime", libc::SYS_clock_settime),
        ("adjtimex", libc::SYS_adjtimex),
        ("open_by_handle_at", libc::SYS_open_by_handle_at),
        ("name_to_handle_at", libc::SYS_name_to_handle_at),
        ("userfaultfd", libc::SYS_userfaultfd),
        ("fanotify_init", libc::SYS_fanotify_init),
        ("quotactl", libc::SYS_quotactl),
        ("syslog", libc::SYS_syslog),
        ("vhangup", libc::SYS_vhangup),
        #[cfg(target_arch = "x86_64")]
        ("iopl", libc::SYS_iopl),
        #[cfg(target_arch = "x86_64")]
        ("ioperm", libc::SYS_ioperm),
    ];

    /// Programs a CPU worker may not run.
    const EXEC: &[(&str, libc::c_long)] = &[("execve", libc::SYS_execve), ("execveat", libc::SYS_execveat)];

    /// `clone` flags that make a new namespace: a new user namespace in particular opens
    /// kernel interfaces an unprivileged process otherwise cannot reach. `unshare` and
    /// `setns` are denied outright.
    const NAMESPACE_FLAGS: [libc::c_int; 7] = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];

    fn arch() -> TargetArch {
        if cfg!(target_arch = "x86_64") {
            TargetArch::x86_64
        } else {
            TargetArch::aarch64
        }
    }

    fn load(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: libc::c_int) -> Result<(), String> {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch(),
        )
        .map_err(|e| format!("seccomp filter: {e}"))?;
        let prog: BpfProgram = filter.try_into().map_err(|e| format!("seccomp filter: {e}"))?;
        seccompiler::apply_filter_all_threads(&prog).map_err(|e| format!("seccomp: {e}"))
    }

    /// Loads the filters on every thread of this process; says what they deny.
    pub(super) fn install(gpu: bool) -> Result<String, String> {
        let mut denied: Vec<(&str, libc::c_long)> = DENIED.to_vec();
        if !gpu {
            denied.extend_from_slice(EXEC);
        }
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
            denied.iter().map(|&(_, nr)| (nr, Vec::new())).collect();
        // clone with any namespace flag (rules of one syscall match if any matches)
        let ns = NAMESPACE_FLAGS
            .iter()
            .map(|&f| {
                let f = f as u64;
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(f), f)
                    .and_then(|c| SeccompRule::new(vec![c]))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("seccomp filter: {e}"))?;
        rules.insert(libc::SYS_clone, ns);
        load(rules, libc::EPERM)?;
        // clone3 passes its flags in memory a filter cannot read: it answers ENOSYS, and
        // glibc (like Docker's default profile expects) falls back to clone, whose flags
        // the rule above checks
        load(BTreeMap::from([(libc::SYS_clone3, Vec::new())]), libc::ENOSYS)?;
        Ok(format!(
            "seccomp: {} syscalls denied{}, clone of namespaces denied, clone3 ENOSYS",
            denied.len(),
            if gpu { "" } else { " (execve included)" }
        ))
    }
}

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod seccomp {
    /// No seccomp here: says so.
    pub(super) fn install(_gpu: bool) -> Result<String, String> {
        Ok("seccomp: not available on this platform".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Secrets of the server's environment never reach a worker; kiln's own settings and
    /// the system's do.
    #[test]
    fn workers_get_an_allow_listed_environment() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("KILN_STORE_URL", "postgres://kiln:secret@db/kiln"),
            ("KILN_TOKENS_FILE", "/etc/kiln/tokens"),
            ("KILN_TOKEN", "t0k3n"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("KILN_CACHE_DIR", "/var/cache/kiln"),
            ("KILN_LOG", "info"),
            ("NCCL_DEBUG", "WARN"),
            ("CUDA_VISIBLE_DEVICES", "0"),
            ("KILN_ALLOW_FAULT_INJECTION", "1"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<String> = worker_env(vars)
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            kept,
            [
                "PATH",
                "KILN_CACHE_DIR",
                "KILN_LOG",
                "NCCL_DEBUG",
                "CUDA_VISIBLE_DEVICES"
            ]
        );
    }

    #[test]
    fn memory_limits_parse() {
        assert_eq!(MemoryLimit::parse("auto"), Ok(MemoryLimit::Auto));
        assert_eq!(MemoryLimit::parse("none"), Ok(MemoryLimit::Off));
        assert_eq!(MemoryLimit::parse("8GiB"), Ok(MemoryLimit::Bytes(8 << 30)));
        assert_eq!(MemoryLimit::parse("512 MiB"), Ok(MemoryLimit::Bytes(512 << 20)));
        assert!(MemoryLimit::parse("lots")
            .unwrap_err()
            .contains("workers.memory_limit"));
        assert!(MemoryLimit::parse("0").is_err());
    }

    #[test]
    fn the_auto_limit_grows_with_the_element_limit() {
        let a = auto_memory_limit(16 << 20);
        assert!(a >= (1 << 30) + (1 << 30), "{a}");
        assert_eq!(auto_memory_limit(32 << 20) - a, 64 * (16 << 20));
    }
}
