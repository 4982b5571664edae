//! Per-process shared state (`Shared`) and per-shard state (`ShardCtx`), and a shard's main task.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::mailbox::{Mailbox, ShardMsg};
use crate::config::Config;
use crate::engine::link::EngineLink;
use crate::error::ApiError;
use crate::metrics::ShardMetrics;
use crate::metrics::{Endpoint, ErrorType};
use crate::pipeline::admission::{self, Admission, LocalWaiters, Permit};
use crate::routing::{new_policy, Candidate, Policy, PolicyKind};
use crate::workers::registry::Registry;
use shardgate_text::render::{RenderedPrompt, Renderer};
use shardgate_text::tokenizer::cache::TokenizerCache;
use shardgate_text::{ModelAssets, ModelError, TemplateError, TokenizerError};

/// The parsers that apply to the served model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParserChoice {
    pub reasoning: Option<&'static str>,
    pub tool: Option<&'static str>,
}

impl ParserChoice {
    /// SMG's "Parser Selection": a worker's label override (workers that disagree: the
    /// lexicographically smallest name, with a warning), else the gateway flag, else detection
    /// from the model name.
    pub fn resolve(config: &Config, registry: &Registry) -> Self {
        let name = &config.served_model_name;
        let workers = registry.snapshot();
        let overridden = |label: &str, names: &'static [&'static str]| -> Option<&'static str> {
            let mut declared: Vec<&'static str> = workers
                .iter()
                .filter_map(|w| w.label(label))
                .filter_map(|n| names.iter().copied().find(|r| *r == n))
                .collect();
            declared.sort_unstable();
            declared.dedup();
            if declared.len() > 1 {
                tracing::warn!("workers of model {name} disagree on {label}: {declared:?}; using {}", declared[0]);
            }
            declared.first().copied()
        };
        ParserChoice {
            reasoning: overridden("reasoning_parser", shardgate_parsers::reasoning::reasoning_parser_names())
                .or(config.reasoning_parser)
                .or_else(|| shardgate_parsers::reasoning::detect_reasoning_parser(name)),
            tool: overridden("tool_parser", shardgate_parsers::tool::tool_parser_names())
                .or(config.tool_call_parser)
                .or_else(|| shardgate_parsers::tool::detect_tool_parser(name)),
        }
    }
}

/// Shared by all shards; read-mostly.
pub struct Shared {
    pub config: Config,
    pub shards: usize,
    pub registry: Registry,
    parsers: ArcSwap<ParserChoice>,
    pub mailboxes: Vec<Mailbox>,
    /// One set of counters per shard, each written only by its shard.
    pub metrics: Vec<crossbeam::utils::CachePadded<ShardMetrics>>,
    pub zmq: zmq::Context,
    pub admission: Arc<Admission>,
    /// Set on SIGTERM: no new requests are taken.
    pub draining: std::sync::atomic::AtomicBool,
    /// Open API connections a shard holds at most (`http::fd_budget`).
    pub connections_per_shard: usize,
    /// Stored responses and conversations (its own thread; every call is queued).
    pub store: shardgate_store::Store,
    /// MCP tool servers (its own thread and runtime; every call is queued).
    pub mcp: shardgate_mcp::Mcp,
    /// The API port's TLS configuration (`--tls-cert-path`), read at startup.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    model: OnceLock<Result<Arc<ModelAssets>, ModelError>>,
    /// The model's image side, set just before the model (so a loaded model always has one).
    vision: OnceLock<crate::media::VisionSupport>,
    /// Fetches, decodes and processes request images off the shard threads.
    pub media_pool: crate::media::MediaPool,
}

impl Shared {
    pub fn new(
        config: Config,
        connections_per_shard: usize,
        store: shardgate_store::Store,
        mcp: shardgate_mcp::Mcp,
        tls: Option<Arc<rustls::ServerConfig>>,
        media_pool: crate::media::MediaPool,
    ) -> Arc<Self> {
        let shards = config.shards;
        let registry = Registry::default();
        let parsers = ParserChoice::resolve(&config, &registry);
        tracing::info!(
            "parsers for model {}: reasoning={}, tool-call={}",
            config.served_model_name,
            parsers.reasoning.unwrap_or("none"),
            parsers.tool.unwrap_or("none")
        );
        Arc::new_cyclic(|me: &std::sync::Weak<Shared>| {
            let me = me.clone();
            // A slot freed on one shard goes to a request waiting on another through its mailbox.
            let notify = Box::new(move |shard: usize, id: u64| {
                if let Some(shared) = me.upgrade() {
                    shared.mailboxes[shard].post(ShardMsg::Grant(id));
                }
            });
            Shared {
                parsers: ArcSwap::from_pointee(parsers),
                shards,
                registry,
                mailboxes: (0..shards).map(|_| Mailbox::default()).collect(),
                metrics: (0..shards).map(|_| Default::default()).collect(),
                zmq: zmq::Context::new(),
                admission: Arc::new(Admission::new(config.admission, notify)),
                draining: Default::default(),
                connections_per_shard,
                store,
                mcp,
                tls,
                model: OnceLock::new(),
                vision: OnceLock::new(),
                media_pool,
                config,
            }
        })
    }

    pub fn parsers(&self) -> ParserChoice {
        **self.parsers.load()
    }

    /// Recomputes the parser choice after the workers' labels changed.
    /// The mode a request refused before any engine was chosen counts under: gRPC when every
    /// engine worker is a gRPC one, else ZMQ (the gateway's own pipeline either way).
    pub fn mode_before_dispatch(&self) -> crate::metrics::Mode {
        let workers = self.registry.snapshot();
        let mut engines = workers.iter().filter(|w| w.config.upstream.is_none()).peekable();
        if engines.peek().is_some() && engines.all(|w| w.config.grpc_addr.is_some()) {
            crate::metrics::Mode::Grpc
        } else {
            crate::metrics::Mode::Zmq
        }
    }

    pub fn refresh_parsers(&self) {
        let next = ParserChoice::resolve(&self.config, &self.registry);
        if next != self.parsers() {
            tracing::info!(
                "parsers for model {} now: reasoning={}, tool-call={}",
                self.config.served_model_name,
                next.reasoning.unwrap_or("none"),
                next.tool.unwrap_or("none")
            );
            self.parsers.store(Arc::new(next));
        }
    }

    /// The model, once its tokenizer has loaded. `Err` holds the load error.
    pub fn model(&self) -> Option<&Result<Arc<ModelAssets>, ModelError>> {
        self.model.get()
    }

    pub fn set_model(&self, m: Result<Arc<ModelAssets>, ModelError>) {
        let _ = self.model.set(m);
    }

    /// Whether (and how) the loaded model takes images; unset until the model loaded.
    pub fn vision(&self) -> &crate::media::VisionSupport {
        static NOT_LOADED: crate::media::VisionSupport = Err(String::new());
        self.vision.get().unwrap_or(&NOT_LOADED)
    }

    pub fn set_vision(&self, v: crate::media::VisionSupport) {
        let _ = self.vision.set(v);
    }
}

/// One shard's own state. Lives on the shard's thread only (`Rc`).
pub struct ShardCtx {
    pub index: usize,
    pub shared: Arc<Shared>,
    /// This shard's connection to each worker, by worker key.
    pub(super) links: RefCell<HashMap<u64, Rc<EngineLink>>>,
    renderer: OnceCell<Result<Rc<Renderer>, TemplateError>>,
    tokenizer_cache: RefCell<Option<TokenizerCache>>,
    /// This shard's replica policy (its state, e.g. the prefix tree, is per shard).
    pub(super) policy: RefCell<Box<dyn Policy>>,
    /// The policy's instance for the choice between HTTP and engine workers (`upstream::choose`).
    pub upstream_policy: RefCell<Box<dyn Policy>>,
    /// Idle keep-alive connections to HTTP workers.
    pub upstreams: crate::upstream::pool::Pool,
    /// This shard's requests waiting for an admission slot.
    pub admission_waiters: LocalWaiters,
    /// Raised on shutdown: the accept loop ends.
    pub stop_accepting: shardgate_util::signal::LocalSignal,
}

impl ShardCtx {
    /// Waits for an admission slot for a generation at `endpoint`. A refusal (the 429 / 503 to
    /// send) is counted and logged here; the adapter answers it.
    pub async fn admit(&self, endpoint: Endpoint) -> Result<Permit, ApiError> {
        admission::acquire(&self.shared.admission, &self.admission_waiters, self.index).await.inspect_err(|e| {
            self.metrics().of(self.shared.mode_before_dispatch()).error(endpoint, ErrorType::of(e));
            tracing::warn!("shard {}: request refused by admission: {}", self.index, e.message);
        })
    }

    pub(super) fn new(shared: Arc<Shared>, index: usize) -> Rc<Self> {
        Rc::new(ShardCtx {
            index,
            links: RefCell::new(HashMap::new()),
            renderer: OnceCell::new(),
            tokenizer_cache: RefCell::new(None),
            policy: RefCell::new(new_policy(shared.config.routing.policy, &shared.config.routing.cache_aware)),
            upstream_policy: RefCell::new(new_policy(shared.config.routing.policy, &shared.config.routing.cache_aware)),
            upstreams: Default::default(),
            admission_waiters: Default::default(),
            stop_accepting: Default::default(),
            shared,
        })
    }

    /// The MCP client (`--mcp-config-path`'s servers and the requests' own).
    pub fn mcp(&self) -> &shardgate_mcp::Mcp {
        &self.shared.mcp
    }

    /// This shard's counters.
    pub fn metrics(&self) -> &ShardMetrics {
        &self.shared.metrics[self.index]
    }

    /// This shard's open link to a worker.
    pub fn link(&self, worker_key: u64) -> Option<Rc<EngineLink>> {
        self.links.borrow().get(&worker_key).cloned().filter(|l| l.is_open())
    }

    /// The largest context any ready worker accepts (for `/v1/models`).
    pub fn max_model_len(&self) -> Option<u32> {
        self.links.borrow().values().filter(|l| l.is_open()).map(|l| l.max_model_len()).max()
    }

    /// The link of the routable worker `--policy` picks for a prompt of `tokens`.
    pub fn pick_link(&self, tokens: &[u32]) -> Option<Rc<EngineLink>> {
        self.pick_link_except(tokens, None)
    }

    /// `pick_link` among the workers other than `except` (the one a request just failed on).
    pub fn pick_link_except(&self, tokens: &[u32], except: Option<u64>) -> Option<Rc<EngineLink>> {
        let workers = self.shared.registry.snapshot();
        let links = self.links.borrow();
        let mut candidates = Vec::with_capacity(workers.len());
        let mut open = Vec::with_capacity(workers.len());
        for w in workers.iter().filter(|w| w.is_routable() && Some(w.key) != except) {
            if let Some(link) = links.get(&w.key).filter(|l| l.is_open()) {
                let mut candidate = Candidate::new(w.key, w.load());
                if self.shared.config.routing.policy == PolicyKind::CacheAware {
                    candidate.cached_tokens = link.cached_tokens(tokens);
                }
                candidates.push(candidate);
                open.push(link);
            }
        }
        let chosen = match open.len() {
            0 => return None,
            // One worker: nothing to decide, and cache_aware's tree would only cost memory.
            1 => 0,
            _ => self.policy.borrow_mut().select(&candidates, tokens)?,
        };
        open.get(chosen).map(|l| Rc::clone(l))
    }

    /// The model's renderer, made on this shard at first use (a Jinja template is compiled
    /// once per shard).
    pub fn renderer(&self, model: &ModelAssets) -> Result<Rc<Renderer>, TemplateError> {
        let given = self.shared.config.chat_template_content_format;
        self.renderer.get_or_init(|| Renderer::for_model(model).map(|r| Rc::new(r.with_content_format(given)))).clone()
    }

    /// A rendered prompt's token ids.
    pub fn encode_rendered(
        &self,
        model: &ModelAssets,
        rendered: &RenderedPrompt,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        match rendered {
            RenderedPrompt::Text(text) => self.encode(model, text, add_special_tokens),
            RenderedPrompt::Tokens(ids) => Ok(ids.clone()),
        }
    }

    /// Tokenizes through this shard's caches (when enabled); identical to a plain encode.
    pub fn encode(
        &self,
        model: &ModelAssets,
        text: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let config = self.shared.config.tokenizer_cache;
        if !config.l0_enabled && !config.l1_enabled {
            return model.tokenizer.encode(text, add_special_tokens);
        }
        let mut cache = self.tokenizer_cache.borrow_mut();
        let cache = cache.get_or_insert_with(|| TokenizerCache::new(config, &model.tokenizer));
        let ids = cache.encode(&model.tokenizer, text, add_special_tokens);
        self.metrics().tokenizer_cache(&cache.stats());
        ids
    }
}
