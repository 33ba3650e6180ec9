//! The handshake of an RDM port's connections ([`super::hello`]): our
//! dial's answer, an acceptor's keyed PROOF, a listener's REQUEST —
//! accepted, refused, parked for a live connection holding the address, or
//! settled against our own dial (one connection per pair of endpoints).

use super::conn::{Conn, Phase};
use super::framing::{Body, OutRecord};
use super::hello::{Decision, Existing, Extra, Hello, Kind, Refusal, Side, Transcript};
use super::listener::Handshake;
use super::trace;
use super::{
    hello, plain_ip, random_challenge, sync_interest, Parked, PortConn, Proving, TcpPort, HELLO_TIMEOUT,
    MAX_HANDSHAKES, PARK_WAIT, REJECTED_WAIT,
};
use crate::base::error::{Error, Result};
use crate::transport::proto::WireHdr;
use crate::transport::{proto, Delivery};
use std::net::SocketAddr;
use std::time::Instant;

impl TcpPort {
    /// The answer to our HELLO, a keyed dialer's PROOF, or BYE. Returns
    /// whether the connection may be read on.
    pub(super) fn on_link(&mut self, id: u64, h: &WireHdr, payload: &[u8], d: &mut dyn Delivery) -> bool {
        if h.op == proto::op::BYE && h.aux != 0 {
            // Not a close: an extra link's control record (`links.rs`).
            return self.on_link_record(id, h, d);
        }
        if h.op == proto::op::BYE {
            // The peer closed its endpoint: everything still expected from
            // or sent to it ends now.
            self.fail_conn(id, Error::CONNRESET, d);
            return false;
        }
        let Some(phase) = self.conns.get(&id).map(|c| c.conn.phase()) else {
            return false;
        };
        let hello = match hello::parse(h, payload, hello::Family::of(&self.me)) {
            Ok(x) => x,
            Err(why) => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: bad HELLO ({why:?})");
                self.fail_conn(id, Error::CONNRESET, d);
                return false;
            }
        };
        if self.conns.get(&id).is_some_and(|c| c.proving.is_some()) {
            if hello.kind == Kind::Proof {
                self.on_proof(id, &hello, d);
            } else {
                self.fail_conn(id, Error::CONNRESET, d);
            }
            return false;
        }
        match (phase, hello.kind) {
            (Phase::AwaitAnswer, Kind::Accept) if self.link_word(id) != 0 => self.link_accepted(id, &hello, d),
            (Phase::AwaitAnswer, Kind::Accept) => {
                let Some(key) = self.conns.get(&id).and_then(|c| c.peer) else {
                    return false;
                };
                let writer = self.peers.get(&key).is_some_and(|p| p.conn == Some(id));
                if !writer {
                    self.drop_conn(id);
                    return false;
                }
                if let Err(e) = self.check_accept(id, &hello) {
                    self.fail_peer(key, e, d);
                    self.remove_conn(id, e, d);
                    return false;
                }
                if let Some(c) = self.conns.get_mut(&id) {
                    c.conn.set_phase(Phase::Up);
                    c.conn.set_deadline(None);
                    c.nonce = hello.nonce;
                    c.rts_prefix = hello::rts_prefix(&hello);
                }
                self.establish(id, key);
                trace::conn_event(format_args!("tcp: connected to {key} (our dial, HELLO answered)"));
                self.flush_peer(key);
                self.update_interest(id);
                true
            }
            (Phase::AwaitAnswer, Kind::Reject) => {
                // The peer keeps its own dial to us: wait for it.
                let key = self.conns.get(&id).and_then(|c| c.peer);
                self.drop_conn(id);
                if let Some(p) = key.and_then(|k| self.peers.get_mut(&k)) {
                    if p.conn == Some(id) {
                        p.conn = None;
                        p.waiting_until = Some(Instant::now() + REJECTED_WAIT);
                        self.waiting.push(key.unwrap_or(self.me));
                    }
                }
                false
            }
            (Phase::AwaitAnswer, Kind::Refuse) => {
                let why = Refusal::from_code(hello.word);
                let to = self.conns.get(&id).and_then(|c| c.peer);
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: {} refused our connection: {}",
                    to.map_or_else(String::new, |a| a.to_string()),
                    why.map_or("(unknown reason)", Refusal::text)
                );
                let e = match why {
                    Some(Refusal::KeyRequired | Refusal::NoKeyHere | Refusal::BadProof) => Error::ACCES,
                    _ => Error::CONNREFUSED,
                };
                self.fail_conn(id, e, d);
                false
            }
            _ => {
                self.fail_conn(id, Error::CONNRESET, d);
                false
            }
        }
    }

    /// Checks an ACCEPT to our dial `id` against our key (none: it must be
    /// unkeyed too); keyed, queues our PROOF ahead of every record.
    pub(super) fn check_accept(&mut self, id: u64, acc: &Hello) -> Result<()> {
        let Some(c) = self.conns.get_mut(&id) else {
            return Err(Error::CONNRESET);
        };
        let to = c.peer.unwrap_or(acc.addr);
        let Some(key) = &self.key else {
            if acc.keyed {
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_CTRL,
                    "tcp: {to} answered with an authentication key and we have none: connection refused"
                );
                return Err(Error::ACCES);
            }
            return Ok(());
        };
        let t = Transcript {
            dialer: self.me,
            dialer_nonce: self.nonce,
            dialer_challenge: c.challenge,
            acceptor: acc.addr,
            acceptor_nonce: acc.nonce,
            acceptor_challenge: acc.challenge,
        };
        if !acc.keyed || !hello::verify(&key.0, Side::Acceptor, &t, &acc.mac) {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_CTRL,
                "tcp: {to} {}: connection refused, nothing sent to it",
                if acc.keyed {
                    "proved a different authentication key"
                } else {
                    "has no authentication key and ours requires one"
                }
            );
            return Err(Error::ACCES);
        }
        let x = Extra {
            keyed: true,
            mac: hello::sign(&key.0, Side::Dialer, &t),
            ..Extra::default()
        };
        let (h, p) = hello::encode_with(Kind::Proof, &self.me, self.nonce, &x);
        c.conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
        Ok(())
    }

    /// A keyed dialer's PROOF on connection `id` (which we answered).
    fn on_proof(&mut self, id: u64, proof: &Hello, d: &mut dyn Delivery) {
        let Some(mut c) = self.take_conn(id) else { return };
        c.conn.unwatch(&self.epoll);
        let Some(pv) = c.proving.take() else { return };
        let ok = self.key.as_ref().is_some_and(|key| {
            let t = Transcript {
                dialer: pv.req.addr,
                dialer_nonce: pv.req.nonce,
                dialer_challenge: pv.req.challenge,
                acceptor: self.me,
                acceptor_nonce: self.nonce,
                acceptor_challenge: pv.mine,
            };
            proof.keyed && proof.addr == pv.req.addr && hello::verify(&key.0, Side::Dialer, &t, &proof.mac)
        });
        if !ok {
            crate::base::log::log_warn!(
                crate::abi::FI_LOG_EP_CTRL,
                "tcp: a connection claiming {} failed to prove our authentication key: closed, nothing delivered",
                pv.req.addr
            );
            return;
        }
        self.settle(c.conn, pv.req, true, d);
    }

    fn existing(&self, addr: &SocketAddr) -> Existing {
        let Some(cid) = self.peers.get(addr).and_then(|p| p.conn) else {
            return Existing::None;
        };
        match self.conns.get(&cid) {
            Some(c) if c.conn.phase() == Phase::Up => Existing::Up {
                dialed: c.dialed,
                nonce: c.nonce,
            },
            Some(c) if matches!(c.conn.phase(), Phase::Dialing | Phase::AwaitAnswer) => Existing::Dialing,
            _ => Existing::None,
        }
    }

    /// Our answer to a REQUEST, first in the connection's queue.
    fn answer(&self, conn: &mut Conn, kind: Kind, x: Extra) {
        let (h, p) = hello::encode_with(kind, &self.me, self.nonce, &x);
        conn.queue_mut().push(OutRecord::new(h, Body::Owned(p)));
    }

    /// The plain answer (ACCEPT, REJECT) of an unkeyed endpoint.
    fn plain(&self) -> Extra {
        Extra {
            word: self.rts_prefix as u64,
            ..Extra::default()
        }
    }

    /// Answers `kind` (a REJECT or REFUSE), then closes the connection
    /// once that is written (or at its deadline).
    fn answer_and_close(&mut self, mut conn: Conn, kind: Kind, x: Extra) {
        self.answer(&mut conn, kind, x);
        conn.set_phase(Phase::Closing);
        conn.set_deadline(Some(Instant::now() + HELLO_TIMEOUT));
        if !conn.flush(&mut self.sent) && conn.doomed().is_none() {
            // The rest of the answer goes out when writable.
            let _ = self.add_conn(PortConn::new(conn, None));
            self.arm_timer();
        }
    }

    /// Refuses a connection claiming `claimed` (logged: the dialer's sends
    /// fail, and this side says why).
    pub(super) fn refuse(&mut self, conn: Conn, claimed: SocketAddr, why: Refusal) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_CTRL,
            "tcp: refused a connection claiming {claimed}: {}",
            why.text()
        );
        let x = Extra {
            keyed: self.key.is_some(),
            word: why as u64,
            ..Extra::default()
        };
        self.answer_and_close(conn, Kind::Refuse, x);
    }

    /// A connection the listener accepted said its first record: a REQUEST
    /// whose claimed address is the connection's source and whose key
    /// matches ours (both none, or both one) is answered by the tie-break's
    /// decision (keyed: after its PROOF); anything else closes it.
    pub(super) fn on_request(&mut self, h: Handshake, d: &mut dyn Delivery) {
        let Handshake { mut conn, hdr, payload } = h;
        if hdr.op == proto::op::BYE {
            return;
        }
        let req = match hello::parse(&hdr, &payload, hello::Family::of(&self.me)) {
            Ok(x) if x.kind == Kind::Request => x,
            r => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_CTRL, "tcp: bad HELLO request ({r:?})");
                return;
            }
        };
        // What is provable about who dialed: the source IP of the
        // connection (its port is the dialer's ephemeral one).
        // An extra link comes from the address the peer listed for it
        // (checked with the rest in `join_check`).
        let src_ok = req.link != 0
            || conn
                .peer_addr()
                .is_ok_and(|a| plain_ip(a.ip()) == plain_ip(req.addr.ip()));
        if !src_ok {
            return self.refuse(conn, req.addr, Refusal::Address);
        }
        if !self.make_room() {
            return self.refuse(conn, req.addr, Refusal::Full);
        }
        match (self.key.is_some(), req.keyed) {
            (true, false) => return self.refuse(conn, req.addr, Refusal::KeyRequired),
            (false, true) => return self.refuse(conn, req.addr, Refusal::NoKeyHere),
            _ => {}
        }
        let decision = if req.link != 0 {
            match self.join_check(&conn, &req) {
                Ok(()) => Decision::Adopt,
                Err(why) => return self.refuse(conn, req.addr, why),
            }
        } else {
            hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr))
        };
        match decision {
            Decision::Reject => {
                let x = self.plain();
                self.answer_and_close(conn, Kind::Reject, x);
            }
            Decision::Refuse => self.refuse(conn, req.addr, Refusal::InUse),
            _ => {
                let Some(key) = &self.key else {
                    return self.settle(conn, req, false, d);
                };
                // Keyed: prove our key over its challenge, and wait for its
                // proof before the connection is anybody's.
                let mine = random_challenge();
                let t = Transcript {
                    dialer: req.addr,
                    dialer_nonce: req.nonce,
                    dialer_challenge: req.challenge,
                    acceptor: self.me,
                    acceptor_nonce: self.nonce,
                    acceptor_challenge: mine,
                };
                let x = Extra {
                    keyed: true,
                    challenge: mine,
                    mac: hello::sign(&key.0, Side::Acceptor, &t),
                    word: self.rts_prefix as u64,
                    link: req.link,
                };
                self.answer(&mut conn, Kind::Accept, x);
                conn.set_phase(Phase::AwaitAnswer);
                conn.set_deadline(Some(Instant::now() + HELLO_TIMEOUT));
                let mut c = PortConn::new(conn, None);
                c.proving = Some(Box::new(Proving { req, mine }));
                let Ok(id) = self.add_conn(c) else { return };
                self.arm_timer();
                if let Some(c) = self.conns.get_mut(&id) {
                    c.conn.flush(&mut self.sent);
                    sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
                    if c.conn.reader().holds_input() {
                        self.read_conn(id, d);
                    }
                }
            }
        }
    }

    /// Takes (or parks, or refuses) an inbound connection whose REQUEST
    /// passed its checks (keyed: whose PROOF did; `answered`: our ACCEPT
    /// went out already), by the decision of the moment.
    fn settle(&mut self, conn: Conn, req: Hello, answered: bool, d: &mut dyn Delivery) {
        if req.link != 0 {
            return self.adopt_link(conn, req, answered, d);
        }
        let mut decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        if decision == Decision::Park {
            // The old connection may have ended already (a restarted peer's
            // old socket says so as it dies): read it first.
            if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                self.read_conn(old, d);
            }
            decision = hello::decide(&self.me, self.nonce, &req, self.existing(&req.addr));
        }
        match decision {
            Decision::Reject if !answered => {
                let x = self.plain();
                self.answer_and_close(conn, Kind::Reject, x);
            }
            // Proven, but our own dial won meanwhile: close it (the dialer
            // uses ours).
            Decision::Reject => {}
            Decision::Refuse => {
                if !answered {
                    self.refuse(conn, req.addr, Refusal::InUse);
                }
            }
            Decision::Park => {
                if self.parked.len() >= MAX_HANDSHAKES {
                    if !answered {
                        self.refuse(conn, req.addr, Refusal::InUse);
                    }
                    return;
                }
                self.parked.push(Parked {
                    conn,
                    req,
                    answered,
                    until: Instant::now() + PARK_WAIT,
                });
                self.arm_timer();
            }
            Decision::TakeOver => {
                if let Some(old) = self.peers.get(&req.addr).and_then(|p| p.conn) {
                    self.drop_conn(old);
                }
                self.adopt(conn, req, Decision::TakeOver, answered, d);
            }
            Decision::SelfConn | Decision::Adopt => self.adopt(conn, req, decision, answered, d),
        }
    }

    /// Parked REQUESTs whose address is free now are settled; those whose
    /// time is up are refused (the address stays with its live connection).
    pub(super) fn check_parked(&mut self, d: &mut dyn Delivery) {
        let now = Instant::now();
        for p in std::mem::take(&mut self.parked) {
            let held = matches!(self.existing(&p.req.addr), Existing::Up { .. });
            if !held {
                self.settle(p.conn, p.req, p.answered, d);
            } else if p.until <= now {
                if !p.answered {
                    self.refuse(p.conn, p.req.addr, Refusal::InUse);
                } else {
                    crate::base::log::log_warn!(
                        crate::abi::FI_LOG_EP_CTRL,
                        "tcp: closed a connection claiming {}: {}",
                        p.req.addr,
                        Refusal::InUse.text()
                    );
                }
            } else {
                self.parked.push(p);
            }
        }
    }

    /// Takes an accepted connection whose REQUEST wins: ACCEPT (unless it
    /// went out already), then the records that waited for the peer.
    fn adopt(&mut self, mut conn: Conn, req: Hello, decision: Decision, answered: bool, d: &mut dyn Delivery) {
        if !answered {
            let x = self.plain();
            self.answer(&mut conn, Kind::Accept, x);
        }
        conn.set_phase(Phase::Up);
        conn.set_deadline(None);
        let mut c = PortConn::new(conn, Some(req.addr));
        c.nonce = req.nonce;
        c.rts_prefix = hello::rts_prefix(&req);
        c.self_reader = decision == Decision::SelfConn;
        let Ok(id) = self.add_conn(c) else { return };
        trace::conn_event(format_args!(
            "tcp: connected to {} (its dial, HELLO answered)",
            req.addr
        ));
        if decision != Decision::SelfConn {
            let p = self.peers.entry(req.addr).or_default();
            p.conn = Some(id);
            p.waiting_until = None;
            self.establish(id, req.addr);
        }
        let Some(c) = self.conns.get_mut(&id) else { return };
        c.conn.flush(&mut self.sent);
        if let Some(e) = c.conn.take_doomed() {
            self.fail_conn(id, e, d);
            return;
        }
        sync_interest(&self.epoll, &mut self.writing, id, &mut c.conn);
        if c.conn.reader().holds_input() {
            // Records read ahead with the REQUEST: the socket may show
            // nothing more, so read them now.
            self.read_conn(id, d);
        }
    }
}
