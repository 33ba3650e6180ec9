//! One progress pass: what epoll reports (busy-polling the hot
//! connection between `epoll_wait`s), finished dials, writes, and reads
//! into the core within the peer's budget ([`super::budget`]).

use super::conn::{CoreSink, Phase, Read, Ready};
use super::framing::{Body, OutRecord};
use super::hello::{Extra, Kind, CHALLENGE_LEN};
use super::links::Counted;
use super::listener::Listener;
use super::{
    budget, hello, random_challenge, recount, sync_interest, TcpPort, EPOLL_EVERY_MAX, EPOLL_EVERY_MIN,
    EPOLL_EVERY_WRITING, STAGING_MAX, TOKEN_TIMER,
};
use crate::transport::addr::Addr;
use crate::transport::Delivery;
use std::time::{Duration, Instant};

impl TcpPort {
    pub(super) fn poll_inner(&mut self, d: &mut dyn Delivery) {
        self.polled = true;
        self.pass += 1;
        self.charged = 0;
        self.now = Instant::now();
        if !self.corked.is_empty() {
            // Earlier records' reports first: completions keep their order.
            for (id, r) in std::mem::take(&mut self.sent) {
                d.sent(id, r);
            }
            self.read_corked(d);
        }
        self.flush_corked();
        self.cork.end_burst();
        for (id, r) in std::mem::take(&mut self.sent) {
            d.sent(id, r);
        }
        for id in std::mem::take(&mut self.doomed) {
            if let Some(e) = self.conns.get(&id).and_then(|c| c.conn.doomed()) {
                self.fail_conn(id, e, d);
            }
        }
        for a in std::mem::take(&mut self.doomed_peers) {
            if let Some(e) = self.peers.get(&a).and_then(|p| p.doomed) {
                self.fail_peer(a, e, d);
            }
        }
        // Stalled connections first: the core may take their record now.
        self.retry_stalled(d);
        // Busy polling: while a connection is hot (it carried the last
        // arrival epoll reported), a pass reads it straight from its socket
        // and asks epoll only every `epoll_every` passes (8, backing off to
        // 64 while epoll shows nothing else), or every EPOLL_EVERY_WRITING
        // while a write waits for room: one system call per arrival instead
        // of two, and one per idle pass (the stream's own poll,
        // `Conn::poll_input`: when nothing arrived the pass ends there,
        // without the budget and framing layers). Other sockets, the listener and
        // the timer wait one such interval at most; deadlines are still
        // checked by the clock. Nothing here changes a deadline.
        let every = if self.writing.is_empty() {
            self.epoll_every
        } else {
            EPOLL_EVERY_WRITING
        };
        if self.since_epoll < every {
            if let Some(id) = self.hot {
                if let Some(c) = self.conns.get_mut(&id).filter(|c| c.conn.readable_now()) {
                    // The stream's own poll first: when nothing arrived
                    // the pass is one `recv`, no dispatch.
                    if c.conn.poll_input() {
                        self.read_conn(id, d);
                    }
                    self.since_epoll += 1;
                    let got = self.conns.get(&id).is_some_and(|c| c.conn.last_got() > 0);
                    if got {
                        self.retry_stalled(d);
                    }
                    if self.alarm.due() {
                        self.check_deadlines(d);
                        self.arm_timer();
                    }
                    return;
                }
                self.hot = None;
            }
        }
        self.since_epoll = 0;
        let mut ready = std::mem::take(&mut self.ready);
        let _ = self.epoll.wait(&mut ready, 64, Some(Duration::ZERO));
        #[cfg(test)]
        {
            self.epoll_waits += 1;
        }
        // Back off while epoll shows nothing the busy reads do not see and
        // no write waits for room (what epoll reports now is handled below
        // and lists a connection again if it still waits).
        let conns = &self.conns;
        self.writing
            .retain(|id| conns.get(id).is_some_and(|c| c.conn.waits_to_write()));
        let was_hot = self.hot;
        if was_hot.is_some() && self.writing.is_empty() && ready.iter().all(|&(t, _)| Some(t) == was_hot) {
            self.epoll_every = (self.epoll_every * 2).min(EPOLL_EVERY_MAX);
        } else {
            self.epoll_every = EPOLL_EVERY_MIN;
        }
        let mut delivered = false;
        for &(token, ev) in &ready {
            match token {
                TOKEN_TIMER => self.alarm.fired(),
                t if Listener::owns(t) => self.listener.event(&self.epoll, t),
                id => {
                    delivered = true;
                    self.conn_event(id, ev, d);
                    if self
                        .conns
                        .get(&id)
                        .is_some_and(|c| c.conn.last_got() > 0 && c.conn.readable_now())
                    {
                        self.hot = Some(id);
                    }
                }
            }
        }
        self.ready = ready;
        while let Some(h) = self.listener.next() {
            self.on_request(h, d);
        }
        if !self.parked.is_empty() {
            self.check_parked(d);
        }
        self.finish_pass(delivered, d);
    }

    /// The end of a pass: stalled connections again (what arrived may have
    /// freed room: a staged message handed over), deadlines.
    fn finish_pass(&mut self, delivered: bool, d: &mut dyn Delivery) {
        if delivered {
            self.retry_stalled(d);
        }
        if self.alarm.due() {
            self.check_deadlines(d);
        }
        self.arm_timer();
    }

    fn retry_stalled(&mut self, d: &mut dyn Delivery) {
        if self.stalled.is_empty() {
            return;
        }
        let stalled = std::mem::take(&mut self.stalled);
        for &id in &stalled {
            if self.conns.get(&id).is_some_and(|c| c.conn.stalled()) {
                // Stalls again: read_conn lists it again.
                self.read_conn(id, d);
            }
        }
        let mut v = stalled;
        v.clear();
        if self.stalled.is_empty() {
            self.stalled = v;
        }
    }

    fn conn_event(&mut self, id: u64, ev: u32, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        if c.conn.phase() == Phase::Up {
            c.carried = true;
            c.last_active = Some(self.now);
        }
        match c.conn.ready(ev) {
            Ready::Dialed(Ok(())) => self.connected(id, d),
            Ready::Dialed(Err(e)) | Ready::Broken(e) => self.fail_conn(id, e, d),
            Ready::Io { write, read } => {
                if write {
                    self.write_side(id, d);
                }
                if read {
                    self.read_conn(id, d);
                }
            }
        }
    }

    /// The connect finished: say HELLO.
    fn connected(&mut self, id: u64, d: &mut dyn Delivery) {
        let (me, nonce, connect_timeout) = (self.me, self.nonce, self.connect_timeout);
        let keyed = self.key.is_some();
        let x = Extra {
            keyed,
            challenge: if keyed { random_challenge() } else { [0; CHALLENGE_LEN] },
            word: self.rts_prefix as u64,
            link: self.link_word(id),
            ..Extra::default()
        };
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.challenge = x.challenge;
        let (h, p) = hello::encode_with(Kind::Request, &me, nonce, &x);
        c.conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        c.conn.set_phase(Phase::AwaitAnswer);
        c.conn.set_deadline(Some(Instant::now() + connect_timeout));
        c.conn.flush(&mut self.sent);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        self.update_interest(id);
    }

    fn write_side(&mut self, id: u64, d: &mut dyn Delivery) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let empty = c.conn.flush(&mut self.sent);
        recount(&mut self.replies, c);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        if c.conn.phase() == Phase::Closing && empty {
            // The refusal is out: done with it.
            self.drop_conn(id);
            return;
        }
        self.update_interest(id);
    }

    pub(super) fn read_conn(&mut self, id: u64, d: &mut dyn Delivery) {
        // Link records (an answer to our HELLO, BYE) are handled between
        // reads; bounded.
        for _ in 0..4 {
            let lim = self.limits;
            let Some(c) = self.conns.get_mut(&id) else { return };
            if matches!(c.conn.phase(), Phase::Closing | Phase::Dialing) {
                return;
            }
            let mine = c.conn.reader().staged_bytes();
            let staged_elsewhere = self.staged.saturating_sub(mine);
            recount(&mut self.replies, c);
            let src = Addr::Inet(c.peer.unwrap_or(self.me));
            // An extra link counts the DATA records it reads (`links.rs`).
            let link = c.link != 0;
            let mut counted = Counted { d: None, done: 0 };
            let dd: &mut dyn Delivery = if link {
                counted.d = Some(&mut *d);
                &mut counted
            } else {
                &mut *d
            };
            let sink = CoreSink {
                d: dd,
                staged_elsewhere,
                staging_max: STAGING_MAX,
                reply_room: 0,
                over_budget: false,
            };
            let total = self.replies + self.charged;
            let (conn, scratch) = (&mut c.conn, &mut self.scratch);
            let got = c.acct.read(&self.budget, self.pass, total, sink, |s| {
                conn.read(s, &src, &lim, scratch)
            });
            let r = got.read;
            let done = counted.done;
            self.charged += got.spent;
            self.staged = staged_elsewhere + c.conn.reader().staged_bytes();
            if let Some(over) = got.changed {
                self.budget_state(id, over);
            }
            if done > 0 {
                self.link_read(id, done);
            }
            let Some(c) = self.conns.get_mut(&id) else { return };
            if c.conn.last_got() > 0 {
                self.moved_at = Some(self.now);
            }
            match r {
                Read::Idle => {
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    return;
                }
                Read::Stalled => {
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    self.stalled.push(id);
                    return;
                }
                Read::Link(h) => {
                    let payload = c.conn.link_payload().to_vec();
                    if !self.on_link(id, &h, &payload, d) {
                        return;
                    }
                }
                Read::Ended(end) => {
                    self.fail_conn(id, end.error(), d);
                    return;
                }
            }
        }
    }

    /// Connection `id`'s records started (`over`) or stopped being left
    /// unread for want of budget: its deadline is then the cut-off
    /// ([`PeerBudget::timeout`]), or none again.
    fn budget_state(&mut self, id: u64, over: bool) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.conn.set_deadline(c.acct.deadline(&self.budget));
        if over {
            let peer = c.peer.map_or_else(String::new, |a| a.to_string());
            budget::log_stopped(&peer, c.acct.counted);
            if !self.timed.contains(&id) {
                self.timed.push(id);
            }
            self.arm_timer();
        }
    }
}
