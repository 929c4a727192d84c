//! Sharing between tokens, in both stores (the same checks run on SQLite and, with
//! `KILN_TEST_PG_URL`, on PostgreSQL; SKIP without it, a failure with `KILN_REQUIRE_PG=1`):
//! the queue head is chosen fairly between principals (fewest worker slots held, then least
//! recently served, then oldest) and honours a per-token cap of slots, and an unbatched
//! slot's one-step claim takes the job the head names; results are evicted
//! per principal, never another principal's; uploads are held to a quota per principal,
//! deleted by their owner only, and expire.
#![allow(clippy::unwrap_used)]

mod pg_support;

use kiln_service::store::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(30);

fn job(id: &str, principal: &str) -> NewJob {
    NewJob {
        id: id.into(),
        kind: "price".into(),
        // batch keys never span principals (api/jobs.rs makes them so)
        batch_key: format!("{principal}|k"),
        needs_gpu: false,
        principal: principal.into(),
        idempotency_key: None,
        request_hash: "h".into(),
        task: "{}".into(),
        elements: 1,
        max_attempts: 2,
        deadline_ms: None,
        priority: 0,
        queue_until_ms: None,
        created_ms: now_ms(),
    }
}

fn blob(id: &str, principal: &str, size: u64, job_id: Option<&str>, created_ms: i64) -> BlobRecord {
    BlobRecord {
        id: id.into(),
        path: PathBuf::from(format!("/nonexistent/{id}.npy")),
        size,
        sha256: "00".into(),
        format: "npy".into(),
        principal: principal.into(),
        job_id: job_id.map(str::to_string),
        created_ms,
    }
}

/// The principal of the head's batch key.
async fn head_of(s: &dyn JobStore, cap: u32) -> Option<String> {
    s.head(false, cap)
        .await
        .unwrap()
        .map(|h| h.batch_key.split('|').next().unwrap().to_string())
}

/// Claim one job of `principal` for `owner`; its id.
async fn claim_one(s: &dyn JobStore, owner: &str, principal: &str) -> String {
    // distinct start times: "least recently served" compares them
    tokio::time::sleep(Duration::from_millis(5)).await;
    let c = s
        .claim(owner, false, Some(&format!("{principal}|k")), 1, LEASE)
        .await
        .unwrap();
    assert_eq!(c.len(), 1, "a job of {principal} to claim");
    c[0].id.clone()
}

fn done(bytes: usize) -> Outcome {
    Outcome::Succeeded {
        result: "x".repeat(bytes),
        blobs: vec![],
    }
}

async fn fair_order(s: &dyn JobStore) {
    for id in ["j_a1", "j_a2", "j_a3"] {
        s.insert(job(id, "alice")).await.unwrap();
    }
    s.insert(job("j_b1", "bob")).await.unwrap();
    // Neither was served yet: the oldest job's principal first.
    assert_eq!(head_of(s, 0).await.as_deref(), Some("alice"));
    let a1 = claim_one(s, "n/0", "alice").await;
    // alice holds a slot, bob none: bob's job is next although alice's are older.
    assert_eq!(head_of(s, 0).await.as_deref(), Some("bob"));
    let b1 = claim_one(s, "n/1", "bob").await;
    // Both hold a slot, only alice has queued work.
    assert_eq!(head_of(s, 0).await.as_deref(), Some("alice"));
    // A cap of one slot per token: alice is at it, so nothing is offered.
    assert_eq!(head_of(s, 1).await, None, "alice is at her cap");
    assert!(s.finish(&a1, "n/0", done(1)).await.unwrap());
    let _a2 = claim_one(s, "n/0", "alice").await;
    s.insert(job("j_b2", "bob")).await.unwrap();
    // alice holds one, bob one: bob was served least recently.
    assert!(s.finish(&b1, "n/1", done(1)).await.unwrap());
    assert_eq!(
        head_of(s, 0).await.as_deref(),
        Some("bob"),
        "bob holds no slot now"
    );
    s.insert(job("j_c1", "carol")).await.unwrap();
    // carol was never served: before bob, who holds none either.
    assert_eq!(head_of(s, 0).await.as_deref(), Some("carol"));
    assert_eq!(head_of(s, 1).await.as_deref(), Some("carol"));
}

/// An unbatched slot's claim takes the job the head names, in the head's order, with and
/// without a cap, one principal queued (the store's short path) or several.
async fn claim_head_follows_the_head(s: &dyn JobStore) {
    let claim = |owner: &'static str, cap: u32| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let c = s
            .claim_head(owner, false, cap, ClaimLimit::ONE, LEASE)
            .await
            .unwrap();
        assert!(c.len() <= 1, "one job at most");
        c.into_iter().next().map(|j| (j.id, j.principal))
    };
    for id in ["j_a1", "j_a2"] {
        s.insert(job(id, "alice")).await.unwrap();
    }
    // One principal queued: her oldest job; with a cap she is under, the same.
    assert_eq!(claim("n/0", 1).await, Some(("j_a1".into(), "alice".into())));
    // At her cap of one slot: nothing, though a job is queued.
    assert_eq!(claim("n/1", 1).await, None, "alice is at her cap");
    for id in ["j_b1", "j_b2"] {
        s.insert(job(id, "bob")).await.unwrap();
    }
    // alice holds a slot, bob none: bob first, then (both holding one) alice, served
    // least recently.
    assert_eq!(head_of(s, 0).await.as_deref(), Some("bob"));
    assert_eq!(claim("n/1", 0).await, Some(("j_b1".into(), "bob".into())));
    assert_eq!(head_of(s, 0).await.as_deref(), Some("alice"));
    assert_eq!(claim("n/2", 0).await, Some(("j_a2".into(), "alice".into())));
    assert_eq!(claim("n/3", 0).await, Some(("j_b2".into(), "bob".into())));
    assert_eq!(claim("n/4", 0).await, None, "the queue is empty");
}

async fn eviction_per_principal(s: &dyn JobStore) {
    // alice: one small result; bob: three large ones, past the per-token cap.
    s.insert(job("j_a", "alice")).await.unwrap();
    let a = claim_one(s, "n/0", "alice").await;
    assert!(s.finish(&a, "n/0", done(100)).await.unwrap());
    let mut bobs = Vec::new();
    for i in 0..3 {
        s.insert(job(&format!("j_b{i}"), "bob")).await.unwrap();
        let b = claim_one(s, "n/0", "bob").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(s.finish(&b, "n/0", done(1000)).await.unwrap());
        bobs.push(b);
    }
    s.expire(Duration::from_secs(3600), 1500).await.unwrap();
    assert!(s.get(&a).await.unwrap().is_some(), "alice's result stays");
    assert!(s.get(&bobs[0]).await.unwrap().is_none(), "bob's oldest goes");
    assert!(s.get(&bobs[1]).await.unwrap().is_none(), "bob's next goes");
    assert!(s.get(&bobs[2]).await.unwrap().is_some(), "bob's newest fits");
    // A cap below alice's one result evicts it, and only then.
    s.expire(Duration::from_secs(3600), 50).await.unwrap();
    assert!(s.get(&a).await.unwrap().is_none());
}

async fn upload_quota_delete_expiry(s: &dyn JobStore) {
    let now = now_ms();
    assert_eq!(
        s.put_upload(blob("b_a1", "alice", 600, None, now), 1000)
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(
        s.put_upload(blob("b_a2", "alice", 600, None, now), 1000)
            .await
            .unwrap(),
        Err(600),
        "past alice's quota"
    );
    assert!(
        s.get_blob("b_a2").await.unwrap().is_none(),
        "a refused upload leaves no record"
    );
    assert_eq!(
        s.put_upload(blob("b_b1", "bob", 600, None, now), 1000)
            .await
            .unwrap(),
        Ok(())
    );
    assert_eq!(s.uploaded_bytes("alice").await.unwrap(), 600);
    // Only the owner deletes.
    assert_eq!(s.delete_blob("b_a1", "bob").await.unwrap(), None);
    assert!(s.get_blob("b_a1").await.unwrap().is_some());
    let gone = s.delete_blob("b_a1", "alice").await.unwrap().unwrap();
    assert_eq!(gone.id, "b_a1");
    assert_eq!(s.uploaded_bytes("alice").await.unwrap(), 0);
    assert_eq!(
        s.put_upload(blob("b_a3", "alice", 900, None, now), 1000)
            .await
            .unwrap(),
        Ok(())
    );
    // Expiry: old uploads go; new ones and result blobs (which follow their job) stay.
    let old = now - 7_200_000;
    s.put_blob(blob("b_old", "alice", 10, None, old)).await.unwrap();
    s.put_blob(blob("b_res", "alice", 10, Some("j_x"), old))
        .await
        .unwrap();
    let paths = s.expire_blobs(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(paths, vec![PathBuf::from("/nonexistent/b_old.npy")]);
    assert!(s.get_blob("b_old").await.unwrap().is_none());
    assert!(s.get_blob("b_res").await.unwrap().is_some());
    assert!(s.get_blob("b_a3").await.unwrap().is_some());
    assert!(s.get_blob("b_b1").await.unwrap().is_some());
}

fn sqlite() -> (tempfile::TempDir, Arc<dyn JobStore>) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(dir.path(), false).unwrap();
    (dir, Arc::new(s))
}

async fn pg(name: &str) -> Option<Arc<dyn JobStore>> {
    let admin = pg_support::admin_url(name)?;
    let url = pg_support::fresh_db(&admin, name).await;
    Some(Arc::new(
        PgStore::connect(&url, PgOptions::default()).await.unwrap(),
    ))
}

#[tokio::test]
async fn sqlite_head_is_fair_between_tokens() {
    let (_d, s) = sqlite();
    fair_order(&*s).await;
}

#[tokio::test]
async fn sqlite_claim_head_follows_the_head() {
    let (_d, s) = sqlite();
    claim_head_follows_the_head(&*s).await;
}

#[tokio::test]
async fn sqlite_eviction_never_touches_another_token() {
    let (_d, s) = sqlite();
    eviction_per_principal(&*s).await;
}

#[tokio::test]
async fn sqlite_uploads_have_a_quota_an_owner_and_an_expiry() {
    let (_d, s) = sqlite();
    upload_quota_delete_expiry(&*s).await;
}

#[tokio::test]
async fn pg_head_is_fair_between_tokens() {
    if let Some(s) = pg("fair_head").await {
        fair_order(&*s).await;
        s.close().await.unwrap();
    }
}

#[tokio::test]
async fn pg_claim_head_follows_the_head() {
    if let Some(s) = pg("fair_claim_head").await {
        claim_head_follows_the_head(&*s).await;
        s.close().await.unwrap();
    }
}

#[tokio::test]
async fn pg_eviction_never_touches_another_token() {
    if let Some(s) = pg("fair_evict").await {
        eviction_per_principal(&*s).await;
        s.close().await.unwrap();
    }
}

#[tokio::test]
async fn pg_uploads_have_a_quota_an_owner_and_an_expiry() {
    if let Some(s) = pg("fair_quota").await {
        upload_quota_delete_expiry(&*s).await;
        s.close().await.unwrap();
    }
}
