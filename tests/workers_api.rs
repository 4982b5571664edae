//! The worker admin API and worker lifecycle end to end: runtime registration, listing,
//! updates that keep the connection, draining removal, rejected registrations with SMG's
//! log texts, grouped (data-parallel) workers, and the Prometheus listener.

mod common;

use std::time::Duration;

use common::{Gateway, Options};
use serde_json::{json, Value};

fn workers(g: &Gateway) -> Vec<Value> {
    g.get("/workers").json()["workers"].as_array().cloned().unwrap_or_default()
}

fn wait_worker_status(g: &Gateway, url: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        if let Some(w) = workers(g).into_iter().find(|w| w["url"] == url) {
            if w["status"] == status {
                return w;
            }
            last = w;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("worker {url} never reached {status}; last {last}\n{}", g.logs());
}

fn completion(g: &Gateway) -> Value {
    let r = g.post_json("/v1/completions", &json!({"model": "test-model", "prompt": "hi", "max_tokens": 2}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn register_list_patch_and_drain_a_worker_at_runtime() {
    let g = Gateway::start();
    let url2 = format!("ipc://{}/engine-b", g.dir.display());
    let r = g.post_json("/workers", &json!({"url": url2, "runtime": "vllm", "labels": {"zone": "a"}, "priority": 3}));
    assert_eq!(r.status, 202, "{}", r.text());
    let _sim2 = g.spawn_sim(&url2, &[]);
    let w = wait_worker_status(&g, &url2, "ready");
    assert_eq!(w["connection_mode"], "zmq");
    assert_eq!(w["runtime_type"], "vllm");
    assert_eq!(w["labels"]["zone"], "a");
    assert_eq!(w["priority"], 3);
    let id = w["id"].as_str().unwrap().to_string();
    assert_eq!(g.get(&format!("/workers/{id}")).json()["url"], url2.as_str());
    assert_eq!(workers(&g).len(), 2);
    // Requests reach both workers.
    for _ in 0..8 {
        completion(&g);
    }
    let adds = g.adds();
    assert!(adds.len() >= 8);
    // PATCH keeps the live connection: still ready, no new handshake.
    let binds_before = g.logs().matches(&format!("Binding ZMQ client for worker {url2}")).count();
    let p = g
        .try_request(
            "PATCH",
            &format!("/workers/{id}"),
            Some(&json!({"labels": {"zone": "b"}, "priority": 9}).to_string()),
            &[],
        )
        .unwrap();
    assert_eq!(p.status, 200, "{}", p.text());
    assert_eq!(p.json()["labels"]["zone"], "b");
    assert_eq!(p.json()["priority"], 9);
    assert_eq!(p.json()["status"], "ready");
    completion(&g);
    assert_eq!(g.logs().matches(&format!("Binding ZMQ client for worker {url2}")).count(), binds_before);
    // DELETE drains, then removes; the socket files go too.
    let d = g.try_request("DELETE", &format!("/workers/{id}"), None, &[]).unwrap();
    assert_eq!(d.status, 202, "{}", d.text());
    common::eventually(|| g.get(&format!("/workers/{id}")).status == 404, "the worker to be removed");
    let base = url2.trim_start_matches("ipc://");
    common::eventually(|| !std::path::Path::new(&format!("{base}-in.sock")).exists(), "its sockets to be removed");
    assert_eq!(workers(&g).len(), 1);
    for _ in 0..4 {
        completion(&g);
    }
}

#[test]
fn deleting_a_pending_worker_cancels_its_handshake() {
    let g = Gateway::start();
    let url = format!("ipc://{}/never", g.dir.display());
    assert_eq!(g.post_json("/workers", &json!({"url": url})).status, 202);
    let w = wait_worker_status(&g, &url, "pending");
    let base = url.trim_start_matches("ipc://").to_string();
    common::eventually(|| std::path::Path::new(&format!("{base}-in.sock")).exists(), "sockets bound at registration");
    let id = w["id"].as_str().unwrap();
    g.try_request("DELETE", &format!("/workers/{id}"), None, &[]).unwrap();
    common::eventually(|| workers(&g).iter().all(|w| w["url"] != url.as_str()), "the pending worker to go");
    common::eventually(|| !std::path::Path::new(&format!("{base}-in.sock")).exists(), "its sockets to be released");
}

/// Every check that needs no engine is made before the answer: 400 with the reason in the
/// OpenAI envelope, SMG's `Failed job` line in the log, nothing registered.
#[test]
fn rejected_registrations_answer_400_with_smgs_texts() {
    let g = Gateway::start();
    let d = g.dir.display().to_string();
    let taken = g.get("/workers").json()["workers"][0]["handshake_address"].as_str().unwrap().to_string();
    let cases: Vec<(Value, String)> = vec![
        (
            json!({"url": format!("ipc://{d}/r1"), "runtime_type": "sglang"}),
            "has unsupported runtime sglang: only vllm and tokenspeed are supported over the ZMQ direct backend".into(),
        ),
        (
            json!({"url": format!("ipc://{d}/r2"), "zmq_handshake_address": "ipc:///x"}),
            "zmq_handshake_address must be a tcp:// address".into(),
        ),
        (
            json!({"url": format!("ipc://{d}/r3"), "zmq_handshake_address": taken.clone()}),
            format!("would bind handshake address {taken}, already claimed by worker"),
        ),
        (json!({"url": format!("ipc://{d}/r4"), "worker_type": "prefill"}), "cannot serve worker type prefill".into()),
        (json!({"url": "ipc://relative"}), "ZMQ worker URL must be ipc://<path>".into()),
        (
            json!({"url": "http://h:1", "zmq_handshake_address": "tcp://127.0.0.1:1"}),
            "zmq_handshake_address is only valid for ZMQ workers".into(),
        ),
        (
            json!({"url": format!("ipc://{d}/r5"), "labels": {"tool_parser": "qwen3"}}),
            "declares unknown tool_parser 'qwen3' for model 'test-model'".into(),
        ),
        (json!({"url": format!("ipc://{d}/r6"), "dp_rank": 1}), "leave dp_rank unset".into()),
        (
            json!({"url": format!("ipc://{d}/r7"), "dp_size": 1u64 << 40}),
            "has dp_size 1099511627776: it must be between 1 and 1024".into(),
        ),
        (json!({"url": format!("ipc://{d}/../r8")}), "without '..'".into()),
        (json!({"url": format!("ipc://{d}/r9/")}), "not a directory".into()),
        (json!({"url": g.worker_url.clone()}), format!("worker {} is already registered", g.worker_url)),
    ];
    for (body, text) in &cases {
        let r = g.post_json("/workers", body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(text.as_str()), "{body}: {message}");
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
        let url = body["url"].as_str().unwrap();
        let line = format!("Failed job: type=AddWorker, worker={url} ");
        assert!(g.logs().lines().any(|l| l.contains(&line) && l.contains(text.as_str())), "'{line}{text}'");
    }
    assert_eq!(workers(&g).len(), 1, "no rejected worker is listed");
    assert_eq!(g.post_json("/workers", &json!({"runtime": "vllm"})).status, 400, "no url: 400");
}

/// Two spellings of one socket path (`/./`, `//`, a symlinked ancestor) name one worker: the
/// second is refused, and the first worker's live socket files are left alone.
#[test]
fn one_worker_spelled_twice_is_refused_and_its_sockets_are_untouched() {
    use std::os::unix::fs::MetadataExt;
    let g = Gateway::start();
    let d = g.dir.display().to_string();
    let live = g.worker_url.trim_start_matches("ipc://").to_string();
    let sub = format!("ipc://{d}/sub/w");
    assert_eq!(g.post_json("/workers", &json!({"url": sub})).status, 202);
    common::eventually(|| std::path::Path::new(&format!("{d}/sub/w-out.1.sock")).exists(), "the second worker bound");
    std::os::unix::fs::symlink(&g.dir, g.dir.join("alias")).unwrap();
    let files = [
        format!("{live}-in.sock"),
        format!("{live}-out.sock"),
        format!("{live}-in.1.sock"),
        format!("{live}-out.1.sock"),
        format!("{d}/sub/w-in.sock"),
        format!("{d}/sub/w-out.1.sock"),
    ];
    let inodes = || files.iter().map(|f| std::fs::metadata(f).map(|m| m.ino()).unwrap_or(0)).collect::<Vec<_>>();
    let before = inodes();
    assert!(before.iter().all(|&i| i != 0), "{files:?}");
    let spellings = [
        format!("ipc://{d}/./engine"),
        format!("ipc://{d}//engine"),
        format!("ipc://{d}/sub/./w"),
        format!("ipc://{d}/alias/sub/w"),
    ];
    for url in &spellings {
        let r = g.post_json("/workers", &json!({"url": url}));
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert!(r.text().contains("is already registered"), "{url}: {}", r.text());
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(inodes(), before, "no live socket file was replaced");
    assert_eq!(workers(&g).len(), 2);
    completion(&g);
}

/// A socket path too long for `sun_path` (here only in a per-shard name) is refused before
/// anything is created; a newline in a URL cannot forge a log line.
#[test]
fn refusals_create_nothing_and_log_lines_cannot_be_forged() {
    let g = Gateway::start();
    let d = g.dir.display().to_string();
    // `<base>-out.sock` fits in 107 bytes, shard 1's `<base>-in.1.sock` does not.
    let prefix = format!("{d}/deep/nested/");
    let base = format!("{prefix}{}", "x".repeat(107 - "-out.sock".len() - prefix.len()));
    assert!(format!("{base}-out.sock").len() <= 107 && format!("{base}-in.1.sock").len() > 107);
    let r = g.post_json("/workers", &json!({"url": format!("ipc://{base}")}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("-in.1.sock is too long"), "{}", r.text());
    assert!(!g.dir.join("deep").exists(), "nothing is created for a refused worker");

    let r = g.post_json("/workers", &json!({"url": "http://h:1\nERROR forged line"}));
    assert_eq!(r.status, 400, "{}", r.text());
    let logs = g.logs();
    assert!(logs.contains("Failed job: type=AddWorker, worker=http://h:1\\nERROR forged line "), "{logs}");
    assert!(!logs.lines().any(|l| l.starts_with("ERROR forged line")), "{logs}");
    let r = g.post_json("/workers", &json!({"url": format!("ipc://{d}/a\nb")}));
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("control characters"), "{}", r.text());
    assert_eq!(workers(&g).len(), 1);
}

/// `--worker-socket-root`: every socket path, after normalisation and symlinks, lies under it.
#[test]
fn socket_paths_outside_the_socket_root_are_refused() {
    let root = std::env::temp_dir();
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--worker-socket-root".into(), root.display().to_string()],
        ..Default::default()
    });
    assert!(!g.logs().contains("socket paths are unrestricted"), "{}", g.logs());
    let d = g.dir.display().to_string();
    std::os::unix::fs::symlink("/", g.dir.join("escape")).unwrap();
    for url in ["ipc:///etc/sg-root-test/w".to_string(), format!("ipc://{d}/escape/sg-root-test/w")] {
        let r = g.post_json("/workers", &json!({"url": url}));
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        assert!(r.text().contains("is outside --worker-socket-root"), "{url}: {}", r.text());
    }
    assert!(!std::path::Path::new("/etc/sg-root-test").exists() && !std::path::Path::new("/sg-root-test").exists());
    let inside = format!("ipc://{d}/inside");
    assert_eq!(g.post_json("/workers", &json!({"url": inside})).status, 202);
    wait_worker_status(&g, &inside, "pending");
}

/// Without `--worker-socket-root`, a gateway running as root says that socket paths may be
/// anywhere.
#[test]
fn running_as_root_without_a_socket_root_warns() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    let g = Gateway::start();
    assert!(
        g.logs().lines().any(|l| l.contains("WARN") && l.contains("socket paths are unrestricted")),
        "{}",
        g.logs()
    );
}

#[test]
fn grouped_worker_serves_on_every_rank() {
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--zmq-engine-count".into(), "2".into()],
        sim_args: vec!["--data-parallel-size".into(), "2".into()],
        ..Default::default()
    });
    for _ in 0..12 {
        completion(&g);
    }
    let mut ranks: Vec<u64> = g.adds().iter().map(|a| a["rank"].as_u64().unwrap()).collect();
    ranks.sort();
    ranks.dedup();
    assert_eq!(ranks, vec![0, 1], "both ranks served requests");
    let w = &workers(&g)[0];
    assert_eq!(w["dp_size"], 2);
}

#[test]
fn too_many_engines_fail_the_handshake() {
    // One engine expected, two dial in: the extra one is refused.
    let g = Gateway::start_with(Options {
        sim_args: vec!["--data-parallel-size".into(), "2".into()],
        wait_ready: false,
        ..Default::default()
    });
    common::eventually(|| g.logs().contains("after INIT phase"), "the duplicate HELLO refusal");
    assert!(g.logs().contains("ZMQ backend handshake failed for"), "{}", g.logs());
}

#[test]
fn admin_limits_and_metrics() {
    let g = Gateway::start();
    completion(&g);
    let s = g.post_json("/v1/chat/completions", &json!({"model": "test-model", "messages": [{"role": "user", "content": "x"}], "stream": true, "max_tokens": 3}));
    assert_eq!(s.status, 200);
    let f = g.post("/flush_cache", "");
    assert_eq!(f.status, 200);
    assert_eq!(f.json()["skipped_zmq_workers"].as_array().unwrap().len(), 1);
    let p = g.post("/start_profile", "{}");
    assert_eq!(p.status, 501);
    assert_eq!(p.json()["error"]["message"], "start_profile is not supported over ZMQ");
    let m = g.metrics();
    assert!(
        m.lines().any(|l| l.starts_with("smg_worker_health{")
            && l.contains("connection_mode=\"zmq\"")
            && l.contains("runtime_type=\"vllm\"")
            && l.ends_with(" 1")),
        "{m}"
    );
    assert!(m.contains("smg_router_requests_total{router_type=\"zmq\",connection_mode=\"zmq\",model=\"test-model\",endpoint=\"completions\",streaming=\"false\"} 1"), "{m}");
    assert!(m.contains("smg_router_requests_total{router_type=\"zmq\",connection_mode=\"zmq\",model=\"test-model\",endpoint=\"chat\",streaming=\"true\"} 1"), "{m}");
    assert!(m.contains("smg_router_ttft_seconds_count{router_type=\"zmq\",connection_mode=\"zmq\",model=\"test-model\",endpoint=\"chat\"} 1"), "{m}");
}
