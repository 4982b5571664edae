#![allow(non_upper_case_globals)]

//! Every bound and default of fetching media, in one place (units last).

/// Bytes of one fetched item: OpenAI's own limit for an image input is 20 MB.
pub const media_bytes_max: usize = 20 << 20;

/// One fetch, from the first byte sent to the last read (vLLM's `VLLM_IMAGE_FETCH_TIMEOUT`
/// default).
pub const media_fetch_timeout_s: u64 = 5;

/// Redirects followed before a fetch is refused.
pub const media_redirects_max: u32 = 5;
