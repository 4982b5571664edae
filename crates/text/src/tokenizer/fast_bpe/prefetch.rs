//! A hint to start loading a cache line the program will read soon.

/// Starts loading the cache line holding `*p` into L1; does nothing where there is no such
/// instruction.
#[inline(always)]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads nothing the program sees and cannot fault, whatever the
        // address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
