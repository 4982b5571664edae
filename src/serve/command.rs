//! The engine command lines, as SMG's launcher builds them: the launcher's own flags first,
//! then the user's engine flags minus those the launcher sets (dropped, with a warning), except
//! TokenSpeed's `--grammar-backend` and `--enable-output-logprobs`, where the user's value
//! replaces the launcher's default. Also each replica's environment (its GPU slice).
//!
//! Pure: argv in, argv out; nothing here runs a process.

use std::path::{Path, PathBuf};

use super::args::{ConnectionMode, EngineKind};
use super::error::ServeError;
use super::plan::Replica;

/// Flags the launcher sets on a vLLM engine (with vLLM's short forms, which SMG's list misses).
const VLLM_OWNED: &[&str] = &[
    "--model",
    "--headless",
    "--data-parallel-size",
    "-dp",
    "--data-parallel-size-local",
    "-dpl",
    "--data-parallel-address",
    "-dpa",
    "--data-parallel-rpc-port",
    "-dpp",
];
/// Flags the launcher sets on a vLLM API server it starts for a gRPC or HTTP worker.
const VLLM_SERVED_OWNED: &[&str] = &[
    "--model",
    "--headless",
    "--host",
    "--port",
    "--grpc",
    "--data-parallel-address",
    "-dpa",
    "--data-parallel-rpc-port",
    "-dpp",
];
const TOKENSPEED_OWNED: &[&str] = &[
    "--model",
    "--headless",
    "--port",
    "--dist-init-addr",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--zmq-engine-index",
];
const SIM_OWNED: &[&str] = &["--worker-url", "--handshake", "--model-path", "--backend"];
/// TokenSpeed flags the launcher adds unless given: structured outputs and logprobs are off in
/// TokenSpeed by default, and the gateway offers both.
const TOKENSPEED_DEFAULTS: &[(&str, &[&str])] =
    &[("--grammar-backend", &["xgrammar"]), ("--enable-output-logprobs", &[])];

/// The user's engine flags, checked once for all replicas.
#[derive(Debug, PartialEq)]
pub struct EngineFlags {
    /// Passed on, in the order given.
    pub kept: Vec<String>,
    /// Dropped (each a flag with its values, as given), for the warning.
    pub dropped: Vec<String>,
}

/// A flag's name: before any `=`; vLLM's and TokenSpeed's parsers read `_` as `-`.
fn flag_name(token: &str) -> String {
    let name = token.split_once('=').map_or(token, |(n, _)| n);
    match name.strip_prefix("--") {
        Some(long) => format!("--{}", long.replace('_', "-")),
        None => name.to_string(),
    }
}

/// The user's flags as groups: a flag with the values after it (a leading value alone).
fn groups(args: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=args.len() {
        if i == args.len() || super::args::is_flag(&args[i]) {
            out.push(&args[start..i]);
            start = i;
        }
    }
    out.retain(|g| !g.is_empty());
    out
}

fn owned(kind: EngineKind, mode: ConnectionMode) -> &'static [&'static str] {
    match kind {
        EngineKind::Vllm if mode != ConnectionMode::Zmq => VLLM_SERVED_OWNED,
        EngineKind::Vllm => VLLM_OWNED,
        EngineKind::Tokenspeed => TOKENSPEED_OWNED,
        EngineKind::Sim => SIM_OWNED,
    }
}

impl EngineFlags {
    pub fn new(kind: EngineKind, mode: ConnectionMode, user: &[String]) -> EngineFlags {
        let mut flags = EngineFlags { kept: Vec::new(), dropped: Vec::new() };
        for group in groups(user) {
            if owned(kind, mode).contains(&flag_name(&group[0]).as_str()) {
                flags.dropped.push(group.join(" "));
            } else {
                flags.kept.extend(group.iter().cloned());
            }
        }
        flags
    }

    fn has(&self, flag: &str) -> bool {
        self.kept.iter().any(|t| super::args::is_flag(t) && flag_name(t) == flag)
    }

    /// `-tp` / `--tensor-parallel-size` (the last one given), for the replicas' GPU slices.
    pub fn tensor_parallel_size(&self) -> Result<usize, ServeError> {
        let mut size = 1;
        for group in groups(&self.kept) {
            let name = flag_name(&group[0]);
            if name != "-tp" && name != "--tensor-parallel-size" {
                continue;
            }
            let value = match group[0].split_once('=') {
                Some((_, v)) => v,
                None => group.get(1).map_or("", String::as_str),
            };
            size = value.parse().ok().filter(|&n| n > 0).ok_or_else(|| ServeError::TensorParallelSize(value.into()))?;
        }
        Ok(size)
    }
}

/// A process to start: what, with which arguments and extra environment.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// The launcher's arguments for one replica, then the user's.
pub fn argv(
    kind: EngineKind,
    mode: ConnectionMode,
    model: &str,
    replica: &Replica,
    flags: &EngineFlags,
) -> Vec<String> {
    let hs = replica.handshake_port.to_string();
    let port = replica.worker_port.to_string();
    let mut args: Vec<String> = match (kind, mode) {
        // An API server of its own: `--grpc` makes vLLM's CLI serve SMG's servicer instead of
        // its OpenAI routes.
        (EngineKind::Vllm, ConnectionMode::Grpc | ConnectionMode::Http) => {
            let mut args: Vec<String> =
                ["-m", "vllm.entrypoints.cli.main", "serve", model].into_iter().map(String::from).collect();
            if mode == ConnectionMode::Grpc {
                args.push("--grpc".into());
            }
            args.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port]);
            args
        }
        (EngineKind::Vllm, ConnectionMode::Zmq) => vec![
            "-m",
            "vllm.entrypoints.cli.main",
            "serve",
            model,
            "--headless",
            "--data-parallel-size",
            "1",
            "--data-parallel-size-local",
            "1",
            "--data-parallel-address",
            "127.0.0.1",
            "--data-parallel-rpc-port",
            &hs,
        ]
        .into_iter()
        .map(String::from)
        .collect(),
        (EngineKind::Tokenspeed, _) => {
            let store = format!("127.0.0.1:{}", replica.store_port.unwrap_or(0));
            let mut args: Vec<String> = [
                "-m",
                "tokenspeed.cli",
                "serve",
                "--headless",
                "--model",
                model,
                "--port",
                &port,
                "--dist-init-addr",
                &store,
                "--data-parallel-address",
                "127.0.0.1",
                "--data-parallel-rpc-port",
                &hs,
                "--zmq-engine-index",
                "0",
            ]
            .into_iter()
            .map(String::from)
            .collect();
            for (flag, values) in TOKENSPEED_DEFAULTS.iter().filter(|(f, _)| !flags.has(f)) {
                args.push(flag.to_string());
                args.extend(values.iter().map(|v| v.to_string()));
            }
            args
        }
        (EngineKind::Sim, _) => {
            let mut args = vec!["--worker-url".into(), replica.url.clone(), "--model-path".into(), model.into()];
            // A handshake port other than the path's own (the demo moves off a taken one).
            if replica.handshake_port != shardgate_wire::sockdir::derived_handshake_port(&replica.path) {
                args.extend(["--handshake".into(), format!("tcp://127.0.0.1:{hs}")]);
            }
            args
        }
    };
    args.extend(flags.kept.iter().cloned());
    args
}

/// `CUDA_VISIBLE_DEVICES` for replica `replica` of `tp` GPUs: its slice of the visible GPUs
/// when some are listed, else of GPUs 0, 1, ... (SMG's rule).
pub fn cuda_devices(replica: usize, tp: usize, visible: Option<&str>) -> Result<String, ServeError> {
    let pool: Vec<&str> = visible.unwrap_or("").split(',').map(str::trim).filter(|g| !g.is_empty()).collect();
    let first = replica * tp;
    if pool.is_empty() {
        return Ok((first..first + tp).map(|g| g.to_string()).collect::<Vec<_>>().join(","));
    }
    if first + tp > pool.len() {
        return Err(ServeError::GpuPool { visible: pool.len(), replica, tp });
    }
    Ok(pool[first..first + tp].join(","))
}

/// The whole command for one replica. `program` is the Python interpreter, or the simulator.
pub fn command(
    kind: EngineKind,
    mode: ConnectionMode,
    program: &Path,
    model: &str,
    replica: &Replica,
    flags: &EngineFlags,
    visible_gpus: Option<&str>,
) -> Result<EngineCommand, ServeError> {
    let env = match kind {
        EngineKind::Sim => Vec::new(),
        EngineKind::Vllm | EngineKind::Tokenspeed => vec![
            ("CUDA_VISIBLE_DEVICES".into(), cuda_devices(replica.index, flags.tensor_parallel_size()?, visible_gpus)?),
            // Engine output is logged line by line as it comes, not when Python's buffer fills.
            ("PYTHONUNBUFFERED".into(), "1".into()),
        ],
    };
    Ok(EngineCommand { program: program.to_path_buf(), args: argv(kind, mode, model, replica, flags), env })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica() -> Replica {
        let path = "/tmp/sg/engine-31000".to_string();
        Replica {
            index: 0,
            worker_port: 31000,
            handshake_port: shardgate_wire::sockdir::derived_handshake_port(&path),
            url: format!("ipc://{path}"),
            path,
            store_port: Some(45000),
        }
    }

    fn strings(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn engine_command_lines_are_smgs() {
        let r = replica();
        let hs = r.handshake_port;
        // (engine, user flags, argv after the program, dropped)
        let cases: [(EngineKind, &str, String, &[&str]); 8] = [
            (
                EngineKind::Vllm,
                "",
                format!(
                    "-m vllm.entrypoints.cli.main serve M --headless --data-parallel-size 1 \
                     --data-parallel-size-local 1 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {hs}"
                ),
                &[],
            ),
            (
                EngineKind::Vllm,
                "--dtype float32 --data-parallel-size 2 --enforce-eager -dpp 1 --data_parallel_address=x --model N",
                format!(
                    "-m vllm.entrypoints.cli.main serve M --headless --data-parallel-size 1 \
                     --data-parallel-size-local 1 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {hs} \
                     --dtype float32 --enforce-eager"
                ),
                &["--data-parallel-size 2", "-dpp 1", "--data_parallel_address=x", "--model N"],
            ),
            (
                EngineKind::Tokenspeed,
                "",
                format!(
                    "-m tokenspeed.cli serve --headless --model M --port 31000 --dist-init-addr 127.0.0.1:45000 \
                     --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {hs} --zmq-engine-index 0 \
                     --grammar-backend xgrammar --enable-output-logprobs"
                ),
                &[],
            ),
            // The user's --grammar-backend wins, and ours is not added.
            (
                EngineKind::Tokenspeed,
                "--grammar-backend outlines --port 1 --zmq-engine-index=3 --headless",
                format!(
                    "-m tokenspeed.cli serve --headless --model M --port 31000 --dist-init-addr 127.0.0.1:45000 \
                     --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {hs} --zmq-engine-index 0 \
                     --enable-output-logprobs --grammar-backend outlines"
                ),
                &["--port 1", "--zmq-engine-index=3", "--headless"],
            ),
            (
                EngineKind::Tokenspeed,
                "--enable-output-logprobs --tp 2",
                format!(
                    "-m tokenspeed.cli serve --headless --model M --port 31000 --dist-init-addr 127.0.0.1:45000 \
                     --data-parallel-address 127.0.0.1 --data-parallel-rpc-port {hs} --zmq-engine-index 0 \
                     --grammar-backend xgrammar --enable-output-logprobs --tp 2"
                ),
                &[],
            ),
            (EngineKind::Sim, "", "--worker-url ipc:///tmp/sg/engine-31000 --model-path M".into(), &[]),
            (
                EngineKind::Sim,
                "--itl-ms 2 --worker-url ipc:///x --handshake=tcp://h:1 --ttft-ms 5",
                "--worker-url ipc:///tmp/sg/engine-31000 --model-path M --itl-ms 2 --ttft-ms 5".into(),
                &["--worker-url ipc:///x", "--handshake=tcp://h:1"],
            ),
            // A leading value stays where it was.
            (
                EngineKind::Sim,
                "stray --seed -3",
                "--worker-url ipc:///tmp/sg/engine-31000 --model-path M stray --seed -3".into(),
                &[],
            ),
        ];
        for (kind, user, expected, dropped) in cases {
            let flags = EngineFlags::new(kind, ConnectionMode::Zmq, &strings(user));
            assert_eq!(argv(kind, ConnectionMode::Zmq, "M", &r, &flags), strings(&expected), "{kind:?} {user}");
            assert_eq!(flags.dropped, dropped, "{kind:?} {user}");
        }
    }

    #[test]
    fn grpc_and_http_replicas_are_vllm_api_servers_on_their_ports() {
        let r = &super::super::plan::served_replicas("grpc", &[31000])[0];
        // (mode, user flags, argv after the program, dropped)
        let cases: [(ConnectionMode, &str, &str, &[&str]); 3] = [
            (
                ConnectionMode::Grpc,
                "--dtype float32 --port 9 --host=0.0.0.0",
                "-m vllm.entrypoints.cli.main serve M --grpc --host 127.0.0.1 --port 31000 --dtype float32",
                &["--port 9", "--host=0.0.0.0"],
            ),
            (
                ConnectionMode::Http,
                "--grpc --max-model-len 1024 --headless",
                "-m vllm.entrypoints.cli.main serve M --host 127.0.0.1 --port 31000 --max-model-len 1024",
                &["--grpc", "--headless"],
            ),
            (
                ConnectionMode::Http,
                "--data-parallel-rpc-port 1 --tool-call-parser hermes",
                "-m vllm.entrypoints.cli.main serve M --host 127.0.0.1 --port 31000 --tool-call-parser hermes",
                &["--data-parallel-rpc-port 1"],
            ),
        ];
        for (mode, user, expected, dropped) in cases {
            let flags = EngineFlags::new(EngineKind::Vllm, mode, &strings(user));
            assert_eq!(argv(EngineKind::Vllm, mode, "M", r, &flags), strings(expected), "{mode:?} {user}");
            assert_eq!(flags.dropped, dropped, "{mode:?} {user}");
        }
    }

    #[test]
    fn a_moved_handshake_port_is_named_to_the_simulator() {
        let mut r = replica();
        r.handshake_port = 40123;
        let args = argv(
            EngineKind::Sim,
            ConnectionMode::Zmq,
            "M",
            &r,
            &EngineFlags::new(EngineKind::Sim, ConnectionMode::Zmq, &[]),
        );
        assert_eq!(args[4..], strings("--handshake tcp://127.0.0.1:40123"));
    }

    #[test]
    fn each_replica_gets_its_slice_of_the_gpus() {
        // (replica, tp, CUDA_VISIBLE_DEVICES, expected)
        type Case = (usize, usize, Option<&'static str>, Result<&'static str, &'static str>);
        let cases: [Case; 6] = [
            (0, 1, None, Ok("0")),
            (1, 2, None, Ok("2,3")),
            (1, 1, Some("4,5,6"), Ok("5")),
            (1, 2, Some(" 4, 5 ,6,7"), Ok("6,7")),
            (0, 1, Some(""), Ok("0")),
            (
                1,
                2,
                Some("4,5,6"),
                Err("CUDA_VISIBLE_DEVICES has 3 GPU(s) but dp_rank=1 with tp_size=2 requires index 2..3"),
            ),
        ];
        for (replica, tp, visible, expected) in cases {
            let got = cuda_devices(replica, tp, visible).map_err(|e| e.to_string());
            assert_eq!(got.as_deref().map_err(String::as_str), expected, "{replica} {tp} {visible:?}");
        }
    }

    #[test]
    fn the_tensor_parallel_size_comes_from_the_engine_flags() {
        let tp = |s: &str| {
            EngineFlags::new(EngineKind::Vllm, ConnectionMode::Zmq, &strings(s))
                .tensor_parallel_size()
                .map_err(|e| e.to_string())
        };
        assert_eq!(tp(""), Ok(1));
        assert_eq!(tp("-tp 2"), Ok(2));
        assert_eq!(tp("--tensor-parallel-size=4 --dtype x"), Ok(4));
        assert_eq!(tp("--tensor_parallel_size 2 -tp 8"), Ok(8));
        assert_eq!(tp("-tp zero"), Err("--tensor-parallel-size must be a positive integer, got 'zero'".into()));
        assert_eq!(tp("-tp"), Err("--tensor-parallel-size must be a positive integer, got ''".into()));
    }

    #[test]
    fn python_engines_get_their_gpus_and_unbuffered_output() {
        let r = replica();
        let flags = EngineFlags::new(EngineKind::Vllm, ConnectionMode::Zmq, &strings("-tp 2"));
        let c = command(EngineKind::Vllm, ConnectionMode::Zmq, Path::new("/venv/bin/python"), "M", &r, &flags, None)
            .unwrap();
        assert_eq!(c.program, Path::new("/venv/bin/python"));
        assert_eq!(c.env, [("CUDA_VISIBLE_DEVICES".into(), "0,1".into()), ("PYTHONUNBUFFERED".into(), "1".into())]);
        let sim = command(
            EngineKind::Sim,
            ConnectionMode::Zmq,
            Path::new("/bin/sim"),
            "M",
            &r,
            &EngineFlags::new(EngineKind::Sim, ConnectionMode::Zmq, &[]),
            None,
        );
        assert!(sim.unwrap().env.is_empty());
    }
}
