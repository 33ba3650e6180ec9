//! Slots for operations an object does not support. libfabric's inline
//! wrappers call most slots without checking them (docs/abi.md §3.3), so every
//! slot is filled; these return the documented "not supported" codes.

use crate::abi::*;
use core::ffi::{c_char, c_int, c_void};

pub(crate) unsafe extern "C" fn no_bind(_: *mut fid, _: *mut fid, _: u64) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn no_control(_: *mut fid, _: c_int, _: *mut c_void) -> c_int {
    -FI_ENOSYS
}
/// fi_open_ops(3): unknown interface names return -FI_ENOSYS.
pub(crate) unsafe extern "C" fn no_ops_open(
    _: *mut fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn no_tostr(_: *const fid, _: *mut c_char, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn no_ops_set(
    _: *mut fid,
    _: *const c_char,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
