//! OpenH264's decoder with each picture tagged by the sample it was coded in, the one thing the
//! `openh264` crate's safe API does not carry, and without the crate's flush after every call.
//!
//! Why: for a stream with B-frames (Main / High profile) OpenH264 holds pictures back and
//! releases them in an order of its own, guessed from the picture order counts; its safe API
//! gives no way to tell which coded sample a released picture is, and its automatic flush after
//! a call that released nothing takes a path in OpenH264 (`FlushFrame` in a single-threaded
//! decoder) that never drops its hold on the buffered picture, so the picture pool runs dry a
//! few frames in ("out of memory", state 0x4000). Here a call never flushes until the stream
//! ends, and the sample index rides in `uiInBsTimeStamp`, which OpenH264 copies onto the
//! picture it decodes and back out as `uiOutYuvTimeStamp` whenever it releases that picture.
//! The caller then places each picture by the container's composition times, whatever order
//! OpenH264 released it in.

use std::ptr::null_mut;

use openh264::decoder::{Decoder, DecoderConfig, Flush};
use openh264::OpenH264API;
use openh264_sys2::{SBufferInfo, DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER};

/// One released picture: the sample it was coded in and its 4:2:0 planes `(bytes, stride)`,
/// borrowed until the decoder's next call.
pub(super) struct Picture<'a> {
    pub sample: usize,
    pub width: usize,
    pub height: usize,
    pub y: (&'a [u8], usize),
    pub u: (&'a [u8], usize),
    pub v: (&'a [u8], usize),
}

pub(super) struct TaggedDecoder {
    inner: Decoder,
}

/// OpenH264's `DECODING_STATE` bits, as its `codec_def.h` names them.
fn state_name(state: i32) -> String {
    const NAMES: [(i32, &str); 11] = [
        (0x01, "frame pending"),
        (0x02, "reference lost"),
        (0x04, "bitstream error"),
        (0x08, "dependent layer lost"),
        (0x10, "no parameter sets"),
        (0x20, "data error concealed"),
        (0x40, "reference list null"),
        (0x1000, "invalid argument"),
        (0x2000, "not initialised"),
        (0x4000, "out of memory (its picture pool is exhausted)"),
        (0x8000, "output buffer too small"),
    ];
    let named: Vec<&str> = NAMES.iter().filter(|(bit, _)| state & bit != 0).map(|(_, name)| *name).collect();
    let named = if named.is_empty() { "unknown".to_owned() } else { named.join(", ") };
    format!("OpenH264 state {state:#x} ({named})")
}

impl TaggedDecoder {
    pub fn new() -> Result<Self, String> {
        let config = DecoderConfig::new().flush_after_decode(Flush::NoFlush);
        let inner = Decoder::with_api_config(OpenH264API::from_source(), config).map_err(|e| e.to_string())?;
        Ok(TaggedDecoder { inner })
    }

    /// Decodes one access unit (Annex B) coded as `sample`; a picture if one is released.
    pub fn decode(&mut self, access_unit: &[u8], sample: usize) -> Result<Option<Picture<'_>>, String> {
        let len = i32::try_from(access_unit.len()).map_err(|_| "an access unit over 2 GiB".to_owned())?;
        let mut dst = [null_mut::<u8>(); 3];
        let mut info = SBufferInfo { uiInBsTimeStamp: sample as u64 + 1, ..SBufferInfo::default() };
        // SAFETY: the decoder is initialised (the crate's constructor); `access_unit` outlives
        // the call and OpenH264 only reads `len` bytes of it; `dst` and `info` are ours.
        let state = unsafe {
            self.inner.raw_api().decode_frame_no_delay(access_unit.as_ptr(), len, dst.as_mut_ptr(), &raw mut info)
        };
        if state != 0 {
            return Err(state_name(state));
        }
        Ok(self.picture(&dst, &info))
    }

    /// After the last sample: the next picture still held back, if any.
    pub fn flush(&mut self) -> Result<Option<Picture<'_>>, String> {
        let mut held = 0i32;
        // SAFETY: the option writes one int into `held`.
        let state = unsafe {
            self.inner.raw_api().get_option(DECODER_OPTION_NUM_OF_FRAMES_REMAINING_IN_BUFFER, (&raw mut held).cast())
        };
        if state != 0 || held <= 0 {
            return Ok(None);
        }
        let mut dst = [null_mut::<u8>(); 3];
        let mut info = SBufferInfo::default();
        // SAFETY: as in `decode`, with no input.
        let state = unsafe { self.inner.raw_api().flush_frame(dst.as_mut_ptr(), &raw mut info) };
        if state != 0 {
            return Err(state_name(state as i32));
        }
        Ok(self.picture(&dst, &info))
    }

    fn picture(&self, dst: &[*mut u8; 3], info: &SBufferInfo) -> Option<Picture<'_>> {
        if info.iBufferStatus != 1 || dst.iter().any(|p| p.is_null()) {
            return None;
        }
        // SAFETY: a released picture's buffer info is the system-buffer variant (the decoder's
        // only output form), written by OpenH264 together with `iBufferStatus`.
        let buffer = unsafe { info.UsrData.sSystemBuffer };
        let (width, height) = (usize::try_from(buffer.iWidth).ok()?, usize::try_from(buffer.iHeight).ok()?);
        let (luma_stride, chroma_stride) =
            (usize::try_from(buffer.iStride[0]).ok()?, usize::try_from(buffer.iStride[1]).ok()?);
        let chroma_rows = height.div_ceil(2);
        // SAFETY: OpenH264's picture planes hold `height` rows of `iStride[0]` bytes (luma) and
        // half as many of `iStride[1]` (chroma), padded beyond; they stay valid until the
        // decoder's next call, which the borrow of `self` prevents.
        let plane = |p: *mut u8, rows: usize, stride: usize| unsafe { std::slice::from_raw_parts(p, rows * stride) };
        Some(Picture {
            sample: usize::try_from(info.uiOutYuvTimeStamp).ok()?.checked_sub(1)?,
            width,
            height,
            y: (plane(dst[0], height, luma_stride), luma_stride),
            u: (plane(dst[1], chroma_rows, chroma_stride), chroma_stride),
            v: (plane(dst[2], chroma_rows, chroma_stride), chroma_stride),
        })
    }
}
