//! Hand-rolled JSON output for the hot paths (SSE chunks, error envelopes): escaping strings
//! into a reused buffer avoids a serializer round trip per token.

/// Appends `s` as a JSON string literal (with quotes) to `out`.
/// Escapes what RFC 8259 requires; non-ASCII passes through as UTF-8, as OpenAI and vLLM emit it.
pub fn push_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(hex_digit(b >> 4));
            out.push(hex_digit(b & 0xf));
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

fn hex_digit(n: u8) -> char {
    debug_assert!(n < 16);
    char::from(b"0123456789abcdef"[n as usize])
}

/// Appends an integer.
pub fn push_int(out: &mut String, v: impl itoa::Integer) {
    let mut buf = itoa::Buffer::new();
    out.push_str(buf.format(v));
}

/// Appends a float the way Python's `json.dumps` does for finite values (shortest repr that
/// round-trips, always with a decimal point or exponent). Non-finite values become `NaN`,
/// `Infinity`, `-Infinity` as Python writes them, which JSON clients of vLLM already accept.
pub fn push_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
    } else {
        push_python_float(out, v);
    }
}

/// A float as Python's `str()` prints it (for error messages that quote vLLM's).
pub fn py_float(v: f64) -> String {
    let mut s = String::new();
    push_f64(&mut s, v);
    if s == "Infinity" {
        "inf".into()
    } else if s == "-Infinity" {
        "-inf".into()
    } else if s == "NaN" {
        "nan".into()
    } else {
        s
    }
}

/// Python's `repr(float)`: the shortest digits that round-trip (ryu's), written positionally
/// when the decimal exponent is in [-4, 16) and as `d.ddde±XX` otherwise.
fn push_python_float(out: &mut String, v: f64) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(v);
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (digits, exp) = shortest_digits(s);
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        push_positional(out, &digits, exp);
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push('0');
        }
        push_int(out, abs);
    }
}

/// Significant digits (no leading or trailing zeros; "0" for zero) and the decimal exponent of
/// the first digit, from ryu's output in either of its notations.
fn shortest_digits(s: &str) -> (String, i32) {
    let (mantissa, exp_part) = match s.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = int_part.chars().chain(frac_part.chars()).collect();
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    if digits.is_empty() {
        return ("0".to_string(), 0);
    }
    let exp = int_part.len() as i32 - 1 - leading as i32 + exp_part;
    (digits.to_string(), exp)
}

/// `digits` with the first digit at decimal exponent `exp`, positionally, always with a point.
fn push_positional(out: &mut String, digits: &str, exp: i32) {
    let point = 1 + exp; // digits before the decimal point
    if point <= 0 {
        out.push_str("0.");
        for _ in 0..(-point) {
            out.push('0');
        }
        out.push_str(digits);
    } else if point as usize >= digits.len() {
        out.push_str(digits);
        for _ in 0..(point as usize - digits.len()) {
            out.push('0');
        }
        out.push_str(".0");
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_strings() {
        let cases = [
            ("plain", "\"plain\""),
            ("a\"b\\c", "\"a\\\"b\\\\c\""),
            ("line\nnext\ttab\r", "\"line\\nnext\\ttab\\r\""),
            ("\u{1}\u{1f}", "\"\\u0001\\u001f\""),
            ("héllo 世界 🎉", "\"héllo 世界 🎉\""),
            ("</script>", "\"</script>\""),
        ];
        for (input, expected) in cases {
            let mut out = String::new();
            push_str(&mut out, input);
            assert_eq!(out, expected, "input {input:?}");
            let back: String = serde_json::from_str(&out).unwrap();
            assert_eq!(back, input);
        }
    }

    #[test]
    fn floats_match_python_repr() {
        let cases: [(f64, &str); 14] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-5.625, "-5.625"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e-7, "1.5e-07"),
            (123456789.0, "123456789.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (9999999999999998.0, "9999999999999998.0"),
            (-9999.0, "-9999.0"),
            (-0.0078125, "-0.0078125"),
        ];
        for (v, expected) in cases {
            let mut out = String::new();
            push_f64(&mut out, v);
            assert_eq!(out, expected, "value {v:e}");
        }
    }
}
