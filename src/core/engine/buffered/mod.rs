//! Buffered receives (fi_msg(3) "Buffered Receives", docs/buffered.md) on
//! top of the protocols: a message no posted receive takes is admitted to the
//! endpoint's pool and reported in place; the application claims it (copy,
//! or a rendezvous pull into its buffers) or discards it. The bookkeeping
//! (pool, options, held messages, report order) is `held.rs`, pure and
//! unit-tested; this file moves bytes and produces completions.

mod held;

pub(crate) use held::DEFAULT_POOL;
pub(crate) use held::MIN_POOL;
pub(super) use held::{BufMsg, BufOpts, Buffered, PoolBuf, PrefixStream, Stage, BUF_HANDLE, PREFIX_AUX};

use super::completion::{Received, RxFailure};
use super::matching::{IovList, PostedRecv, RtsInfo};
use super::peers::STREAM_LIVENESS;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Disposition, Place, Port, PEER_FAILED};
use std::time::Instant;

/// Whether an endpoint opened with `info` uses buffered receives:
/// `FI_BUFFERED_RECV` in its mode (fi_getinfo leaves it there only for
/// applications whose hints allow it).
pub(crate) fn requested(info: &crate::core::attr::Info) -> bool {
    let mode = info.mode | info.rx.as_ref().map_or(0, |r| r.mode);
    mode & crate::abi::FI_BUFFERED_RECV != 0
}

/// `fi_getopt(FI_OPT_BUFFERED_LIMIT | FI_OPT_BUFFERED_MIN)`: the current
/// (or default) value. Endpoints without buffered receives have neither
/// option (-FI_ENOPROTOOPT).
pub(crate) fn getopt(inner: &mut Inner, name: i32) -> Result<usize> {
    let o = inner.buffered_opts().ok_or(Error::NOPROTOOPT)?;
    match name {
        crate::abi::FI_OPT_BUFFERED_LIMIT => Ok(o.limit),
        crate::abi::FI_OPT_BUFFERED_MIN => Ok(o.min),
        _ => Err(Error::NOPROTOOPT),
    }
}

/// `fi_setopt(FI_OPT_BUFFERED_LIMIT | FI_OPT_BUFFERED_MIN)` before enable.
pub(crate) fn setopt(inner: &mut Inner, name: i32, v: usize) -> Result<()> {
    let o = inner.buffered_opts().ok_or(Error::NOPROTOOPT)?;
    match name {
        crate::abi::FI_OPT_BUFFERED_LIMIT => o.set_limit(v)?,
        crate::abi::FI_OPT_BUFFERED_MIN => o.set_min(v)?,
        _ => return Err(Error::NOPROTOOPT),
    }
    inner.advertise_rts_prefix();
    Ok(())
}

// ------------------------------------------------------------ buffered receives
//
// fi_msg(3) "Buffered Receives" on top of the protocols above (bookkeeping in
// `buffered.rs`). A message no posted receive takes is admitted to the pool
// instead of the unexpected queue: an eager payload is placed straight into a
// pool buffer (`Place::Into` with a BUF_HANDLE handle); a rendezvous message
// keeps all but its first `want` bytes (FI_OPT_BUFFERED_MIN) at the sender.
// Those arrive in the DATA record the sender pushed right behind its RTS
// (flag::PUSH, because we advertised the size through the transport); a
// sender that did not push (it did not know yet) is asked for them — CMA on
// shm, else a ranged CTS whose DATA records carry PREFIX_AUX. Admission takes
// a CQ slot for the report (FI_RM_ENABLED admission) and pool room; either
// missing stalls the sender. FI_CLAIM turns the message into a normal receive
// (copy from the pool, or a rendezvous pull into the claim's buffers);
// FI_DISCARD releases it and acknowledges a rendezvous sender without moving
// its data.

impl Inner {
    /// Turns buffered receives on (`FI_BUFFERED_RECV` in the endpoint's
    /// mode): `pool` bytes of provider buffers.
    pub(crate) fn enable_buffered(&mut self, pool: usize) {
        let pool = pool.max(MIN_POOL);
        // The smallest eager limit of the port's peers (auto: shm's).
        let opts = BufOpts::new(self.port.eager_limit(), pool);
        self.st.buf = Some(Box::new(Buffered::new(opts, pool)));
        self.advertise_rts_prefix();
    }

    /// Tells peers (through the transport) how much of each rendezvous
    /// message to push behind its RTS: `FI_OPT_BUFFERED_MIN`, the prefix a
    /// report with FI_MORE carries. Called again when the option changes.
    pub(crate) fn advertise_rts_prefix(&mut self) {
        if let Some(bf) = self.st.buf.as_ref() {
            let n = bf.opts.min;
            if let Some(h) = self.port.hints() {
                h.set_rts_prefix(n);
            }
        }
    }

    /// The endpoint's `fid_ep*`, for `fi_recv_context.ep`.
    pub(crate) fn set_ep_fid(&mut self, fid: usize) {
        if let Some(bf) = self.st.buf.as_mut() {
            bf.ep_fid = fid;
        }
    }

    /// `FI_OPT_BUFFERED_LIMIT`/`_MIN`; None without buffered receives.
    pub(crate) fn buffered_opts(&mut self) -> Option<&mut BufOpts> {
        self.st.buf.as_mut().map(|bf| &mut bf.opts)
    }

    /// A receive posted with FI_CLAIM or FI_DISCARD whose context is the
    /// `fi_recv_context` of a reported message. Anything else: -FI_EINVAL
    /// (the pointer is only looked up, never followed).
    pub(super) fn buf_claim(&mut self, b: &Bound<'_>, a: RecvArgs) -> Result<()> {
        let Some(bf) = self.st.buf.as_mut() else {
            return Err(Error::INVAL);
        };
        let h = bf.lookup(a.context).ok_or(Error::INVAL)?;
        if a.flags & FI_DISCARD != 0 {
            // "the receive input buffer(s) and length parameters are
            // ignored"; no completion (the buffer is simply released).
            let m = bf.remove(h).ok_or(Error::INVAL)?;
            bf.release(m.buf);
            if m.remote.is_some() && !m.sender_gone {
                self.st.ack(m.src, m.hdr.msg_id, None, 0);
            }
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        // A claim completes like any receive: CQ admission first.
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
        let m = self
            .st
            .buf
            .as_mut()
            .and_then(|bf| bf.lookup(a.context).and_then(|h| bf.remove(h)));
        let Some(m) = m else {
            if claimed {
                if let Some(cq) = &b.rx_cq {
                    cq.unclaim_slot();
                }
            }
            return Err(Error::INVAL);
        };
        let len = m.len();
        // "The 'context' of the associated CQ entry will be set to the
        // 'context' value passed in through the fi_recv_context structure,
        // and the CQ entry flags will have the FI_CLAIM bit set."
        let r = PostedRecv {
            context: m.buf.recv_context_value(),
            iov: a.iov,
            src: None,
            tagged: m.hdr.flags & flag::TAGGED != 0,
            tag: m.hdr.tag,
            ignore: 0,
            flags: a.flags,
            used: 0,
            claimed,
            lane: 0,
        };
        let take = len.min(a.iov.total());
        let buf = a.iov.addr_at(0);
        if m.remote.is_none() || take <= m.want {
            // Everything the claim takes is here.
            // SAFETY: `a.iov` is the claim's buffer (valid for the call,
            // fi_msg(3)); the pool buffer holds `want >= take` bytes.
            let n = unsafe { m.buf.copy_out(take.min(m.want), &a.iov) };
            if m.remote.is_some() && !m.sender_gone {
                self.st.ack(m.src, m.hdr.msg_id, None, n);
            }
            let (src, hdr) = (m.src, m.hdr);
            self.st.buf_release(m.buf);
            self.st.complete_rx(
                b,
                &r,
                Received {
                    src: Some(src),
                    hdr: &hdr,
                    buf,
                    len: n,
                    olen: len - n,
                    extra: FI_CLAIM,
                },
            );
        } else if m.sender_gone || !self.port.sender_alive(m.src_pid, &m.src) {
            // The rest died with its sender: the claim completes in error
            // (exactly once), nothing is fetched.
            let (src, hdr) = (m.src, m.hdr);
            self.st.buf_release(m.buf);
            self.st
                .complete_rx_err(b, &r, RxFailure::of(PEER_FAILED, src, &hdr, FI_CLAIM));
        } else if let Some(rts) = m.remote {
            // The rest is at the sender: a matched rendezvous from here on
            // (single CMA copy on shm, else the sender streams it).
            let (src, src_pid, hdr) = (m.src, m.src_pid, m.hdr);
            self.st.buf_release(m.buf);
            self.st.pulls.push(PendingPull {
                recv: r,
                dst: a.iov,
                src,
                src_pid,
                hdr,
                rts,
                extra_flags: FI_CLAIM,
                range: None,
            });
        }
        self.st.after_poll(self.port.as_mut(), b);
        Ok(())
    }
}

impl State {
    pub(super) fn buf_release(&mut self, buf: PoolBuf) {
        if let Some(bf) = self.buf.as_mut() {
            bf.release(buf);
        }
    }

    /// An eager message nobody posted for: into a pool buffer.
    pub(super) fn buf_place(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr) -> Place {
        let len = h.len as usize;
        let Some(cq) = b.rx_cq else {
            return Place::Stall;
        };
        if cq.claim_slot().is_err() {
            return Place::Stall;
        }
        let Some(bf) = self.buf.as_mut() else {
            cq.unclaim_slot();
            return Place::Stall;
        };
        let Some(hd) = bf.admit(*src, src_pid, *h, len, None) else {
            cq.unclaim_slot();
            return Place::Stall;
        };
        let Some(m) = bf.get_mut(hd) else {
            return Place::Stall;
        };
        m.placing = true;
        Place::Into {
            handle: BUF_HANDLE | hd,
            dst: m.buf.data_iov(0, len),
            take: len,
        }
    }

    /// A rendezvous message nobody posted for: admitted, its prefix (or all
    /// of it, up to the limit) fetched after this pass.
    pub(super) fn buf_rts(
        &mut self,
        b: &Bound<'_>,
        src: &Addr,
        src_pid: i32,
        h: &WireHdr,
        rts: RtsInfo,
    ) -> Disposition {
        let len = h.len as usize;
        let Some(cq) = b.rx_cq else {
            return Disposition::Stall;
        };
        if cq.claim_slot().is_err() {
            return Disposition::Stall;
        }
        let Some(bf) = self.buf.as_mut() else {
            cq.unclaim_slot();
            return Disposition::Stall;
        };
        let want = bf.opts.want(len);
        let pushed = if h.flags & flag::PUSH != 0 {
            h.offset as usize
        } else {
            0
        };
        let Some(hd) = bf.admit(*src, src_pid, *h, want, Some(rts)) else {
            cq.unclaim_slot();
            return Disposition::Stall;
        };
        let Some(m) = bf.get_mut(hd) else {
            return Disposition::Consumed;
        };
        if want == 0 {
            m.stage = Stage::Ready;
            self.buf_report(b);
        } else if pushed >= want {
            // The prefix follows in this sender's next records.
            m.stream = Some(PrefixStream {
                got: 0,
                chunk: 0,
                last_check: Instant::now(),
                pushed: true,
            });
        } else {
            // Not pushed (a sender that did not know what we want yet):
            // fetched after this pass.
            bf.pulls.push(hd);
        }
        Disposition::Consumed
    }

    /// A payload (eager, or a prefix chunk) is in its pool buffer.
    pub(super) fn buf_placed(&mut self, b: &Bound<'_>, hd: u32, result: Result<()>) {
        let Some(bf) = self.buf.as_mut() else { return };
        let Some(m) = bf.get_mut(hd) else { return };
        m.placing = false;
        if result.is_ok() && m.stream.is_none() && m.hdr.flags & flag::ACK_ARRIVE != 0 {
            // Transmit complete (an eager record only): it is off the
            // socket, whatever becomes of it here.
            let (src, msg_id, len) = (m.src, m.hdr.msg_id, m.len());
            self.ack(src, msg_id, None, len);
        }
        let Some(bf) = self.buf.as_mut() else { return };
        let Some(m) = bf.get_mut(hd) else { return };
        if m.doomed {
            if let Some(m) = bf.remove(hd) {
                bf.release(m.buf);
            }
            if let Some(cq) = &b.rx_cq {
                cq.unclaim_slot();
            }
            return;
        }
        if result.is_err() {
            // The sender was lost mid-payload: the message never existed for
            // the application.
            return self.buf_drop(b, hd, None);
        }
        if let Some(s) = m.stream.as_mut() {
            s.got += s.chunk;
            s.chunk = 0;
            s.last_check = Instant::now();
            if s.got < m.want {
                return;
            }
            m.stream = None;
        }
        m.stage = Stage::Ready;
        let (src, msg_id, len) = (m.src, m.hdr.msg_id, m.len());
        if m.remote.is_some() && m.want == len {
            // All of it is here: the sender's buffer is free.
            m.remote = None;
            self.ack(src, msg_id, None, len);
        } else if m.remote.is_none() && m.hdr.flags & flag::ACK_REQ != 0 {
            // Delivery complete: the data is in the provider's buffer and
            // about to be reported.
            self.ack(src, msg_id, None, len);
        }
        self.buf_report(b);
    }

    /// A message that was never reported goes away (its sender failed, or
    /// its bytes could not be fetched: `ack` tells the sender why).
    pub(super) fn buf_drop(&mut self, b: &Bound<'_>, hd: u32, ack: Option<Error>) {
        let Some(bf) = self.buf.as_mut() else { return };
        let Some(m) = bf.drop_unreported(hd) else { return };
        bf.release(m.buf);
        if let Some(cq) = &b.rx_cq {
            cq.unclaim_slot();
        }
        if let (Some(e), Some(_)) = (ack, m.remote) {
            self.ack(m.src, m.hdr.msg_id, Some(e), 0);
        }
        // Later messages of that sender may now be reported.
        self.buf_report(b);
    }

    /// Starts the prefix fetches admitted during the pass.
    /// Whether `buf_run_pulls` has anything to do.
    #[inline]
    pub(super) fn buf_has_pulls(&self) -> bool {
        self.buf.as_ref().is_some_and(|bf| !bf.pulls.is_empty())
    }

    pub(super) fn buf_run_pulls(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let Some(bf) = self.buf.as_mut() else { return };
        if bf.pulls.is_empty() {
            return;
        }
        let pulls = std::mem::take(&mut bf.pulls);
        for hd in pulls {
            let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
                continue;
            };
            let Some(rts) = m.remote.as_ref() else { continue };
            let (src, src_pid, want, len, msg_id) = (m.src, m.src_pid, m.want, m.len(), m.hdr.msg_id);
            if self.cfg.cma && rts.cma_ok && !self.no_cma.contains(&src) && src_pid > 0 {
                let dst = m.buf.data_iov(0, want);
                match port.copier().and_then(|c| c.pull(src_pid, &rts.remote, &dst, want)) {
                    Ok(_) => {
                        m.stage = Stage::Ready;
                        if want == len {
                            m.remote = None;
                            self.ack(src, msg_id, None, len);
                        }
                        continue;
                    }
                    Err(e) if e == Error::OPNOTSUPP => {
                        self.no_cma.insert(src);
                    }
                    Err(e) => {
                        self.buf_drop(b, hd, Some(e));
                        continue;
                    }
                }
            }
            let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
                continue;
            };
            m.stream = Some(PrefixStream {
                got: 0,
                chunk: 0,
                last_check: Instant::now(),
                pushed: false,
            });
            let mut cts = WireHdr::new(op::CTS);
            cts.flags = flag::RANGE;
            cts.msg_id = msg_id;
            cts.offset = 0;
            cts.len = want as u64;
            cts.aux = PREFIX_AUX | hd;
            self.outbox.push((src, cts));
        }
        self.buf_report(b);
    }

    /// A DATA record of a prefix fetch: into the message's pool buffer at
    /// its offset (checked like any streamed chunk; strays are dropped).
    pub(super) fn buf_place_prefix(&mut self, src: &Addr, h: &WireHdr) -> Place {
        let hd = h.aux & !PREFIX_AUX;
        let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
            return Place::Discard;
        };
        if m.stream.as_ref().is_none_or(|s| s.pushed) || m.src != *src || m.hdr.msg_id != h.msg_id {
            return Place::Discard;
        }
        place_chunk(m, hd, h)
    }

    /// A DATA record a sender pushed behind its RTS: into the pool buffer
    /// of that message if it waits for it, else dropped (an endpoint
    /// without buffered receives, a message a posted receive took, a push
    /// too short for what we want).
    pub(super) fn buf_place_pushed(&mut self, src: &Addr, h: &WireHdr) -> Place {
        let Some(bf) = self.buf.as_mut() else {
            return Place::Discard;
        };
        let Some(hd) = bf.find_pushed(src, h.msg_id) else {
            return Place::Discard;
        };
        match bf.get_mut(hd) {
            Some(m) => place_chunk(m, hd, h),
            None => Place::Discard,
        }
    }

    /// Reports every message whose turn it is.
    pub(super) fn buf_report(&mut self, b: &Bound<'_>) {
        loop {
            let Some(bf) = self.buf.as_mut() else { return };
            let Some(hd) = bf.next_report() else { return };
            let (ep, more_than) = (bf.ep_fid, bf.opts.limit);
            let Some(m) = bf.get(hd) else { continue };
            m.buf.write_recv_context(ep);
            let len = m.len();
            // The report is a receive of the message itself: op_context is
            // the fi_recv_context, buf the provider's copy, len the total.
            let r = PostedRecv {
                context: m.buf.ctx_addr(),
                iov: IovList::new(),
                src: None,
                tagged: m.hdr.flags & flag::TAGGED != 0,
                tag: m.hdr.tag,
                ignore: 0,
                flags: FI_COMPLETION,
                used: 0,
                claimed: true,
                lane: 0,
            };
            let (src, hdr, data) = (m.src, m.hdr, m.buf.data_addr());
            let more = if len > more_than { FI_MORE } else { 0 };
            self.complete_rx(
                b,
                &r,
                Received {
                    src: Some(src),
                    hdr: &hdr,
                    buf: data,
                    len,
                    olen: 0,
                    extra: more,
                },
            );
        }
    }

    /// Prefix fetches from senders that died are dropped.
    pub(super) fn buf_liveness(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let Some(bf) = self.buf.as_mut() else { return };
        if !bf.streaming() {
            return;
        }
        let now = Instant::now();
        let mut dead = Vec::new();
        for hd in bf.handles() {
            let Some(m) = bf.get_mut(hd) else { continue };
            let Some(s) = m.stream.as_mut() else { continue };
            if now.duration_since(s.last_check) >= STREAM_LIVENESS {
                s.last_check = now;
                if !port.sender_alive(m.src_pid, &m.src) {
                    dead.push(hd);
                }
            }
        }
        for hd in dead {
            self.buf_drop(b, hd, None);
        }
    }

    /// A peer failed: its messages still arriving are dropped; reported ones
    /// stay (the application claims or discards them) but what of them is
    /// still at the sender is gone.
    pub(super) fn buf_peer_failed(&mut self, b: &Bound<'_>, peer: &Addr) {
        let Some(bf) = self.buf.as_mut() else { return };
        let mut drop = Vec::new();
        for hd in bf.held_from(peer) {
            let Some(m) = bf.get_mut(hd) else { continue };
            if m.stage == Stage::Reported {
                m.sender_gone = true;
            } else {
                drop.push(hd);
            }
        }
        for hd in drop {
            self.buf_drop(b, hd, None);
        }
    }

    /// Endpoint close: senders still waiting on messages we held learn that
    /// they will not be taken (FI_ECANCELED).
    pub(super) fn buf_close(&mut self, port: &mut dyn Port) {
        let Some(bf) = self.buf.as_mut() else { return };
        for hd in bf.handles() {
            let Some(m) = bf.get(hd) else { continue };
            if m.remote.is_some() && !m.sender_gone {
                let mut h = WireHdr::new(op::ACK);
                h.msg_id = m.hdr.msg_id;
                h.aux = Error::CANCELED.0 as u32;
                let _ = port.send_ctl(&m.src, &h);
            }
        }
    }
}

/// A streamed chunk `h` of pool message `m` (handle `hd`): into its buffer
/// at the chunk's offset if it is the next one the message's stream expects
/// (one in flight at a time), else dropped. Only the first `want` bytes are
/// kept; the rest of the chunk is read past.
fn place_chunk(m: &mut BufMsg, hd: u32, h: &WireHdr) -> Place {
    let Some(s) = m.stream.as_mut() else {
        return Place::Discard;
    };
    if h.len != m.hdr.len || h.offset as usize != s.got || s.chunk != 0 {
        return Place::Discard;
    }
    let off = h.offset as usize;
    let n = h.payload as usize;
    let take = if off < m.want { n.min(m.want - off) } else { 0 };
    s.chunk = n;
    m.placing = true;
    Place::Into {
        handle: BUF_HANDLE | hd,
        dst: m.buf.data_iov(off, take),
        take,
    }
}
