//! The UDP port over loopback: records both ways, what a hostile sender's
//! datagrams cost (a counter), and a stalled record kept for the next pass.

use super::*;
use crate::transport::proto::{flag, op};
use crate::transport::Place;
use std::net::UdpSocket;

#[derive(Default)]
struct Sink {
    got: Vec<(Addr, WireHdr, Vec<u8>)>,
    stall: bool,
}

impl Delivery for Sink {
    fn place(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr) -> Place {
        Place::Discard
    }
    fn placed(&mut self, _handle: u32, _result: Result<()>) {}
    fn buffered(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, _data: Vec<u8>) {}
    fn deliver(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if self.stall {
            return Disposition::Stall;
        }
        self.got.push((*src, *hdr, payload.to_vec()));
        Disposition::Consumed
    }
    fn control(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, _p: &dyn PayloadIn) -> Disposition {
        panic!("no control records on a datagram port");
    }
    fn sent(&mut self, _msg_id: u64, _result: Result<()>) {}
}

fn port() -> UdpPort {
    UdpPort::new("127.0.0.1:0".parse().unwrap(), None, &[]).unwrap()
}

fn eager(tag: u64, n: usize) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = flag::TAGGED;
    h.tag = tag;
    h.len = n as u64;
    h
}

/// Polls until `want` records arrived or a second passed.
fn poll_for(p: &mut UdpPort, s: &mut Sink, want: usize) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while s.got.len() < want && std::time::Instant::now() < end {
        p.poll(s);
    }
}

#[test]
fn records_arrive_with_their_source_and_payload() {
    let (mut a, mut b) = (port(), port());
    assert!(matches!(a.addr(), Addr::Inet(x) if x.ip().is_loopback() && x.port() != 0));
    let data: Vec<u8> = (0..MAX_PAYLOAD).map(|i| (i * 7) as u8).collect();
    for (i, n) in [0usize, 1, 4096, MAX_PAYLOAD].into_iter().enumerate() {
        let r = a.send(&b.addr(), &eager(i as u64, n), Payload::Bytes(&data[..n]), false);
        assert_eq!(r, Ok(Sent::Done));
    }
    let mut s = Sink::default();
    poll_for(&mut b, &mut s, 4);
    assert_eq!(s.got.len(), 4);
    for (i, n) in [0usize, 1, 4096, MAX_PAYLOAD].into_iter().enumerate() {
        let (src, h, p) = &s.got[i];
        assert_eq!(*src, a.addr());
        assert_eq!(h.tag, i as u64);
        assert_eq!(h.payload as usize, n);
        assert_eq!(&p[..], &data[..n]);
    }
    // Too large for one datagram: refused at send, nothing sent.
    let big = vec![0u8; MAX_PAYLOAD + 1];
    assert_eq!(
        a.send(&b.addr(), &eager(9, big.len()), Payload::Bytes(&big), false),
        Err(Error::MSGSIZE)
    );
    // Not a socket address.
    assert_eq!(
        a.send(&Addr::Shm(5), &eager(9, 0), Payload::None, false),
        Err(Error::INVAL)
    );
}

#[test]
fn hostile_datagrams_cost_a_counter() {
    let mut b = port();
    let Addr::Inet(to) = b.addr() else { unreachable!() };
    let evil = UdpSocket::bind("127.0.0.1:0").unwrap();
    let good = {
        let mut v = Vec::new();
        framing::start(&mut v, &{
            let mut h = eager(1, 3);
            h.payload = 3;
            h
        });
        v.extend_from_slice(b"abc");
        v
    };
    let mut long = good.clone();
    long.push(0);
    let mut ack = Vec::new();
    framing::start(&mut ack, &WireHdr::new(op::ACK));
    let mut bad_magic = good.clone();
    bad_magic[0] ^= 0xff;
    for d in [&b""[..], &b"x"[..], &good[..10], &long[..], &ack[..], &bad_magic[..]] {
        evil.send_to(d, to).unwrap();
    }
    evil.send_to(&good, to).unwrap();
    let mut s = Sink::default();
    poll_for(&mut b, &mut s, 1);
    assert_eq!(s.got.len(), 1, "only the well-formed record is delivered");
    assert_eq!(s.got[0].2, b"abc");
    assert_eq!(s.got[0].0, Addr::Inet(evil.local_addr().unwrap()));
    let d = b.drops();
    assert_eq!((d.short, d.length, d.op, d.header), (3, 1, 1, 1), "{d:?}");
}

#[test]
fn a_stalled_record_is_kept_for_the_next_pass() {
    let (mut a, mut b) = (port(), port());
    for t in 0..3 {
        a.send(&b.addr(), &eager(t, 1), Payload::Bytes(b"z"), false).unwrap();
    }
    let mut s = Sink {
        stall: true,
        ..Sink::default()
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while b.held.is_none() && std::time::Instant::now() < end {
        b.poll(&mut s);
    }
    assert!(b.held.is_some());
    s.stall = false;
    poll_for(&mut b, &mut s, 3);
    let tags: Vec<u64> = s.got.iter().map(|g| g.1.tag).collect();
    assert_eq!(tags, [0, 1, 2], "held first, in order, none lost");
    assert_eq!(b.drops().total(), 0);
}
