//! RMA, the C face: the endpoint's `fi_ops_rma` (`fi_read`, `fi_readv`,
//! `fi_readmsg`, `fi_write`, `fi_writev`, `fi_writemsg`,
//! `fi_inject_write`, `fi_writedata`, `fi_inject_writedata`). Each thunk
//! reads its C arguments (iovecs, `fi_msg_rma` and its `fi_rma_iov`
//! array) into an [`RmaOp`] and posts it through the endpoint core
//! (`core/rma.rs`). Descriptors (`desc`) are accepted and not needed:
//! rustfab requires no local registration (`FI_MR_LOCAL` is never asked
//! of applications; a domain opened with it still works).

use super::ep::{iov_from_c, iov_single, with_ep, EpObj};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::engine::{RmaIov, RmaIovList, RmaKind, RMA_IOV_MAX};
use crate::core::rma::RmaOp;
use crate::fi;
use core::ffi::c_void;

type Ep = *mut fid_ep;
type Desc = *mut *mut c_void;

fn post(o: &EpObj, op: RmaOp) -> Result<isize> {
    o.core.post_rma(op)?;
    Ok(0)
}

/// An operation on one target segment (the non-msg calls).
fn simple(kind: RmaKind, local: crate::core::engine::matching::IovList, dest: fi_addr_t, addr: u64, key: u64) -> RmaOp {
    RmaOp {
        kind,
        remote: RmaIovList::single(addr, local.total(), key),
        local,
        dest,
        data: None,
        flags: None,
        context: 0,
        inject: false,
    }
}

/// Reads a `fi_msg_rma`: its local iovecs and its target segments
/// (`rma_iov_count` 0 or above [`RMA_IOV_MAX`]: -FI_EINVAL).
///
/// # Safety
/// `msg` must be NULL or a valid `fi_msg_rma` whose arrays hold their
/// counts (when those are within the limits).
unsafe fn from_msg(kind: RmaKind, msg: *const fi_msg_rma, flags: u64) -> Result<RmaOp> {
    // SAFETY: per the contract.
    let m = unsafe { fi::read_in(msg) }?;
    if m.rma_iov_count == 0 || m.rma_iov_count > RMA_IOV_MAX {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    let local = unsafe { iov_from_c(m.msg_iov, m.iov_count) }?;
    // SAFETY: per the contract (count checked above).
    let rv = unsafe { fi::slice_in(m.rma_iov, m.rma_iov_count) }?;
    let mut remote = RmaIovList::default();
    for r in rv {
        remote.push(RmaIov {
            addr: r.addr,
            len: r.len,
            key: r.key,
        });
    }
    Ok(RmaOp {
        kind,
        local,
        remote,
        dest: m.addr,
        data: (kind == RmaKind::Write && flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
        flags: Some(flags),
        context: m.context as usize,
        inject: false,
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn read(
    e: Ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_read().
    unsafe {
        with_ep("fi_read", e as *const c_void, |o| {
            let op = simple(RmaKind::Read, iov_single(buf, len)?, src, addr, key);
            post(
                o,
                RmaOp {
                    context: ctx as usize,
                    ..op
                },
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn readv(
    e: Ep,
    iov: *const libc::iovec,
    _desc: Desc,
    count: usize,
    src: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_readv().
    unsafe {
        with_ep("fi_readv", e as *const c_void, |o| {
            let op = simple(RmaKind::Read, iov_from_c(iov, count)?, src, addr, key);
            post(
                o,
                RmaOp {
                    context: ctx as usize,
                    ..op
                },
            )
        })
    }
}

unsafe extern "C" fn readmsg(e: Ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments from fi_readmsg().
    unsafe {
        with_ep("fi_readmsg", e as *const c_void, |o| {
            post(o, from_msg(RmaKind::Read, msg, flags)?)
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn write(
    e: Ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_write().
    unsafe {
        with_ep("fi_write", e as *const c_void, |o| {
            let op = simple(RmaKind::Write, iov_single(buf, len)?, dest, addr, key);
            post(
                o,
                RmaOp {
                    context: ctx as usize,
                    ..op
                },
            )
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn writev(
    e: Ep,
    iov: *const libc::iovec,
    _desc: Desc,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_writev().
    unsafe {
        with_ep("fi_writev", e as *const c_void, |o| {
            let op = simple(RmaKind::Write, iov_from_c(iov, count)?, dest, addr, key);
            post(
                o,
                RmaOp {
                    context: ctx as usize,
                    ..op
                },
            )
        })
    }
}

unsafe extern "C" fn writemsg(e: Ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: arguments from fi_writemsg().
    unsafe {
        with_ep("fi_writemsg", e as *const c_void, |o| {
            post(o, from_msg(RmaKind::Write, msg, flags)?)
        })
    }
}

unsafe extern "C" fn inject_write(
    e: Ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    // SAFETY: arguments from fi_inject_write().
    unsafe {
        with_ep("fi_inject_write", e as *const c_void, |o| {
            let op = simple(RmaKind::Write, iov_single(buf, len)?, dest, addr, key);
            post(o, RmaOp { inject: true, ..op })
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn writedata(
    e: Ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_writedata().
    unsafe {
        with_ep("fi_writedata", e as *const c_void, |o| {
            let op = simple(RmaKind::Write, iov_single(buf, len)?, dest, addr, key);
            post(
                o,
                RmaOp {
                    data: Some(data),
                    context: ctx as usize,
                    ..op
                },
            )
        })
    }
}

unsafe extern "C" fn inject_writedata(
    e: Ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    // SAFETY: arguments from fi_inject_writedata().
    unsafe {
        with_ep("fi_inject_writedata", e as *const c_void, |o| {
            let op = simple(RmaKind::Write, iov_single(buf, len)?, dest, addr, key);
            post(
                o,
                RmaOp {
                    data: Some(data),
                    inject: true,
                    ..op
                },
            )
        })
    }
}

/// Every endpoint's `fi_ops_rma` (`fid_ep.rma`). An endpoint opened
/// without `FI_RMA` answers -FI_EOPNOTSUPP (core/engine/rma.rs).
pub(crate) static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: core::mem::size_of::<fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(inject_write),
    writedata: Some(writedata),
    injectdata: Some(inject_writedata),
};
