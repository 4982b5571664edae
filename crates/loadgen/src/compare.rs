//! `shardgate bench compare A.json B.json`: two result files side by side, every number both
//! have (nested objects flattened to `parent.key`), with the ratio B / A. Reads ours and
//! `vllm bench serve`'s (or `vllm-rs`'s) results alike, since they share key names.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::args::CompareArgs;
use super::error::ResultFileError;

/// Identity keys shown first, as text.
const CONTEXT_KEYS: [&str; 8] =
    ["date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency", "label"];

pub fn compare(args: &CompareArgs) -> Result<(), ResultFileError> {
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    print!("{}", compare_text(&a, &b, &args.a.display().to_string(), &args.b.display().to_string(), &args.filter));
    Ok(())
}

fn load(path: &Path) -> Result<Value, ResultFileError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ResultFileError::Read { path: path.to_path_buf(), source })?;
    // `--append-result` files hold one JSON document per line: compare the last.
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(last))
        .map_err(|source| ResultFileError::NotAResult { path: path.to_path_buf(), source })
}

/// A number and whether the JSON wrote it as an integer.
type Leaf = (String, f64, bool);

/// Numeric leaves in document order, nested keys joined with '.'; arrays are skipped.
fn flatten(v: &Value, prefix: &str, out: &mut Vec<Leaf>) {
    let Value::Object(map) = v else { return };
    for (k, child) in map {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match child {
            Value::Number(n) => out.push((key, n.as_f64().unwrap_or(f64::NAN), !n.is_f64())),
            Value::Object(_) => flatten(child, &key, out),
            _ => {}
        }
    }
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn number(x: f64, integer: bool) -> String {
    if integer {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

pub fn compare_text(a: &Value, b: &Value, name_a: &str, name_b: &str, filter: &[String]) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "A: {name_a}\nB: {name_b}\n");
    let _ = writeln!(t, "{:<46} {:>16} {:>16} {:>9} {:>9}", "", "A", "B", "B/A", "change");
    for key in CONTEXT_KEYS {
        if a.get(key).is_some() || b.get(key).is_some() {
            let _ = writeln!(t, "{key:<46} {:>16} {:>16}", shown(a.get(key)), shown(b.get(key)));
        }
    }
    let (mut left, mut right) = (Vec::new(), Vec::new());
    flatten(a, "", &mut left);
    flatten(b, "", &mut right);
    let wanted = |k: &str| filter.is_empty() || filter.iter().any(|f| k.contains(f.as_str()));
    for (key, x, x_int) in left.iter().filter(|(k, _, _)| wanted(k) && !CONTEXT_KEYS.contains(&k.as_str())) {
        let Some(&(_, y, y_int)) = right.iter().find(|(k, _, _)| k == key) else { continue };
        let (ratio, change) = if *x != 0.0 && x.is_finite() && y.is_finite() {
            (format!("{:.3}", y / x), format!("{:+.1}%", (y / x - 1.0) * 100.0))
        } else {
            ("-".into(), "-".into())
        };
        let _ = writeln!(t, "{key:<46} {:>16} {:>16} {ratio:>9} {change:>9}", number(*x, *x_int), number(y, y_int));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn side_by_side_with_ratios() {
        let a = json!({"backend": "openai", "request_rate": "inf", "completed": 100, "median_ttft_ms": 2.0,
                       "steady_state": {"request_throughput": 50.0}, "ttfts": [1.0], "only_a": 1});
        let b = json!({"backend": "openai", "request_rate": "inf", "completed": 100, "median_ttft_ms": 1.5,
                       "steady_state": {"request_throughput": 55.0}, "only_b": 2});
        let text = compare_text(&a, &b, "a.json", "b.json", &[]);
        let row =
            |key: &str| text.lines().find(|l| l.starts_with(key)).map(|l| l.split_whitespace().collect::<Vec<_>>());
        assert_eq!(row("median_ttft_ms"), Some(vec!["median_ttft_ms", "2.000", "1.500", "0.750", "-25.0%"]));
        assert_eq!(row("completed"), Some(vec!["completed", "100", "100", "1.000", "+0.0%"]));
        assert_eq!(row("steady_state.request_throughput").map(|r| r[3].to_string()), Some("1.100".into()));
        assert_eq!(row("backend"), Some(vec!["backend", "openai", "openai"]));
        assert!(row("only_a").is_none() && row("ttfts").is_none());
        let filtered = compare_text(&a, &b, "a", "b", &["ttft".into()]);
        assert!(filtered.contains("median_ttft_ms") && !filtered.contains("\ncompleted"));
    }
}
