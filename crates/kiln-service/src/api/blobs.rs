//! `/v1/blobs`: uploads streamed to disk (size-limited, within the token's quota, SHA-256
//! computed on the way), downloads of inputs and result arrays streamed from disk, and
//! deletion. Uploads expire after `blobs.ttl_s`, result blobs with their job
//! (`results.ttl_s`): an expired blob is answered 404 before the sweep deletes it.

use super::types::{BlobParams, BlobView};
use super::St;
use crate::auth::Principal;
use crate::error::{ApiError, ErrorResponse};
use crate::store::{now_ms, BlobRecord};
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use http_body_util::BodyExt;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// The formats a blob may have, as `?format=` names them.
pub const FORMATS: [&str; 6] = ["npy", "png", "tiff", "nii", "nii.gz", "csv"];

/// Upload a blob (the body is the file).
#[utoipa::path(
    post, path = "/v1/blobs", tag = "blobs",
    params(BlobParams),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 201, body = BlobView), (status = 400, body = ErrorResponse), (status = 413, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn put_blob(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    q: Result<Query<BlobParams>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let st = st.0;
    let q = q
        .map(|Query(v)| v)
        .map_err(|e| ApiError::MalformedRequest(format!("query string: {}", e.body_text())))?;
    let format = q.format.unwrap_or_default().to_ascii_lowercase();
    let format = if format == "tif" {
        "tiff".to_string()
    } else {
        format
    };
    if !FORMATS.contains(&format.as_str()) {
        return Err(ApiError::MalformedRequest(format!(
            "?format=`{format}`; use one of {}",
            FORMATS.join(", ")
        )));
    }
    let limit = st.cfg.limits.max_blob_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    let quota = st.cfg.blobs.max_bytes_per_token;
    let used = st.store.uploaded_bytes(&p.name).await?;
    let room = quota.saturating_sub(used);
    if room == 0 || declared.is_some_and(|n| n > room) {
        return Err(ApiError::QuotaExceeded {
            used,
            size: declared.unwrap_or(0),
            quota,
        });
    }
    let id = crate::ids::new_id("b");
    let tmp = st.blob_dir.join(format!(".{id}.part"));
    let path = st.blob_dir.join(format!("{id}.{format}"));
    let io = |e: std::io::Error| ApiError::Internal(format!("writing the blob: {e}"));
    let mut file = tokio::fs::File::from_std(crate::private::private_create().open(&tmp).map_err(io)?);
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut body = body;
    let result: Result<(), ApiError> = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| ApiError::MalformedRequest(format!("reading the body: {e}")))?;
            if let Ok(data) = frame.into_data() {
                size += data.len() as u64;
                if size > limit {
                    return Err(ApiError::PayloadTooLarge { limit });
                }
                if size > room {
                    return Err(ApiError::QuotaExceeded { used, size, quota });
                }
                hasher.update(&data);
                file.write_all(&data).await.map_err(io)?;
            }
        }
        file.sync_all().await.map_err(io)?;
        Ok(())
    }
    .await;
    drop(file);
    if let Err(e) = result {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(e);
    }
    if size == 0 {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(ApiError::MalformedRequest("the blob is empty".into()));
    }
    tokio::fs::rename(&tmp, &path).await.map_err(io)?;
    let rec = BlobRecord {
        id,
        path,
        size,
        sha256: hex::encode(hasher.finalize()),
        format,
        principal: p.name.clone(),
        job_id: None,
        created_ms: now_ms(),
    };
    // Checked again with the record's insert: concurrent uploads share the room.
    match st.store.put_upload(rec.clone(), quota).await {
        Ok(Ok(())) => {}
        Ok(Err(used)) => {
            let _ = tokio::fs::remove_file(&rec.path).await;
            return Err(ApiError::QuotaExceeded { used, size, quota });
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&rec.path).await;
            return Err(e.into());
        }
    }
    Ok((StatusCode::CREATED, Json(BlobView::from(rec))).into_response())
}

/// The caller's blob `id`, unexpired; 404 for anything else (another token's included).
async fn owned(st: &super::AppState, p: &Principal, id: &str) -> Result<BlobRecord, ApiError> {
    let nf = || ApiError::NotFound {
        what: "blob",
        id: id.chars().take(64).collect(),
    };
    if !crate::ids::is_valid(id) {
        return Err(nf());
    }
    let b = st.store.get_blob(id).await?.ok_or_else(nf)?;
    if b.principal != p.name {
        return Err(nf());
    }
    let ttl_s = match b.job_id {
        Some(_) => st.cfg.results.ttl_s,
        None => st.cfg.blobs.ttl_s,
    };
    if now_ms().saturating_sub(b.created_ms) > ttl_s.saturating_mul(1000).min(i64::MAX as u64) as i64 {
        return Err(nf());
    }
    Ok(b)
}

/// Download a blob (an upload or a result array), streamed from its file.
#[utoipa::path(
    get, path = "/v1/blobs/{id}", tag = "blobs",
    params(("id" = String, Path, description = "Blob id")),
    responses((status = 200, description = "The bytes; X-Kiln-Sha256 carries the checksum"), (status = 404, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn get_blob(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let b = owned(&st.0, &p, &id).await?;
    let io = |e: std::io::Error| ApiError::Internal(format!("reading blob {id}: {e}"));
    let file = tokio::fs::File::open(&b.path).await.map_err(io)?;
    let len = file.metadata().await.map_err(io)?.len();
    // Chunks are read as the client takes them: a slow or stalled download holds one
    // buffer, not the file.
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(file, 64 << 10));
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(v) = HeaderValue::from_str(&b.sha256) {
        h.insert("x-kiln-sha256", v);
    }
    Ok(r)
}

/// Delete one of the caller's blobs (an upload, or a result array of one of its jobs). A
/// queued job that names a deleted upload fails when it runs.
#[utoipa::path(
    delete, path = "/v1/blobs/{id}", tag = "blobs",
    params(("id" = String, Path, description = "Blob id")),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorResponse)),
    security(("bearer" = []))
)]
pub async fn delete_blob(
    st: St,
    Extension(p): Extension<Arc<Principal>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let nf = || ApiError::NotFound {
        what: "blob",
        id: id.chars().take(64).collect(),
    };
    if !crate::ids::is_valid(&id) {
        return Err(nf());
    }
    let b = st.0.store.delete_blob(&id, &p.name).await?.ok_or_else(nf)?;
    if let Err(e) = tokio::fs::remove_file(&b.path).await {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("deleting blob {id}'s file: {e}");
        }
    }
    Ok(StatusCode::NO_CONTENT)
}
