//! Handing freed memory back to the OS at the moments it matters.

/// Returns the pages of freed memory that mimalloc still holds (all threads' heaps) to the OS.
///
/// Why: loading a tokenizer allocates several times what it keeps (`tokenizer.json` parsed,
/// the model serialized again to read its merges), and what is built while that garbage is
/// alive is spread over pages the garbage shares. Purging between the phases lets the kept
/// tables reuse the freed space instead of fresh pages (measured: about 3.5 MiB less resident
/// after a Qwen3 load, `perf/README.md`). Where mimalloc is not the global allocator this only purges
/// its own, empty, heaps.
pub fn release_freed() {
    // SAFETY: mi_collect only purges mimalloc's heaps; nothing of ours is touched.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// mimalloc's `mi_option_arena_eager_commit` (the same position in the option enum of
/// mimalloc 2 and 3; `libmimalloc-sys` does not name it).
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Makes mimalloc commit its arena as it is used instead of all at once. Call before the
/// first allocation (the binaries do, from a static constructor): the arena is reserved then.
///
/// Why: an arena committed up front is advised for transparent huge pages, so every 2 MiB span
/// the heap touches becomes resident whole. The gateway's live heap at idle is about 7 MiB
/// (most of it the tokenizer's tables), but the huge pages made its idle RSS 32–40 MiB,
/// varying with which spans got them; committed on demand it is about 25 MiB
/// (`perf/README.md`).
///
/// `MIMALLOC_ARENA_EAGER_COMMIT` in the environment (mimalloc's own variable) wins: `=2` is
/// mimalloc's default, huge pages and all, for an operator (or the perf harness) who wants it.
pub fn commit_on_demand() {
    // SAFETY: getenv with a NUL-terminated name, before any thread exists (no setenv races);
    // it allocates nothing, so mimalloc's arena is not reserved yet when the option is set.
    unsafe {
        if libc::getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
    }
}
