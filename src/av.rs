//! Address vectors (FI_AV_MAP and FI_AV_TABLE). [stub: being written]
use crate::abi::*;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::Obj;
use core::ffi::c_void;

pub fn open(_d: &Obj<Domain>, _attr: &fi_av_attr, _ctx: *mut c_void) -> Result<*mut fid_av> {
    Err(Error::NOSYS)
}
