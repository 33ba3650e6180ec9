//! Atomics (`fi_atomic(3)`): the initiator's operations and the target's
//! execution, on the RMA machinery (`rma.rs`: ids, admission, the target's
//! key/range/right check, remote events, peer failure). docs/rma.md
//! "Atomics" has the records and the reasons.
//!
//! * An operation names up to [`RMA_IOV_MAX`] target segments; its operand
//!   and compare values are copied when it is posted (at most
//!   [`ATOMIC_MAX`] bytes each), so the caller's buffers are its own again
//!   at once. Segments go one after the other: one `ATOMIC` record each
//!   (operand, then compare values), the next when the target answered.
//! * The **target** executes a record once, when its payload is in (a
//!   staging buffer): the segment is checked (the endpoint takes
//!   `FI_ATOMIC`; the key, the range; `FI_REMOTE_WRITE` for an update,
//!   `FI_REMOTE_READ` for `FI_ATOMIC_READ`, both for the other fetching and
//!   compare operations), then, under one process-wide lock, the segment's
//!   bytes are gathered, the operation applied (`core/atomic.rs`) and the
//!   result scattered back. Every rustfab atomic on memory of this process
//!   takes that lock, so atomics are atomic with respect to each other,
//!   whatever endpoint, domain or peer issued them; they are not with
//!   respect to the application's own loads and stores, nor RMA writes.
//!   The answer (`ATOMIC_RESP`: status, and the former bytes for fetch and
//!   compare) waits in a bounded queue for room: the operation is never
//!   executed twice.
//! * The initiator places a response's bytes straight into its result
//!   buffer; the operation completes (`FI_ATOMIC | FI_WRITE`, or
//!   `FI_ATOMIC | FI_READ` for fetch and compare) when the last segment
//!   is answered (delivery complete) — a non-fetching one, unless
//!   `FI_DELIVERY_COMPLETE` (or commit) was asked, as soon as its last
//!   record is in the target's queue ([`Early`]: shm, transmit complete;
//!   the record says `NO_ANSWER`, and a target that refuses it logs the
//!   refusal); on tcp, unless transmit complete was named too, as soon as
//!   its last record is written to the socket (inject complete, the
//!   provider default).

use super::completion::{cq_success, tx_error};
use super::matching::IovList;
use super::rma::refused_unanswered;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::atomic::{apply, valid, AtomicKind, ATOMIC_MAX, FI_ATOMIC_READ};
use crate::core::cq::{CqEntry, CqErrEntry};
use crate::core::mr::EACCES;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Payload, Place, Port};
use core::ffi::c_void;

/// Copies `v.len()` bytes of `l` into `v`.
///
/// # Safety
/// `l` must describe readable memory of this process.
unsafe fn gather(l: &IovList, v: &mut [u8]) {
    l.for_range(0, v.len(), |p, n, off| {
        // SAFETY: per the contract; `off + n <= v.len()` (for_range clips).
        unsafe { core::ptr::copy_nonoverlapping(p as *const u8, v.as_mut_ptr().add(off), n) };
    });
}

/// Copies `v` into the memory `l` describes.
///
/// # Safety
/// `l` must describe writable memory of this process.
unsafe fn scatter(l: &IovList, v: &[u8]) {
    l.for_range(0, v.len(), |p, n, off| {
        // SAFETY: per the contract; `off + n <= v.len()`.
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr().add(off), p as *mut u8, n) };
    });
}

/// Appends the first `n` bytes an application buffer list holds to `v`
/// (the operand and compare values of a call).
fn copy_in(l: &IovList, n: usize, v: &mut Vec<u8>) {
    let start = v.len();
    v.resize(start + n, 0);
    // SAFETY: the application's buffers, valid during the call that posts
    // the operation (fi_atomic(3)); the caller checked `n <= l.total()`.
    unsafe { gather(l, &mut v[start..]) };
}

/// The rights a target region must grant an atomic (docs/rma.md).
fn rights(kind: AtomicKind, op: u32) -> u64 {
    match kind {
        AtomicKind::Write => FI_REMOTE_WRITE,
        AtomicKind::Fetch if op == FI_ATOMIC_READ => FI_REMOTE_READ,
        _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
    }
}

/// What the initiating endpoint must have been opened with.
fn initiator_rights(kind: AtomicKind, op: u32) -> u64 {
    match kind {
        AtomicKind::Write => FI_WRITE,
        AtomicKind::Fetch if op == FI_ATOMIC_READ => FI_READ,
        _ => FI_READ | FI_WRITE,
    }
}

impl Inner {
    /// Every atomic call: checks, admission, then the first record goes
    /// out (or waits for room).
    pub(crate) fn atomic<'a>(&mut self, b: impl Into<Bound<'a>>, a: AtomicArgs) -> Result<()> {
        let b = &b.into();
        let cfg = &self.st.cfg;
        let dirs = cfg.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
        let need = initiator_rights(a.kind, a.op);
        if cfg.caps & FI_ATOMIC == 0 || (dirs != 0 && dirs & need != need) {
            return Err(Error::OPNOTSUPP);
        }
        valid(a.kind, a.op, a.datatype)?;
        let len = a.remote.total().ok_or(Error::INVAL)?;
        let operand_len = if a.op == FI_ATOMIC_READ { 0 } else { len };
        let compare_len = if a.kind == AtomicKind::Compare { len } else { 0 };
        let size = crate::core::atomic::datatype_size(a.datatype);
        if a.remote.segments().is_empty()
            || a.remote.segments().iter().any(|s| s.len % size != 0)
            || (a.op != FI_ATOMIC_READ && a.operand.total() != len)
            || a.compare.total() != compare_len
            || (a.kind.fetches() && a.result.total() != len)
        {
            return Err(Error::INVAL);
        }
        if len > ATOMIC_MAX {
            return Err(Error::MSGSIZE);
        }
        if (a.inject_call || a.flags & FI_INJECT != 0) && len > cfg.inject_size {
            return Err(Error::MSGSIZE);
        }
        let peer = self.destination(b, a.dest)?;
        let report = self.admit(b, a.inject_call, a.flags)?;
        let id = self.st.rma.next_id();
        let mut bytes = self.st.rma.bufs.take();
        copy_in(&a.operand, operand_len, &mut bytes);
        copy_in(&a.compare, compare_len, &mut bytes);
        let mut op = AtomicOp {
            peer,
            kind: a.kind,
            op: a.op,
            datatype: a.datatype,
            context: a.context,
            report,
            bytes,
            operand_len,
            result: if a.kind.fetches() { a.result } else { IovList::new() },
            remote: a.remote,
            data: a.data,
            seg: 0,
            seg_off: 0,
            waiting: false,
            early: match a.kind {
                AtomicKind::Write => Early::of(self.port.as_ref(), &peer, a.flags),
                _ => Early::No,
            },
            sent: false,
            len,
        };
        // The first record goes before the operation is filed: one that
        // completes when it is sent (transmit complete) never enters the
        // map of outstanding atomics.
        match send_segment(&mut self.st.rma.bufs, self.port.as_mut(), id, &mut op) {
            Ok(()) if op.sent => self.st.atomic_finish(b, op, Ok(())),
            Ok(()) => {
                // Waiting for the target's answer.
                self.st.rma.atomics.insert(id, op);
                self.st.rma.mark_active();
            }
            Err(e) if e == Error::AGAIN => {
                self.st.rma.atomics.insert(id, op);
                self.st.rma.mark_active();
                // Our own backlog may be in the way: one pass, then it
                // waits for room (the data is ours already).
                self.pass(b);
                if self.st.rma.atomics.get(&id).is_some_and(|o| !o.waiting) {
                    self.st.rma.atomic_sending.push(id);
                }
            }
            Err(e) => {
                // Refused at post time (a peer the transport cannot
                // reach): no completion, as for a send.
                self.st.rma.bufs.give(op.bytes);
                let r = Err(e);
                self.unadmit(b, &r, report);
                return r;
            }
        }
        Ok(())
    }
}

/// The operation, datatype and kind an `ATOMIC` record's `reserved` word
/// carries (`send_segment` packs them; the kind `None` when no
/// `AtomicKind` has that code).
fn unpack(reserved: u64) -> (u32, u32, Option<AtomicKind>) {
    (
        (reserved & 0xff) as u32,
        (reserved >> 8 & 0xff) as u32,
        AtomicKind::from_code((reserved >> 16) as u8),
    )
}

/// Sends the current segment's record of atomic `id` (`o`) if it has not
/// gone yet. `Err(AGAIN)`: no room now.
fn send_segment(bufs: &mut BufPool, port: &mut dyn Port, id: u64, o: &mut AtomicOp) -> Result<()> {
    if o.waiting {
        return Ok(());
    }
    let seg = o.segment();
    let mut h = seg.header(op::ATOMIC, id, o.seg);
    h.reserved = u64::from(o.op) | u64::from(o.datatype) << 8 | u64::from(o.kind.code()) << 16;
    let fin = o.seg + 1 == o.remote.segments().len();
    if fin {
        h.flags |= flag::FINAL;
        if let Some(d) = o.data {
            h.flags |= flag::REMOTE_CQ_DATA;
            h.data = d;
        }
    }
    let early = if fin { o.early } else { Early::No };
    if early == Early::Queued {
        h.flags |= flag::NO_ANSWER;
    }
    let range = o.seg_off..o.seg_off + seg.len;
    let operand = o.bytes[..o.operand_len].get(range.clone()).unwrap_or(&[]);
    let sent = if o.kind != AtomicKind::Compare {
        port.send(&o.peer, &h, Payload::Bytes(operand), true)
    } else if seg.len == o.len {
        // One segment: its operand and compare values are adjacent.
        port.send(&o.peer, &h, Payload::Bytes(&o.bytes[..2 * o.len]), true)
    } else {
        let compare = &o.bytes[o.operand_len..][range];
        let mut p = bufs.take();
        p.extend_from_slice(operand);
        p.extend_from_slice(compare);
        let sent = port.send(&o.peer, &h, Payload::Bytes(&p), true);
        bufs.give(p);
        sent
    };
    sent.map(|s| {
        o.waiting = true;
        o.sent = early.done(s);
    })
}

impl State {
    /// Sends the current segment's record of atomic `id` if it has not
    /// gone yet ([`send_segment`]).
    fn atomic_advance(&mut self, port: &mut dyn Port, id: u64) -> Result<()> {
        match self.rma.atomics.get_mut(&id) {
            Some(o) => send_segment(&mut self.rma.bufs, port, id, o),
            None => Ok(()),
        }
    }

    /// Completes atomic `id` if its last record completed it.
    fn atomic_done_at_transmit(&mut self, b: &Bound<'_>, id: u64) {
        if self.rma.atomics.get(&id).is_some_and(|o| o.sent) {
            let o = self.rma.atomics.remove(&id).expect("op just found");
            self.atomic_finish(b, o, Ok(()));
        }
    }

    /// Completes an atomic this endpoint initiated.
    fn atomic_finish(&mut self, b: &Bound<'_>, o: AtomicOp, status: Result<()>) {
        self.rma.bufs.give(o.bytes);
        let (flags, cntr) = match o.kind {
            AtomicKind::Write => (FI_ATOMIC | FI_WRITE, b.rma.write),
            _ => (FI_ATOMIC | FI_READ, b.rma.read),
        };
        let entry = CqEntry {
            len: 0,
            ..CqEntry::new(o.context as *mut c_void, flags)
        };
        match status {
            Ok(()) => {
                if let Some(c) = cntr {
                    c.inc();
                }
                cq_success(b.tx_cq, o.report, entry);
            }
            Err(e) => {
                if let Some(c) = cntr {
                    c.inc_err();
                }
                tx_error(b.tx_cq, o.report, CqErrEntry::new(CqEntry { len: o.len, ..entry }, e.0));
            }
        }
    }

    /// Segment `aux` of atomic `id` was answered: the next one goes, or
    /// the operation completes.
    fn atomic_segment_done(&mut self, b: &Bound<'_>, id: u64, status: Result<()>) {
        let Some(o) = self.rma.atomics.get_mut(&id) else { return };
        if status.is_ok() && o.seg + 1 < o.remote.segments().len() {
            o.seg_off += o.segment().len;
            o.seg += 1;
            o.waiting = false;
            self.rma.atomic_sending.push(id);
            return;
        }
        let o = self.rma.atomics.remove(&id).expect("op just found");
        self.atomic_finish(b, o, status);
    }

    /// An `ATOMIC` record arrives at its target: its payload is staged
    /// (the operation runs once it is all in).
    pub(super) fn atomic_place_request(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) -> Place {
        if self.rma.replies.len() >= MAX_REPLIES || !Self::rma_event_fits(b, h) {
            return Place::Stall;
        }
        let n = h.payload as usize;
        let mut buf = self.rma.bufs.take();
        buf.resize(n, 0);
        let dst = IovList::single(buf.as_mut_ptr() as usize, n);
        let handle = self.rma.placing.insert(Placing::Atomic(AtomicPlacing::Request {
            src: *src,
            hdr: *h,
            buf,
        }));
        Place::Into {
            handle: RMA_HANDLE | handle,
            dst,
            take: n,
        }
    }

    /// An `ATOMIC_RESP` arrives at the initiator: an error or a bare
    /// acknowledgement is handled at once; former bytes go straight into
    /// the result buffer.
    pub(super) fn atomic_place_response(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) -> Place {
        let Some(o) = self.rma.atomics.get(&h.msg_id) else {
            return Place::Discard;
        };
        let seg = o.segment();
        if o.peer != *src || !o.waiting || o.seg as u32 != h.aux || h.len != seg.len as u64 {
            return Place::Discard; // not ours: a confused or hostile peer
        }
        let status = match h.data {
            0 => Ok(()),
            e => Err(Error(i32::try_from(e).unwrap_or(FI_EIO))),
        };
        let n = h.payload as usize;
        let want = if status.is_ok() && o.kind.fetches() { seg.len } else { 0 };
        if n != want {
            self.atomic_segment_done(b, h.msg_id, status.and(Err(Error::IO)));
            return Place::Discard;
        }
        if n == 0 {
            self.atomic_segment_done(b, h.msg_id, status);
            return Place::Discard;
        }
        let dst = o.result.sub(o.seg_off, n);
        let handle = self
            .rma
            .placing
            .insert(Placing::Atomic(AtomicPlacing::Response { id: h.msg_id }));
        Place::Into {
            handle: RMA_HANDLE | handle,
            dst,
            take: n,
        }
    }

    /// An atomic record's payload is in place (or its stream broke).
    pub(super) fn atomic_placed(&mut self, b: &Bound<'_>, p: AtomicPlacing, result: Result<()>) {
        match p {
            AtomicPlacing::Response { id } => self.atomic_segment_done(b, id, result),
            AtomicPlacing::Request { src, hdr, buf } => {
                if result.is_err() {
                    self.rma.bufs.give(buf);
                    return; // the initiator is gone: nobody to answer
                }
                let mut old = self.rma.bufs.take();
                let mut cur = core::mem::take(&mut self.rma.scratch);
                let status = self.atomic_execute(&hdr, &buf, &mut cur, &mut old).err();
                self.rma.scratch = cur;
                self.rma.bufs.give(buf);
                // The initiator completed a non-fetching atomic when it
                // sent it (transmit complete): no answer; a refusal is
                // logged. A fetch is always answered (its values).
                let (op, _, kind) = unpack(hdr.reserved);
                let unanswered = hdr.flags & flag::NO_ANSWER != 0 && kind == Some(AtomicKind::Write);
                if unanswered {
                    match status {
                        Some(e) => refused_unanswered("atomic", &src, &hdr, e),
                        None => self.remote_event(b, &src, &hdr, RmaKind::Write, FI_ATOMIC),
                    }
                    self.rma.bufs.give(old);
                    return;
                }
                let mut r = WireHdr::new(op::ATOMIC_RESP);
                r.msg_id = hdr.msg_id;
                r.aux = hdr.aux;
                r.len = hdr.len;
                r.data = status.map_or(0, |e| e.0 as u64);
                self.rma.replies.push_back(AtomicReply { to: src, hdr: r, old });
                self.rma.mark_active();
                if status.is_none() {
                    let kind = if op == FI_ATOMIC_READ {
                        RmaKind::Read
                    } else {
                        RmaKind::Write
                    };
                    self.remote_event(b, &src, &hdr, kind, FI_ATOMIC);
                }
            }
        }
    }

    /// The target runs one `ATOMIC` record: checks, then gather, apply and
    /// scatter under the process-wide lock. The former bytes are appended
    /// to `old` for fetch and compare; `cur` is scratch space.
    fn atomic_execute(&self, h: &WireHdr, payload: &[u8], cur: &mut Vec<u8>, old: &mut Vec<u8>) -> Result<()> {
        let (op, dt, kind) = unpack(h.reserved);
        let kind = kind.ok_or(Error::INVAL)?;
        let dst = self.target_check(h, rights(kind, op), FI_ATOMIC)?;
        valid(kind, op, dt)?;
        let len = usize::try_from(h.len).map_err(|_| EACCES)?;
        if len > ATOMIC_MAX {
            // No initiator sends more (a hostile one could name a whole
            // region for FI_ATOMIC_READ, which carries no operand).
            return Err(Error::INVAL);
        }
        let operand_len = if op == FI_ATOMIC_READ { 0 } else { len };
        let (operand, compare) = payload.split_at(operand_len.min(payload.len()));
        cur.clear();
        cur.resize(len, 0);
        let _g = ATOMIC_LOCK.lock();
        // SAFETY: `dst` is registered memory of this process the check
        // above granted for `len` bytes.
        unsafe { gather(&dst, cur) };
        if kind.fetches() {
            old.extend_from_slice(cur);
        }
        apply(kind, op, dt, cur, operand, compare)?;
        if op != FI_ATOMIC_READ {
            // SAFETY: as above (the region grants FI_REMOTE_WRITE: checked).
            unsafe { scatter(&dst, cur) };
        }
        Ok(())
    }

    /// Answers waiting for room, and initiator records waiting for room.
    pub(super) fn atomic_after_poll(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        while let Some(r) = self.rma.replies.front() {
            match port.send(&r.to, &r.hdr, Payload::Bytes(&r.old), true) {
                Err(e) if e == Error::AGAIN => break,
                // Sent, or the initiator is gone (its failure is reported
                // through peer events).
                _ => {
                    if let Some(r) = self.rma.replies.pop_front() {
                        self.rma.bufs.give(r.old);
                    }
                }
            }
        }
        for id in std::mem::take(&mut self.rma.atomic_sending) {
            match self.atomic_advance(port, id) {
                Ok(()) => self.atomic_done_at_transmit(b, id),
                Err(e) if e == Error::AGAIN => self.rma.atomic_sending.push(id),
                Err(e) => {
                    if let Some(o) = self.rma.atomics.remove(&id) {
                        self.atomic_finish(b, o, Err(e));
                    }
                }
            }
        }
    }

    /// A peer failed: atomics waiting on it end with `err` (`PEER_FAILED`,
    /// or the cause a `PeerEvent` gives); what we owe it is dropped.
    pub(super) fn atomic_peer_failed(&mut self, b: &Bound<'_>, peer: &Addr, err: Error) {
        let ids: Vec<u64> = self
            .rma
            .atomics
            .iter()
            .filter(|(_, o)| o.peer == *peer)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(o) = self.rma.atomics.remove(&id) {
                self.atomic_finish(b, o, Err(err));
            }
        }
        self.rma.replies.retain(|r| r.to != *peer);
        let ops = &self.rma.atomics;
        self.rma.atomic_sending.retain(|id| ops.contains_key(id));
    }

    /// Every atomic ends with `e` (a connected endpoint's connection ended).
    pub(super) fn atomic_fail_all(&mut self, b: &Bound<'_>, e: Error) {
        let ids: Vec<u64> = self.rma.atomics.keys().copied().collect();
        for id in ids {
            if let Some(o) = self.rma.atomics.remove(&id) {
                self.atomic_finish(b, o, Err(e));
            }
        }
        self.rma.atomic_sending.clear();
        self.rma.replies.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_reuses_and_stays_bounded() {
        let mut pool = BufPool::default();
        let mut v = pool.take();
        v.extend_from_slice(&[1u8; 16]);
        let cap = v.capacity();
        let at = v.as_ptr();
        pool.give(v);
        let w = pool.take();
        assert!(w.is_empty(), "a reused buffer comes back empty");
        assert_eq!((w.as_ptr(), w.capacity()), (at, cap), "the same allocation");
        pool.give(w);
        // Large buffers are freed, not kept.
        pool.give(Vec::with_capacity(POOL_BUF_MAX + 1));
        assert_eq!(pool.free.len(), 1);
        // At most POOL_MAX are kept.
        for _ in 0..2 * POOL_MAX {
            pool.give(Vec::with_capacity(8));
        }
        assert_eq!(pool.free.len(), POOL_MAX);
    }
}
