//! Helpers of the PostgreSQL cluster tests: the server from `KILN_TEST_PG_URL` (SKIP
//! without it, a failure with `KILN_REQUIRE_PG=1`), a blocking SQL client for checks behind
//! the nodes' backs, and CPU time by process name (where a measurement's time goes).
#![allow(dead_code, clippy::unwrap_used)]

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

pub fn with_db(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (authority, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    let query = tail.find('?').map_or("", |i| &tail[i..]);
    format!("{scheme}://{authority}/{db}{query}")
}

/// A blocking SQL helper for the checks (tokio-postgres on a private runtime).
pub struct Db {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Db {
    pub fn connect(url: &str) -> Db {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = rt.block_on(async {
            let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap();
            tokio::spawn(conn);
            c
        });
        Db { rt, client }
    }
    pub fn query(
        &self,
        sql: &str,
        p: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Vec<tokio_postgres::Row> {
        self.rt.block_on(self.client.query(sql, p)).unwrap()
    }
    pub fn exec(&self, sql: &str) {
        self.rt.block_on(self.client.batch_execute(sql)).unwrap();
    }
}

/// CPU seconds (user + system) used so far by live processes whose name is `comm`
/// (`postgres`, `kiln`), from /proc; 0 where /proc is unreadable.
pub fn cpu_seconds(comm: &str) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut total = 0u64;
    for e in rd.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if &stat[open + 1..close] != comm {
            continue;
        }
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        // After the name: state is field 3 overall; utime and stime are 14 and 15.
        if let (Some(u), Some(s)) = (f.get(11), f.get(12)) {
            total += u.parse::<u64>().unwrap_or(0) + s.parse::<u64>().unwrap_or(0);
        }
    }
    total as f64 / tick
}
