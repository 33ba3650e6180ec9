//! A connected endpoint's progress: its pass (shm ring, then the TCP
//! side), the connect deadline and the budget's cut-off, reads within the
//! peer's budget, the CM answer or BYE, and the connection's end.

use super::cm::{self, CmKind};
use super::{CmEvent, Inner, Life, LinkState, Refusal, CONNECTED_PEER, TCP_IDLE_PERIOD, TOKEN_SHM, TOKEN_TIMER};
use crate::base::error::Error;
use crate::sys::IN;
use crate::transport::addr::Addr;
use crate::transport::proto::{self, WireHdr};
use crate::transport::tcp::budget::{self};
use crate::transport::tcp::conn::{CoreSink, Phase, Read, Ready};
use crate::transport::tcp::trace;
use crate::transport::{Delivery, Port};
use std::time::{Duration, Instant};

impl Inner {
    // ------------------------------------------------------------ progress

    /// Writes what waits for a pass (send coalescing).
    pub(super) fn flush_corked(&mut self) {
        if self.corked {
            self.corked = false;
            self.flush();
        }
    }

    /// Payload bytes one more record could carry now.
    pub(super) fn room(&mut self) -> usize {
        if self.state() != LinkState::Up {
            return 0;
        }
        if let (Some(shm), Some(o)) = (self.shm.as_mut(), self.via_shm) {
            return Port::room(shm, &Addr::Shm(o.token));
        }
        match self.conn.as_ref() {
            Some(conn) => crate::transport::tcp::room_after(conn.queue().unsent()),
            None => 0,
        }
    }

    /// Returns whether the shm ring saw the peer move (`Port::poll`); the
    /// TCP side's reads say nothing (false).
    pub(super) fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        let mut moved = false;
        if self.via_shm.is_some() && self.state() == LinkState::Up {
            moved = self.poll_shm(d);
            self.tick = self.tick.wrapping_add(1);
            let quiet = self.doomed.is_none() && self.sent.is_empty() && !self.corked;
            if quiet && !self.tick.is_multiple_of(TCP_IDLE_PERIOD) {
                return moved;
            }
        }
        self.poll_tcp(d);
        moved
    }

    /// The rest of [`Inner::poll`]: the TCP side and what it reports.
    fn poll_tcp(&mut self, d: &mut dyn Delivery) {
        self.pass += 1;
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        if !matches!(self.state(), LinkState::Connecting | LinkState::Up) {
            return;
        }
        // A stalled record, or records read ahead with the handshake: the
        // socket may show nothing for them.
        if self.conn.as_ref().is_some_and(|c| c.reader().holds_input()) {
            self.read(d);
        }
        let up_and_idle = self.state() == LinkState::Up
            && !self.stalled()
            && !self.alarm.armed()
            && self.conn.as_ref().is_some_and(|c| c.interest() == Some(IN));
        if up_and_idle {
            // Connected, nothing to write, no timer: readability is all
            // the epoll set could report, and a read attempt tells as much
            // (data, end of stream, error) — one system call per arrival
            // instead of two. The set is level-triggered, so not asking it
            // leaves nothing stale for sleepers.
            self.read(d);
            if let Some(e) = self.doomed.take() {
                self.teardown(e, d, None);
            }
            return;
        }
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 8, Some(Duration::ZERO));
        for &(token, ev) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                // Drained by the shm port's own poll.
                TOKEN_SHM => {}
                _ => self.sock_event(ev, d),
            }
        }
        self.ready = ready;
        if self.alarm.due() {
            let now = Instant::now();
            let late = self
                .conn
                .as_ref()
                .is_some_and(|c| c.phase() == Phase::Dialing && c.expired(now));
            if self.state() == LinkState::Connecting && late {
                self.teardown(Error::TIMEDOUT, d, None);
            }
            self.cut_off(now, d);
        }
        if let Some(e) = self.doomed.take() {
            self.teardown(e, d, None);
        }
        self.arm_timer();
    }

    /// The connect deadline, while the connect is in progress; the
    /// budget's cut-off while the peer's records are left unread.
    pub(super) fn arm_timer(&mut self) {
        let dialing = self.state() == LinkState::Connecting;
        let stopped = self.state() == LinkState::Up && self.acct.over_since.is_some();
        let next = self
            .conn
            .as_ref()
            .filter(|c| (dialing && c.phase() == Phase::Dialing) || stopped)
            .and_then(|c| c.deadline());
        self.alarm.arm(next);
    }

    /// The peer's records stayed unread for want of budget until the
    /// cut-off: the connection ends as if reset (its operations with
    /// `FI_ECONNRESET`, `FI_SHUTDOWN` for the endpoint).
    fn cut_off(&mut self, now: Instant, d: &mut dyn Delivery) {
        if self.state() != LinkState::Up {
            return;
        }
        let Some(since) = self.acct.over_since else { return };
        if !self.conn.as_ref().is_some_and(|c| c.expired(now)) {
            return;
        }
        let peer = self.peer.map_or_else(String::new, |a| a.to_string());
        budget::log_cut_off(&peer, self.acct.counted, since);
        self.teardown(crate::transport::PEER_FAILED, d, None);
    }

    fn sock_event(&mut self, ev: u32, d: &mut dyn Delivery) {
        if !matches!(self.state(), LinkState::Connecting | LinkState::Up) {
            return;
        }
        let Some(c) = self.conn.as_ref() else { return };
        match c.ready(ev) {
            Ready::Dialed(Ok(())) => self.connected(),
            Ready::Dialed(Err(e)) | Ready::Broken(e) => self.teardown(e, d, None),
            Ready::Io { write, read } => {
                if write {
                    self.flush();
                }
                if read {
                    self.read(d);
                }
            }
        }
    }

    pub(super) fn read(&mut self, d: &mut dyn Delivery) {
        // A handshake record is handled between reads; bounded.
        for _ in 0..4 {
            if !matches!(self.state(), LinkState::Connecting | LinkState::Up) {
                return;
            }
            let Some(c) = self.conn.as_mut() else { return };
            if c.phase() == Phase::Dialing {
                return;
            }
            let established = c.phase() == Phase::Up;
            self.acct.count(c.queue());
            let held = self.acct.held(self.pass);
            let sink = CoreSink::new(&mut *d);
            let (lim, scratch) = (&self.limits, &mut self.scratch);
            let got = self.acct.read(&self.budget, self.pass, held, sink, |s| {
                c.read(s, &CONNECTED_PEER, lim, scratch)
            });
            if let Some(over) = got.changed {
                c.set_deadline(self.acct.deadline(&self.budget));
                if over {
                    let peer = self.peer.map_or_else(String::new, |a| a.to_string());
                    budget::log_stopped(&peer, self.acct.counted);
                }
            }
            let out = got.read;
            if got.changed.is_some() {
                self.arm_timer();
            }
            let Some(c) = self.conn.as_mut() else { return };
            match out {
                Read::Idle | Read::Stalled => {
                    c.update(&self.epoll);
                    return;
                }
                Read::Link(h) => {
                    let payload = c.link_payload().to_vec();
                    if !self.on_link(&h, payload, d) {
                        return;
                    }
                }
                Read::Ended(end) => {
                    // The peer closed, broke the protocol or failed: an
                    // abrupt end of the connection, or — before the answer —
                    // a server that refused us.
                    let e = end.error();
                    let e = if !established && e == Error::CONNRESET {
                        Error::CONNREFUSED
                    } else {
                        e
                    };
                    self.teardown(e, d, None);
                    return;
                }
            }
        }
    }

    /// A handshake record or BYE. Returns whether reading may go on.
    fn on_link(&mut self, h: &WireHdr, payload: Vec<u8>, d: &mut dyn Delivery) -> bool {
        let gone = if self.state() == LinkState::Up {
            Error::CONNRESET
        } else {
            Error::CONNREFUSED
        };
        if h.op == proto::op::BYE {
            // The peer's fi_shutdown (or close): everything still expected
            // from or sent to it ends now.
            self.teardown(gone, d, None);
            return false;
        }
        let phase = self.conn.as_ref().map(|c| c.phase());
        match (phase, cm::parse(h, &payload)) {
            (Some(Phase::AwaitAnswer), Ok(CmKind::Accept)) => {
                let mut gone = false;
                match self.choose_path(cm::shm_offer(h), true) {
                    Ok(v) => {
                        self.via_shm = v;
                        self.log_path();
                    }
                    // The server accepted and closed its endpoint before we
                    // read its ACCEPT (its BYE follows): established and
                    // ended at once, as over TCP. A made-up token looks the
                    // same; nothing is sent to it either way.
                    Err(Refusal::Gone(why)) => {
                        crate::base::log::log_warn!(
                            crate::abi::FI_LOG_EP_CTRL,
                            "connected endpoint: connection to {:?} ended at once: {why}",
                            self.peer
                        );
                        gone = true;
                    }
                    Err(Refusal::NotLocal(why) | Refusal::Bad(why)) => {
                        crate::base::log::log_warn!(
                            crate::abi::FI_LOG_EP_CTRL,
                            "connected endpoint: connection to {:?} refused: {why}",
                            self.peer
                        );
                        self.teardown(
                            Error::CONNREFUSED,
                            d,
                            Some(CmEvent::Refused {
                                err: Error::CONNREFUSED,
                                data: Vec::new(),
                            }),
                        );
                        return false;
                    }
                }
                self.peer_rts_prefix = cm::rts_prefix(h);
                if let Some(c) = self.conn.as_mut() {
                    c.set_phase(Phase::Up);
                }
                self.events.push_back(CmEvent::Connected(payload));
                if gone {
                    self.doomed = Some(crate::transport::PEER_FAILED);
                }
                self.update_interest();
                true
            }
            (Some(Phase::AwaitAnswer), Ok(CmKind::Reject)) => {
                self.teardown(
                    Error::CONNREFUSED,
                    d,
                    Some(CmEvent::Refused {
                        err: Error::CONNREFUSED,
                        data: payload,
                    }),
                );
                false
            }
            (phase, r) => {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: unexpected handshake record on a connected endpoint in {phase:?}: {r:?}"
                );
                self.teardown(gone, d, None);
                false
            }
        }
    }

    /// Ends the connection: a payload being placed completes with `e`,
    /// queued sends too, and the endpoint layer hears about it (`event`, or
    /// the event the state calls for). The socket leaves the epoll set;
    /// an established one stays open until the endpoint closes (so that a
    /// FIN, not a reset, ends it), a failed dial is closed now.
    fn teardown(&mut self, e: Error, d: &mut dyn Delivery, event: Option<CmEvent>) {
        if self.state() == LinkState::Down {
            return;
        }
        if self.state() == LinkState::Up && e != Error::CANCELED && self.via_shm.is_some() {
            // The peer's end (BYE, end of stream, reset): what it wrote to
            // our ring before is delivered first (it was published before
            // the TCP side told us; bounded, as records may wait for
            // receive buffers).
            for _ in 0..64 {
                if !self.shm.as_ref().is_some_and(|s| s.has_pending()) {
                    break;
                }
                self.poll_shm(d);
            }
        }
        // An established connection that breaks (reset, end of stream,
        // keepalive or user timeout) is a peer failure, reported as on RDM
        // endpoints (transport::PEER_FAILED); our own fi_shutdown cancels.
        let e = if self.state() == LinkState::Up && e != Error::CANCELED {
            crate::transport::PEER_FAILED
        } else {
            e
        };
        if let Some(c) = self.conn.as_mut() {
            c.abort_reader(&mut *d, e);
            for id in c.queue_mut().take_notifications() {
                d.sent(id, Err(e));
            }
            c.unwatch(&self.epoll);
        }
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        let ev = event.unwrap_or(match self.state() {
            LinkState::Up | LinkState::Accepting => CmEvent::Shutdown { err: e },
            LinkState::Connecting if e == Error::CANCELED => CmEvent::Shutdown { err: e },
            _ => CmEvent::Refused {
                err: e,
                data: Vec::new(),
            },
        });
        let keep = self.state() == LinkState::Up;
        trace::conn_event(format_args!(
            "connected endpoint: connection to {} ended in {:?}: {e}",
            trace::Peer(self.peer),
            self.state()
        ));
        self.events.push_back(ev);
        self.life = Life::Down;
        if !keep {
            self.conn = None;
        }
        self.arm_timer();
    }
}
