#![allow(non_upper_case_globals)]

//! Every bound of the parsers, in one place. Model output is untrusted input too: a model can
//! emit a never-ending header or arguments nested without end, and each bound turns that into
//! content (or an ended call) instead of unbounded buffering or recursion.
//!
//! Names carry their unit last (`_bytes`) and their qualifier after it (`_max`).

/// Tool calls: the longest header (a call's name, attributes, call id) buffered before its end
/// marker; longer, and the text was not a call header.
pub const tool_header_bytes_max: usize = 256;

/// Tool calls: the longest element name in nested-XML arguments.
pub const tool_tag_name_bytes_max: usize = 128;

/// Tool calls: nesting depth of the arguments a model writes (JSON, Python literals, nested
/// XML). Half the gateway's limit for request bodies (128, serde_json's default): arguments are
/// generated text walked by recursion, and no real tool schema nests this deep.
pub const tool_arguments_depth_max: usize = 64;

/// Tool calls: bytes of a JSON call object before its name must have appeared.
pub const tool_call_unnamed_bytes_max: usize = 64 * 1024;

/// Tool calls: bytes of a Python call list buffered before the candidate is given up.
pub const tool_call_list_bytes_max: usize = 256 * 1024;

/// Tool schemas: how deep `oneOf`/`anyOf`/`allOf` branches are followed to find a parameter's
/// type.
pub const schema_composition_depth_max: usize = 8;

const _: () = assert!(tool_tag_name_bytes_max <= tool_header_bytes_max);
const _: () = assert!(tool_header_bytes_max < tool_call_unnamed_bytes_max);
const _: () = assert!(tool_call_unnamed_bytes_max <= tool_call_list_bytes_max);
