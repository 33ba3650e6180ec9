//! A TCP listener and its table of connections still in their handshake:
//! the listening side of RDM ports (HELLO) and of passive endpoints
//! (CONNREQ) alike. The listener accepts, reads each new connection's first
//! record (a handshake record or BYE; anything else ends that connection)
//! and hands the connection with that record to its owner
//! ([`Listener::next`]), which validates it and answers by its protocol.
//!
//! The flood rule (docs/reliability.md F16): a connection costs one of at
//! most [`ListenerOptions::max_handshakes`] slots for at most
//! [`ListenerOptions::timeout`] until its request is read; when all are
//! taken, the oldest incomplete handshake is closed for the newcomer (a
//! real client sends its request right after connecting, so idle or
//! trickling sockets go first and a flood of them cannot lock real clients
//! out). Requests read but not taken by the owner yet (a passive endpoint
//! whose EQ is full) keep their slots and are never evicted; with every
//! slot holding one, a newcomer is closed at once (the client sees the
//! connection close).
//!
//! The listening socket and the handshakes sit in the owner's epoll set
//! under tokens with [`TOKEN_TAG`] set (an RDM port's set, or a passive
//! endpoint's: no extra epoll level, which matters because Linux nests
//! epoll sets at most five deep and an application may put its wait fd,
//! itself nesting our engine, into its own set); the owner hands their
//! events to [`Listener::event`] and keeps the listener's deadlines
//! ([`Listener::next_deadline`]) in its one timer.

use super::conn::{Conn, NullSink, Phase, Read};
use crate::base::error::Result;
use crate::sys::net;
use crate::sys::{Epoll, IN};
use crate::transport::proto::{Limits, WireHdr};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// After EMFILE and friends, the listener rests this long.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Connections accepted per pass at most.
const ACCEPTS_PER_PASS: usize = 64;

/// The bit that marks a listener's tokens in its owner's epoll set (the
/// listening socket is `TOKEN_TAG` itself, handshake `n` is `TOKEN_TAG | n`).
pub(crate) const TOKEN_TAG: u64 = 1 << 62;

/// Handshake records only: data records fail validation or the
/// not-yet-established rule and end the connection.
const HANDSHAKE_LIMITS: Limits = Limits {
    max_payload: 0,
    max_chunk: 0,
    max_iov: 0,
};

/// How a listener treats handshakes (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListenerOptions {
    /// Handshakes (incomplete, or complete and not taken) at most.
    pub(crate) max_handshakes: usize,
    /// An incomplete handshake is closed this long after its accept.
    pub(crate) timeout: Duration,
}

/// A connection whose first record arrived: its owner's to answer. The
/// connection is in [`Phase::Held`] and in no epoll set.
pub(crate) struct Handshake {
    pub(crate) conn: Conn,
    pub(crate) hdr: WireHdr,
    pub(crate) payload: Vec<u8>,
}

pub(crate) struct Listener {
    sock: OwnedFd,
    opts: ListenerOptions,
    /// Accepting rests until then (out of descriptors or memory).
    paused_until: Option<Instant>,
    /// Incomplete handshakes by token.
    pending: HashMap<u64, Conn>,
    /// Complete ones, oldest first, for the owner to take.
    done: VecDeque<Handshake>,
    next_id: u64,
}

impl Listener {
    /// Binds `addr` and listens.
    pub(crate) fn bind(addr: &SocketAddr, backlog: i32, opts: ListenerOptions) -> Result<Listener> {
        Listener::on(net::listen(addr, backlog)?, backlog, opts)
    }

    /// Listens on `sock`, a bound socket (listening already or not).
    pub(crate) fn on(sock: OwnedFd, backlog: i32, opts: ListenerOptions) -> Result<Listener> {
        net::start_listening(sock.as_fd(), backlog)?;
        Ok(Listener {
            sock,
            opts,
            paused_until: None,
            pending: HashMap::new(),
            done: VecDeque::new(),
            next_id: 1,
        })
    }

    /// Puts the listening socket in the owner's epoll set (handshakes join
    /// it as they are accepted, and leave it when complete or closed).
    pub(crate) fn watch(&self, epoll: &Epoll) -> Result<()> {
        epoll.add(self.sock.as_raw_fd(), IN, TOKEN_TAG)
    }

    /// Whether an epoll token is one of a listener's.
    pub(crate) fn owns(token: u64) -> bool {
        token & TOKEN_TAG != 0
    }

    /// The address the listener is bound to.
    pub(crate) fn local_addr(&self) -> Result<SocketAddr> {
        net::local_addr(self.sock.as_fd())
    }

    /// A new backlog (`fi_control(FI_BACKLOG)` on a listening passive
    /// endpoint).
    pub(crate) fn set_backlog(&self, backlog: i32) -> Result<()> {
        net::start_listening(self.sock.as_fd(), backlog)
    }

    /// Nothing in hand: no handshake under way or waiting to be taken, no
    /// pause to end (only a new connection, which epoll shows, can start
    /// work here).
    #[inline]
    pub(crate) fn idle(&self) -> bool {
        self.pending.is_empty() && self.done.is_empty() && self.paused_until.is_none()
    }

    #[cfg(test)]
    /// Handshakes that have not delivered their request yet.
    pub(crate) fn incomplete(&self) -> usize {
        self.pending.len()
    }

    /// An epoll event for one of the listener's tokens: accepts, or reads
    /// a handshake (complete ones wait for [`Listener::next`]).
    pub(crate) fn event(&mut self, epoll: &Epoll, token: u64) {
        if token == TOKEN_TAG {
            self.accept_all(epoll);
        } else {
            self.read(epoll, token);
        }
    }

    /// The oldest complete handshake.
    pub(crate) fn next(&mut self) -> Option<Handshake> {
        self.done.pop_front()
    }

    /// When [`Listener::check_deadlines`] has something to do.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .values()
            .filter_map(|c| c.deadline())
            .chain(self.paused_until)
            .min()
    }

    /// Closes incomplete handshakes whose time is up; resumes accepting
    /// after a rest.
    pub(crate) fn check_deadlines(&mut self, epoll: &Epoll, now: Instant) {
        if self.paused_until.is_some_and(|t| t <= now) {
            self.paused_until = None;
            let _ = epoll.modify(self.sock.as_raw_fd(), IN, TOKEN_TAG);
        }
        let late: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, c)| c.expired(now))
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            self.drop_pending(epoll, id);
        }
    }

    fn accept_all(&mut self, epoll: &Epoll) {
        for _ in 0..ACCEPTS_PER_PASS {
            match net::accept(self.sock.as_fd()) {
                Ok(Some(sock)) => {
                    if self.pending.len() + self.done.len() >= self.opts.max_handshakes {
                        // Full: the oldest incomplete handshake makes room;
                        // with none, the newcomer is closed.
                        let oldest = self
                            .pending
                            .iter()
                            .min_by_key(|(id, c)| (c.deadline(), **id))
                            .map(|(id, _)| *id);
                        match oldest {
                            Some(id) => self.drop_pending(epoll, id),
                            None => continue,
                        }
                    }
                    if super::trace::wanted() {
                        let from = super::trace::Peer(net::peer_addr(sock.as_fd()).ok());
                        super::trace::conn_event(format_args!("tcp: accepted a connection from {from}"));
                    }
                    let mut c = Conn::accepted(sock, self.opts.timeout);
                    let id = TOKEN_TAG | self.next_id;
                    self.next_id += 1;
                    if c.watch(epoll, id).is_ok() {
                        self.pending.insert(id, c);
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    // Out of descriptors or memory: rest instead of spinning
                    // on a listener that stays readable.
                    crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: accept failed: {e}");
                    let _ = epoll.modify(self.sock.as_raw_fd(), 0, TOKEN_TAG);
                    self.paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn drop_pending(&mut self, epoll: &Epoll, id: u64) {
        if let Some(mut c) = self.pending.remove(&id) {
            c.unwatch(epoll);
        }
    }

    /// Reads a handshake; its first record completes it.
    fn read(&mut self, epoll: &Epoll, id: u64) {
        let Some(c) = self.pending.get_mut(&id) else { return };
        let mut scratch = [0u8; 64];
        match c.read(&mut NullSink, &NullSink::PEER, &HANDSHAKE_LIMITS, &mut scratch) {
            Read::Idle => c.update(epoll),
            Read::Link(hdr) => {
                let payload = c.link_payload().to_vec();
                if let Some(mut conn) = self.pending.remove(&id) {
                    // Nothing more is read until the owner answers.
                    conn.unwatch(epoll);
                    conn.set_phase(Phase::Held);
                    conn.set_deadline(None);
                    self.done.push_back(Handshake { conn, hdr, payload });
                }
            }
            Read::Stalled | Read::Ended(_) => self.drop_pending(epoll, id),
        }
    }
}

#[cfg(test)]
mod tests;
