//! JPEG through libjpeg (`libjpeg.rs`), so the pixels are PIL's to the bit: libjpeg-turbo's
//! ISLOW IDCT, fancy upsampling and colour tables, grey and CMYK converted as PIL's
//! `convert("RGB")` converts them; then turned by its EXIF or XMP orientation.

use super::libjpeg;
use super::orientation::{apply, orientation};
use super::{DecodeLimits, Decoded, RgbImage};
use crate::error::MediaError;

const EXIF: &[u8] = b"Exif\0\0";
const XMP: &[u8] = b"http://ns.adobe.com/xap/1.0/\0";

/// The EXIF and XMP of the segments before the scan, as PIL's JPEG reader keeps them: the first
/// EXIF segment whole with the payloads of later ones appended, the last XMP packet.
fn metadata(bytes: &[u8]) -> (Option<Vec<u8>>, Option<&[u8]>) {
    let (mut exif, mut xmp): (Option<Vec<u8>>, Option<&[u8]>) = (None, None);
    let mut at = 2;
    while let (Some(0xff), Some(&marker)) = (bytes.get(at), bytes.get(at + 1)) {
        match marker {
            0xff => at += 1,
            // Start of scan and end of image: PIL reads no further markers.
            0xda | 0xd9 => break,
            0x01 | 0xd0..=0xd7 => at += 2,
            _ => {
                let Some(length) = bytes.get(at + 2..at + 4).map(|l| u16::from_be_bytes([l[0], l[1]]) as usize) else {
                    break;
                };
                let Some(segment) = bytes.get(at + 4..at + 2 + length.max(2)) else { break };
                if marker == 0xe1 && segment.starts_with(EXIF) {
                    match exif.as_mut() {
                        Some(exif) => exif.extend_from_slice(&segment[EXIF.len()..]),
                        None => exif = Some(segment.to_vec()),
                    }
                } else if marker == 0xe1 && segment.starts_with(XMP) {
                    xmp = Some(&segment[XMP.len()..]);
                }
                at += 2 + length.max(2);
            }
        }
    }
    (exif, xmp)
}

/// PIL's CMYK to RGB, in place: it reads libjpeg's CMYK as Adobe's inverted ink ("CMYK;I"),
/// then `convert("RGB")` gives `k' - c' * k' / 255` per channel with `k' = 255 - k`, which on
/// the inverted samples is `k - (255 - c) * k / 255`, rounded as its `MULDIV255`.
fn cmyk_to_rgb(samples: &mut Vec<u8>) {
    let muldiv255 = |a: u32, b: u32| {
        let product = a * b + 128;
        ((product >> 8) + product) >> 8
    };
    for pixel in 0..samples.len() / 4 {
        let [c, m, y, k] = [0, 1, 2, 3].map(|i| samples[pixel * 4 + i] as u32);
        for (channel, ink) in [c, m, y].into_iter().enumerate() {
            samples[pixel * 3 + channel] = (k - muldiv255(255 - ink, k)) as u8;
        }
    }
    samples.truncate(samples.len() / 4 * 3);
}

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let mut out = libjpeg::decode(bytes, limits)?;
    if out.components == 4 {
        cmyk_to_rgb(&mut out.samples);
    }
    let (exif, xmp) = metadata(bytes);
    let image = RgbImage { width: out.width, height: out.height, pixels: out.samples };
    // PIL opens grey JPEGs as L and four-component ones as CMYK: vLLM's loader converts them.
    Ok(Decoded { image: apply(image, orientation(exif.as_deref(), xmp)), converted: out.components != 3 })
}

#[cfg(test)]
mod tests {
    use super::cmyk_to_rgb;

    #[test]
    fn cmyk_converts_as_pil() {
        // libjpeg's CMYK samples, and PIL's `frombytes("CMYK", ..., "raw", "CMYK;I")
        // .convert("RGB")` of them.
        let cases = [
            ([0, 0, 0, 0], [0, 0, 0]),
            ([255, 255, 255, 255], [255, 255, 255]),
            ([0, 128, 255, 200], [0, 100, 200]),
            ([10, 20, 30, 255], [10, 20, 30]),
            ([200, 100, 50, 128], [100, 50, 25]),
            ([255, 0, 0, 1], [1, 0, 0]),
        ];
        let mut samples: Vec<u8> = cases.iter().flat_map(|(cmyk, _)| *cmyk).collect();
        cmyk_to_rgb(&mut samples);
        let expected: Vec<u8> = cases.iter().flat_map(|(_, rgb)| *rgb).collect();
        assert_eq!(samples, expected);
    }
}
