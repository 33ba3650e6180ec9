//! RMA at the receiving end of records (`engine/rma.rs` has the protocol
//! and the initiator): where an arriving chunk goes (a write's chunk into
//! registered memory after the target's checks, a read's answer into the
//! initiator's buffer), the target's checks of key, range and access right,
//! its answers (`RMA_ACK`), remote events (counters, CQ data), and the reads
//! it serves (chunks checked again before each, pushed by CMA when allowed).

use super::completion::cq_success;
use super::matching::IovList;
use super::rma::refused_unanswered;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cq::CqEntry;
use crate::core::mr::EACCES;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Payload, Place, Port};
use std::collections::VecDeque;

impl State {
    /// Where an RMA chunk's payload goes.
    pub(super) fn rma_place(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) -> Place {
        match h.op {
            op::WRITE => self.rma_place_write(b, src, h),
            op::READ_RESP => self.rma_place_read(src, h),
            op::ATOMIC => self.atomic_place_request(b, src, h),
            op::ATOMIC_RESP => self.atomic_place_response(b, src, h),
            _ => Place::Discard,
        }
    }

    /// The target's check of a segment (before any access): the endpoint
    /// takes RMA, the key exists, the range is inside its region and the
    /// region grants `access`.
    pub(super) fn rma_target(&self, h: &WireHdr, access: u64) -> Result<IovList> {
        self.target_check(h, access, FI_RMA)
    }

    /// [`State::rma_target`] for `class` (`FI_RMA` or `FI_ATOMIC`): the
    /// endpoint takes it and every right in `access`.
    pub(super) fn target_check(&self, h: &WireHdr, access: u64, class: u64) -> Result<IovList> {
        let dirs = self.cfg.caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
        if self.cfg.caps & class == 0 || (dirs != 0 && dirs & access != access) {
            return Err(EACCES);
        }
        let len = usize::try_from(h.len).map_err(|_| EACCES)?;
        self.rma
            .mrs
            .as_ref()
            .ok_or(EACCES)?
            .access(h.tag, h.offset, len, access)
    }

    /// The answer to a write's last chunk: an `RMA_ACK`, unless the
    /// initiator completed the write when it sent it (`NO_ANSWER`,
    /// transmit complete): then a refusal can only be logged here (the
    /// region was not touched).
    pub(super) fn rma_answer(&mut self, to: Addr, h: &WireHdr, status: Option<Error>) {
        if h.flags & flag::NO_ANSWER == 0 {
            self.rma_ack(to, h, status);
        } else if let Some(e) = status {
            refused_unanswered("RMA write", &to, h, e);
        }
    }

    pub(super) fn rma_ack(&mut self, to: Addr, h: &WireHdr, status: Option<Error>) {
        let mut a = WireHdr::new(op::RMA_ACK);
        a.msg_id = h.msg_id;
        a.aux = h.aux;
        a.data = status.map_or(0, |e| e.0 as u64);
        self.outbox.push((to, a));
    }

    /// Whether the remote event of a finished segment `h` fits the receive
    /// CQ (only remote CQ data makes an entry).
    pub(super) fn rma_event_fits(b: &Bound<'_>, h: &WireHdr) -> bool {
        h.flags & flag::FINAL == 0 || h.flags & flag::REMOTE_CQ_DATA == 0 || b.rx_cq.is_none_or(|c| c.has_room())
    }

    /// The target's events for a segment `h` that is done: the counter
    /// bound to its region; with the operation's last (`FINAL`) segment, the
    /// endpoint's `FI_REMOTE_*` counters and the remote CQ data entry
    /// (flags `class` = `FI_RMA` or `FI_ATOMIC`, `FI_REMOTE_WRITE`,
    /// `FI_REMOTE_CQ_DATA`).
    pub(super) fn rma_remote_event(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr, kind: RmaKind) {
        self.remote_event(b, src, h, kind, FI_RMA)
    }

    pub(super) fn remote_event(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr, kind: RmaKind, class: u64) {
        // A counter bound to the region counts every segment done in it.
        if let Some(m) = &self.rma.mrs {
            m.count(
                h.tag,
                if kind == RmaKind::Write {
                    FI_REMOTE_WRITE
                } else {
                    FI_REMOTE_READ
                },
            );
        }
        if h.flags & flag::FINAL == 0 {
            return;
        }
        match kind {
            RmaKind::Read => {
                if let Some(c) = b.rma.remote_read {
                    c.inc();
                }
            }
            RmaKind::Write => {
                if let Some(c) = b.rma.remote_write {
                    c.inc();
                }
                if h.flags & flag::REMOTE_CQ_DATA != 0 {
                    let src_fi = if self.cfg.caps & FI_SOURCE != 0 {
                        self.src_fi_addr(b, src)
                    } else {
                        None
                    };
                    let entry = CqEntry {
                        len: h.len as usize,
                        data: h.data,
                        src: src_fi.unwrap_or(FI_ADDR_NOTAVAIL),
                        ..CqEntry::new(core::ptr::null_mut(), class | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)
                    };
                    cq_success(
                        b.rx_cq,
                        Report {
                            on_success: true,
                            slot: false,
                            inject: false,
                            lane: 0,
                        },
                        entry,
                    );
                }
            }
        }
    }

    /// A `WRITE` chunk arrives at its target: checked (the whole segment,
    /// every chunk), then placed straight into registered memory.
    pub(super) fn rma_place_write(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) -> Place {
        let last = h.flags & flag::LAST != 0;
        if last && !Self::rma_event_fits(b, h) {
            return Place::Stall;
        }
        match self.rma_target(h, FI_REMOTE_WRITE) {
            Ok(dst) => {
                let n = h.payload as usize;
                let handle = self.rma.placing.insert(Placing::Write { src: *src, hdr: *h });
                Place::Into {
                    handle: RMA_HANDLE | handle,
                    dst: dst.sub(h.reserved as usize, n),
                    take: n,
                }
            }
            Err(e) => {
                let key = (*src, h.msg_id, h.aux);
                if last {
                    self.rma.spoiled.remove(&key);
                    self.rma_answer(*src, h, Some(e));
                } else if self.rma.spoiled.len() < MAX_SPOILED {
                    self.rma.spoiled.entry(key).or_insert(e);
                }
                Place::Discard
            }
        }
    }

    /// A `READ_RESP` chunk arrives at the reader: it must be the next bytes
    /// of the segment its operation waits for.
    pub(super) fn rma_place_read(&mut self, src: &Addr, h: &WireHdr) -> Place {
        let Some(op) = self.rma.ops.get_mut(&h.msg_id) else {
            return Place::Discard;
        };
        let Phase::Reading { got, chunk: 0 } = op.phase else {
            return Place::Discard;
        };
        let seg = op.segment();
        if op.peer != *src || op.seg as u32 != h.aux || h.len != seg.len as u64 || h.reserved != got as u64 {
            return Place::Discard;
        }
        let n = h.payload as usize;
        op.phase = Phase::Reading { got, chunk: n };
        let dst = op.local.sub(op.seg_off + got, n);
        let handle = self.rma.placing.insert(Placing::Read { id: h.msg_id, n });
        Place::Into {
            handle: RMA_HANDLE | handle,
            dst,
            take: n,
        }
    }

    /// Reads being served: each chunk checked again before its bytes are
    /// read (a region closed in the middle ends the read in error), pushed
    /// by CMA when the reader named its buffer and it is allowed.
    pub(super) fn rma_serve_reads(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut keep = VecDeque::new();
        while let Some(mut j) = self.rma.reads.pop_front() {
            let len = j.hdr.len as usize;
            // A streamed read towards a peer whose ring is full waits,
            // unchecked, for the next pass.
            if j.table.is_empty() && j.off < len && self.rma.blocked.contains(&j.src) {
                keep.push_back(j);
                continue;
            }
            let src_iov = match self.rma_target(&j.hdr, FI_REMOTE_READ) {
                Ok(l) => l,
                Err(e) => {
                    self.rma_ack(j.src, &j.hdr, Some(e));
                    continue;
                }
            };
            if !j.table.is_empty() {
                let table = std::mem::take(&mut j.table);
                if self.cfg.cma && j.src_pid > 0 {
                    match port.copier().and_then(|c| c.push(j.src_pid, &table, &src_iov, len)) {
                        Ok(_) => {
                            self.rma_ack(j.src, &j.hdr, None);
                            self.rma_remote_event(b, &j.src, &j.hdr, RmaKind::Read);
                            continue;
                        }
                        Err(e) if e == Error::OPNOTSUPP => {} // stream it
                        Err(e) => {
                            self.rma_ack(j.src, &j.hdr, Some(e));
                            continue;
                        }
                    }
                }
            }
            if len == 0 {
                self.rma_ack(j.src, &j.hdr, None);
                self.rma_remote_event(b, &j.src, &j.hdr, RmaKind::Read);
                continue;
            }
            let limit = port.eager_limit_for(&j.src);
            let mut dead = false;
            while j.off < len {
                let rest = len - j.off;
                let n = rest.min(limit).min(port.room(&j.src));
                if n == 0 || (n < MIN_CHUNK && n < rest) {
                    break;
                }
                let mut r = WireHdr::new(op::READ_RESP);
                r.msg_id = j.hdr.msg_id;
                r.aux = j.hdr.aux;
                r.len = j.hdr.len;
                r.reserved = j.off as u64;
                if j.off + n == len {
                    r.flags |= flag::LAST;
                }
                // A copy if the transport must queue it: the region may go
                // once this pass is over.
                match port.send(&j.src, &r, Payload::Iov(&src_iov, j.off, n), true) {
                    Ok(_) => j.off += n,
                    Err(e) if e == Error::AGAIN => break,
                    Err(_) => {
                        dead = true;
                        break;
                    }
                }
            }
            if dead {
                continue;
            }
            if j.off == len {
                self.rma_remote_event(b, &j.src, &j.hdr, RmaKind::Read);
            } else {
                if !self.rma.blocked.contains(&j.src) {
                    self.rma.blocked.push(j.src);
                }
                keep.push_back(j);
            }
        }
        self.rma.reads = keep;
    }
}
