//! Scalable endpoints, the C face (`core/scalable.rs`): the `fid_ep` of
//! class `FI_CLASS_SEP` that `fi_scalable_ep` returns (bind an AV, enable,
//! getname, open contexts, close) and its transmit and receive contexts
//! (`FI_CLASS_TX_CTX`, `FI_CLASS_RX_CTX`: bind a CQ and a counter,
//! enable, the message and tagged calls of their direction, cancel,
//! close). The endpoint itself carries no data calls (-FI_ENOSYS), nor do
//! contexts carry those of the other direction; RMA and atomic calls on a
//! context are refused (-FI_EINVAL: not an endpoint).

use super::ep_obj::{iov_from_c, iov_recv_single, iov_single};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::connected::ConnectedLink;
use crate::core::domain::Domain;
use crate::core::ep::{RecvOp, SendMode, SendOp, TagMatch};
use crate::core::scalable::{Context, Scalable};
use crate::core::shared_ctx::SharedRx;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

pub(crate) type Sep = Scalable<ConnectedLink>;
type Ctx = Context<ConnectedLink>;

impl FiObject for Sep {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_SEP;
}

/// A transmit context as C holds it.
pub(crate) struct TxCtx(Arc<Ctx>);
/// A receive context as C holds it.
pub(crate) struct RxCtx(Arc<Ctx>);

impl FiObject for TxCtx {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_TX_CTX;
}
impl FiObject for RxCtx {
    type Header = fid_ep;
    const CLASS: usize = FI_CLASS_RX_CTX;
}

/// The context core behind either class, and its attributes as
/// `fi_tx_context`/`fi_rx_context` report them.
trait CtxObj: FiObject<Header = fid_ep> {
    type Attr;
    fn ctx(&self) -> &Ctx;
    fn attr(sep: &Sep) -> Self::Attr;
}
impl CtxObj for TxCtx {
    type Attr = fi_tx_attr;
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn attr(sep: &Sep) -> fi_tx_attr {
        super::attr::tx_attr_c(&sep.tx_attr)
    }
}
impl CtxObj for RxCtx {
    type Attr = fi_rx_attr;
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn attr(sep: &Sep) -> fi_rx_attr {
        super::attr::rx_attr_c(&sep.rx_attr)
    }
}

/// `fi_scalable_ep`.
pub(crate) fn open(d: &Obj<Domain>, info: &Info, context: *mut c_void) -> Result<*mut fid_ep> {
    if info
        .ep
        .as_ref()
        .is_some_and(|e| e.ep_type != FI_EP_RDM && e.ep_type != FI_EP_UNSPEC)
    {
        return Err(Error::INVAL);
    }
    let core = Sep::open(&d.core, info)?;
    let hdr = fid_ep {
        fid: fid {
            fclass: FI_CLASS_SEP,
            context,
            ops: &SEP_FI_OPS,
        },
        ops: &SEP_OPS,
        cm: &SEP_CM_OPS,
        msg: &CTX_MSG_OPS,
        rma: &super::rma::RMA_OPS,
        tagged: &CTX_TAGGED_OPS,
        atomic: &super::atomic::ATOMIC_OPS,
        collective: &super::ep::stubs::COLLECTIVE_OPS,
    };
    Ok(Obj::create(hdr, core))
}

/// Runs `f` on the scalable endpoint behind a C pointer.
///
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
unsafe fn with_sep<R: fi::FfiRet>(what: &'static str, p: *const c_void, f: impl FnOnce(&Obj<Sep>) -> Result<R>) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<Sep, R>(what, p, f) }
}

/// Runs `f` on the context behind a C pointer.
///
/// # Safety
/// As [`with_sep`].
unsafe fn with_ctx<W: CtxObj, R: fi::FfiRet>(
    what: &'static str,
    p: *const c_void,
    f: impl FnOnce(&Ctx) -> Result<R>,
) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<W, R>(what, p, |o| f(o.core.ctx())) }
}

static SEP_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(sep_close),
    bind: Some(sep_bind),
    control: Some(sep_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static SEP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(no_cancel),
    getopt: Some(no_getopt),
    setopt: Some(no_setopt),
    tx_ctx: Some(sep_tx_ctx),
    rx_ctx: Some(sep_rx_ctx),
    rx_size_left: Some(no_size_left),
    tx_size_left: Some(no_size_left),
};

static SEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(no_setname),
    getname: Some(sep_getname),
    getpeer: Some(super::ep::ep_getpeer),
    connect: Some(super::ep::ep_connect),
    listen: Some(super::ep::ep_listen),
    accept: Some(super::ep::ep_accept),
    reject: Some(super::ep::ep_reject),
    shutdown: Some(super::ep::ep_shutdown),
    join: Some(super::ep::ep_join),
};

unsafe extern "C" fn sep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's scalable endpoint fid.
    unsafe {
        fi::call_close::<Sep>("sep close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn sep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_scalable_ep_bind().
    unsafe {
        with_sep("fi_scalable_ep_bind", f as *const c_void, |o| {
            o.core.bind(flags, || super::ep::bind_target(bfid))?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn sep_control(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control()/fi_enable().
    unsafe {
        with_sep("sep control", f as *const c_void, |o| match command {
            FI_ENABLE => {
                o.core.ep.enable()?;
                Ok(0)
            }
            _ => Err(Error::NOSYS),
        })
    }
}

/// fi_cm(3) getname: the endpoint's one address (as an endpoint's).
unsafe extern "C" fn sep_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_sep("fi_getname", f as *const c_void, |o| {
            super::ep_obj::write_name(&o.core.ep.addr().to_bytes(), addr, addrlen)
        })
    }
}

/// Opens context `index` of the endpoint behind `f` (`rx`: a receive
/// context) as a C object of class `W`; the attributes it got are written
/// to `attr` when it is not NULL ("Providers will return the actual
/// attributes assigned to the context through the attr parameter, if
/// provided": the endpoint's; other ones asked for are not applied).
///
/// # Safety
/// Arguments from fi_tx_context()/fi_rx_context().
unsafe fn open_ctx<W: CtxObj>(
    f: *mut fid_ep,
    index: c_int,
    attr: *mut W::Attr,
    out: *mut *mut fid_ep,
    context: *mut c_void,
    wrap: fn(Arc<Ctx>) -> W,
) -> c_int {
    let (rx, what) = if W::CLASS == FI_CLASS_RX_CTX {
        (true, "fi_rx_context")
    } else {
        (false, "fi_tx_context")
    };
    // SAFETY: forwarded.
    unsafe {
        with_sep(what, f as *const c_void, |o| {
            if out.is_null() {
                return Err(Error::INVAL);
            }
            if !attr.is_null() {
                fi::write_out(attr, W::attr(&o.core))?;
            }
            let c = o.core.context(rx, index)?;
            let hdr = fid_ep {
                fid: fid {
                    fclass: W::CLASS,
                    context,
                    ops: if rx { &RX_FI_OPS } else { &TX_FI_OPS },
                },
                ops: if rx { &RX_OPS } else { &TX_OPS },
                cm: &CTX_CM_OPS,
                msg: &CTX_MSG_OPS,
                rma: &super::rma::RMA_OPS,
                tagged: &CTX_TAGGED_OPS,
                atomic: &super::atomic::ATOMIC_OPS,
                collective: &super::ep::stubs::COLLECTIVE_OPS,
            };
            let p = Obj::create(hdr, Arc::new(wrap(c)));
            fi::write_out(out, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn sep_tx_ctx(
    f: *mut fid_ep,
    index: c_int,
    attr: *mut fi_tx_attr,
    out: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments from fi_tx_context().
    unsafe { open_ctx::<TxCtx>(f, index, attr, out, context, TxCtx) }
}

unsafe extern "C" fn sep_rx_ctx(
    f: *mut fid_ep,
    index: c_int,
    attr: *mut fi_rx_attr,
    out: *mut *mut fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments from fi_rx_context().
    unsafe { open_ctx::<RxCtx>(f, index, attr, out, context, RxCtx) }
}

pub(crate) unsafe extern "C" fn no_cancel(_: *mut fid, _: *mut c_void) -> isize {
    -(FI_ENOSYS as isize)
}
pub(crate) unsafe extern "C" fn no_getopt(_: *mut fid, _: c_int, _: c_int, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOPROTOOPT
}
pub(crate) unsafe extern "C" fn no_setopt(_: *mut fid, _: c_int, _: c_int, _: *const c_void, _: usize) -> c_int {
    -FI_ENOPROTOOPT
}
pub(crate) unsafe extern "C" fn no_size_left(_: *mut fid_ep) -> isize {
    -(FI_ENOSYS as isize)
}
pub(crate) unsafe extern "C" fn no_setname(_: *mut fid, _: *mut c_void, _: usize) -> c_int {
    -FI_ENOSYS
}

// ---- contexts ----

static TX_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(ctx_close::<TxCtx>),
    bind: Some(ctx_bind::<TxCtx>),
    control: Some(ctx_control::<TxCtx>),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static RX_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(ctx_close::<RxCtx>),
    bind: Some(ctx_bind::<RxCtx>),
    control: Some(ctx_control::<RxCtx>),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// The endpoint calls of a transmit context (a scalable endpoint's, and a
/// shared one, `fi/shared_ctx.rs`): none.
pub(crate) static TX_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(no_cancel),
    getopt: Some(no_getopt),
    setopt: Some(no_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(no_size_left),
    tx_size_left: Some(no_size_left),
};

static RX_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(rx_cancel),
    getopt: Some(no_getopt),
    setopt: Some(no_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(no_size_left),
    tx_size_left: Some(no_size_left),
};

/// Connection management: none on contexts, scalable or shared (-FI_ENOSYS,
/// as on RDM endpoints).
pub(crate) static CTX_CM_OPS: fi_ops_cm = fi_ops_cm {
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

pub(crate) unsafe extern "C" fn no_getname(_: *mut fid, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn ctx_close<W: CtxObj>(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's context fid.
    unsafe {
        fi::call_close::<W>("context close", f as *const c_void, |o| {
            o.core.ctx().close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn ctx_bind<W: CtxObj>(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_ep_bind().
    unsafe {
        with_ctx::<W, c_int>("fi_ep_bind", f as *const c_void, |c| {
            c.bind(flags, || super::ep::bind_target(bfid))?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn ctx_control<W: CtxObj>(f: *mut fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control()/fi_enable().
    unsafe {
        with_ctx::<W, c_int>("context control", f as *const c_void, |c| match command {
            FI_ENABLE => {
                c.enable()?;
                Ok(0)
            }
            _ => Err(Error::NOSYS),
        })
    }
}

unsafe extern "C" fn rx_cancel(f: *mut fid, context: *mut c_void) -> isize {
    // SAFETY: arguments from fi_cancel().
    unsafe {
        with_ctx::<RxCtx, isize>("fi_cancel", f as *const c_void, |c| {
            c.cancel(context as usize)?;
            Ok(0)
        })
    }
}

/// Runs a send on the context behind `e` (a transmit context; a receive
/// context refuses it).
///
/// # Safety
/// `e` NULL or readable as a `struct fid`; `op` built from the call's
/// arguments inside `f`.
unsafe fn ctx_send(what: &'static str, e: *mut fid_ep, op: impl FnOnce() -> Result<SendOp>) -> isize {
    // SAFETY: forwarded.
    unsafe {
        if matches!(
            fi::class_of(e as *const fid),
            Ok(FI_CLASS_RX_CTX | FI_CLASS_SEP | FI_CLASS_SRX_CTX)
        ) {
            return -(FI_ENOSYS as isize);
        }
        with_ctx::<TxCtx, isize>(what, e as *const c_void, |c| {
            c.post_send(op()?)?;
            Ok(0)
        })
    }
}

/// Runs a receive on the context behind `e` (as [`ctx_send`]).
///
/// # Safety
/// As [`ctx_send`].
unsafe fn ctx_recv(what: &'static str, e: *mut fid_ep, op: impl FnOnce() -> Result<RecvOp>) -> isize {
    // SAFETY: forwarded.
    unsafe {
        match fi::class_of(e as *const fid) {
            Ok(FI_CLASS_TX_CTX | FI_CLASS_SEP) => return -(FI_ENOSYS as isize),
            // A shared receive context (fi/shared_ctx.rs) has these tables too.
            Ok(FI_CLASS_SRX_CTX) => {
                return fi::call_obj::<SharedRx, isize>(what, e as *const c_void, |o| {
                    o.core.post_recv(op()?)?;
                    Ok(0)
                })
            }
            _ => {}
        }
        with_ctx::<RxCtx, isize>(what, e as *const c_void, |c| {
            c.post_recv(op()?)?;
            Ok(0)
        })
    }
}

/// The message calls of both context classes (each refuses the other
/// direction's), of the scalable endpoint (which refuses both) and of a
/// shared receive context (receives only).
pub(crate) static CTX_MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: core::mem::size_of::<fi_ops_msg>(),
    recv: Some(c_recv),
    recvv: Some(c_recvv),
    recvmsg: Some(c_recvmsg),
    send: Some(c_send),
    sendv: Some(c_sendv),
    sendmsg: Some(c_sendmsg),
    inject: Some(c_inject),
    senddata: Some(c_senddata),
    injectdata: Some(c_injectdata),
};

pub(crate) static CTX_TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: core::mem::size_of::<fi_ops_tagged>(),
    recv: Some(c_trecv),
    recvv: Some(c_trecvv),
    recvmsg: Some(c_trecvmsg),
    send: Some(c_tsend),
    sendv: Some(c_tsendv),
    sendmsg: Some(c_tsendmsg),
    inject: Some(c_tinject),
    senddata: Some(c_tsenddata),
    injectdata: Some(c_tinjectdata),
};

type V = *mut c_void;
type Iov = *const libc::iovec;

unsafe extern "C" fn c_recv(e: *mut fid_ep, buf: V, len: usize, _: V, src: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_recv().
    unsafe {
        ctx_recv("fi_recv", e, || {
            Ok(RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize))
        })
    }
}

unsafe extern "C" fn c_recvv(e: *mut fid_ep, iov: Iov, _: *mut V, n: usize, src: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_recvv().
    unsafe {
        ctx_recv("fi_recvv", e, || {
            Ok(RecvOp::new(iov_from_c(iov, n)?, src, ctx as usize))
        })
    }
}

/// The receive an `fi_msg` (or `fi_msg_tagged`'s fields) describes.
///
/// # Safety
/// `iov` as [`iov_from_c`] unless `flags` has FI_DISCARD.
pub(crate) unsafe fn recv_of(
    iov: Iov,
    n: usize,
    src: fi_addr_t,
    tag: Option<TagMatch>,
    flags: u64,
    ctx: V,
) -> Result<RecvOp> {
    Ok(RecvOp {
        iov: if flags & FI_DISCARD != 0 {
            crate::core::engine::matching::IovList::new()
        } else {
            // SAFETY: forwarded.
            unsafe { iov_from_c(iov, n)? }
        },
        src,
        tag,
        flags: Some(flags),
        context: ctx as usize,
    })
}

unsafe extern "C" fn c_recvmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: arguments from fi_recvmsg().
    unsafe {
        ctx_recv("fi_recvmsg", e, || {
            let m = fi::read_in(msg)?;
            recv_of(m.msg_iov, m.iov_count, m.addr, None, flags, m.context)
        })
    }
}

unsafe extern "C" fn c_send(e: *mut fid_ep, buf: *const c_void, len: usize, _: V, dest: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_send().
    unsafe {
        ctx_send("fi_send", e, || {
            Ok(SendOp::post(iov_single(buf, len)?, dest, ctx as usize))
        })
    }
}

unsafe extern "C" fn c_sendv(e: *mut fid_ep, iov: Iov, _: *mut V, n: usize, dest: fi_addr_t, ctx: V) -> isize {
    // SAFETY: arguments from fi_sendv().
    unsafe {
        ctx_send("fi_sendv", e, || {
            Ok(SendOp::post(iov_from_c(iov, n)?, dest, ctx as usize))
        })
    }
}

/// The send an `fi_msg` (or `fi_msg_tagged`'s fields) describes.
///
/// # Safety
/// `iov` as [`iov_from_c`].
unsafe fn send_of(iov: Iov, n: usize, dest: fi_addr_t, data: u64, flags: u64, ctx: V) -> Result<SendOp> {
    Ok(SendOp {
        // SAFETY: forwarded.
        iov: unsafe { iov_from_c(iov, n)? },
        dest,
        tag: None,
        data: (flags & FI_REMOTE_CQ_DATA != 0).then_some(data),
        flags: Some(flags),
        context: ctx as usize,
        mode: SendMode::Post,
    })
}

unsafe extern "C" fn c_sendmsg(e: *mut fid_ep, msg: *const fi_msg, flags: u64) -> isize {
    // SAFETY: arguments from fi_sendmsg().
    unsafe {
        ctx_send("fi_sendmsg", e, || {
            let m = fi::read_in(msg)?;
            send_of(m.msg_iov, m.iov_count, m.addr, m.data, flags, m.context)
        })
    }
}

unsafe extern "C" fn c_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: arguments from fi_inject().
    unsafe { ctx_send("fi_inject", e, || Ok(SendOp::inject(iov_single(buf, len)?, dest))) }
}

unsafe extern "C" fn c_senddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _: V,
    data: u64,
    dest: fi_addr_t,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_senddata().
    unsafe {
        ctx_send("fi_senddata", e, || {
            Ok(SendOp::post(iov_single(buf, len)?, dest, ctx as usize).with_data(data))
        })
    }
}

unsafe extern "C" fn c_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t) -> isize {
    // SAFETY: arguments from fi_injectdata().
    unsafe {
        ctx_send("fi_injectdata", e, || {
            Ok(SendOp::inject(iov_single(buf, len)?, dest).with_data(data))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_trecv(
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
        ctx_recv("fi_trecv", e, || {
            Ok(RecvOp::new(iov_recv_single(buf, len)?, src, ctx as usize).tagged(tag, ign))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_trecvv(
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
        ctx_recv("fi_trecvv", e, || {
            Ok(RecvOp::new(iov_from_c(iov, n)?, src, ctx as usize).tagged(tag, ign))
        })
    }
}

unsafe extern "C" fn c_trecvmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: arguments from fi_trecvmsg().
    unsafe {
        ctx_recv("fi_trecvmsg", e, || {
            let m = fi::read_in(msg)?;
            let tag = Some(TagMatch {
                tag: m.tag,
                ignore: m.ignore,
            });
            recv_of(m.msg_iov, m.iov_count, m.addr, tag, flags, m.context)
        })
    }
}

unsafe extern "C" fn c_tsend(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _: V,
    dest: fi_addr_t,
    tag: u64,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_tsend().
    unsafe {
        ctx_send("fi_tsend", e, || {
            Ok(SendOp::post(iov_single(buf, len)?, dest, ctx as usize).tagged(tag))
        })
    }
}

unsafe extern "C" fn c_tsendv(
    e: *mut fid_ep,
    iov: Iov,
    _: *mut V,
    n: usize,
    dest: fi_addr_t,
    tag: u64,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_tsendv().
    unsafe {
        ctx_send("fi_tsendv", e, || {
            Ok(SendOp::post(iov_from_c(iov, n)?, dest, ctx as usize).tagged(tag))
        })
    }
}

unsafe extern "C" fn c_tsendmsg(e: *mut fid_ep, msg: *const fi_msg_tagged, flags: u64) -> isize {
    // SAFETY: arguments from fi_tsendmsg().
    unsafe {
        ctx_send("fi_tsendmsg", e, || {
            let m = fi::read_in(msg)?;
            let op = send_of(m.msg_iov, m.iov_count, m.addr, m.data, flags, m.context)?;
            Ok(SendOp { tag: Some(m.tag), ..op })
        })
    }
}

unsafe extern "C" fn c_tinject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    // SAFETY: arguments from fi_tinject().
    unsafe {
        ctx_send("fi_tinject", e, || {
            Ok(SendOp::inject(iov_single(buf, len)?, dest).tagged(tag))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn c_tsenddata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    _: V,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
    ctx: V,
) -> isize {
    // SAFETY: arguments from fi_tsenddata().
    unsafe {
        ctx_send("fi_tsenddata", e, || {
            Ok(SendOp::post(iov_single(buf, len)?, dest, ctx as usize)
                .tagged(tag)
                .with_data(data))
        })
    }
}

unsafe extern "C" fn c_tinjectdata(
    e: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: fi_addr_t,
    tag: u64,
) -> isize {
    // SAFETY: arguments from fi_tinjectdata().
    unsafe {
        ctx_send("fi_tinjectdata", e, || {
            Ok(SendOp::inject(iov_single(buf, len)?, dest).tagged(tag).with_data(data))
        })
    }
}
