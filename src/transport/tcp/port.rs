//! The RDM port's face: [`TcpPort::new`] (listen, advertise), the
//! [`Port`] the engine drives, and what auto and the fuzzer ask of it.

use super::conn::{Alarm, Phase};
use super::framing::{Body, Cork, OutRecord};
use super::links::Striped;
use super::listener::{Listener, ListenerOptions};
#[cfg(any(test, feature = "fuzzing"))]
use super::Census;
use super::{
    advertised_addr_with, framing, note_writing, random_nonce, room_after, sync_interest, IfQueued, PortConn, Queueing,
    TcpPort, TcpSettings, CHUNK_MAX, CONNECT_TIMEOUT, COPY_MAX, EAGER_MAX, EPOLL_EVERY_MIN, FIRST_CONN, HELLO_TIMEOUT,
    LISTEN_BACKLOG, MAX_CONNS_MIN, MAX_HANDSHAKES, SCRATCH, TOKEN_TIMER,
};
use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::sys::{net, Epoll, IN};
use crate::transport::addr::Addr;
use crate::transport::proto::{Limits, WireHdr};
use crate::transport::{proto, Delivery, Hints, Payload, PeerEvent, Port, Sent};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::Instant;

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
        // Extra links are accepted by a listener on every address (a
        // wildcard); one bound to one address only dials them.
        let link_ips = match settings.links.is_empty() {
            true => Vec::new(),
            false => super::links::link_addresses(&settings.links, me, &net::interfaces()),
        };
        let accepts_links = bound.ip().is_unspecified();
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
            cork: Cork::new(settings.coalesce),
            corked: Vec::new(),
            key: settings.auth_key.clone().filter(|k| !k.0.is_empty()),
            parked: Vec::new(),
            max_conns: settings.max_conns.max(MAX_CONNS_MIN),
            budget: settings.budget,
            replies: 0,
            pass: 0,
            charged: 0,
            now: Instant::now(),
            moved_at: None,
            queued_since_pass: false,
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
            link_ips,
            accepts_links,
            link_retry: None,
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

    pub(super) fn add_conn(&mut self, mut c: PortConn) -> Result<u64> {
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

    pub(super) fn update_interest(&mut self, id: u64) {
        if let Some(c) = self.conns.get_mut(&id) {
            sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        }
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
        let if_queued = IfQueued {
            msg_id: h.msg_id,
            copy: copy || n <= COPY_MAX,
        };
        // With extra links, a streamed message's chunks may take another.
        let body = if !self.link_ips.is_empty() && h.op == proto::op::DATA && h.flags & proto::flag::PUSH == 0 {
            match self.stripe(to, &h, body, if_queued) {
                Striped::Primary(b) => b,
                Striped::Taken(r) => return r.map(|done| if done { Sent::Done } else { Sent::Queued }),
            }
        } else {
            body
        };
        // Eager messages may wait for the pass that follows a burst;
        // rendezvous records (RTS, DATA) go at once.
        let may_wait = (h.op == proto::op::EAGER).then_some(n);
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
        if !self.link_ips.is_empty() {
            if let Some(r) = self.striped_room(to) {
                return r;
            }
        }
        room_after(self.queue_of(to).map_or(0, |q| q.unsent()))
    }

    /// Whether a record went out or bytes came in lately (`moved.rs`):
    /// an answer may be on its way, so the CQ's idle rule does not yield.
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        if self.closed {
            return false;
        }
        self.poll_inner(d);
        self.moved_lately()
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

    fn close(&mut self) {
        self.shutdown_all();
    }

    fn hints(&mut self) -> Option<&mut dyn Hints> {
        Some(self)
    }
}

/// The RTS prefix travels in HELLO; `FI_MORE` corks the write queues.
impl Hints for TcpPort {
    fn more_coming(&mut self) {
        self.cork.more();
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
