//! A gRPC worker whichever service it speaks: the service picked by configuration or detected
//! by asking the server, and one interface over both clients.

use std::rc::Rc;

use shardgate_wire::{EngineRequest, TokenEvent};

use crate::channel::Channel;
use crate::fault::Fault;
use crate::info::{ModelInfo, RankLoad};
use crate::smg::{self, SmgClient};
use crate::status::Code;
use crate::vllm::{self, VllmClient};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// SMG's `vllm.grpc.engine.VllmEngine` (`smg-grpc-servicer`).
    Smg,
    /// vLLM's own `vllm.Inference` / `vllm.Control` (`vllm-rs serve --grpc-port`).
    Vllm,
}

impl Service {
    /// vLLM's Control service answers GetServerInfo; a server without it (UNIMPLEMENTED) is
    /// asked SMG's. Anything else is the worker's fault and is returned as is.
    pub async fn detect(channel: &Rc<Channel>) -> Result<Service, Fault> {
        match VllmClient::new(channel.clone()).health_check().await {
            Ok(()) => Ok(Service::Vllm),
            Err(Fault::Status(s)) if s.code == Code::Unimplemented => {
                SmgClient::new(channel.clone()).model_info().await.map(|_| Service::Smg)
            }
            Err(e) => Err(e),
        }
    }
}

#[derive(Clone)]
pub enum WorkerClient {
    Smg(SmgClient),
    Vllm(VllmClient),
}

pub enum EventStream {
    Smg(smg::GenerateStream),
    Vllm(vllm::GenerateStream),
}

impl EventStream {
    pub async fn next(&mut self) -> Result<Option<TokenEvent>, Fault> {
        match self {
            EventStream::Smg(s) => s.next().await,
            EventStream::Vllm(s) => s.next().await,
        }
    }
}

impl WorkerClient {
    pub fn new(service: Service, channel: Rc<Channel>) -> WorkerClient {
        match service {
            Service::Smg => WorkerClient::Smg(SmgClient::new(channel)),
            Service::Vllm => WorkerClient::Vllm(VllmClient::new(channel)),
        }
    }

    /// The connection its calls go over.
    pub fn channel(&self) -> &Rc<Channel> {
        match self {
            WorkerClient::Smg(c) => c.channel(),
            WorkerClient::Vllm(c) => c.channel(),
        }
    }

    /// `dp_rank` pins a data-parallel rank where the service can (SMG's; vLLM's own front end
    /// balances its ranks itself).
    pub async fn generate(
        &self,
        req: &EngineRequest,
        dp_rank: Option<u32>,
        deadline_ms: u64,
    ) -> Result<EventStream, Fault> {
        Ok(match self {
            WorkerClient::Smg(c) => EventStream::Smg(c.generate(req, dp_rank, deadline_ms).await?),
            WorkerClient::Vllm(c) => EventStream::Vllm(c.generate(req, deadline_ms).await?),
        })
    }

    pub async fn abort(&self, request_ids: Vec<String>) -> Result<(), Fault> {
        match self {
            WorkerClient::Smg(c) => c.abort(request_ids).await,
            WorkerClient::Vllm(c) => c.abort(request_ids).await,
        }
    }

    /// `Ok` when the worker answers and its engine is alive.
    pub async fn health_check(&self) -> Result<(), Fault> {
        match self {
            WorkerClient::Smg(c) => match c.health_check().await? {
                Ok(()) => Ok(()),
                Err(message) => Err(Fault::Status(crate::status::Status { code: Code::Unavailable, message })),
            },
            WorkerClient::Vllm(c) => c.health_check().await,
        }
    }

    pub async fn model_info(&self) -> Result<ModelInfo, Fault> {
        match self {
            WorkerClient::Smg(c) => c.model_info().await,
            WorkerClient::Vllm(c) => c.model_info().await,
        }
    }

    /// Per-rank load, where the service reports it (SMG's GetLoads; vLLM's Control has none).
    pub async fn loads(&self) -> Result<Option<Vec<RankLoad>>, Fault> {
        match self {
            WorkerClient::Smg(c) => c.loads().await.map(Some),
            WorkerClient::Vllm(_) => Ok(None),
        }
    }
}
