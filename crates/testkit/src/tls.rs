//! A throwaway PKI written to PEM files, and a TLS server on a plain thread that terminates TLS in
//! front of a plain TCP server. The gateway's tests put it in front of real servers (a simulator-
//! backed gateway, a gRPC server) to make `https://` and `grpcs://` workers of them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// A certificate authority and certificates it signed, each as PEM files in `dir`.
pub struct Pki {
    pub dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A leaf's files.
#[derive(Debug, Clone)]
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    /// A new CA in `dir` (`<name>-ca.pem`).
    pub fn new(dir: &Path, name: &str) -> Pki {
        std::fs::create_dir_all(dir).expect("test PKI directory");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, format!("{name} test CA"));
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        std::fs::write(dir.join(format!("{name}-ca.pem")), ca.pem()).expect("CA file");
        Pki { dir: dir.join(format!("{name}-")), ca, ca_key }
    }

    pub fn ca_path(&self) -> PathBuf {
        PathBuf::from(format!("{}ca.pem", self.dir.display()))
    }

    /// A certificate for `names` (DNS names or IP literals), signed by the CA.
    pub fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names).expect("leaf params");
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).expect("leaf certificate");
        let leaf = Leaf {
            cert: PathBuf::from(format!("{}{file}.pem", self.dir.display())),
            key: PathBuf::from(format!("{}{file}-key.pem", self.dir.display())),
        };
        std::fs::write(&leaf.cert, cert.pem()).expect("leaf file");
        std::fs::write(&leaf.key, key.serialize_pem()).expect("key file");
        leaf
    }
}

/// How the test server behaves.
#[derive(Clone)]
pub struct ServerSetup {
    pub leaf: Leaf,
    /// ALPN protocols offered (empty: the server ignores ALPN).
    pub alpn: Vec<Vec<u8>>,
    /// When set, clients must present a certificate signed by this CA.
    pub client_ca: Option<PathBuf>,
}

pub fn server_config(setup: &ServerSetup) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(&setup.leaf.cert).expect("cert").map(|c| c.expect("cert")).collect();
    let key = PrivateKeyDer::from_pem_file(&setup.leaf.key).expect("key");
    let builder = ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
    let builder = match &setup.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).expect("client CA") {
                roots.add(c.expect("client CA")).expect("client CA anchor");
            }
            builder.with_client_cert_verifier(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap(),
            )
        }
    };
    let mut config = builder.with_single_cert(certs, key).expect("server identity");
    config.alpn_protocols = setup.alpn.clone();
    Arc::new(config)
}

/// A TLS terminator on 127.0.0.1: every connection's plaintext is piped to `backend` (a plain
/// TCP address), both ways, until either side closes. Runs until dropped.
pub struct Terminator {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Terminator {
    pub fn start(setup: &ServerSetup, backend: String) -> Terminator {
        let listener = TcpListener::bind("127.0.0.1:0").expect("terminator port");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let config = server_config(setup);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let config = config.clone();
                        let backend = backend.clone();
                        std::thread::spawn(move || pipe(config, client, &backend));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Terminator { port, stop }
    }
}

impl Drop for Terminator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One connection: the handshake, then bytes both ways. The TLS side is polled with a short
/// read timeout so that one thread serves both directions.
fn pipe(config: Arc<ServerConfig>, client: TcpStream, backend: &str) {
    let _ = client.set_nonblocking(false);
    let Ok(conn) = rustls::ServerConnection::new(config) else { return };
    let mut tls = rustls::StreamOwned::new(conn, client);
    if tls.conn.complete_io(&mut tls.sock).is_err() {
        return;
    }
    let Ok(mut plain) = TcpStream::connect(backend) else { return };
    let _ = plain.set_nodelay(true);
    let _ = tls.sock.set_nodelay(true);
    let _ = tls.sock.set_read_timeout(Some(Duration::from_millis(2)));
    let _ = plain.set_read_timeout(Some(Duration::from_millis(2)));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if plain.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
        match plain.read(&mut buf) {
            Ok(0) => {
                tls.conn.send_close_notify();
                let _ = tls.flush();
                return;
            }
            Ok(n) => {
                if tls.write_all(&buf[..n]).and_then(|_| tls.flush()).is_err() {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// A server that completes one handshake per connection, then writes `hello` and closes: for
/// the handshake tests (certificates, names, ALPN, client identities).
pub fn hello_server(setup: &ServerSetup) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("hello port");
    let port = listener.local_addr().unwrap().port();
    let config = server_config(setup);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                let mut tls = rustls::StreamOwned::new(conn, client);
                if tls.conn.complete_io(&mut tls.sock).is_ok() {
                    let _ = tls.write_all(b"hello");
                    let _ = tls.flush();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
        }
    });
    port
}
