//! The client against SMG's real servicer around a vLLM CPU engine (tiny-chat).
//!
//! Uses the servicer at `SHARDGATE_GRPC_SERVICER` (`host:port`) when set; otherwise, with
//! `SHARDGATE_REAL_VLLM=1`, starts one with `tools/grpc-workers/run-servicer.sh` (on
//! `SHARDGATE_GRPC_SERVICER_PORT`, else a free port); skips with a message otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{request, run, tokens, GREEDY};
use shardgate_grpc::smg::SmgClient;
use shardgate_grpc::status::Code;
use shardgate_grpc::{Fault, Service, WorkerClient};
use shardgate_wire::{FinishReason, StopReason};

#[test]
fn against_smg_servicer() {
    let Some((addr, _servicer)) =
        common::server("SHARDGATE_GRPC_SERVICER", "run-servicer.sh", &["SHARDGATE_GRPC_SERVICER_PORT"])
    else {
        return;
    };
    let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build().unwrap();
    rt.block_on(async move {
        let channel = common::ready(&addr, Service::Smg).await;
        assert_eq!(Service::detect(&channel).await.unwrap(), Service::Smg);
        let smg = SmgClient::new(channel.clone());
        let client = WorkerClient::new(Service::Smg, channel);

        let info = client.model_info().await.unwrap();
        assert_eq!((info.max_model_len, info.data_parallel_size, info.max_num_seqs), (1024, 1, 8));
        assert!(info.model_path.ends_with("tiny-chat"), "{info:?}");
        let loads = smg.loads().await.unwrap();
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
        while smg.loads().await.unwrap()[0].running > 0 {
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

        let (archive, digest) = smg.tokenizer().await.unwrap();
        assert!(archive.starts_with(b"PK") && digest.len() == 64, "{} bytes, digest {digest:?}", archive.len());
    });
}
