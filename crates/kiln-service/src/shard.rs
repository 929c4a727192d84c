//! Jobs larger than one node: a `price` book over `sharding.min_rows` options is split into
//! shards that any node may claim through the shared store, and merged when all are done.
//!
//! # The pieces
//! - **Submission** (`api/submit.rs`, [`plan`]): a `price` job without `target_se` or its own
//!   `queue_timeout_s`, whose book has more than `sharding.min_rows` options, is stored as
//!   a *parent* and `ceil(rows / shard_rows)` *shards*, in one store transaction
//!   ([`crate::store::JobStore::insert_sharded`]). Shard `i` holds rows `[i*k, min((i+1)*k,
//!   n))` of the book (`k` = the shard size): the book is stored once, sliced, never
//!   copied per shard; the parent's task is a small descriptor ([`ParentTask`]).
//! - **The parent** is stored `running` with no lease and a shard count: no worker claims
//!   it (claims take `queued` jobs), the lease sweeps skip it (it has no lease to lose), and
//!   it counts once in its token's in-flight jobs (admission); its shards do not.
//! - **Shards** are ordinary queued jobs of the parent's token, priority and deadline:
//!   the fair order between tokens, priorities, leases, retries and the orphan requeue
//!   apply to them as to any job. Each is a [`Task::PriceBook`] with `first_option` = its
//!   first row, so option `k` of the book is priced with Monte Carlo stream `k` wherever
//!   its shard runs: `Runtime::price_book(.., first_option)` makes a slice's prices the
//!   bits of the same rows priced in one piece (a plain Black-Scholes book goes the same
//!   way, `Runtime::price_batch` with the slice's first stream).
//! - **Merging** happens in the store, in the transaction that stores a shard's end: the
//!   parent row is locked (PostgreSQL `FOR UPDATE`; SQLite's one writer), and when no
//!   shard is left unfinished each shard's result is checked ([`result::Merger`]) and the
//!   parent succeeds with its result in one of two forms ([`result`]): books whose shards'
//!   results take at most `merge_max_bytes` are merged into the parent's result and the
//!   shards' own results dropped; larger ones store a small *manifest* (the merged
//!   result's head) and keep the shards' results, which `GET /v1/jobs/{id}` streams in row
//!   order after the head. Either way the price rows are the shards' JSON text joined,
//!   never parsed to numbers and printed again, so every price keeps the bits its shard
//!   computed, and both forms read back as the same bytes.
//! - **Failure**: a shard that fails for good (its attempts used up, or a final error)
//!   fails the parent with that shard's error, in the same transaction, and its queued and
//!   running siblings are cancelled (a running sibling's late result is discarded as a
//!   cancelled job's is). Cancelling the parent (or any shard) cancels the parent and
//!   every unfinished shard. A shard lost with its node is re-queued by the lease sweep
//!   like any job and redone by another node; a result from a node frozen past its lease
//!   is refused by the lease check like any job's.
//! - **Retention**: shards are deleted with their parent (the results sweep and the
//!   per-token result budget take a parent and its shards as one job), never alone, so a
//!   manifest never outlives the results it names.
//! - **Accounting**: the store marks the parent with the shard whose end closed it; the
//!   supervisor that stored that end releases the parent's admission and wakes its
//!   watchers ([`crate::supervisor`]'s outcome path), once.
//!
//! Element-wise jobs are not sharded: their input is one array (often a blob file) and
//! their result an NPY blob, so a merge would be a file concatenation outside the store's
//! transaction; a single element-wise job already spreads over a node's devices.

pub mod result;

pub use result::{merge, Merger, DEFAULT_MERGE_MAX_BYTES, MAX_MERGED_BYTES};
#[cfg(test)]
use result::{merge_within, top_level_array};

use crate::task::Task;
use kiln::finance::BookOption;
use serde::{Deserialize, Serialize};
#[cfg(test)]
use serde_json::{json, Value};

/// Shards one job may be split into at most: past this the shards grow instead (rows /
/// this, rounded up), so a small `shard_rows` cannot turn one job into millions of rows.
pub const MAX_SHARDS: u64 = 10_000;

/// `[sharding]`: when a `price` job is split into shards (module docs).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct Sharding {
    /// Books with more options than this are split (0: never). Off by default: a shard
    /// pays a store round trip, a claim and a worker start-up of its own, and its result
    /// is merged by the store, so splitting helps only where several nodes (or many
    /// worker slots) share the queue, and only for books that keep each busy for seconds.
    pub min_rows: u64,
    /// Options a shard (the last one may hold fewer).
    pub shard_rows: u64,
    /// A book whose shards' results take more bytes than this is stored as a manifest
    /// over its shards' results instead of one merged result ([`result`]); at most
    /// [`MAX_MERGED_BYTES`].
    pub merge_max_bytes: u64,
}

impl Default for Sharding {
    fn default() -> Self {
        Sharding {
            min_rows: 0,
            shard_rows: 100_000,
            merge_max_bytes: DEFAULT_MERGE_MAX_BYTES,
        }
    }
}

impl Sharding {
    /// Checks the settings (startup).
    pub fn validate(&self) -> Result<(), String> {
        if self.merge_max_bytes > MAX_MERGED_BYTES as u64 {
            return Err(format!(
                "sharding.merge_max_bytes = {} is more than {MAX_MERGED_BYTES}, the largest \
                 result the stores keep as one value",
                self.merge_max_bytes
            ));
        }
        if self.min_rows == 0 {
            return Ok(());
        }
        if self.shard_rows == 0 {
            return Err("sharding.shard_rows = 0; it must be at least 1".into());
        }
        if self.shard_rows > self.min_rows {
            return Err(format!(
                "sharding.shard_rows = {} is more than sharding.min_rows = {}: a book just over \
                 min_rows would be one shard; make shard_rows at most min_rows",
                self.shard_rows, self.min_rows
            ));
        }
        Ok(())
    }

    /// Whether a book of `rows` options is split.
    pub fn splits(&self, rows: u64) -> bool {
        self.min_rows > 0 && rows > self.min_rows
    }

    /// The rows of each shard of a book of `rows` options: `shard_rows`, or more where
    /// that would make more than [`MAX_SHARDS`] shards.
    pub fn shard_size(&self, rows: u64) -> u64 {
        self.shard_rows.max(rows.div_ceil(MAX_SHARDS)).max(1)
    }
}

/// The task a parent stores in place of its book: what the merge needs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ParentTask {
    /// Always `sharded` (a parent's task is never run).
    #[serde(rename = "type")]
    pub kind: String,
    /// Options in the book.
    pub rows: u64,
    /// Shards.
    pub shards: u64,
    /// Options a shard (the last may hold fewer).
    pub shard_rows: u64,
    /// Shards' results taking more bytes than this are kept behind a manifest instead of
    /// merged (`sharding.merge_max_bytes` at submission; the default for parents stored
    /// without it).
    #[serde(default = "default_merge_max_bytes")]
    pub merge_max_bytes: u64,
}

fn default_merge_max_bytes() -> u64 {
    DEFAULT_MERGE_MAX_BYTES
}

/// A sharded job: the parent's task and each shard's task (in row order).
#[derive(Debug)]
pub struct Plan {
    /// The parent's task.
    pub parent: ParentTask,
    /// The shards' tasks, shard `i` first at row `i * parent.shard_rows`.
    pub shards: Vec<Task>,
}

/// The shards of a validated `price` task, or `None` when it is not split (too small,
/// sharding off, a `target_se` run, or not a book).
pub fn plan(cfg: &Sharding, task: &Task) -> Option<Plan> {
    let (method, mc, book, max_paths): (&String, _, Vec<BookOption>, u64) = match task {
        Task::Price { method, mc, options } => (
            method,
            *mc,
            options.iter().map(|o| BookOption::Plain(*o)).collect(),
            crate::pricing::DEFAULT_MAX_PATHS,
        ),
        Task::PriceBook {
            method,
            mc,
            options,
            target_se: None,
            max_paths,
            first_option: 0,
        } => (method, *mc, options.clone(), *max_paths),
        _ => return None,
    };
    let rows = book.len() as u64;
    if !cfg.splits(rows) {
        return None;
    }
    let k = cfg.shard_size(rows);
    let shards: Vec<Task> = book
        .chunks(k as usize)
        .enumerate()
        .map(|(i, part)| Task::PriceBook {
            method: method.clone(),
            mc,
            options: part.to_vec(),
            target_se: None,
            max_paths,
            first_option: (i as u64 * k) as u32,
        })
        .collect();
    Some(Plan {
        parent: ParentTask {
            kind: "sharded".into(),
            rows,
            shards: shards.len() as u64,
            shard_rows: k,
            merge_max_bytes: cfg.merge_max_bytes,
        },
        shards,
    })
}

#[cfg(test)]
mod tests;
