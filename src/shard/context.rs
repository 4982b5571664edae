//! Per-process shared state (`Shared`) and per-shard state (`ShardCtx`), and a shard's main task.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::mailbox::{Mailbox, ShardMsg};
use crate::config::Config;
use crate::engine::zmq::connection::EngineLink;
use crate::text::template::ChatTemplate;
use crate::text::tokenizer::cache::{CacheStats, TokenizerCache};
use crate::text::ModelAssets;
use crate::workers::Worker;

/// The parsers that apply to the served model.
#[derive(Debug, Clone, Copy, Default)]
pub struct ParserChoice {
    pub reasoning: Option<&'static str>,
    pub tool: Option<&'static str>,
}

impl ParserChoice {
    /// The gateway flag, else detection from the model name (seed 002, "Parser Selection").
    pub fn resolve(config: &Config) -> Self {
        let name = &config.served_model_name;
        ParserChoice {
            reasoning: config.reasoning_parser.or_else(|| crate::parsers::reasoning::detect_reasoning_parser(name)),
            tool: config.tool_call_parser.or_else(|| crate::parsers::tool::detect_tool_parser(name)),
        }
    }
}

/// Shared by all shards; read-mostly.
pub struct Shared {
    pub config: Config,
    pub parsers: ParserChoice,
    pub shards: usize,
    pub workers: Vec<Arc<Worker>>,
    pub mailboxes: Vec<Mailbox>,
    pub zmq: zmq::Context,
    model: OnceLock<Result<Arc<ModelAssets>, String>>,
}

impl Shared {
    pub fn new(config: Config) -> Arc<Self> {
        let shards = config.shards;
        let workers = config.workers.iter().enumerate().map(|(i, w)| Arc::new(Worker::new(i, w.clone()))).collect();
        let parsers = ParserChoice::resolve(&config);
        tracing::info!(
            "parsers for model {}: reasoning={}, tool-call={}",
            config.served_model_name,
            parsers.reasoning.unwrap_or("none"),
            parsers.tool.unwrap_or("none")
        );
        Arc::new(Shared {
            parsers,
            shards,
            workers,
            mailboxes: (0..shards).map(|_| Mailbox::default()).collect(),
            zmq: zmq::Context::new(),
            model: OnceLock::new(),
            config,
        })
    }

    /// The model, once its tokenizer has loaded. `Err` holds the load error.
    pub fn model(&self) -> Option<&Result<Arc<ModelAssets>, String>> {
        self.model.get()
    }

    pub fn set_model(&self, m: Result<Arc<ModelAssets>, String>) {
        let _ = self.model.set(m);
    }
}

/// One shard's own state. Lives on the shard's thread only (`Rc`).
pub struct ShardCtx {
    pub index: usize,
    pub shared: Arc<Shared>,
    /// This shard's connection to each worker, by worker index (`None` until attached).
    links: RefCell<Vec<Option<Rc<EngineLink>>>>,
    template: OnceCell<Result<Rc<ChatTemplate>, String>>,
    tokenizer_cache: RefCell<Option<TokenizerCache>>,
    next_worker: std::cell::Cell<usize>,
}

impl ShardCtx {
    pub fn new(shared: Arc<Shared>, index: usize) -> Rc<Self> {
        let n = shared.workers.len();
        Rc::new(ShardCtx {
            index,
            shared,
            links: RefCell::new(vec![None; n]),
            template: OnceCell::new(),
            tokenizer_cache: RefCell::new(None),
            next_worker: std::cell::Cell::new(0),
        })
    }

    pub fn link(&self, worker: usize) -> Option<Rc<EngineLink>> {
        self.links.borrow().get(worker).cloned().flatten().filter(|l| l.is_open())
    }

    /// A ready worker's link, rotating over workers (policies come with the workers issue).
    pub fn pick_link(&self) -> Option<Rc<EngineLink>> {
        let links = self.links.borrow();
        let n = links.len();
        for i in 0..n {
            let k = (self.next_worker.get() + i) % n;
            if let Some(link) = &links[k] {
                if link.is_open() && link.worker.status() == crate::workers::WorkerStatus::Ready {
                    self.next_worker.set(k + 1);
                    return Some(link.clone());
                }
            }
        }
        None
    }

    /// The chat template, compiled on this shard at first use.
    pub fn chat_template(&self, model: &ModelAssets) -> Result<Rc<ChatTemplate>, String> {
        self.template
            .get_or_init(|| match &model.chat_template {
                Some(src) => ChatTemplate::compile(src).map(Rc::new),
                None => Err("this model has no chat template; pass --chat-template".to_string()),
            })
            .clone()
    }

    /// Tokenizes through this shard's caches (when enabled); identical to a plain encode.
    pub fn encode(&self, model: &ModelAssets, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, String> {
        let config = self.shared.config.tokenizer_cache;
        if !config.l0_enabled && !config.l1_enabled {
            return model.tokenizer.encode(text, add_special_tokens);
        }
        let mut cache = self.tokenizer_cache.borrow_mut();
        cache.get_or_insert_with(|| TokenizerCache::new(config, &model.tokenizer)).encode(
            &model.tokenizer,
            text,
            add_special_tokens,
        )
    }

    /// This shard's tokenizer-cache counters.
    pub fn tokenizer_cache_stats(&self) -> Option<CacheStats> {
        self.tokenizer_cache.borrow().as_ref().map(TokenizerCache::stats)
    }

    fn on_message(&self, msg: ShardMsg) {
        match msg {
            ShardMsg::Attach { worker, epoch, input, output, engines, done } => {
                let w = self.shared.workers[worker].clone();
                match EngineLink::start(w.clone(), epoch, self.index as u32, input, output, engines) {
                    Ok(link) => self.links.borrow_mut()[worker] = Some(link),
                    Err(e) => w.report_lost(epoch, &format!("shard {} cannot take its sockets: {e}", self.index)),
                }
                done.fetch_sub(1, Ordering::AcqRel);
            }
            ShardMsg::Detach { worker, epoch, reason, done } => {
                let mut links = self.links.borrow_mut();
                if let Some(link) = links[worker].take_if(|l| l.epoch == epoch) {
                    link.close(&reason);
                }
                done.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// A shard's main task: mailbox, (on shard 0) worker supervision, and the HTTP listener.
pub async fn shard_main(shared: Arc<Shared>, index: usize) {
    let ctx = ShardCtx::new(shared.clone(), index);
    {
        let ctx = ctx.clone();
        monoio::spawn(async move {
            loop {
                let msg = ctx.shared.mailboxes[ctx.index].next().await;
                ctx.on_message(msg);
            }
        });
    }
    if index == 0 {
        for w in &shared.workers {
            monoio::spawn(crate::workers::supervisor::supervise(ctx.clone(), w.clone()));
        }
    }
    crate::http::server::serve(ctx).await;
}
