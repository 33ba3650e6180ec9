//! RMA (`fi_rma(3)`): the initiator's operations and the target's side of
//! them, on top of any transport (docs/rma.md has the records and the
//! reasons).
//!
//! * An operation names local buffers (an [`IovList`]) and up to
//!   [`RMA_IOV_MAX`] target segments ([`RmaIov`]: address, length, key).
//!   Its segments go one after the other: the next starts when the target
//!   acknowledged the previous one, so the target's remote event (counter,
//!   CQ data), sent with the operation's last (`FINAL`) segment, follows
//!   every byte of the operation.
//! * **Write**: the data goes in `WRITE` chunks (at most the eager limit
//!   each, as the transport has room); the target checks the key, the
//!   range and the access right of the whole segment for every chunk,
//!   places the chunk straight into registered memory (the shm ring copy,
//!   or the TCP reader's `readv`), and answers `RMA_ACK` after the segment's
//!   last chunk. A large write to an shm peer is a `WRITE_REQ` naming the
//!   initiator's buffer instead: the target checks the segment and pulls it
//!   with `process_vm_readv` (one copy), or answers `FI_EOPNOTSUPP` and the
//!   initiator sends chunks.
//! * **Read**: `READ_REQ`; the target checks the segment and answers
//!   `READ_RESP` chunks (checked again before each, placed straight into the
//!   initiator's buffer), or — a large read from an shm peer that named its
//!   buffer — writes the data into the initiator with `process_vm_writev`
//!   and answers `RMA_ACK`.
//! * A refused access (unknown key: `FI_EINVAL`; out of the region, right
//!   not granted, region disabled, endpoint not an RMA target:
//!   `FI_EACCES`) is an `RMA_ACK` with the code; the target's memory is
//!   never touched, and the initiator's operation completes in error.
//! * Completions: a read completes once its last byte is placed; a write
//!   once the target answered its last segment (`RMA_ACK`: delivery
//!   complete) — or, unless `FI_DELIVERY_COMPLETE` (or commit) was asked,
//!   as soon as its last chunk is in the target's queue ([`Early`]: shm,
//!   transmit complete; the chunk says `NO_ANSWER`, and a target that
//!   refuses it logs the refusal, as there is nobody left to tell); on tcp,
//!   unless transmit complete was named too, as soon as its last chunk is
//!   written to the socket (inject complete, the provider default). The
//!   segments before the last one are still answered one by one.
//!   `fi_inject_write` and `FI_INJECT`: the data is copied or on its way
//!   when the call returns, no completion. Counters: `FI_WRITE`/`FI_READ` at the initiator,
//!   `FI_REMOTE_WRITE`/`FI_REMOTE_READ` at the target (once per
//!   operation); remote CQ data is a completion on the target's receive
//!   CQ (`FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA`).
//! * Failure: a peer that fails completes the operations that wait on it
//!   with `PEER_FAILED`; the target drops what it was serving it.

use super::buffered::BUF_HANDLE;
use super::completion::{cq_success, tx_error};
use super::matching::IovList;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::collections::FastSet;
use crate::base::error::{Error, Result};
use crate::core::cq::{CqEntry, CqErrEntry};
use crate::core::mr::MrMap;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr, IOV_ENTRY};
use crate::transport::{Disposition, Payload, PayloadIn, Port};
use core::ffi::c_void;
use std::collections::VecDeque;
use std::sync::Arc;

/// A write or atomic the initiator completed at transmit (`NO_ANSWER`) was
/// refused here: nobody is left to tell but the log (docs/rma.md,
/// Completions). Target memory was not touched.
pub(super) fn refused_unanswered(what: &str, from: &Addr, h: &WireHdr, e: Error) {
    crate::base::log::log_warn!(
        FI_LOG_EP_DATA,
        "{what} from {from:?} refused ({e}): key {:#x}, address {:#x}, {} bytes; the initiator completed it at \
         transmit (it did not ask FI_DELIVERY_COMPLETE), so only this log reports it",
        h.tag,
        h.offset,
        h.len
    );
}

/// Whether a placement handle is an RMA chunk's.
pub(super) fn owns_handle(h: u32) -> bool {
    h & (STREAM_HANDLE | BUF_HANDLE) == 0 && h & RMA_HANDLE != 0
}

fn iov_table(l: &IovList) -> (Vec<u8>, u64) {
    let segs = l.segments();
    let mut t = Vec::with_capacity(segs.len() * IOV_ENTRY);
    for &(p, n) in segs {
        t.extend_from_slice(&(p as u64).to_le_bytes());
        t.extend_from_slice(&(n as u64).to_le_bytes());
    }
    (t, segs.len() as u64)
}

/// The (address, length) table of a CMA request, if it covers `len` bytes.
fn parse_table(p: &dyn PayloadIn, len: u64) -> Option<Vec<(u64, u64)>> {
    let raw = p.to_vec();
    let mut v = Vec::with_capacity(raw.len() / IOV_ENTRY);
    let mut total = 0u64;
    for e in raw.chunks_exact(IOV_ENTRY) {
        let a = u64::from_le_bytes(e[..8].try_into().ok()?);
        let l = u64::from_le_bytes(e[8..].try_into().ok()?);
        total = total.checked_add(l)?;
        v.push((a, l));
    }
    (total >= len).then_some(v)
}

impl Inner {
    /// The domain's registrations, which this endpoint's RMA targets check.
    pub(crate) fn set_mr_map(&mut self, m: Arc<MrMap>) {
        self.st.rma.mrs = Some(m);
    }

    /// Every RMA call: checks, the CQ slot (`FI_RM_ENABLED`), then the
    /// operation starts (its first records go out as the transport has
    /// room; the rest in later passes).
    pub(crate) fn rma<'a>(&mut self, b: impl Into<Bound<'a>>, a: RmaArgs) -> Result<()> {
        let b = &b.into();
        let cfg = &self.st.cfg;
        let need = match a.kind {
            RmaKind::Read => FI_READ,
            RmaKind::Write => FI_WRITE,
        };
        let dirs = cfg.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
        if cfg.caps & FI_RMA == 0 || (dirs != 0 && dirs & need == 0) {
            // The endpoint was not opened for this (fi_getinfo(3):
            // FI_RMA, FI_READ, FI_WRITE).
            return Err(Error::OPNOTSUPP);
        }
        let len = a.local.total();
        if a.remote.n == 0 || a.remote.total() != Some(len) {
            return Err(Error::INVAL);
        }
        if len > cfg.max_msg_size {
            return Err(Error::MSGSIZE);
        }
        let inject = a.kind == RmaKind::Write && (a.inject_call || a.flags & FI_INJECT != 0);
        if inject && len > cfg.inject_size {
            return Err(Error::MSGSIZE);
        }
        let peer = self.destination(b, a.dest)?;
        let report = self.admit(b, a.inject_call, a.flags)?;
        let r = self.start_rma(b, a, peer, report, inject);
        self.unadmit(b, &r, report);
        r
    }

    /// What every RMA or atomic operation takes before it starts: room in
    /// the endpoint's transmit queue, a slot in its transmit CQ (unless an
    /// inject call, which makes no completion), and how it reports.
    pub(super) fn admit(&mut self, b: &Bound<'_>, inject_call: bool, flags: u64) -> Result<Report> {
        let full = |s: &State| s.tx.len() + s.rma.outstanding() >= s.cfg.tx_size;
        if full(&self.st) {
            self.pass(b);
            if full(&self.st) {
                return Err(Error::AGAIN);
            }
        }
        let slot = match &b.tx_cq {
            Some(cq) if !inject_call => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            _ => false,
        };
        if flags & FI_MORE != 0 {
            self.port.more_coming();
        }
        Ok(Report {
            on_success: !inject_call && (!b.tx_selective || flags & FI_COMPLETION != 0),
            slot,
            inject: inject_call,
            lane: 0,
        })
    }

    /// Gives back the CQ slot of an operation that did not start.
    pub(super) fn unadmit(&self, b: &Bound<'_>, r: &Result<()>, report: Report) {
        if r.is_err() && report.slot {
            if let Some(cq) = &b.tx_cq {
                cq.unclaim_slot();
            }
        }
    }

    fn start_rma(&mut self, b: &Bound<'_>, a: RmaArgs, peer: Addr, report: Report, inject: bool) -> Result<()> {
        let id = self.st.rma.next_id();
        let mut op = Op {
            peer,
            kind: a.kind,
            context: a.context,
            local: a.local,
            remote: a.remote,
            seg: 0,
            seg_off: 0,
            phase: Phase::Start,
            data: a.data,
            report,
            len: a.local.total(),
            chunk: self.port.chunk_limit_for(&peer),
            cma: self.st.cfg.cma && matches!(peer, Addr::Shm(_)) && !self.st.no_cma.contains(&peer),
            inject,
            owned: None,
            early: match a.kind {
                RmaKind::Write => Early::of(self.port.as_ref(), &peer, a.flags),
                RmaKind::Read => Early::No,
            },
        };
        if inject && op.remote.n > 1 {
            // Later segments leave after this call returns: keep a copy.
            own_data(&mut op);
        }
        self.st.rma.ops.insert(id, op);
        self.st.rma.mark_active();
        let mut sent = self.st.rma_advance(self.port.as_mut(), id);
        if sent == Err(Error::AGAIN) {
            // Our own backlog may be in the way: one pass, one more try.
            self.pass(b);
            sent = self.st.rma_advance(self.port.as_mut(), id);
        }
        if self.st.rma_done_at_transmit(b, id) {
            return Ok(());
        }
        let ops = &mut self.st.rma.ops;
        let Some(op) = ops.get_mut(&id) else {
            return Ok(()); // cannot be: nothing completes it before it is sent
        };
        match (sent, op.phase) {
            (Err(e), _) if e != Error::AGAIN => {
                // As a send: refused at post time, no completion.
                ops.remove(&id);
                return Err(e);
            }
            (_, Phase::Start | Phase::Push { off: 0 }) if op.inject && op.owned.is_none() => {
                // Nothing could go: the caller keeps its buffer and tries
                // again (an injected write leaves nothing behind).
                ops.remove(&id);
                return Err(Error::AGAIN);
            }
            (_, Phase::Push { .. }) if op.inject && op.owned.is_none() => own_data(op),
            _ => {}
        }
        if matches!(op.phase, Phase::Start | Phase::Push { .. }) {
            self.st.rma.sending.push(id);
        }
        Ok(())
    }
}

/// Gives an injected write its own copy of the data (the caller may reuse
/// its buffer when the call returns); `local` then points into the copy.
fn own_data(op: &mut Op) {
    let mut v = vec![0u8; op.len].into_boxed_slice();
    let dst = IovList::single(v.as_mut_ptr() as usize, v.len());
    op.local.for_range(0, op.len, |p, n, off| {
        // SAFETY: the application's buffer, valid during the call that
        // injects it; `v[off .. off + n]` is inside the copy.
        unsafe { core::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr().add(off), n) };
    });
    op.local = dst;
    op.owned = Some(v);
}

impl State {
    /// Sends what operation `id` can send now. `Err(AGAIN)`: nothing could
    /// go (no room); other errors: the transport refused the peer (the
    /// caller ends the operation).
    fn rma_advance(&mut self, port: &mut dyn Port, id: u64) -> Result<()> {
        let mut progressed = false;
        loop {
            let Some(op) = self.rma.ops.get_mut(&id) else {
                return Ok(());
            };
            let seg = op.segment();
            let fin = op.final_seg();
            let mut h = seg.header(op::WRITE, id, op.seg);
            if fin {
                h.flags |= flag::FINAL;
                if let Some(d) = op.data {
                    h.flags |= flag::REMOTE_CQ_DATA;
                    h.data = d;
                }
            }
            let r = match (op.phase, op.kind) {
                (Phase::Start, RmaKind::Write) if op.cma && seg.len > op.chunk => {
                    let (table, n) = iov_table(&op.local.sub(op.seg_off, seg.len));
                    h.op = op::WRITE_REQ;
                    h.flags |= flag::CMA_OK;
                    h.reserved = n;
                    port.send(&op.peer, &h, Payload::Bytes(&table), true)
                        .map(|_| Phase::WaitAck)
                }
                (Phase::Start, RmaKind::Write) => Ok(Phase::Push { off: 0 }),
                (Phase::Start, RmaKind::Read) => {
                    h.op = op::READ_REQ;
                    h.flags &= !flag::REMOTE_CQ_DATA;
                    h.data = 0;
                    let table = if op.cma && seg.len > op.chunk {
                        let (t, n) = iov_table(&op.local.sub(op.seg_off, seg.len));
                        h.flags |= flag::CMA_OK;
                        h.reserved = n;
                        t
                    } else {
                        Vec::new()
                    };
                    port.send(&op.peer, &h, Payload::Bytes(&table), true)
                        .map(|_| Phase::Reading { got: 0, chunk: 0 })
                }
                (Phase::Push { off }, _) => {
                    let rest = seg.len - off;
                    let n = rest.min(op.chunk).min(port.room(&op.peer));
                    if rest > 0 && (n == 0 || (n < MIN_CHUNK && n < rest)) {
                        Err(Error::AGAIN)
                    } else {
                        h.reserved = off as u64;
                        let last = off + n == seg.len;
                        if last {
                            h.flags |= flag::LAST;
                        }
                        // The operation's very last chunk completes it
                        // once sent, when no answer is needed (Early).
                        let early = if last && fin { op.early } else { Early::No };
                        if early == Early::Queued {
                            h.flags |= flag::NO_ANSWER;
                        }
                        // An injected write's first chunk leaves from the
                        // caller's buffer: copied if it must wait (and a
                        // chunk that completes the write, whatever the
                        // transport does with it).
                        let copy = (op.inject && op.owned.is_none()) || early == Early::Queued;
                        port.send(&op.peer, &h, Payload::Iov(&op.local, op.seg_off + off, n), copy)
                            .map(|sent| {
                                if early.done(sent) {
                                    Phase::Sent
                                } else if last {
                                    Phase::WaitAck
                                } else {
                                    Phase::Push { off: off + n }
                                }
                            })
                    }
                }
                (Phase::WaitAck | Phase::Sent | Phase::Reading { .. }, _) => return Ok(()),
            };
            match r {
                Ok(p) => {
                    op.phase = p;
                    progressed = true;
                }
                Err(e) if e == Error::AGAIN => return if progressed { Ok(()) } else { Err(e) },
                Err(e) => return Err(e),
            }
        }
    }

    /// Completes operation `id` if its last record completed it
    /// ([`Phase::Sent`]); whether it did.
    fn rma_done_at_transmit(&mut self, b: &Bound<'_>, id: u64) -> bool {
        if !self.rma.ops.get(&id).is_some_and(|op| op.phase == Phase::Sent) {
            return false;
        }
        let op = self.rma.ops.remove(&id).expect("op just found");
        self.rma_finish(b, op, Ok(()));
        true
    }

    /// Completes an operation this endpoint initiated.
    fn rma_finish(&mut self, b: &Bound<'_>, op: Op, status: Result<()>) {
        let (flags, cntr) = match op.kind {
            RmaKind::Read => (FI_RMA | FI_READ, b.rma.read),
            RmaKind::Write => (FI_RMA | FI_WRITE, b.rma.write),
        };
        let entry = CqEntry {
            len: 0,
            ..CqEntry::new(op.context as *mut c_void, flags)
        };
        match status {
            Ok(()) => {
                if let Some(c) = cntr {
                    c.inc();
                }
                cq_success(b.tx_cq, op.report, entry);
            }
            Err(e) => {
                if let Some(c) = cntr {
                    c.inc_err();
                }
                let entry = CqEntry { len: op.len, ..entry };
                tx_error(b.tx_cq, op.report, CqErrEntry::new(entry, e.0));
            }
        }
    }

    /// The current segment of `id` is done: the next one starts, or the
    /// operation completes.
    fn rma_segment_done(&mut self, b: &Bound<'_>, id: u64, status: Result<()>) {
        let Some(op) = self.rma.ops.get_mut(&id) else { return };
        if status.is_ok() && !op.final_seg() {
            op.seg_off += op.segment().len;
            op.seg += 1;
            op.phase = Phase::Start;
            self.rma.sending.push(id);
            return;
        }
        let op = self.rma.ops.remove(&id).expect("op just found");
        self.rma_finish(b, op, status);
    }

    /// An `RMA_ACK` for segment `aux` of `msg_id` (`data`: status).
    fn rma_on_ack(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) {
        let Some(op) = self.rma.ops.get_mut(&h.msg_id) else {
            return;
        };
        if op.peer != *src || op.seg as u32 != h.aux {
            return; // not ours: a confused or hostile peer
        }
        let status = match h.data {
            0 => Ok(()),
            e => Err(Error(i32::try_from(e).unwrap_or(FI_EIO))),
        };
        match op.phase {
            Phase::WaitAck if op.kind == RmaKind::Write && status == Err(Error::OPNOTSUPP) && op.cma => {
                // The target cannot pull from us: send chunks instead, to
                // this peer from now on.
                op.cma = false;
                op.phase = Phase::Push { off: 0 };
                let peer = op.peer;
                self.no_cma.insert(peer);
                self.rma.sending.push(h.msg_id);
            }
            Phase::WaitAck => self.rma_segment_done(b, h.msg_id, status),
            Phase::Reading { chunk: 0, .. } => self.rma_segment_done(b, h.msg_id, status),
            _ => {}
        }
    }

    /// An RMA chunk is in place (or its stream broke).
    pub(super) fn rma_placed(&mut self, b: &Bound<'_>, handle: u32, result: Result<()>) {
        let Some(p) = self.rma.placing.remove(handle & !RMA_HANDLE) else {
            return;
        };
        match p {
            Placing::Write { src, hdr } => {
                if hdr.flags & flag::LAST == 0 {
                    return;
                }
                let spoiled = self.rma.spoiled.remove(&(src, hdr.msg_id, hdr.aux));
                if result.is_err() {
                    return; // the initiator is gone: nobody to answer
                }
                self.rma_answer(src, &hdr, spoiled);
                if spoiled.is_none() {
                    self.rma_remote_event(b, &src, &hdr, RmaKind::Write);
                }
            }
            Placing::Read { id, n } => {
                let Some(op) = self.rma.ops.get_mut(&id) else { return };
                let Phase::Reading { got, .. } = op.phase else { return };
                if let Err(e) = result {
                    let op = self.rma.ops.remove(&id).expect("op just found");
                    self.rma_finish(b, op, Err(e));
                    return;
                }
                let got = got + n;
                op.phase = Phase::Reading { got, chunk: 0 };
                if got == op.segment().len {
                    self.rma_segment_done(b, id, Ok(()));
                }
            }
            Placing::Atomic(a) => self.atomic_placed(b, a, result),
        }
    }

    /// The RMA records that are not placed: requests and acknowledgements.
    pub(super) fn rma_control(
        &mut self,
        b: &Bound<'_>,
        src: &Addr,
        src_pid: i32,
        h: &WireHdr,
        p: &dyn PayloadIn,
    ) -> Disposition {
        match h.op {
            op::RMA_ACK => self.rma_on_ack(b, src, h),
            op::READ_REQ | op::WRITE_REQ => {
                let queue = if h.op == op::READ_REQ {
                    &self.rma.reads
                } else {
                    &self.rma.pulls
                };
                if queue.len() >= MAX_JOBS {
                    return Disposition::Stall;
                }
                let table = if h.flags & flag::CMA_OK != 0 {
                    match parse_table(p, h.len) {
                        Some(t) => t,
                        None => {
                            self.rma_ack(*src, h, Some(Error::INVAL));
                            return Disposition::Consumed;
                        }
                    }
                } else {
                    Vec::new()
                };
                let job = Job {
                    src: *src,
                    src_pid,
                    hdr: *h,
                    table,
                    off: 0,
                };
                if h.op == op::READ_REQ {
                    self.rma.reads.push_back(job);
                } else {
                    self.rma.pulls.push_back(job);
                }
                self.rma.mark_active();
            }
            _ => {}
        }
        Disposition::Consumed
    }

    /// RMA work after the transport's pass: pulls of large writes, reads
    /// served, initiator chunks, liveness. Cheap when idle.
    pub(super) fn rma_after_poll(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        if !self.rma.busy() {
            return;
        }
        if !self.rma.pulls.is_empty() {
            self.rma_run_pulls(port, b);
        }
        if !self.rma.reads.is_empty() {
            self.rma_serve_reads(port, b);
            // A record too small for a response chunk may still fit.
            self.rma.blocked.clear();
        }
        if !self.rma.replies.is_empty() || !self.rma.atomic_sending.is_empty() {
            self.atomic_after_poll(port, b);
        }
        if !self.rma.sending.is_empty() {
            self.rma_send_queued(port, b);
        }
        self.rma.blocked.clear();
        // Liveness of the peers we wait on or serve (shm notices a dead
        // peer only when asked), every 64th busy pass.
        self.rma.tick = self.rma.tick.wrapping_add(1);
        if self.rma.tick.is_multiple_of(64) {
            let mut peers = FastSet::default();
            peers.extend(self.rma.ops.values().map(|o| o.peer));
            peers.extend(self.rma.atomics.values().map(|o| o.peer));
            peers.extend(self.rma.reads.iter().map(|j| j.src));
            for p in peers {
                port.check_peer(&p);
            }
        }
        self.rma.active = self.rma.any();
    }

    /// Operations with something to send, in the order they were posted.
    /// Once a peer's ring is full, the rest of the operations towards it
    /// stay queued unlooked-at until the next pass.
    fn rma_send_queued(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut ids = std::mem::replace(&mut self.rma.sending, std::mem::take(&mut self.rma.sending_spare));
        for &id in &ids {
            let Some(peer) = self.rma.ops.get(&id).map(|op| op.peer) else {
                continue;
            };
            if !self.rma.blocked.contains(&peer) {
                match self.rma_advance(port, id) {
                    Err(e) if e != Error::AGAIN => {
                        if let Some(op) = self.rma.ops.remove(&id) {
                            self.rma_finish(b, op, Err(e));
                        }
                        continue;
                    }
                    r => {
                        if self.rma_done_at_transmit(b, id) {
                            continue;
                        }
                        let more = self
                            .rma
                            .ops
                            .get(&id)
                            .is_some_and(|op| matches!(op.phase, Phase::Start | Phase::Push { .. }));
                        if !more {
                            continue;
                        }
                        // Stopped with more to send: no room towards it.
                        if r.is_err() || !self.rma.blocked.contains(&peer) {
                            self.rma.blocked.push(peer);
                        }
                    }
                }
            }
            // Nothing in this loop queues operations: no duplicates.
            self.rma.sending.push(id);
        }
        ids.clear();
        self.rma.sending_spare = ids;
    }

    /// `WRITE_REQ`s: the segment is checked, then pulled from the
    /// initiator's memory (CMA), then acknowledged.
    fn rma_run_pulls(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut keep = VecDeque::new();
        while let Some(j) = self.rma.pulls.pop_front() {
            if !Self::rma_event_fits(b, &j.hdr) {
                keep.push_back(j);
                continue;
            }
            let len = j.hdr.len as usize;
            let status = match self.rma_target(&j.hdr, FI_REMOTE_WRITE) {
                Err(e) => Some(e),
                Ok(_) if !self.cfg.cma || j.src_pid <= 0 => Some(Error::OPNOTSUPP),
                Ok(dst) => port.copier().and_then(|c| c.pull(j.src_pid, &j.table, &dst, len)).err(),
            };
            self.rma_ack(j.src, &j.hdr, status);
            if status.is_none() {
                self.rma_remote_event(b, &j.src, &j.hdr, RmaKind::Write);
            }
        }
        self.rma.pulls = keep;
    }

    /// A peer failed (or closed its endpoint): operations waiting on it
    /// complete in error; what it asked of us is dropped.
    pub(super) fn rma_peer_failed(&mut self, b: &Bound<'_>, peer: &Addr, err: Error) {
        if !self.rma.busy() && self.rma.spoiled.is_empty() {
            return;
        }
        let ids: Vec<u64> = self
            .rma
            .ops
            .iter()
            .filter(|(_, o)| o.peer == *peer)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(op) = self.rma.ops.remove(&id) {
                self.rma_finish(b, op, Err(err));
            }
        }
        self.atomic_peer_failed(b, peer, err);
        self.rma.reads.retain(|j| j.src != *peer);
        self.rma.pulls.retain(|j| j.src != *peer);
        self.rma.spoiled.retain(|k, _| k.0 != *peer);
        let ops = &self.rma.ops;
        self.rma.sending.retain(|id| ops.contains_key(id));
    }

    /// Every operation ends with `e` (a connected endpoint's connection
    /// ended).
    pub(super) fn rma_fail_all(&mut self, b: &Bound<'_>, e: Error) {
        let ids: Vec<u64> = self.rma.ops.keys().copied().collect();
        for id in ids {
            if let Some(op) = self.rma.ops.remove(&id) {
                self.rma_finish(b, op, Err(e));
            }
        }
        self.atomic_fail_all(b, e);
        self.rma.sending.clear();
        self.rma.reads.clear();
        self.rma.pulls.clear();
        self.rma.spoiled.clear();
    }
}
