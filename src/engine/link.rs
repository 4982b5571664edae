//! One shard's link to one worker for one epoch: its request book (`book`) and the transport
//! that carries the book's messages. What a request does on a link (submit, abort on drop,
//! the close that faults what is live) is the same for every transport; a transport only
//! encodes an ADD or an ABORT for its wire, reads outputs, and writes them into the book.
//!
//! Invariant: a closed link sends nothing; the book's invariants hold for every transport.

use std::rc::Rc;
use std::sync::Arc;

use super::book::{self, RequestBook};
use super::grpc::transport::{GrpcAttachment, GrpcTransport};
use super::loss::LinkLoss;
use super::slot::{RequestSlot, SlotEvent};
use super::submit_error::SubmitError;
use super::zmq::kv_events::{self, KvRanks, RankKvSummary};
use super::zmq::transport::{ZmqAttachment, ZmqTransport};
use super::EngineRequest;
use crate::error::{EngineFault, FaultSource};
use crate::routing::kv_index::{prefer_rank, Balance};
use crate::routing::RankTable;
use crate::workers::Worker;

/// What a shard is handed for a worker once the control shard has connected it.
pub enum Attachment {
    /// A ZMQ engine group on this host, after its handshake.
    Zmq(ZmqAttachment),
    /// A gRPC worker, after its service was detected and its model read.
    Grpc(GrpcAttachment),
}

/// How this link's messages travel.
enum Transport {
    Zmq(Rc<ZmqTransport>),
    Grpc(Rc<GrpcTransport>),
}

pub struct EngineLink {
    pub worker: Arc<Worker>,
    pub epoch: u64,
    book: Rc<RequestBook>,
    transport: Transport,
    max_model_len: u32,
    /// The ranks' exact block indexes, where the engines publish KV-cache events.
    kv: Option<Rc<KvRanks>>,
    balance: Balance,
}

/// How a link routes inside its worker, from the gateway's configuration.
#[derive(Clone, Copy, Debug)]
pub struct LinkSettings {
    /// Silence with requests in flight after which the engine counts as lost.
    pub silence_s: u64,
    /// When a rank holding a prompt's prefix is too busy to be preferred.
    pub balance: Balance,
    /// This link's KV events feed the host's stream (`kv_publish`).
    pub kv_publish: bool,
}

impl EngineLink {
    /// Takes over what the control shard connected for this shard and starts the link's tasks
    /// (the transport's readers and the silence watchdog).
    pub fn start(
        worker: Arc<Worker>,
        epoch: u64,
        client_index: u32,
        attachment: Attachment,
        ranks: Arc<RankTable>,
        settings: LinkSettings,
    ) -> std::io::Result<Rc<EngineLink>> {
        let book = Rc::new(RequestBook::new(worker.clone(), epoch, client_index, ranks));
        let (transport, max_model_len, kv) = match attachment {
            Attachment::Zmq(a) => {
                assert!(!a.engines.is_empty() && a.engines.len() == book.ranks.len());
                let max_model_len = a.max_model_len();
                let publishers = a.engines.iter().map(|e| e.registration.kv_events()).collect();
                // Engines of an `ipc://` worker run on this host.
                let kv = kv_events::follow(&book, &a.zmq, publishers, "127.0.0.1", settings.kv_publish);
                (Transport::Zmq(ZmqTransport::start(a, worker.backend(), &book)?), max_model_len, kv)
            }
            Attachment::Grpc(a) => {
                let max_model_len = a.max_model_len;
                (Transport::Grpc(GrpcTransport::start(a, &book)), max_model_len, None)
            }
        };
        monoio::spawn(book::watch_silence(book.clone(), settings.silence_s));
        Ok(Rc::new(EngineLink { worker, epoch, book, transport, max_model_len, kv, balance: settings.balance }))
    }

    /// The context length every engine of the worker accepts.
    /// How this link reaches its engines, for the metrics.
    pub fn mode(&self) -> crate::metrics::Mode {
        match self.transport {
            Transport::Zmq(_) => crate::metrics::Mode::Zmq,
            Transport::Grpc(_) => crate::metrics::Mode::Grpc,
        }
    }

    pub fn max_model_len(&self) -> u32 {
        self.max_model_len
    }

    pub fn is_open(&self) -> bool {
        self.book.is_open()
    }

    pub fn in_flight(&self) -> usize {
        self.book.in_flight()
    }

    /// The most leading tokens of `tokens` any rank holds, where the ranks publish KV events.
    pub fn cached_tokens(&self, tokens: &[u32]) -> Option<u32> {
        let kv = self.kv.as_ref()?;
        let mut per_rank = Vec::new();
        kv.cached_tokens(tokens, &mut per_rank);
        per_rank.into_iter().flatten().max()
    }

    /// Each rank's view of its KV-cache events; `None` when the engines publish none.
    pub fn kv_summary(&self) -> Option<Vec<RankKvSummary>> {
        self.kv.as_ref().map(|kv| kv.summary())
    }

    /// The rank that holds the most of `tokens` when that beats load (see `prefer_rank`).
    fn preferred_rank(&self, tokens: &[u32]) -> Option<usize> {
        let kv = self.kv.as_ref()?;
        if self.book.ranks.len() < 2 {
            return None;
        }
        let mut cached = Vec::new();
        kv.cached_tokens(tokens, &mut cached);
        let scores: Vec<f64> = self.book.ranks.snapshots().map(|l| crate::routing::score(&l)).collect();
        prefer_rank(&cached, &scores, self.balance)
    }

    /// Sends an ADD. The returned `Submission` aborts the request on the engine if it is dropped
    /// before the engine finished it. Errors: a request this engine cannot take (400) or a full
    /// relay queue (503), which are the client's answer, or a fault of the link, which
    /// `pipeline::retry` may route around. `lockstep`: the model is MoE, so the group's engines
    /// only step together.
    pub async fn submit(self: &Rc<Self>, req: &EngineRequest, lockstep: bool) -> Result<Submission, SubmitError> {
        if !self.book.is_open() {
            return Err(SubmitError::Fault(EngineFault::new(
                FaultSource::Gateway,
                "engine connection is closed",
                true,
            )));
        }
        if self.book.contains(&req.request_id) {
            // A duplicate live id kills a vLLM engine; ids are unique by construction.
            return Err(SubmitError::Fault(EngineFault::new(FaultSource::Gateway, "duplicate live request id", true)));
        }
        let (slot, rank) = match &self.transport {
            Transport::Zmq(t) => {
                let add = t.encode_add(req, self.book.client_index)?;
                let preferred = self.preferred_rank(&req.prompt_token_ids);
                let (slot, rank) = self.book.enter(&req.request_id, t.request_finish(req), preferred);
                if lockstep {
                    t.wake_group(&self.book);
                }
                if let Err(e) = t.send_add(&self.book, rank, add).await {
                    self.book.retire(&req.request_id);
                    return Err(e);
                }
                (slot, rank)
            }
            Transport::Grpc(t) => {
                t.check(req)?;
                t.submit(&self.book, req)
            }
        };
        Ok(Submission { link: self.clone(), request_id: req.request_id.clone(), slot, rank })
    }

    /// The client gave up on a request the engine has not finished.
    fn abort(&self, request_id: &str) {
        let Some(live) = self.book.retire(request_id) else { return };
        if !self.book.is_open() {
            return;
        }
        match &self.transport {
            Transport::Zmq(t) => t.send_abort(&self.book, live.rank, request_id),
            Transport::Grpc(t) => t.send_abort(&self.book, request_id),
        }
    }

    /// A cheap message to every engine of the worker, proving each still answers (the
    /// supervisor's backstop for a loss no reader saw).
    pub fn ping(&self) -> Result<(), LinkLoss> {
        if !self.book.is_open() {
            return Err(LinkLoss::Closed);
        }
        match &self.transport {
            Transport::Zmq(t) => t.ping(self.book.client_index),
            Transport::Grpc(t) => t.ping(),
        }
    }

    /// Aborts every live request on its engine rank, fails them for their clients, and closes
    /// the link without reporting the worker lost.
    pub fn abort_all(&self, reason: LinkLoss) {
        if !self.book.is_open() {
            return;
        }
        let by_rank = self.book.ids_by_rank();
        match &self.transport {
            Transport::Zmq(t) => t.abort_many(&self.book, &by_rank),
            Transport::Grpc(t) => t.abort_many(&self.book, &by_rank),
        }
        self.book.close(&reason);
    }

    /// Closes the link: every live request gets a fault, nothing more is sent, and the worker
    /// is reported lost (the supervisor re-binds).
    pub fn fail(&self, reason: LinkLoss) {
        self.book.fail(reason);
    }

    /// Closes without reporting (the supervisor asked).
    pub fn close(&self, reason: &LinkLoss) {
        self.book.close(reason);
    }
}

/// A request in flight on a link. Dropping it before the engine finished it aborts it there.
pub struct Submission {
    link: Rc<EngineLink>,
    request_id: String,
    slot: Rc<RequestSlot>,
    /// The engine rank (position in the worker's group) it was sent to.
    rank: usize,
}

impl Submission {
    pub async fn next(&self) -> SlotEvent {
        self.slot.next().await
    }

    pub fn slot(&self) -> &RequestSlot {
        &self.slot
    }

    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The engine rank it was sent to.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The link it is on.
    pub fn link(&self) -> &Rc<EngineLink> {
        &self.link
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.slot.is_closed() {
            self.link.abort(&self.request_id);
        }
    }
}
