//! JPEG through `zune-jpeg`, out as RGB whatever the stored colour space, turned by its EXIF or
//! XMP orientation.

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::orientation::{apply, orientation};
use super::{malformed, DecodeLimits, Decoded, RgbImage};
use crate::error::{ImageFormat, MediaError};

const FORMAT: ImageFormat = ImageFormat::Jpeg;
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

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Decoded, MediaError> {
    let options = DecoderOptions::new_safe()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(usize::MAX)
        .set_max_height(usize::MAX);
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(|e| malformed(FORMAT, e))?;
    let info = decoder.info().ok_or_else(|| malformed(FORMAT, "no frame header"))?;
    let (width, height) = (info.width as u32, info.height as u32);
    // PIL opens grey JPEGs as L and four-component ones as CMYK.
    let converted = info.components != 3;
    limits.check_size(FORMAT, width, height)?;
    let size = decoder.output_buffer_size().ok_or_else(|| malformed(FORMAT, "its size overflows"))?;
    let mut pixels = vec![0; size];
    decoder.decode_into(&mut pixels).map_err(|e| malformed(FORMAT, e))?;
    let (exif, xmp) = metadata(bytes);
    let image = apply(RgbImage { width, height, pixels }, orientation(exif.as_deref(), xmp));
    Ok(Decoded { image, converted })
}
