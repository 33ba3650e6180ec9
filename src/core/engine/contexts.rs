//! A scalable endpoint's contexts in the engine (`lanes.rs` keeps them):
//! turning an endpoint into one, binding and unbinding a context, running
//! a call or an arriving message on a receive context's matching queue,
//! and where a completion goes (`tx_sink`, `rx_sink`: the endpoint's own
//! bindings, or its context's).

use super::lanes::{Lanes, Side, Sink};
use super::state::*;
use crate::base::error::{Error, Result};
use crate::transport::proto::flag;

impl State {
    /// Where a send's completion goes: the endpoint's bindings, or those of
    /// transmit context `lane` of a scalable endpoint.
    /// The completion paths test [`State::has_lanes`] once and, on
    /// endpoints without contexts, use `b`'s bindings directly
    /// ([`Sink::tx_of`]); this is the general answer.
    #[inline(always)]
    pub(super) fn tx_sink<'a>(&'a self, b: &Bound<'a>, lane: u8) -> Sink<'a> {
        match &self.lanes {
            None => Sink::tx_of(b),
            Some(l) => l.tx_sink(lane),
        }
    }

    /// Where a receive's completion goes (as `tx_sink`).
    #[inline(always)]
    pub(super) fn rx_sink<'a>(&'a self, b: &Bound<'a>, lane: u8) -> Sink<'a> {
        match &self.lanes {
            None => Sink::rx_of(b),
            Some(l) => l.rx_sink(lane),
        }
    }

    /// Whether this is a scalable endpoint (it has contexts): the one
    /// test a completion or a progress pass makes before it takes the
    /// path that knows about contexts; endpoints without them stay on a
    /// path with no context work at all.
    #[inline(always)]
    pub(super) fn has_lanes(&self) -> bool {
        self.lanes.is_some()
    }

    /// The receive context whose queue is in `m` (0 on other endpoints).
    #[inline(always)]
    pub(super) fn cur_lane(&self) -> usize {
        self.lanes.as_ref().map_or(0, |l| l.cur)
    }

    /// `Matching::sender_failed` on the queues of the receive contexts
    /// not in place (none on endpoints that are not scalable).
    pub(super) fn parked_sender_failed(&mut self, peer: &crate::transport::addr::Addr, err: Error) -> usize {
        match self.lanes.as_mut() {
            None => 0,
            Some(l) => l.parked.iter_mut().map(|m| m.sender_failed(peer, err)).sum(),
        }
    }

    /// Whether receive context `lane` exists here.
    pub(super) fn has_lane(&self, lane: usize) -> bool {
        match &self.lanes {
            None => lane == 0,
            Some(l) => lane < l.rx.len(),
        }
    }

    pub(super) fn switch_lane(&mut self, to: usize) {
        let Some(l) = self.lanes.as_mut() else { return };
        let from = l.cur;
        std::mem::swap(&mut self.m, &mut l.parked[from]);
        std::mem::swap(&mut self.m, &mut l.parked[to]);
        l.cur = to;
    }
}

impl<'a> Sink<'a> {
    /// The endpoint's own transmit bindings in `b`.
    #[inline(always)]
    pub(super) fn tx_of(b: &Bound<'a>) -> Sink<'a> {
        Sink {
            cq: b.tx_cq,
            selective: b.tx_selective,
            cntr: b.send_cntr,
        }
    }

    /// The endpoint's own receive bindings in `b`.
    #[inline(always)]
    pub(super) fn rx_of(b: &Bound<'a>) -> Sink<'a> {
        Sink {
            cq: b.rx_cq,
            selective: b.rx_selective,
            cntr: b.recv_cntr,
        }
    }
}

impl<'a> Bound<'a> {
    /// The view of a call on context `lane` of a scalable endpoint bound
    /// to `side`: its CQ and counter in place of the endpoint's (transmit
    /// ones for a transmit context, receive ones for a receive context).
    pub(crate) fn for_ctx(&self, side: &'a Side, lane: u8, rx: bool) -> Bound<'a> {
        let mut b = *self;
        if rx {
            b.rx_cq = side.cq.as_deref();
            b.rx_selective = side.selective;
            b.recv_cntr = side.cntr.as_deref();
        } else {
            b.tx_cq = side.cq.as_deref();
            b.tx_selective = side.selective;
            b.send_cntr = side.cntr.as_deref();
        }
        b.ctx = lane;
        b
    }
}

impl Inner {
    /// Makes this (not yet enabled) endpoint a scalable one with `tx`
    /// transmit and `rx` receive contexts (1 ..= `flag::LANES` each).
    pub(crate) fn enable_lanes(&mut self, tx: usize, rx: usize) -> Result<()> {
        if !(1..=flag::LANES).contains(&tx) || !(1..=flag::LANES).contains(&rx) {
            return Err(Error::INVAL);
        }
        let (lanes, first) = Lanes::new(tx, rx, self.st.cfg.unexp_budget);
        self.st.m = first;
        self.st.lanes = Some(Box::new(lanes));
        Ok(())
    }

    /// Binds (Some) or unbinds (None) transmit (`rx` false) or receive
    /// context `i`. Returns what it was bound to before.
    pub(crate) fn set_side(&mut self, rx: bool, i: usize, side: Option<Side>) -> Result<Option<Side>> {
        let l = self.st.lanes.as_mut().ok_or(Error::INVAL)?;
        let slot = if rx { l.rx.get_mut(i) } else { l.tx.get_mut(i) };
        let slot = slot.ok_or(Error::INVAL)?;
        Ok(std::mem::replace(slot, side))
    }

    /// Puts receive context `lane`'s queue in place (a post on that
    /// context) and returns the context that was; `leave_rx_lane` with it
    /// puts things back.
    #[cold]
    #[inline(never)]
    pub(crate) fn enter_rx_lane(&mut self, lane: usize) -> Result<usize> {
        if !self.st.has_lane(lane) {
            return Err(Error::INVAL);
        }
        let prev = self.st.cur_lane();
        self.st.switch_lane(lane);
        Ok(prev)
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn leave_rx_lane(&mut self, prev: usize) {
        self.st.switch_lane(prev);
    }

    /// Runs `f` with receive context `lane`'s queue in place (a cancel on
    /// that context).
    pub(crate) fn with_rx_lane<R>(&mut self, lane: usize, f: impl FnOnce(&mut Inner) -> R) -> Result<R> {
        if !self.st.has_lane(lane) {
            return Err(Error::INVAL);
        }
        let prev = self.st.cur_lane();
        if prev == lane {
            return Ok(f(self));
        }
        self.st.switch_lane(lane);
        let r = f(self);
        self.st.switch_lane(prev);
        Ok(r)
    }
}
