//! The send path: checks at post time (sizes, queue depth, CQ admission),
//! the eager record (inject, transmit and delivery complete: see
//! docs/protocol.md, Completion levels), what the
//! transport reports about it (`Delivery::sent`, ACK), and the send
//! completion. Larger messages leave through `rendezvous.rs`.

use super::completion::{cq_success, tx_error};
use super::lanes::Sink;
use super::matching::IovList;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cq::{CqEntry, CqErrEntry};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Payload, Sent};
use core::borrow::Borrow;
use core::ffi::c_void;

impl Inner {
    #[cfg(test)]
    pub(crate) fn send<'a, I: Borrow<IovList>>(&mut self, b: impl Into<Bound<'a>>, a: SendArgs<I>) -> Result<()> {
        self.send_in(&b.into(), a)
    }

    /// [`Inner::send`] with the view borrowed (the C face's post, which
    /// holds the endpoint's built view: no copy of it per send).
    pub(crate) fn send_in<I: Borrow<IovList>>(&mut self, b: &Bound<'_>, a: SendArgs<I>) -> Result<()> {
        let (peer, lane) = self.destination_lane(b, a.dest)?;
        let lane = lane?;
        let len = a.iov.borrow().total();
        let cfg = &self.st.cfg;
        if len > cfg.max_msg_size {
            return Err(Error::MSGSIZE);
        }
        let inject = a.inject_call || a.flags & FI_INJECT != 0;
        if inject && len > cfg.inject_size {
            return Err(Error::MSGSIZE);
        }
        if self.st.tx.len() >= cfg.tx_size {
            self.pass(b);
            if self.st.tx.len() >= self.st.cfg.tx_size {
                return Err(Error::AGAIN);
            }
        }
        // FI_RM_ENABLED: an operation that could overrun the CQ is refused
        // with -FI_EAGAIN at post time; the slot is ours until completion.
        let slot = match &b.tx_cq {
            Some(cq) if !a.inject_call => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            _ => false,
        };
        let report = Report {
            on_success: !a.inject_call && (!b.tx_selective || a.flags & FI_COMPLETION != 0),
            slot,
            inject: a.inject_call,
            lane: b.ctx,
        };
        if a.flags & FI_MORE != 0 {
            self.port.more_coming();
        }
        let r = self.start_send(b, &a, peer, lane, len, report);
        if r.is_err() && slot {
            if let Some(cq) = &b.tx_cq {
                cq.unclaim_slot();
            }
        }
        r
    }

    /// Puts a checked send (holding its CQ slot, if any) on the wire: one
    /// eager record, or a rendezvous request. The operation is kept (a
    /// `TxOp`) only while something is still to come for it: an ACK, the
    /// transport's `sent`, or the rendezvous. `lane`: the receive context
    /// named (`flag::LANE` bits; 0 but on scalable endpoints).
    fn start_send<I: Borrow<IovList>>(
        &mut self,
        b: &Bound<'_>,
        a: &SendArgs<I>,
        peer: Addr,
        lane: u32,
        len: usize,
        report: Report,
    ) -> Result<()> {
        // `len`: the iov's total, as `send_in` computed it (not walked
        // again).
        let iov = a.iov.borrow();
        let inject = a.inject_call || a.flags & FI_INJECT != 0;
        let id = self.st.next_id;
        let mut h = WireHdr::new(op::EAGER);
        h.flags = lane;
        h.tag = a.tag;
        h.data = a.data;
        h.msg_id = id;
        h.len = len as u64;
        if a.tagged {
            h.flags |= flag::TAGGED;
        }
        if a.flags & FI_REMOTE_CQ_DATA != 0 {
            h.flags |= flag::REMOTE_CQ_DATA;
        }
        let op = |state, eager_limit| TxOp {
            peer,
            context: a.context,
            tagged: a.tagged,
            len,
            iov: *iov,
            state,
            report,
            eager_limit,
        };
        // An inject always goes eager (its bytes are copied at post time):
        // the port's limit is asked only for other sends, and for an op
        // that is kept.
        if !inject {
            let eager_limit = self.port.eager_limit_for(&peer);
            if len > eager_limit {
                return self.send_rts(b, h, op(TxState::WaitAck, eager_limit));
            }
        }
        // A named level that asks an answer (docs/protocol.md, Completion
        // levels): one test on the common path, the rest out of line.
        let wait = a.flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE | FI_TRANSMIT_COMPLETE) != 0
            && !a.inject_call
            && self.ack_flag(&peer, a.flags, &mut h);
        // `send_retry` written out: the payload is built once, in the
        // call's argument (one kept in a variable for a second try would be
        // copied again for the first).
        let sent = match self.port.send(&peer, &h, Payload::Iov(iov, 0, len), inject) {
            Err(e) if e == Error::AGAIN => self.send_again(b, &peer, &h, Payload::Iov(iov, 0, len), inject),
            r => r,
        }?;
        self.st.next_id += 1;
        match (sent, wait) {
            // An inject has no CQ work (no entry, no slot: `report`):
            // only its counter, if one is bound (every fi_inject*).
            (Sent::Done, false) if a.inject_call && b.send_cntr.is_none() => {}
            (Sent::Done, false) => self.st.complete_tx(b, a.context, a.tagged, len, report, Ok(())),
            (Sent::Done, true) => {
                let limit = self.port.eager_limit_for(&peer);
                self.st.tx.insert(id, op(TxState::WaitAck, limit));
            }
            (Sent::Queued, ack) => {
                let limit = self.port.eager_limit_for(&peer);
                self.st.tx.insert(id, op(TxState::WaitSent { ack, acked: None }, limit));
            }
        }
        Ok(())
    }

    /// The answer a send at a named level waits for, set in `h`: delivery
    /// (or match) complete, `ACK_REQ` (the receiver answers once a receive
    /// took the data); transmit complete on a transport whose written
    /// records are not yet the peer's (tcp), `ACK_ARRIVE` (answered when
    /// the record is off its socket, matched or not). false: none (transmit
    /// complete on shm: the record in the peer's ring is that; any level on
    /// a datagram endpoint, which is unreliable).
    #[cold]
    #[inline(never)]
    fn ack_flag(&self, peer: &Addr, flags: u64, h: &mut WireHdr) -> bool {
        if self.st.cfg.dgram {
            // No completion level of a datagram waits for its peer.
            false
        } else if flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) != 0 {
            h.flags |= flag::ACK_REQ;
            true
        } else if !self.port.queued_at_peer(peer) {
            h.flags |= flag::ACK_ARRIVE;
            true
        } else {
            false
        }
    }

    /// The second try of a send the transport had no room for, out of
    /// line: our own backlog or unconsumed records may be in the way, so
    /// one progress pass, then one more try.
    #[cold]
    #[inline(never)]
    fn send_again(&mut self, b: &Bound<'_>, peer: &Addr, h: &WireHdr, p: Payload<'_>, copy: bool) -> Result<Sent> {
        self.pass(b);
        let r = self.port.send(peer, h, p, copy);
        if r == Err(Error::AGAIN) {
            self.st.no_room(peer);
        }
        r
    }

    /// Sends a record, making one progress pass and one more try if the
    /// transport has no room (`copy`: as `Port::send`).
    pub(super) fn send_retry(
        &mut self,
        b: &Bound<'_>,
        peer: &Addr,
        h: &WireHdr,
        p: Payload<'_>,
        copy: bool,
    ) -> Result<Sent> {
        match self.port.send(peer, h, p, copy) {
            Err(e) if e == Error::AGAIN => self.send_again(b, peer, h, p, copy),
            r => r,
        }
    }
}

impl State {
    pub(super) fn on_ack(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) {
        let Some(t) = self.tx.get_mut(&h.msg_id) else { return };
        if t.peer != *src {
            return; // not ours to complete: a confused or hostile peer
        }
        if let TxState::WaitSent { ack, acked } = &mut t.state {
            // Not reported written yet: kept for then (a peer that answers
            // a record it cannot have gains nothing: the send still waits
            // for the write).
            if *ack && acked.is_none() {
                *acked = Some(h.aux as i32);
            }
            return;
        }
        let Some(t) = self.tx.remove(&h.msg_id) else { return };
        let status = match h.aux {
            0 => Ok(()),
            e => Err(Error(e as i32)),
        };
        if t.len > t.eager_limit {
            crate::base::log::log_debug_limited!(
                FI_LOG_EP_DATA,
                "rendezvous to {src:?}: msg {}, {} bytes, done ({})",
                h.msg_id,
                t.len,
                status.map_or_else(|e| e.to_string(), |()| "ok".to_string())
            );
        }
        self.finish_tx(b, t, status);
    }

    pub(super) fn sent(&mut self, b: &Bound<'_>, msg_id: u64, result: Result<()>) {
        let Some(t) = self.tx.get_mut(&msg_id) else { return };
        let TxState::WaitSent { ack, acked } = t.state else {
            return;
        };
        if result.is_ok() && ack && acked.is_none() {
            t.state = TxState::WaitAck;
            return;
        }
        let t = self.tx.remove(&msg_id).expect("op just found");
        let answer = match acked {
            None | Some(0) => Ok(()),
            Some(e) => Err(Error(e)),
        };
        self.finish_tx(b, t, result.and(answer));
    }

    pub(super) fn finish_tx(&mut self, b: &Bound<'_>, t: TxOp, status: Result<()>) {
        self.complete_tx(b, t.context, t.tagged, t.len, t.report, status);
    }

    /// A send's completion: its CQ entry (or error entry) and counter, in
    /// the endpoint's bindings or, on a scalable endpoint, in those of the
    /// transmit context it was posted on (`complete_tx_lane`).
    #[inline(always)]
    pub(super) fn complete_tx(
        &mut self,
        b: &Bound<'_>,
        context: usize,
        tagged: bool,
        len: usize,
        report: Report,
        status: Result<()>,
    ) {
        if self.has_lanes() {
            let end = TxEnd {
                context,
                tagged,
                len,
                report,
                status,
            };
            return self.complete_tx_lane(b, end);
        }
        tx_done(Sink::tx_of(b), context, tagged, len, report, status);
    }

    #[cold]
    #[inline(never)]
    fn complete_tx_lane(&self, b: &Bound<'_>, e: TxEnd) {
        let to = self.tx_sink(b, e.report.lane);
        tx_done(to, e.context, e.tagged, e.len, e.report, e.status);
    }
}

/// What a send's completion says, as `complete_tx` hands it to the
/// transmit context's path.
struct TxEnd {
    context: usize,
    tagged: bool,
    len: usize,
    report: Report,
    status: Result<()>,
}

/// A send's CQ entry (or error entry) and counter, written to `to`.
#[inline(always)]
fn tx_done(to: Sink<'_>, context: usize, tagged: bool, len: usize, report: Report, status: Result<()>) {
    let flags = FI_SEND | if tagged { FI_TAGGED } else { FI_MSG };
    let entry = CqEntry {
        len: 0,
        ..CqEntry::new(context as *mut c_void, flags)
    };
    match status {
        Ok(()) => {
            if let Some(c) = to.cntr {
                c.inc();
            }
            cq_success(to.cq, report, entry);
        }
        Err(e) => {
            if let Some(c) = to.cntr {
                c.inc_err();
            }
            let entry = CqEntry { len, ..entry };
            tx_error(to.cq, report, CqErrEntry::new(entry, e.0));
        }
    }
}
