//! `kiln serve` over TLS (rustls): a self-signed certificate made here, the real binary on
//! loopback, a rustls client that trusts only that certificate. Checks that HTTPS answers,
//! that plain HTTP on the TLS port gets no HTTP answer, that a key which does not fit the
//! certificate stops the start with a config error (exit 4) before any port is announced,
//! that `kiln jobs` (plain HTTP only) says so against it, and that SIGTERM still stops the
//! server.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn serve(dir: &Path, cert: &Path, key: &Path) -> Command {
    let mut c = Command::new(kiln_bin());
    c.args([
        "--device",
        "cpu",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--cpu-workers",
        "1",
        "--data-dir",
    ])
    .arg(dir.join("data"))
    .arg("--tls-cert")
    .arg(cert)
    .arg("--tls-key")
    .arg(key)
    .env("KILN_LOG", "warn")
    .env_remove("KILN_TOKENS_FILE")
    .env_remove("KILN_SERVICE_CONFIG");
    c
}

/// The address `kiln serve` announces (`listening on https://ADDR`).
fn announced(child: &mut Child) -> SocketAddr {
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    line.split("https://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no https address in `{line}`"))
}

fn client(cert_pem: &str) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// `GET path` over TLS; the whole response as text.
fn get_tls(cfg: &Arc<rustls::ClientConfig>, addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut sock = TcpStream::connect(addr)?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // a peer that closes without close_notify after a complete response is fine here
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[test]
fn serves_https_refuses_plain_http_and_bad_keys() {
    let dir = tempfile::tempdir().unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert_pem, key_pem) = (ck.cert.pem(), ck.key_pair.serialize_pem());
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, &key_pem).unwrap();

    // A key that is not the certificate's: exit 4, a message naming tls, nothing announced.
    let other = rcgen::KeyPair::generate().unwrap();
    let wrong = dir.path().join("wrong.pem");
    std::fs::write(&wrong, other.serialize_pem()).unwrap();
    let o = serve(dir.path(), &cert, &wrong).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("tls") && err.contains("does not fit"), "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("listening"));
    // A certificate file with no certificate in it.
    let o = serve(dir.path(), &key, &key).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", String::from_utf8_lossy(&o.stderr));

    let mut child = serve(dir.path(), &cert, &key)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let addr = announced(&mut child);
    let cfg = client(&cert_pem);
    let end = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        match get_tls(&cfg, addr, "/readyz") {
            Ok(r) if r.starts_with("HTTP/1.1 200") => break r,
            _ if Instant::now() > end => panic!("no 200 from /readyz over TLS"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let jobs = get_tls(&cfg, addr, "/v1/jobs").unwrap();
    assert!(jobs.starts_with("HTTP/1.1 200"), "{jobs}");
    assert!(jobs.contains("\"jobs\""), "{jobs}");

    // Plain HTTP on the TLS port: no HTTP answer.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    plain
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf);
    assert!(
        !String::from_utf8_lossy(&buf).starts_with("HTTP/"),
        "plain HTTP was answered"
    );

    // The CLI client speaks plain HTTP: against HTTPS it fails saying so.
    let o = Command::new(kiln_bin())
        .args(["jobs", "--server", &format!("https://{addr}"), "list"])
        .env_remove("KILN_SERVER")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("plain HTTP only"), "{err}");

    // SIGTERM: a graceful stop.
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            assert!(s.success(), "kiln serve exited with {s}");
            break;
        }
        assert!(Instant::now() < end, "kiln serve did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The binary under test: `KILN_BIN` (the device bundle's, where the path cargo built in does
/// not exist) or the one cargo built.
fn kiln_bin() -> std::path::PathBuf {
    std::env::var_os("KILN_BIN").map_or_else(|| env!("CARGO_BIN_EXE_kiln").into(), Into::into)
}
