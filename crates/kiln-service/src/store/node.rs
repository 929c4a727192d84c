//! Nodes: what a `kiln serve` process registers about itself, and the events a shared
//! store delivers from other nodes.

use serde::Serialize;

/// What a node says about itself at each heartbeat.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// The node id (the lease-owner prefix of its workers).
    pub id: String,
    /// The host it runs on.
    pub hostname: String,
    /// Its worker devices (`cpu`, `cuda:0`, ...).
    pub devices: Vec<String>,
    /// When it started, ms since the epoch.
    pub started_ms: i64,
    /// The kiln version.
    pub version: String,
}

/// A registered node as `GET /v1/nodes` shows it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct NodeRecord {
    /// The node id.
    pub id: String,
    /// Its host.
    pub hostname: String,
    /// Its worker devices.
    pub devices: Vec<String>,
    /// When it started, ms since the epoch.
    pub started_ms: i64,
    /// Its last heartbeat, ms since the epoch (the store's clock).
    pub last_heartbeat_ms: i64,
    /// Whether its heartbeat is recent (within the lease).
    pub alive: bool,
    /// The kiln version it runs.
    pub version: String,
}

/// Events a shared store delivers from other nodes (PostgreSQL: LISTEN/NOTIFY).
pub trait StoreEvents: Send + Sync + 'static {
    /// Jobs were queued (or re-queued): idle workers should claim.
    fn new_work(&self);
    /// A job reached a terminal state (possibly on another node): wake its watchers.
    fn job_finished(&self, id: &str);
}

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}
