//! Memory registration. [stub: being written]
use crate::abi::*;
use core::ffi::{c_int, c_void};

#[derive(Default)]
pub struct MrMap {}
impl MrMap {
    pub fn is_empty(&self) -> bool {
        true
    }
}
unsafe extern "C" fn reg(
    _: *mut fid,
    _: *const c_void,
    _: usize,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    _: *mut *mut fid_mr,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn regv(
    _: *mut fid,
    _: *const libc::iovec,
    _: usize,
    _: u64,
    _: u64,
    _: u64,
    _: u64,
    _: *mut *mut fid_mr,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn regattr(_: *mut fid, _: *const fi_mr_attr, _: u64, _: *mut *mut fid_mr) -> c_int {
    -FI_ENOSYS
}
pub static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: core::mem::size_of::<fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};
