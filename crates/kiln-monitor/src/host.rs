//! Host figures from `/proc` (Linux). Elsewhere every field is `None`.

use crate::sample::HostSample;
use std::time::Instant;

/// Clock ticks per second for `/proc/PID/stat` times. Linux has reported 100 (`USER_HZ`) to
/// user space on every architecture kiln targets; reading `sysconf` would need `libc`.
const USER_HZ: f64 = 100.0;

/// Reads host figures; remembers the previous CPU reading to give a rate.
#[derive(Debug, Default)]
pub struct HostSampler {
    last: Option<(Instant, f64)>,
}

impl HostSampler {
    /// A sampler with no previous reading.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read the host and this process now.
    pub fn sample(&mut self) -> HostSample {
        let cpu = process_cpu_seconds();
        let now = Instant::now();
        let percent = match (self.last, cpu) {
            (Some((t0, c0)), Some(c1)) => {
                let dt = now.duration_since(t0).as_secs_f64();
                (dt > 0.0).then(|| 100.0 * (c1 - c0).max(0.0) / dt)
            }
            _ => None,
        };
        if let Some(c) = cpu {
            self.last = Some((now, c));
        }
        let (total, avail) = meminfo();
        HostSample {
            process_rss_bytes: process_rss_bytes(),
            process_cpu_seconds: cpu,
            process_cpu_percent: percent,
            memory_total_bytes: total,
            memory_available_bytes: avail,
        }
    }
}

/// This process's resident set size (`VmRSS` in `/proc/self/status`).
pub fn process_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    kb_field(&s, "VmRSS:")
}

/// CPU seconds (user + system) this process has used (`/proc/self/stat` fields 14 and 15).
pub fn process_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: split after it.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// `MemTotal` and `MemAvailable` from `/proc/meminfo`, in bytes.
pub fn meminfo() -> (Option<u64>, Option<u64>) {
    match std::fs::read_to_string("/proc/meminfo") {
        Ok(s) => (kb_field(&s, "MemTotal:"), kb_field(&s, "MemAvailable:")),
        Err(_) => (None, None),
    }
}

/// The command name of a process (`/proc/PID/comm`).
pub fn process_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn kb_field(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kb_fields() {
        let s = "MemTotal:       16384 kB\nMemAvailable:    2048 kB\n";
        assert_eq!(kb_field(s, "MemTotal:"), Some(16384 * 1024));
        assert_eq!(kb_field(s, "MemAvailable:"), Some(2048 * 1024));
        assert_eq!(kb_field(s, "Missing:"), None);
    }

    #[test]
    fn reads_this_process_on_linux() {
        let mut h = HostSampler::new();
        let a = h.sample();
        let b = h.sample();
        if cfg!(target_os = "linux") {
            assert!(a.process_rss_bytes.unwrap_or(0) > 0);
            assert!(a.memory_total_bytes.unwrap_or(0) > 0);
            assert!(b.process_cpu_percent.is_some());
        }
    }
}
