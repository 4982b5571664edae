//! Socket paths for an `ipc://` worker: naming, the directory rules, stale-file cleanup, and the
//! derived handshake port. Error texts are the seed's, so operators can search for them.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::limits;

/// The two data-plane socket files of shard `shard` for worker path `base`: shard 0 keeps the
/// seed's `<path>-in.sock` / `<path>-out.sock`, shard k uses `<path>-in.k.sock`.
pub fn socket_paths(base: &str, shard: usize) -> (String, String) {
    if shard == 0 {
        (format!("{base}-in.sock"), format!("{base}-out.sock"))
    } else {
        (format!("{base}-in.{shard}.sock"), format!("{base}-out.{shard}.sock"))
    }
}

/// `20000 + FNV-1a-64(path) mod 10000`.
pub fn derived_handshake_port(path: &str) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    limits::handshake_port_base + (h % limits::handshake_port_span) as u16
}

/// Prepares the directory and socket files for `shards` socket pairs under `base`.
/// Creates the parent directory (0700), checks it, removes stale socket files, and checks the
/// Unix socket path limit. Returns the files it will bind, in shard order.
pub fn prepare(base: &str, shards: usize) -> Result<Vec<(String, String)>, String> {
    if base.is_empty() || !base.starts_with('/') {
        return Err(format!("ZMQ worker URL must be ipc://<path> with an absolute path, got ipc://{base}"));
    }
    let dir = Path::new(base).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    check_dir(&dir)?;
    let files: Vec<(String, String)> = (0..shards).map(|k| socket_paths(base, k)).collect();
    for (input, output) in &files {
        for path in [input, output] {
            if path.len() > limits::unix_socket_path_bytes_max {
                return Err(format!(
                    "ipc socket path {path} is too long ({} bytes; Unix socket paths hold at most {})",
                    path.len(),
                    limits::unix_socket_path_bytes_max
                ));
            }
            remove_stale(path)?;
        }
    }
    Ok(files)
}

fn check_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            if meta.file_type().is_symlink() {
                return Err(format!("ipc socket dir {shown} is a symlink; refusing to use it"));
            }
            if !meta.is_dir() {
                return Err(format!("ipc socket dir {shown} exists but is not a directory"));
            }
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            if meta.uid() != uid {
                return Err(format!(
                    "ipc socket dir {shown} is owned by uid {}, not by uid {uid} that the gateway runs as",
                    meta.uid()
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create ipc socket dir {shown}: {e}")),
        Err(e) => Err(format!("cannot inspect ipc socket dir {shown}: {e}")),
    }
}

/// Deletes a leftover socket file; refuses anything that is not a socket.
fn remove_stale(path: &str) -> Result<(), String> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            fs::remove_file(path).map_err(|e| format!("cannot remove stale ipc socket {path}: {e}"))
        }
        Ok(_) => Err(format!("ipc socket path {path} exists but is not a socket; refusing to unlink")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect ipc socket path {path}: {e}")),
    }
}

/// Removes our socket files when a worker is torn down (best effort: they may be gone).
pub fn remove_sockets(files: &[(String, String)]) {
    for (input, output) in files {
        for path in [input, output] {
            if let Ok(meta) = fs::symlink_metadata(path) {
                if meta.file_type().is_socket() {
                    let _ = fs::remove_file(path);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sg-sockdir-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn derived_port_matches_the_seed_example() {
        assert_eq!(derived_handshake_port("/tmp/smg-zmq/engine-0"), 22670);
    }

    #[test]
    fn shard_zero_keeps_the_seed_names() {
        assert_eq!(socket_paths("/a/e", 0), ("/a/e-in.sock".into(), "/a/e-out.sock".into()));
        assert_eq!(socket_paths("/a/e", 3), ("/a/e-in.3.sock".into(), "/a/e-out.3.sock".into()));
    }

    #[test]
    fn creates_a_private_directory() {
        let d = scratch("create");
        let base = d.join("sub/engine-0");
        let files = prepare(base.to_str().unwrap(), 2).unwrap();
        assert_eq!(files.len(), 2);
        let mode = fs::metadata(base.parent().unwrap()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_symlinks_files_and_non_sockets() {
        let d = scratch("refuse");
        fs::create_dir_all(&d).unwrap();
        let real = d.join("real");
        fs::create_dir(&real).unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = prepare(link.join("engine").to_str().unwrap(), 1).unwrap_err();
        assert!(e.contains("is a symlink"), "{e}");

        let file = d.join("file");
        fs::write(&file, b"x").unwrap();
        let e = prepare(file.join("engine").to_str().unwrap(), 1).unwrap_err();
        assert!(e.contains("exists but is not a directory"), "{e}");

        let base = real.join("engine");
        fs::write(format!("{}-out.sock", base.display()), b"not a socket").unwrap();
        let e = prepare(base.to_str().unwrap(), 1).unwrap_err();
        assert!(e.ends_with("exists but is not a socket; refusing to unlink"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn removes_stale_sockets() {
        let d = scratch("stale");
        fs::create_dir_all(&d).unwrap();
        let base = d.join("engine");
        let stale = format!("{}-in.sock", base.display());
        let _listener = std::os::unix::net::UnixListener::bind(&stale).unwrap();
        assert!(Path::new(&stale).exists());
        prepare(base.to_str().unwrap(), 1).unwrap();
        assert!(!Path::new(&stale).exists());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_paths_over_the_unix_limit() {
        let long = format!("/tmp/{}", "x".repeat(100));
        let e = prepare(&long, 1).unwrap_err();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn refuses_foreign_owner() {
        // Root can chown; elsewhere the check is covered by the owner comparison itself.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let d = scratch("owner");
        fs::create_dir_all(&d).unwrap();
        let path = std::ffi::CString::new(d.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::chown(path.as_ptr(), 65534, 65534) }, 0);
        let e = prepare(d.join("engine").to_str().unwrap(), 1).unwrap_err();
        assert!(e.contains("is owned by uid 65534"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }
}
