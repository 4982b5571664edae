//! Why the TLS settings cannot be used. Each names the file or flag at fault, so the startup
//! error says what to fix.

use std::path::PathBuf;

#[derive(Debug)]
pub enum TlsError {
    /// A file could not be read.
    Read { path: PathBuf, error: std::io::Error },
    /// A file read but holds no PEM section of the kind the flag wants.
    Empty { path: PathBuf, what: &'static str },
    /// A PEM section that does not parse.
    Pem { path: PathBuf, error: String },
    /// A CA certificate rustls refuses as a trust anchor.
    Anchor { path: PathBuf, error: String },
    /// `--client-cert-path` without `--client-key-path`, or the other way round.
    HalfIdentity { given: &'static str, missing: &'static str },
    /// The client certificate and key do not form an identity rustls accepts.
    Identity(String),
    /// No trust anchor at all: the system has none and no `--ca-cert-path` was given.
    NoRoots,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::Read { path, error } => write!(f, "cannot read {}: {error}", path.display()),
            TlsError::Empty { path, what } => write!(f, "{} holds no PEM {what}", path.display()),
            TlsError::Pem { path, error } => write!(f, "{} is not valid PEM: {error}", path.display()),
            TlsError::Anchor { path, error } => {
                write!(f, "{} is not a usable CA certificate: {error}", path.display())
            }
            TlsError::HalfIdentity { given, missing } => {
                write!(f, "{given} needs {missing}: a client certificate and its key are given together")
            }
            TlsError::Identity(e) => write!(f, "the client certificate and key are not usable: {e}"),
            TlsError::NoRoots => f.write_str(
                "no CA certificates to verify workers with: the system store is empty and no --ca-cert-path was given",
            ),
        }
    }
}

impl std::error::Error for TlsError {}
