//! The connection-management core of a connected (`FI_EP_MSG`) endpoint:
//! what the endpoint keeps about its one connection (the transport's
//! [`Connection`]) besides the data path, and how connection changes
//! become completions and EQ events. The C face (`fi/connected.rs`) opens
//! the endpoint and turns `fi_connect`, `fi_accept`, `fi_shutdown` and the
//! name calls into this.
//!
//! * Posts: sends only on an established connection, receives until it
//!   ended; else `-FI_ENOTCONN`.
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
use crate::core::engine::{self as rdm, Binds};
use crate::core::eq::EqError;
use crate::core::progress::{Engine, Source};
use crate::transport::tcp::connected::{CmEvent, Connection, LinkState};
use core::ffi::c_void;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What the connection core needs of its endpoint: its progress (a source
/// for the EQ's engine) and the descriptor its sleepers wait on.
pub(crate) trait Endpoint: Source {
    fn wait_fd(&self) -> RawFd;
}

/// What a connected endpoint keeps about its connection.
pub(crate) struct ConnectedLink {
    pub(crate) conn: Arc<Connection>,
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
    /// The link of an endpoint opened with `context` on `conn`.
    pub(crate) fn new(conn: Arc<Connection>, context: usize) -> Arc<ConnectedLink> {
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

    /// Posting a send: only on an established connection.
    pub(crate) fn check_send(&self) -> Result<()> {
        match self.conn.state() {
            LinkState::Up => Ok(()),
            _ => Err(Error::NOTCONN),
        }
    }

    /// Posting a receive: any time before the connection ended.
    pub(crate) fn check_recv(&self) -> Result<()> {
        match self.conn.state() {
            LinkState::Down => Err(Error::NOTCONN),
            _ => Ok(()),
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
