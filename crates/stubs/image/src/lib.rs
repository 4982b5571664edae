//! An empty stand-in for `image` 0.25, patched in by the workspace (`[patch.crates-io]`).
//!
//! openai-harmony 0.0.8 depends on `image` with its default features (AVIF through rav1e, and
//! every other codec) without naming it anywhere in its code. Built for real, it was most of
//! the ~6 minutes the crate added to a clean release build on two cores; nothing of it is
//! reachable, so nothing is lost.
