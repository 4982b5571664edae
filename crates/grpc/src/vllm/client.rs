//! The calls of vLLM's `Inference` and `Control` services on one channel.

use std::rc::Rc;

use shardgate_wire::{EngineRequest, TokenEvent};

use super::messages as pb;
use super::request::generate_request;
use super::response::GenerateReader;
use crate::channel::{Call, Channel};
use crate::fault::Fault;
use crate::info::ModelInfo;
use crate::limits;
use crate::response_error::ResponseError;

pub const GENERATE_STREAM: &str = "/vllm.Inference/GenerateStream";
pub const GET_SERVER_INFO: &str = "/vllm.Control/GetServerInfo";
const GET_MODEL_INFO: &str = "/vllm.Control/GetModelInfo";
const ABORT: &str = "/vllm.Control/Abort";

#[derive(Clone)]
pub struct VllmClient {
    channel: Rc<Channel>,
}

impl VllmClient {
    pub fn channel(&self) -> &Rc<Channel> {
        &self.channel
    }

    pub fn new(channel: Rc<Channel>) -> VllmClient {
        VllmClient { channel }
    }

    async fn unary<M: prost::Message + Default>(&self, path: &str, message: &impl prost::Message) -> Result<M, Fault> {
        self.channel.call(path, message, limits::unary_deadline_ms).await?.single().await
    }

    /// Starts one sample's generation; its events come from the stream.
    pub async fn generate(&self, req: &EngineRequest, deadline_ms: u64) -> Result<GenerateStream, Fault> {
        let call = self.channel.call(GENERATE_STREAM, &generate_request(req), deadline_ms).await?;
        Ok(GenerateStream { call, reader: GenerateReader::default() })
    }

    pub async fn abort(&self, request_ids: Vec<String>) -> Result<(), Fault> {
        self.unary::<pb::Empty>(ABORT, &pb::AbortRequest { request_ids }).await.map(|_| ())
    }

    /// The service has no health call: an answered GetServerInfo is health.
    pub async fn health_check(&self) -> Result<(), Fault> {
        self.unary::<pb::ServerInfo>(GET_SERVER_INFO, &pb::Empty {}).await.map(|_| ())
    }

    pub async fn model_info(&self) -> Result<ModelInfo, Fault> {
        let s: pb::ServerInfo = self.unary(GET_SERVER_INFO, &pb::Empty {}).await?;
        let m: pb::ModelInfo = self.unary(GET_MODEL_INFO, &pb::Empty {}).await?;
        Ok(ModelInfo {
            served_model_name: m.served_model_name,
            model_path: m.model_id,
            max_model_len: s.max_model_len,
            server: format!("{} {}", s.api_version, s.engine_version),
            data_parallel_size: s.parallelism.map_or(1, |p| p.data_parallel_size.max(1)),
            max_num_seqs: u32::try_from(s.max_running_requests).unwrap_or(u32::MAX),
        })
    }
}

/// One GenerateStream call's events. Dropping it before the end cancels the call.
pub struct GenerateStream {
    call: Call,
    reader: GenerateReader,
}

impl GenerateStream {
    /// The next event; `None` after the finishing event, once the call ended with OK.
    pub async fn next(&mut self) -> Result<Option<TokenEvent>, Fault> {
        loop {
            let finished = self.reader.finished();
            match self.call.message::<pb::GenerateResponse>().await? {
                Some(m) => match self.reader.event(m)? {
                    Some(event) => return Ok(Some(event)),
                    None => continue,
                },
                None if finished => return Ok(None),
                None => return Err(ResponseError::NoComplete.into()),
            }
        }
    }
}
