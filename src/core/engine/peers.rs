//! Peer liveness and failure: while something waits on a peer, the
//! transport is asked (rate-limited) whether it is still there; a failed
//! peer's operations complete once, with `PEER_FAILED`. Posted receives that
//! merely could match it stay posted.

use super::*;

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
                self.complete_rx_err(b, &s.recv, RxFailure::of(err, &s.hdr, s.extra_flags));
            }
        }
    }

    #[inline(never)]
    pub(super) fn handle_events(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        for ev in port.take_events() {
            let (peer, err) = (*ev.peer(), ev.cause());
            let ids: Vec<u64> = self
                .tx
                .iter()
                .filter(|(_, t)| t.peer == peer)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if let Some(t) = self.tx.remove(&id) {
                    self.finish_tx(b, t, Err(err));
                }
            }
            self.fail_rx_where(b, err, |s| s.src == peer);
            self.buf_peer_failed(b, &peer);
            self.rma_peer_failed(b, &peer, err);
        }
    }
}
