//! The store contract's claim made in the transaction of a batch's ends
//! (`JobStore::finish_and_claim`; tests/store_contract.rs runs each test on both stores).

use super::{end, ok};
use crate::store_support::{job, LEASE};
use kiln_service::store::*;

fn ids(c: &[ClaimedJob]) -> Vec<&str> {
    c.iter().map(|j| j.id.as_str()).collect()
}

fn head(max: usize) -> NextClaim {
    NextClaim {
        gpu: false,
        max_workers_per_token: 0,
        lease: LEASE,
        take: NextTake::Head(ClaimLimit { max, slots: 1 }),
    }
}

fn batch(max: usize, delay_ms: u64) -> NextClaim {
    NextClaim {
        take: NextTake::Batch { max, delay_ms },
        ..head(1)
    }
}

/// The ends are stored by `finish_many`'s rule and the next work is claimed for the same
/// owner as `claim_head` would claim it: its attempt counted, leased, running.
pub async fn finish_and_claim_stores_the_ends_then_claims(s: &dyn JobStore) {
    let jobs: Vec<NewJob> = (0..5).map(|i| job(&format!("j_n{i}"), "K", None, "")).collect();
    assert!(s.insert_batch(jobs).await.unwrap().is_stored());
    let mine = s.claim("n1/0", false, Some("K"), 2, LEASE).await.unwrap();
    assert_eq!(ids(&mine), ["j_n0", "j_n1"]);
    let failed = Outcome::Failed {
        code: "invalid_input".into(),
        message: "bad strike".into(),
    };
    let ends = vec![end("j_n0", ok("0")), end("j_n1", failed), end("j_n9", ok("9"))];
    let (stored, next) = s.finish_and_claim("n1/0", ends, head(2)).await.unwrap();
    assert_eq!(stored, [true, true, false], "an unknown job's end is not stored");
    assert_eq!(ids(&next), ["j_n2", "j_n3"], "the head, then its key in order");
    assert!(next.iter().all(|j| j.attempt == 1));
    let j0 = s.get("j_n0").await.unwrap().unwrap();
    assert_eq!((j0.state, j0.result.as_deref()), (JobState::Succeeded, Some("0")));
    assert_eq!(s.get("j_n1").await.unwrap().unwrap().state, JobState::Failed);
    for id in ["j_n2", "j_n3"] {
        let j = s.get(id).await.unwrap().unwrap();
        assert_eq!((j.state, j.attempts), (JobState::Running, 1), "{id}");
    }
    // the claimed jobs are the owner's: its ends store them, another owner's do not
    let (stored, _) = s
        .finish_and_claim("n2/0", vec![end("j_n2", ok("x"))], head(1))
        .await
        .unwrap();
    assert_eq!(stored, [false], "another owner's end");
    let ends = vec![end("j_n2", ok("2")), end("j_n3", ok("3"))];
    let (stored, next) = s.finish_and_claim("n1/0", ends, head(8)).await.unwrap();
    assert_eq!(stored, [true, true]);
    assert!(next.is_empty(), "n2/0 claimed the last job: {:?}", ids(&next));
    assert_eq!(s.get("j_n4").await.unwrap().unwrap().state, JobState::Running);
    // an empty queue claims nothing and still stores the ends
    let (stored, next) = s
        .finish_and_claim("n2/0", vec![end("j_n4", ok("4"))], head(8))
        .await
        .unwrap();
    assert_eq!((stored, next.len()), (vec![true], 0));
    let c = s.counts().await.unwrap();
    assert_eq!((c.get(JobState::Succeeded), c.get(JobState::Running)), (4, 0));
}

/// A dynamic batch is claimed with the ends only once it is full or its head has waited its
/// delay; before then nothing is claimed and the jobs stay queued.
pub async fn finish_and_claim_waits_for_a_batch_to_fill(s: &dyn JobStore) {
    let jobs: Vec<NewJob> = (0..4).map(|i| job(&format!("j_b{i}"), "B", None, "")).collect();
    assert!(s.insert_batch(jobs).await.unwrap().is_stored());
    let first = s.claim("n/0", false, Some("B"), 1, LEASE).await.unwrap();
    assert_eq!(ids(&first), ["j_b0"]);
    let (stored, next) = s
        .finish_and_claim("n/0", vec![end("j_b0", ok("0"))], batch(4, 60_000))
        .await
        .unwrap();
    assert_eq!(stored, [true]);
    assert!(
        next.is_empty(),
        "three of four queued, the head young: {:?}",
        ids(&next)
    );
    assert_eq!(s.get("j_b1").await.unwrap().unwrap().state, JobState::Queued);
    // full: claimed at once
    let again = s.claim("n/0", false, Some("B"), 1, LEASE).await.unwrap();
    let (_, next) = s
        .finish_and_claim("n/0", vec![end(&again[0].id, ok("1"))], batch(2, 60_000))
        .await
        .unwrap();
    assert_eq!(ids(&next), ["j_b2", "j_b3"], "a full batch");
    // past its delay: claimed however few
    let more: Vec<NewJob> = (4..6).map(|i| job(&format!("j_b{i}"), "B", None, "")).collect();
    assert!(s.insert_batch(more).await.unwrap().is_stored());
    let ends = vec![end("j_b2", ok("2")), end("j_b3", ok("3"))];
    let (_, next) = s.finish_and_claim("n/0", ends, batch(64, 0)).await.unwrap();
    assert_eq!(ids(&next), ["j_b4", "j_b5"], "a head past its delay");
}

/// A job claimed with a batch's ends is leased like any claim: when its lease runs out
/// (its worker or node gone, nothing renewing it), the lease sweep puts it back in the
/// queue with the attempt counted.
pub async fn a_job_claimed_with_ends_is_swept_when_its_lease_expires(s: &dyn JobStore) {
    let jobs: Vec<NewJob> = (0..2).map(|i| job(&format!("j_s{i}"), "S", None, "")).collect();
    assert!(s.insert_batch(jobs).await.unwrap().is_stored());
    let first = s.claim("n/0", false, Some("S"), 1, LEASE).await.unwrap();
    let short = NextClaim {
        lease: std::time::Duration::from_millis(1),
        ..head(1)
    };
    let (_, next) = s
        .finish_and_claim("n/0", vec![end(&first[0].id, ok("0"))], short)
        .await
        .unwrap();
    assert_eq!(ids(&next), ["j_s1"]);
    // past the 1 ms lease on either store's clock
    tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    let swept = s.requeue_orphans("n/").await.unwrap();
    assert_eq!((swept.requeued, swept.failed.len()), (1, 0));
    let j = s.get("j_s1").await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Queued, 1));
}
