//! A scripted server of SMG's `VllmEngine` service on its own thread, for the gateway's tests of
//! what a real servicer cannot be made to do on demand (an error status after some output,
//! UNAVAILABLE before any). Every call but Generate answers as the real servicer does for a one-
//! rank engine; vLLM's Control service is absent (UNIMPLEMENTED), so detection picks SMG's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use http::{HeaderMap, Response};
use prost::Message;

use shardgate_grpc::frame;
use shardgate_grpc::smg::messages as pb;

/// How Generate answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    /// `tokens` chunks of one token each, then the complete (finish "length") and status OK.
    Healthy { tokens: u32 },
    /// One chunk, then status INTERNAL with a message.
    InternalAfterFirst,
    /// Status INTERNAL before any output.
    InternalAtOnce,
    /// A trailers-only UNAVAILABLE: the servicer did not admit the request.
    Unavailable,
    /// One chunk, then RST_STREAM INTERNAL_ERROR.
    ResetAfterFirst,
}

/// The token every chunk carries.
pub const TOKEN: u32 = 42;
/// The message of the scripted error statuses.
pub const ERROR_MESSAGE: &str = "engine fell over";

/// A running scripted server.
pub struct Server {
    pub port: u16,
    /// What HealthCheck answers (`healthy`); a test clears it to play an engine that died under
    /// a live servicer.
    pub healthy: Arc<AtomicBool>,
}

/// Starts a server on 127.0.0.1 (a free port) that answers every Generate with `script`; it
/// runs until the process exits.
pub fn start(script: Script, max_model_len: u32) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("scripted server port");
    let port = listener.local_addr().expect("local address").port();
    let healthy = Arc::new(AtomicBool::new(true));
    let health = healthy.clone();
    std::thread::spawn(move || {
        let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().expect("runtime");
        rt.block_on(async move {
            let listener = monoio::net::TcpListener::from_std(listener).expect("listener");
            while let Ok((tcp, _)) = listener.accept().await {
                monoio::spawn(connection(tcp, script, max_model_len, health.clone()));
            }
        });
    });
    Server { port, healthy }
}

async fn connection(tcp: monoio::net::TcpStream, script: Script, max_model_len: u32, healthy: Arc<AtomicBool>) {
    let Ok(io) = tcp.try_into_poll_io() else { return };
    let Ok(mut conn) = h2::server::handshake(io).await else { return };
    while let Some(Ok((request, respond))) = conn.accept().await {
        let path = request.uri().path().to_string();
        let healthy = healthy.load(Ordering::Relaxed);
        monoio::spawn(answer(path, respond, script, max_model_len, healthy));
    }
}

fn message(m: &impl Message) -> Bytes {
    frame::encode(&m.encode_to_vec())
}

fn status(code: u32, message: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", code.into());
    if let Ok(v) = message.replace(' ', "%20").parse() {
        h.insert("grpc-message", v);
    }
    h
}

fn head() -> Response<()> {
    Response::builder().status(200).header("content-type", "application/grpc").body(()).expect("head")
}

fn chunk() -> Bytes {
    let c = pb::GenerateStreamChunk { token_ids: vec![TOKEN], ..Default::default() };
    message(&pb::GenerateResponse { response: Some(pb::Response::Chunk(c)) })
}

/// A unary answer: one message and status OK.
fn unary(mut respond: SendResponse<Bytes>, m: Bytes) {
    let Ok(mut body) = respond.send_response(head(), false) else { return };
    let _ = body.send_data(m, false);
    let _ = body.send_trailers(status(0, ""));
}

fn trailers_only(mut respond: SendResponse<Bytes>, code: u32, text: &str) {
    let mut h = head();
    h.headers_mut().extend(status(code, text));
    let _ = respond.send_response(h, true);
}

async fn answer(path: String, respond: SendResponse<Bytes>, script: Script, max_model_len: u32, healthy: bool) {
    let method = path.rsplit('/').next().unwrap_or_default();
    if !path.starts_with("/vllm.grpc.engine.VllmEngine/") {
        return trailers_only(respond, 12, "unknown service");
    }
    match method {
        "GetModelInfo" => {
            let m = pb::GetModelInfoResponse {
                model_path: "scripted".into(),
                is_generation: true,
                max_context_length: max_model_len,
                served_model_name: "scripted".into(),
                ..Default::default()
            };
            unary(respond, message(&m))
        }
        "GetServerInfo" => {
            let s = pb::GetServerInfoResponse {
                server_type: "scripted".into(),
                data_parallel_size: 1,
                max_num_seqs: 8,
                ..Default::default()
            };
            unary(respond, message(&s))
        }
        "HealthCheck" => {
            let message_text = if healthy { String::new() } else { "engine dead".to_string() };
            unary(respond, message(&pb::HealthCheckResponse { healthy, message: message_text }))
        }
        "GetLoads" => {
            let loads = pb::GetLoadsResponse {
                dp_rank_count: 1,
                loads: vec![pb::SchedulerLoad { max_running_requests: 8, ..Default::default() }],
                ..Default::default()
            };
            unary(respond, message(&loads))
        }
        "Abort" => unary(respond, message(&pb::Empty {})),
        "Generate" => generate(respond, script).await,
        _ => trailers_only(respond, 12, "unknown method"),
    }
}

async fn generate(mut respond: SendResponse<Bytes>, script: Script) {
    match script {
        Script::Unavailable => return trailers_only(respond, 14, "not admitted"),
        Script::InternalAtOnce => return trailers_only(respond, 13, ERROR_MESSAGE),
        _ => {}
    }
    let Ok(mut body) = respond.send_response(head(), false) else { return };
    match script {
        Script::Healthy { tokens } => {
            for _ in 0..tokens {
                let _ = body.send_data(chunk(), false);
                monoio::time::sleep(Duration::from_millis(2)).await;
            }
            let c = pb::GenerateComplete {
                output_ids: vec![TOKEN; tokens as usize],
                finish_reason: "length".into(),
                ..Default::default()
            };
            let _ = body.send_data(message(&pb::GenerateResponse { response: Some(pb::Response::Complete(c)) }), false);
            let _ = body.send_trailers(status(0, ""));
        }
        Script::InternalAfterFirst => {
            let _ = body.send_data(chunk(), false);
            monoio::time::sleep(Duration::from_millis(20)).await;
            let _ = body.send_trailers(status(13, ERROR_MESSAGE));
        }
        Script::ResetAfterFirst => {
            let _ = body.send_data(chunk(), false);
            monoio::time::sleep(Duration::from_millis(20)).await;
            body.send_reset(h2::Reason::INTERNAL_ERROR);
        }
        Script::Unavailable | Script::InternalAtOnce => {}
    }
    // The stream stays open until the client is done with it.
    monoio::time::sleep(Duration::from_secs(60)).await;
}
