//! Socket paths for an `ipc://` worker: normalisation, naming, the checks made before anything is
//! created (length, socket root, directory rules), stale-file cleanup, and the derived handshake
//! port. Error texts are SMG's, so operators can search for them.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::limits;

/// Why a worker's socket path or directory is refused. Texts are SMG's (`Failed job:
/// type=AddWorker` reasons), so operators can search for them.
#[derive(Debug)]
pub enum SockdirError {
    /// The path has a control character.
    ControlCharacter,
    /// The path is relative.
    NotAbsolute,
    /// The path has a `..` component.
    ParentComponent,
    /// The path names a directory (ends in `/` or `/.`), not a socket file prefix.
    Directory,
    /// A socket file name does not fit `sun_path`.
    TooLong {
        path: String,
        len: usize,
    },
    /// The socket files would lie outside `--worker-socket-root`.
    OutsideRoot {
        base: String,
        root: PathBuf,
    },
    DirIsSymlink(PathBuf),
    DirNotDirectory(PathBuf),
    DirForeignOwner {
        dir: PathBuf,
        owner: u32,
        uid: u32,
    },
    InspectDir {
        dir: PathBuf,
        source: io::Error,
    },
    CreateDir {
        dir: PathBuf,
        source: io::Error,
    },
    /// Something other than a socket is at a socket file's place.
    NotASocket(String),
    InspectFile {
        path: String,
        source: io::Error,
    },
    RemoveStale {
        path: String,
        source: io::Error,
    },
}

impl std::fmt::Display for SockdirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MUST: &str = "ZMQ worker URL must be ipc://<path>";
        match self {
            SockdirError::ControlCharacter => write!(f, "{MUST} without control characters"),
            SockdirError::NotAbsolute => write!(f, "{MUST} with an absolute path"),
            SockdirError::ParentComponent => write!(f, "{MUST} with an absolute path without '..' components"),
            SockdirError::Directory => write!(f, "{MUST} naming a socket file prefix, not a directory"),
            SockdirError::TooLong { path, len } => write!(
                f,
                "ipc socket path {path} is too long ({len} bytes; Unix socket paths hold at most {})",
                limits::unix_socket_path_bytes_max
            ),
            SockdirError::OutsideRoot { base, root } => write!(
                f,
                "ipc socket path {base} is outside --worker-socket-root {} (symlinks resolved)",
                root.display()
            ),
            SockdirError::DirIsSymlink(dir) => {
                write!(f, "ipc socket dir {} is a symlink; refusing to use it", dir.display())
            }
            SockdirError::DirNotDirectory(dir) => {
                write!(f, "ipc socket dir {} exists but is not a directory", dir.display())
            }
            SockdirError::DirForeignOwner { dir, owner, uid } => write!(
                f,
                "ipc socket dir {} is owned by uid {owner}, not by uid {uid} that the gateway runs as",
                dir.display()
            ),
            SockdirError::InspectDir { dir, source } => {
                write!(f, "cannot inspect ipc socket dir {}: {source}", dir.display())
            }
            SockdirError::CreateDir { dir, source } => {
                write!(f, "cannot create ipc socket dir {}: {source}", dir.display())
            }
            SockdirError::NotASocket(path) => {
                write!(f, "ipc socket path {path} exists but is not a socket; refusing to unlink")
            }
            SockdirError::InspectFile { path, source } => write!(f, "cannot inspect ipc socket path {path}: {source}"),
            SockdirError::RemoveStale { path, source } => write!(f, "cannot remove stale ipc socket {path}: {source}"),
        }
    }
}

impl std::error::Error for SockdirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SockdirError::InspectDir { source, .. }
            | SockdirError::CreateDir { source, .. }
            | SockdirError::InspectFile { source, .. }
            | SockdirError::RemoveStale { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The two data-plane socket files of shard `shard` for worker path `base`: shard 0 keeps the
/// seed's `<path>-in.sock` / `<path>-out.sock`, shard k uses `<path>-in.k.sock`.
pub fn socket_paths(base: &str, shard: usize) -> (String, String) {
    if shard == 0 {
        (format!("{base}-in.sock"), format!("{base}-out.sock"))
    } else {
        (format!("{base}-in.{shard}.sock"), format!("{base}-out.{shard}.sock"))
    }
}

/// `20000 + FNV-1a-64(path) mod 10000`, of the normalised path (so every spelling of one
/// path derives one port).
pub fn derived_handshake_port(path: &str) -> u16 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    limits::handshake_port_base + (h % limits::handshake_port_span) as u16
}

/// The normal form of an `ipc://` worker path, which is the worker's identity: absolute, with
/// `.` components and repeated `/` collapsed. `..` is refused rather than resolved (lexically
/// it can disagree with the kernel across a symlink), and so is a path naming a directory (the
/// path is a prefix of socket file names). Control characters have no place in a socket path.
pub fn normalize(path: &str) -> Result<String, SockdirError> {
    if path.chars().any(char::is_control) {
        return Err(SockdirError::ControlCharacter);
    }
    if !path.starts_with('/') {
        return Err(SockdirError::NotAbsolute);
    }
    let mut out = String::with_capacity(path.len());
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(SockdirError::ParentComponent),
            name => {
                out.push('/');
                out.push_str(name);
            }
        }
    }
    if matches!(path.rsplit('/').next(), Some("" | ".")) {
        return Err(SockdirError::Directory);
    }
    Ok(out)
}

/// Everything about a worker's socket files that is known before binding, checked without
/// creating or deleting anything: every file name fits `sun_path`, the files lie under `root`
/// (symlinks resolved), and an existing directory or file at their place is one `prepare` may
/// use. `base` is normalised; returns the files, `pairs` socket pairs in shard order.
pub fn check(base: &str, pairs: usize, root: Option<&Path>) -> Result<Vec<(String, String)>, SockdirError> {
    let files: Vec<(String, String)> = (0..pairs).map(|k| socket_paths(base, k)).collect();
    for path in files.iter().flat_map(|(input, output)| [input, output]) {
        if path.len() > limits::unix_socket_path_bytes_max {
            return Err(SockdirError::TooLong { path: path.clone(), len: path.len() });
        }
    }
    let dir = parent(base);
    if let Some(root) = root {
        if !resolve(&dir).starts_with(resolve(root)) {
            return Err(SockdirError::OutsideRoot { base: base.to_string(), root: root.to_path_buf() });
        }
    }
    inspect_dir(&dir)?;
    for path in files.iter().flat_map(|(input, output)| [input, output]) {
        inspect_file(path)?;
    }
    Ok(files)
}

/// Prepares the directory and socket files for `pairs` socket pairs under `base` (normalised):
/// `check`s first, so a refusal leaves nothing behind, then creates the parent directory (0700)
/// and removes stale socket files. Returns the files it will bind, in shard order.
pub fn prepare(base: &str, pairs: usize, root: Option<&Path>) -> Result<Vec<(String, String)>, SockdirError> {
    let files = check(base, pairs, root)?;
    let dir = parent(base);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|source| SockdirError::CreateDir { dir: dir.clone(), source })?;
    // Checked again: the directory may have changed since `check` looked.
    inspect_dir(&dir)?;
    for path in files.iter().flat_map(|(input, output)| [input, output]) {
        remove_stale(path)?;
    }
    Ok(files)
}

/// Whether two normalised worker paths name the same socket files: the same path, or one
/// reached through a symlinked directory.
pub fn same_files(a: &str, b: &str) -> bool {
    a == b || resolve_base(a) == resolve_base(b)
}

fn parent(base: &str) -> PathBuf {
    Path::new(base).parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"))
}

/// Where the kernel puts the files of `base`: its directory resolved, its own name kept (the
/// socket files are `<name>-in.sock`..., never `<name>` itself, so a symlink named `<name>`
/// does not matter).
fn resolve_base(base: &str) -> PathBuf {
    let path = Path::new(base);
    match path.file_name() {
        Some(name) => resolve(&parent(base)).join(name),
        None => path.to_path_buf(),
    }
}

/// `path` with the symlinks of its longest existing prefix resolved; the rest does not exist
/// yet, and `prepare` would create it as plain directories.
fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut head = path;
    loop {
        if let Ok(real) = fs::canonicalize(head) {
            return rest.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (head.parent(), head.file_name()) {
            (Some(up), Some(name)) => {
                rest.push(name);
                head = up;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// An existing socket directory must be a real directory owned by the gateway's user; a
/// missing one is fine (`prepare` creates it).
fn inspect_dir(dir: &Path) -> Result<(), SockdirError> {
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            if meta.file_type().is_symlink() {
                return Err(SockdirError::DirIsSymlink(dir.to_path_buf()));
            }
            if !meta.is_dir() {
                return Err(SockdirError::DirNotDirectory(dir.to_path_buf()));
            }
            // SAFETY: geteuid has no preconditions.
            let uid = unsafe { libc::geteuid() };
            if meta.uid() != uid {
                return Err(SockdirError::DirForeignOwner { dir: dir.to_path_buf(), owner: meta.uid(), uid });
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SockdirError::InspectDir { dir: dir.to_path_buf(), source }),
    }
}

/// Anything but a socket at a socket file's place is refused (never unlinked).
fn inspect_file(path: &str) -> Result<(), SockdirError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => Ok(()),
        Ok(_) => Err(SockdirError::NotASocket(path.to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SockdirError::InspectFile { path: path.to_string(), source }),
    }
}

/// Deletes a leftover socket file; refuses anything that is not a socket.
fn remove_stale(path: &str) -> Result<(), SockdirError> {
    inspect_file(path)?;
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SockdirError::RemoveStale { path: path.to_string(), source }),
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

    /// The typed errors read exactly as the texts they replaced (operators grep for them).
    #[test]
    fn error_texts_are_unchanged() {
        let io = || io::Error::from(io::ErrorKind::PermissionDenied);
        let d = PathBuf::from("/d");
        let cases: Vec<(SockdirError, String)> = vec![
            (SockdirError::ControlCharacter, "ZMQ worker URL must be ipc://<path> without control characters".into()),
            (SockdirError::NotAbsolute, "ZMQ worker URL must be ipc://<path> with an absolute path".into()),
            (
                SockdirError::ParentComponent,
                "ZMQ worker URL must be ipc://<path> with an absolute path without '..' components".into(),
            ),
            (
                SockdirError::Directory,
                "ZMQ worker URL must be ipc://<path> naming a socket file prefix, not a directory".into(),
            ),
            (
                SockdirError::TooLong { path: "/p".into(), len: 200 },
                format!(
                    "ipc socket path /p is too long (200 bytes; Unix socket paths hold at most {})",
                    limits::unix_socket_path_bytes_max
                ),
            ),
            (
                SockdirError::OutsideRoot { base: "/etc/w".into(), root: "/r".into() },
                "ipc socket path /etc/w is outside --worker-socket-root /r (symlinks resolved)".into(),
            ),
            (SockdirError::DirIsSymlink(d.clone()), "ipc socket dir /d is a symlink; refusing to use it".into()),
            (SockdirError::DirNotDirectory(d.clone()), "ipc socket dir /d exists but is not a directory".into()),
            (
                SockdirError::DirForeignOwner { dir: d.clone(), owner: 7, uid: 0 },
                "ipc socket dir /d is owned by uid 7, not by uid 0 that the gateway runs as".into(),
            ),
            (
                SockdirError::InspectDir { dir: d.clone(), source: io() },
                format!("cannot inspect ipc socket dir /d: {}", io()),
            ),
            (SockdirError::CreateDir { dir: d, source: io() }, format!("cannot create ipc socket dir /d: {}", io())),
            (
                SockdirError::NotASocket("/p".into()),
                "ipc socket path /p exists but is not a socket; refusing to unlink".into(),
            ),
            (
                SockdirError::InspectFile { path: "/p".into(), source: io() },
                format!("cannot inspect ipc socket path /p: {}", io()),
            ),
            (
                SockdirError::RemoveStale { path: "/p".into(), source: io() },
                format!("cannot remove stale ipc socket /p: {}", io()),
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
        }
    }

    #[test]
    fn derived_port_matches_smgs_documented_example() {
        assert_eq!(derived_handshake_port("/tmp/smg-zmq/engine-0"), 22670);
    }

    #[test]
    fn shard_zero_keeps_smgs_socket_names() {
        assert_eq!(socket_paths("/a/e", 0), ("/a/e-in.sock".into(), "/a/e-out.sock".into()));
        assert_eq!(socket_paths("/a/e", 3), ("/a/e-in.3.sock".into(), "/a/e-out.3.sock".into()));
    }

    #[test]
    fn creates_a_private_directory() {
        let d = scratch("create");
        let base = d.join("sub/engine-0");
        let files = prepare(base.to_str().unwrap(), 2, None).unwrap();
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
        let e = prepare(link.join("engine").to_str().unwrap(), 1, None).unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");

        let file = d.join("file");
        fs::write(&file, b"x").unwrap();
        let e = prepare(file.join("engine").to_str().unwrap(), 1, None).unwrap_err().to_string();
        assert!(e.contains("exists but is not a directory"), "{e}");

        let base = real.join("engine");
        fs::write(format!("{}-out.sock", base.display()), b"not a socket").unwrap();
        let e = prepare(base.to_str().unwrap(), 1, None).unwrap_err().to_string();
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
        prepare(base.to_str().unwrap(), 1, None).unwrap();
        assert!(!Path::new(&stale).exists());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn normalisation_collapses_dots_and_slashes_and_refuses_the_rest() {
        let cases: [(&str, Result<&str, &str>); 11] = [
            ("/tmp/x/w0", Ok("/tmp/x/w0")),
            ("/tmp/x/./w0", Ok("/tmp/x/w0")),
            ("//tmp//x///w0", Ok("/tmp/x/w0")),
            ("/./tmp/./x/w0", Ok("/tmp/x/w0")),
            ("tmp/x/w0", Err("with an absolute path")),
            ("", Err("with an absolute path")),
            ("/tmp/x/../y/w0", Err("without '..' components")),
            ("/tmp/x/..", Err("without '..' components")),
            ("/tmp/x/", Err("not a directory")),
            ("/tmp/x/.", Err("not a directory")),
            ("/tmp/x\n/w0", Err("without control characters")),
        ];
        for (path, expected) in cases {
            match (normalize(path).map_err(|e| e.to_string()), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{path:?}"),
                (Err(e), Err(want)) => {
                    assert!(e.starts_with("ZMQ worker URL must be ipc://<path>") && e.contains(want), "{path:?}: {e}")
                }
                (got, want) => panic!("{path:?}: {got:?}, expected {want:?}"),
            }
        }
        assert_eq!(
            derived_handshake_port(&normalize("/tmp/smg-zmq/./engine-0").unwrap()),
            derived_handshake_port("/tmp/smg-zmq/engine-0")
        );
    }

    /// Every socket file name counts, the per-shard ones included, and a refusal creates nothing.
    #[test]
    fn refuses_paths_over_the_unix_limit_before_creating_anything() {
        let d = scratch("long");
        let prefix = format!("{}/a/b/", d.display());
        let base =
            format!("{prefix}{}", "x".repeat(limits::unix_socket_path_bytes_max - "-out.sock".len() - prefix.len()));
        assert!(check(&base, 1, None).is_ok());
        let e = prepare(&base, 2, None).unwrap_err().to_string();
        assert!(e.contains("-in.1.sock is too long"), "{e}");
        assert!(!d.exists(), "nothing was created");
    }

    #[test]
    fn the_socket_root_holds_every_path_symlinks_resolved() {
        let d = scratch("root");
        let root = d.join("root");
        fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink("/", root.join("escape")).unwrap();
        let inside = format!("{}/sub/w", root.display());
        assert!(check(&inside, 1, Some(&root)).is_ok());
        for base in [format!("{}/w", d.display()), format!("{}/escape/etc/w", root.display()), "/etc/w".into()] {
            let e = check(&base, 1, Some(&root)).unwrap_err().to_string();
            assert!(e.contains("is outside --worker-socket-root"), "{base}: {e}");
        }
        // A root that does not exist yet still bounds what lies under it.
        let later = d.join("later");
        assert!(check(&format!("{}/w", later.display()), 1, Some(&later)).is_ok());
        assert!(check(&format!("{}/w", d.display()), 1, Some(&later)).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_files_sees_through_symlinked_directories() {
        let d = scratch("same");
        fs::create_dir_all(d.join("real/sub")).unwrap();
        std::os::unix::fs::symlink(d.join("real"), d.join("alias")).unwrap();
        let real = format!("{}/real/sub/w", d.display());
        assert!(same_files(&real, &real));
        assert!(same_files(&real, &format!("{}/alias/sub/w", d.display())));
        assert!(!same_files(&real, &format!("{}/real/sub/v", d.display())));
        assert!(!same_files(&real, &format!("{}/real/w", d.display())));
        fs::remove_dir_all(&d).unwrap();
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
        let e = prepare(d.join("engine").to_str().unwrap(), 1, None).unwrap_err().to_string();
        assert!(e.contains("is owned by uid 65534"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }
}
