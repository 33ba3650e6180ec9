//! The passive endpoint core (`fi_passive_ep`): the listening side of
//! connected (`FI_EP_MSG`) endpoints, without C memory.
//!
//! A [`Pep`] owns a TCP socket bound at `fi_setname`, `fi_getname` or
//! `fi_listen`, whichever comes first; `fi_listen` turns it into the
//! transport's [`PassiveListener`] (accepts, reads each client's CONNREQ
//! within [`HELLO_TIMEOUT`](crate::transport::tcp::HELLO_TIMEOUT), at most
//! [`MAX_REQUESTS`](crate::transport::connected::MAX_REQUESTS) at a
//! time, the oldest incomplete one closed for a newcomer: a flood cannot
//! lock real clients out). Every request read is announced on the bound EQ
//! as `FI_CONNREQ` by the C face ([`Announce`]: it builds the `fi_info` the
//! application frees and the request's handle, a [`ConnReq`]); when the EQ
//! has no room the request waits, in order, for the next pass.
//!
//! The pep is a source of the fabric's progress engine, which every EQ of
//! the fabric waits on: EQ reads accept and read handshakes, and a thread
//! sleeping in `fi_eq_sread` wakes when a client arrives.

use crate::abi::{FI_EP_MSG, FI_EP_UNSPEC, FI_SOCKADDR_IN6};
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::eq::Eq;
use crate::core::fabric::Fabric;
use crate::core::progress::{Engine, Source};
use crate::core::users::{HasUsers, Held, Users};
use crate::sys::net;
use crate::transport::addr::Addr;
use crate::transport::connected::{ConnRequest as Incoming, PassiveListener};
use crate::transport::tcp::advertised_addr_with;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Listen backlog unless `fi_control(FI_BACKLOG)` says otherwise.
pub(crate) const DEFAULT_BACKLOG: i32 = 512;

/// How the C face announces a connection request: an `FI_CONNREQ` event on
/// `eq` whose info names a new handle holding the request. The request
/// comes back when the EQ has no room (it waits for the next pass).
pub(crate) type Announce = fn(&Pep, &Eq, ConnRequest) -> core::result::Result<(), ConnRequest>;

/// The pep's socket through its life.
enum Socket {
    Unbound,
    /// Bound, not listening (its address answers `fi_getname`; an active
    /// endpoint opened with the pep as `info->handle` takes it).
    Bound(OwnedFd),
    Listening(Box<PassiveListener>),
}

struct PepState {
    /// Where to bind (fi_getinfo's src_addr, or `fi_setname`'s); None: any
    /// address, any port.
    want: Option<SocketAddr>,
    v6: bool,
    socket: Socket,
    backlog: i32,
    /// `FI_RUSTFAB_IFACE` (the interface a wildcard bind advertises).
    iface: Option<String>,
    /// The launcher's addresses (`TcpSettings::route_hints`).
    route_hints: Vec<std::net::IpAddr>,
    eq: Option<Held<Eq>>,
}

impl PepState {
    fn wildcard(&self) -> SocketAddr {
        if self.v6 {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        }
    }

    /// Binds to the wanted address unless bound already.
    fn bind_default(&mut self) -> Result<()> {
        if let Socket::Unbound = self.socket {
            let a = self.want.unwrap_or_else(|| self.wildcard());
            self.socket = Socket::Bound(net::bound_socket(&a)?);
        }
        Ok(())
    }

    fn listening(&self) -> bool {
        matches!(self.socket, Socket::Listening(_))
    }
}

/// What a pep belongs to: its fabric (kept open while the pep is), the
/// fabric's progress engine, and the interface its wildcard name advertises.
struct Owner {
    fabric: Option<Held<Fabric>>,
    engine: Arc<Engine>,
    iface: Option<String>,
    route_hints: Vec<std::net::IpAddr>,
}

/// The passive endpoint core. See the module documentation.
pub(crate) struct Pep {
    users: Users,
    /// None only for cores driven directly (unit tests).
    _fabric: Option<Held<Fabric>>,
    engine: Arc<Engine>,
    /// The application's info, the template of every FI_CONNREQ's info.
    info: Info,
    st: Mutex<PepState>,
    /// The handle the application knows the pep by (its fid), which
    /// events name; set once the C object exists.
    handle: AtomicUsize,
    closed: AtomicBool,
    announce: Announce,
}

impl HasUsers for Pep {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Pep {
    /// A passive endpoint of `fabric` for `info` (an `FI_EP_MSG` or
    /// unspecified endpoint type, the tcp domain if it names one, a socket
    /// address if it has a source).
    pub(crate) fn new(fabric: &Arc<Fabric>, info: Info, announce: Announce) -> Result<Arc<Pep>> {
        let of = Owner {
            fabric: Some(Held::new(fabric.clone())),
            engine: fabric.engine.clone(),
            iface: fabric.settings.tcp.iface.clone(),
            route_hints: fabric.settings.tcp.route_hints.clone(),
        };
        Pep::build(of, info, announce)
    }

    fn build(of: Owner, info: Info, announce: Announce) -> Result<Arc<Pep>> {
        let ep_type = info.ep.as_ref().map_or(FI_EP_UNSPEC, |e| e.ep_type);
        if ep_type != FI_EP_MSG && ep_type != FI_EP_UNSPEC {
            return Err(Error::INVAL);
        }
        if let Some(name) = info.domain.as_ref().and_then(|d| d.name.as_deref()) {
            // Every transport's connected endpoints set up over TCP.
            if crate::core::domain::TransportKind::from_domain_name(name).is_none() {
                return Err(Error::INVAL);
            }
        }
        let want = match &info.src_addr {
            Some(b) => match Addr::parse(info.addr_format, b) {
                Ok((Addr::Inet(a), _)) => Some(a),
                _ => return Err(Error::INVAL),
            },
            None => None,
        };
        let v6 = want.map_or(info.addr_format == FI_SOCKADDR_IN6, |a| a.is_ipv6());
        Ok(Arc::new(Pep {
            users: Users::default(),
            _fabric: of.fabric,
            engine: of.engine,
            st: Mutex::new(PepState {
                want,
                v6,
                socket: Socket::Unbound,
                backlog: DEFAULT_BACKLOG,
                iface: of.iface,
                route_hints: of.route_hints,
                eq: None,
            }),
            info,
            handle: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            announce,
        }))
    }

    pub(crate) fn info(&self) -> &Info {
        &self.info
    }

    pub(crate) fn handle(&self) -> usize {
        self.handle.load(Ordering::Acquire)
    }

    pub(crate) fn set_handle(&self, h: usize) {
        self.handle.store(h, Ordering::Release);
    }

    /// `fi_pep_bind` with an EQ: its waits must progress this pep (an EQ of
    /// another fabric would not otherwise).
    pub(crate) fn bind_eq(&self, eq: Arc<Eq>) -> Result<()> {
        eq.wait().add_engine(&self.engine)?;
        self.st.lock().eq = Some(Held::new(eq));
        Ok(())
    }

    /// `fi_setname`: binds `a` now (not once listening).
    pub(crate) fn set_name(&self, a: SocketAddr) -> Result<()> {
        let mut st = self.st.lock();
        if st.listening() {
            return Err(Error::OPBADSTATE);
        }
        if a.is_ipv6() != st.v6 && st.want.is_some() {
            return Err(Error::INVAL);
        }
        let s = net::bound_socket(&a)?;
        st.v6 = a.is_ipv6();
        st.want = Some(a);
        st.socket = Socket::Bound(s);
        Ok(())
    }

    /// `fi_getname`: like an RDM endpoint's name, dialable (a wildcard bind
    /// names a reachable interface), with the bound port.
    pub(crate) fn name(&self) -> Result<SocketAddr> {
        let mut st = self.st.lock();
        st.bind_default()?;
        let bound = match &st.socket {
            Socket::Bound(s) => net::local_addr(s.as_fd())?,
            Socket::Listening(l) => l.local_addr()?,
            Socket::Unbound => return Err(Error::INVAL),
        };
        Ok(advertised_addr_with(
            bound,
            st.iface.as_deref(),
            &st.route_hints,
            &net::interfaces(),
            net::route_source,
        ))
    }

    /// `fi_control(FI_BACKLOG)`: applies at once when listening.
    pub(crate) fn set_backlog(&self, backlog: i32) -> Result<()> {
        if backlog <= 0 {
            return Err(Error::INVAL);
        }
        let mut st = self.st.lock();
        st.backlog = backlog;
        if let Socket::Listening(l) = &st.socket {
            l.set_backlog(backlog)?;
        }
        Ok(())
    }

    /// `fi_listen` (again: nothing to do). Connection events need an EQ.
    pub(crate) fn listen(self: &Arc<Self>) -> Result<()> {
        let wait_fd = {
            let mut st = self.st.lock();
            if st.listening() {
                return Ok(());
            }
            if st.eq.is_none() {
                return Err(Error::NOEQ);
            }
            st.bind_default()?;
            let Socket::Bound(sock) = std::mem::replace(&mut st.socket, Socket::Unbound) else {
                return Err(Error::INVAL);
            };
            let l = Box::new(PassiveListener::on(sock, st.backlog)?);
            let fd = l.wait_fd();
            st.socket = Socket::Listening(l);
            fd
        };
        self.engine.watch_fd(wait_fd, crate::sys::IN)?;
        self.engine.add_source(self.clone());
        Ok(())
    }

    /// `fi_endpoint` with `info->handle` = this pep: its bound socket
    /// becomes the active endpoint's (fi_endpoint(3): "the new endpoint will
    /// use the address of the passive endpoint"). Not while it listens.
    pub(crate) fn take_bound(&self) -> Result<OwnedFd> {
        let mut st = self.st.lock();
        if st.listening() {
            return Err(Error::INVAL);
        }
        st.bind_default()?;
        match std::mem::replace(&mut st.socket, Socket::Unbound) {
            Socket::Bound(s) => Ok(s),
            other => {
                st.socket = other;
                Err(Error::INVAL)
            }
        }
    }

    /// `fi_close`: leaves the engine; pending handshakes and requests not
    /// announced yet close (their clients see the connection close).
    pub(crate) fn close(self: &Arc<Self>) {
        self.closed.store(true, Ordering::Release);
        let wait_fd = match &self.st.lock().socket {
            Socket::Listening(l) => Some(l.wait_fd()),
            _ => None,
        };
        if let Some(fd) = wait_fd {
            self.engine.unwatch_fd(fd);
            let src: Arc<dyn Source> = self.clone();
            self.engine.remove_source(&src);
        }
        let mut st = self.st.lock();
        st.socket = Socket::Unbound;
        st.eq = None;
    }
}

impl Source for Pep {
    /// A listener's events are no peer's ring: `false`.
    fn progress(&self) -> bool {
        self.listen_pass();
        false
    }
}

impl Pep {
    /// One pass of the listener ([`Source::progress`]).
    fn listen_pass(&self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let Some(mut g) = self.st.try_lock() else { return };
        let st = &mut *g;
        let Socket::Listening(l) = &mut st.socket else {
            return;
        };
        l.poll();
        let Some(eq) = st.eq.as_ref() else { return };
        while let Some(req) = l.next() {
            if let Err(req) = (self.announce)(self, eq.arc(), ConnRequest(req)) {
                // The EQ is full: in order, next pass.
                l.put_back(req.0);
                break;
            }
        }
    }
}

/// A connection request a passive endpoint read: the client's data and
/// addresses, and the connection, until `fi_endpoint` takes it (the server
/// side of that connection, [`crate::core::connected::Origin::Request`]) or
/// `fi_reject` refuses it.
pub(crate) struct ConnRequest(Incoming);

impl ConnRequest {
    /// The client's connection data.
    pub(crate) fn data(&self) -> &[u8] {
        self.0.data()
    }

    /// Our address on the connection.
    pub(crate) fn local(&self) -> SocketAddr {
        self.0.local()
    }

    /// The client's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.0.peer()
    }

    /// `fi_reject`: the client gets `data` (the caller checked its length)
    /// with its refusal, then the connection closes.
    pub(crate) fn reject(self, data: &[u8]) {
        self.0.reject(data)
    }

    /// The transport's request, for the endpoint that takes it.
    pub(super) fn into_incoming(self) -> Incoming {
        self.0
    }
}

/// A connection request the application holds (`FI_CLASS_CONNREQ`): the
/// accepted connection until it is accepted (taken by `fi_endpoint`) or
/// rejected; either consumes it.
pub(crate) struct ConnReq {
    req: Mutex<Option<ConnRequest>>,
}

impl ConnReq {
    pub(crate) fn new(req: ConnRequest) -> ConnReq {
        ConnReq {
            req: Mutex::new(Some(req)),
        }
    }

    /// Consumes the request (a second use is `-FI_EINVAL`).
    pub(crate) fn take(&self) -> Result<ConnRequest> {
        self.req.lock().take().ok_or(Error::INVAL)
    }
}

#[cfg(test)]
mod tests;
