//! A peer we send to: our ring in its segment, what waits for room in it, and
//! what a peer's answers may make us hold.

use super::{ring, segment};
use crate::sys::doorbell::DoorbellAddr;
use crate::transport::proto::WireHdr;
use ring::Ring;
use segment::Segment;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often a peer we wait on is checked for liveness.
pub(super) const LIVENESS_PERIOD: Duration = Duration::from_millis(100);

/// A sender refused for want of room reads the clock (for its
/// LIVENESS_PERIOD) on every this many refusals only.
pub(super) const FULL_RETRIES_PER_CLOCK: u32 = 16;

pub(super) struct PeerOut {
    pub(super) seg: Segment,
    /// The owner's doorbell, rung when it sleeps.
    pub(super) bell: DoorbellAddr,
    pub(super) slot: usize,
    pub(super) ring: Ring,
    pub(super) tail: u64,
    /// Free cells known without reading the consumer's `head` (which lives
    /// on a cache line the consumer writes): re-read only when short.
    pub(super) free: u64,
    pub(super) failed: bool,
    /// Its owner was found gone (closed, or its process dead): the next
    /// sweep unmaps its segment (`ShmPort::bury`).
    pub(super) gone: bool,
    pub(super) last_check: Instant,
    /// Sends refused for want of room (`owner_gone`'s clock counter).
    pub(super) full_retries: u32,
    /// Control records waiting for ring space: answers to the peer's
    /// records, bounded by [`Budget::records`] (at it the peer's ring to
    /// us is not consumed until the backlog drains).
    pub(super) backlog: VecDeque<WireHdr>,
    /// Since when the backlog is at its bound (`ShmPort::flush_backlogs`):
    /// past [`Budget::timeout`] there, the peer is cut off.
    pub(super) full_since: Option<Instant>,
    /// Cells from a lap's first one whose pages are allocated
    /// (`Segment::reserve_slot` at the claim: `ring::RESERVE_FIRST`, the
    /// ring's first page; more in steps by `claim_past_reserved`; all:
    /// `u64::MAX`). No record, nor the cell after it, is placed past them.
    pub(super) reserved: u64,
    /// /dev/shm had no room for more of the ring: records stay below
    /// `reserved` for good, going back to the lap's first cell.
    pub(super) confined: bool,
    /// /dev/shm had no room for `ring::RESERVE_WORKING` cells: the peer
    /// failed for that (-FI_ENOMEM, not a corrupt ring).
    pub(super) no_room: bool,
    /// A failed peer's address is looked at again (a new owner there?) no
    /// earlier than this (`revisit`).
    pub(super) next_look: Option<Instant>,
}

impl PeerOut {
    /// Our newly activated ring at `slot` of the peer's segment `seg`.
    pub(super) fn new(seg: Segment, bell: DoorbellAddr, slot: usize) -> PeerOut {
        let ring = seg.ring(slot);
        PeerOut {
            seg,
            bell,
            slot,
            ring,
            tail: 0,
            free: 0,
            failed: false,
            gone: false,
            last_check: Instant::now(),
            full_retries: 0,
            reserved: ring::RESERVE_FIRST,
            confined: false,
            no_room: false,
            next_look: None,
            backlog: VecDeque::new(),
            full_since: None,
        }
    }

    /// Whether the ring's owner is gone, asked when its ring is full: its
    /// closed flag every time (one load), its process (a /proc read) at most
    /// every LIVENESS_PERIOD, so a sender spinning on -FI_EAGAIN against a
    /// slow receiver does not read /proc on every retry.
    pub(super) fn owner_gone(&mut self) -> bool {
        if self.seg.closed() {
            return true;
        }
        // The clock only every FULL_RETRIES_PER_CLOCK retries: a sender
        // whose window is deeper than the ring retries often (shmbw, 4 KiB:
        // the clock read was a tenth of its time).
        self.full_retries = self.full_retries.wrapping_add(1);
        if !self.full_retries.is_multiple_of(FULL_RETRIES_PER_CLOCK) || self.last_check.elapsed() < LIVENESS_PERIOD {
            return false;
        }
        self.last_check = Instant::now();
        !self.seg.owner_alive()
    }
}

/// What one peer's records may make an endpoint hold, and for how long.
///
/// `records`: control records (answers to a peer's records) queued towards
/// one peer while its ring has no room, at most. At it the records that
/// peer sends us are left in its ring (it is answering-bound: an honest
/// peer's outstanding operations never come near), so a peer that does not
/// consume our ring cannot grow our memory; a pass takes at most one ring's
/// worth of its records before that, which bounds the overshoot.
/// `timeout`: a peer whose backlog stays at its bound this long is cut off
/// (`ShmPort::cut_off`). docs/security.md "Peer budgets".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Budget {
    pub records: usize,
    pub timeout: Duration,
}

/// [`Budget::records`] by default: 4 MiB of headers (tcp's
/// `FI_RUSTFAB_PEER_BUDGET` default).
pub(crate) const BACKLOG_MAX: usize = (4 << 20) / core::mem::size_of::<WireHdr>();

/// [`Budget::timeout`] by default (tcp's `FI_RUSTFAB_PEER_BUDGET_TIMEOUT`).
pub(crate) const BUDGET_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            records: BACKLOG_MAX,
            timeout: BUDGET_TIMEOUT,
        }
    }
}
