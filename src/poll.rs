//! Poll sets. [stub: being written]
use crate::abi::*;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::Obj;

pub fn open(_d: &Obj<Domain>, _attr: &fi_poll_attr) -> Result<*mut fid_poll> {
    Err(Error::NOSYS)
}
