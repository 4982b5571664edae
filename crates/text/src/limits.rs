#![allow(non_upper_case_globals)]

//! Every bound and default of the text layer, in one place.
//!
//! Names carry their unit last (`_s`, `_ms`, `_bytes`) and their qualifier after it
//! (`_max`, `_min`), so related limits line up. Nothing else in the crate hard-codes a limit.

/// Templates: JSON nesting depth `tojson` renders (deeper input is a render error, not a stack
/// overflow).
pub const json_depth_max: usize = 128;
