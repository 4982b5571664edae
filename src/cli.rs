//! The `shardgate` command line: its subcommands, and `serve`'s engine flags split off before
//! clap sees them (clap refuses flags it does not know; `serve` passes them to the engines).

use std::ffi::OsString;

use clap::{CommandFactory, Parser, Subcommand};

use crate::config::{DemoArgs, LaunchArgs, TemplateArgs};
use crate::serve::args::{self, ServeArgs};

#[derive(Parser, Debug)]
#[command(name = "shardgate", version, about = "Thread-per-core LLM serving gateway")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start headless engines (vLLM, TokenSpeed, or the simulator) and the gateway in front of
    /// them, and keep the engines alive: the way to run a model.
    Serve(Box<ServeArgs>),
    /// Serve the OpenAI API in front of headless engines started by hand (`ipc://` ZMQ workers).
    Launch(Box<LaunchArgs>),
    /// Run the embedded default: the engine simulator plus the gateway on a real tokenizer.
    Demo(DemoArgs),
    /// Render chat prompts as the gateway would: chat request bodies (JSON Lines) on stdin,
    /// one `{"prompt": ...}` or `{"error": ...}` line each on stdout.
    Template(TemplateArgs),
    /// Load generator for any OpenAI-compatible endpoint: TTFT, TPOT, ITL, throughput, goodput
    /// (`bench compare A.json B.json`, `bench sink` for measuring load generators).
    Bench(Box<shardgate_loadgen::BenchCommand>),
}

/// The process's command line, parsed; exits with clap's message when it does not parse.
pub fn parse() -> Cli {
    parse_from(std::env::args_os().collect())
}

pub fn parse_from(argv: Vec<OsString>) -> Cli {
    if argv.get(1).is_none_or(|a| a != "serve") {
        return Cli::parse_from(argv);
    }
    let command = Cli::command();
    let Some(serve) = command.find_subcommand("serve") else {
        return Cli::parse_from(argv);
    };
    let split = match args::split(serve, &argv[2..]) {
        Ok(split) => split,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let mut cli = Cli::parse_from(argv[..2].iter().cloned().chain(split.ours));
    if let Command::Serve(serve) = &mut cli.command {
        serve.engine_args = split.engine;
    }
    cli
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_keeps_its_flags_and_hands_the_rest_to_the_engines() {
        let argv = ["shardgate", "serve", "--backend", "vllm", "--model", "m", "--dtype", "float32", "--port", "9"];
        let cli = parse_from(argv.iter().map(OsString::from).collect());
        let Command::Serve(serve) = cli.command else { panic!("not serve") };
        assert_eq!((serve.backend.as_str(), serve.gateway.port), ("vllm", 9));
        assert_eq!(serve.engine_args, ["--dtype", "float32"]);
        Cli::command().debug_assert();
    }

    /// `--help` documents every flag of the commands that run a gateway.
    #[test]
    fn every_flag_has_help() {
        let cli = Cli::command();
        for name in ["serve", "launch", "demo", "template"] {
            let command = cli.find_subcommand(name).unwrap_or_else(|| panic!("no {name}"));
            let undocumented: Vec<&str> =
                command.get_arguments().filter(|a| a.get_help().is_none()).filter_map(|a| a.get_long()).collect();
            assert!(undocumented.is_empty(), "{name}: flags without help: {undocumented:?}");
        }
    }
}
