//! The supervisor–worker protocol: length-prefixed JSON frames over the worker's stdin and
//! stdout (a little-endian `u32` length, then that many bytes of JSON). The worker writes
//! nothing else to stdout; its logs go to stderr.

use crate::store::BlobRecord;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::{self, Read, Write};

/// Frames larger than this are refused (a corrupt length never allocates gigabytes).
pub const MAX_FRAME: usize = 1 << 30;

/// One job of a batch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkItem {
    /// The job id.
    pub id: String,
    /// The attempt number, 1-based.
    pub attempt: u32,
    /// The task JSON (a [`crate::task::Task`]).
    pub task: String,
}

fn merged() -> bool {
    true
}

/// Supervisor to worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run these jobs (one batch: same batch key) and answer `Done`.
    Run {
        /// The batch number.
        batch: u64,
        /// The jobs.
        jobs: Vec<WorkItem>,
        /// Whether their work may be merged (dynamic batching: one option book for the
        /// batch's pricing jobs); `false` runs each job alone, one after another (a group
        /// an unbatched slot claimed together). Absent: `true`.
        #[serde(default = "merged")]
        merge: bool,
    },
    /// Answer `Pong` (the heartbeat).
    Ping {
        /// Echoed.
        seq: u64,
    },
    /// Exit after the current batch.
    Shutdown,
}

/// How one job went on the worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WorkOutcome {
    /// The result and the blobs the worker wrote for it.
    Ok {
        /// The result JSON.
        result: serde_json::Value,
        /// Result blobs.
        blobs: Vec<BlobRecord>,
    },
    /// An error.
    Err {
        /// Stable code.
        code: String,
        /// Message.
        message: String,
        /// Whether another attempt may succeed.
        retry: bool,
        /// Whether the worker's CUDA context is poisoned (it exits after this batch).
        sticky: bool,
    },
}

/// One job's outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobResult {
    /// The job id.
    pub id: String,
    /// The outcome.
    pub outcome: WorkOutcome,
}

/// Worker to supervisor.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// The runtime is up.
    Ready {
        /// The device's name.
        device: String,
        /// `cpu` or `cuda`.
        backend: String,
        /// The protections it applied to itself (crate::sandbox).
        #[serde(default)]
        protections: String,
    },
    /// Heartbeat answer.
    Pong {
        /// The ping's number.
        seq: u64,
    },
    /// A batch finished.
    Done {
        /// The batch number.
        batch: u64,
        /// One result per job, in order.
        results: Vec<JobResult>,
    },
    /// The worker cannot go on (runtime creation failed); it exits.
    Fatal {
        /// Why.
        message: String,
    },
}

fn encode<T: Serialize>(msg: &T) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(msg).map_err(io::Error::other)?;
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::other("frame too large"))?;
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn check_len(len: u32) -> io::Result<usize> {
    let n = len as usize;
    if n > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {n} bytes"),
        ));
    }
    Ok(n)
}

/// Write one frame and flush.
pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg)?)?;
    w.flush()
}

/// Read one frame; `None` at a clean end of stream.
pub fn read_frame<R: Read, T: DeserializeOwned>(r: &mut R) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut body = vec![0u8; check_len(u32::from_le_bytes(len))?];
    r.read_exact(&mut body)?;
    decode(&body).map(Some)
}

/// [`write_frame`] on an async writer.
pub async fn write_frame_async<W, T>(w: &mut W, msg: &T) -> io::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin,
    T: Serialize,
{
    use tokio::io::AsyncWriteExt;
    w.write_all(&encode(msg)?).await?;
    w.flush().await
}

/// [`read_frame`] on an async reader.
pub async fn read_frame_async<R, T>(r: &mut R) -> io::Result<Option<T>>
where
    R: tokio::io::AsyncRead + Unpin,
    T: DeserializeOwned,
{
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut body = vec![0u8; check_len(u32::from_le_bytes(len))?];
    r.read_exact(&mut body).await?;
    decode(&body).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buf = Vec::new();
        write_frame(&mut buf, &ToWorker::Ping { seq: 7 }).unwrap();
        write_frame(&mut buf, &ToWorker::Shutdown).unwrap();
        let mut r = &buf[..];
        assert!(matches!(
            read_frame::<_, ToWorker>(&mut r).unwrap(),
            Some(ToWorker::Ping { seq: 7 })
        ));
        assert!(matches!(
            read_frame::<_, ToWorker>(&mut r).unwrap(),
            Some(ToWorker::Shutdown)
        ));
        assert!(read_frame::<_, ToWorker>(&mut r).unwrap().is_none());
    }

    #[test]
    fn oversized_or_garbled_frames_are_errors() {
        let mut r: &[u8] = &[0xff, 0xff, 0xff, 0xff, 1, 2];
        assert!(read_frame::<_, ToWorker>(&mut r).is_err());
        let mut buf = 3u32.to_le_bytes().to_vec();
        buf.extend_from_slice(b"{x}");
        assert!(read_frame::<_, ToWorker>(&mut &buf[..]).is_err());
    }
}
