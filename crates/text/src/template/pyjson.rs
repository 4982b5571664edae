//! Python's `json.dumps` over template values, for transformers' `tojson` filter.
//! Differences from minijinja's built-in `tojson` that change prompts: `, ` and `: ` separators,
//! no HTML escaping, Python float repr, optional indent and key sorting.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

use shardgate_util::json::{push_f64, push_int};

#[derive(Default)]
pub struct Options {
    pub indent: Option<String>,
    pub separators: Option<(String, String)>,
    pub sort_keys: bool,
    pub ensure_ascii: bool,
}

pub fn dumps(value: &Value, opts: &Options) -> Result<String, Error> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.as_str(), k.as_str()),
        // Python: (', ', ': ') without indent, (',', ': ') with indent.
        None if opts.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let mut out = String::new();
    write(&mut out, value, opts, item_sep, key_sep, 0)?;
    Ok(out)
}

fn newline(out: &mut String, opts: &Options, depth: usize) {
    if let Some(indent) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

fn write(
    out: &mut String,
    v: &Value,
    opts: &Options,
    item_sep: &str,
    key_sep: &str,
    depth: usize,
) -> Result<(), Error> {
    if depth > crate::limits::json_depth_max {
        return Err(Error::new(ErrorKind::InvalidOperation, "tojson: value nested too deeply"));
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if v.is_integer() {
                match v.as_i64() {
                    Some(i) => push_int(out, i),
                    None => out.push_str(&v.to_string()),
                }
            } else {
                let f = f64::try_from(v.clone())
                    .map_err(|_| Error::new(ErrorKind::InvalidOperation, "tojson: bad number"))?;
                push_f64(out, f);
            }
        }
        ValueKind::String => push_py_str(out, v.as_str().unwrap_or(""), opts.ensure_ascii),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, opts, depth + 1);
                write(out, item, opts, item_sep, key_sep, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push(']');
        }
        ValueKind::Map | ValueKind::Plain => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if opts.sort_keys {
                keys.sort_by_key(|k| k.to_string());
            }
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, opts, depth + 1);
                let key_text = match key.as_str() {
                    Some(s) => s.to_string(),
                    None => key.to_string(),
                };
                push_py_str(out, &key_text, opts.ensure_ascii);
                out.push_str(key_sep);
                write(out, &v.get_item(key)?, opts, item_sep, key_sep, depth + 1)?;
            }
            newline(out, opts, depth);
            out.push('}');
        }
        ValueKind::Bytes => push_py_str(out, &String::from_utf8_lossy(v.as_bytes().unwrap_or(&[])), opts.ensure_ascii),
        _ => return Err(Error::new(ErrorKind::InvalidOperation, format!("tojson: cannot serialize {}", v.kind()))),
    }
    Ok(())
}

/// A JSON string as Python writes it.
fn push_py_str(out: &mut String, s: &str, ensure_ascii: bool) {
    if !ensure_ascii {
        shardgate_util::json::push_str(out, s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
