#![allow(non_upper_case_globals)]

//! Every bound and default of fetching media, in one place (units last).

/// Bytes of one fetched item: OpenAI's own limit for an image input is 20 MB.
pub const media_bytes_max: usize = 20 << 20;

/// One fetch, from the first byte sent to the last read (vLLM's `VLLM_IMAGE_FETCH_TIMEOUT`
/// default).
pub const media_fetch_timeout_s: u64 = 5;

/// Redirects followed before a fetch is refused.
pub const media_redirects_max: u32 = 5;

/// An HTTP response's status line and headers together.
pub const response_head_bytes_max: usize = 64 << 10;

/// Headers of one HTTP response.
pub const response_headers_max: usize = 100;

/// One line of chunked framing: a chunk's size with its extensions, or a trailer field.
pub const chunk_line_bytes_max: usize = 8 << 10;
