//! Small shared helpers with no knowledge of the gateway: JSON string escaping, ids, clocks,
//! throttled log lines.

pub mod ids;
pub mod json;
pub mod log_escape;
pub mod memory;
pub mod signal;
pub mod throttle;
pub mod time;
pub mod wake_count;
