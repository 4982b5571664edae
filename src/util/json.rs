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

/// Python's `repr(float)`: shortest round-trip digits; scientific notation when the exponent is
/// below -4 or at least 16, as `float_repr_style = 'short'` does.
fn push_python_float(out: &mut String, v: f64) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(v);
    // ryu gives e.g. "1e16", "1.5e-5", "0.001", "123.0"; Python wants "1e+16", "1.5e-05".
    match s.find('e') {
        None => out.push_str(s),
        Some(pos) => {
            let (mantissa, exp) = s.split_at(pos);
            let exp: i32 = exp[1..].parse().unwrap_or(0);
            if (-4..16).contains(&exp) {
                push_positional(out, mantissa, exp);
            } else {
                let mantissa = mantissa.strip_suffix(".0").unwrap_or(mantissa);
                out.push_str(mantissa);
                out.push('e');
                out.push(if exp < 0 { '-' } else { '+' });
                let abs = exp.unsigned_abs();
                if abs < 10 {
                    out.push('0');
                }
                push_int(out, abs);
            }
        }
    }
}

/// Rewrites ryu's `d.ddd` mantissa with exponent `exp` in positional form.
fn push_positional(out: &mut String, mantissa: &str, exp: i32) {
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    if negative {
        out.push('-');
    }
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
