//! Atomics, the C face: the endpoint's `fi_ops_atomic` (`fi_atomic`,
//! `fi_atomicv`, `fi_atomicmsg`, `fi_inject_atomic`, the fetch and compare
//! families, and the `*valid` queries). Shaped as `fi/rma.rs`: every
//! thunk is one call of [`post_one`] (one target segment; buffers given
//! as a pointer and a count, or as `fi_ioc` arrays) or [`post_msg`] (a
//! `fi_msg_atomic`), which read the C arguments into an [`AtomicOp`]
//! (counts turned into bytes) and post it through the endpoint core
//! (`core/rma.rs`; the protocol is `core/engine/atomic.rs`).
//! Descriptors are accepted and not needed.

use super::ep_obj::{iov_single, with_ep};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::atomic::{datatype_size, valid, AtomicKind, FI_ATOMIC_READ};
use crate::core::engine::matching::IovList;
use crate::core::engine::matching::IOV_MAX;
use crate::core::engine::{RmaIov, RmaIovList, RMA_IOV_MAX};
use crate::core::rma::AtomicOp;
use crate::fi;
use core::ffi::{c_int, c_void};

type Ep = *mut fid_ep;
type Desc = *mut *mut c_void;
type V = *mut c_void;

/// Bytes of `count` elements of `dt` (an unknown datatype:
/// -FI_EOPNOTSUPP, as fi_atomic(3) says of unsupported operations).
fn bytes(dt: u32, count: usize) -> Result<usize> {
    match datatype_size(dt) {
        0 => Err(Error::OPNOTSUPP),
        n => count.checked_mul(n).ok_or(Error::INVAL),
    }
}

/// Application buffers given as a `fi_ioc` array.
///
/// # Safety
/// `ioc` must be NULL or valid for `count` entries (when `count` is within
/// the limit).
unsafe fn ioc_from_c(ioc: *const fi_ioc, count: usize, dt: u32) -> Result<IovList> {
    if count > IOV_MAX {
        return Err(Error::INVAL);
    }
    let mut l = IovList::new();
    // SAFETY: per the contract.
    for io in unsafe { fi::slice_in(ioc, count) }? {
        let n = bytes(dt, io.count)?;
        if io.addr.is_null() && n > 0 {
            return Err(Error::INVAL);
        }
        l.push(io.addr as usize, n);
    }
    Ok(l)
}

/// One buffer of `count` elements.
fn ioc_single(buf: *const c_void, count: usize, dt: u32) -> Result<IovList> {
    iov_single(buf, bytes(dt, count)?)
}

/// The buffers one call names (each read inside the boundary).
struct Bufs {
    operand: IovList,
    compare: IovList,
    result: IovList,
}

/// What a call is beyond its buffers.
#[derive(Clone, Copy)]
struct Call {
    kind: AtomicKind,
    dt: u32,
    op: u32,
}

/// The body of every call naming one target segment (`count` elements at
/// `addr` under `key`, `count` = the operand's): `bufs()` reads the
/// buffers. `FI_ATOMIC_READ` takes no operand (fi_atomic(3): `buf` is
/// ignored).
///
/// # Safety
/// `e` and what `bufs` reads come from the application's call.
#[allow(clippy::too_many_arguments)]
unsafe fn post_one(
    what: &'static str,
    e: Ep,
    c: Call,
    bufs: impl FnOnce() -> Result<Bufs>,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    context: V,
    inject: bool,
) -> isize {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |o| {
            valid(c.kind, c.op, c.dt)?;
            let mut b = bufs()?;
            let len = if c.op == FI_ATOMIC_READ {
                let n = b.result.total();
                b.operand = IovList::new();
                n
            } else {
                b.operand.total()
            };
            o.core.post_atomic(AtomicOp {
                kind: c.kind,
                op: c.op,
                datatype: c.dt,
                operand: b.operand,
                compare: b.compare,
                result: b.result,
                remote: RmaIovList::single(addr, len, key),
                dest,
                data: None,
                flags: None,
                context: context as usize,
                inject,
            })?;
            Ok(0isize)
        })
    }
}

/// The body of the `*msg` calls: a `fi_msg_atomic` (its operand `fi_ioc`s
/// and target `fi_rma_ioc`s: 0 or more than [`RMA_IOV_MAX`] targets is
/// -FI_EINVAL), with the compare and result `fi_ioc`s of its family.
///
/// # Safety
/// `msg` must be NULL or a valid `fi_msg_atomic` whose arrays hold their
/// counts; `more()` reads the application's other arrays.
unsafe fn post_msg(
    what: &'static str,
    e: Ep,
    kind: AtomicKind,
    msg: *const fi_msg_atomic,
    more: impl FnOnce(u32) -> Result<(IovList, IovList)>,
    flags: u64,
) -> isize {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |o| {
            let m = fi::read_in(msg)?;
            valid(kind, m.op, m.datatype)?;
            if m.rma_iov_count == 0 || m.rma_iov_count > RMA_IOV_MAX {
                return Err(Error::INVAL);
            }
            let mut remote = RmaIovList::default();
            for r in fi::slice_in(m.rma_iov, m.rma_iov_count)? {
                remote.push(RmaIov {
                    addr: r.addr,
                    len: bytes(m.datatype, r.count)?,
                    key: r.key,
                });
            }
            let operand = if m.op == FI_ATOMIC_READ {
                IovList::new()
            } else {
                ioc_from_c(m.msg_iov, m.iov_count, m.datatype)?
            };
            let (compare, result) = more(m.datatype)?;
            o.core.post_atomic(AtomicOp {
                kind,
                op: m.op,
                datatype: m.datatype,
                operand,
                compare,
                result,
                remote,
                dest: m.addr,
                data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(m.data),
                flags: Some(flags),
                context: m.context as usize,
                inject: false,
            })?;
            Ok(0isize)
        })
    }
}

fn only(operand: IovList) -> Bufs {
    Bufs {
        operand,
        compare: IovList::new(),
        result: IovList::new(),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic(
    e: Ep,
    buf: *const c_void,
    count: usize,
    _desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Write,
        dt,
        op,
    };
    let bufs = || Ok(only(ioc_single(buf, count, dt)?));
    // SAFETY: arguments from fi_atomic().
    unsafe { post_one("fi_atomic", e, call, bufs, dest, addr, key, c, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomicv(
    e: Ep,
    iov: *const fi_ioc,
    _desc: Desc,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Write,
        dt,
        op,
    };
    // SAFETY: the application's array (fi_atomicv()).
    let bufs = || Ok(only(unsafe { ioc_from_c(iov, count, dt) }?));
    // SAFETY: arguments from fi_atomicv().
    unsafe { post_one("fi_atomicv", e, call, bufs, dest, addr, key, c, false) }
}

unsafe extern "C" fn atomicmsg(e: Ep, msg: *const fi_msg_atomic, flags: u64) -> isize {
    if flags & FI_TRIGGER != 0 {
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { super::trigger::atomic("fi_atomicmsg", e, msg, flags, atomicmsg) };
    }
    let none = |_| Ok((IovList::new(), IovList::new()));
    // SAFETY: arguments from fi_atomicmsg().
    unsafe { post_msg("fi_atomicmsg", e, AtomicKind::Write, msg, none, flags) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn inject_atomic(
    e: Ep,
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
) -> isize {
    let call = Call {
        kind: AtomicKind::Write,
        dt,
        op,
    };
    let bufs = || Ok(only(ioc_single(buf, count, dt)?));
    // SAFETY: arguments from fi_inject_atomic().
    unsafe {
        post_one(
            "fi_inject_atomic",
            e,
            call,
            bufs,
            dest,
            addr,
            key,
            core::ptr::null_mut(),
            true,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn fetch_atomic(
    e: Ep,
    buf: *const c_void,
    count: usize,
    _desc: V,
    result: V,
    _result_desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Fetch,
        dt,
        op,
    };
    let bufs = || {
        Ok(Bufs {
            operand: if op == FI_ATOMIC_READ {
                IovList::new()
            } else {
                ioc_single(buf, count, dt)?
            },
            compare: IovList::new(),
            result: ioc_single(result, count, dt)?,
        })
    };
    // SAFETY: arguments from fi_fetch_atomic().
    unsafe { post_one("fi_fetch_atomic", e, call, bufs, dest, addr, key, c, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn fetch_atomicv(
    e: Ep,
    iov: *const fi_ioc,
    _desc: Desc,
    count: usize,
    resultv: *mut fi_ioc,
    _result_desc: Desc,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Fetch,
        dt,
        op,
    };
    let bufs = || {
        // SAFETY: the application's arrays (fi_fetch_atomicv()).
        unsafe {
            Ok(Bufs {
                operand: if op == FI_ATOMIC_READ {
                    IovList::new()
                } else {
                    ioc_from_c(iov, count, dt)?
                },
                compare: IovList::new(),
                result: ioc_from_c(resultv, result_count, dt)?,
            })
        }
    };
    // SAFETY: arguments from fi_fetch_atomicv().
    unsafe { post_one("fi_fetch_atomicv", e, call, bufs, dest, addr, key, c, false) }
}

unsafe extern "C" fn fetch_atomicmsg(
    e: Ep,
    msg: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    _result_desc: Desc,
    result_count: usize,
    flags: u64,
) -> isize {
    if flags & FI_TRIGGER != 0 {
        let res = (resultv, _result_desc, result_count);
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe { super::trigger::fetch_atomic("fi_fetch_atomicmsg", e, msg, res, flags, fetch_atomicmsg) };
    }
    // SAFETY: the application's array (fi_fetch_atomicmsg()).
    let more = |dt| Ok((IovList::new(), unsafe { ioc_from_c(resultv, result_count, dt) }?));
    // SAFETY: arguments from fi_fetch_atomicmsg().
    unsafe { post_msg("fi_fetch_atomicmsg", e, AtomicKind::Fetch, msg, more, flags) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compare_atomic(
    e: Ep,
    buf: *const c_void,
    count: usize,
    _desc: V,
    compare: *const c_void,
    _compare_desc: V,
    result: V,
    _result_desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Compare,
        dt,
        op,
    };
    let bufs = || {
        Ok(Bufs {
            operand: ioc_single(buf, count, dt)?,
            compare: ioc_single(compare, count, dt)?,
            result: ioc_single(result, count, dt)?,
        })
    };
    // SAFETY: arguments from fi_compare_atomic().
    unsafe { post_one("fi_compare_atomic", e, call, bufs, dest, addr, key, c, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compare_atomicv(
    e: Ep,
    iov: *const fi_ioc,
    _desc: Desc,
    count: usize,
    comparev: *const fi_ioc,
    _compare_desc: Desc,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: Desc,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    c: V,
) -> isize {
    let call = Call {
        kind: AtomicKind::Compare,
        dt,
        op,
    };
    let bufs = || {
        // SAFETY: the application's arrays (fi_compare_atomicv()).
        unsafe {
            Ok(Bufs {
                operand: ioc_from_c(iov, count, dt)?,
                compare: ioc_from_c(comparev, compare_count, dt)?,
                result: ioc_from_c(resultv, result_count, dt)?,
            })
        }
    };
    // SAFETY: arguments from fi_compare_atomicv().
    unsafe { post_one("fi_compare_atomicv", e, call, bufs, dest, addr, key, c, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compare_atomicmsg(
    e: Ep,
    msg: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    _compare_desc: Desc,
    compare_count: usize,
    resultv: *mut fi_ioc,
    _result_desc: Desc,
    result_count: usize,
    flags: u64,
) -> isize {
    if flags & FI_TRIGGER != 0 {
        let cmp = (comparev, _compare_desc, compare_count);
        let res = (resultv, _result_desc, result_count);
        // SAFETY: this call's arguments, replayed later through this thunk.
        return unsafe {
            super::trigger::compare_atomic("fi_compare_atomicmsg", e, msg, (cmp, res), flags, compare_atomicmsg)
        };
    }
    let more = |dt| {
        // SAFETY: the application's arrays (fi_compare_atomicmsg()).
        unsafe {
            Ok((
                ioc_from_c(comparev, compare_count, dt)?,
                ioc_from_c(resultv, result_count, dt)?,
            ))
        }
    };
    // SAFETY: arguments from fi_compare_atomicmsg().
    unsafe { post_msg("fi_compare_atomicmsg", e, AtomicKind::Compare, msg, more, flags) }
}

/// The `*valid` calls: the table (`core/atomic.rs`), the count written to
/// `*count`.
///
/// # Safety
/// `count` must be NULL or writable.
unsafe fn valid_call(what: &'static str, e: Ep, kind: AtomicKind, dt: u32, op: u32, count: *mut usize) -> c_int {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |_| {
            let n = valid(kind, op, dt)?;
            fi::write_out(count, n)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn atomicvalid(e: Ep, dt: u32, op: u32, count: *mut usize) -> c_int {
    // SAFETY: arguments from fi_atomicvalid().
    unsafe { valid_call("fi_atomicvalid", e, AtomicKind::Write, dt, op, count) }
}

unsafe extern "C" fn fetch_atomicvalid(e: Ep, dt: u32, op: u32, count: *mut usize) -> c_int {
    // SAFETY: arguments from fi_fetch_atomicvalid().
    unsafe { valid_call("fi_fetch_atomicvalid", e, AtomicKind::Fetch, dt, op, count) }
}

unsafe extern "C" fn compare_atomicvalid(e: Ep, dt: u32, op: u32, count: *mut usize) -> c_int {
    // SAFETY: arguments from fi_compare_atomicvalid().
    unsafe { valid_call("fi_compare_atomicvalid", e, AtomicKind::Compare, dt, op, count) }
}

/// Every endpoint's `fi_ops_atomic` (`fid_ep.atomic`). An endpoint opened
/// without `FI_ATOMIC` answers its calls with -FI_EOPNOTSUPP
/// (core/engine/atomic.rs).
pub(crate) static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: core::mem::size_of::<fi_ops_atomic>(),
    write: Some(atomic),
    writev: Some(atomicv),
    writemsg: Some(atomicmsg),
    inject: Some(inject_atomic),
    readwrite: Some(fetch_atomic),
    readwritev: Some(fetch_atomicv),
    readwritemsg: Some(fetch_atomicmsg),
    compwrite: Some(compare_atomic),
    compwritev: Some(compare_atomicv),
    compwritemsg: Some(compare_atomicmsg),
    writevalid: Some(atomicvalid),
    readwritevalid: Some(fetch_atomicvalid),
    compwritevalid: Some(compare_atomicvalid),
};
