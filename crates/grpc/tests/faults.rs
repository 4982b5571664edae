//! Workers that misbehave in the ways a real server cannot be made to: a small h2 server per
//! case, on the test's monoio runtime, answering Generate as the case says.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use http::{HeaderMap, Response};
use prost::Message;
use shardgate_grpc::frame::{self, FrameError};
use shardgate_grpc::smg::messages as pb;
use shardgate_grpc::smg::SmgClient;
use shardgate_grpc::status::Code;
use shardgate_grpc::ResponseError;
use shardgate_grpc::{Channel, Endpoint, Fault};
use shardgate_wire::{EngineRequest, SamplingParams, TokenEvent};

#[derive(Clone, Copy, Debug)]
enum Worker {
    /// One chunk, then the finishing complete and status OK.
    Healthy,
    /// One chunk, then RST_STREAM INTERNAL_ERROR.
    ResetMidStream,
    /// One chunk, then the TCP connection closes.
    DropsConnection,
    /// Headers, then nothing.
    Stalls,
    /// A message prefix with flag byte 2.
    BadFrame,
    /// A message that is not a GenerateResponse.
    Undecodable,
    /// A complete with a finish reason vLLM does not have.
    UnknownFinishReason,
    /// One chunk, then status INTERNAL in the trailers.
    ErrorStatus,
    /// A trailers-only UNAVAILABLE answer.
    Unavailable,
    /// HTTP 503, no gRPC.
    Http503,
    /// RST_STREAM REFUSED_STREAM before anything.
    Refuses,
}

fn message(m: &impl Message) -> Bytes {
    frame::encode(&m.encode_to_vec())
}

fn chunk() -> Bytes {
    let c = pb::GenerateStreamChunk { token_ids: vec![42], ..Default::default() };
    message(&pb::GenerateResponse { response: Some(pb::Response::Chunk(c)) })
}

fn complete(reason: &str) -> Bytes {
    let c = pb::GenerateComplete { output_ids: vec![42], finish_reason: reason.into(), ..Default::default() };
    message(&pb::GenerateResponse { response: Some(pb::Response::Complete(c)) })
}

fn status(code: u32) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", code.into());
    h.insert("grpc-message", "engine%20fell%20over".parse().unwrap());
    h
}

fn grpc_head() -> Response<()> {
    Response::builder().status(200).header("content-type", "application/grpc").body(()).unwrap()
}

/// Answers one stream; sets `drop_connection` to have the connection closed under it.
async fn answer(worker: Worker, mut respond: SendResponse<Bytes>, drop_connection: Rc<Cell<bool>>) {
    if let Worker::Refuses = worker {
        respond.send_reset(h2::Reason::REFUSED_STREAM);
        return;
    }
    if let Worker::Http503 = worker {
        respond.send_response(Response::builder().status(503).body(()).unwrap(), true).unwrap();
        return;
    }
    if let Worker::Unavailable = worker {
        let mut head = grpc_head();
        head.headers_mut().extend(status(14));
        respond.send_response(head, true).unwrap();
        return;
    }
    let mut body = respond.send_response(grpc_head(), false).unwrap();
    match worker {
        Worker::Healthy => {
            body.send_data([chunk(), complete("length")].concat().into(), false).unwrap();
            body.send_trailers(status(0)).unwrap();
        }
        Worker::ResetMidStream => {
            body.send_data(chunk(), false).unwrap();
            monoio::time::sleep(Duration::from_millis(50)).await;
            body.send_reset(h2::Reason::INTERNAL_ERROR);
        }
        Worker::DropsConnection => {
            body.send_data(chunk(), false).unwrap();
            monoio::time::sleep(Duration::from_millis(50)).await;
            // The stream stays open here: the socket closes under it, no RST_STREAM first.
            drop_connection.set(true);
        }
        Worker::Stalls => {
            monoio::time::sleep(Duration::from_secs(3600)).await;
        }
        Worker::BadFrame => body.send_data(Bytes::from_static(&[2, 0, 0, 0, 1, 0]), false).unwrap(),
        Worker::Undecodable => body.send_data(frame::encode(&[0xff, 0xff, 0xff]), false).unwrap(),
        Worker::UnknownFinishReason => body.send_data([chunk(), complete("exploded")].concat().into(), false).unwrap(),
        Worker::ErrorStatus => {
            body.send_data(chunk(), false).unwrap();
            body.send_trailers(status(13)).unwrap();
        }
        Worker::Unavailable | Worker::Http503 | Worker::Refuses => unreachable!(),
    }
    // Keep the stream open until the client is done with it.
    monoio::time::sleep(Duration::from_secs(3600)).await;
}

/// Serves every connection on `listener` as `worker`.
async fn serve(listener: monoio::net::TcpListener, worker: Worker) {
    while let Ok((tcp, _)) = listener.accept().await {
        monoio::spawn(async move {
            let Ok(io) = tcp.try_into_poll_io() else { return };
            let Ok(mut conn) = h2::server::handshake(io).await else { return };
            let dropped = Rc::new(Cell::new(false));
            // Accepting is what drives the connection; it wakes every 10 ms to see whether the
            // case wants the connection gone (dropping `conn` closes the socket).
            while !dropped.get() {
                match monoio::time::timeout(Duration::from_millis(10), conn.accept()).await {
                    Err(_) => {}
                    Ok(Some(Ok((_request, respond)))) => {
                        monoio::spawn(answer(worker, respond, dropped.clone()));
                    }
                    Ok(_) => return,
                }
            }
        });
    }
}

fn request() -> EngineRequest {
    let sampling = SamplingParams { temperature: 0.0, max_tokens: 4, ..SamplingParams::default() };
    EngineRequest {
        request_id: "f-1".into(),
        prompt_token_ids: vec![1, 2].into(),
        sampling,
        arrival_time: 0.0,
        cache_salt: None,
        priority: 0,
        mm_features: Default::default(),
    }
}

/// Every event of one Generate call, then its fault.
async fn generate(client: &SmgClient) -> (Vec<TokenEvent>, Option<Fault>) {
    let mut events = Vec::new();
    let mut stream = match client.generate(&request(), None, 300).await {
        Ok(s) => s,
        Err(f) => return (events, Some(f)),
    };
    loop {
        match stream.next().await {
            Ok(Some(e)) => events.push(e),
            Ok(None) => return (events, None),
            Err(f) => return (events, Some(f)),
        }
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap().block_on(f)
}

#[test]
fn each_misbehaviour_is_a_typed_fault() {
    type Check = fn(&Fault) -> bool;
    // (worker, events before the fault, the fault, retry-safe, worker to blame)
    let cases: [(Worker, usize, Check, bool, bool); 10] = [
        (Worker::ResetMidStream, 1, |f| matches!(f, Fault::Reset(_)), false, true),
        (Worker::DropsConnection, 1, |f| matches!(f, Fault::Closed(_)), true, true),
        (Worker::Stalls, 0, |f| matches!(f, Fault::Deadline { ms: 300 }), false, true),
        (Worker::BadFrame, 0, |f| matches!(f, Fault::Frame(FrameError::BadFlag(2))), false, true),
        (Worker::Undecodable, 0, |f| matches!(f, Fault::Decode(_)), false, true),
        (
            Worker::UnknownFinishReason,
            1,
            |f| matches!(f, Fault::Response(ResponseError::UnknownFinishReason(r)) if r == "exploded"),
            false,
            true,
        ),
        (
            Worker::ErrorStatus,
            1,
            |f| matches!(f, Fault::Status(s) if s.code == Code::Internal && s.message == "engine fell over"),
            false,
            true,
        ),
        (Worker::Unavailable, 0, |f| matches!(f, Fault::Status(s) if s.code == Code::Unavailable), true, true),
        (Worker::Http503, 0, |f| matches!(f, Fault::NotGrpc(m) if m.contains("503")), false, true),
        (Worker::Refuses, 0, |f| matches!(f, Fault::Refused), true, true),
    ];
    block_on(async move {
        for (worker, events_before, check, safe, blame) in cases {
            let listener = monoio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            monoio::spawn(serve(listener, worker));
            let client = SmgClient::new(Rc::new(Channel::connect(&addr, None).await.unwrap()));
            let (events, fault) = generate(&client).await;
            let fault = fault.unwrap_or_else(|| panic!("{worker:?}: no fault"));
            assert_eq!(events.len(), events_before, "{worker:?}: {fault}");
            assert!(check(&fault), "{worker:?}: {fault}");
            assert_eq!((fault.retry_safe(), fault.worker_fault()), (safe, blame), "{worker:?}: {fault}");
        }
    });
}

#[test]
fn a_refusing_worker_backs_off_then_recovers() {
    block_on(async move {
        // A port with nobody on it, taken again below.
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let mut endpoint = Endpoint::new(&addr, None);
        let refused = endpoint.channel().await.err().unwrap();
        assert!(matches!(&refused, Fault::Connect(_)) && refused.retry_safe() && refused.worker_fault(), "{refused}");
        let waiting = endpoint.channel().await.err().unwrap();
        assert!(matches!(waiting, Fault::Backoff { retry_in_ms } if retry_in_ms <= 100), "{waiting}");

        monoio::spawn(serve(monoio::net::TcpListener::bind(&addr).unwrap(), Worker::Healthy));
        monoio::time::sleep(Duration::from_millis(150)).await;
        let client = SmgClient::new(endpoint.channel().await.unwrap());
        let (events, fault) = generate(&client).await;
        assert!(fault.is_none(), "{fault:?}");
        assert_eq!(events.iter().flat_map(|e| e.token_ids.clone()).collect::<Vec<_>>(), [42]);

        // The connection dropped under it: the next call reconnects at once.
        let dropper = monoio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = dropper.local_addr().unwrap().to_string();
        monoio::spawn(serve(dropper, Worker::DropsConnection));
        let mut endpoint = Endpoint::new(&addr, None);
        let first = endpoint.channel().await.unwrap();
        let (_, fault) = generate(&SmgClient::new(first.clone())).await;
        assert!(matches!(fault, Some(Fault::Closed(_))), "{fault:?}");
        monoio::time::sleep(Duration::from_millis(20)).await;
        assert!(first.ended().is_some());
        let second = endpoint.channel().await.unwrap();
        assert!(!Rc::ptr_eq(&first, &second) && second.ended().is_none());
    });
}

#[test]
fn grpcs_verifies_the_worker_and_needs_http2_by_alpn() {
    use shardgate_testkit::tls::{Pki, ServerSetup, Terminator};
    use shardgate_tls::{ClientTls, ClientTlsSettings};
    let dir = std::env::temp_dir().join(format!("shardgate-grpcs-{}", std::process::id()));
    let ours = Pki::new(&dir, "ours");
    let theirs = Pki::new(&dir, "theirs");
    let tls =
        ClientTls::load(&ClientTlsSettings { ca_cert_paths: vec![ours.ca_path()], ..Default::default() }).unwrap();
    let h2 = vec![b"h2".to_vec()];
    let setup = |pki: &Pki, alpn: &Vec<Vec<u8>>| ServerSetup {
        leaf: pki.leaf("worker", &["localhost"]),
        alpn: alpn.clone(),
        client_ca: None,
    };
    block_on(async move {
        let listener = monoio::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let backend = listener.local_addr().unwrap().to_string();
        monoio::spawn(serve(listener, Worker::Healthy));
        let good = Terminator::start(&setup(&ours, &h2), backend.clone());
        let stranger = Terminator::start(&setup(&theirs, &h2), backend.clone());
        let no_alpn = Terminator::start(&setup(&ours, &Vec::new()), backend);

        let channel = Channel::connect(&format!("localhost:{}", good.port), Some(&tls)).await.unwrap();
        let (events, fault) = generate(&SmgClient::new(Rc::new(channel))).await;
        assert!(fault.is_none(), "{fault:?}");
        assert_eq!(events.iter().flat_map(|e| e.token_ids.clone()).collect::<Vec<_>>(), [42]);

        for (port, why) in [(stranger.port, "UnknownIssuer"), (no_alpn.port, "ALPN")] {
            let fault = Channel::connect(&format!("localhost:{port}"), Some(&tls)).await.err().unwrap();
            assert!(matches!(&fault, Fault::Tls(m) if m.contains(why)), "{why}: {fault}");
            assert!(fault.retry_safe() && fault.worker_fault(), "{fault}");
        }
    });
}
