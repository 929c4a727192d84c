//! A worker process as its slot holds it: the child and its pipes, stderr copied to the
//! server's with failed allocations noted, and how its end is stopped and described.

use crate::protocol::{write_frame_async, FromWorker, ToWorker};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// A running worker process: its pipes, the frames read from its stdout, and its stderr
/// forwarder.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) stdin: ChildStdin,
    pub(super) rx: mpsc::Receiver<Result<FromWorker, String>>,
    /// Set when the worker reported a failed allocation on stderr.
    pub(super) oom: Arc<AtomicBool>,
    pub(super) stderr: Option<tokio::task::JoinHandle<()>>,
    /// Set by [`Proc::stop`] when the process exited with the sticky-error code.
    pub(super) sticky_exit: bool,
}

/// Whether a worker's stderr line is Rust's report of a failed allocation (printed before
/// it aborts; under `RLIMIT_AS` this is how a worker past its memory limit ends).
pub(super) fn is_alloc_failure(line: &str) -> bool {
    line.starts_with("memory allocation of ") && line.trim_end().ends_with(" bytes failed")
}

/// Copies a worker's stderr to this process's, line by line (pieces of at most 64 KiB, so a
/// line without an end costs no more), noting a failed allocation.
pub(super) async fn forward_stderr(stderr: tokio::process::ChildStderr, oom: Arc<AtomicBool>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut r = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut r).take(64 << 10).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if is_alloc_failure(&text) {
                    oom.store(true, Ordering::SeqCst);
                }
                eprint!("{text}");
            }
        }
    }
}

impl Proc {
    /// Whether the process, once stopped, had exited with the sticky-error code (its CUDA
    /// context was poisoned).
    pub(super) fn exited_sticky(&self) -> bool {
        self.sticky_exit
    }

    /// After the process ended: whether it died failing an allocation (its stderr is read
    /// to its end first, for at most 2 s).
    pub(super) async fn ran_out_of_memory(&mut self) -> bool {
        if let Some(h) = self.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
        }
        self.oom.load(Ordering::SeqCst)
    }

    /// Ask the worker to exit, kill it if it does not within a second; describe its end.
    pub(super) async fn stop(&mut self) -> String {
        let _ = write_frame_async(&mut self.stdin, &ToWorker::Shutdown).await;
        let status = match tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await {
            Ok(s) => s,
            Err(_) => {
                let _ = self.child.start_kill();
                self.child.wait().await
            }
        };
        match status {
            Ok(s) => {
                self.sticky_exit = s.code() == Some(crate::worker::exit::STICKY);
                describe(s)
            }
            Err(e) => format!("wait failed: {e}"),
        }
    }
}

/// How a worker process ended, in words.
fn describe(s: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = s.signal() {
            let name = match sig {
                6 => "SIGABRT",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                15 => "SIGTERM",
                _ => "signal",
            };
            return format!("killed by signal {sig} ({name})");
        }
    }
    match s.code() {
        Some(8) => "exit code 8: sticky CUDA error".into(),
        Some(c) => format!("exit code {c}"),
        None => "exited".into(),
    }
}
