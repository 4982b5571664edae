//! `file:` URLs, only inside the operator's directory (`--allowed-local-media-path`): the path
//! is canonicalised (symlinks and `..` resolved) and must stay inside the canonical directory;
//! only a regular file is read, its size checked before a byte is.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use crate::{FetchError, Fetched};

/// `file:///abs/path` or `file://localhost/abs/path`, percent-decoded.
fn path_of(url: &str) -> Result<PathBuf, FetchError> {
    let rest = url.get(5..).filter(|_| url[..5].eq_ignore_ascii_case("file:")).ok_or(FetchError::NotAUrl)?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let slash = after.find('/').ok_or(FetchError::Url("a file URL needs an absolute path"))?;
            let host = &after[..slash];
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(FetchError::Url("a file URL may only name this host"));
            }
            &after[slash..]
        }
        None if rest.starts_with('/') => rest,
        None => return Err(FetchError::Url("a file URL needs an absolute path")),
    };
    Ok(PathBuf::from(OsString::from_vec(percent_decode(path)?)))
}

fn percent_decode(s: &str) -> Result<Vec<u8>, FetchError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or(FetchError::Url("a bad %-escape"))?;
            if byte == 0 {
                return Err(FetchError::Url("a NUL byte in the path"));
            }
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// The file's bytes when it lies inside `root`.
pub fn read(url: &str, root: Option<&Path>, max_bytes: usize) -> Result<Fetched, FetchError> {
    let root = root.ok_or(FetchError::NoLocalRoot)?;
    let path = path_of(url)?;
    let outside = || FetchError::LocalPath(path.clone());
    let root = root.canonicalize().map_err(|_| outside())?;
    let real = path.canonicalize().map_err(|_| outside())?;
    if real == root || !real.starts_with(&root) {
        return Err(outside());
    }
    // Checked before opening too: opening a FIFO would block until something writes to it.
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return Err(FetchError::NotAFile(path));
    }
    let mut file = std::fs::File::open(&real).map_err(|_| outside())?;
    // The open file's own metadata: what is read is what was checked.
    let meta = file.metadata().map_err(|e| FetchError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(FetchError::NotAFile(path));
    }
    if meta.len() > max_bytes as u64 {
        return Err(FetchError::TooLarge { max_bytes });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // The file may grow between the check and the read.
    file.by_ref().take(max_bytes as u64 + 1).read_to_end(&mut bytes).map_err(|e| FetchError::Io(e.to_string()))?;
    if bytes.len() > max_bytes {
        return Err(FetchError::TooLarge { max_bytes });
    }
    Ok(Fetched { bytes, media_type: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let cases: Vec<(&str, Result<&str, FetchError>)> = vec![
            ("file:///srv/media/a.png", Ok("/srv/media/a.png")),
            ("FILE://localhost/srv/a%20b.png?x#y", Ok("/srv/a b.png")),
            ("file:/srv/a.png", Ok("/srv/a.png")),
            ("file://other/srv/a.png", Err(FetchError::Url("a file URL may only name this host"))),
            ("file:a.png", Err(FetchError::Url("a file URL needs an absolute path"))),
            ("file://a.png", Err(FetchError::Url("a file URL needs an absolute path"))),
            ("file:///a%2", Err(FetchError::Url("a bad %-escape"))),
            ("file:///a%00b", Err(FetchError::Url("a NUL byte in the path"))),
        ];
        for (url, want) in cases {
            assert_eq!(path_of(url), want.map(PathBuf::from), "{url}");
        }
    }
}
