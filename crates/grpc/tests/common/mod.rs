//! What the real-server tests share: the prompt and the greedy answer every server gives for
//! it on tiny-chat, requests, and starting a server for the test.
#![allow(dead_code)] // each test binary uses its own part

use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use shardgate_grpc::{Channel, Fault, Service, WorkerClient};
use shardgate_wire::{EngineRequest, SamplingParams, TokenEvent};

/// The greedy answer the Python grpcio client got from SMG's servicer (tests/fixtures).
pub const GREEDY: [u32; 8] = [33361, 147640, 17735, 33361, 40134, 29018, 48962, 136996];
pub const PROMPT: [u32; 9] = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505];

pub fn request(id: &str, edit: impl FnOnce(&mut SamplingParams)) -> EngineRequest {
    let mut sampling = SamplingParams { temperature: 0.0, max_tokens: 8, ..SamplingParams::default() };
    edit(&mut sampling);
    EngineRequest {
        request_id: id.into(),
        prompt_token_ids: PROMPT.to_vec().into(),
        sampling,
        arrival_time: 0.0,
        cache_salt: None,
        priority: 0,
        mm_features: Default::default(),
    }
}

/// Every event of one generation, to its end.
pub async fn run(client: &WorkerClient, req: &EngineRequest) -> Result<Vec<TokenEvent>, Fault> {
    let mut stream = client.generate(req, None, 60_000).await?;
    let mut events = Vec::new();
    while let Some(e) = stream.next().await? {
        events.push(e);
    }
    Ok(events)
}

pub fn tokens(events: &[TokenEvent]) -> Vec<u32> {
    events.iter().flat_map(|e| e.token_ids.iter().copied()).collect()
}

/// Engine start-up on 2 busy cores takes minutes.
const START_WAIT_S: u64 = 300;

/// A connection to `addr` once the worker answers healthy.
pub async fn ready(addr: &str, service: Service) -> Rc<Channel> {
    let start = Instant::now();
    loop {
        if let Ok(c) = Channel::connect(addr, None).await {
            let c = Rc::new(c);
            if WorkerClient::new(service, c.clone()).health_check().await.is_ok() {
                return c;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(START_WAIT_S),
            "no {service:?} worker on {addr} after {START_WAIT_S} s"
        );
        monoio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A server process group started for the test, stopped (SIGTERM to the group) when dropped.
pub struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = Command::new("kill").args(["--", &format!("-{}", child.id())]).status();
            let _ = child.wait();
        }
    }
}

/// The server at `$addr_var` if set (not stopped by the test); else, with
/// `SHARDGATE_REAL_VLLM=1` and `tools/grpc-workers/setup.sh` done, `script` started in its own
/// process group with `ports` (each from `$port_var[i]` or a free one) and the address of the
/// first; `None` (skip, with the reason printed) otherwise.
pub fn server(addr_var: &str, script: &str, port_vars: &[&str]) -> Option<(String, Server)> {
    if let Ok(addr) = std::env::var(addr_var) {
        return Some((addr, Server(None)));
    }
    let home = std::env::var("REAL_VLLM_HOME")
        .unwrap_or_else(|_| format!("{}/.cache/real-vllm", std::env::var("HOME").unwrap_or_default()));
    let opted_in = std::env::var("SHARDGATE_REAL_VLLM").is_ok_and(|v| v == "1");
    if !opted_in || !std::path::Path::new(&format!("{home}/grpc-venv/bin/python")).exists() {
        eprintln!(
            "skipped: set {addr_var}, or SHARDGATE_REAL_VLLM=1 after tools/grpc-workers/setup.sh to start {script}"
        );
        return None;
    }
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ports: Vec<String> = port_vars
        .iter()
        .map(|v| std::env::var(v).ok().and_then(|p| p.parse().ok()).unwrap_or_else(free).to_string())
        .collect();
    let script = format!("{}/../../tools/grpc-workers/{script}", env!("CARGO_MANIFEST_DIR"));
    // setsid: the script and the engine it starts form one group, stopped together.
    let child =
        Command::new("setsid").arg(script).args(&ports).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    Some((format!("127.0.0.1:{}", ports[0]), Server(Some(child))))
}
