//! The store contract's lease sweep (tests/store_contract.rs runs each test on both
//! stores): a job whose lease expires goes back to the queue while it has attempts left and
//! fails on its last, a shard failing its parent with it.

use super::{ok, shard_result, sharded};
use crate::store_support::{job, LEASE};
use kiln_service::store::*;

/// A lease short enough to run out within [`PAST_SHORT`].
const SHORT: std::time::Duration = std::time::Duration::from_millis(1);
/// A wait past [`SHORT`] on either store's clock.
const PAST_SHORT: std::time::Duration = std::time::Duration::from_millis(40);

/// Claim one queued job of batch key `key` for `owner` under `lease`; it must be `want`
/// on attempt `attempt`.
async fn claim_one(
    s: &dyn JobStore,
    owner: &str,
    key: Option<&str>,
    lease: std::time::Duration,
    want: &str,
    attempt: u32,
) {
    let c = s.claim(owner, false, key, 1, lease).await.unwrap();
    assert_eq!(c.len(), 1, "{want} claimed");
    assert_eq!((c[0].id.as_str(), c[0].attempt), (want, attempt));
}

/// The lease sweep: a job whose lease expired with attempts left goes back to the queue;
/// one whose lease expired on its last attempt fails as `lease_expired` (its finish time
/// and message set, its late end refused) instead of going round again; a live lease is
/// left alone, and the counts returned say which was which.
pub async fn a_lease_expiring_on_the_last_attempt_fails_the_job(s: &dyn JobStore) {
    s.insert(job("j_l", "L", None, "h")).await.unwrap();
    let mut three = job("j_k", "K", None, "h");
    three.max_attempts = 3;
    s.insert(three).await.unwrap();
    s.insert(job("j_v", "V", None, "h")).await.unwrap();
    claim_one(s, "n/9", Some("V"), LEASE, "j_v", 1).await;
    claim_one(s, "n/0", Some("L"), SHORT, "j_l", 1).await;
    tokio::time::sleep(PAST_SHORT).await;
    assert_eq!(
        s.requeue_orphans("n/").await.unwrap(),
        Orphans {
            requeued: 1,
            failed: Vec::new()
        },
        "attempt 1 of 2: re-queued"
    );
    let back = s.get("j_l").await.unwrap().unwrap();
    assert_eq!(
        (back.state, back.attempts, back.error),
        (JobState::Queued, 1, None)
    );
    claim_one(s, "n/0", Some("L"), SHORT, "j_l", 2).await;
    claim_one(s, "n/1", Some("K"), SHORT, "j_k", 1).await;
    tokio::time::sleep(PAST_SHORT).await;
    let swept = s.requeue_orphans("n/").await.unwrap();
    assert_eq!(swept.requeued, 1, "j_k has attempts left: {swept:?}");
    let l = s.get("j_l").await.unwrap().unwrap();
    assert_eq!(
        swept.failed,
        [LostJob {
            id: "j_l".into(),
            kind: "price".into(),
            principal: "p".into(),
            created_ms: l.created_ms,
            parent: None,
            closed_parent: None,
        }]
    );
    assert_eq!((l.state, l.attempts), (JobState::Failed, 2), "failed, not queued");
    assert!(l.finished_ms.is_some());
    assert_eq!(
        l.error,
        Some((
            "lease_expired".to_string(),
            "lease expired on attempt 2 of 2 (the worker or node stopped responding)".to_string()
        ))
    );
    assert!(
        !s.finish("j_l", "n/0", ok("{}")).await.unwrap(),
        "the lost worker's late end is refused"
    );
    assert_eq!(s.get("j_k").await.unwrap().unwrap().state, JobState::Queued);
    assert_eq!(
        s.get("j_v").await.unwrap().unwrap().state,
        JobState::Running,
        "a live lease stays"
    );
    assert_eq!(
        s.requeue_orphans("n/").await.unwrap(),
        Orphans::default(),
        "nothing left to sweep"
    );
    assert!(
        s.claim("n/0", false, Some("L"), 1, LEASE)
            .await
            .unwrap()
            .is_empty(),
        "the failed job is never claimed again"
    );
    let c = s.counts().await.unwrap();
    assert_eq!(
        (
            c.get(JobState::Failed),
            c.get(JobState::Queued),
            c.get(JobState::Running)
        ),
        (1, 1, 1)
    );
    assert_eq!(c.in_flight_by_principal, [("p".to_string(), 2)]);
}

/// A shard whose lease expires on its last attempt fails its parent with that error (the
/// shard closing it, its unfinished siblings cancelled, a running sibling's end refused),
/// as a shard's failure does; the sweep names the parent it failed.
pub async fn a_shard_lost_on_its_last_attempt_fails_its_parent(s: &dyn JobStore) {
    let (parent, shards) = sharded("j_e", 6, 3, None);
    s.insert_sharded(parent, shards).await.unwrap();
    claim_one(s, "n/0", None, SHORT, "j_e_s0", 1).await;
    claim_one(s, "n/1", None, LEASE, "j_e_s1", 1).await;
    tokio::time::sleep(PAST_SHORT).await;
    let swept = s.requeue_orphans("n/").await.unwrap();
    assert_eq!((swept.requeued, swept.failed.len()), (1, 0), "{swept:?}");
    assert_eq!(s.get("j_e").await.unwrap().unwrap().state, JobState::Running);
    claim_one(s, "n/0", None, SHORT, "j_e_s0", 2).await;
    tokio::time::sleep(PAST_SHORT).await;
    let swept = s.requeue_orphans("n/").await.unwrap();
    assert_eq!(swept.requeued, 0, "{swept:?}");
    let p = s.get("j_e").await.unwrap().unwrap();
    assert_eq!(
        swept.failed,
        [LostJob {
            id: "j_e_s0".into(),
            kind: "price".into(),
            principal: "p".into(),
            created_ms: s.get("j_e_s0").await.unwrap().unwrap().created_ms,
            parent: Some("j_e".into()),
            closed_parent: Some(Box::new(LostJob {
                id: "j_e".into(),
                kind: "price".into(),
                principal: "p".into(),
                created_ms: p.created_ms,
                parent: None,
                closed_parent: None,
            })),
        }]
    );
    assert_eq!(p.state, JobState::Failed);
    assert!(p.finished_ms.is_some());
    assert_eq!(p.closed_by.as_deref(), Some("j_e_s0"));
    let (code, msg) = p.error.clone().unwrap();
    assert_eq!(code, "lease_expired");
    assert!(
        msg.contains("j_e_s0") && msg.contains("lease expired on attempt 2 of 2"),
        "{msg}"
    );
    assert_eq!(
        p.shards,
        Some(ShardCounts {
            total: 3,
            done: 0,
            failed: 1,
            cancelled: 2
        })
    );
    assert!(
        !s.finish("j_e_s1", "n/1", shard_result(1, 2)).await.unwrap(),
        "the cancelled sibling's end is refused"
    );
    assert_eq!(s.counts().await.unwrap().in_flight_by_principal, []);
    assert_eq!(s.requeue_orphans("n/").await.unwrap(), Orphans::default());
}

/// A drained node's jobs (`release_node`) go back to the queue with the interrupted attempt
/// given back: a job drained on its last attempt is claimed again as that attempt, never
/// as attempt `max_attempts + 1`, and other nodes' jobs are left alone.
pub async fn a_drain_gives_the_interrupted_attempt_back(s: &dyn JobStore) {
    s.insert(job("j_d", "D", None, "h")).await.unwrap();
    s.insert(job("j_o", "O", None, "h")).await.unwrap();
    claim_one(s, "nd/0", Some("D"), LEASE, "j_d", 1).await;
    claim_one(s, "no/0", Some("O"), LEASE, "j_o", 1).await;
    assert_eq!(s.release_node("nd").await.unwrap(), 1);
    claim_one(s, "nd/0", Some("D"), LEASE, "j_d", 1).await;
    assert_eq!(s.release_node("nd").await.unwrap(), 1);
    let back = s.get("j_d").await.unwrap().unwrap();
    assert_eq!((back.state, back.attempts), (JobState::Queued, 0));
    // the job's own failures still count: attempt 1 lost to an expired lease, attempt 2
    // drained and given back, then claimed as 2 of 2
    claim_one(s, "nd/0", Some("D"), SHORT, "j_d", 1).await;
    tokio::time::sleep(PAST_SHORT).await;
    // (live owners "no/...": SQLite's sweep also takes running jobs of owners not live)
    assert_eq!(s.requeue_orphans("no/").await.unwrap().requeued, 1);
    claim_one(s, "nd/0", Some("D"), LEASE, "j_d", 2).await;
    assert_eq!(s.release_node("nd").await.unwrap(), 1);
    claim_one(s, "nd/0", Some("D"), LEASE, "j_d", 2).await;
    let other = s.get("j_o").await.unwrap().unwrap();
    assert_eq!((other.state, other.attempts), (JobState::Running, 1));
}
