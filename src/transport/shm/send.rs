//! The send side of the port: records and control records to a peer, its
//! backlog flushed and its budget kept.

use super::doorbell::{after_publish, tell_owner};
use super::outbound::{fail_out, flush_backlog, one_cell_eager, write_eager_cell, write_record};
use super::peer::{PeerOut, LIVENESS_PERIOD};
use super::peers::peer_out;
use super::port::ShmPort;
use super::rare;
use super::{ring, segment};
use crate::base::error::{Error, Result};
use crate::sys::doorbell::DoorbellAddr;
use crate::transport::addr::Addr;
use crate::transport::proto::{WireHdr, HDR_LEN};
use crate::transport::{Payload, PeerEvent};
use segment::Segment;
use std::time::{Duration, Instant};

impl ShmPort {
    pub(super) fn peer(&mut self, token: u64) -> Result<&mut PeerOut> {
        peer_out(
            &mut self.peers,
            &self.ring_tx,
            self.me,
            self.token,
            token,
            &mut self.events,
        )
    }

    /// Whether the peer is (still) reachable; rate-limited liveness check.
    pub(crate) fn check_peer(&mut self, token: u64) -> bool {
        let Some(p) = self.peers.get_mut(token) else {
            return !self.peers.gone.contains_key(&token) || self.tomb_failed(token);
        };
        if p.failed {
            return false;
        }
        if p.last_check.elapsed() >= LIVENESS_PERIOD {
            p.last_check = Instant::now();
            if !p.seg.owner_alive() {
                p.failed = true;
                p.gone = true;
                self.events.push(PeerEvent::Failed(Addr::Shm(token)));
                return false;
            }
        }
        true
    }

    /// First contact with `token` now (its segment opened, a slot claimed
    /// and announced, as the first send would): the pid its header names as
    /// its owner. A connected endpoint checks a peer's shm offer with it
    /// (docs/shm.md, Connected endpoints); an error: it does not open.
    pub(crate) fn open_peer_owner(&mut self, token: u64) -> Result<i32> {
        if token == self.token {
            return Err(Error::INVAL);
        }
        Ok(self.peer(token)?.seg.owner_pid)
    }

    /// Writes one record into `peer`'s ring. `Err(AGAIN)`: no room now.
    pub(crate) fn send_record(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>) -> Result<()> {
        let Addr::Shm(token) = *peer else {
            return Err(Error::INVAL);
        };
        let (ring_tx, events) = (&self.ring_tx, &mut self.events);
        let p = peer_out(&mut self.peers, ring_tx, self.me, self.token, token, events)?;
        if !p.backlog.is_empty() {
            if !flush_backlog(p) {
                return Err(fail_out(ring_tx, p, events, token));
            }
            if !p.backlog.is_empty() {
                return Err(Error::AGAIN);
            }
        }
        let r = match one_cell_eager(hdr, &payload) {
            // The common small message, here (inlined): no call, no
            // generic walk (`write_eager_cell`).
            Some((flags, off, src, n)) => write_eager_cell(p, hdr, flags, off, src, n),
            None => write_record(p, hdr, &payload),
        };
        match r {
            Err(ring::Corrupt) => Err(fail_out(ring_tx, p, events, token)),
            Ok(false) => {
                if p.owner_gone() {
                    p.failed = true;
                    p.gone = true;
                    events.push(PeerEvent::Failed(*peer));
                    return Err(Error::CONNRESET);
                }
                // Watch this ring's head from the next pass on (kept, not
                // re-read, while it is the one watched: movement between
                // two passes must not be lost to a refusal in between).
                if let Some((_, i)) = self.peers.last {
                    if self.rare.waiting().is_none_or(|(w, _)| w != i) {
                        self.rare.set_waiting(Some((i, self.peers.v[i].ring.head_now())));
                    }
                }
                Err(Error::AGAIN)
            }
            Ok(true) => {
                after_publish(ring_tx, p);
                Ok(())
            }
        }
    }

    /// Sends a control record (no payload); queues it if the ring is full.
    pub(crate) fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        match self.send_record(peer, hdr, Payload::None) {
            Err(Error(e)) if e == Error::AGAIN.0 => {
                let Addr::Shm(token) = *peer else {
                    return Err(Error::INVAL);
                };
                // A peer that failed (its failure not yet taken by the
                // endpoint): the record was meant for the incarnation that
                // is gone, and is dropped.
                let Some(p) = self.peers.get_mut(token).filter(|p| !p.failed) else {
                    return Err(Error::CONNRESET);
                };
                p.backlog.push_back(*hdr);
                self.rare.set(rare::BACKLOGGED, true);
                Ok(())
            }
            Err(Error(e)) if e == Error::NOMEM.0 => {
                if let Addr::Shm(token) = *peer {
                    if self.peers.index(token).is_none() {
                        self.unreachable(token);
                    }
                }
                Err(Error::NOMEM)
            }
            r => r,
        }
    }

    /// /dev/shm had no room for the first page of a ring to `token`, whom
    /// we owe a reply (a control record): the reply is lost, so the pair
    /// fails both ways, for good. We fail it (`PeerEvent::NoRoom`) and tell
    /// its owner by a datagram to its doorbell (`segment::REFUSAL_MAGIC`;
    /// no slot of ours is there to close), who fails us in turn.
    #[cold]
    #[inline(never)]
    pub(super) fn unreachable(&mut self, token: u64) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: /dev/shm has no room for a ring to a peer we owe a reply; the peer is unreachable"
        );
        self.peers.refused.insert(token);
        self.events.push(PeerEvent::NoRoom(Addr::Shm(token)));
        let Ok(seg) = Segment::open(token) else { return };
        let Ok(bell) = DoorbellAddr::new(&segment::doorbell_path(token)) else {
            return;
        };
        let msg = segment::refusal_bytes(token, self.token, Error::NOMEM.0 as u32);
        tell_owner(&self.ring_tx, &seg, &bell, &msg, "refusal");
        // Taken in by a busy owner when claim_seq moves.
        seg.nudge();
    }

    /// Free ring space towards `peer`, in payload bytes of one record.
    pub(crate) fn room(&mut self, peer: &Addr) -> usize {
        let Addr::Shm(token) = *peer else { return 0 };
        let Ok(p) = self.peer(token) else { return 0 };
        match p.ring.free_cells(p.tail) {
            Ok(c) => {
                p.free = c;
                (c as usize * ring::CELL).saturating_sub(HDR_LEN)
            }
            Err(_) => 0,
        }
    }

    /// Watches the head of our ring in `token`'s segment from the next pass
    /// on, as after a refused record ([`Self::outbound_moved`]), unless
    /// another ring is watched already (that watch is kept).
    pub(super) fn watch_head(&mut self, token: u64) {
        let Some(i) = self.peers.index(token) else { return };
        if self.rare.waiting().is_none() {
            self.rare.set_waiting(Some((i, self.peers.v[i].ring.head_now())));
        }
    }

    /// Whether the consumer of the ring we wait on ([`rare::Rare::waiting`])
    /// moved its head since the last look (`seen`). Stops watching once it
    /// has taken everything we wrote (nothing left to wait on) or failed.
    #[inline(never)]
    pub(super) fn outbound_moved(&mut self, i: usize, seen: u64) -> bool {
        let Some(p) = self.peers.v.get(i) else {
            self.rare.set_waiting(None);
            return false;
        };
        let head = p.ring.head_now();
        self.rare.set_waiting(if head == p.tail || p.failed {
            None
        } else {
            Some((i, head))
        });
        head != seen
    }

    /// Writes what fits of every backlog. A peer whose backlog stays at its
    /// bound (its ring to us not consumed meanwhile) past
    /// [`Budget::timeout`] is cut off (`cut_off`). The clock is read only
    /// while some backlog is at its bound.
    #[cold]
    #[inline(never)]
    pub(super) fn flush_backlogs(&mut self) {
        let mut left = false;
        let mut now = None;
        let mut expired = Vec::new();
        for (&token, &i) in &self.peers.at {
            let p = &mut self.peers.v[i];
            if !p.backlog.is_empty() {
                if flush_backlog(p) {
                    after_publish(&self.ring_tx, p);
                } else {
                    let _ = fail_out(&self.ring_tx, p, &mut self.events, token);
                }
                left |= !p.backlog.is_empty();
            }
            if p.backlog.len() < self.budget.records {
                p.full_since = None;
                continue;
            }
            let now = *now.get_or_insert_with(Instant::now);
            match p.full_since {
                None => {
                    p.full_since = Some(now);
                    crate::base::log::log_info!(
                        crate::abi::FI_LOG_EP_DATA,
                        "shm: peer {token:016x} leaves {} bytes of answers unread (FI_RUSTFAB_PEER_BUDGET): its ring is not consumed until it takes them",
                        p.backlog.len() * core::mem::size_of::<WireHdr>()
                    );
                }
                Some(since) if now.duration_since(since) >= self.budget.timeout => expired.push(token),
                Some(_) => {}
            }
        }
        self.rare.set(rare::BACKLOGGED, left);
        for token in expired {
            self.cut_off(token);
        }
    }

    /// The peer `token` stayed at its answer bound past
    /// [`Budget::timeout`]: it is failed for cause, as for a corrupt ring
    /// (its operations with us end in error; `PeerEvent::Failed`), its
    /// backlog dropped, its ring to us no longer consumed (freed once it
    /// closes it). Our ring to it is not reopened while it lives
    /// (`revisit`).
    #[cold]
    #[inline(never)]
    pub(super) fn cut_off(&mut self, token: u64) {
        let Some(&i) = self.peers.at.get(&token) else { return };
        let p = &mut self.peers.v[i];
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: cutting off peer {token:016x} (pid {}): it left {} bytes of answers unread for {:?} \
             (FI_RUSTFAB_PEER_BUDGET, FI_RUSTFAB_PEER_BUDGET_TIMEOUT)",
            p.seg.owner_pid,
            p.backlog.len() * core::mem::size_of::<WireHdr>(),
            p.full_since.map_or(Duration::ZERO, |t| t.elapsed())
        );
        p.full_since = None;
        let _ = fail_out(&self.ring_tx, p, &mut self.events, token);
        for s in self.inbound.v.iter_mut().filter(|s| s.sender.token == token) {
            s.broken = true;
            s.look = true;
            self.looking = true;
        }
    }
}
