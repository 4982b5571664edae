//! gRPC workers: `grpc://HOST:PORT` URLs (engines on other hosts behind SMG's servicer or
//! vLLM's own gRPC front end) and their supervisor on the control shard.

pub mod supervisor;

use super::refusal::WorkerRefusal;
use crate::config::{Backend, WorkerConfig};

pub const URL_SCHEME: &str = "grpc://";

/// The configuration of a `grpc://` worker. The service and the engine's size are the
/// server's to say; the supervisor asks when it connects.
pub fn worker_config(url: &str, backend: Backend) -> Result<WorkerConfig, WorkerRefusal> {
    let refused = || WorkerRefusal::GrpcAddress { url: url.to_string() };
    let addr = url.strip_prefix(URL_SCHEME).ok_or_else(refused)?.trim_end_matches('/');
    let (host, port) = addr.rsplit_once(':').ok_or_else(refused)?;
    if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(refused());
    }
    if backend != Backend::Vllm {
        return Err(WorkerRefusal::GrpcRuntime { url: url.to_string(), runtime: backend.as_str().to_string() });
    }
    Ok(WorkerConfig {
        url: format!("{URL_SCHEME}{addr}"),
        path: String::new(),
        backend,
        engine_count: 1,
        handshake_address: None,
        engine: None,
        grpc_addr: Some(addr.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_urls() {
        let cases: Vec<(&str, Backend, Result<&str, &str>)> = vec![
            ("grpc://127.0.0.1:18051", Backend::Vllm, Ok("127.0.0.1:18051")),
            ("grpc://worker:50051/", Backend::Vllm, Ok("worker:50051")),
            ("grpc://[::1]:50051", Backend::Vllm, Ok("[::1]:50051")),
            ("grpc://worker", Backend::Vllm, Err("gRPC worker URL must be grpc://<host>:<port>, not grpc://worker")),
            ("grpc://:50051", Backend::Vllm, Err("gRPC worker URL must be grpc://<host>:<port>, not grpc://:50051")),
            ("grpc://h:0", Backend::Vllm, Err("gRPC worker URL must be grpc://<host>:<port>, not grpc://h:0")),
            ("grpc://h:x/y", Backend::Vllm, Err("gRPC worker URL must be grpc://<host>:<port>, not grpc://h:x/y")),
            (
                "grpc://h:1",
                Backend::Tokenspeed,
                Err("gRPC worker grpc://h:1 has unsupported runtime tokenspeed: only vllm is supported over gRPC"),
            ),
        ];
        for (url, backend, want) in cases {
            let got = worker_config(url, backend).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(c), Ok(addr)) => {
                    assert_eq!(c.grpc_addr.as_deref(), Some(addr), "{url}");
                    assert_eq!(c.connection_mode(), "grpc");
                }
                (Err(e), Err(text)) => assert_eq!(e, text, "{url}"),
                (got, want) => panic!("{url}: {got:?}, wanted {want:?}"),
            }
        }
    }
}
