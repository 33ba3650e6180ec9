//! The endpoint object as C holds it, and what the endpoint's operation
//! tables (`ep.rs`, `rma.rs`, `atomic.rs`, `connected.rs`) share: finding
//! the endpoint behind a C pointer, and C buffers as `IovList`s.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::connected::ConnectedLink;
use crate::core::engine::matching::{IovList, IOV_MAX};
use crate::core::ep::Endpoint;
use crate::fi::{self, FiObject, Obj};
use core::ffi::c_void;

/// The endpoint object C holds: the core, with a MSG endpoint's connection
/// state (`connected.rs`) as its [`Connection`].
pub(crate) type Ep = Endpoint<ConnectedLink>;

pub(crate) type EpObj = Obj<Ep>;

impl FiObject for Ep {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_EP;
    fn failed(&self) -> bool {
        self.has_failed()
    }
}

/// Runs `f` on the endpoint behind a C pointer.
///
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
pub(crate) unsafe fn with_ep<R: fi::FfiRet>(
    what: &'static str,
    p: *const c_void,
    f: impl FnOnce(&EpObj) -> Result<R>,
) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<Ep, R>(what, p, f) }
}

/// Builds an IovList from a C iovec array, enforcing `iov_limit`.
///
/// # Safety
/// `iov` must be NULL or point to `count` iovecs.
pub(crate) unsafe fn iov_from_c(iov: *const libc::iovec, count: usize) -> Result<IovList> {
    if count > IOV_MAX {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    let v = unsafe { fi::slice_in(iov, count) }?;
    let mut l = IovList::new();
    for io in v {
        if io.iov_base.is_null() && io.iov_len > 0 {
            return Err(Error::INVAL);
        }
        l.push(io.iov_base as usize, io.iov_len);
    }
    Ok(l)
}

/// A receive's one buffer. A NULL buffer holds nothing whatever length it
/// is given: the receive takes a message of 0 bytes, and a longer one
/// completes truncated (`FI_ETRUNC`), nothing written (fabtests'
/// fi_shared_ctx over MSG endpoints posts NULL buffers for the empty
/// messages it exchanges; libfabric's sockets provider takes them).
pub(crate) fn iov_recv_single(buf: *mut c_void, len: usize) -> Result<IovList> {
    if buf.is_null() {
        return Ok(IovList::single(0, 0));
    }
    iov_single(buf, len)
}

pub(crate) fn iov_single(buf: *const c_void, len: usize) -> Result<IovList> {
    if buf.is_null() && len > 0 {
        return Err(Error::INVAL);
    }
    Ok(IovList::single(buf as usize, len))
}

/// fi_cm(3) getname's answer: `bytes` copied into `addr` up to `*addrlen`,
/// the real size always reported in `*addrlen`, -FI_ETOOSMALL when it did
/// not fit.
///
/// # Safety
/// `addrlen` NULL or writable; `addr` NULL or writable for `*addrlen` bytes.
pub(crate) unsafe fn write_name(bytes: &[u8], addr: *mut c_void, addrlen: *mut usize) -> Result<core::ffi::c_int> {
    if addrlen.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    unsafe {
        let room = *addrlen;
        *addrlen = bytes.len();
        if room < bytes.len() || addr.is_null() {
            if !addr.is_null() {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, room);
            }
            return Err(Error::TOOSMALL);
        }
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len());
    }
    Ok(0)
}
