//! vLLM's sampling flags (`--temperature`, `--top-p`, ...): each one given becomes a field of
//! every request body, under --extra-body's fields, as `vllm bench serve` sends them.

use clap::Args;
use serde_json::{Map, Value};

/// vLLM's sampling flags, put into every request body when given.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    #[arg(long = "top-p", help_heading = "Sampling")]
    pub top_p: Option<f64>,
    #[arg(long = "top-k", allow_negative_numbers = true, help_heading = "Sampling")]
    pub top_k: Option<i64>,
    #[arg(long = "min-p", help_heading = "Sampling")]
    pub min_p: Option<f64>,
    #[arg(long, help_heading = "Sampling")]
    pub temperature: Option<f64>,
    #[arg(long = "frequency-penalty", allow_negative_numbers = true, help_heading = "Sampling")]
    pub frequency_penalty: Option<f64>,
    #[arg(long = "presence-penalty", allow_negative_numbers = true, help_heading = "Sampling")]
    pub presence_penalty: Option<f64>,
    #[arg(long = "repetition-penalty", help_heading = "Sampling")]
    pub repetition_penalty: Option<f64>,
}

impl SamplingArgs {
    pub fn body_fields(&self) -> Map<String, Value> {
        let s = self;
        [
            ("top_p", s.top_p.map(Value::from)),
            ("top_k", s.top_k.map(Value::from)),
            ("min_p", s.min_p.map(Value::from)),
            ("temperature", s.temperature.map(Value::from)),
            ("frequency_penalty", s.frequency_penalty.map(Value::from)),
            ("presence_penalty", s.presence_penalty.map(Value::from)),
            ("repetition_penalty", s.repetition_penalty.map(Value::from)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect()
    }
}
