//! The alert webhook: one HTTP/1.1 POST of a JSON body, bounded in time.
//!
//! Plain `http://` only, written on a std socket: a webhook relay (Alertmanager, a chat
//! bridge) normally listens on the local network, and an HTTPS client would add a TLS stack
//! to every kiln build. An `https://` URL is refused with a clear error.

use crate::error::{Error, Result};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where and how long to try.
#[derive(Clone, Debug)]
pub struct Webhook {
    url: String,
    host: String,
    port: u16,
    path: String,
    timeout: Duration,
}

impl Webhook {
    /// Parse `http://host[:port][/path]`; `timeout` bounds connect, write and read each.
    pub fn new(url: &str, timeout: Duration) -> Result<Webhook> {
        let bad = |reason: &str| Error::Invalid {
            what: format!("webhook URL {url:?}"),
            reason: reason.to_string(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// URLs are supported"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
                (h, p.parse().map_err(|_| bad("bad port"))?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Webhook {
            url: url.to_string(),
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            path: path.to_string(),
            timeout,
        })
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// POST `body` (JSON); returns the HTTP status, an error for a non-2xx status.
    pub fn post(&self, body: &serde_json::Value) -> Result<u16> {
        let fail = |reason: String| Error::Webhook {
            url: self.url.clone(),
            reason,
        };
        let start = Instant::now();
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve: {e}")))?
            .next()
            .ok_or_else(|| fail("no address".into()))?;
        let mut s =
            TcpStream::connect_timeout(&addr, self.timeout).map_err(|e| fail(format!("connect: {e}")))?;
        s.set_write_timeout(Some(self.timeout)).ok();
        s.set_read_timeout(Some(self.timeout)).ok();
        let body = body.to_string();
        let req = format!(
            "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\nUser-Agent: kiln-monitor\r\n\r\n{}",
            self.path,
            self.host,
            self.port,
            body.len(),
            body
        );
        s.write_all(req.as_bytes())
            .map_err(|e| fail(format!("write: {e}")))?;
        // The status line is all we need; read until it is complete or the time is up.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 512];
        while !buf.windows(2).any(|w| w == b"\r\n") {
            if start.elapsed() > self.timeout * 3 {
                return Err(fail("no answer in time".into()));
            }
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(fail(format!("read: {e}"))),
            }
        }
        let line = String::from_utf8_lossy(&buf);
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| fail(format!("not an HTTP answer: {:?}", line.lines().next())))?;
        if (200..300).contains(&status) {
            Ok(status)
        } else {
            Err(fail(format!("HTTP status {status}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = Duration::from_secs(1);
        let w = Webhook::new("http://127.0.0.1:9000/hook", t).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (w.host.as_str(), w.port, w.path.as_str()),
            ("127.0.0.1", 9000, "/hook")
        );
        let w = Webhook::new("http://relay", t).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((w.port, w.path.as_str()), (80, "/"));
        assert!(Webhook::new("https://relay/x", t).is_err());
        assert!(Webhook::new("http://:80/", t).is_err());
        assert!(Webhook::new("http://h:port/", t).is_err());
    }
}
