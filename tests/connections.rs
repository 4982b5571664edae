//! What connections cost the gateway and how many it holds: one descriptor each, silent ones
//! closed at the header timeout, a cap derived from `RLIMIT_NOFILE` with health probes and
//! metrics still answered at it.

mod common;

use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Gateway, Options};

#[test]
fn an_idle_connection_holds_one_descriptor() {
    let g = Gateway::start();
    let before = g.open_fds();
    // Answered keep-alive connections, idle now: each holds only its socket.
    let conns: Vec<BufReader<TcpStream>> = (0..100)
        .map(|_| {
            let mut s = g.connect();
            s.write_all(&common::raw_request("GET", "/health", None, &[], false)).unwrap();
            let mut r = BufReader::new(s);
            assert_eq!(common::read_response(&mut r).unwrap().status, 200);
            r
        })
        .collect();
    let after = g.open_fds();
    assert!(
        after - before <= conns.len() + 4,
        "{} idle connections took {} descriptors ({before} -> {after})",
        conns.len(),
        after - before
    );
}

#[test]
fn a_silent_connection_is_closed_at_the_header_timeout() {
    let g = Gateway::start();
    let mut s = g.connect();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    // Closed without an answer (nothing was asked), after 10 s, not the keep-alive idle time.
    let n = s.read(&mut byte).expect("the gateway kept a silent connection open for 30 s");
    let waited = started.elapsed();
    assert_eq!(n, 0, "a silent connection got bytes");
    assert!(waited >= Duration::from_secs(9) && waited < Duration::from_secs(15), "closed after {waited:?}");
}

#[test]
fn at_the_connection_cap_health_and_metrics_still_answer() {
    // One shard and one engine: 340 descriptors reserved (see `http::fd_budget`), so the shard
    // takes 100 connections, then 16 for health probes, and refuses the rest at accept.
    let g = Gateway::start_with(Options { nofile: Some(340 + 100), shards: 1, ..Default::default() });
    assert!(g.logs().contains("up to 100 connections per shard"), "{}", g.logs());
    // Far more silent connections than the shard takes: 116 are held, the rest closed at once.
    let conns: Vec<TcpStream> = (0..400).map(|_| g.connect()).collect();
    let closed = || {
        conns
            .iter()
            .filter(|s| {
                s.set_nonblocking(true).unwrap();
                let mut s: &TcpStream = s;
                matches!(s.read(&mut [0u8; 1]), Ok(0))
            })
            .count()
    };
    common::eventually(|| closed() >= 400 - 116, "the connections over the cap to be refused");
    // The first 100 stay open (silent ones get the 10 s header timeout).
    assert!(closed() <= 300, "{} of 400 closed", closed());
    // Metrics have their own listener and budget.
    assert!(g.metrics().contains("shardgate_http_connections_refused_total"));
    // Health probes get through once the over-cap lane's silent connections time out (1 s);
    // anything else asked on that lane is told to come back.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match g.try_request("GET", "/health", None, &[]) {
            Ok(r) if r.status == 200 => break,
            other => assert!(Instant::now() < deadline, "/health at the cap: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = g.try_request("GET", "/v1/models", None, &[]).unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("connection limit"), "{}", r.text());
    let metrics = g.metrics();
    let counted: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("shardgate_http_connections_refused_total "))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(counted >= 400 - 116, "{counted} refusals counted");
    let logs = g.logs();
    assert!(!logs.contains("Too many open files"), "the process ran out of descriptors:\n{logs}");
    // About one line a second, with the count, not one per refusal.
    let lines = logs.lines().filter(|l| l.contains("connection limit reached")).count();
    assert!((1..=8).contains(&lines), "{lines} refusal lines:\n{logs}");
    drop(conns);
}
