//! `/v1/blobs`: uploads streamed to disk (size-limited, SHA-256 computed on the way), and
//! downloads of inputs and result arrays.

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
    if let Err(e) = st.store.put_blob(rec.clone()).await {
        let _ = tokio::fs::remove_file(&rec.path).await;
        return Err(e.into());
    }
    Ok((StatusCode::CREATED, Json(BlobView::from(rec))).into_response())
}

/// Download a blob (an upload or a result array).
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
    let nf = || ApiError::NotFound {
        what: "blob",
        id: id.chars().take(64).collect(),
    };
    if !crate::ids::is_valid(&id) {
        return Err(nf());
    }
    let b = st.0.store.get_blob(&id).await?.ok_or_else(nf)?;
    if b.principal != p.name {
        return Err(nf());
    }
    let bytes = tokio::fs::read(&b.path)
        .await
        .map_err(|e| ApiError::Internal(format!("reading blob {id}: {e}")))?;
    let mut r = (StatusCode::OK, bytes).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&b.sha256) {
        h.insert("x-kiln-sha256", v);
    }
    Ok(r)
}
