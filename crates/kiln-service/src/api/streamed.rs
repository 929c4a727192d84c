//! A job as the API shows it, written out: a whole result goes through [`JobView`]; a
//! sharded job's result kept as a manifest (crate::shard::result) is streamed, the
//! manifest's head and the shards' price rows read from the store one shard at a time,
//! so a result of gigabytes is never one string in memory.

use super::types::JobView;
use crate::shard::result::{close, rows, OPEN};
use crate::store::{JobRecord, JobState, JobStore};
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream::{self, StreamExt};
use std::sync::Arc;

/// The response for `job` with `status`.
pub(super) fn view(store: &Arc<dyn JobStore>, job: JobRecord, status: StatusCode) -> Response {
    match job.result_shards {
        Some(n) if job.state == JobState::Succeeded && job.result.is_some() => {
            streamed(store.clone(), job, n, status)
        }
        _ => (status, Json(JobView::from(job))).into_response(),
    }
}

/// The JSON of [`JobView`] with its `result` member first and streamed: `{"result":`,
/// [`OPEN`], each shard's price rows joined by commas, the manifest's [`close`], then the
/// view's other members. A shard's result that is missing or has no price rows ends the
/// stream with an error (the client sees a cut-off body, never a wrong one).
fn streamed(store: Arc<dyn JobStore>, mut job: JobRecord, shards: u64, status: StatusCode) -> Response {
    let manifest = job.result.take().unwrap_or_default();
    let id = job.id.clone();
    let close = match close(&manifest) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(job = %id, "{e}");
            return crate::error::ApiError::Internal(format!("job {id}'s result: {e}")).into_response();
        }
    };
    let others = match serde_json::to_value(JobView::from(job)) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.remove("result");
            serde_json::Value::Object(m).to_string()
        }
        _ => "{}".to_string(),
    };
    let tail = match others.strip_prefix('{') {
        Some("}") | None => format!("{close}}}"),
        Some(members) => format!("{close},{members}"),
    };
    let head = Bytes::from(format!("{{\"result\":{OPEN}"));
    let tail = Bytes::from(tail);
    // (next shard, a row written, done): after the last shard the tail; after an error
    // nothing more
    let parts = stream::unfold((0u64, false, false), move |(i, wrote, done)| {
        let (store, id, tail) = (store.clone(), id.clone(), tail.clone());
        async move {
            if done {
                return None;
            }
            if i >= shards {
                return Some((vec![Ok(tail)], (i, wrote, true)));
            }
            let part = match store.shard_result(&id, i).await {
                Ok(Some(text)) => match rows(&text) {
                    Some(span) => Ok(Bytes::from(text).slice(span)),
                    None => Err(format!("shard {i} of job {id} has no price rows")),
                },
                Ok(None) => Err(format!("shard {i} of job {id} holds no result")),
                Err(e) => Err(format!("reading shard {i} of job {id}: {e}")),
            };
            match part {
                Ok(b) if b.is_empty() => Some((Vec::new(), (i + 1, wrote, false))),
                Ok(b) => {
                    let out = if wrote {
                        vec![Ok(Bytes::from_static(b",")), Ok(b)]
                    } else {
                        vec![Ok(b)]
                    };
                    Some((out, (i + 1, true, false)))
                }
                Err(e) => {
                    tracing::error!("{e}");
                    Some((vec![Err(std::io::Error::other(e))], (i, wrote, true)))
                }
            }
        }
    });
    let body = stream::once(async move { Ok::<_, std::io::Error>(head) }).chain(parts.flat_map(stream::iter));
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}
