//! The service's configuration: compiled-in defaults, then a TOML file (`kiln serve
//! --service-config FILE`), then `KILN_SERVE_*` / `KILN_TOKENS_FILE` variables, then flags;
//! validated into one [`ServiceConfig`]. docs/operations.md lists every key.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// One token as configured: a name, the token's SHA-256 (or the token itself, hashed when
/// loaded and then dropped) and optional limits.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TokenConfig {
    /// The principal's name (jobs are owned by it; shown in logs, never the token).
    pub name: String,
    /// Hex SHA-256 of the token.
    pub sha256: Option<String>,
    /// The token in clear (discouraged: prefer `sha256`).
    pub token: Option<String>,
    /// Job kinds it may submit (`None`: all).
    pub kinds: Option<Vec<String>>,
    /// Jobs in flight (queued or running) at most; overrides `limits.max_in_flight_per_token`.
    pub max_in_flight: Option<u64>,
}

/// Request and job limits.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Bytes of a job submission's body.
    pub max_body_bytes: u64,
    /// Bytes of an uploaded blob.
    pub max_blob_bytes: u64,
    /// Input elements of one job (options, pixels, voxels, matrix elements).
    pub max_elements: u64,
    /// Jobs in flight per token.
    pub max_in_flight_per_token: u64,
    /// Jobs queued or running in all: beyond it a submission gets 429.
    pub max_queue: u64,
    /// Jobs in one `POST /v1/jobs:batch` (the body stays within `max_body_bytes`).
    pub max_batch_jobs: u64,
    /// Seconds a request may take (a `?wait=` adds its wait).
    pub request_timeout_s: u64,
    /// Longest `?wait=` honoured, seconds.
    pub max_wait_s: u64,
    /// Seconds a job may run on a worker before the worker is killed and the job failed;
    /// a submission may ask for less with `"deadline_s"`.
    pub job_deadline_s: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 << 20,
            max_blob_bytes: 256 << 20,
            max_elements: 16 << 20,
            max_in_flight_per_token: 10_000,
            max_queue: 10_000,
            max_batch_jobs: 1000,
            request_timeout_s: 30,
            max_wait_s: 60,
            job_deadline_s: 300,
        }
    }
}

/// Worker processes.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Workers {
    /// GPUs to run a worker on: `"auto"` (every allowed GPU, none without a driver), `"none"`,
    /// or a list of CUDA ordinals such as `[0, 1]`.
    pub gpus: GpuSelection,
    /// Multi-device workers: each entry is one worker process that owns a set of devices,
    /// written as `kiln price --devices` spells them (`"0,1"`, `"all"`, `"cpu+0,1"`,
    /// `"cpu"`). Such a worker splits its jobs' batchable work (option books, element-wise
    /// maps) over its devices through kiln's executor, with the bits of one device; other
    /// jobs run on its first device. When set, the groups are the GPU workers: `gpus` must
    /// be left at `"auto"` or `"none"` and is not used. Empty (the default): one worker per
    /// GPU.
    pub groups: Vec<String>,
    /// CPU workers (besides the GPU ones).
    pub cpu_workers: usize,
    /// Attempts of a job before it fails (a worker crash or sticky error counts as one).
    pub max_attempts: u32,
    /// Milliseconds between heartbeats to an idle worker.
    pub heartbeat_ms: u64,
    /// Milliseconds a worker may take to answer a heartbeat before it is killed.
    pub heartbeat_timeout_ms: u64,
    /// Seconds a worker may take to start (create its runtime) before it is killed.
    pub start_timeout_s: u64,
    /// The worker program (default: this executable, `kiln worker`).
    pub program: Option<PathBuf>,
    /// Address-space limit (`RLIMIT_AS`) of each CPU worker: `"auto"` (from
    /// `limits.max_elements`, see `sandbox::auto_memory_limit`), `"none"`, or bytes (`8589934592`,
    /// `"8GiB"`). GPU workers get none (see crate::sandbox). A worker past it fails its job
    /// with `resource_exhausted`.
    pub memory_limit: crate::sandbox::MemoryLimit,
    /// `no_new_privs` and a seccomp filter in every worker (`false` only for debugging).
    pub sandbox: bool,
}

impl Default for Workers {
    fn default() -> Self {
        Workers {
            gpus: GpuSelection::Auto,
            groups: Vec::new(),
            cpu_workers: 1,
            max_attempts: 3,
            heartbeat_ms: 1000,
            heartbeat_timeout_ms: 5000,
            start_timeout_s: 60,
            program: None,
            memory_limit: crate::sandbox::MemoryLimit::Auto,
            sandbox: true,
        }
    }
}

impl Workers {
    /// `groups` parsed, in order (empty when unset). An entry that does not parse, a GPU
    /// ordinal named by two groups (two processes would share it: name it twice in one
    /// group, `"0,0"`, for two streams), or `groups` with a `gpus` list is an error that
    /// names the entry.
    pub fn device_groups(&self) -> Result<Vec<kiln::executor::DeviceSet>, String> {
        use kiln::executor::GpuSelection as G;
        if self.groups.is_empty() {
            return Ok(Vec::new());
        }
        if let GpuSelection::List(l) = &self.gpus {
            return Err(format!(
                "workers.groups and workers.gpus = {l:?} both give GPUs workers; with groups, leave gpus \"auto\" or \"none\""
            ));
        }
        let mut sets: Vec<kiln::executor::DeviceSet> = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            let set: kiln::executor::DeviceSet = g
                .parse()
                .map_err(|e: kiln::Error| format!("workers.groups[{i}] = `{g}`: {e}"))?;
            for (j, other) in sets.iter().enumerate() {
                let clash = match (&set.gpus, &other.gpus) {
                    (G::None, _) | (_, G::None) => false,
                    (G::All, _) | (_, G::All) => true,
                    (G::Ordinals(a), G::Ordinals(b)) => a.iter().any(|o| b.contains(o)),
                };
                if clash {
                    return Err(format!(
                        "workers.groups[{i}] = `{g}` and workers.groups[{j}] = `{other}` share a GPU; \
                         a GPU belongs to one worker process"
                    ));
                }
            }
            sets.push(set);
        }
        Ok(sets)
    }
}

/// Which GPUs get a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// Every GPU the device policy allows.
    Auto,
    /// None.
    None,
    /// These CUDA ordinals.
    List(Vec<usize>),
}

impl GpuSelection {
    /// Parse `auto`, `none` or `0,1`.
    pub fn parse(s: &str) -> Result<GpuSelection, String> {
        match s.trim() {
            "auto" => Ok(GpuSelection::Auto),
            "none" | "" => Ok(GpuSelection::None),
            list => list
                .split(',')
                .map(|x| {
                    x.trim()
                        .parse::<usize>()
                        .map_err(|_| format!("`{x}` is not a GPU ordinal"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(GpuSelection::List),
        }
    }
}

impl<'de> Deserialize<'de> for GpuSelection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            S(String),
            L(Vec<usize>),
        }
        match Raw::deserialize(d)? {
            Raw::S(s) => GpuSelection::parse(&s).map_err(serde::de::Error::custom),
            Raw::L(l) => Ok(GpuSelection::List(l)),
        }
    }
}

/// Dynamic batching (Triton's: a maximum batch and a maximum queue delay).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Batching {
    /// Merge same-kind small jobs on a worker.
    pub enabled: bool,
    /// Jobs per batch at most.
    pub max_batch: usize,
    /// Milliseconds the oldest job may wait for a batch to fill.
    pub max_queue_delay_ms: u64,
    /// Jobs an unbatched slot (batching off, or `max_batch = 1`) claims at most in one store
    /// call: the fair head's job and further queued jobs of its batch key (so of its token),
    /// never more than the slot's share of that key's queue. The worker runs them one by
    /// one (nothing merged) and their ends are stored in one transaction. 1 claims one job
    /// at a time.
    pub claim_batch: usize,
}

impl Default for Batching {
    fn default() -> Self {
        Batching {
            enabled: true,
            max_batch: 64,
            max_queue_delay_ms: 2,
            claim_batch: 16,
        }
    }
}

/// Result retention.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Results {
    /// Seconds a finished job (and its result) is kept.
    pub ttl_s: u64,
    /// Bytes of results and result blobs kept per token at most: past it the token's own
    /// oldest finished jobs go first; another token's are never touched.
    pub max_bytes: u64,
    /// Arrays with more elements than this are returned as NPY blobs, not inline JSON.
    pub inline_max_elements: usize,
}

impl Default for Results {
    fn default() -> Self {
        Results {
            ttl_s: 7 * 24 * 3600,
            max_bytes: 10 << 30,
            inline_max_elements: 65_536,
        }
    }
}

/// Uploaded blobs: expiry and a quota per token.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BlobLimits {
    /// Seconds an uploaded blob is kept; then it is refused (404) and the periodic sweep
    /// deletes it. Result blobs follow `results.ttl_s`.
    pub ttl_s: u64,
    /// Bytes of uploaded blobs one token may keep: an upload past it gets 413
    /// `quota_exceeded` (delete blobs with `DELETE /v1/blobs/{id}` or let them expire).
    pub max_bytes_per_token: u64,
}

impl Default for BlobLimits {
    fn default() -> Self {
        BlobLimits {
            ttl_s: 7 * 24 * 3600,
            max_bytes_per_token: 10 << 30,
        }
    }
}

/// How queued work is shared between tokens.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Scheduling {
    /// Worker slots (of all nodes sharing the store) one token's jobs may hold at once;
    /// 0: no cap. Work of a token at its cap waits even while slots are idle.
    pub max_workers_per_token: u32,
}

/// TLS (rustls), off by default.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

/// The HTTP listener's protections (the same for the plain and the TLS listener); see
/// `crate::listener` for how each works.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ListenerConfig {
    /// Milliseconds a connection has to complete a request head: from its accept (TLS: from
    /// the end of its handshake, which gets as long again) for the first request, from the
    /// first byte of the next request on a kept-alive connection. Past it the connection is
    /// closed (slowloris).
    pub header_read_timeout_ms: u64,
    /// Milliseconds a kept-alive connection may sit between requests (nothing in flight, no
    /// byte of a next request) before it is closed.
    pub idle_timeout_ms: u64,
    /// Connections served at once at most (lowered to the process's open-file limit less a
    /// headroom for the store, blobs and workers). At the cap a new connection closes the
    /// oldest one that has no request in flight, preferring one that never completed a
    /// request; when every connection has a request in flight it gets a `health_reserve`
    /// slot, or is closed at once when those are taken too.
    pub max_connections: usize,
    /// Connections past the cap that answer only `/healthz` and `/readyz` (one request each;
    /// anything else gets 503 `unavailable`), so a probe is answered while every ordinary
    /// slot has a request in flight.
    pub health_reserve: usize,
    /// Also serve HTTP/2 (prior knowledge on the plain listener, ALPN `h2` with TLS). Off:
    /// HTTP/1.1 only, and an HTTP/2 preface is refused.
    pub http2: bool,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            max_connections: 1024,
            health_reserve: 8,
            http2: false,
        }
    }
}

impl ListenerConfig {
    /// The header-read timeout.
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    /// The keep-alive idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}

/// The job store.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite` (the default: one node, the file is `DATA_DIR/jobs.sqlite3`) or a
    /// `postgres://user@host:port/db` URL (many nodes sharing one queue; blobs then live
    /// under a data dir that every node shares, see docs/deployment.md).
    pub url: String,
    /// fsync every commit (`true`) or only at checkpoints (`false`: a power loss may drop the
    /// last commits; a process crash does not). SQLite only.
    pub synchronous_full: bool,
    /// Connections in the PostgreSQL pool.
    pub pool_size: usize,
    /// Milliseconds a claimed job's lease lasts without a renewal: a node that dies holding
    /// jobs loses them to other nodes after this long. Heartbeats renew it every second.
    pub lease_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: "sqlite".into(),
            synchronous_full: true,
            pool_size: 16,
            lease_ms: 30_000,
        }
    }
}

impl StoreConfig {
    /// Whether the URL names PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.url.starts_with("postgres://") || self.url.starts_with("postgresql://")
    }

    /// The lease.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }
}

/// The service's configuration.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceConfig {
    /// Address to listen on (`127.0.0.1:8080`; port 0 picks a free port).
    pub listen: String,
    /// Where the store, blobs and results live.
    pub data_dir: PathBuf,
    /// Tokens.
    pub tokens: Vec<TokenConfig>,
    /// A file of tokens, one per line: `NAME sha256:HEX|TOKEN [kinds=a,b] [max_in_flight=N]`.
    pub tokens_file: Option<PathBuf>,
    /// TLS.
    pub tls: Option<TlsConfig>,
    /// The listener's timeouts, connection cap and protocols.
    pub listener: ListenerConfig,
    /// Limits.
    pub limits: Limits,
    /// Workers.
    pub workers: Workers,
    /// Batching.
    pub batching: Batching,
    /// Results.
    pub results: Results,
    /// Uploaded blobs.
    pub blobs: BlobLimits,
    /// Sharing workers between tokens.
    pub scheduling: Scheduling,
    /// Splitting large `price` books into shards any node may run (crate::shard).
    pub sharding: crate::shard::Sharding,
    /// The store.
    pub store: StoreConfig,
    /// Accept the `fault` job kind (tests and drills only), from tokens that name it in
    /// their `kinds`.
    pub allow_fault_injection: bool,
    /// Accept the `user_kernel` job kind: users' own element-wise, reduction and raw CUDA
    /// kernels, each run in a supervised worker (a kernel that faults ends its worker, never
    /// the server). Off, such a job is refused with 403 `forbidden` naming this setting.
    /// Tokens' `kinds` still apply.
    pub allow_user_kernels: bool,
    /// Seconds a shutdown waits for running jobs before re-queueing them.
    pub drain_timeout_s: u64,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        ServiceConfig {
            listen: "127.0.0.1:8080".into(),
            data_dir: default_data_dir(),
            tokens: Vec::new(),
            tokens_file: None,
            tls: None,
            listener: ListenerConfig::default(),
            limits: Limits::default(),
            workers: Workers::default(),
            batching: Batching::default(),
            results: Results::default(),
            blobs: BlobLimits::default(),
            scheduling: Scheduling::default(),
            sharding: crate::shard::Sharding::default(),
            store: StoreConfig::default(),
            allow_fault_injection: false,
            allow_user_kernels: false,
            drain_timeout_s: 30,
        }
    }
}

/// `$XDG_DATA_HOME/kiln/service`, else a directory under the temp dir.
pub fn default_data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .map(|d| d.join("kiln").join("service"))
        .unwrap_or_else(|| std::env::temp_dir().join("kiln-service"))
}

impl ServiceConfig {
    /// Parse a TOML file's text.
    pub fn from_toml(text: &str) -> Result<ServiceConfig, String> {
        toml::from_str(text).map_err(|e| format!("not valid service TOML: {}", e.message()))
    }

    /// Defaults, then `file`, then the environment (`KILN_SERVE_LISTEN`,
    /// `KILN_SERVE_DATA_DIR`, `KILN_STORE_URL`, `KILN_TOKENS_FILE`,
    /// `KILN_ALLOW_FAULT_INJECTION`, `KILN_ALLOW_USER_KERNELS`).
    pub fn load(
        file: Option<&std::path::Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ServiceConfig, String> {
        let mut c = match file {
            Some(p) => {
                let t = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                Self::from_toml(&t).map_err(|e| format!("{}: {e}", p.display()))?
            }
            None => ServiceConfig::default(),
        };
        if let Some(v) = env("KILN_SERVE_LISTEN") {
            c.listen = v;
        }
        if let Some(v) = env("KILN_SERVE_DATA_DIR") {
            c.data_dir = PathBuf::from(v);
        }
        if let Some(v) = env("KILN_STORE_URL") {
            c.store.url = v;
        }
        if let Some(v) = env("KILN_TOKENS_FILE") {
            c.tokens_file = Some(PathBuf::from(v));
        }
        if let Some(v) = env("KILN_ALLOW_FAULT_INJECTION") {
            c.allow_fault_injection = matches!(v.as_str(), "1" | "true" | "yes");
        }
        if let Some(v) = env("KILN_ALLOW_USER_KERNELS") {
            c.allow_user_kernels = matches!(v.as_str(), "1" | "true" | "yes");
        }
        Ok(c)
    }

    /// The listen address, parsed.
    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|_| format!("listen = `{}` is not an address like 127.0.0.1:8080", self.listen))
    }

    /// Check what can be checked without the tokens loaded.
    pub fn validate(&self) -> Result<(), String> {
        self.listen_addr()?;
        let l = &self.limits;
        for (k, v) in [
            ("limits.max_body_bytes", l.max_body_bytes),
            ("limits.max_blob_bytes", l.max_blob_bytes),
            ("limits.max_elements", l.max_elements),
            ("limits.max_in_flight_per_token", l.max_in_flight_per_token),
            ("limits.max_queue", l.max_queue),
            ("limits.max_batch_jobs", l.max_batch_jobs),
            ("limits.request_timeout_s", l.request_timeout_s),
            ("limits.job_deadline_s", l.job_deadline_s),
            ("workers.max_attempts", u64::from(self.workers.max_attempts)),
            ("workers.heartbeat_ms", self.workers.heartbeat_ms),
            ("workers.heartbeat_timeout_ms", self.workers.heartbeat_timeout_ms),
            ("batching.max_batch", self.batching.max_batch as u64),
            ("batching.claim_batch", self.batching.claim_batch as u64),
            (
                "listener.header_read_timeout_ms",
                self.listener.header_read_timeout_ms,
            ),
            ("listener.idle_timeout_ms", self.listener.idle_timeout_ms),
            ("listener.max_connections", self.listener.max_connections as u64),
            ("blobs.ttl_s", self.blobs.ttl_s),
        ] {
            if v == 0 {
                return Err(format!("{k} = 0; it must be at least 1"));
            }
        }
        self.workers.device_groups()?;
        self.sharding.validate()?;
        if self.workers.cpu_workers == 0
            && self.workers.gpus == GpuSelection::None
            && self.workers.groups.is_empty()
        {
            return Err("no workers: set workers.cpu_workers >= 1, workers.gpus or workers.groups".into());
        }
        if self.store.is_postgres() {
            crate::store::parse_pg_url(&self.store.url).map_err(|e| e.message().to_string())?;
            if self.store.pool_size == 0 {
                return Err("store.pool_size = 0; it must be at least 1".into());
            }
        } else if self.store.url != "sqlite" {
            return Err(format!(
                "store.url = `{}`: use `sqlite` or a postgres://user@host:port/db URL",
                redact_url(&self.store.url)
            ));
        }
        if self.store.lease_ms < 2000 {
            return Err(format!(
                "store.lease_ms = {}; it must be at least 2000 (heartbeats renew it every second)",
                self.store.lease_ms
            ));
        }
        if let Some(t) = &self.tls {
            // the files themselves are read (and checked against each other) at start
            if t.cert.as_os_str().is_empty() || t.key.as_os_str().is_empty() {
                return Err("tls: both cert and key (PEM file paths) are needed".into());
            }
        }
        Ok(())
    }

    /// The request timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.limits.request_timeout_s)
    }
}

/// A store URL or connection string with every secret replaced by `***`, for logs, errors
/// and `--print-config`: the password of `scheme://user:PASSWORD@host`, and the value of
/// every secret-looking key, both as a URL query parameter (`?password=...&...`) and in
/// libpq's `key=value` form (`host=db password='...'`). Keys count as secret when they
/// contain `password`, `passwd`, `pwd`, `token`, `secret` or `key` (so `sslkey`'s path is
/// hidden too: a false alarm costs nothing here).
///
/// Written by hand: no connection-string crate redacts all three forms, and
/// `tokio_postgres::Config`'s `Debug` drops the URL's layout along with the password.
pub fn redact_url(url: &str) -> String {
    let mut s = url.to_string();
    // userinfo: scheme://user:PASSWORD@host; the last `@` before the path ends it
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            let auth = &rest[..at];
            if let Some((user, _)) = auth.split_once(':') {
                s = format!("{scheme}://{user}:***{}", &rest[at..]);
            }
        }
    }
    redact_key_values(&s)
}

fn secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "passwd", "pwd", "token", "secret", "key"]
        .iter()
        .any(|w| k.contains(w))
}

/// Replace the value of each secret `KEY=VALUE` (query parameter or conninfo pair; spaces
/// around `=` and single-quoted values with `\` escapes, as libpq reads them).
fn redact_key_values(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] != b'=' {
            i += 1;
            continue;
        }
        // the key: the word before `=` (spaces allowed between)
        let mut k_end = i;
        while k_end > 0 && b[k_end - 1] == b' ' {
            k_end -= 1;
        }
        let mut k_start = k_end;
        while k_start > 0 && (b[k_start - 1].is_ascii_alphanumeric() || b[k_start - 1] == b'_') {
            k_start -= 1;
        }
        let mut v = i + 1;
        if !secret_key(&s[k_start..k_end]) {
            i = v;
            continue;
        }
        while v < b.len() && b[v] == b' ' {
            v += 1;
        }
        let mut end = v;
        if b.get(v) == Some(&b'\'') {
            end += 1;
            while end < b.len() && b[end] != b'\'' {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            end = (end + 1).min(b.len());
            while !s.is_char_boundary(end) {
                end += 1;
            }
        } else {
            while end < b.len() && !matches!(b[end], b'&' | b' ' | b'\t' | b'\n' | b'#') {
                end += 1;
            }
        }
        out.push_str(&s[copied..v]);
        out.push_str("***");
        copied = end;
        i = end.max(i + 1);
    }
    out.push_str(&s[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "hunter2-Zq9";

    #[test]
    fn every_url_form_is_redacted() {
        for url in [
            format!("postgres://kiln:{SECRET}@db:5432/kiln"),
            format!("postgresql://kiln:{SECRET}@db/kiln?sslmode=disable"),
            format!("postgres://kiln@db/kiln?password={SECRET}"),
            format!("postgres://kiln@db/kiln?sslmode=disable&password={SECRET}&connect_timeout=5"),
            format!("postgres://db/kiln?user=kiln&PASSWORD={SECRET}"),
            format!("host=db user=kiln password={SECRET} dbname=kiln"),
            format!("host=db password = {SECRET}"),
            format!("host=db password='{SECRET} with \\' quote' dbname=kiln"),
            format!("postgres://db/kiln?auth_token={SECRET}"),
            format!("postgres://u:{SECRET}@db/kiln?password={SECRET}"),
        ] {
            let r = redact_url(&url);
            assert!(!r.contains("hunter2"), "{url} -> {r}");
            assert!(!r.contains("Zq9") && !r.contains("quote"), "{url} -> {r}");
            assert!(r.contains("***"), "{url} -> {r}");
            assert!(r.contains("db"), "the host stays: {r}");
        }
        assert_eq!(redact_url("sqlite"), "sqlite");
        assert_eq!(
            redact_url("postgres://kiln@db:5432/kiln?sslmode=disable"),
            "postgres://kiln@db:5432/kiln?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://kiln:pw@db/x?password=pw&a=b"),
            "postgres://kiln:***@db/x?password=***&a=b"
        );
        // odd input never panics
        for odd in [
            "=",
            "password=",
            "password='",
            "password='\\",
            "k=\u{e9}",
            "pwd='\\\u{e9}'",
        ] {
            let _ = redact_url(odd);
        }
    }

    #[test]
    fn a_bad_store_url_is_refused_without_its_secret() {
        let c = ServiceConfig {
            store: StoreConfig {
                url: format!("host=db password={SECRET}"),
                ..StoreConfig::default()
            },
            ..ServiceConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn user_kernels_are_off_unless_the_file_or_the_environment_turns_them_on() {
        let none = |_: &str| None;
        assert!(!ServiceConfig::load(None, &none).unwrap().allow_user_kernels);
        let on = |k: &str| (k == "KILN_ALLOW_USER_KERNELS").then(|| "1".to_string());
        assert!(ServiceConfig::load(None, &on).unwrap().allow_user_kernels);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("service.toml");
        std::fs::write(&f, "allow_user_kernels = true\n").unwrap();
        assert!(ServiceConfig::load(Some(&f), &none).unwrap().allow_user_kernels);
        // the environment comes after the file
        let off = |k: &str| (k == "KILN_ALLOW_USER_KERNELS").then(|| "0".to_string());
        assert!(!ServiceConfig::load(Some(&f), &off).unwrap().allow_user_kernels);
    }

    #[test]
    fn listener_keys_parse_and_are_checked() {
        let c = ServiceConfig::from_toml(
            "[listener]\nheader_read_timeout_ms = 500\nidle_timeout_ms = 700\nmax_connections = 3\nhttp2 = true\n",
        )
        .unwrap();
        assert_eq!(c.listener.header_read_timeout(), Duration::from_millis(500));
        assert_eq!(c.listener.idle_timeout(), Duration::from_millis(700));
        assert_eq!((c.listener.max_connections, c.listener.http2), (3, true));
        assert_eq!(c.listener.health_reserve, 8);
        let zero = ServiceConfig::from_toml("[listener]\nmax_connections = 0\n").unwrap();
        assert!(zero.validate().unwrap_err().contains("listener.max_connections"));
    }

    #[test]
    fn the_claim_batch_parses_defaults_and_is_checked() {
        assert_eq!(ServiceConfig::default().batching.claim_batch, 16);
        let c = ServiceConfig::from_toml("[batching]\nenabled = false\nclaim_batch = 4\n").unwrap();
        assert_eq!((c.batching.enabled, c.batching.claim_batch), (false, 4));
        c.validate().unwrap();
        let zero = ServiceConfig::from_toml("[batching]\nclaim_batch = 0\n").unwrap();
        assert!(zero.validate().unwrap_err().contains("batching.claim_batch = 0"));
        let typo = ServiceConfig::from_toml("[batching]\nclaim_batches = 4\n");
        assert!(typo.is_err(), "an unknown key is refused");
    }
}
