//! Endpoint aliases (`fi_ep_alias`, `fi_control(FI_ALIAS)`, fi_endpoint(3)):
//! "An alias EP differs from its parent endpoint only by its default data
//! transfer flags."
//!
//! An alias is an endpoint object of its own (`Obj<Ep>`, so every call that
//! takes an endpoint accepts it) around the parent's core, with:
//! * its own `fi_ops` (close frees the alias only; `fi_control`'s
//!   `FI_GETOPSFLAG`/`FI_SETOPSFLAG` read and set the alias's flags, the
//!   other commands are the parent's), the parent's `fi_ops_ep` and
//!   `fi_ops_cm` (they act on the shared core);
//! * data tables of its own: a call without flags (`fi_send`, `fi_write`,
//!   `fi_atomic`, ...) becomes the corresponding `*msg` call of the
//!   parent's table with the alias's flags for its direction — so
//!   `FI_TRIGGER` in an alias's transmit flags makes its `fi_write` a
//!   triggered one (fabtests' `fi_rdm_rma_trigger`); a `*msg` call, which
//!   names its flags, and the inject calls, which have neither a context
//!   nor a completion, go to the parent's table as they are.
//!
//! The flags given to `fi_ep_alias` "must include FI_TRANSMIT or FI_RECV
//! (not both)" (-FI_EINVAL otherwise) and replace the flags of that
//! direction; the other starts as the parent's. The alias holds the
//! parent: "All allocated aliases must be closed for the underlying endpoint
//! to be released" (closing the parent first is -FI_EBUSY).
//!
//! Why this file is longer than the others (~830 lines, most of them thunks
//! made by the `forward!`, `rma_one!` and `rma_vec!` macros): it holds the
//! alias's `fi_ops` and its four data tables (msg, tagged, rma, atomic)
//! and one thunk per slot, each three lines that look the alias up and call
//! the parent's `*msg` slot with the alias's flags. Split by table, each
//! part would import `Alias`, `lookup` and the flag helpers from here while
//! this file names their tables: a cycle between files.

use super::ep_obj::{Ep, EpObj};
use crate::abi::*;
use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::core::ep::Direction;
use crate::core::users::Held;
use crate::fi::{self, Obj};
use core::ffi::{c_int, c_void};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

type E = *mut fid_ep;
type V = *mut c_void;
type D = *mut *mut c_void;

/// What an alias adds to the shared core.
struct Alias {
    /// The parent's `fid_ep` and its tables (a prefix endpoint's message
    /// tables are its own, `fi/prefix.rs`).
    parent: usize,
    msg: &'static fi_ops_msg,
    tagged: &'static fi_ops_tagged,
    rma: &'static fi_ops_rma,
    atomic: &'static fi_ops_atomic,
    /// The parent's `fi_ops` (bind and the other control commands).
    fi_ops: &'static fi_ops,
    tx_flags: AtomicU64,
    rx_flags: AtomicU64,
    /// Keeps the parent's close at -FI_EBUSY while the alias lives.
    _hold: Held<Ep>,
}

/// The live aliases by their `fid_ep` address.
static ALIASES: Mutex<Option<FastMap<usize, Arc<Alias>>>> = Mutex::new(None);

fn lookup(e: E) -> Result<Arc<Alias>> {
    ALIASES
        .lock()
        .as_ref()
        .and_then(|m| m.get(&(e as usize)).cloned())
        .ok_or(Error::INVAL)
}

/// `fi_control(FI_ALIAS)` on endpoint `o`.
///
/// # Safety
/// `arg` must be NULL or a valid `struct fi_alias` whose `fid` is NULL or
/// writable.
pub(crate) unsafe fn open(o: &EpObj, arg: *mut fi_alias) -> Result<c_int> {
    // SAFETY: per the contract.
    let a = unsafe { fi::read_in(arg) }?;
    if a.fid.is_null() {
        return Err(Error::INVAL);
    }
    let dir = match a.flags & (FI_TRANSMIT | FI_RECV) {
        FI_TRANSMIT => Direction::Transmit,
        FI_RECV => Direction::Receive,
        _ => return Err(Error::INVAL),
    };
    let given = a.flags & !(FI_TRANSMIT | FI_RECV);
    // SAFETY: `o` is a live endpoint object: its header is readable and
    // its tables are the static ones it was created with.
    let h = unsafe { &*(o.fid_ptr() as *const fid_ep) };
    // An alias of an alias is one of the same parent.
    let (parent, tables, fi_ops) = match lookup(o.fid_ptr() as E) {
        Ok(p) => (p.parent, (p.msg, p.tagged, p.rma, p.atomic), p.fi_ops),
        // SAFETY: as above: the header's table pointers are 'static.
        Err(_) => unsafe {
            let t = (&*h.msg, &*h.tagged, &*h.rma, &*h.atomic);
            (o.fid_ptr() as usize, t, &*h.fid.ops)
        },
    };
    let mut tx = o.core.ops_flags(Direction::Transmit);
    let mut rx = o.core.ops_flags(Direction::Receive);
    match dir {
        Direction::Transmit => tx = given,
        Direction::Receive => rx = given,
    }
    let alias = Arc::new(Alias {
        parent,
        msg: tables.0,
        tagged: tables.1,
        rma: tables.2,
        atomic: tables.3,
        fi_ops,
        tx_flags: AtomicU64::new(tx),
        rx_flags: AtomicU64::new(rx),
        _hold: Held::new(Arc::clone(&o.core)),
    });
    let hdr = fid_ep {
        fid: fid {
            fclass: FI_CLASS_EP,
            context: h.fid.context,
            ops: &ALIAS_FI_OPS,
        },
        ops: h.ops,
        cm: h.cm,
        msg: &ALIAS_MSG_OPS,
        rma: &ALIAS_RMA_OPS,
        tagged: &ALIAS_TAGGED_OPS,
        atomic: &ALIAS_ATOMIC_OPS,
        collective: h.collective,
    };
    let p = Obj::create(hdr, Arc::clone(&o.core));
    ALIASES
        .lock()
        .get_or_insert_with(FastMap::default)
        .insert(p as usize, alias);
    // SAFETY: checked non-NULL above; writable per the contract.
    unsafe { *a.fid = p as *mut fid };
    Ok(0)
}

static ALIAS_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(alias_close),
    bind: Some(alias_bind),
    control: Some(alias_control),
    ops_open: Some(fi::noops::no_ops_open),
    tostr: Some(fi::noops::no_tostr),
    ops_set: Some(fi::noops::no_ops_set),
};

unsafe extern "C" fn alias_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's alias fid.
    unsafe {
        fi::call_close::<Ep>("alias close", f as *const c_void, |o| {
            let a = ALIASES.lock().as_mut().and_then(|m| m.remove(&(f as usize)));
            Obj::destroy(o);
            drop(a);
            Ok(0)
        })
    }
}

/// Binding through an alias binds the shared core (the parent's call on
/// the alias, an endpoint object around that core).
unsafe extern "C" fn alias_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    let Ok(a) = lookup(f as E) else { return -FI_EINVAL };
    match a.fi_ops.bind {
        // SAFETY: the application's call, to the parent's thunk.
        Some(bind) => unsafe { bind(f, bfid, flags) },
        None => -FI_ENOSYS,
    }
}

unsafe extern "C" fn alias_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    let Ok(a) = lookup(f as E) else { return -FI_EINVAL };
    if command != FI_GETOPSFLAG && command != FI_SETOPSFLAG {
        // The shared core's (FI_ENABLE; FI_ALIAS: an alias of the parent).
        return match a.fi_ops.control {
            // SAFETY: the application's call, to the parent's thunk.
            Some(control) => unsafe { control(f, command, arg) },
            None => -FI_ENOSYS,
        };
    }
    match command {
        FI_GETOPSFLAG | FI_SETOPSFLAG => fi::call("alias control", || {
            // SAFETY: both commands take a `uint64_t *`.
            let v = *unsafe { fi::read_in(arg as *const u64) }?;
            let slot = match Direction::of_flags(v)? {
                Direction::Transmit => &a.tx_flags,
                Direction::Receive => &a.rx_flags,
            };
            if command == FI_GETOPSFLAG {
                // SAFETY: as above; readable, hence writable per fi_endpoint(3).
                unsafe { fi::write_out(arg as *mut u64, slot.load(Ordering::Acquire)) }?;
            } else {
                slot.store(v & !(FI_TRANSMIT | FI_RECV), Ordering::Release);
            }
            Ok(0)
        }),
        _ => -FI_ENOSYS,
    }
}

fn tx(a: &Alias) -> u64 {
    a.tx_flags.load(Ordering::Acquire)
}
fn rx(a: &Alias) -> u64 {
    a.rx_flags.load(Ordering::Acquire)
}

/// Runs `f` with the alias behind `e` and its parent's `fid_ep`
/// (-FI_EINVAL when `e` is no live alias).
fn with<R: fi::FfiRet>(e: E, f: impl FnOnce(&Alias, E) -> R) -> R {
    fi::call("alias", || {
        let a = lookup(e)?;
        Ok(f(&a, a.parent as E))
    })
}

fn one(buf: *const c_void, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: buf as *mut c_void,
        iov_len: len,
    }
}

/// The bytes of a C iovec array (0 for a NULL array: the parent's call
/// refuses it).
///
/// # Safety
/// `iov` must be NULL or valid for `count` entries (at most the limit).
unsafe fn total(iov: *const libc::iovec, count: usize) -> usize {
    // SAFETY: per the contract.
    match unsafe { fi::slice_in(iov, count.min(super::trigger::MAX_ARRAY)) } {
        Ok(v) => v.iter().map(|i| i.iov_len).sum(),
        Err(_) => 0,
    }
}

/// The elements of an `fi_ioc` array.
///
/// # Safety
/// As [`total`].
unsafe fn ioc_total(ioc: *const fi_ioc, count: usize) -> usize {
    // SAFETY: per the contract.
    match unsafe { fi::slice_in(ioc, count.min(super::trigger::MAX_ARRAY)) } {
        Ok(v) => v.iter().map(|i| i.count).sum(),
        Err(_) => 0,
    }
}

fn msg(iov: *const libc::iovec, desc: D, count: usize, addr: fi_addr_t, ctx: V, data: u64) -> fi_msg {
    fi_msg {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        context: ctx,
        data,
    }
}

/// A thunk that hands its call, as it is, to the parent's table (the calls
/// that name their flags, the injects and the atomic queries).
macro_rules! forward {
    ($name:ident, $table:ident . $slot:ident -> $ret:ty; $($arg:ident: $t:ty),*) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(e: E, $($arg: $t),*) -> $ret {
            // SAFETY: the parent's thunk with the application's arguments.
            with(e, |a, p| unsafe { (a.$table.$slot.unwrap())(p, $($arg),*) })
        }
    };
}

forward!(recvmsg, msg.recvmsg -> isize; m: *const fi_msg, flags: u64);
forward!(sendmsg, msg.sendmsg -> isize; m: *const fi_msg, flags: u64);
forward!(inject, msg.inject -> isize; buf: *const c_void, len: usize, dest: fi_addr_t);
forward!(injectdata, msg.injectdata -> isize; buf: *const c_void, len: usize, data: u64, dest: fi_addr_t);
forward!(trecvmsg, tagged.recvmsg -> isize; m: *const fi_msg_tagged, flags: u64);
forward!(tsendmsg, tagged.sendmsg -> isize; m: *const fi_msg_tagged, flags: u64);
forward!(tinject, tagged.inject -> isize; buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64);
forward!(tinjectdata, tagged.injectdata -> isize; buf: *const c_void, len: usize, data: u64, dest: fi_addr_t, tag: u64);
forward!(readmsg, rma.readmsg -> isize; m: *const fi_msg_rma, flags: u64);
forward!(writemsg, rma.writemsg -> isize; m: *const fi_msg_rma, flags: u64);
forward!(rma_inject, rma.inject -> isize; buf: *const c_void, len: usize, dest: fi_addr_t, addr: u64, key: u64);
forward!(
    rma_injectdata, rma.injectdata -> isize;
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64
);
forward!(atomic_writemsg, atomic.writemsg -> isize; m: *const fi_msg_atomic, flags: u64);
forward!(
    atomic_inject, atomic.inject -> isize;
    buf: *const c_void,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32
);
forward!(
    readwritemsg, atomic.readwritemsg -> isize;
    m: *const fi_msg_atomic,
    resultv: *mut fi_ioc,
    result_desc: D,
    result_count: usize,
    flags: u64
);
forward!(
    compwritemsg, atomic.compwritemsg -> isize;
    m: *const fi_msg_atomic,
    comparev: *const fi_ioc,
    compare_desc: D,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: D,
    result_count: usize,
    flags: u64
);
forward!(writevalid, atomic.writevalid -> c_int; dt: u32, op: u32, count: *mut usize);
forward!(readwritevalid, atomic.readwritevalid -> c_int; dt: u32, op: u32, count: *mut usize);
forward!(compwritevalid, atomic.compwritevalid -> c_int; dt: u32, op: u32, count: *mut usize);

// ---- fi_ops_msg

unsafe extern "C" fn recv(e: E, buf: V, len: usize, desc: V, src: fi_addr_t, ctx: V) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = msg(&iov, &mut d, 1, src, ctx, 0);
        // SAFETY: the parent's thunk with the application's arguments.
        unsafe { (a.msg.recvmsg.unwrap())(p, &m, rx(a)) }
    })
}
unsafe extern "C" fn recvv(e: E, iov: *const libc::iovec, desc: D, count: usize, src: fi_addr_t, ctx: V) -> isize {
    with(e, |a, p| {
        let m = msg(iov, desc, count, src, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.msg.recvmsg.unwrap())(p, &m, rx(a)) }
    })
}
unsafe extern "C" fn send(e: E, buf: *const c_void, len: usize, desc: V, dest: fi_addr_t, ctx: V) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = msg(&iov, &mut d, 1, dest, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.msg.sendmsg.unwrap())(p, &m, tx(a)) }
    })
}
unsafe extern "C" fn sendv(e: E, iov: *const libc::iovec, desc: D, count: usize, dest: fi_addr_t, ctx: V) -> isize {
    with(e, |a, p| {
        let m = msg(iov, desc, count, dest, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.msg.sendmsg.unwrap())(p, &m, tx(a)) }
    })
}
unsafe extern "C" fn senddata(
    e: E,
    buf: *const c_void,
    len: usize,
    desc: V,
    data: u64,
    dest: fi_addr_t,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = msg(&iov, &mut d, 1, dest, ctx, data);
        // SAFETY: as in `recv`.
        unsafe { (a.msg.sendmsg.unwrap())(p, &m, tx(a) | FI_REMOTE_CQ_DATA) }
    })
}

static ALIAS_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: core::mem::size_of::<fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    send: Some(send),
    sendv: Some(sendv),
    sendmsg: Some(sendmsg),
    inject: Some(inject),
    senddata: Some(senddata),
    injectdata: Some(injectdata),
};

// ---- fi_ops_tagged

#[allow(clippy::too_many_arguments)]
fn tmsg(
    iov: *const libc::iovec,
    desc: D,
    count: usize,
    addr: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: V,
    data: u64,
) -> fi_msg_tagged {
    fi_msg_tagged {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr,
        tag,
        ignore,
        context: ctx,
        data,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecv(e: E, buf: V, len: usize, desc: V, src: fi_addr_t, tag: u64, ignore: u64, ctx: V) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = tmsg(&iov, &mut d, 1, src, tag, ignore, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.tagged.recvmsg.unwrap())(p, &m, rx(a)) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecvv(
    e: E,
    iov: *const libc::iovec,
    desc: D,
    count: usize,
    src: fi_addr_t,
    tag: u64,
    ignore: u64,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let m = tmsg(iov, desc, count, src, tag, ignore, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.tagged.recvmsg.unwrap())(p, &m, rx(a)) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsend(e: E, buf: *const c_void, len: usize, desc: V, dest: fi_addr_t, tag: u64, ctx: V) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = tmsg(&iov, &mut d, 1, dest, tag, 0, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.tagged.sendmsg.unwrap())(p, &m, tx(a)) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsendv(
    e: E,
    iov: *const libc::iovec,
    desc: D,
    count: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let m = tmsg(iov, desc, count, dest, tag, 0, ctx, 0);
        // SAFETY: as in `recv`.
        unsafe { (a.tagged.sendmsg.unwrap())(p, &m, tx(a)) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsenddata(
    e: E,
    buf: *const c_void,
    len: usize,
    desc: V,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        let m = tmsg(&iov, &mut d, 1, dest, tag, 0, ctx, data);
        // SAFETY: as in `recv`.
        unsafe { (a.tagged.sendmsg.unwrap())(p, &m, tx(a) | FI_REMOTE_CQ_DATA) }
    })
}

static ALIAS_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: core::mem::size_of::<fi_ops_tagged>(),
    recv: Some(trecv),
    recvv: Some(trecvv),
    recvmsg: Some(trecvmsg),
    send: Some(tsend),
    sendv: Some(tsendv),
    sendmsg: Some(tsendmsg),
    inject: Some(tinject),
    senddata: Some(tsenddata),
    injectdata: Some(tinjectdata),
};

// ---- fi_ops_rma

/// An RMA call naming one target segment as its `*msg` form.
#[allow(clippy::too_many_arguments)]
fn rma_call(
    a: &Alias,
    p: E,
    write: bool,
    iov: *const libc::iovec,
    desc: D,
    count: usize,
    len: usize,
    (peer, addr, key): (fi_addr_t, u64, u64),
    ctx: V,
    data: Option<u64>,
) -> isize {
    let r = fi_rma_iov { addr, len, key };
    let m = fi_msg_rma {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr: peer,
        rma_iov: &r,
        rma_iov_count: 1,
        context: ctx,
        data: data.unwrap_or(0),
    };
    let flags = tx(a) | if data.is_some() { FI_REMOTE_CQ_DATA } else { 0 };
    // SAFETY: the parent's thunk with the application's arguments.
    unsafe {
        if write {
            (a.rma.writemsg.unwrap())(p, &m, flags)
        } else {
            (a.rma.readmsg.unwrap())(p, &m, flags)
        }
    }
}

/// `fi_read`/`fi_write` and `fi_readv`/`fi_writev` as the `*msg` call.
macro_rules! rma_one {
    ($name:ident, $write:expr, $buf:ty) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            e: E,
            buf: $buf,
            len: usize,
            desc: V,
            peer: fi_addr_t,
            addr: u64,
            key: u64,
            ctx: V,
        ) -> isize {
            with(e, |a, p| {
                let (iov, mut d) = (one(buf, len), desc);
                rma_call(a, p, $write, &iov, &mut d, 1, len, (peer, addr, key), ctx, None)
            })
        }
    };
}
macro_rules! rma_vec {
    ($name:ident, $write:expr) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $name(
            e: E,
            iov: *const libc::iovec,
            desc: D,
            count: usize,
            peer: fi_addr_t,
            addr: u64,
            key: u64,
            ctx: V,
        ) -> isize {
            with(e, |a, p| {
                // SAFETY: the application's array.
                let len = unsafe { total(iov, count) };
                rma_call(a, p, $write, iov, desc, count, len, (peer, addr, key), ctx, None)
            })
        }
    };
}
rma_one!(read, false, V);
rma_one!(write, true, *const c_void);
rma_vec!(readv, false);
rma_vec!(writev, true);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn writedata(
    e: E,
    buf: *const c_void,
    len: usize,
    desc: V,
    data: u64,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (iov, mut d) = (one(buf, len), desc);
        rma_call(a, p, true, &iov, &mut d, 1, len, (dest, addr, key), ctx, Some(data))
    })
}

static ALIAS_RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: core::mem::size_of::<fi_ops_rma>(),
    read: Some(read),
    readv: Some(readv),
    readmsg: Some(readmsg),
    write: Some(write),
    writev: Some(writev),
    writemsg: Some(writemsg),
    inject: Some(rma_inject),
    writedata: Some(writedata),
    injectdata: Some(rma_injectdata),
};

// ---- fi_ops_atomic

/// An atomic call naming one target segment as a `fi_msg_atomic` (the
/// target segment's count: the operand's elements, or the result's for
/// a read without operands). `then` makes the `*msg` call.
#[allow(clippy::too_many_arguments)]
fn atomic_call(
    iov: *const fi_ioc,
    desc: D,
    count: usize,
    elems: usize,
    (peer, addr, key): (fi_addr_t, u64, u64),
    (dt, op): (u32, u32),
    ctx: V,
    then: impl FnOnce(&fi_msg_atomic) -> isize,
) -> isize {
    let r = fi_rma_ioc {
        addr,
        count: elems,
        key,
    };
    let m = fi_msg_atomic {
        msg_iov: iov,
        desc,
        iov_count: count,
        addr: peer,
        rma_iov: &r,
        rma_iov_count: 1,
        datatype: dt,
        op,
        context: ctx,
        data: 0,
    };
    then(&m)
}

fn ioc(buf: *const c_void, count: usize) -> fi_ioc {
    fi_ioc {
        addr: buf as *mut c_void,
        count,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic_write(
    e: E,
    buf: *const c_void,
    count: usize,
    desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (io, mut d) = (ioc(buf, count), desc);
        atomic_call(&io, &mut d, 1, count, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: the parent's thunk with the application's arguments.
            unsafe { (a.atomic.writemsg.unwrap())(p, m, tx(a)) }
        })
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn atomic_writev(
    e: E,
    iov: *const fi_ioc,
    desc: D,
    count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        // SAFETY: the application's array.
        let n = unsafe { ioc_total(iov, count) };
        atomic_call(iov, desc, count, n, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: as in `atomic_write`.
            unsafe { (a.atomic.writemsg.unwrap())(p, m, tx(a)) }
        })
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn readwrite(
    e: E,
    buf: *const c_void,
    count: usize,
    desc: V,
    result: V,
    result_desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (io, mut d) = (ioc(buf, count), desc);
        let (mut res, mut rd) = (ioc(result, count), result_desc);
        atomic_call(&io, &mut d, 1, count, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: as in `atomic_write`.
            unsafe { (a.atomic.readwritemsg.unwrap())(p, m, &mut res, &mut rd, 1, tx(a)) }
        })
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn readwritev(
    e: E,
    iov: *const fi_ioc,
    desc: D,
    count: usize,
    resultv: *mut fi_ioc,
    result_desc: D,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        // SAFETY: the application's arrays.
        let n = unsafe { ioc_total(iov, count).max(ioc_total(resultv, result_count)) };
        atomic_call(iov, desc, count, n, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: as in `atomic_write`.
            unsafe { (a.atomic.readwritemsg.unwrap())(p, m, resultv, result_desc, result_count, tx(a)) }
        })
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compwrite(
    e: E,
    buf: *const c_void,
    count: usize,
    desc: V,
    compare: *const c_void,
    compare_desc: V,
    result: V,
    result_desc: V,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        let (io, mut d) = (ioc(buf, count), desc);
        let (cmp, mut cd) = (ioc(compare, count), compare_desc);
        let (mut res, mut rd) = (ioc(result, count), result_desc);
        atomic_call(&io, &mut d, 1, count, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: as in `atomic_write`.
            unsafe { (a.atomic.compwritemsg.unwrap())(p, m, &cmp, &mut cd, 1, &mut res, &mut rd, 1, tx(a)) }
        })
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn compwritev(
    e: E,
    iov: *const fi_ioc,
    desc: D,
    count: usize,
    comparev: *const fi_ioc,
    compare_desc: D,
    compare_count: usize,
    resultv: *mut fi_ioc,
    result_desc: D,
    result_count: usize,
    dest: fi_addr_t,
    addr: u64,
    key: u64,
    dt: u32,
    op: u32,
    ctx: V,
) -> isize {
    with(e, |a, p| {
        // SAFETY: the application's array.
        let n = unsafe { ioc_total(iov, count) };
        atomic_call(iov, desc, count, n, (dest, addr, key), (dt, op), ctx, |m| {
            // SAFETY: as in `atomic_write`.
            unsafe {
                (a.atomic.compwritemsg.unwrap())(
                    p,
                    m,
                    comparev,
                    compare_desc,
                    compare_count,
                    resultv,
                    result_desc,
                    result_count,
                    tx(a),
                )
            }
        })
    })
}

static ALIAS_ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: core::mem::size_of::<fi_ops_atomic>(),
    write: Some(atomic_write),
    writev: Some(atomic_writev),
    writemsg: Some(atomic_writemsg),
    inject: Some(atomic_inject),
    readwrite: Some(readwrite),
    readwritev: Some(readwritev),
    readwritemsg: Some(readwritemsg),
    compwrite: Some(compwrite),
    compwritev: Some(compwritev),
    compwritemsg: Some(compwritemsg),
    writevalid: Some(writevalid),
    readwritevalid: Some(readwritevalid),
    compwritevalid: Some(compwritevalid),
};
