//! The `vllm bench serve` (vLLM 0.32) flags that `shardgate bench` has no option for, so that
//! a vLLM command line is never refused by the parser with a bare "unexpected argument": each
//! is either ignored with its reason (one warning line at start) or refused with a message
//! naming the flag and what to use instead. The flags it supports are ordinary options of
//! `BenchArgs`; `docs/bench.md` lists all of them.

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use super::error::FlagError;

/// How many values a flag takes on vLLM's command line.
#[derive(Clone, Copy, Debug)]
enum Arity {
    Switch,
    One,
    Many,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Accepted; the reason it changes nothing here.
    Ignored(&'static str),
    /// Refused; what to use instead.
    Refused(&'static str),
}

#[derive(Debug)]
pub struct ForeignFlag {
    /// Without the leading `--`.
    pub name: &'static str,
    arity: Arity,
    pub disposition: Disposition,
}

const fn flag(name: &'static str, arity: Arity, disposition: Disposition) -> ForeignFlag {
    ForeignFlag { name, arity, disposition }
}

use Arity::{Many, One, Switch};
use Disposition::{Ignored, Refused};

const NOT_TEMPLATED: &str = "prompts are never templated by the client; the server applies its chat template \
     (send template arguments with --extra-body '{\"chat_template_kwargs\": {...}}')";
const OTHER_DATASET: &str = "its dataset is not supported: convert the prompts to JSON Lines \
     {\"prompt\": ..., \"output_tokens\": N} and use --dataset-name custom --dataset-path FILE";
const MULTIMODAL: &str = "text prompts only: use --dataset-name random, sharegpt, custom or prefix_repetition";

pub const FOREIGN_FLAGS: &[ForeignFlag] = &[
    flag("trust-remote-code", Switch, Ignored("the tokenizer is a tokenizer.json; no model code runs")),
    flag("no-stream", Switch, Ignored("it concerns Hugging Face hub datasets only, which are not read")),
    flag("skip-chat-template", Switch, Ignored(NOT_TEMPLATED)),
    flag("chat-template-kwargs", One, Ignored(NOT_TEMPLATED)),
    flag(
        "request-id-prefix",
        One,
        Ignored("no x-request-id header is sent; the server assigns request ids (add one with --header)"),
    ),
    flag("insecure", Switch, Ignored("plain http:// only; there is no TLS certificate to verify")),
    flag("skip-tokenizer-init", Switch, Ignored("the tokenizer builds exact-length prompts and cross-checks counts")),
    flag(
        "plot-timeline",
        Switch,
        Ignored("the SVG plots (ttft_over_time, itl_over_time, ...) are written with every result"),
    ),
    flag("timeline-itl-thresholds", One, Ignored("no HTML timeline is drawn (see --plot-timeline)")),
    flag(
        "plot-dataset-stats",
        Switch,
        Ignored("every request's input and output lengths are in {stem}.requests.jsonl"),
    ),
    flag("random-batch-size", One, Ignored("it concerns embedding backends only, which are not supported")),
    flag("no-reranker", Switch, Ignored("it concerns reranker backends only, which are not supported")),
    flag("use-beam-search", Switch, Refused("one sampled choice per request; no beam search")),
    flag("logprobs", One, Refused("--extra-body '{\"logprobs\": N}'")),
    flag("probe-request-rate", One, Refused("a second `shardgate bench` with --request-rate R, run alongside")),
    flag("profile", Switch, Refused("the server's own profiler, started and stopped around the run")),
    flag("self-timed", Switch, Refused("trace replay is not supported; use --request-rate with --arrival-process")),
    flag("no-self-timed", Switch, Refused("trace replay is not supported; use --request-rate with --arrival-process")),
    flag("lora-modules", Many, Refused("one model per run: name the adapter with --model")),
    flag("lora-assignment", One, Refused("one model per run: name the adapter with --model")),
    flag("ramp-up-strategy", One, Refused("one run per rate with --request-rate R (no ramp-up)")),
    flag("ramp-up-start-rps", One, Refused("one run per rate with --request-rate R (no ramp-up)")),
    flag("ramp-up-end-rps", One, Refused("one run per rate with --request-rate R (no ramp-up)")),
    flag("enable-multimodal-chat", Switch, Refused(MULTIMODAL)),
    flag("custom-ensure-client-side-data", Switch, Refused(MULTIMODAL)),
    flag("random-mm-base-items-per-request", One, Refused(MULTIMODAL)),
    flag("random-mm-num-mm-items-range-ratio", One, Refused(MULTIMODAL)),
    flag("random-mm-limit-mm-per-prompt", One, Refused(MULTIMODAL)),
    flag("random-mm-bucket-config", One, Refused(MULTIMODAL)),
    flag("asr-max-audio-len-sec", One, Refused(MULTIMODAL)),
    flag("asr-min-audio-len-sec", One, Refused(MULTIMODAL)),
    flag("spec-bench-output-len", One, Refused(OTHER_DATASET)),
    flag("spec-bench-category", One, Refused(OTHER_DATASET)),
    flag("speed-bench-dataset-subset", One, Refused(OTHER_DATASET)),
    flag("speed-bench-output-len", One, Refused(OTHER_DATASET)),
    flag("speed-bench-category", One, Refused(OTHER_DATASET)),
    flag("timed-trace-chunk-hash-size", One, Refused(OTHER_DATASET)),
    flag("timed-trace-sec-multiplier", One, Refused(OTHER_DATASET)),
    flag("timed-trace-label-timestamp", One, Refused(OTHER_DATASET)),
    flag("timed-trace-label-input-length", One, Refused(OTHER_DATASET)),
    flag("timed-trace-label-output-length", One, Refused(OTHER_DATASET)),
    flag("timed-trace-label-hash-ids", One, Refused(OTHER_DATASET)),
    flag("blazedit-min-distance", One, Refused(OTHER_DATASET)),
    flag("blazedit-max-distance", One, Refused(OTHER_DATASET)),
    flag("hf-subset", One, Refused(OTHER_DATASET)),
    flag("hf-split", One, Refused(OTHER_DATASET)),
    flag("hf-name", One, Refused(OTHER_DATASET)),
    flag("hf-output-len", One, Refused(OTHER_DATASET)),
    flag("bfcl-categories", One, Refused(OTHER_DATASET)),
];

/// The foreign flags present on a command line, in table order.
#[derive(Clone, Debug, Default)]
pub struct ForeignFlags {
    given: Vec<&'static ForeignFlag>,
}

impl ForeignFlags {
    /// The first refused flag as an error; else the warning line for the ignored ones.
    pub fn check(&self) -> Result<Option<String>, FlagError> {
        let mut ignored = Vec::new();
        for f in &self.given {
            match f.disposition {
                Refused(instead) => return Err(FlagError::Refused { name: f.name, instead }),
                Ignored(reason) => ignored.push(format!("--{} ({reason})", f.name)),
            }
        }
        Ok((!ignored.is_empty()).then(|| format!("ignoring vllm bench serve flags: {}", ignored.join("; "))))
    }
}

impl FromArgMatches for ForeignFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given = FOREIGN_FLAGS.iter().filter(|f| m.value_source(f.name) == Some(ValueSource::CommandLine)).collect();
        Ok(ForeignFlags { given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for ForeignFlags {
    fn augment_args(cmd: Command) -> Command {
        FOREIGN_FLAGS.iter().fold(cmd, |cmd, f| {
            let arg = Arg::new(f.name).long(f.name).hide(true);
            cmd.arg(match f.arity {
                Switch => arg.action(ArgAction::SetTrue),
                One => arg.action(ArgAction::Set).num_args(1).allow_hyphen_values(true),
                Many => arg.action(ArgAction::Append).num_args(1..),
            })
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        foreign: ForeignFlags,
        #[arg(long)]
        seed: Option<u64>,
    }

    fn check(argv: &[&str]) -> Result<Option<String>, String> {
        let cli = Cli::try_parse_from(["bench"].iter().chain(argv)).map_err(|e| e.to_string())?;
        cli.foreign.check().map_err(|e| e.to_string())
    }

    #[test]
    fn each_foreign_flag_is_ignored_or_refused_by_name() {
        let cases: &[(&[&str], Result<&str, &str>)] = &[
            (&["--seed", "1"], Ok("")),
            (&["--trust-remote-code", "--seed", "1"], Ok("--trust-remote-code (the tokenizer")),
            (&["--request-id-prefix", "run-", "--insecure"], Ok("--request-id-prefix (no x-request-id")),
            (&["--profile"], Err("--profile (a vllm bench serve flag) is not supported")),
            (&["--lora-modules", "a", "b", "--seed", "2"], Err("--lora-modules")),
            (&["--ramp-up-start-rps", "-1"], Err("--ramp-up-start-rps")),
            (&["--trust-remote-code", "--hf-split", "train"], Err("--hf-split")),
        ];
        for (argv, want) in cases {
            match (check(argv), want) {
                (Ok(None), Ok("")) => {}
                (Ok(Some(line)), Ok(start)) if !start.is_empty() => {
                    assert!(line.starts_with("ignoring vllm bench serve flags: "), "{argv:?}: {line}");
                    assert!(line.contains(start), "{argv:?}: {line}");
                }
                (Err(e), Err(start)) => assert!(e.starts_with(start) && e.contains("use instead"), "{argv:?}: {e}"),
                (got, _) => panic!("{argv:?}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn names_are_unique_and_bare() {
        for (i, f) in FOREIGN_FLAGS.iter().enumerate() {
            assert!(!f.name.starts_with('-') && !f.name.is_empty(), "{}", f.name);
            assert!(FOREIGN_FLAGS[..i].iter().all(|g| g.name != f.name), "duplicate {}", f.name);
        }
    }
}
