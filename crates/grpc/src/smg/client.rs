//! The calls of SMG's VllmEngine service on one channel.

use std::rc::Rc;

use shardgate_wire::{EngineRequest, TokenEvent};

use super::messages as pb;
use super::request::generate_request;
use super::response::GenerateReader;
use crate::channel::{Call, Channel};
use crate::fault::Fault;
use crate::info::{ModelInfo, RankLoad};
use crate::limits;
use crate::response_error::ResponseError;

const SERVICE: &str = "/vllm.grpc.engine.VllmEngine/";

fn path(method: &str) -> String {
    format!("{SERVICE}{method}")
}

#[derive(Clone)]
pub struct SmgClient {
    channel: Rc<Channel>,
}

impl SmgClient {
    pub fn new(channel: Rc<Channel>) -> SmgClient {
        SmgClient { channel }
    }

    pub fn channel(&self) -> &Rc<Channel> {
        &self.channel
    }

    async fn unary<M: prost::Message + Default>(
        &self,
        method: &str,
        message: &impl prost::Message,
    ) -> Result<M, Fault> {
        self.channel.call(&path(method), message, limits::unary_deadline_ms).await?.single().await
    }

    /// Starts one sample's generation; its events come from the stream.
    pub async fn generate(
        &self,
        req: &EngineRequest,
        dp_rank: Option<u32>,
        deadline_ms: u64,
    ) -> Result<GenerateStream, Fault> {
        let message = generate_request(req, dp_rank)?;
        let call = self.channel.call(&path("Generate"), &message, deadline_ms).await?;
        Ok(GenerateStream { call, reader: GenerateReader::default() })
    }

    /// Stops requests the engine may still be running (the stream's own reset already cancels
    /// a call; this reaches requests whose stream is gone).
    pub async fn abort(&self, request_ids: Vec<String>) -> Result<(), Fault> {
        self.unary::<pb::Empty>("Abort", &pb::AbortRequest { request_ids }).await.map(|_| ())
    }

    /// The servicer's health: `Err` when unreachable, `Ok(Err(message))` when it answers
    /// that its engine is dead.
    pub async fn health_check(&self) -> Result<Result<(), String>, Fault> {
        let h: pb::HealthCheckResponse = self.unary("HealthCheck", &pb::Empty {}).await?;
        Ok(if h.healthy { Ok(()) } else { Err(h.message) })
    }

    pub async fn model_info(&self) -> Result<ModelInfo, Fault> {
        let m: pb::GetModelInfoResponse = self.unary("GetModelInfo", &pb::Empty {}).await?;
        let s: pb::GetServerInfoResponse = self.unary("GetServerInfo", &pb::Empty {}).await?;
        let count = |n: i32, what: &str| u32::try_from(n).map_err(|_| Fault::Decode(format!("negative {what} {n}")));
        Ok(ModelInfo {
            served_model_name: m.served_model_name,
            model_path: m.model_path,
            max_model_len: m.max_context_length,
            server: s.server_type,
            // 0 from a servicer that predates the field: one rank.
            data_parallel_size: count(s.data_parallel_size, "data_parallel_size")?.max(1),
            max_num_seqs: count(s.max_num_seqs, "max_num_seqs")?,
        })
    }

    pub async fn loads(&self) -> Result<Vec<RankLoad>, Fault> {
        let request = pb::GetLoadsRequest { dp_rank: None, include: vec!["core".into()] };
        let l: pb::GetLoadsResponse = self.unary("GetLoads", &request).await?;
        let count = |n: i32| u32::try_from(n).map_err(|_| Fault::Decode(format!("negative load figure {n}")));
        l.loads
            .iter()
            .map(|r| {
                Ok(RankLoad {
                    rank: count(r.dp_rank)?,
                    running: count(r.num_running_reqs)?,
                    waiting: count(r.num_waiting_reqs)?,
                    kv_usage: r.token_usage,
                })
            })
            .collect()
    }

    /// The worker's tokenizer files as one ZIP archive, and the SHA-256 hex digest the worker
    /// gives for it (for a worker whose tokenizer the gateway has no local copy of).
    pub async fn tokenizer(&self) -> Result<(Vec<u8>, String), Fault> {
        let mut call = self.channel.call(&path("GetTokenizer"), &pb::Empty {}, limits::unary_deadline_ms).await?;
        let (mut archive, mut digest) = (Vec::new(), String::new());
        while let Some(chunk) = call.message::<pb::GetTokenizerChunk>().await? {
            archive.extend_from_slice(&chunk.data);
            if !chunk.sha256.is_empty() {
                digest = chunk.sha256;
            }
        }
        Ok((archive, digest))
    }
}

/// One Generate call's events. Dropping it before the end cancels the call (RST_STREAM).
pub struct GenerateStream {
    call: Call,
    reader: GenerateReader,
}

impl GenerateStream {
    /// The next event; `None` after the finishing event, once the call ended with OK.
    pub async fn next(&mut self) -> Result<Option<TokenEvent>, Fault> {
        let finished = self.reader.finished();
        match self.call.message::<pb::GenerateResponse>().await? {
            Some(m) => Ok(Some(self.reader.event(m)?)),
            None if finished => Ok(None),
            None => Err(ResponseError::NoComplete.into()),
        }
    }
}
