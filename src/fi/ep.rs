//! Endpoints, the C face: the `fid_ep` with all of its operation tables,
//! and the thunks that turn each libfabric call into the endpoint core
//! (`core/ep.rs`): iovecs into `IovList`s, `fi_msg`/`fi_msg_tagged` into
//! [`SendOp`]/[`RecvOp`], option values and names out of and into C memory.
//! Connection-oriented endpoints (`connected.rs`) reuse most of these
//! thunks with their own CM operations.
//!
//! The data calls (`fi_send`, `fi_trecv` and the rest of the message and
//! tagged tables) are in `ep/msg.rs`; the collective table, every slot
//! -FI_ENOSYS, in `ep/stubs.rs`.

mod msg;
pub(crate) mod stubs;

use super::ep_obj::with_ep;
use super::ep_obj::Ep;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::connected::ConnectedLink;
use crate::core::domain::Domain;
use crate::core::engine::Inner;
use crate::core::ep::{rdm_engine, BindTarget, Direction, EpOpt};
use crate::core::shared_ctx::{SharedRx, SharedTx};
use crate::fi::{self, noops, Obj};
use crate::transport::addr::Addr;
use core::ffi::{c_int, c_void};
pub(crate) use msg::{EP_MSG_OPS, EP_TAGGED_OPS};
use std::sync::Arc;

/// The message and tagged operation tables an endpoint gets (chosen by
/// `fi/domain.rs`: these or `fi/prefix.rs`'s).
pub(crate) type MsgTables = (&'static fi_ops_msg, &'static fi_ops_tagged);

/// `fi_endpoint` for an FI_EP_RDM endpoint (`fi/connected.rs` opens
/// FI_EP_MSG ones).
pub(crate) fn open(d: &Obj<Domain>, info: &Info, context: *mut c_void, tables: MsgTables) -> Result<*mut fid_ep> {
    let inner = rdm_engine(&d.core, info)?;
    create_rdm(d, info, inner, context, tables)
}

/// The endpoint object around `inner` with the RDM endpoint's tables
/// (datagram endpoints too, `fi/dgram.rs`).
pub(crate) fn create_rdm(
    d: &Obj<Domain>,
    info: &Info,
    inner: Inner,
    context: *mut c_void,
    tables: MsgTables,
) -> Result<*mut fid_ep> {
    let addr = inner.addr();
    create(d, info, inner, addr, None, context, (&EP_OPS, &EP_CM_OPS), tables)
}

/// Opens the endpoint object around `inner` for either endpoint type (the
/// core, registered with the domain's progress engine) with the type's
/// endpoint and CM operations.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create(
    d: &Obj<Domain>,
    info: &Info,
    inner: Inner,
    addr: Addr,
    msg: Option<Arc<ConnectedLink>>,
    context: *mut c_void,
    (ops, cm): (&'static fi_ops_ep, &'static fi_ops_cm),
    (msg_ops, tagged_ops): MsgTables,
) -> Result<*mut fid_ep> {
    let core = Ep::new(&d.core, info, inner, addr, msg)?;
    let hdr = fid_ep {
        fid: fid {
            fclass: FI_CLASS_EP,
            context,
            ops: &EP_FI_OPS,
        },
        ops,
        cm,
        msg: msg_ops,
        rma: &super::rma::RMA_OPS,
        tagged: tagged_ops,
        atomic: &super::atomic::ATOMIC_OPS,
        collective: &stubs::COLLECTIVE_OPS,
    };
    let ep = Obj::create_counting(hdr, core.clone(), fi::counts_every_call(&d.core));
    core.inner.lock().set_ep_fid(ep as usize);
    Ok(ep)
}

static EP_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_rx_size_left),
    tx_size_left: Some(ep_tx_size_left),
};

static EP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(ep_setname),
    getname: Some(ep_getname),
    getpeer: Some(ep_getpeer),
    connect: Some(ep_connect),
    listen: Some(ep_listen),
    accept: Some(ep_accept),
    reject: Some(ep_reject),
    shutdown: Some(ep_shutdown),
    join: Some(ep_join),
};

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's endpoint fid.
    unsafe {
        fi::call_close::<Ep>("ep close", f as *const c_void, |o| {
            o.core.close()?;
            super::trigger::forget_ep(f as usize);
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// The core behind the fid `fi_ep_bind` names (any pointer: one that is
/// not a live rustfab AV, CQ, counter or EQ is `-FI_EINVAL`).
pub(crate) fn bind_target(bfid: *mut fid) -> Result<BindTarget> {
    Ok(match fi::class_of(bfid)? {
        FI_CLASS_AV => BindTarget::Av(fi::core_of(bfid)?),
        FI_CLASS_CQ => BindTarget::Cq(fi::cq::from_fid(bfid)?),
        FI_CLASS_CNTR => BindTarget::Cntr(fi::cntr::from_fid(bfid)?),
        FI_CLASS_EQ => BindTarget::Eq(fi::core_of(bfid)?),
        _ => return Err(Error::INVAL),
    })
}

unsafe extern "C" fn ep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_ep_bind().
    unsafe {
        with_ep("fi_ep_bind", f as *const c_void, |o| {
            // Shared contexts (fi/shared_ctx.rs); for the others `bfid`
            // is looked up only after the enabled check.
            match fi::class_of(bfid) {
                Ok(FI_CLASS_SRX_CTX) => o.core.bind_srx(flags, fi::core_of::<SharedRx>(bfid)?)?,
                Ok(FI_CLASS_STX_CTX) => o.core.bind_stx(flags, fi::core_of::<SharedTx>(bfid)?)?,
                _ => o.core.bind(flags, || bind_target(bfid))?,
            }
            Ok(0)
        })
    }
}

pub(crate) unsafe extern "C" fn ep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control()/fi_enable().
    unsafe {
        with_ep("ep control", f as *const c_void, |o| match command {
            FI_ENABLE => {
                o.core.enable()?;
                Ok(0)
            }
            FI_GETOPSFLAG | FI_SETOPSFLAG => {
                // Both take a `uint64_t *` naming the direction.
                if arg.is_null() {
                    return Err(Error::INVAL);
                }
                let flags = arg as *mut u64;
                let v = *flags;
                let dir = Direction::of_flags(v)?;
                if command == FI_GETOPSFLAG {
                    *flags = o.core.ops_flags(dir);
                } else {
                    o.core.set_ops_flags(dir, v & !(FI_TRANSMIT | FI_RECV));
                }
                Ok(0)
            }
            FI_ALIAS => super::alias::open(o, arg as *mut fi_alias),
            _ => Err(Error::NOSYS),
        })
    }
}

pub(crate) unsafe extern "C" fn ep_cancel(f: *mut fid, context: *mut c_void) -> isize {
    // SAFETY: arguments from fi_cancel().
    unsafe {
        with_ep("fi_cancel", f as *const c_void, |o| {
            o.core.cancel(context as usize)?;
            Ok(0)
        })
    }
}

pub(crate) unsafe extern "C" fn ep_getopt(
    f: *mut fid,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: *mut usize,
) -> c_int {
    // SAFETY: arguments from fi_getopt().
    unsafe {
        with_ep("fi_getopt", f as *const c_void, |o| {
            if level != FI_OPT_ENDPOINT {
                return Err(Error::NOPROTOOPT);
            }
            if val.is_null() || len.is_null() {
                return Err(Error::INVAL);
            }
            let opt = EpOpt::from_name(name)?;
            // Every endpoint option is a size_t.
            if *len < core::mem::size_of::<usize>() {
                *len = core::mem::size_of::<usize>();
                return Err(Error::TOOSMALL);
            }
            *(val as *mut usize) = o.core.getopt(opt)?;
            *len = core::mem::size_of::<usize>();
            Ok(0)
        })
    }
}

pub(crate) unsafe extern "C" fn ep_setopt(
    f: *mut fid,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: arguments from fi_setopt().
    unsafe {
        with_ep("fi_setopt", f as *const c_void, |o| {
            if level != FI_OPT_ENDPOINT {
                return Err(Error::NOPROTOOPT);
            }
            if val.is_null() {
                return Err(Error::INVAL);
            }
            let opt = EpOpt::from_name(name)?;
            if len != core::mem::size_of::<usize>() {
                return Err(Error::INVAL);
            }
            o.core.setopt(opt, *(val as *const usize))?;
            Ok(0)
        })
    }
}

/// Scalable-endpoint contexts are not offered (max_ep_tx/rx_ctx = 1).
pub(crate) unsafe extern "C" fn ep_tx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_tx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

pub(crate) unsafe extern "C" fn ep_rx_ctx(
    _: *mut fid_ep,
    _: c_int,
    _: *mut fi_rx_attr,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

pub(crate) unsafe extern "C" fn ep_rx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: argument from fi_rx_size_left().
    unsafe {
        with_ep("fi_rx_size_left", e as *const c_void, |o| {
            Ok(o.core.rx_size_left()? as isize)
        })
    }
}

pub(crate) unsafe extern "C" fn ep_tx_size_left(e: *mut fid_ep) -> isize {
    // SAFETY: argument from fi_tx_size_left().
    unsafe {
        with_ep("fi_tx_size_left", e as *const c_void, |o| {
            Ok(o.core.tx_size_left()? as isize)
        })
    }
}

/// fi_cm(3) getname: copy up to `*addrlen`, always report the real size,
/// -FI_ETOOSMALL when it did not fit.
unsafe extern "C" fn ep_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_ep("fi_getname", f as *const c_void, |o| {
            super::ep_obj::write_name(&o.core.addr().to_bytes(), addr, addrlen)
        })
    }
}

/// fi_cm(3) setname of an RDM endpoint: before fi_enable, moves it to
/// `addr` exactly (-FI_EADDRINUSE if taken), never elsewhere.
unsafe extern "C" fn ep_setname(f: *mut fid, addr: *mut c_void, addrlen: usize) -> c_int {
    // SAFETY: arguments from fi_setname().
    unsafe {
        with_ep("fi_setname", f as *const c_void, |o| {
            if addr.is_null() || addrlen == 0 {
                return Err(Error::INVAL);
            }
            let bytes = core::slice::from_raw_parts(addr as *const u8, addrlen);
            if o.core.inner.lock().config().dgram {
                o.core.set_name_with(bytes, crate::core::dgram::dgram_port)?;
            } else {
                o.core.set_name(bytes)?;
            }
            Ok(0)
        })
    }
}

/// Connection management applies to FI_EP_MSG endpoints only.
pub(crate) unsafe extern "C" fn ep_getpeer(_: *mut fid_ep, _: *mut c_void, _: *mut usize) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_connect(_: *mut fid_ep, _: *const c_void, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_listen(_: *mut fid_pep) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_accept(_: *mut fid_ep, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_reject(_: *mut fid_pep, _: *mut fid, _: *const c_void, _: usize) -> c_int {
    -FI_ENOSYS
}
pub(crate) unsafe extern "C" fn ep_shutdown(_: *mut fid_ep, _: u64) -> c_int {
    -FI_ENOSYS
}
/// Multicast is not offered.
pub(crate) unsafe extern "C" fn ep_join(
    _: *mut fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut fid_mc,
    _: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}
