//! From an adapter's neutral request to a generation ready to submit: the values validated
//! (`params`), the constraint of a forced tool call built (a Harmony model's output format held
//! to its final message), a worker chosen for the prompt, and the prompts and output bound
//! checked against its context window. Nothing reaches an engine before all of it passed.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::invalid::{Field, Invalid, Problem, Refusal};
use super::params::{self, RequestParams};
use super::parse::ParseSpec;
use super::request::{GenerateRequest, Prompt};
use crate::engine::link::EngineLink;
use crate::error::ApiError;
use crate::limits;
use crate::metrics::Endpoint;
use crate::shard::ShardCtx;
use shardgate_text::ModelAssets;

/// Everything `generate::run` needs.
pub struct Generation {
    pub ctx: Rc<ShardCtx>,
    pub endpoint: Endpoint,
    /// When the request arrived (TTFT and duration are measured from here).
    pub started: Instant,
    pub response_id: String,
    pub model: Arc<ModelAssets>,
    pub link: Rc<EngineLink>,
    pub prompts: Vec<Prompt>,
    pub params: RequestParams,
    /// The parse stage (inactive for plain text).
    pub parse: ParseSpec,
}

/// Validates `req` and picks its worker.
pub fn plan(ctx: &Rc<ShardCtx>, req: GenerateRequest) -> Result<Generation, Refusal> {
    let GenerateRequest { endpoint, id, started, model, prompts, sampling, parse } = req;
    let mut params = params::validate(sampling, &model)?;
    if let Some(forced) = &parse.forced {
        // vLLM keeps only the tool constraint when a call is forced.
        params.sampling.constraint = Some(match parse.harmony {
            Some(_) => super::harmony_tag::tool_constraint(forced, &parse.tools)?,
            None => super::constraint::tool_schema(forced, &parse.tools, parse.parallel_tool_calls)?,
        });
    } else if let (Some(_), Some(requested)) = (&parse.harmony, &params.sampling.constraint) {
        // Harmony's channels stay free; only the final message takes the format.
        params.sampling.constraint = Some(super::harmony_tag::output_constraint(requested)?);
    } else if parse.tool_parser.is_some() || parse.reasoning_parser == Some("inkling") {
        // The parser needs to see its trigger tokens (under a JSON constraint there are none).
        params.output.skip_special_tokens = false;
    }
    let first = prompts.first().map_or(&[][..], |p| &p.token_ids[..]);
    let link = ctx.pick_link(first).ok_or_else(|| ApiError::unavailable("no healthy worker is available"))?;
    if prompts.len() * params.n as usize > limits::choices_per_request_max as usize * 8 {
        return Err(Invalid::new(Field::N, Problem::TooManyChoices).into());
    }
    params::check_max_tokens(&params, link.max_model_len())?;
    for p in &prompts {
        params::check_prompt_len(p.token_ids.len(), link.max_model_len())?;
    }
    Ok(Generation { ctx: ctx.clone(), endpoint, started, response_id: id, model, link, prompts, params, parse })
}
