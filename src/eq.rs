//! Event queues. [being written: the public API below is the contract other
//! modules code against; keep these signatures.]
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

/// An error event as `fi_eq_readerr` will return it.
pub struct EqError {
    pub fid: *mut fid,
    pub context: *mut c_void,
    pub data: u64,
    /// Positive FI_E* code.
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}

impl Eq {
    /// Queues an event; `entry` is the exact bytes `fi_eq_read` copies out
    /// (a `struct fi_eq_entry`, or a `struct fi_eq_cm_entry` plus CM data).
    /// `Err(EAGAIN)` when the EQ is full.
    pub fn push_event(&self, _event: u32, _entry: &[u8]) -> Result<()> {
        Err(Error::NOSYS)
    }
    /// Queues an error event (read with `fi_eq_readerr`).
    pub fn push_error(&self, _e: EqError) -> Result<()> {
        Err(Error::NOSYS)
    }
}

pub fn open(_f: &Obj<Fabric>, _attr: &fi_eq_attr, _ctx: *mut c_void) -> Result<*mut fid_eq> {
    Err(Error::NOSYS)
}

/// The EQ core behind a `struct fid*` (for binding AVs, domains, endpoints).
///
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
