//! The marker-pair reasoning machine shared by 18 of the 19 parsers.
//!
//! Text moves through three phases: before any reasoning block (content), in
//! the reasoning block, and after it (content for good). One reasoning block
//! per choice: once it has ended, a later start marker is answer text.

use super::{ReasoningDelta, ReasoningParser};
use crate::stream_core::{scan, Machine, Scan, Step, Streamed};

/// The markers of one family, as data.
pub(crate) struct ThinkSyntax {
    /// Open the reasoning block (and, inside a block that started by
    /// default, one redundant copy is dropped).
    pub start: &'static [&'static str],
    /// End the reasoning block; consumed.
    pub end: &'static [&'static str],
    /// End the reasoning block but stay in the text, for the tool-call parser.
    pub end_kept: &'static [&'static str],
    /// The family's own default ("Starts in reasoning" in the docs).
    pub starts_in_reasoning: bool,
    /// Framing markers removed from content.
    pub content_strip: &'static [&'static str],
    /// Drop end markers repeated after the block until the answer starts.
    pub drop_stray_end: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before,
    /// `start_seen`: an explicit start marker opened (or was dropped in) this
    /// block, so any further one is reasoning text.
    Reasoning {
        start_seen: bool,
    },
    /// `answer_started`: non-whitespace content has been emitted.
    After {
        answer_started: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkerRole {
    Start,
    End,
    EndKept,
    Strip,
    /// An end marker after the block: dropped while the answer has not
    /// started, answer text after.
    StrayEnd,
}

pub(crate) struct ThinkParser {
    syntax: &'static ThinkSyntax,
    phase: Phase,
    markers: Vec<&'static str>,
    roles: Vec<MarkerRole>,
}

impl ThinkParser {
    pub(crate) fn new(syntax: &'static ThinkSyntax, force_reasoning_start: bool) -> Self {
        // A family without end markers (passthrough) could never leave a
        // forced reasoning block, so forcing does not apply to it.
        let can_reason = !syntax.end.is_empty() || !syntax.end_kept.is_empty();
        let phase = if can_reason && (syntax.starts_in_reasoning || force_reasoning_start) {
            Phase::Reasoning { start_seen: false }
        } else {
            Phase::Before
        };
        Self { syntax, phase, markers: Vec::new(), roles: Vec::new() }
    }

    /// The markers that mean something in the current phase.
    fn load_markers(&mut self) {
        self.markers.clear();
        self.roles.clear();
        let s = self.syntax;
        match self.phase {
            Phase::Before => {
                self.add_markers(s.start, MarkerRole::Start);
                self.add_markers(s.content_strip, MarkerRole::Strip);
            }
            Phase::Reasoning { start_seen } => {
                self.add_markers(s.end, MarkerRole::End);
                self.add_markers(s.end_kept, MarkerRole::EndKept);
                if !start_seen {
                    self.add_markers(s.start, MarkerRole::Start);
                }
            }
            Phase::After { answer_started } => {
                self.add_markers(s.content_strip, MarkerRole::Strip);
                if s.drop_stray_end && !answer_started {
                    self.add_markers(s.end, MarkerRole::StrayEnd);
                }
            }
        }
    }

    fn add_markers(&mut self, markers: &[&'static str], role: MarkerRole) {
        self.markers.extend_from_slice(markers);
        self.roles.extend(std::iter::repeat_n(role, markers.len()));
    }

    fn split(&mut self, text: &str, at_end: bool, out: &mut ReasoningDelta) -> Step {
        self.load_markers();
        let found = scan(text, &self.markers);
        let text_len = found.text_len(text, at_end);
        self.emit(&text[..text_len], out);
        let Scan::Found { index, .. } = found else {
            // Nothing decidable (or, at the end, nothing left).
            return if text_len == 0 { Step::Wait } else { Step::Advance(text_len) };
        };
        let marker_len = self.markers[index].len();
        match self.roles[index] {
            MarkerRole::Start => {
                self.phase = Phase::Reasoning { start_seen: true };
                Step::Advance(text_len + marker_len)
            }
            MarkerRole::End => {
                self.phase = Phase::After { answer_started: false };
                Step::Advance(text_len + marker_len)
            }
            MarkerRole::EndKept => {
                self.phase = Phase::After { answer_started: false };
                Step::Advance(text_len)
            }
            MarkerRole::Strip => Step::Advance(text_len + marker_len),
            MarkerRole::StrayEnd => {
                // The text just emitted may have started the answer.
                if matches!(self.phase, Phase::After { answer_started: true }) {
                    out.content.push_str(self.markers[index]);
                }
                Step::Advance(text_len + marker_len)
            }
        }
    }

    fn emit(&mut self, text: &str, out: &mut ReasoningDelta) {
        if text.is_empty() {
            return;
        }
        match &mut self.phase {
            Phase::Reasoning { .. } => out.reasoning.push_str(text),
            Phase::Before => out.content.push_str(text),
            Phase::After { answer_started } => {
                *answer_started |= !text.trim().is_empty();
                out.content.push_str(text);
            }
        }
    }
}

impl Machine for ThinkParser {
    type Output = ReasoningDelta;

    fn step(&mut self, text: &str, _offset: usize, at_end: bool, out: &mut ReasoningDelta) -> Step {
        self.split(text, at_end, out)
    }
}

impl ReasoningParser for Streamed<ThinkParser> {
    fn push(&mut self, text: &str) -> ReasoningDelta {
        Streamed::push(self, text)
    }

    fn finish(&mut self) -> ReasoningDelta {
        Streamed::finish(self)
    }
}
