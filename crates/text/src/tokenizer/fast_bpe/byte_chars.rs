//! GPT-2's byte <-> printable-char map, which byte-level BPE vocabularies spell their tokens in.

use std::collections::HashMap;

/// GPT-2's byte ↔ printable-char map used by byte-level BPE vocabularies.
pub(in crate::tokenizer) fn byte_to_char_table() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        *slot = if printable {
            char::from(b as u8)
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap_or('\0')
        };
    }
    table
}

pub(in crate::tokenizer) fn char_to_byte_table() -> HashMap<char, u8> {
    byte_to_char_table().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()
}
