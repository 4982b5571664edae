//! Identifiers: response ids (`chatcmpl-…`, `cmpl-…`) and engine request ids.
//!
//! Engine request ids must never repeat among an engine's live requests (a duplicate kills a
//! vLLM engine), so each is the gateway's client id, the shard index, a per-shard counter and a
//! random suffix: unique within a process by the counter, and across gateway restarts by the
//! random part.

use std::cell::Cell;

use rand::Rng;

thread_local! {
    static COUNTER: Cell<u64> = const { Cell::new(0) };
}

/// 32 lowercase hex characters, as vLLM's `random_uuid()` gives.
pub fn random_hex(len: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut rng = rand::rng();
    (0..len).map(|_| char::from(HEX[rng.random_range(0..16)])).collect()
}

/// `chatcmpl-<32 hex>` / `cmpl-<32 hex>`.
pub fn response_id(prefix: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + 33);
    s.push_str(prefix);
    s.push('-');
    s.push_str(&random_hex(32));
    s
}

/// A fresh engine request id: `<response id>-<choice>-<shard>.<seq>-<8 hex>`.
pub fn engine_request_id(response_id: &str, choice: u32, shard: usize) -> String {
    let seq = COUNTER.with(|c| {
        let v = c.get();
        c.set(v + 1);
        v
    });
    format!("{response_id}-{choice}-{shard}.{seq}-{}", random_hex(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_ids_never_repeat() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            assert!(seen.insert(engine_request_id("cmpl-x", i % 3, 0)));
        }
    }

    #[test]
    fn response_ids_have_the_openai_shape() {
        let id = response_id("chatcmpl");
        assert!(id.starts_with("chatcmpl-"));
        assert_eq!(id.len(), "chatcmpl-".len() + 32);
        assert!(id["chatcmpl-".len()..].chars().all(|c| c.is_ascii_hexdigit()));
    }
}
