//! The doorbell's side of the port: senders' announcements (who they are, as
//! the kernel confirms), refusals, and sleepers.

use super::port::{ShmPort, Verified};
use super::rare;
use super::segment;
use crate::sys;
use crate::sys::doorbell::Cred;
use segment::{Segment, SLOT_ACTIVE, SLOT_CLAIMED};

impl ShmPort {
    pub(super) fn drain_doorbell(&mut self) {
        if !self.rare.get(rare::SLEEPING) {
            return;
        }
        self.take_hellos();
        if self.seg.sleepers() == 0 {
            self.rare.set(rare::SLEEPING, false);
        }
    }

    /// Drains the doorbell, noting the claims senders announced: a claim
    /// counts only with our uid, and with the pid the kernel gives, which
    /// must be the one the slot's state word names and (with the slot's
    /// start time) a live process. Other datagrams only wake us.
    pub(super) fn take_hellos(&mut self) {
        let (seg, verified, token) = (&self.seg, &mut self.verified, self.token);
        let candidates = &mut self.candidates;
        let euid = sys::geteuid();
        let mut refusals: Vec<(i32, u64)> = Vec::new();
        self.doorbell.drain(&mut |c: Cred, b: &[u8]| {
            if c.uid != euid {
                return;
            }
            let Some((claim, _)) = segment::parse_hello(token, b) else {
                if let Some(t) = segment::parse_refusal(token, b) {
                    refusals.push((c.pid, t));
                }
                return;
            };
            let w = seg.slot_word_now(claim.slot);
            let live = (w.state == SLOT_CLAIMED || w.state == SLOT_ACTIVE)
                && w.gen == claim.gen
                && w.pid == c.pid
                && sys::proc_start_time(c.pid) == Some(seg.slot_sender(claim.slot).start);
            if live {
                verified[claim.slot] = Some(Verified {
                    gen: claim.gen,
                    pid: c.pid,
                });
                candidates[claim.slot / 64] |= 1 << (claim.slot % 64);
            }
        });
        for (pid, t) in refusals {
            self.take_refusal(pid, t);
        }
    }

    /// A refusal (`segment::REFUSAL_MAGIC`) from `pid` naming the peer
    /// `token`: believed if `token`'s segment is that process's (pid and
    /// start time), as an endpoint's own word about itself.
    #[cold]
    #[inline(never)]
    pub(super) fn take_refusal(&mut self, pid: i32, token: u64) {
        let owner = match self.peers.get_mut(token) {
            Some(p) => Some((p.seg.owner_pid, p.seg.owner_start)),
            None => Segment::open(token).ok().map(|s| (s.owner_pid, s.owner_start)),
        };
        let Some((opid, ostart)) = owner else { return };
        if opid == pid && sys::proc_start_time(pid) == Some(ostart) {
            self.refuse(token);
        }
    }

    /// Whether an inbound sender is alive (for transfers we wait on);
    /// `src_pid` is the pid its records reported (0: unverified).
    pub(crate) fn sender_alive(&self, src_pid: i32, token: u64) -> bool {
        self.inbound
            .iter()
            .find(|s| s.sender.token == token && (src_pid == 0 || s.vpid == src_pid))
            .is_none_or(|s| {
                let pid = if s.vpid > 0 { s.vpid } else { s.sender.pid };
                !s.broken && !s.dead && sys::process_alive(pid, s.sender.start)
            })
    }

    /// Whether `pid` is the kernel-verified pid of a sender we hear from:
    /// the only processes CMA may read.
    pub(super) fn verified_sender(&self, pid: i32) -> bool {
        pid > 0 && self.inbound.iter().any(|s| s.vpid == pid && !s.broken)
    }
}
