//! Tool-call ids. OpenAI's shape (`call_` + 24 hex digits) by default; Kimi
//! models were trained on their own reference format, which their chat
//! templates parse back out of the conversation history.

/// The id for a call to `function_name`, the `call_index_in_conversation`-th
/// tool call (0-based) across the whole conversation.
///
/// - model name containing `kimi` and `k3`: `NAME_N`
/// - model name containing `kimi`: `functions.NAME:N`
/// - otherwise: `call_` + 24 random hex digits
///
/// Matching is case-insensitive.
pub fn tool_call_id(model_name: &str, function_name: &str, call_index_in_conversation: usize) -> String {
    let model = model_name.to_lowercase();
    if model.contains("kimi") {
        if model.contains("k3") {
            return format!("{function_name}_{call_index_in_conversation}");
        }
        return format!("functions.{function_name}:{call_index_in_conversation}");
    }
    let random_bits = rand::random::<u128>() >> 32;
    format!("call_{random_bits:024x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(tool_call_id("moonshotai/Kimi-K2-Instruct", "get_weather", 3), "functions.get_weather:3");
        assert_eq!(tool_call_id("moonshotai/Kimi-K3", "get_weather", 0), "get_weather_0");
        let id = tool_call_id("Qwen/Qwen3-8B", "get_weather", 0);
        assert_eq!(id.len(), 5 + 24);
        assert!(id.starts_with("call_"));
        assert!(id[5..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(id, tool_call_id("Qwen/Qwen3-8B", "get_weather", 0));
    }
}
