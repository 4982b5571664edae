//! `response_chain`: a conversation continued through `previous_response_id`, read back from the
//! newest response to the first and handed over oldest first, as the gateway replays it.
//!
//! Built on `Storage::get_response`, so every backend follows a chain the same way. The chain is
//! the history a new response continues, so a broken one is an error, never a shorter history:
//! a link that names a response no longer stored (deleted, or never written) and a link back to
//! a response already on the chain are `Corrupt`; more than `depth_max` responses is
//! `ChainTooLong`.

use std::collections::HashSet;

use crate::error::StoreError;
use crate::records::StoredResponse;
use crate::storage::Storage;

/// The chain that ends with response `id`, oldest first (so `id` is last). `NotFound` when `id`
/// itself is not stored; `depth_max` counts responses, `id` included (0 counts as 1).
pub(crate) fn response_chain(
    storage: &mut dyn Storage,
    id: &str,
    depth_max: usize,
) -> Result<Vec<StoredResponse>, StoreError> {
    let depth_max = depth_max.max(1);
    let Some(mut newest) = storage.get_response(id)? else {
        return Err(StoreError::NotFound(format!("response {id}")));
    };
    let mut chain = Vec::new();
    let mut seen = HashSet::from([id.to_string()]);
    while let Some(previous) = newest.previous_response_id.clone() {
        let named_by = newest.id.clone();
        chain.push(newest);
        if chain.len() == depth_max {
            return Err(StoreError::ChainTooLong { id: id.to_string(), depth_max });
        }
        let broken = |how: &str| StoreError::Corrupt {
            what: format!("response chain of {id}"),
            why: format!("response {named_by} names {previous} as its previous response, {how}"),
        };
        if !seen.insert(previous.clone()) {
            return Err(broken("a loop"));
        }
        newest = storage.get_response(&previous)?.ok_or_else(|| broken("which is not stored"))?;
    }
    chain.push(newest);
    chain.reverse();
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::memory::Memory;

    fn response(id: &str, previous: Option<&str>) -> StoredResponse {
        StoredResponse {
            id: id.into(),
            created_at: 1,
            model: "m".into(),
            previous_response_id: previous.map(str::to_string),
            conversation_id: None,
            input_items: json!([]),
            response: json!({"id": id}),
        }
    }

    /// The stored (id, previous) links, the depth allowed, and the ids of the chain ending with
    /// `r3`, or the error.
    type ChainCase<'a> = (&'a [(&'a str, Option<&'a str>)], usize, Result<Vec<&'a str>, StoreError>);

    #[test]
    fn chains_are_followed_oldest_first_and_broken_ones_refused() {
        let corrupt = |why: &str| Err(StoreError::Corrupt { what: "response chain of r3".into(), why: why.into() });
        let cases: Vec<ChainCase> = vec![
            (&[("r1", None), ("r2", Some("r1")), ("r3", Some("r2"))], 10, Ok(vec!["r1", "r2", "r3"])),
            (&[("r1", None), ("r2", Some("r1")), ("r3", Some("r2"))], 3, Ok(vec!["r1", "r2", "r3"])),
            (
                &[("r1", None), ("r2", Some("r1")), ("r3", Some("r2"))],
                2,
                Err(StoreError::ChainTooLong { id: "r3".into(), depth_max: 2 }),
            ),
            (&[("r3", None)], 0, Ok(vec!["r3"])),
            (
                &[("r1", None), ("r3", Some("r2"))],
                10,
                corrupt("response r3 names r2 as its previous response, which is not stored"),
            ),
            (
                &[("r2", Some("r3")), ("r3", Some("r2"))],
                10,
                corrupt("response r2 names r3 as its previous response, a loop"),
            ),
            (&[("r3", Some("r3"))], 10, corrupt("response r3 names r3 as its previous response, a loop")),
            (&[("r1", None)], 10, Err(StoreError::NotFound("response r3".into()))),
        ];
        for (links, depth_max, expected) in cases {
            let mut memory = Memory::default();
            for (id, previous) in links {
                memory.put_response(response(id, *previous)).expect("put");
            }
            let chain = response_chain(&mut memory, "r3", depth_max);
            let ids = chain.map(|chain| chain.into_iter().map(|response| response.id).collect::<Vec<_>>());
            let expected = expected.map(|ids| ids.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(ids, expected, "{links:?} depth {depth_max}");
        }
    }
}
