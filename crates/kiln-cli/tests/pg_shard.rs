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
//! 1024). The 10-million-row figure is for a 16-core host: `KILN_SHARD_TEST_ROWS=10000000`
//! with a release `kiln` (`KILN_BIN=target/release/kiln`).
#![allow(clippy::unwrap_used)]

mod pg_support;
mod service_support;

use pg_support::*;
use serde_json::{json, Value};
use service_support::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 3000;
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

#[test]
fn a_sharded_book_on_three_nodes_one_killed_is_bitwise_the_one_node_book() {
    let Some(admin) = admin_url("pg_shard") else {
        return;
    };
    let rows = env_or("KILN_SHARD_TEST_ROWS", 3000).max(20);
    let paths = env_or("KILN_SHARD_TEST_PATHS", 1024);
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
            "[store]\nurl = \"{url}\"\nlease_ms = {LEASE_MS}\n\
             [limits]\nmax_body_bytes = 4294967296\nmax_elements = 100000000\njob_deadline_s = 86400\n\
             max_wait_s = 60\n\
             [sharding]\nmin_rows = {shard_rows}\nshard_rows = {shard_rows}\n\
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
    let book: Vec<Value> = (0..rows).map(shard_row).collect();
    let params = json!({"method": "mc", "paths": paths, "steps": 16, "seed": 11});
    let body = json!({"kind": "price", "params": params, "inputs": {"options": book}});

    // one node: a queue timeout keeps the job whole
    let mut whole = body.clone();
    whole["queue_timeout_s"] = json!(86400);
    let t = Instant::now();
    let id = submit_as(&servers[0], TOKEN, &whole);
    let one = succeeded(&servers[0], &id, TOKEN, 1800);
    let one_s = t.elapsed().as_secs_f64();
    assert!(one.get("shards").is_none(), "not split: {one}");
    let want = price_bits(&one);
    assert_eq!(want.len() as u64, rows);

    // three nodes
    let t = Instant::now();
    let id = submit_as(&servers[0], TOKEN, &body);
    let three = succeeded(&servers[1], &id, TOKEN, 1800);
    let three_s = t.elapsed().as_secs_f64();
    let shards = three["shards"]["total"].as_u64().unwrap();
    assert!(shards >= 10, "{three}");
    assert_eq!(three["shards"]["done"], shards);
    assert_eq!(price_bits(&three), want, "three nodes: the one-node bits");

    // three nodes, one killed while it holds a shard
    let victim = 2usize;
    let prefix = format!("{}/", ids[victim]);
    let t = Instant::now();
    let id = submit_as(&servers[0], TOKEN, &body);
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
    let killed = succeeded(&servers[0], &id, TOKEN, 1800);
    let killed_s = t.elapsed().as_secs_f64();
    assert_eq!(price_bits(&killed), want, "one node killed: the one-node bits");
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
         {shard_rows}, one CPU worker a node, debug-or-given kiln at {}: one node {one_s:.1} s, \
         three nodes {three_s:.1} s, three nodes with one killed at {killed_at_s:.1} s \
         {killed_s:.1} s (lease {LEASE_MS} ms)",
        kiln_bin().display()
    );
    for (i, s) in servers.iter_mut().enumerate() {
        if i != victim {
            assert!(s.terminate(30).is_some_and(|st| st.success()), "clean shutdown");
        }
    }
}
