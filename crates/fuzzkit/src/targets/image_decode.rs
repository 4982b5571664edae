//! `shardgate_media::decode` on malformed PNG, JPEG, WebP and GIF bytes and on headers that
//! claim huge images. The first byte picks the mode: even = the rest as a file; odd = a
//! header of the format the second byte picks, with the dimensions of the next eight bytes,
//! then the rest (so the size checks see every width and height, not only what mutation finds).
//!
//! Oracles:
//! - No panic, and memory bounded: the limits here allow 1 Mi pixels, and tools/fuzz.sh runs
//!   this target with `-malloc_limit_mb`, so an allocation sized by a header the limits should
//!   have refused is a crash.
//! - A decoded image has the pixels its size says and is within every limit; decoding is a
//!   function of the bytes (twice gives the same answer).
//! - Only bytes with no known signature are `UnknownFormat`; every refusal reads as a sentence.

use shardgate_media::{decode, sniff, DecodeLimits, MediaError};

const LIMITS: DecodeLimits = DecodeLimits { bytes_max: 1 << 20, pixels_max: 1 << 20, side_px_max: 4096 };

/// A header claiming `width` x `height` in the format `kind` picks, then `rest`.
fn header(kind: u8, width: u32, height: u32, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match kind % 4 {
        0 => {
            out.extend_from_slice(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR");
            out.extend_from_slice(&width.to_be_bytes());
            out.extend_from_slice(&height.to_be_bytes());
            out.extend_from_slice(&[8, 2, 0, 0, 0]);
            let crc = crc32fast::hash(&out[12..29]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
        1 => {
            out.extend_from_slice(b"GIF89a");
            out.extend_from_slice(&(width as u16).to_le_bytes());
            out.extend_from_slice(&(height as u16).to_le_bytes());
        }
        2 => {
            out.extend_from_slice(&[0xff, 0xd8, 0xff, 0xc0, 0, 17, 8]);
            out.extend_from_slice(&(height as u16).to_be_bytes());
            out.extend_from_slice(&(width as u16).to_be_bytes());
            out.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        }
        _ => {
            let chunk = ((width.saturating_sub(1)) & 0x3fff) | ((height.saturating_sub(1)) & 0x3fff) << 14;
            out.extend_from_slice(b"RIFF");
            out.extend_from_slice(&(4 + 8 + 5 + rest.len() as u32).to_le_bytes());
            out.extend_from_slice(b"WEBPVP8L");
            out.extend_from_slice(&(5 + rest.len() as u32).to_le_bytes());
            out.push(0x2f);
            out.extend_from_slice(&chunk.to_le_bytes());
        }
    }
    out.extend_from_slice(rest);
    out
}

/// One input: panics (an oracle failed) or returns.
pub fn run(raw: &[u8]) {
    let Some((&mode, rest)) = raw.split_first() else { return };
    let bytes = match (mode % 2, rest) {
        (1, [kind, w0, w1, w2, w3, h0, h1, h2, h3, tail @ ..]) => {
            header(*kind, u32::from_le_bytes([*w0, *w1, *w2, *w3]), u32::from_le_bytes([*h0, *h1, *h2, *h3]), tail)
        }
        _ => rest.to_vec(),
    };
    let result = decode(&bytes, &LIMITS);
    assert_eq!(result, decode(&bytes, &LIMITS), "decoding twice differs");
    match result {
        Ok(decoded) => {
            let image = decoded.image;
            assert_eq!(image.pixels.len(), image.width as usize * image.height as usize * 3);
            assert!(image.width >= 1 && image.height >= 1);
            assert!(image.width <= LIMITS.side_px_max && image.height <= LIMITS.side_px_max);
            assert!(image.width as u64 * image.height as u64 <= LIMITS.pixels_max);
        }
        Err(error) => {
            let unknown = matches!(error, MediaError::UnknownFormat);
            let refused_early = matches!(error, MediaError::Empty | MediaError::TooManyBytes { .. });
            assert!(refused_early || unknown == sniff(&bytes).is_none(), "{error:?}");
            assert!(error.to_string().len() > 10, "{error:?}");
        }
    }
}
