//! An upstream response body, unframed as it arrives: content-length, chunked (the request
//! side's strict decoder, drained after every feed), or until the connection closes.

use super::fault::UpstreamFault;
use super::head::Framing;
use crate::http::chunked::ChunkedDecoder;

pub enum BodyDecoder {
    Length(usize),
    Chunked(ChunkedDecoder),
    Close { ended: bool },
}

impl BodyDecoder {
    pub fn new(framing: Framing) -> Self {
        match framing {
            Framing::Empty => BodyDecoder::Length(0),
            Framing::Length(n) => BodyDecoder::Length(n),
            // Sizes are bounded per chunk by the relay (each piece is handed on at once).
            Framing::Chunked => BodyDecoder::Chunked(ChunkedDecoder::new(usize::MAX)),
            Framing::Close => BodyDecoder::Close { ended: false },
        }
    }

    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Length(n) => *n == 0,
            BodyDecoder::Chunked(d) => d.is_done(),
            BodyDecoder::Close { ended } => *ended,
        }
    }

    /// Moves the body bytes at the start of `input` to `out`; returns how many bytes of
    /// `input` it used (framing included).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, UpstreamFault> {
        match self {
            BodyDecoder::Length(n) => {
                let take = (*n).min(input.len());
                out.extend_from_slice(&input[..take]);
                *n -= take;
                Ok(take)
            }
            BodyDecoder::Chunked(d) => {
                let used = d.feed(input);
                // What was decoded before a malformed chunk is still the upstream's.
                out.append(&mut d.body);
                used.map_err(|e| UpstreamFault::Malformed(e.message))
            }
            BodyDecoder::Close { .. } => {
                out.extend_from_slice(input);
                Ok(input.len())
            }
        }
    }

    /// The upstream closed the connection: the end of a close-delimited body, a broken one
    /// otherwise.
    pub fn at_eof(&mut self) -> Result<(), UpstreamFault> {
        match self {
            BodyDecoder::Close { ended } => {
                *ended = true;
                Ok(())
            }
            _ if self.is_done() => Ok(()),
            _ => Err(UpstreamFault::Broken("closed in the middle of the body".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every framing gives the same body at every split point of its bytes.
    #[test]
    fn bodies_unframe_the_same_at_every_split() {
        let cases: &[(Framing, &[u8], &[u8], bool)] = &[
            (Framing::Length(5), b"hello", b"hello", true),
            (Framing::Chunked, b"3\r\nhel\r\n2;x=1\r\nlo\r\n0\r\n\r\n", b"hello", true),
            (Framing::Close, b"hello", b"hello", false),
            (Framing::Empty, b"", b"", true),
        ];
        for (framing, wire, want, done_without_eof) in cases {
            for split in 0..=wire.len() {
                let mut d = BodyDecoder::new(*framing);
                let mut out = Vec::new();
                let mut pending = Vec::new();
                for part in [&wire[..split], &wire[split..]] {
                    pending.extend_from_slice(part);
                    let n = d.feed(&pending, &mut out).unwrap();
                    pending.drain(..n);
                }
                assert!(pending.is_empty(), "{framing:?} split {split}: every byte is used");
                assert_eq!(d.is_done(), *done_without_eof, "{framing:?} split {split}");
                assert!(d.at_eof().is_ok());
                assert_eq!(&out, want, "{framing:?} split {split}");
            }
        }
    }

    #[test]
    fn a_short_or_malformed_body_is_a_fault() {
        let mut d = BodyDecoder::new(Framing::Length(5));
        d.feed(b"hel", &mut Vec::new()).unwrap();
        assert!(matches!(d.at_eof(), Err(UpstreamFault::Broken(_))));
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert!(matches!(d.feed(b"zz\r\n", &mut Vec::new()), Err(UpstreamFault::Malformed(_))));
    }
}
