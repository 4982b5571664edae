//! The files of a run, next to each other in --result-dir: `{stem}.json` (the result, vLLM's
//! keys), `{stem}.requests.jsonl` (one raw record per request) and `{stem}.{plot}.svg`. The
//! stem is vLLM's result-file name unless --result-filename gives one.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::analysis::Analysis;
use super::args::BenchArgs;
use super::error::ResultFileError;
use super::plot;
use super::record::{write_jsonl_line, Derived, RequestRecord};
use super::report::{result_json, Header};
use super::workload::Prompt;

/// Python's `str(float)` for the rate in vLLM's file name: "inf", "20.0", "2.5".
fn rate_word(rate: Option<f64>) -> String {
    match rate {
        None => "inf".into(),
        Some(r) if r.fract() == 0.0 => format!("{r:.1}"),
        Some(r) => format!("{r}"),
    }
}

fn stem(args: &BenchArgs, h: &Header) -> String {
    if let Some(name) = &args.result_filename {
        return name.strip_suffix(".json").unwrap_or(name).to_string();
    }
    let concurrency = h.max_concurrency.map_or_else(String::new, |c| format!("-concurrency{c}"));
    let model = h.model_id.rsplit('/').next().unwrap_or(h.model_id);
    let label = h.label.unwrap_or(h.backend);
    format!("{label}-{}qps{concurrency}-{model}-{}", rate_word(h.request_rate), h.date)
}

/// Writes every file; returns their paths.
pub fn write_all(
    args: &BenchArgs,
    dir: &Path,
    h: &Header,
    a: &Analysis,
    records: &[RequestRecord],
    prompts: &[Prompt],
) -> Result<Vec<PathBuf>, ResultFileError> {
    std::fs::create_dir_all(dir).map_err(|source| ResultFileError::CreateDir { dir: dir.to_path_buf(), source })?;
    let stem = stem(args, h);
    let mut written = Vec::new();
    let json_path = dir.join(format!("{stem}.json"));
    let result = result_json(h, a, records, args.save_detailed);
    if args.append_result {
        append_json(&json_path, &result)?;
    } else {
        let json = serde_json::to_string_pretty(&result).unwrap_or_default();
        std::fs::write(&json_path, json + "\n")
            .map_err(|source| ResultFileError::Write { path: json_path.clone(), source })?;
    }
    written.push(json_path);
    let jsonl_path = dir.join(format!("{stem}.requests.jsonl"));
    write_jsonl(&jsonl_path, a, records, prompts)?;
    written.push(jsonl_path);
    if !args.no_plots {
        for (name, svg) in plot::run_plots(records, a) {
            let path = dir.join(format!("{stem}.{name}.svg"));
            std::fs::write(&path, svg).map_err(|source| ResultFileError::Write { path: path.clone(), source })?;
            written.push(path);
        }
    }
    Ok(written)
}

/// vLLM's --append-result: the result on one line, after a newline when the file has text.
fn append_json(path: &Path, result: &serde_json::Value) -> Result<(), ResultFileError> {
    let fail = |source| ResultFileError::Append { path: path.to_path_buf(), source };
    let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(fail)?;
    let separator = if file.metadata().map_err(fail)?.len() > 0 { "\n" } else { "" };
    file.write_all(format!("{separator}{result}").as_bytes()).map_err(fail)
}

fn write_jsonl(
    path: &Path,
    a: &Analysis,
    records: &[RequestRecord],
    prompts: &[Prompt],
) -> Result<(), ResultFileError> {
    let fail = |source| ResultFileError::Write { path: path.to_path_buf(), source };
    let mut out = BufWriter::new(File::create(path).map_err(fail)?);
    let mut line = String::new();
    for (r, m) in records.iter().zip(&a.metrics) {
        let prompt = prompts.get(r.prompt_index as usize);
        let derived = Derived {
            input_tokens: m.as_ref().map_or_else(|| prompt.map_or(0, |p| p.input_tokens), |m| m.input_tokens),
            output_tokens: m.as_ref().map_or(0, |m| m.output_tokens),
            requested_output_tokens: prompt.map_or(0, |p| p.output_tokens),
            tokens_per_chunk: m.as_ref().map_or(&[], |m| &m.tokens_per_chunk),
            tokens_per_chunk_source: m.as_ref().map_or("none", |m| m.tokens_per_chunk_source.name()),
        };
        line.clear();
        write_jsonl_line(&mut line, r, &derived);
        out.write_all(line.as_bytes()).map_err(fail)?;
    }
    out.flush().map_err(fail)
}
