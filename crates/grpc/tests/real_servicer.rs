//! The client against SMG's real servicer around a vLLM CPU engine (tiny-chat).
//!
//! Uses the servicer at `SHARDGATE_GRPC_SERVICER` (`host:port`) when set; otherwise starts one
//! with `tools/grpc-workers/run-servicer.sh` when `tools/grpc-workers/setup.sh` has installed
//! it (on `SHARDGATE_GRPC_SERVICER_PORT`, else a free port), and skips with a message when it
//! has not.

use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use shardgate_grpc::smg::SmgClient;
use shardgate_grpc::status::Code;
use shardgate_grpc::{Channel, Fault, Service};
use shardgate_wire::{EngineRequest, FinishReason, SamplingParams, StopReason, TokenEvent};

/// The greedy answer the Python grpcio client got for this prompt (tests/fixtures).
const GREEDY: [u32; 8] = [33361, 147640, 17735, 33361, 40134, 29018, 48962, 136996];
const PROMPT: [u32; 9] = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505];
const START_WAIT_S: u64 = 300;

struct Servicer(Option<Child>);

impl Drop for Servicer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // SIGTERM lets the servicer stop its engine process too.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let _ = child.wait();
        }
    }
}

fn servicer() -> Option<(String, Servicer)> {
    if let Ok(addr) = std::env::var("SHARDGATE_GRPC_SERVICER") {
        return Some((addr, Servicer(None)));
    }
    let home = std::env::var("REAL_VLLM_HOME")
        .unwrap_or_else(|_| format!("{}/.cache/real-vllm", std::env::var("HOME").unwrap_or_default()));
    if !std::path::Path::new(&format!("{home}/grpc-venv/bin/python")).exists() {
        eprintln!("skipped: SMG's servicer is not installed (tools/grpc-workers/setup.sh) and SHARDGATE_GRPC_SERVICER is unset");
        return None;
    }
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let port = std::env::var("SHARDGATE_GRPC_SERVICER_PORT").ok().and_then(|p| p.parse().ok()).unwrap_or_else(free);
    let script = format!("{}/../../tools/grpc-workers/run-servicer.sh", env!("CARGO_MANIFEST_DIR"));
    let child = Command::new(script).arg(port.to_string()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    Some((format!("127.0.0.1:{port}"), Servicer(Some(child))))
}

fn request(id: &str, edit: impl FnOnce(&mut SamplingParams)) -> EngineRequest {
    let mut sampling = SamplingParams { temperature: 0.0, max_tokens: 8, ..SamplingParams::default() };
    edit(&mut sampling);
    EngineRequest {
        request_id: id.into(),
        prompt_token_ids: PROMPT.to_vec().into(),
        sampling,
        arrival_time: 0.0,
        cache_salt: None,
        priority: 0,
    }
}

async fn run(client: &SmgClient, req: &EngineRequest) -> Result<Vec<TokenEvent>, Fault> {
    let mut stream = client.generate(req, None, 60_000).await?;
    let mut events = Vec::new();
    while let Some(e) = stream.next().await? {
        events.push(e);
    }
    Ok(events)
}

fn tokens(events: &[TokenEvent]) -> Vec<u32> {
    events.iter().flat_map(|e| e.token_ids.iter().copied()).collect()
}

async fn ready(addr: &str) -> SmgClient {
    let start = Instant::now();
    loop {
        if let Ok(c) = Channel::connect(addr).await {
            let client = SmgClient::new(Rc::new(c));
            if let Ok(Ok(())) = client.health_check().await {
                return client;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(START_WAIT_S), "no servicer on {addr} after {START_WAIT_S} s");
        monoio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[test]
fn against_smg_servicer() {
    let Some((addr, _servicer)) = servicer() else { return };
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    rt.block_on(async move {
        let client = ready(&addr).await;

        let info = client.model_info().await.unwrap();
        assert_eq!((info.max_model_len, info.data_parallel_size, info.max_num_seqs), (1024, 1, 8));
        assert!(info.model_path.ends_with("tiny-chat"), "{info:?}");
        let channel = Rc::new(Channel::connect(&addr).await.unwrap());
        assert_eq!(Service::detect(&channel).await.unwrap(), Service::Smg);
        let loads = client.loads().await.unwrap();
        assert_eq!(loads.iter().map(|l| l.rank).collect::<Vec<_>>(), [0]);

        // The Python grpcio client's greedy answer, token for token.
        let greedy = run(&client, &request("sg-greedy", |_| {})).await.unwrap();
        assert_eq!(tokens(&greedy), GREEDY);
        assert_eq!(greedy.last().unwrap().finish, Some(FinishReason::Length));

        let stop = run(&client, &request("sg-stop", |s| s.stop_token_ids = vec![GREEDY[2]])).await.unwrap();
        assert_eq!(tokens(&stop), GREEDY[..3]);
        let last = stop.last().unwrap();
        assert_eq!((last.finish, &last.stop_reason), (Some(FinishReason::Stop), &Some(StopReason::TokenId(GREEDY[2]))));

        // Eight streams at once on the one connection.
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let client = client.clone();
                monoio::spawn(async move {
                    run(&client, &request(&format!("sg-many-{i}"), |_| {})).await.map(|e| tokens(&e))
                })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap(), GREEDY);
        }

        // A request the engine refuses: a status, the worker not to blame.
        let refused = run(&client, &request("sg-bad", |s| s.top_p = 2.0)).await.unwrap_err();
        assert!(matches!(&refused, Fault::Status(s) if s.code == Code::InvalidArgument), "{refused}");
        assert!(!refused.worker_fault() && !refused.retry_safe());

        // Cancelled mid-stream: the reset and Abort leave nothing running.
        let long = request("sg-cancel", |s| (s.max_tokens, s.ignore_eos) = (900, true));
        let mut stream = client.generate(&long, None, 60_000).await.unwrap();
        assert!(!stream.next().await.unwrap().unwrap().token_ids.is_empty());
        drop(stream);
        client.abort(vec!["sg-cancel".into()]).await.unwrap();
        let start = Instant::now();
        while client.loads().await.unwrap()[0].running > 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "the cancelled request still runs");
            monoio::time::sleep(Duration::from_millis(100)).await;
        }

        // A deadline shorter than the answer.
        let mut stream = client.generate(&long, None, 300).await.unwrap();
        let late = loop {
            match stream.next().await {
                Ok(Some(_)) => {}
                other => break other.unwrap_err(),
            }
        };
        let deadline = matches!(&late, Fault::Deadline { .. })
            || matches!(&late, Fault::Status(s) if s.code == Code::DeadlineExceeded);
        assert!(deadline, "{late}");

        let (archive, digest) = client.tokenizer().await.unwrap();
        assert!(archive.starts_with(b"PK") && digest.len() == 64, "{} bytes, digest {digest:?}", archive.len());
    });
}
