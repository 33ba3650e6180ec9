//! The data the engine's state is made of, below the code that works on
//! it: the operations each path keeps (sends, receives being placed or
//! streamed, pulls, RMA and atomic operations), how an operation reports
//! its completion, the backpressure stall watch, and the RMA and atomic
//! call arguments. Defines no behaviour of `State`: `send.rs`, `recv.rs`,
//! `rendezvous.rs`, `rma.rs`, `atomic.rs` and `stall.rs` do.

use super::matching::{IovList, PostedRecv, RtsInfo};
use crate::abi::*;
use crate::base::collections::{FastMap, Slab};
use crate::base::error::{Error, Result};
use crate::core::atomic::AtomicKind;
use crate::core::cntr::Cntr;
use crate::core::mr::MrMap;
use crate::core::users::Held;
use crate::transport::addr::Addr;
use crate::transport::proto::WireHdr;
use crate::transport::{Port, Sent};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How an operation's completion is reported.
#[derive(Clone, Copy, Debug)]
pub(super) struct Report {
    /// A CQ entry on success: not an `fi_inject*` call, not suppressed by
    /// selective completion. Errors are always reported (fi_cq(3)).
    pub(super) on_success: bool,
    /// The operation holds the CQ slot it claimed at post time
    /// (FI_RM_ENABLED admission), which its completion uses or gives back.
    pub(super) slot: bool,
    /// An `fi_inject*` call: the application gave no context, so a failure
    /// makes no CQ error entry ([`tx_error`](super::completion::tx_error)).
    pub(super) inject: bool,
    /// The transmit context of a scalable endpoint the operation was
    /// posted on (`lanes.rs`; 0 on other endpoints).
    pub(super) lane: u8,
}

/// A payload being placed into a matched receive (two-phase delivery).
pub(super) struct Inflight {
    pub(super) recv: PostedRecv,
    pub(super) src: Addr,
    pub(super) hdr: WireHdr,
    pub(super) buf: usize,
    pub(super) take: usize,
    pub(super) extra_flags: u64,
}

pub(super) enum TxState {
    /// Queued in the transport; then done, or waiting for an ACK (`ack`).
    /// `acked`: the peer's ACK (its status) came before the transport
    /// reported the record written — a record the connection queued is
    /// reported at the next pass, and its answer can be read in the same
    /// one; the send completes when the write is reported, never before.
    WaitSent { ack: bool, acked: Option<i32> },
    /// Waiting for the receiver's ACK.
    WaitAck,
    /// Streaming DATA records for receiver handle `handle`, bytes
    /// `off .. end` (a ranged CTS asks for part of the message).
    Streaming { handle: u32, off: usize, end: usize },
    /// A split CTS asked us to push bytes `off .. end` into receiver pid
    /// `pid`'s buffer `table` (checked to cover exactly that part); the
    /// next pump writes them and answers `PUSHED`, then waits for the ACK.
    Pushing {
        handle: u32,
        off: usize,
        end: usize,
        pid: i32,
        table: Box<[(u64, u64)]>,
    },
}

pub(super) struct TxOp {
    pub(super) peer: Addr,
    pub(super) context: usize,
    pub(super) tagged: bool,
    pub(super) len: usize,
    pub(super) iov: IovList,
    pub(super) state: TxState,
    pub(super) report: Report,
    /// The eager limit towards this peer (DATA chunk size when streaming).
    pub(super) eager_limit: usize,
}

/// A receive being filled by DATA records (no-CMA rendezvous).
pub(super) struct RxStream {
    pub(super) recv: PostedRecv,
    pub(super) dst: IovList,
    pub(super) buf: usize,
    pub(super) src: Addr,
    pub(super) src_pid: i32,
    pub(super) hdr: WireHdr,
    pub(super) take: usize,
    pub(super) got: usize,
    pub(super) extra_flags: u64,
    pub(super) last_check: Instant,
    /// Bytes of the DATA record being placed (0: none in flight).
    pub(super) chunk: usize,
    /// A split receive (no DATA: the receiver pulled its part, the sender
    /// pushes the rest and answers `PUSHED`).
    pub(super) split: Option<Box<Split>>,
    /// Filled by the DATA|PUSH records the sender wrote right behind its
    /// RTS (a message pushed whole), found by message id, not by handle.
    pub(super) pushed: bool,
}

impl RxStream {
    /// The receive of matched message `p` waiting for its data: streamed
    /// (`split_at` none) or split at `split_at` (the sender pushes the rest).
    pub(super) fn of(p: PendingPull, buf: usize, take: usize, split_at: Option<usize>) -> RxStream {
        let PendingPull {
            recv,
            dst,
            src,
            src_pid,
            hdr,
            rts,
            extra_flags,
            range: _,
        } = p;
        RxStream {
            recv,
            dst,
            buf,
            src,
            src_pid,
            hdr,
            take,
            got: 0,
            extra_flags,
            last_check: Instant::now(),
            chunk: 0,
            split: split_at.map(|at| Box::new(Split { rts, at, first: Ok(()) })),
            pushed: false,
        }
    }

    /// Back to a matched message to pull (`range`: only those bytes), the
    /// inverse of [`RxStream::of`] (`rts` from its split).
    pub(super) fn into_pull(self, rts: RtsInfo, range: Option<(usize, usize)>) -> PendingPull {
        PendingPull {
            recv: self.recv,
            dst: self.dst,
            src: self.src,
            src_pid: self.src_pid,
            hdr: self.hdr,
            rts,
            extra_flags: self.extra_flags,
            range,
        }
    }
}

/// A split rendezvous receive (docs/protocol.md): the receiver pulled
/// bytes `0 .. at` itself and asked the sender (`CTS|SPLIT`) to push bytes
/// `at .. take` into the receive buffer.
pub(super) struct Split {
    pub(super) rts: RtsInfo,
    pub(super) at: usize,
    /// The receiver's own pull (an error waits for the sender's answer:
    /// the sender may still be writing into the buffer).
    pub(super) first: Result<()>,
}

/// Split points are multiples of this (page-aligned halves).
pub(super) const SPLIT_ALIGN: usize = 4096;

/// For each pending pull, whether no neighbour in the list has its sender
/// (and pid): `pull_batches` joins only consecutive pulls of one sender,
/// so it can join nothing to a lone one, and copying it with the sender's
/// help (a split) costs no batch. A ping-pong's every message is lone; a
/// window of sends arriving together is not.
pub(super) fn lone_pulls(pulls: &[PendingPull]) -> Vec<bool> {
    let same = |a: &PendingPull, b: &PendingPull| a.src == b.src && a.src_pid == b.src_pid;
    (0..pulls.len())
        .map(|i| {
            let p = &pulls[i];
            let before = i > 0 && same(&pulls[i - 1], p);
            let after = pulls.get(i + 1).is_some_and(|q| same(p, q));
            !before && !after
        })
        .collect()
}

/// Placement handles of streamed receives have this bit set (in-flight
/// eager placements use slab handles below it).
pub(super) const STREAM_HANDLE: u32 = 1 << 31;

/// `TxState::Streaming`'s handle while a sender pushes a message whole
/// behind its RTS: its DATA records carry `flag::PUSH` and no receiver
/// handle (the receiver finds the receive by message id). A CTS replaces it.
pub(super) const PUSH_WHOLE: u32 = u32::MAX;

/// Most pulls one `SingleCopy::pull_batch` takes (each job's ranges are at most
/// `IOV_MAX` per side: 64 jobs stay below the kernel's 1024).
pub(super) const PULL_BATCH_MAX: usize = 64;

/// A matched rendezvous message whose data is still to be fetched.
pub(super) struct PendingPull {
    pub(super) recv: PostedRecv,
    pub(super) dst: IovList,
    pub(super) src: Addr,
    pub(super) src_pid: i32,
    pub(super) hdr: WireHdr,
    pub(super) rts: RtsInfo,
    pub(super) extra_flags: u64,
    /// Only bytes `lo .. hi` are missing (the part of a split message that
    /// was not pushed); the receive completes with the whole message.
    pub(super) range: Option<(usize, usize)>,
}

/// How long a stall lasts before it is logged.
pub(super) const STALL_LOG_AFTER: Duration = Duration::from_millis(100);

/// Refusals further apart than this belong to different stalls.
pub(super) const STALL_GAP: Duration = Duration::from_millis(50);

/// The stalls under way: of our sends, and of peers' messages held back.
#[derive(Default)]
pub(super) struct Stalls {
    pub(super) tx: StallWatch,
    pub(super) rx: StallWatch,
}

/// The stall under way in one direction (towards peers, or from them).
#[derive(Default)]
pub(super) struct StallWatch {
    pub(super) cur: Option<Stall>,
}

pub(super) struct Stall {
    pub(super) peer: Addr,
    pub(super) since: Instant,
    pub(super) last: Instant,
    pub(super) logged: bool,
}

impl StallWatch {
    /// A refusal involving `peer` at `now`: the stall's length when this
    /// refusal makes it pass [`STALL_LOG_AFTER`] (once per stall), else
    /// `None`.
    pub(super) fn note(&mut self, peer: &Addr, now: Instant) -> Option<Duration> {
        let s = match &mut self.cur {
            Some(s) if s.peer == *peer && now.saturating_duration_since(s.last) <= STALL_GAP => s,
            cur => cur.insert(Stall {
                peer: *peer,
                since: now,
                last: now,
                logged: false,
            }),
        };
        s.last = now;
        let lasted = now.saturating_duration_since(s.since);
        if s.logged || lasted < STALL_LOG_AFTER {
            return None;
        }
        s.logged = true;
        Some(lasted)
    }
}

/// RMA operation ids carry this bit: message ids count from 1 and never
/// reach it, so a transport's `sent` report or a stray `ACK` for an RMA
/// record can never complete a send.
pub(super) const RMA_ID: u64 = 1 << 63;
/// Placement handles of RMA chunks (below the rendezvous and buffered bits,
/// above any slab handle of in-flight receives).
pub(super) const RMA_HANDLE: u32 = 1 << 29;
/// Most target segments one operation may name (`rma_iov_limit`).
pub(crate) const RMA_IOV_MAX: usize = 8;
/// Reads being served and writes waiting to be pulled, at most, per
/// endpoint: beyond it a request stays with the transport (backpressure).
pub(super) const MAX_JOBS: usize = 1024;
/// Segments remembered as spoiled (a chunk refused before the last one).
pub(super) const MAX_SPOILED: usize = 4096;
/// Chunks below this are not sent while more of the segment remains (the
/// transport has too little room now: wait for more).
pub(super) const MIN_CHUNK: usize = 4096;

/// One target segment (`struct fi_rma_iov`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RmaIov {
    pub(crate) addr: u64,
    pub(crate) len: usize,
    pub(crate) key: u64,
}

impl RmaIov {
    /// The header of an initiator's record for this segment (`WRITE`,
    /// `ATOMIC`): operation `id`, segment number `seg`, key, address and
    /// length; the caller adds what its kind carries.
    pub(super) fn header(&self, kind: u8, id: u64, seg: usize) -> WireHdr {
        let mut h = WireHdr::new(kind);
        h.msg_id = id;
        h.aux = seg as u32;
        h.tag = self.key;
        h.offset = self.addr;
        h.len = self.len as u64;
        h
    }
}

/// The target segments of one operation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RmaIovList {
    pub(super) n: usize,
    pub(super) seg: [RmaIov; RMA_IOV_MAX],
}

impl RmaIovList {
    pub(crate) fn single(addr: u64, len: usize, key: u64) -> RmaIovList {
        let mut l = RmaIovList::default();
        l.push(RmaIov { addr, len, key });
        l
    }

    /// Appends a segment; false if the list is full.
    pub(crate) fn push(&mut self, s: RmaIov) -> bool {
        if self.n == RMA_IOV_MAX {
            return false;
        }
        self.seg[self.n] = s;
        self.n += 1;
        true
    }

    pub(crate) fn segments(&self) -> &[RmaIov] {
        &self.seg[..self.n]
    }

    /// Total bytes (None on overflow).
    pub(crate) fn total(&self) -> Option<usize> {
        self.segments().iter().try_fold(0usize, |t, s| t.checked_add(s.len))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RmaKind {
    Read,
    Write,
}

/// An RMA operation as the thunks describe it.
pub(crate) struct RmaArgs {
    pub(crate) kind: RmaKind,
    pub(crate) dest: fi_addr_t,
    pub(crate) local: IovList,
    pub(crate) remote: RmaIovList,
    /// Remote CQ data (`fi_writedata`, `FI_REMOTE_CQ_DATA`).
    pub(crate) data: Option<u64>,
    /// Effective operation flags.
    pub(crate) flags: u64,
    pub(crate) context: usize,
    /// `fi_inject_write*`: buffer reusable on return, no completion.
    pub(crate) inject_call: bool,
}

/// The counters `fi_ep_bind` attaches for RMA events.
#[derive(Default)]
pub(crate) struct RmaBinds {
    pub(crate) read: Option<Held<Cntr>>,
    pub(crate) write: Option<Held<Cntr>>,
    pub(crate) remote_read: Option<Held<Cntr>>,
    pub(crate) remote_write: Option<Held<Cntr>>,
}

/// [`RmaBinds`] as the engine uses them during one call.
#[derive(Clone, Copy, Default)]
pub(crate) struct RmaBound<'a> {
    pub(crate) read: Option<&'a Cntr>,
    pub(crate) write: Option<&'a Cntr>,
    pub(crate) remote_read: Option<&'a Cntr>,
    pub(crate) remote_write: Option<&'a Cntr>,
}

impl<'a> From<&'a RmaBinds> for RmaBound<'a> {
    fn from(b: &'a RmaBinds) -> RmaBound<'a> {
        RmaBound {
            read: b.read.as_deref(),
            write: b.write.as_deref(),
            remote_read: b.remote_read.as_deref(),
            remote_write: b.remote_write.as_deref(),
        }
    }
}

/// When an operation that brings no data back (a write, a non-fetching
/// atomic) may complete before the target answers (fi_cq(3), COMPLETION
/// EVENT SEMANTICS; docs/rma.md, Completions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Early {
    /// Only once the target answered: `FI_DELIVERY_COMPLETE` or
    /// `FI_COMMIT_COMPLETE` asked, or `FI_TRANSMIT_COMPLETE` named on a
    /// transport whose sent records are not yet the peer's (tcp).
    No,
    /// When its last record is in the target's queue (shm: transmit
    /// complete): that record asks no answer (`NO_ANSWER`).
    Queued,
    /// tcp with `FI_INJECT_COMPLETE` or no level named (the provider
    /// default, as libfabric's tcp): when its last record is written to
    /// the socket (`Sent::Done`; the buffer is the caller's again, the data
    /// still depends on the network, which is all inject complete
    /// promises). The target still answers; the late answer finds no
    /// operation and is dropped (a refusal is then only logged by the
    /// target). Queued behind earlier records, it waits for the answer as
    /// before.
    Written,
}

impl Early {
    pub(super) fn of(port: &dyn Port, peer: &Addr, flags: u64) -> Early {
        if flags & (FI_DELIVERY_COMPLETE | FI_COMMIT_COMPLETE) != 0 {
            Early::No
        } else if port.queued_at_peer(peer) {
            Early::Queued
        } else if flags & FI_TRANSMIT_COMPLETE != 0 {
            Early::No
        } else {
            Early::Written
        }
    }

    /// Whether the operation's last record, just sent (`sent`), completes
    /// it.
    pub(super) fn done(self, sent: Sent) -> bool {
        match self {
            Early::No => false,
            Early::Queued => true,
            Early::Written => sent == Sent::Done,
        }
    }
}

/// Where the current segment of an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Its request (or first chunk) has not gone out yet.
    Start,
    /// Write chunks going out: `off` bytes of the segment so far.
    Push { off: usize },
    /// Everything sent; waiting for the target's `RMA_ACK`.
    WaitAck,
    /// Everything sent, and that completes it ([`Early`]): the caller of
    /// `rma_advance` completes it now.
    Sent,
    /// A read: `got` bytes of `READ_RESP` so far (`chunk`: bytes of the one
    /// being placed), or an `RMA_ACK` (CMA done, or an error).
    Reading { got: usize, chunk: usize },
}

/// An operation this endpoint initiated.
pub(super) struct Op {
    pub(super) peer: Addr,
    pub(super) kind: RmaKind,
    pub(super) context: usize,
    pub(super) local: IovList,
    pub(super) remote: RmaIovList,
    /// The current segment and its first byte in `local`.
    pub(super) seg: usize,
    pub(super) seg_off: usize,
    pub(super) phase: Phase,
    pub(super) data: Option<u64>,
    pub(super) report: Report,
    pub(super) len: usize,
    /// Write chunk size towards the peer (`Port::chunk_limit_for`: its
    /// eager limit on shm, up to 1 MiB on tcp).
    pub(super) chunk: usize,
    /// The peer is on this host and cross-memory attach is allowed.
    pub(super) cma: bool,
    /// `fi_inject_write*`/`FI_INJECT`: the caller's buffer is its own again
    /// when the call returns.
    pub(super) inject: bool,
    /// An injected write's own copy of its data (`local` points into it).
    pub(super) owned: Option<Box<[u8]>>,
    /// When a write may complete before the target answers.
    pub(super) early: Early,
}

impl Op {
    pub(super) fn segment(&self) -> RmaIov {
        self.remote.segments()[self.seg]
    }
    pub(super) fn final_seg(&self) -> bool {
        self.seg + 1 == self.remote.n
    }
}

/// A chunk being placed.
pub(super) enum Placing {
    /// At the target: a `WRITE` chunk going into registered memory.
    Write { src: Addr, hdr: WireHdr },
    /// At the initiator: `n` bytes of `READ_RESP` for operation `id`.
    Read { id: u64, n: usize },
    /// An atomic record (`core/engine/atomic.rs`).
    Atomic(AtomicPlacing),
}

/// A request the target works on after the transport's pass: a read to
/// serve (streamed, or pushed by CMA when `table` is not empty), or a
/// `WRITE_REQ` to pull.
pub(super) struct Job {
    pub(super) src: Addr,
    pub(super) src_pid: i32,
    pub(super) hdr: WireHdr,
    /// The initiator's buffer (CMA).
    pub(super) table: Vec<(u64, u64)>,
    /// Read response bytes sent so far.
    pub(super) off: usize,
}

/// The engine's RMA state (atomics too: `core/engine/atomic.rs`).
#[derive(Default)]
pub(super) struct Rma {
    /// The domain's registrations (targets check every access here).
    pub(super) mrs: Option<Arc<MrMap>>,
    pub(super) ops: FastMap<u64, Op>,
    /// Operations with something to send (phase `Start` or `Push`).
    pub(super) sending: Vec<u64>,
    /// The previous pass's `sending` (empty; kept for its capacity: a pass
    /// allocates nothing).
    pub(super) sending_spare: Vec<u64>,
    /// Peers whose ring had no room earlier in this pass: the operations
    /// and reads queued behind them wait for the next pass without being
    /// looked at (a full window towards one peer costs a pass one attempt,
    /// not one per operation).
    pub(super) blocked: Vec<Addr>,
    pub(super) next: u64,
    pub(super) placing: Slab<Placing>,
    /// Atomic operations this endpoint initiated, and those of them with a
    /// record to send.
    pub(super) atomics: FastMap<u64, AtomicOp>,
    pub(super) atomic_sending: Vec<u64>,
    /// Answers to atomics this target executed, waiting for room.
    pub(super) replies: VecDeque<AtomicReply>,
    /// Buffers for atomics' values, reused ([`BufPool`]).
    pub(super) bufs: BufPool,
    /// The target's working copy of a segment under the atomic lock
    /// (reused).
    pub(super) scratch: Vec<u8>,
    pub(super) reads: VecDeque<Job>,
    pub(super) pulls: VecDeque<Job>,
    /// (initiator, operation, segment) whose chunk was refused before the
    /// segment's last one: the last one reports that error.
    pub(super) spoiled: FastMap<(Addr, u64, u32), Error>,
    pub(super) tick: u32,
    /// Set whenever an operation, a job or an answer is queued; cleared by
    /// the pass that finds nothing left ([`Rma::any`]). The one word every
    /// progress pass reads to skip RMA and atomics when idle (never false
    /// while something is queued; possibly true for one pass after).
    pub(super) active: bool,
}

impl Rma {
    pub(super) fn outstanding(&self) -> usize {
        self.ops.len() + self.atomics.len()
    }

    /// Whether anything waits on a peer (liveness checks needed): the
    /// cheap check of every pass.
    pub(super) fn busy(&self) -> bool {
        self.active
    }

    /// Targets that may be writing into this endpoint's memory now: those
    /// of reads whose `READ_REQ` offered our buffer's table (`CMA_OK`) and
    /// are not answered yet (the target pushes with `process_vm_writev`).
    pub(super) fn pushers(&self) -> impl Iterator<Item = &Addr> + '_ {
        self.ops
            .values()
            .filter(|op| {
                op.kind == RmaKind::Read
                    && matches!(op.phase, Phase::Reading { .. })
                    && op.cma
                    && op.segment().len > op.chunk
            })
            .map(|op| &op.peer)
    }

    /// Something was queued (an operation, a job, an answer).
    pub(super) fn mark_active(&mut self) {
        self.active = true;
    }

    /// Whether anything is queued at all (what [`Rma::busy`] caches).
    pub(super) fn any(&self) -> bool {
        !self.ops.is_empty()
            || !self.reads.is_empty()
            || !self.pulls.is_empty()
            || !self.atomics.is_empty()
            || !self.replies.is_empty()
    }

    /// A fresh operation id (RMA and atomics share them).
    pub(super) fn next_id(&mut self) -> u64 {
        let id = RMA_ID | self.next;
        self.next = (self.next + 1) & !RMA_ID;
        id
    }
}

/// Answers waiting for room, at most: beyond it atomic records stay with
/// the transport (backpressure).
pub(super) const MAX_REPLIES: usize = 1024;

/// Byte buffers an endpoint keeps for reuse, at most, and the largest
/// capacity it keeps (larger ones, from atomics on many elements, are
/// freed): at most 16 KiB per endpoint. See [`BufPool`].
pub(super) const POOL_MAX: usize = 64;
pub(super) const POOL_BUF_MAX: usize = 256;

/// The byte buffers atomics need (an operation's operand and compare
/// values, a target's staged request and its answer's former values),
/// given back when done and taken again by the next atomic, so that an
/// atomic on a few elements allocates nothing in steady state. Bounded:
/// at most [`POOL_MAX`] buffers of at most [`POOL_BUF_MAX`] bytes are kept.
#[derive(Default)]
pub(super) struct BufPool {
    pub(super) free: Vec<Vec<u8>>,
}

impl BufPool {
    /// An empty buffer (with the capacity of one given back, if any).
    pub(super) fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_default()
    }

    /// Keeps `v` for a later [`BufPool::take`] (or frees it when the pool
    /// is full or `v` is large).
    pub(super) fn give(&mut self, mut v: Vec<u8>) {
        if self.free.len() < POOL_MAX && v.capacity() != 0 && v.capacity() <= POOL_BUF_MAX {
            v.clear();
            self.free.push(v);
        }
    }
}

/// Serialises every atomic this process executes as a target.
pub(super) static ATOMIC_LOCK: parking_lot::Mutex<()> = parking_lot::const_mutex(());

/// An atomic call as the thunks describe it (bytes, not elements).
pub(crate) struct AtomicArgs {
    pub(crate) kind: AtomicKind,
    pub(crate) op: u32,
    pub(crate) datatype: u32,
    pub(crate) dest: fi_addr_t,
    /// The operand buffers (none for `FI_ATOMIC_READ`).
    pub(crate) operand: IovList,
    /// The compare buffers (compare calls only).
    pub(crate) compare: IovList,
    /// Where fetch and compare calls want the former values.
    pub(crate) result: IovList,
    pub(crate) remote: RmaIovList,
    pub(crate) data: Option<u64>,
    pub(crate) flags: u64,
    pub(crate) context: usize,
    /// `fi_inject_atomic`: no completion.
    pub(crate) inject_call: bool,
}

/// An atomic operation this endpoint initiated.
pub(super) struct AtomicOp {
    pub(super) peer: Addr,
    pub(super) kind: AtomicKind,
    pub(super) op: u32,
    pub(super) datatype: u32,
    pub(super) context: usize,
    pub(super) report: Report,
    /// The operand values (`operand_len` bytes), then the compare values
    /// (compare calls: `len` bytes); a buffer of the pool, given back when
    /// the operation ends.
    pub(super) bytes: Vec<u8>,
    pub(super) operand_len: usize,
    pub(super) result: IovList,
    pub(super) remote: RmaIovList,
    pub(super) data: Option<u64>,
    /// The current segment and its first byte in the operand.
    pub(super) seg: usize,
    pub(super) seg_off: usize,
    /// Its record went out; waiting for the answer.
    pub(super) waiting: bool,
    /// When it may complete without the target's answer (non-fetching).
    pub(super) early: Early,
    /// Its last record went out and that completed it (`early`): the
    /// caller of `atomic_advance` completes it now.
    pub(super) sent: bool,
    pub(super) len: usize,
}

impl AtomicOp {
    pub(super) fn segment(&self) -> RmaIov {
        self.remote.segments()[self.seg]
    }
}

/// An atomic record being placed.
pub(super) enum AtomicPlacing {
    /// At the target: the payload of an `ATOMIC` record, staged.
    Request { src: Addr, hdr: WireHdr, buf: Vec<u8> },
    /// At the initiator: the former bytes of segment `aux` of `id`.
    Response { id: u64 },
}

/// An answer the target owes (sent when there is room).
pub(super) struct AtomicReply {
    pub(super) to: Addr,
    pub(super) hdr: WireHdr,
    pub(super) old: Vec<u8>,
}
