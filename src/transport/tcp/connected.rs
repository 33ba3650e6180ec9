//! The transport of a connected (`FI_EP_MSG`) endpoint: exactly one TCP
//! connection — the state machine of [`super::conn`], as on RDM ports — set
//! up with the handshake of [`super::cm`], then carrying the same records as
//! an RDM endpoint's connections (framing, backpressure and the two-phase
//! placement are shared: [`super::framing`]); and the listening side of
//! passive endpoints ([`PassiveListener`]: a [`Listener`] whose handshakes
//! are connection requests, [`ConnRequest`]).
//!
//! [`ConnectedPort`] is the endpoint core's [`Port`]; the endpoint's
//! connection management calls (`fi_connect`, `fi_accept`, `fi_shutdown`,
//! names) reach the same state through [`Connection`]. Both are only used
//! with the endpoint's lock held (the port lives inside the endpoint core),
//! so the mutex here is never contended; it only makes the sharing safe.
//!
//! States ([`LinkState`]): `Idle` (a client before `fi_connect`),
//! `Accepting` (a server endpoint holding the connection of a connection
//! request until `fi_accept`), `Connecting` (TCP connect, then the
//! CONNREQ/answer exchange), `Up`, `Down` (final: shut down, refused or
//! failed). Every change the application must hear about is queued as a
//! [`CmEvent`] for the endpoint layer, which turns it into an EQ event:
//! * `Connected` — `FI_CONNECTED` (client: with the server's data);
//! * `Refused` — an `FI_ECONNREFUSED` error event (reject, with the
//!   server's data) or the connect error (refused port, unreachable,
//!   `FI_ETIMEDOUT` after [`super::CONNECT_TIMEOUT`]);
//! * `Shutdown` — `FI_SHUTDOWN`: our `fi_shutdown` (outstanding operations
//!   end with `FI_ECANCELED`) or the peer's (BYE, end of stream, reset,
//!   keepalive / user timeout: `FI_ECONNRESET`). At most one per endpoint.
//!
//! Answers: the peer's records are charged for the answers they make the
//! endpoint queue ([`super::budget`], as on RDM ports): at the budget its
//! socket is not read, and past the budget's timeout there the connection
//! is cut off (`Shutdown` with `FI_ECONNRESET`).
//!
//! Waiting: the socket and a deadline timer sit in the port's own epoll
//! set, which the domain's engine nests (and, through it, the EQ's and CQs'
//! wait objects): a sleeper wakes when the connect completes, the answer
//! arrives, data arrives or the peer goes away.
//!
//! Shared memory (docs/shm.md, Connected endpoints): an endpoint on the shm
//! or auto transport ([`ShmUse`]) owns a [`ShmPort`] too (its doorbell in
//! the same epoll set) and offers it in its CONNREQ / ACCEPT
//! ([`cm::ShmOffer`]). When both ends offer and the offer checks out (same
//! host id, the peer's TCP address one of this host's, its segment opens
//! and is owned by the pid it claims), every record of the connection goes
//! through the peer's shm ring, and only records of that peer — its token,
//! and the pid the kernel gave its doorbell announcement — are taken from
//! ours ([`PeerOnly`]; anything else is dropped and logged). The TCP
//! connection then carries BYE only and tells of the peer's end (end of
//! stream, reset, keepalive); before that end is reported, the ring is
//! drained, so what the peer sent before its BYE is delivered first. On
//! `shm` a peer that cannot be reached so is refused (`FI_ECONNREFUSED`);
//! on `auto` a peer on another host gets the TCP data path.

use super::budget::{self, Account, PeerBudget};
use super::cm::{self, CmKind, ShmOffer, CM_DATA_MAX};
use super::conn::{Alarm, Conn, CoreSink, Phase, Read, Ready};
use super::framing::{Body, Cork, OutRecord};
use super::hello::Family;
use super::listener::{Handshake, Listener, ListenerOptions};
use super::{TcpSettings, CONNECT_TIMEOUT, COPY_MAX, EAGER_MAX, HELLO_TIMEOUT, QUEUE_HIGH_WATER, SCRATCH};
use crate::base::error::{Error, Result};
use crate::sys::net;
use crate::sys::{Epoll, IN};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, Limits, WireHdr};
use crate::transport::shm::ShmPort;
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Place, Port, Sent};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one peer of a connected endpoint, as the endpoint core names it
/// (`EpConfig::fixed_peer`). The port ignores destination addresses: there
/// is only the connection.
pub(crate) const CONNECTED_PEER: Addr = Addr::Inet(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));

/// Connection requests a passive endpoint holds at most: incomplete
/// handshakes and requests read but not yet announced (see [`Listener`]).
pub(crate) const MAX_REQUESTS: usize = 256;

const TOKEN_TIMER: u64 = 0;
const TOKEN_SOCK: u64 = 1;
/// The shm port's doorbell (shm data path): progressed by its own poll.
const TOKEN_SHM: u64 = 2;

/// With the shm data path, the TCP connection carries only BYE: it is read
/// on every this many passes (a system call; a sleeper its socket woke
/// gets there within as many passes, the epoll set is level-triggered).
const TCP_IDLE_PERIOD: u32 = 16;
/// Records from others than the connected peer logged at most (each one
/// is dropped).
const DROPS_LOGGED: u64 = 8;

/// Whether a connected endpoint moves its data over shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShmUse {
    /// tcp: never (no shm port, no offer).
    Never,
    /// shm: always; a peer that cannot be reached over shm is refused.
    Only,
    /// auto: to a peer on this host; TCP to the others.
    Local,
}

/// Where the connection is, as the endpoint layer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum LinkState {
    Idle = 0,
    Accepting = 1,
    Connecting = 2,
    Up = 3,
    Down = 4,
}

impl LinkState {
    fn from_u8(v: u8) -> LinkState {
        match v {
            0 => LinkState::Idle,
            1 => LinkState::Accepting,
            2 => LinkState::Connecting,
            3 => LinkState::Up,
            _ => LinkState::Down,
        }
    }
}

/// A connection-management change for the endpoint layer (see the module
/// documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CmEvent {
    Connected(Vec<u8>),
    Refused { err: Error, data: Vec<u8> },
    Shutdown { err: Error },
}

/// How a connected endpoint's transport is set up.
#[derive(Clone, Debug)]
pub(crate) struct ConnOptions {
    /// What records the peer may send (the endpoint's limits).
    pub(crate) limits: Limits,
    /// `FI_RUSTFAB_TCP_COALESCE` and friends.
    pub(crate) settings: TcpSettings,
    /// The shm data path (the endpoint's transport).
    pub(crate) shm: ShmUse,
}

/// A connection request a passive endpoint read: the accepted connection
/// (nothing more is read from it), the client's data and RTS prefix, until
/// the application accepts it (a server endpoint takes the connection:
/// [`Connection::new_accepting`]) or rejects it ([`ConnRequest::reject`]).
pub(crate) struct ConnRequest {
    /// Boxed: a request travels (through the C face's announce and back)
    /// far more than the connection's buffers should.
    conn: Box<Conn>,
    data: Vec<u8>,
    rts_prefix: usize,
    /// The client's shm offer (checked at `fi_accept`).
    offer: Option<Box<ShmOffer>>,
    local: SocketAddr,
    peer: SocketAddr,
}

impl ConnRequest {
    /// A handshake's first record, if it is a valid CONNREQ (anything else
    /// closes the connection).
    fn from_handshake(h: Handshake) -> Option<ConnRequest> {
        let Handshake { conn, hdr, payload } = h;
        match cm::parse(&hdr, &payload) {
            Ok(CmKind::ConnReq) => {}
            r => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp pep: bad connection request: {r:?}");
                return None;
            }
        }
        // No addresses: the client is gone already.
        let (local, peer) = (conn.local_addr().ok()?, conn.peer_addr().ok()?);
        Some(ConnRequest {
            conn: Box::new(conn),
            data: payload,
            rts_prefix: cm::rts_prefix(&hdr),
            offer: cm::shm_offer(&hdr).map(Box::new),
            local,
            peer,
        })
    }

    /// The client's connection data.
    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    /// Our address on the connection.
    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }

    /// The client's address.
    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// `fi_reject`: REJECT with `data` (the caller checked its length),
    /// then FIN and close. A fresh connection's send buffer takes the few
    /// hundred bytes at once; if it does not, the client sees the connection
    /// close (a refusal without data). Nothing is left unread, so no reset
    /// overtakes the REJECT.
    pub(crate) fn reject(self, data: &[u8]) {
        let mut conn = self.conn;
        let (h, p) = cm::encode(CmKind::Reject, data, 0, None);
        conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        conn.set_phase(Phase::Closing);
        conn.flush(&mut Vec::new());
        conn.shutdown_write();
    }
}

/// The listening side of connected endpoints (a passive endpoint's
/// listener): connection requests in arrival order. Its epoll set holds the
/// listening socket, the handshakes and the deadline timer.
pub(crate) struct PassiveListener {
    listener: Listener,
    epoll: Epoll,
    alarm: Alarm,
    ready: Vec<(u64, u32)>,
    /// A request its owner could not take (its EQ was full), first in line.
    held: Option<ConnRequest>,
}

impl PassiveListener {
    /// Listens on `sock` (bound) with `backlog`.
    pub(crate) fn on(sock: OwnedFd, backlog: i32) -> Result<PassiveListener> {
        let opts = ListenerOptions {
            max_handshakes: MAX_REQUESTS,
            timeout: HELLO_TIMEOUT,
        };
        let listener = Listener::on(sock, backlog, opts)?;
        let epoll = Epoll::new()?;
        let alarm = Alarm::new()?;
        listener.watch(&epoll)?;
        epoll.add(alarm.fd(), IN, TOKEN_TIMER)?;
        Ok(PassiveListener {
            listener,
            epoll,
            alarm,
            ready: Vec::with_capacity(64),
            held: None,
        })
    }

    pub(crate) fn local_addr(&self) -> Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Readable when [`PassiveListener::poll`] has something to do.
    pub(crate) fn wait_fd(&self) -> RawFd {
        self.epoll.fd()
    }

    pub(crate) fn set_backlog(&self, backlog: i32) -> Result<()> {
        self.listener.set_backlog(backlog)
    }

    /// Accepts, reads handshakes, enforces their deadlines: one
    /// zero-timeout `epoll_wait`.
    pub(crate) fn poll(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        for &(token, _) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                t => self.listener.event(&self.epoll, t),
            }
        }
        self.ready = ready;
        if self.alarm.due() {
            self.listener.check_deadlines(&self.epoll, Instant::now());
        }
        self.alarm.arm(self.listener.next_deadline());
    }

    /// The oldest connection request read (invalid ones are dropped).
    pub(crate) fn next(&mut self) -> Option<ConnRequest> {
        if let Some(r) = self.held.take() {
            return Some(r);
        }
        while let Some(h) = self.listener.next() {
            if let Some(r) = ConnRequest::from_handshake(h) {
                return Some(r);
            }
        }
        None
    }

    /// Gives back the request [`PassiveListener::next`] returned: its owner
    /// cannot take it now; it comes first next time.
    pub(crate) fn put_back(&mut self, r: ConnRequest) {
        self.held = Some(r);
    }
}

/// The connection and everything about it. See the module documentation.
struct Inner {
    state: LinkState,
    /// Before `fi_connect`: the socket the endpoint is bound to.
    bound: Option<OwnedFd>,
    /// The connection; after it ended (`Down`) an established one stays
    /// open, out of the epoll set, until the endpoint closes (so that a FIN,
    /// not a reset, ends it).
    conn: Option<Conn>,
    /// Our address (bound or connected), for `fi_getname`.
    local: Option<SocketAddr>,
    /// The peer's address, for `fi_getpeer`.
    peer: Option<SocketAddr>,
    /// The address family of the endpoint.
    v6: bool,
    epoll: Epoll,
    /// The connect deadline.
    alarm: Alarm,
    limits: Limits,
    /// `Delivery::sent` reports for the next pass.
    sent: Vec<(u64, Result<()>)>,
    events: VecDeque<CmEvent>,
    /// A failure (or our fi_shutdown) to act on in the next pass.
    doomed: Option<Error>,
    scratch: Vec<u8>,
    ready: Vec<(u64, u32)>,
    connect_timeout: Duration,
    /// The RTS prefix we ask the peer for (buffered receives; sent in our
    /// CONNREQ or ACCEPT) and the one the peer asked us for (from its).
    rts_prefix: usize,
    peer_rts_prefix: usize,
    /// Send coalescing; `corked`: records wait in the queue for a pass.
    cork: Cork,
    corked: bool,
    /// The shm data path: whether to use it, the endpoint's shm port (not
    /// with `ShmUse::Never`), and — once the connection uses it — the
    /// peer's checked offer.
    shm_use: ShmUse,
    shm: Option<ShmPort>,
    via_shm: Option<ShmOffer>,
    /// Server: the client's offer, from its CONNREQ.
    peer_offer: Option<ShmOffer>,
    /// Passes with the shm data path (TCP is read every TCP_IDLE_PERIOD).
    tick: u32,
    /// Records dropped because they were not the connected peer's.
    dropped: u64,
    /// The peer's budget for queued answers, its account, and the passes
    /// so far (see [`budget`]): the one connection is budgeted as an RDM
    /// port's connections are.
    budget: PeerBudget,
    acct: Account,
    pass: u64,
}

/// What the endpoint layer and the port share.
pub(crate) struct Connection {
    inner: Mutex<Inner>,
    /// The current [`LinkState`], readable without the lock (post checks).
    state: AtomicU8,
    /// `events` is not empty (checked without the lock after every pass).
    has_events: AtomicBool,
    /// The connection's records go over shm (readable without the lock).
    via_shm: AtomicBool,
    wait_fd: RawFd,
}

impl Connection {
    fn wrap(c: Inner) -> Arc<Connection> {
        let wait_fd = c.epoll.fd();
        let state = AtomicU8::new(c.state as u8);
        Arc::new(Connection {
            inner: Mutex::new(c),
            state,
            has_events: AtomicBool::new(false),
            via_shm: AtomicBool::new(false),
            wait_fd,
        })
    }

    /// A client endpoint bound to `src` (fi_getinfo's `src_addr`, or the
    /// wildcard: the kernel picks the interface at connect) so that
    /// `fi_getname` answers before `fi_connect`.
    pub(crate) fn new_client(src: SocketAddr, opts: &ConnOptions) -> Result<Arc<Connection>> {
        let mut c = Inner::new(Family::of(&src), opts)?;
        c.bind(src)?;
        Ok(Connection::wrap(c))
    }

    /// A client endpoint on a socket a passive endpoint bound (`fi_setname`
    /// on the pep, then `fi_endpoint` with `info->handle` = the pep).
    pub(crate) fn new_on_socket(sock: OwnedFd, opts: &ConnOptions) -> Result<Arc<Connection>> {
        let local = net::local_addr(sock.as_fd())?;
        let mut c = Inner::new(Family::of(&local), opts)?;
        c.bound = Some(sock);
        c.local = Some(local);
        Ok(Connection::wrap(c))
    }

    /// A server endpoint for a connection request (`fi_endpoint` with
    /// `info->handle` = the request).
    pub(crate) fn new_accepting(req: ConnRequest, opts: &ConnOptions) -> Result<Arc<Connection>> {
        let mut c = Inner::new(Family::of(&req.local), opts)?;
        c.local = Some(req.local);
        c.peer = Some(req.peer);
        c.peer_rts_prefix = req.rts_prefix;
        c.peer_offer = req.offer.map(|o| *o);
        c.conn = Some(*req.conn);
        c.state = LinkState::Accepting;
        Ok(Connection::wrap(c))
    }

    /// The port the endpoint core drives.
    pub(crate) fn port(self: &Arc<Self>) -> ConnectedPort {
        ConnectedPort {
            shared: self.clone(),
            polled: false,
            stalled: false,
        }
    }

    pub(crate) fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Acquire))
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut c = self.inner.lock();
        let r = f(&mut c);
        self.state.store(c.state as u8, Ordering::Release);
        self.via_shm.store(c.via_shm.is_some(), Ordering::Release);
        if !c.events.is_empty() {
            self.has_events.store(true, Ordering::Release);
        }
        r
    }

    /// `fi_connect` (the endpoint layer checked `data` and runs a progress
    /// pass right after). Failures of the connection itself are events.
    pub(crate) fn connect(&self, to: SocketAddr, data: &[u8]) -> Result<()> {
        self.with(|c| c.connect(to, data))
    }

    /// `fi_accept`.
    pub(crate) fn accept(&self, data: &[u8]) -> Result<()> {
        self.with(|c| c.accept(data))
    }

    /// `fi_shutdown` (acted on by the next progress pass).
    pub(crate) fn shutdown(&self) {
        self.with(|c| c.shutdown())
    }

    /// `fi_setname` before `fi_connect`.
    pub(crate) fn bind(&self, a: SocketAddr) -> Result<()> {
        self.with(|c| {
            if c.state != LinkState::Idle {
                return Err(Error::OPBADSTATE);
            }
            c.bind(a)
        })
    }

    pub(crate) fn local(&self) -> Option<SocketAddr> {
        self.inner.lock().local
    }

    pub(crate) fn peer(&self) -> Option<SocketAddr> {
        self.inner.lock().peer
    }

    pub(crate) fn is_v6(&self) -> bool {
        self.inner.lock().v6
    }

    /// Whether the connection's records go over shared memory.
    pub(crate) fn via_shm(&self) -> bool {
        self.via_shm.load(Ordering::Acquire)
    }

    /// Connection-management changes since the last call (cheap when
    /// there are none: called after every progress pass).
    pub(crate) fn take_cm_events(&self) -> Vec<CmEvent> {
        if !self.has_events.load(Ordering::Acquire) || !self.has_events.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        self.inner.lock().events.drain(..).collect()
    }
}

impl Inner {
    fn new(family: Family, opts: &ConnOptions) -> Result<Inner> {
        let epoll = Epoll::new()?;
        let alarm = Alarm::new()?;
        epoll.add(alarm.fd(), IN, TOKEN_TIMER)?;
        let shm = match opts.shm {
            ShmUse::Never => None,
            ShmUse::Only | ShmUse::Local => {
                let limits = Limits {
                    max_payload: crate::transport::shm::EAGER_MAX,
                    max_chunk: crate::transport::shm::EAGER_MAX,
                    max_iov: opts.limits.max_iov,
                };
                let p = ShmPort::new(crate::transport::addr::shm_token_random(), limits)?;
                epoll.add(p.wait_fd(), IN, TOKEN_SHM)?;
                Some(p)
            }
        };
        Ok(Inner {
            state: LinkState::Idle,
            bound: None,
            conn: None,
            local: None,
            peer: None,
            v6: family == Family::V6,
            epoll,
            alarm,
            limits: opts.limits,
            sent: Vec::new(),
            events: VecDeque::new(),
            doomed: None,
            scratch: vec![0u8; SCRATCH],
            ready: Vec::with_capacity(8),
            connect_timeout: CONNECT_TIMEOUT,
            rts_prefix: 0,
            peer_rts_prefix: 0,
            cork: Cork::new(&opts.settings),
            corked: false,
            shm_use: opts.shm,
            shm,
            via_shm: None,
            peer_offer: None,
            tick: 0,
            dropped: 0,
            budget: opts.settings.budget,
            acct: Account::default(),
            pass: 0,
        })
    }

    /// What we offer in our CONNREQ / ACCEPT: our segment, if we have one.
    fn my_offer(&self) -> Option<ShmOffer> {
        self.shm.as_ref().map(|p| ShmOffer {
            host: crate::transport::addr::host_id(),
            token: p.token(),
            pid: crate::sys::getpid(),
        })
    }

    /// Checks a peer's shm offer (None: it made none): the shm data path to
    /// it, or why not.
    fn check_offer(&mut self, offer: Option<ShmOffer>) -> core::result::Result<ShmOffer, Refusal> {
        let Some(o) = offer else {
            return Err(Refusal::NotLocal("the peer offers no shared memory"));
        };
        if o.host != crate::transport::addr::host_id() {
            return Err(Refusal::NotLocal("the peer's host id is not ours"));
        }
        // A host id is not a secret (auto addresses carry it): the peer's
        // end of the TCP connection must be on this host too.
        let peer_ip = self
            .conn
            .as_ref()
            .and_then(|c| c.peer_addr().ok())
            .or(self.peer)
            .map(|a| a.ip());
        if !peer_ip.is_some_and(crate::sys::net::ip_is_local) {
            return Err(Refusal::NotLocal("the peer's address is not one of this host's"));
        }
        let Some(shm) = self.shm.as_mut() else {
            return Err(Refusal::Bad("an offer we did not ask for"));
        };
        match shm.open_peer_owner(o.token) {
            Ok(pid) if pid == o.pid => Ok(o),
            Ok(_) => Err(Refusal::Bad("the offered segment belongs to another process")),
            Err(e) if e == Error::ADDRNOTAVAIL => Err(Refusal::Gone("the offered segment does not exist (any more)")),
            Err(_) => Err(Refusal::Bad("the offered segment does not open")),
        }
    }

    /// Decides the data path from the peer's offer (`offer`; `answered`:
    /// the peer is the server, which offers only when it took ours): Ok(the
    /// peer's offer, None for TCP), or the reason to refuse.
    fn choose_path(
        &mut self,
        offer: Option<ShmOffer>,
        answered: bool,
    ) -> core::result::Result<Option<ShmOffer>, Refusal> {
        if self.shm.is_none() {
            return match offer {
                Some(_) if answered => Err(Refusal::Bad("an shm offer we did not ask for")),
                _ => Ok(None),
            };
        }
        match self.check_offer(offer) {
            Ok(o) => Ok(Some(o)),
            // auto: TCP to a peer on another host (a server that offers
            // has switched to shm already: refuse rather than mismatch).
            Err(Refusal::NotLocal(_)) if self.shm_use == ShmUse::Local && (offer.is_none() || !answered) => Ok(None),
            Err(r) => Err(r),
        }
    }

    /// Says (FI_LOG_LEVEL=info) which way the connection's data goes.
    fn log_path(&self) {
        match self.via_shm {
            Some(o) => crate::base::log::log_info!(
                crate::abi::FI_LOG_EP_CTRL,
                "connected endpoint: data to {:?} over shm (segment {:#x}, pid {})",
                self.peer,
                o.token,
                o.pid
            ),
            None => crate::base::log::log_info!(
                crate::abi::FI_LOG_EP_CTRL,
                "connected endpoint: data to {:?} over tcp",
                self.peer
            ),
        }
    }

    /// Takes the records of our shm ring: only the connected peer's.
    /// Whether the peer moved (`Port::poll`).
    fn poll_shm(&mut self, d: &mut dyn Delivery) -> bool {
        let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) else {
            return false;
        };
        let mut f = PeerOnly {
            d,
            peer: o,
            dropped: 0,
            bye: false,
        };
        let moved = Port::poll(shm, &mut f);
        let (dropped, bye) = (f.dropped, f.bye);
        let failed = Port::take_events(shm).iter().any(|e| *e.peer() == Addr::Shm(o.token));
        if dropped > 0 {
            if self.dropped < DROPS_LOGGED {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_DATA,
                    "connected endpoint over shm: dropped {dropped} record(s) not from the connected peer (token {:#x}, pid {})",
                    o.token,
                    o.pid
                );
            }
            self.dropped += dropped;
        }
        if (failed || bye) && self.doomed.is_none() {
            // The peer's ring broke (or its segment went away under a
            // send), or it said BYE there: the end, in this pass, before a
            // rendezvous it had announced is pulled (it cancelled it).
            self.doomed = Some(crate::transport::PEER_FAILED);
        }
        moved
    }

    fn bind(&mut self, a: SocketAddr) -> Result<()> {
        if a.is_ipv6() != self.v6 {
            return Err(Error::INVAL);
        }
        let s = net::bound_socket(&a)?;
        self.local = Some(net::local_addr(s.as_fd())?);
        self.bound = Some(s);
        Ok(())
    }

    /// Whether the stream waits for the core (backpressure).
    fn stalled(&self) -> bool {
        matches!(self.state, LinkState::Connecting | LinkState::Up) && self.conn.as_ref().is_some_and(|c| c.stalled())
    }

    fn update_interest(&mut self) {
        if let Some(c) = self.conn.as_mut() {
            c.update(&self.epoll);
        }
    }

    /// Puts the connection in the epoll set; a failure dooms it.
    fn watch(&mut self) {
        let Some(c) = self.conn.as_mut() else { return };
        if c.interest().is_none() {
            if let Err(e) = c.watch(&self.epoll, TOKEN_SOCK) {
                self.doomed = Some(e);
            }
        }
    }

    fn connect(&mut self, to: SocketAddr, data: &[u8]) -> Result<()> {
        if self.state != LinkState::Idle {
            return Err(Error::OPBADSTATE);
        }
        if data.len() > CM_DATA_MAX || to.is_ipv6() != self.v6 {
            return Err(Error::INVAL);
        }
        if to.port() == 0 || to.ip().is_unspecified() || to.ip().is_multicast() {
            return Err(Error::INVAL);
        }
        self.peer = Some(to);
        self.state = LinkState::Connecting;
        match Conn::dial(self.bound.take(), &to, self.connect_timeout) {
            Ok(mut c) => {
                let (h, p) = cm::encode(CmKind::ConnReq, data, self.rts_prefix, self.my_offer());
                c.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
                self.conn = Some(c);
                self.watch();
                self.arm_timer();
            }
            // Refused at once (loopback), unreachable, no route...: an
            // error event, like a failure found later.
            Err(e) => self.doomed = Some(e),
        }
        Ok(())
    }

    /// The TCP connection is up: send the CONNREQ, wait for the answer.
    fn connected(&mut self) {
        if let Some(c) = self.conn.as_mut() {
            c.set_phase(Phase::AwaitAnswer);
            c.set_deadline(None);
            self.local = c.local_addr().ok().or(self.local);
        }
        self.flush();
    }

    fn accept(&mut self, data: &[u8]) -> Result<()> {
        if self.state != LinkState::Accepting {
            return Err(Error::OPBADSTATE);
        }
        if data.len() > CM_DATA_MAX {
            return Err(Error::INVAL);
        }
        if self.conn.is_none() {
            return Err(Error::OPBADSTATE);
        }
        let via_shm = match self.choose_path(self.peer_offer, false) {
            Ok(v) => v,
            Err(Refusal::NotLocal(why) | Refusal::Bad(why) | Refusal::Gone(why)) => {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "connected endpoint: connection from {:?} refused: {why}",
                    self.peer
                );
                self.refuse_request();
                return Ok(());
            }
        };
        self.via_shm = via_shm;
        self.log_path();
        let offer = via_shm.and_then(|_| self.my_offer());
        let Some(c) = self.conn.as_mut() else {
            return Err(Error::OPBADSTATE);
        };
        let (h, p) = cm::encode(CmKind::Accept, data, self.rts_prefix, offer);
        c.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        c.set_phase(Phase::Up);
        self.state = LinkState::Up;
        // The ACCEPT is queued ahead of any data, so the connection is ours
        // to use now; a failure to write it ends it like any other.
        self.events.push_back(CmEvent::Connected(Vec::new()));
        let read_ahead = c.reader().holds_input();
        self.watch();
        self.flush();
        if read_ahead {
            // Bytes read ahead with the CONNREQ: the socket may show
            // nothing more, so the next pass must not wait for it.
            self.alarm.ring();
        }
        Ok(())
    }

    /// `fi_accept` of a request whose shm offer does not do: REJECT, close,
    /// and the endpoint's connection ends (an error event).
    fn refuse_request(&mut self) {
        if let Some(mut c) = self.conn.take() {
            let (h, p) = cm::encode(CmKind::Reject, &[], 0, None);
            c.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
            c.set_phase(Phase::Closing);
            c.flush(&mut Vec::new());
            c.shutdown_write();
        }
        self.state = LinkState::Down;
        self.events.push_back(CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: Vec::new(),
        });
    }

    fn shutdown(&mut self) {
        match self.state {
            LinkState::Idle | LinkState::Down => {}
            LinkState::Up => {
                // shm: BYE behind our records in the peer's ring (the slot
                // closes), so it ends the connection in order and pulls
                // nothing of what we cancel.
                if self.via_shm.is_some() {
                    if let Some(s) = self.shm.as_mut() {
                        s.close();
                    }
                }
                // Orderly: what is queued and fits goes out, then BYE, then
                // FIN. Whatever could not be written is cancelled.
                self.flush();
                if let Some(c) = self.conn.as_mut() {
                    if c.queue().is_empty() {
                        c.queue_mut()
                            .push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
                        self.flush();
                    }
                }
                if let Some(c) = self.conn.as_ref() {
                    c.shutdown_write();
                }
                self.doomed = Some(Error::CANCELED);
            }
            LinkState::Accepting | LinkState::Connecting => self.doomed = Some(Error::CANCELED),
        }
    }

    /// Writes what the queue holds; a failure ends the connection in the
    /// next pass.
    fn flush(&mut self) {
        if !matches!(self.state, LinkState::Connecting | LinkState::Up) || self.doomed.is_some() {
            return;
        }
        let Some(c) = self.conn.as_mut() else { return };
        c.flush(&mut self.sent);
        if let Some(e) = c.take_doomed() {
            self.doomed = Some(e);
        }
        c.update(&self.epoll);
    }

    fn send(&mut self, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        if self.state != LinkState::Up || self.doomed.is_some() {
            return Err(Error::NOTCONN);
        }
        if let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) {
            return Port::send(shm, &Addr::Shm(o.token), hdr, payload, copy);
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(Error::NOTCONN);
        };
        let n = payload.len();
        if n > u32::MAX as usize {
            return Err(Error::MSGSIZE);
        }
        if c.queue().unsent() >= QUEUE_HIGH_WATER {
            return Err(Error::AGAIN);
        }
        let mut h = *hdr;
        h.payload = n as u32;
        let body = match payload {
            Payload::None => Body::None,
            Payload::Bytes(b) => Body::Owned(super::framing::outgoing_payload(&mut h, b)),
            Payload::Iov(iov, off, len) => Body::Iov(iov.sub(off, len)),
        };
        c.queue_mut().push(OutRecord::new(h.to_bytes(), body));
        // Eager messages may wait for the pass that follows a burst (see
        // `Cork`); rendezvous records go at once.
        let unsent = c.queue().unsent();
        if h.op == proto::op::EAGER && self.cork.defer(n, unsent) {
            self.corked = true;
        } else {
            self.flush();
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(Error::NOTCONN);
        };
        if c.queue().is_empty() {
            return Ok(Sent::Done);
        }
        // As on the RDM transport: small payloads are copied so the buffer
        // is the application's again at once; larger ones stay in place
        // until written, reported through `Delivery::sent`.
        if let Some(r) = c.queue_mut().back_mut() {
            if copy || n <= COPY_MAX {
                r.make_owned();
            }
            r.notify = Some(h.msg_id);
        }
        Ok(Sent::Queued)
    }

    fn send_ctl(&mut self, hdr: &WireHdr) -> Result<()> {
        if self.state != LinkState::Up || self.doomed.is_some() {
            return Err(Error::CONNRESET);
        }
        if let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) {
            return Port::send_ctl(shm, &Addr::Shm(o.token), hdr);
        }
        let Some(c) = self.conn.as_mut() else {
            return Err(Error::CONNRESET);
        };
        let mut h = *hdr;
        h.payload = 0;
        c.queue_mut().push_reply(OutRecord::new(h.to_bytes(), Body::None));
        self.flush();
        Ok(())
    }

    // ------------------------------------------------------------ progress

    /// Writes what waits for a pass (send coalescing).
    fn flush_corked(&mut self) {
        if self.corked {
            self.corked = false;
            self.flush();
        }
    }

    /// Payload bytes one more record could carry now.
    fn room(&mut self) -> usize {
        if self.state != LinkState::Up {
            return 0;
        }
        if let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) {
            return Port::room(shm, &Addr::Shm(o.token));
        }
        match self.conn.as_ref() {
            Some(conn) => super::room_after(conn.queue().unsent()),
            None => 0,
        }
    }

    /// Returns whether the shm ring saw the peer move (`Port::poll`); the
    /// TCP side's reads say nothing (false).
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        let mut moved = false;
        if self.via_shm.is_some() && self.state == LinkState::Up {
            moved = self.poll_shm(d);
            self.tick = self.tick.wrapping_add(1);
            let quiet = self.doomed.is_none() && self.sent.is_empty() && !self.corked;
            if quiet && !self.tick.is_multiple_of(TCP_IDLE_PERIOD) {
                return moved;
            }
        }
        self.poll_tcp(d);
        moved
    }

    /// The rest of [`Inner::poll`]: the TCP side and what it reports.
    fn poll_tcp(&mut self, d: &mut dyn Delivery) {
        self.pass += 1;
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        if !matches!(self.state, LinkState::Connecting | LinkState::Up) {
            return;
        }
        // A stalled record, or records read ahead with the handshake: the
        // socket may show nothing for them.
        if self.conn.as_ref().is_some_and(|c| c.reader().holds_input()) {
            self.read(d);
        }
        let up_and_idle = self.state == LinkState::Up
            && !self.stalled()
            && !self.alarm.armed()
            && self.conn.as_ref().is_some_and(|c| c.interest() == Some(IN));
        if up_and_idle {
            // Connected, nothing to write, no timer: readability is all
            // the epoll set could report, and a read attempt tells as much
            // (data, end of stream, error) — one system call per arrival
            // instead of two. The set is level-triggered, so not asking it
            // leaves nothing stale for sleepers.
            self.read(d);
            if let Some(e) = self.doomed.take() {
                self.teardown(e, d, None);
            }
            return;
        }
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 8, Some(Duration::ZERO));
        for &(token, ev) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                // Drained by the shm port's own poll.
                TOKEN_SHM => {}
                _ => self.sock_event(ev, d),
            }
        }
        self.ready = ready;
        if self.alarm.due() {
            let now = Instant::now();
            let late = self
                .conn
                .as_ref()
                .is_some_and(|c| c.phase() == Phase::Dialing && c.expired(now));
            if self.state == LinkState::Connecting && late {
                self.teardown(Error::TIMEDOUT, d, None);
            }
            self.cut_off(now, d);
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        self.arm_timer();
    }

    /// The connect deadline, while the connect is in progress; the
    /// budget's cut-off while the peer's records are left unread.
    fn arm_timer(&mut self) {
        let dialing = self.state == LinkState::Connecting;
        let stopped = self.state == LinkState::Up && self.acct.over_since.is_some();
        let next = self
            .conn
            .as_ref()
            .filter(|c| (dialing && c.phase() == Phase::Dialing) || stopped)
            .and_then(|c| c.deadline());
        self.alarm.arm(next);
    }

    /// The peer's records stayed unread for want of budget until the
    /// cut-off: the connection ends as if reset (its operations with
    /// `FI_ECONNRESET`, `FI_SHUTDOWN` for the endpoint).
    fn cut_off(&mut self, now: Instant, d: &mut dyn Delivery) {
        if self.state != LinkState::Up {
            return;
        }
        let Some(since) = self.acct.over_since else { return };
        if !self.conn.as_ref().is_some_and(|c| c.expired(now)) {
            return;
        }
        let peer = self.peer.map_or_else(String::new, |a| a.to_string());
        budget::log_cut_off(&peer, self.acct.counted, since);
        self.teardown(crate::transport::PEER_FAILED, d, None);
    }

    fn sock_event(&mut self, ev: u32, d: &mut dyn Delivery) {
        if !matches!(self.state, LinkState::Connecting | LinkState::Up) {
            return;
        }
        let Some(c) = self.conn.as_ref() else { return };
        match c.ready(ev) {
            Ready::Dialed(Ok(())) => self.connected(),
            Ready::Dialed(Err(e)) | Ready::Broken(e) => self.teardown(e, d, None),
            Ready::Io { write, read } => {
                if write {
                    self.flush();
                }
                if read {
                    self.read(d);
                }
            }
        }
    }

    fn read(&mut self, d: &mut dyn Delivery) {
        // A handshake record is handled between reads; bounded.
        for _ in 0..4 {
            if !matches!(self.state, LinkState::Connecting | LinkState::Up) {
                return;
            }
            let Some(c) = self.conn.as_mut() else { return };
            if c.phase() == Phase::Dialing {
                return;
            }
            let established = c.phase() == Phase::Up;
            self.acct.count(c.queue());
            let held = self.acct.held(self.pass);
            let sink = CoreSink::new(&mut *d, CONNECTED_PEER);
            let (lim, scratch) = (&self.limits, &mut self.scratch);
            let got = self
                .acct
                .read(&self.budget, self.pass, held, sink, |s| c.read(s, lim, scratch));
            if let Some(over) = got.changed {
                c.set_deadline(self.acct.deadline(&self.budget));
                if over {
                    let peer = self.peer.map_or_else(String::new, |a| a.to_string());
                    budget::log_stopped(&peer, self.acct.counted);
                }
            }
            let out = got.read;
            if got.changed.is_some() {
                self.arm_timer();
            }
            let Some(c) = self.conn.as_mut() else { return };
            match out {
                Read::Idle | Read::Stalled => {
                    c.update(&self.epoll);
                    return;
                }
                Read::Link(h) => {
                    let payload = c.link_payload().to_vec();
                    if !self.on_link(&h, payload, d) {
                        return;
                    }
                }
                Read::Ended(end) => {
                    // The peer closed, broke the protocol or failed: an
                    // abrupt end of the connection, or — before the answer —
                    // a server that refused us.
                    let e = end.error();
                    let e = if !established && e == Error::CONNRESET {
                        Error::CONNREFUSED
                    } else {
                        e
                    };
                    self.teardown(e, d, None);
                    return;
                }
            }
        }
    }

    /// A handshake record or BYE. Returns whether reading may go on.
    fn on_link(&mut self, h: &WireHdr, payload: Vec<u8>, d: &mut dyn Delivery) -> bool {
        let gone = if self.state == LinkState::Up {
            Error::CONNRESET
        } else {
            Error::CONNREFUSED
        };
        if h.op == proto::op::BYE {
            // The peer's fi_shutdown (or close): everything still expected
            // from or sent to it ends now.
            self.teardown(gone, d, None);
            return false;
        }
        let phase = self.conn.as_ref().map(|c| c.phase());
        match (phase, cm::parse(h, &payload)) {
            (Some(Phase::AwaitAnswer), Ok(CmKind::Accept)) => {
                let mut gone = false;
                match self.choose_path(cm::shm_offer(h), true) {
                    Ok(v) => {
                        self.via_shm = v;
                        self.log_path();
                    }
                    // The server accepted and closed its endpoint before we
                    // read its ACCEPT (its BYE follows): established and
                    // ended at once, as over TCP. A made-up token looks the
                    // same; nothing is sent to it either way.
                    Err(Refusal::Gone(why)) => {
                        crate::base::log::log_warn!(
                            crate::abi::FI_LOG_EP_CTRL,
                            "connected endpoint: connection to {:?} ended at once: {why}",
                            self.peer
                        );
                        gone = true;
                    }
                    Err(Refusal::NotLocal(why) | Refusal::Bad(why)) => {
                        crate::base::log::log_warn!(
                            crate::abi::FI_LOG_EP_CTRL,
                            "connected endpoint: connection to {:?} refused: {why}",
                            self.peer
                        );
                        self.teardown(
                            Error::CONNREFUSED,
                            d,
                            Some(CmEvent::Refused {
                                err: Error::CONNREFUSED,
                                data: Vec::new(),
                            }),
                        );
                        return false;
                    }
                }
                self.peer_rts_prefix = cm::rts_prefix(h);
                if let Some(c) = self.conn.as_mut() {
                    c.set_phase(Phase::Up);
                }
                self.state = LinkState::Up;
                self.events.push_back(CmEvent::Connected(payload));
                if gone {
                    self.doomed = Some(crate::transport::PEER_FAILED);
                }
                self.update_interest();
                true
            }
            (Some(Phase::AwaitAnswer), Ok(CmKind::Reject)) => {
                self.teardown(
                    Error::CONNREFUSED,
                    d,
                    Some(CmEvent::Refused {
                        err: Error::CONNREFUSED,
                        data: payload,
                    }),
                );
                false
            }
            (phase, r) => {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: unexpected handshake record on a connected endpoint in {phase:?}: {r:?}"
                );
                self.teardown(gone, d, None);
                false
            }
        }
    }

    /// Ends the connection: a payload being placed completes with `e`,
    /// queued sends too, and the endpoint layer hears about it (`event`, or
    /// the event the state calls for). The socket leaves the epoll set;
    /// an established one stays open until the endpoint closes (so that a
    /// FIN, not a reset, ends it), a failed dial is closed now.
    fn teardown(&mut self, e: Error, d: &mut dyn Delivery, event: Option<CmEvent>) {
        if self.state == LinkState::Down {
            return;
        }
        if self.state == LinkState::Up && e != Error::CANCELED && self.via_shm.is_some() {
            // The peer's end (BYE, end of stream, reset): what it wrote to
            // our ring before is delivered first (it was published before
            // the TCP side told us; bounded, as records may wait for
            // receive buffers).
            for _ in 0..64 {
                if !self.shm.as_ref().is_some_and(|s| s.has_pending()) {
                    break;
                }
                self.poll_shm(d);
            }
        }
        // An established connection that breaks (reset, end of stream,
        // keepalive or user timeout) is a peer failure, reported as on RDM
        // endpoints (transport::PEER_FAILED); our own fi_shutdown cancels.
        let e = if self.state == LinkState::Up && e != Error::CANCELED {
            crate::transport::PEER_FAILED
        } else {
            e
        };
        if let Some(c) = self.conn.as_mut() {
            c.abort_reader(&mut CoreSink::new(&mut *d, CONNECTED_PEER), e);
            for id in c.queue_mut().take_notifications() {
                d.sent(id, Err(e));
            }
            c.unwatch(&self.epoll);
        }
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        let ev = event.unwrap_or(match self.state {
            LinkState::Up | LinkState::Accepting => CmEvent::Shutdown { err: e },
            LinkState::Connecting if e == Error::CANCELED => CmEvent::Shutdown { err: e },
            _ => CmEvent::Refused {
                err: e,
                data: Vec::new(),
            },
        });
        let keep = self.state == LinkState::Up;
        self.events.push_back(ev);
        self.state = LinkState::Down;
        if !keep {
            self.conn = None;
        }
        self.arm_timer();
    }

    /// Endpoint close: an established connection says BYE (unless it was
    /// shut down already), then the socket closes after reading what is
    /// pending (so the kernel ends it with FIN, not RST).
    fn close(&mut self) {
        if self.state == LinkState::Up && self.doomed.is_none() {
            if let Some(c) = self.conn.as_mut() {
                c.queue_mut()
                    .push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
            }
            self.flush();
        }
        if let Some(mut c) = self.conn.take() {
            c.unwatch(&self.epoll);
            c.shutdown_write();
            c.discard_input();
            c.queue_mut().take_notifications();
        }
        if let Some(s) = self.shm.as_mut() {
            s.close();
        }
        self.bound = None;
        self.state = LinkState::Down;
    }
}

/// The endpoint core's view of the connection.
pub(crate) struct ConnectedPort {
    shared: Arc<Connection>,
    /// `poll` ran since the last `take_events`.
    polled: bool,
    /// The connection's stream was stalled as of the last pass.
    stalled: bool,
}

impl ConnectedPort {
    /// A cross-memory copy with `pid` through the connection's shm port:
    /// only with the connected peer (the shm port checks that the pid is a
    /// sender the kernel named; records reach the core only with the
    /// connected peer's), only while the connection is up — after the end
    /// (a rendezvous whose RTS was drained before it) nothing more is taken
    /// from the peer, as over TCP, where its data would never come.
    fn peer_cma(&self, pid: i32, copy: impl FnOnce(&ShmPort) -> Result<usize>) -> Result<usize> {
        let c = self.shared.inner.lock();
        match (c.shm.as_ref(), c.via_shm) {
            (Some(_), Some(_)) if c.state != LinkState::Up => Err(crate::transport::PEER_FAILED),
            (Some(s), Some(o)) if o.pid == pid => copy(s),
            _ => Err(Error::OPNOTSUPP),
        }
    }
}

impl Port for ConnectedPort {
    fn addr(&self) -> Addr {
        self.shared.local().map(Addr::Inet).unwrap_or(CONNECTED_PEER)
    }

    fn wait_fd(&self) -> RawFd {
        self.shared.wait_fd
    }

    /// Arrivals need nothing (the kernel makes the epoll set readable), but
    /// a sleeper must not leave records waiting for a pass (see `Cork`).
    fn set_sleepers(&mut self, n: usize) {
        self.shared.with(|c| {
            if let Some(s) = c.shm.as_mut() {
                s.set_sleepers(n);
            }
            c.cork.set_sleepers(n);
            if n > 0 {
                c.flush_corked();
            }
        })
    }

    fn more_coming(&mut self) {
        self.shared.with(|c| c.cork.more())
    }

    fn has_pending(&self) -> bool {
        let c = self.shared.inner.lock();
        !c.sent.is_empty()
            || !c.events.is_empty()
            || c.doomed.is_some()
            || c.corked
            || (c.via_shm.is_some() && c.shm.as_ref().is_some_and(|s| s.has_pending()))
    }

    fn eager_limit(&self) -> usize {
        if self.shared.via_shm() {
            crate::transport::shm::EAGER_MAX
        } else {
            EAGER_MAX
        }
    }

    /// Over shm, a record the port took is in the peer's ring.
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        self.shared.via_shm()
    }

    /// Over shm a chunk is a ring record (the eager limit); over TCP up to
    /// [`super::CHUNK_MAX`].
    fn chunk_limit_for(&self, _peer: &Addr) -> usize {
        if self.shared.via_shm() {
            crate::transport::shm::EAGER_MAX
        } else {
            super::CHUNK_MAX
        }
    }

    fn send(&mut self, _peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        self.shared.with(|c| c.send(hdr, payload, copy))
    }

    fn send_ctl(&mut self, _peer: &Addr, hdr: &WireHdr) -> Result<()> {
        self.shared.with(|c| c.send_ctl(hdr))
    }

    fn room(&mut self, _peer: &Addr) -> usize {
        self.shared.inner.lock().room()
    }

    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        self.polled = true;
        let (moved, stalled) = self.shared.with(|c| {
            let moved = c.poll(d);
            (moved, c.stalled())
        });
        self.stalled = stalled;
        moved
    }

    fn check_peer(&mut self, _peer: &Addr) -> bool {
        self.shared.state() == LinkState::Up
    }

    fn sender_alive(&self, _src_pid: i32, _peer: &Addr) -> bool {
        self.shared.state() == LinkState::Up
    }

    /// The endpoint layer ends operations on disconnection (they all belong
    /// to the one peer), so no peer events. As on the RDM transport, a call
    /// without a pass before it means a receive may have been posted: a
    /// stalled stream gets EPOLLIN back so that a sleeper wakes and retries.
    fn take_events(&mut self) -> Vec<PeerEvent> {
        if !self.polled && self.stalled {
            let mut g = self.shared.inner.lock();
            let c = &mut *g;
            if c.stalled() {
                if let Some(conn) = c.conn.as_mut() {
                    if conn.offer_input(&c.epoll) {
                        // What waits is in our buffers, not in the socket:
                        // fire the timer so that a sleeper wakes and retries.
                        c.alarm.ring();
                    }
                }
            }
        }
        self.polled = false;
        Vec::new()
    }

    /// Over shm: cross-memory attach from the peer ([`ConnectedPort::peer_cma`]).
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
        self.peer_cma(src_pid, |s| Port::pull(s, src_pid, remote, dst, len))
    }

    fn push(&self, dst_pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
        self.peer_cma(dst_pid, |s| Port::push(s, dst_pid, remote, src, len))
    }

    fn close(&mut self) {
        self.shared.with(|c| c.close())
    }

    /// Sent in our CONNREQ / ACCEPT: a change after the handshake reaches
    /// the peer no more (it then fetches what it misses with a ranged CTS).
    fn set_rts_prefix(&mut self, n: usize) {
        self.shared.with(|c| {
            c.rts_prefix = n.min(EAGER_MAX);
            if let Some(s) = c.shm.as_mut() {
                Port::set_rts_prefix(s, n);
            }
        })
    }

    /// From the peer's CONNREQ / ACCEPT (no data flows before either).
    fn rts_prefix(&mut self, _peer: &Addr) -> usize {
        self.shared.with(|c| c.peer_rts_prefix)
    }
}

/// Why a peer's shm offer is not taken.
enum Refusal {
    /// It cannot be reached over shm (no offer, another host): TCP on
    /// auto, refused on shm.
    NotLocal(&'static str),
    /// A hostile or broken offer: refused.
    Bad(&'static str),
    /// Its segment does not exist: a hostile offer, or (at the client) a
    /// server that accepted and closed at once.
    Gone(&'static str),
}

/// The core as the shm port's sink on a connected endpoint: records of the
/// connected peer reach the core as [`CONNECTED_PEER`]'s; every other
/// record is consumed and dropped. The peer's records are those of its
/// token whose slot the kernel verified for the peer's pid — or did not
/// verify at all (pid 0: the peer exited before we read its announcement,
/// which a sender that sends and exits at once does; its doorbell was
/// full): those are taken as on RDM endpoints, never with a cross-memory
/// pull (the core pulls only from a pid > 0). A slot the kernel verified
/// for another pid is not the peer's.
struct PeerOnly<'a> {
    d: &'a mut dyn Delivery,
    peer: ShmOffer,
    dropped: u64,
    /// The peer's BYE came through the ring (its fi_shutdown or close,
    /// after everything it wrote before).
    bye: bool,
}

impl PeerOnly<'_> {
    fn ours(&mut self, src: &Addr, src_pid: i32) -> bool {
        let ok = *src == Addr::Shm(self.peer.token) && (src_pid == self.peer.pid || src_pid == 0);
        if !ok {
            self.dropped += 1;
        }
        ok
    }
}

impl Delivery for PeerOnly<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        if !self.ours(src, src_pid) {
            return Place::Discard;
        }
        self.d.place(&CONNECTED_PEER, src_pid, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        // Only after a `place` of ours answered Buffer.
        if *src == Addr::Shm(self.peer.token) && (src_pid == self.peer.pid || src_pid == 0) {
            self.d.buffered(&CONNECTED_PEER, src_pid, hdr, data)
        }
    }
    fn deliver(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if !self.ours(src, src_pid) {
            return Disposition::Consumed;
        }
        self.d.deliver(&CONNECTED_PEER, src_pid, hdr, payload)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if !self.ours(src, src_pid) {
            return Disposition::Consumed;
        }
        if hdr.op == proto::op::BYE {
            self.bye = true;
        }
        self.d.control(&CONNECTED_PEER, src_pid, hdr, payload)
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.d.sent(msg_id, result)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.conn.is_some() || self.bound.is_some() {
            self.close();
        }
    }
}

#[cfg(test)]
mod tests;
