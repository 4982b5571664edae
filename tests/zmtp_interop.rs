//! shardgate's ZMTP sockets (`engine::zmq::zmtp`) against libzmq: the bytes pyzmq 27.3 /
//! libzmq 4.3.5 wrote as vLLM's engine opens its connections (`tests/wire/zmtp/`, captured by
//! `capture.py` from the real-vLLM venv), and live libzmq peers (the `zmq` crate's libzmq) for
//! routing, sizes, back-pressure, faults and liveness. No runtime: `try_recv` polls.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use shardgate_wire::zmtp::{codec, Attached, Frames, Kind, SendError, Socket};

fn scratch(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("sg-zmtp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("s.sock").to_string_lossy().into_owned()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn fixture(key: &str) -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire/zmtp/pyzmq-4.3.5.json");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    hex(v[key].as_str().unwrap())
}

/// Polls until a message is whole (servicing the socket: accepts, reads, flushes).
fn recv(socket: &mut Socket) -> Vec<Vec<u8>> {
    let mut frames = Frames::default();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.try_recv(&mut frames).unwrap() {
        assert!(Instant::now() < deadline, "no message on {}", socket.path());
        std::thread::sleep(Duration::from_micros(200));
    }
    frames.iter().map(<[u8]>::to_vec).collect()
}

/// Services the socket until `done` holds.
fn pump_until(socket: &mut Socket, what: &str, mut done: impl FnMut(&mut Socket) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut frames = Frames::default();
    while !done(socket) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        let _ = socket.try_recv(&mut frames).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn libzmq_peer(ctx: &zmq::Context, kind: zmq::SocketType, identity: Option<&[u8]>, path: &str) -> zmq::Socket {
    let s = ctx.socket(kind).unwrap();
    s.set_linger(0).unwrap();
    // Few messages held inside libzmq, so back-pressure reaches our queue soon.
    s.set_rcvhwm(8).unwrap();
    if let Some(id) = identity {
        s.set_identity(id).unwrap();
    }
    // A TCP socket's path is already its `tcp://` address.
    let endpoint = if path.starts_with("tcp://") { path.to_string() } else { format!("ipc://{path}") };
    s.connect(&endpoint).unwrap();
    s
}

/// A socket file, or TCP on loopback (a free port): the two ways engines dial in.
fn bind(kind: Kind, transport: &str, name: &str) -> Socket {
    match transport {
        "ipc" => Socket::bind(kind, &scratch(name)).unwrap(),
        _ => Socket::bind_tcp(kind, "127.0.0.1:0".parse().unwrap()).unwrap(),
    }
}

/// A ROUTER with one libzmq DEALER (identity `[0, 0]`) connected and registered.
fn router_with_dealer(ctx: &zmq::Context, name: &str) -> (Socket, zmq::Socket) {
    let path = scratch(name);
    let mut input = Socket::bind(Kind::Router, &path).unwrap();
    let dealer = libzmq_peer(ctx, zmq::DEALER, Some(&[0, 0]), &path);
    dealer.send(&b"reg"[..], 0).unwrap();
    recv(&mut input);
    (input, dealer)
}

/// Queues 256 KiB messages (`numbered`) to identity `[0, 0]` until the socket reports Full;
/// returns how many it took.
fn fill_until_full(input: &mut Socket) -> usize {
    let mut sent = 0usize;
    loop {
        match input.send(&[&[0, 0], &numbered(sent, 256 << 10)]) {
            Ok(()) => sent += 1,
            Err(SendError::Full) => return sent,
            Err(e) => panic!("{e}"),
        }
        assert!(sent < 10_000, "never reported Full");
    }
}

/// A raw peer's read says the other side closed (EOF, or a reset when bytes were left unread).
fn closed(r: std::io::Result<usize>) -> bool {
    match r {
        Ok(n) => n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// A payload that says which message it is, for order and integrity checks.
fn numbered(i: usize, len: usize) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; len.max(8)];
    v[..8].copy_from_slice(&(i as u64).to_le_bytes());
    v
}

#[test]
fn reads_the_bytes_pyzmq_writes() {
    for (kind, key, want) in [
        (Kind::Router, "dealer", vec![vec![1u8, 0], b"reg".to_vec()]),
        (Kind::Pull, "push", vec![b"out".to_vec(), vec![], vec![b'x'; 300]]),
    ] {
        let path = scratch(key);
        let mut socket = Socket::bind(kind, &path).unwrap();
        let mut raw = UnixStream::connect(&path).unwrap();
        let mut writer = raw.try_clone().unwrap();
        let bytes = fixture(key);
        // Byte by byte, so that every cut of the stream is handled.
        let writing = std::thread::spawn(move || {
            for b in &bytes {
                writer.write_all(std::slice::from_ref(b)).unwrap();
            }
        });
        assert_eq!(recv(&mut socket), want, "{key}");
        writing.join().unwrap();
        // What we answered is a greeting libzmq takes, then our READY naming our type.
        let mut back = vec![0u8; codec::GREETING_LEN];
        raw.read_exact(&mut back).unwrap();
        codec::check_greeting(&back).unwrap();
        let mut head = [0u8; 2];
        raw.read_exact(&mut head).unwrap();
        let mut body = vec![0u8; head[1] as usize];
        raw.read_exact(&mut body).unwrap();
        let (name, data) = codec::split_command(&body).unwrap();
        assert_eq!(name, b"READY");
        assert_eq!(codec::decode_ready(data).unwrap().socket_type, kind.name().as_bytes());
    }
}

#[test]
fn routes_by_identity_and_carries_every_size() {
    for transport in ["ipc", "tcp"] {
        routes_by_identity_and_carries_every_size_over(transport);
    }
}

fn routes_by_identity_and_carries_every_size_over(transport: &str) {
    let ctx = zmq::Context::new();
    let mut input = bind(Kind::Router, transport, "route-in");
    let mut output = bind(Kind::Pull, transport, "route-out");
    let (in_path, out_path) = (input.path().to_string(), output.path().to_string());
    assert_eq!(in_path.starts_with("tcp://127.0.0.1:"), transport == "tcp", "{in_path}");
    let dealers: Vec<zmq::Socket> =
        (0u16..2).map(|r| libzmq_peer(&ctx, zmq::DEALER, Some(&r.to_le_bytes()), &in_path)).collect();
    let pushes: Vec<zmq::Socket> = (0..2).map(|_| libzmq_peer(&ctx, zmq::PUSH, None, &out_path)).collect();
    for (r, d) in dealers.iter().enumerate() {
        d.send(&b"registration"[..], 0).unwrap();
        let got = recv(&mut input);
        assert_eq!(got[1], b"registration");
        assert_eq!(got[0], (r as u16).to_le_bytes());
    }
    assert_eq!(input.send(&[&[9, 9], b"x"]), Err(SendError::Unreachable));
    let sizes = [0usize, 1, 254, 255, 256, 65_535, 65_536, 70_000, 3 << 20];
    for (i, &len) in sizes.iter().enumerate() {
        for (r, d) in dealers.iter().enumerate() {
            let payload = numbered(i * 2 + r, len);
            input.send(&[&(r as u16).to_le_bytes(), &[1], &[], &payload]).unwrap();
            // A whole message is POLLIN for libzmq; servicing flushes what the kernel refused.
            pump_until(&mut input, "delivery", |_| d.poll(zmq::POLLIN, 0).unwrap() > 0);
            let got = d.recv_multipart(0).unwrap();
            assert_eq!(got, vec![vec![1], vec![], payload], "{transport}: rank {r}, {len} bytes");
        }
        for p in &pushes {
            p.send_multipart([&b"batch"[..], &numbered(i, len)], 0).unwrap();
        }
        for _ in &pushes {
            assert_eq!(recv(&mut output), vec![b"batch".to_vec(), numbered(i, len)], "{transport}: {len} bytes");
        }
    }
}

#[test]
fn back_pressure_holds_bytes_until_the_engine_reads() {
    let ctx = zmq::Context::new();
    let (mut input, dealer) = router_with_dealer(&ctx, "pressure");
    let sent = fill_until_full(&mut input);
    assert!(sent * (256 << 10) > shardgate_wire::limits::zmq_send_queue_bytes_max);
    let reader = std::thread::spawn(move || {
        for i in 0..sent {
            let got = dealer.recv_bytes(0).unwrap();
            assert_eq!(got, numbered(i, 256 << 10), "message {i}");
        }
        dealer
    });
    // Only servicing flushes what the kernel could not take at once.
    pump_until(&mut input, "the reader", |_| reader.is_finished());
    reader.join().unwrap();
}

/// `send_multipart_within`, which a request's ADD goes through: with no room it waits for its
/// limit and then reports Full (the link then fails); room that appears while it waits, once
/// the socket's driver flushes, lets the same send through.
#[test]
fn a_send_waits_for_room_up_to_its_limit() {
    let ctx = zmq::Context::new();
    let (mut input, dealer) = router_with_dealer(&ctx, "within");
    let queued = fill_until_full(&mut input);
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    let reader = rt.block_on(async move {
        let input = std::rc::Rc::new(Attached::attach(input).unwrap());
        let limit = Duration::from_millis(300);
        let started = Instant::now();
        let late: [&[u8]; 2] = [&[0, 0], b"late"];
        assert_eq!(input.send_multipart_within(&late, limit).await, Err(SendError::Full));
        assert!(started.elapsed() >= limit, "gave up after {:?}", started.elapsed());
        let driver = input.clone();
        monoio::spawn(async move { driver.drive(std::future::pending()).await });
        let reader = std::thread::spawn(move || {
            for i in 0..queued {
                assert_eq!(dealer.recv_bytes(0).unwrap(), numbered(i, 256 << 10), "message {i}");
            }
            dealer.recv_bytes(0).unwrap()
        });
        assert_eq!(input.send_multipart_within(&late, Duration::from_secs(30)).await, Ok(()));
        // The driver flushes what is left while the reader drains.
        while !reader.is_finished() {
            monoio::time::sleep(Duration::from_millis(1)).await;
        }
        reader
    });
    assert_eq!(reader.join().unwrap(), b"late", "the waiting send arrived after everything queued before it");
}

#[test]
fn a_second_peer_with_a_live_identity_is_refused() {
    let ctx = zmq::Context::new();
    let path = scratch("dup");
    let mut input = Socket::bind(Kind::Router, &path).unwrap();
    let first = libzmq_peer(&ctx, zmq::DEALER, Some(&[1, 0]), &path);
    first.send(&b"one"[..], 0).unwrap();
    assert_eq!(recv(&mut input)[1], b"one");
    // The second says the same identity (pyzmq's bytes: DEALER [1, 0], then "reg").
    let mut second = UnixStream::connect(&path).unwrap();
    second.write_all(&fixture("dealer")).unwrap();
    second.set_nonblocking(true).unwrap();
    let mut delivered = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sink = [0u8; 256];
    loop {
        assert!(Instant::now() < deadline, "the duplicate was never dropped");
        let mut frames = Frames::default();
        if input.try_recv(&mut frames).unwrap() {
            delivered.push(frames[1].to_vec());
        }
        if closed(second.read(&mut sink)) {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(delivered.is_empty(), "the duplicate's message was delivered: {delivered:?}");
    assert_eq!(input.open_peers(), 1);
    assert_eq!(input.take_lost(), None, "the identity is still connected");
    input.send(&[&[1, 0], b"for the first"]).unwrap();
    pump_until(&mut input, "delivery", |_| first.poll(zmq::POLLIN, 0).unwrap() > 0);
    assert_eq!(first.recv_bytes(0).unwrap(), b"for the first");
    // An engine that closes while a new one with its identity connects is not lost (a
    // previous attempt's engine going away during the next handshake).
    drop(first);
    pump_until(&mut input, "the close", |s| s.open_peers() == 0);
    let third = libzmq_peer(&ctx, zmq::DEALER, Some(&[1, 0]), &path);
    third.send(&b"three"[..], 0).unwrap();
    assert_eq!(recv(&mut input)[1], b"three");
    assert_eq!(input.take_lost(), None);
}

/// Bytes no libzmq peer sends: each costs that connection only.
#[test]
fn a_bad_peer_is_dropped_alone() {
    let mut greeting_with_pub = codec::greeting().to_vec();
    codec::encode_ready("PUB", None, &mut greeting_with_pub);
    let mut oversize = codec::greeting().to_vec();
    codec::encode_ready("PUSH", None, &mut oversize);
    oversize.extend_from_slice(&[0x02, 0, 0, 0x10, 0, 0, 0, 0, 0]);
    let mut message_before_ready = codec::greeting().to_vec();
    message_before_ready.extend_from_slice(&[0x00, 0x01, b'x']);
    let cases: [(&str, Vec<u8>); 4] = [
        ("not zmtp", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(4)),
        ("PUB peer", greeting_with_pub),
        ("16 TiB frame", oversize),
        ("message before READY", message_before_ready),
    ];
    let ctx = zmq::Context::new();
    let path = scratch("bad");
    let mut output = Socket::bind(Kind::Pull, &path).unwrap();
    let good = libzmq_peer(&ctx, zmq::PUSH, None, &path);
    for (what, bytes) in cases {
        let mut raw = UnixStream::connect(&path).unwrap();
        raw.write_all(&bytes).unwrap();
        raw.set_nonblocking(true).unwrap();
        let mut sink = [0u8; 512];
        pump_until(&mut output, what, |_| closed(raw.read(&mut sink)));
        good.send(what.as_bytes(), 0).unwrap();
        assert_eq!(recv(&mut output), vec![what.as_bytes().to_vec()], "{what}");
    }
}

#[test]
fn pings_are_answered_and_a_closed_engine_is_unreachable_and_reported() {
    let path = scratch("ping");
    let mut input = Socket::bind(Kind::Router, &path).unwrap();
    let mut raw = UnixStream::connect(&path).unwrap();
    raw.write_all(&fixture("dealer")).unwrap();
    assert_eq!(recv(&mut input)[1], b"reg");
    let mut skip = vec![0u8; codec::GREETING_LEN + 2];
    raw.read_exact(&mut skip).unwrap();
    raw.read_exact(&mut vec![0u8; skip[codec::GREETING_LEN + 1] as usize]).unwrap();
    let mut ping = Vec::new();
    codec::encode_command(b"PING", &[0, 10, b'c', b't', b'x'], &mut ping);
    raw.write_all(&ping).unwrap();
    let mut pong = Vec::new();
    codec::encode_command(b"PONG", b"ctx", &mut pong);
    let mut got = vec![0u8; pong.len()];
    raw.set_nonblocking(true).unwrap();
    let mut have = 0;
    pump_until(&mut input, "PONG", |_| {
        if let Ok(n) = raw.read(&mut got[have..]) {
            have += n;
        }
        have == pong.len()
    });
    assert_eq!(got, pong);
    input.send(&[&[1, 0], b"still here"]).unwrap();
    assert_eq!(input.take_lost(), None);
    drop(raw);
    pump_until(&mut input, "the close to be seen", |s| s.send(&[&[1, 0], b"x"]) == Err(SendError::Unreachable));
    assert_eq!(input.take_lost(), Some(vec![1, 0]), "a closed engine is reported once");
    assert_eq!(input.take_lost(), None);
}
