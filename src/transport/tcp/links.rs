//! Several links per peer (`FI_RUSTFAB_TCP_LINKS`): besides the connection
//! made to the peer's advertised address (link 0), one more connection per
//! pair of link addresses the two processes name, over which the chunks of
//! large messages are spread.
//!
//! * **Addresses.** Each process lists the addresses of its link interfaces
//!   (in the order `FI_RUSTFAB_TCP_LINKS` names them; link `k` is the k-th)
//!   to the peer over link 0 once it is established (`LINK_ADDR` records,
//!   below), with its listening port when its listener takes links (it is
//!   bound to a wildcard address), else none. When both take links, the
//!   process with the lower advertised address (the simultaneous-connect
//!   tie-break's order) dials link `k` from its k-th address to the peer's
//!   k-th; when one does, the other dials; when neither does, there are no
//!   extra links.
//! * **Authentication.** A link's dial says the same REQUEST as link 0 — the
//!   dialer's advertised address, its incarnation nonce, with a key the
//!   same challenge-response — with the link's index and generation in the
//!   HELLO's `reserved` field. The acceptor takes it only as an extra link
//!   of an established link 0 of the same incarnation, from the source
//!   address the peer listed for that link over link 0, for a link that is
//!   free, at most [`MAX_LINKS`] links per peer in all: a hostile peer opens
//!   no more than that, and every one counts under the connection cap.
//! * **What goes where.** Link 0 carries every record as before, in order:
//!   control records, eager messages, RTS and the prefix pushed behind it,
//!   RMA. Only the DATA chunks of streamed rendezvous messages may go over
//!   another link: each message's chunks all go over one link (chosen in
//!   turn among the links up when its first chunk is sent), so the
//!   receiver sees them in order, as it requires (docs/protocol.md "Several
//!   links").
//! * **Losing a link** (a reset, end of stream, the shorter user timeout of
//!   [`LINK_TUNING`], keepalive) costs throughput only. Each side closes it
//!   — a chunk being placed is withdrawn, not failed — and tells the other
//!   over link 0 how many DATA records it read from it (`LINK_DOWN`); the
//!   sender keeps every chunk sent over the link until the receiver's
//!   count covers it (`LINK_ACK`, every [`ACK_EVERY`] records) and sends
//!   the ones the count does not cover again over link 0, followed by the
//!   chunks of those messages that waited meanwhile. The dialing side
//!   dials the link again every [`RETRY`] until it is back. Only link 0's
//!   end is the peer's failure (`TcpPort::fail_peer`).

use super::conn::{Conn, Phase};
use super::framing::{Body, OutRecord};
use super::hello::{self, Hello, Kind, Refusal};
use super::limits::TUNING;
use super::link_state::{copy_body, Kept, Link, State};
use super::{plain_ip, sync_interest, IfQueued, PortConn, TcpPort, QUEUE_HIGH_WATER};
use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::sys::net::{self, IfAddr, Tuning};
use crate::transport::proto::{op, WireHdr};
use crate::transport::Delivery;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

pub(crate) use super::link_state::MAX_LINKS;
/// A link's dial that is not answered by then is given up (tried again
/// after [`RETRY`]).
const LINK_DIAL_TIMEOUT: Duration = Duration::from_secs(3);
/// A lost link is dialed again this often.
const RETRY: Duration = Duration::from_secs(1);
/// The receiver of a link's DATA records confirms them every this many.
const ACK_EVERY: u64 = 4;
/// An extra link's socket options: data unacknowledged for 2 s ends it
/// (its chunks then go over link 0; link 0 keeps the longer timeout, its
/// end being the peer's failure).
pub(crate) const LINK_TUNING: Tuning = Tuning {
    user_timeout: Duration::from_secs(2),
    ..TUNING
};

/// `aux` of a BYE record that is not an orderly close but a link's
/// control record (header only, docs/protocol.md "Several links"):
/// * `LINK_ADDR` (on link 0): `msg_id` = link index, `tag`:`data` = the
///   sender's address for it (16 bytes, IPv4 mapped), `offset` = its
///   listener's port (0: it does not take links, only dials them);
/// * `LINK_DOWN` (on link 0): `msg_id` = the link's word (index |
///   generation << 8), `offset` = DATA records the sender read from it;
/// * `LINK_ACK` (on the link): `offset` = DATA records read from it so far.
pub(super) const LINK_ADDR: u32 = 0x4c41;
pub(super) const LINK_DOWN: u32 = 0x4c44;
pub(super) const LINK_ACK: u32 = 0x4c4b;

/// A link's word: its index and generation.
fn word(k: usize, gen: u64) -> u64 {
    k as u64 | gen << 8
}

fn split(w: u64) -> (usize, u64) {
    ((w & 0xff) as usize, w >> 8)
}

/// How a DATA record is sent ([`TcpPort::stripe`]).
pub(super) enum Striped {
    /// Over an extra link (or held for one): the send's result.
    Taken(Result<bool>),
    /// Over link 0, the usual way.
    Primary(Body),
}

/// The addresses of the interfaces `names` lists, in that order, of the
/// family of `me` and other than its address (at most `MAX_LINKS - 1`).
pub(crate) fn link_addresses(names: &[String], me: SocketAddr, ifs: &[IfAddr]) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for name in names {
        let found = ifs.iter().find(|a| {
            a.name == *name
                && a.ip.is_ipv6() == me.is_ipv6()
                && !a.ip.is_unspecified()
                && match a.ip {
                    IpAddr::V4(ip) => !ip.is_link_local(),
                    IpAddr::V6(ip) => (ip.segments()[0] & 0xffc0) != 0xfe80,
                }
        });
        match found {
            Some(a) if a.ip != me.ip() && !out.contains(&a.ip) => out.push(a.ip),
            Some(_) => {}
            None => crate::base::log::log_warn!(
                crate::abi::FI_LOG_CORE,
                "FI_RUSTFAB_TCP_LINKS: no interface {name:?} with a usable address: not a link"
            ),
        }
    }
    out.truncate(MAX_LINKS - 1);
    out
}

/// The reader's sink on an extra link: it takes DATA records only (others
/// are dropped) and counts those it took whole (placed, buffered, or
/// dropped as not wanted), for the link's count.
pub(super) struct Counted<'a> {
    pub(super) d: Option<&'a mut dyn Delivery>,
    pub(super) done: u64,
}

impl Counted<'_> {
    fn d(&mut self) -> &mut dyn Delivery {
        self.d.as_deref_mut().expect("set by the reader's caller")
    }
}

impl Delivery for Counted<'_> {
    fn place(&mut self, src: &crate::transport::addr::Addr, src_pid: i32, hdr: &WireHdr) -> crate::transport::Place {
        // An extra link carries DATA chunks only: anything else on it (a
        // peer's own doing) is dropped unread by the core.
        if hdr.op != op::DATA {
            return crate::transport::Place::Discard;
        }
        let p = self.d().place(src, src_pid, hdr);
        if p == crate::transport::Place::Discard {
            self.done += 1;
        }
        p
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        if result.is_ok() {
            self.done += 1;
        }
        self.d().placed(handle, result)
    }
    fn buffered(&mut self, src: &crate::transport::addr::Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        if hdr.op == op::DATA {
            self.done += 1;
        }
        self.d().buffered(src, src_pid, hdr, data)
    }
    fn control(
        &mut self,
        src: &crate::transport::addr::Addr,
        src_pid: i32,
        hdr: &WireHdr,
        payload: &dyn crate::transport::PayloadIn,
    ) -> crate::transport::Disposition {
        // No control record travels on an extra link (link 0 carries them,
        // in order): dropped.
        let _ = (src, src_pid, hdr, payload);
        crate::transport::Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.d().sent(msg_id, result)
    }
}

/// Link `k` of `peer`, if it has extra links.
fn link_of<'a>(peers: &'a mut FastMap<SocketAddr, super::Peer>, peer: &SocketAddr, k: usize) -> Option<&'a mut Link> {
    peers.get_mut(peer)?.links.as_mut().map(|ls| &mut ls.link[k])
}

fn bye(aux: u32) -> WireHdr {
    let mut h = WireHdr::new(op::BYE);
    h.aux = aux;
    h
}

impl TcpPort {
    /// Whether this side dials the extra links to `peer` (the other side
    /// accepts them).
    fn dials_links(&self, peer: &SocketAddr) -> bool {
        let theirs = self
            .peers
            .get(peer)
            .and_then(|p| p.links.as_ref())
            .is_some_and(|ls| ls.peer_accepts);
        match (self.accepts_links, theirs) {
            (_, false) => false,
            (false, true) => true,
            (true, true) => hello::keep_own_dial(&self.me, peer),
        }
    }

    /// Link 0 to `peer` is established: tell it our link addresses (a
    /// peer's earlier links, of an old incarnation, are closed).
    pub(super) fn links_up(&mut self, peer: SocketAddr) {
        if self.link_ips.is_empty() || peer == self.me {
            return;
        }
        self.drop_links(peer);
        let port = if self.accepts_links { self.me.port() } else { 0 };
        let recs: Vec<OutRecord> = self
            .link_ips
            .iter()
            .enumerate()
            .map(|(i, ip)| {
                let mut h = bye(LINK_ADDR);
                h.msg_id = (i + 1) as u64;
                let o = match ip {
                    IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
                    IpAddr::V6(v) => v.octets(),
                };
                h.tag = u64::from_le_bytes(o[..8].try_into().unwrap_or_default());
                h.data = u64::from_le_bytes(o[8..].try_into().unwrap_or_default());
                h.offset = u64::from(port);
                OutRecord::new(h.to_bytes(), Body::None)
            })
            .collect();
        let Some(p) = self.peers.get_mut(&peer) else { return };
        p.links = Some(Box::default());
        if let Some(q) = self.queue_of(peer) {
            for r in recs {
                q.push(r);
            }
        }
    }

    /// Closes `peer`'s extra links without a word (its link 0 is gone or
    /// replaced): nothing more is read from them.
    pub(super) fn drop_links(&mut self, peer: SocketAddr) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.link != 0 && c.peer == Some(peer))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(mut c) = self.take_conn(id) {
                c.conn.unwatch(&self.epoll);
            }
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.links = None;
        }
    }

    /// The room for a chunk to `to` when it has extra links: the most any
    /// link up has (None: no extra links).
    pub(super) fn striped_room(&mut self, to: SocketAddr) -> Option<usize> {
        let p = self.peers.get(&to)?;
        let links = p.links.as_ref()?;
        let mut best = 0;
        for (k, l) in links.link.iter().enumerate().skip(1) {
            if let State::Up(id) = l.state {
                if let Some(c) = self.conns.get(&id) {
                    best = best.max(super::room_after(c.conn.queue().unsent()));
                }
            } else if l.state == State::Down && links.msgs.values().any(|&m| m == k) {
                best = best.max(QUEUE_HIGH_WATER.saturating_sub(l.limbo_bytes));
            }
        }
        let zero = self.queue_of(to).map_or(0, |q| q.unsent());
        Some(best.max(super::room_after(zero)))
    }

    /// Where a DATA chunk of message `h.msg_id` to `to` goes: its
    /// message's link, or (its first chunk) the next link up in turn.
    pub(super) fn stripe(&mut self, to: SocketAddr, h: &WireHdr, body: Body, iq: IfQueued) -> Striped {
        let now = self.now;
        // Link 0 refuses a record now (`queue_record`): a message's way is
        // forgotten only once its last chunk is taken.
        let zero_full = self.queue_of(to).is_some_and(|q| q.unsent() >= QUEUE_HIGH_WATER);
        let Some(p) = self.peers.get_mut(&to) else {
            return Striped::Primary(body);
        };
        let Some(links) = p.links.as_mut() else {
            return Striped::Primary(body);
        };
        // The message's last chunk (`LAST` only ends the range a CTS asked
        // for: a receiver may ask for a message in several).
        let last = h.offset.saturating_add(u64::from(h.payload)) >= h.len;
        // Every chunk of a message goes the way its first went (link 0
        // included): the receiver takes a message's chunks in order only.
        let k = match links.msgs.get(&h.msg_id) {
            Some(&k) => k,
            None => {
                let up: Vec<usize> = (1..MAX_LINKS)
                    .filter(|&k| matches!(links.link[k].state, State::Up(_)))
                    .collect();
                let k = if up.is_empty() {
                    0
                } else {
                    let n = links.next % (up.len() + 1);
                    links.next = links.next.wrapping_add(1);
                    if n == 0 {
                        0
                    } else {
                        up[n - 1]
                    }
                };
                if !last {
                    links.msgs.insert(h.msg_id, k);
                }
                k
            }
        };
        if k == 0 {
            if zero_full {
                return Striped::Taken(Err(Error::AGAIN));
            }
            if last {
                links.msgs.remove(&h.msg_id);
            }
            return Striped::Primary(body);
        }
        let l = &mut links.link[k];
        let hdr = h.to_bytes();
        match l.state {
            State::Up(id) => {
                let Some(c) = self.conns.get_mut(&id).filter(|c| c.conn.phase() == Phase::Up) else {
                    return Striped::Primary(body);
                };
                let q = c.conn.queue_mut();
                if q.unsent() >= QUEUE_HIGH_WATER {
                    return Striped::Taken(Err(Error::AGAIN));
                }
                if last {
                    links.msgs.remove(&h.msg_id);
                }
                c.carried = true;
                c.last_active = Some(now);
                l.kept.push_back(Kept {
                    hdr,
                    body: copy_body(&body),
                    msg: h.msg_id,
                    notify: false,
                });
                l.sent += 1;
                q.push(OutRecord::new(hdr, body));
                self.queued_since_pass = true;
                if c.conn.doomed().is_none() {
                    c.conn.flush(&mut self.sent);
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    if c.conn.doomed().is_some() {
                        self.doomed.push(id);
                    }
                }
                if c.conn.queue().is_empty() {
                    return Striped::Taken(Ok(true));
                }
                if let Some(r) = c.conn.queue_mut().back_mut() {
                    if iq.copy {
                        r.make_owned();
                    }
                    r.notify = Some(iq.msg_id);
                }
                if let Some(kept) = l.kept.back_mut() {
                    kept.notify = true;
                }
                Striped::Taken(Ok(false))
            }
            State::Down => {
                if l.limbo_bytes >= QUEUE_HIGH_WATER {
                    return Striped::Taken(Err(Error::AGAIN));
                }
                if last {
                    links.msgs.remove(&h.msg_id);
                }
                l.limbo_bytes += h.payload as usize;
                // The buffer stays the application's until the receiver's
                // ACK, which cannot come before this chunk arrived.
                l.limbo.push(Kept {
                    hdr,
                    body,
                    msg: h.msg_id,
                    notify: true,
                });
                Striped::Taken(Ok(false))
            }
            State::Free | State::Dialing(_) => {
                if zero_full {
                    links.msgs.insert(h.msg_id, k);
                    return Striped::Taken(Err(Error::AGAIN));
                }
                if last {
                    links.msgs.remove(&h.msg_id);
                } else {
                    links.msgs.insert(h.msg_id, 0);
                }
                Striped::Primary(body)
            }
        }
    }

    /// Connection `id` read `n` more DATA records whole: counted for its
    /// link, and confirmed to the sender every [`ACK_EVERY`].
    pub(super) fn link_read(&mut self, id: u64, n: u64) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let (k, gen) = split(c.link);
        let Some(l) = c
            .peer
            .and_then(|a| link_of(&mut self.peers, &a, k))
            .filter(|l| l.gen == gen && l.state == State::Up(id))
        else {
            return;
        };
        l.read += n;
        if l.read - l.read_acked < ACK_EVERY {
            return;
        }
        l.read_acked = l.read;
        let mut h = bye(LINK_ACK);
        h.msg_id = c.link;
        h.offset = l.read;
        c.conn.queue_mut().push(OutRecord::new(h.to_bytes(), Body::None));
        if c.conn.doomed().is_none() {
            c.conn.flush(&mut self.sent);
            sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
            if c.conn.doomed().is_some() {
                self.doomed.push(id);
            }
        }
    }

    /// A link's control record (a BYE with a link `aux`) on connection
    /// `id`. Returns whether the connection may be read on.
    pub(super) fn on_link_record(&mut self, id: u64, h: &WireHdr, d: &mut dyn Delivery) -> bool {
        let Some(c) = self.conns.get(&id).filter(|c| c.conn.phase() == Phase::Up) else {
            return false;
        };
        let (Some(peer), link) = (c.peer, c.link) else {
            return true;
        };
        let primary = link == 0 && self.peers.get(&peer).is_some_and(|p| p.conn == Some(id));
        match h.aux {
            LINK_ADDR if primary => {
                let k = h.msg_id as usize;
                let mut o = [0u8; 16];
                o[..8].copy_from_slice(&h.tag.to_le_bytes());
                o[8..].copy_from_slice(&h.data.to_le_bytes());
                let v6 = Ipv6Addr::from(o);
                let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
                let port = h.offset as u16;
                let usable = (1..MAX_LINKS).contains(&k)
                    && u64::from(port) == h.offset
                    && ip.is_ipv6() == self.me.is_ipv6()
                    && !ip.is_unspecified()
                    && !ip.is_multicast();
                if let Some(ls) = usable
                    .then(|| self.peers.get_mut(&peer))
                    .flatten()
                    .and_then(|p| p.links.as_mut())
                {
                    ls.peer_accepts = port != 0;
                }
                let dials = self.dials_links(&peer);
                let now = self.now;
                if let Some(l) = usable.then(|| link_of(&mut self.peers, &peer, k)).flatten() {
                    l.remote = Some(SocketAddr::new(ip, port));
                    if dials && k <= self.link_ips.len() && l.state == State::Free {
                        l.retry_at = Some(now);
                        self.link_retry = Some(now);
                        self.alarm.ring();
                    }
                }
                true
            }
            LINK_DOWN if primary => {
                let (k, gen) = split(h.msg_id);
                if (1..MAX_LINKS).contains(&k) {
                    self.on_link_down(peer, k, gen, h.offset, d);
                }
                true
            }
            LINK_ACK if link != 0 => {
                let (k, _) = split(link);
                if let Some(l) = link_of(&mut self.peers, &peer, k).filter(|l| l.state == State::Up(id)) {
                    let upto = h.offset.min(l.sent);
                    while l.acked < upto {
                        l.kept.pop_front();
                        l.acked += 1;
                    }
                }
                true
            }
            _ => {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_DATA,
                    "tcp: cutting off a peer: a link record ({:#x}) where none may be",
                    h.aux
                );
                self.fail_conn(id, Error::CONNRESET, d);
                false
            }
        }
    }

    /// Connection `id`, an extra link, ended (`e`): a chunk being placed
    /// is withdrawn (it comes again), and, unless it never reached the
    /// peer, the peer hears how much we read from it.
    pub(super) fn link_lost(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(mut c) = self.take_conn(id) else { return };
        c.conn.unwatch(&self.epoll);
        let notes = c.conn.queue_mut().take_notifications();
        c.conn.abort_reader(d, Error::AGAIN);
        let (k, gen) = split(c.link);
        let Some(peer) = c.peer else { return };
        let dials = self.dials_links(&peer);
        let now = self.now;
        let Some(l) = link_of(&mut self.peers, &peer, k).filter(|l| l.gen == gen) else {
            return;
        };
        match l.state {
            State::Dialing(x) if x == id && c.conn.phase() == Phase::Dialing => {
                // The peer never saw it.
                l.state = State::Free;
                if dials {
                    l.retry_at = Some(now + RETRY);
                    self.link_retry = Some(self.link_retry.map_or(now + RETRY, |t| t.min(now + RETRY)));
                }
                return;
            }
            State::Dialing(x) | State::Up(x) if x == id => {}
            _ => return,
        }
        crate::base::log::log_info!(
            crate::abi::FI_LOG_EP_DATA,
            "tcp: link {k} to {peer} closed ({e}): its messages go over the others"
        );
        for kept in l.kept.iter_mut() {
            kept.notify = notes.contains(&kept.msg);
        }
        l.state = State::Down;
        let mut h = bye(LINK_DOWN);
        h.msg_id = word(k, gen);
        h.offset = l.read;
        let theirs = l.theirs.take();
        if let Some(q) = self.queue_of(peer) {
            q.push(OutRecord::new(h.to_bytes(), Body::None));
        }
        if let Some(n) = theirs {
            self.link_finish(peer, k, n);
        }
        self.flush_peer(peer);
    }

    /// The peer closed link `k` (generation `gen`) and read `n` DATA
    /// records from it.
    fn on_link_down(&mut self, peer: SocketAddr, k: usize, gen: u64, n: u64, d: &mut dyn Delivery) {
        let Some(l) = link_of(&mut self.peers, &peer, k) else {
            return;
        };
        if l.gen != gen {
            if gen > l.gen {
                // A link the peer dialed that we never took: we read
                // nothing from it.
                l.gen = gen;
                let mut h = bye(LINK_DOWN);
                h.msg_id = word(k, gen);
                if let Some(q) = self.queue_of(peer) {
                    q.push(OutRecord::new(h.to_bytes(), Body::None));
                }
                self.flush_peer(peer);
            }
            return;
        }
        match l.state {
            State::Up(id) | State::Dialing(id) => {
                l.theirs = Some(n);
                self.link_lost(id, Error::CONNRESET, d);
            }
            State::Down => {
                self.link_finish(peer, k, n);
                self.flush_peer(peer);
            }
            State::Free => {}
        }
    }

    /// Both sides closed link `k` and the peer read `n` of its DATA
    /// records: the others go again over link 0, then those that waited;
    /// the link is free (and dialed again).
    fn link_finish(&mut self, peer: SocketAddr, k: usize, n: u64) {
        let dials = self.dials_links(&peer);
        let now = self.now;
        let Some(links) = self.peers.get_mut(&peer).and_then(|p| p.links.as_mut()) else {
            return;
        };
        let l = &mut links.link[k];
        let base = l.acked;
        let mut again: Vec<OutRecord> = std::mem::take(&mut l.kept)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| base + *i as u64 >= n)
            .map(|(_, r)| r.record())
            .collect();
        again.extend(std::mem::take(&mut l.limbo).into_iter().map(Kept::record));
        l.limbo_bytes = 0;
        l.state = State::Free;
        l.sent = 0;
        l.acked = 0;
        l.read = 0;
        l.read_acked = 0;
        l.theirs = None;
        if dials && l.remote.is_some() {
            l.retry_at = Some(now + RETRY);
            self.link_retry = Some(self.link_retry.map_or(now + RETRY, |t| t.min(now + RETRY)));
        }
        // Their chunks follow the ones sent again, over link 0.
        for m in links.msgs.values_mut() {
            if *m == k {
                *m = 0;
            }
        }
        if !again.is_empty() {
            crate::base::log::log_info!(
                crate::abi::FI_LOG_EP_DATA,
                "tcp: {} chunks of link {k} to {peer} go again over link 0",
                again.len()
            );
        }
        if let Some(q) = self.queue_of(peer) {
            for r in again {
                q.push(r);
            }
        }
    }

    /// When the next link dial is due (the port's timer includes it).
    pub(super) fn next_link_dial(&self) -> Option<Instant> {
        self.link_retry
    }

    /// Dials the links whose time has come.
    pub(super) fn dial_links(&mut self, now: Instant) {
        if self.link_retry.is_none_or(|t| t > now) {
            return;
        }
        self.link_retry = None;
        let mut due: Vec<(SocketAddr, usize)> = Vec::new();
        let mut next: Option<Instant> = None;
        for (a, p) in &self.peers {
            let Some(links) = p.links.as_ref() else { continue };
            for (k, l) in links.link.iter().enumerate().skip(1) {
                match l.retry_at {
                    Some(t) if t <= now && l.state == State::Free => due.push((*a, k)),
                    Some(t) if l.state == State::Free => next = Some(next.map_or(t, |n| n.min(t))),
                    _ => {}
                }
            }
        }
        self.link_retry = next;
        for (peer, k) in due {
            self.dial_link(peer, k, now);
        }
    }

    fn dial_link(&mut self, peer: SocketAddr, k: usize, now: Instant) {
        let Some(&ip) = self.link_ips.get(k - 1) else { return };
        let Some(l) = link_of(&mut self.peers, &peer, k) else {
            return;
        };
        l.retry_at = None;
        let Some(to) = l.remote else { return };
        let dialed = net::source_socket(ip).and_then(|from| Conn::dial(Some(from), &to, LINK_DIAL_TIMEOUT));
        let conn = match dialed {
            Ok(c) => c,
            Err(_) => {
                l.retry_at = Some(now + RETRY);
                self.link_retry = Some(self.link_retry.map_or(now + RETRY, |t| t.min(now + RETRY)));
                return;
            }
        };
        conn.tune(&LINK_TUNING);
        l.gen += 1;
        let gen = l.gen;
        let mut c = PortConn::new(conn, Some(peer));
        c.dialed = true;
        c.link = word(k, gen);
        let Ok(id) = self.add_conn(c) else { return };
        if let Some(l) = link_of(&mut self.peers, &peer, k) {
            l.state = State::Dialing(id);
        }
    }

    /// Whether a REQUEST for an extra link (`req.link`) on connection
    /// `conn` may be taken: an established link 0 of the same incarnation,
    /// the source the peer listed for that link, a free link of a newer
    /// generation, the peer being the side that dials.
    pub(super) fn join_check(&self, conn: &Conn, req: &Hello) -> std::result::Result<(), Refusal> {
        let (k, gen) = split(req.link);
        if self.link_ips.is_empty()
            || !self.accepts_links
            || !(1..MAX_LINKS).contains(&k)
            || self.dials_links(&req.addr)
        {
            return Err(Refusal::InUse);
        }
        let Some(p) = self.peers.get(&req.addr) else {
            return Err(Refusal::InUse);
        };
        let primary = p
            .conn
            .and_then(|id| self.conns.get(&id))
            .filter(|c| c.conn.phase() == Phase::Up && c.nonce == req.nonce);
        let Some(l) = p.links.as_ref().map(|ls| &ls.link[k]) else {
            return Err(Refusal::InUse);
        };
        if primary.is_none() || l.state != State::Free || gen <= l.gen {
            return Err(Refusal::InUse);
        }
        let src = conn.peer_addr().map(|a| plain_ip(a.ip()));
        match l.remote {
            Some(r) if src.is_ok_and(|s| s == plain_ip(r.ip())) => Ok(()),
            _ => Err(Refusal::Address),
        }
    }

    /// Takes an accepted extra link whose REQUEST (keyed: and PROOF)
    /// passed: ACCEPT (unless it went out already), and it is up.
    pub(super) fn adopt_link(&mut self, mut conn: Conn, req: Hello, answered: bool, d: &mut dyn Delivery) {
        if let Err(why) = self.join_check(&conn, &req) {
            if !answered {
                self.refuse(conn, req.addr, why);
            }
            return;
        }
        if !answered {
            let x = hello::Extra {
                word: self.rts_prefix as u64,
                link: req.link,
                ..hello::Extra::default()
            };
            let (h, p) = hello::encode_with(Kind::Accept, &self.me, self.nonce, &x);
            conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        }
        conn.tune(&LINK_TUNING);
        conn.set_phase(Phase::Up);
        conn.set_deadline(None);
        let mut c = PortConn::new(conn, Some(req.addr));
        c.nonce = req.nonce;
        c.link = req.link;
        let Ok(id) = self.add_conn(c) else { return };
        let (k, gen) = split(req.link);
        if let Some(l) = link_of(&mut self.peers, &req.addr, k) {
            l.state = State::Up(id);
            l.gen = gen;
        }
        crate::base::log::log_info!(
            crate::abi::FI_LOG_EP_CTRL,
            "tcp: link {k} to {} up (its dial)",
            req.addr
        );
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.conn.flush(&mut self.sent);
        if let Some(e) = c.conn.take_doomed() {
            self.link_lost(id, e, d);
            return;
        }
        sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        if c.conn.reader().holds_input() {
            self.read_conn(id, d);
        }
    }

    /// The ACCEPT to our dial of an extra link: from the incarnation link 0
    /// knows, with the key proved as on link 0. Returns whether the
    /// connection may be read on.
    pub(super) fn link_accepted(&mut self, id: u64, acc: &Hello, d: &mut dyn Delivery) -> bool {
        let Some((peer, w)) = self.conns.get(&id).and_then(|c| Some((c.peer?, c.link))) else {
            return false;
        };
        let nonce = self
            .peers
            .get(&peer)
            .and_then(|p| p.conn)
            .and_then(|cid| self.conns.get(&cid))
            .filter(|c| c.conn.phase() == Phase::Up)
            .map(|c| c.nonce);
        if nonce != Some(acc.nonce) || acc.addr != peer {
            self.link_lost(id, Error::CONNRESET, d);
            return false;
        }
        if let Err(e) = self.check_accept(id, acc) {
            self.link_lost(id, e, d);
            return false;
        }
        let (k, _) = split(w);
        let Some(c) = self.conns.get_mut(&id) else { return false };
        c.conn.set_phase(Phase::Up);
        c.conn.set_deadline(None);
        c.nonce = acc.nonce;
        let Some(l) = link_of(&mut self.peers, &peer, k).filter(|l| l.state == State::Dialing(id)) else {
            self.drop_conn(id);
            return false;
        };
        l.state = State::Up(id);
        l.sent = 0;
        l.acked = 0;
        l.read = 0;
        l.read_acked = 0;
        crate::base::log::log_info!(crate::abi::FI_LOG_EP_CTRL, "tcp: link {k} to {peer} up (our dial)");
        if let Some(c) = self.conns.get_mut(&id) {
            c.conn.flush(&mut self.sent);
            if let Some(e) = c.conn.take_doomed() {
                self.link_lost(id, e, d);
                return false;
            }
        }
        self.update_interest(id);
        true
    }

    /// The link word our dial `id` says in its REQUEST (0: not a link).
    pub(super) fn link_word(&self, id: u64) -> u64 {
        self.conns.get(&id).map_or(0, |c| c.link)
    }
}

#[cfg(test)]
impl TcpPort {
    /// For tests: the extra links' ids (Up or not), and each link's DATA
    /// records sent and read so far (index 1..).
    pub(super) fn link_census(&self, peer: SocketAddr) -> Vec<(bool, u64, u64)> {
        self.peers
            .get(&peer)
            .and_then(|p| p.links.as_ref())
            .map_or_else(Vec::new, |ls| {
                ls.link[1..]
                    .iter()
                    .map(|l| (matches!(l.state, State::Up(_)), l.sent, l.read))
                    .collect()
            })
    }
}

#[cfg(test)]
mod tests;
