//! `--serve-tls-cert` / `--serve-tls-key`: the live view over HTTPS, with rustls (ring provider,
//! TLS 1.3) through tokio-rustls. The files are read when the port is bound, before the run
//! touches any output, so a bad certificate or key stops the run with a one-line error.

use crate::error::{FftdError, Result};
use crate::types::small_file::read_at_most;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The largest certificate chain or key file read (a chain of a few certificates is ~10 KiB).
const PEM_MOST_BYTES: u64 = 1 << 20;

/// An acceptor for the certificate chain in `cert` and the private key in `key` (PEM).
pub(super) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    // (usage errors, as every file a flag names and fftd reads before the run)
    let bad = |flag: &str, path: &Path, why: String| {
        FftdError::Usage(format!("{flag} {}: {why}", path.display()))
    };
    // (read first: a missing file is named as such, not as "no certificate"; bounded, so a
    // device named by mistake is an error rather than memory filled)
    let read = |flag: &str, path: &Path| {
        read_at_most(path, PEM_MOST_BYTES).map_err(|e| bad(flag, path, e.to_string()))
    };
    let cert_pem = read("--serve-tls-cert", cert)?;
    let key_pem = read("--serve-tls-key", key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            bad(
                "--serve-tls-cert",
                cert,
                format!("not a PEM certificate: {e}"),
            )
        })?;
    if chain.is_empty() {
        return Err(bad(
            "--serve-tls-cert",
            cert,
            "no CERTIFICATE in it (expected PEM)".into(),
        ));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        let why = match crate::types::small_file::encrypted_key(&key_pem) {
            Some(why) => why.to_string(),
            None => format!("no PEM private key in it: {e}"),
        };
        bad("--serve-tls-key", key, why)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FftdError::Runtime(format!("--serve-tls-cert: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            bad(
                "--serve-tls-key",
                key,
                format!("does not fit --serve-tls-cert {}: {e}", cert.display()),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
