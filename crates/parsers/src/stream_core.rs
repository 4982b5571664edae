//! The one streaming core shared by every reasoning and tool-call parser.
//!
//! A parser is a state machine over a buffer of not-yet-consumed text. Each
//! step looks at the buffer and either consumes a prefix (emitting output) or
//! reports that it cannot decide yet. The rule that makes streamed output equal
//! one-shot output: **a step may only decide what no further text could
//! change.** Text that might still become a marker is held back (see [`scan`])
//! and released at the end of the stream, when `at_end` is set and every step
//! must decide.
//!
//! This module knows markers as plain strings; it does not know any format.

/// Text received but not yet consumed, addressed by absolute byte offsets so
/// a caller can rewind to a mark (a tool region that turned out not to be a
/// call is re-read as content).
#[derive(Debug, Default)]
pub(crate) struct PendingText {
    text: String,
    /// Absolute offset of `text[0]` in the whole stream.
    base: usize,
    /// Index into `text` of the first unconsumed byte.
    cursor: usize,
}

impl PendingText {
    pub(crate) fn push(&mut self, chunk: &str) {
        self.text.push_str(chunk);
    }

    /// The unconsumed text.
    pub(crate) fn rest(&self) -> &str {
        self.text.get(self.cursor..).unwrap_or("")
    }

    /// Consumes `byte_count` bytes (clamped to what is there, and moved back to
    /// a char boundary so a buggy count can never split a character).
    pub(crate) fn consume(&mut self, byte_count: usize) {
        let mut target = (self.cursor + byte_count).min(self.text.len());
        while !self.text.is_char_boundary(target) {
            target -= 1;
        }
        self.cursor = target;
    }

    /// Absolute offset of the first unconsumed byte.
    pub(crate) fn offset(&self) -> usize {
        self.base + self.cursor
    }

    /// Moves the cursor to an absolute offset that is still buffered (back
    /// to re-read text, or forward past text decided without consuming it).
    pub(crate) fn seek(&mut self, offset: usize) {
        let index = offset.saturating_sub(self.base).min(self.text.len());
        if self.text.is_char_boundary(index) {
            self.cursor = index;
        }
    }

    /// Drops consumed text before `keep_offset` (and before the cursor), so the
    /// buffer stays proportional to what is still undecided.
    pub(crate) fn compact(&mut self, keep_offset: usize) {
        let keep_index = keep_offset.saturating_sub(self.base).min(self.cursor);
        // Amortised: only move memory when the dead prefix is large.
        if keep_index >= 4096 && keep_index * 2 >= self.text.len() {
            self.text.drain(..keep_index);
            self.base += keep_index;
            self.cursor -= keep_index;
        }
    }
}

/// Outcome of looking for markers in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    /// `markers[index]` starts at byte `at`; no marker can start earlier.
    Found { at: usize, index: usize },
    /// No complete marker. `text[..safe_len]` can never be part of one; the
    /// rest is a proper prefix of some marker and must be held back.
    Partial { safe_len: usize },
}

impl Scan {
    /// How much text precedes the marker, or is safe to release. At the end of
    /// the stream nothing is held back any more.
    pub(crate) fn text_len(self, text: &str, at_end: bool) -> usize {
        match self {
            Scan::Found { at, .. } => at,
            Scan::Partial { .. } if at_end => text.len(),
            Scan::Partial { safe_len } => safe_len,
        }
    }
}

/// Finds the earliest marker in `text`. At one position the longest complete
/// marker wins; if a longer marker could still complete there, the position
/// is undecided and everything from it is held back.
pub(crate) fn scan(text: &str, markers: &[&str]) -> Scan {
    let bytes = text.as_bytes();
    for (at, _) in text.char_indices() {
        let first = bytes[at];
        if !markers.iter().any(|m| m.as_bytes().first() == Some(&first)) {
            continue;
        }
        let tail = &text[at..];
        let mut best: Option<usize> = None;
        let mut undecided = false;
        for (index, marker) in markers.iter().enumerate() {
            if marker.is_empty() {
                continue;
            }
            if tail.starts_with(marker) {
                if best.is_none_or(|b| markers[b].len() < marker.len()) {
                    best = Some(index);
                }
            } else if marker.starts_with(tail) {
                undecided = true;
            }
        }
        // A marker that extends past the end of the text could still match
        // here, and it would be longer than any complete one: undecided.
        if undecided {
            return Scan::Partial { safe_len: at };
        }
        if let Some(index) = best {
            return Scan::Found { at, index };
        }
    }
    Scan::Partial { safe_len: text.len() }
}

/// Whether `text` starts with one of `markers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// `markers[index]` is at the start (the longest one if several).
    Matched(usize),
    /// `text` is a proper prefix of a marker: more text is needed.
    Undecided,
    /// No marker can start here.
    Mismatch,
}

pub(crate) fn expect_at_start(text: &str, markers: &[&str]) -> Expect {
    let mut best: Option<usize> = None;
    let mut undecided = false;
    for (index, marker) in markers.iter().enumerate() {
        if marker.is_empty() {
            continue;
        }
        if text.starts_with(marker) {
            if best.is_none_or(|b| markers[b].len() < marker.len()) {
                best = Some(index);
            }
        } else if marker.starts_with(text) {
            undecided = true;
        }
    }
    // A marker longer than `text` that `text` is a prefix of could still
    // match, and would beat any shorter complete one.
    match best {
        _ if undecided => Expect::Undecided,
        Some(index) => Expect::Matched(index),
        None => Expect::Mismatch,
    }
}

/// Byte length of the leading whitespace of `text`.
pub(crate) fn leading_whitespace_len(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// Largest char boundary of `text` at or below `index`.
pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// What a state-machine step did with the pending text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Consumed this many bytes (zero is allowed when the state changed).
    Advance(usize),
    /// Move the cursor to this absolute offset (still buffered, see
    /// [`Machine::retain_from`]) and continue from there.
    Seek(usize),
    /// Cannot decide without more text; at the end of the stream, only
    /// returned when there is nothing left to do.
    Wait,
}

/// A parser state machine over the pending text.
pub(crate) trait Machine {
    type Output: Default;
    /// Looks at `text` (the unconsumed input, starting at absolute `offset`)
    /// and decides what it can. With `at_end`, no more text will come.
    fn step(&mut self, text: &str, offset: usize, at_end: bool, out: &mut Self::Output) -> Step;
    /// The earliest absolute offset the machine may still rewind to.
    fn retain_from(&self) -> Option<usize> {
        None
    }
}

/// A [`Machine`] plus its input buffer: the push/finish shape every parser
/// exposes.
#[derive(Default)]
pub(crate) struct Streamed<M> {
    pub(crate) machine: M,
    pending: PendingText,
}

impl<M: Machine> Streamed<M> {
    pub(crate) fn new(machine: M) -> Self {
        Self { machine, pending: PendingText::default() }
    }

    pub(crate) fn push(&mut self, text: &str) -> M::Output {
        self.pending.push(text);
        self.run(false)
    }

    pub(crate) fn finish(&mut self) -> M::Output {
        self.run(true)
    }

    fn run(&mut self, at_end: bool) -> M::Output {
        let mut out = M::Output::default();
        drive(&mut self.pending, &mut self.machine, at_end, &mut out);
        let keep = self.machine.retain_from().map_or(self.pending.offset(), |o| o.min(self.pending.offset()));
        self.pending.compact(keep);
        out
    }
}

/// Runs `machine` over `pending` until it waits or the text is used up.
///
/// A step that keeps returning `Advance(0)`, or rewinds in a cycle, would spin
/// forever; the guards turn such a bug into a stop instead of a hang.
fn drive<M: Machine>(pending: &mut PendingText, machine: &mut M, at_end: bool, out: &mut M::Output) {
    let mut idle_steps = 0usize;
    let mut step_budget = 1024 + 16 * pending.rest().len();
    loop {
        let rest = pending.rest();
        if rest.is_empty() && !at_end {
            return;
        }
        match machine.step(rest, pending.offset(), at_end, out) {
            Step::Wait => return,
            Step::Advance(0) => idle_steps += 1,
            Step::Advance(byte_count) => {
                idle_steps = 0;
                pending.consume(byte_count);
            }
            Step::Seek(offset) => {
                idle_steps = 0;
                pending.seek(offset);
            }
        }
        step_budget = step_budget.saturating_sub(1);
        if idle_steps > 64 || step_budget == 0 {
            debug_assert!(false, "parser step made no progress");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_earliest_and_holds_back_partials() {
        assert_eq!(scan("ab<think>c", &["<think>"]), Scan::Found { at: 2, index: 0 });
        assert_eq!(scan("ab</thi", &["</think>"]), Scan::Partial { safe_len: 2 });
        assert_eq!(scan("abc", &["<x>"]), Scan::Partial { safe_len: 3 });
        // A complete short marker waits while a longer one could still match.
        assert_eq!(scan("a<|b", &["<|b", "<|bc"]), Scan::Partial { safe_len: 1 });
        assert_eq!(scan("a<|bd", &["<|b", "<|bc"]), Scan::Found { at: 1, index: 0 });
        // Multi-byte characters are never split.
        assert_eq!(scan("é<｜", &["<｜DSML｜"]), Scan::Partial { safe_len: 2 });
    }

    #[test]
    fn expect_reports_undecided_prefixes() {
        assert_eq!(expect_at_start("<fu", &["<function="]), Expect::Undecided);
        assert_eq!(expect_at_start("<function=x", &["<function="]), Expect::Matched(0));
        assert_eq!(expect_at_start("hello", &["<function="]), Expect::Mismatch);
    }

    #[test]
    fn pending_text_rewinds_and_compacts() {
        let mut pending = PendingText::default();
        pending.push(&"x".repeat(10_000));
        pending.consume(9_000);
        let mark = pending.offset();
        pending.compact(mark);
        pending.consume(500);
        pending.seek(mark);
        assert_eq!(pending.rest().len(), 1_000);
        assert_eq!(pending.offset(), mark);
    }
}
