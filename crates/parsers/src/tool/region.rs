//! What every region decoder implements: the tool-call scanner (`scanner.rs`) hands it the text
//! after a trigger marker, and it answers how far the call region went.

use super::sink::CallSink;

/// A decoder's verdict on the region text it was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Consumed this many bytes and stays in the region.
    Advance(usize),
    /// Needs more text (never at the end of the stream).
    Wait,
    /// Not a call: release the trigger as content. Only before a call began.
    Reject,
    /// The region ended after this many bytes; what follows is content.
    Done(usize),
}

/// Decodes one tool region, starting right after its trigger marker.
pub(crate) trait RegionDecoder {
    fn step(&mut self, text: &str, at_end: bool, sink: &mut CallSink) -> Decision;
}
