//! A book larger than one node (crate kiln-service's `shard` module): three `kiln serve`
//! nodes (one CPU worker each) share one PostgreSQL queue (`KILN_TEST_PG_URL`; SKIP
//! without it, a failure with `KILN_REQUIRE_PG=1`) with `sharding.min_rows` set. A mixed
//! Monte Carlo book (Black-Scholes and Heston rows) is priced three ways: unsharded on one
//! node (a job with its own `queue_timeout_s` is never split), sharded across the three
//! nodes, and sharded again with one node killed (SIGKILL) while it holds a shard. Both
//! sharded runs must give bitwise the one-node prices; the killed node's shard is redone
//! by another node once its lease expires. The three wall times are printed.
//!
//! `KILN_SHARD_TEST_ROWS` sets the book's size (default 3000 rows, 10 shards; the shard
//! size is a tenth of the book), `KILN_SHARD_TEST_PATHS` the paths an option (default
//! 1024), `KILN_SHARD_TEST_MERGE_MAX_BYTES` the nodes' `sharding.merge_max_bytes` (default
//! 0: every sharded result is kept as a manifest over its shards' results and streamed
//! back, the form a book past the stores' one-value limit takes). The 10-million-row
//! figure is for a 16-core host: `KILN_SHARD_TEST_ROWS=10000000` with a release `kiln`
//! (`KILN_BIN=target/release/kiln`). `KILN_SHARD_TEST_LEASE_MS` sets the nodes' lease
//! (default 3000 ms, how soon the killed node's shard is redone): a large book's unsharded
//! job needs one longer than the time its node takes to take in its result, or the lease
//! sweep re-queues it over and over. The book is sent and its prices read back as text
//! (about 200 bytes a row each way), never as a tree of JSON values, so the test's memory
//! is a few times the book's text. The one-node reference is one unsharded job, whose
//! result is one stored value: past about 5 million rows (PostgreSQL's 1 GiB on one value)
//! that reference itself cannot be stored, and the test fails naming it.
#![allow(clippy::unwrap_used)]

mod pg_support;
mod service_support;

use pg_support::*;
use serde::Deserialize;
use serde_json::{json, Value};
use service_support::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const TOKEN: &str = "shard-token-1";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node_ids(s: &Server) -> HashSet<String> {
    let r = s.get("/v1/nodes", Some(TOKEN)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect()
}

/// A finished job as the test reads it: the result's price bits only.
#[derive(Deserialize)]
struct Finished {
    state: String,
    #[serde(default)]
    shards: Option<Value>,
    #[serde(default)]
    result: Option<Prices>,
    #[serde(default)]
    error: Option<Value>,
    /// The answer's bytes.
    #[serde(skip)]
    bytes: usize,
}

#[derive(Deserialize)]
struct Prices {
    prices: Vec<Price>,
}

#[derive(Deserialize)]
struct Price {
    price: f64,
}

impl Finished {
    fn bits(&self) -> Vec<u64> {
        let r = self.result.as_ref().expect("a result");
        r.prices.iter().map(|p| p.price.to_bits()).collect()
    }
}

/// The body of a `price` job over the test book, written as text row by row.
fn book_body(rows: u64, params: &Value, queue_timeout_s: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows as usize * 200);
    out.extend_from_slice(b"{\"kind\":\"price\",\"params\":");
    serde_json::to_writer(&mut out, params).unwrap();
    if let Some(t) = queue_timeout_s {
        out.extend_from_slice(format!(",\"queue_timeout_s\":{t}").as_bytes());
    }
    out.extend_from_slice(b",\"inputs\":{\"options\":[");
    for i in 0..rows {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &shard_row(i)).unwrap();
    }
    out.extend_from_slice(b"]}}");
    out
}

fn submit_text(s: &Server, body: &[u8]) -> String {
    let r = request(s.addr, "POST", "/v1/jobs", Some(TOKEN), &[], Some(body)).unwrap();
    assert_eq!(r.status, 202, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

/// Job `id` once it has succeeded (waiting up to `secs`), its result read as price bits.
fn finished(s: &Server, id: &str, secs: u64) -> Finished {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = s.get(&format!("/v1/jobs/{id}?wait=5"), Some(TOKEN)).unwrap();
        assert!(r.status == 200 || r.status == 202, "GET job {id}: {}", r.status);
        let mut j: Finished = serde_json::from_slice(&r.body).unwrap_or_else(|e| {
            panic!(
                "job {id}: {e}: {}",
                String::from_utf8_lossy(&r.body[..r.body.len().min(500)])
            )
        });
        j.bytes = r.body.len();
        if j.state != "queued" && j.state != "running" {
            assert_eq!(j.state, "succeeded", "job {id}: {:?}", j.error);
            return j;
        }
        assert!(Instant::now() < end, "job {id} still {} after {secs} s", j.state);
    }
}

#[test]
fn a_sharded_book_on_three_nodes_one_killed_is_bitwise_the_one_node_book() {
    let Some(admin) = admin_url("pg_shard") else {
        return;
    };
    let rows = env_or("KILN_SHARD_TEST_ROWS", 3000).max(20);
    let paths = env_or("KILN_SHARD_TEST_PATHS", 1024);
    let merge_max_bytes = env_or("KILN_SHARD_TEST_MERGE_MAX_BYTES", 0);
    let lease_ms = env_or("KILN_SHARD_TEST_LEASE_MS", 3000);
    let shard_rows = rows.div_ceil(10);
    let db_name = format!("kiln_t_shard_{}", std::process::id());
    Db::connect(&admin).exec(&format!("CREATE DATABASE {db_name}"));
    let url = with_db(&admin, &db_name);
    let db = Db::connect(&url);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("service.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\nurl = \"{url}\"\nlease_ms = {lease_ms}\n\
             [limits]\nmax_body_bytes = 4294967296\nmax_elements = 100000000\njob_deadline_s = 86400\n\
             max_wait_s = 60\n\
             [sharding]\nmin_rows = {shard_rows}\nshard_rows = {shard_rows}\n\
             merge_max_bytes = {merge_max_bytes}\n\
             [[tokens]]\nname = \"shard\"\ntoken = \"{TOKEN}\"\n"
        ),
    )
    .unwrap();
    let cfg_s = cfg.to_str().unwrap().to_string();
    let args = ["--service-config", cfg_s.as_str(), "--cpu-workers", "1"];
    let mut servers = Vec::new();
    let mut ids = Vec::new();
    let mut known = HashSet::new();
    for i in 0..3 {
        let s = start(&dir.path().join(format!("node{i}")), &args);
        let now = node_ids(&s);
        let new: Vec<_> = now.difference(&known).cloned().collect();
        assert_eq!(new.len(), 1, "node {i} registered itself: {now:?}");
        ids.push(new[0].clone());
        known = now;
        servers.push(s);
    }
    let params = json!({"method": "mc", "paths": paths, "steps": 16, "seed": 11});
    let body = book_body(rows, &params, None);

    // one node: a queue timeout keeps the job whole
    let whole = book_body(rows, &params, Some(86400));
    let t = Instant::now();
    let id = submit_text(&servers[0], &whole);
    drop(whole);
    let one = finished(&servers[0], &id, 1800);
    let one_s = t.elapsed().as_secs_f64();
    assert!(one.shards.is_none(), "not split");
    let want = one.bits();
    drop(one);
    assert_eq!(want.len() as u64, rows);

    // three nodes
    let t = Instant::now();
    let id = submit_text(&servers[0], &body);
    let three = finished(&servers[1], &id, 1800);
    let three_s = t.elapsed().as_secs_f64();
    let three_bytes = three.bytes;
    let counts = three.shards.clone().unwrap_or_default();
    let shards = counts["total"].as_u64().unwrap();
    assert!(shards >= 10, "{counts}");
    assert_eq!(counts["done"], shards);
    assert_eq!(three.bits(), want, "three nodes: the one-node bits");
    drop(three);

    // three nodes, one killed while it holds a shard
    let victim = 2usize;
    let prefix = format!("{}/", ids[victim]);
    let t = Instant::now();
    let id = submit_text(&servers[0], &body);
    let held_sql =
        "SELECT id FROM kiln_jobs WHERE parent = $1 AND state = 'running' AND starts_with(lease_owner, $2)";
    let end = Instant::now() + Duration::from_secs(600);
    let held: Vec<String> = loop {
        let h: Vec<String> = db
            .query(held_sql, &[&id, &prefix])
            .iter()
            .map(|r| r.get(0))
            .collect();
        if !h.is_empty() {
            break h;
        }
        assert!(Instant::now() < end, "the victim never held a shard");
        std::thread::sleep(Duration::from_millis(20));
    };
    let killed_at_s = t.elapsed().as_secs_f64();
    servers[victim].kill9();
    let killed = finished(&servers[0], &id, 1800);
    let killed_s = t.elapsed().as_secs_f64();
    assert_eq!(killed.bits(), want, "one node killed: the one-node bits");
    let redone: Vec<i32> = db
        .query("SELECT attempts FROM kiln_jobs WHERE id = ANY($1)", &[&held])
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        redone.iter().all(|&a| a >= 2),
        "the killed node's shards ran again: {redone:?}"
    );
    eprintln!(
        "pg_shard: {rows} rows ({paths} paths x 16 steps, every third Heston), {shards} shards of \
         {shard_rows}, merge_max_bytes {merge_max_bytes}, one CPU worker a node, debug-or-given \
         kiln at {}: one node {one_s:.1} s, three nodes ({three_bytes} bytes answered) \
         {three_s:.1} s, three nodes with one killed at {killed_at_s:.1} s \
         {killed_s:.1} s (lease {lease_ms} ms)",
        kiln_bin().display()
    );
    for (i, s) in servers.iter_mut().enumerate() {
        if i != victim {
            assert!(s.terminate(30).is_some_and(|st| st.success()), "clean shutdown");
        }
    }
}
