//! Completions: the CQ entry and counter of every operation, success or
//! error, with the CQ slot the operation claimed at post time (FI_RM_ENABLED
//! admission) or none; selective completion; FI_SOURCE / FI_SOURCE_ERR;
//! truncation (`FI_ETRUNC` with `olen`).

use super::lanes::Sink;
use super::matching::PostedRecv;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::Error;
use crate::core::cq::{Cq, CqEntry, CqErrEntry};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, WireHdr};
use core::ffi::c_void;

/// What a receive's completion needs of it: a posted receive, or the
/// few words of one copied out before it left its queue (a [`RxWho`]:
/// copying the whole receive, iov list and all, costs a call to memcpy on
/// the small-message path).
pub(super) trait RxIdent {
    fn who(&self) -> RxWho;
}

#[derive(Clone, Copy, Debug)]
pub(super) struct RxWho {
    pub(super) context: usize,
    pub(super) tagged: bool,
    pub(super) flags: u64,
    pub(super) claimed: bool,
    pub(super) lane: u8,
}

impl RxIdent for RxWho {
    #[inline]
    fn who(&self) -> RxWho {
        *self
    }
}

impl RxIdent for PostedRecv {
    #[inline]
    fn who(&self) -> RxWho {
        RxWho {
            context: self.context,
            tagged: self.tagged,
            flags: self.flags,
            claimed: self.claimed,
            lane: self.lane,
        }
    }
}

/// What a receive got: `len` bytes placed at `buf` of the message `hdr`
/// from `src`; `olen` > 0 means truncated (FI_ETRUNC, `olen` = the rest);
/// `extra` completion flags (FI_MULTI_RECV, FI_CLAIM, FI_MORE, ...).
pub(super) struct Received<'a> {
    pub(super) src: Option<Addr>,
    pub(super) hdr: &'a WireHdr,
    pub(super) buf: usize,
    pub(super) len: usize,
    pub(super) olen: usize,
    pub(super) extra: u64,
}

/// Why a receive ended without data, and what its error entry says.
pub(super) struct RxFailure {
    pub(super) err: Error,
    /// The sender of the message the receive had matched, if any.
    pub(super) src: Option<Addr>,
    pub(super) tag: u64,
    pub(super) data: u64,
    pub(super) olen: usize,
    pub(super) extra: u64,
}

impl RxFailure {
    pub(super) fn new(err: Error) -> RxFailure {
        RxFailure {
            err,
            src: None,
            tag: 0,
            data: 0,
            olen: 0,
            extra: 0,
        }
    }

    /// The receive of message `hdr` from `src` failed: none of its `len`
    /// bytes count.
    pub(super) fn of(err: Error, src: Addr, hdr: &WireHdr, extra: u64) -> RxFailure {
        RxFailure {
            err,
            src: Some(src),
            tag: hdr.tag,
            data: hdr.data,
            olen: hdr.len as usize,
            extra,
        }
    }
}

impl State {
    pub(super) fn src_fi_addr(&self, b: &Bound<'_>, src: &Addr) -> Option<fi_addr_t> {
        b.av.as_ref().and_then(|av| av.reverse_lookup(src))
    }

    /// A receive completed (successfully, truncated, or from a source
    /// FI_SOURCE_ERR must report): its entry and counter in the endpoint's
    /// bindings or, on a scalable endpoint, in those of the receive context
    /// it was posted on.
    pub(super) fn complete_rx(&mut self, b: &Bound<'_>, r: &impl RxIdent, got: Received<'_>) {
        let r = r.who();
        self.rx_done(b, self.rx_sink(b, r.lane), r, got);
    }

    /// [`State::complete_rx`] inlined into the small-message path
    /// (`deliver_matched`), whose pass knows whether the endpoint has
    /// contexts (`LANES`): without, no context work at all.
    #[inline(always)]
    pub(super) fn complete_rx_in<const LANES: bool>(&mut self, b: &Bound<'_>, r: &impl RxIdent, got: Received<'_>) {
        let r = r.who();
        let to = if LANES { self.rx_sink(b, r.lane) } else { Sink::rx_of(b) };
        self.rx_done(b, to, r, got);
    }

    /// [`State::complete_rx`] with its CQ and counter chosen (`to`).
    #[inline(always)]
    fn rx_done(&self, b: &Bound<'_>, to: Sink<'_>, r: RxWho, got: Received<'_>) {
        let Received {
            src,
            hdr: h,
            buf,
            len: n,
            olen,
            extra,
        } = got;
        let cq_data = h.flags & flag::REMOTE_CQ_DATA != 0;
        let flags =
            FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG } | if cq_data { FI_REMOTE_CQ_DATA } else { 0 } | extra;
        let src_fi = match &src {
            Some(a) if self.cfg.caps & (FI_SOURCE | FI_SOURCE_ERR) != 0 => self.src_fi_addr(b, a),
            _ => None,
        };
        let entry = CqEntry {
            op_context: r.context as *mut c_void,
            flags,
            len: n + self.cfg.msg_prefix,
            buf: buf as *mut c_void,
            data: if cq_data { h.data } else { 0 },
            tag: if r.tagged { h.tag } else { 0 },
            src: src_fi.unwrap_or(FI_ADDR_NOTAVAIL),
        };
        let err = if olen > 0 {
            Some((Error::TRUNC, Vec::new()))
        } else if let (None, Some(a)) = (src_fi, src.filter(|_| self.cfg.caps & FI_SOURCE_ERR != 0)) {
            // fi_cq(3) FI_SOURCE_ERR: the source is not in the AV; report it
            // as an error whose err_data is the raw address (insertable).
            Some((Error::ADDRNOTAVAIL, a.to_bytes()))
        } else {
            None
        };
        match err {
            None => {
                if let Some(c) = to.cntr {
                    c.inc();
                }
                // The completion that releases a multi-receive buffer is
                // written whatever selective completion says (fi_msg(3)).
                let want = !to.selective || r.flags & FI_COMPLETION != 0 || extra & FI_MULTI_RECV != 0;
                cq_success(
                    to.cq,
                    Report {
                        on_success: want,
                        slot: r.claimed,
                        inject: false,
                        lane: 0,
                    },
                    entry,
                );
            }
            Some((e, err_data)) => {
                if let Some(c) = to.cntr {
                    c.inc_err();
                }
                let mut entry = entry;
                if let (None, Some(a)) = (src_fi, &src) {
                    // A truncated receive's error entry names its sender
                    // (fi_cq_err_entry.src_addr, 1.20+), FI_SOURCE or not.
                    entry.src = self.src_fi_addr(b, a).unwrap_or(FI_ADDR_NOTAVAIL);
                }
                cq_error(
                    to.cq,
                    r.claimed,
                    CqErrEntry {
                        entry,
                        olen,
                        err: e.0,
                        prov_errno: e.0,
                        err_data,
                    },
                );
            }
        }
    }

    /// A multi-receive buffer released on its own (a message did not fit
    /// what is left of it): a completion with `FI_MULTI_RECV` as its only
    /// flag (fi_cq(3): "If other flag bits are zero, the provider is
    /// reporting that the multi-recv buffer has been released"), `buf` the
    /// first unused byte, written even under selective completion. No
    /// message: the receive counter does not count it.
    pub(super) fn complete_release(&mut self, b: &Bound<'_>, r: &PostedRecv) {
        let to = self.rx_sink(b, r.lane);
        let entry = CqEntry {
            buf: r.iov.addr_at(r.used) as *mut c_void,
            ..CqEntry::new(r.context as *mut c_void, FI_MULTI_RECV)
        };
        cq_success(
            to.cq,
            Report {
                on_success: true,
                slot: r.claimed,
                inject: false,
                lane: 0,
            },
            entry,
        );
    }

    /// A receive ended in error (its error entry; the counter's error).
    pub(super) fn complete_rx_err(&mut self, b: &Bound<'_>, r: &PostedRecv, f: RxFailure) {
        let to = self.rx_sink(b, r.lane);
        if let Some(c) = to.cntr {
            c.inc_err();
        }
        let flags = FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG } | f.extra;
        let entry = CqEntry {
            data: f.data,
            tag: f.tag,
            // fi_cq_err_entry.src_addr (1.20+): the sender, when known.
            src: f.src.and_then(|a| self.src_fi_addr(b, &a)).unwrap_or(FI_ADDR_NOTAVAIL),
            ..CqEntry::new(r.context as *mut c_void, flags)
        };
        cq_error(
            to.cq,
            r.claimed,
            CqErrEntry {
                olen: f.olen,
                ..CqErrEntry::new(entry, f.err.0)
            },
        );
    }
}

/// Queues a success completion (or, for a silent one, gives back the
/// slot the operation claimed). A refused push means the CQ is in its
/// overrun state, which the application learns from the CQ itself.
/// Inlined into each caller: a call would add its frame and a copy of the
/// entry into its argument to every completion.
#[inline(always)]
pub(super) fn cq_success(cq: Option<&Cq>, how: Report, e: CqEntry) {
    let Some(cq) = cq else { return };
    match (how.on_success, how.slot) {
        (true, true) => drop(cq.push_claimed(e)),
        (true, false) => drop(cq.push(e)),
        (false, true) => cq.unclaim_slot(),
        (false, false) => {}
    }
}

/// A transmit operation's failure: its error entry (always reported,
/// fi_cq(3)), except for an `fi_inject*` call. fi_inject(3) takes no
/// context, and an error entry whose `op_context` is NULL is one that MPI
/// libraries take for their own request and dereference (Open MPI's mtl
/// ofi). Such a failure is counted on the bound counter (the caller does
/// that), logged, and shows on the operations with a context that follow
/// towards the same peer, which fail too.
pub(super) fn tx_error(cq: Option<&Cq>, how: Report, e: CqErrEntry) {
    if how.inject {
        static FAILED: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);
        let n = FAILED.fetch_add(1, core::sync::atomic::Ordering::Relaxed) + 1;
        // The first few, then one in 1024: a dead peer fails every inject.
        if n <= 8 || n.is_multiple_of(1024) {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_DATA,
                "an fi_inject* operation failed ({}; {n} so far in this process): it has no context for a CQ error entry, so only a bound counter's error count shows it",
                e.err
            );
        }
        if how.slot {
            if let Some(cq) = cq {
                cq.unclaim_slot();
            }
        }
        return;
    }
    cq_error(cq, how.slot, e);
}

/// Queues an error completion (always reported, fi_cq(3)); `slot`: the
/// operation claimed one at post time.
pub(super) fn cq_error(cq: Option<&Cq>, slot: bool, e: CqErrEntry) {
    let Some(cq) = cq else { return };
    let _ = if slot { cq.push_err_claimed(e) } else { cq.push_err(e) };
}
