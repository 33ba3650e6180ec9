//! Connected endpoints (`FI_EP_MSG`, on every transport): the C face. The
//! endpoint is the RDM endpoint object of `ep.rs` with exactly one peer —
//! the other end of one TCP connection (`transport/connected/`),
//! whose records go over shm when both ends are on shm or auto on this host
//! (docs/shm.md, Connected endpoints) — and its
//! connection-management core ([`ConnectedLink`], `core/connected.rs`);
//! this file opens it and holds the `fi_cm(3)` thunks: `fi_connect`,
//! `fi_accept`, `fi_shutdown`, names, and `FI_OPT_CM_DATA_SIZE`. The
//! listening side is the passive endpoint (`pep.rs`).
//!
//! Decisions:
//! * Data operations ignore their destination address (fi_msg(3) on
//!   connected endpoints); no AV is needed. Sends before `FI_CONNECTED`
//!   ("Outbound data transfers cannot be initiated on a connection-oriented
//!   endpoint until an FI_CONNECTED event has been generated") and every
//!   send after the connection ended return `-FI_ENOTCONN` at once.
//!   Receives may be posted from `fi_enable` on ("receive buffers may be
//!   associated with an endpoint anytime"), also after the end, when they
//!   stay posted until cancelled or the endpoint closes
//!   (core/connected.rs, "Posts").
//! * Connection data: at most [`CM_DATA_MAX`] (256) bytes
//!   (`FI_OPT_CM_DATA_SIZE`); more is `-FI_EINVAL` from `fi_connect`,
//!   `fi_accept` and `fi_reject`, as libfabric's tcp provider answers
//!   (fabtests `fi_cm_data` expects it), rather than the silent truncation
//!   fi_cm(3) allows.
//! * Setup is non-blocking: `fi_connect`/`fi_accept` start it and run one
//!   progress pass; EQ reads (the enabled endpoint is a source of the
//!   EQ's engine too, and its socket wakes EQ waits) and CQ reads finish
//!   it. A connect that fails — even at once, like a refused loopback port
//!   — is an EQ error event, never a `fi_connect` error.
//! * When the connection ends, every outstanding operation completes in
//!   error: `FI_ECANCELED` after our `fi_shutdown` (fi_cm(3): "will be
//!   canceled", written before fi_shutdown returns), `FI_ECONNRESET` when
//!   the peer shut down, died or became unreachable (keepalive / user
//!   timeout), and posted receives `FI_ECANCELED` after a failed connect.
//!   Then exactly one `FI_SHUTDOWN` event (errors of a connect attempt are
//!   an error event instead).
//! * Events carry the endpoint's own fid (docs/abi.md §1.11).

use super::cm_args::{cm_data, cm_data_size_opt, copy_name, read_sockaddr, sockaddr_of};
use super::ep_obj::{Ep, EpObj};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::connected::{Origin, CONNECTED_PEER};
use crate::core::domain::{Domain, TransportKind};
use crate::core::engine::{self as rdm, FrozenBinds};
use crate::fi::{self, Obj};
use core::ffi::{c_int, c_void};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

pub(crate) use crate::core::connected::ConnectedLink;

/// Capabilities a connected endpoint's data path delivers (fi_getinfo's
/// FI_EP_MSG entry): no FI_SOURCE / FI_DIRECTED_RECV — there is only the
/// one peer.
pub(crate) const MSG_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_MULTI_RECV
    | FI_VARIABLE_MSG
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | crate::core::rma::RMA_CAPS
    | crate::core::rma::ATOMIC_CAPS;

/// `fi_endpoint` for `FI_EP_MSG`. `info->handle` decides the connection:
/// a connection request (`FI_CONNREQ`'s info: the server side of that
/// connection), a passive endpoint (its bound address becomes ours), or
/// none (a client; `src_addr` is bound if it names anything).
pub(crate) fn open(
    d: &Obj<Domain>,
    info: &Info,
    context: *mut c_void,
    tables: super::ep::MsgTables,
) -> Result<*mut fid_ep> {
    let settings = &d.core.fabric().settings;
    let mut cfg = crate::core::ep::config_from(info, MSG_CAPS, settings, d.core.api_version);
    // One peer: receives read no source.
    cfg.matching = cfg.matching.undirected();
    // One peer; the connection's records go over TCP (no cross-memory
    // attach) or, on shm and auto to a peer on this host, over shm
    // (docs/shm.md, Connected endpoints).
    if d.core.transport == TransportKind::Tcp {
        cfg.cma = false;
    }
    cfg.fixed_peer = Some(CONNECTED_PEER);
    // Its shm port keeps the default ring size, where the split pull beats
    // streaming (docs/shm.md "Ring size").
    cfg.stream_lone_max = 0;
    let origin = if info.handle != 0 {
        let h = info.handle as *mut fid;
        // Not a live rustfab object (another provider's handle, one already
        // consumed): -FI_EINVAL, unread.
        let class = fi::class_of(h)?;
        match class {
            FI_CLASS_CONNREQ => Origin::Request(super::pep::take_connreq(h)?),
            FI_CLASS_PEP => Origin::Bound(super::pep::take_bound_socket(h)?),
            _ => return Err(Error::INVAL),
        }
    } else {
        let fmt = info.addr_format;
        let src = info.src_addr.as_deref().map(|b| sockaddr_of(fmt, b)).transpose()?;
        let dest = info.dest_addr.as_deref().map(|b| sockaddr_of(fmt, b)).transpose()?;
        let v6 = match (src, dest) {
            (Some(a), _) | (None, Some(a)) => a.is_ipv6(),
            (None, None) => fmt == FI_SOCKADDR_IN6,
        };
        if dest.is_some_and(|d| d.is_ipv6() != v6) {
            return Err(Error::INVAL);
        }
        Origin::Client(src.unwrap_or_else(|| {
            if v6 {
                SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
            } else {
                SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
            }
        }))
    };
    let (link, port) = ConnectedLink::open(origin, &settings.tcp, d.core.transport, context as usize)?;
    // Buffered receives as on RDM endpoints (docs/buffered.md); the RTS
    // prefix travels in the connection handshake.
    let inner = rdm::Inner::new(port, cfg);
    let p = super::ep::create(
        d,
        info,
        inner,
        CONNECTED_PEER,
        Some(link.clone()),
        context,
        (&CONNECTED_EP_OPS, &CONNECTED_CM_OPS),
        tables,
    )?;
    link.set_handle(p as usize);
    Ok(p)
}

/// The endpoint operations of a connected endpoint: the RDM ones, plus the
/// connection-data option.
static CONNECTED_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: core::mem::size_of::<fi_ops_ep>(),
    cancel: Some(super::ep::ep_cancel),
    getopt: Some(conn_getopt),
    setopt: Some(super::ep::ep_setopt),
    tx_ctx: Some(super::ep::ep_tx_ctx),
    rx_ctx: Some(super::ep::ep_rx_ctx),
    rx_size_left: Some(super::ep::ep_rx_size_left),
    tx_size_left: Some(super::ep::ep_tx_size_left),
};

static CONNECTED_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: core::mem::size_of::<fi_ops_cm>(),
    setname: Some(conn_setname),
    getname: Some(conn_getname),
    getpeer: Some(conn_getpeer),
    connect: Some(conn_connect),
    listen: Some(super::ep::ep_listen),
    accept: Some(conn_accept),
    reject: Some(super::ep::ep_reject),
    shutdown: Some(conn_shutdown),
    join: Some(super::ep::ep_join),
};

/// Runs `f` on a connected endpoint (an RDM endpoint is -FI_EINVAL).
///
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
unsafe fn with_connected<R: fi::FfiRet>(
    what: &'static str,
    p: *const c_void,
    f: impl FnOnce(&EpObj, &ConnectedLink) -> Result<R>,
) -> R {
    // SAFETY: forwarded.
    unsafe {
        fi::call_obj::<Ep, R>(what, p, |o| {
            let link = o.core.msg.clone().ok_or(Error::INVAL)?;
            f(o, &link)
        })
    }
}

/// `fi_getopt`: `FI_OPT_CM_DATA_SIZE` here, the rest as on RDM endpoints.
unsafe extern "C" fn conn_getopt(f: *mut fid, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    if level == FI_OPT_ENDPOINT && name == FI_OPT_CM_DATA_SIZE {
        // SAFETY: arguments from fi_getopt().
        return unsafe { cm_data_size_opt(val, len) };
    }
    // SAFETY: forwarded.
    unsafe { super::ep::ep_getopt(f, level, name, val, len) }
}

unsafe extern "C" fn conn_getname(f: *mut fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getname().
    unsafe {
        with_connected("fi_getname", f as *const c_void, |_, l| {
            let a = l.local().ok_or(Error::OPBADSTATE)?;
            copy_name(a, addr, addrlen)
        })
    }
}

unsafe extern "C" fn conn_getpeer(e: *mut fid_ep, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: arguments from fi_getpeer().
    unsafe {
        with_connected("fi_getpeer", e as *const c_void, |_, l| {
            let a = l.peer().ok_or(Error::NOTCONN)?;
            copy_name(a, addr, addrlen)
        })
    }
}

unsafe extern "C" fn conn_setname(f: *mut fid, addr: *mut c_void, addrlen: usize) -> c_int {
    // SAFETY: arguments from fi_setname().
    unsafe {
        with_connected("fi_setname", f as *const c_void, |_, l| {
            let a = read_sockaddr(l.addr_format(), addr, Some(addrlen))?;
            l.bind(a)?;
            Ok(0)
        })
    }
}

/// fi_cm(3): connect/accept enable an endpoint implicitly.
fn ensure_enabled(o: &EpObj) -> Result<&FrozenBinds> {
    if !o.core.enabled.load(Ordering::Acquire) {
        // SAFETY: `o` is a live endpoint object; its fid is what the
        // enable thunk expects.
        let r = unsafe { super::ep::ep_control(o.fid_ptr(), FI_ENABLE, core::ptr::null_mut()) };
        if r != 0 {
            return Err(Error(-r));
        }
    }
    o.core.bound()
}

/// Runs a connection-management step and the progress pass that follows.
fn cm_step(o: &EpObj, l: &ConnectedLink, step: impl FnOnce(&ConnectedLink) -> Result<()>) -> Result<c_int> {
    let b = ensure_enabled(o)?;
    let mut g = o.core.inner.lock();
    step(l)?;
    o.core.run_engine(&mut g, |g| g.progress(b));
    l.after_progress(&mut g, b);
    Ok(0)
}

unsafe extern "C" fn conn_connect(e: *mut fid_ep, addr: *const c_void, param: *const c_void, paramlen: usize) -> c_int {
    // SAFETY: arguments from fi_connect().
    unsafe {
        with_connected("fi_connect", e as *const c_void, |o, l| {
            let data = cm_data(param, paramlen)?;
            let to = read_sockaddr(l.addr_format(), addr, None)?;
            cm_step(o, l, |c| c.connect(to, data))
        })
    }
}

unsafe extern "C" fn conn_accept(e: *mut fid_ep, param: *const c_void, paramlen: usize) -> c_int {
    // SAFETY: arguments from fi_accept().
    unsafe {
        with_connected("fi_accept", e as *const c_void, |o, l| {
            let data = cm_data(param, paramlen)?;
            cm_step(o, l, |c| c.accept(data))
        })
    }
}

/// `fi_shutdown`: graceful; cancelled completions are written before it
/// returns; our `FI_SHUTDOWN` event too. No connection: nothing to do.
unsafe extern "C" fn conn_shutdown(e: *mut fid_ep, _flags: u64) -> c_int {
    // SAFETY: arguments from fi_shutdown().
    unsafe {
        with_connected("fi_shutdown", e as *const c_void, |o, l| {
            if !o.core.enabled.load(Ordering::Acquire) {
                return Ok(0);
            }
            cm_step(o, l, |c| {
                c.shutdown();
                Ok(())
            })
        })
    }
}
