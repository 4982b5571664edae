//! The smallest ISO-BMFF (MP4) reader the video path needs: the first video track's sample
//! entry (codec, `avcC`), its timescale and sample table (sizes, chunk offsets, durations), so
//! each coded frame can be cut out of the file by offset. Nothing is copied: samples are
//! slices of the input. Every count read from a box is checked against the bytes that box
//! holds and the frame limit before anything is allocated for it.

use super::error::VideoError;

/// One box: its type and its payload (after the header).
struct Mp4Box<'a> {
    kind: [u8; 4],
    body: &'a [u8],
}

/// The boxes laid end to end in `bytes`.
fn boxes(mut bytes: &[u8]) -> impl Iterator<Item = Result<Mp4Box<'_>, VideoError>> {
    std::iter::from_fn(move || {
        if bytes.is_empty() {
            return None;
        }
        let parsed = split_box(bytes);
        match parsed {
            Ok((b, rest)) => {
                bytes = rest;
                Some(Ok(b))
            }
            Err(e) => {
                bytes = &[];
                Some(Err(e))
            }
        }
    })
}

fn split_box(bytes: &[u8]) -> Result<(Mp4Box<'_>, &[u8]), VideoError> {
    let truncated = || malformed("a box header is cut short");
    let size = u32::from_be_bytes(take4(bytes, 0).ok_or_else(truncated)?) as u64;
    let kind = take4(bytes, 4).ok_or_else(truncated)?;
    let (header, size) = match size {
        0 => (8, bytes.len() as u64),
        1 => (16, u64::from_be_bytes(bytes.get(8..16).ok_or_else(truncated)?.try_into().map_err(|_| truncated())?)),
        n => (8, n),
    };
    if size < header || size > bytes.len() as u64 {
        return Err(malformed(format!("the '{}' box claims {size} bytes", fourcc(kind))));
    }
    let (this, rest) = bytes.split_at(size as usize);
    Ok((Mp4Box { kind, body: &this[header as usize..] }, rest))
}

fn take4(bytes: &[u8], at: usize) -> Option<[u8; 4]> {
    bytes.get(at..at + 4).and_then(|s| s.try_into().ok())
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32, VideoError> {
    take4(bytes, at).map(u32::from_be_bytes).ok_or_else(|| malformed("a sample table is cut short"))
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16, VideoError> {
    bytes
        .get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or_else(|| malformed("a sample entry is cut short"))
}

pub(super) fn fourcc(kind: [u8; 4]) -> String {
    kind.iter().map(|&b| if b.is_ascii_graphic() { b as char } else { '?' }).collect()
}

fn malformed(detail: impl Into<String>) -> VideoError {
    VideoError::Malformed { detail: detail.into() }
}

/// The first child of `kind` in `body`.
fn child<'a>(body: &'a [u8], kind: &[u8; 4]) -> Result<Option<&'a [u8]>, VideoError> {
    for b in boxes(body) {
        let b = b?;
        if &b.kind == kind {
            return Ok(Some(b.body));
        }
    }
    Ok(None)
}

fn required<'a>(body: &'a [u8], kind: &[u8; 4]) -> Result<&'a [u8], VideoError> {
    child(body, kind)?.ok_or_else(|| malformed(format!("the video track has no '{}' box", fourcc(*kind))))
}

/// H.264's decoder configuration (`avcC`): the NAL length size and the parameter sets.
#[derive(Debug)]
pub(super) struct AvcConfig<'a> {
    pub nal_length_size: usize,
    pub sps: Vec<&'a [u8]>,
    pub pps: Vec<&'a [u8]>,
}

/// The first video track, as far as decoding it needs.
#[derive(Debug)]
pub(super) struct Track<'a> {
    /// The sample entry's four-character code (`avc1`, `hvc1`, `vp09`, ...).
    pub codec: String,
    pub avc: Option<AvcConfig<'a>>,
    /// Each coded frame, in decode order.
    pub samples: Vec<&'a [u8]>,
    /// Frames per second as FFmpeg's `avg_frame_rate` gives it: samples over the summed
    /// sample durations.
    pub fps: f64,
    /// Each sample's display index, in decode order: the rank of its composition time
    /// (`stts` decode times plus `ctts` offsets), ties kept in decode order. The identity
    /// without a `ctts` box.
    pub display: Vec<usize>,
}

/// The first video track of the file, its samples at most `frames_max`.
pub(super) fn first_video_track(bytes: &[u8], frames_max: usize) -> Result<Track<'_>, VideoError> {
    let mut moov = None;
    for b in boxes(bytes) {
        let b = b?;
        match &b.kind {
            b"moov" => moov = Some(b.body),
            b"moof" => return Err(VideoError::Unsupported { what: "fragmented MP4 (moof boxes)".into() }),
            _ => {}
        }
    }
    let moov = moov.ok_or_else(|| malformed("the file has no 'moov' box"))?;
    for b in boxes(moov) {
        let b = b?;
        if &b.kind != b"trak" {
            continue;
        }
        let mdia = required(b.body, b"mdia")?;
        let hdlr = required(mdia, b"hdlr")?;
        if hdlr.get(8..12) != Some(b"vide") {
            continue;
        }
        return track(bytes, mdia, frames_max);
    }
    Err(malformed("the file has no video track"))
}

fn track<'a>(file: &'a [u8], mdia: &'a [u8], frames_max: usize) -> Result<Track<'a>, VideoError> {
    let mdhd = required(mdia, b"mdhd")?;
    let timescale = match mdhd.first() {
        Some(1) => u32_at(mdhd, 20)?,
        _ => u32_at(mdhd, 12)?,
    };
    let stbl = required(required(mdia, b"minf")?, b"stbl")?;
    let stsd = required(stbl, b"stsd")?;
    let (entry, _) = split_box(stsd.get(8..).ok_or_else(|| malformed("the 'stsd' box is cut short"))?)?;
    let codec = fourcc(entry.kind);
    // A VisualSampleEntry's own fields take 78 bytes; its child boxes (avcC) follow.
    let avc = match (&entry.kind, entry.body.get(78..)) {
        (b"avc1" | b"avc3", Some(children)) => child(children, b"avcC")?.map(avc_config).transpose()?,
        _ => None,
    };
    let sizes = sample_sizes(required(stbl, b"stsz")?, frames_max)?;
    let offsets = sample_offsets(stbl, &sizes)?;
    let mut samples = Vec::with_capacity(sizes.len());
    for (&offset, &size) in offsets.iter().zip(&sizes) {
        let end = offset.checked_add(size as u64).filter(|&e| e <= file.len() as u64);
        let end = end.ok_or_else(|| malformed(format!("a sample at byte {offset} runs past the file")))?;
        samples.push(&file[offset as usize..end as usize]);
    }
    let stts = required(stbl, b"stts")?;
    let duration = total_duration(stts)?;
    let fps =
        if duration > 0 && timescale > 0 { samples.len() as f64 * timescale as f64 / duration as f64 } else { 0.0 };
    let display = match child(stbl, b"ctts")? {
        Some(ctts) => display_order(stts, ctts, samples.len())?,
        None => (0..samples.len()).collect(),
    };
    Ok(Track { codec, avc, samples, fps, display })
}

/// A run-length table (`stts`, `ctts`: sample count, value) expanded to one value per sample,
/// at most `count` (samples past the table get 0, as FFmpeg's demuxer gives them).
fn per_sample(body: &[u8], count: usize) -> Result<Vec<u32>, VideoError> {
    let mut out = Vec::with_capacity(count);
    for e in table(body, 8, count)? {
        let run = (u32_at(e, 0)? as usize).min(count - out.len());
        out.extend(std::iter::repeat_n(u32_at(e, 4)?, run));
    }
    out.resize(count, 0);
    Ok(out)
}

/// Each sample's display index from its composition time: decode time (summed `stts`
/// durations) plus its `ctts` offset (signed in version 1, and as FFmpeg reads version 0).
fn display_order(stts: &[u8], ctts: &[u8], count: usize) -> Result<Vec<usize>, VideoError> {
    let durations = per_sample(stts, count)?;
    let offsets = per_sample(ctts, count)?;
    let mut decode_time = 0i64;
    let mut composed: Vec<(i64, usize)> = Vec::with_capacity(count);
    for (i, (&d, &o)) in durations.iter().zip(&offsets).enumerate() {
        composed.push((decode_time + i64::from(o as i32), i));
        decode_time += i64::from(d);
    }
    composed.sort_unstable();
    let mut display = vec![0; count];
    for (shown, &(_, sample)) in composed.iter().enumerate() {
        display[sample] = shown;
    }
    Ok(display)
}

fn avc_config(body: &[u8]) -> Result<AvcConfig<'_>, VideoError> {
    let cut = || malformed("the 'avcC' box is cut short");
    let nal_length_size = (*body.get(4).ok_or_else(cut)? & 3) as usize + 1;
    let mut at = 5;
    let sets = |at: &mut usize, count: usize| -> Result<Vec<&[u8]>, VideoError> {
        let mut out = Vec::new();
        for _ in 0..count {
            let len = u16_at(body, *at)? as usize;
            out.push(body.get(*at + 2..*at + 2 + len).ok_or_else(cut)?);
            *at += 2 + len;
        }
        Ok(out)
    };
    let sps_count = (*body.get(at).ok_or_else(cut)? & 0x1f) as usize;
    at += 1;
    let sps = sets(&mut at, sps_count)?;
    let pps_count = *body.get(at).ok_or_else(cut)? as usize;
    at += 1;
    let pps = sets(&mut at, pps_count)?;
    Ok(AvcConfig { nal_length_size, sps, pps })
}

/// `stsz`: one size per sample (or one for all), the count refused above `frames_max` before
/// the table is read.
fn sample_sizes(stsz: &[u8], frames_max: usize) -> Result<Vec<u32>, VideoError> {
    let (uniform, count) = (u32_at(stsz, 4)?, u32_at(stsz, 8)? as usize);
    if count > frames_max {
        return Err(VideoError::TooManyFrames { frames: count as u64, max: frames_max });
    }
    if uniform != 0 {
        return Ok(vec![uniform; count]);
    }
    if stsz.len() < 12 + 4 * count {
        return Err(malformed("the 'stsz' box is cut short"));
    }
    (0..count).map(|i| u32_at(stsz, 12 + 4 * i)).collect()
}

/// Each sample's file offset: `stsc` says how many samples each chunk holds, `stco` / `co64`
/// where each chunk starts; samples follow one another within a chunk.
fn sample_offsets(stbl: &[u8], sizes: &[u32]) -> Result<Vec<u64>, VideoError> {
    let count = sizes.len();
    let stsc = required(stbl, b"stsc")?;
    let chunks: Vec<u64> = match (child(stbl, b"stco")?, child(stbl, b"co64")?) {
        (Some(stco), _) => table(stco, 4, count)?.map(|e| u32_at(e, 0).map(u64::from)).collect::<Result<_, _>>()?,
        (None, Some(co64)) => table(co64, 8, count)?
            .map(|e| Ok(u64::from(u32_at(e, 0)?) << 32 | u64::from(u32_at(e, 4)?)))
            .collect::<Result<_, _>>()?,
        (None, None) => return Err(malformed("the video track has no chunk offsets")),
    };
    let runs: Vec<(usize, usize)> = table(stsc, 12, count)?
        .map(|e| Ok((u32_at(e, 0)? as usize, u32_at(e, 4)? as usize)))
        .collect::<Result<_, VideoError>>()?;
    let mut offsets = Vec::with_capacity(count);
    for (i, &chunk_start) in chunks.iter().enumerate() {
        let chunk = i + 1;
        let per_chunk = runs.iter().rev().find(|(first, _)| *first <= chunk).map_or(0, |r| r.1);
        let mut at = chunk_start;
        for &size in sizes[offsets.len()..].iter().take(per_chunk) {
            offsets.push(at);
            at = at.saturating_add(u64::from(size));
        }
        if offsets.len() == count {
            break;
        }
    }
    if offsets.len() < count {
        return Err(malformed(format!("the chunks hold {} of the {count} samples", offsets.len())));
    }
    Ok(offsets)
}

/// A full box's table: its entry count (refused above `max` or past the box) and entries.
fn table(body: &[u8], entry_len: usize, max: usize) -> Result<std::slice::ChunksExact<'_, u8>, VideoError> {
    let count = u32_at(body, 4)? as usize;
    if count > max.max(1) || body.len() < 8 + count * entry_len {
        return Err(malformed(format!("a sample table claims {count} entries")));
    }
    Ok(body[8..8 + count * entry_len].chunks_exact(entry_len))
}

/// `stts`: the summed sample durations in the track's timescale.
fn total_duration(stts: &[u8]) -> Result<u64, VideoError> {
    let count = u32_at(stts, 4)? as usize;
    let entries = stts.get(8..8 + count.saturating_mul(8)).ok_or_else(|| malformed("the 'stts' box is cut short"))?;
    entries.chunks_exact(8).try_fold(0u64, |sum, e| {
        Ok(sum.saturating_add(u64::from(u32_at(e, 0)?).saturating_mul(u64::from(u32_at(e, 4)?))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full box body of `(count, value)` runs.
    fn runs(entries: &[(u32, i32)]) -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0];
        body.extend((entries.len() as u32).to_be_bytes());
        for &(n, v) in entries {
            body.extend(n.to_be_bytes());
            body.extend(v.to_be_bytes());
        }
        body
    }

    #[test]
    fn display_order_follows_composition_times() {
        type Case<'a> = (&'a str, &'a [(u32, i32)], &'a [(u32, i32)], usize, &'a [usize]);
        let cases: [Case<'_>; 5] = [
            // x264, 1 B-frame: I0 P2 B1 P4 B3, offsets in frame durations of 512.
            ("one b", &[(5, 512)], &[(1, 512), (1, 1024), (1, 0), (1, 1024), (1, 0)], 5, &[0, 2, 1, 4, 3]),
            // B-pyramid: I0 P4 B2 b1 b3.
            ("pyramid", &[(5, 1)], &[(1, 2), (1, 5), (1, 2), (1, 0), (1, 1)], 5, &[0, 4, 2, 1, 3]),
            // Version 1's negative offsets (no edit list needed to start at zero).
            ("negative", &[(3, 10)], &[(1, 0), (1, 10), (1, -10)], 3, &[0, 2, 1]),
            // A table shorter than the samples: the rest have offset 0.
            ("short", &[(4, 1)], &[(1, 2)], 4, &[1, 0, 2, 3]),
            // Equal composition times keep decode order.
            ("ties", &[(3, 0)], &[(3, 0)], 3, &[0, 1, 2]),
        ];
        for (name, stts, ctts, count, expected) in cases {
            let got = display_order(&runs(stts), &runs(ctts), count).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got, expected, "{name}");
        }
        let claims_more = runs(&[(1, 0), (1, 0), (1, 0)]);
        assert!(display_order(&runs(&[(2, 1)]), &claims_more, 2).is_err(), "a table with more entries than samples");
    }
}
