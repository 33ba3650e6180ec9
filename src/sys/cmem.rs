//! libc's allocator, for memory that C code frees with `free()` (the
//! `fi_info` lists `fi_freeinfo` releases, docs/abi.md §1.9). The C face
//! (`fi/cmem.rs`) builds on these; nothing else should need them.

use crate::base::error::{Error, Result};
use core::ffi::c_void;

/// `calloc(1, size)`: zeroed memory, `-FI_ENOMEM` when it fails.
pub(crate) fn calloc(size: usize) -> Result<*mut c_void> {
    // SAFETY: calloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::calloc(1, size) };
    if p.is_null() {
        Err(Error::NOMEM)
    } else {
        Ok(p)
    }
}

/// `malloc(size)` (`size > 0`), `-FI_ENOMEM` when it fails.
pub(crate) fn malloc(size: usize) -> Result<*mut c_void> {
    // SAFETY: malloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::malloc(size) };
    if p.is_null() {
        Err(Error::NOMEM)
    } else {
        Ok(p)
    }
}

/// `free(p)`.
///
/// # Safety
/// `p` must be NULL or a live libc allocation that is not used afterwards.
pub(crate) unsafe fn free(p: *mut c_void) {
    // SAFETY: per the caller's contract.
    unsafe { libc::free(p) }
}
