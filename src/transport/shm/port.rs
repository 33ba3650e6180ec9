//! The shared-memory port: its state, its creation and its close.

use super::inbound::{InSlot, Inbound};
use super::logs::shm_debug;
use super::outbound::leave;
use super::peer::Budget;
use super::peers::Peers;
use super::rare;
use super::segment;
use crate::base::error::Result;
use crate::sys;
use crate::sys::doorbell::{Doorbell, Ringer};
use crate::transport::addr::Addr;
use crate::transport::proto::{Limits, WireHdr};
use crate::transport::PeerEvent;
use segment::{Segment, SlotSender, NSLOTS};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Every this many passes, watched rings that carried nothing since the
/// last time stop being polled on every pass (ready.rs).
pub(super) const EVICT_PERIOD: u32 = 64;

/// Watched rings an endpoint keeps watched, idle or not: up to this many,
/// polling them costs a pass a few loads of lines nobody writes, less than
/// unwatching (a membarrier, whose interrupts reach the other cores, and a
/// signal per message from the sender afterwards). Without this floor a
/// ping-pong whose round trip takes more than EVICT_PERIOD passes (64 KiB
/// and up, or a peer that computes between messages) unwatched its one
/// ring and paid a membarrier every round trip.
pub(super) const HOT_KEEP: usize = 4;

/// Every this many eviction rounds (4096 passes), and after a sleeper was
/// announced, every inbound ring is looked at once: a sender that died
/// between publishing a record and signalling it costs latency, never the
/// record.
pub(super) const SWEEP_ROUNDS: u32 = 64;

/// A sender's claim as the kernel's credentials confirmed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Verified {
    pub(super) gen: u64,
    pub(super) pid: i32,
}

pub(crate) struct ShmPort {
    /// Before `seg`: its socket file goes before the segment name does, so
    /// a next owner of this address never finds our file in use.
    pub(super) doorbell: Doorbell,
    pub(super) seg: Segment,
    pub(super) token: u64,
    pub(super) me: SlotSender,
    pub(super) ring_tx: Ringer,
    /// The senders we know; the watched ones are polled on every pass.
    pub(super) inbound: Inbound,
    /// Passes left before the next eviction round.
    pub(super) round: u32,
    /// [`HOT_KEEP`] (tests lower it to see rings go idle with few senders).
    pub(super) hot_keep: usize,
    /// Eviction rounds left before the next sweep.
    pub(super) rounds: u32,
    /// Look at every inbound ring on the next pass (a sleeper was announced).
    pub(super) sweep_due: bool,
    /// Some watched entry is marked to be looked at (`InSlot::look`).
    pub(super) looking: bool,
    pub(super) seen_claims: u64,
    pub(super) peers: Peers,
    pub(super) limits: Limits,
    /// What a peer's records may make us hold (`FI_RUSTFAB_PEER_BUDGET`).
    pub(super) budget: Budget,
    pub(super) events: Vec<PeerEvent>,
    /// The pass's rarely-set conditions (the sleeper, the backlog, the ring
    /// waited on, the full scan due), tested together once per pass.
    pub(super) rare: rare::Rare,
    /// Per slot of our segment: the claim the kernel's credentials
    /// confirmed (owner-private memory: senders cannot write it).
    pub(super) verified: Vec<Option<Verified>>,
    pub(super) last_reclaim: Option<Instant>,
    /// Slots senders announced (or signalled) that we have not taken in
    /// yet: a pass looks at these, not at all NSLOTS slot words (each in its
    /// own page of the segment: a full scan faults in 256 pages, 1 MiB).
    pub(super) candidates: [u64; NSLOTS / 64],
    /// Some slot was taken in since `claim_seq` last moved.
    pub(super) adopted: bool,
    pub(super) last_scan: Option<Instant>,
    /// Full scans made (tests: first contact must not need one).
    #[cfg(test)]
    pub(super) scans: u32,
}

impl Drop for ShmPort {
    fn drop(&mut self) {
        self.close();
    }
}

impl ShmPort {
    /// Creates the endpoint's segment (named by `token`) and doorbell.
    pub(crate) fn new(token: u64, limits: Limits) -> Result<ShmPort> {
        ShmPort::with_ring_cells(token, limits, segment::NCELLS)
    }

    /// [`ShmPort::new`] with rings of `ncells` cells in our segment
    /// (`FI_RUSTFAB_SHM_RING_CELLS`; docs/shm.md "Ring size").
    pub(crate) fn with_ring_cells(token: u64, limits: Limits, ncells: usize) -> Result<ShmPort> {
        let seg = Segment::create_with(token, ncells)?;
        let doorbell = segment::bind_doorbell(token)?;
        let pid = sys::getpid();
        Ok(ShmPort {
            me: SlotSender {
                token,
                pid,
                start: seg.owner_start,
            },
            seg,
            token,
            doorbell,
            ring_tx: Ringer::new()?,
            inbound: Inbound::new(),
            round: EVICT_PERIOD,
            hot_keep: HOT_KEEP,
            rounds: SWEEP_ROUNDS,
            sweep_due: false,
            looking: false,
            seen_claims: 0,
            peers: Peers::default(),
            limits,
            budget: Budget::default(),
            events: Vec::new(),
            rare: rare::Rare::default(),
            verified: vec![None; NSLOTS],
            last_reclaim: None,
            candidates: [0; NSLOTS / 64],
            adopted: false,
            last_scan: None,
            #[cfg(test)]
            scans: 0,
        })
    }

    /// [`Budget`] from `FI_RUSTFAB_PEER_BUDGET` (`per_peer` bytes of
    /// queued answers, each a 64-byte header here) and
    /// `FI_RUSTFAB_PEER_BUDGET_TIMEOUT`, the parameters tcp bounds its
    /// answer queues by (docs/security.md "Peer budgets").
    pub(crate) fn with_budget(mut self, per_peer: usize, timeout: Duration) -> ShmPort {
        self.budget = Budget {
            records: (per_peer / core::mem::size_of::<WireHdr>()).max(1),
            timeout,
        };
        self
    }

    pub(crate) fn addr(&self) -> Addr {
        Addr::Shm(self.token)
    }

    /// The descriptor that turns readable when a peer rings our doorbell.
    pub(crate) fn wait_fd(&self) -> RawFd {
        self.doorbell.fd()
    }

    /// Progress engine's sleeper count changed.
    pub(crate) fn set_sleepers(&mut self, n: usize) {
        self.seg.set_sleepers(n as u64);
        if n > 0 {
            self.rare.set(rare::SLEEPING, true);
            self.sweep_due = true;
            self.round = 1;
        }
    }

    /// Whether records are waiting (a waiter must not sleep).
    pub(crate) fn has_pending(&self) -> bool {
        self.seg.claim_seq() != self.seen_claims || self.seg.any_ready() || self.inbound.iter().any(InSlot::has_records)
    }

    /// Failures noticed since the last call.
    pub(crate) fn take_events(&mut self) -> Vec<PeerEvent> {
        std::mem::take(&mut self.events)
    }

    /// The shm token of this port's segment.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// Orderly close: tell peers, release our slots in their segments.
    pub(crate) fn close(&mut self) {
        for p in self.peers.values_mut() {
            if !p.failed {
                shm_debug!(
                    "shm: closing: our ring to peer {:016x} ends (slot {})",
                    p.seg.token(),
                    p.slot
                );
                leave(&self.ring_tx, p);
            }
        }
        self.peers.clear();
        self.rare.set_waiting(None);
    }
}
