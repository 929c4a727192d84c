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
//!   shard is left unfinished the shards' results are joined in row order ([`merge`]) into
//!   the parent's result, the parent succeeds and the shards' own results are dropped (the
//!   parent's holds them). The price rows are joined as JSON text, never parsed to numbers
//!   and printed again, so every price keeps the bits its shard computed.
//! - **Failure**: a shard that fails for good (its attempts used up, or a final error)
//!   fails the parent with that shard's error, in the same transaction, and its queued and
//!   running siblings are cancelled (a running sibling's late result is discarded as a
//!   cancelled job's is). Cancelling the parent (or any shard) cancels the parent and
//!   every unfinished shard. A shard lost with its node is re-queued by the lease sweep
//!   like any job and redone by another node; a result from a node frozen past its lease
//!   is refused by the lease check like any job's.
//! - **Accounting**: the store marks the parent with the shard whose end closed it; the
//!   supervisor that stored that end releases the parent's admission and wakes its
//!   watchers ([`crate::supervisor`]'s outcome path), once.
//!
//! Element-wise jobs are not sharded: their input is one array (often a blob file) and
//! their result an NPY blob, so a merge would be a file concatenation outside the store's
//! transaction; a single element-wise job already spreads over a node's devices.

use crate::task::Task;
use kiln::finance::BookOption;
use serde::{Deserialize, Serialize};
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
}

impl Default for Sharding {
    fn default() -> Self {
        Sharding {
            min_rows: 0,
            shard_rows: 100_000,
        }
    }
}

impl Sharding {
    /// Checks the settings (startup).
    pub fn validate(&self) -> Result<(), String> {
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
        },
        shards,
    })
}

/// The byte range of the array that is the value of top-level key `key` in the JSON object
/// `text` (brackets included), found by scanning the text (strings and nesting honoured).
fn top_level_array(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0usize;
    let mut want_value = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let s = text.get(start..i)?;
                i += 1;
                if depth == 1 && s == key {
                    // a key is followed by ':' (a string value is not)
                    let mut j = i;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b':') {
                        want_value = true;
                        i = j + 1;
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                if want_value && depth == 1 && b[i] == b'[' {
                    let open = i;
                    let mut d = 0usize;
                    while i < b.len() {
                        match b[i] {
                            b'"' => {
                                i += 1;
                                while i < b.len() && b[i] != b'"' {
                                    if b[i] == b'\\' {
                                        i += 1;
                                    }
                                    i += 1;
                                }
                            }
                            b'[' | b'{' => d += 1,
                            b']' | b'}' => {
                                d -= 1;
                                if d == 0 {
                                    return Some(open..i + 1);
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    return None;
                }
                want_value = false;
                depth += 1;
            }
            b']' | b'}' => depth = depth.checked_sub(1)?,
            c if !c.is_ascii_whitespace() && want_value => want_value = false,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The largest merged result the stores keep: under SQLite's default string limit (1e9
/// bytes) and PostgreSQL's limit on one text value (1 GiB). A book whose merged result
/// would be larger fails with the size named, instead of failing the store's transaction.
pub const MAX_MERGED_BYTES: usize = 900_000_000;

/// What the merge reads of a shard's result besides its prices.
#[derive(Deserialize)]
struct ShardHead {
    method: Value,
    #[serde(default)]
    rng: Value,
    #[serde(default)]
    device: Value,
    prices: Vec<serde::de::IgnoredAny>,
}

/// The parent's result from its shards' results (JSON text, in row order): the shape of
/// an unsharded book's result (`method`, `rng`, `prices`, `stream_offset` 0,
/// `batch_options` = the rows, `device`: the first shard's, `workers` null) with `shards`,
/// the shard count, and `devices`, each shard's device. The price rows are the shards'
/// JSON text joined, so every price keeps its bits. An error names what did not fit (a
/// shard's result that is not a book's, or whose price count is not its row count).
pub fn merge(parent: &ParentTask, results: &[String]) -> Result<String, String> {
    merge_within(parent, results, MAX_MERGED_BYTES)
}

/// [`merge`] with a size limit of `max_bytes`.
fn merge_within(parent: &ParentTask, results: &[String], max_bytes: usize) -> Result<String, String> {
    let bytes: usize = results.iter().map(String::len).sum();
    if bytes > max_bytes {
        return Err(format!(
            "the merged result of {} rows would be about {bytes} bytes; the store keeps at most \
             {max_bytes} in one result: split the book into several jobs",
            parent.rows
        ));
    }
    if results.len() as u64 != parent.shards {
        return Err(format!(
            "{} shard results for {} shards",
            results.len(),
            parent.shards
        ));
    }
    let mut rows = String::with_capacity(bytes);
    let mut devices = Vec::with_capacity(results.len());
    let mut first: Option<ShardHead> = None;
    let mut total = 0u64;
    for (i, r) in results.iter().enumerate() {
        let head: ShardHead =
            serde_json::from_str(r).map_err(|e| format!("shard {i}'s result is not a book's: {e}"))?;
        let want = parent
            .shard_rows
            .min(parent.rows.saturating_sub(i as u64 * parent.shard_rows));
        if head.prices.len() as u64 != want {
            return Err(format!(
                "shard {i} has {} prices for {want} options",
                head.prices.len()
            ));
        }
        total += want;
        let span = top_level_array(r, "prices").ok_or_else(|| format!("shard {i}'s result has no prices"))?;
        let inner = r[span].trim();
        let inner = inner[1..inner.len() - 1].trim();
        if !inner.is_empty() {
            if !rows.is_empty() {
                rows.push(',');
            }
            rows.push_str(inner);
        }
        devices.push(head.device.clone());
        first.get_or_insert(head);
    }
    let first = first.ok_or("no shards")?;
    let meta = json!({
        "method": first.method,
        "rng": first.rng,
        "stream_offset": 0,
        "batch_options": total,
        "device": first.device,
        "devices": devices,
        "workers": Value::Null,
        "shards": parent.shards,
    });
    let meta = meta.to_string();
    Ok(format!("{{\"prices\":[{rows}],{}", &meta[1..]))
}

#[cfg(test)]
mod tests;
