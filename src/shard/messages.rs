//! A shard's mailbox task: what a shard does with each message another thread posts to it
//! (socket hand-over, worker jobs on the control shard, admission grants, shutdown steps).

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::context::{ShardCtx, Shared};
use super::mailbox::ShardMsg;
use crate::engine::link::{EngineLink, LinkSettings};
use crate::engine::loss::LinkLoss;
use crate::routing::kv_index::Balance;
use crate::workers::jobs;

/// This shard's context, with the task that handles its mailbox running.
pub fn start(shared: Arc<Shared>, index: usize) -> Rc<ShardCtx> {
    let ctx = ShardCtx::new(shared, index);
    let handler = ctx.clone();
    monoio::spawn(async move {
        loop {
            let msg = handler.shared.mailboxes[handler.index].next().await;
            handle(&handler, msg);
        }
    });
    ctx
}

fn handle(ctx: &Rc<ShardCtx>, msg: ShardMsg) {
    match msg {
        ShardMsg::Attach { worker, epoch, attachment, ranks, done } => {
            if let Some(w) = ctx.shared.registry.snapshot().iter().find(|w| w.key == worker) {
                let config = &ctx.shared.config;
                let settings = LinkSettings {
                    silence_s: config.engine_silence_s,
                    // One shard's subscriptions feed the host stream; every shard sees the same.
                    kv_publish: ctx.index == 0 && config.kv_publish.is_some(),
                    balance: Balance {
                        abs: config.routing.cache_aware.balance_abs_threshold as f64,
                        rel: config.routing.cache_aware.balance_rel_threshold,
                    },
                };
                match EngineLink::start(w.clone(), epoch, ctx.index as u32, attachment, ranks, settings) {
                    Ok(link) => {
                        ctx.links.borrow_mut().insert(worker, link);
                    }
                    Err(e) => w.report_lost(epoch, LinkLoss::Attach { shard: ctx.index, error: Arc::new(e) }),
                }
            }
            done.fetch_sub(1, Ordering::AcqRel);
        }
        ShardMsg::Detach { worker, epoch, reason, done } => {
            let mut links = ctx.links.borrow_mut();
            if links.get(&worker).is_some_and(|l| l.epoch == epoch) {
                if let Some(link) = links.remove(&worker) {
                    link.close(&reason);
                }
            }
            done.fetch_sub(1, Ordering::AcqRel);
        }
        ShardMsg::AddWorker(req, reply) => {
            reply.send(jobs::add(ctx, *req).map(|w| (w.id.clone(), w.url().to_string())))
        }
        ShardMsg::Forget(worker) => ctx.policy.borrow_mut().on_removed(worker),
        ShardMsg::Grant(id) => ctx.admission_waiters.grant(&ctx.shared.admission, id),
        ShardMsg::StopAccepting => ctx.stop_accepting.raise(),
        ShardMsg::AbortAll => {
            for link in ctx.links.borrow().values() {
                link.abort_all(LinkLoss::Shutdown);
            }
        }
        ShardMsg::RemoveWorker(id) => {
            jobs::remove(ctx, &id);
        }
    }
}
