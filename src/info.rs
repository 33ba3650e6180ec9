//! fi_getinfo. [stub: being written]
use crate::abi::*;
use crate::error::{Error, Result};
use core::ffi::c_char;

/// # Safety
/// C arguments of provider->getinfo.
pub unsafe fn getinfo_c(
    _version: u32,
    _node: *const c_char,
    _service: *const c_char,
    _flags: u64,
    _hints: *const fi_info,
    _info: *mut *mut fi_info,
) -> Result<()> {
    Err(Error::NODATA)
}
