//! Peer liveness and failure: while something waits on a peer, the
//! transport is asked (rate-limited) whether it is still there; a failed
//! peer's operations complete once, with `PEER_FAILED`. Posted receives that
//! merely could match it stay posted.

use super::completion::RxFailure;
use super::state::*;
use super::types::*;
use crate::abi::*;
use crate::base::error::Error;
use crate::transport::addr::Addr;
use crate::transport::proto::flag;
use crate::transport::{Port, PEER_FAILED};
use std::time::{Duration, Instant};

pub(super) const STREAM_LIVENESS: Duration = Duration::from_millis(100);

impl State {
    /// Whether operations wait on peers (liveness checks and a bounded
    /// sleep are needed so a dead peer is noticed).
    pub(crate) fn waits_on_peers(&self) -> bool {
        !self.tx.is_empty()
            || !self.rx.is_empty()
            || self.buf.as_ref().is_some_and(|x| x.streaming())
            || self.rma.busy()
    }

    #[inline]
    pub(super) fn watch_peers(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        // Liveness checks cost a clock read and possibly a /proc read: do
        // them only while something waits on a peer, every 64th pass (the
        // pass count first: `waits_on_peers` is a call and four loads, on
        // every pass of a polling application).
        self.watch_tick = self.watch_tick.wrapping_add(1);
        if self.watch_tick.is_multiple_of(64) && self.waits_on_peers() {
            self.check_liveness(port, b);
        }
        // Most passes: nothing (a virtual call and one or two loads, not a
        // Vec moved out of each port).
        if port.has_events() {
            self.handle_events(port, b);
        }
    }

    #[inline(never)]
    pub(super) fn check_liveness(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut last: Option<Addr> = None;
        for t in self.tx.values() {
            if last != Some(t.peer) {
                port.check_peer(&t.peer);
                last = Some(t.peer);
            }
        }
        self.buf_liveness(port, b);
        if self.rx.is_empty() {
            return;
        }
        let now = Instant::now();
        self.fail_rx_where(b, PEER_FAILED, |s| {
            if now.duration_since(s.last_check) < STREAM_LIVENESS {
                return false;
            }
            s.last_check = now;
            !port.sender_alive(s.src_pid, &s.src)
        });
    }

    /// Fails (with `err`: mostly `PEER_FAILED`, `FI_ECONNRESET`) every
    /// waiting receive stream `gone` picks, in handle order: a dead or
    /// departed sender's.
    pub(super) fn fail_rx_where(&mut self, b: &Bound<'_>, err: Error, mut gone: impl FnMut(&mut RxStream) -> bool) {
        if self.rx.is_empty() {
            return;
        }
        let hs: Vec<u32> = self.rx.iter_mut().filter_map(|(h, s)| gone(s).then_some(h)).collect();
        for h in hs {
            if let Some(s) = self.rx.remove(h) {
                self.complete_rx_err(b, &s.recv, RxFailure::of(err, s.src, &s.hdr, s.extra_flags));
            }
        }
    }

    #[inline(never)]
    pub(super) fn handle_events(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        for ev in port.take_events() {
            self.peer_failed(b, *ev.peer(), ev.cause());
        }
    }

    /// `peer` failed (`err`: the cause its event gives): every operation
    /// waiting on it ends with `err` — sends in the order they were posted,
    /// those the transport still held queued among them (it drops them
    /// without a report of their own) — and nothing owed to it is answered
    /// any more ([`State::forget_owed`]).
    fn peer_failed(&mut self, b: &Bound<'_>, peer: Addr, err: Error) {
        let before = self.waiting_ops();
        let mut ids: Vec<u64> = self
            .tx
            .iter()
            .filter(|(_, t)| t.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids {
            if let Some(t) = self.tx.remove(&id) {
                self.finish_tx(b, t, Err(err));
            }
        }
        self.fail_rx_where(b, err, |s| s.src == peer);
        self.buf_peer_failed(b, &peer);
        self.rma_peer_failed(b, &peer, err);
        let owed = self.forget_owed(b, &peer, err);
        let ended = before.saturating_sub(self.waiting_ops());
        crate::base::log::log_debug_limited!(
            FI_LOG_EP_CTRL,
            "peer {peer:?} failed ({err}): {ended} operations ended, {owed} answers owed to it dropped"
        );
    }

    /// Operations that wait on peers: sends, RMA and atomics, receives
    /// being streamed, pulled or placed (what a peer's failure can end).
    fn waiting_ops(&self) -> usize {
        self.tx.len() + self.rma.outstanding() + self.rx.len() + self.pulls.len() + self.inflight.len()
    }

    /// The incarnation of `peer` we knew is over (its failure taken, or
    /// its `BYE` read): what we owe it is dropped rather than sent later,
    /// since records carry no incarnation and message ids start at 1 in
    /// every endpoint — an answer would reach the next endpoint at that
    /// address and complete (ACK) or start streaming (CTS) its operation
    /// with the same id. Unexpected messages stay the application's
    /// (eager ones are received, unanswered; a rendezvous one fails with
    /// `err` when matched: its data was in the sender's memory); matched
    /// rendezvous messages not yet fetched fail with `err`; payloads being
    /// placed complete unanswered; answers not yet sent are dropped. (RMA
    /// and atomic answers and buffered receives: `rma_peer_failed`,
    /// `buf_peer_failed`.) Returns how many answers were dropped.
    pub(super) fn forget_owed(&mut self, b: &Bound<'_>, peer: &Addr, err: Error) -> usize {
        let mut owed = self.m.sender_failed(peer, err) + self.parked_sender_failed(peer, err);
        for (_, f) in self.inflight.iter_mut() {
            if f.src == *peer && f.hdr.flags & (flag::ACK_REQ | flag::ACK_ARRIVE) != 0 {
                f.hdr.flags &= !(flag::ACK_REQ | flag::ACK_ARRIVE);
                owed += 1;
            }
        }
        if self.pulls.iter().any(|p| p.src == *peer) {
            let (gone, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pulls)
                .into_iter()
                .partition(|p| p.src == *peer);
            self.pulls = keep;
            owed += gone.len();
            for p in gone {
                self.complete_rx_err(b, &p.recv, RxFailure::of(err, p.src, &p.hdr, p.extra_flags));
            }
        }
        let queued = self.outbox.len();
        self.outbox.retain(|(to, _)| to != peer);
        owed + queued - self.outbox.len()
    }
}
