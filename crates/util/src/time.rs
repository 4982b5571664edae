//! Clocks. Wall time for OpenAI `created` and vLLM `arrival_time`; monotonic for latencies.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, as a float (vLLM's `time.time()`).
pub fn unix_time_f64() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Whole seconds since the Unix epoch (OpenAI `created`).
pub fn unix_time_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}
