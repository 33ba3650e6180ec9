//! What is specific to connected (`FI_EP_MSG`) endpoints: one fixed peer
//! (sends ignore their destination address, no AV) and the end of the
//! connection, which ends every outstanding operation
//! (`src/fi/connected.rs` calls [`Inner::fail_all`]).

use super::completion::RxFailure;
use super::state::*;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;

impl Inner {
    /// Where a send goes: a connected endpoint's one peer whatever the
    /// destination address, else the AV's entry for it (in the port's
    /// canonical form).
    #[inline(always)]
    pub(super) fn destination(&mut self, b: &Bound<'_>, dest: fi_addr_t) -> Result<Addr> {
        self.destination_lane(b, dest).map(|(a, _)| a)
    }

    /// [`Inner::destination`] and the receive context `dest` names there
    /// (`fi_rx_addr`, as the header's `flag::LANE` bits: `AvView::lane_flags`;
    /// 0 for a connected endpoint), which a message must carry; the
    /// context's error (`-FI_EINVAL`) is the message's only. Kept with
    /// the address in the destination cache: no test of the AV's
    /// `rx_ctx_bits` per send.
    #[inline(always)]
    pub(super) fn destination_lane(&mut self, b: &Bound<'_>, dest: fi_addr_t) -> Result<(Addr, Result<u32>)> {
        match self.st.cfg.fixed_peer {
            Some(p) => Ok((p, Ok(0))),
            None => {
                let av = b.av.as_ref().ok_or(Error::NOAV)?;
                // The last destination again, while the AV removed nothing
                // (core/av.rs, "Thread safety"): no read lock, no lookup,
                // and the generation a load through the view (no call).
                let id = av.id();
                let gen = av.generation();
                if let Some(c) = &self.st.dest {
                    if c.fi_addr == dest && c.gen == gen && c.av == id {
                        return Ok((c.addr, c.lane));
                    }
                }
                let addr = self.port.canonical(&av.lookup_addr(dest).ok_or(Error::INVAL)?);
                let lane = av.lane_flags(dest);
                self.st.dest = Some(DestCache {
                    av: id,
                    fi_addr: dest,
                    gen,
                    addr,
                    lane,
                });
                Ok((addr, lane))
            }
        }
    }
}

impl Inner {
    /// A connected endpoint lost its connection (`fi_shutdown`, the peer's
    /// shutdown or death, a failed connect): every operation still
    /// outstanding completes with `e` (exactly once), and buffered
    /// unexpected messages are dropped. fi_cm(3): "Outstanding operations
    /// posted to the endpoint when fi_shutdown is called will be canceled".
    pub(crate) fn fail_all<'a>(&mut self, b: impl Into<Bound<'a>>, e: Error) {
        let b = &b.into();
        let st = &mut self.st;
        let ids: Vec<u64> = st.tx.keys().copied().collect();
        for id in ids {
            if let Some(t) = st.tx.remove(&id) {
                st.finish_tx(b, t, Err(e));
            }
        }
        let hs: Vec<u32> = st.rx.iter_mut().map(|(h, _)| h).collect();
        for h in hs {
            if let Some(s) = st.rx.remove(h) {
                st.complete_rx_err(b, &s.recv, RxFailure::of(e, s.src, &s.hdr, s.extra_flags));
            }
        }
        let hs: Vec<u32> = st.inflight.iter_mut().map(|(h, _)| h).collect();
        for h in hs {
            if let Some(f) = st.inflight.remove(h) {
                st.complete_rx_err(b, &f.recv, RxFailure::of(e, f.src, &f.hdr, f.extra_flags));
            }
        }
        for p in std::mem::take(&mut st.pulls) {
            st.complete_rx_err(b, &p.recv, RxFailure::of(e, p.src, &p.hdr, p.extra_flags));
        }
        for r in st.m.drain_posted() {
            st.complete_rx_err(
                b,
                &r,
                RxFailure {
                    tag: r.tag,
                    ..RxFailure::new(e)
                },
            );
        }
        st.rma_fail_all(b, e);
        if let Some(p) = st.cfg.fixed_peer {
            st.m.drop_unexpected_from(&p);
        }
        st.outbox.clear();
    }
}
