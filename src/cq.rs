//! Completion queues. [stub: being written]
use crate::abi::*;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::Obj;
use core::ffi::c_void;

pub fn open(_d: &Obj<Domain>, _attr: &fi_cq_attr, _ctx: *mut c_void) -> Result<*mut fid_cq> {
    Err(Error::NOSYS)
}
/// # Safety
/// `p` must be readable as a `struct fid`.
pub unsafe fn trywait_fid(_p: *mut fid) -> Result<()> {
    Err(Error::NOSYS)
}
