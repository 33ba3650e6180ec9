//! The transport of a connected (`FI_EP_MSG`) endpoint: exactly one TCP
//! connection — the state machine of
//! [`tcp::conn`](crate::transport::tcp::conn), as on RDM ports — set up
//! with the handshake of [`cm`], then carrying the same records as an RDM
//! endpoint's connections (framing, backpressure and the two-phase
//! placement are shared: [`tcp::framing`](crate::transport::tcp::framing));
//! and the listening side of passive endpoints ([`PassiveListener`]: a
//! [`Listener`] whose handshakes are connection requests, [`ConnRequest`]).
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
//! failed). The state is derived, not kept: whether the endpoint has opened
//! a connection and whether it ended ([`Life`]), and in between the
//! connection's own [`Phase`]. Every change the application must hear
//! about is queued as a [`CmEvent`] for the endpoint layer, which turns it
//! into an EQ event:
//! * `Connected` — `FI_CONNECTED` (client: with the server's data);
//! * `Refused` — an `FI_ECONNREFUSED` error event (reject, with the
//!   server's data) or the connect error (refused port, unreachable,
//!   `FI_ETIMEDOUT` after [`CONNECT_TIMEOUT`]);
//! * `Shutdown` — `FI_SHUTDOWN`: our `fi_shutdown` (outstanding operations
//!   end with `FI_ECANCELED`) or the peer's (BYE, end of stream, reset,
//!   keepalive / user timeout: `FI_ECONNRESET`). At most one per endpoint.
//!
//! Answers: the peer's records are charged for the answers they make the
//! endpoint queue ([`tcp::budget`](crate::transport::tcp::budget), as on
//! RDM ports): at the budget its socket is not read, and past the budget's
//! timeout there the connection is cut off (`Shutdown` with `FI_ECONNRESET`).
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

pub(crate) mod cm;
mod passive;
mod port;
mod progress;
mod shm;

pub(crate) use passive::PassiveListener;

use crate::base::error::{Error, Result};
use crate::sys::net;
use crate::sys::{Epoll, IN};
use crate::transport::addr::Addr;
use crate::transport::proto::{self, Limits, WireHdr};
use crate::transport::shm::ShmPort;
use crate::transport::tcp::budget::{Account, PeerBudget};
use crate::transport::tcp::conn::{Alarm, Conn, Phase};
use crate::transport::tcp::framing::{Body, Cork, OutRecord};
use crate::transport::tcp::hello::Family;
use crate::transport::tcp::trace;
use crate::transport::tcp::{TcpSettings, CONNECT_TIMEOUT, COPY_MAX, QUEUE_HIGH_WATER, SCRATCH};
use crate::transport::{Payload, Port, Sent};
use cm::{CmKind, ShmOffer, CM_DATA_MAX};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

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

/// Where the connection is, as the endpoint layer sees it. Not stored: it
/// is [`LinkState::of`] the endpoint's [`Life`] and, while the connection
/// is open, the connection's own [`Phase`], so that every step of the
/// connection is written once (as a phase) and both always agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum LinkState {
    Idle = 0,
    Accepting = 1,
    Connecting = 2,
    Up = 3,
    Down = 4,
}

/// The endpoint's part of the connection state: whether a connection is
/// open; while it is, its [`Phase`] says where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// No connection yet (a client before `fi_connect`).
    Idle,
    /// `fi_connect` was called, or the endpoint took a connection request.
    /// Without a connection: a dial that failed at once, ended by the next
    /// pass.
    Open,
    /// Final: shut down, refused or failed (an established connection
    /// stays open, out of the epoll set, until the endpoint closes).
    Down,
}

impl LinkState {
    /// The one mapping from the endpoint's life and its connection's phase
    /// to the state the endpoint layer sees.
    fn of(life: Life, phase: Option<Phase>) -> LinkState {
        match (life, phase) {
            (Life::Idle, _) => LinkState::Idle,
            (Life::Down, _) | (Life::Open, Some(Phase::Closing)) => LinkState::Down,
            (Life::Open, None | Some(Phase::Dialing | Phase::AwaitAnswer)) => LinkState::Connecting,
            (Life::Open, Some(Phase::AwaitRequest | Phase::Held)) => LinkState::Accepting,
            (Life::Open, Some(Phase::Up)) => LinkState::Up,
        }
    }

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

/// The connection and everything about it. See the module documentation.
struct Inner {
    /// With the connection's phase, the [`LinkState`] ([`Inner::state`]).
    life: Life,
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
        let state = AtomicU8::new(c.state() as u8);
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
        c.life = Life::Open;
        debug_assert_eq!(c.state(), LinkState::Accepting);
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
        self.state.store(c.state() as u8, Ordering::Release);
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
            if c.state() != LinkState::Idle {
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
            life: Life::Idle,
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
            cork: Cork::new(opts.settings.coalesce),
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

    /// Where the connection is (see [`LinkState`]).
    fn state(&self) -> LinkState {
        LinkState::of(self.life, self.conn.as_ref().map(Conn::phase))
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
        matches!(self.state(), LinkState::Connecting | LinkState::Up) && self.conn.as_ref().is_some_and(|c| c.stalled())
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
        if self.state() != LinkState::Idle {
            return Err(Error::OPBADSTATE);
        }
        if data.len() > CM_DATA_MAX || to.is_ipv6() != self.v6 {
            return Err(Error::INVAL);
        }
        if to.port() == 0 || to.ip().is_unspecified() || to.ip().is_multicast() {
            return Err(Error::INVAL);
        }
        self.peer = Some(to);
        self.life = Life::Open;
        trace::conn_event(format_args!("connected endpoint: connecting to {to}"));
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
        if self.state() != LinkState::Accepting {
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
        self.life = Life::Down;
        self.events.push_back(CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: Vec::new(),
        });
    }

    fn shutdown(&mut self) {
        match self.state() {
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
        if !matches!(self.state(), LinkState::Connecting | LinkState::Up) || self.doomed.is_some() {
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
        if self.state() != LinkState::Up || self.doomed.is_some() {
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
            Payload::Bytes(b) => Body::Owned(crate::transport::tcp::framing::outgoing_payload(&mut h, b)),
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
        if self.state() != LinkState::Up || self.doomed.is_some() {
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

    /// Endpoint close: an established connection says BYE (unless it was
    /// shut down already), then the socket closes after reading what is
    /// pending (so the kernel ends it with FIN, not RST).
    fn close(&mut self) {
        if self.state() == LinkState::Up && self.doomed.is_none() {
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
        self.life = Life::Down;
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

impl Drop for Inner {
    fn drop(&mut self) {
        if self.conn.is_some() || self.bound.is_some() {
            self.close();
        }
    }
}

#[cfg(test)]
mod tests;
