//! Passive endpoints (`fi_passive_ep`, `fid_pep`) and connection requests
//! (`FI_CLASS_CONNREQ` handles): the C face of the listening side of
//! `FI_EP_MSG`. The safe core is [`crate::core::pep`] (the bound socket,
//! the transport's listener, the EQ, progress); this file holds the ops
//! tables and thunks, and what needs C memory: the `FI_CONNREQ` event
//! ([`announce`]) with an `fi_info` the application frees — a copy of the
//! info the pep was opened with (it already carries libfabric's
//! `prov_name`, docs/abi.md §1.9), `dest_addr` = the client's address,
//! `src_addr` = ours on that connection, `handle` = a [`ConnReq`].
//!
//! Connection requests: `fi_endpoint` with the request's info takes its
//! connection (the server endpoint, then `fi_accept`); `fi_reject` writes
//! REJECT with the application's data and closes it. Either consumes the
//! handle; a second use is `-FI_EINVAL`. The handle's memory outlives its
//! use (error paths commonly call `fi_reject` after a failed accept):
//! consumed handles are freed only after [`RETIRED_MAX`] later ones were
//! consumed. A handle never consumed keeps its connection open until it is
//! (`fi_close` on the handle also consumes it); an unread `FI_CONNREQ`
//! event dropped with its EQ consumes it.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::connected::CM_DATA_MAX;
use crate::core::eq::Eq;
use crate::core::fabric::Fabric;
use crate::core::pep::{ConnReq, ConnRequest, Pep};
use crate::core::users::HasUsers;
use crate::fi::{self, noops, FiObject, Obj};
use crate::transport::addr::Addr;
use core::ffi::{c_int, c_void};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// Consumed connection-request handles kept allocated (see the module
/// documentation).
pub(crate) const RETIRED_MAX: usize = 256;

impl FiObject for Pep {
    type Header = fid_pep;
    const CLASS: usize = FI_CLASS_PEP;
}

impl FiObject for ConnReq {
    type Header = fid;
    const CLASS: usize = FI_CLASS_CONNREQ;
}

static CONNREQ_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(connreq_close),
    bind: Some(noops::no_bind),
    control: Some(noops::no_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// Consumed handles, oldest first, freed beyond [`RETIRED_MAX`].
static RETIRED: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());

fn retire(h: *mut fid) {
    let old = {
        let mut r = RETIRED.lock();
        r.push_back(h as usize);
        if r.len() > RETIRED_MAX {
            r.pop_front()
        } else {
            None
        }
    };
    if let Some(p) = old {
        // SAFETY: `p` was created by `Obj::create` in `announce` and retired
        // exactly once (only the call that took its request retires it).
        if let Ok(o) = unsafe { Obj::<ConnReq>::from_ptr(p as *const c_void) } {
            // SAFETY: nothing else frees it; the application consumed it
            // RETIRED_MAX handles ago.
            unsafe { Obj::destroy(o) };
        }
    }
}

/// Consumes a connection request: its connection.
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
unsafe fn take_request(h: *mut fid) -> Result<ConnRequest> {
    // SAFETY: per the contract.
    let o = unsafe { Obj::<ConnReq>::from_ptr(h as *const c_void) }?;
    let r = o.core.take()?;
    retire(h);
    Ok(r)
}

/// `fi_endpoint` with a connection request's info: the request (its
/// connection and the client's RTS prefix).
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub(crate) unsafe fn take_connreq(h: *mut fid) -> Result<ConnRequest> {
    // SAFETY: forwarded.
    unsafe { take_request(h) }
}

/// An unread `FI_CONNREQ` event is dropped (its EQ closes): the request is
/// consumed (its connection closes; the client sees a refusal).
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub(crate) unsafe fn discard_connreq(h: *mut fid) {
    // SAFETY: forwarded.
    if !h.is_null() && unsafe { (*h).fclass } == FI_CLASS_CONNREQ {
        // SAFETY: forwarded.
        drop(unsafe { take_request(h) });
    }
}

unsafe extern "C" fn connreq_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's handle.
    fi::call("connreq close", || unsafe { take_request(f) }.map(|_| 0).or(Ok(0)))
}

/// `fi_endpoint` with `info->handle` = a passive endpoint: its bound socket
/// becomes the active endpoint's. Not while it listens.
///
/// # Safety
/// `h` must be NULL or readable as a `struct fid`.
pub(crate) unsafe fn take_bound_socket(h: *mut fid) -> Result<OwnedFd> {
    // SAFETY: per the contract.
    unsafe { Obj::<Pep>::from_ptr(h as *const c_void) }?.core.take_bound()
}

/// Queues `FI_CONNREQ` for a request on `eq` (the core's [`Announce`](crate::core::pep::Announce)):
/// a new handle holding the request and an info built from the pep's.
/// The request comes back when the EQ is full (it waits for the next pass).
fn announce(pep: &Pep, eq: &Eq, req: ConnRequest) -> core::result::Result<(), ConnRequest> {
    let (local, peer) = (req.local(), req.peer());
    let data = req.data().to_vec();
    let core = Arc::new(ConnReq::new(req));
    let handle = Obj::create(
        fid {
            fclass: FI_CLASS_CONNREQ,
            context: core::ptr::null_mut(),
            ops: &CONNREQ_FI_OPS,
        },
        core.clone(),
    );
    let mut info = pep.info().clone();
    info.handle = handle as usize;
    info.addr_format = Addr::Inet(peer).format();
    info.src_addr = Some(Addr::Inet(local).to_bytes());
    info.dest_addr = Some(Addr::Inet(peer).to_bytes());
    if let Some(e) = info.ep.as_mut() {
        e.ep_type = FI_EP_MSG;
    }
    let pushed = info.to_c().and_then(|ci| {
        let e = fi_eq_cm_entry {
            fid: pep.handle() as *mut fid,
            info: ci,
        };
        // SAFETY: fi_eq_cm_entry is plain old data.
        let mut bytes = unsafe { crate::transport::addr::as_bytes(&e) }.to_vec();
        bytes.extend_from_slice(&data);
        eq.push_event(FI_CONNREQ, &bytes).inspect_err(|_| {
            // SAFETY: built by to_c just now and not handed out.
            unsafe { crate::fi::attr::free_c_info(ci) };
        })
    });
    if pushed.is_ok() {
        return Ok(());
    }
    // Not queued: the request goes back to the pep, the handle (never seen
    // by anyone) is freed.
    // SAFETY: `handle` was created above and never handed out.
    if let Ok(o) = unsafe { Obj::<ConnReq>::from_ptr(handle as *const c_void) } {
        // SAFETY: as above: nobody else knows it.
        unsafe { Obj::destroy(o) };
    }
    // Nobody else saw the handle, so the request is still in it.
    core.take().map_or(Ok(()), Err)
}

static PEP_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(pep_close),
    bind: Some(pep_bind),
    control: Some(pep_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static PEP_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(pep_getopt),
    setopt: Some(pep_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(pep_size_left),
    tx_size_left: Some(pep_size_left),
};

static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(pep_getname),
    getpeer: Some(super::ep::ep_getpeer),
    connect: Some(super::ep::ep_connect),
    listen: Some(pep_listen),
    accept: Some(super::ep::ep_accept),
    reject: Some(pep_reject),
    shutdown: Some(super::ep::ep_shutdown),
    join: Some(super::ep::ep_join),
};

/// `fi_passive_ep`.
///
/// # Safety
/// `info` must be NULL or a valid `fi_info`.
pub(crate) unsafe fn open(f: &Obj<Fabric>, info: *const fi_info, context: *mut c_void) -> Result<*mut fid_pep> {
    // SAFETY: per the contract.
    let info = unsafe { Info::from_c(info) }?;
    let core = Pep::new(&f.core, info, announce)?;
    let hdr = fid_pep {
        fid: fid {
            fclass: FI_CLASS_PEP,
            context,
            ops: &PEP_FI_OPS,
        },
        ops: &PEP_EP_OPS,
        cm: &PEP_CM_OPS,
    };
    let p = Obj::create(hdr, core.clone());
    core.set_handle(p as usize);
    Ok(p)
}

type PepObj = Obj<Pep>;

/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
unsafe fn with_pep<R: fi::FfiRet>(what: &'static str, p: *const c_void, f: impl FnOnce(&PepObj) -> Result<R>) -> R {
    // SAFETY: forwarded.
    unsafe { fi::call_obj::<Pep, R>(what, p, f) }
}

unsafe extern "C" fn pep_close(f: *mut fid) -> c_int {
    // SAFETY: `f` is the application's passive endpoint.
    unsafe {
        with_pep("pep close", f as *const c_void, |o| {
            o.core.users().check_idle()?;
            o.core.close();
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments from fi_pep_bind().
    unsafe {
        with_pep("fi_pep_bind", f as *const c_void, |o| {
            if flags != 0 {
                return Err(Error::BADFLAGS);
            }
            if fi::read_in(bfid as *const fid)?.fclass != FI_CLASS_EQ {
                return Err(Error::INVAL);
            }
            o.core.bind_eq(crate::fi::eq::from_fid(bfid)?)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments from fi_control().
    unsafe {
        with_pep("pep control", f as *const c_void, |o| match command {
            FI_BACKLOG => {
                o.core.set_backlog(*fi::read_in(arg as *const c_int)?)?;
                Ok(0)
            }
            _ => Err(Error::NOSYS),
        })
    }
}

unsafe extern "C" fn pep_cancel(_: *mut fid, _: *mut c_void) -> isize {
    -(FI_ENOSYS as isize)
}

unsafe extern "C" fn pep_size_left(_: *mut fid_ep) -> isize {
    -(FI_ENOSYS as isize)
}

unsafe extern "C" fn pep_getopt(f: *mut fid, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getopt().
    unsafe {
        with_pep("fi_getopt", f as *const c_void, |_| {
            if level == FI_OPT_ENDPOINT && name == FI_OPT_CM_DATA_SIZE {
                return match super::connected::cm_data_size_opt(val, len) {
                    0 => Ok(0),
                    r => Err(Error(-r)),
                };
            }
            Err(Error::NOPROTOOPT)
        })
    }
}

unsafe extern "C" fn pep_setopt(_: *mut fid, _: c_int, _: c_int, _: *const c_void, _: usize) -> c_int {
    -FI_ENOPROTOOPT
}

unsafe extern "C" fn pep_setname(f: *mut fid, addr: *mut c_void, addrlen: usize) -> c_int {
    // SAFETY: arguments from fi_setname().
    unsafe {
        with_pep("fi_setname", f as *const c_void, |o| {
            let fmt = match o.core.info().addr_format {
                FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => o.core.info().addr_format,
                _ => FI_SOCKADDR,
            };
            let a = super::connected::read_sockaddr(fmt, addr, Some(addrlen))?;
            o.core.set_name(a)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_pep("fi_getname", f as *const c_void, |o| {
            if addrlen.is_null() {
                return Err(Error::INVAL);
            }
            let a = o.core.name()?;
            let bytes = Addr::Inet(a).to_bytes();
            let room = *addrlen;
            *addrlen = bytes.len();
            if !addr.is_null() {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, room.min(bytes.len()));
            }
            if room < bytes.len() || addr.is_null() {
                return Err(Error::TOOSMALL);
            }
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_listen(p: *mut fid_pep) -> c_int {
    // SAFETY: argument from fi_listen().
    unsafe {
        with_pep("fi_listen", p as *const c_void, |o| {
            o.core.listen()?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn pep_reject(p: *mut fid_pep, handle: *mut fid, param: *const c_void, paramlen: usize) -> c_int {
    // SAFETY: arguments from fi_reject().
    unsafe {
        with_pep("fi_reject", p as *const c_void, |_| {
            if paramlen > CM_DATA_MAX {
                return Err(Error::INVAL);
            }
            let data = super::connected::cm_data(param, paramlen)?;
            take_request(handle)?.reject(data);
            Ok(0)
        })
    }
}
