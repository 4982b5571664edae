//! The `shardgate` binary: arguments → `Config` → gateway. No logic here.

use shardgate::cli::Command;
use shardgate::config::Config;
use shardgate::startup::StartupError;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging(level: &str) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| format!("warn,shardgate={level}"));
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
}

/// Runs before Rust's runtime makes its first allocation (and with it mimalloc's arena), which
/// is too late for `main` to set how the arena is committed.
#[used]
#[link_section = ".init_array"]
static BEFORE_FIRST_ALLOCATION: extern "C" fn() = {
    extern "C" fn commit_on_demand() {
        shardgate_util::memory::commit_on_demand();
    }
    commit_on_demand
};

fn main() {
    // Before any thread exists (setting a variable is not thread-safe): where gpt-oss's
    // vocabulary file lives (`render::harmony_encoding`).
    shardgate_text::render::harmony_encoding::point_at_cache();
    let cli = shardgate::cli::parse();
    // Each command's own error type; all of them end here as `error: {e}`.
    let result: Result<(), Box<dyn std::error::Error>> = match cli.command {
        Command::Serve(args) => {
            init_logging(&args.gateway.log_level);
            shardgate::serve::run(*args).map_err(Into::into)
        }
        Command::Launch(args) => {
            init_logging(&args.gateway.log_level);
            Config::from_launch(&args).map_err(StartupError::from).and_then(shardgate::gateway::run).map_err(Into::into)
        }
        Command::Demo(args) => {
            init_logging(&args.log_level);
            shardgate::demo::run(&args).map_err(Into::into)
        }
        Command::Template(args) => {
            init_logging("warn");
            shardgate::inspect::render_templates(&args).map_err(Into::into)
        }
        Command::Bench(cmd) => {
            init_logging("warn");
            shardgate_loadgen::dispatch(&cmd).map_err(Into::into)
        }
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        tracing::error!("{e}");
        std::process::exit(2);
    }
}
