//! Deadlines and endings: dials, handshakes and budgets that ran out, a
//! connection or a peer that failed, the connection cap, the port's close.
//!
//! A peer's failure reaches the core one way, however it was found (a
//! dial or a write that failed, a broken or hostile stream, a deadline):
//! [`TcpPort::fail_peer`] drops what was queued for the peer and queues one
//! [`PeerEvent`] ([`TcpPort::report`]), on which the core ends every
//! operation that involves the peer. The records dropped are not reported
//! one by one (`Delivery::sent`): their operations end with the event. A
//! payload the peer's stream was placing is handed back
//! (`Delivery::placed(.., Err)`): only the transport knows that it stopped
//! writing into that buffer.

use super::conn::Phase;
use super::framing::{Body, OutRecord};
use super::trace;
use super::{budget, dial_failed, PortConn, TcpPort, IDLE_MIN};
use crate::base::error::Error;
use crate::transport::addr::Addr;
use crate::transport::proto::WireHdr;
use crate::transport::{proto, Delivery, PeerEvent};
use std::net::SocketAddr;
use std::time::Instant;

impl TcpPort {
    pub(super) fn check_deadlines(&mut self, d: &mut dyn Delivery) {
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
        self.dial_links(now);
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
            .chain(self.next_link_dial())
            .min()
    }

    pub(super) fn arm_timer(&mut self) {
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
    pub(super) fn drop_conn(&mut self, id: u64) {
        if let Some(mut c) = self.take_conn(id) {
            c.conn.unwatch(&self.epoll);
        }
    }

    /// Removes a connection from the table (its staged bytes with it).
    pub(super) fn take_conn(&mut self, id: u64) -> Option<PortConn> {
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
    pub(super) fn make_room(&mut self) -> bool {
        if self.conns.len() < self.max_conns {
            return true;
        }
        let now = self.now;
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.conn.phase() == Phase::Up
                    && c.link == 0
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
            self.drop_links(a);
            self.peers.remove(&a);
        }
        self.drop_conn(id);
        true
    }

    /// Closes a connection whose failure concerns no peer: a payload being
    /// placed completes in error, records it held too.
    pub(super) fn remove_conn(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(mut c) = self.take_conn(id) else { return };
        c.conn.unwatch(&self.epoll);
        for m in c.conn.queue_mut().take_notifications() {
            d.sent(m, Err(e));
        }
        c.conn.abort_reader(d, crate::transport::PEER_FAILED);
    }

    /// A connection failed. If it carried records (established, or the dial
    /// a peer's records wait on) the peer fails with it.
    pub(super) fn fail_conn(&mut self, id: u64, e: Error, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get(&id) else { return };
        if c.link != 0 {
            // An extra link: the peer keeps its others (`links.rs`).
            return self.link_lost(id, e, d);
        }
        let phase = c.conn.phase();
        trace::conn_event(format_args!(
            "tcp: connection to {} closed in {phase:?}: {e}",
            trace::Peer(c.peer)
        ));
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

    /// Ends everything to and from `addr`: its connections close, the
    /// records queued for it are dropped, a payload being placed is handed
    /// back, and the core hears of it once ([`TcpPort::report`]).
    pub(super) fn fail_peer(&mut self, addr: SocketAddr, e: Error, d: &mut dyn Delivery) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.peer == Some(addr) && matches!(c.conn.phase(), Phase::Up | Phase::Dialing | Phase::AwaitAnswer)
            })
            .map(|(id, _)| *id)
            .collect();
        let mut gone: Vec<PortConn> = ids.iter().filter_map(|id| self.take_conn(*id)).collect();
        for c in &mut gone {
            c.conn.unwatch(&self.epoll);
            c.conn.queue_mut().take_notifications();
            c.conn.abort_reader(&mut *d, crate::transport::PEER_FAILED);
        }
        if let Some(mut p) = self.peers.remove(&addr) {
            p.pending.take_notifications();
        }
        if !self.fenced.contains(&addr) {
            self.fenced.push(addr);
        }
        self.report(addr, e);
    }

    /// The one report of `addr`'s failure to the core: `PeerEvent::Failed`,
    /// or `Denied` for a key, `Unreachable` for a dial that found nobody
    /// (the cause the operations end with); once until the core takes it.
    fn report(&mut self, addr: SocketAddr, e: Error) {
        let ev = if e == Error::ACCES {
            PeerEvent::Denied(Addr::Inet(addr))
        } else if crate::transport::is_unreachable(e) {
            PeerEvent::Unreachable(Addr::Inet(addr), e)
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
    pub(super) fn shutdown_all(&mut self) {
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

#[cfg(test)]
mod tests;
