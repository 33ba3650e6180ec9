//! The send path: checks at post time (sizes, queue depth, CQ admission),
//! the eager record (inject, transmit and delivery complete), what the
//! transport reports about it (`Delivery::sent`, ACK), and the send
//! completion. Larger messages leave through `rendezvous.rs`.

use super::*;

pub(super) enum TxState {
    /// Queued in the transport; then done, or waiting for an ACK (`ack`).
    WaitSent { ack: bool },
    /// Waiting for the receiver's ACK.
    WaitAck,
    /// Streaming DATA records for receiver handle `handle`, bytes
    /// `off .. end` (a ranged CTS asks for part of the message).
    Streaming { handle: u32, off: usize, end: usize },
}

pub(super) struct TxOp {
    pub(super) peer: Addr,
    pub(super) context: usize,
    pub(super) flags: u64,
    pub(super) tagged: bool,
    pub(super) len: usize,
    pub(super) iov: IovList,
    pub(super) state: TxState,
    pub(super) want_completion: bool,
    /// Holds a CQ slot (admission control at post time).
    pub(super) claimed: bool,
    /// The eager limit towards this peer (DATA chunk size when streaming).
    pub(super) eager_limit: usize,
}

impl Inner {
    pub fn send<'a>(&mut self, b: impl Into<Bound<'a>>, a: SendArgs) -> Result<()> {
        let b = &b.into();
        let peer = match self.st.cfg.fixed_peer {
            Some(p) => p,
            None => {
                let av = b.av.as_ref().ok_or(Error::NOAV)?;
                self.port.canonical(&av.lookup_addr(a.dest).ok_or(Error::INVAL)?)
            }
        };
        let len = a.iov.total();
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
        let want_completion = !a.inject_call && (!b.tx_selective || a.flags & FI_COMPLETION != 0);
        // FI_RM_ENABLED: an operation that could overrun the CQ is refused
        // with -FI_EAGAIN at post time; the slot is ours until completion.
        let claimed = match &b.tx_cq {
            Some(cq) if !a.inject_call => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            _ => false,
        };
        if a.flags & FI_MORE != 0 {
            self.port.more_coming();
        }
        let r = self.send_claimed(b, a, peer, want_completion, claimed);
        if r.is_err() && claimed {
            if let Some(cq) = &b.tx_cq {
                cq.unclaim_slot();
            }
        }
        r
    }

    pub(super) fn send_claimed(
        &mut self,
        b: &Bound<'_>,
        a: SendArgs,
        peer: Addr,
        want_completion: bool,
        claimed: bool,
    ) -> Result<()> {
        let len = a.iov.total();
        let inject = a.inject_call || a.flags & FI_INJECT != 0;
        let delivery = a.flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) != 0 && !a.inject_call;
        let id = self.st.next_id;
        let mut h = WireHdr::new(op::EAGER);
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
        let mut op = TxOp {
            peer,
            context: a.context,
            flags: a.flags,
            tagged: a.tagged,
            len,
            iov: a.iov,
            state: TxState::WaitAck,
            want_completion,
            claimed,
            eager_limit: self.port.eager_limit_for(&peer),
        };
        if len <= op.eager_limit || inject {
            if delivery {
                h.flags |= flag::ACK_REQ;
            }
            let sent = self.send_retry(b, &peer, &h, Payload::Iov(&a.iov, 0, len), inject)?;
            self.st.next_id += 1;
            match (sent, delivery) {
                (Sent::Done, false) => self.st.finish_tx(b, op, Ok(())),
                (Sent::Done, true) => {
                    self.st.tx.insert(id, op);
                }
                (Sent::Queued, ack) => {
                    op.state = TxState::WaitSent { ack };
                    self.st.tx.insert(id, op);
                }
            }
        } else {
            h.op = op::RTS;
            if self.st.cfg.cma {
                h.flags |= flag::CMA_OK;
            }
            let segs = a.iov.segments();
            h.aux = segs.len() as u32;
            let mut table = Vec::with_capacity(segs.len() * IOV_ENTRY);
            for &(p, l) in segs {
                table.extend_from_slice(&(p as u64).to_le_bytes());
                table.extend_from_slice(&(l as u64).to_le_bytes());
            }
            // A receiver with buffered receives asked for the message's
            // start right behind the RTS (`Port::rts_prefix`): both records
            // go out back to back, or neither does.
            let push = self.port.rts_prefix(&peer).min(len).min(op.eager_limit);
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
                let _ = self.port.send(&peer, &d, Payload::Iov(&a.iov, 0, push), false);
            }
            self.st.next_id += 1;
            self.st.tx.insert(id, op);
        }
        Ok(())
    }

    pub(super) fn send_retry(
        &mut self,
        b: &Bound<'_>,
        peer: &Addr,
        h: &WireHdr,
        p: Payload<'_>,
        copy: bool,
    ) -> Result<Sent> {
        match self.port.send(peer, h, p, copy) {
            Err(e) if e == Error::AGAIN => {
                // Our own backlog or unconsumed records may be in the way:
                // one progress pass, then one more try.
                self.pass(b);
                self.port.send(peer, h, p, copy)
            }
            r => r,
        }
    }
}

impl State {
    pub(super) fn on_ack(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) {
        let Some(t) = self.tx.get(&h.msg_id) else { return };
        if t.peer != *src || matches!(t.state, TxState::WaitSent { .. }) {
            return; // not ours to complete: a confused or hostile peer
        }
        let Some(t) = self.tx.remove(&h.msg_id) else { return };
        let status = match h.aux {
            0 => Ok(()),
            e => Err(Error(e as i32)),
        };
        self.finish_tx(b, t, status);
    }

    pub(super) fn sent(&mut self, b: &Bound<'_>, msg_id: u64, result: Result<()>) {
        let Some(t) = self.tx.get_mut(&msg_id) else { return };
        let TxState::WaitSent { ack } = t.state else { return };
        if result.is_ok() && ack {
            t.state = TxState::WaitAck;
            return;
        }
        let t = self.tx.remove(&msg_id).expect("op just found");
        self.finish_tx(b, t, result);
    }

    pub(super) fn finish_tx(&mut self, b: &Bound<'_>, t: TxOp, status: Result<()>) {
        let flags = FI_SEND | if t.tagged { FI_TAGGED } else { FI_MSG };
        let entry = CqEntry {
            len: 0,
            ..CqEntry::new(t.context as *mut c_void, flags)
        };
        match status {
            Ok(()) => {
                if let Some(c) = &b.send_cntr {
                    c.inc();
                }
                cq_success(b.tx_cq, t.claimed, t.want_completion, entry);
            }
            Err(e) => {
                if let Some(c) = &b.send_cntr {
                    c.inc_err();
                }
                let entry = CqEntry { len: t.len, ..entry };
                cq_error(b.tx_cq, t.claimed, CqErrEntry::new(entry, e.0));
            }
        }
        let _ = t.flags;
    }
}
