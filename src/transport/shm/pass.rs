//! A progress pass: consuming the rings polled on every pass, the ready list,
//! eviction rounds, sweeps and discovery of new senders.

use super::inbound::{consume_slot, InRecord, InSlot};
use super::logs::shm_debug;
use super::peer::LIVENESS_PERIOD;
use super::port::{ShmPort, EVICT_PERIOD, SWEEP_ROUNDS};
use super::rare;
use super::segment;
use crate::base::error::Error;
use crate::transport::addr::Addr;
use crate::transport::{Disposition, PeerEvent};
use segment::{NSLOTS, SLOT_ACTIVE, SLOT_CLAIMED, SLOT_CLOSED, SLOT_FREE};
use std::time::Instant;

/// Fewer free slots than this: look for slots of dead senders (at most
/// every LIVENESS_PERIOD).
pub(super) const RECLAIM_BELOW: usize = 32;

/// A closed slot whose `abort` word holds a code no sender writes (only
/// `FI_ENOMEM` means a sender gave its ring up): a corrupt control line,
/// logged as such; the slot is freed as after an orderly close and the
/// sender is not failed for it.
#[cold]
#[inline(never)]
pub(super) fn odd_abort(slot: usize, token: u64, code: u32) {
    crate::base::log::log_warn!(
        crate::abi::FI_LOG_EP_DATA,
        "shm: slot {slot} (sender {token:016x}) closed with an abort word no sender writes ({code:#x}: its control line was overwritten): the slot is freed, the sender is not failed for it"
    );
}

impl ShmPort {
    /// Consumes inbound records in per-peer FIFO order: the rings polled
    /// on every pass (those that carried records lately) and those on the
    /// ready list (ready.rs). Returns whether a peer moved since the last
    /// pass: a record (or rewind marker) was consumed, or the consumer of
    /// the ring we wait on for room ([`rare::Rare::waiting`]) advanced its
    /// head — a peer that moves runs on another processor (`Port::poll`).
    pub(crate) fn poll_records(&mut self, f: &mut dyn FnMut(InRecord<'_>) -> Disposition) -> bool {
        // One test for the conditions a pass rarely finds (`rare_pass`).
        let mut moved = false;
        if self.rare.any() {
            moved = self.rare_pass();
        }
        let claims = self.seg.claim_seq();
        if claims != self.seen_claims {
            self.seen_claims = claims;
            self.discover_slots();
        }
        if self.seg.any_ready() {
            self.take_ready();
        }
        self.round -= 1;
        if self.round == 0 {
            self.eviction_round();
        }
        let lim = &self.limits;
        let backlogged = self.rare.get(rare::BACKLOGGED);
        for s in &mut self.inbound.v[..self.inbound.nhot] {
            if !s.broken {
                if backlogged && self.peers.backlog_full(s.sender.token, self.budget.records) {
                    continue;
                }
                if let Err(()) = consume_slot(s, lim, f, &mut moved) {
                    s.broken = true;
                    s.look = true;
                    self.looking = true;
                    self.events.push(PeerEvent::Failed(Addr::Shm(s.sender.token)));
                }
            }
        }
        if self.looking {
            self.free_closed();
        }
        moved
    }

    /// The part of a pass that runs only with a [`rare`] condition set, in
    /// the order the pass took them before they shared a word: the ring we
    /// wait on for room (whether its consumer moved), the doorbell (a
    /// sleeper), the full scan due (only while `claim_seq` did not move: a
    /// move is `discover_slots`' work, which takes the hellos first), the
    /// control records waiting for ring space (outbound only: its place
    /// before or after taking in new senders changes nothing).
    #[inline(never)]
    pub(super) fn rare_pass(&mut self) -> bool {
        let moved = match self.rare.waiting() {
            Some((i, seen)) => self.outbound_moved(i, seen),
            None => false,
        };
        self.drain_doorbell();
        if self.rare.get(rare::SCAN_DUE) && self.seg.claim_seq() == self.seen_claims {
            self.scan_if_due();
        }
        if self.rare.get(rare::BACKLOGGED) {
            self.flush_backlogs();
        }
        moved
    }

    /// Watches `slot`'s ring (known sender) and marks it to be looked at.
    pub(super) fn make_hot(&mut self, slot: usize) {
        if let Some(i) = self.inbound.find(slot) {
            if self.inbound.heat(i) {
                self.seg.watch(slot);
            }
            self.looking = true;
        }
    }

    /// Watched entries marked to be looked at: a closed slot (or a dead
    /// sender's) that is drained goes back to the free pool.
    #[inline(never)]
    pub(super) fn free_closed(&mut self) {
        self.looking = false;
        let mut i = 0;
        while i < self.inbound.nhot {
            let s = &mut self.inbound.v[i];
            if s.look {
                s.look = false;
                let closed = s.dead || self.seg.slot_state(s.slot) == SLOT_CLOSED;
                if closed && (s.broken || s.ring.ready(s.head).is_none()) {
                    let (slot, token, broken) = (s.slot, s.sender.token, s.broken);
                    shm_debug!(
                        "shm: slot {slot} of sender {token:016x} freed ({})",
                        if s.dead { "its process died" } else { "closed" }
                    );
                    self.inbound.remove(i);
                    // A sender that gave its ring up (a broken one was
                    // reported when it broke) will not answer us either.
                    match self.seg.slot_abort(slot) {
                        _ if broken => {}
                        0 => {}
                        c if c == Error::NOMEM.0 as u32 => self.refuse(token),
                        c => odd_abort(slot, token, c),
                    }
                    self.seg.free_slot(slot);
                    self.verified[slot] = None;
                    self.bury_if_gone(token);
                    continue;
                }
            }
            i += 1;
        }
    }

    /// A slot word whose state is none of ours (`scan_slots`): garbage a
    /// process of our user wrote into the slot's control line. The slot
    /// goes back to the free pool (its ring reset); nobody sends there.
    #[cold]
    #[inline(never)]
    pub(super) fn drop_garbage_slot(&mut self, slot: usize, word: u64) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: slot {slot} of our segment has a state word no sender writes ({word:#018x}: its control line was overwritten): the slot is reset and freed"
        );
        self.seg.free_slot(slot);
        self.verified[slot] = None;
    }

    /// Watches the slots on the ready list; a slot we do not know yet (its
    /// sender's first records can be seen before its claim) is looked for.
    #[inline(never)]
    pub(super) fn take_ready(&mut self) {
        if self.collect_ready() {
            self.discover_slots();
        }
    }

    /// Takes the ready list: known slots are watched, unknown ones become
    /// candidates (whether there were any).
    pub(super) fn collect_ready(&mut self) -> bool {
        let mut unknown = false;
        let mut ready = [0u64; NSLOTS / 64];
        self.seg.take_ready(|slot| ready[slot / 64] |= 1 << (slot % 64));
        for (w, mut bits) in ready.into_iter().enumerate() {
            while bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.inbound.find(slot).is_some() {
                    self.make_hot(slot);
                } else {
                    self.candidates[w] |= 1 << (slot % 64);
                    unknown = true;
                }
            }
        }
        unknown
    }

    /// Every EVICT_PERIOD passes: rings that carried nothing since the last
    /// round stop being polled on every pass — unwatched, then looked at
    /// once more (ready.rs); every SWEEP_ROUNDS rounds, and after a sleeper
    /// was announced, every ring not watched is looked at.
    #[cold]
    #[inline(never)]
    pub(super) fn eviction_round(&mut self) {
        self.round = EVICT_PERIOD;
        // Every idle ring unwatched first, then one barrier for all of them
        // (a membarrier: a system call, not one per ring), then each looked
        // at once more. Not while few rings are watched (HOT_KEEP).
        let mut idle = false;
        let nhot = if self.inbound.nhot > self.hot_keep {
            self.inbound.nhot
        } else {
            0
        };
        for s in &mut self.inbound.v[..nhot] {
            s.idle = s.head == s.round_head;
            s.round_head = s.head;
            if s.idle {
                self.seg.unwatch(s.slot);
                idle = true;
            }
        }
        if idle {
            self.seg.owner_fence();
        }
        let mut i = 0;
        while i < self.inbound.nhot {
            let s = &mut self.inbound.v[i];
            if !std::mem::take(&mut s.idle) {
                i += 1;
                continue;
            }
            if s.has_records() {
                self.seg.watch(s.slot);
                i += 1;
                continue;
            }
            // Moves the last watched entry to `i` (looked at next).
            self.inbound.cool(i);
        }
        self.rounds -= 1;
        if self.rounds == 0 || self.sweep_due {
            self.rounds = SWEEP_ROUNDS;
            self.sweep_due = false;
            self.sweep();
        }
    }

    /// Looks at every ring we do not poll on every pass: records (or a
    /// close) there make it watched; and at our header (a few loads):
    /// garbage there refuses every new sender until it is rewritten.
    pub(super) fn sweep(&mut self) {
        self.seg.repair_header();
        self.sweep_peers();
        let mut i = self.inbound.nhot;
        while i < self.inbound.v.len() {
            let s = &self.inbound.v[i];
            let slot = s.slot;
            if s.has_records() || self.seg.slot_state(slot) == SLOT_CLOSED || s.dead {
                // Moves it among the watched; what comes to `i` in its place
                // was looked at already (or is it).
                self.make_hot(slot);
            }
            i += 1;
        }
    }

    /// Takes in the slots senders announced or signalled; when `claim_seq`
    /// moved and none of them was new, every slot word (at most every
    /// LIVENESS_PERIOD): O(1) per new sender, not O(NSLOTS).
    pub(super) fn discover_slots(&mut self) {
        // A sender announces its claim before activating it: every "who I
        // am" of the slots found active below is queued already.
        self.take_hellos();
        if self.seg.any_ready() {
            self.collect_ready();
        }
        let mut cands = self.candidates;
        for (w, bits) in cands.iter_mut().enumerate() {
            let mut b = *bits;
            while b != 0 {
                let slot = w * 64 + b.trailing_zeros() as usize;
                b &= b - 1;
                // Still CLAIMED (announced before its activation): kept for
                // the activation's `claim_seq` move.
                if self.seg.slot_word_now(slot).state != SLOT_CLAIMED {
                    *bits &= !(1 << (slot % 64));
                    self.adopt_slot(slot);
                }
            }
        }
        self.candidates = cands;
        if !std::mem::take(&mut self.adopted) {
            self.rare.set(rare::SCAN_DUE, true);
            self.scan_if_due();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn scan_if_due(&mut self) {
        if self.last_scan.is_none_or(|t| t.elapsed() >= LIVENESS_PERIOD) {
            self.rare.set(rare::SCAN_DUE, false);
            self.last_scan = Some(Instant::now());
            self.scan_slots();
        }
    }

    /// Takes `slot` in if a sender is (or was: records a closed slot holds
    /// must still be delivered) active in it and we do not know it yet.
    pub(super) fn adopt_slot(&mut self, slot: usize) {
        let w = self.seg.slot_word_now(slot);
        if (w.state != SLOT_ACTIVE && w.state != SLOT_CLOSED) || self.inbound.find(slot).is_some() {
            return;
        }
        let sender = self.seg.slot_sender(slot);
        let vpid = match self.verified[slot] {
            Some(v) if v.gen == w.gen && v.pid == w.pid => v.pid,
            _ => 0,
        };
        let ring = self.seg.ring(slot);
        shm_debug!(
            "shm: sender {:016x} (pid {}{}) taken in at slot {slot}",
            sender.token,
            sender.pid,
            if vpid > 0 { ", verified" } else { ", not verified yet" }
        );
        self.inbound.adopt(InSlot::new(slot, ring, sender, vpid));
        self.make_hot(slot);
        self.adopted = true;
    }

    /// Looks at every slot word: senders nobody announced, and (with few
    /// free slots) the slots of dead senders.
    #[cold]
    #[inline(never)]
    pub(super) fn scan_slots(&mut self) {
        #[cfg(test)]
        {
            self.scans += 1;
        }
        let mut free = 0;
        for slot in 0..NSLOTS {
            let w = self.seg.slot_word_now(slot);
            if w.state == SLOT_FREE {
                free += 1;
            } else if w.state > SLOT_CLOSED && self.inbound.find(slot).is_none() {
                self.drop_garbage_slot(slot, w.raw());
                free += 1;
                continue;
            }
            // A closed slot is found too: a sender may claim, write and close
            // (its process exits) between two of our passes.
            self.adopt_slot(slot);
        }
        self.adopted = false;
        if free < RECLAIM_BELOW && self.last_reclaim.is_none_or(|t| t.elapsed() >= LIVENESS_PERIOD) {
            self.last_reclaim = Some(Instant::now());
            self.reclaim_dead();
        }
    }
}
