//! The listener and its handshake table over real loopback sockets: the
//! cap and its eviction rule, deadlines, bad first records, and what a
//! complete handshake hands over.

use super::*;
use crate::transport::connected::cm::{self, CmKind};
use crate::transport::proto::op;
use crate::transport::tcp::conn::{Alarm, CoreSink};
use std::io::{Read as _, Write};
use std::net::TcpStream;

/// An owner as the ports are: one epoll set holding the listener's tokens
/// and one timer for its deadlines.
struct Owner {
    l: Listener,
    epoll: Epoll,
    alarm: Alarm,
}

impl Owner {
    fn poll(&mut self) {
        let mut ready = Vec::new();
        self.epoll.wait(&mut ready, 64, Some(Duration::ZERO)).unwrap();
        for (token, _) in ready {
            if token == 0 {
                self.alarm.fired();
            } else {
                assert!(Listener::owns(token));
                self.l.event(&self.epoll, token);
            }
        }
        if self.alarm.due() {
            self.l.check_deadlines(&self.epoll, Instant::now());
        }
        self.alarm.arm(self.l.next_deadline());
    }
}

fn listener(max_handshakes: usize, timeout: Duration) -> (Owner, SocketAddr) {
    let l = Listener::bind(
        &"127.0.0.1:0".parse().unwrap(),
        64,
        ListenerOptions {
            max_handshakes,
            timeout,
        },
    )
    .unwrap();
    let a = l.local_addr().unwrap();
    let epoll = Epoll::new().unwrap();
    let alarm = Alarm::new().unwrap();
    l.watch(&epoll).unwrap();
    epoll.add(alarm.fd(), IN, 0).unwrap();
    (Owner { l, epoll, alarm }, a)
}

/// Polls until `done` (5 s: a hang guard), sleeping on the owner's set.
fn poll_until(o: &mut Owner, mut done: impl FnMut(&mut Listener) -> bool) {
    let t = Instant::now();
    loop {
        o.poll();
        if done(&mut o.l) {
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "timed out");
        crate::sys::poll_readable(o.epoll.fd(), Some(Duration::from_millis(50)));
    }
}

fn connreq(data: &[u8]) -> Vec<u8> {
    let (h, p) = cm::encode(CmKind::ConnReq, data, 0, None);
    let mut v = h.to_vec();
    v.extend(p);
    v
}

/// Whether the listener closed this client's connection (read sees the
/// end, or a reset), waiting up to 5 s.
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 16];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

/// Whether the connection is still open (nothing to read, no end).
fn open(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut b = [0u8; 16];
    let r = matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    r
}

/// The flood rule: the table holds at most `max_handshakes`; a newcomer
/// beyond closes the oldest incomplete handshake, so a real client that
/// says its request at once gets through a flood of silent sockets.
#[test]
fn a_full_table_closes_the_oldest_silent_handshake_for_a_newcomer() {
    let (mut l, at) = listener(4, Duration::from_secs(60));
    let mut flood: Vec<TcpStream> = Vec::new();
    for i in 0..4 {
        flood.push(TcpStream::connect(at).unwrap());
        // One at a time, so that their order is the accept order.
        poll_until(&mut l, |l| l.incomplete() == i + 1);
    }
    let mut real = TcpStream::connect(at).unwrap();
    real.write_all(&connreq(b"me")).unwrap();
    let mut got = None;
    poll_until(&mut l, |l| {
        got = l.next();
        got.is_some()
    });
    let h = got.unwrap();
    assert_eq!(h.hdr.op, op::HELLO);
    assert_eq!(h.payload, b"me");
    assert_eq!(l.l.incomplete(), 3, "the oldest silent one made room");
    assert!(closed(&mut flood[0]), "the oldest was closed");
    for s in &mut flood[1..] {
        assert!(open(s), "younger ones are left alone");
    }
}

/// Requests read but not taken keep their slots and are never evicted: with
/// every slot holding one, a newcomer is closed at once; the requests come
/// out in arrival order.
#[test]
fn complete_requests_keep_their_slots() {
    let (mut l, at) = listener(2, Duration::from_secs(60));
    let mut a = TcpStream::connect(at).unwrap();
    a.write_all(&connreq(b"a")).unwrap();
    poll_until(&mut l, |l| l.done.len() == 1);
    let mut b = TcpStream::connect(at).unwrap();
    b.write_all(&connreq(b"b")).unwrap();
    poll_until(&mut l, |l| l.done.len() == 2);
    let mut c = TcpStream::connect(at).unwrap();
    assert!(closed(&mut c), "no room: the newcomer is closed");
    let first = l.l.next().unwrap();
    let second = l.l.next().unwrap();
    assert_eq!(
        (first.payload.as_slice(), second.payload.as_slice()),
        (&b"a"[..], &b"b"[..])
    );
    assert!(l.l.next().is_none());
    assert!(open(&mut a) && open(&mut b), "their owner decides");
}

/// An incomplete handshake closes at its deadline (a sleeper on the wait
/// fd wakes for it); a complete one has none.
#[test]
fn an_incomplete_handshake_expires() {
    let (mut l, at) = listener(8, Duration::from_millis(100));
    let mut silent = TcpStream::connect(at).unwrap();
    poll_until(&mut l, |l| l.incomplete() == 1);
    poll_until(&mut l, |l| l.incomplete() == 0);
    assert!(closed(&mut silent));
    let mut real = TcpStream::connect(at).unwrap();
    real.write_all(&connreq(b"")).unwrap();
    let mut got = None;
    poll_until(&mut l, |l| {
        got = l.next();
        got.is_some()
    });
    let h = got.unwrap();
    assert_eq!(h.conn.phase(), crate::transport::tcp::conn::Phase::Held);
    assert_eq!(h.conn.deadline(), None, "the owner's to answer, without a deadline");
}

/// A first record that is not a handshake record closes that connection;
/// nothing reaches the owner.
#[test]
fn a_bad_first_record_closes_the_connection() {
    let (mut l, at) = listener(8, Duration::from_secs(60));
    let mut evil = TcpStream::connect(at).unwrap();
    let mut h = WireHdr::new(op::EAGER);
    h.len = 3;
    h.payload = 3;
    evil.write_all(&h.to_bytes()).unwrap();
    evil.write_all(b"abc").unwrap();
    poll_until(&mut l, |l| l.incomplete() == 0 && l.pending.is_empty());
    assert!(l.l.next().is_none());
    assert!(closed(&mut evil));
}

/// What a client sent right behind its request travels with the
/// connection: the new owner reads it once the connection is up.
#[test]
fn records_behind_the_request_travel_with_the_connection() {
    let (mut l, at) = listener(8, Duration::from_secs(60));
    let mut client = TcpStream::connect(at).unwrap();
    let mut bytes = connreq(b"x");
    let mut h = WireHdr::new(op::EAGER);
    h.len = 5;
    h.payload = 5;
    bytes.extend(h.to_bytes());
    bytes.extend(b"hello");
    client.write_all(&bytes).unwrap();
    let mut got = None;
    poll_until(&mut l, |l| {
        got = l.next();
        got.is_some()
    });
    let Handshake { mut conn, .. } = got.unwrap();
    conn.set_phase(Phase::Up);
    struct Keep(Vec<Vec<u8>>);
    impl crate::transport::Delivery for Keep {
        fn place(&mut self, _: &crate::transport::addr::Addr, _: i32, _: &WireHdr) -> crate::transport::Place {
            crate::transport::Place::Buffer
        }
        fn placed(&mut self, _: u32, _: Result<()>) {}
        fn buffered(&mut self, _: &crate::transport::addr::Addr, _: i32, _: &WireHdr, data: Vec<u8>) {
            self.0.push(data);
        }
        fn control(
            &mut self,
            _: &crate::transport::addr::Addr,
            _: i32,
            _: &WireHdr,
            _: &dyn crate::transport::PayloadIn,
        ) -> crate::transport::Disposition {
            crate::transport::Disposition::Consumed
        }
        fn sent(&mut self, _: u64, _: Result<()>) {}
    }
    let mut keep = Keep(Vec::new());
    let lim = Limits {
        max_payload: 1 << 16,
        max_chunk: 1 << 16,
        max_iov: 8,
    };
    let mut scratch = [0u8; 64];
    let src = "127.0.0.1:1".parse().unwrap();
    let r = conn.read(
        &mut CoreSink::new(&mut keep),
        &crate::transport::addr::Addr::Inet(src),
        &lim,
        &mut scratch,
    );
    assert_eq!(r, Read::Idle);
    assert_eq!(keep.0, vec![b"hello".to_vec()]);
}
