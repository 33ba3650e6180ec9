//! Completion queues. [stub: contract API only; being written in branch `cq`]
use crate::abi::*;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::{FiObject, HasUsers, Obj, Users};
use core::ffi::c_void;

pub struct Cq {
    users: Users,
}
impl FiObject for Cq {
    type Header = fid_cq;
    const CLASS: usize = FI_CLASS_CQ;
}
impl HasUsers for Cq {
    fn users(&self) -> &Users {
        &self.users
    }
}
pub struct CqEntry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub src: fi_addr_t,
}
pub struct CqErrEntry {
    pub entry: CqEntry,
    pub olen: usize,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}
impl Cq {
    pub fn push(&self, _e: CqEntry) {}
    pub fn push_err(&self, _e: CqErrEntry) {}
    pub fn reserve_capacity(&self, _n: usize) {}
    pub fn release_capacity(&self, _n: usize) {}
    pub fn has_room(&self) -> bool {
        true
    }
}
pub fn open(_d: &Obj<Domain>, _attr: &fi_cq_attr, _ctx: *mut c_void) -> Result<*mut fid_cq> {
    Err(Error::NOSYS)
}
/// # Safety
/// `p` must be readable as a `struct fid`.
pub unsafe fn trywait_fid(_p: *mut fid) -> Result<()> {
    Err(Error::NOSYS)
}
