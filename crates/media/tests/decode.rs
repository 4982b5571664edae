//! Decoding: each refusal, from bytes built here (headers claiming huge images, truncations,
//! wrong formats), and small images of every encoder this workspace has round-tripping.

use shardgate_media::{decode, DecodeLimits, ImageFormat, MediaError, RgbImage};

fn png(width: u32, height: u32, colour: png::ColorType, samples: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(colour);
    let mut writer = encoder.write_header().expect("header");
    if let Some(samples) = samples {
        writer.write_image_data(samples).expect("data");
    }
    drop(writer);
    out
}

/// A PNG that is only its signature and `IHDR`: dimensions and nothing behind them.
fn png_header(width: u32, height: u32) -> Vec<u8> {
    let mut out = png(1, 1, png::ColorType::Rgb, None);
    out.truncate(33);
    out[16..20].copy_from_slice(&width.to_be_bytes());
    out[20..24].copy_from_slice(&height.to_be_bytes());
    let crc = crc32fast::hash(&out[12..29]);
    out[29..33].copy_from_slice(&crc.to_be_bytes());
    out
}

/// A one-pixel GIF whose logical screen claims `width` x `height`.
fn gif_screen(width: u16, height: u16) -> Vec<u8> {
    let mut out = gif(1, 1, &[0, 0, 0, 255, 255, 255], &[1], None);
    out[6..8].copy_from_slice(&width.to_le_bytes());
    out[8..10].copy_from_slice(&height.to_le_bytes());
    out
}

/// A GIF's header and logical screen, then its trailer: no frame.
fn gif_header(width: u16, height: u16) -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&height.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, b';']);
    out
}

/// A baseline JPEG's markers up to its scan, with no tables and no data.
fn jpeg_header(width: u16, height: u16) -> Vec<u8> {
    let mut out = vec![0xff, 0xd8, 0xff, 0xc0, 0, 11, 8];
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&width.to_be_bytes());
    out.extend_from_slice(&[1, 1, 0x11, 0]);
    out.extend_from_slice(&[0xff, 0xda, 0, 8, 1, 1, 0, 0, 63, 0]);
    out
}

/// A progressive 8x8 grey JPEG of `scans` scans that each set the DC coefficient to 0 (libjpeg
/// warns of a repeated scan and decodes on, as in PIL): mid-grey whatever the count.
fn jpeg_progressive_scans(scans: usize) -> Vec<u8> {
    let mut out = vec![0xff, 0xd8];
    out.extend_from_slice(&[0xff, 0xdb, 0, 67, 0]);
    out.extend_from_slice(&[1; 64]);
    out.extend_from_slice(&[0xff, 0xc2, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0]);
    // One DC code, `0` of one bit, for difference category 0.
    out.extend_from_slice(&[0xff, 0xc4, 0, 20, 0x00, 1]);
    out.extend_from_slice(&[0; 15]);
    out.push(0);
    for _ in 0..scans {
        // A DC first scan of the one component, then its block: the code and padding ones.
        out.extend_from_slice(&[0xff, 0xda, 0, 8, 1, 1, 0x00, 0, 0, 0, 0x7f]);
    }
    out.extend_from_slice(&[0xff, 0xd9]);
    out
}

/// An extended WebP's header claiming a `width` x `height` canvas, then a lossless header.
fn webp_extended_header(width: u32, height: u32) -> Vec<u8> {
    let mut chunk = vec![0; 4];
    chunk.extend_from_slice(&(width - 1).to_le_bytes()[..3]);
    chunk.extend_from_slice(&(height - 1).to_le_bytes()[..3]);
    let lossless = webp_lossless_header(1, 1);
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(4 + 8 + chunk.len() as u32 + lossless.len() as u32 - 12).to_le_bytes());
    out.extend_from_slice(b"WEBPVP8X");
    out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&lossless[12..]);
    out
}

/// A lossless WebP's header claiming `width` x `height` (each below 16384), no pixels.
fn webp_lossless_header(width: u32, height: u32) -> Vec<u8> {
    let bits = (width - 1) | (height - 1) << 14;
    let mut chunk = vec![0x2f];
    chunk.extend_from_slice(&bits.to_le_bytes());
    let mut out = b"RIFF".to_vec();
    out.extend_from_slice(&(4 + 8 + chunk.len() as u32 + 1).to_le_bytes());
    out.extend_from_slice(b"WEBPVP8L");
    out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
    out.extend_from_slice(&chunk);
    out.push(0);
    out
}

fn webp_lossless(image: &RgbImage) -> Vec<u8> {
    let mut out = Vec::new();
    let encoder = image_webp::WebPEncoder::new(&mut out);
    encoder.encode(&image.pixels, image.width, image.height, image_webp::ColorType::Rgb8).expect("webp");
    out
}

fn gif(width: u16, height: u16, palette: &[u8], indices: &[u8], transparent: Option<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut encoder = gif::Encoder::new(&mut out, width, height, palette).expect("gif");
        let mut frame = gif::Frame { width, height, buffer: indices.into(), transparent, ..Default::default() };
        frame.palette = None;
        encoder.write_frame(&frame).expect("frame");
    }
    out
}

fn small_rgb() -> RgbImage {
    let pixels = (0..4 * 3 * 3).map(|i| (i * 7) as u8).collect();
    RgbImage { width: 4, height: 3, pixels }
}

#[test]
fn refusals() {
    let small = DecodeLimits { bytes_max: 64, ..DecodeLimits::default() };
    let valid_png = png(4, 3, png::ColorType::Rgb, Some(&small_rgb().pixels));
    let mut truncated_png = valid_png.clone();
    truncated_png.truncate(valid_png.len() - 20);
    let defaults = DecodeLimits::default();
    let pixels = defaults.pixels_max;
    let side = defaults.side_px_max;
    let cases: Vec<(&str, Vec<u8>, DecodeLimits, MediaError)> = vec![
        ("empty", vec![], defaults, MediaError::Empty),
        ("not an image", b"<html>hello</html>".to_vec(), defaults, MediaError::UnknownFormat),
        ("over the byte limit", vec![0; 65], small, MediaError::TooManyBytes { bytes: 65, max: 64 }),
        ("PNG side", png_header(20000, 10), defaults, MediaError::SideTooLong { width: 20000, height: 10, max: side }),
        (
            "PNG pixels",
            png_header(8000, 8000),
            defaults,
            MediaError::TooManyPixels { width: 8000, height: 8000, max: pixels },
        ),
        ("PNG 0x0", png_header(0, 0), defaults, malformed(ImageFormat::Png)),
        ("PNG truncated", truncated_png, defaults, malformed(ImageFormat::Png)),
        ("PNG header only", png_header(16, 16), defaults, malformed(ImageFormat::Png)),
        ("GIF side", gif_screen(65535, 2), defaults, MediaError::SideTooLong { width: 65535, height: 2, max: side }),
        (
            "GIF pixels",
            gif_screen(16000, 16000),
            defaults,
            MediaError::TooManyPixels { width: 16000, height: 16000, max: pixels },
        ),
        ("GIF without a frame", gif_header(16, 16), defaults, malformed(ImageFormat::Gif)),
        (
            "JPEG side",
            jpeg_header(20000, 10),
            defaults,
            MediaError::SideTooLong { width: 20000, height: 10, max: side },
        ),
        // libjpeg's own bound (65500), before ours.
        ("JPEG beyond libjpeg", jpeg_header(65535, 65535), defaults, malformed(ImageFormat::Jpeg)),
        (
            "JPEG pixels",
            jpeg_header(9000, 9000),
            defaults,
            MediaError::TooManyPixels { width: 9000, height: 9000, max: pixels },
        ),
        ("JPEG without data", jpeg_header(16, 16), defaults, malformed(ImageFormat::Jpeg)),
        ("JPEG signature only", vec![0xff, 0xd8, 0xff], defaults, malformed(ImageFormat::Jpeg)),
        (
            "WebP pixels",
            webp_lossless_header(12000, 12000),
            defaults,
            MediaError::TooManyPixels { width: 12000, height: 12000, max: pixels },
        ),
        (
            "WebP side",
            webp_extended_header(20000, 10),
            defaults,
            MediaError::SideTooLong { width: 20000, height: 10, max: side },
        ),
        ("WebP without data", webp_lossless_header(16, 16), defaults, malformed(ImageFormat::WebP)),
        ("WebP RIFF only", b"RIFF\x04\x00\x00\x00WEBP".to_vec(), defaults, malformed(ImageFormat::WebP)),
    ];
    for (name, bytes, limits, expected) in cases {
        let got = decode(&bytes, &limits);
        match (&got, &expected) {
            (Err(MediaError::Malformed { format, detail }), MediaError::Malformed { format: want, .. }) => {
                assert_eq!(format, want, "{name}: {detail}");
                assert!(!detail.is_empty(), "{name}");
            }
            _ => assert_eq!(got.as_ref().err(), Some(&expected), "{name}"),
        }
    }
}

#[test]
fn jpeg_scans_are_bounded() {
    let max = shardgate_media::limits::jpeg_scans_max as usize;
    let cases = [(1, true), (max, true), (max + 1, false), (5 * max, false)];
    for (scans, decodes) in cases {
        match decode(&jpeg_progressive_scans(scans), &DecodeLimits::default()) {
            Ok(decoded) if decodes => {
                assert_eq!(decoded.image.pixels, vec![128; 8 * 8 * 3], "{scans} scans");
                assert!(decoded.converted, "grey is converted");
            }
            Err(MediaError::Malformed { format: ImageFormat::Jpeg, detail }) if !decodes => {
                assert_eq!(detail, format!("more than {max} progressive scans"), "{scans} scans")
            }
            other => panic!("{scans} scans: {other:?}"),
        }
    }
}

fn malformed(format: ImageFormat) -> MediaError {
    MediaError::Malformed { format, detail: String::new() }
}

#[test]
fn refusals_read_as_sentences() {
    let cases = [
        (MediaError::TooManyBytes { bytes: 30, max: 20 }, "the image is 30 bytes, more than the limit of 20 bytes"),
        (
            MediaError::TooManyPixels { width: 8000, height: 8000, max: 100 },
            "the image is 8000x8000 (64000000 pixels), more than the limit of 100 pixels",
        ),
        (malformed(ImageFormat::WebP), "the WebP image cannot be decoded: "),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

#[test]
fn small_images_decode_to_rgb() {
    let rgb = small_rgb();
    let grey: Vec<u8> = (0..12).map(|i| i * 20).collect();
    let grey_rgb = RgbImage { width: 4, height: 3, pixels: grey.iter().flat_map(|&l| [l, l, l]).collect() };
    // RGBA over white as PIL's paste blends: alpha 0 is white, 255 the colour itself.
    let rgba: Vec<u8> = (0..12u8).flat_map(|i| [i * 20, 5, 250, [0, 255, 128][i as usize % 3]]).collect();
    let over_white = |c: u8, a: u8| {
        let t = 255 * (255 - a as u32) + c as u32 * a as u32 + 128;
        (((t >> 8) + t) >> 8) as u8
    };
    let rgba_rgb: Vec<u8> = rgba.chunks_exact(4).flat_map(|p| [0, 1, 2].map(|c| over_white(p[c], p[3]))).collect();
    let palette = [10, 20, 30, 200, 100, 0, 1, 2, 3];
    let indices: Vec<u8> = (0..12).map(|i| (i % 3) as u8).collect();
    let gif_rgb: Vec<u8> = indices
        .iter()
        .flat_map(|&i| [palette[i as usize * 3], palette[i as usize * 3 + 1], palette[i as usize * 3 + 2]])
        .collect();
    let gif_transparent: Vec<u8> = indices
        .iter()
        .flat_map(|&i| {
            if i == 2 {
                [255; 3]
            } else {
                [palette[i as usize * 3], palette[i as usize * 3 + 1], palette[i as usize * 3 + 2]]
            }
        })
        .collect();
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("PNG RGB", png(4, 3, png::ColorType::Rgb, Some(&rgb.pixels)), rgb.pixels.clone()),
        ("PNG grey", png(4, 3, png::ColorType::Grayscale, Some(&grey)), grey_rgb.pixels.clone()),
        ("PNG RGBA", png(4, 3, png::ColorType::Rgba, Some(&rgba)), rgba_rgb),
        ("WebP lossless", webp_lossless(&rgb), rgb.pixels.clone()),
        ("GIF", gif(4, 3, &palette, &indices, None), gif_rgb),
        ("GIF transparent index", gif(4, 3, &palette, &indices, Some(2)), gif_transparent),
    ];
    for (name, bytes, expected) in cases {
        let image = decode(&bytes, &DecodeLimits::default()).unwrap_or_else(|e| panic!("{name}: {e}")).image;
        assert_eq!((image.width, image.height), (4, 3), "{name}");
        assert_eq!(image.pixels, expected, "{name}");
    }
}

/// A 3x2 grey PNG of the values 0..6 with an `eXIf` chunk holding `exif` before the image data.
fn png_with_exif(exif: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, 3, 2);
    encoder.set_color(png::ColorType::Grayscale);
    let mut writer = encoder.write_header().expect("header");
    writer.write_chunk(png::chunk::eXIf, exif).expect("eXIf");
    writer.write_image_data(&[0, 1, 2, 3, 4, 5]).expect("data");
    drop(writer);
    out
}

/// A little-endian TIFF whose first IFD holds one `Orientation` entry.
fn orientation_exif(orientation: u16) -> Vec<u8> {
    let mut tiff = b"II\x2a\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00".to_vec();
    tiff.extend_from_slice(&orientation.to_le_bytes());
    tiff.extend_from_slice(&[0; 6]);
    tiff
}

#[test]
fn exif_orientation_turns_the_pixels() {
    // (what, EXIF, size, values) where the values are `Image.transpose`'s of the stored 0..6 in
    // PIL.
    type Case = (&'static str, Vec<u8>, (u32, u32), [u8; 6]);
    let cases: [Case; 5] = [
        ("1: as stored", orientation_exif(1), (3, 2), [0, 1, 2, 3, 4, 5]),
        ("3: half a turn", orientation_exif(3), (3, 2), [5, 4, 3, 2, 1, 0]),
        ("6: a quarter turn clockwise", orientation_exif(6), (2, 3), [3, 0, 4, 1, 5, 2]),
        ("8: a quarter turn back", orientation_exif(8), (2, 3), [2, 5, 1, 4, 0, 3]),
        ("not TIFF: as stored", b"not a TIFF at all".to_vec(), (3, 2), [0, 1, 2, 3, 4, 5]),
    ];
    for (name, exif, size, values) in cases {
        let image =
            decode(&png_with_exif(&exif), &DecodeLimits::default()).unwrap_or_else(|e| panic!("{name}: {e}")).image;
        assert_eq!((image.width, image.height), size, "{name}");
        let got: Vec<u8> = image.pixels.chunks_exact(3).map(|p| p[0]).collect();
        assert_eq!(got, values, "{name}");
    }
}
