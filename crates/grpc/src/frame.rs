//! gRPC's length-prefixed messages: one flag byte (compressed or not), a big-endian u32
//! length, then the message. A stream's DATA frames split and join these freely, so the
//! decoder keeps what it has of the next one.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::limits;

const PREFIX_BYTES: usize = 5;

/// A message prefix the client cannot take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The flag byte says compressed: this client never offers an encoding, so a worker that
    /// compresses anyway broke the protocol.
    Compressed,
    /// A flag byte other than 0 or 1.
    BadFlag(u8),
    /// The length exceeds `limits::message_bytes_max`.
    TooLarge(usize),
    /// The stream ended inside a message.
    Truncated { have: usize },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Compressed => f.write_str("compressed gRPC message, but no grpc-encoding was offered"),
            FrameError::BadFlag(b) => write!(f, "gRPC message flag byte {b:#04x} is neither 0 nor 1"),
            FrameError::TooLarge(n) => {
                write!(f, "gRPC message of {n} bytes exceeds the {} byte limit", limits::message_bytes_max)
            }
            FrameError::Truncated { have } => write!(f, "stream ended inside a gRPC message ({have} bytes of it)"),
        }
    }
}

impl std::error::Error for FrameError {}

/// `message` behind its uncompressed prefix, ready to be one DATA payload.
pub fn encode(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(PREFIX_BYTES + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// Messages out of a stream of DATA payloads.
#[derive(Default)]
pub struct Decoder {
    buf: BytesMut,
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole message, `None` until its last byte has arrived.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < PREFIX_BYTES {
            return Ok(None);
        }
        match self.buf[0] {
            0 => {}
            1 => return Err(FrameError::Compressed),
            other => return Err(FrameError::BadFlag(other)),
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > limits::message_bytes_max {
            return Err(FrameError::TooLarge(len));
        }
        if self.buf.len() < PREFIX_BYTES + len {
            // Room for the rest, but never more than the cap ahead of the bytes themselves.
            let want = (PREFIX_BYTES + len - self.buf.len()).min(limits::decode_reserve_bytes_max);
            self.buf.reserve(want);
            return Ok(None);
        }
        self.buf.advance(PREFIX_BYTES);
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// At the end of the stream: an unfinished message is an error.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buf.len() {
            0 => Ok(()),
            have => Err(FrameError::Truncated { have }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&[u8]]) -> Result<Vec<Bytes>, FrameError> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c);
            while let Some(m) = d.next_message()? {
                out.push(m);
            }
        }
        d.finish()?;
        Ok(out)
    }

    #[test]
    fn messages_come_out_whole_at_every_split() {
        let stream: Vec<u8> = [encode(b"first"), encode(b""), encode(&[7u8; 300])].concat();
        let want = vec![Bytes::from_static(b"first"), Bytes::new(), Bytes::from(vec![7u8; 300])];
        for cut in 0..=stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(decode_all(&[a, b]).unwrap(), want, "split at {cut}");
        }
        let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode_all(&bytewise).unwrap(), want);
    }

    #[test]
    fn bad_prefixes_are_typed_errors() {
        let too_large = (limits::message_bytes_max as u32 + 1).to_be_bytes();
        let cases: [(Vec<u8>, FrameError); 4] = [
            (vec![1, 0, 0, 0, 1, 9], FrameError::Compressed),
            (vec![2, 0, 0, 0, 0], FrameError::BadFlag(2)),
            ([&[0u8][..], &too_large].concat(), FrameError::TooLarge(limits::message_bytes_max + 1)),
            (vec![0, 0, 0, 0, 9, 1, 2], FrameError::Truncated { have: 7 }),
        ];
        for (bytes, want) in cases {
            assert_eq!(decode_all(&[&bytes]), Err(want.clone()), "{want}");
        }
    }
}
