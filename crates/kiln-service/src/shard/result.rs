//! A sharded job's result (crate::shard): the shards' results joined in row order, either
//! merged into one stored value or kept where they are behind a small manifest.
//!
//! Both forms read back as the same bytes: [`OPEN`], then each shard's price rows' JSON
//! text (the inside of its `prices` array, trimmed) joined by commas, then [`close`] of the
//! *head*, the JSON object of what the merged result says besides its prices (`method`,
//! `rng`, `stream_offset`, `batch_options`, `device`, `devices`, `workers`, `shards`).
//! [`merge`] builds that text whole; a manifest is the head alone, and a reader of the
//! job streams the same text from the head and the shards' results, one shard at a time
//! (`api`). [`Merger`] checks each shard's result and gathers the head for both.
//!
//! Which form a parent gets is decided when its last shard ends, by the bytes of its
//! shards' results: up to `sharding.merge_max_bytes` (recorded in the parent's task at
//! submission, [`ParentTask::merge_max_bytes`]) they are merged in the store and the
//! shards' results dropped; past it the parent stores a manifest and the shards keep
//! theirs until the parent is deleted. Small books keep the one-value form because it is
//! what every other job has: any reader of the store (a listing tool, an idempotent
//! resubmission's answer, `POST /v1/jobs:batch`) sees the whole result, and the merge
//! costs the store's transaction only milliseconds. A large book's merge would hold the
//! store's one writer (SQLite) or the parent's row lock (PostgreSQL) while it copies
//! hundreds of megabytes, and past [`MAX_MERGED_BYTES`] it cannot be one value at all
//! (SQLite's string limit, PostgreSQL's 1 GiB field): there the manifest, which stores
//! nothing twice, is the only form that works.

use super::ParentTask;
use serde::Deserialize;
use serde_json::{json, Value};
use std::ops::Range;

/// The text every sharded result begins with: the price rows follow.
pub const OPEN: &str = "{\"prices\":[";

/// The largest result the stores keep as one value: under SQLite's default string limit
/// (1e9 bytes) and PostgreSQL's limit on one text value (1 GiB). `sharding.merge_max_bytes`
/// may not be larger.
pub const MAX_MERGED_BYTES: usize = 900_000_000;

/// The default `sharding.merge_max_bytes`: books whose shards' results take more are
/// stored as a manifest.
pub const DEFAULT_MERGE_MAX_BYTES: u64 = 64 << 20;

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

/// The byte range of the price rows' text in a shard's result: the inside of its
/// top-level `prices` array, trimmed (empty for no rows). `None`: no such array.
pub fn rows(text: &str) -> Option<Range<usize>> {
    let span = top_level_array(text, "prices")?;
    let inner = (span.start + 1)..(span.end - 1);
    let t = &text[inner.clone()];
    let start = inner.start + (t.len() - t.trim_start().len());
    let end = inner.end - (t.len() - t.trim_end().len());
    Some(start..end.max(start))
}

/// The text every sharded result ends with, from its head (a JSON object): `],` and the
/// head's members.
pub fn close(head: &str) -> Result<String, String> {
    let h = head.trim();
    match h.strip_prefix('{') {
        Some(members) if h.ends_with('}') && members.len() > 1 => Ok(format!("],{members}")),
        _ => Err(format!(
            "a sharded result's head is not a JSON object with members: `{}`",
            h.chars().take(80).collect::<String>()
        )),
    }
}

/// Checks a parent's shards' results, fed in row order, and gathers the head: the shape
/// of an unsharded book's result (`method`, `rng`, `stream_offset` 0, `batch_options` =
/// the rows, `device`: the first shard's, `workers` null) with `shards`, the shard count,
/// and `devices`, each shard's device.
pub struct Merger<'a> {
    parent: &'a ParentTask,
    next: u64,
    total: u64,
    first: Option<ShardHead>,
    devices: Vec<Value>,
}

impl<'a> Merger<'a> {
    /// A merger of `parent`'s shards.
    pub fn new(parent: &'a ParentTask) -> Self {
        Merger {
            parent,
            next: 0,
            total: 0,
            first: None,
            devices: Vec::new(),
        }
    }

    /// Checks the next shard's result (a book's, with one price a row of the shard) and
    /// notes its device; returns the byte range of its price rows' text ([`rows`]).
    pub fn push(&mut self, text: &str) -> Result<Range<usize>, String> {
        let i = self.next;
        if i >= self.parent.shards {
            return Err(format!("more shard results than {} shards", self.parent.shards));
        }
        let head: ShardHead =
            serde_json::from_str(text).map_err(|e| format!("shard {i}'s result is not a book's: {e}"))?;
        let want = self
            .parent
            .shard_rows
            .min(self.parent.rows.saturating_sub(i * self.parent.shard_rows));
        if head.prices.len() as u64 != want {
            return Err(format!(
                "shard {i} has {} prices for {want} options",
                head.prices.len()
            ));
        }
        let span = rows(text).ok_or_else(|| format!("shard {i}'s result has no prices"))?;
        self.next += 1;
        self.total += want;
        self.devices.push(head.device.clone());
        self.first.get_or_insert(head);
        Ok(span)
    }

    /// The head (JSON text), once every shard's result was pushed.
    pub fn head(self) -> Result<String, String> {
        if self.next != self.parent.shards {
            return Err(format!(
                "{} shard results for {} shards",
                self.next, self.parent.shards
            ));
        }
        let first = self.first.ok_or("no shards")?;
        Ok(json!({
            "method": first.method,
            "rng": first.rng,
            "stream_offset": 0,
            "batch_options": self.total,
            "device": first.device,
            "devices": self.devices,
            "workers": Value::Null,
            "shards": self.parent.shards,
        })
        .to_string())
    }
}

/// The parent's result from its shards' results (JSON text, in row order), merged into
/// one text (the module docs' form). The price rows are the shards' JSON text joined, so
/// every price keeps its bits. An error names what did not fit (a shard's result that is
/// not a book's, or whose price count is not its row count, or a result past
/// [`MAX_MERGED_BYTES`]).
pub fn merge(parent: &ParentTask, results: &[String]) -> Result<String, String> {
    merge_within(parent, results, MAX_MERGED_BYTES)
}

/// [`merge`] with a size limit of `max_bytes`.
pub(crate) fn merge_within(
    parent: &ParentTask,
    results: &[String],
    max_bytes: usize,
) -> Result<String, String> {
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
    let mut out = String::with_capacity(bytes);
    out.push_str(OPEN);
    let mut wrote = false;
    let mut m = Merger::new(parent);
    for r in results {
        let span = m.push(r)?;
        if !span.is_empty() {
            if wrote {
                out.push(',');
            }
            out.push_str(&r[span]);
            wrote = true;
        }
    }
    out.push_str(&close(&m.head()?)?);
    Ok(out)
}

/// The byte range of the array that is the value of top-level key `key` in the JSON object
/// `text` (brackets included), found by scanning the text (strings and nesting honoured).
pub(crate) fn top_level_array(text: &str, key: &str) -> Option<std::ops::Range<usize>> {
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
