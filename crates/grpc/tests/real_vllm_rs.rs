//! The client against vLLM's own gRPC services: `vllm-rs serve --grpc-port` attached to a
//! headless vLLM CPU engine on tiny-chat, at `SHARDGATE_GRPC_VLLM_RS` (`host:port`) when set;
//! otherwise, with `SHARDGATE_REAL_VLLM=1`, started with `tools/grpc-workers/run-vllm-rs.sh`
//! (ports from `SHARDGATE_GRPC_VLLM_RS_PORT`, `_HTTP_PORT`, `_HANDSHAKE_PORT`, else free ones);
//! skipped with a message otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{request, run, tokens, GREEDY};
use shardgate_grpc::status::Code;
use shardgate_grpc::{Fault, Service, WorkerClient};
use shardgate_wire::{FinishReason, StopReason};

#[test]
fn against_vllm_rs() {
    let ports =
        ["SHARDGATE_GRPC_VLLM_RS_PORT", "SHARDGATE_GRPC_VLLM_RS_HTTP_PORT", "SHARDGATE_GRPC_VLLM_RS_HANDSHAKE_PORT"];
    let Some((addr, _server)) = common::server("SHARDGATE_GRPC_VLLM_RS", "run-vllm-rs.sh", &ports) else { return };
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    rt.block_on(async move {
        let channel = common::ready(&addr, Service::Vllm).await;
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
