//! Client-given text in a log line. A newline in a URL would start a line of the client's
//! choosing, so control characters (and the Unicode line separators) are escaped, and so is
//! the backslash, which keeps the escaping unambiguous; everything else is written as is, so an
//! ordinary URL reads exactly as sent.

use std::fmt::{self, Write};

/// Formats its text with control characters escaped (`\n`, `\u{1b}`, ...).
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => write!(f, "{}", c.escape_default())?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_and_control_characters_are_escaped() {
        let cases = [
            ("ipc:///tmp/smg-zmq/engine-0", "ipc:///tmp/smg-zmq/engine-0"),
            ("http://h:1\nERROR forged", "http://h:1\\nERROR forged"),
            ("a\r\nb\tc", "a\\r\\nb\\tc"),
            ("esc\u{1b}[31m", "esc\\u{1b}[31m"),
            ("nel\u{85}ls\u{2028}ps\u{2029}", "nel\\u{85}ls\\u{2028}ps\\u{2029}"),
            ("back\\nslash", "back\\\\nslash"),
            ("ünïcode 模型", "ünïcode 模型"),
        ];
        for (raw, shown) in cases {
            let out = Escaped(raw).to_string();
            assert_eq!(out, shown, "{raw:?}");
            assert!(!out.contains(['\n', '\r', '\u{2028}', '\u{2029}']), "{raw:?}");
        }
    }
}
