//! Memory that C frees. libfabric's `fi_freeinfo` releases every part of an
//! `fi_info` with libc `free()`, and applications free `FI_CONNREQ` infos the
//! same way, so those allocations must come from libc, never from Rust's
//! allocator (docs/abi.md §1.9).

use crate::base::error::{Error, Result};
use core::ffi::{c_char, c_void, CStr};

/// `calloc` of one zeroed `T`.
pub(crate) fn calloc_one<T>() -> Result<*mut T> {
    Ok(crate::sys::cmem::calloc(core::mem::size_of::<T>())? as *mut T)
}

/// `malloc` + copy of `bytes` (NULL for an empty slice).
pub(crate) fn memdup(bytes: &[u8]) -> Result<*mut c_void> {
    if bytes.is_empty() {
        return Ok(core::ptr::null_mut());
    }
    let p = crate::sys::cmem::malloc(bytes.len())? as *mut u8;
    // SAFETY: `p` has room for `bytes.len()` bytes and does not overlap `bytes`.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
    Ok(p as *mut c_void)
}

/// `strdup` of a Rust string (interior NULs are not expected; they truncate).
pub(crate) fn strdup(s: &str) -> Result<*mut c_char> {
    let mut v: Vec<u8> = s.bytes().take_while(|&b| b != 0).collect();
    v.push(0);
    Ok(memdup(&v)? as *mut c_char)
}

/// Frees memory from this module (or from any libc allocation).
///
/// # Safety
/// `p` must be NULL or a live libc allocation not used afterwards.
pub(crate) unsafe fn free<T>(p: *mut T) {
    // SAFETY: per the caller's contract.
    unsafe { crate::sys::cmem::free(p as *mut c_void) }
}

/// Reads a C string argument. NULL → `None`; invalid UTF-8 → `-FI_EINVAL`.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
pub(crate) unsafe fn opt_str<'a>(p: *const c_char) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map(Some).map_err(|_| Error::INVAL)
}

/// Copies `s` into a caller's buffer of `len` bytes as a NUL-terminated,
/// possibly truncated string (the `fi_*_strerror` / `fi_av_straddr` rule).
///
/// # Safety
/// `buf` must be NULL or valid for writes of `len` bytes.
pub(crate) unsafe fn copy_cstr(s: &str, buf: *mut c_char, len: usize) -> bool {
    if buf.is_null() || len == 0 {
        return false;
    }
    let n = s.len().min(len - 1);
    // SAFETY: `n + 1 <= len` bytes are written inside the caller's buffer.
    unsafe {
        core::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    true
}
