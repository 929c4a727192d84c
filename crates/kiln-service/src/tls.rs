//! Optional TLS for `kiln serve` (`[tls] cert = "...", key = "..."`): rustls with the ring
//! provider, through axum-server's acceptor (driven by [`crate::listener`], with the plain
//! listener's timeouts and cap). ALPN offers HTTP/1.1 only, or `h2` too with
//! `listener.http2`, as the plain listener. The
//! certificate and key are read and checked before the port is announced, so a wrong path,
//! an empty PEM file or a key that does not match the certificate stops the start with a
//! config error (exit 4), never a server that fails each handshake.

use crate::config::TlsConfig;
use crate::error::ServeError;
use axum_server::tls_rustls::RustlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The server-side rustls configuration for `t`.
pub fn server_config(t: &TlsConfig, http2: bool) -> Result<RustlsConfig, ServeError> {
    let bad = |what: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
        ServeError::Config(format!("tls.{what} {}: {e}", path.display()))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert)
        .map_err(|e| bad("cert", &t.cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("cert", &t.cert, &e))?;
    if certs.is_empty() {
        return Err(bad("cert", &t.cert, &"no CERTIFICATE block in the PEM file"));
    }
    let key = PrivateKeyDer::from_pem_file(&t.key).map_err(|e| bad("key", &t.key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Config(format!("tls: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            ServeError::Config(format!(
                "tls: the key {} does not fit the certificate {}: {e}",
                t.key.display(),
                t.cert.display()
            ))
        })?;
    cfg.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(RustlsConfig::from_config(Arc::new(cfg)))
}
