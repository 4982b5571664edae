//! The client configurations against a real rustls server: which certificates, names, ALPN
//! answers and client identities connect, and which fail; and the settings errors, each
//! naming what to fix.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use shardgate_testkit::tls::{hello_server, Leaf, Pki, ServerSetup};
use shardgate_tls::{connect, server_name, Alpn, ClientTls, ClientTlsSettings, TlsError};
use tokio::io::AsyncReadExt;

fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shardgate-tls-{}-{name}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap().block_on(f)
}

/// Connects to 127.0.0.1:`port` as `host`, reads the server's greeting; the negotiated ALPN.
fn hello(tls: &ClientTls, alpn: Alpn, host: &str, port: u16) -> Result<Option<Vec<u8>>, String> {
    block_on(async {
        let tcp = monoio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await.map_err(|e| e.to_string())?;
        let io = tcp.try_into_poll_io().map_err(|(e, _)| e.to_string())?;
        let name = server_name(host).ok_or("bad name")?;
        let mut s = connect(tls.config(alpn), name, io).await.map_err(|e| e.to_string())?;
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.map_err(|e| e.to_string())?;
        if got != b"hello" {
            return Err(format!("read {got:?}"));
        }
        Ok(s.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
    })
}

struct World {
    pki: Pki,
    server: Leaf,
    client: Leaf,
    other_ca: PathBuf,
}

fn world(name: &str) -> World {
    let dir = scratch(name);
    let pki = Pki::new(&dir, "main");
    let server = pki.leaf("server", &["localhost", "127.0.0.1"]);
    let client = pki.leaf("client", &["gateway"]);
    let other_ca = Pki::new(&dir, "other").ca_path();
    World { pki, server, client, other_ca }
}

fn settings(ca: Option<&PathBuf>, identity: Option<&Leaf>) -> ClientTlsSettings {
    ClientTlsSettings {
        ca_cert_paths: ca.into_iter().cloned().collect(),
        client_cert_path: identity.map(|l| l.cert.clone()),
        client_key_path: identity.map(|l| l.key.clone()),
    }
}

#[test]
fn certificates_names_alpn_and_identities() {
    let w = world("table");
    let h2_server = ServerSetup { leaf: w.server.clone(), alpn: vec![b"h2".to_vec()], client_ca: None };
    let plain_server = ServerSetup { leaf: w.server.clone(), alpn: vec![], client_ca: None };
    let mtls_server =
        ServerSetup { leaf: w.server.clone(), alpn: vec![b"h2".to_vec()], client_ca: Some(w.pki.ca_path()) };
    let (h2, plain, mtls) = (hello_server(&h2_server), hello_server(&plain_server), hello_server(&mtls_server));
    let trusted = ClientTls::load(&settings(Some(&w.pki.ca_path()), None)).unwrap();
    let stranger = ClientTls::load(&settings(Some(&w.other_ca), None)).unwrap();
    let with_identity = ClientTls::load(&settings(Some(&w.pki.ca_path()), Some(&w.client))).unwrap();
    type Want = Result<Option<&'static [u8]>, &'static str>;
    let cases: [(&str, &ClientTls, Alpn, &str, u16, Want); 9] = [
        ("h2 by DNS name", &trusted, Alpn::H2, "localhost", h2, Ok(Some(b"h2"))),
        ("h2 by IP", &trusted, Alpn::H2, "127.0.0.1", h2, Ok(Some(b"h2"))),
        ("name not in the certificate", &trusted, Alpn::H2, "worker.example", h2, Err("not valid for name")),
        ("issuer not trusted", &stranger, Alpn::H2, "localhost", h2, Err("UnknownIssuer")),
        ("gRPC needs h2 by ALPN", &trusted, Alpn::H2, "localhost", plain, Err("ALPN")),
        ("HTTP/1.1 tolerates no ALPN", &trusted, Alpn::Http1, "localhost", plain, Ok(None)),
        ("HTTP/1.1 vs an h2-only server", &trusted, Alpn::Http1, "localhost", h2, Err("NoApplicationProtocol")),
        ("mutual TLS with an identity", &with_identity, Alpn::H2, "localhost", mtls, Ok(Some(b"h2"))),
        ("mutual TLS without one", &trusted, Alpn::H2, "localhost", mtls, Err("CertificateRequired")),
    ];
    for (what, tls, alpn, host, port, want) in cases {
        let got = hello(tls, alpn, host, port);
        match (&got, want) {
            (Ok(a), Ok(b)) => assert_eq!(a.as_deref(), b, "{what}"),
            (Err(e), Err(needle)) => assert!(e.contains(needle), "{what}: {e}"),
            _ => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn bad_settings_name_what_to_fix() {
    let w = world("settings");
    let garbage = w.pki.dir.with_file_name("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n").unwrap();
    let empty = w.pki.dir.with_file_name("empty.pem");
    std::fs::write(&empty, "no pem here\n").unwrap();
    let missing = w.pki.dir.with_file_name("missing.pem");
    let cert_only = ClientTlsSettings { client_cert_path: Some(w.client.cert.clone()), ..Default::default() };
    let key_only = ClientTlsSettings { client_key_path: Some(w.client.key.clone()), ..Default::default() };
    let key_as_cert = ClientTlsSettings {
        client_cert_path: Some(w.client.cert.clone()),
        client_key_path: Some(w.client.cert.clone()),
        ..Default::default()
    };
    let mismatched = ClientTlsSettings {
        client_cert_path: Some(w.client.cert.clone()),
        client_key_path: Some(w.server.key.clone()),
        ..Default::default()
    };
    let cases: [(&str, ClientTlsSettings, &str); 7] = [
        ("missing CA file", settings(Some(&missing), None), "cannot read"),
        ("CA file without PEM", settings(Some(&empty), None), "holds no PEM certificate"),
        ("CA file with a broken section", settings(Some(&garbage), None), "not"),
        ("certificate without key", cert_only, "--client-cert-path needs --client-key-path"),
        ("key without certificate", key_only, "--client-key-path needs --client-cert-path"),
        ("a certificate where the key should be", key_as_cert, "holds no PEM private key"),
        ("a key that is not the certificate's", mismatched, "not usable"),
    ];
    for (what, s, needle) in cases {
        let err = ClientTls::load(&s).expect_err(what);
        let text = err.to_string();
        assert!(text.contains(needle), "{what}: {text}");
        if let TlsError::Read { path, .. } | TlsError::Empty { path, .. } | TlsError::Pem { path, .. } = &err {
            assert!(text.contains(&path.display().to_string()), "{what}: the file is named: {text}");
        }
    }
}

#[test]
fn server_names_strip_brackets_and_refuse_nonsense() {
    assert!(server_name("[::1]").is_some());
    assert!(server_name("10.0.0.2").is_some());
    assert!(server_name("worker-1.cluster.local").is_some());
    assert!(server_name("bad name").is_none());
}
