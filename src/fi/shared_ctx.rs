//! Shared contexts, the C face (`core/shared_ctx.rs`, docs/shared_ctx.md):
//! `fi_stx_context` returns a `fid_stx` (`FI_CLASS_STX_CTX`), which carries
//! no calls of its own but close; `fi_srx_context` a `fid_ep` of class
//! `FI_CLASS_SRX_CTX` whose receive calls (message and tagged: the tables
//! of `fi/scalable.rs`'s contexts, which post on the shared queue for this
//! class), `fi_cancel` and `fi_rx_size_left` act on the shared queue. Its
//! send, RMA, atomic and CM calls are refused (-FI_ENOSYS; RMA and atomic
//! -FI_EINVAL: not an endpoint). Both are bound to endpoints by `fi_ep_bind` (`fi/ep.rs`, which finds
//! their cores by class through the `FiObject` impls here).

use crate::abi::*;
use crate::base::error::Result;
use crate::core::domain::Domain;
use crate::core::shared_ctx::{SharedRx, SharedTx};
use crate::fi::attr::{rx_attr_from_c, tx_attr_from_c};
use crate::fi::scalable::{no_getopt, no_setopt, no_size_left, CTX_CM_OPS, CTX_MSG_OPS, CTX_TAGGED_OPS, TX_OPS};
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
        ops: &TX_OPS,
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
        cm: &CTX_CM_OPS,
        msg: &CTX_MSG_OPS,
        rma: &super::rma::RMA_OPS,
        tagged: &CTX_TAGGED_OPS,
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
