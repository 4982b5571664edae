//! What the gateway reads of an H.264 sequence parameter set before any frame is decoded:
//! the picture size (after cropping), the chroma format and bit depth, so the pixel limits
//! are enforced on the size the decoder will allocate for, and streams it cannot decode
//! (4:2:2, 4:4:4, over 8 bits, interlaced) are refused by name.

use super::error::VideoError;

/// The picture an SPS describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sps {
    pub width: u32,
    pub height: u32,
}

/// Exp-Golomb reads over the RBSP (emulation-prevention bytes removed as they are met).
struct Bits<'a> {
    bytes: &'a [u8],
    at: usize,
    bit: u8,
    zeros: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<u32, VideoError> {
        if self.bit == 0 {
            let byte = *self.bytes.get(self.at).ok_or_else(|| malformed("it is cut short"))?;
            // 00 00 03: the 03 is emulation prevention, not data.
            if self.zeros >= 2 && byte == 3 {
                self.zeros = 0;
                self.at += 1;
                return self.bit();
            }
            self.zeros = if byte == 0 { self.zeros + 1 } else { 0 };
        }
        let byte = self.bytes[self.at];
        let v = (byte >> (7 - self.bit)) & 1;
        self.bit += 1;
        if self.bit == 8 {
            self.bit = 0;
            self.at += 1;
        }
        Ok(v as u32)
    }

    fn bits(&mut self, n: u32) -> Result<u32, VideoError> {
        (0..n).try_fold(0, |v, _| Ok(v << 1 | self.bit()?))
    }

    fn ue(&mut self) -> Result<u32, VideoError> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return Err(malformed("an Exp-Golomb code is longer than 32 bits"));
            }
        }
        Ok(((1u64 << zeros) - 1 + self.bits(zeros)? as u64).min(u32::MAX as u64) as u32)
    }

    fn se(&mut self) -> Result<i64, VideoError> {
        let k = self.ue()? as i64;
        Ok(if k % 2 == 1 { (k + 1) / 2 } else { -(k / 2) })
    }
}

fn malformed(what: &str) -> VideoError {
    VideoError::Malformed { detail: format!("the H.264 sequence parameter set: {what}") }
}

/// `nal`: one SPS NAL unit, its header byte included.
pub(super) fn parse(nal: &[u8]) -> Result<Sps, VideoError> {
    let mut r = Bits { bytes: nal.get(1..).unwrap_or_default(), at: 0, bit: 0, zeros: 0 };
    let profile = r.bits(8)?;
    r.bits(16)?; // constraint flags, level
    r.ue()?; // seq_parameter_set_id
    let mut chroma_format = 1;
    if matches!(profile, 100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135) {
        chroma_format = r.ue()?;
        if chroma_format == 3 {
            r.bit()?;
        }
        let (luma, chroma) = (r.ue()? + 8, r.ue()? + 8);
        if luma != 8 || chroma != 8 {
            return Err(VideoError::Unsupported { what: format!("H.264 at {luma} bits per sample (8 are decoded)") });
        }
        r.bit()?; // qpprime_y_zero_transform_bypass
        if r.bit()? == 1 {
            for list in 0..if chroma_format == 3 { 12 } else { 8 } {
                if r.bit()? == 1 {
                    skip_scaling_list(&mut r, if list < 6 { 16 } else { 64 })?;
                }
            }
        }
    }
    if chroma_format != 1 {
        let name = ["4:0:0 (monochrome)", "4:2:0", "4:2:2", "4:4:4"].get(chroma_format as usize).copied();
        return Err(VideoError::Unsupported { what: format!("H.264 in {} chroma", name.unwrap_or("an unknown")) });
    }
    r.ue()?; // log2_max_frame_num
    match r.ue()? {
        0 => {
            r.ue()?;
        }
        1 => {
            r.bit()?;
            r.se()?;
            r.se()?;
            for _ in 0..r.ue()?.min(255) {
                r.se()?;
            }
        }
        _ => {}
    }
    r.ue()?; // max_num_ref_frames
    r.bit()?; // gaps_in_frame_num_value_allowed
    let width_mbs = r.ue()? as u64 + 1;
    let height_units = r.ue()? as u64 + 1;
    if r.bit()? == 0 {
        return Err(VideoError::Unsupported { what: "interlaced H.264 (field coding)".into() });
    }
    r.bit()?; // direct_8x8_inference
    let (mut crop_x, mut crop_y) = (0u64, 0u64);
    if r.bit()? == 1 {
        // 4:2:0: each crop unit is two samples either way.
        let [left, right, top, bottom] = [r.ue()?, r.ue()?, r.ue()?, r.ue()?].map(|v| v as u64 * 2);
        (crop_x, crop_y) = (left + right, top + bottom);
    }
    let (full_w, full_h) = (width_mbs * 16, height_units * 16);
    if crop_x >= full_w || crop_y >= full_h {
        return Err(malformed("its cropping removes the whole picture"));
    }
    let side = |v: u64| u32::try_from(v).map_err(|_| malformed("its picture size overflows"));
    Ok(Sps { width: side(full_w - crop_x)?, height: side(full_h - crop_y)? })
}

fn skip_scaling_list(r: &mut Bits<'_>, size: usize) -> Result<(), VideoError> {
    let (mut last, mut next) = (8i64, 8i64);
    for _ in 0..size {
        if next != 0 {
            next = (last + r.se()? + 256) % 256;
        }
        last = if next == 0 { last } else { next };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_refusals() {
        // Hand-assembled SPSs: baseline 1280x720 (80x45 macroblocks), a High one with
        // cropping to 1920x1080, and a High 4:2:2 one.
        type Case<'a> = (&'a [u8], Result<(u32, u32), &'a str>);
        let cases: [Case<'_>; 4] = [
            (&[0x67, 0x42, 0xc0, 0x1f, 0xda, 0x01, 0x40, 0x16, 0xe8], Ok((1280, 720))),
            (&[0x67, 0x64, 0x00, 0x28, 0xac, 0xd9, 0x40, 0x78, 0x02, 0x27, 0xe5, 0x84, 0x00], Ok((1920, 1080))),
            (&[0x67, 0x7a, 0x00, 0x1f, 0xbc], Err("4:2:2")),
            (&[0x67, 0x42], Err("cut short")),
        ];
        for (nal, expected) in cases {
            match (parse(nal), expected) {
                (Ok(sps), Ok((w, h))) => assert_eq!((sps.width, sps.height), (w, h), "{nal:02x?}"),
                (Err(e), Err(text)) => assert!(e.to_string().contains(text), "{nal:02x?}: {e}"),
                (got, _) => panic!("{nal:02x?}: {got:?}, expected {expected:?}"),
            }
        }
    }
}
