//! NFC as `tokenizers` computes it (its own tables), done only where it can change something.

use std::borrow::Cow;

use unicode_normalization_alignments::UnicodeNormalization;

use super::nfc_inert::NFC_INERT;

fn is_inert(c: char) -> bool {
    let cp = c as u32;
    cp < 0x300 || {
        let i = NFC_INERT.partition_point(|&(_, hi)| hi < cp);
        NFC_INERT.get(i).is_some_and(|&(lo, _)| lo <= cp)
    }
}

/// NFC with `tokenizers`' own tables, without its alignment bookkeeping, and only where it
/// can change something. Nothing composes into an inert char or moves across it, so NFC
/// works stretch by stretch: each run of other chars, with the char before it (which they may
/// compose into), is normalized; the rest is copied.
pub(super) fn nfc(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    let (mut copied, mut last_inert) = (0, 0);
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_inert(c) {
            last_inert = i;
            continue;
        }
        let start = last_inert.max(copied);
        let mut end = text.len();
        while let Some(&(j, d)) = chars.peek() {
            if is_inert(d) {
                end = j;
                break;
            }
            chars.next();
        }
        out.push_str(&text[copied..start]);
        out.extend(UnicodeNormalization::nfc(&text[start..end]).map(|(c, _)| c));
        copied = end;
    }
    if copied == 0 {
        // Every char was inert.
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}
