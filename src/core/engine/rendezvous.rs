//! Rendezvous (docs/protocol.md): the sender's RTS names its buffer; the
//! receiver, once matched, pulls it (CMA, one copy) or answers CTS and the
//! sender streams DATA records as the transport has room; the ACK completes
//! the send. A ranged CTS (buffered receives fetching a prefix) streams a
//! part only.

use super::buffered::PREFIX_AUX;
use super::completion::{Received, RxFailure};
use super::matching::{IovList, RtsInfo, UnexBody, Unexpected};
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr, IOV_ENTRY};
use crate::transport::PushJob;
use crate::transport::{Disposition, Payload, PayloadIn, Place, Port, PEER_FAILED};
use std::time::Instant;

impl Inner {
    /// A message above the eager limit: its RTS names the sender's buffer
    /// (and the op waits for the ACK). A receiver with buffered receives
    /// asked for the message's start right behind the RTS
    /// (`Hints::rts_prefix`): both records go out back to back, or neither.
    ///
    /// A message the transport would rather carry whole (`push_whole`:
    /// shm's large rings), the only one waiting for an answer from its
    /// peer, goes whole behind its RTS in `DATA|PUSH` records (as the ring
    /// has room, in this call and the next passes): a receive posted in
    /// time takes them as they come, with no CTS round trip before the
    /// data moves; one that arrives unexpected drops them and is pulled or
    /// streamed later as any other (the send still waits for the ACK, so
    /// its buffer stays).
    #[inline(never)]
    pub(super) fn send_rts(&mut self, b: &Bound<'_>, mut h: WireHdr, mut op: TxOp) -> Result<()> {
        let (peer, len, id) = (op.peer, op.len, h.msg_id);
        h.op = op::RTS;
        if self.st.cfg.cma {
            h.flags |= flag::CMA_OK;
        }
        let segs = op.iov.segments();
        h.aux = segs.len() as u32;
        let mut table = Vec::with_capacity(segs.len() * IOV_ENTRY);
        for &(p, l) in segs {
            table.extend_from_slice(&(p as u64).to_le_bytes());
            table.extend_from_slice(&(l as u64).to_le_bytes());
        }
        let push = self
            .port
            .hints()
            .map_or(0, |h| h.rts_prefix(&peer))
            .min(len)
            .min(op.eager_limit);
        let whole = push == 0 && self.push_whole(&peer, len);
        if whole {
            h.flags |= flag::PUSH;
            h.offset = len as u64;
        }
        if push > 0 {
            h.flags |= flag::PUSH;
            h.offset = push as u64;
            let need = table.len() + push + 4 * crate::transport::proto::HDR_LEN;
            if self.port.room(&peer) < need {
                self.pass(b);
                if self.port.room(&peer) < need {
                    return Err(Error::AGAIN);
                }
            }
        }
        self.send_retry(b, &peer, &h, Payload::Bytes(&table), true)?;
        if push > 0 {
            let mut d = WireHdr::new(op::DATA);
            d.flags = flag::PUSH;
            d.msg_id = id;
            d.len = len as u64;
            // Cannot fail for room (checked above); a failing peer ends
            // the send through its failure event.
            let _ = self.port.send(&peer, &d, Payload::Iov(&op.iov, 0, push), false);
        }
        if whole {
            op.state = TxState::Streaming {
                handle: PUSH_WHOLE,
                off: 0,
                end: len,
            };
        }
        self.st.next_id += 1;
        self.st.tx.insert(id, op);
        crate::base::log::log_debug_limited!(
            FI_LOG_EP_DATA,
            "rendezvous to {peer:?}: msg {id}, {len} bytes, RTS sent{}",
            if push > 0 {
                " with the first bytes pushed"
            } else if whole {
                ", the message pushed behind it"
            } else {
                ""
            }
        );
        if whole {
            // The first chunks right behind the RTS, not a pass later.
            self.st.pump(&mut *self.port, b);
        }
        Ok(())
    }

    /// Whether a `len`-byte rendezvous message to `peer` goes whole behind
    /// its RTS: the transport prefers it (`Hints::push_whole`), lone
    /// messages stream (`stream_lone_max`, 0 on connected endpoints and
    /// small rings), and nothing else of ours waits on that peer (a window
    /// of sends is pulled in batches instead: one copy, not two).
    fn push_whole(&mut self, peer: &Addr, len: usize) -> bool {
        let max = self.st.cfg.stream_lone_max;
        if max == 0 || len > max {
            return false;
        }
        let Some(h) = self.port.hints() else { return false };
        len <= h.push_whole(peer) && !self.st.tx.values().any(|t| t.peer == *peer)
    }
}

impl State {
    /// The receiver cannot pull: stream the message (RANGE: only bytes
    /// `offset .. len`, a buffered receiver fetching a prefix). A CTS that
    /// is not for a rendezvous send of ours waiting for it is ignored.
    pub(super) fn on_cts(&mut self, src: &Addr, src_pid: i32, h: &WireHdr, p: &dyn PayloadIn) {
        if h.flags & flag::SPLIT != 0 {
            return self.on_split_cts(src, src_pid, h, p);
        }
        if let Some(t) = self.tx.get_mut(&h.msg_id) {
            if t.peer == *src && waits_for_cts(&t.state) && t.len > t.eager_limit {
                // RANGE: only bytes `offset .. len` (a buffered
                // receiver fetching a message's prefix).
                let (off, end) = if h.flags & flag::RANGE != 0 {
                    (h.offset as usize, h.len as usize)
                } else {
                    (0, t.len)
                };
                if off < end && end <= t.len {
                    t.state = TxState::Streaming {
                        handle: h.aux,
                        off,
                        end,
                    };
                }
            }
        }
    }

    /// The receiver asks us to push bytes `offset .. len` of a message
    /// into its buffer (the table it sent) while it pulls the rest. Only
    /// for a rendezvous send of ours to that peer waiting for its ACK (else
    /// dropped); every such CTS is answered with `PUSHED`, an error status
    /// when its table does not cover exactly that part of our message or
    /// the peer's pid is not the kernel's word (the receiver then pulls
    /// the part itself).
    fn on_split_cts(&mut self, src: &Addr, src_pid: i32, h: &WireHdr, p: &dyn PayloadIn) {
        let cma = self.cfg.cma;
        let Some(t) = self.tx.get_mut(&h.msg_id) else { return };
        if t.peer != *src || !waits_for_cts(&t.state) || t.len <= t.eager_limit {
            return;
        }
        // `check`: offset < len, a table of 1 ..= SPLIT_IOV_MAX entries.
        let (off, end) = (h.offset as usize, h.len as usize);
        let raw = p.to_vec();
        let mut table = Vec::with_capacity(raw.len() / IOV_ENTRY);
        let mut total: u64 = 0;
        let mut ok = end <= t.len;
        for e in raw.chunks_exact(IOV_ENTRY) {
            let a = u64::from_le_bytes(e[..8].try_into().unwrap_or_default());
            let l = u64::from_le_bytes(e[8..].try_into().unwrap_or_default());
            match total.checked_add(l) {
                Some(x) => total = x,
                None => ok = false,
            }
            table.push((a, l));
        }
        ok &= total == (end - off) as u64 && !table.is_empty();
        if ok && cma && src_pid > 0 {
            t.state = TxState::Pushing {
                handle: h.aux,
                off,
                end,
                pid: src_pid,
                table: table.into_boxed_slice(),
            };
        } else {
            let e = if ok { Error::OPNOTSUPP } else { Error::INVAL };
            let r = pushed_hdr(h.msg_id, h.aux, h.offset, h.len, Some(e));
            self.outbox.push((*src, r));
        }
    }

    /// The sender's answer to our `CTS|SPLIT`: checked against the split
    /// it names (peer, message, part); then the receive completes, or what
    /// is missing is pulled (a refused push costs only the copy).
    pub(super) fn on_pushed(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) {
        let Some(s) = self.rx.get(h.aux) else { return };
        let ours = s.src == *src
            && s.hdr.msg_id == h.msg_id
            && h.len == s.take as u64
            && s.split.as_ref().is_some_and(|sp| sp.at as u64 == h.offset);
        if !ours {
            return;
        }
        let mut s = self.rx.remove(h.aux).expect("split just found");
        let Some(sp) = s.split.take() else { return };
        let pushed = h.reserved == 0;
        let range = match sp.first {
            Ok(()) if pushed => return self.stream_done(b, &s),
            Ok(()) => Some((sp.at, s.take)),
            Err(e) if e == Error::OPNOTSUPP => {
                // No CMA from this sender after all: it streams the whole
                // message (it waits for our ACK again).
                self.no_cma.insert(s.src);
                None
            }
            Err(e) => {
                self.ack(s.src, s.hdr.msg_id, Some(e), 0);
                let err = if e == Error::CONNRESET { PEER_FAILED } else { e };
                self.complete_rx_err(b, &s.recv, RxFailure::of(err, s.src, &s.hdr, s.extra_flags));
                return;
            }
        };
        self.pulls.push(s.into_pull(sp.rts, range));
    }

    /// Whether a peer may be writing into this endpoint's memory: a split
    /// receive waiting for its `PUSHED`, or a CMA read for its target's
    /// answer (what a close waits for, [`Inner::close`]).
    pub(super) fn pushed_into(&self) -> bool {
        self.rma.pushers().next().is_some() || self.rx.values().any(|s| s.split.is_some())
    }

    /// A closing endpoint's wait: split receives whose sender is gone fail
    /// (it pushes nothing more), asked at every pass rather than every
    /// `STREAM_LIVENESS`; CMA reads' targets are checked (rate-limited by
    /// the transport; a failure ends them through the next pass's events).
    pub(super) fn forget_dead_pushers(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        self.fail_rx_where(b, PEER_FAILED, |s| {
            s.split.is_some() && !port.sender_alive(s.src_pid, &s.src)
        });
        let peers: Vec<Addr> = self.rma.pushers().copied().collect();
        for p in peers {
            port.check_peer(&p);
        }
    }

    /// `src` closed its endpoint (`BYE`): our split receives from it that
    /// it did not answer fail (it no longer pushes; its buffer may be
    /// gone, so the missing part is not pulled either), and so do messages
    /// it was pushing whole (their records would have come before the BYE).
    pub(super) fn split_sender_gone(&mut self, b: &Bound<'_>, src: &Addr) {
        self.fail_rx_where(b, PEER_FAILED, |s| s.src == *src && (s.split.is_some() || s.pushed));
    }

    pub(super) fn on_rts(
        &mut self,
        b: &Bound<'_>,
        src: &Addr,
        src_pid: i32,
        h: &WireHdr,
        p: &dyn PayloadIn,
    ) -> Disposition {
        let Some(rts) = parse_rts(h, p) else {
            self.ack(*src, h.msg_id, Some(Error::IO), 0);
            return Disposition::Consumed;
        };
        if h.len > self.cfg.max_msg_size as u64 {
            // Larger than this endpoint takes (a sender with
            // FI_VARIABLE_MSG, or a different max_msg_size): the send
            // fails, the connection stays.
            self.ack(*src, h.msg_id, Some(Error::MSGSIZE), 0);
            return Disposition::Consumed;
        }
        let tagged = h.flags & flag::TAGGED != 0;
        let len = h.len as usize;
        while let Some(idx) = self.m.find_posted(tagged, src, h.tag) {
            let multi = self
                .m
                .posted_mut(tagged, idx)
                .is_some_and(|r| r.flags & FI_MULTI_RECV != 0);
            if !multi {
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                let dst = r.iov;
                self.matched_rts(PendingPull {
                    recv: r,
                    dst,
                    src: *src,
                    src_pid,
                    hdr: *h,
                    rts,
                    extra_flags: 0,
                    range: None,
                });
                return Disposition::Consumed;
            }
            let min = self.cfg.min_multi_recv.max(1);
            let r = self.m.posted_mut(tagged, idx).expect("index just found");
            if len > r.iov.total() - r.used {
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                self.release_multi(b, &r);
                continue;
            }
            let dst = r.iov.sub(r.used, len);
            r.used += len;
            let done = r.iov.total() - r.used < min;
            let mut snapshot = r.clone();
            snapshot.claimed &= done;
            if done {
                self.m.take_posted(tagged, idx);
            }
            let extra_flags = if done { FI_MULTI_RECV } else { 0 };
            self.matched_rts(PendingPull {
                recv: snapshot,
                dst,
                src: *src,
                src_pid,
                hdr: *h,
                rts,
                extra_flags,
                range: None,
            });
            return Disposition::Consumed;
        }
        if self.buf.is_some() {
            return self.buf_rts(b, src, src_pid, h, rts);
        }
        if !self.m.can_buffer(src, rts.remote.len() * IOV_ENTRY) {
            self.over_budget(src);
            return Disposition::Stall;
        }
        self.m.push_unexpected(Unexpected {
            src: *src,
            src_pid,
            msg_id: h.msg_id,
            tagged,
            tag: h.tag,
            data: h.data,
            wire_flags: h.flags,
            len,
            body: UnexBody::Rendezvous(rts),
            claimed_by: None,
            sender_failed: None,
        });
        Disposition::Consumed
    }

    /// An RTS that met a posted receive: pulled after this pass, or, when
    /// its sender pushes the whole message behind it (`PUSH`, `offset` =
    /// `len`), filled by those records as they are read (this endpoint
    /// without buffered receives: those take pushed prefixes their way).
    fn matched_rts(&mut self, p: PendingPull) {
        let h = &p.hdr;
        if h.flags & flag::PUSH == 0 || h.offset != h.len || self.buf.is_some() {
            self.pulls.push(p);
            return;
        }
        let take = (h.len as usize).min(p.dst.total());
        let buf = p.dst.addr_at(0);
        let mut s = RxStream::of(p, buf, take, None);
        s.pushed = true;
        self.rx.insert(s);
    }

    /// Where a `DATA|PUSH` record of a message pushed whole goes: into the
    /// receive its RTS met ([`Self::matched_rts`]), in order; `None`: no such
    /// receive (the RTS found none: the records are dropped, the message
    /// moves once a receive matches) — or a buffered receiver's prefix.
    fn place_pushed_whole(&mut self, src: &Addr, h: &WireHdr) -> Option<Place> {
        let (handle, s) = self
            .rx
            .iter_mut()
            .find(|(_, s)| s.pushed && s.src == *src && s.hdr.msg_id == h.msg_id)?;
        if h.len != s.hdr.len || h.offset as usize != s.got || s.chunk != 0 {
            return Some(Place::Discard);
        }
        let off = h.offset as usize;
        let n = h.payload as usize;
        let take = if off < s.take { n.min(s.take - off) } else { 0 };
        s.chunk = n;
        Some(Place::Into {
            handle: STREAM_HANDLE | handle,
            dst: s.dst.sub(off, take),
            take,
        })
    }

    /// Where a DATA chunk of a streamed rendezvous message goes: straight
    /// into the matched receive at the chunk's offset (the part beyond a
    /// truncated receive is discarded). Stray or out-of-order chunks are
    /// dropped whole.
    pub(super) fn place_data(&mut self, src: &Addr, h: &WireHdr) -> Place {
        if h.flags & flag::PUSH != 0 {
            if let Some(place) = self.place_pushed_whole(src, h) {
                return place;
            }
            return self.buf_place_pushed(src, h);
        }
        if h.aux & PREFIX_AUX != 0 {
            return self.buf_place_prefix(src, h);
        }
        let Some(s) = self.rx.get_mut(h.aux) else {
            return Place::Discard;
        };
        if s.src != *src
            || s.hdr.msg_id != h.msg_id
            || h.len != s.hdr.len
            || h.offset as usize != s.got
            || s.chunk != 0
            || s.split.is_some()
        {
            return Place::Discard;
        }
        let off = h.offset as usize;
        let n = h.payload as usize;
        let take = if off < s.take { n.min(s.take - off) } else { 0 };
        s.chunk = n;
        Place::Into {
            handle: STREAM_HANDLE | h.aux,
            dst: s.dst.sub(off, take),
            take,
        }
    }

    pub(super) fn stream_placed(&mut self, b: &Bound<'_>, handle: u32, result: Result<()>) {
        let Some(s) = self.rx.get_mut(handle) else { return };
        if result == Err(Error::AGAIN) {
            // Withdrawn: the link it came over closed, and the sender sends
            // the chunk again (tcp's extra links, docs/protocol.md).
            s.chunk = 0;
            return;
        }
        if let Err(e) = result {
            let s = self.rx.remove(handle).expect("stream just found");
            self.complete_rx_err(b, &s.recv, RxFailure::of(e, s.src, &s.hdr, s.extra_flags));
            return;
        }
        s.got += s.chunk;
        s.chunk = 0;
        s.last_check = Instant::now();
        if s.got >= s.hdr.len as usize {
            let s = self.rx.remove(handle).expect("stream just found");
            self.stream_done(b, &s);
        }
    }

    /// Every byte of a streamed or split receive is in: `ACK` to the
    /// sender, the receive completes.
    fn stream_done(&mut self, b: &Bound<'_>, s: &RxStream) {
        self.ack(s.src, s.hdr.msg_id, None, s.take);
        crate::base::log::log_debug_limited!(
            FI_LOG_EP_DATA,
            "rendezvous from {:?}: msg {}, {} bytes received, done",
            s.src,
            s.hdr.msg_id,
            s.take
        );
        self.complete_rx(
            b,
            &s.recv,
            Received {
                src: Some(s.src),
                hdr: &s.hdr,
                buf: s.buf,
                len: s.take,
                olen: s.hdr.len as usize - s.take,
                extra: s.extra_flags,
            },
        );
    }

    pub(super) fn pump(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut failed = Vec::new();
        // The peer whose queue had no room for a chunk in this pass: its
        // other streams wait for the next pass without asking the port
        // again (else 64 streams to one peer would be 64 `room` lookups per
        // pass).
        let mut full: Option<Addr> = None;
        // Sends the receiver asked to push (`CTS|SPLIT`): made after the
        // streams, together (`run_pushes`).
        let mut pushes: Vec<u64> = Vec::new();
        for (id, t) in self.tx.iter_mut() {
            if matches!(t.state, TxState::Pushing { .. }) {
                pushes.push(*id);
                continue;
            }
            let TxState::Streaming { handle, off, end } = &mut t.state else {
                continue;
            };
            // Chunks as large as the receiver takes (`Limits::max_chunk`):
            // on tcp one record of up to 1 MiB, written from the send
            // buffer as the socket drains (docs/protocol.md).
            if full == Some(t.peer) {
                continue;
            }
            let chunk = port.chunk_limit_for(&t.peer);
            while *off < *end {
                let room = port.room(&t.peer);
                let n = (*end - *off).min(chunk).min(room);
                if n == 0 || (n < 4096 && n < *end - *off) {
                    full = Some(t.peer);
                    break;
                }
                let mut h = WireHdr::new(op::DATA);
                h.msg_id = *id;
                h.len = t.len as u64;
                h.offset = *off as u64;
                if *handle == PUSH_WHOLE {
                    h.flags |= flag::PUSH;
                } else {
                    h.aux = *handle;
                }
                if *off + n == *end {
                    h.flags |= flag::LAST;
                }
                match port.send(&t.peer, &h, Payload::Iov(&t.iov, *off, n), false) {
                    Ok(_) => *off += n,
                    Err(e) if e == Error::AGAIN => {
                        full = Some(t.peer);
                        break;
                    }
                    Err(_) => {
                        failed.push(*id);
                        break;
                    }
                }
            }
            if let TxState::Streaming { off, end, handle } = t.state {
                if off >= end {
                    t.state = TxState::WaitAck;
                    if handle == PUSH_WHOLE {
                        // Waiting now for the receiver to copy it all.
                        if let Some(h) = port.hints() {
                            h.watch_consumer(&t.peer);
                        }
                    }
                }
            }
        }
        if let Some(p) = full {
            self.no_room(&p);
        }
        if !pushes.is_empty() {
            self.run_pushes(port, pushes);
        }
        for id in failed {
            if let Some(t) = self.tx.remove(&id) {
                self.finish_tx(b, t, Err(PEER_FAILED));
            }
        }
    }

    /// Writes the parts the receivers asked for (sends `ids`, in `Pushing`
    /// state) and answers each with `PUSHED`, in message order (a receiver
    /// that asked for several completes them as the answers come). Runs of
    /// consecutive pushes to one receiver go in batches as pulls do
    /// (`pull_batch_bytes`, `PULL_BATCH_MAX`): one `SingleCopy::push_batch`
    /// each; a batch that fails in any way is pushed one by one, so each
    /// answer carries its own status. Into the receiver's pid as the
    /// kernel reported it; any failure: the receiver copies the part
    /// itself.
    fn run_pushes(&mut self, port: &mut dyn Port, mut ids: Vec<u64>) {
        ids.sort_unstable();
        let mut parts = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(t) = self.tx.get_mut(&id) else { continue };
            if let TxState::Pushing {
                handle,
                off,
                end,
                pid,
                table,
            } = std::mem::replace(&mut t.state, TxState::WaitAck)
            {
                let src = t.iov.sub(off, end - off);
                parts.push(PushPart {
                    id,
                    peer: t.peer,
                    handle,
                    off,
                    end,
                    pid,
                    table,
                    src,
                });
            }
        }
        let limit = self.cfg.pull_batch_bytes;
        let mut i = 0;
        while i < parts.len() {
            let first = &parts[i];
            let mut j = i + 1;
            let mut bytes = first.end - first.off;
            while let Some(p) = parts.get(j) {
                let n = p.end - p.off;
                if j - i >= PULL_BATCH_MAX || p.peer != first.peer || p.pid != first.pid || bytes + n > limit {
                    break;
                }
                bytes += n;
                j += 1;
            }
            let batch = &parts[i..j];
            let together = batch.len() >= 2 && {
                let jobs: Vec<PushJob<'_>> = batch
                    .iter()
                    .map(|p| PushJob {
                        remote: &p.table,
                        src: &p.src,
                        len: p.end - p.off,
                    })
                    .collect();
                port.copier().and_then(|c| c.push_batch(first.pid, &jobs)).is_ok()
            };
            for p in batch {
                let n = p.end - p.off;
                let status = if together {
                    None
                } else {
                    match port.copier().and_then(|c| c.push(p.pid, &p.table, &p.src, n)) {
                        Ok(k) if k == n => None,
                        Ok(_) => Some(Error::IO),
                        Err(e) => Some(e),
                    }
                };
                let r = pushed_hdr(p.id, p.handle, p.off as u64, p.end as u64, status);
                // A dead peer: its failure event ends the send.
                let _ = port.send_ctl(&p.peer, &r);
            }
            i = j;
        }
    }
}

/// A part of one of our sends a receiver asked us to push (`CTS|SPLIT`):
/// bytes `off .. end` (`src`) into its buffer `table` in process `pid`,
/// answered with `PUSHED` for its handle.
struct PushPart {
    id: u64,
    peer: Addr,
    handle: u32,
    off: usize,
    end: usize,
    pid: i32,
    table: Box<[(u64, u64)]>,
    src: IovList,
}

/// The `PUSHED` answer to a split CTS (`reserved`: 0 or an FI_E* code).
fn pushed_hdr(msg_id: u64, handle: u32, off: u64, end: u64, status: Option<Error>) -> WireHdr {
    let mut r = WireHdr::new(op::PUSHED);
    r.msg_id = msg_id;
    r.aux = handle;
    r.offset = off;
    r.len = end;
    r.reserved = status.map(|e| e.0 as u64).unwrap_or(0);
    r
}

/// The sender's segments without their first `skip` bytes (the part of a
/// split message the receiver pulls after a refused push).
pub(super) fn remote_from(remote: &[(u64, u64)], mut skip: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::with_capacity(remote.len());
    for &(a, l) in remote {
        if skip >= l {
            skip -= l;
            continue;
        }
        v.push((a.wrapping_add(skip), l - skip));
        skip = 0;
    }
    v
}

/// Decodes an RTS's iov table (peer bytes): `None` when it does not
/// cover the message. `pub(crate)` for the `records` fuzz target.
pub(crate) fn parse_rts(h: &WireHdr, p: &dyn PayloadIn) -> Option<RtsInfo> {
    let table = p.to_vec();
    let mut remote = Vec::with_capacity(table.len() / IOV_ENTRY);
    let mut total: u64 = 0;
    for e in table.chunks_exact(IOV_ENTRY) {
        let a = u64::from_le_bytes(e[..8].try_into().ok()?);
        let l = u64::from_le_bytes(e[8..].try_into().ok()?);
        total = total.checked_add(l)?;
        remote.push((a, l));
    }
    if total < h.len {
        return None;
    }
    Some(RtsInfo {
        msg_id: h.msg_id,
        remote,
        cma_ok: h.flags & flag::CMA_OK != 0,
    })
}

/// A rendezvous send a CTS may start or redirect: waiting for the receiver,
/// or pushing the message whole (a receiver that found it unexpected drops
/// the pushed records, and asks again once a receive matches).
fn waits_for_cts(s: &TxState) -> bool {
    matches!(s, TxState::WaitAck | TxState::Streaming { handle: PUSH_WHOLE, .. })
}
