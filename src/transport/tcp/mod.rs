//! The TCP transport: one [`TcpPort`] per RDM endpoint.
//!
//! * **Listener** on the endpoint's source address; its advertised address
//!   (`fi_getname`) is always one a peer can dial ([`advertised_addr`]).
//! * **Connections** are made lazily, on the first record to a peer, with
//!   a non-blocking connect under epoll and a deadline; they start with the
//!   HELLO handshake ([`hello`]), which carries each side's listening
//!   address (the identity `FI_SOURCE` reports) and settles simultaneous
//!   connects so that exactly one connection per pair of endpoints remains.
//!   Sending to our own address is a real connection to our own listener.
//! * **Framing** ([`framing`]): records follow each other on the stream;
//!   payloads are written with `sendmsg` straight from the application's
//!   iov and read straight into the matched receive buffer. A record the
//!   kernel cannot take at once is queued by reference, unless the caller
//!   asks for a copy (inject) or it is small ([`COPY_MAX`]).
//! * **Backpressure**: a peer's queue takes a new record while it holds less
//!   than [`QUEUE_HIGH_WATER`] unsent bytes (else `-FI_EAGAIN`), the kernel
//!   send buffer is bounded ([`SNDBUF`]), and a receiver that cannot place a
//!   message (no receive, no unexpected budget) stops reading that socket —
//!   its EPOLLIN interest is dropped so sleepers do not spin — while other
//!   sockets keep flowing.
//! * **Failure**: a bad record, a reset, end of stream, a keepalive/user
//!   timeout or a missed deadline ends that connection only: queued sends
//!   complete with an error (`Delivery::sent`), a half-read payload with
//!   `placed(.., Err)`, and `PeerEvent::Failed` lets the core end the rest.
//!   A later send to the address dials again (a restarted peer is a new
//!   incarnation: its HELLO carries a new nonce).
//! * **Waiting**: the listener, every connection and a timer for deadlines
//!   are in the port's own epoll set, whose descriptor the domain's engine
//!   nests ([`Port::wait_fd`]); `poll` is one zero-timeout `epoll_wait`.

pub mod cm;
pub mod framing;
pub mod hello;
pub mod msg;
pub mod sys;

use crate::base::error::{Error, Result};
use crate::sys::{Epoll, IN, OUT};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, Limits, WireHdr, HDR_LEN};
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Place, Port, Sent};
use framing::{Body, ByteSink, ByteSource, Cork, OutRecord, Outcome, Reader, Sink, WriteQueue};
use hello::{Decision, Existing, Hello, Kind};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};
use sys::{IfAddr, Io, TimerFd};

/// A dial that is not established (connected and answered) by then fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// An accepted connection must say HELLO by then.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After a REJECT (the peer keeps its own dial to us), its connection
/// must arrive by then.
pub const REJECTED_WAIT: Duration = Duration::from_secs(10);
/// Idle time before keepalive probes; 3 unanswered probes end a connection.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// Unacknowledged data older than this ends a connection (TCP_USER_TIMEOUT).
pub const USER_TIMEOUT: Duration = Duration::from_secs(15);
/// Kernel send buffer per connection: enough for full speed on a LAN, small
/// enough that a stalled receiver pushes back on the sender's posts.
pub const SNDBUF: usize = 256 << 10;
/// A peer queue above this many unsent bytes refuses new records
/// (`-FI_EAGAIN`); one record of any size is taken into an empty queue.
pub const QUEUE_HIGH_WATER: usize = 64 << 10;
/// A payload up to this size that cannot be handed to the kernel at once is
/// copied into the queue (shm's eager limit: the same buffer-reuse
/// behaviour on both transports); larger ones are sent from the
/// application's buffer.
pub const COPY_MAX: usize = crate::transport::shm::EAGER_MAX;
/// Unexpected payloads being received at once, in bytes, across all
/// connections (the endpoint's default unexpected budget).
const STAGING_MAX: usize = crate::transport::DEFAULT_UNEXP_BUDGET;
/// Accepted connections still in their handshake, at most (a newcomer
/// beyond it replaces the oldest: see `accept_all`). Smaller in unit tests,
/// so that the flood test's sockets stay few.
const MAX_HANDSHAKES: usize = if cfg!(test) { 32 } else { 256 };
/// Reads per connection per progress pass (fairness between sockets).
const READS_PER_PASS: usize = 32;
/// Bytes of a dropped (truncated) payload read per call.
const SCRATCH: usize = 64 << 10;
/// After EMFILE and friends, the listener rests this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

const TOKEN_LISTENER: u64 = 0;
const TOKEN_TIMER: u64 = 1;
const FIRST_CONN: u64 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    /// Our dial, connect in progress.
    Connecting,
    /// Our dial, REQUEST written or being written, waiting for the answer.
    HelloSent,
    /// Accepted, waiting for the peer's REQUEST.
    AwaitHello,
    /// Established: records flow both ways.
    Up,
    /// Writing a REJECT, then closed.
    Closing,
}

/// One socket.
struct Conn {
    sock: OwnedFd,
    state: ConnState,
    /// The peer's listening address (our dials: the address we dialed).
    peer: Option<SocketAddr>,
    dialed: bool,
    /// The peer's incarnation (from its HELLO).
    nonce: u64,
    /// Our own dial to ourselves, read as inbound from us.
    self_reader: bool,
    deadline: Option<Instant>,
    /// Handshake bytes to write before anything else.
    hs_out: Vec<u8>,
    hs_done: usize,
    reader: Reader,
    /// Events registered in the epoll set.
    interest: u32,
    /// The core could not take the current record: not reading.
    stalled: bool,
    /// An error seen outside `poll` (while writing from a send call).
    doomed: Option<Error>,
    /// The RTS prefix the peer asked for in its HELLO.
    rts_prefix: usize,
}

impl Conn {
    fn new(sock: OwnedFd, state: ConnState, dialed: bool, deadline: Instant) -> Conn {
        Conn {
            sock,
            state,
            peer: None,
            dialed,
            nonce: 0,
            self_reader: false,
            deadline: Some(deadline),
            hs_out: Vec::new(),
            hs_done: 0,
            reader: Reader::new(),
            interest: 0,
            stalled: false,
            doomed: None,
            rts_prefix: 0,
        }
    }

    fn hs_pending(&self) -> bool {
        self.hs_done < self.hs_out.len()
    }

    /// Writes what is left of the handshake bytes.
    fn write_hs(&mut self) -> Result<()> {
        while self.hs_pending() {
            let v = [libc::iovec {
                iov_base: self.hs_out[self.hs_done..].as_ptr() as *mut libc::c_void,
                iov_len: self.hs_out.len() - self.hs_done,
            }];
            // SAFETY: the iovec covers our own handshake buffer.
            match unsafe { sys::send_iov(self.sock.as_raw_fd(), &v) } {
                Io::Done(n) => self.hs_done += n,
                Io::Blocked => return Ok(()),
                Io::Eof => return Err(Error::CONNRESET),
                Io::Failed(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A destination: its queue of records and the connection they use.
#[derive(Default)]
struct Peer {
    /// The connection records to this peer are written on.
    conn: Option<u64>,
    /// Rejected: the peer dials us; until then records wait here.
    waiting_until: Option<Instant>,
    queue: WriteQueue,
    /// Records wait in `queue` for the next pass (send coalescing).
    corked: bool,
    /// A failure found outside `poll`, reported by the next pass.
    doomed: Option<Error>,
}

/// A non-blocking socket as the framing layer's byte source and sink
/// (RDM connections, MSG connections, passive endpoints' handshakes).
pub(crate) struct Fd(pub(crate) RawFd);

impl ByteSource for Fd {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io {
        // SAFETY: forwarded contract.
        unsafe { sys::read_iov(self.0, iov) }
    }
}

impl ByteSink for Fd {
    unsafe fn write(&mut self, iov: &[libc::iovec]) -> Io {
        // SAFETY: forwarded contract.
        unsafe { sys::send_iov(self.0, iov) }
    }
}

/// The endpoint core, for records from `src`.
struct CoreSink<'a> {
    d: &'a mut dyn Delivery,
    src: Addr,
    /// Bytes other connections hold for unexpected messages still arriving
    /// (the core counts them against its budget only once handed over).
    staged_elsewhere: usize,
}

impl Sink for CoreSink<'_> {
    fn place(&mut self, hdr: &WireHdr) -> Place {
        match self.d.place(&self.src, 0, hdr) {
            // The core checked its budget for this message alone; with
            // several connections filling vectors at once, the port keeps
            // their sum within one budget's worth (one message at a time
            // always may go, whatever its size).
            Place::Buffer if self.staged_elsewhere > 0 && self.staged_elsewhere + hdr.len as usize > STAGING_MAX => {
                Place::Stall
            }
            p => p,
        }
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, hdr: &WireHdr, data: Vec<u8>) {
        self.d.buffered(&self.src, 0, hdr, data)
    }
    fn control(&mut self, hdr: &WireHdr, payload: &[u8]) -> Disposition {
        self.d.control(&self.src, 0, hdr, &CtlPayload(payload))
    }
}

/// A control record's payload (read whole into the reader's buffer), as
/// the core takes it (RDM and MSG connections).
pub(crate) struct CtlPayload<'a>(pub(crate) &'a [u8]);

impl PayloadIn for CtlPayload<'_> {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        // SAFETY: forwarded contract.
        unsafe { PayloadIn::copy_to_iov(self.0, off, len, dst, dst_off) }
    }
    fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// Chooses the address to advertise for a listener bound to `bound`: the
/// bound address itself unless it is a wildcard; else the address of the
/// interface named by `iface` (`FI_RUSTFAB_IFACE`); else the first
/// non-loopback interface that is up; else loopback. Never a wildcard, and
/// never a link-local address (it needs a scope to be dialed).
pub fn advertised_addr(bound: SocketAddr, iface: Option<&str>, ifs: &[IfAddr]) -> SocketAddr {
    if !bound.ip().is_unspecified() {
        return bound;
    }
    let v6 = bound.is_ipv6();
    let usable = |a: &&IfAddr| {
        a.ip.is_ipv6() == v6
            && !a.ip.is_unspecified()
            && !a.ip.is_multicast()
            && match a.ip {
                IpAddr::V4(ip) => !ip.is_link_local(),
                IpAddr::V6(ip) => (ip.segments()[0] & 0xffc0) != 0xfe80,
            }
    };
    let named = iface.and_then(|name| {
        let found = ifs.iter().filter(usable).find(|a| a.name == name);
        if found.is_none() {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_CORE,
                "FI_RUSTFAB_IFACE={name:?}: no such interface with a usable {} address; using the default choice",
                if v6 { "IPv6" } else { "IPv4" }
            );
        }
        found
    });
    let pick = named
        .or_else(|| ifs.iter().filter(usable).find(|a| a.up && !a.loopback))
        .map(|a| a.ip)
        .unwrap_or(if v6 {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        });
    SocketAddr::new(pick, bound.port())
}

fn random_nonce() -> u64 {
    let mut n = crate::transport::addr::shm_token_random();
    if n == 0 {
        n = 1;
    }
    n
}

/// What the application's environment sets for TCP (`FI_RUSTFAB_IFACE`,
/// `FI_RUSTFAB_TCP_COALESCE`), read by the provider and handed down.
#[derive(Clone, Debug)]
pub struct TcpSettings {
    /// The interface whose address a wildcard-bound endpoint advertises.
    pub iface: Option<String>,
    /// Small sends posted back to back wait for the next progress pass
    /// (see [`Cork`]); `FI_MORE` works either way.
    pub coalesce: bool,
}

impl Default for TcpSettings {
    fn default() -> TcpSettings {
        TcpSettings {
            iface: None,
            coalesce: true,
        }
    }
}

/// Largest eager message and DATA chunk on a TCP stream.
pub const EAGER_MAX: usize = 64 << 10;

pub struct TcpPort {
    me: SocketAddr,
    nonce: u64,
    listener: OwnedFd,
    listen_paused_until: Option<Instant>,
    epoll: Epoll,
    timer: TimerFd,
    timer_at: Option<Instant>,
    conns: HashMap<u64, Conn>,
    peers: HashMap<SocketAddr, Peer>,
    next_id: u64,
    limits: Limits,
    events: Vec<PeerEvent>,
    /// Peers failed in this pass: nothing more is sent to them until the
    /// core has taken the failure events (so that, e.g., an ACK for the old
    /// incarnation never reaches a restarted peer).
    fenced: Vec<SocketAddr>,
    /// `Delivery::sent` reports waiting for the next pass.
    sent: Vec<(u64, Result<()>)>,
    scratch: Vec<u8>,
    /// epoll_wait's output, kept between passes.
    ready: Vec<(u64, u32)>,
    /// `poll` ran since the last `take_events` (see there).
    polled: bool,
    closed: bool,
    /// [`CONNECT_TIMEOUT`] (shorter in tests).
    connect_timeout: Duration,
    /// The RTS prefix we ask peers for in our HELLOs.
    rts_prefix: usize,
    /// Send coalescing (see [`Cork`]) and the peers whose records wait.
    cork: Cork,
    corked: Vec<SocketAddr>,
}

impl TcpPort {
    /// Listens on `src` (port 0: an ephemeral port; wildcard IP: all
    /// interfaces, advertising a reachable one).
    pub fn new(src: SocketAddr, limits: Limits, settings: &TcpSettings) -> Result<TcpPort> {
        let listener = sys::listen(&src, 512)?;
        let bound = sys::local_addr(listener.as_raw_fd())?;
        let me = advertised_addr(bound, settings.iface.as_deref(), &sys::interfaces());
        let epoll = Epoll::new()?;
        let timer = TimerFd::new()?;
        epoll.add(listener.as_raw_fd(), IN, TOKEN_LISTENER)?;
        epoll.add(timer.fd(), IN, TOKEN_TIMER)?;
        Ok(TcpPort {
            me,
            nonce: random_nonce(),
            listener,
            listen_paused_until: None,
            epoll,
            timer,
            timer_at: None,
            conns: HashMap::new(),
            peers: HashMap::new(),
            next_id: FIRST_CONN,
            limits,
            events: Vec::new(),
            fenced: Vec::new(),
            sent: Vec::new(),
            scratch: vec![0u8; SCRATCH],
            ready: Vec::with_capacity(64),
            polled: false,
            closed: false,
            connect_timeout: CONNECT_TIMEOUT,
            rts_prefix: 0,
            cork: Cork::new(settings.coalesce),
            corked: Vec::new(),
        })
    }

    #[cfg(test)]
    /// The advertised (dialable) address.
    pub fn local(&self) -> SocketAddr {
        self.me
    }

    fn inet(&self, a: &Addr) -> Result<SocketAddr> {
        match a {
            Addr::Inet(s) if s.is_ipv6() == self.me.is_ipv6() => Ok(*s),
            _ => Err(Error::INVAL),
        }
    }

    fn add_conn(&mut self, c: Conn) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.epoll.add(c.sock.as_raw_fd(), 0, id)?;
        self.conns.insert(id, c);
        self.update_interest(id);
        Ok(id)
    }

    /// Events this connection needs now (EPOLLOUT only while it has
    /// something to write; EPOLLIN unless the core stalled it).
    fn update_interest(&mut self, id: u64) {
        let Some(c) = self.conns.get(&id) else { return };
        let want = match c.state {
            ConnState::Connecting => OUT,
            _ => {
                let queued = c.state == ConnState::Up
                    && c.peer
                        .and_then(|p| self.peers.get(&p))
                        .is_some_and(|p| p.conn == Some(id) && !p.queue.is_empty());
                (if c.stalled { 0 } else { IN }) | (if c.hs_pending() || queued { OUT } else { 0 })
            }
        };
        if want != c.interest {
            let fd = c.sock.as_raw_fd();
            if self.epoll.modify(fd, want, id).is_ok() {
                if let Some(c) = self.conns.get_mut(&id) {
                    c.interest = want;
                }
            }
        }
    }

    /// Starts a dial to `to`; the peer entry holds the queue meanwhile.
    fn dial(&mut self, to: SocketAddr) -> Result<u64> {
        let sock = sys::stream_socket(&to)?;
        sys::tune_connection(sock.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
        sys::connect(sock.as_raw_fd(), &to)?;
        let mut c = Conn::new(sock, ConnState::Connecting, true, Instant::now() + self.connect_timeout);
        c.peer = Some(to);
        let id = self.add_conn(c)?;
        // A sleeper must wake for the deadline even before the next pass.
        self.arm_timer();
        Ok(id)
    }

    /// The peer entry for a send, dialing if there is none. A dial that
    /// fails at once is reported like one that fails later (an error
    /// completion for the send), by the next progress pass.
    fn peer_for_send(&mut self, to: SocketAddr) -> Result<&mut Peer> {
        if self.closed || self.fenced.contains(&to) {
            return Err(Error::CONNRESET);
        }
        if to.port() == 0 || to.ip().is_unspecified() || to.ip().is_multicast() {
            return Err(Error::ADDRNOTAVAIL);
        }
        if !self.peers.contains_key(&to) {
            let mut p = Peer::default();
            match self.dial(to) {
                Ok(id) => p.conn = Some(id),
                Err(e) => p.doomed = Some(e),
            }
            self.peers.insert(to, p);
        }
        self.peers.get_mut(&to).ok_or(Error::CONNRESET)
    }

    /// Writes what a peer's queue holds, if its connection is established.
    /// Errors doom the connection (handled by the next pass).
    fn flush_peer(&mut self, to: SocketAddr) {
        let Some(p) = self.peers.get_mut(&to) else { return };
        let Some(id) = p.conn else { return };
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.state != ConnState::Up || c.hs_pending() || c.doomed.is_some() || p.queue.is_empty() {
            return;
        }
        let mut done = Vec::new();
        let r = p.queue.flush(&mut Fd(c.sock.as_raw_fd()), &mut done);
        self.sent.extend(done.into_iter().map(|id| (id, Ok(()))));
        if let Err(e) = r {
            c.doomed = Some(e);
        }
        self.update_interest(id);
    }

    /// Queues a record and writes the queue, unless the record is an eager
    /// message (`may_wait`: its payload length) that may wait for the next
    /// pass ([`Cork`]). `bounded` records (data) are refused beyond
    /// [`QUEUE_HIGH_WATER`]. `Ok(true)`: written.
    fn queue_record(&mut self, to: SocketAddr, rec: OutRecord, bounded: bool, may_wait: Option<usize>) -> Result<bool> {
        let p = self.peer_for_send(to)?;
        if bounded && p.queue.unsent() >= QUEUE_HIGH_WATER {
            return Err(Error::AGAIN);
        }
        p.queue.push(rec);
        if let Some(n) = may_wait {
            let unsent = p.queue.unsent();
            if self.cork.defer(n, unsent) {
                let Some(p) = self.peers.get_mut(&to) else {
                    return Ok(false);
                };
                if !p.corked {
                    p.corked = true;
                    self.corked.push(to);
                }
                return Ok(false);
            }
        }
        self.flush_peer(to);
        Ok(self.peers.get(&to).is_some_and(|p| p.queue.is_empty()))
    }

    /// Writes every queue that waits for a pass.
    fn flush_corked(&mut self) {
        for a in std::mem::take(&mut self.corked) {
            if let Some(p) = self.peers.get_mut(&a) {
                p.corked = false;
            }
            self.flush_peer(a);
        }
    }

    // ---------------------------------------------------------------- poll

    fn poll_inner(&mut self, d: &mut dyn Delivery) {
        self.polled = true;
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        let doomed: Vec<(u64, Error)> = self
            .conns
            .iter()
            .filter_map(|(id, c)| c.doomed.map(|e| (*id, e)))
            .collect();
        for (id, e) in doomed {
            self.fail_conn(id, e, d);
        }
        let doomed: Vec<(SocketAddr, Error)> = self
            .peers
            .iter()
            .filter_map(|(a, p)| p.doomed.map(|e| (*a, e)))
            .collect();
        for (a, e) in doomed {
            self.fail_peer(a, e, d);
        }
        // Stalled connections first: the core may take their record now.
        self.retry_stalled(d);
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        let mut timer = false;
        let mut delivered = false;
        for &(token, ev) in &ready {
            match token {
                TOKEN_LISTENER => self.accept_all(),
                TOKEN_TIMER => {
                    self.timer.drain();
                    timer = true;
                }
                id => {
                    delivered = true;
                    self.conn_event(id, ev, d)
                }
            }
        }
        self.ready = ready;
        // What arrived may have freed room for a stalled one (a staged
        // message handed over): retry now rather than after a sleep.
        if delivered {
            self.retry_stalled(d);
        }
        if timer || self.timer_at.is_some_and(|t| t <= Instant::now()) {
            self.timer_at = None;
            self.check_deadlines(d);
        }
        self.arm_timer();
    }

    fn retry_stalled(&mut self, d: &mut dyn Delivery) {
        let stalled: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.stalled)
            .map(|(id, _)| *id)
            .collect();
        for id in stalled {
            self.read_conn(id, d);
        }
    }

    fn conn_event(&mut self, id: u64, ev: u32, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let err_hup = ev & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        if c.state == ConnState::Connecting {
            if ev & OUT != 0 || err_hup {
                match sys::take_error(c.sock.as_raw_fd()) {
                    None => self.connected(id, d),
                    Some(e) => self.fail_conn(id, e, d),
                }
            }
            return;
        }
        if c.stalled && err_hup {
            // A stalled socket that broke: the peer is gone (its unread
            // records cannot be taken now and the error would wake sleepers
            // forever).
            let e = sys::take_error(c.sock.as_raw_fd()).unwrap_or(Error::CONNRESET);
            self.fail_conn(id, e, d);
            return;
        }
        if ev & OUT != 0 {
            self.write_side(id, d);
        }
        if ev & IN != 0 || err_hup {
            self.read_conn(id, d);
        }
    }

    /// The connect finished: say HELLO.
    fn connected(&mut self, id: u64, d: &mut dyn Delivery) {
        let (me, nonce, connect_timeout) = (self.me, self.nonce, self.connect_timeout);
        let prefix = self.rts_prefix as u64;
        let Some(c) = self.conns.get_mut(&id) else { return };
        let (h, p) = hello::encode_with_prefix(Kind::Request, &me, nonce, prefix);
        c.hs_out = h.to_vec();
        c.hs_out.extend_from_slice(&p);
        c.hs_done = 0;
        c.state = ConnState::HelloSent;
        c.deadline = Some(Instant::now() + connect_timeout);
        if let Err(e) = c.write_hs() {
            self.fail_conn(id, e, d);
            return;
        }
        self.update_interest(id);
    }

    fn write_side(&mut self, id: u64, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.hs_pending() {
            if let Err(e) = c.write_hs() {
                self.fail_conn(id, e, d);
                return;
            }
        }
        if c.state == ConnState::Closing {
            if !c.hs_pending() {
                self.drop_conn(id);
            } else {
                self.update_interest(id);
            }
            return;
        }
        let peer = c.peer;
        if let Some(p) = peer {
            self.flush_peer(p);
        }
        let doomed = self.conns.get(&id).and_then(|c| c.doomed);
        if let Some(e) = doomed {
            self.fail_conn(id, e, d);
            return;
        }
        self.update_interest(id);
    }

    fn read_conn(&mut self, id: u64, d: &mut dyn Delivery) {
        // Link records (handshake) are handled between pumps; bounded.
        for _ in 0..4 {
            let lim = self.limits;
            let Some(c) = self.conns.get_mut(&id) else { return };
            if c.state == ConnState::Closing || c.state == ConnState::Connecting {
                return;
            }
            let established = c.state == ConnState::Up;
            let src = Addr::Inet(c.peer.unwrap_or(self.me));
            let staged_elsewhere: usize = self
                .conns
                .iter()
                .filter(|(cid, _)| **cid != id)
                .map(|(_, c)| c.reader.staged_bytes())
                .sum();
            let Some(c) = self.conns.get_mut(&id) else { return };
            let mut sink = CoreSink {
                d: &mut *d,
                src,
                staged_elsewhere,
            };
            let fd = c.sock.as_raw_fd();
            let out = c.reader.pump(
                &mut Fd(fd),
                &mut sink,
                &lim,
                established,
                &mut self.scratch,
                READS_PER_PASS,
            );
            match out {
                Outcome::Drained | Outcome::Budget => {
                    c.stalled = false;
                    self.update_interest(id);
                    return;
                }
                Outcome::Stalled => {
                    c.stalled = true;
                    self.update_interest(id);
                    return;
                }
                Outcome::Link(h) => {
                    let payload = c.reader.link_payload().to_vec();
                    if !self.on_link(id, &h, &payload, d) {
                        return;
                    }
                }
                Outcome::Eof => {
                    crate::base::log::log_debug!(crate::abi::FI_LOG_EP_DATA, "tcp: peer closed its connection");
                    self.fail_conn(id, Error::CONNRESET, d);
                    return;
                }
                Outcome::Broken(b) => {
                    let e = match b {
                        framing::Broken::Io(e) => e,
                        _ => {
                            crate::base::log::log_warn!(crate::abi::FI_LOG_EP_DATA, "tcp: cutting off a peer: {b:?}");
                            Error::CONNRESET
                        }
                    };
                    self.fail_conn(id, e, d);
                    return;
                }
            }
        }
    }

    /// A HELLO or BYE. Returns whether the connection may be read on.
    fn on_link(&mut self, id: u64, h: &WireHdr, payload: &[u8], d: &mut dyn Delivery) -> bool {
        if h.op == proto::op::BYE {
            // The peer closed its endpoint: everything still expected from
            // or sent to it ends now.
            self.fail_conn(id, Error::CONNRESET, d);
            return false;
        }
        let Some(state) = self.conns.get(&id).map(|c| c.state) else {
            return false;
        };
        let hello = match hello::parse(h, payload, self.me.is_ipv6()) {
            Ok(x) => x,
            Err(why) => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: bad HELLO ({why:?})");
                self.fail_conn(id, Error::CONNRESET, d);
                return false;
            }
        };
        if let Some(c) = self.conns.get_mut(&id) {
            c.rts_prefix = hello::rts_prefix(h);
        }
        match (state, hello.kind) {
            (ConnState::AwaitHello, Kind::Request) => self.on_request(id, hello, d),
            (ConnState::HelloSent, Kind::Accept) => {
                let Some(c) = self.conns.get_mut(&id) else { return false };
                let key = c.peer;
                let writer = key.and_then(|k| self.peers.get(&k)).is_some_and(|p| p.conn == Some(id));
                if !writer {
                    self.drop_conn(id);
                    return false;
                }
                c.state = ConnState::Up;
                c.nonce = hello.nonce;
                c.deadline = None;
                if let Some(k) = key {
                    self.flush_peer(k);
                }
                self.update_interest(id);
                true
            }
            (ConnState::HelloSent, Kind::Reject) => {
                // The peer keeps its own dial to us: wait for it.
                let key = self.conns.get(&id).and_then(|c| c.peer);
                self.drop_conn(id);
                if let Some(p) = key.and_then(|k| self.peers.get_mut(&k)) {
                    if p.conn == Some(id) {
                        p.conn = None;
                        p.waiting_until = Some(Instant::now() + REJECTED_WAIT);
                    }
                }
                false
            }
            _ => {
                self.fail_conn(id, Error::CONNRESET, d);
                false
            }
        }
    }

    fn existing(&self, addr: &SocketAddr) -> Existing {
        let Some(cid) = self.peers.get(addr).and_then(|p| p.conn) else {
            return Existing::None;
        };
        match self.conns.get(&cid) {
            Some(c) if c.state == ConnState::Up => Existing::Up {
                dialed: c.dialed,
                nonce: c.nonce,
            },
            Some(c) if matches!(c.state, ConnState::Connecting | ConnState::HelloSent) => Existing::Dialing,
            _ => Existing::None,
        }
    }

    fn reply(&mut self, id: u64, kind: Kind) -> bool {
        let (me, nonce) = (self.me, self.nonce);
        let prefix = self.rts_prefix as u64;
        let Some(c) = self.conns.get_mut(&id) else { return false };
        let (h, p) = hello::encode_with_prefix(kind, &me, nonce, prefix);
        c.hs_out = h.to_vec();
        c.hs_out.extend_from_slice(&p);
        c.hs_done = 0;
        c.write_hs().is_ok()
    }

    fn on_request(&mut self, id: u64, req: Hello, d: &mut dyn Delivery) -> bool {
        let decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        match decision {
            Decision::Reject => {
                if let Some(c) = self.conns.get_mut(&id) {
                    c.state = ConnState::Closing;
                    c.deadline = Some(Instant::now() + HELLO_TIMEOUT);
                }
                if !self.reply(id, Kind::Reject) || !self.conns.get(&id).is_some_and(|c| c.hs_pending()) {
                    self.drop_conn(id);
                } else {
                    self.update_interest(id);
                }
                return false;
            }
            Decision::Replace => {
                if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                    self.fail_conn(old, Error::CONNRESET, d);
                }
            }
            Decision::TakeOver => {
                if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                    self.drop_conn(old);
                }
            }
            Decision::SelfConn | Decision::Adopt => {}
        }
        let Some(c) = self.conns.get_mut(&id) else { return false };
        c.state = ConnState::Up;
        c.peer = Some(req.addr);
        c.nonce = req.nonce;
        c.deadline = None;
        if decision == Decision::SelfConn {
            c.self_reader = true;
        } else {
            let p = self.peers.entry(req.addr).or_default();
            p.conn = Some(id);
            p.waiting_until = None;
        }
        if !self.reply(id, Kind::Accept) {
            self.fail_conn(id, Error::CONNRESET, d);
            return false;
        }
        if decision != Decision::SelfConn {
            self.flush_peer(req.addr);
        }
        self.update_interest(id);
        true
    }

    fn accept_all(&mut self) {
        for _ in 0..64 {
            match sys::accept(self.listener.as_raw_fd()) {
                Ok(Some(sock)) => {
                    let pending = self.conns.values().filter(|c| c.state == ConnState::AwaitHello).count();
                    if pending >= MAX_HANDSHAKES {
                        // Full: the oldest pending handshake makes room. A
                        // real peer says HELLO right after connecting, so
                        // idle or trickling sockets go first and a flood of
                        // them cannot lock real peers out.
                        let oldest = self
                            .conns
                            .iter()
                            .filter(|(_, c)| c.state == ConnState::AwaitHello)
                            .min_by_key(|(_, c)| c.deadline)
                            .map(|(id, _)| *id);
                        if let Some(id) = oldest {
                            self.drop_conn(id);
                        }
                    }
                    sys::tune_connection(sock.as_raw_fd(), SNDBUF, KEEPALIVE_IDLE, USER_TIMEOUT);
                    let c = Conn::new(sock, ConnState::AwaitHello, false, Instant::now() + HELLO_TIMEOUT);
                    let _ = self.add_conn(c);
                }
                Ok(None) => return,
                Err(e) => {
                    // Out of descriptors or memory: rest instead of spinning
                    // on a listener that stays readable.
                    crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: accept failed: {e}");
                    let _ = self.epoll.modify(self.listener.as_raw_fd(), 0, TOKEN_LISTENER);
                    self.listen_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn check_deadlines(&mut self, d: &mut dyn Delivery) {
        let now = Instant::now();
        if self.listen_paused_until.is_some_and(|t| t <= now) {
            self.listen_paused_until = None;
            let _ = self.epoll.modify(self.listener.as_raw_fd(), IN, TOKEN_LISTENER);
        }
        let late: Vec<(u64, ConnState)> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline.is_some_and(|t| t <= now))
            .map(|(id, c)| (*id, c.state))
            .collect();
        for (id, state) in late {
            match state {
                ConnState::Connecting | ConnState::HelloSent => self.fail_conn(id, Error::TIMEDOUT, d),
                _ => self.drop_conn(id),
            }
        }
        let late: Vec<SocketAddr> = self
            .peers
            .iter()
            .filter(|(_, p)| p.conn.is_none() && p.waiting_until.is_some_and(|t| t <= now))
            .map(|(a, _)| *a)
            .collect();
        for a in late {
            self.fail_peer(a, Error::TIMEDOUT, d);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let conns = self.conns.values().filter_map(|c| c.deadline);
        let peers = self.peers.values().filter_map(|p| p.waiting_until);
        conns.chain(peers).chain(self.listen_paused_until).min()
    }

    fn arm_timer(&mut self) {
        let next = self.next_deadline();
        if next != self.timer_at {
            self.timer_at = next;
            self.timer
                .set(next.map(|t| t.saturating_duration_since(Instant::now())));
        }
    }

    /// Closes a connection without telling anyone (it carried nothing the
    /// core knows about: a rejected or superseded dial, a handshake).
    fn drop_conn(&mut self, id: u64) {
        if let Some(c) = self.conns.remove(&id) {
            self.epoll.delete(c.sock.as_raw_fd());
        }
    }

    /// A connection failed. If it carried records (established, or the dial
    /// a peer's queue waits on) the peer fails with it.
    fn fail_conn(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(mut c) = self.conns.remove(&id) else { return };
        self.epoll.delete(c.sock.as_raw_fd());
        let src = Addr::Inet(c.peer.unwrap_or(self.me));
        c.reader.abort(
            &mut CoreSink {
                d: &mut *d,
                src,
                staged_elsewhere: 0,
            },
            crate::transport::PEER_FAILED,
        );
        let Some(addr) = c.peer else { return };
        let linked = match c.state {
            ConnState::Up => true,
            ConnState::Connecting | ConnState::HelloSent => self.peers.get(&addr).is_some_and(|p| p.conn == Some(id)),
            _ => false,
        };
        if linked {
            // A dial that never worked reports its own reason (refused,
            // unreachable, timed out); a broken connection is a peer failure.
            let e = if c.state == ConnState::Up {
                crate::transport::PEER_FAILED
            } else {
                e
            };
            self.fail_peer(addr, e, d);
        }
    }

    /// Ends everything to and from `addr`: queued records complete with `e`,
    /// its connections close, and the core hears `PeerEvent::Failed`.
    fn fail_peer(&mut self, addr: SocketAddr, e: Error, d: &mut dyn Delivery) {
        if let Some(mut p) = self.peers.remove(&addr) {
            for id in p.queue.take_notifications() {
                d.sent(id, Err(e));
            }
        }
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.peer == Some(addr) && matches!(c.state, ConnState::Up | ConnState::Connecting | ConnState::HelloSent)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(mut c) = self.conns.remove(&id) {
                self.epoll.delete(c.sock.as_raw_fd());
                c.reader.abort(
                    &mut CoreSink {
                        d: &mut *d,
                        src: Addr::Inet(addr),
                        staged_elsewhere: 0,
                    },
                    crate::transport::PEER_FAILED,
                );
            }
        }
        if !self.fenced.contains(&addr) {
            self.fenced.push(addr);
        }
        let ev = PeerEvent::Failed(Addr::Inet(addr));
        if !self.events.contains(&ev) {
            self.events.push(ev);
        }
    }

    /// Orderly close: BYE to every connected peer, then close every socket
    /// (after reading what is pending, so the kernel ends with FIN, not RST,
    /// and data already handed to it still reaches the peers).
    fn shutdown_all(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        let addrs: Vec<SocketAddr> = self.peers.keys().copied().collect();
        for a in addrs {
            let up = self
                .peers
                .get(&a)
                .and_then(|p| p.conn)
                .and_then(|id| self.conns.get(&id))
                .is_some_and(|c| c.state == ConnState::Up && c.doomed.is_none());
            if up {
                if let Some(p) = self.peers.get_mut(&a) {
                    p.queue
                        .push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
                }
                self.flush_peer(a);
            }
        }
        let mut buf = [0u8; 4096];
        for c in self.conns.values() {
            for _ in 0..16 {
                let v = [libc::iovec {
                    iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                    iov_len: buf.len(),
                }];
                // SAFETY: the iovec covers a local buffer.
                match unsafe { sys::read_iov(c.sock.as_raw_fd(), &v) } {
                    Io::Done(_) => continue,
                    _ => break,
                }
            }
        }
        for (_, c) in self.conns.drain() {
            self.epoll.delete(c.sock.as_raw_fd());
        }
        self.peers.clear();
    }
}

impl Drop for TcpPort {
    fn drop(&mut self) {
        self.shutdown_all();
    }
}

impl Port for TcpPort {
    fn addr(&self) -> Addr {
        Addr::Inet(self.me)
    }

    fn wait_fd(&self) -> RawFd {
        self.epoll.fd()
    }

    /// Arrivals need nothing (the kernel makes the epoll set readable), but
    /// a sleeper must not leave records waiting for a pass: write them, and
    /// write at once while anybody sleeps.
    fn set_sleepers(&mut self, n: usize) {
        self.cork.set_sleepers(n);
        if n > 0 {
            self.flush_corked();
        }
    }

    fn more_coming(&mut self) {
        self.cork.more();
    }

    /// Work the epoll set does not show: reports and failures found while
    /// sending, records waiting for a pass, and failure events the core has
    /// not taken yet.
    fn has_pending(&self) -> bool {
        !self.sent.is_empty()
            || !self.corked.is_empty()
            || !self.events.is_empty()
            || self.peers.values().any(|p| p.doomed.is_some())
            || self.conns.values().any(|c| c.doomed.is_some())
    }

    /// Larger messages go by rendezvous (RTS, then DATA once the receiver
    /// matched them): an unexpected large message then costs the receiver a
    /// descriptor, not its whole payload, and cannot hold up the messages
    /// behind it on the stream (which a receiver may be waiting for).
    fn eager_limit(&self) -> usize {
        EAGER_MAX
    }

    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        let to = self.inet(peer)?;
        let n = payload.len();
        if n > u32::MAX as usize {
            return Err(Error::MSGSIZE);
        }
        let mut h = *hdr;
        h.payload = n as u32;
        let body = match payload {
            Payload::None => Body::None,
            Payload::Bytes(b) => Body::Owned(b.to_vec()),
            Payload::Iov(iov, off, len) => Body::Iov(iov.sub(off, len)),
        };
        // Eager messages may wait for the pass that follows a burst;
        // rendezvous records (RTS, DATA) go at once.
        let may_wait = (h.op == proto::op::EAGER).then_some(n);
        if self.queue_record(to, OutRecord::new(h.to_bytes(), body), true, may_wait)? {
            return Ok(Sent::Done);
        }
        // Still queued (it is the last record): report it when written.
        // Small payloads are copied so that, as on shm (whose ring holds a
        // copy), the buffer is the application's again when the post
        // returns; larger ones stay in place until written.
        if let Some(r) = self.peers.get_mut(&to).and_then(|p| p.queue.back_mut()) {
            if copy || n <= COPY_MAX {
                r.make_owned();
            }
            r.notify = Some(h.msg_id);
        }
        Ok(Sent::Queued)
    }

    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        let to = self.inet(peer)?;
        // Control records answer a peer that reached us; one that is gone
        // (no entry) gets nothing: its failure was reported already.
        if !self.peers.contains_key(&to) {
            return Err(Error::CONNRESET);
        }
        let mut h = *hdr;
        h.payload = 0;
        self.queue_record(to, OutRecord::new(h.to_bytes(), Body::None), false, None)
            .map(|_| ())
    }

    fn room(&mut self, peer: &Addr) -> usize {
        let Ok(to) = self.inet(peer) else { return 0 };
        let used = self.peers.get(&to).map_or(0, |p| p.queue.unsent());
        QUEUE_HIGH_WATER.saturating_sub(used)
    }

    fn poll(&mut self, d: &mut dyn Delivery) {
        if !self.closed {
            self.poll_inner(d);
        }
    }

    /// Liveness comes from the connection itself (keepalive, user timeout).
    fn check_peer(&mut self, peer: &Addr) -> bool {
        match self.inet(peer) {
            Ok(a) => !self.fenced.contains(&a),
            Err(_) => false,
        }
    }

    fn sender_alive(&self, _src_pid: i32, peer: &Addr) -> bool {
        match peer {
            Addr::Inet(a) => !self.fenced.contains(a),
            _ => false,
        }
    }

    /// Called by the core after every pass and after posting receives. A
    /// call that did not follow a `poll` means a receive may have been
    /// posted: stalled connections get their EPOLLIN back so that a thread
    /// sleeping on the wait fd wakes and retries them (a pass that still
    /// cannot place the record drops the interest again: no spinning).
    fn take_events(&mut self) -> Vec<PeerEvent> {
        if !self.polled {
            let stalled: Vec<u64> = self
                .conns
                .iter()
                .filter(|(_, c)| c.stalled)
                .map(|(id, _)| *id)
                .collect();
            let mut wake = false;
            for id in stalled {
                if let Some(c) = self.conns.get_mut(&id) {
                    c.stalled = false;
                    wake |= c.reader.holds_input();
                }
                self.update_interest(id);
                if let Some(c) = self.conns.get_mut(&id) {
                    c.stalled = true;
                }
            }
            if wake {
                // The stalled record (or bytes read ahead) is in our buffers,
                // not in the socket: EPOLLIN alone may not wake a sleeper.
                // The deadline timer, fired now, does.
                self.timer.set(Some(Duration::from_micros(1)));
                self.timer_at = Some(Instant::now());
            }
        }
        self.polled = false;
        self.fenced.clear();
        std::mem::take(&mut self.events)
    }

    fn pull(&self, _src_pid: i32, _remote: &[(u64, u64)], _dst: &IovList, _len: usize) -> Result<usize> {
        Err(Error::OPNOTSUPP)
    }

    fn close(&mut self) {
        self.shutdown_all();
    }

    fn set_rts_prefix(&mut self, n: usize) {
        self.rts_prefix = n.min(EAGER_MAX);
    }

    /// From the peer's HELLO on the connection records to it use. Before
    /// that answer (records queue while the connection is made) the default
    /// `FI_OPT_BUFFERED_MIN`: a buffered receiver with the default then
    /// never has to ask for a prefix, and any other receiver drops at most
    /// that much of the first large messages sent to it.
    fn rts_prefix(&mut self, peer: &Addr) -> usize {
        let Ok(to) = self.inet(peer) else { return 0 };
        match self
            .peers
            .get(&to)
            .and_then(|p| p.conn)
            .and_then(|id| self.conns.get(&id))
        {
            Some(c) if c.state == ConnState::Up => c.rts_prefix,
            _ => crate::transport::DEFAULT_RTS_PREFIX,
        }
    }
}

const _: () = assert!(HDR_LEN == 64);

#[cfg(test)]
mod tests;
