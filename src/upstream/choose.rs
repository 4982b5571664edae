//! The first routing decision of a generation request, made before any API adapter parses its
//! body: does an HTTP worker serve it? The candidates are every routable worker of the request's
//! model, HTTP workers and engine workers alike, and the `--policy` picks among them (its own
//! instance per shard, keyed on the prompt's bytes, since an HTTP worker's request is never
//! tokenized). When it picks an engine worker, the request goes to the adapter, and the
//! pipeline picks among the engine workers with the token ids as it always does.

use std::rc::Rc;
use std::sync::Arc;

use super::peek::Peek;
use crate::routing::Candidate;
use crate::shard::ShardCtx;
use crate::workers::Worker;

/// Bytes of the prompt a cache-aware choice keys on, at most (a prefix identifies a
/// conversation long before its end).
const PROMPT_KEY_BYTES_MAX: usize = 4096;

pub enum Route {
    /// An engine worker (or nothing at all: the adapter answers as it does without HTTP workers).
    Engine,
    Http(Arc<Worker>),
    /// HTTP workers serve this model, but none of them is healthy (and no engine worker does).
    Unavailable,
}

/// Whether any HTTP worker is registered (the one check a gateway without them pays).
pub fn any_http(ctx: &ShardCtx) -> bool {
    ctx.shared.registry.snapshot().iter().any(|w| w.config.upstream.is_some())
}

/// The worker for a request (`except`: one it just failed on, which never comes back).
pub fn choose(ctx: &Rc<ShardCtx>, peek: &Peek, body: &[u8], except: Option<u64>) -> Route {
    let workers = ctx.shared.registry.snapshot();
    let served = ctx.shared.config.served_model_name.as_str();
    let model = peek.model.as_deref().unwrap_or(served);
    let mut candidates = Vec::new();
    let mut chosen_from = Vec::new();
    let mut any_http = false;
    for w in workers.iter() {
        let eligible = match &w.config.upstream {
            Some(up) if up.serves(model) => {
                any_http = true;
                w.is_routable() && Some(w.key) != except
            }
            Some(_) => false,
            None => model == served && w.is_routable() && ctx.link(w.key).is_some() && Some(w.key) != except,
        };
        if eligible {
            candidates.push(Candidate::new(w.key, w.load()));
            chosen_from.push(w);
        }
    }
    let index = match candidates.len() {
        0 if any_http => return Route::Unavailable,
        0 => return Route::Engine,
        1 => 0,
        _ => {
            let key: Vec<u32> = peek
                .prompt_at
                .clone()
                .map_or(&[][..], |r| &body[r])
                .iter()
                .take(PROMPT_KEY_BYTES_MAX)
                .map(|&b| u32::from(b))
                .collect();
            match ctx.upstream_policy.borrow_mut().select(&candidates, &key) {
                Some(i) => i,
                None => return Route::Engine,
            }
        }
    };
    let w = chosen_from[index];
    if w.config.upstream.is_some() {
        Route::Http(Arc::clone(w))
    } else {
        Route::Engine
    }
}
