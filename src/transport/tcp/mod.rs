//! The TCP transport: one [`TcpPort`] per RDM endpoint, and the TCP
//! connection of each connected (`FI_EP_MSG`) endpoint
//! ([`crate::transport::connected`]). Every
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
//!   send buffer is bounded ([`limits::SNDBUF`]), and a receiver that cannot place a
//!   message (no receive, no unexpected budget) stops reading that socket —
//!   its EPOLLIN interest is dropped so sleepers do not spin — while other
//!   sockets keep flowing.
//! * **Failure**: a bad record, a reset, end of stream, a keepalive/user
//!   timeout or a missed deadline ends that connection only: a half-read
//!   payload is handed back with `placed(.., Err)`, the records queued for
//!   the peer are dropped, and one `PeerEvent::Failed` (`failure.rs`) lets
//!   the core end every operation that involves the peer.
//!   A later send to the address dials again (a restarted peer is a new
//!   incarnation: its HELLO carries a new nonce).
//! * **Waiting**: the listener and its handshakes, every connection and a
//!   timer for all deadlines are in the port's own epoll set, whose
//!   descriptor the domain's engine nests ([`Port::wait_fd`](crate::transport::Port::wait_fd)); `poll` is
//!   one zero-timeout `epoll_wait`.
//!
//! Files: the port's state is here ([`TcpPort`], its connections and
//! peers, settings, constants, the advertised address; the stream's
//! limits and socket options in `limits.rs`); its methods are
//! grouped by concern in `port.rs` (set-up, the `Port` impl), `send.rs`
//! (peers, dials, queues), `pass.rs` (a progress pass), `handshake.rs`
//! (HELLO answers, proofs, requests accepted, refused, parked or settled)
//! and `failure.rs` (deadlines, cut-off, failures, the connection cap).
//! Shared with connected endpoints: [`conn`], [`framing`], [`listener`],
//! [`budget`] (the peers' answer budget) and [`trace`] (debug lines on
//! connection set-up and teardown).

pub(crate) mod budget;
pub(crate) mod conn;
mod failure;
pub(crate) mod framing;
mod handshake;
pub(crate) mod hello;
mod limits;
mod link_state;
mod links;
pub(crate) mod listener;
mod moved;
mod pass;
mod port;
mod send;
pub(crate) mod trace;

pub(crate) use budget::{PeerBudget, BUDGET_FLOOR};
pub(crate) use limits::{CHUNK_MAX, EAGER_MAX};

use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::sys::net::IfAddr;
use crate::sys::Epoll;
use crate::transport::proto::{Limits, HDR_LEN};
use crate::transport::PeerEvent;
use budget::Account;
use conn::{Alarm, Conn};
use framing::{Cork, WriteQueue};
use hello::{Hello, CHALLENGE_LEN};
use listener::Listener;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

/// A dial that is not established (connected and answered) by then fails.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// An accepted connection must say HELLO (or CONNREQ) by then.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After a REJECT (the peer keeps its own dial to us), its connection
/// must arrive by then.
pub(crate) const REJECTED_WAIT: Duration = Duration::from_secs(10);
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
    /// 0: the peer's connection (link 0); else an extra link's index and
    /// generation (`links.rs`).
    link: u64,
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
            link: 0,
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
    /// Its extra links, when both sides have some (`links.rs`).
    links: Option<Box<link_state::Links>>,
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
///    that is up, has carrier and is not loopback;
/// 4. the source of the default route, likewise;
/// 5. the first interface that is up, has carrier, and is neither loopback
///    nor a bridge (a bridge's address is usually a host-only network);
/// 6. the first bridge that is up and has carrier;
/// 7. loopback.
///
/// Never a wildcard, a link-local address (it needs a scope to be dialed),
/// or, unless `iface` names it, an interface that is down or has no carrier
/// (a NO-CARRIER bridge with no port up has an address no peer reaches). `route` asks the kernel for the source address
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
    // An interface that carries traffic off this host.
    let live = |a: &&IfAddr| a.up && a.carrier && !a.loopback;
    // A live interface address that the kernel routes from.
    let routed_from = |dest: IpAddr| {
        let src = route(dest)?;
        ifs.iter().filter(usable).filter(live).find(|a| a.ip == src)
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
    } else if let Some(a) = ifs.iter().filter(usable).filter(live).find(|a| !a.bridge) {
        (Some(a), "the first interface that is up with carrier".to_string())
    } else {
        (
            ifs.iter().filter(usable).filter(live).find(|a| a.bridge),
            "the only interfaces up with carrier are bridges".to_string(),
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
            "no other interface is up with carrier"
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
    /// Interfaces whose addresses are extra links to every peer that has
    /// some too (`FI_RUSTFAB_TCP_LINKS`; `links.rs`); none: one link.
    pub(crate) links: Vec<String>,
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
            links: Vec::new(),
        }
    }
}

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
    /// spent ~20 % of the sender's CPU in SipHash, docs/performance-history.md
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
    /// The last pass that read bytes or followed a queued record, and
    /// whether a record was queued since the last pass ([`moved`]).
    moved_at: Option<Instant>,
    queued_since_pass: bool,
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
    /// This side's extra link addresses (link k: `link_ips[k - 1]`), and
    /// when a link dial is due next (`links.rs`).
    link_ips: Vec<IpAddr>,
    /// The listener takes extra links (it is bound to a wildcard).
    accepts_links: bool,
    link_retry: Option<Instant>,
}

/// Busy polling: passes that read the hot connection straight from its
/// socket between two `epoll_wait`s (see `poll_inner`): EPOLL_EVERY_MIN
/// after an `epoll_wait` that reported anything besides the hot connection
/// (another peer, the listener, the timer), doubled after each one that
/// reported nothing else, up to EPOLL_EVERY_MAX. With one busy peer (a
/// ping-pong) `epoll_wait` then costs ~1 system call per 64 passes instead
/// of 1 per 8 (docs/performance-history.md "tcplat").
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

#[cfg(test)]
pub(crate) mod flood_tests;
#[cfg(test)]
mod tests;
