//! `shardgate bench sink`: an OpenAI-compatible streaming endpoint that answers every request
//! at once (one pinned runtime, a few microseconds per request), so that a load generator run
//! against it measures the load generator: its own TTFT floor, pacing and request rate. The
//! loopback tests use it, and perf/bench compares clients on it.
//!
//! Every POST gets `--output-len` output chunks of one token and the usage, in one write, in
//! the API its path names: chat chunks (`delta.content`, a finish chunk, usage, `[DONE]`) for
//! chat, Anthropic Messages events (`text_delta`s, `message_delta` with the usage,
//! `message_stop`) for messages, OpenAI Responses events (`response.output_text.delta`s,
//! `response.completed` with the usage) for responses, else completions chunks (`text`).
//! `GET /v1/models` lists one model, `sink`.

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
        completions: stream_response(Api::Completions, output_len),
        chat: stream_response(Api::Chat, output_len),
        messages: stream_response(Api::Messages, output_len),
        responses: stream_response(Api::Responses, output_len),
        models: json_response(r#"{"object":"list","data":[{"id":"sink","object":"model","owned_by":"sink"}]}"#),
    });
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        monoio::spawn(serve_connection(stream, responses.clone()));
    }
}

/// The APIs the sink speaks, told apart by the request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Completions,
    Chat,
    Messages,
    Responses,
}

impl Api {
    fn of_path(path: &str) -> Api {
        if path.contains("chat") {
            Api::Chat
        } else if path.contains("messages") {
            Api::Messages
        } else if path.contains("responses") {
            Api::Responses
        } else {
            Api::Completions
        }
    }
}

struct Responses {
    completions: Vec<u8>,
    chat: Vec<u8>,
    messages: Vec<u8>,
    responses: Vec<u8>,
    models: Vec<u8>,
}

impl Responses {
    /// The answer to a POST to `path`.
    fn to_post(&self, path: &str) -> &[u8] {
        match Api::of_path(path) {
            Api::Completions => &self.completions,
            Api::Chat => &self.chat,
            Api::Messages => &self.messages,
            Api::Responses => &self.responses,
        }
    }
}

fn json_response(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len())
        .into_bytes()
}

/// The whole streamed response: head, then every event in one chunk of the chunked body.
fn stream_response(api: Api, output_len: usize) -> Vec<u8> {
    let body = match api {
        Api::Completions => openai_events(false, output_len),
        Api::Chat => openai_events(true, output_len),
        Api::Messages => messages_events(output_len),
        Api::Responses => responses_events(output_len),
    };
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    format!("{head}{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).into_bytes()
}

/// Chat or completions chunks: one per token, a finish chunk, usage, `[DONE]`.
fn openai_events(chat: bool, output_len: usize) -> String {
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
    body
}

/// One event as Anthropic and OpenAI Responses frame them: its type on the `event:` line too.
fn typed_event(kind: &str, fields: &str) -> String {
    let sep = if fields.is_empty() { "" } else { "," };
    format!("event: {kind}\ndata: {{\"type\":\"{kind}\"{sep}{fields}}}\n\n")
}

/// Anthropic Messages events: one text block of one `text_delta` per token.
fn messages_events(output_len: usize) -> String {
    let mut body = typed_event(
        "message_start",
        r#""message":{"id":"msg_sink","type":"message","role":"assistant","model":"sink","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}"#,
    );
    body.push_str(&typed_event("content_block_start", r#""index":0,"content_block":{"type":"text","text":""}"#));
    for i in 0..output_len {
        let delta = format!(r#""index":0,"delta":{{"type":"text_delta","text":" w{i}"}}"#);
        body.push_str(&typed_event("content_block_delta", &delta));
    }
    body.push_str(&typed_event("content_block_stop", r#""index":0"#));
    let usage = format!(
        r#""delta":{{"stop_reason":"max_tokens","stop_sequence":null}},"usage":{{"output_tokens":{output_len}}}"#
    );
    body.push_str(&typed_event("message_delta", &usage));
    body.push_str(&typed_event("message_stop", ""));
    body
}

/// OpenAI Responses events: one message item of one `response.output_text.delta` per token.
fn responses_events(output_len: usize) -> String {
    let text: String = (0..output_len).map(|i| format!(" w{i}")).collect();
    let mut sequence = 0..;
    let mut event = |kind: &str, data: &str| {
        let n = sequence.next().unwrap_or(0);
        typed_event(kind, &format!(r#""sequence_number":{n},{data}"#))
    };
    let part = |text: &str| format!(r#""part":{{"type":"output_text","text":"{text}","annotations":[]}}"#);
    let item = |status: &str, content: &str| {
        format!(
            r#""item":{{"type":"message","id":"msg_sink","status":"{status}","role":"assistant","content":[{content}]}}"#
        )
    };
    let response = |status: &str, output: &str, usage: &str| {
        format!(
            r#""response":{{"id":"resp_sink","object":"response","status":"{status}","model":"sink","output":[{output}],"usage":{usage}}}"#
        )
    };
    let at = r#""item_id":"msg_sink","output_index":0,"content_index":0"#;
    let done_content = format!(r#"{{"type":"output_text","text":"{text}","annotations":[]}}"#);
    let mut body = event("response.created", &response("in_progress", "", "null"));
    body.push_str(&event("response.output_item.added", &format!(r#""output_index":0,{}"#, item("in_progress", ""))));
    body.push_str(&event("response.content_part.added", &format!("{at},{}", part(""))));
    for i in 0..output_len {
        body.push_str(&event("response.output_text.delta", &format!(r#"{at},"delta":" w{i}","logprobs":[]"#)));
    }
    body.push_str(&event("response.output_text.done", &format!(r#"{at},"text":"{text}","logprobs":[]"#)));
    body.push_str(&event("response.content_part.done", &format!("{at},{}", part(&text))));
    let done_item = item("completed", &done_content);
    body.push_str(&event("response.output_item.done", &format!(r#""output_index":0,{done_item}"#)));
    let usage = format!(r#"{{"input_tokens":1,"output_tokens":{output_len},"total_tokens":{}}}"#, output_len + 1);
    let output = format!(
        r#"{{"type":"message","id":"msg_sink","status":"completed","role":"assistant","content":[{done_content}]}}"#
    );
    body.push_str(&event("response.completed", &response("completed", &output, &usage)));
    body
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
        (_, path) => responses.to_post(path.unwrap_or("")),
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
        let apis = [
            (Api::Completions, Dialect::OpenAi),
            (Api::Chat, Dialect::OpenAi),
            (Api::Messages, Dialect::AnthropicMessages),
            (Api::Responses, Dialect::OpenAiResponses),
        ];
        for (api, dialect) in apis {
            let mut reader = ResponseReader::new(dialect);
            let mut rec = RequestRecord::default();
            reader.input = stream_response(api, 3);
            let progress = reader.on_bytes(1, &mut rec);
            assert!(matches!(progress, Ok(Progress::Complete { reusable: true })), "{api:?}: {rec:?}");
            assert_eq!((rec.chunks.len(), rec.text.as_str()), (3, " w0 w1 w2"), "{api:?}");
            assert_eq!((rec.usage_prompt_tokens, rec.usage_completion_tokens), (Some(1), Some(3)), "{api:?}");
        }
        assert_eq!(apply_event(Dialect::OpenAi, b"[DONE]", 0, &mut RequestRecord::default()), Ok(true));
    }

    #[test]
    fn requests_are_framed_by_content_length_and_routed_by_path() {
        let r = Responses {
            completions: b"c".to_vec(),
            chat: b"h".to_vec(),
            messages: b"a".to_vec(),
            responses: b"r".to_vec(),
            models: b"m".to_vec(),
        };
        let post = b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(complete_request(post, &r), Some((post.len(), &b"h"[..])));
        assert_eq!(complete_request(&post[..post.len() - 1], &r), None);
        assert_eq!(complete_request(b"GET /v1/models HTTP/1.1\r\n\r\n", &r).map(|x| x.1), Some(&b"m"[..]));
        let routes: [(&str, &[u8]); 4] =
            [("/v1/completions", b"c"), ("/v1/messages", b"a"), ("/v1/responses", b"r"), ("/x/chat", b"h")];
        for (path, want) in routes {
            let request = format!("POST {path} HTTP/1.1\r\n\r\n");
            assert_eq!(complete_request(request.as_bytes(), &r).map(|x| x.1), Some(want), "{path}");
        }
    }
}
