//! Event queues. [stub: being written]
use crate::abi::*;
use crate::error::{Error, Result};
use crate::fabric::Fabric;
use crate::ffi::{HasUsers, Obj, Users};
use core::ffi::c_void;
use std::sync::Arc;

pub struct Eq {
    users: Users,
}
impl HasUsers for Eq {
    fn users(&self) -> &Users {
        &self.users
    }
}
pub fn open(_f: &Obj<Fabric>, _attr: &fi_eq_attr, _ctx: *mut c_void) -> Result<*mut fid_eq> {
    Err(Error::NOSYS)
}
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
pub unsafe fn from_fid(_p: *mut fid) -> Result<Arc<Eq>> {
    Err(Error::INVAL)
}
/// # Safety
/// `p` must be readable as a `struct fid`.
pub unsafe fn trywait_fid(_p: *mut fid) -> Result<()> {
    Err(Error::NOSYS)
}
