//! The transport of a connection-oriented (`FI_EP_MSG`) endpoint: exactly
//! one TCP connection, set up with the handshake of [`super::cm`], then
//! carrying the same records as an RDM endpoint's connections (framing,
//! backpressure and the two-phase placement are shared with the RDM
//! transport: [`super::framing`]).
//!
//! [`MsgPort`] is the endpoint core's [`Port`]; the endpoint's connection
//! management calls (`fi_connect`, `fi_accept`, `fi_shutdown`, names) reach
//! the same state through [`MsgShared`]. Both are only used with the
//! endpoint's lock held (the port lives inside the endpoint core), so the
//! mutex here is never contended; it only makes the sharing safe.
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
//! Waiting: the socket and a deadline timer sit in the port's own epoll
//! set, which the domain's engine nests (and, through it, the EQ's and CQs'
//! wait objects): a sleeper wakes when the connect completes, the answer
//! arrives, data arrives or the peer goes away.

use super::cm::{self, CmKind, CM_DATA_MAX};
use super::framing::{Body, Cork, OutRecord, Outcome, Reader, Sink, WriteQueue};
use super::sys::{self, Io, TimerFd};
use super::{CtlPayload, Fd};
use super::{CONNECT_TIMEOUT, COPY_MAX, EAGER_MAX, KEEPALIVE_IDLE, QUEUE_HIGH_WATER, SNDBUF, USER_TIMEOUT};
use crate::base::error::{Error, Result};
use crate::sys::{Epoll, IN, OUT};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, Limits, WireHdr};
use crate::transport::{Delivery, Disposition, Payload, PeerEvent, Place, Port, Sent};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The one peer of a connected endpoint, as the endpoint core names it
/// (`EpConfig::fixed_peer`). The port ignores destination addresses: there
/// is only the connection.
pub const MSG_PEER: Addr = Addr::Inet(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));

const TOKEN_TIMER: u64 = 0;
const TOKEN_SOCK: u64 = 1;
/// Reads per progress pass (a busy peer cannot monopolise a pass).
const READS_PER_PASS: usize = 32;
/// Bytes of a dropped (truncated) payload read per call.
const SCRATCH: usize = 64 << 10;

/// Where the connection is, as the endpoint layer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkState {
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
pub enum CmEvent {
    Connected(Vec<u8>),
    Refused { err: Error, data: Vec<u8> },
    Shutdown { err: Error },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Accepting,
    /// TCP connect in progress.
    Dialing,
    /// CONNREQ written (or queued); waiting for ACCEPT or REJECT.
    AwaitAnswer,
    Up,
    Down,
}

impl Phase {
    fn link(self) -> LinkState {
        match self {
            Phase::Idle => LinkState::Idle,
            Phase::Accepting => LinkState::Accepting,
            Phase::Dialing | Phase::AwaitAnswer => LinkState::Connecting,
            Phase::Up => LinkState::Up,
            Phase::Down => LinkState::Down,
        }
    }
}

/// The endpoint core, for records from the peer.
struct ToCore<'a> {
    d: &'a mut dyn Delivery,
}

impl Sink for ToCore<'_> {
    fn place(&mut self, hdr: &WireHdr) -> Place {
        self.d.place(&MSG_PEER, 0, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, hdr: &WireHdr, data: Vec<u8>) {
        self.d.buffered(&MSG_PEER, 0, hdr, data)
    }
    fn control(&mut self, hdr: &WireHdr, payload: &[u8]) -> Disposition {
        self.d.control(&MSG_PEER, 0, hdr, &CtlPayload(payload))
    }
}

/// The connection and everything about it. See the module documentation.
pub struct MsgConn {
    phase: Phase,
    sock: Option<OwnedFd>,
    in_epoll: bool,
    /// Our address (bound or connected), for `fi_getname`.
    local: Option<SocketAddr>,
    /// The peer's address, for `fi_getpeer`.
    peer: Option<SocketAddr>,
    /// The address family of the endpoint.
    v6: bool,
    epoll: Epoll,
    timer: TimerFd,
    deadline: Option<Instant>,
    timer_at: Option<Instant>,
    reader: Reader,
    queue: WriteQueue,
    interest: u32,
    /// The core could not take the current record: not reading.
    stalled: bool,
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
    /// Send coalescing; `corked`: records wait in `queue` for a pass.
    cork: Cork,
    corked: bool,
}

/// What the endpoint layer and the port share.
pub struct MsgShared {
    conn: Mutex<MsgConn>,
    /// The current [`LinkState`], readable without the lock (post checks).
    state: AtomicU8,
    /// `events` is not empty (checked without the lock after every pass).
    has_events: AtomicBool,
    wait_fd: RawFd,
}

impl MsgShared {
    fn wrap(c: MsgConn) -> Arc<MsgShared> {
        let wait_fd = c.epoll.fd();
        let state = AtomicU8::new(c.phase.link() as u8);
        Arc::new(MsgShared {
            conn: Mutex::new(c),
            state,
            has_events: AtomicBool::new(false),
            wait_fd,
        })
    }

    /// A client endpoint. `src`: the source address to bind (fi_getinfo's
    /// `src_addr`, or `fi_setname`); None leaves the choice to `connect`.
    pub fn new_client(v6: bool, src: Option<SocketAddr>, limits: Limits, coalesce: bool) -> Result<Arc<MsgShared>> {
        let mut c = MsgConn::new(v6, limits, coalesce)?;
        if let Some(a) = src {
            c.bind(a)?;
        }
        Ok(MsgShared::wrap(c))
    }

    /// A client endpoint on a socket a passive endpoint bound (`fi_setname`
    /// on the pep, then `fi_endpoint` with `info->handle` = the pep).
    pub fn new_on_socket(sock: OwnedFd, limits: Limits, coalesce: bool) -> Result<Arc<MsgShared>> {
        let local = sys::local_addr(sock.as_raw_fd())?;
        let mut c = MsgConn::new(local.is_ipv6(), limits, coalesce)?;
        sys::tune_connection(sock.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
        c.sock = Some(sock);
        c.local = Some(local);
        Ok(MsgShared::wrap(c))
    }

    /// A server endpoint for an accepted connection whose CONNREQ was read
    /// (`fi_endpoint` with `info->handle` = the connection request).
    pub fn new_accepting(
        sock: OwnedFd,
        peer_rts_prefix: usize,
        limits: Limits,
        coalesce: bool,
    ) -> Result<Arc<MsgShared>> {
        let fd = sock.as_raw_fd();
        let local = sys::local_addr(fd)?;
        let mut c = MsgConn::new(local.is_ipv6(), limits, coalesce)?;
        c.local = Some(local);
        c.peer = sys::peer_addr(fd).ok();
        c.sock = Some(sock);
        c.phase = Phase::Accepting;
        c.peer_rts_prefix = peer_rts_prefix;
        Ok(MsgShared::wrap(c))
    }

    /// The port the endpoint core drives.
    pub fn port(self: &Arc<Self>) -> MsgPort {
        MsgPort {
            shared: self.clone(),
            polled: false,
            stalled: false,
        }
    }

    pub fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Acquire))
    }

    fn with<R>(&self, f: impl FnOnce(&mut MsgConn) -> R) -> R {
        let mut c = self.conn.lock();
        let r = f(&mut c);
        self.state.store(c.phase.link() as u8, Ordering::Release);
        if !c.events.is_empty() {
            self.has_events.store(true, Ordering::Release);
        }
        r
    }

    /// `fi_connect` (the endpoint layer checked `data` and runs a progress
    /// pass right after). Failures of the connection itself are events.
    pub fn connect(&self, to: SocketAddr, data: &[u8]) -> Result<()> {
        self.with(|c| c.connect(to, data))
    }

    /// `fi_accept`.
    pub fn accept(&self, data: &[u8]) -> Result<()> {
        self.with(|c| c.accept(data))
    }

    /// `fi_shutdown` (acted on by the next progress pass).
    pub fn shutdown(&self) {
        self.with(|c| c.shutdown())
    }

    /// `fi_setname` before `fi_connect`.
    pub fn bind(&self, a: SocketAddr) -> Result<()> {
        self.with(|c| {
            if c.phase != Phase::Idle {
                return Err(Error::OPBADSTATE);
            }
            c.bind(a)
        })
    }

    pub fn local(&self) -> Option<SocketAddr> {
        self.conn.lock().local
    }

    pub fn peer(&self) -> Option<SocketAddr> {
        self.conn.lock().peer
    }

    pub fn is_v6(&self) -> bool {
        self.conn.lock().v6
    }

    /// Connection-management changes since the last call (cheap when
    /// there are none: called after every progress pass).
    pub fn take_cm_events(&self) -> Vec<CmEvent> {
        if !self.has_events.load(Ordering::Acquire) || !self.has_events.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        self.conn.lock().events.drain(..).collect()
    }
}

impl MsgConn {
    fn new(v6: bool, limits: Limits, coalesce: bool) -> Result<MsgConn> {
        let epoll = Epoll::new()?;
        let timer = TimerFd::new()?;
        epoll.add(timer.fd(), IN, TOKEN_TIMER)?;
        Ok(MsgConn {
            phase: Phase::Idle,
            sock: None,
            in_epoll: false,
            local: None,
            peer: None,
            v6,
            epoll,
            timer,
            deadline: None,
            timer_at: None,
            reader: Reader::new(),
            queue: WriteQueue::default(),
            interest: 0,
            stalled: false,
            limits,
            sent: Vec::new(),
            events: VecDeque::new(),
            doomed: None,
            scratch: vec![0u8; SCRATCH],
            ready: Vec::with_capacity(8),
            connect_timeout: CONNECT_TIMEOUT,
            rts_prefix: 0,
            peer_rts_prefix: 0,
            cork: Cork::new(coalesce),
            corked: false,
        })
    }

    fn fd(&self) -> Option<RawFd> {
        self.sock.as_ref().map(|s| s.as_raw_fd())
    }

    fn bind(&mut self, a: SocketAddr) -> Result<()> {
        if a.is_ipv6() != self.v6 {
            return Err(Error::INVAL);
        }
        let s = sys::bound_socket(&a)?;
        sys::tune_connection(s.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
        self.local = Some(sys::local_addr(s.as_raw_fd())?);
        self.sock = Some(s);
        Ok(())
    }

    fn set_phase(&mut self, p: Phase) {
        self.phase = p;
    }

    fn watch(&mut self) -> Result<()> {
        let Some(fd) = self.fd() else {
            return Err(Error::NOTCONN);
        };
        if !self.in_epoll {
            self.epoll.add(fd, 0, TOKEN_SOCK)?;
            self.in_epoll = true;
            self.interest = 0;
        }
        self.update_interest();
        Ok(())
    }

    fn unwatch(&mut self) {
        if let (true, Some(fd)) = (self.in_epoll, self.fd()) {
            self.epoll.delete(fd);
        }
        self.in_epoll = false;
        self.interest = 0;
    }

    /// Events the socket needs now: the connect's completion; input unless
    /// the core stalled the stream; output while something is queued.
    fn update_interest(&mut self) {
        let Some(fd) = self.fd() else { return };
        if !self.in_epoll {
            return;
        }
        let want = match self.phase {
            Phase::Dialing => OUT,
            Phase::AwaitAnswer | Phase::Up => {
                (if self.stalled { 0 } else { IN }) | (if self.queue.is_empty() { 0 } else { OUT })
            }
            _ => 0,
        };
        if want != self.interest && self.epoll.modify(fd, want, TOKEN_SOCK).is_ok() {
            self.interest = want;
        }
    }

    fn connect(&mut self, to: SocketAddr, data: &[u8]) -> Result<()> {
        if self.phase != Phase::Idle {
            return Err(Error::OPBADSTATE);
        }
        if data.len() > CM_DATA_MAX || to.is_ipv6() != self.v6 {
            return Err(Error::INVAL);
        }
        if to.port() == 0 || to.ip().is_unspecified() || to.ip().is_multicast() {
            return Err(Error::INVAL);
        }
        if self.sock.is_none() {
            let s = sys::stream_socket(&to)?;
            sys::tune_connection(s.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
            self.sock = Some(s);
        }
        let fd = self.fd().ok_or(Error::NOTCONN)?;
        self.peer = Some(to);
        let (h, p) = cm::encode(CmKind::ConnReq, data, self.rts_prefix);
        self.queue.push(OutRecord::new(h, Body::Owned(p)));
        match sys::connect(fd, &to) {
            Ok(done) => {
                if done {
                    self.connected();
                } else {
                    self.set_phase(Phase::Dialing);
                    self.deadline = Some(Instant::now() + self.connect_timeout);
                }
                if let Err(e) = self.watch() {
                    self.doomed = Some(e);
                }
                self.arm_timer();
            }
            Err(e) => {
                // Refused at once (loopback), unreachable, no route...: an
                // error event, like a failure found later.
                self.set_phase(Phase::Dialing);
                self.doomed = Some(e);
            }
        }
        Ok(())
    }

    /// The TCP connection is up: send the CONNREQ, wait for the answer.
    fn connected(&mut self) {
        self.set_phase(Phase::AwaitAnswer);
        self.deadline = None;
        if let Some(fd) = self.fd() {
            self.local = sys::local_addr(fd).ok().or(self.local);
        }
        self.flush();
    }

    fn accept(&mut self, data: &[u8]) -> Result<()> {
        if self.phase != Phase::Accepting {
            return Err(Error::OPBADSTATE);
        }
        if data.len() > CM_DATA_MAX {
            return Err(Error::INVAL);
        }
        let (h, p) = cm::encode(CmKind::Accept, data, self.rts_prefix);
        self.queue.push(OutRecord::new(h, Body::Owned(p)));
        self.set_phase(Phase::Up);
        // The ACCEPT is queued ahead of any data, so the connection is ours
        // to use now; a failure to write it ends it like any other.
        self.events.push_back(CmEvent::Connected(Vec::new()));
        if let Err(e) = self.watch() {
            self.doomed = Some(e);
        }
        self.flush();
        Ok(())
    }

    fn shutdown(&mut self) {
        match self.phase {
            Phase::Idle | Phase::Down => {}
            Phase::Up => {
                // Orderly: what is queued and fits goes out, then BYE, then
                // FIN. Whatever could not be written is cancelled.
                self.flush();
                if self.queue.is_empty() {
                    self.queue
                        .push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
                    self.flush();
                }
                if let Some(fd) = self.fd() {
                    sys::shutdown_write(fd);
                }
                self.doomed = Some(Error::CANCELED);
            }
            Phase::Accepting | Phase::Dialing | Phase::AwaitAnswer => self.doomed = Some(Error::CANCELED),
        }
    }

    /// Writes what the queue holds; a failure ends the connection in the
    /// next pass.
    fn flush(&mut self) {
        if !matches!(self.phase, Phase::AwaitAnswer | Phase::Up) || self.doomed.is_some() {
            return;
        }
        let Some(fd) = self.fd() else { return };
        let mut done = Vec::new();
        let r = self.queue.flush(&mut Fd(fd), &mut done);
        self.sent.extend(done.into_iter().map(|id| (id, Ok(()))));
        if let Err(e) = r {
            self.doomed = Some(e);
        }
        self.update_interest();
    }

    fn send(&mut self, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        if self.phase != Phase::Up || self.doomed.is_some() {
            return Err(Error::NOTCONN);
        }
        let n = payload.len();
        if n > u32::MAX as usize {
            return Err(Error::MSGSIZE);
        }
        if self.queue.unsent() >= QUEUE_HIGH_WATER {
            return Err(Error::AGAIN);
        }
        let mut h = *hdr;
        h.payload = n as u32;
        let body = match payload {
            Payload::None => Body::None,
            Payload::Bytes(b) => Body::Owned(b.to_vec()),
            Payload::Iov(iov, off, len) => Body::Iov(iov.sub(off, len)),
        };
        self.queue.push(OutRecord::new(h.to_bytes(), body));
        // Eager messages may wait for the pass that follows a burst (see
        // `Cork`); rendezvous records go at once.
        if h.op == crate::transport::proto::op::EAGER && self.cork.defer(n, self.queue.unsent()) {
            self.corked = true;
        } else {
            self.flush();
        }
        if self.queue.is_empty() {
            return Ok(Sent::Done);
        }
        // As on the RDM transport: small payloads are copied so the buffer
        // is the application's again at once; larger ones stay in place
        // until written, reported through `Delivery::sent`.
        if let Some(r) = self.queue.back_mut() {
            if copy || n <= COPY_MAX {
                r.make_owned();
            }
            r.notify = Some(h.msg_id);
        }
        Ok(Sent::Queued)
    }

    fn send_ctl(&mut self, hdr: &WireHdr) -> Result<()> {
        if self.phase != Phase::Up || self.doomed.is_some() {
            return Err(Error::CONNRESET);
        }
        let mut h = *hdr;
        h.payload = 0;
        self.queue.push(OutRecord::new(h.to_bytes(), Body::None));
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

    fn poll(&mut self, d: &mut dyn Delivery) {
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        if self.phase == Phase::Down || self.phase == Phase::Idle || self.phase == Phase::Accepting {
            return;
        }
        if self.stalled {
            self.read(d);
        }
        if self.phase == Phase::Up && !self.stalled && self.interest == IN && self.timer_at.is_none() {
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
        let mut timer = false;
        for &(token, ev) in &ready {
            match token {
                TOKEN_TIMER => {
                    self.timer.drain();
                    timer = true;
                }
                _ => self.sock_event(ev, d),
            }
        }
        self.ready = ready;
        if timer || self.deadline.is_some_and(|t| t <= Instant::now()) {
            self.timer_at = None;
            if self.phase == Phase::Dialing && self.deadline.is_some_and(|t| t <= Instant::now()) {
                self.teardown(Error::TIMEDOUT, d, None);
            }
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        self.arm_timer();
    }

    fn arm_timer(&mut self) {
        let next = if self.phase == Phase::Dialing {
            self.deadline
        } else {
            None
        };
        if next != self.timer_at {
            self.timer_at = next;
            self.timer
                .set(next.map(|t| t.saturating_duration_since(Instant::now())));
        }
    }

    fn sock_event(&mut self, ev: u32, d: &mut dyn Delivery) {
        let Some(fd) = self.fd() else { return };
        let err_hup = ev & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        match self.phase {
            Phase::Dialing if ev & OUT != 0 || err_hup => match sys::take_error(fd) {
                None => self.connected(),
                Some(e) => self.teardown(e, d, None),
            },
            Phase::AwaitAnswer | Phase::Up => {
                if self.stalled && err_hup {
                    // A stalled stream that broke: the peer is gone (its
                    // unread records cannot be taken now, and the error
                    // would wake sleepers forever).
                    let e = sys::take_error(fd).unwrap_or(Error::CONNRESET);
                    self.teardown(e, d, None);
                    return;
                }
                if ev & OUT != 0 {
                    self.flush();
                }
                if ev & IN != 0 || err_hup {
                    self.read(d);
                }
            }
            _ => {}
        }
    }

    fn read(&mut self, d: &mut dyn Delivery) {
        // A handshake record is handled between pumps; bounded.
        for _ in 0..4 {
            let Some(fd) = self.fd() else { return };
            if !matches!(self.phase, Phase::AwaitAnswer | Phase::Up) {
                return;
            }
            let established = self.phase == Phase::Up;
            let out = self.reader.pump(
                &mut Fd(fd),
                &mut ToCore { d: &mut *d },
                &self.limits,
                established,
                &mut self.scratch,
                READS_PER_PASS,
            );
            match out {
                Outcome::Drained | Outcome::Budget => {
                    self.stalled = false;
                    self.update_interest();
                    return;
                }
                Outcome::Stalled => {
                    self.stalled = true;
                    self.update_interest();
                    return;
                }
                Outcome::Link(h) => {
                    let payload = self.reader.link_payload().to_vec();
                    if !self.on_link(&h, payload, d) {
                        return;
                    }
                }
                Outcome::Eof => {
                    // The peer closed without a word: a server that went
                    // away before answering refused us; afterwards it is an
                    // abrupt end of the connection.
                    let e = if established {
                        Error::CONNRESET
                    } else {
                        Error::CONNREFUSED
                    };
                    self.teardown(e, d, None);
                    return;
                }
                Outcome::Broken(b) => {
                    let e = match b {
                        super::framing::Broken::Io(e) => e,
                        other => {
                            crate::base::log::log_warn!(
                                crate::abi::FI_LOG_EP_DATA,
                                "tcp msg: cutting off the peer: {other:?}"
                            );
                            Error::CONNRESET
                        }
                    };
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
        if h.op == proto::op::BYE {
            // The peer's fi_shutdown (or close): everything still expected
            // from or sent to it ends now.
            let e = if self.phase == Phase::Up {
                Error::CONNRESET
            } else {
                Error::CONNREFUSED
            };
            self.teardown(e, d, None);
            return false;
        }
        match (self.phase, cm::parse(h, &payload)) {
            (Phase::AwaitAnswer, Ok(CmKind::Accept)) => {
                self.peer_rts_prefix = cm::rts_prefix(h);
                self.set_phase(Phase::Up);
                self.events.push_back(CmEvent::Connected(payload));
                self.update_interest();
                true
            }
            (Phase::AwaitAnswer, Ok(CmKind::Reject)) => {
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
                    "tcp msg: unexpected handshake record in {phase:?}: {r:?}"
                );
                let e = if phase == Phase::Up {
                    Error::CONNRESET
                } else {
                    Error::CONNREFUSED
                };
                self.teardown(e, d, None);
                false
            }
        }
    }

    /// Ends the connection: a payload being placed completes with `e`,
    /// queued sends too, and the endpoint layer hears about it (`event`, or
    /// the event the phase calls for). The socket leaves the epoll set;
    /// an established one stays open until the endpoint closes (so that a
    /// FIN, not a reset, ends it), a failed dial is closed now.
    fn teardown(&mut self, e: Error, d: &mut dyn Delivery, event: Option<CmEvent>) {
        if self.phase == Phase::Down {
            return;
        }
        // An established connection that breaks (reset, end of stream,
        // keepalive or user timeout) is a peer failure, reported as on RDM
        // endpoints (ep::rdm::PEER_FAILED); our own fi_shutdown cancels.
        let e = if self.phase == Phase::Up && e != Error::CANCELED {
            crate::transport::PEER_FAILED
        } else {
            e
        };
        self.reader.abort(&mut ToCore { d: &mut *d }, e);
        for id in self.queue.take_notifications() {
            d.sent(id, Err(e));
        }
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        let ev = event.unwrap_or(match self.phase {
            Phase::Up | Phase::Accepting => CmEvent::Shutdown { err: e },
            Phase::Dialing | Phase::AwaitAnswer if e == Error::CANCELED => CmEvent::Shutdown { err: e },
            _ => CmEvent::Refused {
                err: e,
                data: Vec::new(),
            },
        });
        let keep = self.phase == Phase::Up;
        self.events.push_back(ev);
        self.unwatch();
        self.stalled = false;
        self.deadline = None;
        self.set_phase(Phase::Down);
        if !keep {
            self.sock = None;
        }
        self.arm_timer();
    }

    /// Endpoint close: an established connection says BYE (unless it was
    /// shut down already), then the socket closes after reading what is
    /// pending (so the kernel ends it with FIN, not RST).
    fn close(&mut self) {
        if self.phase == Phase::Up && self.doomed.is_none() {
            self.queue
                .push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
            self.flush();
        }
        self.unwatch();
        if let Some(fd) = self.fd() {
            sys::shutdown_write(fd);
            let mut buf = [0u8; 4096];
            for _ in 0..16 {
                let v = [libc::iovec {
                    iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                    iov_len: buf.len(),
                }];
                // SAFETY: the iovec covers a local buffer.
                match unsafe { sys::read_iov(fd, &v) } {
                    Io::Done(_) => continue,
                    _ => break,
                }
            }
        }
        self.sock = None;
        self.queue.take_notifications();
        self.phase = Phase::Down;
    }
}

/// The endpoint core's view of the connection.
pub struct MsgPort {
    shared: Arc<MsgShared>,
    /// `poll` ran since the last `take_events`.
    polled: bool,
    /// The connection's `stalled` as of the last pass.
    stalled: bool,
}

impl Port for MsgPort {
    fn addr(&self) -> Addr {
        self.shared.local().map(Addr::Inet).unwrap_or(MSG_PEER)
    }

    fn wait_fd(&self) -> RawFd {
        self.shared.wait_fd
    }

    /// Arrivals need nothing (the kernel makes the epoll set readable), but
    /// a sleeper must not leave records waiting for a pass (see `Cork`).
    fn set_sleepers(&mut self, n: usize) {
        self.shared.with(|c| {
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
        let c = self.shared.conn.lock();
        !c.sent.is_empty() || !c.events.is_empty() || c.doomed.is_some() || c.corked
    }

    fn eager_limit(&self) -> usize {
        EAGER_MAX
    }

    fn send(&mut self, _peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        self.shared.with(|c| c.send(hdr, payload, copy))
    }

    fn send_ctl(&mut self, _peer: &Addr, hdr: &WireHdr) -> Result<()> {
        self.shared.with(|c| c.send_ctl(hdr))
    }

    fn room(&mut self, _peer: &Addr) -> usize {
        let c = self.shared.conn.lock();
        if c.phase == Phase::Up {
            QUEUE_HIGH_WATER.saturating_sub(c.queue.unsent())
        } else {
            0
        }
    }

    fn poll(&mut self, d: &mut dyn Delivery) {
        self.polled = true;
        self.stalled = self.shared.with(|c| {
            c.poll(d);
            c.stalled
        });
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
            let mut c = self.shared.conn.lock();
            if c.stalled {
                c.stalled = false;
                c.update_interest();
                c.stalled = true;
                if c.reader.holds_input() {
                    // What waits is in our buffers, not in the socket:
                    // fire the timer so that a sleeper wakes and retries.
                    c.timer.set(Some(Duration::from_micros(1)));
                    c.timer_at = Some(Instant::now());
                }
            }
        }
        self.polled = false;
        Vec::new()
    }

    fn pull(&self, _src_pid: i32, _remote: &[(u64, u64)], _dst: &IovList, _len: usize) -> Result<usize> {
        Err(Error::OPNOTSUPP)
    }

    fn close(&mut self) {
        self.shared.with(|c| c.close())
    }

    /// Sent in our CONNREQ / ACCEPT: a change after the handshake reaches
    /// the peer no more (it then fetches what it misses with a ranged CTS).
    fn set_rts_prefix(&mut self, n: usize) {
        self.shared.with(|c| c.rts_prefix = n.min(super::EAGER_MAX))
    }

    /// From the peer's CONNREQ / ACCEPT (no data flows before either).
    fn rts_prefix(&mut self, _peer: &Addr) -> usize {
        self.shared.with(|c| c.peer_rts_prefix)
    }
}

impl Drop for MsgConn {
    fn drop(&mut self) {
        if self.sock.is_some() {
            self.close();
        }
    }
}

#[cfg(test)]
mod tests;
