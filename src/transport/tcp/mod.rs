//! The TCP transport: one [`TcpPort`] per RDM endpoint, one
//! [`connected::ConnectedPort`] per connected (`FI_EP_MSG`) endpoint. Every
//! connection of either runs the one state machine of [`conn`], and every
//! listening socket (an RDM port's, a passive endpoint's) is a
//! [`listener::Listener`] with its handshake table.
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
//! * **Waiting**: the listener and its handshakes, every connection and a
//!   timer for all deadlines are in the port's own epoll set, whose
//!   descriptor the domain's engine nests ([`Port::wait_fd`]); `poll` is
//!   one zero-timeout `epoll_wait`.

pub(crate) mod budget;
pub(crate) mod cm;
pub(crate) mod conn;
pub(crate) mod connected;
pub(crate) mod framing;
pub(crate) mod hello;
pub(crate) mod listener;

pub(crate) use budget::{PeerBudget, BUDGET_FLOOR};

use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::sys::net::{self, IfAddr, Tuning};
use crate::sys::{Epoll, IN};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, Limits, WireHdr, HDR_LEN};
use crate::transport::{Delivery, Payload, PayloadIn, PeerEvent, Port, Sent};
use budget::Account;
use conn::{Alarm, Conn, CoreSink, Phase, Read, Ready};
use framing::{Body, Cork, OutRecord, WriteQueue};
use hello::{Decision, Existing, Extra, Hello, Kind, Refusal, Side, Transcript, CHALLENGE_LEN};
use listener::{Handshake, Listener, ListenerOptions};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// A dial that is not established (connected and answered) by then fails.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// An accepted connection must say HELLO (or CONNREQ) by then.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After a REJECT (the peer keeps its own dial to us), its connection
/// must arrive by then.
pub(crate) const REJECTED_WAIT: Duration = Duration::from_secs(10);
/// Idle time before keepalive probes; 3 unanswered probes end a connection.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// Unacknowledged data older than this ends a connection (TCP_USER_TIMEOUT).
pub(crate) const USER_TIMEOUT: Duration = Duration::from_secs(15);
/// Kernel send buffer per connection (asked for; the kernel caps it at
/// `net.core.wmem_max` and doubles it: 8 MiB where that cap is 4 MiB, as on
/// the machines measured, twice what `tcp_wmem` autotuning reaches; where
/// the cap would leave less than autotuning — a stock kernel's 212,992
/// bytes — nothing is asked and the connection autotunes:
/// `sys::net::send_buffer_request`): several 1 MiB chunks
/// ([`CHUNK_MAX`]) fit while the reader is busy, so a sender of large
/// messages is not left waiting for `EPOLLOUT` (256 KiB, before, cost half
/// the 1 MiB bandwidth; 2 MiB measured below 4: docs/performance.md
/// "tcpbw"); still bounded, so a stalled receiver pushes back on the
/// sender's posts.
pub(crate) const SNDBUF: usize = 4 << 20;
/// The options of every data connection, dialed or accepted.
pub(crate) const TUNING: Tuning = Tuning {
    sndbuf: SNDBUF,
    keepalive: KEEPALIVE_IDLE,
    user_timeout: USER_TIMEOUT,
};
/// A peer queue above this many unsent bytes refuses new records
/// (`-FI_EAGAIN`); one record of any size is taken into an empty queue.
pub(crate) const QUEUE_HIGH_WATER: usize = 64 << 10;
/// A payload up to this size that cannot be handed to the kernel at once is
/// copied into the queue (shm's eager limit: the same buffer-reuse
/// behaviour on both transports); larger ones are sent from the
/// application's buffer.
pub(crate) const COPY_MAX: usize = crate::transport::shm::EAGER_MAX;
/// Unexpected payloads being received at once, in bytes, across all
/// connections (the endpoint's default unexpected budget).
const STAGING_MAX: usize = crate::transport::DEFAULT_UNEXP_BUDGET;
/// Accepted connections still in their handshake, at most (a newcomer
/// beyond it replaces the oldest: see [`listener`]). Smaller in unit tests,
/// so that the flood test's sockets stay few.
const MAX_HANDSHAKES: usize = if cfg!(test) { 32 } else { 256 };
/// Listen backlog of an RDM port.
const LISTEN_BACKLOG: i32 = 512;
/// Bytes of a dropped (truncated) payload read per call.
pub(crate) const SCRATCH: usize = 64 << 10;

// The listener's tokens carry `listener::TOKEN_TAG`.
const TOKEN_TIMER: u64 = 1;
const FIRST_CONN: u64 = 2;

/// One connection of the port and what the port knows about its peer.
struct PortConn {
    conn: Conn,
    /// The peer's listening address (our dials: the address we dialed).
    peer: Option<SocketAddr>,
    /// We dialed it (the tie-break's "own dial").
    dialed: bool,
    /// The peer's incarnation (from its HELLO).
    nonce: u64,
    /// Our own dial to ourselves, read as inbound from us.
    self_reader: bool,
    /// The RTS prefix the peer asked for in its HELLO.
    rts_prefix: usize,
    /// Our dial's challenge (keyed handshakes).
    challenge: [u8; CHALLENGE_LEN],
    /// An accepted connection whose keyed REQUEST we answered: its PROOF
    /// is awaited before it is anybody's connection.
    proving: Option<Box<Proving>>,
    /// It carried a record either way since its handshake, last at
    /// `last_active` (the pass's clock): the connection cap spares it.
    carried: bool,
    last_active: Option<Instant>,
    /// Its answers, counted into the port's `replies` total, and its
    /// budget's state.
    acct: Account,
}

/// What an acceptor keeps of a keyed REQUEST until its PROOF.
struct Proving {
    req: Hello,
    /// The challenge our ACCEPT carried.
    mine: [u8; CHALLENGE_LEN],
}

/// A REQUEST for an address a live connection holds, waiting for that
/// connection to end ([`Decision::Park`]).
struct Parked {
    conn: Conn,
    req: Hello,
    /// Our ACCEPT went out already (keyed: the PROOF checked out).
    answered: bool,
    until: Instant,
}

/// An authentication key (`domain_attr->auth_key`, `ep_attr->auth_key`,
/// `FI_RUSTFAB_AUTH_KEY`); never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AuthKey(pub(crate) Vec<u8>);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

impl PortConn {
    fn new(conn: Conn, peer: Option<SocketAddr>) -> PortConn {
        PortConn {
            conn,
            peer,
            dialed: false,
            nonce: 0,
            self_reader: false,
            rts_prefix: 0,
            challenge: [0; CHALLENGE_LEN],
            proving: None,
            carried: false,
            last_active: None,
            acct: Account::default(),
        }
    }
}

/// A destination: the connection its records use, and the records that
/// wait for that connection to be established.
#[derive(Default)]
struct Peer {
    /// The connection records to this peer are written on.
    conn: Option<u64>,
    /// Rejected: the peer dials us; until then records wait.
    waiting_until: Option<Instant>,
    /// Records queued before the connection was established (dialing,
    /// handshake, waiting for the peer's dial); the connection takes them,
    /// in order, the moment it is up, and later records go to its queue.
    pending: WriteQueue,
    /// Records wait for the next pass (send coalescing).
    corked: bool,
    /// A failure found outside `poll`, reported by the next pass.
    doomed: Option<Error>,
}

/// How [`TcpPort::queue_record`] treats a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queueing {
    /// A data record: refused beyond [`QUEUE_HIGH_WATER`]; an eager message
    /// (`eager`: its payload length) may wait for the next pass ([`Cork`]).
    Data { eager: Option<usize>, if_queued: IfQueued },
    /// A control record: always taken, written at once.
    Control,
}

/// What a data record needs if it is still queued when its send returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IfQueued {
    /// Reported through `Delivery::sent` once written.
    msg_id: u64,
    /// Its payload is copied first: the caller needs its buffer back.
    copy: bool,
}

/// A control record's payload (read whole into the reader's buffer), as
/// the core takes it (RDM and connected endpoints' connections).
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

/// Chooses the address to advertise for a listener bound to `bound`, with
/// no route to ask ([`advertised_addr_with`] without hints).
#[cfg(test)]
pub(crate) fn advertised_addr(bound: SocketAddr, iface: Option<&str>, ifs: &[IfAddr]) -> SocketAddr {
    advertised_addr_with(bound, iface, &[], ifs, |_| None)
}

/// A reachable destination outside any private network (TEST-NET-3, RFC
/// 5737; 2001:db8::/32 for IPv6): the route to it is the default route.
const DEFAULT_ROUTE_PROBE_V4: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
const DEFAULT_ROUTE_PROBE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

/// Chooses the address to advertise for a listener bound to `bound`, the
/// first that applies:
/// 1. the bound address itself unless it is a wildcard;
/// 2. the address of the interface `iface` names (`FI_RUSTFAB_IFACE`);
/// 3. the source of the route to a launcher address in `hints` (the
///    address mpirun or srun was started from: the peers of a job are
///    reached the way the launcher is), when that source is an interface
///    that is up and not loopback;
/// 4. the source of the default route, likewise;
/// 5. the first interface that is up and not loopback;
/// 6. loopback.
///
/// Never a wildcard, a down interface, or a link-local address (it needs a
/// scope to be dialed). `route` asks the kernel for the source address
/// towards a destination (`sys::net::route_source`). The choice and its
/// reason are logged at FI_LOG_INFO.
pub(crate) fn advertised_addr_with(
    bound: SocketAddr,
    iface: Option<&str>,
    hints: &[IpAddr],
    ifs: &[IfAddr],
    route: impl Fn(IpAddr) -> Option<IpAddr>,
) -> SocketAddr {
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
    // An up, non-loopback interface address that the kernel routes from.
    let routed_from = |dest: IpAddr| {
        let src = route(dest)?;
        ifs.iter().filter(usable).find(|a| a.ip == src && a.up && !a.loopback)
    };
    let default_probe = if v6 {
        IpAddr::V6(DEFAULT_ROUTE_PROBE_V6)
    } else {
        IpAddr::V4(DEFAULT_ROUTE_PROBE_V4)
    };
    let (pick, why) = if let Some(a) = named {
        (Some(a), "FI_RUSTFAB_IFACE".to_string())
    } else if let Some((h, a)) = hints
        .iter()
        .filter(|h| h.is_ipv6() == v6 && !h.is_loopback() && !h.is_unspecified())
        .find_map(|&h| routed_from(h).map(|a| (h, a)))
    {
        (Some(a), format!("the route to the launcher's address {h}"))
    } else if let Some(a) = routed_from(default_probe) {
        (Some(a), "the default route".to_string())
    } else {
        (
            ifs.iter().filter(usable).find(|a| a.up && !a.loopback),
            "the first interface that is up".to_string(),
        )
    };
    let ip = pick.map(|a| a.ip).unwrap_or(if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    });
    crate::base::log::log_info!(
        crate::abi::FI_LOG_CORE,
        "tcp: advertising {ip} ({}: {}; FI_RUSTFAB_IFACE picks another)",
        pick.map_or("lo", |a| a.name.as_str()),
        if pick.is_some() {
            why.as_str()
        } else {
            "no other interface is up"
        }
    );
    SocketAddr::new(ip, bound.port())
}

/// Says why a dial failed, once for each of the first few and then one in
/// 1024 (a job whose addresses are wrong fails every dial): what to set when
/// the address the peer advertised is one this host cannot reach.
#[cold]
fn dial_failed(addr: SocketAddr, e: Error) {
    static DIALS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
    let n = DIALS.fetch_add(1, core::sync::atomic::Ordering::Relaxed) + 1;
    if n <= 8 || n.is_multiple_of(1024) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_CTRL,
            "tcp: cannot reach {addr} ({e}; {n} failed dials so far): its operations fail. If that is an address of an interface the hosts do not share, set FI_RUSTFAB_IFACE on every process to the interface they do share"
        );
    }
}

/// A fresh challenge (the kernel's random numbers).
fn random_challenge() -> [u8; CHALLENGE_LEN] {
    let mut c = [0u8; CHALLENGE_LEN];
    c[..8].copy_from_slice(&crate::transport::addr::shm_token_random().to_le_bytes());
    c[8..].copy_from_slice(&crate::transport::addr::shm_token_random().to_le_bytes());
    c
}

/// The address a socket's peer has, IPv4-mapped IPv6 read as IPv4.
fn plain_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
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
pub(crate) struct TcpSettings {
    /// The interface whose address a wildcard-bound endpoint advertises.
    pub(crate) iface: Option<String>,
    /// Small sends posted back to back wait for the next progress pass
    /// (see [`Cork`]); `FI_MORE` works either way.
    pub(crate) coalesce: bool,
    /// Peers must prove this key in the handshake (`FI_RUSTFAB_AUTH_KEY`,
    /// or the endpoint's `auth_key`).
    pub(crate) auth_key: Option<AuthKey>,
    /// Established connections kept at most (`FI_RUSTFAB_TCP_MAX_CONNS`).
    pub(crate) max_conns: usize,
    /// Addresses the job's launcher was started from (read from the
    /// environment mpirun, srun or hydra give a rank): without `iface`, a
    /// wildcard-bound endpoint advertises the address the route to them
    /// leaves from ([`advertised_addr_with`]).
    pub(crate) route_hints: Vec<IpAddr>,
    /// Answers one peer's requests may keep queued (`FI_RUSTFAB_PEER_BUDGET`,
    /// `_TOTAL`, `_TIMEOUT`; docs/security.md "Peer budgets").
    pub(crate) budget: PeerBudget,
}

/// [`TcpSettings::max_conns`] by default, and at least.
pub(crate) const MAX_CONNS_DEFAULT: usize = 1024;
pub(crate) const MAX_CONNS_MIN: usize = 4;

impl Default for TcpSettings {
    fn default() -> TcpSettings {
        TcpSettings {
            iface: None,
            coalesce: true,
            auth_key: None,
            max_conns: MAX_CONNS_DEFAULT,
            route_hints: Vec::new(),
            budget: PeerBudget::default(),
        }
    }
}

/// Largest eager message on a TCP stream.
pub(crate) const EAGER_MAX: usize = 64 << 10;
/// Largest chunk of an accepted transfer on a TCP stream (`DATA`, `WRITE`,
/// `READ_RESP`): the receiver places it straight into its destination, so
/// its size costs no memory; a large one is one `sendmsg` (continued as the
/// socket drains) and a few `readv`s instead of one pair per 64 KiB.
pub(crate) const CHUNK_MAX: usize = 1 << 20;

pub(crate) struct TcpPort {
    me: SocketAddr,
    nonce: u64,
    /// Accepts and reads HELLOs until a connection says its REQUEST (its
    /// descriptors are in our epoll set under its tokens).
    listener: Listener,
    epoll: Epoll,
    /// Deadlines of dials, handshake answers, refusals being written, peers
    /// we wait for, and the listener's.
    alarm: Alarm,
    /// Fast-hashed (`FastMap`): the engine asks `room` for every streaming
    /// send in every pass, two lookups each (a window of 64 large sends
    /// spent ~20 % of the sender's CPU in SipHash, docs/performance.md
    /// "tcpbw"). Keys are our own ids and the addresses of the peers we
    /// hold connections to or records for, not a stream a peer can grow
    /// (accepted connections are capped by `max_conns`).
    conns: FastMap<u64, PortConn>,
    peers: FastMap<SocketAddr, Peer>,
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
    /// Peers must prove it (keyed handshake).
    key: Option<AuthKey>,
    /// REQUESTs waiting for the live connection holding their address to end.
    parked: Vec<Parked>,
    /// Connections kept at most ([`TcpSettings::max_conns`]).
    max_conns: usize,
    /// The peers' budget for queued answers, and the bytes of answers
    /// counted in all connections' queues (each connection's share is
    /// brought up to date whenever it is read, written or queued to).
    budget: PeerBudget,
    replies: usize,
    /// Passes so far, and the bytes of answers charged in this one (all
    /// connections).
    pass: u64,
    charged: usize,
    /// The clock of this pass (activity stamps; one reading per pass).
    now: Instant,
    /// Bytes all connections' readers hold for unexpected messages still
    /// arriving (kept as they change: no scan per read).
    staged: usize,
    /// Connections the core stalled, connections doomed by a write and
    /// peers whose dial failed at once: what a pass must look at, without
    /// scanning every connection (ids may be stale: skipped).
    stalled: Vec<u64>,
    doomed: Vec<u64>,
    doomed_peers: Vec<SocketAddr>,
    /// The connection of the last arrival, read first in each pass, the
    /// passes since epoll was last asked, and how many busy passes go
    /// between two `epoll_wait`s now ([`EPOLL_EVERY_MIN`] ..
    /// [`EPOLL_EVERY_MAX`]; [`EPOLL_EVERY_WRITING`] while `writing` holds
    /// a connection).
    hot: Option<u64>,
    since_epoll: u32,
    epoll_every: u32,
    /// Connections registered for `EPOLLOUT` (a write waits for room, a
    /// connect for its end): listed when their interest is updated, pruned
    /// at each `epoll_wait` (ids may be stale or listed as done: checked).
    writing: Vec<u64>,
    /// `epoll_wait` calls made (tests count them).
    #[cfg(test)]
    epoll_waits: u64,
    /// Connections that may have a deadline (dials, handshakes, refusals)
    /// and peers waiting for a dial: the only ones deadlines are looked up
    /// in (established connections have none). Pruned as they lose them.
    timed: Vec<u64>,
    waiting: Vec<SocketAddr>,
}

/// Busy polling: passes that read the hot connection straight from its
/// socket between two `epoll_wait`s (see `poll_inner`): EPOLL_EVERY_MIN
/// after an `epoll_wait` that reported anything besides the hot connection
/// (another peer, the listener, the timer), doubled after each one that
/// reported nothing else, up to EPOLL_EVERY_MAX. With one busy peer (a
/// ping-pong) `epoll_wait` then costs ~1 system call per 64 passes instead
/// of 1 per 8 (docs/performance.md "tcplat").
pub(crate) const EPOLL_EVERY_MIN: u32 = 8;
pub(crate) const EPOLL_EVERY_MAX: u32 = 64;
/// ... but while any connection waits for `EPOLLOUT` (a bulk sender whose
/// socket is full), epoll is asked every EPOLL_EVERY_WRITING passes: the
/// busy reads look at the hot socket's input only, so only `epoll_wait`
/// tells the sender that it can write again (backed off to 64, tcp 1 MiB
/// bandwidth halved: the reverted d317dbf).
pub(crate) const EPOLL_EVERY_WRITING: u32 = 8;

/// A connection that carried traffic this recently is never closed to make
/// room under the cap.
const IDLE_MIN: Duration = Duration::from_secs(1);

/// A parked REQUEST is refused if the connection holding its address is
/// still up by then.
const PARK_WAIT: Duration = Duration::from_secs(5);

/// Lists connection `id` in `writing` if it waits for `EPOLLOUT` now (once:
/// the list is short, a few connections with full sockets at most).
fn note_writing(writing: &mut Vec<u64>, id: u64, c: &Conn) {
    if c.waits_to_write() && !writing.contains(&id) {
        writing.push(id);
    }
}

/// Brings connection `id`'s registered events in line with what it wants
/// ([`Conn::update`]) and lists it in `writing` if it now waits for
/// `EPOLLOUT`: every interest change goes through here, so the list the
/// epoll back-off reads cannot miss one.
fn sync_interest(epoll: &Epoll, writing: &mut Vec<u64>, id: u64, c: &mut Conn) {
    c.update(epoll);
    note_writing(writing, id, c);
}

/// Brings the port's total of queued answers (`total`) up to date with
/// connection `c`'s queue.
#[inline]
fn recount(total: &mut usize, c: &mut PortConn) {
    c.acct.recount(total, c.conn.queue());
}

impl TcpPort {
    /// Listens on `src` (port 0: an ephemeral port; wildcard IP: all
    /// interfaces, advertising a reachable one).
    pub(crate) fn new(src: SocketAddr, limits: Limits, settings: &TcpSettings) -> Result<TcpPort> {
        let listener = Listener::bind(
            &src,
            LISTEN_BACKLOG,
            ListenerOptions {
                max_handshakes: MAX_HANDSHAKES,
                timeout: HELLO_TIMEOUT,
            },
        )?;
        let bound = listener.local_addr()?;
        let me = advertised_addr_with(
            bound,
            settings.iface.as_deref(),
            &settings.route_hints,
            &net::interfaces(),
            net::route_source,
        );
        let epoll = Epoll::new()?;
        let alarm = Alarm::new()?;
        listener.watch(&epoll)?;
        epoll.add(alarm.fd(), IN, TOKEN_TIMER)?;
        Ok(TcpPort {
            me,
            nonce: random_nonce(),
            listener,
            epoll,
            alarm,
            conns: FastMap::default(),
            peers: FastMap::default(),
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
            cork: Cork::new(settings),
            corked: Vec::new(),
            key: settings.auth_key.clone().filter(|k| !k.0.is_empty()),
            parked: Vec::new(),
            max_conns: settings.max_conns.max(MAX_CONNS_MIN),
            budget: settings.budget,
            replies: 0,
            pass: 0,
            charged: 0,
            now: Instant::now(),
            staged: 0,
            stalled: Vec::new(),
            doomed: Vec::new(),
            doomed_peers: Vec::new(),
            hot: None,
            since_epoll: 0,
            epoll_every: EPOLL_EVERY_MIN,
            writing: Vec::new(),
            #[cfg(test)]
            epoll_waits: 0,
            timed: Vec::new(),
            waiting: Vec::new(),
        })
    }

    #[cfg(test)]
    /// The advertised (dialable) address.
    pub(crate) fn local(&self) -> SocketAddr {
        self.me
    }

    fn inet(&self, a: &Addr) -> Result<SocketAddr> {
        match a {
            Addr::Inet(s) if s.is_ipv6() == self.me.is_ipv6() => Ok(*s),
            _ => Err(Error::INVAL),
        }
    }

    fn add_conn(&mut self, mut c: PortConn) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        c.conn.watch(&self.epoll, id)?;
        if c.conn.deadline().is_some() {
            self.timed.push(id);
        }
        note_writing(&mut self.writing, id, &c.conn);
        self.conns.insert(id, c);
        Ok(id)
    }

    fn update_interest(&mut self, id: u64) {
        if let Some(c) = self.conns.get_mut(&id) {
            sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        }
    }

    /// Starts a dial to `to`; the peer entry holds the records meanwhile.
    fn dial(&mut self, to: SocketAddr) -> Result<u64> {
        // Our own dials are the application's: they close an idle
        // connection at the cap, but are never refused for it.
        let _ = self.make_room();
        // From our advertised IP: the acceptor checks that the address our
        // HELLO claims is the connection's source (a loopback endpoint
        // dialing out of the host cannot, and is refused).
        let from = net::source_socket(self.me.ip()).ok();
        let conn = Conn::dial(from, &to, self.connect_timeout)?;
        let mut c = PortConn::new(conn, Some(to));
        c.dialed = true;
        let id = self.add_conn(c)?;
        // A sleeper must wake for the deadline even before the next pass.
        self.arm_timer();
        Ok(id)
    }

    /// The peer entry for a send, dialing if there is none. A dial that
    /// fails at once is reported like one that fails later (an error
    /// completion for the send), by the next progress pass.
    fn peer_for_send(&mut self, to: SocketAddr) -> Result<()> {
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
                Err(e) => {
                    p.doomed = Some(e);
                    self.doomed_peers.push(to);
                }
            }
            self.peers.insert(to, p);
        }
        Ok(())
    }

    /// Where a record to `to` goes now: the established connection's queue,
    /// else the peer's pending records.
    fn queue_of(&mut self, to: SocketAddr) -> Option<&mut WriteQueue> {
        let p = self.peers.get_mut(&to)?;
        match p.conn.and_then(|id| self.conns.get_mut(&id)) {
            Some(c) if c.conn.phase() == Phase::Up => Some(c.conn.queue_mut()),
            _ => Some(&mut p.pending),
        }
    }

    /// Connection `id` to `addr` is established: it takes the records that
    /// waited for it, behind what it holds (its ACCEPT).
    fn establish(&mut self, id: u64, addr: SocketAddr) {
        if let (Some(p), Some(c)) = (self.peers.get_mut(&addr), self.conns.get_mut(&id)) {
            c.conn.queue_mut().append(&mut p.pending);
        }
    }

    /// Writes what a peer's connection holds, if it is established. Errors
    /// doom the connection (handled by the next pass).
    fn flush_peer(&mut self, to: SocketAddr) {
        let Some(id) = self.peers.get(&to).and_then(|p| p.conn) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.conn.phase() != Phase::Up || c.conn.doomed().is_some() || c.conn.queue().is_empty() {
            return;
        }
        c.conn.flush(&mut self.sent);
        recount(&mut self.replies, c);
        sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        if c.conn.doomed().is_some() {
            self.doomed.push(id);
        }
    }

    /// Queues a record and writes the queue, unless the record is an eager
    /// message that may wait for the next pass ([`Cork`]). `Ok(true)`:
    /// written.
    fn queue_record(&mut self, to: SocketAddr, rec: OutRecord, how: Queueing) -> Result<bool> {
        self.peer_for_send(to)?;
        // Where the record goes: the established connection's queue, else
        // the peer's pending records (one lookup each: the send path).
        let if_queued = match how {
            Queueing::Data { if_queued, .. } => Some(if_queued),
            Queueing::Control => None,
        };
        let p = self.peers.get_mut(&to).ok_or(Error::CONNRESET)?;
        let cid = p.conn;
        let mut up = cid
            .and_then(|id| self.conns.get_mut(&id))
            .filter(|c| c.conn.phase() == Phase::Up);
        if let Some(c) = up.as_mut() {
            c.carried = true;
            c.last_active = Some(self.now);
        }
        let q = match up.as_mut() {
            Some(c) => c.conn.queue_mut(),
            None => &mut p.pending,
        };
        if matches!(how, Queueing::Data { .. }) && q.unsent() >= QUEUE_HIGH_WATER {
            return Err(Error::AGAIN);
        }
        match how {
            Queueing::Control => q.push_reply(rec),
            Queueing::Data { .. } => q.push(rec),
        }
        let mut written = false;
        let corked = match how {
            Queueing::Data { eager: Some(n), .. } => self.cork.defer(n, q.unsent()),
            _ => false,
        };
        if corked {
            if !p.corked {
                p.corked = true;
                self.corked.push(to);
            }
        } else if let Some(c) = up.as_mut() {
            if c.conn.doomed().is_none() {
                c.conn.flush(&mut self.sent);
                // `up` is a connection of `cid`'s: `cid` is set.
                if let Some(id) = cid {
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                }
                if c.conn.doomed().is_some() {
                    self.doomed.extend(cid);
                }
            }
            written = c.conn.queue().is_empty();
            recount(&mut self.replies, c);
        }
        if written {
            return Ok(true);
        }
        // Still queued (it is the last record): report it when written.
        // Small payloads are copied so that, as on shm (whose ring holds a
        // copy), the buffer is the application's again when the post
        // returns; larger ones stay in place until written.
        let q = match up {
            Some(c) => c.conn.queue_mut(),
            None => &mut p.pending,
        };
        if let (Some(iq), Some(r)) = (if_queued, q.back_mut()) {
            if iq.copy {
                r.make_owned();
            }
            r.notify = Some(iq.msg_id);
        }
        Ok(false)
    }

    /// Writes every queue that waits for a pass.
    /// Reads the established connections that records wait for before the
    /// records are written: a peer that died since (its end of stream or
    /// reset is in the socket) is failed first, and the records fail with
    /// it (`FI_ECONNRESET`) instead of going into the dead connection, which
    /// the kernel still takes after the peer's FIN (the dead socket answers
    /// with a reset: the records would be reported sent, and lost). One
    /// read per connection and pass with records in a burst; a record
    /// written at once (the first after a pass) goes unchecked: what the
    /// kernel had taken before the peer's end was known is the connection's
    /// and fails or is lost with it, as on any TCP stream.
    fn read_corked(&mut self, d: &mut dyn Delivery) {
        let ids: Vec<u64> = self
            .corked
            .iter()
            .filter_map(|a| self.peers.get(a).and_then(|p| p.conn))
            .filter(|id| self.conns.get(id).is_some_and(|c| c.conn.readable_now()))
            .collect();
        for id in ids {
            self.read_conn(id, d);
        }
    }

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
        self.pass += 1;
        self.charged = 0;
        self.now = Instant::now();
        if !self.corked.is_empty() {
            // Earlier records' reports first: completions keep their order.
            for (id, r) in std::mem::take(&mut self.sent) {
                d.sent(id, r);
            }
            self.read_corked(d);
        }
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        for id in std::mem::take(&mut self.doomed) {
            if let Some(e) = self.conns.get(&id).and_then(|c| c.conn.doomed()) {
                self.fail_conn(id, e, d);
            }
        }
        for a in std::mem::take(&mut self.doomed_peers) {
            if let Some(e) = self.peers.get(&a).and_then(|p| p.doomed) {
                self.fail_peer(a, e, d);
            }
        }
        // Stalled connections first: the core may take their record now.
        self.retry_stalled(d);
        // Busy polling: while a connection is hot (it carried the last
        // arrival epoll reported), a pass reads it straight from its socket
        // and asks epoll only every `epoll_every` passes (8, backing off to
        // 64 while epoll shows nothing else), or every EPOLL_EVERY_WRITING
        // while a write waits for room: one system call per arrival instead
        // of two, and one per idle pass. Other sockets, the listener and
        // the timer wait one such interval at most; deadlines are still
        // checked by the clock. Nothing here changes a deadline.
        let every = if self.writing.is_empty() {
            self.epoll_every
        } else {
            EPOLL_EVERY_WRITING
        };
        if self.since_epoll < every {
            if let Some(id) = self.hot {
                if self.conns.get(&id).is_some_and(|c| c.conn.readable_now()) {
                    self.read_conn(id, d);
                    self.since_epoll += 1;
                    let got = self.conns.get(&id).is_some_and(|c| c.conn.last_got() > 0);
                    if got {
                        self.retry_stalled(d);
                    }
                    if self.alarm.due() {
                        self.check_deadlines(d);
                        self.arm_timer();
                    }
                    return;
                }
                self.hot = None;
            }
        }
        self.since_epoll = 0;
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        #[cfg(test)]
        {
            self.epoll_waits += 1;
        }
        // Back off while epoll shows nothing the busy reads do not see and
        // no write waits for room (what epoll reports now is handled below
        // and lists a connection again if it still waits).
        let conns = &self.conns;
        self.writing
            .retain(|id| conns.get(id).is_some_and(|c| c.conn.waits_to_write()));
        let was_hot = self.hot;
        if was_hot.is_some() && self.writing.is_empty() && ready.iter().all(|&(t, _)| Some(t) == was_hot) {
            self.epoll_every = (self.epoll_every * 2).min(EPOLL_EVERY_MAX);
        } else {
            self.epoll_every = EPOLL_EVERY_MIN;
        }
        let mut delivered = false;
        for &(token, ev) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                t if Listener::owns(t) => self.listener.event(&self.epoll, t),
                id => {
                    delivered = true;
                    self.conn_event(id, ev, d);
                    if self
                        .conns
                        .get(&id)
                        .is_some_and(|c| c.conn.last_got() > 0 && c.conn.readable_now())
                    {
                        self.hot = Some(id);
                    }
                }
            }
        }
        self.ready = ready;
        while let Some(h) = self.listener.next() {
            self.on_request(h, d);
        }
        if !self.parked.is_empty() {
            self.check_parked(d);
        }
        self.finish_pass(delivered, d);
    }

    /// The end of a pass: stalled connections again (what arrived may have
    /// freed room: a staged message handed over), deadlines.
    fn finish_pass(&mut self, delivered: bool, d: &mut dyn Delivery) {
        if delivered {
            self.retry_stalled(d);
        }
        if self.alarm.due() {
            self.check_deadlines(d);
        }
        self.arm_timer();
    }

    fn retry_stalled(&mut self, d: &mut dyn Delivery) {
        if self.stalled.is_empty() {
            return;
        }
        let stalled = std::mem::take(&mut self.stalled);
        for &id in &stalled {
            if self.conns.get(&id).is_some_and(|c| c.conn.stalled()) {
                // Stalls again: read_conn lists it again.
                self.read_conn(id, d);
            }
        }
        let mut v = stalled;
        v.clear();
        if self.stalled.is_empty() {
            self.stalled = v;
        }
    }

    fn conn_event(&mut self, id: u64, ev: u32, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.conn.phase() == Phase::Up {
            c.carried = true;
            c.last_active = Some(self.now);
        }
        match c.conn.ready(ev) {
            Ready::Dialed(Ok(())) => self.connected(id, d),
            Ready::Dialed(Err(e)) | Ready::Broken(e) => self.fail_conn(id, e, d),
            Ready::Io { write, read } => {
                if write {
                    self.write_side(id, d);
                }
                if read {
                    self.read_conn(id, d);
                }
            }
        }
    }

    /// The connect finished: say HELLO.
    fn connected(&mut self, id: u64, d: &mut dyn Delivery) {
        let (me, nonce, connect_timeout) = (self.me, self.nonce, self.connect_timeout);
        let keyed = self.key.is_some();
        let x = Extra {
            keyed,
            challenge: if keyed { random_challenge() } else { [0; CHALLENGE_LEN] },
            word: self.rts_prefix as u64,
            ..Extra::default()
        };
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.challenge = x.challenge;
        let (h, p) = hello::encode_with(Kind::Request, &me, nonce, &x);
        c.conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        c.conn.set_phase(Phase::AwaitAnswer);
        c.conn.set_deadline(Some(Instant::now() + connect_timeout));
        c.conn.flush(&mut self.sent);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        self.update_interest(id);
    }

    fn write_side(&mut self, id: u64, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let empty = c.conn.flush(&mut self.sent);
        recount(&mut self.replies, c);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        if c.conn.phase() == Phase::Closing && empty {
            // The refusal is out: done with it.
            self.drop_conn(id);
            return;
        }
        self.update_interest(id);
    }

    fn read_conn(&mut self, id: u64, d: &mut dyn Delivery) {
        // Link records (an answer to our HELLO, BYE) are handled between
        // reads; bounded.
        for _ in 0..4 {
            let lim = self.limits;
            let Some(c) = self.conns.get_mut(&id) else { return };
            if matches!(c.conn.phase(), Phase::Closing | Phase::Dialing) {
                return;
            }
            let mine = c.conn.reader().staged_bytes();
            let staged_elsewhere = self.staged.saturating_sub(mine);
            recount(&mut self.replies, c);
            let sink = CoreSink {
                d: &mut *d,
                src: Addr::Inet(c.peer.unwrap_or(self.me)),
                staged_elsewhere,
                staging_max: STAGING_MAX,
                reply_room: 0,
                over_budget: false,
            };
            let total = self.replies + self.charged;
            let (conn, scratch) = (&mut c.conn, &mut self.scratch);
            let got = c
                .acct
                .read(&self.budget, self.pass, total, sink, |s| conn.read(s, &lim, scratch));
            let r = got.read;
            self.charged += got.spent;
            self.staged = staged_elsewhere + c.conn.reader().staged_bytes();
            if let Some(over) = got.changed {
                self.budget_state(id, over);
            }
            let Some(c) = self.conns.get_mut(&id) else { return };
            match r {
                Read::Idle => {
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    return;
                }
                Read::Stalled => {
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    self.stalled.push(id);
                    return;
                }
                Read::Link(h) => {
                    let payload = c.conn.link_payload().to_vec();
                    if !self.on_link(id, &h, &payload, d) {
                        return;
                    }
                }
                Read::Ended(end) => {
                    self.fail_conn(id, end.error(), d);
                    return;
                }
            }
        }
    }

    /// Connection `id`'s records started (`over`) or stopped being left
    /// unread for want of budget: its deadline is then the cut-off
    /// ([`PeerBudget::timeout`]), or none again.
    fn budget_state(&mut self, id: u64, over: bool) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.conn.set_deadline(c.acct.deadline(&self.budget));
        if over {
            let peer = c.peer.map_or_else(String::new, |a| a.to_string());
            budget::log_stopped(&peer, c.acct.counted);
            if !self.timed.contains(&id) {
                self.timed.push(id);
            }
            self.arm_timer();
        }
    }

    /// The answer to our HELLO, a keyed dialer's PROOF, or BYE. Returns
    /// whether the connection may be read on.
    fn on_link(&mut self, id: u64, h: &WireHdr, payload: &[u8], d: &mut dyn Delivery) -> bool {
        if h.op == proto::op::BYE {
            // The peer closed its endpoint: everything still expected from
            // or sent to it ends now.
            self.fail_conn(id, Error::CONNRESET, d);
            return false;
        }
        let Some(phase) = self.conns.get(&id).map(|c| c.conn.phase()) else {
            return false;
        };
        let hello = match hello::parse(h, payload, hello::Family::of(&self.me)) {
            Ok(x) => x,
            Err(why) => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: bad HELLO ({why:?})");
                self.fail_conn(id, Error::CONNRESET, d);
                return false;
            }
        };
        if self.conns.get(&id).is_some_and(|c| c.proving.is_some()) {
            if hello.kind == Kind::Proof {
                self.on_proof(id, &hello, d);
            } else {
                self.fail_conn(id, Error::CONNRESET, d);
            }
            return false;
        }
        match (phase, hello.kind) {
            (Phase::AwaitAnswer, Kind::Accept) => {
                let Some(key) = self.conns.get(&id).and_then(|c| c.peer) else {
                    return false;
                };
                let writer = self.peers.get(&key).is_some_and(|p| p.conn == Some(id));
                if !writer {
                    self.drop_conn(id);
                    return false;
                }
                if let Err(e) = self.check_accept(id, &hello) {
                    self.fail_peer(key, e, d);
                    self.remove_conn(id, e, d);
                    return false;
                }
                if let Some(c) = self.conns.get_mut(&id) {
                    c.conn.set_phase(Phase::Up);
                    c.conn.set_deadline(None);
                    c.nonce = hello.nonce;
                    c.rts_prefix = hello::rts_prefix(&hello);
                }
                self.establish(id, key);
                self.flush_peer(key);
                self.update_interest(id);
                true
            }
            (Phase::AwaitAnswer, Kind::Reject) => {
                // The peer keeps its own dial to us: wait for it.
                let key = self.conns.get(&id).and_then(|c| c.peer);
                self.drop_conn(id);
                if let Some(p) = key.and_then(|k| self.peers.get_mut(&k)) {
                    if p.conn == Some(id) {
                        p.conn = None;
                        p.waiting_until = Some(Instant::now() + REJECTED_WAIT);
                        self.waiting.push(key.unwrap_or(self.me));
                    }
                }
                false
            }
            (Phase::AwaitAnswer, Kind::Refuse) => {
                let why = Refusal::from_code(hello.word);
                let to = self.conns.get(&id).and_then(|c| c.peer);
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: {} refused our connection: {}",
                    to.map_or_else(String::new, |a| a.to_string()),
                    why.map_or("(unknown reason)", Refusal::text)
                );
                let e = match why {
                    Some(Refusal::KeyRequired | Refusal::NoKeyHere | Refusal::BadProof) => Error::ACCES,
                    _ => Error::CONNREFUSED,
                };
                self.fail_conn(id, e, d);
                false
            }
            _ => {
                self.fail_conn(id, Error::CONNRESET, d);
                false
            }
        }
    }

    /// Checks an ACCEPT to our dial `id` against our key (none: it must be
    /// unkeyed too); keyed, queues our PROOF ahead of every record.
    fn check_accept(&mut self, id: u64, acc: &Hello) -> Result<()> {
        let Some(c) = self.conns.get_mut(&id) else {
            return Err(Error::CONNRESET);
        };
        let to = c.peer.unwrap_or(acc.addr);
        let Some(key) = &self.key else {
            if acc.keyed {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: {to} answered with an authentication key and we have none: connection refused"
                );
                return Err(Error::ACCES);
            }
            return Ok(());
        };
        let t = Transcript {
            dialer: self.me,
            dialer_nonce: self.nonce,
            dialer_challenge: c.challenge,
            acceptor: acc.addr,
            acceptor_nonce: acc.nonce,
            acceptor_challenge: acc.challenge,
        };
        if !acc.keyed || !hello::verify(&key.0, Side::Acceptor, &t, &acc.mac) {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_CTRL,
                "tcp: {to} {}: connection refused, nothing sent to it",
                if acc.keyed {
                    "proved a different authentication key"
                } else {
                    "has no authentication key and ours requires one"
                }
            );
            return Err(Error::ACCES);
        }
        let x = Extra {
            keyed: true,
            mac: hello::sign(&key.0, Side::Dialer, &t),
            ..Extra::default()
        };
        let (h, p) = hello::encode_with(Kind::Proof, &self.me, self.nonce, &x);
        c.conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        Ok(())
    }

    /// A keyed dialer's PROOF on connection `id` (which we answered).
    fn on_proof(&mut self, id: u64, proof: &Hello, d: &mut dyn Delivery) {
        let Some(mut c) = self.take_conn(id) else { return };
        c.conn.unwatch(&self.epoll);
        let Some(pv) = c.proving.take() else { return };
        let ok = self.key.as_ref().is_some_and(|key| {
            let t = Transcript {
                dialer: pv.req.addr,
                dialer_nonce: pv.req.nonce,
                dialer_challenge: pv.req.challenge,
                acceptor: self.me,
                acceptor_nonce: self.nonce,
                acceptor_challenge: pv.mine,
            };
            proof.keyed && proof.addr == pv.req.addr && hello::verify(&key.0, Side::Dialer, &t, &proof.mac)
        });
        if !ok {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_CTRL,
                "tcp: a connection claiming {} failed to prove our authentication key: closed, nothing delivered",
                pv.req.addr
            );
            return;
        }
        self.settle(c.conn, pv.req, true, d);
    }

    fn existing(&self, addr: &SocketAddr) -> Existing {
        let Some(cid) = self.peers.get(addr).and_then(|p| p.conn) else {
            return Existing::None;
        };
        match self.conns.get(&cid) {
            Some(c) if c.conn.phase() == Phase::Up => Existing::Up {
                dialed: c.dialed,
                nonce: c.nonce,
            },
            Some(c) if matches!(c.conn.phase(), Phase::Dialing | Phase::AwaitAnswer) => Existing::Dialing,
            _ => Existing::None,
        }
    }

    /// Our answer to a REQUEST, first in the connection's queue.
    fn answer(&self, conn: &mut Conn, kind: Kind, x: Extra) {
        let (h, p) = hello::encode_with(kind, &self.me, self.nonce, &x);
        conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
    }

    /// The plain answer (ACCEPT, REJECT) of an unkeyed endpoint.
    fn plain(&self) -> Extra {
        Extra {
            word: self.rts_prefix as u64,
            ..Extra::default()
        }
    }

    /// Answers `kind` (a REJECT or REFUSE), then closes the connection
    /// once that is written (or at its deadline).
    fn answer_and_close(&mut self, mut conn: Conn, kind: Kind, x: Extra) {
        self.answer(&mut conn, kind, x);
        conn.set_phase(Phase::Closing);
        conn.set_deadline(Some(Instant::now() + HELLO_TIMEOUT));
        if !conn.flush(&mut self.sent) && conn.doomed().is_none() {
            // The rest of the answer goes out when writable.
            let _ = self.add_conn(PortConn::new(conn, None));
            self.arm_timer();
        }
    }

    /// Refuses a connection claiming `claimed` (logged: the dialer's sends
    /// fail, and this side says why).
    fn refuse(&mut self, conn: Conn, claimed: SocketAddr, why: Refusal) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_CTRL,
            "tcp: refused a connection claiming {claimed}: {}",
            why.text()
        );
        let x = Extra {
            keyed: self.key.is_some(),
            word: why as u64,
            ..Extra::default()
        };
        self.answer_and_close(conn, Kind::Refuse, x);
    }

    /// A connection the listener accepted said its first record: a REQUEST
    /// whose claimed address is the connection's source and whose key
    /// matches ours (both none, or both one) is answered by the tie-break's
    /// decision (keyed: after its PROOF); anything else closes it.
    fn on_request(&mut self, h: Handshake, d: &mut dyn Delivery) {
        let Handshake { mut conn, hdr, payload } = h;
        if hdr.op == proto::op::BYE {
            return;
        }
        let req = match hello::parse(&hdr, &payload, hello::Family::of(&self.me)) {
            Ok(x) if x.kind == Kind::Request => x,
            r => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: bad HELLO request ({r:?})");
                return;
            }
        };
        // What is provable about who dialed: the source IP of the
        // connection (its port is the dialer's ephemeral one).
        let src_ok = conn
            .peer_addr()
            .is_ok_and(|a| plain_ip(a.ip()) == plain_ip(req.addr.ip()));
        if !src_ok {
            return self.refuse(conn, req.addr, Refusal::Address);
        }
        if !self.make_room() {
            return self.refuse(conn, req.addr, Refusal::Full);
        }
        match (self.key.is_some(), req.keyed) {
            (true, false) => return self.refuse(conn, req.addr, Refusal::KeyRequired),
            (false, true) => return self.refuse(conn, req.addr, Refusal::NoKeyHere),
            _ => {}
        }
        let decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        match decision {
            Decision::Reject => {
                let x = self.plain();
                self.answer_and_close(conn, Kind::Reject, x);
            }
            Decision::Refuse => self.refuse(conn, req.addr, Refusal::InUse),
            _ => {
                let Some(key) = &self.key else {
                    return self.settle(conn, req, false, d);
                };
                // Keyed: prove our key over its challenge, and wait for its
                // proof before the connection is anybody's.
                let mine = random_challenge();
                let t = Transcript {
                    dialer: req.addr,
                    dialer_nonce: req.nonce,
                    dialer_challenge: req.challenge,
                    acceptor: self.me,
                    acceptor_nonce: self.nonce,
                    acceptor_challenge: mine,
                };
                let x = Extra {
                    keyed: true,
                    challenge: mine,
                    mac: hello::sign(&key.0, Side::Acceptor, &t),
                    word: self.rts_prefix as u64,
                };
                self.answer(&mut conn, Kind::Accept, x);
                conn.set_phase(Phase::AwaitAnswer);
                conn.set_deadline(Some(Instant::now() + HELLO_TIMEOUT));
                let mut c = PortConn::new(conn, None);
                c.proving = Some(Box::new(Proving { req, mine }));
                let Ok(id) = self.add_conn(c) else { return };
                self.arm_timer();
                if let Some(c) = self.conns.get_mut(&id) {
                    c.conn.flush(&mut self.sent);
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    if c.conn.reader().holds_input() {
                        self.read_conn(id, d);
                    }
                }
            }
        }
    }

    /// Takes (or parks, or refuses) an inbound connection whose REQUEST
    /// passed its checks (keyed: whose PROOF did; `answered`: our ACCEPT
    /// went out already), by the decision of the moment.
    fn settle(&mut self, conn: Conn, req: Hello, answered: bool, d: &mut dyn Delivery) {
        let mut decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        if decision == Decision::Park {
            // The old connection may have ended already (a restarted peer's
            // old socket says so as it dies): read it first.
            if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                self.read_conn(old, d);
            }
            decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        }
        match decision {
            Decision::Reject if !answered => {
                let x = self.plain();
                self.answer_and_close(conn, Kind::Reject, x);
            }
            // Proven, but our own dial won meanwhile: close it (the dialer
            // uses ours).
            Decision::Reject => {}
            Decision::Refuse => {
                if !answered {
                    self.refuse(conn, req.addr, Refusal::InUse);
                }
            }
            Decision::Park => {
                if self.parked.len() >= MAX_HANDSHAKES {
                    if !answered {
                        self.refuse(conn, req.addr, Refusal::InUse);
                    }
                    return;
                }
                self.parked.push(Parked {
                    conn,
                    req,
                    answered,
                    until: Instant::now() + PARK_WAIT,
                });
                self.arm_timer();
            }
            Decision::TakeOver => {
                if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                    self.drop_conn(old);
                }
                self.adopt(conn, req, Decision::TakeOver, answered, d);
            }
            Decision::SelfConn | Decision::Adopt => self.adopt(conn, req, decision, answered, d),
        }
    }

    /// Parked REQUESTs whose address is free now are settled; those whose
    /// time is up are refused (the address stays with its live connection).
    fn check_parked(&mut self, d: &mut dyn Delivery) {
        let now = Instant::now();
        for p in std::mem::take(&mut self.parked) {
            let held = matches!(self.existing(&p.req.addr), Existing::Up { .. });
            if !held {
                self.settle(p.conn, p.req, p.answered, d);
            } else if p.until <= now {
                if !p.answered {
                    self.refuse(p.conn, p.req.addr, Refusal::InUse);
                } else {
                    crate::base::log::log_warn!(
                        crate::abi::FI_LOG_EP_CTRL,
                        "tcp: closed a connection claiming {}: {}",
                        p.req.addr,
                        Refusal::InUse.text()
                    );
                }
            } else {
                self.parked.push(p);
            }
        }
    }

    /// Takes an accepted connection whose REQUEST wins: ACCEPT (unless it
    /// went out already), then the records that waited for the peer.
    fn adopt(&mut self, mut conn: Conn, req: Hello, decision: Decision, answered: bool, d: &mut dyn Delivery) {
        if !answered {
            let x = self.plain();
            self.answer(&mut conn, Kind::Accept, x);
        }
        conn.set_phase(Phase::Up);
        conn.set_deadline(None);
        let mut c = PortConn::new(conn, Some(req.addr));
        c.nonce = req.nonce;
        c.rts_prefix = hello::rts_prefix(&req);
        c.self_reader = decision == Decision::SelfConn;
        let Ok(id) = self.add_conn(c) else { return };
        if decision != Decision::SelfConn {
            let p = self.peers.entry(req.addr).or_default();
            p.conn = Some(id);
            p.waiting_until = None;
            self.establish(id, req.addr);
        }
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.conn.flush(&mut self.sent);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        if c.conn.reader().holds_input() {
            // Records read ahead with the REQUEST: the socket may show
            // nothing more, so read them now.
            self.read_conn(id, d);
        }
    }

    fn check_deadlines(&mut self, d: &mut dyn Delivery) {
        let now = Instant::now();
        self.listener.check_deadlines(&self.epoll, now);
        let late: Vec<(u64, Phase)> = self
            .timed
            .iter()
            .filter_map(|id| self.conns.get(id).map(|c| (*id, c)))
            .filter(|(_, c)| c.conn.expired(now))
            .map(|(id, c)| (id, c.conn.phase()))
            .collect();
        for (id, phase) in late {
            match phase {
                Phase::Dialing | Phase::AwaitAnswer => self.fail_conn(id, Error::TIMEDOUT, d),
                Phase::Up => self.cut_off(id, d),
                _ => self.drop_conn(id),
            }
        }
        let late: Vec<SocketAddr> = self
            .waiting
            .iter()
            .filter(|a| {
                self.peers
                    .get(a)
                    .is_some_and(|p| p.conn.is_none() && p.waiting_until.is_some_and(|t| t <= now))
            })
            .copied()
            .collect();
        for a in late {
            self.fail_peer(a, Error::TIMEDOUT, d);
        }
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        let conns = &self.conns;
        self.timed
            .retain(|id| conns.get(id).is_some_and(|c| c.conn.deadline().is_some()));
        let peers = &self.peers;
        self.waiting.retain(|a| {
            peers
                .get(a)
                .is_some_and(|p| p.conn.is_none() && p.waiting_until.is_some())
        });
        self.waiting.dedup();
        let conns = self.timed.iter().filter_map(|id| self.conns.get(id)?.conn.deadline());
        let peers = self.waiting.iter().filter_map(|a| self.peers.get(a)?.waiting_until);
        let parked = self.parked.iter().map(|p| p.until);
        conns
            .chain(peers)
            .chain(parked)
            .chain(self.listener.next_deadline())
            .min()
    }

    fn arm_timer(&mut self) {
        let next = self.next_deadline();
        self.alarm.arm(next);
    }

    /// An established connection stayed over its peer's budget until its
    /// deadline: the peer is cut off (its operations with us end in error,
    /// as for a reset; a later send dials again).
    fn cut_off(&mut self, id: u64, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let Some(since) = c.acct.over_since else {
            // No longer over its budget: no deadline either.
            c.conn.set_deadline(None);
            return;
        };
        let peer = c.peer.map_or_else(String::new, |a| a.to_string());
        budget::log_cut_off(&peer, c.acct.counted, since);
        self.fail_conn(id, crate::transport::PEER_FAILED, d);
    }

    /// Closes a connection without telling anyone (it carried nothing the
    /// core knows about: a rejected or superseded dial, a refusal).
    fn drop_conn(&mut self, id: u64) {
        if let Some(mut c) = self.take_conn(id) {
            c.conn.unwatch(&self.epoll);
        }
    }

    /// Removes a connection from the table (its staged bytes with it).
    fn take_conn(&mut self, id: u64) -> Option<PortConn> {
        let c = self.conns.remove(&id)?;
        self.staged = self.staged.saturating_sub(c.conn.reader().staged_bytes());
        self.replies = self.replies.saturating_sub(c.acct.counted);
        Some(c)
    }

    /// At the connection cap, closes the connection that waited longest:
    /// first those that never carried a record since their handshake (a
    /// flood's), then those idle for [`IDLE_MIN`] at least; never one with
    /// records queued or a record half read. Its peer fails as if it had
    /// closed (a later send dials again). False: at the cap, none to close.
    fn make_room(&mut self) -> bool {
        if self.conns.len() < self.max_conns {
            return true;
        }
        let now = self.now;
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.conn.phase() == Phase::Up
                    && !c.self_reader
                    && c.conn.queue().is_empty()
                    && !c.conn.stalled()
                    && !c.conn.reader().holds_input()
                    && c.conn.reader().staged_bytes() == 0
                    && (!c.carried
                        || c.last_active
                            .is_none_or(|t| now.saturating_duration_since(t) >= IDLE_MIN))
            })
            .min_by_key(|(id, c)| (c.carried, c.last_active, **id))
            .map(|(id, c)| (*id, c.peer));
        let Some((id, peer)) = victim else { return false };
        crate::base::log::log_info!(
            crate::abi::FI_LOG_EP_CTRL,
            "tcp: {} connections (FI_RUSTFAB_TCP_MAX_CONNS): closing the idle one to {}",
            self.conns.len(),
            peer.map_or_else(String::new, |a| a.to_string())
        );
        if let Some(a) = peer {
            if let Some(q) = self.queue_of(a) {
                q.push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
            }
            self.flush_peer(a);
            if let Some(c) = self.conns.get(&id) {
                c.conn.discard_input();
            }
            self.peers.remove(&a);
        }
        self.drop_conn(id);
        true
    }

    /// Closes a connection whose failure concerns no peer: a payload being
    /// placed completes in error, records it held too.
    fn remove_conn(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(mut c) = self.take_conn(id) else { return };
        c.conn.unwatch(&self.epoll);
        for m in c.conn.queue_mut().take_notifications() {
            d.sent(m, Err(e));
        }
        let src = Addr::Inet(c.peer.unwrap_or(self.me));
        c.conn
            .abort_reader(&mut CoreSink::new(d, src), crate::transport::PEER_FAILED);
    }

    /// A connection failed. If it carried records (established, or the dial
    /// a peer's records wait on) the peer fails with it.
    fn fail_conn(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get(&id) else { return };
        let phase = c.conn.phase();
        let linked = c.peer.filter(|a| match phase {
            Phase::Up => true,
            Phase::Dialing | Phase::AwaitAnswer => self.peers.get(a).is_some_and(|p| p.conn == Some(id)),
            _ => false,
        });
        let Some(addr) = linked else {
            self.remove_conn(id, e, d);
            return;
        };
        // A dial that never worked reports its own reason (refused,
        // unreachable, timed out); a broken connection is a peer failure.
        let e = if phase == Phase::Up {
            crate::transport::PEER_FAILED
        } else {
            dial_failed(addr, e);
            e
        };
        self.fail_peer(addr, e, d);
        self.remove_conn(id, e, d);
    }

    /// Ends everything to and from `addr`: queued records complete with `e`,
    /// its connections close, and the core hears `PeerEvent::Failed`.
    fn fail_peer(&mut self, addr: SocketAddr, e: Error, d: &mut dyn Delivery) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.peer == Some(addr) && matches!(c.conn.phase(), Phase::Up | Phase::Dialing | Phase::AwaitAnswer)
            })
            .map(|(id, _)| *id)
            .collect();
        let mut gone: Vec<PortConn> = ids.iter().filter_map(|id| self.take_conn(*id)).collect();
        let mut queued = Vec::new();
        for c in &mut gone {
            c.conn.unwatch(&self.epoll);
            queued.extend(c.conn.queue_mut().take_notifications());
        }
        if let Some(mut p) = self.peers.remove(&addr) {
            queued.extend(p.pending.take_notifications());
        }
        for id in queued {
            d.sent(id, Err(e));
        }
        for c in &mut gone {
            c.conn.abort_reader(
                &mut CoreSink::new(&mut *d, Addr::Inet(addr)),
                crate::transport::PEER_FAILED,
            );
        }
        if !self.fenced.contains(&addr) {
            self.fenced.push(addr);
        }
        let ev = if e == Error::ACCES {
            PeerEvent::Denied(Addr::Inet(addr))
        } else {
            PeerEvent::Failed(Addr::Inet(addr))
        };
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
                .is_some_and(|c| c.conn.phase() == Phase::Up && c.conn.doomed().is_none());
            if up {
                if let Some(q) = self.queue_of(a) {
                    q.push(OutRecord::new(WireHdr::new(proto::op::BYE).to_bytes(), Body::None));
                }
                self.flush_peer(a);
            }
        }
        for c in self.conns.values() {
            c.conn.discard_input();
        }
        for (_, mut c) in self.conns.drain() {
            c.conn.unwatch(&self.epoll);
        }
        self.staged = 0;
        self.replies = 0;
        self.parked.clear();
        self.peers.clear();
    }
}

/// What auto asks to skip TCP's share of an idle pass (transport/auto.rs).
impl TcpPort {
    /// Whether [`Port::take_events`] would do nothing: no `poll` since the
    /// last call, no connection stalled, no peer fenced, no event. It then
    /// walks an empty list, clears an empty one and returns an empty one, so
    /// a caller may skip it (auto does, on the passes it does not poll TCP).
    #[inline]
    pub(crate) fn events_quiet(&self) -> bool {
        !self.polled && self.stalled.is_empty() && self.fenced.is_empty() && self.events.is_empty()
    }

    /// No connection, no peer, no handshake: until a peer connects (which
    /// epoll reports), a pass has nothing to do here but ask epoll.
    #[inline]
    pub(crate) fn lonely(&self) -> bool {
        self.conns.is_empty() && self.peers.is_empty() && self.parked.is_empty() && self.listener.idle()
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
            || !self.doomed_peers.is_empty()
            || !self.doomed.is_empty()
    }

    /// Larger messages go by rendezvous (RTS, then DATA once the receiver
    /// matched them): an unexpected large message then costs the receiver a
    /// descriptor, not its whole payload, and cannot hold up the messages
    /// behind it on the stream (which a receiver may be waiting for).
    fn eager_limit(&self) -> usize {
        EAGER_MAX
    }

    fn chunk_limit_for(&self, _peer: &Addr) -> usize {
        CHUNK_MAX
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
            Payload::Bytes(b) => Body::Owned(framing::outgoing_payload(&mut h, b)),
            Payload::Iov(iov, off, len) => Body::Iov(iov.sub(off, len)),
        };
        // Eager messages may wait for the pass that follows a burst;
        // rendezvous records (RTS, DATA) go at once.
        let may_wait = (h.op == proto::op::EAGER).then_some(n);
        let if_queued = IfQueued {
            msg_id: h.msg_id,
            copy: copy || n <= COPY_MAX,
        };
        let rec = OutRecord::new(h.to_bytes(), body);
        match self.queue_record(
            to,
            rec,
            Queueing::Data {
                eager: may_wait,
                if_queued,
            },
        )? {
            true => Ok(Sent::Done),
            false => Ok(Sent::Queued),
        }
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
        self.queue_record(to, OutRecord::new(h.to_bytes(), Body::None), Queueing::Control)
            .map(|_| ())
    }

    fn room(&mut self, peer: &Addr) -> usize {
        let Ok(to) = self.inet(peer) else { return 0 };
        room_after(self.queue_of(to).map_or(0, |q| q.unsent()))
    }

    /// Always `false`: a TCP peer may be on another host, and bytes on a
    /// socket say nothing cheap about where its process runs, so the CQ's
    /// idle rule yields as it always did (core/cq.rs).
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        if !self.closed {
            self.poll_inner(d);
        }
        false
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
    fn has_events(&self) -> bool {
        !self.events_quiet()
    }

    fn take_events(&mut self) -> Vec<PeerEvent> {
        if !self.polled {
            let mut wake = false;
            for id in &self.stalled {
                if let Some(c) = self.conns.get_mut(id) {
                    wake |= c.conn.offer_input(&self.epoll);
                }
            }
            if wake {
                // The stalled record (or bytes read ahead) is in our buffers,
                // not in the socket: EPOLLIN alone may not wake a sleeper.
                // The deadline timer, fired now, does.
                self.alarm.ring();
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
            Some(c) if c.conn.phase() == Phase::Up => c.rts_prefix,
            _ => crate::transport::DEFAULT_RTS_PREFIX,
        }
    }
}

const _: () = assert!(HDR_LEN == 64);

/// [`Port::room`] of a peer queue holding `unsent` bytes: an empty queue
/// takes one record of any size, so a chunk up to [`CHUNK_MAX`] (written
/// from the caller's buffer as the socket drains); a busy one up to
/// [`QUEUE_HIGH_WATER`] in all.
pub(crate) fn room_after(unsent: usize) -> usize {
    if unsent == 0 {
        CHUNK_MAX
    } else {
        QUEUE_HIGH_WATER.saturating_sub(unsent)
    }
}

/// What a port holds (the live-connection fuzzer, src/fuzzing.rs
/// `tcp_live`, checks that a peer gone leaves nothing behind).
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Census {
    pub(crate) conns: usize,
    pub(crate) peers: usize,
    pub(crate) parked: usize,
    /// The listener holds handshakes (or rests after an accept error).
    pub(crate) handshakes: bool,
    /// Bytes the readers hold for unexpected messages still arriving.
    pub(crate) staged: usize,
}

#[cfg(any(test, feature = "fuzzing"))]
impl TcpPort {
    pub(crate) fn census(&self) -> Census {
        Census {
            conns: self.conns.len(),
            peers: self.peers.len(),
            parked: self.parked.len(),
            handshakes: !self.listener.idle(),
            staged: self.staged,
        }
    }

    /// Brings every deadline the port keeps (dials, handshake answers,
    /// waits for a rejecting peer's dial, parked requests) to now and rings
    /// the timer: the next pass handles them as if their time had come
    /// (the fuzzer's clock, instead of waiting seconds per case).
    pub(crate) fn expire_deadlines(&mut self) {
        let now = Instant::now();
        for c in self.conns.values_mut() {
            if c.conn.deadline().is_some() {
                c.conn.set_deadline(Some(now));
            }
        }
        for p in self.peers.values_mut() {
            if p.waiting_until.is_some() {
                p.waiting_until = Some(now);
            }
        }
        for p in &mut self.parked {
            p.until = now;
        }
        self.alarm.ring();
    }
}

#[cfg(test)]
mod tests;
