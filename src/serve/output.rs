//! An engine's stdout and stderr (one pipe), logged line by line as `engine-<port>| <line>`, so
//! the interleaved output of several engines and the gateway reads apart. A line is logged as
//! soon as it ends; one longer than `engine_log_line_bytes_max` is logged in pieces, so an
//! engine cannot make the gateway buffer without bound. Terminal colour codes are dropped (an
//! engine's logger may colour its lines even into a pipe) and other control characters escaped
//! (a line cannot forge another).

use std::io::{self, Read};

use shardgate_util::log_escape::Escaped;

/// Calls `each` with every line `reader` gives (without its `\n` or `\r\n`), and with pieces
/// of at most `max` bytes of a longer one, until end of file.
pub fn for_each_line(mut reader: impl Read, max: usize, mut each: impl FnMut(&str)) -> io::Result<()> {
    let mut pending: Vec<u8> = Vec::with_capacity(max.min(8192));
    let mut chunk = vec![0u8; 8192];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pending.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(end) = memchr::memchr(b'\n', &pending[start..]).map(|i| start + i) {
            emit(&pending[start..end], max, &mut each);
            start = end + 1;
        }
        pending.drain(..start);
        while pending.len() >= max {
            each(&String::from_utf8_lossy(&pending[..max]));
            pending.drain(..max);
        }
    }
    if !pending.is_empty() {
        emit(&pending, max, &mut each);
    }
    Ok(())
}

fn emit(line: &[u8], max: usize, each: &mut impl FnMut(&str)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    for piece in line.chunks(max.max(1)) {
        each(&String::from_utf8_lossy(piece));
    }
    if line.is_empty() {
        each("");
    }
}

/// Starts the thread that logs an engine's output until the pipe closes (every process holding
/// its write end has exited).
pub fn spawn_logger(name: &str, reader: io::PipeReader) -> io::Result<()> {
    let prefix = name.to_string();
    std::thread::Builder::new().name(format!("{name}-out")).spawn(move || {
        let max = crate::limits::engine_log_line_bytes_max;
        let _ = for_each_line(reader, max, |line| tracing::info!("{prefix}| {}", Escaped(&without_colours(line))));
    })?;
    Ok(())
}

/// `line` without ANSI control sequences (`ESC [` parameters, intermediates, a final byte).
pub fn without_colours(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\x1b') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' || chars.peek() != Some(&'[') {
            out.push(c);
            continue;
        }
        chars.next();
        // Parameter and intermediate bytes, then the final byte (or the end of the line).
        while chars.next_if(|c| ('\x20'..='\x3f').contains(c)).is_some() {}
        chars.next_if(|c| ('\x40'..='\x7e').contains(c));
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its bytes in the given pieces, as a pipe does.
    struct Pieces(Vec<&'static [u8]>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Ok(0);
            }
            let piece = self.0.remove(0);
            buf[..piece.len()].copy_from_slice(piece);
            Ok(piece.len())
        }
    }

    fn lines(pieces: Vec<&'static [u8]>, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_line(Pieces(pieces), max, |l| out.push(l.to_string())).unwrap();
        out
    }

    #[test]
    fn lines_are_cut_at_newlines_however_the_bytes_arrive() {
        // (pieces, max, lines)
        type Case = (Vec<&'static [u8]>, usize, &'static [&'static str]);
        let cases: [Case; 7] = [
            (vec![b"INFO ready\n"], 64, &["INFO ready"]),
            (vec![b"INFO re", b"ady\nWARN x", b"\n"], 64, &["INFO ready", "WARN x"]),
            (vec![b"a\r\n\nb"], 64, &["a", "", "b"]),
            (vec![b"no newline at the end"], 64, &["no newline at the end"]),
            // Longer than max: pieces of max bytes, whether or not the line ends in this read.
            (vec![b"abcdefgh", b"ij\n"], 4, &["abcd", "efgh", "ij"]),
            (vec![b"abcdefghij\n"], 4, &["abcd", "efgh", "ij"]),
            (vec![b"caf\xc3\xa9 \xff\n"], 64, &["café \u{fffd}"]),
        ];
        for (pieces, max, expected) in cases {
            assert_eq!(lines(pieces.clone(), max), expected, "{pieces:?}");
        }
    }

    #[test]
    fn colour_codes_are_dropped_and_nothing_else() {
        // (engine output, what is logged before escaping)
        let cases = [
            ("plain", "plain"),
            ("\x1b[2m2026-12-01T22:14:42Z\x1b[0m \x1b[32m INFO\x1b[0m ready", "2026-12-01T22:14:42Z  INFO ready"),
            ("\x1b[1;31mERROR\x1b[0m", "ERROR"),
            // A lone escape, or one that starts no control sequence, stays (and is escaped).
            ("a\x1bb \x1b", "a\x1bb \x1b"),
            ("cut \x1b[38;5", "cut "),
        ];
        for (line, expected) in cases {
            assert_eq!(without_colours(line), expected, "{line:?}");
        }
    }
}
