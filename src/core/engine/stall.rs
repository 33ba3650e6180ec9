//! Backpressure stalls, for the debug log: a peer whose ring or socket has
//! no room for our sends, or whose messages we hold back because the
//! unexpected budget is full. A stall is a run of refusals towards (or
//! from) one peer with no gap over [`STALL_GAP`] between them; it is logged
//! once, when it has lasted [`STALL_LOG_AFTER`]. Only watched while debug
//! lines are enabled (the callers ask first): a refusal otherwise costs the
//! question, no clock read.

use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::transport::addr::Addr;
use std::time::{Duration, Instant};

impl State {
    /// A refusal involving `peer` noted in the watch `pick` chooses, if
    /// debug lines of the data path are wanted: the stall's length when it
    /// is to be logged now ([`StallWatch::note`]).
    fn stall_to_log(&mut self, peer: &Addr, pick: fn(&mut Stalls) -> &mut StallWatch) -> Option<Duration> {
        crate::base::log::enabled(FI_LOG_DEBUG, FI_LOG_EP_DATA)?;
        pick(self.stalls.get_or_insert_with(Default::default)).note(peer, Instant::now())
    }

    /// The transport had no room for a record to `peer` (a send refused
    /// with -FI_EAGAIN, or a stream's chunk left for a later pass).
    #[cold]
    #[inline(never)]
    pub(super) fn no_room(&mut self, peer: &Addr) {
        if let Some(d) = self.stall_to_log(peer, |s| &mut s.tx) {
            crate::base::log::log_debug_limited!(
                FI_LOG_EP_DATA,
                "sends to {peer:?} waiting for room for {d:?} (the peer reads slowly: its ring or socket is full)"
            );
        }
    }

    /// A message from `src` was held back: the unexpected budget (the
    /// endpoint's, or `src`'s share of it) is full.
    #[cold]
    #[inline(never)]
    pub(super) fn over_budget(&mut self, src: &Addr) {
        if let Some(d) = self.stall_to_log(src, |s| &mut s.rx) {
            let held = self.m.unexpected_held(src);
            crate::base::log::log_debug_limited!(
                FI_LOG_EP_DATA,
                "messages from {src:?} held back for {d:?}: unexpected budget full ({held} bytes held from it, \
                 FI_RUSTFAB_UNEXP_BUDGET {}); receives posted free it",
                self.cfg.unexp_budget
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_reported_once_after_it_lasted_long_enough() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let (p, q) = (Addr::Shm(1), Addr::Shm(2));
        let mut w = StallWatch::default();
        // Refusals every 20 ms: reported at 100 ms, then not again.
        let got: Vec<Option<Duration>> = (0..10).map(|i| w.note(&p, ms(20 * i))).collect();
        assert_eq!(got[..5], [None; 5]);
        assert_eq!(got[5], Some(Duration::from_millis(100)));
        assert_eq!(got[6..], [None; 4]);
        // A gap over STALL_GAP ends it: the next run is a new stall.
        assert_eq!(w.note(&p, ms(300)), None);
        assert_eq!(w.note(&p, ms(340)), None);
        assert_eq!(w.note(&p, ms(380)), None);
        assert_eq!(w.note(&p, ms(400)), Some(Duration::from_millis(100)));
        // Another peer starts its own.
        assert_eq!(w.note(&q, ms(410)), None);
        assert_eq!(w.note(&q, ms(450)), None);
        assert_eq!(w.note(&q, ms(500)), None);
        assert_eq!(w.note(&q, ms(510)), Some(Duration::from_millis(100)));
    }
}
