//! Server-sent events framing: decoded body bytes in, the `data` of each complete event out.
//! Lines may end in LF or CRLF; an event ends at a blank line; `data:` lines of one event are
//! joined with '\n'; an event whose data is empty is not handed on (the SSE rule); comments
//! (":") and other fields (`event:`, `id:`) are skipped. Bytes may arrive split anywhere: a
//! partial line waits in the buffer for the next read.

use memchr::memchr;

#[derive(Default)]
pub struct SseParser {
    /// Decoded body bytes not yet consumed.
    buf: Vec<u8>,
    /// The data of the event being assembled.
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    /// Where the body decoder appends.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Hands the data of every complete event to `on_event`, in order. `on_event` returns
    /// true at the end of the stream (`[DONE]`); draining stops there and returns true.
    pub fn drain<E>(&mut self, mut on_event: impl FnMut(&[u8]) -> Result<bool, E>) -> Result<bool, E> {
        let SseParser { buf, data, has_data } = self;
        let mut pos = 0;
        let mut stopped = false;
        while let Some(nl) = memchr(b'\n', &buf[pos..]) {
            let mut line = &buf[pos..pos + nl];
            pos += nl + 1;
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if std::mem::take(has_data) && !data.is_empty() {
                    let end = on_event(data);
                    data.clear();
                    if end? {
                        stopped = true;
                        break;
                    }
                }
                continue;
            }
            let (field, value) = match memchr(b':', line) {
                Some(0) => continue,
                Some(i) => (&line[..i], line[i + 1..].strip_prefix(b" ").unwrap_or(&line[i + 1..])),
                None => (line, &[][..]),
            };
            if field == b"data" {
                if *has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                *has_data = true;
            }
        }
        buf.drain(..pos);
        Ok(stopped)
    }

    /// At the end of the body: an event that lacked only its blank line still counts.
    pub fn finish<E>(&mut self, on_event: impl FnMut(&[u8]) -> Result<bool, E>) -> Result<bool, E> {
        if !self.buf.is_empty() && !self.buf.ends_with(b"\n") {
            self.buf.push(b'\n');
        }
        self.buf.push(b'\n');
        self.drain(on_event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(parts: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for part in parts {
            p.buffer().extend_from_slice(part);
            let _ = p.drain(|d| -> Result<bool, ()> {
                out.push(String::from_utf8_lossy(d).into_owned());
                Ok(d == b"[DONE]")
            });
        }
        out
    }

    #[test]
    fn framing_cases() {
        let cases: &[(&[u8], &[&str])] = &[
            (b"data: a\n\ndata: b\n\n", &["a", "b"]),
            (b"data: a\r\n\r\ndata:b\r\n\r\n", &["a", "b"]),
            (b": ping\n\ndata: x\n\n", &["x"]),
            (b"event: delta\ndata: 1\ndata: 2\nid: 7\n\n", &["1\n2"]),
            (b"data: {\"a\":\"b: c\"}\n\n", &["{\"a\":\"b: c\"}"]),
            (b"data: done\n\ndata: [DONE]\n\ndata: after\n\n", &["done", "[DONE]"]),
            (b"retry: 5\n\n\n\ndata: y\n\n", &["y"]),
            (b"data: partial\n", &[]),
            (b"data:\n\ndata: z\n\n", &["z"]),
            (b"data:\ndata:\n\n", &["\n"]),
        ];
        for (input, want) in cases {
            assert_eq!(events_of(&[input]), *want, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream: &[u8] = b"data: {\"x\":1}\r\n\r\n: keepalive\n\ndata: two\ndata: lines\n\ndata: [DONE]\n\n";
        let whole = events_of(&[stream]);
        assert_eq!(whole, ["{\"x\":1}", "two\nlines", "[DONE]"]);
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let parts = [&stream[..i], &stream[i..j], &stream[j..]];
                assert_eq!(events_of(&parts), whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn finish_flushes_an_unterminated_event() {
        let mut p = SseParser::default();
        p.buffer().extend_from_slice(b"data: last");
        let mut got = Vec::new();
        let _ = p.drain(|d| -> Result<bool, ()> {
            got.push(d.to_vec());
            Ok(false)
        });
        assert!(got.is_empty());
        let _ = p.finish(|d| -> Result<bool, ()> {
            got.push(d.to_vec());
            Ok(false)
        });
        assert_eq!(got, [b"last".to_vec()]);
    }
}
