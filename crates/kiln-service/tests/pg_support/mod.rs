//! Shared helpers of the PostgreSQL tests: the server from `KILN_TEST_PG_URL` (SKIP
//! without it, a failure when `KILN_REQUIRE_PG=1`), and a fresh database per test so that
//! tests run in parallel on one cluster (scripts/pg-test-cluster.sh starts one).
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::Mutex;

/// The admin URL, or `None` after printing why the test skips.
pub fn admin_url(test: &str) -> Option<String> {
    match std::env::var("KILN_TEST_PG_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            kiln_testkit::skip_unless_required(
                "KILN_REQUIRE_PG",
                test,
                "KILN_TEST_PG_URL is not set (start a cluster with scripts/pg-test-cluster.sh)",
            );
            None
        }
    }
}

/// `url` with its database replaced by `db`.
pub fn with_db(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let (authority, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let query = tail.find('?').map_or("", |i| &tail[i..]);
    format!("{scheme}://{authority}/{db}{query}")
}

/// Create an empty database for one test; its URL.
pub async fn fresh_db(admin: &str, name: &str) -> String {
    let (client, conn) = tokio_postgres::connect(admin, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to {admin}: {e}"));
    let h = tokio::spawn(conn);
    let r: u64 = rand_suffix();
    let db = format!("kiln_t_{name}_{r:x}");
    client
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .unwrap();
    drop(client);
    let _ = h.await;
    with_db(admin, &db)
}

fn rand_suffix() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    t ^ (u64::from(std::process::id()) << 40)
}

/// A plain client on `url` (for checks behind the store's back).
pub async fn client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// Store events recorded.
#[derive(Default)]
pub struct Recorder {
    pub new_work: std::sync::atomic::AtomicU64,
    pub finished: Mutex<Vec<String>>,
    pub notify: tokio::sync::Notify,
}

impl kiln_service::store::StoreEvents for Recorder {
    fn new_work(&self) {
        self.new_work.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.notify.notify_waiters();
    }
    fn job_finished(&self, id: &str) {
        self.finished.lock().unwrap().push(id.to_string());
        self.notify.notify_waiters();
    }
}

/// Wait until `f` holds, polling every 20 ms, up to `secs`; whether it held.
pub async fn eventually(secs: f64, mut f: impl FnMut() -> bool) -> bool {
    let end = tokio::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    while tokio::time::Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    f()
}

pub type Events = Arc<Recorder>;
