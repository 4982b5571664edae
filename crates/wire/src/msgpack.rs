//! A minimal MessagePack reader and writer for the engine wires.
//!
//! The writer (on rmp's encoders) emits what Python's `msgspec` emits (minimal integer and string headers, float64
//! for every float) so our frames are byte-identical to vLLM's own; callers that must mirror
//! msgspec's fixed-width struct headers use `array16`/`map16` explicitly. The reader borrows
//! from the frame (strings and binary payloads are slices, never copies), accepts non-minimal
//! headers, and never panics: every malformed input is a `DecodeError`.

use std::fmt;

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

pub type DecodeResult<T> = Result<T, DecodeError>;

fn err<T>(what: impl Into<String>) -> DecodeResult<T> {
    Err(DecodeError(what.into()))
}

/// The family of the next value, enough to branch on optional and union-typed fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Nil,
    Bool,
    Int,
    Float,
    Str,
    Bin,
    Array,
    Map,
    Ext,
}

/// A cursor over one MessagePack frame.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_at_end(&self) -> bool {
        self.pos == self.buf.len()
    }

    fn take(&mut self, n: usize) -> DecodeResult<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => err(format!("truncated at byte {} (needed {n} more)", self.pos)),
        }
    }

    fn byte(&mut self) -> DecodeResult<u8> {
        Ok(self.take(1)?[0])
    }

    fn be_u16(&mut self) -> DecodeResult<u16> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn be_u32(&mut self) -> DecodeResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn be_u64(&mut self) -> DecodeResult<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    pub fn peek_kind(&self) -> DecodeResult<Kind> {
        let Some(&b) = self.buf.get(self.pos) else {
            return err(format!("expected a value at byte {}, found the end", self.pos));
        };
        Ok(match b {
            0x00..=0x7f | 0xe0..=0xff | 0xcc..=0xd3 => Kind::Int,
            0x80..=0x8f | 0xde | 0xdf => Kind::Map,
            0x90..=0x9f | 0xdc | 0xdd => Kind::Array,
            0xa0..=0xbf | 0xd9..=0xdb => Kind::Str,
            0xc0 => Kind::Nil,
            0xc2 | 0xc3 => Kind::Bool,
            0xc4..=0xc6 => Kind::Bin,
            0xca | 0xcb => Kind::Float,
            0xc7..=0xc9 | 0xd4..=0xd8 => Kind::Ext,
            0xc1 => return err(format!("reserved byte 0xc1 at {}", self.pos)),
        })
    }

    /// Consumes a nil if one is next.
    pub fn try_nil(&mut self) -> DecodeResult<bool> {
        if self.peek_kind()? == Kind::Nil {
            self.pos += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    pub fn array_len(&mut self) -> DecodeResult<usize> {
        let at = self.pos;
        match self.byte()? {
            b @ 0x90..=0x9f => Ok((b & 0x0f) as usize),
            0xdc => Ok(self.be_u16()? as usize),
            0xdd => Ok(self.be_u32()? as usize),
            b => err(format!("expected an array at byte {at}, found 0x{b:02x}")),
        }
    }

    pub fn map_len(&mut self) -> DecodeResult<usize> {
        let at = self.pos;
        match self.byte()? {
            b @ 0x80..=0x8f => Ok((b & 0x0f) as usize),
            0xde => Ok(self.be_u16()? as usize),
            0xdf => Ok(self.be_u32()? as usize),
            b => err(format!("expected a map at byte {at}, found 0x{b:02x}")),
        }
    }

    pub fn str(&mut self) -> DecodeResult<&'a str> {
        let at = self.pos;
        let len = match self.byte()? {
            b @ 0xa0..=0xbf => (b & 0x1f) as usize,
            0xd9 => self.byte()? as usize,
            0xda => self.be_u16()? as usize,
            0xdb => self.be_u32()? as usize,
            b => return err(format!("expected a string at byte {at}, found 0x{b:02x}")),
        };
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes).or_else(|_| err(format!("invalid UTF-8 in string at byte {at}")))
    }

    pub fn bin(&mut self) -> DecodeResult<&'a [u8]> {
        let at = self.pos;
        let len = match self.byte()? {
            0xc4 => self.byte()? as usize,
            0xc5 => self.be_u16()? as usize,
            0xc6 => self.be_u32()? as usize,
            b => return err(format!("expected binary at byte {at}, found 0x{b:02x}")),
        };
        self.take(len)
    }

    pub fn bool(&mut self) -> DecodeResult<bool> {
        let at = self.pos;
        match self.byte()? {
            0xc2 => Ok(false),
            0xc3 => Ok(true),
            b => err(format!("expected a bool at byte {at}, found 0x{b:02x}")),
        }
    }

    /// Any integer encoding, as i128 so that u64 and i64 both fit; callers narrow.
    fn int(&mut self) -> DecodeResult<i128> {
        let at = self.pos;
        Ok(match self.byte()? {
            b @ 0x00..=0x7f => b as i128,
            b @ 0xe0..=0xff => (b as i8) as i128,
            0xcc => self.byte()? as i128,
            0xcd => self.be_u16()? as i128,
            0xce => self.be_u32()? as i128,
            0xcf => self.be_u64()? as i128,
            0xd0 => (self.byte()? as i8) as i128,
            0xd1 => (self.be_u16()? as i16) as i128,
            0xd2 => (self.be_u32()? as i32) as i128,
            0xd3 => (self.be_u64()? as i64) as i128,
            b => return err(format!("expected an integer at byte {at}, found 0x{b:02x}")),
        })
    }

    pub fn i64(&mut self) -> DecodeResult<i64> {
        let at = self.pos;
        let v = self.int()?;
        i64::try_from(v).or_else(|_| err(format!("integer {v} at byte {at} does not fit i64")))
    }

    pub fn u64(&mut self) -> DecodeResult<u64> {
        let at = self.pos;
        let v = self.int()?;
        u64::try_from(v).or_else(|_| err(format!("integer {v} at byte {at} is not a u64")))
    }

    pub fn u32(&mut self) -> DecodeResult<u32> {
        let at = self.pos;
        let v = self.int()?;
        u32::try_from(v).or_else(|_| err(format!("integer {v} at byte {at} is not a u32")))
    }

    /// A float, also accepting integers (msgspec writes `0` for an int-typed zero float field
    /// only when the field is declared int, but Python callers may send ints where floats go).
    pub fn f64(&mut self) -> DecodeResult<f64> {
        let at = self.pos;
        match self.peek_kind()? {
            Kind::Float => match self.byte()? {
                0xca => Ok(f32::from_bits(self.be_u32()?) as f64),
                _ => Ok(f64::from_bits(self.be_u64()?)),
            },
            Kind::Int => Ok(self.int()? as f64),
            k => err(format!("expected a float at byte {at}, found {k:?}")),
        }
    }

    /// An extension value: (type code, payload).
    pub fn ext(&mut self) -> DecodeResult<(i8, &'a [u8])> {
        let at = self.pos;
        let len = match self.byte()? {
            0xd4 => 1,
            0xd5 => 2,
            0xd6 => 4,
            0xd7 => 8,
            0xd8 => 16,
            0xc7 => self.byte()? as usize,
            0xc8 => self.be_u16()? as usize,
            0xc9 => self.be_u32()? as usize,
            b => return err(format!("expected an ext at byte {at}, found 0x{b:02x}")),
        };
        let code = self.byte()? as i8;
        Ok((code, self.take(len)?))
    }

    /// Skips one complete value of any kind. Iterative, so hostile nesting cannot overflow the
    /// stack.
    pub fn skip(&mut self) -> DecodeResult<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            match self.peek_kind()? {
                Kind::Nil | Kind::Bool => self.pos += 1,
                Kind::Int => {
                    self.int()?;
                }
                Kind::Float => {
                    self.f64()?;
                }
                Kind::Str => {
                    self.str()?;
                }
                Kind::Bin => {
                    self.bin()?;
                }
                Kind::Ext => {
                    self.ext()?;
                }
                Kind::Array => pending += self.array_len()? as u64,
                Kind::Map => pending += 2 * self.map_len()? as u64,
            }
        }
        Ok(())
    }

    /// Returns the raw bytes of the next value and skips it.
    pub fn raw_value(&mut self) -> DecodeResult<&'a [u8]> {
        let start = self.pos;
        self.skip()?;
        Ok(&self.buf[start..self.pos])
    }
}

/// Appends MessagePack to a byte buffer, msgspec-style: rmp's most compact encodings for
/// scalars and headers (the same choices msgspec makes), plus explicit wide headers where
/// msgspec writes them for structs. Writes to a `Vec` cannot fail, so results are dropped.
pub struct Writer<'b> {
    pub out: &'b mut Vec<u8>,
}

impl<'b> Writer<'b> {
    pub fn new(out: &'b mut Vec<u8>) -> Self {
        Writer { out }
    }

    pub fn nil(&mut self) {
        let _ = rmp::encode::write_nil(self.out);
    }

    pub fn bool(&mut self, v: bool) {
        let _ = rmp::encode::write_bool(self.out, v);
    }

    pub fn uint(&mut self, v: u64) {
        let _ = rmp::encode::write_uint(self.out, v);
    }

    /// Non-negative values take the unsigned encodings, as msgspec writes Python ints.
    pub fn int(&mut self, v: i64) {
        let _ = rmp::encode::write_sint(self.out, v);
    }

    /// Python floats are float64 on the wire, always.
    pub fn f64(&mut self, v: f64) {
        let _ = rmp::encode::write_f64(self.out, v);
    }

    pub fn str(&mut self, s: &str) {
        let _ = rmp::encode::write_str(self.out, s);
    }

    pub fn bin(&mut self, b: &[u8]) {
        let _ = rmp::encode::write_bin(self.out, b);
    }

    /// Minimal array header (fixarray / array16 / array32).
    pub fn array(&mut self, n: usize) {
        let _ = rmp::encode::write_array_len(self.out, n as u32);
    }

    /// array16 or array32 regardless of size: msgspec's header for `array_like` structs.
    pub fn array_wide(&mut self, n: usize) {
        if n <= u16::MAX as usize {
            self.out.push(rmp::Marker::Array16.to_u8());
            self.out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.out.push(rmp::Marker::Array32.to_u8());
            self.out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// Minimal map header.
    pub fn map(&mut self, n: usize) {
        let _ = rmp::encode::write_map_len(self.out, n as u32);
    }

    /// map16 or map32 regardless of size: msgspec's header for `omit_defaults` structs, whose
    /// field count is only known after encoding.
    pub fn map_wide(&mut self, n: usize) {
        if n <= u16::MAX as usize {
            self.out.push(rmp::Marker::Map16.to_u8());
            self.out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.out.push(rmp::Marker::Map32.to_u8());
            self.out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// Reserves a map16 header to be patched by `finish_map16` once the entry count is known.
    pub fn begin_map16(&mut self) -> usize {
        let at = self.out.len();
        self.map_wide(0);
        at
    }

    pub fn finish_map16(&mut self, at: usize, entries: usize) {
        debug_assert!(entries <= u16::MAX as usize);
        debug_assert_eq!(self.out[at], rmp::Marker::Map16.to_u8());
        self.out[at + 1..at + 3].copy_from_slice(&(entries as u16).to_be_bytes());
    }

    pub fn ext(&mut self, code: i8, payload: &[u8]) {
        let _ = rmp::encode::write_ext_meta(self.out, payload.len() as u32, code);
        self.out.extend_from_slice(payload);
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_with_minimal_headers() {
        let cases: [(i64, &[u8]); 10] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0xcc, 0x80]),
            (322, &[0xcd, 0x01, 0x42]),
            (70000, &[0xce, 0x00, 0x01, 0x11, 0x70]),
            (-1, &[0xff]),
            (-32, &[0xe0]),
            (-33, &[0xd0, 0xdf]),
            (-200, &[0xd1, 0xff, 0x38]),
            (i64::MIN, &[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            Writer::new(&mut out).int(v);
            assert_eq!(out, bytes, "encoding {v}");
            assert_eq!(Reader::new(&out).i64().unwrap(), v);
        }
    }

    #[test]
    fn strings_use_msgspec_headers() {
        for n in [0usize, 31, 32, 255, 256, 70000] {
            let s = "x".repeat(n);
            let mut out = Vec::new();
            Writer::new(&mut out).str(&s);
            let expected_header: &[u8] = match n {
                0 => &[0xa0],
                31 => &[0xbf],
                32 => &[0xd9, 32],
                255 => &[0xd9, 255],
                256 => &[0xda, 1, 0],
                _ => &[0xdb, 0, 1, 0x11, 0x70],
            };
            assert!(out.starts_with(expected_header), "len {n}");
            assert_eq!(Reader::new(&out).str().unwrap(), s);
        }
    }

    #[test]
    fn non_minimal_headers_are_accepted() {
        // msgspec writes `dc 00 02` / `de 00 01` for small structs.
        let bytes = [0xdc, 0x00, 0x02, 0x01, 0xde, 0x00, 0x01, 0xa1, b'k', 0xc0];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.array_len().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 1);
        assert_eq!(r.map_len().unwrap(), 1);
        assert_eq!(r.str().unwrap(), "k");
        assert!(r.try_nil().unwrap());
        assert!(r.is_at_end());
    }

    #[test]
    fn truncated_and_hostile_input_is_an_error_not_a_panic() {
        let inputs: [&[u8]; 7] = [
            &[],
            &[0xdc, 0x00],
            &[0xdd, 0xff, 0xff, 0xff, 0xff],
            &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
            &[0xc1],
            &[0xa2, 0xff, 0xfe],
            &[0xc9, 0xff, 0xff, 0xff, 0xff, 0x03],
        ];
        for input in inputs {
            assert!(Reader::new(input).skip().is_err(), "input {input:x?}");
        }
    }

    #[test]
    fn skip_handles_deep_nesting_iteratively() {
        let mut deep = vec![0x91u8; 1_000_000];
        deep.push(0xc0);
        let mut r = Reader::new(&deep);
        r.skip().unwrap();
        assert!(r.is_at_end());
    }

    #[test]
    fn ext_headers() {
        let mut out = Vec::new();
        Writer::new(&mut out).ext(3, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&out[..2], &[0xd7, 0x03]);
        let mut out12 = Vec::new();
        Writer::new(&mut out12).ext(3, &[0; 12]);
        assert_eq!(&out12[..3], &[0xc7, 0x0c, 0x03]);
        let (code, payload) = Reader::new(&out12).ext().unwrap();
        assert_eq!((code, payload.len()), (3, 12));
    }
}
