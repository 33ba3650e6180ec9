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
//! handle: it leaves the registry of live objects (`fi/live.rs`) at once,
//! so a later use (error paths commonly call `fi_reject` after a failed
//! accept) is `-FI_EINVAL` without a read of the handle, however late it
//! comes (its memory is kept for a while only so that its address does
//! not go to the next request's handle at once: [`QUARANTINE_LEN`]). A handle never consumed keeps its
//! connection open until it is (`fi_close` on the handle also consumes it),
//! however long that takes, or until its passive endpoint closes (which
//! consumes and frees the requests it announced); an unread `FI_CONNREQ`
//! event dropped with its EQ consumes it. `fi_freeinfo` cannot consume it:
//! libfabric's core frees the info without calling the provider.

use crate::abi::*;
use crate::base::collections::FastMap;
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
use rustc_hash::FxBuildHasher;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::Arc;

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

/// Connection requests announced and not consumed yet: handle address →
/// the address of the passive endpoint's core that announced it. A handle
/// leaves this table and the registry of live handles together, when it is
/// consumed (then freed at once) or when its passive endpoint closes.
static OUTSTANDING: Mutex<FastMap<usize, usize>> = Mutex::new(FastMap::with_hasher(FxBuildHasher));

/// Consumed handles are out of the registry at once (any use is
/// `-FI_EINVAL`, unread), but their memory is kept for the next
/// [`QUARANTINE_LEN`] consumptions, so that the allocator cannot hand the
/// same address to the next request's handle: a stale handle given to
/// `fi_reject` right after a failed accept (fabtests' error path) is
/// refused rather than taken for a newer client's request. Safety does not
/// rest on it; it only keeps addresses from being reused soon.
const QUARANTINE_LEN: usize = 256;
static QUARANTINE: Mutex<VecDeque<usize>> = Mutex::new(VecDeque::new());

fn pep_key(pep: &Pep) -> usize {
    pep as *const Pep as usize
}

/// Consumes a connection request: its connection; the handle is freed. Any
/// pointer: one that is not a live request (another provider's, already
/// consumed, made up) is `-FI_EINVAL` and is not read. With `pep`, the
/// request must be one that passive endpoint announced.
fn take_request(h: *mut fid, pep: Option<&Pep>) -> Result<ConnRequest> {
    // SAFETY: the reference is used only until the destroy below, which
    // only the one call that took the request does.
    let o = unsafe { Obj::<ConnReq>::from_ptr(h as *const c_void) }?;
    if let Some(p) = pep {
        if OUTSTANDING.lock().get(&(h as usize)) != Some(&pep_key(p)) {
            return Err(Error::INVAL);
        }
    }
    let r = o.core.take()?;
    OUTSTANDING.lock().remove(&(h as usize));
    // SAFETY: taken: this call is the only one that retires it; nothing
    // else uses the handle (a later use finds it gone from the registry).
    let p = unsafe { Obj::unregister(o) };
    let old = {
        let mut q = QUARANTINE.lock();
        q.push_back(p as usize);
        if q.len() > QUARANTINE_LEN {
            q.pop_front()
        } else {
            None
        }
    };
    if let Some(old) = old {
        // SAFETY: unregistered when it entered the quarantine, freed once
        // (it left the queue here).
        unsafe { Obj::<ConnReq>::free_unregistered(old as *mut Obj<ConnReq>) };
    }
    Ok(r)
}

/// `fi_endpoint` with a connection request's info: the request (its
/// connection and the client's RTS prefix). Any pointer (see
/// [`take_request`]).
pub(crate) fn take_connreq(h: *mut fid) -> Result<ConnRequest> {
    take_request(h, None)
}

/// An unread `FI_CONNREQ` event is dropped (its EQ closes): the request is
/// consumed (its connection closes; the client sees a refusal). Nothing
/// if the handle is gone already (its passive endpoint closed first).
pub(crate) fn discard_connreq(h: *mut fid) {
    drop(take_request(h, None));
}

/// A passive endpoint closes: the requests it announced that nobody
/// consumed are (their connections close) and their handles freed; a later
/// use of one is `-FI_EINVAL`.
fn discard_requests_of(pep: &Pep) {
    let key = pep_key(pep);
    let mine: Vec<usize> = OUTSTANDING
        .lock()
        .iter()
        .filter(|&(_, &p)| p == key)
        .map(|(&h, _)| h)
        .collect();
    for h in mine {
        drop(take_request(h as *mut fid, None));
    }
}

unsafe extern "C" fn connreq_close(f: *mut fid) -> c_int {
    fi::call("connreq close", || take_request(f, None).map(|_| 0))
}

/// `fi_endpoint` with `info->handle` = a passive endpoint: its bound socket
/// becomes the active endpoint's. Not while it listens. Any pointer: one
/// that is not a live rustfab passive endpoint is `-FI_EINVAL`.
pub(crate) fn take_bound_socket(h: *mut fid) -> Result<OwnedFd> {
    // SAFETY: the reference is used for this call only; `h` is not closed
    // meanwhile (the application's fi_endpoint call uses it).
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
    OUTSTANDING.lock().insert(handle as usize, pep_key(pep));
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
    OUTSTANDING.lock().remove(&(handle as usize));
    // SAFETY: `handle` was created above and never handed out.
    if let Ok(o) = unsafe { Obj::<ConnReq>::from_ptr(handle as *const c_void) } {
        // SAFETY: as above: nobody else knows it.
        unsafe { Obj::destroy_unshared(o) };
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
        fi::call_close::<Pep>("pep close", f as *const c_void, |o| {
            o.core.users().check_idle()?;
            o.core.close();
            discard_requests_of(&o.core);
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
            if fi::class_of(bfid)? != FI_CLASS_EQ {
                return Err(Error::INVAL);
            }
            o.core.bind_eq(fi::core_of(bfid)?)?;
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
                return match super::cm_args::cm_data_size_opt(val, len) {
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
            let a = super::cm_args::read_sockaddr(fmt, addr, Some(addrlen))?;
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
        with_pep("fi_reject", p as *const c_void, |o| {
            if paramlen > CM_DATA_MAX {
                return Err(Error::INVAL);
            }
            let data = super::cm_args::cm_data(param, paramlen)?;
            take_request(handle, Some(&o.core))?.reject(data);
            Ok(0)
        })
    }
}
