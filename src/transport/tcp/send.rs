//! Sending: a peer's entry, its dial and the records that wait for it,
//! the established connection's queue (answers counted for the peer's
//! budget), send coalescing.

use super::conn::{Conn, Phase};
use super::framing::{OutRecord, WriteQueue};
use super::trace;
use super::{recount, sync_interest, Peer, PortConn, Queueing, TcpPort, QUEUE_HIGH_WATER};
use crate::base::error::{Error, Result};
use crate::sys::net;
use crate::transport::Delivery;
use std::net::SocketAddr;

impl TcpPort {
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
        trace::conn_event(format_args!("tcp: dialing {to}"));
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
    pub(super) fn queue_of(&mut self, to: SocketAddr) -> Option<&mut WriteQueue> {
        let p = self.peers.get_mut(&to)?;
        match p.conn.and_then(|id| self.conns.get_mut(&id)) {
            Some(c) if c.conn.phase() == Phase::Up => Some(c.conn.queue_mut()),
            _ => Some(&mut p.pending),
        }
    }

    /// Connection `id` to `addr` is established: it takes the records that
    /// waited for it, behind what it holds (its ACCEPT).
    pub(super) fn establish(&mut self, id: u64, addr: SocketAddr) {
        if let (Some(p), Some(c)) = (self.peers.get_mut(&addr), self.conns.get_mut(&id)) {
            c.conn.queue_mut().append(&mut p.pending);
        }
        self.links_up(addr);
    }

    /// Writes what a peer's connection holds, if it is established. Errors
    /// doom the connection (handled by the next pass).
    pub(super) fn flush_peer(&mut self, to: SocketAddr) {
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
    pub(super) fn queue_record(&mut self, to: SocketAddr, rec: OutRecord, how: Queueing) -> Result<bool> {
        self.peer_for_send(to)?;
        self.queued_since_pass = true;
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
    pub(super) fn read_corked(&mut self, d: &mut dyn Delivery) {
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

    pub(super) fn flush_corked(&mut self) {
        for a in std::mem::take(&mut self.corked) {
            if let Some(p) = self.peers.get_mut(&a) {
                p.corked = false;
            }
            self.flush_peer(a);
        }
    }
}
