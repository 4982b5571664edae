//! EXIF orientation, as vLLM's loader applies it (`ImageOps.exif_transpose` right after
//! `Image.open`): the `Orientation` tag (0x0112) of the first IFD of the image's EXIF, else a
//! `tiff:Orientation` in its XMP, read the way Pillow 13 reads them, and the pixels turned so
//! they look as displayed. Values other than 2..=8, and EXIF Pillow cannot parse, leave the
//! image as stored.
//!
//! Pillow's reading, kept here where it decides the outcome: `Exif\0\0` stripped once or twice;
//! the TIFF header one of its six prefixes (else no orientation at all, XMP included: the
//! exception ends `exif_transpose`); a truncated IFD keeps the entries read before the cut; a
//! repeated tag keeps its first entry; an entry of an unknown type, out of the data, or past
//! the running total of out-of-line bytes is skipped; a tag with more values than one takes
//! the first; the value compares as a number (`Fraction` for rationals).

use super::RgbImage;

const ORIENTATION: u16 = 0x0112;
const EXIF_HEADER: &[u8] = b"Exif\0\0";
const TIFF_PREFIXES: [&[u8; 4]; 6] =
    [b"MM\x00\x2a", b"II\x2a\x00", b"MM\x2a\x00", b"II\x00\x2a", b"MM\x00\x2b", b"II\x2b\x00"];

/// What the EXIF says about orientation.
#[derive(Debug, PartialEq)]
enum Exif {
    /// Pillow raises: no orientation, and no XMP fallback.
    Unreadable,
    /// No orientation entry survived; the XMP may give one.
    Absent,
    /// The entry's first value, as a number.
    Value(f64),
}

struct Tiff<'a> {
    data: &'a [u8],
    big_endian: bool,
}

impl Tiff<'_> {
    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        let mut out: [u8; N] = self.data.get(at..at.checked_add(N)?)?.try_into().ok()?;
        if !self.big_endian {
            out.reverse();
        }
        Some(out)
    }

    fn u16(&self, at: usize) -> Option<u16> {
        self.bytes(at).map(u16::from_be_bytes)
    }

    fn u32(&self, at: usize) -> Option<u32> {
        self.bytes(at).map(u32::from_be_bytes)
    }

    /// The first value of `value` (one of the TIFF types Pillow loads) as a number; `None` for
    /// text or a type Pillow does not load.
    fn number(&self, kind: u16, value: &[u8]) -> Option<f64> {
        let tiff = Tiff { data: value, big_endian: self.big_endian };
        match kind {
            1 | 7 => Some(value[0] as f64),
            6 => Some(value[0] as i8 as f64),
            3 => tiff.u16(0).map(|v| v as f64),
            8 => tiff.u16(0).map(|v| v as i16 as f64),
            4 | 13 => tiff.u32(0).map(|v| v as f64),
            9 => tiff.u32(0).map(|v| v as i32 as f64),
            5 => Some(tiff.u32(0)? as f64 / tiff.u32(4)? as f64),
            10 => Some(tiff.u32(0)? as i32 as f64 / tiff.u32(4)? as i32 as f64),
            11 => tiff.u32(0).map(|v| f32::from_bits(v) as f64),
            12 => tiff.bytes(0).map(|b| f64::from_bits(u64::from_be_bytes(b))),
            _ => None,
        }
    }
}

/// Bytes of one value of each TIFF type Pillow loads (ASCII 2 included; BigTIFF's 16-18 not).
fn unit_bytes(kind: u16) -> Option<usize> {
    match kind {
        1 | 2 | 6 | 7 => Some(1),
        3 | 8 => Some(2),
        4 | 9 | 11 | 13 => Some(4),
        5 | 10 | 12 => Some(8),
        _ => None,
    }
}

fn exif_orientation(exif: &[u8]) -> Exif {
    let mut data = exif;
    for _ in 0..2 {
        data = data.strip_prefix(EXIF_HEADER).unwrap_or(data);
    }
    if data.is_empty() {
        return Exif::Absent;
    }
    let Some(head) = data.get(..8) else { return Exif::Unreadable };
    if !TIFF_PREFIXES.iter().any(|p| head.starts_with(*p)) {
        return Exif::Unreadable;
    }
    let tiff = Tiff { data, big_endian: head[0] == b'M' };
    // BigTIFF's IFD layout (8-byte counts and offsets) is not read: no camera writes it in EXIF.
    if head[2] == 0x2b || head[3] == 0x2b {
        return Exif::Absent;
    }
    let Some(ifd) = tiff.u32(4).map(|v| v as usize) else { return Exif::Unreadable };
    let Some(count) = tiff.u16(ifd) else { return Exif::Absent };
    let mut seen = Vec::new();
    let mut out_of_line = 0usize;
    for i in 0..count as usize {
        let at = ifd + 2 + i * 12;
        let (Some(tag), Some(kind), Some(n), Some(inline)) =
            (tiff.u16(at), tiff.u16(at + 2), tiff.u32(at + 4), data.get(at + 8..at + 12))
        else {
            break;
        };
        if seen.contains(&tag) {
            continue;
        }
        let Some(unit) = unit_bytes(kind) else { continue };
        let size = n as usize * unit;
        let value = if size > 4 {
            out_of_line += size;
            let offset = tiff.u32(at + 8).unwrap_or(0) as usize;
            match data.get(offset..offset.saturating_add(size)) {
                Some(value) if out_of_line <= data.len() => value,
                _ => continue,
            }
        } else {
            &inline[..size]
        };
        if value.is_empty() {
            continue;
        }
        seen.push(tag);
        if tag == ORIENTATION {
            return tiff.number(kind, value).map_or(Exif::Value(f64::NAN), Exif::Value);
        }
    }
    Exif::Absent
}

/// The first `tiff:Orientation="d` or `tiff:Orientation>d` of an XMP packet.
fn xmp_orientation(xmp: &[u8]) -> Option<u8> {
    const NAME: &[u8] = b"tiff:Orientation";
    (0..xmp.len()).filter(|&i| xmp[i..].starts_with(NAME)).find_map(|i| {
        let rest = &xmp[i + NAME.len()..];
        let digits = rest.strip_prefix(b"=\"").or_else(|| rest.strip_prefix(b">"))?;
        digits.first().filter(|d| d.is_ascii_digit()).map(|d| d - b'0')
    })
}

/// The orientation (2..=8) the loader applies, from the image's EXIF as Pillow holds it
/// (`info["exif"]`) and its XMP packet.
pub(super) fn orientation(exif: Option<&[u8]>, xmp: Option<&[u8]>) -> Option<u8> {
    let value = match exif.map_or(Exif::Absent, exif_orientation) {
        Exif::Unreadable => return None,
        Exif::Value(v) => v,
        Exif::Absent => xmp.and_then(xmp_orientation)? as f64,
    };
    (2..=8u8).find(|&o| o as f64 == value)
}

/// `image.transpose(method)` for the orientation's method; 1 (or anything else) as stored.
pub(super) fn apply(image: RgbImage, orientation: Option<u8>) -> RgbImage {
    let Some(orientation) = orientation.filter(|o| (2..=8).contains(o)) else { return image };
    let (w, h) = (image.width as usize, image.height as usize);
    let swaps = orientation >= 5;
    let (out_w, out_h) = if swaps { (h, w) } else { (w, h) };
    let mut pixels = Vec::with_capacity(image.pixels.len());
    for y in 0..out_h {
        for x in 0..out_w {
            // The stored pixel shown at (x, y).
            let (sx, sy) = match orientation {
                2 => (w - 1 - x, y),
                3 => (w - 1 - x, h - 1 - y),
                4 => (x, h - 1 - y),
                5 => (y, x),
                6 => (y, h - 1 - x),
                7 => (w - 1 - y, h - 1 - x),
                _ => (w - 1 - y, x),
            };
            let at = (sy * w + sx) * 3;
            pixels.extend_from_slice(&image.pixels[at..at + 3]);
        }
    }
    RgbImage { width: out_w as u32, height: out_h as u32, pixels }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little- or big-endian TIFF whose first IFD holds `entries` (tag, type, count, value).
    fn tiff(big_endian: bool, entries: &[(u16, u16, u32, [u8; 4])]) -> Vec<u8> {
        let u16b = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let u32b = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut out = if big_endian { b"MM\x00\x2a".to_vec() } else { b"II\x2a\x00".to_vec() };
        out.extend_from_slice(&u32b(8));
        out.extend_from_slice(&u16b(entries.len() as u16));
        for &(tag, kind, count, value) in entries {
            out.extend_from_slice(&u16b(tag));
            out.extend_from_slice(&u16b(kind));
            out.extend_from_slice(&u32b(count));
            out.extend_from_slice(&value);
        }
        out.extend_from_slice(&u32b(0));
        out
    }

    /// (what, EXIF, XMP, orientation)
    type Case<'a> = (&'a str, Option<Vec<u8>>, Option<&'a [u8]>, Option<u8>);

    #[test]
    fn reads_the_orientation_as_pillow_does() {
        let le6 = [6, 0, 0, 0];
        let be6 = [0, 6, 0, 0];
        let with_header = |t: Vec<u8>| [EXIF_HEADER, &t].concat();
        let cases: Vec<Case> = vec![
            ("short, little-endian", Some(tiff(false, &[(0x0112, 3, 1, le6)])), None, Some(6)),
            ("short, big-endian", Some(tiff(true, &[(0x0112, 3, 1, be6)])), None, Some(6)),
            ("behind the JPEG header", Some(with_header(tiff(false, &[(0x0112, 3, 1, le6)]))), None, Some(6)),
            (
                "two headers",
                Some(with_header(with_header(tiff(false, &[(0x0112, 3, 1, [3, 0, 0, 0])])))),
                None,
                Some(3),
            ),
            ("long", Some(tiff(false, &[(0x0112, 4, 1, [8, 0, 0, 0])])), None, Some(8)),
            ("two shorts: the first", Some(tiff(false, &[(0x0112, 3, 2, [5, 0, 7, 0])])), None, Some(5)),
            ("1 is as stored", Some(tiff(false, &[(0x0112, 3, 1, [1, 0, 0, 0])])), None, None),
            ("9 is not an orientation", Some(tiff(false, &[(0x0112, 3, 1, [9, 0, 0, 0])])), None, None),
            ("text is not a number", Some(tiff(false, &[(0x0112, 2, 2, *b"6\0\0\0")])), None, None),
            ("unknown type: skipped", Some(tiff(false, &[(0x0112, 99, 1, le6)])), None, None),
            (
                "the first of two entries",
                Some(tiff(false, &[(0x0112, 3, 1, [2, 0, 0, 0]), (0x0112, 3, 1, le6)])),
                None,
                Some(2),
            ),
            (
                "other tags only: XMP",
                Some(tiff(false, &[(0x010f, 2, 4, *b"abc\0")])),
                Some(b"<tiff:Orientation>7<"),
                Some(7),
            ),
            (
                "the EXIF's 1 wins over XMP",
                Some(tiff(false, &[(0x0112, 3, 1, [1, 0, 0, 0])])),
                Some(b"tiff:Orientation=\"6\""),
                None,
            ),
            ("not TIFF: no XMP either", Some(b"JUNKJUNKJUNK".to_vec()), Some(b"tiff:Orientation=\"6\""), None),
            ("short of a TIFF header", Some(b"II\x2a\x00".to_vec()), None, None),
            (
                "IFD past the end: XMP",
                Some(b"II\x2a\x00\xff\x00\x00\x00".to_vec()),
                Some(b"tiff:Orientation=\"4\""),
                Some(4),
            ),
            ("XMP alone", None, Some(b"x tiff:Orientation y tiff:Orientation=\"5\" z"), Some(5)),
            ("no metadata", None, None, None),
        ];
        for (what, exif, xmp, expected) in cases {
            assert_eq!(orientation(exif.as_deref(), xmp), expected, "{what}");
        }
    }

    #[test]
    fn truncated_ifds_keep_the_entries_before_the_cut() {
        let mut exif = tiff(false, &[(0x0112, 3, 1, [6, 0, 0, 0]), (0x010f, 2, 4, *b"abc\0")]);
        exif.truncate(8 + 2 + 12 + 5);
        assert_eq!(orientation(Some(&exif), None), Some(6));
        exif.truncate(8 + 2 + 5);
        assert_eq!(orientation(Some(&exif), Some(b"tiff:Orientation=\"3\"")), Some(3));
    }

    #[test]
    fn transposes_as_pil() {
        // A 3x2 image whose pixel values are their stored index; PIL's Image.transpose of it.
        let image = RgbImage { width: 3, height: 2, pixels: (0..6u8).flat_map(|i| [i, i, i]).collect() };
        let cases: [(u8, (u32, u32), [u8; 6]); 7] = [
            (2, (3, 2), [2, 1, 0, 5, 4, 3]),
            (3, (3, 2), [5, 4, 3, 2, 1, 0]),
            (4, (3, 2), [3, 4, 5, 0, 1, 2]),
            (5, (2, 3), [0, 3, 1, 4, 2, 5]),
            (6, (2, 3), [3, 0, 4, 1, 5, 2]),
            (7, (2, 3), [5, 2, 4, 1, 3, 0]),
            (8, (2, 3), [2, 5, 1, 4, 0, 3]),
        ];
        for (orientation, size, expected) in cases {
            let out = apply(image.clone(), Some(orientation));
            assert_eq!((out.width, out.height), size, "{orientation}");
            let got: Vec<u8> = out.pixels.chunks_exact(3).map(|p| p[0]).collect();
            assert_eq!(got, expected, "{orientation}");
        }
        assert_eq!(apply(image.clone(), None), image);
    }
}
