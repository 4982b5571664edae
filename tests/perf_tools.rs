//! The perf/ tools run from a clean machine: what their Python imports beyond the standard
//! library is installed by `perf/harness/setup.sh`, the setup names no path of one machine, and
//! perf/README.md gives every tool's setup step. (The trials themselves need the network and
//! minutes of CPU; perf/README.md records them.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn perf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("perf")
}

/// Files under perf/ (results excluded) whose name ends with `ext`.
fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "results") {
            files(&path, ext, out);
        } else if path.to_string_lossy().ends_with(ext) {
            out.push(path);
        }
    }
}

/// Top-level module of every `import x.y` / `from x.y import z` line.
fn imports(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in source.lines().map(str::trim_start) {
        let names = if let Some(rest) = line.strip_prefix("import ") {
            rest.split(',').map(|n| n.split_whitespace().next().unwrap_or("")).collect::<Vec<_>>()
        } else if let Some(rest) = line.strip_prefix("from ") {
            vec![rest.split_whitespace().next().unwrap_or("")]
        } else {
            continue;
        };
        for name in names {
            let top = name.split('.').next().unwrap_or("");
            if !top.is_empty() {
                out.insert(top.to_string());
            }
        }
    }
    out
}

fn stdlib_modules() -> BTreeSet<String> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(' '.join(sys.stdlib_module_names))"])
        .output()
        .expect("python3 (3.10 or newer) runs the perf tools");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect()
}

/// The modules setup.sh installs into the venv: its `SHIM_PACKAGES=(...)`, by import name.
fn installed_modules(setup: &str) -> BTreeSet<String> {
    let line = setup.lines().find(|l| l.starts_with("SHIM_PACKAGES=(")).unwrap_or("");
    let list = line.trim_start_matches("SHIM_PACKAGES=(").split(')').next().unwrap_or("");
    list.split_whitespace().map(|p| if p == "pyzmq" { "zmq".to_string() } else { p.to_string() }).collect()
}

#[test]
fn setup_installs_every_module_the_perf_python_imports() {
    let setup = std::fs::read_to_string(perf_dir().join("harness/setup.sh")).unwrap();
    let installed = installed_modules(&setup);
    let stdlib = stdlib_modules();
    let mut sources = Vec::new();
    files(&perf_dir(), ".py", &mut sources);
    assert!(sources.len() >= 4, "{sources:?}");
    // The real-engine tests' helpers (`tests/real_vllm/differential.py`, ...) are in the
    // repository, which a tool puts on its own `sys.path`: nothing to install.
    let modules_in = |dir: &std::path::Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.unwrap().path().file_stem().map(|s| s.to_string_lossy().into_owned()))
            .collect()
    };
    let repo_helpers = modules_in(&perf_dir().join("../tests/real_vllm"));
    for path in &sources {
        let mut local = modules_in(path.parent().unwrap());
        local.extend(repo_helpers.iter().cloned());
        for module in imports(&std::fs::read_to_string(path).unwrap()) {
            let known = stdlib.contains(&module) || local.contains(&module) || installed.contains(&module);
            assert!(known, "{} imports {module}, which perf/harness/setup.sh does not install", path.display());
        }
    }
    assert!(!setup.contains("/work/") && !setup.contains("/tmp/"), "setup.sh names a path of one machine");
}

#[test]
fn the_readme_gives_every_tool_its_setup_step() {
    let readme = std::fs::read_to_string(perf_dir().join("README.md")).unwrap();
    let table = readme.split("## Setup of each tool").nth(1).and_then(|s| s.split("\n## ").next()).unwrap_or("");
    let mut tools = Vec::new();
    files(&perf_dir(), ".sh", &mut tools);
    tools.push(perf_dir().join("harness/run.py"));
    for tool in tools.iter().filter(|t| !t.ends_with("harness/setup.sh")) {
        let name = tool.strip_prefix(perf_dir()).unwrap().to_string_lossy().into_owned();
        assert!(table.contains(&format!("| `{name}` |")), "perf/README.md's setup table lacks {name}");
    }
}
