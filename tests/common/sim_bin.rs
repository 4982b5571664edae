//! The simulator binary for the integration tests. `shardgate-sim` is its own package (it
//! builds without the gateway), so cargo does not build it for the gateway's tests: the first
//! test that needs it builds it with the profile of the gateway binary under test, and every
//! test runs the copy next to `shardgate`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

pub fn sim_binary() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let gateway = PathBuf::from(env!("CARGO_BIN_EXE_shardgate"));
            let sim = gateway.with_file_name("shardgate-sim");
            let release = gateway.parent().and_then(|d| d.file_name()).is_some_and(|n| n == "release");
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "--quiet", "-p", "shardgate-sim"]).current_dir(env!("CARGO_MANIFEST_DIR"));
            if release {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("cannot run cargo to build shardgate-sim");
            assert!(status.success(), "cargo build -p shardgate-sim failed");
            assert!(sim.is_file(), "{} missing after the build", sim.display());
            sim
        })
        .clone()
}
