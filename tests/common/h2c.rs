//! An HTTP/2 client for the tests: the `h2` crate's client on a monoio runtime (the same
//! library real HTTP/2 stacks use), over cleartext with prior knowledge.

use std::future::Future;

use bytes::Bytes;
use h2::client::{Builder, SendRequest};

use super::Response;

/// Runs `f` on a fresh single-threaded runtime (epoll, so it runs wherever the tests do).
pub fn block_on<F: Future>(f: F) -> F::Output {
    monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap().block_on(f)
}

/// Connects and completes the handshake; the connection is driven by a task on the runtime.
pub async fn connect(port: u16) -> SendRequest<Bytes> {
    connect_with(port, Builder::new()).await
}

pub async fn connect_with(port: u16, builder: Builder) -> SendRequest<Bytes> {
    let tcp = monoio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let io = tcp.try_into_poll_io().map_err(|(e, _)| e).unwrap();
    let (send, conn) = builder.handshake::<_, Bytes>(io).await.unwrap();
    monoio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// A request as the tests write it: headers are lowercase, the body is JSON.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> http::Request<()> {
    let mut b = http::Request::builder().method(method).uri(format!("http://localhost{path}"));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    if let Some(body) = body {
        b = b.header("content-type", "application/json").header("content-length", body.len());
    }
    b.body(()).unwrap()
}

/// Sends a request and reads its whole response.
pub async fn send(
    send: &SendRequest<Bytes>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let (response, mut out) =
        send.clone().ready().await.unwrap().send_request(request(method, path, headers, body), body.is_none()).unwrap();
    if let Some(body) = body {
        out.send_data(Bytes::copy_from_slice(body.as_bytes()), true).unwrap();
    }
    let (head, mut recv) = response.await.unwrap().into_parts();
    let mut bytes = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.unwrap();
        let _ = recv.flow_control().release_capacity(data.len());
        bytes.extend_from_slice(&data);
    }
    let headers = head.headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
    Response { status: head.status.as_u16(), headers, raw_body: bytes.clone(), body: bytes }
}

/// One request on its own connection.
pub fn request_once(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Response {
    block_on(async {
        let s = connect(port).await;
        send(&s, method, path, headers, body).await
    })
}
