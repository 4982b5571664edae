//! The client against vLLM's own gRPC services: `vllm-rs serve --grpc-port` attached to a
//! headless vLLM CPU engine on tiny-chat (`tools/grpc-workers/run-vllm-rs.sh`), at
//! `SHARDGATE_GRPC_VLLM_RS` (`host:port`); skipped with a message when that is unset.

use std::rc::Rc;
use std::time::{Duration, Instant};

use shardgate_grpc::status::Code;
use shardgate_grpc::{Channel, Fault, Service, WorkerClient};
use shardgate_wire::{EngineRequest, FinishReason, SamplingParams, StopReason, TokenEvent};

/// The greedy answer the Python grpcio client got from SMG's servicer on the same model.
const GREEDY: [u32; 8] = [33361, 147640, 17735, 33361, 40134, 29018, 48962, 136996];
const PROMPT: [u32; 9] = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505];

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

async fn run(client: &WorkerClient, req: &EngineRequest) -> Result<Vec<TokenEvent>, Fault> {
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

#[test]
fn against_vllm_rs() {
    let Ok(addr) = std::env::var("SHARDGATE_GRPC_VLLM_RS") else {
        eprintln!("skipped: SHARDGATE_GRPC_VLLM_RS is unset (tools/grpc-workers/run-vllm-rs.sh starts one)");
        return;
    };
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    rt.block_on(async move {
        let channel = Rc::new(Channel::connect(&addr).await.unwrap());
        assert_eq!(Service::detect(&channel).await.unwrap(), Service::Vllm);
        let client = WorkerClient::new(Service::Vllm, channel);
        client.health_check().await.unwrap();
        let info = client.model_info().await.unwrap();
        assert_eq!((info.max_model_len, info.data_parallel_size, info.max_num_seqs), (1024, 1, 8));
        assert!(info.server.starts_with("vllm "), "{info:?}");
        assert_eq!(client.loads().await.unwrap(), None);

        let greedy = run(&client, &request("vr-greedy", |_| {})).await.unwrap();
        assert_eq!(tokens(&greedy), GREEDY);
        assert_eq!(greedy.last().unwrap().finish, Some(FinishReason::Length));
        let stop = run(&client, &request("vr-stop", |s| s.stop_token_ids = vec![GREEDY[2]])).await.unwrap();
        assert_eq!(tokens(&stop), GREEDY[..3]);
        assert_eq!(stop.last().unwrap().stop_reason, Some(StopReason::TokenId(GREEDY[2])));
        // What SMG's service cannot carry, vLLM's does: allowed_token_ids forces the answer.
        let allowed =
            run(&client, &request("vr-allowed", |s| (s.allowed_token_ids, s.max_tokens) = (Some(vec![GREEDY[4]]), 3)))
                .await
                .unwrap();
        assert_eq!(tokens(&allowed), [GREEDY[4]; 3]);

        let calls: Vec<_> = (0..8)
            .map(|i| {
                let client = client.clone();
                monoio::spawn(async move {
                    run(&client, &request(&format!("vr-many-{i}"), |_| {})).await.map(|e| tokens(&e))
                })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap(), GREEDY);
        }

        let refused = run(&client, &request("vr-bad", |s| s.top_p = 2.0)).await.unwrap_err();
        assert!(matches!(&refused, Fault::Status(s) if s.code == Code::InvalidArgument), "{refused}");
        assert!(!refused.worker_fault());

        // Cancelled mid-stream, then a request after it still answers at once.
        let long = request("vr-cancel", |s| (s.max_tokens, s.ignore_eos) = (900, true));
        let mut stream = client.generate(&long, None, 60_000).await.unwrap();
        assert!(!stream.next().await.unwrap().unwrap().token_ids.is_empty());
        drop(stream);
        client.abort(vec!["vr-cancel".into()]).await.unwrap();
        let start = Instant::now();
        assert_eq!(tokens(&run(&client, &request("vr-after", |_| {})).await.unwrap()), GREEDY);
        assert!(start.elapsed() < Duration::from_secs(30));
    });
}
