//! PEM files: certificate chains and private keys, read whole (they are small) so that a
//! failure can name the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::TlsError;

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read { path: path.to_path_buf(), error })
}

/// Every certificate in the file, in order (a chain: the leaf first).
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { path: path.to_path_buf(), error: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Empty { path: path.to_path_buf(), what: "certificate" });
    }
    Ok(certs)
}

/// The first private key in the file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { path: path.to_path_buf(), what: "private key" }
        }
        e => TlsError::Pem { path: path.to_path_buf(), error: e.to_string() },
    })
}
