//! `fi_endpoint` for a datagram (`FI_EP_DGRAM`) endpoint: the RDM
//! endpoint's object and operation tables (`fi/ep.rs`) around a datagram
//! engine (`core/dgram.rs`). Its `fi_setname` opens a datagram port
//! (`fi/ep.rs`, `ep_setname`).

use super::ep::{create_rdm, MsgTables};
use crate::abi::*;
use crate::base::error::Result;
use crate::core::attr::Info;
use crate::core::dgram::dgram_engine;
use crate::core::domain::Domain;
use crate::fi::Obj;
use core::ffi::c_void;

pub(crate) fn open(d: &Obj<Domain>, info: &Info, context: *mut c_void, tables: MsgTables) -> Result<*mut fid_ep> {
    let inner = dgram_engine(&d.core, info)?;
    create_rdm(d, info, inner, context, tables)
}
