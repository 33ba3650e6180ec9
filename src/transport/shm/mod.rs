//! The shared-memory transport (docs/shm.md): one [`ShmPort`] per endpoint.
//!
//! * Inbound: the endpoint's own [`segment::Segment`]; every peer that sends
//!   to it claims a slot and produces records into that slot's SPSC ring;
//!   [`ShmPort::poll`] consumes them in per-peer FIFO order. A pass polls
//!   only the rings that carried records lately and those their senders
//!   signalled on the segment's ready list (`ready.rs`): an idle peer costs
//!   a pass nothing.
//! * Outbound: for each destination, its segment mapped, a slot claimed in
//!   it, and our producer tail.
//! * Waking: a sleeping owner publishes `sleepers > 0` in its header; a
//!   sender that sees it after publishing sends one datagram to the owner's
//!   doorbell (a unix socket file the owner's progress engine watches).
//!   The busy path makes no system call and, with membarrier (segment
//!   version 4, sync.rs), no full barrier: the owner's side of the
//!   handshake is a membarrier when it goes to sleep.
//! * Large messages: the receiver copies straight from the sender's buffer
//!   with `process_vm_readv` (CMA) when allowed; otherwise the sender streams
//!   the message through its ring in DATA records (pipelined copy-through).
//! * Failure: records are validated before use (`proto::WireHdr::check`); a
//!   corrupt ring or dead peer (pid + start time) costs only that peer; the
//!   slots of senders that died without closing are reclaimed.
//! * Identity: a sender announces its claim to the owner's doorbell, whose
//!   kernel credentials give the pid CMA reads from; an unverified sender
//!   reports pid 0 and its large messages are streamed (docs/security.md).

pub mod ready;
pub mod ring;
pub mod segment;
pub mod sync;

use crate::base::collections::{FastMap, FastSet};
use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::cma::{self, CmaError, IoRange};
use crate::sys::doorbell::{Cred, Doorbell, DoorbellAddr, Ringer};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{self, Limits, WireHdr, HDR_LEN};
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Port, PullJob, PushJob, Sent};
use ring::{cells_for, Ring};
use segment::{Segment, SlotSender, NSLOTS, SLOT_ACTIVE, SLOT_CLAIMED, SLOT_CLOSED, SLOT_FREE};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Largest eager message / DATA chunk carried in a ring record.
pub const EAGER_MAX: usize = 16384;
/// How often a peer we wait on is checked for liveness.
const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// A sender refused for want of room reads the clock (for its
/// LIVENESS_PERIOD) on every this many refusals only.
const FULL_RETRIES_PER_CLOCK: u32 = 16;
/// Fewer free slots than this: look for slots of dead senders (at most
/// every LIVENESS_PERIOD).
const RECLAIM_BELOW: usize = 32;
/// Every this many passes, watched rings that carried nothing since the
/// last time stop being polled on every pass (ready.rs).
const EVICT_PERIOD: u32 = 64;
/// Watched rings an endpoint keeps watched, idle or not: up to this many,
/// polling them costs a pass a few loads of lines nobody writes, less than
/// unwatching (a membarrier, whose interrupts reach the other cores, and a
/// signal per message from the sender afterwards). Without this floor a
/// ping-pong whose round trip takes more than EVICT_PERIOD passes (64 KiB
/// and up, or a peer that computes between messages) unwatched its one
/// ring and paid a membarrier every round trip.
const HOT_KEEP: usize = 4;
/// Every this many eviction rounds (4096 passes), and after a sleeper was
/// announced, every inbound ring is looked at once: a sender that died
/// between publishing a record and signalling it costs latency, never the
/// record.
const SWEEP_ROUNDS: u32 = 64;

/// A sweep looks at one sent-to peer's process (a /proc read: microseconds,
/// against a ping-pong's ~0.1 µs pass) only once every this many sweeps
/// (every 262,144 passes): the look only frees the mapping of a peer that
/// died without closing; sends and liveness checks find a dead peer on
/// their own.
const PROC_LOOK_SWEEPS: u32 = 64;

/// How long a sender retries its "who I am" datagram when the owner's
/// doorbell queue is full (it then goes on unverified: no CMA from it).
const HELLO_PATIENCE: Duration = Duration::from_millis(50);

/// The conditions a pass rarely finds set, in one word it tests once
/// ([`ShmPort::poll_records`], `rare_pass`). Each has a bit; the fields are
/// private to this module, so a condition and its bit cannot disagree.
/// Who sets and clears each (owner-private state: nothing here is read from
/// a segment):
/// * [`SLEEPING`]: set by `set_sleepers(n > 0)` (the doorbell is drained on
///   every pass from then on); cleared by the pass that finds the segment's
///   sleeper count back at zero.
/// * [`BACKLOGGED`]: set by `send_ctl` when it queues a control record for
///   want of ring space (the send side); cleared by `flush_backlogs` once no
///   peer has one queued.
/// * [`SCAN_DUE`]: set by `discover_slots` when `claim_seq` moved with nothing
///   new announced or signalled; cleared by the full scan (`scan_if_due`, at
///   most every LIVENESS_PERIOD).
/// * the ring waited on ([`Rare::waiting`]): set by a send refused for want
///   of room (the send side); kept, moved or dropped by `outbound_moved` on
///   each pass (dropped once its consumer took every record we wrote, or the
///   peer failed), dropped by `close`.
mod rare {
    pub(super) const SLEEPING: u8 = 1;
    pub(super) const BACKLOGGED: u8 = 2;
    pub(super) const SCAN_DUE: u8 = 4;
    const WAITING: u8 = 8;

    #[derive(Default)]
    pub(super) struct Rare {
        bits: u8,
        /// With `WAITING`: the outbound ring a send was last refused on for
        /// want of room (its index in `peers`) and its consumer's head when
        /// last looked at: each pass compares the head, so a consumer that
        /// makes room counts as a peer that moved.
        waiting: (usize, u64),
    }

    impl Rare {
        /// Whether any condition is set (the pass's one test).
        #[inline(always)]
        pub(super) fn any(&self) -> bool {
            self.bits != 0
        }

        #[inline(always)]
        pub(super) fn get(&self, bit: u8) -> bool {
            self.bits & bit != 0
        }

        #[inline(always)]
        pub(super) fn set(&mut self, bit: u8, on: bool) {
            debug_assert!(bit != WAITING, "the ring waited on: set_waiting");
            if on {
                self.bits |= bit;
            } else {
                self.bits &= !bit;
            }
        }

        #[inline(always)]
        pub(super) fn waiting(&self) -> Option<(usize, u64)> {
            (self.bits & WAITING != 0).then_some(self.waiting)
        }

        #[inline(always)]
        pub(super) fn set_waiting(&mut self, w: Option<(usize, u64)>) {
            match w {
                Some(w) => {
                    self.waiting = w;
                    self.bits |= WAITING;
                }
                None => self.bits &= !WAITING,
            }
        }
    }
}

/// A record as the consumer sees it (header copied out and validated).
pub struct InRecord<'a> {
    pub src: Addr,
    pub src_pid: i32,
    pub hdr: WireHdr,
    payload: PayloadRef<'a>,
}

struct PayloadRef<'a> {
    ring: &'a Ring,
    at: u64,
    /// Where the payload starts in the record: after a compact EAGER
    /// header (16 to 40 bytes, `proto::compact_len`) or a full one.
    off: usize,
}

impl InRecord<'_> {
    pub fn payload_len(&self) -> usize {
        self.hdr.payload as usize
    }

    /// Copies payload bytes `off .. off + len` into application memory at
    /// `dst` (logical offset `dst_off` of the iov). Bounds are clipped.
    ///
    /// # Safety
    /// `dst` must describe writable application memory (the fi_recv
    /// contract: buffers stay valid until the receive completes).
    #[inline(always)]
    pub unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        let len = len.min(self.payload_len().saturating_sub(off));
        let from = self.payload.off + off;
        // The common small message: in the record's first cell (which never
        // wraps), all of it into a one-segment buffer, with fixed-size moves
        // and no call frame; the rest out of line.
        if from + len <= ring::CELL {
            let rec = self.payload.ring.cell(self.payload.at);
            // SAFETY: `rec + from .. + len` lies in the record's published,
            // unreleased first cell; `dst` is application memory per
            // contract.
            if unsafe { copy_small_into_one(rec.add(from), len, dst, dst_off) } {
                return len;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.copy_to_iov_general(from, len, dst, dst_off) }
    }

    /// [`InRecord::copy_to_iov`] for the other cases: `len` bytes from
    /// byte `from` of the record (already clipped to the payload).
    ///
    /// # Safety
    /// As [`InRecord::copy_to_iov`].
    #[inline(never)]
    unsafe fn copy_to_iov_general(&self, from: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        let ring = &self.payload.ring;
        let mut copied = 0;
        // A record's first cell never wraps.
        let one = (from + len <= ring::CELL).then(|| ring.cell(self.payload.at));
        if let Some(rec) = one.or_else(|| ring.linear(self.payload.at, cells_for(from + len))) {
            // The bytes do not wrap (nearly always). A small message into
            // a one-segment buffer: fixed-size moves instead of a call to
            // memcpy.
            // SAFETY: `rec + from .. + len` lies in the record's published,
            // unreleased cells, in one linear run; `dst` is application
            // memory per contract.
            if len <= SMALL_COPY && unsafe { copy_small_into_one(rec.add(from), len, dst, dst_off) } {
                return len;
            }
            // One copy per destination segment, without `read_at`'s loop.
            dst.for_range(dst_off, len, |p, n, _| {
                // SAFETY: as above; `p..p+n` is application memory per
                // contract; raw copy, no reference to shared memory.
                unsafe { core::ptr::copy_nonoverlapping(rec.add(from + copied), p as *mut u8, n) };
                copied += n;
            });
            return copied;
        }
        dst.for_range(dst_off, len, |p, n, _| {
            // SAFETY: the record is published and unreleased (we are inside
            // `poll`'s callback); `p..p+n` is application memory per contract.
            unsafe { ring.read_at(self.payload.at, from + copied, p as *mut u8, n) };
            copied += n;
        });
        copied
    }

    /// Copies the whole payload into a new vector.
    pub fn payload_vec(&self) -> Vec<u8> {
        let n = self.payload_len();
        let mut v = vec![0u8; n];
        // SAFETY: `v` has `n` bytes; the record is published and unreleased.
        unsafe {
            self.payload
                .ring
                .read_at(self.payload.at, self.payload.off, v.as_mut_ptr(), n)
        };
        v
    }
}

struct InSlot {
    slot: usize,
    ring: Ring,
    head: u64,
    /// Who the sender says it is (written by it into the slot).
    sender: SlotSender,
    /// Its pid as the kernel told our doorbell (0: not verified); the only
    /// pid records report and CMA reads from.
    vpid: i32,
    broken: bool,
    /// Its sender is proven dead: freed once drained.
    dead: bool,
    /// `head` at the last eviction round (moved since: the ring is busy).
    round_head: u64,
    /// Look at its state after the next consume (signalled: it may have
    /// closed; its sender died).
    look: bool,
    /// Unwatched by the running eviction round, to be looked at again.
    idle: bool,
}

impl InSlot {
    fn new(slot: usize, ring: Ring, sender: SlotSender, vpid: i32) -> InSlot {
        InSlot {
            slot,
            ring,
            head: 0,
            sender,
            vpid,
            broken: false,
            dead: false,
            round_head: 0,
            look: false,
            idle: false,
        }
    }

    fn has_records(&self) -> bool {
        !self.broken && self.ring.ready(self.head).is_some()
    }
}

/// The senders an endpoint knows, dense, the watched ones first: a pass
/// walks `v[..nhot]` only (ready.rs); `pos` finds a slot's entry.
struct Inbound {
    v: Vec<InSlot>,
    /// By slot of our segment: the index in `v` (`NONE`: unknown sender).
    pos: Box<[u16]>,
    nhot: usize,
}

impl Inbound {
    const NONE: u16 = u16::MAX;

    fn new() -> Inbound {
        Inbound {
            v: Vec::new(),
            pos: vec![Self::NONE; NSLOTS].into_boxed_slice(),
            nhot: 0,
        }
    }

    fn find(&self, slot: usize) -> Option<usize> {
        match self.pos.get(slot) {
            Some(&i) if i != Self::NONE => Some(i as usize),
            _ => None,
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.v.swap(a, b);
        self.pos[self.v[a].slot] = a as u16;
        self.pos[self.v[b].slot] = b as u16;
    }

    /// A new sender, not watched yet; its index.
    fn adopt(&mut self, s: InSlot) -> usize {
        let i = self.v.len();
        self.pos[s.slot] = i as u16;
        self.v.push(s);
        i
    }

    /// Moves entry `i` among the watched ones (marked to be looked at);
    /// whether it was not watched before. Its new index is `pos[slot]`.
    fn heat(&mut self, i: usize) -> bool {
        self.v[i].look = true;
        if i < self.nhot {
            return false;
        }
        self.swap(i, self.nhot);
        self.nhot += 1;
        true
    }

    /// Moves watched entry `i` out of the watched ones.
    fn cool(&mut self, i: usize) {
        debug_assert!(i < self.nhot);
        self.nhot -= 1;
        self.swap(i, self.nhot);
    }

    /// Forgets entry `i` (its slot is freed).
    fn remove(&mut self, mut i: usize) {
        if i < self.nhot {
            self.cool(i);
            i = self.nhot;
        }
        let last = self.v.len() - 1;
        if i != last {
            self.swap(i, last);
        }
        if let Some(s) = self.v.pop() {
            self.pos[s.slot] = Self::NONE;
        }
    }

    fn iter(&self) -> core::slice::Iter<'_, InSlot> {
        self.v.iter()
    }
}

/// A sender's claim as the kernel's credentials confirmed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verified {
    gen: u64,
    pid: i32,
}

struct PeerOut {
    seg: Segment,
    /// The owner's doorbell, rung when it sleeps.
    bell: DoorbellAddr,
    slot: usize,
    ring: Ring,
    tail: u64,
    /// Free cells known without reading the consumer's `head` (which lives
    /// on a cache line the consumer writes): re-read only when short.
    free: u64,
    failed: bool,
    /// Its owner was found gone (closed, or its process dead): the next
    /// sweep unmaps its segment (`ShmPort::bury`).
    gone: bool,
    last_check: Instant,
    /// Sends refused for want of room (`owner_gone`'s clock counter).
    full_retries: u32,
    /// Control records waiting for ring space: answers to the peer's
    /// records, bounded by [`Budget::records`] (at it the peer's ring to
    /// us is not consumed until the backlog drains).
    backlog: VecDeque<WireHdr>,
    /// Since when the backlog is at its bound (`ShmPort::flush_backlogs`):
    /// past [`Budget::timeout`] there, the peer is cut off.
    full_since: Option<Instant>,
    /// Cells from a lap's first one whose pages are allocated
    /// (`Segment::reserve_slot` at the claim: `ring::RESERVE_FIRST`, the
    /// ring's first page; more in steps by `claim_past_reserved`; all:
    /// `u64::MAX`). No record, nor the cell after it, is placed past them.
    reserved: u64,
    /// /dev/shm had no room for more of the ring: records stay below
    /// `reserved` for good, going back to the lap's first cell.
    confined: bool,
    /// /dev/shm had no room for `ring::RESERVE_WORKING` cells: the peer
    /// failed for that (-FI_ENOMEM, not a corrupt ring).
    no_room: bool,
    /// A failed peer's address is looked at again (a new owner there?) no
    /// earlier than this (`revisit`).
    next_look: Option<Instant>,
}

impl PeerOut {
    /// Our newly activated ring at `slot` of the peer's segment `seg`.
    fn new(seg: Segment, bell: DoorbellAddr, slot: usize) -> PeerOut {
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
    fn owner_gone(&mut self) -> bool {
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

pub struct ShmPort {
    /// Before `seg`: its socket file goes before the segment name does, so
    /// a next owner of this address never finds our file in use.
    doorbell: Doorbell,
    seg: Segment,
    token: u64,
    me: SlotSender,
    ring_tx: Ringer,
    /// The senders we know; the watched ones are polled on every pass.
    inbound: Inbound,
    /// Passes left before the next eviction round.
    round: u32,
    /// [`HOT_KEEP`] (tests lower it to see rings go idle with few senders).
    hot_keep: usize,
    /// Eviction rounds left before the next sweep.
    rounds: u32,
    /// Look at every inbound ring on the next pass (a sleeper was announced).
    sweep_due: bool,
    /// Some watched entry is marked to be looked at (`InSlot::look`).
    looking: bool,
    seen_claims: u64,
    peers: Peers,
    limits: Limits,
    /// What a peer's records may make us hold (`FI_RUSTFAB_PEER_BUDGET`).
    budget: Budget,
    events: Vec<PeerEvent>,
    /// The pass's rarely-set conditions (the sleeper, the backlog, the ring
    /// waited on, the full scan due), tested together once per pass.
    rare: rare::Rare,
    /// Per slot of our segment: the claim the kernel's credentials
    /// confirmed (owner-private memory: senders cannot write it).
    verified: Vec<Option<Verified>>,
    last_reclaim: Option<Instant>,
    /// Slots senders announced (or signalled) that we have not taken in
    /// yet: a pass looks at these, not at all NSLOTS slot words (each in its
    /// own page of the segment: a full scan faults in 256 pages, 1 MiB).
    candidates: [u64; NSLOTS / 64],
    /// Some slot was taken in since `claim_seq` last moved.
    adopted: bool,
    last_scan: Option<Instant>,
    /// Full scans made (tests: first contact must not need one).
    #[cfg(test)]
    scans: u32,
}

impl ShmPort {
    /// Creates the endpoint's segment (named by `token`) and doorbell.
    pub fn new(token: u64, limits: Limits) -> Result<ShmPort> {
        ShmPort::with_ring_cells(token, limits, segment::NCELLS)
    }

    /// [`ShmPort::new`] with rings of `ncells` cells in our segment
    /// (`FI_RUSTFAB_SHM_RING_CELLS`; docs/shm.md "Ring size").
    pub fn with_ring_cells(token: u64, limits: Limits, ncells: usize) -> Result<ShmPort> {
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
    pub fn with_budget(mut self, per_peer: usize, timeout: Duration) -> ShmPort {
        self.budget = Budget {
            records: (per_peer / core::mem::size_of::<WireHdr>()).max(1),
            timeout,
        };
        self
    }

    pub fn addr(&self) -> Addr {
        Addr::Shm(self.token)
    }

    /// The descriptor that turns readable when a peer rings our doorbell.
    pub fn wait_fd(&self) -> RawFd {
        self.doorbell.fd()
    }

    /// Progress engine's sleeper count changed.
    pub fn set_sleepers(&mut self, n: usize) {
        self.seg.set_sleepers(n as u64);
        if n > 0 {
            self.rare.set(rare::SLEEPING, true);
            self.sweep_due = true;
            self.round = 1;
        }
    }

    /// Whether records are waiting (a waiter must not sleep).
    pub fn has_pending(&self) -> bool {
        self.seg.claim_seq() != self.seen_claims || self.seg.any_ready() || self.inbound.iter().any(InSlot::has_records)
    }

    fn drain_doorbell(&mut self) {
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
    fn take_hellos(&mut self) {
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
    fn take_refusal(&mut self, pid: i32, token: u64) {
        let owner = match self.peers.get_mut(token) {
            Some(p) => Some((p.seg.owner_pid, p.seg.owner_start)),
            None => Segment::open(token).ok().map(|s| (s.owner_pid, s.owner_start)),
        };
        let Some((opid, ostart)) = owner else { return };
        if opid == pid && sys::proc_start_time(pid) == Some(ostart) {
            self.refuse(token);
        }
    }

    /// Marks inbound slots whose senders are proven dead (freed once
    /// drained) and frees claimed slots whose claimer no longer exists.
    fn reclaim_dead(&mut self) {
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
                // Freed by the next pass once drained.
                let slot = s.slot;
                self.make_hot(slot);
            }
        }
        for slot in 0..NSLOTS {
            let w = self.seg.slot_word_now(slot);
            if w.state == SLOT_CLAIMED && !sys::pid_exists(w.pid) && self.seg.reclaim_claimed(slot, w) {
                self.verified[slot] = None;
            }
        }
    }

    /// Failures noticed since the last call.
    pub fn take_events(&mut self) -> Vec<PeerEvent> {
        std::mem::take(&mut self.events)
    }

    fn peer(&mut self, token: u64) -> Result<&mut PeerOut> {
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
    pub fn check_peer(&mut self, token: u64) -> bool {
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
    pub fn open_peer_owner(&mut self, token: u64) -> Result<i32> {
        if token == self.token {
            return Err(Error::INVAL);
        }
        Ok(self.peer(token)?.seg.owner_pid)
    }

    /// The shm token of this port's segment.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Whether an inbound sender is alive (for transfers we wait on);
    /// `src_pid` is the pid its records reported (0: unverified).
    pub fn sender_alive(&self, src_pid: i32, token: u64) -> bool {
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
    fn verified_sender(&self, pid: i32) -> bool {
        pid > 0 && self.inbound.iter().any(|s| s.vpid == pid && !s.broken)
    }

    /// Writes one record into `peer`'s ring. `Err(AGAIN)`: no room now.
    pub fn send_record(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>) -> Result<()> {
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
    pub fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
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
    fn unreachable(&mut self, token: u64) {
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
    pub fn room(&mut self, peer: &Addr) -> usize {
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

    /// Consumes inbound records in per-peer FIFO order: the rings polled
    /// on every pass (those that carried records lately) and those on the
    /// ready list (ready.rs). Returns whether a peer moved since the last
    /// pass: a record (or rewind marker) was consumed, or the consumer of
    /// the ring we wait on for room ([`rare::Rare::waiting`]) advanced its
    /// head — a peer that moves runs on another processor (`Port::poll`).
    pub fn poll_records(&mut self, f: &mut dyn FnMut(InRecord<'_>) -> Disposition) -> bool {
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
    fn rare_pass(&mut self) -> bool {
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

    /// Whether the consumer of the ring we wait on ([`rare::Rare::waiting`])
    /// moved its head since the last look (`seen`). Stops watching once it
    /// has taken everything we wrote (nothing left to wait on) or failed.
    #[inline(never)]
    fn outbound_moved(&mut self, i: usize, seen: u64) -> bool {
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
    fn flush_backlogs(&mut self) {
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
    fn cut_off(&mut self, token: u64) {
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

    /// Watches `slot`'s ring (known sender) and marks it to be looked at.
    fn make_hot(&mut self, slot: usize) {
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
    fn free_closed(&mut self) {
        self.looking = false;
        let mut i = 0;
        while i < self.inbound.nhot {
            let s = &mut self.inbound.v[i];
            if s.look {
                s.look = false;
                let closed = s.dead || self.seg.slot_state(s.slot) == SLOT_CLOSED;
                if closed && (s.broken || s.ring.ready(s.head).is_none()) {
                    let (slot, token, broken) = (s.slot, s.sender.token, s.broken);
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
    fn drop_garbage_slot(&mut self, slot: usize, word: u64) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: slot {slot} of our segment has a state word no sender writes ({word:#018x}: its control line was overwritten): the slot is reset and freed"
        );
        self.seg.free_slot(slot);
        self.verified[slot] = None;
    }

    /// The sender `token` gave its ring to us up (`fail_out`: /dev/shm had
    /// no room for it): what we wait on from it (an ACK, a CTS, read data)
    /// never comes, so it fails as a peer, both ways: our ring to it ends
    /// as at a close, or is never opened.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, token: u64) {
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
    fn tomb_failed(&mut self, token: u64) -> bool {
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
    fn bury(&mut self, i: usize) {
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
    fn bury_if_gone(&mut self, token: u64) {
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
    fn sweep_peers(&mut self) {
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

    /// Watches the slots on the ready list; a slot we do not know yet (its
    /// sender's first records can be seen before its claim) is looked for.
    #[inline(never)]
    fn take_ready(&mut self) {
        if self.collect_ready() {
            self.discover_slots();
        }
    }

    /// Takes the ready list: known slots are watched, unknown ones become
    /// candidates (whether there were any).
    fn collect_ready(&mut self) -> bool {
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
    fn eviction_round(&mut self) {
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
    fn sweep(&mut self) {
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
    fn discover_slots(&mut self) {
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
    fn scan_if_due(&mut self) {
        if self.last_scan.is_none_or(|t| t.elapsed() >= LIVENESS_PERIOD) {
            self.rare.set(rare::SCAN_DUE, false);
            self.last_scan = Some(Instant::now());
            self.scan_slots();
        }
    }

    /// Takes `slot` in if a sender is (or was: records a closed slot holds
    /// must still be delivered) active in it and we do not know it yet.
    fn adopt_slot(&mut self, slot: usize) {
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
        self.inbound.adopt(InSlot::new(slot, ring, sender, vpid));
        self.make_hot(slot);
        self.adopted = true;
    }

    /// Looks at every slot word: senders nobody announced, and (with few
    /// free slots) the slots of dead senders.
    #[cold]
    #[inline(never)]
    fn scan_slots(&mut self) {
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

    /// Orderly close: tell peers, release our slots in their segments.
    pub fn close(&mut self) {
        for p in self.peers.values_mut() {
            if !p.failed {
                leave(&self.ring_tx, p);
            }
        }
        self.peers.clear();
        self.rare.set_waiting(None);
    }
}

impl Drop for ShmPort {
    fn drop(&mut self) {
        self.close();
    }
}

impl PayloadIn for InRecord<'_> {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        // SAFETY: forwarded contract.
        unsafe { InRecord::copy_to_iov(self, off, len, dst, dst_off) }
    }
    fn to_vec(&self) -> Vec<u8> {
        self.payload_vec()
    }
}

/// The outbound side towards `token` (opened, with a slot claimed and
/// announced, on first use): one hash lookup for a known peer.
/// The peers we send to, by token. A failed peer keeps its entry, marked,
/// while its owner lives; one whose owner is gone (its segment closed, or
/// its process dead) is taken out (`ShmPort::bury`: its mapping released,
/// the index of the last entry moves into its place) and leaves a
/// [`Tomb`] in `gone`. The last peer used is remembered: a run of sends to
/// one peer (a ping-pong, a rank's exchange with a neighbour) costs no hash
/// lookup.
#[derive(Default)]
struct Peers {
    v: Vec<PeerOut>,
    at: FastMap<u64, usize>,
    /// (token, index in `v`) of the last lookup that found its peer.
    last: Option<(u64, usize)>,
    /// Peers whose owner is gone, their segments unmapped: at most
    /// [`GONE_MAX`].
    gone: FastMap<u64, Tomb>,
    /// The entry of `v` whose owner's process the next look is at.
    look_next: usize,
    /// Sweeps since a process was last looked at.
    proc_sweeps: u32,
    /// Peers that gave up their rings to us before we had one to them
    /// (`ShmPort::refuse`), or to whom we could not open one to reply
    /// (`ShmPort::unreachable`): never opened.
    refused: FastSet<u64>,
    /// Tests: the segments `open_peer` opens have no room for a claim.
    #[cfg(test)]
    no_room_for_claims: bool,
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
pub struct Budget {
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

/// What is kept of a peer whose owner is gone once its segment is unmapped
/// (a tmpfs file keeps its pages while anyone maps it, even unlinked): the
/// token (the key) and these two words. A later send to the token reports
/// the failure first, if it was not yet, then looks for a new owner there
/// as `revisit` does.
#[derive(Clone, Copy, Debug)]
struct Tomb {
    /// `PeerEvent::Failed` was reported for the incarnation that is gone.
    reported: bool,
    /// The address is looked at again (a new owner?) no earlier than this.
    next_look: Option<Instant>,
}

/// Tombs kept at most (a few words each): past it, an arbitrary one goes,
/// its failure reported if it was not yet. A token whose tomb went is a
/// new address to a later send (a random token is never reused; a named
/// one's failure was reported).
const GONE_MAX: usize = 4096;

impl Peers {
    /// Whether the answers queued towards `token` reached `bound`
    /// ([`Budget::records`]; only asked while some backlog exists:
    /// `rare::BACKLOGGED`).
    #[cold]
    fn backlog_full(&self, token: u64, bound: usize) -> bool {
        self.at
            .get(&token)
            .and_then(|&i| self.v.get(i))
            .is_some_and(|p| p.backlog.len() >= bound)
    }

    #[inline]
    fn index(&mut self, token: u64) -> Option<usize> {
        if let Some((t, i)) = self.last {
            if t == token {
                return Some(i);
            }
        }
        let i = *self.at.get(&token)?;
        self.last = Some((token, i));
        Some(i)
    }

    fn get_mut(&mut self, token: u64) -> Option<&mut PeerOut> {
        let i = self.index(token)?;
        self.v.get_mut(i)
    }

    fn insert(&mut self, token: u64, p: PeerOut) -> &mut PeerOut {
        let i = self.v.len();
        self.v.push(p);
        self.at.insert(token, i);
        self.last = Some((token, i));
        &mut self.v[i]
    }

    fn values_mut(&mut self) -> core::slice::IterMut<'_, PeerOut> {
        self.v.iter_mut()
    }

    /// Takes the entry at `i` out, leaving a tomb for its token; the last
    /// entry moves to `i`. Returns the entry (its segment unmapped when it
    /// is dropped) and the index the moved entry had, if one moved.
    fn remove(&mut self, i: usize, tomb: Tomb, events: &mut Vec<PeerEvent>) -> (PeerOut, Option<usize>) {
        let last = self.v.len() - 1;
        let p = self.v.swap_remove(i);
        let token = p.seg.token();
        self.at.remove(&token);
        let moved = (i != last).then_some(last);
        if let Some(q) = self.v.get(i).filter(|_| moved.is_some()) {
            self.at.insert(q.seg.token(), i);
        }
        self.last = None;
        if self.gone.len() >= GONE_MAX {
            if let Some((&t, &old)) = self.gone.iter().next() {
                self.gone.remove(&t);
                if !old.reported {
                    events.push(PeerEvent::Failed(Addr::Shm(t)));
                }
            }
        }
        self.gone.insert(token, tomb);
        (p, moved)
    }

    fn clear(&mut self) {
        self.last = None;
        self.at.clear();
        self.v.clear();
        self.gone.clear();
    }
}

// Always inlined: with its cold paths (`open_peer`, `revisit`) it grew
// past what the compiler inlines on its own, and the call cost a small
// send more than the check it added.
#[inline(always)]
fn peer_out<'a>(
    peers: &'a mut Peers,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    let Some(i) = peers.index(token) else {
        return open_peer(peers, ring_tx, me, my_token, token, events);
    };
    // The segment's `closed` word (a line nobody writes while the owner
    // lives): its owner closed the endpoint, or a process that found the
    // owner dead marked it before removing it — the address may have a
    // new owner already, whom this send must reach, not the dead ring.
    if peers.v[i].failed || peers.v[i].seg.closed() {
        return revisit(peers, i, ring_tx, me, my_token, token, events);
    }
    Ok(&mut peers.v[i])
}

/// A send to a peer whose ring failed or whose segment was closed. The
/// failure is reported first (`PeerEvent::Failed`), and until the endpoint
/// has taken it (ending what waited on the old incarnation: an ACK, a CTS,
/// read data), nothing more goes to the address (`-FI_EAGAIN`: the engine
/// makes a pass, which takes it, and tries again). Then, if the segment's
/// owner is gone (closed, or its process dead) and a live one holds the
/// address now — a restarted peer, an endpoint reopened at it — our ring
/// moves there: a new segment, slot and ring, nothing of the old one's
/// backlog. Otherwise (nobody there yet, or an owner still alive that we
/// failed for cause: a corrupt ring, no room) `-FI_ECONNRESET`, and the
/// address is looked at again at most every `LIVENESS_PERIOD`.
#[cold]
#[inline(never)]
fn revisit<'a>(
    peers: &'a mut Peers,
    i: usize,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    let p = &mut peers.v[i];
    if !p.failed {
        p.failed = true;
        p.backlog.clear();
        events.push(PeerEvent::Failed(Addr::Shm(token)));
    }
    if events.iter().any(|e| *e.peer() == Addr::Shm(token)) {
        return Err(Error::AGAIN);
    }
    let now = Instant::now();
    if p.next_look.is_some_and(|t| now < t) {
        return Err(Error::CONNRESET);
    }
    p.next_look = Some(now + LIVENESS_PERIOD);
    if !p.seg.closed() && p.seg.owner_alive() {
        return Err(Error::CONNRESET);
    }
    p.gone = true;
    #[cfg(test)]
    let no_room = peers.no_room_for_claims;
    #[cfg(not(test))]
    let no_room = false;
    let Ok(fresh) = connect(ring_tx, me, my_token, token, no_room) else {
        return Err(Error::CONNRESET);
    };
    crate::base::log::log_info!(
        crate::abi::FI_LOG_EP_DATA,
        "shm: peer {token:016x} has a new owner (pid {}, the last one is gone): sending there",
        fresh.seg.owner_pid
    );
    let old = core::mem::replace(&mut peers.v[i], fresh);
    // Our slot in the old segment (the owner is gone: nobody frees it).
    old.seg.close_slot(old.slot);
    Ok(&mut peers.v[i])
}

/// First contact with a peer: open its segment, claim a slot, announce.
/// A departed peer's token (a [`Tomb`]) is `revisit`'s case: its failure
/// reported first, then a new owner at the address reached, if one is
/// there (looked for at most every `LIVENESS_PERIOD`).
#[cold]
#[inline(never)]
fn open_peer<'a>(
    peers: &'a mut Peers,
    ring_tx: &Ringer,
    me: SlotSender,
    my_token: u64,
    token: u64,
    events: &mut Vec<PeerEvent>,
) -> Result<&'a mut PeerOut> {
    if peers.refused.contains(&token) {
        return Err(Error::CONNRESET);
    }
    #[cfg(test)]
    let no_room = peers.no_room_for_claims;
    #[cfg(not(test))]
    let no_room = false;
    if let Some(t) = peers.gone.get_mut(&token) {
        if !t.reported {
            t.reported = true;
            events.push(PeerEvent::Failed(Addr::Shm(token)));
        }
        if events.iter().any(|e| *e.peer() == Addr::Shm(token)) {
            return Err(Error::AGAIN);
        }
        let now = Instant::now();
        if t.next_look.is_some_and(|at| now < at) {
            return Err(Error::CONNRESET);
        }
        t.next_look = Some(now + LIVENESS_PERIOD);
        // The owner we knew is gone: a live one there now is a new one.
        let Ok(fresh) = connect(ring_tx, me, my_token, token, no_room) else {
            return Err(Error::CONNRESET);
        };
        crate::base::log::log_info!(
            crate::abi::FI_LOG_EP_DATA,
            "shm: peer {token:016x} has a new owner (pid {}, the last one is gone): sending there",
            fresh.seg.owner_pid
        );
        peers.gone.remove(&token);
        return Ok(peers.insert(token, fresh));
    }
    let p = connect(ring_tx, me, my_token, token, no_room)?;
    Ok(peers.insert(token, p))
}

/// Our ring in the segment of the endpoint `token`: the segment opened
/// (checked, its owner alive), a slot claimed (its ring reset), announced
/// and activated. `no_room` (tests): the segment has no room for a claim.
fn connect(ring_tx: &Ringer, me: SlotSender, my_token: u64, token: u64, no_room: bool) -> Result<PeerOut> {
    let seg = Segment::open(token)?;
    if !seg.owner_alive() {
        return Err(Error::ADDRNOTAVAIL);
    }
    let bell = DoorbellAddr::new(&segment::doorbell_path(token))?;
    #[cfg(test)]
    if no_room {
        seg.no_room_from.store(0, core::sync::atomic::Ordering::Relaxed);
    }
    #[cfg(not(test))]
    let _ = no_room;
    let claim = match seg.claim_slot(me) {
        Ok(c) => c,
        Err(e) => {
            // No free slot: the owner was asked to reclaim the slots of
            // dead senders; wake it if it sleeps.
            ring_doorbell(ring_tx, &seg, &bell);
            return Err(e);
        }
    };
    announce(ring_tx, &seg, &bell, segment::hello_bytes(token, claim, my_token));
    seg.activate(claim, me);
    Ok(PeerOut::new(seg, bell, claim.slot))
}

/// A closed slot whose `abort` word holds a code no sender writes (only
/// `FI_ENOMEM` means a sender gave its ring up): a corrupt control line,
/// logged as such; the slot is freed as after an orderly close and the
/// sender is not failed for it.
#[cold]
#[inline(never)]
fn odd_abort(slot: usize, token: u64, code: u32) {
    crate::base::log::log_warn!(
        crate::abi::FI_LOG_EP_DATA,
        "shm: slot {slot} (sender {token:016x}) closed with an abort word no sender writes ({code:#x}: its control line was overwritten): the slot is freed, the sender is not failed for it"
    );
}

/// Hands one ring record to the endpoint core.
fn dispatch(d: &mut dyn Delivery, rec: InRecord<'_>) -> Disposition {
    if !proto::op::placed(rec.hdr.op) {
        return d.control(&rec.src, rec.src_pid, &rec.hdr, &rec);
    }
    d.deliver(&rec.src, rec.src_pid, &rec.hdr, &rec)
}

impl Port for ShmPort {
    fn addr(&self) -> Addr {
        ShmPort::addr(self)
    }
    fn wait_fd(&self) -> RawFd {
        ShmPort::wait_fd(self)
    }
    fn set_sleepers(&mut self, n: usize) {
        ShmPort::set_sleepers(self, n)
    }
    fn has_pending(&self) -> bool {
        ShmPort::has_pending(self)
    }
    fn eager_limit(&self) -> usize {
        EAGER_MAX
    }
    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, _copy: bool) -> Result<Sent> {
        // A ring record is a copy already: the buffer is reusable at once.
        self.send_record(peer, hdr, payload).map(|_| Sent::Done)
    }
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        true // `send` writes the record into the peer's ring, or refuses
    }
    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        ShmPort::send_ctl(self, peer, hdr)
    }
    fn room(&mut self, peer: &Addr) -> usize {
        ShmPort::room(self, peer)
    }
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        self.poll_records(&mut |rec| dispatch(d, rec))
    }
    fn check_peer(&mut self, peer: &Addr) -> bool {
        match peer {
            Addr::Shm(t) => ShmPort::check_peer(self, *t),
            _ => false,
        }
    }
    fn sender_alive(&self, src_pid: i32, peer: &Addr) -> bool {
        match peer {
            Addr::Shm(t) => ShmPort::sender_alive(self, src_pid, *t),
            _ => false,
        }
    }
    fn take_events(&mut self) -> Vec<PeerEvent> {
        ShmPort::take_events(self)
    }
    fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        // Only from a sender the kernel named (never a pid a record names).
        if !self.verified_sender(src_pid) {
            return Err(Error::CONNRESET);
        }
        pull(src_pid, remote, dst, len)
    }
    fn pull_batch(&self, src_pid: i32, jobs: &[PullJob<'_>]) -> Result<()> {
        if !self.verified_sender(src_pid) {
            return Err(Error::CONNRESET);
        }
        pull_batch(src_pid, jobs)
    }
    fn push(&self, dst_pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        // Only into a sender the kernel named, as `pull`.
        if !self.verified_sender(dst_pid) {
            return Err(Error::CONNRESET);
        }
        push(dst_pid, remote, src, len)
    }
    fn push_batch(&self, dst_pid: i32, jobs: &[PushJob<'_>]) -> Result<()> {
        if !self.verified_sender(dst_pid) {
            return Err(Error::CONNRESET);
        }
        push_batch(dst_pid, jobs)
    }
    fn close(&mut self) {
        ShmPort::close(self)
    }
    fn set_rts_prefix(&mut self, n: usize) {
        self.seg.set_rts_prefix(n.min(EAGER_MAX) as u64);
    }
    fn rts_prefix(&mut self, peer: &Addr) -> usize {
        let Addr::Shm(token) = *peer else { return 0 };
        match self.peer(token) {
            Ok(p) => p.seg.rts_prefix().min(EAGER_MAX as u64) as usize,
            Err(_) => 0,
        }
    }
}

/// Pulls `len` bytes of a sender's buffer (`remote` segments, starting at
/// logical offset `remote_off`) into `dst` at `dst_off`, with
/// `process_vm_readv`. Errors: NOSYS/PERM-like → CMA unavailable
/// (`Err(OPNOTSUPP)`), peer gone → `Err(CONNRESET)`, bad remote
/// addresses → `Err(IO)`.
pub fn pull(pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
    let (local, rem) = cma_ranges(dst, remote, len);
    // SAFETY: the local ranges are the receive's application buffers,
    // writable until it completes (fi_recv contract) and never referenced by
    // Rust code; the remote ones are addresses in the peer process, which
    // only the kernel touches (checked there).
    cma_result(unsafe { cma::read_process(pid, &local, &rem, len) })
}

/// Most ranges one `process_vm_readv` takes on each side (`UIO_MAXIOV`).
const CMA_MAX_RANGES: usize = 1024;

/// The pulls `jobs` from one sender in one `process_vm_readv` (repeated
/// only after partial copies, as [`pull`]): `Ok` when all of every job
/// was copied. More ranges than one call takes: `Err(INVAL)`, nothing
/// copied (the caller pulls one by one).
pub fn pull_batch(pid: i32, jobs: &[PullJob<'_>]) -> Result<()> {
    let (local, rem, len) = batch_ranges(jobs.iter().map(|j| (j.dst, j.remote, j.len)))?;
    // SAFETY: as in `pull`: the local ranges are the receives' application
    // buffers, writable until they complete and never referenced by Rust
    // code; the remote ones are only touched by the kernel in the peer.
    match cma_result(unsafe { cma::read_process(pid, &local, &rem, len) }) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Error::IO),
        Err(e) => Err(e),
    }
}

/// The pushes `jobs` into one receiver in one `process_vm_writev`, as
/// [`pull_batch`]: `Ok` when all of every job was written.
pub fn push_batch(pid: i32, jobs: &[PushJob<'_>]) -> Result<()> {
    let (local, rem, len) = batch_ranges(jobs.iter().map(|j| (j.src, j.remote, j.len)))?;
    // SAFETY: as in `push`: the local ranges are send buffers the core
    // holds until the receiver's ACK, only read here; the remote ones are
    // the receiver's own buffers in its process, which only the kernel
    // touches (checked there).
    match cma_result(unsafe { cma::write_process(pid, &local, &rem, len) }) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Error::IO),
        Err(e) => Err(e),
    }
}

/// The ranges of one batched cross-memory copy: each job's (local
/// buffer, peer's segments, bytes) in turn, and the bytes in all.
/// `Err(INVAL)`: a job's ranges do not cover exactly its bytes on both
/// sides (the single call would pair one job's source with the next
/// one's buffer), or more ranges than one call takes.
fn batch_ranges<'a>(
    jobs: impl Iterator<Item = (&'a IovList, &'a [(u64, u64)], usize)>,
) -> Result<(Vec<IoRange>, Vec<IoRange>, usize)> {
    let cap = jobs.size_hint().0 * 2;
    let mut local: Vec<IoRange> = Vec::with_capacity(cap);
    let mut rem: Vec<IoRange> = Vec::with_capacity(cap);
    let mut len = 0usize;
    for (mine, theirs, n) in jobs {
        let (l, r) = cma_ranges(mine, theirs, n);
        let (ln, rn) = (
            l.iter().map(IoRange::len).sum::<usize>(),
            r.iter().map(IoRange::len).sum::<usize>(),
        );
        if ln != n || rn != n {
            return Err(Error::INVAL);
        }
        local.extend_from_slice(&l);
        rem.extend_from_slice(&r);
        len += n;
    }
    if local.len() > CMA_MAX_RANGES || rem.len() > CMA_MAX_RANGES {
        return Err(Error::INVAL);
    }
    Ok((local, rem, len))
}

/// Writes `len` bytes of `src` into a peer's buffers (`remote` segments)
/// with `process_vm_writev`: an RMA read served by its target. Errors as
/// [`pull`].
pub fn push(pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
    let (local, rem) = cma_ranges(src, remote, len);
    // SAFETY: the local ranges are registered memory the core checked
    // (key, range, access) for this read, only read here; the remote ones
    // are the reader's own buffers in its process, which only the kernel
    // touches (checked there).
    cma_result(unsafe { cma::write_process(pid, &local, &rem, len) })
}

/// The first `len` bytes of `local` and of the peer's `remote` segments
/// (address, length) as the ranges of one cross-memory copy.
fn cma_ranges(local: &IovList, remote: &[(u64, u64)], len: usize) -> (Vec<IoRange>, Vec<IoRange>) {
    let mut l: Vec<IoRange> = Vec::with_capacity(8);
    local.for_range(0, len, |p, n, _| l.push(IoRange::new(p, n)));
    let mut rem: Vec<IoRange> = Vec::with_capacity(remote.len());
    let mut left = len;
    for &(a, n) in remote {
        if left == 0 {
            break;
        }
        let n = (n as usize).min(left);
        rem.push(IoRange::new(a as usize, n));
        left -= n;
    }
    (l, rem)
}

/// A cross-memory copy's failure as the engine sees it.
fn cma_result(r: core::result::Result<usize, CmaError>) -> Result<usize> {
    r.map_err(|e| match e {
        CmaError::Gone => Error::CONNRESET,
        CmaError::Fault => Error::IO,
        CmaError::Refused => Error::OPNOTSUPP,
    })
}

/// Sends a sender's "who I am" to the owner's doorbell, retrying briefly
/// while the owner's queue is full; without it the owner takes no pid from
/// us (our large messages are streamed, not read with CMA).
fn announce(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr, hello: [u8; segment::HELLO_LEN]) {
    tell_owner(
        tx,
        seg,
        bell,
        &hello,
        "claim announcement (the owner will not use CMA with us)",
    );
}

/// Sends `msg` to `seg`'s owner's doorbell, retrying a full one for at most
/// HELLO_PATIENCE (the owner drains it when `claim_seq` moves).
fn tell_owner(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr, msg: &[u8; segment::HELLO_LEN], what: &str) {
    let t0 = Instant::now();
    while let Err(e) = tx.send(bell, msg) {
        // A busy owner drains its doorbell when claim_seq moves.
        seg.nudge();
        if e != Error::AGAIN || t0.elapsed() >= HELLO_PATIENCE {
            crate::base::log::log_debug!(crate::abi::FI_LOG_EP_DATA, "shm: {what} not sent ({e})");
            return;
        }
        // Short: the whole process (every endpoint it progresses) waits.
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// After publishing records towards `p`: signal its ring if its owner does
/// not watch it, ring its doorbell if the owner may sleep (one barrier for
/// both: sync.rs, ready.rs).
#[inline]
fn after_publish(tx: &Ringer, p: &PeerOut) {
    let (wake, signal) = p.seg.after_publish(p.slot);
    if signal {
        p.seg.signal(p.slot);
    }
    if wake {
        // As in `ring_doorbell`: a failure needs no handling.
        tx.ring(&p.bell);
    }
}

fn ring_doorbell(tx: &Ringer, seg: &Segment, bell: &DoorbellAddr) {
    // Dekker with the sleeper (sync.rs, checked by its loom models): we
    // published a record's first word, then make our barrier and read
    // `sleepers`; it stored `sleepers`, then made its barrier (membarrier or
    // a fence) and re-reads its rings' head cells.
    // One sees the other.
    if !seg.must_wake() {
        return;
    }
    // Failure (full queue, no listener) needs no handling: a full queue
    // already means "readable", and a gone owner is noticed by liveness.
    tx.ring(bell);
}

/// Where a claimed record goes: the cell index `at`, and `rewound`, the
/// producer's tail before it went back to the ring's first cell (where the
/// rewind marker goes once the record is published, ring.rs).
#[derive(Clone, Copy)]
struct Spot {
    at: u64,
    rewound: Option<u64>,
}

/// Claims `cells` cells of `p`'s ring for a record (`eager`: an EAGER
/// record): Ok(None) no room, Err: corrupt. A record of `ring::REWIND_MIN`
/// cells or more goes back to the ring's first cell when the consumer has
/// left room there (`Ring::rewind`). In a ring larger than
/// `ring::REWIND_RING_MAX`: a small record once its tail reached
/// `ring::SMALL_REWIND_AT`, an eager one as `ring::EMPTY_REWIND_MAX` says,
/// a streamed chunk never. A record that would reach past the ring's
/// allocated pages (`PeerOut::reserved`) goes `claim_past_reserved`.
#[inline]
fn claim(p: &mut PeerOut, cells: u64, eager: bool) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let rewind = if p.ring.ncells() <= ring::REWIND_RING_MAX {
        cells >= ring::REWIND_MIN
    } else if cells >= ring::REWIND_MIN {
        eager
    } else {
        p.ring.lap_offset(p.tail).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN
    };
    if rewind {
        if let Some(spot) = claim_rewound(p, cells)? {
            return Ok(Some(spot));
        }
    }
    if p.free < cells {
        p.free = p.ring.free_cells(p.tail)?;
        if p.free < cells {
            return Ok(None);
        }
    }
    // The record and the cell after it (which `publish_at` may write)
    // within the allocated pages.
    if p.ring.lap_offset(p.tail) + cells >= p.reserved {
        return claim_past_reserved(p, cells);
    }
    p.free -= cells;
    Ok(Some(Spot {
        at: p.tail,
        rewound: None,
    }))
}

/// A record that would reach past the ring's allocated pages
/// (`PeerOut::reserved`): the next ones are allocated now, in one system
/// call (`Segment::populate_cells`), in steps — up to
/// `ring::RESERVE_WORKING` cells, then `ring::SMALL_LAP`, then the whole
/// ring, the steps past the first only while /dev/shm keeps
/// `segment::STEP_HEADROOM` free after them (one peer's large ring never
/// takes the room another needs to work) — so that a first contact
/// allocates one page, a sender of small
/// records at most the small lap, and a large ring's first lap takes no
/// page fault per page (224 of them were a third of a 200-message 64 KiB
/// ping-pong); and so that a full /dev/shm is found here, not by a
/// SIGBUS at a store. Without room for `RESERVE_WORKING` cells the peer
/// fails (`no_room`: -FI_ENOMEM). Without room past them the
/// sender stays within the cells it has for good (`confined`): a record
/// that does not fit before them goes back to the lap's first cell once
/// the consumer has left room there, or waits (Ok(None)). Where the
/// kernel cannot populate (before Linux 5.14), the pages fault in as they
/// are written, as before. `p.free >= cells`.
#[cold]
#[inline(never)]
fn claim_past_reserved(p: &mut PeerOut, cells: u64) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let ncells = p.ring.ncells();
    while !p.confined {
        let want = if p.reserved < ring::RESERVE_WORKING {
            ring::RESERVE_WORKING
        } else if p.reserved < ring::SMALL_LAP {
            ring::SMALL_LAP
        } else {
            ncells
        }
        .min(ncells);
        // Beyond what the sender needs to work, not into the room others
        // may need for theirs.
        let keep = if want > ring::RESERVE_WORKING {
            segment::STEP_HEADROOM
        } else {
            0
        };
        match p.seg.populate_cells(p.slot, p.reserved, want, keep) {
            Err(Error::NOMEM) => {
                p.seg.unpopulate_cells(p.slot, p.reserved, want);
                if p.reserved < ring::RESERVE_WORKING {
                    crate::base::log::log_warn!(
                        crate::abi::FI_LOG_EP_DATA,
                        "shm: /dev/shm has no room for {want} cells of a peer's ring; the peer is unreachable"
                    );
                    p.no_room = true;
                    return Err(ring::Corrupt);
                }
                p.confined = true;
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_DATA,
                    "shm: /dev/shm has no room for the rest of a peer's ring; its records stay in the first {} cells",
                    p.reserved
                );
            }
            _ => {
                p.reserved = if want >= ncells { u64::MAX } else { want };
                if p.ring.lap_offset(p.tail) + cells < p.reserved {
                    p.free -= cells;
                    return Ok(Some(Spot {
                        at: p.tail,
                        rewound: None,
                    }));
                }
            }
        }
    }
    // Records are far smaller than the cells the sender has (at most an
    // eager record or chunk and its header: 257 cells, against 1024), so
    // once the consumer has taken everything one fits after the lap's
    // first cell and before the tail, where the marker goes.
    debug_assert!(cells * 2 < p.reserved);
    rewound_spot(p, cells, true)
}

/// `claim` of a large record at the next lap's first cell, if it may go
/// there (`Ring::rewind`). Out of line: the small records' path stays as
/// short as before (bench-insns).
#[inline(never)]
fn claim_rewound(p: &mut PeerOut, cells: u64) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let when_empty = cells <= ring::EMPTY_REWIND_MAX || p.ring.ncells() <= ring::REWIND_RING_MAX;
    rewound_spot(p, cells, when_empty)
}

/// The spot at the next lap's first cell for a record of `cells` cells,
/// if `Ring::rewind` lets it go there.
#[inline]
fn rewound_spot(p: &mut PeerOut, cells: u64, when_empty: bool) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let Some((lap, free)) = p.ring.rewind(p.tail, cells, when_empty)? else {
        return Ok(None);
    };
    p.free = free - cells;
    Ok(Some(Spot {
        at: lap,
        rewound: Some(p.tail),
    }))
}

/// After the record at `spot` is published: the rewind marker at the old
/// tail, if the record went back to the ring's first cell; the new tail.
#[inline(always)]
fn published(p: &mut PeerOut, spot: Spot, cells: u64) {
    if let Some(old) = spot.rewound {
        // SAFETY: we are the producer, `old` our tail before the rewind
        // (its first word made not to read as published with the record
        // before it), and the record at the lap's first cell is published.
        unsafe { p.ring.publish_rewind(old) };
    }
    p.tail = spot.at.wrapping_add(cells);
}

// The rewind marker reads as published (the magic) but never as a record:
// its version and op bytes are 0, which no record has; no lap tag.
const _: () = assert!(
    ring::REWIND as u16 == proto::MAGIC
        && (ring::REWIND >> 16) as u8 != proto::VERSION
        && (ring::REWIND >> 24) as u8 == 0
        && ring::REWIND & sync::LAP_TAG == 0
);
// No flag lies in the lap tag's bits (the header's flag bits 16..32).
const _: () = assert!((proto::flag::ALL as u64) << 32 & sync::LAP_TAG == 0);

/// A header's first word (the magic, version, op and flags), as the
/// producer gives it to `Ring::publish_at`.
#[inline(always)]
fn first_word(cell: &[u8; ring::CELL]) -> u64 {
    u64::from_le_bytes([cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7]])
}

/// Ok(true) written, Ok(false) no room, Err: ring corrupt.
fn write_record(p: &mut PeerOut, hdr: &WireHdr, payload: &Payload<'_>) -> core::result::Result<bool, ring::Corrupt> {
    if hdr.op == proto::op::EAGER {
        return write_eager(p, hdr, payload);
    }
    let n = payload.len();
    let cells = cells_for(HDR_LEN + n);
    let Some(spot) = claim(p, cells, false)? else {
        return Ok(false);
    };
    let at = spot.at;
    let mut h = *hdr;
    h.payload = n as u32;
    let hb = h.to_bytes();
    let first = first_word(&hb);
    // SAFETY: `cells` cells from `tail` and the one after them are free
    // and ours (producer); the record's first word goes last (publication).
    unsafe {
        if let Some(rec) = p.ring.linear(at, cells) {
            // The record does not wrap (nearly always): the header's last
            // 56 bytes with a fixed-size copy, each payload chunk with one.
            // `rec .. rec + cells * CELL` is ours; the chunks add up to
            // `n`, and HDR_LEN + n <= cells * CELL.
            core::ptr::copy_nonoverlapping(hb.as_ptr().add(8), rec.add(8), HDR_LEN - 8);
            let mut at = HDR_LEN;
            payload.for_each(|chunk| {
                core::ptr::copy_nonoverlapping(chunk.as_ptr(), rec.add(at), chunk.len());
                at += chunk.len();
            });
        } else {
            p.ring.write_at(at, 8, &hb[8..]);
            let mut off = HDR_LEN;
            payload.for_each(|chunk| {
                p.ring.write_at(at, off, chunk);
                off += chunk.len();
            });
        }
        p.ring.publish_at(at, cells, first);
    }
    published(p, spot, cells);
    Ok(true)
}

/// Header words 1.. of a compact EAGER record at `words` (its first cell):
/// the payload length, then the fields `flags` calls for, in order (`off`:
/// `proto::compact_len(flags)`). Word 0 goes last (publication).
///
/// # Safety
/// `words` is the first cell of a record the caller (the producer) owns.
#[inline(always)]
unsafe fn write_compact_fields(words: *mut u64, hdr: &WireHdr, flags: u32, off: usize, n: usize) {
    // SAFETY: words 1..5 lie inside the first cell (64 bytes), ours.
    unsafe {
        words.add(1).write(n as u64);
        if off > proto::COMPACT_MIN {
            let mut k = 2;
            if flags & proto::flag::TAGGED != 0 {
                words.add(k).write(hdr.tag);
                k += 1;
            }
            if flags & proto::flag::REMOTE_CQ_DATA != 0 {
                words.add(k).write(hdr.data);
                k += 1;
            }
            if k * 8 < off {
                words.add(k).write(hdr.msg_id);
            }
        }
    }
}

/// The payload of a record as one contiguous source, when it is one: a
/// byte slice, or an iov of one segment read from its start (every
/// message of one buffer). None: walk it with `Payload::for_each`.
#[inline(always)]
fn contiguous(payload: &Payload<'_>) -> Option<*const u8> {
    match *payload {
        Payload::Bytes(b) => Some(b.as_ptr()),
        Payload::Iov(iov, 0, len) => match iov.segments() {
            [(ptr, seg)] if *seg >= len => Some(*ptr as *const u8),
            _ => None,
        },
        _ => None,
    }
}

/// An EAGER record that fits one cell with a contiguous payload: its
/// compact flags, header length, payload source and length.
#[inline(always)]
fn one_cell_eager(hdr: &WireHdr, payload: &Payload<'_>) -> Option<(u32, usize, *const u8, usize)> {
    if hdr.op != proto::op::EAGER {
        return None;
    }
    let n = payload.len();
    // The shortest header first: a larger payload leaves at once.
    if n > ring::CELL - proto::COMPACT_MIN {
        return None;
    }
    let flags = hdr.flags | proto::flag::COMPACT;
    let off = proto::compact_len(flags);
    if off + n > ring::CELL {
        return None;
    }
    Some((flags, off, contiguous(payload)?, n))
}

/// A compact EAGER record of one cell (`total = off + n <= CELL`) whose
/// payload is contiguous at `src`: a cell never wraps nor goes back to the
/// ring's start, so no `linear` test, no rewind, no chunk walk.
#[inline(always)]
fn write_eager_cell(
    p: &mut PeerOut,
    hdr: &WireHdr,
    flags: u32,
    off: usize,
    src: *const u8,
    n: usize,
) -> core::result::Result<bool, ring::Corrupt> {
    debug_assert!(off + n <= ring::CELL);
    let Some(spot) = claim(p, 1, false)? else {
        return Ok(false);
    };
    let rec = p.ring.cell(spot.at);
    // SAFETY: the cell at `spot.at` and the one after it are free and ours
    // (producer); `off + n <= CELL`, so the payload stays inside the
    // record's cell; `src` is readable for `n` bytes (`contiguous`); the
    // record's first word goes last (publication).
    unsafe {
        write_compact_fields(rec.cast::<u64>(), hdr, flags, off, n);
        copy_small_raw(src, rec.add(off), n);
        p.ring.publish_at(
            spot.at,
            1,
            proto::pack_first_word(hdr.magic, hdr.version, hdr.op, flags),
        );
    }
    published(p, spot, 1);
    Ok(true)
}

/// An EAGER record in the compact form (proto.rs, docs/shm.md "Rings"):
/// 16 to 40 header bytes, the payload right after them; up to 48 bytes of
/// payload in one cell, 112 in two, copied with fixed-size moves.
#[inline]
fn write_eager(p: &mut PeerOut, hdr: &WireHdr, payload: &Payload<'_>) -> core::result::Result<bool, ring::Corrupt> {
    let n = payload.len();
    let flags = hdr.flags | proto::flag::COMPACT;
    let off = proto::compact_len(flags);
    let total = off + n;
    let cells = cells_for(total);
    let Some(spot) = claim(p, cells, true)? else {
        return Ok(false);
    };
    let at = spot.at;
    // SAFETY: `cells` cells from `at` and the one after them are free
    // and ours (producer); the record's first word goes last (publication).
    unsafe {
        if let Some(rec) = p.ring.linear(at, cells) {
            // The record does not wrap (nearly always): header words 1..5
            // (bytes 8..40, inside the first cell, which is ours whatever
            // `n`), then the payload from `off`, over the words the header
            // does not use. Plain stores into our cells (the cell is
            // 64-byte aligned), no reference.
            write_compact_fields(rec.cast::<u64>(), hdr, flags, off, n);
            let mut at = off;
            payload.for_each(|chunk| {
                // `at + chunk.len() <= total <= cells * CELL`.
                copy_payload(chunk.as_ptr(), rec.add(at), chunk.len(), total);
                at += chunk.len();
            });
        } else {
            let (w, _) = hdr.compact(n);
            let mut hb = [0u8; 40];
            for (i, x) in w.iter().enumerate() {
                hb[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            p.ring.write_at(at, 8, &hb[8..off]);
            let mut pos = off;
            payload.for_each(|chunk| {
                p.ring.write_at(at, pos, chunk);
                pos += chunk.len();
            });
        }
        p.ring
            .publish_at(at, cells, proto::pack_first_word(hdr.magic, hdr.version, hdr.op, flags));
    }
    published(p, spot, cells);
    Ok(true)
}

/// One payload chunk of `n` bytes of a record of `total` bytes: with
/// fixed-size moves when the record is small (two cells or less), else
/// `memcpy`.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline(always)]
unsafe fn copy_payload(src: *const u8, dst: *mut u8, n: usize, total: usize) {
    // SAFETY: forwarded (`n <= total <= SMALL_COPY` on the first arm).
    unsafe {
        if total <= SMALL_COPY {
            copy_small_raw(src, dst, n)
        } else {
            core::ptr::copy_nonoverlapping(src, dst, n)
        }
    }
}

// A record header is exactly one ring cell (read and written whole).
const _: () = assert!(HDR_LEN == ring::CELL);

/// Largest copy made with fixed-size moves (`copy_small_raw`): a two-cell
/// record's payload.
const SMALL_COPY: usize = 2 * ring::CELL;

/// `len <= SMALL_COPY` bytes from `src` into a one-segment `dst` at
/// `dst_off`, with fixed-size moves; false (nothing copied) when `dst` is
/// not one segment with room for them.
///
/// # Safety
/// `src` readable for `len` bytes; `dst` describes application memory.
#[inline(always)]
unsafe fn copy_small_into_one(src: *const u8, len: usize, dst: &IovList, dst_off: usize) -> bool {
    let [(p, cap)] = dst.segments() else {
        return false;
    };
    if *cap < dst_off + len {
        return false;
    }
    // SAFETY: `p + dst_off .. + len` lies within the segment (`cap`); raw
    // copy, no reference to shared memory.
    unsafe { copy_small_raw(src, (*p as *mut u8).add(dst_off), len) };
    true
}

/// `n <= SMALL_COPY` bytes from `src` to `dst`: two overlapping fixed-size
/// moves of the largest power of two not above `n` (64, 32, 16, 8 or 4
/// bytes) cover any length from 4 to 128, three single bytes any below.
/// A call to `memcpy` costs more than the copy at these sizes.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline]
unsafe fn copy_small_raw(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!(n <= SMALL_COPY);
    /// Two moves of `T`: the first and the last `size_of::<T>()` bytes.
    ///
    /// # Safety
    /// `size_of::<T>() <= n`, and the contract of `copy_small_raw`.
    #[inline(always)]
    unsafe fn two<T: Copy>(src: *const u8, dst: *mut u8, n: usize) {
        let k = core::mem::size_of::<T>();
        // SAFETY: `0 .. k` and `n - k .. n` lie below `n`; unaligned reads
        // and writes of plain data.
        unsafe {
            dst.cast::<T>().write_unaligned(src.cast::<T>().read_unaligned());
            dst.add(n - k)
                .cast::<T>()
                .write_unaligned(src.add(n - k).cast::<T>().read_unaligned());
        }
    }
    // SAFETY (every access): offsets below `n`, per the contract.
    unsafe {
        if n >= 64 {
            two::<[u64; 8]>(src, dst, n)
        } else if n >= 32 {
            two::<[u64; 4]>(src, dst, n)
        } else if n >= 16 {
            two::<u128>(src, dst, n)
        } else if n >= 8 {
            two::<u64>(src, dst, n)
        } else if n >= 4 {
            two::<u32>(src, dst, n)
        } else if n > 0 {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
    }
}

/// Writes what of `p`'s backlog fits; false if its ring failed
/// (`fail_out` is the caller's).
fn flush_backlog(p: &mut PeerOut) -> bool {
    while let Some(h) = p.backlog.front().copied() {
        match write_record(p, &h, &Payload::None) {
            Ok(true) => {
                p.backlog.pop_front();
            }
            Ok(false) => break,
            Err(ring::Corrupt) => return false,
        }
    }
    true
}

/// Our side of the peer `token` failed: its ring broke, or /dev/shm had no
/// room for it (`no_room`). No more records go to it, and the endpoint
/// hears it (`PeerEvent`). Where the cause is ours (no room), the owner is
/// told too, by our slot closed with the code (`Segment::abort_slot`):
/// what it waits on from us never comes, and it fails us in turn
/// (`ShmPort::refuse`). A corrupt ring or a gone owner is the owner's own
/// doing. The error for the send that found it: -FI_ENOMEM where the ring
/// is not at fault, else -FI_ECONNRESET.
#[cold]
#[inline(never)]
fn fail_out(ring_tx: &Ringer, p: &mut PeerOut, events: &mut Vec<PeerEvent>, token: u64) -> Error {
    p.failed = true;
    p.backlog.clear();
    let ev = if p.no_room {
        p.seg.abort_slot(p.slot, Error::NOMEM.0 as u32);
        p.seg.signal(p.slot);
        ring_doorbell(ring_tx, &p.seg, &p.bell);
        PeerEvent::NoRoom(Addr::Shm(token))
    } else {
        PeerEvent::Failed(Addr::Shm(token))
    };
    events.push(ev);
    ev.cause()
}

/// Orderly end of our ring to `p`: a `BYE`, the slot closed (the owner
/// frees it), the owner woken to see it.
fn leave(ring_tx: &Ringer, p: &mut PeerOut) {
    let _ = write_record(p, &WireHdr::new(proto::op::BYE), &Payload::None);
    p.seg.close_slot(p.slot);
    // A close is always signalled: the owner frees the slot.
    p.seg.signal(p.slot);
    ring_doorbell(ring_tx, &p.seg, &p.bell);
}

/// The consumer of [`ShmPort::poll_records`] on one ring alone, from
/// `head`: the head it reached and whether it found the ring corrupt (the
/// `shm_ring` fuzz target, `crate::fuzzing`).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn consume_image(
    ring: Ring,
    head: u64,
    lim: &Limits,
    f: &mut dyn FnMut(InRecord<'_>) -> Disposition,
) -> (u64, bool) {
    let sender = SlotSender {
        token: 1,
        pid: 0,
        start: 0,
    };
    let mut s = InSlot::new(0, ring, sender, 0);
    s.head = head;
    let r = consume_slot(&mut s, lim, f, &mut false);
    (s.head, r.is_err())
}

/// Consumes records of one slot; Err(()) if the ring or a record is corrupt.
/// Sets `moved` when it consumed a record or a rewind marker (the producer
/// moved: `ShmPort::poll_records`; a store per record, nothing per empty
/// ring).
fn consume_slot(
    s: &mut InSlot,
    lim: &Limits,
    f: &mut dyn FnMut(InRecord<'_>) -> Disposition,
    moved: &mut bool,
) -> core::result::Result<(), ()> {
    // At most one ring's worth per call: a sender that keeps its ring full
    // (or a hostile one that writes records endlessly) leaves the pass to
    // the other peers.
    let mut budget = s.ring.ncells();
    loop {
        if budget == 0 {
            return Ok(());
        }
        let Some(first) = s.ring.ready(s.head) else {
            return Ok(());
        };
        let cell = s.ring.cell(s.head);
        // The common record, a compact EAGER one: its header from the first
        // word as loaded and the four after it, decoded and checked at once
        // (`WireHdr::decode_compact_eager`, which takes nothing the general
        // path would refuse); anything else goes the general way.
        let mut rest = [0u64; 4];
        // SAFETY: a record is published at `head` (its first word, written
        // last, is set): its first cell (64 bytes) is readable; raw copy of
        // bytes 8..40 into our own array, no reference to shared memory.
        unsafe { core::ptr::copy_nonoverlapping(cell.add(8), rest.as_mut_ptr() as *mut u8, 32) };
        let rest = rest.map(u64::from_le);
        let (hdr, off) = match WireHdr::decode_compact_eager(u64::from_le(first), &rest, lim) {
            Some(d) => d,
            None => match general_header(s, first, lim)? {
                Found::Record(h, off) => (h, off),
                Found::Rewound(skip) => {
                    // `head` moved to the ring's first cell.
                    budget = budget.saturating_sub(skip);
                    *moved = true;
                    continue;
                }
            },
        };
        let cells = cells_for(off + hdr.payload as usize);
        if cells >= s.ring.ncells() {
            // A producer keeps one cell free, and `check` bounds the
            // payload far below the ring: corruption.
            return Err(());
        }
        let rec = InRecord {
            src: Addr::Shm(s.sender.token),
            src_pid: s.vpid,
            hdr,
            payload: PayloadRef {
                ring: &s.ring,
                at: s.head,
                off,
            },
        };
        match f(rec) {
            Disposition::Consumed => {
                s.head = s.head.wrapping_add(cells);
                s.ring.release(s.head);
                budget = budget.saturating_sub(cells);
                *moved = true;
            }
            Disposition::Stall => return Ok(()),
        }
    }
}

/// What the general path found at `s.head`: a record's header and where
/// its payload starts, or a rewind marker (the cells skipped).
enum Found {
    Record(WireHdr, usize),
    Rewound(u64),
}

/// A record at `s.head` that is not a valid compact EAGER one: its header
/// decoded and checked the general way (`WireHdr::decode`, `check`), or a
/// rewind marker, after which `head` is the ring's first cell again.
/// Err(()): corruption.
/// `first` is its first word as `Ring::ready` returned it (the lap tag
/// cleared), which stands for the cell's first 8 bytes.
#[inline(never)]
fn general_header(s: &mut InSlot, first: u64, lim: &Limits) -> core::result::Result<Found, ()> {
    // SAFETY: a record is published at `head` (its first word, written
    // last, is set): its first cell (64 bytes) is readable.
    let mut hb = unsafe { s.ring.read_cell(s.head) };
    hb[..8].copy_from_slice(&first.to_ne_bytes());
    if first == ring::REWIND {
        // The producer went back to the ring's first cell (ring.rs);
        // `head` is released with the record found there. A marker at
        // a lap's first cell would skip a whole lap: corruption.
        let skip = s.ring.cells_to_lap_end(s.head);
        if skip == s.ring.ncells() {
            return Err(());
        }
        s.head = s.head.wrapping_add(skip);
        return Ok(Found::Rewound(skip));
    }
    // A compact EAGER header or a full one; `off`: where its payload
    // starts (at most 64), `payload` bounded by `check`.
    let (hdr, off) = WireHdr::decode(&hb);
    hdr.check(lim).map_err(|_| ())?;
    Ok(Found::Record(hdr, off))
}

#[cfg(test)]
mod garbage_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::op;

    const LIM: Limits = Limits {
        max_payload: EAGER_MAX,
        max_chunk: EAGER_MAX,
        max_iov: 8,
    };

    fn port() -> ShmPort {
        ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap()
    }

    #[test]
    fn eager_round_trip_between_ports() {
        let mut a = port();
        let mut b = port();
        let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let mut h = eager(&msg);
        h.tag = 77;
        a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
        let mut got = Vec::new();
        b.poll_records(&mut |r| {
            assert_eq!(r.src, a.addr());
            assert_eq!(r.hdr.tag, 77);
            got = r.payload_vec();
            Disposition::Consumed
        });
        assert_eq!(got, msg);
        // Stall leaves the record for later.
        a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
        let mut seen = 0;
        b.poll_records(&mut |_| {
            seen += 1;
            Disposition::Stall
        });
        b.poll_records(&mut |_| {
            seen += 1;
            Disposition::Consumed
        });
        assert_eq!(seen, 2);
        b.poll_records(&mut |_| panic!("record delivered twice"));
    }

    #[test]
    fn records_straddling_the_ring_end_arrive_whole() {
        // Multi-cell records of sizes that do not divide the ring: over
        // several laps some start near its end and wrap (write_record's and
        // copy_to_iov's loop path), most do not (their plain-copy path,
        // `Ring::linear`). Every byte is checked, read whole, into two
        // segments, and from an offset. With a compact tagged header (24
        // bytes): 6, 17 and 40 bytes take one cell, 41, 64, 65, 100 and 104
        // two (fixed-size copies), 105 three.
        let mut a = port();
        let mut b = port();
        let sizes = [17usize, 100, 500, 3000, 64, 65, 6, 40, 41, 104, 105];
        let mut cells = 0u64;
        let mut i = 0usize;
        while cells < 5 * segment::NCELLS as u64 {
            let n = sizes[i % sizes.len()];
            let msg: Vec<u8> = (0..n).map(|k| (k * 7 + i * 13) as u8).collect();
            let mut h = eager(&msg);
            h.tag = i as u64;
            a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
            cells += ring::cells_for(proto::compact_len(h.flags) + n);
            let mut seen = 0;
            b.poll_records(&mut |r| {
                seen += 1;
                assert_eq!(r.hdr.tag, i as u64);
                assert!(r.payload_vec() == msg, "record {i} ({n} B): payload_vec differs");
                let mut whole = vec![0u8; n];
                // SAFETY: `whole` holds n writable bytes.
                let got = unsafe { r.copy_to_iov(0, n, &IovList::single(whole.as_mut_ptr() as usize, n), 0) };
                assert!(got == n && whole == msg, "record {i} ({n} B): copy_to_iov differs");
                let (mut x, mut y) = (vec![0u8; n / 3], vec![0u8; n]);
                let mut two = IovList::new();
                two.push(x.as_mut_ptr() as usize, x.len());
                two.push(y.as_mut_ptr() as usize, y.len());
                // From byte 5 of the payload into byte 1 of the list.
                // SAFETY: both segments are ours and writable.
                let got = unsafe { r.copy_to_iov(5, n - 5, &two, 1) };
                assert_eq!(got, n - 5);
                let mut joined = x.clone();
                joined.extend_from_slice(&y);
                assert!(
                    joined[1..n - 4] == msg[5..],
                    "record {i} ({n} B): copy from an offset differs"
                );
                Disposition::Consumed
            });
            assert_eq!(seen, 1);
            i += 1;
        }
    }

    /// A receiver with large rings (`with_ring_cells`): the sender takes
    /// the ring's size from its segment, large records sent one at a time
    /// are never rewound (each goes right after the last, round the whole
    /// ring), and all arrive whole and in order over several laps.
    #[test]
    fn large_rings_are_gone_round_without_rewinding() {
        let mut a = port();
        let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
        let token = b.token();
        let n_cells = 16384u64;
        // Eager records larger than ring::EMPTY_REWIND_MAX cells, one at a
        // time (the ring empty at every send, as in a ping-pong), and a small
        // one now and then.
        let sizes = [16000usize, 8300, 12000, 300, 16000, 9000];
        let (mut sent, mut next, mut wraps) = (0usize, 0usize, 0);
        let msg_of = |i: usize| -> Vec<u8> { (0..sizes[i % sizes.len()]).map(|k| (k * 7 + i * 13) as u8).collect() };
        while sent < 1500 {
            let msg = msg_of(sent);
            let mut h = eager(&msg);
            h.tag = sent as u64;
            let before = a.peer(token).map(|p| p.tail).unwrap_or(0);
            a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).expect("send");
            let p = a.peer(token).unwrap();
            assert_eq!(
                p.ring.ncells(),
                n_cells,
                "the sender did not take the owner's ring size"
            );
            let cells = ring::cells_for(proto::compact_len(h.flags) + msg.len());
            // A small record at the small lap may go back to the first
            // cell (`small_records_keep_the_default_lap_in_large_rings`).
            let small_lap = cells < ring::REWIND_MIN
                && (before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN
                && p.tail % n_cells == cells;
            assert!(
                p.tail == before + cells || small_lap,
                "record {sent} was not written right after the last"
            );
            if !small_lap && ((before % n_cells) + cells > n_cells || p.tail % n_cells < before % n_cells) {
                wraps += 1;
            }
            sent += 1;
            b.poll_records(&mut |r| {
                assert_eq!(r.hdr.tag, next as u64, "record lost, doubled or out of order");
                assert!(r.payload_vec() == msg_of(next), "record {next}: payload differs");
                next += 1;
                Disposition::Consumed
            });
        }
        assert_eq!(next, sent, "each record is taken in the pass right after it");
        assert!(b.take_events().is_empty(), "the receiver failed the sender");
        assert!(wraps >= 5, "went round the ring {wraps} times");
    }

    /// Where /dev/shm has no room for the rest of a large ring (past the
    /// small lap), the sender stays within the cells it has for good:
    /// records that do not fit before `ring::SMALL_LAP` go
    /// back to the first cell, in a ping-pong and in a stream (which waits
    /// for the consumer when it cannot), every record arrives whole and in
    /// order, and nothing past the small lap is written — its pages stay
    /// holes in the segment file (a write there would have raised SIGBUS
    /// in a full /dev/shm).
    #[test]
    fn a_full_dev_shm_keeps_a_sender_within_the_cells_its_claim_allocated() {
        use std::os::unix::fs::MetadataExt;
        let mut a = port();
        let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
        let (token, baddr) = (b.token(), b.addr());
        let path = format!("/dev/shm{}", segment::seg_name(token).to_str().unwrap());
        let resident = || std::fs::metadata(&path).unwrap().blocks() * 512;
        let (mut sent, mut next) = (0u64, 0u64);
        // Records of `len` bytes, each its tag's low byte throughout.
        let mut send = |a: &mut ShmPort, len: usize| -> Result<u64> {
            let msg = vec![sent as u8; len];
            let mut h = eager(&msg);
            h.tag = sent;
            a.send_record(&baddr, &h, Payload::Bytes(&msg))?;
            sent += 1;
            Ok(a.peer(token).unwrap().tail)
        };
        let mut drain = |b: &mut ShmPort| {
            b.poll_records(&mut |r| {
                assert_eq!(r.hdr.tag, next, "record lost, doubled or out of order");
                assert_eq!(r.payload_vec(), vec![r.hdr.tag as u8; r.hdr.len as usize]);
                next += 1;
                Disposition::Consumed
            });
        };
        send(&mut a, 1).unwrap();
        drain(&mut b);
        let after_claim = resident();
        let p = a.peer(token).unwrap();
        assert_eq!(p.reserved, ring::RESERVE_FIRST);
        p.seg
            .no_room_from
            .store(ring::SMALL_LAP, core::sync::atomic::Ordering::Relaxed);
        // A ping-pong of records too large to rewind in a large ring
        // (more than ring::EMPTY_REWIND_MAX cells), then of middle ones.
        for len in [16000usize, 4000, 900] {
            for _ in 0..40 {
                let tail = send(&mut a, len).expect("a ping-pong never waits");
                assert!(tail % 16384 < ring::SMALL_LAP, "a record reached cell {}", tail % 16384);
                drain(&mut b);
            }
        }
        assert!(a.peer(token).unwrap().confined);
        // Streams: as many as the cells take, then the consumer drains.
        for len in [16000usize, 1000, 8] {
            for _ in 0..6 {
                let mut n = 0;
                while let Ok(tail) = send(&mut a, len) {
                    assert!(tail % 16384 < ring::SMALL_LAP, "a record reached cell {}", tail % 16384);
                    n += 1;
                }
                assert!(n > 0, "a stream of {len}-byte records sent nothing");
                drain(&mut b);
            }
        }
        assert_eq!(next, sent);
        assert!(b.take_events().is_empty(), "the receiver failed the sender");
        let grown = resident() - after_claim;
        let small_lap = ring::SMALL_LAP * ring::CELL as u64;
        assert!(
            grown <= small_lap + 4096,
            "{grown} bytes allocated, more than the small lap"
        );
    }

    /// Without room in /dev/shm for the cells a ring needs to work at all
    /// (`ring::RESERVE_WORKING`), a send that needs them fails with
    /// -FI_ENOMEM and the peer fails for good; and the pair fails both
    /// ways: the owner drains what it sent, then fails it as a peer
    /// (what it waits on from it, an ACK or a CTS, cannot come), and ends
    /// its own ring to it as at a close (a BYE) or never opens one.
    #[test]
    fn no_room_for_a_working_ring_fails_the_pair_both_ways() {
        for b_sent_first in [true, false] {
            let mut a = port();
            let mut b = port();
            let (token, aaddr, baddr) = (b.token(), a.addr(), b.addr());
            let one = eager(&[1]);
            if b_sent_first {
                b.send_record(&aaddr, &one, Payload::Bytes(&[1])).unwrap();
            }
            a.send_record(&baddr, &one, Payload::Bytes(&[1])).unwrap();
            a.peer(token)
                .unwrap()
                .seg
                .no_room_from
                .store(ring::RESERVE_FIRST, core::sync::atomic::Ordering::Relaxed);
            let big = vec![2u8; 8000];
            assert_eq!(
                a.send_record(&baddr, &eager(&big), Payload::Bytes(&big)),
                Err(Error::NOMEM)
            );
            assert_eq!(a.take_events(), vec![PeerEvent::NoRoom(baddr)]);
            assert_eq!(
                a.send_record(&baddr, &one, Payload::Bytes(&[1])),
                Err(Error::CONNRESET),
                "the peer stays failed"
            );
            assert_eq!(ops(&mut b), vec![op::EAGER], "what was sent before arrives");
            assert_eq!(
                b.take_events(),
                vec![PeerEvent::Failed(aaddr)],
                "b_sent_first {b_sent_first}"
            );
            assert_eq!(
                b.send_record(&aaddr, &one, Payload::Bytes(&[1])),
                Err(Error::CONNRESET),
                "b's ring to a ends too"
            );
            let want = if b_sent_first { vec![op::EAGER, op::BYE] } else { vec![] };
            assert_eq!(ops(&mut a), want, "b_sent_first {b_sent_first}");
        }
    }

    /// No room for even the first page of a ring to a peer we owe a reply
    /// (a control record): the reply is lost, so we fail the peer for
    /// good and tell its owner by a datagram, which it believes only from
    /// the process whose segment the named token is, and fails us in turn.
    #[test]
    fn a_reply_with_no_room_for_its_ring_fails_the_pair_both_ways() {
        let mut a = port();
        let mut b = port();
        let (aaddr, baddr) = (a.addr(), b.addr());
        let one = eager(&[1]);
        b.send_record(&aaddr, &one, Payload::Bytes(&[1])).unwrap();
        a.peers.no_room_for_claims = true;
        assert_eq!(
            a.send_record(&baddr, &one, Payload::Bytes(&[1])),
            Err(Error::NOMEM),
            "a send of our own only fails"
        );
        assert_eq!(a.take_events(), vec![]);
        // A refusal naming a token that has no segment: not believed.
        let seg = Segment::open(b.token()).unwrap();
        let bell = DoorbellAddr::new(&segment::doorbell_path(b.token())).unwrap();
        tell_owner(
            &a.ring_tx,
            &seg,
            &bell,
            &segment::refusal_bytes(b.token(), 12345, 12),
            "test",
        );
        seg.nudge();
        b.poll_records(&mut |_| Disposition::Consumed);
        assert_eq!(b.take_events(), vec![]);
        let ack = WireHdr::new(op::ACK);
        assert_eq!(a.send_ctl(&baddr, &ack), Err(Error::NOMEM));
        assert_eq!(a.take_events(), vec![PeerEvent::NoRoom(baddr)]);
        a.peers.no_room_for_claims = false;
        assert_eq!(
            a.send_record(&baddr, &one, Payload::Bytes(&[1])),
            Err(Error::CONNRESET),
            "for good"
        );
        assert_eq!(ops(&mut b), vec![]);
        assert_eq!(b.take_events(), vec![PeerEvent::Failed(aaddr)]);
        assert_eq!(
            b.send_record(&aaddr, &one, Payload::Bytes(&[1])),
            Err(Error::CONNRESET),
            "b's ring to a ends too"
        );
    }

    /// In a large ring small records keep the default ring's lap: taken
    /// one at a time (a ping-pong: the ring empty at every send) they go
    /// back to the first cell at `ring::SMALL_REWIND_AT`, never reaching
    /// `ring::SMALL_LAP` (where the pages a claim allocates end), while large
    /// records go on round the whole ring from wherever the tail is; a
    /// stream of small records goes back at the small lap too when the
    /// consumer left the start free. Every record arrives whole and in
    /// order.
    #[test]
    fn small_records_keep_the_default_lap_in_large_rings() {
        let mut a = port();
        let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
        let token = b.token();
        let baddr = b.addr();
        let n_cells = 16384u64;
        let (mut sent, mut next) = (0u64, 0u64);
        let mut send = |a: &mut ShmPort, msg: &[u8]| -> (u64, u64) {
            let before = a.peer(token).map(|p| p.tail).unwrap_or(0);
            let mut h = eager(msg);
            h.tag = sent;
            a.send_record(&baddr, &h, Payload::Bytes(msg)).expect("send");
            sent += 1;
            (before, a.peer(token).unwrap().tail)
        };
        let mut drain = |b: &mut ShmPort| {
            b.poll_records(&mut |r| {
                assert_eq!(r.hdr.tag, next, "record lost, doubled or out of order");
                assert_eq!(r.payload_vec().len(), r.hdr.len as usize);
                next += 1;
                Disposition::Consumed
            });
        };
        // A small ping-pong: never past the small lap, and back at the start.
        let (mut rewinds, mut furthest) = (0, 0);
        for _ in 0..3 * ring::SMALL_LAP {
            let (before, after) = send(&mut a, b"x");
            furthest = furthest.max(after % n_cells);
            if after % n_cells < before % n_cells {
                assert!(
                    (before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN,
                    "rewound at {before}"
                );
                rewinds += 1;
            }
            drain(&mut b);
        }
        assert!(rewinds >= 2, "small records rewound {rewinds} times");
        assert!(furthest < ring::SMALL_LAP, "small records reached cell {furthest}");
        // Eager records up to ring::EMPTY_REWIND_MAX cells in a ping-pong
        // rewind as in a default ring: two places in turn.
        let mid = vec![5u8; 4000];
        let mut places = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let (_, after) = send(&mut a, &mid);
            places.insert(after % n_cells);
            drain(&mut b);
        }
        assert!(
            places.len() <= 3,
            "4000-byte records in a ping-pong took {} places",
            places.len()
        );
        // Larger ones in a ping-pong: each right after the last, past the
        // small lap and round the ring.
        let big = vec![7u8; 16000];
        assert!(ring::cells_for(proto::compact_len(eager(&big).flags) + big.len()) > ring::EMPTY_REWIND_MAX);
        let mut past = false;
        for _ in 0..n_cells / 128 {
            let (before, after) = send(&mut a, &big);
            assert_eq!(
                after,
                before + ring::cells_for(proto::compact_len(eager(&big).flags) + big.len()),
                "a large record rewound"
            );
            past |= after % n_cells > 4 * ring::SMALL_LAP;
            drain(&mut b);
        }
        assert!(past, "large records stayed within the small lap");
        // Small records one at a time up to just before the small lap (round
        // the ring's end first if the large ones left the tail past it),
        // then streamed across it with nothing consumed: the consumer left
        // the start of the ring free, so the stream too goes back there at
        // the small lap, as in a default ring.
        while !(ring::SMALL_LAP - 200..ring::SMALL_LAP - 100).contains(&(a.peer(token).unwrap().tail % n_cells)) {
            send(&mut a, b"y");
            drain(&mut b);
        }
        let mut streamed_back = false;
        for _ in 0..300 {
            let (before, after) = send(&mut a, b"z");
            if after != before + 1 {
                assert!(
                    (before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN && after % n_cells == 1
                );
                streamed_back = true;
            }
        }
        assert!(streamed_back, "the stream did not go back at the small lap");
        drain(&mut b);
        assert_eq!(next, sent);
        assert!(b.take_events().is_empty(), "the receiver failed the sender");
    }

    /// Large records go back to the ring's first cell when the receiver
    /// has left room there (ring.rs, rewinding; segment version 6), with
    /// the receiver keeping up or several records behind, stalling now and
    /// then: every record arrives once, whole, in order, and the sender did
    /// rewind (its tail went back to the ring's start from far before its
    /// end) as well as go on round the ring.
    #[test]
    fn large_records_rewind_and_arrive_whole_in_order() {
        let mut a = port();
        let mut b = port();
        let token = b.token();
        // Records of 400 at a time: large and small mixed (rewinding), then
        // small ones only (300 bytes, 6 cells: no rewind), which take the
        // sender round the ring.
        let size = |i: usize| {
            let sizes = [4096usize, 1000, 4096, 17, 2000, 16000, 4096, 300, 8000];
            if (i / 400).is_multiple_of(2) {
                sizes[i % sizes.len()]
            } else {
                300
            }
        };
        let n_cells = segment::NCELLS as u64;
        let (mut rewinds, mut wraps) = (0, 0);
        let mut sent = 0usize;
        let mut next = 0usize;
        for round in 1..10_000usize {
            if sent == 1600 {
                break;
            }
            // A batch of 1 to 4 records before the receiver looks, or as
            // many as the ring takes (so that it goes round).
            let batch = if round % 10 == 0 { 64 } else { 1 + round % 4 };
            for _ in 0..batch {
                let n = size(sent);
                let msg: Vec<u8> = (0..n).map(|k| (k * 3 + sent * 11) as u8).collect();
                let mut h = eager(&msg);
                h.tag = sent as u64;
                let before = a.peer(token).unwrap().tail;
                match a.send_record(&b.addr(), &h, Payload::Bytes(&msg)) {
                    Ok(()) => {}
                    Err(e) if e == Error::AGAIN => break,
                    Err(e) => panic!("send: {e:?}"),
                }
                let p = a.peer(token).unwrap();
                let cells = ring::cells_for(proto::compact_len(h.flags) + n);
                let (from, to) = (before % n_cells, p.tail % n_cells);
                if to == cells && from != 0 && n_cells - from >= cells {
                    rewinds += 1;
                } else if to < from {
                    wraps += 1;
                }
                sent += 1;
            }
            // Every fifth look stalls on its first record once.
            let mut stall = round.is_multiple_of(5);
            b.poll_records(&mut |r| {
                if stall {
                    stall = false;
                    return Disposition::Stall;
                }
                let i = next;
                let n = size(i);
                assert_eq!(r.hdr.tag, i as u64, "record lost, doubled or out of order");
                let msg: Vec<u8> = (0..n).map(|k| (k * 3 + i * 11) as u8).collect();
                assert!(r.payload_vec() == msg, "record {i} ({n} B): payload differs");
                next += 1;
                Disposition::Consumed
            });
        }
        for _ in 0..sent {
            if next == sent {
                break;
            }
            b.poll_records(&mut |r| {
                assert_eq!(r.hdr.tag, next as u64, "record lost, doubled or out of order");
                next += 1;
                Disposition::Consumed
            });
        }
        assert!(b.take_events().is_empty(), "the receiver failed the sender");
        assert_eq!(next, sent, "records not delivered");
        assert!(rewinds > 20, "{rewinds} rewinds");
        assert!(wraps > 0, "never went round the ring");
    }

    /// A rewind marker at a lap's first cell would skip a whole lap: the
    /// receiver fails that sender instead (a hostile or broken sender).
    #[test]
    fn a_rewind_marker_at_the_ring_start_is_corruption() {
        let mut a = port();
        let mut b = port();
        let token = b.token();
        let msg = [1u8; 8];
        a.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).unwrap();
        b.poll_records(&mut |_| Disposition::Consumed);
        let p = a.peer(token).unwrap();
        assert_eq!(p.tail, 1);
        // A marker at the next lap's first cell (where the consumed record
        // was), then one at the tail (cell 1) sending the receiver there.
        // SAFETY: we are the ring's producer and the ring is empty: both
        // cells are free.
        unsafe {
            p.ring.publish_rewind(segment::NCELLS as u64);
            p.ring.publish_rewind(1);
        }
        let mut seen = 0;
        b.poll_records(&mut |_| {
            seen += 1;
            Disposition::Consumed
        });
        assert_eq!(seen, 0);
        let ev = b.take_events();
        assert!(
            matches!(ev.as_slice(), [PeerEvent::Failed(x)] if *x == a.addr()),
            "{ev:?}"
        );
    }

    #[test]
    fn sends_alternating_between_peers_reach_each_its_own() {
        // The last peer used is remembered (`Peers::last`): a send to any
        // other peer must find that peer's own ring, in either order.
        let mut a = port();
        let mut b = port();
        let mut c = port();
        let (ab, ac) = (b.addr(), c.addr());
        for (tag, to) in [ab, ac, ac, ab, ac, ab].iter().enumerate() {
            let mut h = eager(&[tag as u8]);
            h.tag = tag as u64;
            a.send_record(to, &h, Payload::Bytes(&[tag as u8])).unwrap();
        }
        let tags = |p: &mut ShmPort| {
            let mut v = Vec::new();
            p.poll_records(&mut |r| {
                assert_eq!(r.src, a.addr());
                assert_eq!(r.payload_vec(), vec![r.hdr.tag as u8]);
                v.push(r.hdr.tag);
                Disposition::Consumed
            });
            v
        };
        assert_eq!(tags(&mut b), vec![0, 3, 5]);
        assert_eq!(tags(&mut c), vec![1, 2, 4]);
    }

    #[test]
    fn records_of_a_sender_that_closed_before_our_first_pass_are_delivered() {
        // The sender claims a slot, writes, and closes (its process exits)
        // before the owner polls once: fabtests fi_multi_ep lost its
        // finalize message this way (the owner skipped closed slots when
        // discovering new ones, and the slot leaked).
        let mut a = port();
        let mut b = port();
        let mut h = WireHdr::new(op::EAGER);
        h.len = 4;
        h.tag = 9;
        a.send_record(&b.addr(), &h, Payload::Bytes(&[1, 2, 3, 4])).unwrap();
        a.close();
        let mut got = Vec::new();
        for _ in 0..3 {
            b.poll_records(&mut |r| {
                got.push((r.hdr.op, r.payload_vec()));
                Disposition::Consumed
            });
        }
        assert_eq!(got.first(), Some(&(op::EAGER, vec![1, 2, 3, 4])));
        // The drained closed slot went back to the pool.
        assert_eq!(b.inbound.iter().count(), 0);
    }

    #[test]
    fn ring_full_gives_again_then_recovers() {
        let mut a = port();
        let mut b = port();
        let msg = vec![5u8; EAGER_MAX];
        let mut h = WireHdr::new(op::EAGER);
        h.len = msg.len() as u64;
        let mut sent = 0;
        while a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok() {
            sent += 1;
            assert!(sent < 1000);
        }
        assert!(sent >= 7);
        let mut n = 0;
        b.poll_records(&mut |_| {
            n += 1;
            Disposition::Consumed
        });
        assert_eq!(n, sent);
        assert!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok());
    }

    #[test]
    fn a_pass_reports_whether_a_peer_moved() {
        // The CQ's idle rule (core/cq.rs) yields only while no peer moves:
        // a record consumed, or room made in the ring a send was refused
        // on, counts; a pass with neither does not.
        let mut a = port();
        let mut b = port();
        let none = |_: InRecord<'_>| -> Disposition { panic!("nothing was sent to a") };
        assert!(!a.poll_records(&mut none.clone()), "nothing moved");
        let (h, msg) = fill(&mut a, &b);
        assert!(!a.poll_records(&mut none.clone()), "b has consumed nothing");
        let mut n = 0;
        let moved = b.poll_records(&mut |_| {
            n += 1;
            if n == 1 {
                Disposition::Consumed
            } else {
                Disposition::Stall
            }
        });
        assert!(moved, "b consumed a record");
        assert!(!b.poll_records(&mut |_| Disposition::Stall), "b consumed nothing more");
        // a fills that room and is refused again before its next pass:
        // the head it saw last stays the one compared.
        assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Ok(()));
        assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
        assert!(a.poll_records(&mut none.clone()), "b made room");
        assert!(!a.poll_records(&mut none.clone()), "b did not move again");
        assert!(a.rare.waiting().is_some());
        assert!(b.poll_records(&mut |_| Disposition::Consumed));
        assert!(a.poll_records(&mut none.clone()), "b took the rest");
        assert!(
            a.rare.waiting().is_none(),
            "a still watches a ring with nothing of its own left"
        );
        assert!(!a.poll_records(&mut none.clone()));
    }

    /// Fills `a`'s ring towards `b` with eager records.
    fn fill(a: &mut ShmPort, b: &ShmPort) -> (WireHdr, Vec<u8>) {
        let msg = vec![5u8; EAGER_MAX];
        let mut h = WireHdr::new(op::EAGER);
        h.len = msg.len() as u64;
        let mut sent = 0;
        while a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok() {
            sent += 1;
            assert!(sent < 1000);
        }
        (h, msg)
    }

    #[test]
    fn retries_against_a_full_ring_do_not_read_proc_each_time() {
        // A sender spinning on -FI_EAGAIN towards a slow receiver asks
        // whether the receiver lives at most every LIVENESS_PERIOD (a /proc
        // read is three system calls), not on every retry.
        let mut a = port();
        let b = port();
        let (h, msg) = fill(&mut a, &b);
        let t0 = Instant::now();
        let before = sys::PROC_READS.with(|n| n.get());
        for _ in 0..1000 {
            assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
        }
        let reads = sys::PROC_READS.with(|n| n.get()) - before;
        let periods = (t0.elapsed().as_millis() / LIVENESS_PERIOD.as_millis()) as u64;
        assert!(reads <= 1 + periods, "{reads} /proc reads for 1000 retries");
    }

    #[test]
    fn a_full_ring_whose_owner_closed_fails_at_once() {
        // The owner's closed flag is read on every send (one load): no
        // waiting for the next liveness period. The failure is reported
        // first (the send waits for the endpoint to take it), then sends
        // fail: nobody holds the address.
        let mut a = port();
        let b = port();
        let (h, msg) = fill(&mut a, &b);
        let to = b.addr();
        drop(b);
        assert_eq!(a.send_record(&to, &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
        assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
        assert_eq!(a.send_record(&to, &h, Payload::Bytes(&msg)), Err(Error::CONNRESET));
        assert_eq!(a.send_ctl(&to, &WireHdr::new(op::ACK)), Err(Error::CONNRESET));
        assert!(a.take_events().is_empty());
    }

    /// An endpoint reopened at a closed one's address (a restarted peer)
    /// gets the next send, in a ring of its own segment: the failure of
    /// the old incarnation is reported before anything goes to the new one,
    /// and nothing written for the old one (a record in its ring, a control
    /// record waiting for room) reaches the new one.
    #[test]
    fn a_peer_reopened_at_its_address_gets_the_next_send_and_nothing_older() {
        let mut a = port();
        let b = port();
        let to = b.addr();
        let Addr::Shm(t) = to else { unreachable!() };
        let (h, msg) = fill(&mut a, &b);
        // A control record for the old incarnation waits for room.
        assert_eq!(a.send_ctl(&to, &WireHdr::new(op::ACK)), Ok(()));
        drop(b);
        let mut b2 = ShmPort::new(t, LIM).unwrap();
        let two = eager(b"two");
        assert_eq!(a.send_record(&to, &two, Payload::Bytes(b"two")), Err(Error::AGAIN));
        assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
        a.send_record(&to, &two, Payload::Bytes(b"two")).unwrap();
        let mut got = Vec::new();
        for _ in 0..3 {
            b2.poll_records(&mut |r| {
                got.push((r.src, r.hdr.op, r.payload_vec()));
                Disposition::Consumed
            });
            a.poll_records(&mut |_| Disposition::Consumed);
        }
        assert_eq!(got, vec![(a.addr(), op::EAGER, b"two".to_vec())]);
        // And it keeps working both ways.
        a.send_record(&to, &h, Payload::Bytes(&msg)).unwrap();
        b2.send_record(&a.addr(), &two, Payload::Bytes(b"two")).unwrap();
        assert_eq!(ops(&mut b2), vec![op::EAGER]);
        assert_eq!(ops(&mut a), vec![op::EAGER]);
        assert!(a.take_events().is_empty());
    }

    /// Garbage in an endpoint's header refuses new senders, loudly, until
    /// the owner's next look at its header (within SWEEP_ROUNDS eviction
    /// rounds) rewrites it; a sender that was there before goes on.
    #[test]
    fn a_garbage_header_costs_new_senders_only_until_the_owner_rewrites_it() {
        use core::sync::atomic::{AtomicU64, Ordering};
        let mut a = port();
        let mut c = port();
        let mut b = port();
        let one = eager(b"one");
        a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b), vec![op::EAGER]);
        for off in (0..64).step_by(8) {
            // SAFETY: the header's first line, inside the mapping; written
            // as a same-user process would (atomically, not through a
            // reference).
            unsafe { AtomicU64::from_ptr(b.seg.as_ptr().add(off).cast()) }.store(!0, Ordering::Relaxed);
        }
        assert_eq!(
            c.send_record(&b.addr(), &one, Payload::Bytes(b"one")),
            Err(Error::ADDRNOTAVAIL)
        );
        a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
        for _ in 0..(SWEEP_ROUNDS * EVICT_PERIOD) as usize {
            b.poll_records(&mut |_| Disposition::Consumed);
        }
        c.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
        a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b), vec![op::EAGER, op::EAGER]);
        assert!(a.take_events().is_empty() && c.take_events().is_empty());
    }

    /// Garbage in slots' control lines (as a process of our user could
    /// write: a state word with a state none of ours, a closed slot with an
    /// abort word no sender writes, garbage identities) costs those slots
    /// only, and only until the owner looks: no peer is failed for it (a
    /// garbage abort word was taken for a sender giving its ring up, and
    /// the peer named by the garbage token refused), the slots come back
    /// free, and senders come and go as before.
    #[test]
    fn garbage_control_lines_cost_only_their_slots() {
        use core::sync::atomic::{AtomicU64, Ordering};
        let mut b = port();
        let line = |slot: usize, words: [u64; 8]| {
            for (k, w) in words.into_iter().enumerate() {
                // SAFETY: the slot's control line (after the 4 KiB header,
                // 64 bytes per slot), inside the mapping; written atomically
                // as a same-user process would.
                unsafe { AtomicU64::from_ptr(b.seg.as_ptr().add(4096 + slot * 64 + k * 8).cast()) }
                    .store(w, Ordering::Release);
            }
        };
        let junk = 0x5a5a_5a5a_5a5a_5a5a;
        // Closed, a live pid (ours), an abort word no sender writes.
        line(
            200,
            [
                SLOT_CLOSED | 7 << 8 | (sys::getpid() as u64) << 32,
                junk,
                sys::getpid() as u64,
                1,
                0,
                0xdead_beef,
                junk,
                junk,
            ],
        );
        // A state none of ours.
        line(201, [0xff | junk << 8, junk, junk, junk, junk, junk, junk, junk]);
        b.seg.nudge();
        let t = Instant::now();
        while b.seg.slot_state(200) != SLOT_FREE || b.seg.slot_state(201) != SLOT_FREE {
            assert!(t.elapsed() < Duration::from_secs(5), "garbage slots not freed");
            b.seg.nudge();
            b.poll_records(&mut |_| Disposition::Consumed);
        }
        assert!(b.take_events().is_empty(), "a peer was failed for garbage");
        assert!(b.peers.refused.is_empty(), "a peer was refused for garbage");
        let mut a = port();
        let one = eager(b"one");
        a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b), vec![op::EAGER]);
        b.send_record(&a.addr(), &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut a), vec![op::EAGER]);
    }

    /// Mappings of the segment of `token` in this process (/proc/self/maps
    /// lines naming it; a removed one's end in " (deleted)").
    fn maps_of(token: u64) -> usize {
        let name = segment::seg_name(token).into_string().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().filter(|l| l.contains(name.as_str())).count()
    }

    /// A peer that closed its endpoint (after an exchange both ways): once
    /// its slot in our segment is seen closed, our mapping of its removed
    /// segment goes (its pages with it). A send to its address then reports
    /// the failure first and reaches the endpoint reopened there.
    #[test]
    fn a_closed_peers_segment_is_unmapped_and_its_address_revisited() {
        let mut a = port();
        let mut b = port();
        let (to, t) = (b.addr(), b.token);
        let one = eager(b"one");
        a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
        b.send_record(&a.addr(), &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b), vec![op::EAGER]);
        assert_eq!(ops(&mut a), vec![op::EAGER]);
        assert_eq!(maps_of(t), 2, "b's own mapping and a's");
        drop(b);
        assert_eq!(maps_of(t), 1);
        for _ in 0..4 {
            a.poll_records(&mut |_| Disposition::Consumed);
        }
        assert_eq!(maps_of(t), 0, "a still maps the closed peer's removed segment");
        assert!(a.peers.v.is_empty() && a.peers.gone.contains_key(&t));
        assert!(a.take_events().is_empty(), "reported by the next send, not before");
        let mut b2 = ShmPort::new(t, LIM).unwrap();
        assert_eq!(a.send_record(&to, &one, Payload::Bytes(b"one")), Err(Error::AGAIN));
        assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
        a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b2), vec![op::EAGER]);
        assert!(a.peers.gone.is_empty() && a.peers.v.len() == 1);
        assert_eq!(maps_of(t), 2, "b2's own mapping and a's");
    }

    /// Tombs are capped: a peer buried with GONE_MAX tombs kept takes an
    /// arbitrary one's place, whose failure is reported if it was not yet.
    #[test]
    fn tombs_are_capped_and_an_evicted_ones_failure_is_reported() {
        let mut a = port();
        let b = port();
        let (to, t) = (b.addr(), b.token);
        a.send_record(&to, &eager(b"one"), Payload::Bytes(b"one")).unwrap();
        let tomb = Tomb {
            reported: false,
            next_look: None,
        };
        for k in 0..GONE_MAX as u64 {
            a.peers.gone.insert(!k, tomb);
        }
        drop(b);
        for _ in 0..(2 * SWEEP_ROUNDS * EVICT_PERIOD) as usize {
            a.poll_records(&mut |_| Disposition::Consumed);
        }
        assert_eq!(maps_of(t), 0);
        assert_eq!(a.peers.gone.len(), GONE_MAX);
        assert!(a.peers.gone.contains_key(&t));
        let ev = a.take_events();
        assert!(
            matches!(ev.as_slice(), [PeerEvent::Failed(Addr::Shm(x))] if *x > u64::MAX - GONE_MAX as u64),
            "{ev:?}"
        );
    }

    /// A peer whose owner's process is gone (its segment not marked
    /// closed: killed; here its pid taken by another process, as our
    /// copy of the owner's start time no longer matching says), that never
    /// sends to us: the periodic sweep finds it, and our mapping goes;
    /// a live peer's (even a failed one's) stays. The address is reached
    /// again once a new owner holds it.
    #[test]
    fn a_dead_owners_segment_is_unmapped_by_the_sweep() {
        let mut a = port();
        let b = port();
        let c = port();
        let (to, t) = (b.addr(), b.token);
        let one = eager(b"one");
        a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
        a.send_record(&c.addr(), &one, Payload::Bytes(b"one")).unwrap();
        a.peers.get_mut(c.token).unwrap().failed = true;
        a.peers.get_mut(t).unwrap().seg.owner_start += 1;
        assert_eq!((maps_of(t), maps_of(c.token)), (2, 2));
        for _ in 0..(2 * SWEEP_ROUNDS * EVICT_PERIOD * PROC_LOOK_SWEEPS) as usize {
            a.poll_records(&mut |_| Disposition::Consumed);
        }
        assert_eq!(maps_of(t), 1, "a still maps the dead owner's segment");
        assert_eq!(maps_of(c.token), 2, "a live owner's segment was unmapped");
        assert_eq!(a.peers.v.len(), 1);
        assert!(a.take_events().is_empty());
        assert!(!a.check_peer(t));
        assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
        assert!(!a.check_peer(t));
        assert!(a.take_events().is_empty(), "reported once");
        drop(b);
        let mut b2 = ShmPort::new(t, LIM).unwrap();
        a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
        assert_eq!(ops(&mut b2), vec![op::EAGER]);
        assert!(a.take_events().is_empty());
    }

    /// A failed peer whose owner is still there (here: it broke its ring)
    /// stays failed: no second ring is claimed in the same segment.
    #[test]
    fn a_failed_peer_with_a_live_owner_is_not_reopened() {
        let mut a = port();
        let b = port();
        let to = b.addr();
        let one = eager(b"one");
        a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
        let i = a.peers.index(b.token).unwrap();
        a.peers.v[i].failed = true;
        let claimed = || (0..NSLOTS).filter(|&s| b.seg.slot_state(s) != SLOT_FREE).count();
        assert_eq!(claimed(), 1);
        for _ in 0..3 {
            assert_eq!(a.send_record(&to, &one, Payload::Bytes(b"one")), Err(Error::CONNRESET));
            a.peers.v[i].next_look = None;
        }
        assert_eq!(claimed(), 1, "a second slot was claimed");
    }

    #[test]
    fn corrupt_record_breaks_only_that_peer() {
        let mut a = port();
        let mut c = port();
        let mut b = port();
        // `a` writes a record with a bad version straight into its ring
        // (a word without the magic would not read as published at all).
        let bad = WireHdr {
            version: 0x7e,
            ..WireHdr::new(op::EAGER)
        };
        a.send_record(&b.addr(), &bad, Payload::None).unwrap();
        let mut good = WireHdr::new(op::EAGER);
        good.len = 1;
        c.send_record(&b.addr(), &good, Payload::Bytes(&[9])).unwrap();
        let mut from = vec![];
        b.poll_records(&mut |r| {
            from.push(r.src);
            Disposition::Consumed
        });
        assert_eq!(from, vec![c.addr()]);
        assert_eq!(b.take_events(), vec![PeerEvent::Failed(a.addr())]);
    }

    #[test]
    fn cma_pull_from_self() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let iov = IovList::single(dst.as_mut_ptr() as usize, dst.len());
        let remote = [
            (src.as_ptr() as u64, 40_000u64),
            (src.as_ptr() as u64 + 40_000, 60_000u64),
        ];
        match pull(sys::getpid(), &remote, &iov, src.len()) {
            Ok(n) => {
                assert_eq!(n, src.len());
                assert_eq!(dst, src);
            }
            Err(e) => assert_eq!(e, Error::OPNOTSUPP, "CMA refused for another reason"),
        }
    }

    #[test]
    fn cma_batch_pairs_each_job_with_its_own_buffer() {
        // Three jobs of different sizes and segmentations, one call: each
        // destination gets its own source's bytes (a job whose ranges were
        // shifted by one would put a neighbour's bytes there).
        let srcs: Vec<Vec<u8>> = (0..3u32)
            .map(|k| (0..30_000 + k * 7_001).map(|i| (i * 7 + k) as u8).collect())
            .collect();
        let mut dsts: Vec<Vec<u8>> = srcs.iter().map(|s| vec![0u8; s.len()]).collect();
        let mut iovs = Vec::new();
        for d in dsts.iter_mut() {
            let mut iov = IovList::new();
            iov.push(d.as_mut_ptr() as usize, 1_000);
            iov.push(d.as_mut_ptr() as usize + 1_000, d.len() - 1_000);
            iovs.push(iov);
        }
        let remotes: Vec<[(u64, u64); 2]> = srcs
            .iter()
            .map(|s| {
                [
                    (s.as_ptr() as u64, 12_345),
                    (s.as_ptr() as u64 + 12_345, s.len() as u64 - 12_345),
                ]
            })
            .collect();
        let jobs: Vec<PullJob<'_>> = (0..3)
            .map(|k| PullJob {
                remote: &remotes[k],
                dst: &iovs[k],
                len: srcs[k].len(),
            })
            .collect();
        match pull_batch(sys::getpid(), &jobs) {
            Ok(()) => assert_eq!(dsts, srcs),
            Err(e) => assert_eq!(e, Error::OPNOTSUPP, "CMA refused for another reason"),
        }
        // A job whose source is shorter than its length: refused before
        // any copy (the caller then pulls one by one).
        let short = [(srcs[0].as_ptr() as u64, 100u64)];
        let bad = [
            jobs[1],
            PullJob {
                remote: &short,
                ..jobs[0]
            },
        ];
        assert_eq!(pull_batch(sys::getpid(), &bad), Err(Error::INVAL));
    }

    /// A tagged EAGER header for `b` (the tests tell records apart by tag;
    /// a compact header carries the tag only with TAGGED).
    fn eager(b: &[u8]) -> WireHdr {
        let mut h = WireHdr::new(op::EAGER);
        h.flags = proto::flag::TAGGED;
        h.len = b.len() as u64;
        h
    }

    /// The op of every record `b` has now.
    fn ops(b: &mut ShmPort) -> Vec<u8> {
        let mut v = Vec::new();
        b.poll_records(&mut |r| {
            v.push(r.hdr.op);
            Disposition::Consumed
        });
        v
    }

    /// (source, pid reported) of every record `b` has now.
    fn sources(b: &mut ShmPort) -> Vec<(Addr, i32)> {
        let mut v = Vec::new();
        b.poll_records(&mut |r| {
            v.push((r.src, r.src_pid));
            Disposition::Consumed
        });
        v
    }

    #[test]
    fn records_report_the_pid_the_kernel_gave_never_a_claimed_one() {
        let mut a = port();
        let mut b = port();
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        assert_eq!(sources(&mut b), vec![(a.addr(), sys::getpid())]);
        assert!(b.verified_sender(sys::getpid()));
        // A forger claims a slot saying it is process 1 (any pid but its
        // own) and even announces the claim: the kernel says who sent the
        // announcement, so the claim is not believed.
        let seg = Segment::open(b.token).unwrap();
        let liar = SlotSender {
            token: 0x1234,
            pid: 1,
            start: sys::proc_start_time(1).unwrap_or(0),
        };
        let c = seg.claim_slot(liar).unwrap();
        let bell = DoorbellAddr::new(&segment::doorbell_path(b.token)).unwrap();
        Ringer::new()
            .unwrap()
            .send(&bell, &segment::hello_bytes(b.token, c, liar.token))
            .unwrap();
        seg.activate(c, liar);
        let mut out = PeerOut::new(seg, bell, c.slot);
        assert_eq!(write_record(&mut out, &eager(&[2]), &Payload::Bytes(&[2])), Ok(true));
        assert_eq!(sources(&mut b), vec![(Addr::Shm(0x1234), 0)], "unverified: pid 0");
        // CMA is refused for any pid but a verified sender's.
        let mut dst = [0u8; 8];
        let iov = IovList::single(dst.as_mut_ptr() as usize, dst.len());
        let src = [7u8; 8];
        let remote = [(src.as_ptr() as u64, 8u64)];
        assert_eq!(Port::pull(&b, 1, &remote, &iov, 8).err(), Some(Error::CONNRESET));
        assert_eq!(Port::pull(&b, 0, &remote, &iov, 8).err(), Some(Error::CONNRESET));
        assert_eq!(dst, [0u8; 8]);
        match Port::pull(&b, sys::getpid(), &remote, &iov, 8) {
            Ok(8) => assert_eq!(dst, src),
            r => assert_eq!(r.err(), Some(Error::OPNOTSUPP)),
        }
    }

    #[test]
    fn announced_senders_are_taken_in_without_reading_every_slot_word() {
        // Each slot word lies in its own page: reading all 256 on every new
        // sender faulted 1 MiB into every segment and cost O(256) per peer.
        let mut b = port();
        let mut senders: Vec<ShmPort> = (0..8).map(|_| port()).collect();
        for (i, a) in senders.iter_mut().enumerate() {
            a.send_record(&b.addr(), &eager(&[i as u8]), Payload::Bytes(&[i as u8]))
                .unwrap();
        }
        let got = sources(&mut b);
        assert_eq!(got.len(), senders.len());
        for a in &senders {
            assert!(
                got.contains(&(a.addr(), sys::getpid())),
                "every sender delivered, verified"
            );
        }
        assert_eq!(b.scans, 0, "announced senders need no full scan");
        // A claim_seq move that nothing announced explains (a sender that
        // found no free slot) is looked into: every slot word, once.
        Segment::open(b.token).unwrap().nudge();
        b.poll_records(&mut |_| Disposition::Consumed);
        assert_eq!(b.scans, 1);
        // ... and at most every LIVENESS_PERIOD.
        Segment::open(b.token).unwrap().nudge();
        b.poll_records(&mut |_| Disposition::Consumed);
        assert_eq!(b.scans, 1);
        // The scan left due is made by a later pass, claim_seq unmoved,
        // once the period is over (`rare::SCAN_DUE`), and then only once.
        b.last_scan = Some(Instant::now() - LIVENESS_PERIOD);
        b.poll_records(&mut |_| Disposition::Consumed);
        assert_eq!(b.scans, 2, "the scan left due is made by a later pass");
        b.last_scan = Some(Instant::now() - LIVENESS_PERIOD);
        b.poll_records(&mut |_| Disposition::Consumed);
        assert_eq!(b.scans, 2, "nothing due after the scan");
    }

    #[test]
    fn a_peer_that_leaves_its_answers_unread_is_not_consumed_beyond_the_backlog_bound() {
        // a streams requests to b and never consumes b's ring; b answers
        // each (a control record, as the engine does after its pass). Once
        // b's ring to a is full the answers queue in b's backlog, which
        // stops at BACKLOG_MAX (plus one pass's worth of a's ring): a's
        // records then stay in its ring and its sends are refused.
        let mut a = port();
        let mut b = port();
        let mut req = WireHdr::new(op::READ_REQ);
        req.len = 64;
        let (mut sent, mut refused, mut peak) = (0u64, 0u32, 0usize);
        while refused < 64 && sent < 4 * BACKLOG_MAX as u64 {
            while a.send_record(&b.addr(), &req, Payload::None).is_ok() {
                sent += 1;
            }
            let mut outbox = Vec::new();
            b.poll_records(&mut |r| {
                let mut ack = WireHdr::new(op::RMA_ACK);
                ack.msg_id = r.hdr.msg_id;
                outbox.push((r.src, ack));
                Disposition::Consumed
            });
            if outbox.is_empty() {
                refused += 1;
            }
            for (to, h) in outbox {
                b.send_ctl(&to, &h).unwrap();
            }
            let backlog = b.peers.get_mut(a.token).map_or(0, |p| p.backlog.len());
            peak = peak.max(backlog);
        }
        assert!(peak >= BACKLOG_MAX, "the answers filled the bound ({peak})");
        assert!(
            peak <= BACKLOG_MAX + segment::NCELLS,
            "the backlog stopped at its bound ({peak} answers queued)"
        );
        assert!(refused >= 64, "b stopped consuming a's ring ({sent} records sent)");
        // a takes its answers: b consumes a's ring again.
        for _ in 0..BACKLOG_MAX {
            a.poll_records(&mut |_| Disposition::Consumed);
            b.poll_records(&mut |_| Disposition::Consumed);
            if b.peers.get_mut(a.token).is_some_and(|p| p.backlog.is_empty()) {
                break;
            }
        }
        assert!(
            b.peers.get_mut(a.token).is_some_and(|p| p.backlog.is_empty()),
            "drained"
        );
    }

    /// a streams requests to b and never consumes b's ring; b answers each
    /// (a control record). Returns how many records a sent and after how
    /// many passes of b in a row without a record taken it stopped.
    fn flood_unread(a: &mut ShmPort, b: &mut ShmPort, passes: u32) -> (u64, u32) {
        let mut req = WireHdr::new(op::READ_REQ);
        req.len = 64;
        let (mut sent, mut idle) = (0u64, 0u32);
        while idle < passes {
            while a.send_record(&b.addr(), &req, Payload::None).is_ok() {
                sent += 1;
            }
            let mut outbox = Vec::new();
            b.poll_records(&mut |r| {
                let mut ack = WireHdr::new(op::RMA_ACK);
                ack.msg_id = r.hdr.msg_id;
                outbox.push((r.src, ack));
                Disposition::Consumed
            });
            idle = if outbox.is_empty() { idle + 1 } else { 0 };
            for (to, h) in outbox {
                let _ = b.send_ctl(&to, &h);
            }
        }
        (sent, idle)
    }

    #[test]
    fn a_peer_that_stays_at_its_backlog_bound_past_the_timeout_is_cut_off() {
        // Budget: 256 answers (16 KiB of headers), 50 ms. a leaves b's
        // answers unread: b stops consuming a's ring, then, 50 ms on, fails
        // a for cause (its backlog dropped, its ring no longer consumed);
        // c, sending to b meanwhile, is served throughout.
        const BOUND: usize = 256;
        let mut a = port();
        let mut b = port().with_budget(BOUND * HDR_LEN, Duration::from_millis(50));
        let mut c = port();
        flood_unread(&mut a, &mut b, 64);
        let backlog = b.peers.get_mut(a.token).map_or(0, |p| p.backlog.len());
        assert!(
            (BOUND..=BOUND + segment::NCELLS).contains(&backlog),
            "b stopped at its bound ({backlog} answers queued)"
        );
        assert!(b.take_events().is_empty(), "not cut off before the timeout");
        let start = Instant::now();
        let mut served = 0;
        let mut events = Vec::new();
        while events.is_empty() && start.elapsed() < Duration::from_secs(5) {
            c.send_record(&b.addr(), &eager(b"c"), Payload::Bytes(b"c")).unwrap();
            b.poll_records(&mut |r| {
                assert_eq!(r.src, c.addr(), "nothing more of a's is consumed");
                served += 1;
                Disposition::Consumed
            });
            events = b.take_events();
        }
        assert!(start.elapsed() >= Duration::from_millis(40), "cut off at the timeout");
        assert_eq!(events, vec![PeerEvent::Failed(a.addr())], "a alone is cut off");
        assert!(served > 0, "c was served meanwhile");
        let p = b.peers.get_mut(a.token).expect("a's entry is kept (its owner lives)");
        assert!(p.failed && p.backlog.is_empty(), "a's backlog dropped");
        // a takes its answers and sends again: b no longer consumes its ring
        // nor answers it, and c keeps being served.
        a.poll_records(&mut |_| Disposition::Consumed);
        let _ = a.send_record(&b.addr(), &eager(b"a"), Payload::Bytes(b"a"));
        for _ in 0..8 {
            c.send_record(&b.addr(), &eager(b"c"), Payload::Bytes(b"c")).unwrap();
            let mut from = Vec::new();
            b.poll_records(&mut |r| {
                from.push(r.src);
                Disposition::Consumed
            });
            assert_eq!(from, vec![c.addr()]);
        }
        assert_eq!(
            b.send_ctl(&a.addr(), &WireHdr::new(op::RMA_ACK)),
            Err(Error::CONNRESET),
            "nothing more goes to a"
        );
    }

    #[test]
    fn a_control_record_queued_while_another_ring_is_waited_on_goes_out_later() {
        // `rare::BACKLOGGED` alone: a's control records towards b and c
        // are queued (both rings full); c drains first, which ends a's wait
        // on c (the last ring refused) and flushes c's; b drains after: a
        // later pass, with nothing else rare set, must flush b's.
        let mut a = port();
        let mut b = port();
        let mut c = port();
        let mut ctl = WireHdr::new(op::ACK);
        ctl.msg_id = 4242;
        let full = |a: &mut ShmPort, to: &ShmPort| {
            fill(a, to);
            // The cells a large record did not fit in, filled too.
            while a.send_record(&to.addr(), &eager(&[0]), Payload::Bytes(&[0])).is_ok() {}
            a.send_ctl(&to.addr(), &ctl).unwrap();
            assert!(a.rare.get(rare::BACKLOGGED), "queued");
        };
        full(&mut a, &b);
        full(&mut a, &c);
        let drain = |p: &mut ShmPort| {
            let mut ctls = 0;
            for _ in 0..4 {
                p.poll_records(&mut |r| {
                    if r.hdr.op == op::ACK {
                        assert_eq!(r.hdr.msg_id, 4242);
                        ctls += 1;
                    }
                    Disposition::Consumed
                });
            }
            ctls
        };
        let none = |_: InRecord<'_>| -> Disposition { panic!("nothing was sent to a") };
        assert_eq!(drain(&mut c), 0, "c's control record is still queued");
        a.poll_records(&mut none.clone());
        assert!(a.rare.waiting().is_none(), "c took everything a wrote");
        assert_eq!(drain(&mut c), 1, "c's control record went out");
        assert!(a.rare.get(rare::BACKLOGGED), "b's is still queued");
        assert_eq!(drain(&mut b), 0);
        a.poll_records(&mut none.clone());
        assert_eq!(drain(&mut b), 1, "b's control record went out");
        assert!(!a.rare.any(), "nothing queued, nothing waited on");
    }

    #[test]
    fn a_sleepers_doorbell_is_drained_by_every_pass_until_it_wakes() {
        // `rare::SLEEPING`: with a sleeper announced, every record's sender
        // rings the doorbell; the pass that takes the record drains it (or
        // the sleeper would wake at once forever). Contact first, so that
        // no new sender's arrival drains it instead.
        let mut a = port();
        let mut b = port();
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        assert_eq!(sources(&mut b).len(), 1);
        b.set_sleepers(1);
        for i in 0..3u8 {
            a.send_record(&b.addr(), &eager(&[i]), Payload::Bytes(&[i])).unwrap();
            assert!(sys::poll_readable(b.wait_fd(), Some(Duration::ZERO)), "rung");
            assert_eq!(sources(&mut b).len(), 1);
            assert!(
                !sys::poll_readable(b.wait_fd(), Some(Duration::ZERO)),
                "the pass drained the doorbell"
            );
        }
        // Awake again: the next pass clears the condition.
        b.set_sleepers(0);
        b.poll_records(&mut |_| Disposition::Consumed);
        assert!(!b.rare.any());
    }

    #[test]
    fn a_full_doorbell_leaves_a_sender_unverified_not_unreachable() {
        let mut b = port();
        let bell = DoorbellAddr::new(&segment::doorbell_path(b.token)).unwrap();
        let junk = Ringer::new().unwrap();
        let mut queued = 0;
        while junk.ring(&bell) {
            queued += 1;
            assert!(queued < 100_000);
        }
        let mut a = port();
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        assert_eq!(sources(&mut b), vec![(a.addr(), 0)], "delivered, pid unverified");
        // The owner read its doorbell while taking `a` in: the next sender
        // is verified.
        let mut c = port();
        c.send_record(&b.addr(), &eager(&[2]), Payload::Bytes(&[2])).unwrap();
        assert_eq!(sources(&mut b), vec![(c.addr(), sys::getpid())]);
    }

    #[test]
    fn slots_of_dead_senders_are_reclaimed_live_ones_kept() {
        let mut b = port();
        let seg = Segment::open(b.token).unwrap();
        let me = sys::getpid();
        let start = sys::proc_start_time(me).unwrap();
        // Every slot taken: 200 by "senders" that died (an earlier
        // incarnation of our pid), 20 claimed-not-activated by a pid that
        // cannot exist, the rest by live ones (us).
        let dead = SlotSender {
            token: 1,
            pid: me,
            start: start + 1,
        };
        let live = SlotSender {
            token: 2,
            pid: me,
            start,
        };
        let never = SlotSender {
            token: 3,
            pid: 0x7fff_fff0,
            start: 0,
        };
        let mut live_slots = Vec::new();
        for i in 0..NSLOTS {
            match i {
                0..200 => {
                    let c = seg.claim_slot(dead).unwrap();
                    seg.activate(c, dead);
                }
                200..220 => {
                    seg.claim_slot(never).unwrap();
                }
                _ => {
                    let c = seg.claim_slot(live).unwrap();
                    seg.activate(c, live);
                    live_slots.push(c.slot);
                }
            }
        }
        assert_eq!(seg.claim_slot(live).err(), Some(Error::AGAIN));
        // A new sender finds no slot now, and one once the owner has looked.
        let mut c = port();
        let msg = [5u8; 3];
        assert_eq!(
            c.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).err(),
            Some(Error::AGAIN)
        );
        b.poll_records(&mut |_| Disposition::Consumed);
        b.poll_records(&mut |_| Disposition::Consumed);
        c.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).unwrap();
        assert_eq!(sources(&mut b), vec![(c.addr(), me)]);
        let free = (0..NSLOTS).filter(|&s| seg.slot_state(s) == SLOT_FREE).count();
        assert_eq!(free, 220 - 1, "dead and never-activated slots freed, one taken by c");
        for s in live_slots {
            assert_eq!(seg.slot_state(s), SLOT_ACTIVE, "a live sender keeps its slot");
        }
    }

    /// Polls `b` until its rings have gone idle (unwatched), however few.
    fn idle_out(b: &mut ShmPort) {
        b.hot_keep = 0;
        for _ in 0..2 * EVICT_PERIOD {
            b.poll_records(&mut |_| panic!("nothing was sent"));
        }
    }

    #[test]
    fn idle_rings_are_not_polled_and_their_next_record_is_signalled() {
        let mut b = port();
        let mut senders: Vec<ShmPort> = (0..8).map(|_| port()).collect();
        for a in senders.iter_mut() {
            a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        }
        assert_eq!(sources(&mut b).len(), 8);
        assert_eq!(b.inbound.nhot, 8, "rings that just carried records are polled");
        idle_out(&mut b);
        assert_eq!(b.inbound.nhot, 0, "idle rings are still polled on every pass");
        // The next record of an idle sender is found on the next pass.
        senders[5]
            .send_record(&b.addr(), &eager(&[2]), Payload::Bytes(&[2]))
            .unwrap();
        assert_eq!(sources(&mut b), vec![(senders[5].addr(), sys::getpid())]);
        assert_eq!(b.inbound.nhot, 1);
    }

    #[test]
    fn a_few_idle_rings_stay_watched() {
        let mut b = port();
        let mut senders: Vec<ShmPort> = (0..HOT_KEEP + 1).map(|_| port()).collect();
        for a in senders.iter_mut().take(HOT_KEEP) {
            a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        }
        assert_eq!(sources(&mut b).len(), HOT_KEEP);
        for _ in 0..4 * EVICT_PERIOD {
            b.poll_records(&mut |_| panic!("nothing was sent"));
        }
        assert_eq!(b.inbound.nhot, HOT_KEEP, "HOT_KEEP idle rings stay watched");
        // One more: now the idle ones go.
        senders[HOT_KEEP]
            .send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1]))
            .unwrap();
        assert_eq!(sources(&mut b).len(), 1);
        for _ in 0..4 * EVICT_PERIOD {
            b.poll_records(&mut |_| panic!("nothing was sent"));
        }
        assert_eq!(b.inbound.nhot, 0, "above HOT_KEEP idle rings are unwatched");
    }

    #[test]
    fn an_idle_sender_that_closes_gets_its_slot_freed() {
        let mut a = port();
        let mut b = port();
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        assert_eq!(sources(&mut b).len(), 1);
        idle_out(&mut b);
        a.close();
        let got = sources(&mut b);
        assert_eq!(got.len(), 1, "the BYE");
        assert_eq!(b.inbound.iter().count(), 0, "the closed slot is not freed");
    }

    #[test]
    fn an_unsignalled_record_in_an_idle_ring_is_found_before_sleeping() {
        // A sender that died between publishing and signalling: its record
        // keeps a waiter from sleeping, and the pass after announcing a
        // sleeper finds it.
        let mut a = port();
        let mut b = port();
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
        assert_eq!(sources(&mut b).len(), 1);
        idle_out(&mut b);
        let Addr::Shm(t) = b.addr() else { unreachable!() };
        let p = a.peers.get_mut(t).unwrap();
        assert_eq!(write_record(p, &eager(&[3]), &Payload::Bytes(&[3])), Ok(true));
        assert!(sources(&mut b).is_empty(), "not signalled, not watched");
        assert!(b.has_pending());
        b.set_sleepers(1);
        assert_eq!(sources(&mut b).len(), 1);
        b.set_sleepers(0);
    }

    #[test]
    fn unknown_peer_is_unreachable() {
        let mut a = port();
        let h = WireHdr::new(op::ACK);
        assert!(a
            .send_record(&Addr::Shm(0x1111_2222_3333_4444), &h, Payload::None)
            .is_err());
    }
}
