//! `shardgate demo` on a machine where its default ports are taken: it picks free ones, prints
//! them, and serves.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{raw_request, read_response};

fn request(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<common::Response> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(&raw_request(method, path, body, &[], false)).ok()?;
    read_response(&mut BufReader::new(s)).ok()
}

#[test]
fn the_demo_picks_free_ports_when_its_defaults_are_taken() {
    common::model_dir();
    // Hold the defaults (or find them already held by someone else: taken either way).
    let _http = TcpListener::bind("127.0.0.1:30000");
    let _metrics = TcpListener::bind("127.0.0.1:29000");
    let mut demo = common::ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_shardgate"))
            .args(["demo", "--shards", "1", "--itl-ms", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = demo.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let port_after = |line: &str, prefix: &str| -> Option<u16> {
        let rest = &line[line.find(prefix)? + prefix.len()..];
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    let (mut http, mut metrics) = (None, None);
    while http.is_none() || metrics.is_none() {
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("the demo printed its ports");
        if line.starts_with("shardgate demo:") {
            http = port_after(&line, "http://127.0.0.1:");
        } else if line.starts_with("metrics:") {
            metrics = port_after(&line, "http://127.0.0.1:");
        }
    }
    let (http, metrics) = (http.unwrap(), metrics.unwrap());
    assert_ne!(http, 30000);
    assert_ne!(metrics, 29000);
    assert_ne!(http, metrics);
    common::eventually_within(
        Duration::from_secs(60),
        || request(http, "GET", "/readiness", None).is_some_and(|r| r.status == 200),
        "the demo ready",
    );
    let body = r#"{"model":"qwen3-demo","messages":[{"role":"user","content":"Hello!"}],"max_tokens":4}"#;
    let r = request(http, "POST", "/v1/chat/completions", Some(body)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let m = request(metrics, "GET", "/metrics", None).unwrap();
    assert_eq!(m.status, 200);
}
