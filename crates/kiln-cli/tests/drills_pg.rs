//! Fault drills on the PostgreSQL store (issue 33), `kiln serve` nodes (CPU workers) on one
//! database of the server `KILN_TEST_PG_URL` names (SKIP without it, a failure with
//! `KILN_REQUIRE_PG=1`), each ending in the history check of `drill_support` (every
//! accepted job ends exactly once; no finished job's result changes after it was read):
//! - PostgreSQL restarted under load (`pg_ctl restart -m fast`, twice; needs the cluster's
//!   dir in `KILN_TEST_PG_DIR`, as `scripts/pg-test-cluster.sh start DIR` made it);
//! - one node's connections killed (`pg_terminate_backend`, five times under load);
//! - the pool exhausted (`store.pool_size = 2`, 16 clients, the jobs table locked for 12 s
//!   by another database connection: requests wait, then answer 503 `store_unavailable`
//!   with a `Retry-After`, never a 500);
//! - a node frozen past its lease (SIGSTOP) while it runs a job, woken (SIGCONT) after
//!   another node re-ran the job: its late result is discarded, logged, and the stored
//!   result is the other node's;
//! - repeated kills (`kill -9` of one node three times under load, restarted each time).
//!
//! Every submission carries an idempotency key and is retried on a transport error, a 5xx
//! or a 429 (drill_support says how ambiguous submissions are checked). No 500 may be
//! answered in any drill.
//!
//! Short versions by default (a few hundred jobs each). The long versions (100,000 jobs):
//! `KILN_DRILL_JOBS=100000 KILN_TEST_PG_URL=... KILN_TEST_PG_DIR=... cargo test --release
//! -p kiln-cli --test drills_pg -- --nocapture --test-threads 1`
#![allow(clippy::unwrap_used)]

mod drill_support;
mod pg_support;
mod service_support;

use drill_support::*;
use pg_support::*;
use service_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "drill-token-1";

/// A database of its own and nodes on it.
struct Cluster {
    url: String,
    dir: tempfile::TempDir,
    nodes: Nodes,
    servers: Vec<(Server, Log)>,
    /// Node i's id in the registry (lease owners are `ID/slot`).
    ids: Vec<String>,
    args: Vec<Vec<String>>,
    h: Arc<History>,
    t0: Instant,
}

impl Cluster {
    /// `None`: no PostgreSQL (SKIP). Node i's connections are named `drill{i}`
    /// (`application_name`), so one node's can be told from another's.
    fn new(name: &str, nodes: usize, store: &str) -> Option<Cluster> {
        let admin = admin_url(name)?;
        let db = format!("kiln_drill_{name}_{}", std::process::id());
        Db::connect(&admin).exec(&format!("CREATE DATABASE {db}"));
        let url = with_db(&admin, &db);
        let dir = tempfile::tempdir().unwrap();
        let mut args = Vec::new();
        for i in 0..nodes {
            let sep = if url.contains('?') { '&' } else { '?' };
            let cfg = dir.path().join(format!("node{i}.toml"));
            std::fs::write(
                &cfg,
                format!(
                    "[store]\nurl = \"{url}{sep}application_name=drill{i}\"\n{store}\n\
                     [limits]\nmax_queue = 1000000\nmax_in_flight_per_token = 1000000\n\
                     [[tokens]]\nname = \"drill\"\ntoken = \"{TOKEN}\"\nkinds = [\"price\", \"fault\"]\n"
                ),
            )
            .unwrap();
            args.push(vec![
                "--service-config".to_string(),
                cfg.to_str().unwrap().to_string(),
                "--cpu-workers".into(),
                "1".into(),
                "--allow-fault-injection".into(),
            ]);
        }
        let mut c = Cluster {
            url,
            dir,
            nodes: Arc::default(),
            servers: Vec::new(),
            ids: Vec::new(),
            args,
            h: Arc::default(),
            t0: Instant::now(),
        };
        for i in 0..nodes {
            let (s, id) = c.start(i);
            c.nodes.lock().unwrap().push(s.0.addr);
            c.servers.push(s);
            c.ids.push(id);
        }
        Some(c)
    }

    /// Start node i; it and its id (the registry's entry that was not there before).
    fn start(&self, i: usize) -> ((Server, Log), String) {
        let before = self.registry();
        let args: Vec<&str> = self.args[i].iter().map(String::as_str).collect();
        let s = start_logged(&self.dir.path().join(format!("node{i}")), &args, None);
        let new: Vec<String> = self
            .registry()
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
        assert_eq!(new.len(), 1, "node {i} registered itself once: {new:?}");
        (s, new[0].clone())
    }

    /// The node ids registered (none before the first node made the schema).
    fn registry(&self) -> Vec<String> {
        let db = self.db();
        let made: bool = db.query("SELECT to_regclass('kiln_nodes') IS NOT NULL", &[])[0].get(0);
        if !made {
            return Vec::new();
        }
        db.query("SELECT id FROM kiln_nodes", &[])
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    /// kill -9 node i and start it again.
    fn restart(&mut self, i: usize) {
        self.servers[i].0.kill9();
        let (s, id) = self.start(i);
        self.nodes.lock().unwrap()[i] = s.0.addr;
        self.servers[i] = s;
        self.ids[i] = id;
    }

    fn db(&self) -> Db {
        Db::connect(&self.url)
    }

    /// Wait until `k` submissions are accepted.
    fn until_accepted(&self, k: usize) {
        let end = Instant::now() + Duration::from_secs(300);
        while self.h.tally().0 < k {
            assert!(Instant::now() < end, "only {} of {k} accepted", self.h.tally().0);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Every job in the store.
    fn stored(&self) -> Vec<Stored> {
        self.db()
            .query(
                "SELECT j.id, j.idem_key, j.state, count(r.job_id), max(r.body) FROM kiln_jobs j \
                 LEFT JOIN kiln_results r ON r.job_id = j.id GROUP BY j.id, j.idem_key, j.state",
                &[],
            )
            .iter()
            .map(|r| Stored {
                id: r.get(0),
                key: r.get(1),
                state: r.get(2),
                results: r.get::<_, i64>(3) as u32,
                result: r
                    .get::<_, Option<String>>(4)
                    .map(|b| serde_json::from_str(&b).unwrap()),
            })
            .collect()
    }

    /// Finish: every accepted job read to its end, the history checked, no 500s; the
    /// summary line.
    fn check(&self, what: &str, stop: Arc<AtomicBool>, rd: std::thread::JoinHandle<()>) -> String {
        wait_all(&self.h, &self.nodes, TOKEN, 300);
        stop.store(true, Ordering::SeqCst);
        rd.join().unwrap();
        let summary = self.h.assert_ok(&self.stored());
        assert_eq!(self.h.server_errors.load(Ordering::SeqCst), 0, "no 500s");
        let codes = self.h.codes_503.lock().unwrap().clone();
        assert!(
            codes.values().all(|(_, retry_after)| *retry_after),
            "every 503 has a Retry-After: {codes:?}"
        );
        let line = format!(
            "{what}: {summary}; 503s {codes:?}; {:.1} s",
            self.t0.elapsed().as_secs_f64()
        );
        println!("{line}");
        line
    }

    /// A reader of finished jobs, running until the check.
    fn reader(&self) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
        let stop = Arc::new(AtomicBool::new(false));
        let rd = reader(self.h.clone(), self.nodes.clone(), TOKEN.into(), stop.clone());
        (stop, rd)
    }
}

/// The PostgreSQL cluster's dir (`KILN_TEST_PG_DIR`): its `bin`, `user` and `data`.
fn pg_dir() -> PathBuf {
    match std::env::var("KILN_TEST_PG_DIR") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ => panic!(
            "KILN_TEST_PG_DIR is not set: the restart drill needs the cluster's dir \
             (scripts/pg-test-cluster.sh start DIR; .ci/run exports it)"
        ),
    }
}

/// `pg_ctl restart -m fast` of the test cluster, as the user it runs as (root runs it
/// through runuser, as scripts/pg-test-cluster.sh does).
fn pg_restart(dir: &Path) {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap().trim().to_string();
    let (bin, user) = (read("bin"), read("user"));
    let pg_ctl = format!("{bin}/pg_ctl");
    let data = dir.join("data");
    let mut cmd = if Command::new("id").arg("-u").output().unwrap().stdout == b"0\n" {
        let mut c = Command::new("runuser");
        c.args(["-u", &user, "--", &pg_ctl]);
        c
    } else {
        Command::new(&pg_ctl)
    };
    // -l: the server's output to its log, as the script starts it (without, the new
    // server would hold this command's stdout open and `output()` would never return)
    let out = cmd
        .arg("-D")
        .arg(&data)
        .arg("-l")
        .arg(dir.join("server.log"))
        .args(["-m", "fast", "-w", "-t", "60", "restart"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_ctl restart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pg_restarted_under_load() {
    let _one = serial();
    let Some(c) = Cluster::new("restart", 2, "lease_ms = 5000") else {
        return;
    };
    let dir = pg_dir();
    let n = drill_jobs(400);
    let (stop, rd) = c.reader();
    let clients = submit_all(&c.h, &c.nodes, TOKEN, n, 4, Duration::from_secs(120));
    for k in 1..=2 {
        c.until_accepted(n * k / 3);
        let t = Instant::now();
        pg_restart(&dir);
        println!("restart {k}: {:.1} s", t.elapsed().as_secs_f64());
    }
    for cl in clients {
        cl.join().unwrap();
    }
    c.check("pg restarted twice", stop, rd);
}

#[test]
fn pg_node_connections_terminated_under_load() {
    let _one = serial();
    let Some(c) = Cluster::new("terminate", 2, "lease_ms = 5000") else {
        return;
    };
    let n = drill_jobs(400);
    let (stop, rd) = c.reader();
    let clients = submit_all(&c.h, &c.nodes, TOKEN, n, 4, Duration::from_secs(120));
    let db = c.db();
    let mut killed = 0i64;
    for k in 1..=5 {
        c.until_accepted(n * k / 7);
        let r = db.query(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'drill0' AND pid <> pg_backend_pid()",
            &[],
        );
        killed += r[0].get::<_, i64>(0);
    }
    assert!(killed >= 5, "node 0 had connections to kill: {killed}");
    for cl in clients {
        cl.join().unwrap();
    }
    let line = c.check("pg node 0's connections terminated 5 times", stop, rd);
    println!("{line} ({killed} backends terminated)");
}

#[test]
fn pg_pool_exhausted_waits_or_answers_503() {
    let _one = serial();
    let Some(c) = Cluster::new("pool", 1, "pool_size = 2") else {
        return;
    };
    let n = drill_jobs(300);
    let (stop, rd) = c.reader();
    let clients = submit_all(&c.h, &c.nodes, TOKEN, n, 16, Duration::from_secs(120));
    c.until_accepted(n / 4);
    // A separate database connection holds the jobs table: both pooled connections block on
    // it, and requests queue for the pool past its 10 s wait.
    let db = c.db();
    db.exec("BEGIN; LOCK TABLE kiln_jobs IN ACCESS EXCLUSIVE MODE");
    std::thread::sleep(Duration::from_secs(12));
    db.exec("COMMIT");
    for cl in clients {
        cl.join().unwrap();
    }
    c.check("pg pool of 2, 16 clients, table locked 12 s", stop, rd);
    let codes = c.h.codes_503.lock().unwrap().clone();
    assert!(
        codes.keys().all(|k| k == "store_unavailable" || k == "timeout"),
        "503s name the cause: {codes:?}"
    );
}

#[test]
fn pg_frozen_node_late_result_is_discarded_and_logged() {
    let _one = serial();
    let Some(c) = Cluster::new("frozen", 2, "lease_ms = 2000") else {
        return;
    };
    let db = c.db();
    let n = drill_jobs(200);
    let (stop, rd) = c.reader();
    // A job that sleeps 4 s, on whichever node claims it.
    let body =
        serde_json::json!({"kind": "fault", "params": {"mode": "sleep", "sleep_ms": 4000}}).to_string();
    submit(
        &c.h,
        &c.nodes,
        TOKEN,
        "sleeper",
        &body,
        0,
        Duration::from_secs(30),
    );
    let id = c.h.accepted().pop().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let owner: String = loop {
        let r = db.query(
            "SELECT lease_owner FROM kiln_jobs WHERE id = $1 AND state = 'running'",
            &[&id],
        );
        if let Some(o) = r.first().and_then(|r| r.get::<_, Option<String>>(0)) {
            break o;
        }
        assert!(Instant::now() < end, "the sleeper never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    let holder = (0..2)
        .find(|&i| owner.starts_with(&format!("{}/", c.ids[i])))
        .unwrap();
    let pid_of = |s: &Server| s.child.id();
    let other = 1 - holder;
    let only_other: Nodes = Arc::new(Mutex::new(vec![c.servers[other].0.addr]));
    let clients = submit_all(&c.h, &only_other, TOKEN, n, 2, Duration::from_secs(120));
    let pid = pid_of(&c.servers[holder].0).to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    // Past the lease (2 s) and the other node's re-run (4 s).
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let r = db.query("SELECT state, attempts FROM kiln_jobs WHERE id = $1", &[&id]);
        let (st, attempts): (String, i32) = (r[0].get(0), r[0].get(1));
        if st == "succeeded" {
            assert_eq!(attempts, 2, "re-run by the other node");
            break;
        }
        assert!(Instant::now() < end, "the frozen node's job was not re-run: {st}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        read_once(&c.h, &only_other, TOKEN, &id, 0),
        "the re-run's result read"
    );
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    // The woken node's worker answered attempt 1 long ago: its outcome is discarded, logged.
    let needle = format!("job {id}: attempt 1's late outcome discarded");
    let end = Instant::now() + Duration::from_secs(20);
    while c.servers[holder].1.lines_with(&needle).is_empty() {
        assert!(
            Instant::now() < end,
            "no discard logged by the woken node: {}",
            c.servers[holder].1.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for cl in clients {
        cl.join().unwrap();
    }
    let line = c.check("pg node frozen past its 2 s lease", stop, rd);
    let r = db.query("SELECT body FROM kiln_results WHERE job_id = $1", &[&id]);
    let stored: serde_json::Value = serde_json::from_str(&r[0].get::<_, String>(0)).unwrap();
    assert_eq!(
        stored["attempt"], 2,
        "the stored result is the other node's: {stored}"
    );
    println!("{line}; logged: {}", c.servers[holder].1.lines_with(&needle)[0]);
}

#[test]
fn pg_repeated_kills_lose_nothing() {
    let _one = serial();
    let Some(mut c) = Cluster::new("kills", 2, "lease_ms = 2000") else {
        return;
    };
    let n = drill_jobs(400);
    let (stop, rd) = c.reader();
    let clients = submit_all(&c.h, &c.nodes, TOKEN, n, 4, Duration::from_secs(120));
    for k in 1..=3 {
        c.until_accepted(n * k / 5);
        c.restart(1);
    }
    for cl in clients {
        cl.join().unwrap();
    }
    c.check("pg node 1 killed 3 times", stop, rd);
}
