//! The tool-call scanner shared by every family: scans content for a family's
//! triggers, hands each tool region to a fresh decoder, and rewinds when a
//! region turns out not to be a call.
//!
//! Rewind rule: until its first call is begun, a region is tentative and its
//! text stays buffered. If the decoder rejects it, the trigger marker is
//! released as content and scanning resumes right after the marker, so a
//! later real trigger inside the rejected text is still found. Once a call is
//! begun, the region is committed and nothing in it is re-read.

use super::formats::{Family, Trigger};
use super::region::{Decision, RegionDecoder};
use super::sink::CallSink;
use super::{ToolParseDelta, ToolParser, ToolSpec};
use crate::stream_core::{leading_whitespace_len, scan, Machine, Scan, Step, Streamed};

enum Mode {
    Content,
    Region {
        decoder: Box<dyn RegionDecoder>,
        trigger: &'static Trigger,
        /// Absolute offset of the trigger marker.
        trigger_offset: usize,
    },
}

pub(crate) struct ToolScanner {
    family: &'static Family,
    sink: CallSink,
    mode: Mode,
    /// Only blank text (or dropped markers) was seen so far.
    at_output_start: bool,
    /// Triggers recognised anywhere, then the content-drop markers.
    markers: Vec<&'static str>,
    anywhere_triggers: Vec<&'static Trigger>,
}

impl ToolScanner {
    pub(crate) fn new(family: &'static Family, tools: &[ToolSpec]) -> Streamed<Self> {
        let anywhere_triggers: Vec<&'static Trigger> = family.triggers.iter().filter(|t| !t.at_output_start).collect();
        let mut markers: Vec<&'static str> = anywhere_triggers.iter().map(|t| t.marker).collect();
        markers.extend_from_slice(family.content_drop);
        Streamed::new(Self {
            family,
            sink: CallSink::new(tools),
            mode: Mode::Content,
            at_output_start: true,
            markers,
            anywhere_triggers,
        })
    }

    fn emit_content(&mut self, text: &str, out: &mut ToolParseDelta) {
        if !text.trim().is_empty() {
            self.at_output_start = false;
        }
        out.content.push_str(text);
    }

    fn content_step(&mut self, text: &str, offset: usize, at_end: bool, out: &mut ToolParseDelta) -> Step {
        let found = scan(text, &self.markers);
        let text_len = found.text_len(text, at_end);
        if self.at_output_start {
            let blank_len = leading_whitespace_len(&text[..text_len]);
            if blank_len < text_len {
                let first = &text[blank_len..];
                let family = self.family;
                if let Some(trigger) = family.triggers.iter().find(|t| t.at_output_start && first.starts_with(t.marker))
                {
                    out.content.push_str(&text[..blank_len]);
                    self.enter_region(trigger, offset + blank_len);
                    return Step::Advance(blank_len);
                }
            }
        }
        self.emit_content(&text[..text_len], out);
        match found {
            Scan::Found { index, .. } => {
                let marker_len = self.markers[index].len();
                if let Some(trigger) = self.anywhere_triggers.get(index).copied() {
                    self.enter_region(trigger, offset + text_len);
                }
                Step::Advance(text_len + marker_len)
            }
            Scan::Partial { .. } if text_len == 0 => Step::Wait,
            Scan::Partial { .. } => Step::Advance(text_len),
        }
    }

    fn enter_region(&mut self, trigger: &'static Trigger, trigger_offset: usize) {
        self.sink.start_region();
        self.mode = Mode::Region { decoder: trigger.decoder.build(), trigger, trigger_offset };
    }

    fn region_step(&mut self, text: &str, at_end: bool, out: &mut ToolParseDelta) -> Step {
        let Mode::Region { decoder, trigger, trigger_offset } = &mut self.mode else {
            return Step::Advance(0);
        };
        let (trigger, trigger_offset) = (*trigger, *trigger_offset);
        let mut decision = decoder.step(text, at_end, &mut self.sink);
        if decision == Decision::Wait && at_end {
            debug_assert!(false, "tool decoder waited at the end of the stream");
            decision = Decision::Reject;
        }
        match decision {
            Decision::Advance(byte_count) => Step::Advance(byte_count),
            Decision::Wait => Step::Wait,
            Decision::Reject if !self.sink.region_committed() => {
                self.mode = Mode::Content;
                // A start-of-output trigger is only tried once.
                self.at_output_start = false;
                self.emit_content(trigger.marker, out);
                Step::Seek(trigger_offset + trigger.marker.len())
            }
            Decision::Reject => self.leave_region(0),
            Decision::Done(byte_count) => self.leave_region(byte_count),
        }
    }

    fn leave_region(&mut self, byte_count: usize) -> Step {
        self.sink.end();
        self.mode = Mode::Content;
        self.at_output_start = false;
        Step::Advance(byte_count)
    }
}

impl Machine for ToolScanner {
    type Output = ToolParseDelta;

    fn step(&mut self, text: &str, offset: usize, at_end: bool, out: &mut ToolParseDelta) -> Step {
        let step = match self.mode {
            Mode::Content => self.content_step(text, offset, at_end, out),
            Mode::Region { .. } => self.region_step(text, at_end, out),
        };
        self.sink.drain_into(&mut out.calls);
        step
    }

    fn retain_from(&self) -> Option<usize> {
        match &self.mode {
            Mode::Region { trigger_offset, .. } if !self.sink.region_committed() => Some(*trigger_offset),
            _ => None,
        }
    }
}

impl ToolParser for Streamed<ToolScanner> {
    fn push(&mut self, text: &str) -> ToolParseDelta {
        Streamed::push(self, text)
    }

    fn finish(&mut self) -> ToolParseDelta {
        Streamed::finish(self)
    }
}
