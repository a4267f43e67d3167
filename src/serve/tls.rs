//! `--serve-tls-cert` / `--serve-tls-key`: the live view over HTTPS, with rustls (ring provider,
//! TLS 1.3) through tokio-rustls. The files are read when the port is bound, before the run
//! touches any output, so a bad certificate or key stops the run with a one-line error.

use crate::error::{FftdError, Result};
use crate::types::pem;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;

/// An acceptor for the certificate chain in `cert` and the private key in `key` (PEM).
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    // (usage errors, as every file a flag names and fftd reads before the run)
    let cert = ("--serve-tls-cert", cert);
    let (chain, private) =
        pem::key_pair(cert, ("--serve-tls-key", key)).map_err(FftdError::Usage)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FftdError::Runtime(format!("--serve-tls-cert: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| FftdError::Usage(format!("--serve-tls-key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
