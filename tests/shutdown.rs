//! SIGTERM: new connections are refused, running streams finish, and what outlives
//! `--shutdown-timeout-secs` is aborted on the engine and ended cleanly for its client.

mod common;

use std::time::{Duration, Instant};

use common::{Gateway, Options};

fn gateway(gateway_args: &[&str]) -> Gateway {
    Gateway::start_with(Options {
        gateway_args: gateway_args.iter().map(|s| s.to_string()).collect(),
        sim_args: vec!["--itl-ms".into(), "20".into()],
        ..Default::default()
    })
}

#[test]
fn sigterm_lets_running_streams_finish_then_exits() {
    let mut g = gateway(&["--shutdown-timeout-secs", "30"]);
    // About a second of tokens still to come.
    let mut reader = common::start_stream(&g, 50);
    g.signal_gateway(libc::SIGTERM);
    // The listener closes promptly.
    common::eventually(
        || std::net::TcpStream::connect(("127.0.0.1", g.port)).is_err(),
        "new connections refused after SIGTERM",
    );
    let events = common::rest_of_stream(&mut reader);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let finish = &events[events.len() - 2];
    assert!(finish.contains("\"finish_reason\":\"length\""), "the stream ran to its end: {finish}");
    let status = g.wait_gateway_exit(Duration::from_secs(10)).expect("the gateway exits once drained");
    assert!(status.success(), "{status:?}");
    assert!(g.aborted_ids().is_empty(), "nothing needed aborting");
    assert!(g.logs().contains("received SIGTERM"));
}

#[test]
fn sigterm_aborts_what_outlives_the_shutdown_timeout() {
    let mut g = gateway(&["--shutdown-timeout-secs", "1"]);
    // Far longer than the timeout.
    let mut reader = common::start_stream(&g, 2000);
    let id_on_engine = g.adds()[0]["id"].as_str().unwrap().to_string();
    let signalled = Instant::now();
    g.signal_gateway(libc::SIGTERM);
    let events = common::rest_of_stream(&mut reader);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "the stream ends cleanly");
    let error = &events[events.len() - 2];
    assert!(error.contains("\"error\"") && error.contains("shutting down"), "{error}");
    let status = g.wait_gateway_exit(Duration::from_secs(10)).expect("the gateway exits");
    assert!(status.success(), "{status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    common::eventually(|| g.aborted_ids().contains(&id_on_engine), "the ABORT on the engine");
}
