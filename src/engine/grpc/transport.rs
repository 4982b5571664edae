//! The gRPC transport of a shard's link to one worker.
//!
//! The shard opens its own HTTP/2 connection when the link starts (a connection lives on one
//! runtime, so the control shard cannot hand one over); requests submitted before it is up
//! wait for it. Each request is a Generate stream read by its own task into the book. An
//! abort raises the request's cancel signal, so its task drops the stream (RST_STREAM, which
//! the worker answers by cancelling the engine request), and also sends the service's Abort,
//! which reaches a request whose stream is already gone.
//!
//! Invariants: a connection loss fails the whole book (`LinkLoss::Grpc`, retry-safe: the
//! worker drops a call with its connection), so the supervisor re-binds with a new link and a
//! new connection; a fault that belongs to one request (a status about it, a deadline) faults
//! only that request. Nothing here outlives the book's close.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardgate_grpc::{Channel, Fault, Service, WorkerClient};
use shardgate_tls::ClientTls;
use shardgate_util::signal::LocalSignal;

use crate::engine::book::RequestBook;
use crate::engine::loss::LinkLoss;
use crate::engine::slot::{RequestSlot, SlotEvent};
use crate::engine::submit_error::SubmitError;
use crate::engine::EngineRequest;
use crate::error::{ApiError, EngineFault, FaultSource};
use crate::limits;

/// What a shard is handed for a gRPC worker once the control shard has checked it.
#[derive(Debug, Clone)]
pub struct GrpcAttachment {
    /// `host:port`.
    pub addr: String,
    /// The gateway's TLS configurations, for a `grpcs://` worker.
    pub tls: Option<ClientTls>,
    pub service: Service,
    pub max_model_len: u32,
}

pub struct GrpcTransport {
    service: Service,
    /// Set once this shard's connection is up.
    client: RefCell<Option<WorkerClient>>,
    /// Raised when the connect finished, either way (a failed connect closes the book).
    connect_done: LocalSignal,
    /// The cancel signal of each live request's stream task.
    cancels: RefCell<HashMap<String, Rc<LocalSignal>>>,
}

impl GrpcTransport {
    /// Starts the connect (and, on the first shard of an SMG worker, the load poll).
    pub(crate) fn start(a: GrpcAttachment, book: &Rc<RequestBook>) -> Rc<Self> {
        let t = Rc::new(GrpcTransport {
            service: a.service,
            client: RefCell::new(None),
            connect_done: LocalSignal::default(),
            cancels: RefCell::new(HashMap::new()),
        });
        monoio::spawn(connect(book.clone(), t.clone(), a.addr, a.tls));
        t
    }

    /// Checks what the service cannot carry before the request is entered, so the client gets
    /// a 400 and the worker is not blamed.
    pub(crate) fn check(&self, req: &EngineRequest) -> Result<(), SubmitError> {
        if !req.mm_features.is_empty() {
            // Neither service's messages carry the gateway's processed tensors.
            return Err(SubmitError::Refused(ApiError::bad_request("images are not supported over gRPC workers yet")));
        }
        if self.service == Service::Smg {
            shardgate_grpc::smg::generate_request(req, None)
                .map_err(|u| SubmitError::Refused(ApiError::bad_request(u.to_string())))?;
        }
        Ok(())
    }

    /// Enters `req` in the book and starts the task that streams its outputs into it.
    pub(crate) fn submit(self: &Rc<Self>, book: &Rc<RequestBook>, req: &EngineRequest) -> (Rc<RequestSlot>, usize) {
        let (slot, rank) = book.enter(&req.request_id, None, None);
        let cancel = Rc::new(LocalSignal::default());
        self.cancels.borrow_mut().insert(req.request_id.clone(), cancel.clone());
        // SMG's service pins a data-parallel rank; vLLM's front end balances its own.
        let dp_rank = (self.service == Service::Smg && book.ranks.len() > 1).then_some(rank as u32);
        monoio::spawn(stream(book.clone(), self.clone(), req.clone(), rank, dp_rank, cancel));
        (slot, rank)
    }

    /// Stops a request that has left the book: its stream is reset, and the worker is told.
    pub(crate) fn send_abort(&self, book: &RequestBook, request_id: &str) {
        self.abort_many(book, &[vec![request_id.to_string()]]);
    }

    pub(crate) fn abort_many(&self, book: &RequestBook, by_rank: &[Vec<String>]) {
        let ids: Vec<String> = by_rank.iter().flatten().cloned().collect();
        if ids.is_empty() {
            return;
        }
        for id in &ids {
            if let Some(cancel) = self.cancels.borrow_mut().remove(id) {
                cancel.raise();
            }
        }
        let Some(client) = self.client.borrow().clone() else { return };
        let url = book.worker.url().to_string();
        monoio::spawn(async move {
            if let Err(e) = client.abort(ids).await {
                tracing::warn!("cannot send Abort to {url}: {e}");
            }
        });
    }

    /// The connection is still up (keep-alive PINGs on it find a vanished host); before the
    /// connect finished there is nothing to prove yet.
    pub(crate) fn ping(&self) -> Result<(), LinkLoss> {
        match self.client.borrow().as_ref().and_then(|c| c.channel().ended()) {
            Some(why) => Err(LinkLoss::Grpc(Arc::new(Fault::Closed(why)))),
            None => Ok(()),
        }
    }

    /// The client once the connection is up; `None` if the book closed first.
    async fn ready_client(&self, book: &RequestBook) -> Option<WorkerClient> {
        if !self.connect_done.is_raised() {
            monoio::select! {
                _ = self.connect_done.wait() => {},
                _ = book.close_signal.wait() => return None,
            }
        }
        self.client.borrow().clone()
    }
}

async fn connect(book: Rc<RequestBook>, t: Rc<GrpcTransport>, addr: String, tls: Option<ClientTls>) {
    let connected = monoio::select! {
        c = Channel::connect(&addr, tls.as_ref()) => c,
        _ = book.close_signal.wait() => return,
    };
    match connected {
        Ok(channel) => {
            let client = WorkerClient::new(t.service, Rc::new(channel));
            *t.client.borrow_mut() = Some(client.clone());
            t.connect_done.raise();
            if t.service == Service::Smg && book.client_index == 0 {
                monoio::spawn(poll_loads(book, client));
            }
        }
        Err(e) => {
            tracing::error!("worker {}: shard {} cannot connect: {e}", book.worker.url(), book.client_index);
            t.connect_done.raise();
            book.fail(LinkLoss::Grpc(Arc::new(e)));
        }
    }
}

/// One request's Generate stream, read into the book until its finish, its cancel, a fault,
/// or the book's close.
async fn stream(
    book: Rc<RequestBook>,
    t: Rc<GrpcTransport>,
    req: EngineRequest,
    rank: usize,
    dp_rank: Option<u32>,
    cancel: Rc<LocalSignal>,
) {
    let id = req.request_id.as_str();
    let Some(client) = t.ready_client(&book).await else { return };
    let opened = monoio::select! {
        s = client.generate(&req, dp_rank, limits::grpc_generate_deadline_ms) => s,
        _ = cancel.wait() => return,
        _ = book.close_signal.wait() => return,
    };
    let mut events = match opened {
        Ok(s) => s,
        Err(e) => return stream_failed(&book, &t, id, rank, e),
    };
    loop {
        let next = monoio::select! {
            n = events.next() => n,
            _ = cancel.wait() => return,
            _ = book.close_signal.wait() => return,
        };
        match next {
            Ok(Some(ev)) => {
                let now = Instant::now();
                book.batch_arrived(now);
                book.progressed(now);
                let finished = ev.finish.is_some();
                // A gRPC worker watches every stop token itself: nothing to cut here.
                let _ = book.deliver(id, ev);
                if finished {
                    t.cancels.borrow_mut().remove(id);
                    return;
                }
            }
            Ok(None) => {
                let e = Fault::Decode("the Generate stream ended without a finish".into());
                return stream_failed(&book, &t, id, rank, e);
            }
            Err(e) => return stream_failed(&book, &t, id, rank, e),
        }
    }
}

/// A lost connection fails the link (every request on it, and the worker is reported lost);
/// any other fault fails this request only.
fn stream_failed(book: &RequestBook, t: &GrpcTransport, id: &str, rank: usize, e: Fault) {
    t.cancels.borrow_mut().remove(id);
    if matches!(e, Fault::Closed(_) | Fault::Connect(_) | Fault::Handshake(_) | Fault::Tls(_)) {
        tracing::error!("worker {}: connection lost: {e}", book.worker.url());
        book.fail(LinkLoss::Grpc(Arc::new(e)));
        return;
    }
    let Some(live) = book.retire(id) else { return };
    tracing::warn!("worker {}: request {id} failed: {e}", book.worker.url());
    // A gRPC status is the server's answer for this request (it stays healthy): the engine's
    // fault, a 503 when it may succeed elsewhere (UNAVAILABLE: not admitted), else a 500. A
    // reset or an unreadable answer is the transport's.
    let source = if matches!(e, Fault::Status(_)) { FaultSource::Engine } else { FaultSource::Transport };
    let fault = EngineFault::new(source, format!("gRPC worker: {e}"), e.retry_safe());
    live.slot.push(SlotEvent::Fault(fault.on_rank(rank)), Instant::now());
}

/// SMG's per-rank loads into the worker's rank table, for routing by load as the ZMQ engines'
/// stats do. One shard polls for all (the table is shared).
async fn poll_loads(book: Rc<RequestBook>, client: WorkerClient) {
    let interval = Duration::from_millis(limits::grpc_loads_interval_ms);
    loop {
        monoio::select! {
            _ = monoio::time::sleep(interval) => {},
            _ = book.close_signal.wait() => return,
        }
        match client.loads().await {
            Ok(Some(loads)) => {
                for l in loads {
                    if (l.rank as usize) < book.ranks.len() {
                        book.report_load(l.rank as usize, l.running, l.waiting, l.kv_usage);
                    }
                }
            }
            Ok(None) => return,
            Err(e) => tracing::warn!("worker {}: GetLoads failed: {e}", book.worker.url()),
        }
    }
}
