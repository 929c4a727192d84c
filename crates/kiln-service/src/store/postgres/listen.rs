//! The listener: one dedicated connection per node (outside the pool) that LISTENs for
//! `kiln_jobs` (work queued) and `kiln_done` (a job ended) and holds the session-level
//! advisory lock that elects the node exporting queue-wide gauges. The lock dies with the
//! connection, so when the elected node dies (even `kill -9`) another takes over within
//! one retry interval. The connection is re-opened after any failure; after a reconnect
//! idle workers are woken once, in case a notification was missed meanwhile.

use crate::store::StoreEvents;
use futures_util::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres::{AsyncMessage, NoTls};

/// The advisory lock key of the queue-gauge exporter (`'kiln' 'lead'` as bytes).
pub const LEADER_LOCK: i64 = 0x6b69_6c6e_6c65_6164;

/// How often a follower tries to take the exporter lock, and the leader checks its
/// connection.
const RETRY: Duration = Duration::from_secs(2);

#[derive(Default)]
struct State {
    leader: AtomicBool,
    events: Mutex<Option<Arc<dyn StoreEvents>>>,
}

impl State {
    fn events(&self) -> Option<Arc<dyn StoreEvents>> {
        self.events.lock().ok().and_then(|g| g.clone())
    }
}

/// The listener task's handle (see the [module docs](self)).
pub struct Listener {
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// Start the task (it connects in the background and retries forever).
    pub fn start(cfg: tokio_postgres::Config) -> Listener {
        let state = Arc::new(State::default());
        let task = tokio::spawn(run(cfg, state.clone()));
        Listener { state, task }
    }

    /// Whether this node holds the exporter lock.
    pub fn is_leader(&self) -> bool {
        self.state.leader.load(Ordering::SeqCst)
    }

    /// Where notifications go.
    pub fn set_events(&self, events: Arc<dyn StoreEvents>) {
        if let Ok(mut g) = self.state.events.lock() {
            *g = Some(events);
        }
    }

    /// Stop the task (closing its connection releases the lock).
    pub fn stop(&self) {
        self.task.abort();
        self.state.leader.store(false, Ordering::SeqCst);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(cfg: tokio_postgres::Config, state: Arc<State>) {
    let mut failures = 0u32;
    loop {
        match session(&cfg, &state).await {
            Ok(()) => failures = 0,
            Err(e) => {
                failures += 1;
                if failures == 1 || failures % 30 == 0 {
                    tracing::warn!("job store listener: {e}; reconnecting");
                }
            }
        }
        state.leader.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis((250u64 << failures.min(4)).min(4000))).await;
    }
}

/// One connection's life: LISTEN, then dispatch notifications and keep trying the lock
/// until the connection fails.
async fn session(cfg: &tokio_postgres::Config, state: &Arc<State>) -> Result<(), String> {
    let (client, mut conn) = cfg.connect(NoTls).await.map_err(|e| e.to_string())?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // The connection is driven here; notifications go to the loop below by channel.
    let driver = tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(m) = stream.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    let key = if n.channel() == "kiln_done" {
                        format!("d{}", n.payload())
                    } else {
                        "w".to_string()
                    };
                    if tx.send(key).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => return e.to_string(),
            }
        }
        "the connection closed".to_string()
    });
    let mut guard = AbortOnDrop(driver);
    client
        .batch_execute("LISTEN kiln_jobs; LISTEN kiln_done")
        .await
        .map_err(|e| e.to_string())?;
    // Wake once: work may have been queued while this connection was down.
    if let Some(ev) = state.events() {
        ev.new_work();
    }
    let mut tick = tokio::time::interval(RETRY);
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(key) => {
                    let Some(ev) = state.events() else { continue };
                    match key.strip_prefix('d') {
                        Some(id) => ev.job_finished(id),
                        None => ev.new_work(),
                    }
                }
                None => {
                    let why = match (&mut guard.0).await {
                        Ok(s) => s,
                        Err(e) => e.to_string(),
                    };
                    return Err(why);
                }
            },
            _ = tick.tick() => {
                if state.leader.load(Ordering::SeqCst) {
                    client.simple_query("SELECT 1").await.map_err(|e| e.to_string())?;
                } else {
                    let row = client
                        .query_one("SELECT pg_try_advisory_lock($1)", &[&LEADER_LOCK])
                        .await
                        .map_err(|e| e.to_string())?;
                    if row.get::<_, bool>(0) {
                        tracing::info!("this node now exports the queue-wide gauges");
                        state.leader.store(true, Ordering::SeqCst);
                    }
                }
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<String>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
