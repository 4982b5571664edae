//! `shardgate bench sink`: an OpenAI-compatible streaming endpoint that answers every request
//! at once (one pinned runtime, a few microseconds per request), so that a load generator run
//! against it measures the load generator: its own TTFT floor, pacing and request rate. The
//! loopback tests use it, and perf/bench compares clients on it.
//!
//! Every POST gets `--output-len` output chunks of one token, a finish chunk, usage and
//! `[DONE]`, in one write: chat chunks (`delta.content`) when the path names chat, else
//! completions chunks (`text`). `GET /v1/models` lists one model, `sink`.

use std::net::SocketAddr;
use std::rc::Rc;

use clap::Args;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};

use super::error::SinkError;

#[derive(Args, Debug, Clone)]
pub struct SinkArgs {
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Output tokens (one per chunk) in every response.
    #[arg(long = "output-len", default_value_t = 32)]
    pub output_len: usize,
    /// CPU to pin the sink's thread to.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// Serves until the process ends.
pub fn run(args: &SinkArgs) -> Result<(), SinkError> {
    let (addr, thread) = start(&format!("{}:{}", args.host, args.port), args.output_len, args.cpu)?;
    eprintln!("shardgate bench sink: http://{addr} ({} tokens per response)", args.output_len);
    thread.join().map_err(|_| SinkError::ThreadPanicked)
}

/// Binds `listen` and serves on a new thread; returns the bound address.
pub fn start(
    listen: &str,
    output_len: usize,
    cpu: Option<usize>,
) -> Result<(SocketAddr, std::thread::JoinHandle<()>), SinkError> {
    let listener = std::net::TcpListener::bind(listen)
        .map_err(|source| SinkError::Listen { listen: listen.to_string(), source })?;
    let addr = listener.local_addr().map_err(SinkError::LocalAddr)?;
    listener.set_nonblocking(true).map_err(SinkError::Nonblocking)?;
    let thread = std::thread::Builder::new()
        .name("bench-sink".into())
        .spawn(move || {
            if let Some(cpu) = cpu {
                super::runner::pin_to_cpu(cpu);
            }
            let Ok(mut rt) = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build() else {
                eprintln!("error: the sink cannot start its runtime");
                return;
            };
            rt.block_on(async move {
                // Registration needs the runtime's driver, so it happens inside.
                match monoio::net::TcpListener::from_std(listener) {
                    Ok(listener) => serve(listener, output_len).await,
                    Err(e) => eprintln!("error: the sink cannot watch its listener: {e}"),
                }
            });
        })
        .map_err(SinkError::SpawnThread)?;
    Ok((addr, thread))
}

async fn serve(listener: monoio::net::TcpListener, output_len: usize) {
    let responses = Rc::new(Responses {
        completions: stream_response(false, output_len),
        chat: stream_response(true, output_len),
        models: json_response(r#"{"object":"list","data":[{"id":"sink","object":"model","owned_by":"sink"}]}"#),
    });
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        monoio::spawn(serve_connection(stream, responses.clone()));
    }
}

struct Responses {
    completions: Vec<u8>,
    chat: Vec<u8>,
    models: Vec<u8>,
}

fn json_response(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

/// The whole streamed response: head, then every event in one chunk of the chunked body.
fn stream_response(chat: bool, output_len: usize) -> Vec<u8> {
    let object = if chat { "chat.completion.chunk" } else { "text_completion" };
    let choice = |text: &str, finish: &str| {
        if chat {
            format!(r#"{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{finish}}}"#)
        } else {
            format!(r#"{{"index":0,"text":"{text}","finish_reason":{finish}}}"#)
        }
    };
    let event = |choices: String, usage: &str| {
        format!(
            "data: {{\"id\":\"sink\",\"object\":\"{object}\",\"created\":0,\"model\":\"sink\",\"choices\":[{choices}],\"usage\":{usage}}}\n\n"
        )
    };
    let mut body = String::new();
    for i in 0..output_len {
        body.push_str(&event(choice(&format!(" w{i}"), "null"), "null"));
    }
    body.push_str(&event(choice("", "\"length\""), "null"));
    let usage = format!(r#"{{"prompt_tokens":1,"completion_tokens":{output_len},"total_tokens":{}}}"#, output_len + 1);
    body.push_str(&event(String::new(), &usage));
    body.push_str("data: [DONE]\n\n");
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    format!("{head}{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).into_bytes()
}

async fn serve_connection(mut stream: monoio::net::TcpStream, responses: Rc<Responses>) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    loop {
        // One request: a head, then content-length bytes of body.
        let (request_len, response) = loop {
            if let Some(found) = complete_request(&buf, &responses) {
                break found;
            }
            let len = buf.len();
            buf.reserve(16 * 1024);
            let (read, slice) = stream.read(monoio::buf::IoBufMut::slice_mut(buf, len..)).await;
            buf = slice.into_inner();
            if !matches!(read, Ok(n) if n > 0) {
                return;
            }
        };
        buf.drain(..request_len);
        let (written, _) = stream.write_all(response.to_vec()).await;
        if written.is_err() {
            return;
        }
    }
}

/// (bytes of the first complete request in `buf`, the response to it).
fn complete_request<'a>(buf: &[u8], responses: &'a Responses) -> Option<(usize, &'a [u8])> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = request.parse(buf).ok()? else { return None };
    let body_len = request
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0);
    if buf.len() < head_len + body_len {
        return None;
    }
    let response = match (request.method, request.path) {
        (Some("GET"), _) => &responses.models,
        (_, Some(path)) if path.contains("chat") => &responses.chat,
        _ => &responses.completions,
    };
    Some((head_len + body_len, response))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{apply_event, Dialect};
    use crate::http::{Progress, ResponseReader};
    use crate::record::RequestRecord;

    #[test]
    fn responses_parse_as_streams_of_output_chunks() {
        for chat in [false, true] {
            let mut reader = ResponseReader::new(Dialect::OpenAi);
            let mut rec = RequestRecord::default();
            reader.input = stream_response(chat, 3);
            assert!(matches!(reader.on_bytes(1, &mut rec), Ok(Progress::Complete { reusable: true })));
            assert_eq!((rec.chunks.len(), rec.text.as_str(), rec.usage_completion_tokens), (3, " w0 w1 w2", Some(3)));
        }
        assert_eq!(apply_event(Dialect::OpenAi, b"[DONE]", 0, &mut RequestRecord::default()), Ok(true));
    }

    #[test]
    fn requests_are_framed_by_content_length() {
        let r = Responses { completions: b"c".to_vec(), chat: b"h".to_vec(), models: b"m".to_vec() };
        let post = b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(complete_request(post, &r), Some((post.len(), &b"h"[..])));
        assert_eq!(complete_request(&post[..post.len() - 1], &r), None);
        assert_eq!(complete_request(b"GET /v1/models HTTP/1.1\r\n\r\n", &r).map(|x| x.1), Some(&b"m"[..]));
        let completions = b"POST /v1/completions HTTP/1.1\r\n\r\n";
        assert_eq!(complete_request(completions, &r).map(|x| x.1), Some(&b"c"[..]));
    }
}
