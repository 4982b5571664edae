//! `shardgate serve --backend sim`: the gateway starts its engines (simulators), keeps them
//! alive and stops them. Replicas come up and serve; an engine killed mid-stream fails its own
//! requests cleanly and is restarted and serving again; SIGTERM drains, then stops every engine
//! and leaves no process and no socket file; a refused launch starts nothing.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Gateway, ServeOptions};
use serde_json::{json, Value};

fn serve(replicas: usize, shards: usize, args: &[&str]) -> Gateway {
    Gateway::serve(ServeOptions {
        replicas,
        shards,
        args: args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    })
}

fn workers(g: &Gateway) -> Vec<Value> {
    g.get("/workers").json()["workers"].as_array().cloned().unwrap_or_default()
}

/// A process that has not exited (a zombie has).
fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// Processes whose command line mentions `text` (a test's own directory).
fn processes_mentioning(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(text) && alive(entry.file_name().to_string_lossy().parse().unwrap_or(0)) {
            found.push(cmdline);
        }
    }
    found
}

fn socket_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sock"))
        .collect()
}

/// The request counter of `worker`'s rank 0 in the metrics.
fn requests_to(g: &Gateway, worker: &str) -> u64 {
    let m = g.metrics();
    m.lines()
        .find(|l| l.starts_with("shardgate_worker_rank_requests_total{") && l.contains(&format!("\"{worker}\"")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

fn chat(g: &Gateway) -> common::Response {
    g.post_json(
        "/v1/chat/completions",
        &json!({"model": "test-model", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 4}),
    )
}

#[test]
fn replicas_come_up_answer_readiness_late_and_serve() {
    // Each engine waits a second before its HELLO: the gateway is up before any engine is.
    let g = Gateway::serve(ServeOptions {
        replicas: 3,
        args: ["--policy", "round_robin", "--slow-start-s", "1"].iter().map(|s| s.to_string()).collect(),
        wait_ready: false,
        ..Default::default()
    });
    common::eventually_within(
        Duration::from_secs(10),
        || g.try_request("GET", "/health", None, &[]).is_ok(),
        "the gateway listening",
    );
    assert_eq!(g.get("/readiness").status, 503, "no engine has registered yet");
    g.wait_ready(Duration::from_secs(30));
    common::eventually(|| workers(&g).iter().all(|w| w["status"] == "ready"), "every replica ready");
    let ws = workers(&g);
    assert_eq!(ws.len(), 3);
    let mut ports = Vec::new();
    for w in &ws {
        let url = w["url"].as_str().unwrap();
        let name = url.rsplit('/').next().unwrap();
        assert_eq!(url, format!("ipc://{}/{name}", g.socket_dir.display()));
        ports.push(name.strip_prefix("engine-").unwrap().parse::<u16>().unwrap());
        let engine = &w["engine"];
        assert_eq!((engine["name"].as_str(), engine["state"].as_str()), (Some(name), Some("running")), "{w}");
        assert_eq!(engine["restarts"], 0);
        assert!(alive(engine["pid"].as_u64().unwrap()));
    }
    assert_eq!(g.worker_url, ws[0]["url"], "the first replica is on --worker-base-port");
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 3, "one worker port each");
    for _ in 0..6 {
        let r = chat(&g);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    for w in &ws {
        let url = w["url"].as_str().unwrap();
        assert!(requests_to(&g, url) > 0, "{url} served nothing");
    }
    let log = std::fs::read_to_string(g.dir.join("gateway.log")).unwrap();
    for w in &ws {
        let prefix = format!("{}| ", w["engine"]["name"].as_str().unwrap());
        let line = log.lines().find(|l| l.contains(&prefix) && l.contains("registered with the gateway"));
        assert!(line.is_some(), "no {prefix:?} line from the engine:\n{log}");
    }
    assert!(!log.contains("\\u{1b}"), "colour codes of engine output are dropped");
}

#[test]
fn an_engine_killed_mid_stream_fails_its_own_requests_and_comes_back() {
    // One shard: round robin puts the two streams on the two replicas.
    let g = serve(2, 1, &["--policy", "round_robin", "--itl-ms", "20"]);
    let mut streams = [common::start_stream(&g, 100), common::start_stream(&g, 100)];
    let ws = workers(&g);
    let victim = ws.iter().position(|w| w["load"]["in_flight"] == 1).unwrap();
    assert!(ws.iter().all(|w| w["load"]["in_flight"] == 1), "one stream on each replica: {ws:?}");
    let url = ws[victim]["url"].as_str().unwrap().to_string();
    let pid = ws[victim]["engine"]["pid"].as_u64().unwrap();
    let served_before = requests_to(&g, &url);
    // SAFETY: kill(2) on an engine process the gateway under test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let killed = Instant::now();
    // The killed engine's stream ends at once with an error event and [DONE]; the other one runs
    // to its end. Which stream is whose is not known, so each is read in turn.
    let endings: Vec<String> = streams
        .iter_mut()
        .map(|s| {
            let events = common::rest_of_stream(s);
            assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
            events[events.len() - 2].clone()
        })
        .collect();
    let failed = |e: &String| e.contains("\"error\"") && e.contains("engine connection lost");
    let finished = |e: &String| e.contains("\"finish_reason\":\"length\"");
    assert!(endings.iter().any(failed), "the killed engine's stream ends with an error event: {endings:?}");
    assert!(endings.iter().any(finished), "the other replica's stream runs to its end: {endings:?}");
    // Restarted (after the first backoff, 1 s) and ready again.
    let mut restarted = Value::Null;
    common::eventually_within(
        Duration::from_secs(20),
        || {
            restarted = workers(&g).into_iter().find(|w| w["url"] == url.as_str()).unwrap_or_default();
            restarted["status"] == "ready" && restarted["engine"]["restarts"] == 1
        },
        "the killed engine restarted and its worker ready",
    );
    eprintln!("engine killed -> restarted and its worker ready: {:?}", killed.elapsed());
    let engine = &restarted["engine"];
    assert_eq!(engine["state"], "running");
    assert_eq!(engine["last_exit"], "killed by signal 9 (SIGKILL)");
    assert_ne!(engine["pid"].as_u64(), Some(pid));
    assert!(!alive(pid), "the killed engine was reaped");
    for _ in 0..2 {
        let r = chat(&g);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(requests_to(&g, &url) > served_before, "the restarted engine serves again");
}

/// An engine that dies between its HELLO and its READY (here while loading its model) took the
/// handshake's state with it: the worker drops that handshake and binds afresh at once, so the
/// restarted engine's HELLO starts a new one instead of reading as a duplicate.
#[test]
fn an_engine_killed_during_its_handshake_is_met_by_fresh_sockets() {
    let g = Gateway::serve(ServeOptions {
        args: ["--load-ms", "3000"].iter().map(|s| s.to_string()).collect(),
        wait_ready: false,
        ..Default::default()
    });
    common::eventually_within(
        Duration::from_secs(20),
        || g.logs().contains("HELLO from engine rank 0; INIT sent"),
        "the engine's HELLO",
    );
    let pid = workers(&g)[0]["engine"]["pid"].as_u64().unwrap();
    // SAFETY: kill(2) on an engine process the gateway under test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    common::eventually_within(
        Duration::from_secs(20),
        || workers(&g).first().is_some_and(|w| w["status"] == "ready" && w["engine"]["restarts"] == 1),
        "the restarted engine's handshake",
    );
    assert!(
        g.logs().contains("its engine exited during the handshake; binding afresh for its restart"),
        "{}",
        g.logs()
    );
    assert!(!g.logs().contains("duplicate HELLO"), "{}", g.logs());
    assert_eq!(chat(&g).status, 200);
}

#[test]
fn an_engine_past_its_restart_limit_is_left_failed() {
    let g = serve(1, 2, &["--engine-restart-limit", "0"]);
    let pid = workers(&g)[0]["engine"]["pid"].as_u64().unwrap();
    // SAFETY: kill(2) on an engine process the gateway under test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    common::eventually(
        || workers(&g)[0]["engine"]["state"] == "failed" && g.get("/readiness").status == 503,
        "the engine given up and the gateway unready",
    );
    let w = &workers(&g)[0];
    assert_eq!((w["engine"]["restarts"].as_u64(), w["engine"]["pid"].as_u64()), (Some(0), None), "{w}");
    assert_ne!(w["status"], "ready");
    assert!(g.logs().contains("not restarting it again"), "{}", g.logs());
}

#[test]
fn sigterm_drains_then_stops_every_engine_and_leaves_no_socket_file() {
    let mut g = serve(2, 2, &["--itl-ms", "20", "--engine-shutdown-timeout-secs", "5"]);
    let pids: Vec<u64> = workers(&g).iter().map(|w| w["engine"]["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(socket_files(&g.socket_dir).len(), 2 * 2 * 2, "two replicas, two shards, a pair each");
    // About a second of tokens still to come when the signal arrives.
    let mut stream = common::start_stream(&g, 50);
    g.signal_gateway(libc::SIGTERM);
    let events = common::rest_of_stream(&mut stream);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let finish = &events[events.len() - 2];
    assert!(finish.contains("\"finish_reason\":\"length\""), "the engines outlived the drain: {finish}");
    let status = g.wait_gateway_exit(Duration::from_secs(20)).expect("serve exits once drained");
    assert!(status.success(), "{status:?}");
    for pid in pids {
        assert!(!alive(pid), "engine {pid} outlived serve");
    }
    let dir = format!("{}/", g.dir.display());
    assert_eq!(processes_mentioning(&dir), Vec::<String>::new(), "a process of this serve is left");
    assert_eq!(socket_files(&g.socket_dir), Vec::<String>::new(), "socket files left");
    let logs = g.logs();
    assert!(logs.contains("stopping 2 engine(s): SIGTERM") && logs.contains("engines stopped"), "{logs}");
    assert!(!logs.contains("SIGKILL"), "the engines stopped on SIGTERM: {logs}");
}

/// `shardgate serve` run to its end: exit status and stderr.
fn serve_once(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .arg("serve")
        .args(args)
        .env_remove("VIRTUAL_ENV")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A socket directory under which two of `count` replicas on worker ports from `base` derive
/// one handshake port, that port, and the pair the launch names: the first replica whose port
/// an earlier one has, and that earlier one. (Paths that differ only in their last two bytes
/// never collide, so it takes replicas whose worker ports differ in three digits.)
fn colliding_socket_dir(root: &Path, base: u16, count: u16) -> (String, u16, u16, u16) {
    for i in 0..100_000 {
        let dir = root.join(format!("c{i}")).display().to_string();
        let mut seen: Vec<(u16, u16)> = Vec::new();
        for worker_port in base..base + count {
            let port = shardgate_wire::sockdir::derived_handshake_port(&format!("{dir}/engine-{worker_port}"));
            if let Some(&(_, first)) = seen.iter().find(|(p, _)| *p == port) {
                return (dir, port, first, worker_port);
            }
            seen.push((port, worker_port));
        }
    }
    panic!("no colliding socket directory")
}

#[test]
fn a_refused_launch_names_its_cause_and_starts_nothing() {
    let model = common::model_dir().display().to_string();
    common::sim_binary();
    let root = common::test_dir();
    let dir = root.display().to_string();
    // An interpreter without site-packages cannot import vllm, wherever it is installed.
    let venv = root.join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    let python = venv.join("bin/python");
    std::fs::write(&python, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    std::fs::set_permissions(&python, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Replicas on free worker ports base, base + 1, ...: nothing binds them before the check.
    let count = 256;
    let base = (31000..60000)
        .step_by(100)
        .find(|&p| (p..p + count).all(|q| std::net::TcpListener::bind(("127.0.0.1", q)).is_ok()))
        .unwrap();
    let (collide, collide_port, first, second) = colliding_socket_dir(&root, base, count);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    let (base_s, count_s, sockets) = (base.to_string(), count.to_string(), root.join("zmq"));
    let link = root.join("link");
    std::os::unix::fs::symlink(&root, &link).unwrap();
    let sim = ["--backend", "sim", "--model", &model];
    // (flags, socket directory, $VIRTUAL_ENV, what stderr says)
    let cases: Vec<(Vec<&str>, &Path, Option<&Path>, String)> = vec![
        (
            [&sim[..], &["--data-parallel-size", &count_s, "--worker-base-port", &base_s]].concat(),
            Path::new(&collide),
            None,
            format!(
                "ZMQ handshake port collision on {collide_port}: ipc://{collide}/engine-{first} and \
                 ipc://{collide}/engine-{second} derive the same port. Adjust --worker-base-port so the worker ipc \
                 paths differ."
            ),
        ),
        (
            vec!["--backend", "vllm", "--model", &model],
            &sockets,
            Some(&venv),
            format!(
                "the engine's Python interpreter {} (the active virtual environment, $VIRTUAL_ENV) cannot import \
                 vllm: ModuleNotFoundError: No module named 'vllm'",
                python.display()
            ),
        ),
        (
            vec!["--backend", "tokenspeed", "--model", &model, "--engine-python", "/nonexistent/python"],
            &sockets,
            None,
            "cannot run the engine's Python interpreter /nonexistent/python (--engine-python): ".into(),
        ),
        (
            vec!["--backend", "sglang", "--model", &model],
            &sockets,
            None,
            "connection-mode zmq is only supported for the vllm and tokenspeed backends, not sglang".into(),
        ),
        (
            [&sim[..], &["--connection-mode", "grpc"]].concat(),
            &sockets,
            None,
            "connection-mode grpc is only supported for the vllm backend, not sim".into(),
        ),
        (
            vec!["--backend", "tokenspeed", "--model", &model, "--connection-mode", "http"],
            &sockets,
            None,
            "connection-mode http is only supported for the vllm backend, not tokenspeed".into(),
        ),
        (
            [&sim[..], &["--connection-mode", "h3"]].concat(),
            &sockets,
            None,
            "unknown connection mode 'h3': zmq, grpc or http".into(),
        ),
        (
            vec!["--backend", "sim", "--model", "Qwen/Qwen3-0.6B"],
            &sockets,
            None,
            "has no model identity: --model Qwen/Qwen3-0.6B is not a local directory".into(),
        ),
        (sim.to_vec(), &link, None, format!("ipc socket dir {dir}/link is a symlink; refusing to use it")),
        (sim.to_vec(), Path::new("relative/zmq"), None, "with an absolute path".into()),
        (
            [&sim[..], &["--host", "127.0.0.1", "--port", &taken_port]].concat(),
            &sockets,
            None,
            format!("cannot listen on 127.0.0.1:{taken_port} (--port)"),
        ),
    ];
    for (args, socket_dir, virtual_env, expected) in cases {
        let mut env = vec![("SHARDGATE_ZMQ_SOCKET_DIR", socket_dir)];
        env.extend(virtual_env.map(|v| ("VIRTUAL_ENV", v)));
        let args = [&args[..], &["--metrics-port", "0", "--shards", "1"]].concat();
        let (code, stderr) = serve_once(&args, &env);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&expected), "{args:?}: expected {expected:?} in:\n{stderr}");
        assert!(!socket_dir.exists() || socket_files(socket_dir).is_empty(), "{args:?}: socket files made");
        assert_eq!(processes_mentioning(&format!("{dir}/")), Vec::<String>::new(), "{args:?}: a process was left");
    }
    drop(taken);
    let _ = std::fs::remove_dir_all(root);
}
