//! Completions: the CQ entry and counter of every operation, success or
//! error, with the CQ slot the operation claimed at post time (FI_RM_ENABLED
//! admission) or none; selective completion; FI_SOURCE / FI_SOURCE_ERR;
//! truncation (`FI_ETRUNC` with `olen`).

use super::*;

impl State {
    pub(super) fn src_fi_addr(&self, b: &Bound<'_>, src: &Addr) -> Option<fi_addr_t> {
        b.av.as_ref().and_then(|av| av.reverse_lookup(src))
    }

    /// A receive completed with `n` bytes placed at `buf` (`olen` > 0:
    /// truncated, reported as FI_ETRUNC with `len = n`, `olen` = the rest).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_rx(
        &mut self,
        b: &Bound<'_>,
        r: &PostedRecv,
        src: Option<Addr>,
        h: &WireHdr,
        buf: usize,
        n: usize,
        olen: usize,
        extra: u64,
    ) {
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
            len: n,
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
                if let Some(c) = &b.recv_cntr {
                    c.inc();
                }
                let want = !b.rx_selective || r.flags & FI_COMPLETION != 0;
                cq_success(b.rx_cq, r.claimed, want, entry);
            }
            Some((e, err_data)) => {
                if let Some(c) = &b.recv_cntr {
                    c.inc_err();
                }
                cq_error(
                    b.rx_cq,
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

    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_rx_err(
        &mut self,
        b: &Bound<'_>,
        r: &PostedRecv,
        e: Error,
        tag: u64,
        data: u64,
        olen: usize,
        extra: u64,
    ) {
        if let Some(c) = &b.recv_cntr {
            c.inc_err();
        }
        let flags = FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG } | extra;
        let entry = CqEntry {
            data,
            tag,
            ..CqEntry::new(r.context as *mut c_void, flags)
        };
        cq_error(
            b.rx_cq,
            r.claimed,
            CqErrEntry {
                olen,
                ..CqErrEntry::new(entry, e.0)
            },
        );
    }
}

/// Queues a success completion (or, for a silent one, gives back the
/// slot the operation claimed). A refused push means the CQ is in its
/// overrun state, which the application learns from the CQ itself.
pub(super) fn cq_success(cq: Option<&Cq>, claimed: bool, wanted: bool, e: CqEntry) {
    let Some(cq) = cq else { return };
    match (wanted, claimed) {
        (true, true) => drop(cq.push_claimed(e)),
        (true, false) => drop(cq.push(e)),
        (false, true) => cq.unclaim_slot(),
        (false, false) => {}
    }
}

/// Queues an error completion (always reported, fi_cq(3)).
pub(super) fn cq_error(cq: Option<&Cq>, claimed: bool, e: CqErrEntry) {
    let Some(cq) = cq else { return };
    let _ = if claimed {
        cq.push_err_claimed(e)
    } else {
        cq.push_err(e)
    };
}
