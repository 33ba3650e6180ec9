//! The connection-management core of a connected (`FI_EP_MSG`) endpoint:
//! what the endpoint keeps about its one connection (the transport's
//! [`Connection`]) besides the data path, and how connection changes
//! become completions and EQ events. The C face (`fi/connected.rs`) opens
//! the endpoint and turns `fi_connect`, `fi_accept`, `fi_shutdown` and the
//! name calls into this.
//!
//! * Posts: sends only on an established connection, else `-FI_ENOTCONN`.
//!   Receives at any time: one posted after the connection ended is
//!   accepted and stays posted (no data will come: `fi_cancel` ends it,
//!   closing the endpoint discards it — fi_cm(3) lets operations be
//!   "canceled or discarded"), as libfabric's tcp provider does. A receive
//!   reposted from a completion loop while the peer shuts down is not an
//!   error of the application's (fabtests 2.6 `fi_cq_data -e msg -o
//!   writedata` reposts one in `ft_sync` after the client may have left);
//!   no error completion either, which the CQ would report ahead of the
//!   successes written before it (core/cq.rs, "Errors first").
//! * Events: `FI_CONNECTED` (with the peer's data), `FI_SHUTDOWN`, and
//!   error events (`FI_ECONNREFUSED` with the rejecting side's data, or the
//!   connect error) name the endpoint's own handle (docs/abi.md §1.11).
//!   Events the EQ has no room for wait, in order, for the next pass.
//! * When the connection ends, every outstanding operation completes in
//!   error: `FI_ECANCELED` after our `fi_shutdown` or a failed connect,
//!   `FI_ECONNRESET` when the peer shut down, died or became unreachable.
//! * Progress: the endpoint joins its EQ's engine at `fi_enable` (EQ reads
//!   and waits progress it) until it closes.

use crate::abi::{fi_eq_cm_entry, fid, FI_CONNECTED, FI_SHUTDOWN, FI_SOCKADDR_IN, FI_SOCKADDR_IN6};
use crate::base::error::{Error, Result};
use crate::core::domain::TransportKind;
use crate::core::engine::{self as rdm, Binds};
use crate::core::eq::EqError;
use crate::core::pep::ConnRequest;
use crate::core::progress::{Engine, Source};
use crate::transport::addr::Addr;
use crate::transport::connected::{CmEvent, ConnOptions, Connection, LinkState, ShmUse};
use crate::transport::proto::Limits;
use crate::transport::tcp::{TcpSettings, EAGER_MAX};
use crate::transport::Port;
use core::ffi::c_void;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Connection data a CM call carries at most (`fi_connect`, `fi_accept`,
/// `fi_reject`: `FI_OPT_CM_DATA_SIZE`).
pub(crate) const CM_DATA_MAX: usize = crate::transport::connected::cm::CM_DATA_MAX;
/// The one peer of a connected endpoint, as its endpoint core names it
/// (`EpConfig::fixed_peer`: sends ignore their destination address).
pub(crate) const CONNECTED_PEER: Addr = crate::transport::connected::CONNECTED_PEER;

/// Where a connected endpoint's connection comes from (`info->handle` at
/// `fi_endpoint`).
pub(crate) enum Origin {
    /// A connection request: the server side of its connection.
    Request(ConnRequest),
    /// A passive endpoint's bound socket: its address becomes ours.
    Bound(OwnedFd),
    /// A client, bound to this address now (so that `fi_getname` answers
    /// before `fi_connect`; a wildcard lets the kernel choose at connect).
    Client(SocketAddr),
}

/// What the connection core needs of its endpoint: its progress (a source
/// for the EQ's engine) and the descriptor its sleepers wait on.
pub(crate) trait Endpoint: Source {
    fn wait_fd(&self) -> RawFd;
}

/// The endpoint core's connection hooks (`core::ep::Connection`), answered
/// by a connected endpoint's link.
impl crate::core::ep::Connection for ConnectedLink {
    fn check_send(&self) -> Result<()> {
        ConnectedLink::check_send(self)
    }
    fn on_enable(&self, ep: &Arc<crate::core::ep::Endpoint<Self>>, b: &Binds) -> Result<()> {
        ConnectedLink::on_enable(self, ep, b)
    }
    fn on_close(&self, ep: &Arc<crate::core::ep::Endpoint<Self>>) {
        ConnectedLink::on_close(self, ep)
    }
    fn after_progress(&self, inner: &mut rdm::Inner, b: &Binds) {
        ConnectedLink::after_progress(self, inner, b)
    }
}

impl Endpoint for crate::core::ep::Endpoint<ConnectedLink> {
    fn wait_fd(&self) -> RawFd {
        crate::core::ep::Endpoint::wait_fd(self)
    }
}

/// What a connected endpoint keeps about its connection.
pub(crate) struct ConnectedLink {
    conn: Arc<Connection>,
    /// The endpoint's handle (fid) and context, for events; the handle is
    /// set once the C object exists.
    handle: AtomicUsize,
    context: usize,
    addr_format: u32,
    /// Events the EQ had no room for, oldest first (retried every pass).
    backlog: Mutex<VecDeque<Pending>>,
    /// `backlog` is not empty.
    backlogged: AtomicBool,
    /// The bound EQ's engine, which this endpoint joined at `fi_enable`.
    eq_engine: Mutex<Option<Arc<Engine>>>,
}

enum Pending {
    Event(u32, Vec<u8>),
    Error(EqError),
}

/// `struct fi_eq_cm_entry` (no info) followed by connection data.
fn cm_entry(handle: usize, data: &[u8]) -> Vec<u8> {
    let e = fi_eq_cm_entry {
        fid: handle as *mut fid,
        info: core::ptr::null_mut(),
    };
    // SAFETY: fi_eq_cm_entry is plain old data.
    let mut v = unsafe { crate::transport::addr::as_bytes(&e) }.to_vec();
    v.extend_from_slice(data);
    v
}

impl ConnectedLink {
    /// The connection of an endpoint opened with `context` in a domain of
    /// `transport`, and the port its endpoint core drives (eager records and
    /// DATA chunks up to the TCP eager limit, as on RDM endpoints; the shm
    /// one over shm: always on shm, to a peer on this host on auto).
    pub(crate) fn open(
        origin: Origin,
        tcp: &TcpSettings,
        transport: TransportKind,
        context: usize,
    ) -> Result<(Arc<ConnectedLink>, Box<dyn Port>)> {
        if tcp.auth_key.is_some() {
            // fi_getinfo refuses a key in FI_EP_MSG hints; one from the
            // environment must not be believed to protect this endpoint.
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_CTRL,
                "FI_RUSTFAB_AUTH_KEY is set, but connected (FI_EP_MSG) endpoints take no key: this connection is not authenticated"
            );
        }
        let opts = ConnOptions {
            limits: Limits {
                max_payload: EAGER_MAX,
                max_chunk: crate::transport::tcp::CHUNK_MAX,
                max_iov: crate::core::engine::matching::IOV_MAX,
            },
            settings: tcp.clone(),
            shm: match transport {
                TransportKind::Tcp => ShmUse::Never,
                TransportKind::Shm => ShmUse::Only,
                TransportKind::Auto => ShmUse::Local,
            },
        };
        let conn = match origin {
            Origin::Request(r) => Connection::new_accepting(r.into_incoming(), &opts)?,
            Origin::Bound(s) => Connection::new_on_socket(s, &opts)?,
            Origin::Client(src) => Connection::new_client(src, &opts)?,
        };
        let port = Box::new(conn.port());
        Ok((ConnectedLink::new(conn, context), port))
    }

    fn new(conn: Arc<Connection>, context: usize) -> Arc<ConnectedLink> {
        let addr_format = if conn.is_v6() { FI_SOCKADDR_IN6 } else { FI_SOCKADDR_IN };
        Arc::new(ConnectedLink {
            conn,
            handle: AtomicUsize::new(0),
            context,
            addr_format,
            backlog: Mutex::new(VecDeque::new()),
            backlogged: AtomicBool::new(false),
            eq_engine: Mutex::new(None),
        })
    }

    /// The endpoint's handle (fid), named by its events.
    pub(crate) fn set_handle(&self, h: usize) {
        self.handle.store(h, Ordering::Release);
    }

    /// The endpoint's address format (`FI_SOCKADDR_IN` or `_IN6`).
    pub(crate) fn addr_format(&self) -> u32 {
        self.addr_format
    }

    /// `fi_connect` (the caller checked `data` and runs a progress pass
    /// right after); failures of the connection itself are events.
    pub(crate) fn connect(&self, to: SocketAddr, data: &[u8]) -> Result<()> {
        self.conn.connect(to, data)
    }

    /// `fi_accept`.
    pub(crate) fn accept(&self, data: &[u8]) -> Result<()> {
        self.conn.accept(data)
    }

    /// `fi_shutdown` (acted on by the next progress pass).
    pub(crate) fn shutdown(&self) {
        self.conn.shutdown()
    }

    /// `fi_setname` before `fi_connect`.
    pub(crate) fn bind(&self, a: SocketAddr) -> Result<()> {
        self.conn.bind(a)
    }

    /// Our address (`fi_getname`).
    pub(crate) fn local(&self) -> Option<SocketAddr> {
        self.conn.local()
    }

    /// The peer's address (`fi_getpeer`).
    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.conn.peer()
    }

    /// Posting a send: only on an established connection.
    pub(crate) fn check_send(&self) -> Result<()> {
        match self.conn.state() {
            LinkState::Up => Ok(()),
            _ => Err(Error::NOTCONN),
        }
    }

    /// At `fi_enable`: an EQ is required (connection events go there), and
    /// its reads and waits must progress this endpoint: the endpoint joins
    /// the EQ's own engine (its fabric's) as a second source, with its wait
    /// fd, until it closes ([`ConnectedLink::on_close`]). CQ reads progress
    /// it through the domain's engine as any endpoint.
    pub(crate) fn on_enable<E: Endpoint + 'static>(&self, ep: &Arc<E>, b: &Binds) -> Result<()> {
        let eq = b.eq.as_ref().ok_or(Error::NOEQ)?;
        let mut slot = self.eq_engine.lock();
        if slot.is_some() {
            return Ok(());
        }
        if let Some(engine) = eq.wait().engines().first().cloned() {
            engine.watch_fd(ep.wait_fd(), crate::sys::IN)?;
            engine.add_source(ep.clone());
            *slot = Some(engine);
        }
        Ok(())
    }

    /// At endpoint close: leaves the EQ's engine.
    pub(crate) fn on_close<E: Endpoint + 'static>(&self, ep: &Arc<E>) {
        if let Some(engine) = self.eq_engine.lock().take() {
            engine.unwatch_fd(ep.wait_fd());
            let src: Arc<dyn Source> = ep.clone();
            engine.remove_source(&src);
        }
    }

    /// After a progress pass (endpoint lock held): turns connection changes
    /// into completions and EQ events.
    pub(crate) fn after_progress(&self, inner: &mut rdm::Inner, b: &Binds) {
        let evs = self.conn.take_cm_events();
        if evs.is_empty() && !self.backlogged.load(Ordering::Acquire) {
            return;
        }
        let handle = self.handle.load(Ordering::Acquire);
        let mut out = Vec::with_capacity(evs.len());
        for ev in evs {
            match ev {
                CmEvent::Connected(data) => out.push(Pending::Event(FI_CONNECTED, cm_entry(handle, &data))),
                CmEvent::Refused { err, data } => {
                    inner.fail_all(b, Error::CANCELED);
                    out.push(Pending::Error(EqError {
                        fid: handle as *mut fid,
                        context: self.context as *mut c_void,
                        data: 0,
                        err: err.0,
                        prov_errno: err.0,
                        err_data: data,
                    }));
                }
                CmEvent::Shutdown { err } => {
                    inner.fail_all(b, err);
                    out.push(Pending::Event(FI_SHUTDOWN, cm_entry(handle, &[])));
                }
            }
        }
        let mut q = self.backlog.lock();
        q.extend(out);
        let Some(eq) = b.eq.as_ref() else {
            q.clear();
            self.backlogged.store(false, Ordering::Release);
            return;
        };
        while let Some(p) = q.pop_front() {
            let r = match &p {
                Pending::Event(ev, bytes) => eq.push_event(*ev, bytes),
                Pending::Error(e) => eq.push_error(EqError {
                    err_data: e.err_data.clone(),
                    ..*e
                }),
            };
            if r.is_err() {
                // EQ full: keep the order, try again next pass.
                q.push_front(p);
                break;
            }
        }
        self.backlogged.store(!q.is_empty(), Ordering::Release);
    }
}
