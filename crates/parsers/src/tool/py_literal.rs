//! Python literals (and keyword-only calls), for formats that write tool
//! calls as Python: `[get_weather(city="SF")]`, `[{'name': 'f', ...}]`.
//!
//! Only literals: strings (all quote styles, `r`/`b`/`u` prefixes, adjacent
//! concatenation), numbers, `True`/`False`/`None`, lists, tuples, sets and
//! dicts. No expressions are evaluated. [`Balance`] finds where a bracketed
//! literal ends while it streams in.

use crate::limits;
use serde_json::{Map, Number, Value};

/// A call written as `name(key=value, ...)`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PyCall {
    pub name: String,
    pub arguments: Map<String, Value>,
}

/// Not a literal (the text or where it went wrong does not matter to callers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotLiteral;

type Parsed<T> = Result<T, NotLiteral>;

/// Parses `text` as exactly one literal (surrounding whitespace allowed).
pub(crate) fn parse_value(text: &str) -> Parsed<Value> {
    let mut parser = Parser { text, pos: 0, depth: 0 };
    let value = parser.value()?;
    parser.end()?;
    Ok(value)
}

/// Parses `[call, call, ...]` (a trailing comma is allowed).
pub(crate) fn parse_call_list(text: &str) -> Parsed<Vec<PyCall>> {
    let mut parser = Parser { text, pos: 0, depth: 0 };
    parser.expect('[')?;
    let mut calls = Vec::new();
    loop {
        parser.skip_blank();
        if parser.eat(']') {
            break;
        }
        calls.push(parser.call()?);
        parser.skip_blank();
        if !parser.eat(',') {
            parser.expect(']')?;
            break;
        }
    }
    parser.end()?;
    Ok(calls)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_blank(&mut self) {
        self.pos = self.text.len() - self.rest().trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Parsed<()> {
        self.skip_blank();
        if self.eat(c) {
            Ok(())
        } else {
            Err(NotLiteral)
        }
    }

    fn end(&mut self) -> Parsed<()> {
        self.skip_blank();
        if self.rest().is_empty() {
            Ok(())
        } else {
            Err(NotLiteral)
        }
    }

    fn identifier(&mut self) -> &str {
        let start = self.pos;
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(self.rest().len());
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn call(&mut self) -> Parsed<PyCall> {
        self.skip_blank();
        let name = self.identifier().to_string();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(NotLiteral);
        }
        self.expect('(')?;
        let mut arguments = Map::new();
        loop {
            self.skip_blank();
            if self.eat(')') {
                break;
            }
            let key = self.identifier().to_string();
            if key.is_empty() {
                // Positional arguments have no parameter name to map to.
                return Err(NotLiteral);
            }
            self.expect('=')?;
            let value = self.value()?;
            arguments.insert(key, value);
            self.skip_blank();
            if !self.eat(',') {
                self.expect(')')?;
                break;
            }
        }
        Ok(PyCall { name, arguments })
    }

    fn value(&mut self) -> Parsed<Value> {
        self.skip_blank();
        self.depth += 1;
        if self.depth > limits::tool_arguments_depth_max {
            return Err(NotLiteral);
        }
        let value = match self.peek().ok_or(NotLiteral)? {
            '[' => self.sequence('[', ']').map(Value::Array),
            '(' => self.sequence('(', ')').map(Value::Array),
            '{' => self.dict_or_set(),
            '\'' | '"' => self.strings(),
            c if c.is_ascii_digit() || matches!(c, '-' | '+' | '.') => self.number(),
            _ => self.word(),
        };
        self.depth -= 1;
        value
    }

    fn word(&mut self) -> Parsed<Value> {
        let rest = self.rest();
        // A string prefix: r'..', b"..", u'..', rb'..'.
        let prefix_len = rest.find(['\'', '"']).filter(|&i| i <= 2 && rest[..i].chars().all(|c| "rRbBuU".contains(c)));
        if let Some(len) = prefix_len.filter(|&len| len > 0) {
            return self.strings_after_prefix(len);
        }
        let word = self.identifier();
        match word {
            "True" | "true" => Ok(Value::Bool(true)),
            "False" | "false" => Ok(Value::Bool(false)),
            "None" | "null" => Ok(Value::Null),
            _ => Err(NotLiteral),
        }
    }

    fn sequence(&mut self, open: char, close: char) -> Parsed<Vec<Value>> {
        self.expect(open)?;
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            if self.eat(close) {
                return Ok(items);
            }
            items.push(self.value()?);
            self.skip_blank();
            if !self.eat(',') {
                self.expect(close)?;
                return Ok(items);
            }
        }
    }

    fn dict_or_set(&mut self) -> Parsed<Value> {
        self.expect('{')?;
        let mut map = Map::new();
        let mut set = Vec::new();
        loop {
            self.skip_blank();
            if self.eat('}') {
                break;
            }
            let key = self.value()?;
            self.skip_blank();
            if self.eat(':') {
                if !set.is_empty() {
                    return Err(NotLiteral);
                }
                let value = self.value()?;
                map.insert(key_text(key)?, value);
            } else {
                if !map.is_empty() {
                    return Err(NotLiteral);
                }
                set.push(key);
            }
            self.skip_blank();
            if !self.eat(',') {
                self.expect('}')?;
                break;
            }
        }
        Ok(if set.is_empty() { Value::Object(map) } else { Value::Array(set) })
    }

    /// One or more adjacent string literals, concatenated.
    fn strings(&mut self) -> Parsed<Value> {
        self.strings_after_prefix(0)
    }

    fn strings_after_prefix(&mut self, prefix_len: usize) -> Parsed<Value> {
        let mut text = String::new();
        let mut prefix_len = prefix_len;
        loop {
            let raw = self.rest()[..prefix_len].contains(['r', 'R']);
            self.pos += prefix_len;
            text.push_str(&self.string(raw)?);
            let save = self.pos;
            self.skip_blank();
            match self.peek() {
                Some('\'' | '"') => prefix_len = 0,
                _ => {
                    self.pos = save;
                    return Ok(Value::String(text));
                }
            }
        }
    }

    fn string(&mut self, raw: bool) -> Parsed<String> {
        let quote = self.peek().ok_or(NotLiteral)?;
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        let delimiter = if self.rest().starts_with(&triple) { triple.as_str() } else { &triple[..1] };
        self.pos += delimiter.len();
        let mut out = String::new();
        loop {
            let rest = self.rest();
            if rest.starts_with(delimiter) {
                self.pos += delimiter.len();
                return Ok(out);
            }
            let c = rest.chars().next().ok_or(NotLiteral)?;
            if c == '\\' {
                let used = unescape(&rest[1..], raw, &mut out)?;
                self.pos += 1 + used;
            } else {
                out.push(c);
                self.pos += c.len_utf8();
            }
        }
    }

    fn number(&mut self) -> Parsed<Value> {
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_')))
            .unwrap_or(rest.len());
        let literal: String = rest[..len].chars().filter(|&c| c != '_').collect();
        self.pos += len;
        let literal = literal.strip_prefix('+').unwrap_or(&literal);
        if let Ok(n) = literal.parse::<i64>() {
            return Ok(Value::from(n));
        }
        if let Ok(n) = literal.parse::<u64>() {
            return Ok(Value::from(n));
        }
        let is_float_syntax = literal.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
        let float = literal.parse::<f64>().ok().filter(|_| is_float_syntax);
        float.and_then(Number::from_f64).map(Value::Number).ok_or(NotLiteral)
    }
}

/// A dict key as a JSON object key.
fn key_text(key: Value) -> Parsed<String> {
    match key {
        Value::String(text) => Ok(text),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(if b { "True" } else { "False" }.to_string()),
        _ => Err(NotLiteral),
    }
}

/// Decodes the escape after a backslash; returns the bytes used after it.
fn unescape(text: &str, raw: bool, out: &mut String) -> Parsed<usize> {
    let c = text.chars().next().ok_or(NotLiteral)?;
    if raw {
        out.push('\\');
        out.push(c);
        return Ok(c.len_utf8());
    }
    let simple = match c {
        'n' => Some('\n'),
        't' => Some('\t'),
        'r' => Some('\r'),
        '0' => Some('\0'),
        'a' => Some('\u{07}'),
        'b' => Some('\u{08}'),
        'f' => Some('\u{0c}'),
        'v' => Some('\u{0b}'),
        '\\' | '\'' | '"' => Some(c),
        _ => None,
    };
    if let Some(decoded) = simple {
        out.push(decoded);
        return Ok(1);
    }
    let hex_len = match c {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        '\n' => return Ok(1),
        _ => {
            out.push('\\');
            out.push(c);
            return Ok(c.len_utf8());
        }
    };
    let digits = text.get(1..1 + hex_len).ok_or(NotLiteral)?;
    let code = u32::from_str_radix(digits, 16).map_err(|_| NotLiteral)?;
    out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
    Ok(1 + hex_len)
}

/// Tracks bracket depth over streamed text, skipping string contents, to
/// find where a bracketed literal ends.
#[derive(Debug, Default)]
pub(crate) struct Balance {
    depth: usize,
    /// The open string's delimiter (one or three quote characters).
    string: Option<&'static str>,
    escaped: bool,
}

/// Where [`Balance::feed`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BalanceStatus {
    /// Consumed everything it could; the literal is still open.
    Open,
    /// The outermost bracket closed at the last consumed byte.
    Closed,
}

impl Balance {
    /// Consumes `text` up to the end of the literal or as far as decidable.
    pub(crate) fn feed(&mut self, text: &str, at_end: bool) -> (usize, BalanceStatus) {
        let mut pos = 0;
        while let Some(c) = text[pos..].chars().next() {
            let rest = &text[pos..];
            if let Some(delimiter) = self.string {
                if self.escaped {
                    self.escaped = false;
                } else if c == '\\' {
                    self.escaped = true;
                } else if rest.starts_with(delimiter) {
                    self.string = None;
                    pos += delimiter.len();
                    continue;
                } else if delimiter.len() == 3 && delimiter.starts_with(rest) && !at_end {
                    return (pos, BalanceStatus::Open);
                }
            } else if c == '\'' || c == '"' {
                let triple = if c == '\'' { "'''" } else { "\"\"\"" };
                if triple.starts_with(rest) && !at_end {
                    return (pos, BalanceStatus::Open);
                }
                let delimiter = if rest.starts_with(triple) { triple } else { &triple[..1] };
                self.string = Some(delimiter);
                pos += delimiter.len();
                continue;
            } else if matches!(c, '[' | '(' | '{') {
                self.depth += 1;
            } else if matches!(c, ']' | ')' | '}') {
                self.depth = self.depth.saturating_sub(1);
                if self.depth == 0 {
                    return (pos + 1, BalanceStatus::Closed);
                }
            }
            pos += c.len_utf8();
        }
        (pos, BalanceStatus::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals() {
        let cases: &[(&str, Value)] = &[
            ("'a'", json!("a")),
            (r#""it's""#, json!("it's")),
            ("'''multi\nline'''", json!("multi\nline")),
            (r"'tab\there'", json!("tab\there")),
            (r"r'C:\dir'", json!(r"C:\dir")),
            ("'a' 'b'", json!("ab")),
            ("-3", json!(-3)),
            ("2.5e3", json!(2500.0)),
            ("[1, (2, 3), {'k': None}]", json!([1, [2, 3], {"k": null}])),
            ("{1: True}", json!({"1": true})),
            ("{'x', 'y'}", json!(["x", "y"])),
        ];
        for (text, want) in cases {
            assert_eq!(parse_value(text).as_ref(), Ok(want), "{text}");
        }
        for bad in ["'open", "[1, 2", "x", "1 + 2", "{'a' 1}", "0x1f"] {
            assert!(parse_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn call_lists() {
        let calls = parse_call_list("[get_weather(city='SF', days=3), ping()]").unwrap_or_default();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(Value::Object(calls[0].arguments.clone()), json!({"city": "SF", "days": 3}));
        assert!(parse_call_list("[f('positional')]").is_err());
        assert!(parse_call_list("[Note: see (1)]").is_err());
    }

    #[test]
    fn balance_skips_strings() {
        let mut balance = Balance::default();
        let text = "[f(a=']'), g(b=\"\"\"x)\"\"\")] tail";
        let (used, status) = balance.feed(text, false);
        assert_eq!(status, BalanceStatus::Closed);
        assert_eq!(&text[..used], "[f(a=']'), g(b=\"\"\"x)\"\"\")]");
    }
}
