//! Ports talking over real loopback sockets, driven by a scripted core.

use super::*;
use crate::sys::net;
use crate::sys::IN;
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::WireHdr;
use crate::transport::proto::{flag, op};
use crate::transport::{Delivery, Hints, Payload, PayloadIn, Port, Sent};
use crate::transport::{Disposition, Place};
use budget::reply_room;
use flood_tests::{Answering, Flood};
use hello::Kind;
use limits::SNDBUF;
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

const LIM: Limits = Limits {
    max_payload: 1 << 30,
    max_chunk: 1 << 30,
    max_iov: 8,
};

fn port() -> TcpPort {
    TcpPort::new("127.0.0.1:0".parse().unwrap(), LIM, &TcpSettings::default()).unwrap()
}

/// A core: posted receives (owned buffers), else buffer everything unless
/// told to stall.
#[derive(Default)]
pub(super) struct Core {
    recvs: VecDeque<Vec<u8>>,
    inflight: HashMap<u32, (Addr, u64, Vec<u8>)>,
    next: u32,
    /// (source, tag, data) in arrival order.
    pub(super) got: Vec<(Addr, u64, Vec<u8>)>,
    pub(super) failed_recvs: Vec<u32>,
    acks: Vec<u64>,
    sent: Vec<(u64, Result<()>)>,
    stall: bool,
}

impl Delivery for Core {
    fn place(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr) -> Place {
        if self.stall {
            return Place::Stall;
        }
        match self.recvs.pop_front() {
            Some(mut buf) => {
                self.next += 1;
                let dst = IovList::single(buf.as_mut_ptr() as usize, buf.len());
                let take = (hdr.len as usize).min(buf.len());
                self.inflight.insert(self.next, (*src, hdr.tag, buf));
                Place::Into {
                    handle: self.next,
                    dst,
                    take,
                }
            }
            None => Place::Buffer,
        }
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        let (src, tag, buf) = self.inflight.remove(&handle).expect("known handle");
        match result {
            Ok(()) => self.got.push((src, tag, buf)),
            Err(_) => self.failed_recvs.push(handle),
        }
    }
    fn buffered(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.got.push((*src, hdr.tag, data));
    }
    fn control(&mut self, _src: &Addr, _pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        assert!(payload.to_vec().is_empty());
        if hdr.op == op::ACK {
            self.acks.push(hdr.msg_id);
        }
        Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.sent.push((msg_id, result));
    }
}

fn msg_hdr(tag: u64, len: usize, id: u64) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = flag::TAGGED;
    h.tag = tag;
    h.len = len as u64;
    h.msg_id = id;
    h
}

fn send_bytes(p: &mut TcpPort, to: &Addr, tag: u64, data: &[u8], id: u64) -> Result<Sent> {
    let iov = IovList::single(data.as_ptr() as usize, data.len());
    p.send(
        to,
        &msg_hdr(tag, data.len(), id),
        Payload::Iov(&iov, 0, data.len()),
        false,
    )
}

/// What the core does after a pass (engine/peers.rs `watch_peers`): asks
/// `has_events` and calls `take_events` only when it says so, so every test
/// that goes through here also checks that `has_events` (`events_quiet`)
/// never hides work `take_events` had to do (a failure to report, a stalled
/// connection to offer input again).
fn core_take(p: &mut TcpPort) -> Vec<PeerEvent> {
    if p.has_events() {
        p.take_events()
    } else {
        Vec::new()
    }
}

/// Polls the ports until `done` or 5 s.
pub(super) fn pump(
    ports: &mut [(&mut TcpPort, &mut Core)],
    mut done: impl FnMut(&[(&mut TcpPort, &mut Core)]) -> bool,
) {
    let t = Instant::now();
    while !done(ports) {
        assert!(t.elapsed() < Duration::from_secs(5), "timed out");
        for (p, c) in ports.iter_mut() {
            p.poll(*c);
            core_take(p);
        }
    }
}

pub(super) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

#[test]
fn messages_flow_and_carry_the_sender_identity() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    let big = pattern(3 << 20, 1);
    let small = pattern(100, 2);
    cb.recvs.push_back(vec![0; big.len()]);
    // The big one is queued (in place) and reported once written.
    let r = send_bytes(&mut a, &b.addr(), 1, &big, 10).unwrap();
    assert!(r == Sent::Queued);
    // The queue holds more than its high-water mark: no more for now.
    assert_eq!(send_bytes(&mut a, &b.addr(), 2, &small, 11), Err(Error::AGAIN));
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[0].1.sent.len() == 1);
    let r2 = send_bytes(&mut a, &b.addr(), 2, &small, 11).unwrap();
    if r2 == Sent::Done {
        ca.sent.push((11, Ok(())));
    }
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| {
        p[1].1.got.len() == 2 && p[0].1.sent.len() == 2
    });
    assert_eq!(cb.got[0], (a.addr(), 1, big.clone()));
    assert_eq!(cb.got[1], (a.addr(), 2, small.clone()));
    assert_eq!(ca.sent, vec![(10, Ok(())), (11, Ok(()))]);
    // b answers on the same connection (one connection for the pair).
    send_bytes(&mut b, &a.addr(), 3, &small, 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[0].1.got.len() == 1);
    assert_eq!(ca.got[0].0, b.addr());
    assert_eq!(a.conns.len(), 1);
    assert_eq!(b.conns.len(), 1);
}

#[test]
fn simultaneous_first_sends_leave_one_connection_and_keep_order() {
    for _ in 0..5 {
        let (mut a, mut b) = (port(), port());
        let (mut ca, mut cb) = (Core::default(), Core::default());
        let n = 50u64;
        let data: Vec<Vec<u8>> = (0..n).map(|i| pattern(1000 + i as usize, i as u8)).collect();
        // Both send before either polls: both dial.
        for (i, dta) in data.iter().enumerate() {
            assert!(send_bytes(&mut a, &b.addr(), i as u64, dta, i as u64 + 1).is_ok());
            assert!(send_bytes(&mut b, &a.addr(), i as u64, dta, i as u64 + 1).is_ok());
        }
        assert_eq!(a.conns.len(), 1);
        assert_eq!(b.conns.len(), 1);
        pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| {
            p[0].1.got.len() == n as usize
                && p[1].1.got.len() == n as usize
                && p[0].0.conns.len() == 1
                && p[1].0.conns.len() == 1
        });
        for c in [&ca, &cb] {
            for (i, (_, tag, d)) in c.got.iter().enumerate() {
                assert_eq!(*tag, i as u64);
                assert_eq!(d, &data[i]);
            }
        }
        assert!(ca.sent.iter().all(|(_, r)| r.is_ok()));
        assert!(cb.sent.iter().all(|(_, r)| r.is_ok()));
        // The survivor is the lower address's dial.
        let low_is_a = hello::keep_own_dial(&a.local(), &b.local());
        let a_dialed = a.conns.values().next().unwrap().dialed;
        assert_eq!(a_dialed, low_is_a);
        assert_eq!(b.conns.values().next().unwrap().dialed, !low_is_a);
    }
}

#[test]
fn sending_to_self_works() {
    let mut a = port();
    let mut ca = Core::default();
    let me = a.addr();
    // Sent in place: the buffers stay valid until the sends complete.
    let bufs: Vec<Vec<u8>> = (0..3).map(|i| pattern(500, i as u8)).collect();
    for (i, b) in bufs.iter().enumerate() {
        send_bytes(&mut a, &me, i as u64, b, i as u64 + 1).unwrap();
    }
    let mut t = Instant::now();
    while ca.got.len() < 3 {
        assert!(t.elapsed() < Duration::from_secs(5));
        a.poll(&mut ca);
        core_take(&mut a);
    }
    for (i, (src, tag, d)) in ca.got.iter().enumerate() {
        assert_eq!(*src, me);
        assert_eq!(*tag, i as u64);
        assert_eq!(d, &pattern(500, i as u8));
    }
    // Control records to ourselves too (delivery-complete ACKs).
    let mut h = WireHdr::new(op::ACK);
    h.msg_id = 77;
    a.send_ctl(&me, &h).unwrap();
    t = Instant::now();
    while ca.acks.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        a.poll(&mut ca);
    }
    assert_eq!(ca.acks, vec![77]);
}

#[test]
fn closed_port_gives_an_error_completion() {
    let mut a = port();
    let mut ca = Core::default();
    // A port that was bound and closed: nobody listens there.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    assert_eq!(send_bytes(&mut a, &Addr::Inet(dead), 1, b"hi", 5), Ok(Sent::Queued));
    let t = Instant::now();
    let mut events = vec![];
    while events.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        a.poll(&mut ca);
        events.extend(core_take(&mut a));
    }
    // The event ends the send (tcp/failure.rs): no report of its own.
    assert_eq!(ca.sent, vec![]);
    assert_eq!(
        events,
        vec![PeerEvent::Unreachable(Addr::Inet(dead), Error::CONNREFUSED)]
    );
    assert!(a.conns.is_empty() && a.peers.is_empty());
}

#[test]
fn malformed_frame_cuts_off_only_that_connection() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    send_bytes(&mut a, &b.addr(), 1, b"before", 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    // An evil peer: valid HELLO, then an EAGER header with a garbage length.
    let Addr::Inet(bl) = b.addr() else { unreachable!() };
    let mut evil = std::net::TcpStream::connect(bl).unwrap();
    let fake: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let (h, p) = hello::encode(Kind::Request, &fake, 1234);
    evil.write_all(&h).unwrap();
    evil.write_all(&p).unwrap();
    let mut ans = [0u8; 64 + 16 + 48];
    evil.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // b must poll to answer.
    let t = Instant::now();
    let mut got = 0;
    evil.set_nonblocking(true).unwrap();
    while got < ans.len() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.poll(&mut cb);
        core_take(&mut b);
        if let Ok(n) = evil.read(&mut ans[got..]) {
            got += n;
        }
    }
    let hh = WireHdr::from_bytes(ans[..64].try_into().unwrap());
    assert_eq!(hh.op, op::HELLO);
    assert_eq!(
        hello::parse(&hh, &ans[64..], hello::Family::V4).unwrap().kind,
        Kind::Accept
    );
    let mut bad = WireHdr::new(op::EAGER);
    bad.len = 1 << 40;
    bad.payload = u32::MAX;
    evil.write_all(&bad.to_bytes()).unwrap();
    let t = Instant::now();
    let mut events = vec![];
    while events.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.poll(&mut cb);
        events.extend(core_take(&mut b));
    }
    assert_eq!(events, vec![PeerEvent::Failed(Addr::Inet(fake))]);
    // The evil socket is closed by b.
    evil.set_nonblocking(false).unwrap();
    let mut sink = [0u8; 16];
    assert!(matches!(evil.read(&mut sink), Ok(0) | Err(_)));
    // a's connection still works.
    send_bytes(&mut a, &b.addr(), 2, b"after", 2).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 2);
    assert_eq!(cb.got[1].2, b"after".to_vec());
}

#[test]
fn stalled_receiver_pushes_back_then_resumes_in_order() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    cb.stall = true;
    let chunk = pattern(4000, 3);
    let mut sent = 0u64;
    let mut again = false;
    let t = Instant::now();
    // Keep sending until the sender is refused (kernel buffers + queue full).
    while t.elapsed() < Duration::from_secs(5) {
        match send_bytes(&mut a, &b.addr(), sent, &chunk, sent + 1) {
            Ok(_) => sent += 1,
            Err(e) => {
                assert_eq!(e, Error::AGAIN);
                again = true;
                break;
            }
        }
        a.poll(&mut ca);
        b.poll(&mut cb);
    }
    assert!(again, "sender never pushed back after {sent} messages");
    // The kernel doubles SO_SNDBUF and holds the receiver's buffer too.
    assert!(
        sent as usize * chunk.len() < 4 * SNDBUF,
        "{sent} messages buffered without a receiver"
    );
    // The stalled socket is out of b's read interest: b's wait fd is quiet.
    b.poll(&mut cb);
    assert!(cb.got.is_empty());
    assert!(!crate::sys::poll_readable(b.wait_fd(), Some(Duration::from_millis(50))));
    cb.stall = false;
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| {
        p[1].1.got.len() == sent as usize
    });
    for (i, (_, tag, d)) in cb.got.iter().enumerate() {
        assert_eq!(*tag, i as u64);
        assert_eq!(d, &chunk);
    }
}

/// A record the core could not take is in the reader's buffers (read ahead
/// with its header), not in the socket: when a receive is posted while a
/// thread sleeps on the wait fd, that thread must still wake.
#[test]
fn stalled_record_in_our_buffers_still_wakes_a_sleeper() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    cb.stall = true;
    send_bytes(&mut a, &b.addr(), 1, &pattern(100, 1), 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| {
        p[1].0
            .conns
            .values()
            .any(|c| c.conn.stalled() && c.conn.reader().holds_input())
    });
    // Quiet: the socket is drained, the record waits in the reader.
    b.poll(&mut cb);
    core_take(&mut b);
    assert!(!crate::sys::poll_readable(b.wait_fd(), Some(Duration::from_millis(50))));
    // "A receive is posted": the core calls take_events without a pass.
    cb.stall = false;
    core_take(&mut b);
    assert!(crate::sys::poll_readable(b.wait_fd(), Some(Duration::from_millis(500))));
    b.poll(&mut cb);
    assert_eq!(cb.got.len(), 1);
}

#[test]
fn peer_death_fails_a_half_read_payload_and_queued_sends() {
    let mut b = port();
    let mut cb = Core::default();
    cb.recvs.push_back(vec![0; 1 << 20]);
    // A raw peer that says HELLO, starts a 1 MiB message, then resets.
    let Addr::Inet(bl) = b.addr() else { unreachable!() };
    let mut peer = std::net::TcpStream::connect(bl).unwrap();
    let me: SocketAddr = "127.0.0.1:2".parse().unwrap();
    let (h, p) = hello::encode(Kind::Request, &me, 1);
    peer.write_all(&h).unwrap();
    peer.write_all(&p).unwrap();
    let mut m = msg_hdr(1, 1 << 20, 1);
    m.payload = 1 << 20;
    peer.write_all(&m.to_bytes()).unwrap();
    peer.write_all(&[7u8; 1000]).unwrap();
    let t = Instant::now();
    while cb.inflight.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.poll(&mut cb);
        core_take(&mut b);
    }
    // b queues a send to the peer (it will never be answered).
    let _ = send_bytes(&mut b, &Addr::Inet(me), 9, &[1u8; 10], 42);
    // Unread data on close: the kernel sends RST.
    drop(peer);
    let mut events = vec![];
    let t = Instant::now();
    while events.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.poll(&mut cb);
        events.extend(core_take(&mut b));
    }
    assert_eq!(events, vec![PeerEvent::Failed(Addr::Inet(me))]);
    assert_eq!(cb.failed_recvs, vec![1]);
    assert!(cb.inflight.is_empty());
    assert!(b.conns.is_empty());
}

#[test]
fn restarted_peer_at_the_same_address_gets_a_fresh_connection() {
    let mut b = port();
    let mut cb = Core::default();
    let mut a = port();
    let mut ca = Core::default();
    let a_addr = a.addr();
    let Addr::Inet(a_sock) = a_addr else { unreachable!() };
    send_bytes(&mut a, &b.addr(), 1, b"one", 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    // a goes away and a new incarnation listens on the same address.
    drop(a);
    let mut a2 = TcpPort::new(a_sock, LIM, &TcpSettings::default()).unwrap();
    let mut ca2 = Core::default();
    assert_eq!(a2.addr(), a_addr);
    let mut events = vec![];
    let t = Instant::now();
    while events.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5));
        b.poll(&mut cb);
        events.extend(core_take(&mut b));
    }
    assert_eq!(events, vec![PeerEvent::Failed(a_addr)]);
    // b's next send dials the new incarnation.
    send_bytes(&mut b, &a_addr, 2, b"two", 2).unwrap();
    pump(&mut [(&mut a2, &mut ca2), (&mut b, &mut cb)], |p| p[0].1.got.len() == 1);
    assert_eq!(ca2.got[0].2, b"two".to_vec());
}

/// A peer killed (no BYE: its sockets just close, FIN) and restarted at
/// its address: records that waited in a burst for the dead connection are
/// written only after the pass has read that connection, so they fail with
/// the peer (`FI_ECONNRESET`) instead of going into the half-closed socket (where the
/// kernel takes them and the dead socket answers with a reset: lost, yet
/// reported sent); the next send reaches the new incarnation, and nothing
/// meant for the old one does.
#[test]
fn records_waiting_for_a_killed_peer_fail_and_the_next_send_reaches_its_restart() {
    let mut a = port();
    let mut ca = Core::default();
    let mut b = port();
    let mut cb = Core::default();
    let b_addr = b.addr();
    let Addr::Inet(b_sock) = b_addr else { unreachable!() };
    send_bytes(&mut a, &b_addr, 1, b"one", 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    // kill -9: the sockets close without BYE (b read everything: a FIN).
    b.closed = true;
    drop(b);
    let mut b2 = TcpPort::new(b_sock, LIM, &TcpSettings::default()).unwrap();
    let mut cb2 = Core::default();
    // Two records posted in one burst, before a's next pass.
    Hints::more_coming(&mut a);
    let (stale, lost) = (b"to the dead".to_vec(), b"request".to_vec());
    assert_eq!(send_bytes(&mut a, &b_addr, 2, &stale, 2).unwrap(), Sent::Queued);
    assert_eq!(send_bytes(&mut a, &b_addr, 3, &lost, 3).unwrap(), Sent::Queued);
    let t = Instant::now();
    ca.sent.retain(|&(id, _)| id != 1);
    let mut events = core_take(&mut a);
    a.poll(&mut ca);
    events.extend(core_take(&mut a));
    ca.sent.retain(|&(id, _)| id != 1);
    while events.is_empty() && t.elapsed() < Duration::from_secs(2) {
        a.poll(&mut ca);
        events.extend(core_take(&mut a));
        b2.poll(&mut cb2);
        core_take(&mut b2);
    }
    // The peer's failure ends both (the event, tcp/failure.rs): neither
    // was reported written.
    assert_eq!(events, vec![PeerEvent::Failed(b_addr)]);
    assert_eq!(ca.sent, vec![]);
    // Sent again, after the failure: a fresh connection to b2.
    send_bytes(&mut a, &b_addr, 3, &lost, 4).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b2, &mut cb2)], |p| p[1].1.got.len() == 1);
    assert_eq!(cb2.got[0].1, 3);
    assert_eq!(cb2.got[0].2, lost);
    for _ in 0..50 {
        a.poll(&mut ca);
        core_take(&mut a);
        b2.poll(&mut cb2);
        core_take(&mut b2);
    }
    assert_eq!(cb2.got.len(), 1);
}

#[test]
fn advertised_address_is_never_a_wildcard() {
    let ifs = vec![
        IfAddr {
            name: "lo".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: true,
            ip: "127.0.0.1".parse().unwrap(),
        },
        IfAddr {
            name: "lo".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: true,
            ip: "::1".parse().unwrap(),
        },
        IfAddr {
            name: "eth1".into(),
            up: false,
            carrier: false,
            bridge: false,
            loopback: false,
            ip: "10.9.9.9".parse().unwrap(),
        },
        IfAddr {
            name: "eth0".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: false,
            ip: "169.254.1.1".parse().unwrap(),
        },
        IfAddr {
            name: "eth0".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: false,
            ip: "fe80::1".parse().unwrap(),
        },
        IfAddr {
            name: "eth0".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: false,
            ip: "192.0.2.7".parse().unwrap(),
        },
        IfAddr {
            name: "eth0".into(),
            up: true,
            carrier: true,
            bridge: false,
            loopback: false,
            ip: "fd00::7".parse().unwrap(),
        },
    ];
    let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
    assert_eq!(advertised_addr(sa("10.0.0.1:5"), None, &ifs), sa("10.0.0.1:5"));
    assert_eq!(advertised_addr(sa("0.0.0.0:5"), None, &ifs), sa("192.0.2.7:5"));
    assert_eq!(advertised_addr(sa("[::]:5"), None, &ifs), sa("[fd00::7]:5"));
    assert_eq!(advertised_addr(sa("0.0.0.0:5"), Some("lo"), &ifs), sa("127.0.0.1:5"));
    assert_eq!(advertised_addr(sa("[::]:5"), Some("lo"), &ifs), sa("[::1]:5"));
    // An unknown interface falls back to the first usable one.
    assert_eq!(advertised_addr(sa("0.0.0.0:5"), Some("nope"), &ifs), sa("192.0.2.7:5"));
    // Only loopback (or link-local) available: loopback.
    assert_eq!(advertised_addr(sa("0.0.0.0:5"), None, &ifs[..5]), sa("127.0.0.1:5"));
    assert_eq!(advertised_addr(sa("[::]:5"), None, &[]), sa("[::1]:5"));
}

/// A host whose first interface does not reach the job's other hosts: the
/// route to the launcher picks the one that does, else the default route,
/// else the first interface that is up.
#[test]
fn advertised_address_follows_the_route_to_the_launcher() {
    let ifa = |name: &str, ip: &str| IfAddr {
        name: name.into(),
        up: true,
        carrier: true,
        bridge: false,
        loopback: name == "lo",
        ip: ip.parse().unwrap(),
    };
    // dead0 comes first in the kernel's order; rf0 links the hosts.
    let ifs = vec![
        ifa("lo", "127.0.0.1"),
        ifa("dead0", "10.126.0.1"),
        ifa("rf0", "10.125.0.2"),
    ];
    let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    // The kernel's routes: 10.125/16 via rf0, 10.126/16 via dead0, no
    // default route.
    let route = |d: IpAddr| match d {
        IpAddr::V4(v) if v.octets()[..2] == [10, 125] => Some(ip("10.125.0.2")),
        IpAddr::V4(v) if v.octets()[..2] == [10, 126] => Some(ip("10.126.0.1")),
        _ => None,
    };
    let pick = |hints: &[IpAddr], iface: Option<&str>, route: &dyn Fn(IpAddr) -> Option<IpAddr>| {
        advertised_addr_with(sa("0.0.0.0:5"), iface, hints, &ifs, route)
    };
    assert_eq!(
        pick(&[], None, &route),
        sa("10.126.0.1:5"),
        "no hint, no default route: the first"
    );
    assert_eq!(
        pick(&[ip("10.125.0.254")], None, &route),
        sa("10.125.0.2:5"),
        "the route to mpirun"
    );
    // Hints that are loopback, of the other family or unrouted are passed over.
    assert_eq!(
        pick(
            &[ip("127.0.0.1"), ip("fd00::1"), ip("192.0.2.9"), ip("10.125.0.254")],
            None,
            &route
        ),
        sa("10.125.0.2:5")
    );
    // FI_RUSTFAB_IFACE still wins.
    assert_eq!(pick(&[ip("10.125.0.254")], Some("dead0"), &route), sa("10.126.0.1:5"));
    // No hint: the default route's interface.
    let with_default = |d: IpAddr| route(d).or(Some(ip("10.125.0.2")));
    assert_eq!(pick(&[], None, &with_default), sa("10.125.0.2:5"));
    // A route whose source is loopback or no interface here is passed over.
    assert_eq!(
        pick(&[ip("10.1.1.1")], None, &|_| Some(ip("127.0.0.1"))),
        sa("10.126.0.1:5")
    );
    assert_eq!(
        pick(&[ip("10.1.1.1")], None, &|_| Some(ip("10.9.9.9"))),
        sa("10.126.0.1:5")
    );
}

/// An interface without carrier (a bridge none of whose ports is up shows
/// NO-CARRIER) is never advertised unless named, whichever rule would pick
/// it; the last-resort pick passes over bridges (host-only networks) while
/// another interface has carrier, and takes a bridge with carrier before
/// loopback.
#[test]
fn advertised_address_skips_links_without_carrier_and_prefers_non_bridges() {
    let ifa = |name: &str, carrier: bool, bridge: bool, ip: &str| IfAddr {
        name: name.into(),
        up: true,
        carrier,
        loopback: name == "lo",
        bridge,
        ip: ip.parse().unwrap(),
    };
    let sa = |s: &str| -> SocketAddr { s.parse().unwrap() };
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    // docker0: a bridge with an address and no port up; virbr0: a bridge
    // with carrier; eth1: no cable; eth0: the link to the other hosts.
    let ifs = vec![
        ifa("lo", true, false, "127.0.0.1"),
        ifa("docker0", false, true, "172.17.0.1"),
        ifa("virbr0", true, true, "192.168.122.1"),
        ifa("eth1", false, false, "10.1.0.5"),
        ifa("eth0", true, false, "10.0.0.5"),
    ];
    let pick = |ifs: &[IfAddr], hints: &[IpAddr], iface: Option<&str>, route: &dyn Fn(IpAddr) -> Option<IpAddr>| {
        advertised_addr_with(sa("0.0.0.0:5"), iface, hints, ifs, route)
    };
    let no_route = |_: IpAddr| None;
    assert_eq!(
        pick(&ifs, &[], None, &no_route),
        sa("10.0.0.5:5"),
        "first up: not a bridge, with carrier"
    );
    // Routes whose source has no carrier are passed over.
    let via_docker0 = |_: IpAddr| Some(ip("172.17.0.1"));
    assert_eq!(
        pick(&ifs, &[ip("172.17.0.9")], None, &via_docker0),
        sa("10.0.0.5:5"),
        "launcher route via a NO-CARRIER bridge"
    );
    assert_eq!(
        pick(&ifs, &[], None, &via_docker0),
        sa("10.0.0.5:5"),
        "default route via a NO-CARRIER bridge"
    );
    let via_eth1 = |_: IpAddr| Some(ip("10.1.0.5"));
    assert_eq!(
        pick(&ifs, &[ip("10.1.0.9")], None, &via_eth1),
        sa("10.0.0.5:5"),
        "route via a link without carrier"
    );
    // A route through a bridge with carrier is followed: the launcher is there.
    let via_virbr0 = |_: IpAddr| Some(ip("192.168.122.1"));
    assert_eq!(
        pick(&ifs, &[ip("192.168.122.9")], None, &via_virbr0),
        sa("192.168.122.1:5")
    );
    // Only bridges have carrier: the one with carrier, never docker0.
    let bridges = [ifs[0].clone(), ifs[1].clone(), ifs[2].clone(), ifs[3].clone()];
    assert_eq!(pick(&bridges, &[], None, &no_route), sa("192.168.122.1:5"));
    // Nothing but links without carrier: loopback.
    let dead = [ifs[0].clone(), ifs[1].clone(), ifs[3].clone()];
    assert_eq!(pick(&dead, &[], None, &no_route), sa("127.0.0.1:5"));
    // An interface that is administratively down is never picked either.
    let mut down = ifs.clone();
    down[4].up = false;
    assert_eq!(pick(&down, &[], None, &no_route), sa("192.168.122.1:5"));
    // FI_RUSTFAB_IFACE still wins, carrier or not.
    assert_eq!(pick(&ifs, &[], Some("docker0"), &no_route), sa("172.17.0.1:5"));
}

#[test]
fn ipv6_loopback_works() {
    let Ok(mut a) = TcpPort::new("[::1]:0".parse().unwrap(), LIM, &TcpSettings::default()) else {
        return; // no IPv6 on this host
    };
    let mut b = TcpPort::new("[::1]:0".parse().unwrap(), LIM, &TcpSettings::default()).unwrap();
    let (mut ca, mut cb) = (Core::default(), Core::default());
    send_bytes(&mut a, &b.addr(), 1, b"v6", 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    assert_eq!(cb.got[0].0, a.addr());
    // A v4 address cannot be reached from a v6 endpoint.
    assert_eq!(
        send_bytes(&mut a, &Addr::Inet("127.0.0.1:9".parse().unwrap()), 1, b"x", 2),
        Err(Error::INVAL)
    );
}

#[test]
fn unexpected_payloads_arriving_at_once_stay_within_one_budget() {
    let (mut a, mut c, mut b) = (port(), port(), port());
    let (mut ca, mut cc, mut cb) = (Core::default(), Core::default(), Core::default());
    let big = pattern(6 << 20, 5);
    send_bytes(&mut a, &b.addr(), 1, &big, 1).unwrap();
    send_bytes(&mut c, &b.addr(), 2, &big, 1).unwrap();
    let t = Instant::now();
    let mut peak = 0;
    while cb.got.len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out");
        a.poll(&mut ca);
        c.poll(&mut cc);
        b.poll(&mut cb);
        let staged: usize = b.conns.values().map(|x| x.conn.reader().staged_bytes()).sum();
        peak = peak.max(staged);
    }
    assert!(peak <= STAGING_MAX, "{peak} bytes staged at once");
    assert!(cb.got.iter().all(|(_, _, d)| d == &big));
}

/// A listener whose accept queue is full: it drops SYNs, so a dial to it
/// hangs. Its address, and the sockets to keep while it is used.
pub(super) fn silent_listener() -> (SocketAddr, Vec<std::os::fd::OwnedFd>) {
    let fd = net::listen(&"127.0.0.1:0".parse().unwrap(), 0).unwrap();
    let silent = net::local_addr(fd.as_fd()).unwrap();
    let mut keep: Vec<_> = (0..3)
        .filter_map(|_| {
            let s = net::stream_socket(&silent).ok()?;
            let _ = net::connect(s.as_fd(), &silent);
            Some(s)
        })
        .collect();
    keep.push(fd);
    std::thread::sleep(Duration::from_millis(50));
    (silent, keep)
}

#[test]
fn silent_peer_fails_at_the_connect_deadline_without_blocking() {
    let (silent, _keep) = silent_listener();
    let mut a = port();
    a.connect_timeout = Duration::from_millis(300);
    let mut ca = Core::default();
    let t = Instant::now();
    assert_eq!(send_bytes(&mut a, &Addr::Inet(silent), 1, b"x", 7), Ok(Sent::Queued));
    assert!(t.elapsed() < Duration::from_millis(50), "send blocked");
    let mut events = vec![];
    while events.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(5), "no failure");
        // Sleep on the wait fd as a blocked reader would: the deadline wakes it.
        crate::sys::poll_readable(a.wait_fd(), Some(Duration::from_secs(2)));
        a.poll(&mut ca);
        events.extend(core_take(&mut a));
    }
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(ca.sent, vec![]);
    assert_eq!(
        events,
        vec![PeerEvent::Unreachable(Addr::Inet(silent), Error::TIMEDOUT)]
    );
}

/// Send coalescing (`framing::Cork`): after a pass, the first small send is
/// written at once and the ones behind it wait for the next pass (written
/// together, reported then, in order); nothing waits while somebody sleeps,
/// and arming a sleeper writes what waits; `FI_MORE` holds even the first.
#[test]
fn a_burst_of_small_sends_waits_for_the_next_pass_unless_somebody_sleeps() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    let to = b.addr();
    let data: Vec<Vec<u8>> = (0..12).map(|i| pattern(64, i as u8)).collect();
    // Connect (lazily, on the first send) and let that one arrive.
    send_bytes(&mut a, &to, 0, &data[0], 100).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    let arrived = |b: &mut TcpPort, cb: &mut Core, n: usize| {
        let t = Instant::now();
        while cb.got.len() < n && t.elapsed() < Duration::from_secs(5) {
            b.poll(cb);
        }
    };

    a.poll(&mut ca);
    assert!(send_bytes(&mut a, &to, 1, &data[1], 101).unwrap() == Sent::Done);
    assert!(send_bytes(&mut a, &to, 2, &data[2], 102).unwrap() == Sent::Queued);
    assert!(send_bytes(&mut a, &to, 3, &data[3], 103).unwrap() == Sent::Queued);
    assert!(a.has_pending(), "waiting records are work for the next pass");
    arrived(&mut b, &mut cb, 2);
    std::thread::sleep(Duration::from_millis(50));
    b.poll(&mut cb);
    assert_eq!(cb.got.len(), 2, "the burst waits for the sender's next pass");
    a.poll(&mut ca);
    assert!(ca.sent.iter().any(|s| s.0 == 102) && ca.sent.iter().any(|s| s.0 == 103));
    arrived(&mut b, &mut cb, 4);

    // Somebody sleeps: every send is written at once.
    a.set_sleepers(1);
    assert!(send_bytes(&mut a, &to, 4, &data[4], 104).unwrap() == Sent::Done);
    assert!(send_bytes(&mut a, &to, 5, &data[5], 105).unwrap() == Sent::Done);
    a.set_sleepers(0);
    arrived(&mut b, &mut cb, 6);

    // Arming a sleeper writes what waits, without a pass of ours.
    a.poll(&mut ca);
    assert!(send_bytes(&mut a, &to, 6, &data[6], 106).unwrap() == Sent::Done);
    assert!(send_bytes(&mut a, &to, 7, &data[7], 107).unwrap() == Sent::Queued);
    a.set_sleepers(1);
    assert!(!a.has_pending() || !a.sent.is_empty());
    arrived(&mut b, &mut cb, 8);
    a.set_sleepers(0);

    // FI_MORE holds even the first record after a pass.
    a.poll(&mut ca);
    Hints::more_coming(&mut a);
    assert!(send_bytes(&mut a, &to, 8, &data[8], 108).unwrap() == Sent::Queued);
    // Large records are not held.
    let big = pattern(16 << 10, 9);
    assert!(send_bytes(&mut a, &to, 9, &big, 109).unwrap() == Sent::Done);
    arrived(&mut b, &mut cb, 10);

    assert_eq!(cb.got.len(), 10);
    for (i, g) in cb.got.iter().enumerate() {
        assert_eq!(g.1, i as u64, "order kept");
        assert!(
            g.2 == if i == 9 { big.clone() } else { data[i].clone() },
            "message {i} differs"
        );
    }
}

/// A flood of connections that never say HELLO (docs/reliability.md F16) fills the
/// handshake slots; a real peer connecting during it still gets through at
/// once (the oldest silent socket makes room), long before the handshake
/// deadline would have freed a slot.
#[test]
fn silent_connection_flood_does_not_lock_out_a_real_peer() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    let Addr::Inet(to_b) = b.addr() else {
        panic!("tcp address")
    };
    let flood: Vec<std::net::TcpStream> = (0..MAX_HANDSHAKES + 44)
        .map(|_| std::net::TcpStream::connect(to_b).unwrap())
        .collect();
    // Let b accept them all.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        b.poll(&mut cb);
    }
    assert_eq!(b.listener.incomplete(), MAX_HANDSHAKES, "the slots are capped");
    let started = Instant::now();
    let msg = pattern(100, 7);
    send_bytes(&mut a, &b.addr(), 5, &msg, 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    assert!(
        started.elapsed() < HELLO_TIMEOUT,
        "got through before any deadline freed a slot"
    );
    assert!(cb.got[0].2 == msg);
    assert!(
        b.listener.incomplete() < MAX_HANDSHAKES,
        "the real peer's handshake completed"
    );
    drop(flood);
}

/// Linux nests epoll sets at most five deep, and an application may put its
/// wait fd (a wait object's set, nesting the engine's, nesting an auto
/// port's, nesting this port's) into a set of its own: the port's set must
/// leave four levels above it, so it nests no set of its own (the
/// listener's descriptors sit in it directly).
#[test]
fn the_wait_fd_leaves_four_epoll_levels_above_it() {
    let a = port();
    let sets: Vec<Epoll> = (0..4).map(|_| Epoll::new().unwrap()).collect();
    let mut below = a.wait_fd();
    for (i, s) in sets.iter().enumerate() {
        s.add(below, IN, 0).unwrap_or_else(|e| panic!("level {}: {e}", i + 1));
        below = s.fd();
    }
}
/// How many `epoll_wait`s `a` makes in `passes` busy passes.
fn epoll_waits_in(a: &mut TcpPort, ca: &mut Core, passes: u64) -> u64 {
    let before = a.epoll_waits;
    for _ in 0..passes {
        a.poll(ca);
        core_take(a);
    }
    a.epoll_waits - before
}

/// `b`'s message makes its connection `a`'s hot one; then `a` busy-polls
/// until epoll is backed off to every EPOLL_EVERY_MAX passes.
fn backed_off(a: &mut TcpPort, ca: &mut Core, b: &mut TcpPort, cb: &mut Core) {
    send_bytes(b, &a.addr(), 1, b"x", 1).unwrap();
    pump(&mut [(&mut *a, &mut *ca), (&mut *b, &mut *cb)], |p| {
        p[0].1.got.len() == 1
    });
    for _ in 0..4 * EPOLL_EVERY_MAX {
        a.poll(ca);
        core_take(a);
    }
    assert_eq!(a.epoll_every, EPOLL_EVERY_MAX, "backed off while only b was busy");
}

/// Busy polling with one busy peer (a ping-pong): while `epoll_wait` shows
/// nothing but the hot connection, it is asked less and less often (every
/// EPOLL_EVERY_MAX passes at most), so an idle stretch costs one `recv`
/// per pass and hardly any `epoll_wait`.
#[test]
fn busy_polling_one_peer_backs_off_epoll() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    send_bytes(&mut b, &a.addr(), 1, b"x", 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[0].1.got.len() == 1);
    assert!(a.hot.is_some(), "the arrival's connection is hot");
    let passes = 20 * EPOLL_EVERY_MAX as u64;
    let waits = epoll_waits_in(&mut a, &mut ca, passes);
    // 8, 16, 32, then every 64 passes: about passes / 64 (+ the ramp).
    assert!(
        waits <= passes / EPOLL_EVERY_MAX as u64 + 4,
        "{waits} epoll_waits in {passes} busy passes"
    );
    // The hot connection is still read straight away.
    send_bytes(&mut b, &a.addr(), 2, b"y", 2).unwrap();
    b.poll(&mut cb);
    a.poll(&mut ca);
    assert_eq!(ca.got.len(), 2, "the next pass read the hot connection");
}

/// ... and anything else epoll shows (a new peer's dial, its handshake,
/// its records) brings the interval back to EPOLL_EVERY_MIN at once: a
/// newcomer next to a busy peer waits one backed-off interval, not one per
/// step of its handshake.
#[test]
fn a_hot_connection_does_not_hide_another_peer() {
    let (mut a, mut b, mut c) = (port(), port(), port());
    let (mut ca, mut cb, mut cc) = (Core::default(), Core::default(), Core::default());
    backed_off(&mut a, &mut ca, &mut b, &mut cb);
    send_bytes(&mut c, &a.addr(), 2, b"z", 1).unwrap();
    let mut passes = 0u32;
    let t = Instant::now();
    while ca.got.len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(5), "c's message never arrived");
        a.poll(&mut ca);
        core_take(&mut a);
        passes += 1;
        c.poll(&mut cc);
        core_take(&mut c);
        // b stays busy meanwhile.
        b.poll(&mut cb);
        core_take(&mut b);
    }
    assert_eq!(ca.got[1].0, c.addr());
    // One backed-off interval, then the handshake's and the record's steps
    // at EPOLL_EVERY_MIN each (a few), not EPOLL_EVERY_MAX each.
    assert!(
        passes <= EPOLL_EVERY_MAX + 6 * (EPOLL_EVERY_MIN + 1),
        "{passes} passes until c's message"
    );
    // b's connection is still read.
    send_bytes(&mut b, &a.addr(), 3, b"y", 2).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[0].1.got.len() == 3);
}

/// ... but not while a write waits for room: a bulk sender whose socket is
/// full learns that it can write again only from `epoll_wait` (the busy
/// reads look at the hot socket's input), so epoll stays at every
/// EPOLL_EVERY_WRITING passes until the queue is out, then backs off again
/// (the back-off without this halved tcp 1 MiB bandwidth: d317dbf).
#[test]
fn a_waiting_write_keeps_epoll_frequent() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    backed_off(&mut a, &mut ca, &mut b, &mut cb);
    // b does not read: the socket fills and the rest waits for EPOLLOUT.
    let big = pattern(16 << 20, 3);
    cb.recvs.push_back(vec![0; big.len()]);
    assert_eq!(send_bytes(&mut a, &b.addr(), 2, &big, 20).unwrap(), Sent::Queued);
    assert!(!a.writing.is_empty(), "the write waits for room");
    let passes = 20 * (EPOLL_EVERY_MAX as u64 + 1);
    let waits = epoll_waits_in(&mut a, &mut ca, passes);
    assert!(
        // About passes / (EPOLL_EVERY_WRITING + 1); backed off, ~passes / 65.
        waits >= passes / (2 * (EPOLL_EVERY_WRITING as u64 + 1)),
        "{waits} epoll_waits in {passes} passes while a write waited"
    );
    assert!(ca.sent.is_empty(), "b read nothing: the write still waits");
    // b reads: the write finishes, and the back-off starts again.
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| {
        p[0].1.sent.len() == 1 && p[1].1.got.len() == 1
    });
    assert_eq!(ca.sent[0], (20, Ok(())));
    assert_eq!(cb.got[0].2, big);
    for _ in 0..4 * EPOLL_EVERY_MAX {
        a.poll(&mut ca);
        core_take(&mut a);
    }
    assert!(a.writing.is_empty());
    assert_eq!(a.epoll_every, EPOLL_EVERY_MAX, "backed off again once written");
}

/// A 1 MiB chunk (tcp's CHUNK_MAX) fits the kernel's buffers of an
/// established connection whose reader is busy elsewhere: the sender hands
/// it over whole and goes on, instead of waiting for EPOLLOUT while the
/// reader catches up (with a 256 KiB `SO_SNDBUF` a window of 1 MiB
/// rendezvous sends spent most of its time so: docs/performance-history.md
/// "tcpbw").
#[test]
fn a_whole_chunk_fits_the_socket_without_the_reader() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    let small = pattern(100, 1);
    send_bytes(&mut a, &b.addr(), 1, &small, 1).unwrap();
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 1);
    // b does not read from now on.
    let chunk = pattern(CHUNK_MAX, 2);
    cb.recvs.push_back(vec![0; chunk.len()]);
    if send_bytes(&mut a, &b.addr(), 2, &chunk, 2).unwrap() == Sent::Done {
        ca.sent.push((2, Ok(())));
    }
    let t = Instant::now();
    while ca.sent.iter().all(|s| s.0 != 2) && t.elapsed() < Duration::from_secs(2) {
        a.poll(&mut ca);
        core_take(&mut a);
    }
    assert!(
        ca.sent.iter().any(|s| s.0 == 2),
        "a 1 MiB record did not fit the socket while the reader was away"
    );
    assert!(a.writing.is_empty(), "nothing waits for room");
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 2);
    assert_eq!(cb.got[1].2, chunk);
}

/// A peer that streams requests and never reads its answers: the port
/// stops reading it once its answers reach its budget (they never exceed
/// it), cuts it off once it stayed there for the budget's timeout, and an
/// honest peer's messages flow throughout. Without the budget the answers
/// queue without bound (this test's peak exceeds 100 budgets).
#[test]
fn a_peer_that_leaves_its_answers_unread_is_stopped_then_cut_off() {
    let budget = flood_tests::BUDGET;
    let settings = TcpSettings {
        budget,
        ..TcpSettings::default()
    };
    let mut a = TcpPort::new("127.0.0.1:0".parse().unwrap(), LIM, &settings).unwrap();
    let mut b = port();
    let (mut ca, mut cb) = (Answering::<Core>::default(), Core::default());
    let Addr::Inet(to_a) = a.addr() else {
        panic!("tcp address")
    };
    // The flooder: a plain HELLO, then READ_REQs (any key) as fast as the
    // socket takes them; it never reads.
    let mut f = std::net::TcpStream::connect(to_a).unwrap();
    let me = f.local_addr().unwrap();
    let (h, p) = hello::encode(Kind::Request, &me, 99);
    f.write_all(&h).unwrap();
    f.write_all(&p).unwrap();
    f.set_nonblocking(true).unwrap();
    let mut flood = Flood::new();
    let (mut peak, mut got) = (0usize, 0usize);
    let mut cut = false;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(8) && !cut {
        flood.write(&mut f);
        a.poll(&mut ca);
        for (to, h) in std::mem::take(&mut ca.outbox) {
            let _ = a.send_ctl(&to, &h);
        }
        peak = peak.max(a.replies);
        cut |= core_take(&mut a).contains(&PeerEvent::Failed(Addr::Inet(me)));
        // The honest peer: one message to a at a time.
        let delivered = ca.core.got.iter().filter(|g| g.1 == 7).count();
        if delivered == got {
            let msg = pattern(32, got as u8);
            if send_bytes(&mut b, &a.addr(), 7, &msg, got as u64 + 1).is_ok() {
                got += 1;
            }
        }
        b.poll(&mut cb);
        core_take(&mut b);
    }
    assert!(
        peak >= budget.per_peer / 2,
        "the flood filled the budget ({peak} bytes)"
    );
    assert!(
        peak <= budget.per_peer,
        "answers held {peak} bytes, beyond the peer's budget of {}",
        budget.per_peer
    );
    assert!(cut, "the flooder was cut off once over its budget for its timeout");
    assert_eq!(a.replies, 0, "its answers went with it");
    let delivered = ca.core.got.iter().filter(|g| g.1 == 7).count();
    assert!(delivered >= 10, "the honest peer's messages flowed ({delivered})");
    assert!(t.elapsed() >= budget.timeout, "not cut off before its timeout");
}

/// A peer's room for answers: its own budget while the total has room,
/// and the floor whatever the total (a flood that fills the total cannot
/// stop a peer that takes its answers).
#[test]
fn reply_room_keeps_a_floor_for_every_peer_whatever_the_total() {
    let b = PeerBudget {
        per_peer: 1 << 20,
        total: 4 << 20,
        timeout: Duration::from_secs(1),
    };
    assert_eq!(reply_room(&b, 0, 0), 1 << 20);
    assert_eq!(reply_room(&b, 1 << 20, 1 << 20), 0, "its own budget is full");
    assert_eq!(
        reply_room(&b, 1000, (4 << 20) - 100),
        BUDGET_FLOOR - 1000,
        "the total is nearly full"
    );
    assert_eq!(
        reply_room(&b, 0, 64 << 20),
        BUDGET_FLOOR,
        "the total is over: the floor"
    );
    assert_eq!(reply_room(&b, BUDGET_FLOOR, 64 << 20), 0);
}

/// Polls `r` (and `o`, the other side) until `r`'s core got a message;
/// returns what `r`'s `poll` said on the pass that delivered it.
fn moved_on_arrival(r: &mut TcpPort, cr: &mut Core, o: &mut TcpPort, co: &mut Core) -> bool {
    let (t, n) = (Instant::now(), cr.got.len());
    let mut moved = false;
    while cr.got.len() == n {
        assert!(t.elapsed() < Duration::from_secs(5), "timed out");
        moved = r.poll(cr);
        core_take(r);
        o.poll(co);
        core_take(o);
    }
    moved
}

#[test]
fn a_pass_reports_movement_while_records_went_out_or_came_in_lately() {
    let (mut a, mut b) = (port(), port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    // Nothing sent or read yet: the CQ's idle rule may yield.
    assert!(!a.poll(&mut ca));
    assert!(!b.poll(&mut cb));
    send_bytes(&mut a, &b.addr(), 1, &pattern(4096, 1), 1).unwrap();
    // The sender's next pass: a record went out, an answer may be coming.
    assert!(a.poll(&mut ca));
    // The receiver's pass that reads it says so too.
    assert!(
        moved_on_arrival(&mut b, &mut cb, &mut a, &mut ca),
        "the pass that read the record reported no movement"
    );
    // Quiet for longer than the window: no movement any more, on either side.
    std::thread::sleep(moved::MOVED_WINDOW * 3);
    assert!(
        !a.poll(&mut ca),
        "the sender still reports movement after a quiet window"
    );
    assert!(
        !b.poll(&mut cb),
        "the receiver still reports movement after a quiet window"
    );
    // An answer moves both again.
    send_bytes(&mut b, &a.addr(), 2, &pattern(8, 2), 2).unwrap();
    assert!(b.poll(&mut cb));
    assert!(
        moved_on_arrival(&mut a, &mut ca, &mut b, &mut cb),
        "the pass that read the answer reported no movement"
    );
}
