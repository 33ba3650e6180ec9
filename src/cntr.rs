//! Counters. [stub: contract API only; being written in branch `cq`]
use crate::abi::*;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::{FiObject, HasUsers, Obj, Users};
use core::ffi::c_void;

pub struct Cntr {
    users: Users,
}
impl FiObject for Cntr {
    type Header = fid_cntr;
    const CLASS: usize = FI_CLASS_CNTR;
}
impl HasUsers for Cntr {
    fn users(&self) -> &Users {
        &self.users
    }
}
impl Cntr {
    pub fn inc(&self) {}
    pub fn inc_err(&self) {}
}
pub fn open(_d: &Obj<Domain>, _attr: &fi_cntr_attr, _ctx: *mut c_void) -> Result<*mut fid_cntr> {
    Err(Error::NOSYS)
}
/// # Safety
/// `p` must be readable as a `struct fid`.
pub unsafe fn trywait_fid(_p: *mut fid) -> Result<()> {
    Err(Error::NOSYS)
}
