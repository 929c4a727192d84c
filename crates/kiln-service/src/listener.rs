//! The HTTP listener of `kiln serve`, the same for plain TCP and TLS: an accept loop that
//! drives each connection with hyper (HTTP/1.1 only unless `listener.http2`), guarded by
//! - a header-read timeout: a connection has `header_read_timeout` to complete a request
//!   head, from its accept for the first request (after the TLS handshake, which gets as
//!   long again), from the first byte of the next one on a kept-alive connection;
//! - an idle timeout: a kept-alive connection with no request in flight and no byte of a
//!   next request is closed after `idle_timeout`;
//! - a connection cap with a health reserve (see [`Registry::admit`]).
//!
//! Both timeouts are kept here rather than by hyper's `header_read_timeout`: hyper starts
//! that timer whenever it waits for a request head, the wait between keep-alive requests
//! included, so with it an idle connection would be closed after the header timeout and
//! the two could not differ. Here a connection's phase is known from outside hyper: a
//! request is in flight from the moment hyper hands its (complete) head to the service until
//! its response body has been sent or dropped; between requests the watched socket tells
//! whether a byte of the next head has arrived.
//!
//! axum::serve has none of these (no timer, no cap) and axum-server's only timeout is the
//! TLS handshake's, hence this loop.

use crate::config::ListenerConfig;
use axum::body::Body;
use axum::Router;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tower::ServiceExt;

/// File descriptors kept back from the connection cap for everything else the server opens:
/// the store (SQLite's database, WAL and shared memory, or PostgreSQL's pool), blob and
/// result files, worker pipes, the runtime's own.
pub const FD_HEADROOM: u64 = 64;

/// The connection cap for `cfg` under the process's open-file limit: `max_connections`, or
/// less where the soft `RLIMIT_NOFILE` less [`FD_HEADROOM`] and the health reserve is lower
/// (an accept past the limit fails with EMFILE, and nothing, `/healthz` included, gets in).
pub fn effective_cap(cfg: &ListenerConfig) -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    cap_under(cfg, soft)
}

fn cap_under(cfg: &ListenerConfig, nofile: Option<u64>) -> usize {
    let Some(n) = nofile else {
        return cfg.max_connections;
    };
    let room = n.saturating_sub(FD_HEADROOM + cfg.health_reserve as u64).max(1);
    cfg.max_connections
        .min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// One connection's state, shared by its task, its socket wrapper, its requests and the
/// registry. Times are milliseconds since the listener's start.
struct Conn {
    id: u64,
    /// Requests whose response has not been sent yet.
    in_flight: AtomicUsize,
    /// Whether a request head was ever completed on it.
    served: AtomicBool,
    /// When it last had nothing in flight (its accept, or its last response's end).
    waiting_since: AtomicU64,
    /// 1 + when the first byte of the next head arrived; 0: none yet.
    first_byte: AtomicU64,
    /// Told to close (evicted by a newer connection at the cap).
    evict: tokio::sync::Notify,
}

impl Conn {
    /// When it is to be closed if nothing changes; `None` while a request is in flight.
    fn deadline(&self, header: u64, idle: u64) -> Option<u64> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        match self.first_byte.load(Ordering::SeqCst) {
            0 if self.served.load(Ordering::SeqCst) => Some(self.waiting_since.load(Ordering::SeqCst) + idle),
            0 => Some(self.waiting_since.load(Ordering::SeqCst) + header),
            fb => Some(fb - 1 + header),
        }
    }
}

/// The open connections, oldest first, and how many reserve slots are taken.
struct Registry {
    conns: Mutex<BTreeMap<u64, Arc<Conn>>>,
    reserved: AtomicUsize,
    cap: usize,
    reserve: usize,
}

/// Where an accepted connection goes.
enum Admission {
    /// An ordinary slot (possibly freed by closing an older connection).
    Slot(Arc<Conn>),
    /// A reserve slot: health endpoints only, one request.
    Reserve,
    /// Nothing left: closed at once.
    Refused,
}

impl Registry {
    /// Admit a new connection. Under the cap it gets a slot. At the cap the oldest connection
    /// with no request in flight is closed for it, preferring one that never completed a
    /// request head: those are what an attacker holds cheaply (silent or slowloris sockets,
    /// stalled handshakes), while a health probe opens a fresh connection and sends its head
    /// at once, so it is the newest and the last to be evicted. Closing an idle keep-alive
    /// connection costs its client one reconnect. When every connection has a request in
    /// flight, the new one gets a reserve slot that answers only `/healthz` and `/readyz`
    /// (so a probe still sees the server), or is closed when the reserve is full too.
    fn admit(&self, next_id: u64, now: u64) -> Admission {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if conns.len() >= self.cap {
            let idle = |c: &&Arc<Conn>| c.in_flight.load(Ordering::SeqCst) == 0;
            let victim = conns
                .values()
                .filter(idle)
                .find(|c| !c.served.load(Ordering::SeqCst))
                .or_else(|| conns.values().find(idle))
                .map(|c| c.id);
            match victim.and_then(|id| conns.remove(&id)) {
                Some(v) => v.evict.notify_one(),
                None => {
                    let taken = self.reserved.fetch_add(1, Ordering::SeqCst);
                    if taken < self.reserve {
                        return Admission::Reserve;
                    }
                    self.reserved.fetch_sub(1, Ordering::SeqCst);
                    return Admission::Refused;
                }
            }
        }
        let c = Arc::new(Conn {
            id: next_id,
            in_flight: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            waiting_since: AtomicU64::new(now),
            first_byte: AtomicU64::new(0),
            evict: tokio::sync::Notify::new(),
        });
        conns.insert(next_id, c.clone());
        Admission::Slot(c)
    }

    fn remove(&self, id: u64) {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }
}

/// Milliseconds since `epoch`.
fn ms(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

/// A socket that notes the first byte of a request head arriving between requests.
struct Watched<T> {
    inner: T,
    conn: Arc<Conn>,
    epoch: Instant,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let c = &me.conn;
            if c.in_flight.load(Ordering::SeqCst) == 0 && c.first_byte.load(Ordering::SeqCst) == 0 {
                c.first_byte.store(ms(me.epoch) + 1, Ordering::SeqCst);
            }
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A request in flight: counted from its head until its response body is dropped (sent,
/// or abandoned with the connection).
struct InFlight {
    conn: Arc<Conn>,
    epoch: Instant,
}

impl InFlight {
    fn start(conn: Arc<Conn>, epoch: Instant) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        conn.served.store(true, Ordering::SeqCst);
        conn.first_byte.store(0, Ordering::SeqCst);
        InFlight { conn, epoch }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn.waiting_since.store(ms(self.epoch), Ordering::SeqCst);
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The TLS acceptor, if any.
pub type Tls = axum_server::tls_rustls::RustlsConfig;

/// Serve `router` on `listener` until `shutdown` resolves; then stop accepting, let open
/// connections finish their requests for up to `grace`, and return.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Tls>,
    cfg: ListenerConfig,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let cap = effective_cap(&cfg);
    if cap < cfg.max_connections {
        tracing::warn!(
            "listener.max_connections = {} lowered to {cap} by the open-file limit (raise `ulimit -n`)",
            cfg.max_connections
        );
    }
    let registry = Arc::new(Registry {
        conns: Mutex::new(BTreeMap::new()),
        reserved: AtomicUsize::new(0),
        cap,
        reserve: cfg.health_reserve,
    });
    let tls = tls.map(|t| {
        axum_server::tls_rustls::RustlsAcceptor::new(t).handshake_timeout(cfg.header_read_timeout())
    });
    let epoch = Instant::now();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut next_id = 0u64;
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // EMFILE and friends: back off briefly rather than spin; the cap keeps
                    // this rare (see `effective_cap`)
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        next_id += 1;
        let admission = registry.admit(next_id, ms(epoch));
        let (conn, reserved) = match admission {
            Admission::Slot(c) => (c, false),
            Admission::Reserve => (
                Arc::new(Conn {
                    id: 0,
                    in_flight: AtomicUsize::new(0),
                    served: AtomicBool::new(false),
                    waiting_since: AtomicU64::new(ms(epoch)),
                    first_byte: AtomicU64::new(0),
                    evict: tokio::sync::Notify::new(),
                }),
                true,
            ),
            Admission::Refused => {
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (router, registry, tls, cfg, stop) = (
            router.clone(),
            registry.clone(),
            tls.clone(),
            cfg.clone(),
            stop_rx.clone(),
        );
        tasks.spawn(async move {
            match tls {
                None => connection(stream, conn.clone(), router, reserved, &cfg, epoch, stop).await,
                Some(acc) => {
                    use axum_server::accept::Accept;
                    // the handshake is bounded by its own timeout, and an eviction ends it
                    let shaken = tokio::select! {
                        r = acc.accept(stream, ()) => r.ok(),
                        _ = conn.evict.notified() => None,
                    };
                    if let Some((s, ())) = shaken {
                        conn.waiting_since.store(ms(epoch), Ordering::SeqCst);
                        connection(s, conn.clone(), router, reserved, &cfg, epoch, stop).await
                    }
                }
            }
            if reserved {
                registry.reserved.fetch_sub(1, Ordering::SeqCst);
            } else {
                registry.remove(conn.id);
            }
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, drain).await.is_err() {
        tracing::warn!(
            "{} connections still open after the drain timeout: closed",
            tasks.len()
        );
    }
}

/// Serve one connection until it ends, times out, is evicted, or shutdown closes it.
async fn connection<T>(
    io: T,
    conn: Arc<Conn>,
    router: Router,
    reserved: bool,
    cfg: &ListenerConfig,
    epoch: Instant,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let watched = Watched {
        inner: io,
        conn: conn.clone(),
        epoch,
    };
    let c = conn.clone();
    let svc = tower::service_fn(move |req: axum::http::Request<hyper::body::Incoming>| {
        let guard = InFlight::start(c.clone(), epoch);
        let router = router.clone();
        async move {
            let path = req.uri().path();
            let r = if reserved && path != "/healthz" && path != "/readyz" {
                axum::response::IntoResponse::into_response(crate::error::ApiError::Unavailable(
                    "every connection slot is busy: this connection answers only /healthz and \
                     /readyz; retry later"
                        .into(),
                ))
            } else {
                router
                    .oneshot(req.map(Body::new))
                    .await
                    .unwrap_or_else(|e| match e {})
            };
            // the guard lives as long as the body: dropped once the response is sent
            Ok::<_, std::convert::Infallible>(r.map(|b| {
                Body::new(b.map_frame(move |f| {
                    let _ = &guard;
                    f
                }))
            }))
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if !cfg.http2 {
        builder = builder.http1_only();
    }
    builder.http1().keep_alive(!reserved);
    let served = builder.serve_connection(
        TokioIo::new(watched),
        hyper_util::service::TowerToHyperService::new(svc),
    );
    tokio::pin!(served);
    let (header, idle) = (cfg.header_read_timeout_ms, cfg.idle_timeout_ms);
    let tick = Duration::from_millis((header.min(idle) / 4).clamp(10, 1000));
    let mut stopping = *stop.borrow();
    if stopping {
        served.as_mut().graceful_shutdown();
    }
    loop {
        let wake = match conn.deadline(header, idle) {
            Some(d) => {
                let now = ms(epoch);
                if now >= d {
                    return; // timed out: dropping the connection closes the socket
                }
                Duration::from_millis(d - now).min(tick)
            }
            None => tick,
        };
        tokio::select! {
            _ = served.as_mut() => return,
            _ = conn.evict.notified() => return,
            _ = tokio::time::sleep(wake) => {}
            r = stop.changed(), if !stopping => {
                stopping = true;
                if r.is_ok() {
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(cap: usize, reserve: usize) -> Registry {
        Registry {
            conns: Mutex::new(BTreeMap::new()),
            reserved: AtomicUsize::new(0),
            cap,
            reserve,
        }
    }

    fn slot(a: Admission) -> Arc<Conn> {
        match a {
            Admission::Slot(c) => c,
            _ => panic!("expected a slot"),
        }
    }

    #[test]
    fn the_cap_evicts_unproven_then_idle_then_uses_the_reserve() {
        let r = registry(3, 1);
        let a = slot(r.admit(1, 0));
        let b = slot(r.admit(2, 0));
        let c = slot(r.admit(3, 0));
        // a served a request and is idle; b has one in flight; c never sent a head
        a.served.store(true, Ordering::SeqCst);
        b.served.store(true, Ordering::SeqCst);
        b.in_flight.store(1, Ordering::SeqCst);
        let d = slot(r.admit(4, 0));
        assert!(
            !r.conns.lock().unwrap().contains_key(&3),
            "the unproven one goes first"
        );
        d.served.store(true, Ordering::SeqCst);
        d.in_flight.store(1, Ordering::SeqCst);
        slot(r.admit(5, 0)).in_flight.store(1, Ordering::SeqCst);
        assert!(
            !r.conns.lock().unwrap().contains_key(&1),
            "then the oldest idle one"
        );
        assert!(matches!(r.admit(6, 0), Admission::Reserve));
        assert!(matches!(r.admit(7, 0), Admission::Refused));
        assert_eq!(r.reserved.load(Ordering::SeqCst), 1);
        assert_eq!(c.id, 3);
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let r = registry(8, 0);
        let c = slot(r.admit(1, 100));
        assert_eq!(
            c.deadline(10, 50),
            Some(110),
            "a fresh connection: the header timeout"
        );
        c.first_byte.store(105 + 1, Ordering::SeqCst);
        assert_eq!(c.deadline(10, 50), Some(115));
        let g = InFlight::start(c.clone(), Instant::now());
        assert_eq!(
            c.deadline(10, 50),
            None,
            "a request in flight is never timed out here"
        );
        drop(g);
        let since = c.waiting_since.load(Ordering::SeqCst);
        assert_eq!(
            c.deadline(10, 50),
            Some(since + 50),
            "kept alive: the idle timeout"
        );
    }

    #[test]
    fn the_cap_stays_under_the_file_limit() {
        let cfg = ListenerConfig::default();
        assert_eq!(cap_under(&cfg, None), 1024);
        assert_eq!(cap_under(&cfg, Some(1 << 20)), 1024);
        assert_eq!(cap_under(&cfg, Some(256)), 256 - 64 - 8);
        assert_eq!(cap_under(&cfg, Some(10)), 1);
    }
}
