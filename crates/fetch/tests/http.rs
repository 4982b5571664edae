//! `http(s)` fetching against real local servers: a small HTTP/1.1 server on a thread that
//! answers each path as its case needs (lengths, chunks, stalls, drips, redirects), and the
//! TLS crate's test terminator in front of it for `https` with a throwaway CA.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use shardgate_fetch::{fetch, FetchError, FetchPolicy, Fetched};
use shardgate_testkit::tls::{Pki, ServerSetup, Terminator};

/// Writes the answer for `path`; the server's own port is `port`.
fn answer(path: &str, port: u16, s: &mut TcpStream) -> std::io::Result<()> {
    let hold = || sleep(Duration::from_secs(30));
    let redirect = |s: &mut TcpStream, to: &str| write!(s, "HTTP/1.1 302 Found\r\nLocation: {to}\r\n\r\n");
    match path {
        "/ok" => s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 5\r\n\r\nhello")?,
        "/chunked" => {
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n")?
        }
        "/close" => s.write_all(b"HTTP/1.1 200 OK\r\n\r\nhello")?,
        "/big-length" => {
            // Says 1 GB and sends nothing: only a refusal before reading answers at once.
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")?;
            hold();
        }
        "/big-chunked" => {
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")?;
            loop {
                write!(s, "400\r\n{}\r\n", "x".repeat(1024))?;
            }
        }
        "/big-close" => {
            s.write_all(b"HTTP/1.1 200 OK\r\n\r\n")?;
            loop {
                s.write_all(&[b'x'; 1024])?;
            }
        }
        "/short" => s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")?,
        "/stall-head" => hold(),
        "/stall-body" => {
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")?;
            hold();
        }
        "/drip" => {
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")?;
            for _ in 0..10 {
                s.write_all(b"x")?;
                sleep(Duration::from_secs(1));
            }
        }
        "/404" => s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?,
        "/503" => s.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")?,
        "/no-location" => s.write_all(b"HTTP/1.1 301 Moved\r\n\r\n")?,
        "/to-file" => redirect(s, "file:///etc/hostname")?,
        "/to-data" => redirect(s, "data:image/png;base64,aGk=")?,
        "/to-ip" => redirect(s, &format!("http://127.0.0.1:{port}/ok"))?,
        "/to-tls" => redirect(s, &format!("https://localhost:{}/ok", https().port))?,
        "/to-plain" => redirect(s, &format!("http://127.0.0.1:{}/ok", plain_port()))?,
        _ => match path.strip_prefix("/hops/").and_then(|n| n.parse::<u32>().ok()) {
            // A relative Location, then an absolute path, alternately.
            Some(0) => redirect(s, "../ok")?,
            Some(n) if n % 2 == 0 => redirect(s, &(n - 1).to_string())?,
            Some(n) => redirect(s, &format!("/hops/{}", n - 1))?,
            None => s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")?,
        },
    }
    s.flush()
}

/// The plain server, started once for every test of this file; its port.
fn plain_port() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("test server port");
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut request_line = String::new();
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    if reader.read_line(&mut request_line).is_err() {
                        return;
                    }
                    let mut header = String::new();
                    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                        header.clear();
                    }
                    let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
                    let _ = answer(&path, port, &mut stream);
                });
            }
        });
        port
    })
}

struct Https {
    /// Names `127.0.0.1` and `localhost`.
    _terminator: Terminator,
    port: u16,
    /// Names `localhost` only.
    _wrong_name: Terminator,
    wrong_name_port: u16,
    ca: Vec<CertificateDer<'static>>,
}

/// TLS terminators in front of the plain server, certificates from a throwaway CA.
fn https() -> &'static Https {
    static HTTPS: OnceLock<Https> = OnceLock::new();
    HTTPS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("shardgate-fetch-tests-{}", std::process::id()));
        let pki = Pki::new(&dir, "media");
        let terminator = |file, names: &[&str]| {
            let setup = ServerSetup { leaf: pki.leaf(file, names), alpn: Vec::new(), client_ca: None };
            Terminator::start(&setup, format!("127.0.0.1:{}", plain_port()))
        };
        let right = terminator("media", &["127.0.0.1", "localhost"]);
        let wrong = terminator("other", &["localhost"]);
        let ca = CertificateDer::pem_file_iter(pki.ca_path()).unwrap().map(Result::unwrap).collect();
        Https { port: right.port, _terminator: right, wrong_name_port: wrong.port, _wrong_name: wrong, ca }
    })
}

fn policy() -> FetchPolicy {
    FetchPolicy { max_bytes: 64 << 10, extra_roots: https().ca.clone(), ..FetchPolicy::default() }
}

fn hello(media_type: Option<&str>) -> Result<Fetched, FetchError> {
    Ok(Fetched { bytes: b"hello".to_vec(), media_type: media_type.map(str::to_string) })
}

fn check(cases: Vec<(String, FetchPolicy, Result<Fetched, FetchError>)>) {
    for (url, policy, want) in cases {
        assert_eq!(fetch(&url, &policy), want, "{url}");
    }
}

#[test]
fn bodies_and_statuses() {
    let plain = |path: &str| format!("http://127.0.0.1:{}{path}", plain_port());
    check(vec![
        (plain("/ok"), policy(), hello(Some("image/png"))),
        (plain("/chunked"), policy(), hello(None)),
        (plain("/close"), policy(), hello(None)),
        (plain("/short"), policy(), Err(FetchError::Truncated)),
        (plain("/404"), policy(), Err(FetchError::Status(404))),
        (plain("/503"), policy(), Err(FetchError::Status(503))),
    ]);
}

/// Over the byte limit: a Content-Length refused before reading (the server then stalls: a
/// read would time out instead), a chunked or close-framed body cut off at the limit.
#[test]
fn byte_limit() {
    let plain = |path: &str| format!("http://127.0.0.1:{}{path}", plain_port());
    let small = FetchPolicy { max_bytes: 4, ..policy() };
    check(vec![
        (plain("/ok"), small.clone(), Err(FetchError::TooLarge { max_bytes: 4 })),
        (plain("/chunked"), small.clone(), Err(FetchError::TooLarge { max_bytes: 4 })),
        (plain("/close"), small.clone(), Err(FetchError::TooLarge { max_bytes: 4 })),
        (plain("/big-length"), policy(), Err(FetchError::TooLarge { max_bytes: 64 << 10 })),
        (plain("/big-chunked"), policy(), Err(FetchError::TooLarge { max_bytes: 64 << 10 })),
        (plain("/big-close"), policy(), Err(FetchError::TooLarge { max_bytes: 64 << 10 })),
    ]);
}

/// One deadline for the whole fetch: a server silent before its head or inside its body, and
/// one that drips a byte a second (each read alone would be quick enough).
#[test]
fn time_limit() {
    let plain = |path: &str| format!("http://127.0.0.1:{}{path}", plain_port());
    let limit = Duration::from_secs(2);
    let quick = FetchPolicy { timeout: limit, ..policy() };
    check(vec![
        (plain("/stall-head"), quick.clone(), Err(FetchError::Timeout(limit))),
        (plain("/stall-body"), quick.clone(), Err(FetchError::Timeout(limit))),
        (plain("/drip"), quick.clone(), Err(FetchError::Timeout(limit))),
        (format!("https://127.0.0.1:{}/drip", https().port), quick, Err(FetchError::Timeout(limit))),
    ]);
}

#[test]
fn redirects() {
    let plain = |path: &str| format!("http://127.0.0.1:{}{path}", plain_port());
    let two = FetchPolicy { max_redirects: 2, ..policy() };
    let local = FetchPolicy { local_root: Some(PathBuf::from("/etc")), ..policy() };
    check(vec![
        (plain("/hops/1"), two.clone(), hello(Some("image/png"))),
        (plain("/hops/2"), two.clone(), Err(FetchError::Redirects { max: 2 })),
        (plain("/hops/4"), policy(), hello(Some("image/png"))),
        (plain("/hops/1"), FetchPolicy { max_redirects: 0, ..policy() }, Err(FetchError::Redirects { max: 0 })),
        (plain("/to-file"), local, Err(FetchError::Scheme("file".into()))),
        (plain("/to-data"), policy(), Err(FetchError::Scheme("data".into()))),
        (plain("/no-location"), policy(), Err(FetchError::Protocol("a redirect without a Location"))),
    ]);
}

/// `allowed_domains`: the host as written, checked again on every redirect hop.
#[test]
fn allowed_domains() {
    let port = plain_port();
    let only_localhost = FetchPolicy { allowed_domains: Some(vec!["LocalHost".into()]), ..policy() };
    let refused = |host: &str| FetchError::Domain { host: host.into(), allowed: vec!["LocalHost".into()] };
    check(vec![
        (format!("http://localhost:{port}/ok"), only_localhost.clone(), hello(Some("image/png"))),
        (format!("http://127.0.0.1:{port}/ok"), only_localhost.clone(), Err(refused("127.0.0.1"))),
        (format!("http://localhost:{port}/to-ip"), only_localhost.clone(), Err(refused("127.0.0.1"))),
        (
            format!("http://localhost:{port}/ok"),
            FetchPolicy { allowed_domains: Some(vec![]), ..policy() },
            Err(FetchError::Domain { host: "localhost".into(), allowed: vec![] }),
        ),
    ]);
    assert_eq!(
        refused("127.0.0.1").to_string(),
        "The URL must be from one of the allowed domains: ['LocalHost']. Input URL domain: 127.0.0.1"
    );
}

#[test]
fn https_verifies_the_server() {
    let Https { port, wrong_name_port, .. } = https();
    let unknown_issuer = |port: u16| FetchError::Tls {
        host: format!("127.0.0.1:{port}"),
        error: "invalid peer certificate: UnknownIssuer".into(),
    };
    let no_ca = FetchPolicy { extra_roots: Vec::new(), ..policy() };
    check(vec![
        (format!("https://127.0.0.1:{port}/ok"), policy(), hello(Some("image/png"))),
        (format!("https://localhost:{port}/chunked"), policy(), hello(None)),
        (format!("https://127.0.0.1:{port}/ok"), no_ca, Err(unknown_issuer(*port))),
        (format!("https://localhost:{wrong_name_port}/ok"), policy(), hello(Some("image/png"))),
        // Downgrades are refused; upgrades are not.
        (format!("http://127.0.0.1:{}/to-tls", plain_port()), policy(), hello(Some("image/png"))),
        (format!("https://127.0.0.1:{port}/to-plain"), policy(), Err(FetchError::Downgrade)),
    ]);
    // The certificate names only `localhost`.
    match fetch(&format!("https://127.0.0.1:{wrong_name_port}/ok"), &policy()) {
        Err(FetchError::Tls { error, .. }) => assert!(error.contains("not valid for name"), "{error}"),
        other => panic!("a certificate for another name: {other:?}"),
    }
}

#[test]
fn connection_failures() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    match fetch(&format!("http://127.0.0.1:{closed}/ok"), &policy()) {
        Err(FetchError::Connect { host, .. }) => assert_eq!(host, format!("127.0.0.1:{closed}")),
        other => panic!("nothing listening: {other:?}"),
    }
    // A resolver with no reachable name server (a sandboxed CI machine) answers only after the
    // fetch's deadline: then the deadline is the failure.
    let short = FetchPolicy { timeout: Duration::from_secs(2), ..policy() };
    match fetch("http://no-such-host.invalid/ok", &short) {
        Err(FetchError::Connect { host, .. }) => assert_eq!(host, "no-such-host.invalid:80"),
        Err(FetchError::Timeout(limit)) => assert_eq!(limit, Duration::from_secs(2)),
        other => panic!("an unresolvable name: {other:?}"),
    }
}

/// Python's `http.server`, a server this crate's authors did not write: a file, a directory
/// whose slash-less URL redirects (301) to its listing, and a missing file.
#[test]
fn pythons_http_server() {
    let dir = std::env::temp_dir().join(format!("shardgate-fetch-py-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("pics")).unwrap();
    let image: Vec<u8> = (0..=255u8).cycle().take(40_000).collect();
    std::fs::write(dir.join("pics/cat.png"), &image).unwrap();
    // A port of this suite's range that is free now.
    let port = (21500..21600).find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok()).expect("a free port");
    let mut server = std::process::Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string(), "--directory"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let ready = (0..200).any(|_| {
        sleep(Duration::from_millis(50));
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let results = ready.then(|| {
        (
            fetch(&url("/pics/cat.png"), &policy()).map(|f| (f.bytes == image, f.media_type)),
            fetch(&url("/pics"), &policy())
                .map(|f| (f.media_type, String::from_utf8_lossy(&f.bytes).contains("cat.png"))),
            fetch(&url("/pics/dog.png"), &policy()),
            fetch(&url("/pics/cat.png"), &FetchPolicy { max_bytes: 39_999, ..policy() }),
        )
    });
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let (file, listing, missing, too_large) = results.expect("http.server did not start");
    assert_eq!(file, Ok((true, Some("image/png".into()))));
    assert_eq!(listing, Ok((Some("text/html".into()), true)));
    assert_eq!(missing, Err(FetchError::Status(404)));
    assert_eq!(too_large, Err(FetchError::TooLarge { max_bytes: 39_999 }));
}
