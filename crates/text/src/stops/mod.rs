//! Stop strings on decoded text, with vLLM's semantics (`check_stop_strings` in
//! `vllm/v1/engine/detokenizer.py`): only text new since the last check (plus the overlap a stop
//! string can straddle) is searched; when several stop strings match, the one that completes
//! earliest wins, ties by list order; the text is cut before the stop string, or after it with
//! `include_stop_str_in_output`.
//!
//! Streaming holdback: `holdback_len` is the longest end of the text that could still grow into
//! a stop string, so a client never sees text that a later token turns into a stop.
//! All offsets are byte offsets into valid UTF-8.

/// A stop match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopMatch {
    /// Index into the stop list.
    pub stop_index: usize,
    /// Byte offset where the text must be cut (`None`: keep all of it).
    pub truncate_to: Option<usize>,
    /// Byte offset just past the stop string's end.
    pub end: usize,
}

/// Searches `text` for the stops, looking at text from byte `new_from` on (plus overlap).
pub fn check(text: &str, new_from: usize, stops: &[String], include_in_output: bool) -> Option<StopMatch> {
    if new_from >= text.len() || stops.is_empty() {
        return None;
    }
    let mut best: Option<(usize, usize, usize)> = None; // (end, start, index)
    for (i, stop) in stops.iter().enumerate() {
        let overlap_chars = stop.chars().count().saturating_sub(1);
        let search_from = back_chars(text, new_from, overlap_chars);
        if let Some(pos) = text[search_from..].find(stop.as_str()) {
            let start = search_from + pos;
            let end = start + stop.len();
            if best.is_none_or(|(best_end, _, _)| end < best_end) {
                best = Some((end, start, i));
            }
        }
    }
    let (end, start, stop_index) = best?;
    let truncate_to = if include_in_output {
        if end >= text.len() {
            None
        } else {
            Some(end)
        }
    } else {
        Some(start)
    };
    Some(StopMatch { stop_index, truncate_to, end })
}

/// Moves back `chars` characters from byte offset `from` (not before 0).
fn back_chars(text: &str, from: usize, chars: usize) -> usize {
    let mut pos = from;
    for _ in 0..chars {
        match text[..pos].char_indices().next_back() {
            Some((i, _)) => pos = i,
            None => break,
        }
    }
    pos
}

/// Bytes at the end of `text` that are a proper prefix of some stop string, so must be held
/// back from a stream until the next token decides.
pub fn holdback_len(text: &str, stops: &[String]) -> usize {
    let mut best = 0;
    for stop in stops {
        // Proper prefixes only: a whole stop string would already have matched.
        let mut prefix_end = stop.len();
        while let Some((i, _)) = stop[..prefix_end].char_indices().next_back() {
            prefix_end = i;
            if prefix_end == 0 {
                break;
            }
            if prefix_end <= best {
                break;
            }
            if text.ends_with(&stop[..prefix_end]) {
                best = prefix_end;
                break;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn vllm_stop_semantics() {
        // (text, new_from, stops, include, expected (stop index, truncate_to))
        type Case = (&'static str, usize, Vec<String>, bool, Option<(usize, Option<usize>)>);
        let cases: Vec<Case> = vec![
            ("hello world", 0, s(&["world"]), false, Some((0, Some(6)))),
            ("hello world", 0, s(&["world"]), true, Some((0, None))),
            ("hello world!", 0, s(&["world"]), true, Some((0, Some(11)))),
            ("hello world", 11, s(&["world"]), false, None),
            // straddles the boundary between old and new text
            ("hello world", 8, s(&["world"]), false, Some((0, Some(6)))),
            // entirely inside already-searched text: not found again
            ("hello world and more", 16, s(&["world"]), false, None),
            // earliest completion wins, not list order
            ("abcdef", 0, s(&["def", "bc"]), false, Some((1, Some(1)))),
            // same end: list order
            ("abcdef", 0, s(&["ef", "def"]), false, Some((0, Some(4)))),
            ("日本語テキスト", 0, s(&["テキ"]), false, Some((0, Some(9)))),
            ("no stop here", 0, s(&[]), false, None),
        ];
        for (text, new_from, stops, include, expected) in cases {
            let got = check(text, new_from, &stops, include).map(|m| (m.stop_index, m.truncate_to));
            assert_eq!(got, expected, "text {text:?} from {new_from} stops {stops:?}");
        }
    }

    #[test]
    fn holdback_covers_partial_stops_only() {
        let stops = s(&["</answer>", "STOP"]);
        let cases =
            [("text </ans", 5), ("text <", 1), ("text ST", 2), ("text", 0), ("text </answer", 8), ("S", 1), ("", 0)];
        for (text, expected) in cases {
            assert_eq!(holdback_len(text, &stops), expected, "text {text:?}");
        }
        // Multi-byte stop prefixes are cut on character boundaries.
        assert_eq!(holdback_len("x日", &s(&["日本"])), "日".len());
    }
}
