//! The MCP tool loop's counters: `smg_mcp_tool_calls_total{model,tool_name,result}` and
//! `smg_mcp_tool_iterations_total`. Tool names are the servers' own, so the calls are counted
//! in a map; one lock per call is nothing beside the call itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct McpMetrics {
    /// (model, tool_name, result) → calls.
    calls: Mutex<BTreeMap<(String, String, &'static str), u64>>,
    iterations: AtomicU64,
}

impl McpMetrics {
    /// One call ran; `result` is `success` or `error`.
    pub fn call(&self, model: &str, tool: &str, result: &'static str) {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry((model.to_string(), tool.to_string(), result)).or_default() += 1;
        }
    }

    /// One generation of the tool loop ran.
    pub fn iteration(&self) {
        self.iterations.fetch_add(1, Ordering::Relaxed);
    }

    /// Every shard's counts, summed.
    pub fn sum<'a>(all: impl Iterator<Item = &'a McpMetrics>) -> (BTreeMap<(String, String, &'static str), u64>, u64) {
        let mut calls = BTreeMap::new();
        let mut iterations = 0;
        for m in all {
            if let Ok(shard) = m.calls.lock() {
                for (key, n) in shard.iter() {
                    *calls.entry(key.clone()).or_default() += n;
                }
            }
            iterations += m.iterations.load(Ordering::Relaxed);
        }
        (calls, iterations)
    }
}
