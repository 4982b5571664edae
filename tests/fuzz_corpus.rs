//! Every fuzz target's committed seeds and regression reproducers (tests/fuzz/seeds/<target>,
//! tests/fuzz/regressions/<target>), replayed through the target's body under `cargo test`, so
//! a fixed crash that comes back fails the ordinary test run, without a libFuzzer build.
//! Exploring new inputs is `tools/fuzz.sh` (docs/reliability-fuzz-soak.md).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use shardgate_fuzzkit::targets;

type Target = (&'static str, fn(&[u8]));

const TARGETS: [Target; 9] = [
    ("constraint_check", targets::constraint_check::run),
    ("http_request", targets::http_request::run),
    ("image_decode", targets::image_decode::run),
    ("request_json", targets::request_json::run),
    ("text_pipeline", targets::text_pipeline::run),
    ("tokenspeed_output", targets::tokenspeed_output::run),
    ("video_decode", targets::video_decode::run),
    ("vllm_output", targets::vllm_output::run),
    ("zmtp_peer", targets::zmtp_peer::run),
];

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut files: Vec<PathBuf> = ["seeds", "regressions"]
        .iter()
        .filter_map(|kind| std::fs::read_dir(root.join(kind).join(target)).ok())
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_and_regression_passes_its_target() {
    let mut failed = Vec::new();
    for (name, run) in TARGETS {
        let files = inputs(name);
        assert!(!files.is_empty(), "no seeds for the fuzz target {name}: tests/fuzz/seeds/{name} is empty");
        for file in files {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failed.push(format!("{name}: {}", file.display()));
            }
        }
    }
    assert!(failed.is_empty(), "fuzz inputs that fail their target's oracles:\n{}", failed.join("\n"));
}

/// Every target tools/fuzz.sh knows is replayed here, and no other.
#[test]
fn the_replay_covers_every_fuzz_target() {
    let script = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/fuzz.sh")).unwrap();
    let line = script.lines().find(|l| l.starts_with("all_targets=(")).expect("tools/fuzz.sh lists all_targets");
    let mut listed: Vec<&str> = line.trim_start_matches("all_targets=(").trim_end_matches(')').split(' ').collect();
    listed.sort_unstable();
    let replayed: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(listed, replayed);
}
