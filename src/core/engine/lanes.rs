//! The contexts of a scalable endpoint as its engine keeps them
//! (docs/protocol.md, "Receive contexts"): one port and one address for
//! the endpoint, and per context what the application bound to it. A
//! transmit context `j` is a lane of completions (its CQ and counter); a
//! receive context `k` is that and a matching queue of its own (posted
//! receives and unexpected messages), which messages naming `k` in their
//! header (`flag::LANE`) are matched against.
//!
//! The engine works on one matching queue at a time (`State::m`): the
//! queue of the receive context a call or an arriving message is about is
//! moved into it for the call (`State::with_lane`, `contexts.rs`) and the
//! others wait here. Endpoints that are not scalable have no `Lanes`.
//! Operations remember their context (`Report::lane`,
//! `PostedRecv::lane`), so that a completion made later, in any pass, goes
//! to that context's CQ and counter.

use super::matching::Matching;
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::users::Held;

/// What one context was bound to when it was enabled.
pub(crate) struct Side {
    pub(crate) cq: Option<Held<Cq>>,
    pub(crate) selective: bool,
    pub(crate) cntr: Option<Held<Cntr>>,
}

/// Where a completion goes: a context's bindings, or an endpoint's.
#[derive(Clone, Copy)]
pub(super) struct Sink<'a> {
    pub(super) cq: Option<&'a Cq>,
    pub(super) selective: bool,
    pub(super) cntr: Option<&'a Cntr>,
}

impl Side {
    pub(super) fn sink(&self) -> Sink<'_> {
        Sink {
            cq: self.cq.as_deref(),
            selective: self.selective,
            cntr: self.cntr.as_deref(),
        }
    }
}

pub(crate) struct Lanes {
    /// Transmit contexts' bindings (None: not enabled, or closed).
    pub(super) tx: Vec<Option<Side>>,
    /// Receive contexts' bindings.
    pub(super) rx: Vec<Option<Side>>,
    /// Receive contexts' matching queues; the one of context `cur` is in
    /// `State::m` (its slot here holds an empty queue meanwhile).
    pub(super) parked: Vec<Matching>,
    pub(super) cur: usize,
}

impl Lanes {
    /// `tx` transmit and `rx` receive contexts (1 ..= `flag::LANES` each),
    /// the unexpected budget `budget` shared evenly among the receive
    /// contexts. Returns the lanes and the queue of receive context 0 (the
    /// engine's `m`).
    pub(super) fn new(tx: usize, rx: usize, budget: usize) -> (Lanes, Matching) {
        let per = budget / rx.max(1);
        let mut parked: Vec<Matching> = (0..rx).map(|_| Matching::new(per)).collect();
        let first = std::mem::replace(&mut parked[0], Matching::new(0));
        let lanes = Lanes {
            tx: (0..tx).map(|_| None).collect(),
            rx: (0..rx).map(|_| None).collect(),
            parked,
            cur: 0,
        };
        (lanes, first)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn tx_sink(&self, lane: u8) -> Sink<'_> {
        side_sink(self.tx.get(lane as usize))
    }

    #[cold]
    #[inline(never)]
    pub(super) fn rx_sink(&self, lane: u8) -> Sink<'_> {
        side_sink(self.rx.get(lane as usize))
    }
}

fn side_sink(s: Option<&Option<Side>>) -> Sink<'_> {
    match s {
        Some(Some(s)) => s.sink(),
        _ => Sink {
            cq: None,
            selective: false,
            cntr: None,
        },
    }
}
