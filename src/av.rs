//! Address vectors. [stub: contract API only; being written in branch `avmr`]
use crate::abi::*;
use crate::addr::Addr;
use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::ffi::{FiObject, HasUsers, Obj, Users};
use core::ffi::c_void;

pub struct Av {
    users: Users,
}
impl FiObject for Av {
    type Header = fid_av;
    const CLASS: usize = FI_CLASS_AV;
}
impl HasUsers for Av {
    fn users(&self) -> &Users {
        &self.users
    }
}
impl Av {
    pub fn lookup_addr(&self, _a: fi_addr_t) -> Option<Addr> {
        None
    }
    pub fn reverse_lookup(&self, _a: &Addr) -> Option<fi_addr_t> {
        None
    }
}
pub fn open(_d: &Obj<Domain>, _attr: &fi_av_attr, _ctx: *mut c_void) -> Result<*mut fid_av> {
    Err(Error::NOSYS)
}
