//! A peer's failure reaches the core once, as one `PeerEvent`, whichever
//! way the port found it: a send whose dial failed, a stream that broke
//! the protocol, a deadline that ran out. The operations queued for the
//! peer are ended by that event (no `sent(Err)` of their own), so a core
//! that counts failure reports sees exactly one per failure.

use super::super::hello::{self, Kind};
use super::super::{TcpPort, TcpSettings};
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{op, Limits, WireHdr};
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Place, Port, Sent};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const LIM: Limits = Limits {
    max_payload: 1 << 20,
    max_chunk: 1 << 20,
    max_iov: 8,
};

/// A core that buffers whatever arrives and counts the failure reports:
/// the events taken, and every `sent`/`placed` that says `Err`.
#[derive(Default)]
struct Counting {
    events: Vec<PeerEvent>,
    sent_err: Vec<u64>,
}

impl Delivery for Counting {
    fn place(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr) -> Place {
        Place::Buffer
    }
    fn placed(&mut self, _handle: u32, _result: Result<()>) {
        unreachable!("no placement is made into a receive here")
    }
    fn buffered(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, _data: Vec<u8>) {}
    fn control(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, _p: &dyn PayloadIn) -> Disposition {
        Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        if result.is_err() {
            self.sent_err.push(msg_id);
        }
    }
}

impl Counting {
    /// One pass as the engine makes it: poll, then the events if any.
    fn pass(&mut self, p: &mut TcpPort) {
        p.poll(self);
        if p.has_events() {
            self.events.extend(p.take_events());
        }
    }

    /// Passes until a failure is reported (5 s at most), then a few more:
    /// a second report of the same failure would show there.
    fn until_failed(&mut self, p: &mut TcpPort) {
        let t = Instant::now();
        while self.events.is_empty() {
            assert!(t.elapsed() < Duration::from_secs(5), "no failure reported");
            crate::sys::poll_readable(p.wait_fd(), Some(Duration::from_millis(100)));
            self.pass(p);
        }
        for _ in 0..50 {
            self.pass(p);
        }
    }
}

fn port() -> TcpPort {
    TcpPort::new("127.0.0.1:0".parse().unwrap(), LIM, &TcpSettings::default()).unwrap()
}

/// Queues a small message to `to` (id `id`).
fn send(p: &mut TcpPort, to: SocketAddr, id: u64) -> Result<Sent> {
    let mut h = WireHdr::new(op::EAGER);
    h.len = 2;
    h.msg_id = id;
    let data = *b"hi";
    let iov = IovList::single(data.as_ptr() as usize, data.len());
    p.send(&Addr::Inet(to), &h, Payload::Iov(&iov, 0, 2), true)
}

/// Found by a send: its dial is refused.
#[test]
fn a_refused_dial_is_reported_once() {
    let mut a = port();
    let mut ca = Counting::default();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    assert_eq!(send(&mut a, dead, 5), Ok(Sent::Queued));
    assert_eq!(send(&mut a, dead, 6), Ok(Sent::Queued));
    ca.until_failed(&mut a);
    assert_eq!(
        ca.events,
        vec![PeerEvent::Unreachable(Addr::Inet(dead), Error::CONNREFUSED)]
    );
    assert_eq!(
        ca.sent_err,
        Vec::<u64>::new(),
        "queued sends reported apart from the event"
    );
}

/// Found by the reader: the peer's stream breaks the protocol while a send
/// to it waits.
#[test]
fn a_broken_stream_is_reported_once() {
    let mut b = port();
    let mut cb = Counting::default();
    let Addr::Inet(bl) = b.addr() else { unreachable!() };
    let mut evil = std::net::TcpStream::connect(bl).unwrap();
    let me: SocketAddr = "127.0.0.1:3".parse().unwrap();
    let (h, p) = hello::encode(Kind::Request, &me, 1);
    evil.write_all(&h).unwrap();
    evil.write_all(&p).unwrap();
    // b answers the HELLO: the connection is up.
    evil.set_nonblocking(true).unwrap();
    let mut ans = [0u8; 64 + 16 + 48];
    let (mut got, t) = (0, Instant::now());
    while got < ans.len() {
        assert!(t.elapsed() < Duration::from_secs(5), "no answer to HELLO");
        cb.pass(&mut b);
        if let Ok(n) = evil.read(&mut ans[got..]) {
            got += n;
        }
    }
    // A send to the peer, held back by FI_MORE so that it is still queued.
    crate::transport::Hints::more_coming(&mut b);
    assert!(send(&mut b, me, 9).is_ok());
    let mut bad = WireHdr::new(op::EAGER);
    bad.len = 1 << 40;
    bad.payload = u32::MAX;
    evil.write_all(&bad.to_bytes()).unwrap();
    cb.until_failed(&mut b);
    assert_eq!(cb.events, vec![PeerEvent::Failed(Addr::Inet(me))]);
    assert_eq!(
        cb.sent_err,
        Vec::<u64>::new(),
        "queued sends reported apart from the event"
    );
}

/// Found by the clock: a dial nobody answers runs out of time.
#[test]
fn a_dial_past_its_deadline_is_reported_once() {
    let (silent, _keep) = super::super::tests::silent_listener();
    let mut a = port();
    a.connect_timeout = Duration::from_millis(200);
    let mut ca = Counting::default();
    assert_eq!(send(&mut a, silent, 7), Ok(Sent::Queued));
    ca.until_failed(&mut a);
    assert_eq!(
        ca.events,
        vec![PeerEvent::Unreachable(Addr::Inet(silent), Error::TIMEDOUT)]
    );
    assert_eq!(
        ca.sent_err,
        Vec::<u64>::new(),
        "queued sends reported apart from the event"
    );
}
