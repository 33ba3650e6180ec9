//! The receive path: posting (and `fi_cancel`), matching arriving eager
//! messages to posted receives (multi-receive buffers take them at their
//! fill offset), the unexpected queue and late receives, `FI_PEEK` /
//! `FI_CLAIM` / `FI_DISCARD` on tagged receives.

use super::buffered::BUF_HANDLE;
use super::completion::{Received, RxFailure, RxIdent};
use super::matching::{IovList, PostedRecv, UnexBody, Unexpected};
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{PayloadIn, Place};
use core::borrow::Borrow;

/// The posted-queue entry of receive `a` with buffer list `iov`: the one
/// construction for both of `recv_in`'s paths (in place, or through
/// `recv_claimed`).
#[inline(always)]
fn posted<I: Borrow<IovList>>(a: &RecvArgs<I>, iov: IovList, src: Option<Addr>, claimed: bool, lane: u8) -> PostedRecv {
    PostedRecv {
        lane,
        context: a.context,
        iov,
        src,
        tagged: a.tagged,
        tag: a.tag,
        ignore: a.ignore,
        flags: a.flags,
        used: 0,
        claimed,
    }
}

impl Inner {
    #[cfg(test)]
    pub(crate) fn recv<'a, I: Borrow<IovList>>(&mut self, b: impl Into<Bound<'a>>, a: RecvArgs<I>) -> Result<()> {
        self.recv_in(&b.into(), a)
    }

    /// [`Inner::recv`] with the view borrowed (the C face's post: no copy
    /// of the view per receive).
    pub(crate) fn recv_in<I: Borrow<IovList>>(&mut self, b: &Bound<'_>, a: RecvArgs<I>) -> Result<()> {
        if self.st.buf.is_some() && a.flags & (FI_CLAIM | FI_DISCARD) != 0 && a.flags & FI_PEEK == 0 {
            return self.buf_claim(b, a.owned());
        }
        // Directed (`directed.rs`): a named source, or FI_ADDR_UNSPEC where
        // FI_EXACT_DIRECTED_RECV forbids it ("FI_ADDR_UNSPEC is not
        // allowed"; a claim names its message by context, not by source),
        // which no AV entry is: -FI_EINVAL.
        // The common receive, any source and no rule against it, costs one
        // test more than that.
        let rules = &self.st.cfg.matching;
        let src = if a.src == FI_ADDR_UNSPEC && !rules.any_exact() {
            None
        } else if (a.src != FI_ADDR_UNSPEC || rules.exact(a.tagged) && a.flags & (FI_CLAIM | FI_PEEK) != FI_CLAIM)
            && rules.directed(a.tagged)
        {
            let av = b.av.as_ref().ok_or(Error::NOAV)?;
            Some(self.port.canonical(&av.lookup_addr(a.src).ok_or(Error::INVAL)?))
        } else {
            None
        };
        if a.flags & FI_MULTI_RECV != 0
            && (!self.st.cfg.matching.multi(a.tagged) || a.flags & (FI_PEEK | FI_CLAIM) != 0)
        {
            return Err(Error::BADFLAGS);
        }
        if a.flags & (FI_PEEK | FI_CLAIM) == 0 && self.rx_posted() >= self.st.cfg.rx_size {
            self.pass(b);
            if self.rx_posted() >= self.st.cfg.rx_size {
                return Err(Error::AGAIN);
            }
        }
        let claimed = match &b.rx_cq {
            Some(cq) => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            None => false,
        };
        if a.flags & (FI_PEEK | FI_CLAIM | FI_MULTI_RECV) == 0 && !self.st.m.has_unexpected() {
            // The common receive: nothing queued can match it, so it goes
            // straight to the posted queue, built in place (moving the
            // receive through the general path below copies it several
            // times, each a call to memcpy), a one-buffer list written as
            // its one segment (`post_with_iov`).
            self.st
                .m
                .post_with_iov(posted(&a, IovList::new(), src, claimed, b.ctx), a.iov.borrow());
            // No after-poll work here: a receive that nothing queued can
            // match starts no pull, CTS or stream (the general path below
            // can), and what other work is pending runs at the next pass.
            return Ok(());
        }
        let res = self.recv_claimed(b, posted(&a, *a.iov.borrow(), src, claimed, b.ctx));
        if res.is_err() && claimed {
            if let Some(cq) = &b.rx_cq {
                cq.unclaim_slot();
            }
        }
        res
    }

    #[inline]
    pub(super) fn recv_claimed(&mut self, b: &Bound<'_>, r: PostedRecv) -> Result<()> {
        let a_flags = r.flags;
        if a_flags & FI_PEEK != 0 {
            self.pass(b);
            self.st.peek(b, &r);
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        if a_flags & FI_CLAIM != 0 {
            self.st.claim(b, r)?;
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        self.st.post_recv(b, r);
        self.st.after_poll(self.port.as_mut(), b);
        Ok(())
    }

    /// `fi_cancel`: a posted receive with this context completes with
    /// FI_ECANCELED (exactly one completion). Sends cannot be cancelled.
    pub(crate) fn cancel<'a>(&mut self, b: impl Into<Bound<'a>>, context: usize) -> Result<()> {
        let b = &b.into();
        let r = self.st.m.cancel(context).ok_or(Error::NOENT)?;
        self.st.complete_rx_err(b, &r, RxFailure::new(Error::CANCELED));
        Ok(())
    }
}

impl State {
    /// Where the payload of an arriving MSG goes (fi_msg(3)/fi_tagged(3)
    /// matching; multi-recv buffers take messages at their fill offset).
    pub(super) fn place(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr) -> Place {
        if h.op == op::DATA {
            return self.place_data(src, h);
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
                let take = len.min(r.iov.total());
                let (dst, buf) = (r.iov, r.iov.addr_at(0));
                let handle = self.inflight.insert(Inflight {
                    recv: r,
                    src: *src,
                    hdr: *h,
                    buf,
                    take,
                    extra_flags: 0,
                });
                return Place::Into { handle, dst, take };
            }
            let lane = self.m.posted_mut(tagged, idx).map_or(0, |r| r.lane);
            if !self.rx_sink(b, lane).cq.is_none_or(|c| c.has_room()) {
                return Place::Stall;
            }
            let min = self.cfg.min_multi_recv.max(1);
            let r = self.m.posted_mut(tagged, idx).expect("index just found");
            if len > r.iov.total() - r.used {
                // Does not fit what is left: release this buffer and match
                // the message against the next receive.
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                self.release_multi(b, &r);
                continue;
            }
            let dst = r.iov.sub(r.used, len);
            let buf = r.iov.addr_at(r.used);
            r.used += len;
            let done = r.iov.total() - r.used < min;
            let mut snapshot = r.clone();
            snapshot.claimed &= done; // the buffer's claim pays for its final completion
            if done {
                self.m.take_posted(tagged, idx);
            }
            let extra_flags = if done { FI_MULTI_RECV } else { 0 };
            let handle = self.inflight.insert(Inflight {
                recv: snapshot,
                src: *src,
                hdr: *h,
                buf,
                take: len,
                extra_flags,
            });
            return Place::Into { handle, dst, take: len };
        }
        if self.buf.is_some() {
            return self.buf_place(b, src, src_pid, h);
        }
        if self.m.can_buffer(src, len) {
            Place::Buffer
        } else {
            self.over_budget(src);
            Place::Stall
        }
    }

    /// An EAGER message whose whole payload is at hand (shm's ring), for
    /// the first posted receive it matches when that is a plain one: copied
    /// into it and completed at once, as `place` + `placed` would, without
    /// parking the receive as an in-flight placement. false: not that case
    /// (nothing was done; the caller places it in two steps). `LANES`: the
    /// endpoint has receive contexts (`progress.rs`'s delivery knows, per
    /// pass). Inlined into that delivery, once per kind.
    #[inline(always)]
    pub(super) fn deliver_matched<const LANES: bool>(
        &mut self,
        b: &Bound<'_>,
        src: &Addr,
        h: &WireHdr,
        p: &dyn PayloadIn,
    ) -> bool {
        if h.op != op::EAGER || !LANES && h.flags & flag::LANE != 0 || self.buf.is_some() {
            return false;
        }
        let tagged = h.flags & flag::TAGGED != 0;
        let Some((idx, r)) = self.m.first_match(tagged, src, h.tag) else {
            return false;
        };
        if r.flags & FI_MULTI_RECV != 0 {
            return false;
        }
        let len = h.len as usize;
        let take = len.min(r.iov.total());
        // SAFETY: `r.iov` is the matched receive's application buffer, valid
        // until the receive completes (below).
        unsafe { p.copy_to_iov(0, take, &r.iov, 0) };
        let (who, buf) = (r.who(), r.iov.addr_at(0));
        // Completed from `who`: the receive leaves its queue unread.
        self.m.drop_posted(tagged, idx);
        self.complete_rx_in::<LANES>(
            b,
            &who,
            Received {
                src: Some(*src),
                hdr: h,
                buf,
                len: take,
                olen: len - take,
                extra: 0,
            },
        );
        if h.flags & (flag::ACK_REQ | flag::ACK_ARRIVE) != 0 {
            self.ack(*src, h.msg_id, None, take);
        }
        true
    }

    pub(super) fn placed(&mut self, b: &Bound<'_>, handle: u32, result: Result<()>) {
        if handle & STREAM_HANDLE != 0 {
            return self.stream_placed(b, handle & !STREAM_HANDLE, result);
        }
        if handle & BUF_HANDLE != 0 {
            return self.buf_placed(b, handle & !BUF_HANDLE, result);
        }
        let Some(f) = self.inflight.remove(handle) else { return };
        let len = f.hdr.len as usize;
        match result {
            Ok(()) => {
                self.complete_rx(
                    b,
                    &f.recv,
                    Received {
                        src: Some(f.src),
                        hdr: &f.hdr,
                        buf: f.buf,
                        len: f.take,
                        olen: len - f.take,
                        extra: f.extra_flags,
                    },
                );
                if f.hdr.flags & (flag::ACK_REQ | flag::ACK_ARRIVE) != 0 {
                    self.ack(f.src, f.hdr.msg_id, None, f.take);
                }
            }
            Err(e) => self.complete_rx_err(b, &f.recv, RxFailure::of(e, f.src, &f.hdr, f.extra_flags)),
        }
    }

    pub(super) fn buffered(&mut self, src: &Addr, src_pid: i32, h: &WireHdr, data: Vec<u8>) {
        if h.flags & flag::ACK_ARRIVE != 0 {
            // Transmit complete: the record is off the socket, unmatched
            // (ACK_REQ waits for the receive).
            self.ack(*src, h.msg_id, None, h.len as usize);
        }
        self.m.push_unexpected(Unexpected {
            src: *src,
            src_pid,
            msg_id: h.msg_id,
            tagged: h.flags & flag::TAGGED != 0,
            tag: h.tag,
            data: h.data,
            wire_flags: h.flags,
            len: h.len as usize,
            body: UnexBody::Eager(data),
            claimed_by: None,
            sender_failed: None,
        });
    }

    /// A multi-recv buffer with too little room left is handed back with an
    /// empty FI_MULTI_RECV completion.
    pub(super) fn release_multi(&mut self, b: &Bound<'_>, r: &PostedRecv) {
        self.complete_release(b, r);
    }

    #[inline]
    pub(super) fn post_recv(&mut self, b: &Bound<'_>, mut r: PostedRecv) {
        while let Some(idx) = self.m.find_unexpected(&r, None) {
            let u = self.m.take_unexpected(idx).expect("index just found");
            if r.flags & FI_MULTI_RECV == 0 {
                let dst = r.iov;
                self.deliver_unexpected(b, r, dst, u, 0);
                return;
            }
            if u.len > r.iov.total() - r.used {
                // Put the message back where it was; release the buffer.
                self.m.put_back_unexpected(idx, u);
                self.release_multi(b, &r);
                return;
            }
            let dst = r.iov.sub(r.used, u.len);
            r.used += u.len;
            let done = r.iov.total() - r.used < self.cfg.min_multi_recv.max(1);
            let mut snapshot = r.clone();
            snapshot.claimed &= done;
            self.deliver_unexpected(b, snapshot, dst, u, if done { FI_MULTI_RECV } else { 0 });
            if done {
                return;
            }
        }
        self.m.post(r);
    }

    pub(super) fn deliver_unexpected(&mut self, b: &Bound<'_>, r: PostedRecv, dst: IovList, u: Unexpected, extra: u64) {
        let h = WireHdr {
            flags: u.wire_flags,
            len: u.len as u64,
            tag: u.tag,
            data: u.data,
            msg_id: u.msg_id,
            ..WireHdr::new(op::EAGER)
        };
        if let (UnexBody::Rendezvous(_), Some(e)) = (&u.body, u.sender_failed) {
            // Its data was in the failed sender's memory.
            self.complete_rx_err(b, &r, RxFailure::of(e, u.src, &h, extra));
            return;
        }
        match u.body {
            UnexBody::Eager(data) => {
                let n = copy_bytes_to_iov(&data, &dst);
                let buf = dst.addr_at(0);
                self.complete_rx(
                    b,
                    &r,
                    Received {
                        src: Some(u.src),
                        hdr: &h,
                        buf,
                        len: n,
                        olen: u.len - n,
                        extra,
                    },
                );
                if u.wire_flags & flag::ACK_REQ != 0 && u.sender_failed.is_none() {
                    self.ack(u.src, u.msg_id, None, n);
                }
            }
            UnexBody::Rendezvous(rts) => self.pulls.push(PendingPull {
                recv: r,
                dst,
                src: u.src,
                src_pid: u.src_pid,
                hdr: h,
                rts,
                extra_flags: extra,
                range: None,
            }),
        }
    }

    /// FI_PEEK (fi_tagged(3)): report a matching unexpected message without
    /// receiving it; FI_CLAIM reserves it for a later FI_CLAIM receive;
    /// FI_DISCARD drops it. No match: an FI_ENOMSG error completion.
    pub(super) fn peek(&mut self, b: &Bound<'_>, r: &PostedRecv) {
        let Some(idx) = self.m.find_unexpected(r, None) else {
            self.complete_rx_err(
                b,
                r,
                RxFailure {
                    tag: r.tag,
                    ..RxFailure::new(Error::NOMSG)
                },
            );
            return;
        };
        let u = self.m.unexpected_at(idx).expect("index just found");
        let h = WireHdr {
            flags: u.wire_flags,
            len: u.len as u64,
            tag: u.tag,
            data: u.data,
            ..WireHdr::new(op::EAGER)
        };
        let (src, len, msg_id) = (u.src, u.len, u.msg_id);
        if r.flags & FI_DISCARD != 0 {
            let u = self.m.take_unexpected(idx).expect("index just found");
            if owes_answer(&u) {
                self.ack(src, msg_id, None, 0);
            }
        } else if r.flags & FI_CLAIM != 0 {
            if let Some(u) = self.m.unexpected_mut(idx) {
                u.claimed_by = Some(r.context);
            }
        }
        // The peek completion reports the message's length; no data moved.
        let mut rr = r.clone();
        rr.flags |= FI_COMPLETION;
        self.complete_rx(
            b,
            &rr,
            Received {
                src: Some(src),
                hdr: &h,
                buf: 0,
                len,
                olen: 0,
                extra: r.flags & (FI_CLAIM | FI_DISCARD),
            },
        );
    }

    /// FI_CLAIM receive: takes the message an earlier FI_PEEK|FI_CLAIM with
    /// the same context reserved (FI_DISCARD: drop it instead).
    pub(super) fn claim(&mut self, b: &Bound<'_>, r: PostedRecv) -> Result<()> {
        let idx = self
            .m
            .find_unexpected(
                &PostedRecv {
                    src: None,
                    ignore: !0,
                    ..r.clone()
                },
                Some(r.context),
            )
            .ok_or(Error::INVAL)?;
        let u = self.m.take_unexpected(idx).expect("index just found");
        if r.flags & FI_DISCARD != 0 {
            if owes_answer(&u) {
                self.ack(u.src, u.msg_id, None, 0);
            }
            let h = WireHdr {
                flags: u.wire_flags,
                len: u.len as u64,
                tag: u.tag,
                data: u.data,
                ..WireHdr::new(op::EAGER)
            };
            self.complete_rx(
                b,
                &r,
                Received {
                    src: Some(u.src),
                    hdr: &h,
                    buf: 0,
                    len: 0,
                    olen: 0,
                    extra: FI_CLAIM | FI_DISCARD,
                },
            );
            return Ok(());
        }
        let dst = r.iov;
        self.deliver_unexpected(b, r, dst, u, FI_CLAIM);
        Ok(())
    }
}

/// Whether the sender of `u` waits for an answer when it is discarded:
/// a rendezvous sender for its buffer, a delivery-complete one for its
/// completion — unless the sender failed since (the answer would reach the
/// next endpoint at its address).
fn owes_answer(u: &Unexpected) -> bool {
    u.sender_failed.is_none() && (matches!(u.body, UnexBody::Rendezvous(_)) || u.wire_flags & flag::ACK_REQ != 0)
}

fn copy_bytes_to_iov(data: &[u8], dst: &IovList) -> usize {
    let mut done = 0;
    dst.for_range(0, data.len(), |p, n, off| {
        // SAFETY: `p..p+n` is application memory of the matched receive
        // (valid until its completion); `data[off..off+n]` is in bounds.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr().add(off), p as *mut u8, n) };
        done += n;
    });
    done
}
