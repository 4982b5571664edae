//! ZMTP 3.1 bytes (rfc.zeromq.org 23 and 37) for the NULL mechanism: the 64-byte greeting, the
//! READY command and its properties, and frame headers. Pure functions over byte slices; the
//! connection state machine is `peer.rs`.

/// Why a peer's bytes break ZMTP (the peer is dropped, with this as the reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// A greeting shorter than 64 bytes.
    ShortGreeting(usize),
    /// Not a ZMTP 3 signature (the first 10 bytes).
    Signature(Vec<u8>),
    /// ZMTP major.minor older than 3.0.
    Version(u8, u8),
    /// A security mechanism other than NULL.
    Mechanism(String),
    /// Frame flags with reserved bits set.
    ReservedFlags(u8),
    /// A command frame with MORE set.
    CommandWithMore,
    /// A frame body over the limit.
    FrameTooLarge {
        len: u64,
        max: usize,
    },
    EmptyCommand,
    CommandNameOverrun,
    ReadyNameOverrun,
    ReadyNoValueLength,
    ReadyValueOverrun,
    ReadyWithoutSocketType,
    /// A message frame before the peer's READY.
    MessageBeforeReady,
    /// The peer answered our handshake with ERROR.
    Refused(String),
    /// A command other than READY (or ERROR) during the handshake.
    ExpectedReady(String),
    /// The peer's socket type cannot talk to ours.
    IncompatibleSocket {
        theirs: String,
        ours: &'static str,
    },
    /// ERROR after the handshake.
    PeerError(String),
    CommandInMessage,
    /// A multipart message over the limit.
    MessageTooLarge(usize),
    /// A frame counted as whole could not be read back (a bug, never the peer's doing).
    FrameVanished,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolError::ShortGreeting(n) => write!(f, "greeting of {n} bytes"),
            ProtocolError::Signature(head) => write!(f, "not a ZMTP 3 signature ({head:02x?})"),
            ProtocolError::Version(major, minor) => {
                write!(f, "ZMTP version {major}.{minor} is too old (3.0 or later is needed)")
            }
            ProtocolError::Mechanism(name) => write!(f, "security mechanism {name:?} is not supported (NULL only)"),
            ProtocolError::ReservedFlags(flags) => write!(f, "frame flags {flags:#04x} set reserved bits"),
            ProtocolError::CommandWithMore => f.write_str("a command frame claims MORE"),
            ProtocolError::FrameTooLarge { len, max } => write!(f, "frame of {len} bytes is over the limit of {max}"),
            ProtocolError::EmptyCommand => f.write_str("an empty command frame"),
            ProtocolError::CommandNameOverrun => f.write_str("a command name runs past its frame"),
            ProtocolError::ReadyNameOverrun => f.write_str("a READY property name runs past the command"),
            ProtocolError::ReadyNoValueLength => f.write_str("a READY property has no value length"),
            ProtocolError::ReadyValueOverrun => f.write_str("a READY property value runs past the command"),
            ProtocolError::ReadyWithoutSocketType => f.write_str("READY without a Socket-Type"),
            ProtocolError::MessageBeforeReady => f.write_str("a message frame before READY"),
            ProtocolError::Refused(why) => write!(f, "the peer refused us: {why}"),
            ProtocolError::ExpectedReady(name) => write!(f, "expected READY, got command {name:?}"),
            ProtocolError::IncompatibleSocket { theirs, ours } => {
                write!(f, "a {theirs} peer cannot talk to a {ours} socket")
            }
            ProtocolError::PeerError(why) => write!(f, "the peer sent ERROR: {why}"),
            ProtocolError::CommandInMessage => f.write_str("a command frame inside a multipart message"),
            ProtocolError::MessageTooLarge(max) => write!(f, "a message over the limit of {max} bytes"),
            ProtocolError::FrameVanished => f.write_str("a frame vanished from the buffer"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// Length of a ZMTP 3 greeting.
pub const GREETING_LEN: usize = 64;

const FLAG_MORE: u8 = 0x01;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;

/// Our greeting: signature (0xFF, 8 padding bytes, 0x7F), version 3.1, mechanism NULL, not
/// as-server (NULL has no roles), zero filler. libzmq reads the 8 padding bytes as a ZMTP 1.0
/// identity length + 1 and ignores them from a 3.x peer; it writes 1, and so do we.
pub fn greeting() -> [u8; GREETING_LEN] {
    let mut g = [0u8; GREETING_LEN];
    g[0] = 0xFF;
    g[8] = 0x01;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 1;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// Checks a peer's greeting: a ZMTP 3.x signature with the NULL mechanism.
pub fn check_greeting(g: &[u8]) -> Result<(), ProtocolError> {
    if g.len() < GREETING_LEN {
        return Err(ProtocolError::ShortGreeting(g.len()));
    }
    if g[0] != 0xFF || g[9] & 0x01 == 0 {
        return Err(ProtocolError::Signature(g[..10].to_vec()));
    }
    if g[10] < 3 {
        return Err(ProtocolError::Version(g[10], g[11]));
    }
    let mechanism = &g[12..32];
    let name_len = mechanism.iter().position(|&b| b == 0).unwrap_or(mechanism.len());
    if &mechanism[..name_len] != b"NULL" {
        return Err(ProtocolError::Mechanism(String::from_utf8_lossy(&mechanism[..name_len]).into_owned()));
    }
    Ok(())
}

/// One frame parsed from the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Bytes of the header (flags + size): 2 or 9.
    pub header_len: usize,
    /// Bytes of the body that follows.
    pub body_len: usize,
    pub more: bool,
    pub command: bool,
}

impl FrameHeader {
    pub fn total_len(&self) -> usize {
        self.header_len + self.body_len
    }
}

/// Parses the frame header at the front of `buf`: Ok(None) until the whole header is there.
/// Errors for reserved flag bits, a command that claims MORE, and a body over `body_len_max`.
pub fn parse_header(buf: &[u8], body_len_max: usize) -> Result<Option<FrameHeader>, ProtocolError> {
    let Some(&flags) = buf.first() else { return Ok(None) };
    if flags & !(FLAG_MORE | FLAG_LONG | FLAG_COMMAND) != 0 {
        return Err(ProtocolError::ReservedFlags(flags));
    }
    let command = flags & FLAG_COMMAND != 0;
    let more = flags & FLAG_MORE != 0;
    if command && more {
        return Err(ProtocolError::CommandWithMore);
    }
    let (header_len, body_len) = if flags & FLAG_LONG != 0 {
        let Some(size) = buf.get(1..9) else { return Ok(None) };
        let mut be = [0u8; 8];
        be.copy_from_slice(size);
        (9, u64::from_be_bytes(be))
    } else {
        let Some(&size) = buf.get(1) else { return Ok(None) };
        (2, u64::from(size))
    };
    if body_len > body_len_max as u64 {
        return Err(ProtocolError::FrameTooLarge { len: body_len, max: body_len_max });
    }
    Ok(Some(FrameHeader { header_len, body_len: body_len as usize, more, command }))
}

fn push_header(out: &mut Vec<u8>, len: usize, flags: u8) {
    if len <= u8::MAX as usize {
        out.push(flags);
        out.push(len as u8);
    } else {
        out.push(flags | FLAG_LONG);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends a message of `frames` (at least one) in ZMTP framing.
pub fn encode_message(frames: &[&[u8]], out: &mut Vec<u8>) {
    debug_assert!(!frames.is_empty());
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.iter().enumerate() {
        push_header(out, frame.len(), if i < last { FLAG_MORE } else { 0 });
        out.extend_from_slice(frame);
    }
}

/// Appends a command frame: a name (up to 255 bytes) and its data.
pub fn encode_command(name: &[u8], data: &[u8], out: &mut Vec<u8>) {
    debug_assert!(name.len() <= u8::MAX as usize);
    push_header(out, 1 + name.len() + data.len(), FLAG_COMMAND);
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(data);
}

/// Appends a READY: `Socket-Type` and, when given, `Identity` (ours as a ROUTER is empty, as
/// libzmq sends it).
pub fn encode_ready(socket_type: &str, identity: Option<&[u8]>, out: &mut Vec<u8>) {
    let mut props = Vec::with_capacity(48);
    let mut prop = |name: &str, value: &[u8]| {
        props.push(name.len() as u8);
        props.extend_from_slice(name.as_bytes());
        props.extend_from_slice(&(value.len() as u32).to_be_bytes());
        props.extend_from_slice(value);
    };
    prop("Socket-Type", socket_type.as_bytes());
    if let Some(identity) = identity {
        prop("Identity", identity);
    }
    encode_command(b"READY", &props, out);
}

/// Splits a command body into its name and data.
pub fn split_command(body: &[u8]) -> Result<(&[u8], &[u8]), ProtocolError> {
    let (&n, rest) = body.split_first().ok_or(ProtocolError::EmptyCommand)?;
    if rest.len() < n as usize {
        return Err(ProtocolError::CommandNameOverrun);
    }
    Ok(rest.split_at(n as usize))
}

/// What a peer's READY says about it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ready {
    pub socket_type: Vec<u8>,
    pub identity: Vec<u8>,
}

/// Reads the properties of a READY command's data. Names compare without case (the RFC's
/// rule); unknown properties (`Resource`, application metadata `X-…`) are skipped.
pub fn decode_ready(mut data: &[u8]) -> Result<Ready, ProtocolError> {
    let mut ready = Ready::default();
    let mut socket_type = false;
    while !data.is_empty() {
        let name_len = data[0] as usize;
        let name = data.get(1..1 + name_len).ok_or(ProtocolError::ReadyNameOverrun)?;
        let at = 1 + name_len;
        let len_bytes = data.get(at..at + 4).ok_or(ProtocolError::ReadyNoValueLength)?;
        let value_len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        let value = data.get(at + 4..at + 4 + value_len).ok_or(ProtocolError::ReadyValueOverrun)?;
        if name.eq_ignore_ascii_case(b"Socket-Type") {
            ready.socket_type = value.to_vec();
            socket_type = true;
        } else if name.eq_ignore_ascii_case(b"Identity") {
            ready.identity = value.to_vec();
        }
        data = &data[at + 4 + value_len..];
    }
    if !socket_type {
        return Err(ProtocolError::ReadyWithoutSocketType);
    }
    Ok(ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_ready_reads_back() {
        for (ty, ident) in [("ROUTER", Some(&b""[..])), ("PULL", None), ("DEALER", Some(&[1, 0][..]))] {
            let mut out = Vec::new();
            encode_ready(ty, ident, &mut out);
            let h = parse_header(&out, 1 << 20).unwrap().unwrap();
            assert_eq!(h.total_len(), out.len());
            let (name, data) = split_command(&out[h.header_len..]).unwrap();
            assert_eq!(name, b"READY");
            let r = decode_ready(data).unwrap();
            assert_eq!(r.socket_type, ty.as_bytes());
            assert_eq!(r.identity, ident.unwrap_or_default());
        }
        check_greeting(&greeting()).unwrap();
    }

    #[test]
    fn frames_short_and_long_at_every_cut() {
        let big = vec![7u8; 300];
        let mut out = Vec::new();
        encode_message(&[b"id", b"", &big], &mut out);
        let mut at = 0;
        let mut seen = Vec::new();
        while at < out.len() {
            // Every prefix shorter than the header is "not yet", never an error.
            for cut in at..at + 2 {
                if cut < out.len() && cut - at < 2 {
                    let part = &out[at..cut];
                    assert_eq!(parse_header(part, 1 << 20).unwrap(), None);
                }
            }
            let h = parse_header(&out[at..], 1 << 20).unwrap().unwrap();
            seen.push((h.body_len, h.more, h.header_len));
            at += h.total_len();
        }
        assert_eq!(seen, vec![(2, true, 2), (0, true, 2), (300, false, 9)]);
        assert_eq!(parse_header(&out[6..12], 1 << 20).unwrap(), None, "a long header cut short");
    }

    #[test]
    fn refuses_bad_bytes() {
        let cases: &[(&[u8], &str)] =
            &[(&[0x08, 0], "reserved"), (&[0x05, 0], "MORE"), (&[0x02, 0, 0, 0, 0, 0, 0x20, 0, 0], "over the limit")];
        for (bytes, want) in cases {
            let e = parse_header(bytes, 1 << 20).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let mut g = greeting();
        g[12..16].copy_from_slice(b"PLAI");
        assert!(check_greeting(&g).unwrap_err().to_string().contains("mechanism"));
        let mut g = greeting();
        g[10] = 2;
        assert!(check_greeting(&g).unwrap_err().to_string().contains("too old"));
        let mut g = greeting();
        g[9] = 0x7e;
        assert!(check_greeting(&g).unwrap_err().to_string().contains("signature"));
        for bad in [&[0x05, b'R'][..], &[3, b'a', b'b', b'c', 0][..], &[1, b'x', 0, 0, 0, 9, 1][..]] {
            assert!(decode_ready(bad).is_err(), "{bad:?}");
        }
        assert!(decode_ready(&[]).unwrap_err().to_string().contains("Socket-Type"));
        assert!(split_command(&[]).is_err() && split_command(&[9, b'a']).is_err());
    }
}
