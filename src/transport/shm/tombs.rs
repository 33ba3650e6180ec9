//! Departed peers: senders that died or gave their rings up, peers whose
//! owner is gone, their segments unmapped and their tombs kept.

use super::logs::shm_debug;
use super::outbound::leave;
use super::peers::Tomb;
use super::port::ShmPort;
use super::segment;
use crate::base::collections::FastMap;
use crate::sys;
use crate::transport::addr::Addr;
use crate::transport::PeerEvent;
use segment::{NSLOTS, SLOT_CLAIMED};

/// A sweep looks at one sent-to peer's process (a /proc read: microseconds,
/// against a ping-pong's ~0.1 µs pass) only once every this many sweeps
/// (every 262,144 passes): the look only frees the mapping of a peer that
/// died without closing; sends and liveness checks find a dead peer on
/// their own.
pub(super) const PROC_LOOK_SWEEPS: u32 = 64;

impl ShmPort {
    /// Marks inbound slots whose senders are proven dead (freed once
    /// drained) and frees claimed slots whose claimer no longer exists.
    pub(super) fn reclaim_dead(&mut self) {
        // One /proc read per sending process, not per slot: the endpoints
        // of one process share its pid and start time.
        let mut alive: FastMap<(i32, u64), bool> = FastMap::default();
        for i in 0..self.inbound.v.len() {
            let s = &mut self.inbound.v[i];
            if s.dead {
                continue;
            }
            let (pid, start) = if s.vpid > 0 {
                (s.vpid, s.sender.start)
            } else {
                (s.sender.pid, s.sender.start)
            };
            if !*alive
                .entry((pid, start))
                .or_insert_with(|| sys::process_alive(pid, start))
            {
                s.dead = true;
                shm_debug!(
                    "shm: sender {:016x} (pid {pid}) died: its slot {} is freed once drained",
                    s.sender.token,
                    s.slot
                );
                // Freed by the next pass once drained.
                let slot = s.slot;
                self.make_hot(slot);
            }
        }
        for slot in 0..NSLOTS {
            let w = self.seg.slot_word_now(slot);
            if w.state == SLOT_CLAIMED && !sys::pid_exists(w.pid) && self.seg.reclaim_claimed(slot, w) {
                shm_debug!(
                    "shm: slot {slot}, claimed by pid {} that died before using it, reclaimed",
                    w.pid
                );
                self.verified[slot] = None;
            }
        }
    }

    /// The sender `token` gave its ring to us up (`fail_out`: /dev/shm had
    /// no room for it): what we wait on from it (an ACK, a CTS, read data)
    /// never comes, so it fails as a peer, both ways: our ring to it ends
    /// as at a close, or is never opened.
    #[cold]
    #[inline(never)]
    pub(super) fn refuse(&mut self, token: u64) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: peer {token:016x} gave up its ring to us (no room for it in /dev/shm); the peer is unreachable"
        );
        self.events.push(PeerEvent::Failed(Addr::Shm(token)));
        match self.peers.get_mut(token) {
            Some(p) if !p.failed => {
                leave(&self.ring_tx, p);
                p.failed = true;
            }
            Some(_) => {}
            None => {
                self.peers.refused.insert(token);
            }
        }
    }

    /// A departed peer (a tomb) asked about: its failure is reported if it
    /// was not yet. Always false (it is not reachable).
    #[cold]
    #[inline(never)]
    pub(super) fn tomb_failed(&mut self, token: u64) -> bool {
        if let Some(t) = self.peers.gone.get_mut(&token) {
            if !t.reported {
                t.reported = true;
                self.events.push(PeerEvent::Failed(Addr::Shm(token)));
            }
        }
        false
    }

    /// The peer at `i` in `peers.v`, whose owner is gone (its segment
    /// closed, or its process dead): nothing of ours needs its segment any
    /// more (records for it, queued or in its ring, would reach nobody;
    /// CMA goes by pid, not through the segment), so our slot there is
    /// closed and the segment unmapped, and the peer becomes a [`Tomb`]. Its
    /// failure, if not reported yet, is reported by the next send or
    /// liveness check.
    #[cold]
    #[inline(never)]
    pub(super) fn bury(&mut self, i: usize) {
        let p = &self.peers.v[i];
        let tomb = Tomb {
            reported: p.failed,
            next_look: p.next_look,
        };
        // Our slot in the old segment (the owner is gone: nobody frees it).
        p.seg.close_slot(p.slot);
        let (old, moved) = self.peers.remove(i, tomb, &mut self.events);
        crate::base::log::log_info!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: peer {:016x} is gone (pid {}): its segment is unmapped",
            old.seg.token(),
            old.seg.owner_pid
        );
        drop(old);
        if let Some((w, seen)) = self.rare.waiting() {
            if w == i {
                self.rare.set_waiting(None);
            } else if Some(w) == moved {
                self.rare.set_waiting(Some((i, seen)));
            }
        }
    }

    /// The peer `token` stopped sending to us (its slot in our segment
    /// freed: closed, or its process dead): if its owner is gone, it is
    /// buried at once.
    #[cold]
    pub(super) fn bury_if_gone(&mut self, token: u64) {
        if let Some(&i) = self.peers.at.get(&token) {
            let seg = &self.peers.v[i].seg;
            if seg.closed() || !seg.owner_alive() {
                self.bury(i);
            }
        }
    }

    /// The sweep's look at the peers we send to: every one's `closed` word
    /// (a load each) and, every [`PROC_LOOK_SWEEPS`]th sweep, one's process
    /// (in turn, a /proc read): those whose owner is gone (or was found
    /// gone by a send or a liveness check) are buried.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep_peers(&mut self) {
        let n = self.peers.v.len();
        if n == 0 {
            return;
        }
        self.peers.proc_sweeps += 1;
        let look = (self.peers.proc_sweeps >= PROC_LOOK_SWEEPS).then(|| {
            self.peers.proc_sweeps = 0;
            let l = self.peers.look_next % n;
            self.peers.look_next = l + 1;
            l
        });
        let mut i = 0;
        while i < self.peers.v.len() {
            let p = &self.peers.v[i];
            if p.gone || p.seg.closed() || (look == Some(i) && !p.seg.owner_alive()) {
                // The last entry, moved into `i`, is looked at next.
                self.bury(i);
                continue;
            }
            i += 1;
        }
    }
}
