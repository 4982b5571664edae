//! The engine's Python interpreter, found as a user expects (`--engine-python`, else the active
//! virtual environment's, else `python3` on PATH), and the engine package checked with it
//! before anything starts: an engine that cannot import its package would only fail once
//! started, then again at every restart.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::error::ServeError;

/// The interpreter, and what chose it (for error texts).
#[derive(Debug, Clone, PartialEq)]
pub struct Python {
    pub path: PathBuf,
    pub chosen_by: &'static str,
}

/// `flag` when given; else `$VIRTUAL_ENV/bin/python` when that exists; else `python3`.
pub fn choose(flag: Option<&Path>, virtual_env: Option<&Path>) -> Python {
    if let Some(path) = flag {
        return Python { path: path.to_path_buf(), chosen_by: "--engine-python" };
    }
    if let Some(venv) = virtual_env.filter(|v| !v.as_os_str().is_empty()) {
        let python = venv.join("bin").join("python");
        if python.is_file() {
            return Python { path: python, chosen_by: "the active virtual environment, $VIRTUAL_ENV" };
        }
    }
    Python { path: PathBuf::from("python3"), chosen_by: "python3 on PATH; no --engine-python or $VIRTUAL_ENV" }
}

/// Runs `python -c "import <package>"`; an interpreter that cannot run, or cannot import the
/// package (its last stderr line says why), is an error naming both.
pub fn check_package(python: &Python, package: &'static str) -> Result<(), ServeError> {
    let mut child = Command::new(&python.path)
        .args(["-c", &format!("import {package}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| cannot_run(python, source))?;
    // Read while it runs: a chatty import must not block on a full pipe.
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
            text
        })
    });
    let limit = Duration::from_secs(crate::limits::engine_package_check_timeout_s);
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ServeError::PackageCheckTimeout {
                    python: python.path.clone(),
                    package,
                    secs: limit.as_secs(),
                });
            }
            Err(source) => return Err(cannot_run(python, source)),
        }
    };
    if status.success() {
        return Ok(());
    }
    let stderr = stderr.and_then(|reader| reader.join().ok()).unwrap_or_default();
    let detail = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
    let detail = if detail.is_empty() { status.to_string() } else { detail };
    Err(ServeError::PackageMissing { python: python.path.clone(), chosen_by: python.chosen_by, package, detail })
}

fn cannot_run(python: &Python, source: std::io::Error) -> ServeError {
    ServeError::Python { python: python.path.clone(), chosen_by: python.chosen_by, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_is_the_flag_then_the_active_venv_then_python3() {
        let venv = std::env::temp_dir().join(format!("sg-venv-{}", std::process::id()));
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("bin/python"), "").unwrap();
        let empty = std::env::temp_dir().join(format!("sg-novenv-{}", std::process::id()));
        let flag = Path::new("/opt/py/bin/python");
        // (--engine-python, $VIRTUAL_ENV, interpreter, chosen by)
        let cases: [(Option<&Path>, Option<&Path>, PathBuf, &str); 5] = [
            (Some(flag), Some(&venv), flag.to_path_buf(), "--engine-python"),
            (None, Some(&venv), venv.join("bin/python"), "the active virtual environment, $VIRTUAL_ENV"),
            (None, Some(&empty), "python3".into(), "python3 on PATH; no --engine-python or $VIRTUAL_ENV"),
            (None, Some(Path::new("")), "python3".into(), "python3 on PATH; no --engine-python or $VIRTUAL_ENV"),
            (None, None, "python3".into(), "python3 on PATH; no --engine-python or $VIRTUAL_ENV"),
        ];
        for (flag, venv, path, chosen_by) in cases {
            assert_eq!(choose(flag, venv), Python { path, chosen_by }, "{flag:?} {venv:?}");
        }
        let _ = std::fs::remove_dir_all(&venv);
    }

    #[test]
    fn a_missing_package_or_interpreter_is_named() {
        let python3 = choose(None, None);
        check_package(&python3, "json").unwrap();
        let e = check_package(&python3, "no_such_engine_package").unwrap_err().to_string();
        assert!(
            e.starts_with("the engine's Python interpreter python3 (python3 on PATH; no --engine-python or $VIRTUAL_ENV) \
                           cannot import no_such_engine_package: ModuleNotFoundError: No module named 'no_such_engine_package'"),
            "{e}"
        );
        let nowhere = choose(Some(Path::new("/nonexistent/bin/python")), None);
        let e = check_package(&nowhere, "json").unwrap_err().to_string();
        assert!(
            e.starts_with("cannot run the engine's Python interpreter /nonexistent/bin/python (--engine-python): "),
            "{e}"
        );
        assert!(e.ends_with("; pass --engine-python PATH"), "{e}");
    }
}
