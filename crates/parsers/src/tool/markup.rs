//! Reading markup headers: the text between an opening literal (`<invoke`,
//! `<function=`, `<|open|>call`) and its end marker, the name or key written
//! there, attributes and XML entities. Shared by the tagged formats.

use crate::limits;
use crate::stream_core::{floor_char_boundary, leading_whitespace_len, scan, Scan};

/// Ends a header; `consume: false` leaves it for what follows.
pub(crate) struct HeaderEnd {
    pub text: &'static str,
    pub consume: bool,
}

/// How a name (or parameter key) is written in its header.
pub(crate) enum NameRule {
    /// The header text itself: `<function=NAME>`.
    Bare,
    /// An attribute: `<invoke name="NAME">`.
    Attribute(&'static str),
    /// Kimi's `functions.NAME:INDEX`.
    KimiFunctionId,
    /// `TYPE<sep>NAME`: the text after the separator.
    AfterSeparator(&'static str),
}

pub(crate) struct Header {
    pub open: &'static str,
    pub ends: &'static [HeaderEnd],
    pub name: NameRule,
}

pub(crate) enum HeaderParse {
    Parsed {
        /// Byte range of the header text (after leading blanks).
        capture: (usize, usize),
        consumed: usize,
    },
    Wait,
    Invalid,
}

/// Finds the end of a header within [`limits::tool_header_bytes_max`] bytes of `text`.
pub(crate) fn parse_header(text: &str, header: &Header, at_end: bool) -> HeaderParse {
    if matches!(header.name, NameRule::Attribute(_)) {
        // `<invoke name=..>` but not `<invoked>`: attributes follow a blank
        // (or the header ends at once).
        match text.chars().next() {
            None if at_end => return HeaderParse::Invalid,
            None => return HeaderParse::Wait,
            Some(c) if !c.is_whitespace() && !header.ends.iter().any(|e| text.starts_with(e.text)) => {
                let could_end = header.ends.iter().any(|e| e.text.starts_with(text));
                return if could_end && !at_end { HeaderParse::Wait } else { HeaderParse::Invalid };
            }
            Some(_) => {}
        }
    }
    let lead = leading_whitespace_len(text);
    let ends: Vec<&str> = header.ends.iter().map(|e| e.text).collect();
    let longest_end = ends.iter().map(|e| e.len()).max().unwrap_or(0);
    let window = &text[lead..floor_char_boundary(text, lead + limits::tool_header_bytes_max + longest_end)];
    match scan(window, &ends) {
        Scan::Found { at, index } if at <= limits::tool_header_bytes_max => {
            let end = &header.ends[index];
            let consumed = lead + at + if end.consume { end.text.len() } else { 0 };
            HeaderParse::Parsed { capture: (lead, lead + at), consumed }
        }
        Scan::Partial { safe_len } if safe_len <= limits::tool_header_bytes_max && !at_end => HeaderParse::Wait,
        _ => HeaderParse::Invalid,
    }
}

pub(crate) fn derive_name(header_text: &str, rule: &NameRule) -> Option<String> {
    let name = match rule {
        NameRule::Bare => header_text.trim().to_string(),
        NameRule::Attribute(attribute) => attribute_value(header_text, attribute)?.trim().to_string(),
        NameRule::KimiFunctionId => {
            let id = header_text.trim();
            let id = id.strip_prefix("functions.").unwrap_or(id);
            let name = match id.rsplit_once(':') {
                Some((name, index)) if index.chars().all(|c| c.is_ascii_digit()) => name,
                _ => id,
            };
            name.trim().to_string()
        }
        NameRule::AfterSeparator(separator) => {
            header_text.split_once(separator).map_or(header_text, |(_, name)| name).trim().to_string()
        }
    };
    Some(name)
}

/// The value of `key="..."` (or `'...'`, or unquoted) in an attribute list,
/// with XML entities decoded.
pub(crate) fn attribute_value(attributes: &str, key: &str) -> Option<String> {
    let mut rest = attributes;
    loop {
        rest = rest.trim_start();
        let name_len = rest.find(|c: char| c == '=' || c.is_whitespace())?;
        let name = &rest[..name_len];
        rest = rest[name_len..].trim_start();
        rest = rest.strip_prefix('=')?.trim_start();
        let (value, after) = match rest.chars().next()? {
            quote @ ('"' | '\'') => {
                let body = &rest[1..];
                let end = body.find(quote)?;
                (&body[..end], &body[end + 1..])
            }
            _ => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if name == key {
            return Some(decode_entities(value));
        }
        rest = after;
    }
}

/// Decodes the five predefined XML entities and numeric references.
pub(crate) fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let entity_end = rest[..floor_char_boundary(rest, 12)].find(';');
        let decoded = entity_end.and_then(|end| {
            let decoded = match &rest[1..end] {
                "lt" => '<',
                "gt" => '>',
                "amp" => '&',
                "quot" => '"',
                "apos" => '\'',
                numeric => {
                    let code = match numeric.strip_prefix("#x").or_else(|| numeric.strip_prefix("#X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => numeric.strip_prefix('#')?.parse().ok()?,
                    };
                    char::from_u32(code)?
                }
            };
            Some((decoded, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_entities() {
        let attributes = r#" tool="a&amp;b" index="0" key='k' bare=x"#;
        assert_eq!(attribute_value(attributes, "tool").as_deref(), Some("a&b"));
        assert_eq!(attribute_value(attributes, "key").as_deref(), Some("k"));
        assert_eq!(attribute_value(attributes, "bare").as_deref(), Some("x"));
        assert_eq!(attribute_value(attributes, "missing"), None);
        assert_eq!(decode_entities("&lt;a&gt; &#65;&#x42; &bogus; &"), "<a> AB &bogus; &");
        assert_eq!(decode_entities("&é日本語&;&#xD800;"), "&é日本語&;&#xD800;");
    }

    #[test]
    fn names() {
        assert_eq!(derive_name(" functions.get_weather:3 ", &NameRule::KimiFunctionId).as_deref(), Some("get_weather"));
        assert_eq!(
            derive_name("function<｜tool▁sep｜>get_weather", &NameRule::AfterSeparator("<｜tool▁sep｜>")).as_deref(),
            Some("get_weather")
        );
    }
}
