//! The progress pass: the engine as the transport calls it during `poll`
//! ([`EngineDelivery`]), the work after it (pulls, control records,
//! streaming, peer liveness), the dispatch of control records, and the
//! endpoint's close.
use super::matching::Matching;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::collections::{FastMap, Slab};
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Delivery, Disposition, PayloadIn, Place, Port, PEER_FAILED};
use std::time::{Duration, Instant};

/// The pause between the passes of a close waiting for peers' pushes
/// ([`Inner::close`]): short against the copy of a large push (a 512 KiB
/// part of a split message), long enough to leave a shared core to the
/// peer.
const CLOSE_NAP: Duration = Duration::from_micros(50);

impl Inner {
    /// `fi_setname` before `fi_enable`: the endpoint moves to `port` (no
    /// traffic has flowed; the old port closes when dropped here).
    pub(crate) fn replace_port(&mut self, port: Box<dyn Port>) {
        self.port = port;
        self.advertise_rts_prefix();
    }

    pub(crate) fn new(port: Box<dyn Port>, cfg: EpConfig) -> Inner {
        Inner {
            port,
            st: State {
                m: Matching::new(cfg.unexp_budget),
                cfg,
                inflight: Slab::default(),
                pulls: Vec::new(),
                tx: FastMap::default(),
                rx: Slab::default(),
                next_id: 1,
                outbox: Vec::new(),
                no_cma: Default::default(),
                watch_tick: 0,
                buf: None,
                rma: Default::default(),
                dest: None,
                stalls: None,
                lanes: None,
            },
        }
    }

    pub(crate) fn addr(&self) -> Addr {
        self.port.addr()
    }

    pub(crate) fn wait_fd(&self) -> std::os::fd::RawFd {
        self.port.wait_fd()
    }

    pub(crate) fn set_sleepers(&mut self, n: usize) {
        self.port.set_sleepers(n);
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.port.has_pending()
    }

    pub(crate) fn config(&self) -> &EpConfig {
        &self.st.cfg
    }

    pub(crate) fn config_mut(&mut self) -> &mut EpConfig {
        &mut self.st.cfg
    }

    /// Whether operations wait on peers (see `State::waits_on_peers`).
    pub(crate) fn waits_on_peers(&self) -> bool {
        self.st.waits_on_peers()
    }

    pub(crate) fn tx_outstanding(&self) -> usize {
        self.st.tx.len() + self.st.rma.outstanding()
    }

    pub(crate) fn rx_posted(&self) -> usize {
        self.st.m.posted_count() + self.st.rx.len() + self.st.inflight.len() + self.st.pulls.len()
    }

    /// One progress pass: consume inbound records, fetch matched rendezvous
    /// data, send what that produced, stream pending rendezvous data, notice
    /// dead peers.
    pub(crate) fn progress<'a>(&mut self, b: impl Into<Bound<'a>>) {
        self.pass(&b.into());
    }

    /// [`Inner::progress`] with the view borrowed, not copied (the pass of
    /// `Source::progress`, run by every empty CQ read). Returns whether the
    /// transport saw a peer move ([`Port::poll`]).
    ///
    /// The pass's body is here, inlined into this caller only: a call frame
    /// less per empty CQ read, while the post paths keep calling
    /// [`Inner::pass`], which is this body out of line.
    #[inline(always)]
    pub(crate) fn progress_in(&mut self, b: &Bound<'_>) -> bool {
        let (port, st) = (&mut self.port, &mut self.st);
        // One test per pass: endpoints without contexts get the delivery
        // that does no context work.
        let moved = if st.has_lanes() {
            port.poll(&mut EngineDelivery::<true> { st, b })
        } else {
            port.poll(&mut EngineDelivery::<false> { st, b })
        };
        st.after_poll(port.as_mut(), b);
        moved
    }

    pub(super) fn pass(&mut self, b: &Bound<'_>) {
        self.progress_in(b);
    }

    /// Endpoint close: waits (at most `cfg.close_wait`) until no peer may
    /// still be writing into the application's buffers, then orderly
    /// goodbye to peers; nothing more completes.
    pub(crate) fn close(&mut self) {
        self.close_with(&mut || std::thread::sleep(CLOSE_NAP));
    }

    /// [`Inner::close`], calling `idle` between the passes of its wait
    /// (the engine's tests progress the peer there).
    pub(crate) fn close_with(&mut self, idle: &mut dyn FnMut()) {
        self.await_pushes(idle);
        self.st.buf_close(self.port.as_mut());
        self.port.close();
    }

    /// Progresses the endpoint (completions go nowhere: no CQ or counter
    /// is bound in these passes) until no peer may be writing into our
    /// memory — every split receive has its `PUSHED` (or its sender is
    /// gone: dead, or its `BYE` read) and every CMA read its target's
    /// answer (or the target failed) — or until `cfg.close_wait` ran out.
    /// Past the bound a push already started may still land in a buffer
    /// the application frees after the close (docs/shm.md, Large
    /// messages): logged. A bound of 0: no wait at all (the close goes on
    /// at once).
    fn await_pushes(&mut self, idle: &mut dyn FnMut()) {
        if self.st.cfg.close_wait.is_zero() || !self.st.pushed_into() {
            return;
        }
        let b = Bound::default();
        let deadline = Instant::now() + self.st.cfg.close_wait;
        loop {
            self.pass(&b);
            self.st.forget_dead_pushers(self.port.as_mut(), &b);
            if !self.st.pushed_into() {
                return;
            }
            if Instant::now() >= deadline {
                crate::base::log::log_warn!(
                    FI_LOG_EP_CTRL,
                    "endpoint closed with a peer's write into its buffers unanswered after {:?} (split \
                     receive or CMA read; FI_RUSTFAB_SHM_CLOSE_WAIT): a push already under way may still \
                     land in them",
                    self.st.cfg.close_wait
                );
                return;
            }
            idle();
        }
    }
}

/// The engine's [`Delivery`], the one the transports call during `poll`:
/// the state and the bindings of this pass (records routed to RMA or to
/// messages). `LANES`: the endpoint has receive contexts (`lanes.rs`),
/// chosen once per pass.
struct EngineDelivery<'a, const LANES: bool> {
    st: &'a mut State,
    b: &'a Bound<'a>,
}

impl<const LANES: bool> EngineDelivery<'_, LANES> {
    /// A message for another receive context than the one whose queue is
    /// in place (`contexts.rs`): `f` runs with that context's queue, or,
    /// when the endpoint has no such context, the message is refused:
    /// `refused` is returned, and a sender waiting for an answer gets an
    /// error ACK (`-FI_EADDRNOTAVAIL`).
    #[cold]
    #[inline(never)]
    fn in_lane<R>(&mut self, src: &Addr, hdr: &WireHdr, refused: R, f: impl FnOnce(&mut Self) -> R) -> R {
        let lane = flag::lane(hdr.flags);
        if !self.st.has_lane(lane) {
            crate::base::log::log_debug_limited!(
                FI_LOG_EP_DATA,
                "message from {src:?} for receive context {lane}, which this endpoint does not have: refused"
            );
            if hdr.op == op::RTS || hdr.flags & (flag::ACK_REQ | flag::ACK_ARRIVE) != 0 {
                self.st.ack(*src, hdr.msg_id, Some(Error::ADDRNOTAVAIL), 0);
            }
            return refused;
        }
        let prev = self.st.cur_lane();
        self.st.switch_lane(lane);
        let r = f(self);
        self.st.switch_lane(prev);
        r
    }

    /// Whether message record `hdr` is for another receive context than
    /// the one in place (EAGER and RTS records name one). On an endpoint
    /// without contexts (the one in place is 0) a flag test: a record
    /// naming a context there is refused (`in_lane`).
    #[inline(always)]
    fn other_lane(&self, hdr: &WireHdr) -> bool {
        (LANES || hdr.flags & flag::LANE != 0) && self.other_lane_slow(hdr)
    }

    #[cold]
    #[inline(never)]
    fn other_lane_slow(&self, hdr: &WireHdr) -> bool {
        flag::lane(hdr.flags) != self.st.cur_lane() && (hdr.op == op::EAGER || hdr.op == op::RTS)
    }
}

impl<const LANES: bool> Delivery for EngineDelivery<'_, LANES> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        if op::is_rma(hdr.op) {
            return self.st.rma_place(self.b, src, hdr);
        }
        if self.other_lane(hdr) {
            return self.in_lane(src, hdr, Place::Discard, |d| d.place(src, src_pid, hdr));
        }
        let p = self.st.place(self.b, src, src_pid, hdr);
        if p == Place::Discard && hdr.op == op::EAGER && hdr.flags & flag::ACK_ARRIVE != 0 {
            // Off the socket and dropped: transmit complete all the same.
            self.st.ack(*src, hdr.msg_id, None, 0);
        }
        p
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        if super::rma::owns_handle(handle) {
            return self.st.rma_placed(self.b, handle, result);
        }
        self.st.placed(self.b, handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        if self.other_lane(hdr) {
            return self.in_lane(src, hdr, (), |d| d.st.buffered(src, src_pid, hdr, data));
        }
        self.st.buffered(src, src_pid, hdr, data)
    }
    fn deliver(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        // Without contexts, `deliver_matched` leaves a record naming one
        // to `place` (through `place_and_copy`), which refuses it.
        if LANES && self.other_lane(hdr) {
            return self.in_lane(src, hdr, Disposition::Consumed, |d| {
                d.deliver(src, src_pid, hdr, payload)
            });
        }
        if self.st.deliver_matched::<LANES>(self.b, src, hdr, payload) {
            return Disposition::Consumed;
        }
        crate::transport::place_and_copy(self, src, src_pid, hdr, payload)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if op::is_rma(hdr.op) {
            return self.st.rma_control(self.b, src, src_pid, hdr, payload);
        }
        if self.other_lane(hdr) {
            return self.in_lane(src, hdr, Disposition::Consumed, |d| {
                d.control(src, src_pid, hdr, payload)
            });
        }
        self.st.control(self.b, src, src_pid, hdr, payload)
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.st.sent(self.b, msg_id, result)
    }
}

impl State {
    pub(super) fn ack(&mut self, to: Addr, msg_id: u64, status: Option<Error>, taken: usize) {
        let mut h = WireHdr::new(op::ACK);
        h.msg_id = msg_id;
        h.len = taken as u64;
        h.aux = status.map(|e| e.0 as u32).unwrap_or(0);
        self.outbox.push((to, h));
    }

    /// Work that needs the port, after it handed us records: rendezvous
    /// pulls, control records, DATA streaming, peer liveness.
    ///
    /// This runs on every progress pass (every CQ read of a polling
    /// application) and is nearly always idle: the tests are inlined into
    /// the pass and the work is an out-of-line call, so that an idle pass
    /// sets up no frame for it.
    #[inline]
    pub(super) fn after_poll(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        if !self.pulls.is_empty()
            || self.buf_has_pulls()
            || self.rma.busy()
            || !self.outbox.is_empty()
            || !self.tx.is_empty()
        {
            self.after_poll_work(port, b);
        }
        self.watch_peers(port, b);
    }

    #[inline(never)]
    fn after_poll_work(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        if !self.pulls.is_empty() {
            self.run_pulls(port, b);
        }
        self.buf_run_pulls(port, b);
        self.rma_after_poll(port, b);
        for (to, h) in self.outbox.drain(..) {
            // A dead peer's control records are dropped: its failure is
            // reported through the peer events instead.
            let _ = port.send_ctl(&to, &h);
        }
        if !self.tx.is_empty() {
            self.pump(port, b);
        }
    }

    fn control(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr, p: &dyn PayloadIn) -> Disposition {
        match h.op {
            op::RTS => self.on_rts(b, src, src_pid, h, p),
            op::ACK => {
                self.on_ack(b, src, h);
                Disposition::Consumed
            }
            op::BYE => {
                // shm: the sender closed its endpoint (its ring is done);
                // what of its messages is still in its memory is gone.
                self.buf_peer_failed(b, src);
                self.rma_peer_failed(b, src, PEER_FAILED);
                self.forget_owed(b, src, PEER_FAILED);
                // Nor is its receive buffer: a push asked for before it
                // closed is not made (the send waits for its end as any).
                for t in self.tx.values_mut() {
                    if t.peer == *src && matches!(t.state, TxState::Pushing { .. }) {
                        t.state = TxState::WaitAck;
                    }
                }
                // Its pushes into our split receives are over (a push is
                // made and answered within one of its passes, before its
                // close): what was not answered will never be.
                self.split_sender_gone(b, src);
                Disposition::Consumed
            }
            op::CTS => {
                self.on_cts(src, src_pid, h, p);
                Disposition::Consumed
            }
            op::PUSHED => {
                self.on_pushed(b, src, h);
                Disposition::Consumed
            }
            _ => Disposition::Consumed,
        }
    }
}
