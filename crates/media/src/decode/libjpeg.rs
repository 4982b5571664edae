//! The safe face of libjpeg (libjpeg-turbo's decoder as mozjpeg-sys builds it, C only), through
//! the one function of `libjpeg_shim.c`; the crate's only `unsafe`.
//!
//! The shim reads the header, asks `allocate` (Rust) for the output buffer, which checks the
//! size against the limits first, then bounds libjpeg's own memory and decodes into it. Errors
//! come back as a status and a message, never as an unwind (the shim longjmps out of libjpeg).

use std::ffi::{c_int, c_uint, c_ulong, c_void, CStr};

// Links the library the shim calls.
use mozjpeg_sys as _;

use super::DecodeLimits;
use crate::error::{ImageFormat, MediaError};
use crate::limits;

/// `JMSG_LENGTH_MAX` of jpeglib.h.
const MESSAGE_BYTES: usize = 200;
const OK: c_int = 0;
const REFUSED: c_int = 2;

type Allocate = extern "C" fn(*mut c_void, c_uint, c_uint, c_int) -> *mut u8;

/// `struct sg_jpeg_job` of the shim, field for field.
#[repr(C)]
struct Job {
    data: *const u8,
    size: c_ulong,
    bytes_per_pixel: c_ulong,
    scratch_bytes: c_ulong,
    scans_max: c_int,
    allocate: Allocate,
    context: *mut c_void,
    components: c_int,
    message: [u8; MESSAGE_BYTES],
}

extern "C" {
    fn sg_jpeg_decode(job: *mut Job) -> c_int;
}

/// Interleaved samples as libjpeg gives them: RGB, or (for four components) CMYK as stored.
pub(super) struct Samples {
    pub width: u32,
    pub height: u32,
    /// Colour components in the file: 1 (grey, given here as RGB), 3, or 4 (CMYK, YCCK).
    pub components: usize,
    pub samples: Vec<u8>,
}

struct Context<'a> {
    limits: &'a DecodeLimits,
    refusal: Option<MediaError>,
    out: Option<(u32, u32, Vec<u8>)>,
}

/// The shim's `allocate`: refuses a size over the limits, else hands over a zeroed buffer that
/// `Context` keeps owning.
extern "C" fn allocate(context: *mut c_void, width: c_uint, height: c_uint, channels: c_int) -> *mut u8 {
    // SAFETY: the shim passes back the `&mut Context` `decode` gave it, and nothing else
    // touches that context while the shim runs.
    let context = unsafe { &mut *context.cast::<Context>() };
    if let Err(refusal) = context.limits.check_size(ImageFormat::Jpeg, width, height) {
        context.refusal = Some(refusal);
        return std::ptr::null_mut();
    }
    let mut samples = vec![0; width as usize * height as usize * channels.max(0) as usize];
    let pointer = samples.as_mut_ptr();
    context.out = Some((width, height, samples));
    pointer
}

pub(super) fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<Samples, MediaError> {
    let mut context = Context { limits, refusal: None, out: None };
    let mut job = Job {
        data: bytes.as_ptr(),
        // `DecodeLimits::bytes_max` is checked first, and far below `c_ulong::MAX`.
        size: c_ulong::try_from(bytes.len()).unwrap_or(c_ulong::MAX),
        bytes_per_pixel: limits::jpeg_codec_bytes_per_px_max as c_ulong,
        scratch_bytes: c_ulong::try_from(limits::codec_scratch_bytes_max).unwrap_or(c_ulong::MAX),
        scans_max: limits::jpeg_scans_max,
        allocate,
        context: (&mut context as *mut Context).cast(),
        components: 0,
        message: [0; MESSAGE_BYTES],
    };
    // SAFETY: `job` points at `bytes` (alive for the call) and at `context`, whose buffer the
    // shim writes at most width * height * channels bytes into, as `allocate` sized it.
    let status = unsafe { sg_jpeg_decode(&mut job) };
    match (status, context.out, context.refusal) {
        (OK, Some((width, height, samples)), _) => {
            Ok(Samples { width, height, components: job.components as usize, samples })
        }
        (REFUSED, _, Some(refusal)) => Err(refusal),
        _ => {
            // The shim leaves a NUL-terminated message (libjpeg's `format_message`, or its own).
            let message = CStr::from_bytes_until_nul(&job.message).map(CStr::to_string_lossy);
            Err(super::malformed(ImageFormat::Jpeg, message.unwrap_or_default()))
        }
    }
}
