//! Shared contexts, the C face (`core/shared_ctx.rs`, docs/shared_ctx.md):
//! `fi_stx_context` returns a `fid_stx` (`FI_CLASS_STX_CTX`), which carries
//! no calls of its own but close; `fi_srx_context` a `fid_ep` of class
//! `FI_CLASS_SRX_CTX` whose receive calls (message and tagged), `fi_cancel`
//! and `fi_rx_size_left` act on the shared queue. Its send, RMA, atomic and
//! CM calls are refused (-FI_ENOSYS; RMA and atomic -FI_EINVAL: not an
//! endpoint). Both are bound to endpoints by `fi_ep_bind` (`fi/ep.rs`, which finds
//! their cores by class through the `FiObject` impls here).

use super::ep_obj::{iov_from_c, iov_recv_single};
use crate::abi::*;
use crate::base::error::Result;
use crate::core::domain::Domain;
use crate::core::ep::{RecvOp, TagMatch};
use crate::core::shared_ctx::{SharedRx, SharedTx};
use crate::fi::attr::{rx_attr_from_c, tx_attr_from_c};
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};

impl FiObject for SharedTx {
    type Header = fid_stx;
    const CLASS: usize = FI_CLASS_STX_CTX;
}

impl FiObject for SharedRx {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_SRX_CTX;
}

/// `fi_stx_context`: a shared transmit context with `attr` (NULL: the
/// defaults).
///
/// # Safety
/// `attr` NULL or a valid `fi_tx_attr`.
pub(crate) unsafe fn open_stx(d: &Obj<Domain>, attr: *const fi_tx_attr, context: *mut c_void) -> Result<*mut fid_stx> {
    // SAFETY: per the contract.
    let a = unsafe { attr.as_ref() }.map(tx_attr_from_c);
    let core = SharedTx::open(&d.core, a.as_ref())?;
    let hdr = fid_stx {
        fid: fid {
            fclass: FI_CLASS_STX_CTX,
            context,
            ops: &STX_FI_OPS,
        },
        ops: &CTX_EP_OPS,
    };
    Ok(Obj::create(hdr, core))
}

/// `fi_srx_context`: a shared receive context with `attr` (NULL: the
/// defaults).
///
/// # Safety
/// `attr` NULL or a valid `fi_rx_attr`.
pub(crate) unsafe fn open_srx(d: &Obj<Domain>, attr: *const fi_rx_attr, context: *mut c_void) -> Result<*mut fid_ep> {
    // SAFETY: per the contract.
    let a = unsafe { attr.as_ref() }.map(rx_attr_from_c);
    let core = SharedRx::open(&d.core, a.as_ref())?;
    let hdr = fid_ep {
        fid: fid {
            fclass: FI_CLASS_SRX_CTX,
            context,
            ops: &SRX_FI_OPS,
        },
        ops: &SRX_EP_OPS,
        cm: &SRX_CM_OPS,
        msg: &SRX_MSG_OPS,
        rma: &super::rma::RMA_OPS,
        tagged: &SRX_TAGGED_OPS,
        atomic: &super::atomic::ATOMIC_OPS,
        collective: &super::ep::stubs::COLLECTIVE_OPS,
    };
    Ok(Obj::create(hdr, core))
}

static STX_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(stx_close),
    bind: Some(noops::no_bind),
    control: Some(ctx_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static SRX_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(srx_close),
    bind: Some(noops::no_bind),
    control: Some(ctx_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// The endpoint calls of a transmit context: none.
static CTX_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(no_cancel),
    getopt: Some(no_getopt),
    setopt: Some(no_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(no_size_left),
    tx_size_left: Some(no_size_left),
};

static SRX_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(srx_cancel),
    getopt: Some(no_getopt),
    setopt: Some(no_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(srx_size_left),
    tx_size_left: Some(no_size_left),
};

static SRX_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(no_setname),
    getname: Some(no_getname),
    getpeer: Some(super::ep::ep_getpeer),
    connect: Some(super::ep::ep_connect),
    listen: Some(super::ep::ep_listen),
    accept: Some(super::ep::ep_accept),
    reject: Some(super::ep::ep_reject),
    shutdown: Some(super::ep::ep_shutdown),
    join: Some(super::ep::ep_join),
};

unsafe extern "C" fn stx_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's context fid.
    unsafe {
        fi::call_close::<SharedTx>("stx close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn srx_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's context fid.
    unsafe {
        fi::call_close::<SharedRx>("srx close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// `fi_enable` of a context: nothing to do (it works once bound to an
/// enabled endpoint); other commands -FI_ENOSYS.
unsafe extern "C" fn ctx_control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    if fi::class_of(f).is_err() {
        return -FI_EINVAL;
    }
    match command {
        FI_ENABLE => 0,
        _ => -FI_ENOSYS,
    }
}

unsafe extern "C" fn srx_cancel(f: *mut fid, context: *mut c_void) -> isize {
    // SAFETY: arguments from fi_cancel().
    unsafe {
        fi::call_obj::<SharedRx, isize>("fi_cancel", f as *const c_void, |o| {
            o.core.cancel(context as usize)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn srx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: arguments from fi_rx_size_left().
    unsafe {
        fi::call_obj::<SharedRx, isize>("fi_rx_size_left", e as *const c_void, |o| {
            Ok(o.core.size_left() as isize)
        })
    }
}

unsafe extern "C" fn no_cancel(_: *mut fid, _: *mut c_void) -> isize {
    -(FI_ENOSYS as isize)
}
unsafe extern "C" fn no_getopt(_: *mut fid, _: c_int, _: c_int, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOPROTOOPT
}
unsafe extern "C" fn no_setopt(_: *mut fid, _: c_int, _: c_int, _: *const c_void, _: usize) -> c_int {
    -FI_ENOPROTOOPT
}
unsafe extern "C" fn no_size_left(_: *mut fid_ep) -> isize {
    -(FI_ENOSYS as isize)
}
unsafe extern "C" fn no_setname(_: *mut fid, _: *mut c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
unsafe extern "C" fn no_getname(_: *mut fid, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOSYS
}

/// Runs a receive on the shared receive context behind `e`.
///
/// # Safety
/// `e` NULL or readable as a `struct fid`; `op` built from the call's
/// arguments inside `f`.
unsafe fn srx_recv(what: &'static str, e: *mut fid_ep, op: impl FnOnce() -> Result<RecvOp>) -> isize {
    // SAFETY: forwarded.
    unsafe {
        fi::call_obj::<SharedRx, isize>(what, e as *const c_void, |o| {
            o.core.post_recv(op()?)?;
            Ok(0)
        })
    }
}

static SRX_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: core::mem::size_of::<fi_ops_msg>(),
    recv: Some(s_recv),
    recvv: Some(s_recvv),
    recvmsg: Some(s_recvmsg),
    send: Some(no_send),
    sendv: Some(no_sendv),
    sendmsg: Some(no_sendmsg),
    inject: Some(no_inject),
    senddata: Some(no_senddata),
    injectdata: Some(no_injectdata),
};

static SRX_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: core::mem::size_of::<fi_ops_tagged>(),
    recv: Some(s_trecv),
    recvv: Some(s_trecvv),
    recvmsg: Some(s_trecvmsg),
    send: Some(no_tsend),
    sendv: Some(no_tsendv),
    sendmsg: Some(no_tsendmsg),
    inject: Some(no_tinject),
    senddata: Some(no_tsenddata),
    injectdata: Some(no_tinjectdata),
};

type V = *mut c_void;
type Iov = *const libc::iovec;
const NOSYS: isize = -(FI_ENOSYS as isize);

unsafe extern "C" fn s_recv(e: *mut fid_ep, buf: V, len: usize, _: V, src: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_recv().
    unsafe {
        srx_recv("fi_recv", e, || {
            Ok(RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize))
        })
    }
}

unsafe extern "C" fn s_recvv(e: *mut fid_ep, iov: Iov, _: *mut V, n: usize, src: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_recvv().
    unsafe {
        srx_recv("fi_recvv", e, || {
            Ok(RecvOp::new(iov_from_c(iov, n)?, src, ctx as usize))
        })
    }
}

/// The receive an `fi_msg` (or `fi_msg_tagged`'s fields) describes.
///
/// # Safety
/// `iov` as [`iov_from_c`] unless `flags` has FI_DISCARD.
unsafe fn recv_of(iov: Iov, n: usize, src: fi_addr_t, tag: Option<TagMatch>, flags: u64, ctx: V) -> Result<RecvOp> {
    let iov = if flags & FI_DISCARD != 0 {
        crate::core::engine::matching::IovList::new()
    } else {
        // SAFETY: forwarded.
        unsafe { iov_from_c(iov, n)? }
    };
    Ok(RecvOp {
        iov,
        src,
        tag,
        flags: Some(flags),
        context: ctx as usize,
    })
}

unsafe extern "C" fn s_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: arguments from fi_recvmsg().
    unsafe {
        srx_recv("fi_recvmsg", e, || {
            let m = fi::read_in(msg)?;
            recv_of(m.msg_iov, m.iov_count, m.addr, None, flags, m.context)
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn s_trecv(
    e: *mut fid_ep,
    buf: V,
    len: usize,
    _: V,
    src: fi_addr_t,
    tag: u64,
    ign: u64,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_trecv().
    unsafe {
        srx_recv("fi_trecv", e, || {
            Ok(RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize).tagged(tag, ign))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn s_trecvv(
    e: *mut fid_ep,
    iov: Iov,
    _: *mut V,
    n: usize,
    src: fi_addr_t,
    tag: u64,
    ign: u64,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_trecvv().
    unsafe {
        srx_recv("fi_trecvv", e, || {
            Ok(RecvOp::new(iov_from_c(iov, n)?, src, ctx as usize).tagged(tag, ign))
        })
    }
}

unsafe extern "C" fn s_trecvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: arguments from fi_trecvmsg().
    unsafe {
        srx_recv("fi_trecvmsg", e, || {
            let m = fi::read_in(msg)?;
            let tag = Some(TagMatch {
                tag: m.tag,
                ignore: m.ignore,
            });
            recv_of(m.msg_iov, m.iov_count, m.addr, tag, flags, m.context)
        })
    }
}

// Sends on a receive context: -FI_ENOSYS.
unsafe extern "C" fn no_send(_: *mut fid_ep, _: *const c_void, _: usize, _: V, _: fi_addr_t, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn no_sendv(_: *mut fid_ep, _: Iov, _: *mut V, _: usize, _: fi_addr_t, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn no_sendmsg(_: *mut fid_ep, _: *const fi_msg, _: u64) -> isize {
    NOSYS
}
unsafe extern "C" fn no_inject(_: *mut fid_ep, _: *const c_void, _: usize, _: fi_addr_t) -> isize {
    NOSYS
}
unsafe extern "C" fn no_senddata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: V,
    _: u64,
    _: fi_addr_t,
    _: V,
) -> isize {
    NOSYS
}
unsafe extern "C" fn no_injectdata(_: *mut fid_ep, _: *const c_void, _: usize, _: u64, _: fi_addr_t) -> isize {
    NOSYS
}
unsafe extern "C" fn no_tsend(_: *mut fid_ep, _: *const c_void, _: usize, _: V, _: fi_addr_t, _: u64, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn no_tsendv(_: *mut fid_ep, _: Iov, _: *mut V, _: usize, _: fi_addr_t, _: u64, _: V) -> isize {
    NOSYS
}
unsafe extern "C" fn no_tsendmsg(_: *mut fid_ep, _: *const fi_msg_tagged, _: u64) -> isize {
    NOSYS
}
unsafe extern "C" fn no_tinject(_: *mut fid_ep, _: *const c_void, _: usize, _: fi_addr_t, _: u64) -> isize {
    NOSYS
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn no_tsenddata(
    _: *mut fid_ep,
    _: *const c_void,
    _: usize,
    _: V,
    _: u64,
    _: fi_addr_t,
    _: u64,
    _: V,
) -> isize {
    NOSYS
}
unsafe extern "C" fn no_tinjectdata(_: *mut fid_ep, _: *const c_void, _: usize, _: u64, _: fi_addr_t, _: u64) -> isize {
    NOSYS
}
