//! PEM files a flag names (`--serve-tls-cert`/`--serve-tls-key`, `--nats-ca`/`--nats-cert`/
//! `--nats-key`): read with a bound and parsed by one reader (rustls' PEM parser, the one the TLS
//! stacks of the live view and of async-nats use), so both sides take the same files and say
//! the same thing about a bad one: `FLAG PATH: why`, one line.

use super::small_file::read_at_most;
use std::path::Path;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The largest certificate chain or key file read (a chain of a few certificates is ~10 KiB).
const PEM_MOST_BYTES: u64 = 1 << 20;

/// Why a PEM text holds no key fftd can use: an encrypted private key, whose passphrase fftd
/// cannot ask for.
const ENCRYPTED: &str = "an encrypted private key, whose passphrase fftd cannot ask for: give it decrypted (openssl pkey -in KEY -out KEY.plain)";

/// The certificates in the PEM file `path` that `flag` names, in order; at least one.
pub(crate) fn certificates(
    flag: &str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(flag, path)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| named(flag, path, format!("not a PEM certificate: {e}")))?;
    match chain.is_empty() {
        true => Err(named(
            flag,
            path,
            "no PEM certificate in it (a '-----BEGIN CERTIFICATE-----' block)".into(),
        )),
        false => Ok(chain),
    }
}

/// The private key in the PEM file `path` that `flag` names (PKCS#8, PKCS#1 or SEC1); an
/// encrypted one is named as such.
pub(crate) fn private_key(flag: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(flag, path)?;
    // (an encrypted block is named only where no usable key is found beside it)
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match encrypted(&pem) {
        true => named(flag, path, ENCRYPTED.into()),
        false => named(
            flag,
            path,
            format!("no PEM private key in it (PKCS#8, RSA or EC: '-----BEGIN ... PRIVATE KEY-----'): {e}"),
        ),
    })
}

/// The certificate chain in `cert` and the private key in `key` (`flag`s name them), checked to
/// belong together: the key's public half is the first certificate's. A TLS stack finds a
/// mismatch only at the handshake (the live view's when it starts, async-nats' when it
/// connects, in words that name no file).
pub(crate) fn key_pair(
    (cert_flag, cert): (&str, &Path),
    (key_flag, key): (&str, &Path),
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    use tokio_rustls::rustls::{crypto::ring, sign::CertifiedKey, Error, InconsistentKeys};
    let chain = certificates(cert_flag, cert)?;
    let private = private_key(key_flag, key)?;
    let keys = ring::default_provider().key_provider;
    let signing = (keys.load_private_key(private.clone_key()))
        .map_err(|e| named(key_flag, key, format!("not a key fftd can use: {e}")))?;
    match CertifiedKey::new(chain.clone(), signing).keys_match() {
        Ok(()) | Err(Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok((chain, private)),
        Err(Error::InconsistentKeys(_)) => Err(named(
            key_flag,
            key,
            format!(
                "not the key of {cert_flag} {} (its public key is not the certificate's)",
                crate::types::shown_path(cert)
            ),
        )),
        Err(e) => Err(named(
            cert_flag,
            cert,
            format!("not a certificate fftd can read: {e}"),
        )),
    }
}

fn read(flag: &str, path: &Path) -> Result<Vec<u8>, String> {
    // (bounded, so a device named by mistake is an error rather than memory filled)
    read_at_most(path, PEM_MOST_BYTES).map_err(|e| named(flag, path, e.to_string()))
}

fn named(flag: &str, path: &Path, why: String) -> String {
    format!("{flag} {}: {why}", crate::types::shown_path(path))
}

/// Whether the PEM text holds an encrypted private key: PKCS#8's `ENCRYPTED PRIVATE KEY`
/// block, or an OpenSSL traditional key with its `Proc-Type: 4,ENCRYPTED` header.
fn encrypted(pem: &[u8]) -> bool {
    let holds = |marker: &[u8]| pem.windows(marker.len()).any(|w| w == marker);
    holds(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || holds(b"Proc-Type: 4,ENCRYPTED")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A throwaway key pair (rcgen is not a dependency: made once with openssl, never trusted).
    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIL39ec0bVkSJVfgWQSGNlxYtVRTrvHxYG6kqvytylzCB
-----END PRIVATE KEY-----
";

    fn file(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn keys_are_read_and_every_bad_file_is_named_with_its_flag() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = file(dir.path(), "k.pem", KEY);
        assert!(private_key("--nats-key", &key).is_ok());
        let e = certificates("--nats-ca", &key).expect_err("a key, no certificate");
        assert!(e.starts_with("--nats-ca "), "{e}");
        assert!(e.contains("no PEM certificate"), "{e}");
        let pkcs8 =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let old = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nMIIB\n-----END RSA PRIVATE KEY-----\n";
        for (name, text) in [("e8.pem", pkcs8), ("e1.pem", old)] {
            let e = private_key("--serve-tls-key", &file(dir.path(), name, text))
                .expect_err("encrypted");
            assert!(e.contains("an encrypted private key"), "{name}: {e}");
        }
        let e = private_key("--nats-key", &dir.path().join("gone.pem")).expect_err("missing");
        assert!(
            e.starts_with("--nats-key ") && e.contains("gone.pem"),
            "{e}"
        );
        let e = private_key("--nats-key", Path::new("/dev/zero")).expect_err("endless");
        assert!(e.contains("larger than"), "{e}");
    }
}
