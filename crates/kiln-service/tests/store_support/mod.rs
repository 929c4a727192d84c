//! What the store tests share: a new job as the API would insert it, and the lease they
//! claim under.
#![allow(dead_code)] // each test binary uses its own part

use kiln_service::store::{now_ms, NewJob};
use std::time::Duration;

/// A one-element `price` job of batch key `key`, owned by principal `p`.
pub fn job(id: &str, key: &str, idem: Option<&str>, hash: &str) -> NewJob {
    NewJob {
        id: id.into(),
        kind: "price".into(),
        batch_key: key.into(),
        needs_gpu: false,
        principal: "p".into(),
        idempotency_key: idem.map(str::to_string),
        request_hash: hash.into(),
        task: "{}".into(),
        elements: 1,
        max_attempts: 2,
        deadline_ms: None,
        priority: 0,
        queue_until_ms: None,
        created_ms: now_ms(),
    }
}

pub const LEASE: Duration = Duration::from_secs(30);
