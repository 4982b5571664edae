//! `file:` URLs against a real directory tree: a root with files, a subdirectory, a FIFO and
//! symlinks in and out, and a file outside it.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use shardgate_fetch::{fetch, FetchError, FetchPolicy, Fetched};

/// `<tmp>/root/{a.png, sub/b.png, dir/, fifo, in -> sub/b.png, out -> ../secret}` and
/// `<tmp>/secret`.
fn tree() -> PathBuf {
    let base = std::env::temp_dir().join(format!("shardgate-fetch-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(root.join("dir")).unwrap();
    std::fs::write(root.join("a.png"), b"hello").unwrap();
    std::fs::write(root.join("sub/b.png"), b"bee").unwrap();
    std::fs::write(base.join("secret"), b"secret").unwrap();
    symlink(root.join("sub/b.png"), root.join("in")).unwrap();
    symlink("../secret", root.join("out")).unwrap();
    let fifo = std::process::Command::new("mkfifo").arg(root.join("fifo")).status().unwrap();
    assert!(fifo.success());
    base
}

fn bytes(b: &[u8]) -> Result<Fetched, FetchError> {
    Ok(Fetched { bytes: b.to_vec(), media_type: None })
}

#[test]
fn only_inside_the_root() {
    let base = tree();
    let root = base.join("root");
    // The root given through a symlink and with `..`: it is canonicalised too.
    symlink(&root, base.join("root-link")).unwrap();
    let via_link = base.join("root-link/../root-link");
    let policy = |root: &Path, max_bytes| FetchPolicy {
        local_root: Some(root.to_path_buf()),
        max_bytes,
        ..FetchPolicy::default()
    };
    let url = |p: &str| format!("file://{}/{p}", root.display());
    let outside = |p: &str| Err(FetchError::LocalPath(PathBuf::from(format!("{}/{p}", root.display()))));
    let cases: Vec<(String, FetchPolicy, Result<Fetched, FetchError>)> = vec![
        (url("a.png"), policy(&root, 5), bytes(b"hello")),
        (url("sub/b.png"), policy(&via_link, 5), bytes(b"bee")),
        (url("sub/../a.png"), policy(&root, 5), bytes(b"hello")),
        (url("in"), policy(&root, 5), bytes(b"bee")),
        (url("a.png"), policy(&root, 4), Err(FetchError::TooLarge { max_bytes: 4 })),
        (url("../secret"), policy(&root, 64), outside("../secret")),
        (url("sub/../../secret"), policy(&root, 64), outside("sub/../../secret")),
        (url("out"), policy(&root, 64), outside("out")),
        (url("missing.png"), policy(&root, 64), outside("missing.png")),
        (url(""), policy(&root, 64), outside("")),
        (url("dir"), policy(&root, 64), Err(FetchError::NotAFile(root.join("dir")))),
        (url("fifo"), policy(&root, 64), Err(FetchError::NotAFile(root.join("fifo")))),
        (url("a.png"), FetchPolicy::default(), Err(FetchError::NoLocalRoot)),
        (url("a.png"), policy(&base.join("nowhere"), 64), outside("a.png")),
    ];
    for (url, policy, want) in cases {
        assert_eq!(fetch(&url, &policy), want, "{url}");
    }
    assert_eq!(FetchError::NoLocalRoot.to_string(), "Cannot load local files without `--allowed-local-media-path`.");
    let _ = std::fs::remove_dir_all(&base);
}
