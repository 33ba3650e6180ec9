//! RMA, the C face: the endpoint's `fi_ops_rma` (`fi_read`, `fi_readv`,
//! `fi_readmsg`, `fi_write`, `fi_writev`, `fi_writemsg`,
//! `fi_inject_write`, `fi_writedata`, `fi_inject_writedata`). Every thunk
//! is one call of [`post_one`] (the calls naming one target segment) or
//! [`post_msg`] (the `fi_msg_rma` ones): they read the C arguments into an
//! [`RmaOp`] and post it through the endpoint core (`core/rma.rs`).
//! Descriptors (`desc`) are accepted and not needed: rustfab requires no
//! local registration (`FI_MR_LOCAL` is never asked of applications; a
//! domain opened with it still works). The atomics (`fi/atomic.rs`) have
//! the same shape.

use super::ep_obj::{iov_from_c, iov_single, with_ep};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::engine::matching::IovList;
use crate::core::engine::{RmaIov, RmaIovList, RmaKind, RMA_IOV_MAX};
use crate::core::rma::RmaOp;
use crate::fi;
use core::ffi::c_void;

type Ep = *mut fid_ep;
type Desc = *mut *mut c_void;

/// What a call adds to its operation beyond the buffers and the target.
#[derive(Clone, Copy, Default)]
struct Extra {
    context: usize,
    data: Option<u64>,
    inject: bool,
}

/// The body of every call naming one target segment: `local()` reads the
/// local buffers (inside the boundary, so a bad iovec is an error return).
///
/// # Safety
/// `e` and what `local` reads come from the application's call.
#[allow(clippy::too_many_arguments)]
unsafe fn post_one(
    what: &'static str,
    e: Ep,
    kind: RmaKind,
    local: impl FnOnce() -> Result<IovList>,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    x: Extra,
) -> isize {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |o| {
            let local = local()?;
            o.core.post_rma(RmaOp {
                kind,
                remote: RmaIovList::single(addr, local.total(), key),
                local,
                dest,
                data: x.data,
                flags: None,
                context: x.context,
                inject: x.inject,
            })?;
            Ok(0isize)
        })
    }
}

/// The body of `fi_readmsg`/`fi_writemsg`: the local iovecs and the
/// target segments of a `fi_msg_rma` (`rma_iov_count` 0 or above
/// [`RMA_IOV_MAX`]: -FI_EINVAL).
///
/// # Safety
/// `msg` must be NULL or a valid `fi_msg_rma` whose arrays hold their
/// counts (when those are within the limits).
unsafe fn post_msg(what: &'static str, e: Ep, kind: RmaKind, msg: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            if m.rma_iov_count == 0 || m.rma_iov_count > RMA_IOV_MAX {
                return Err(Error::INVAL);
            }
            let local = iov_from_c(m.msg_iov, m.iov_count)?;
            let mut remote = RmaIovList::default();
            for r in fi::slice_in(m.rma_iov, m.rma_iov_count)? {
                remote.push(RmaIov {
                    addr: r.addr,
                    len: r.len,
                    key: r.key,
                });
            }
            o.core.post_rma(RmaOp {
                kind,
                local,
                remote,
                dest: m.addr,
                data: (kind == RmaKind::Write && flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
                flags: Some(flags),
                context: m.context as usize,
                inject: false,
            })?;
            Ok(0isize)
        })
    }
}

fn ctx(c: *mut c_void) -> Extra {
    Extra {
        context: c as usize,
        ..Extra::default()
    }
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
    c: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_read().
    unsafe {
        post_one(
            "fi_read",
            e,
            RmaKind::Read,
            || iov_single(buf, len),
            src,
            addr,
            key,
            ctx(c),
        )
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
    c: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_readv().
    unsafe {
        post_one(
            "fi_readv",
            e,
            RmaKind::Read,
            || iov_from_c(iov, count),
            src,
            addr,
            key,
            ctx(c),
        )
    }
}

unsafe extern "C" fn readmsg(e: Ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { super::trigger::rma("fi_readmsg", e, msg, flags, readmsg, true) };
    }
    // SAFETY: arguments from fi_readmsg().
    unsafe { post_msg("fi_readmsg", e, RmaKind::Read, msg, flags) }
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
    c: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_write().
    unsafe {
        post_one(
            "fi_write",
            e,
            RmaKind::Write,
            || iov_single(buf, len),
            dest,
            addr,
            key,
            ctx(c),
        )
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
    c: *mut c_void,
) -> isize {
    // SAFETY: arguments from fi_writev().
    unsafe {
        post_one(
            "fi_writev",
            e,
            RmaKind::Write,
            || iov_from_c(iov, count),
            dest,
            addr,
            key,
            ctx(c),
        )
    }
}

unsafe extern "C" fn writemsg(e: Ep, msg: *const fi_msg_rma, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { super::trigger::rma("fi_writemsg", e, msg, flags, writemsg, false) };
    }
    // SAFETY: arguments from fi_writemsg().
    unsafe { post_msg("fi_writemsg", e, RmaKind::Write, msg, flags) }
}

unsafe extern "C" fn inject_write(
    e: Ep,
    buf: *const c_void,
    len: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let x = Extra {
        inject: true,
        ..Extra::default()
    };
    // SAFETY: arguments from fi_inject_write().
    unsafe {
        post_one(
            "fi_inject_write",
            e,
            RmaKind::Write,
            || iov_single(buf, len),
            dest,
            addr,
            key,
            x,
        )
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
    c: *mut c_void,
) -> isize {
    let x = Extra {
        data: Some(data),
        ..ctx(c)
    };
    // SAFETY: arguments from fi_writedata().
    unsafe {
        post_one(
            "fi_writedata",
            e,
            RmaKind::Write,
            || iov_single(buf, len),
            dest,
            addr,
            key,
            x,
        )
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
    let x = Extra {
        data: Some(data),
        inject: true,
        ..Extra::default()
    };
    // SAFETY: arguments from fi_inject_writedata().
    unsafe {
        post_one(
            "fi_inject_writedata",
            e,
            RmaKind::Write,
            || iov_single(buf, len),
            dest,
            addr,
            key,
            x,
        )
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
