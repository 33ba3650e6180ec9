//! Extra links over loopback: both ports advertise 127.0.0.1 and take
//! 127.0.0.2 (loopback answers for all of 127/8) as link 1.

use super::super::tests::{pattern, pump, Core};
use super::super::*;
use crate::sys::net;
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::{Payload, Port};
use hello::Kind;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;

const LIM: Limits = Limits {
    max_payload: 1 << 30,
    max_chunk: 1 << 30,
    max_iov: 8,
};

const LINK_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// A port bound to the wildcard, advertising 127.0.0.1, with link 1 on
/// 127.0.0.2.
fn linked_port() -> TcpPort {
    let s = TcpSettings {
        iface: Some("lo".into()),
        ..TcpSettings::default()
    };
    let mut p = TcpPort::new("0.0.0.0:0".parse().unwrap(), LIM, &s).unwrap();
    p.link_ips = vec![LINK_IP];
    p
}

fn inet(a: Addr) -> SocketAddr {
    match a {
        Addr::Inet(s) => s,
        _ => panic!("tcp address"),
    }
}

/// A one-chunk streamed message: DATA `id` with tag `id`.
fn send_chunk(p: &mut TcpPort, to: &Addr, data: &[u8], id: u64) {
    let mut h = WireHdr::new(op::DATA);
    h.flags = flag::LAST;
    h.msg_id = id;
    h.tag = id;
    h.len = data.len() as u64;
    let iov = IovList::single(data.as_ptr() as usize, data.len());
    p.send(to, &h, Payload::Iov(&iov, 0, data.len()), false).unwrap();
}

/// Link 0 up (one eager message), then link 1 up on both sides.
fn link_up(a: &mut TcpPort, ca: &mut Core, b: &mut TcpPort, cb: &mut Core) {
    let hello = pattern(10, 0);
    let iov = IovList::single(hello.as_ptr() as usize, hello.len());
    let mut h = WireHdr::new(op::EAGER);
    h.len = hello.len() as u64;
    a.send(&b.addr(), &h, Payload::Iov(&iov, 0, hello.len()), true).unwrap();
    let (pa, pb) = (inet(a.addr()), inet(b.addr()));
    pump(&mut [(&mut *a, &mut *ca), (&mut *b, &mut *cb)], |p| {
        p[0].0.link_census(pb).first().is_some_and(|l| l.0) && p[1].0.link_census(pa).first().is_some_and(|l| l.0)
    });
    cb.got.clear();
}

#[test]
fn data_chunks_take_the_extra_link_and_none_is_lost_with_it() {
    let (mut a, mut b) = (linked_port(), linked_port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    link_up(&mut a, &mut ca, &mut b, &mut cb);
    let (pa, pb) = (inet(a.addr()), inet(b.addr()));
    assert_eq!(a.conns.len(), 2, "link 0 and link 1");
    let msgs: Vec<Vec<u8>> = (0..32).map(|i| pattern(64 << 10, i as u8)).collect();
    let to = b.addr();
    for (i, m) in msgs[..16].iter().enumerate() {
        send_chunk(&mut a, &to, m, 100 + i as u64);
    }
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 16);
    let sent1 = a.link_census(pb)[0].1;
    assert!(sent1 >= 4, "link 1 carried {sent1} of 16 messages");
    assert_eq!(b.link_census(pa)[0].2, sent1, "b read what a sent over link 1");
    // Link 1 fails at a with chunks written into it that b has not read:
    // they go again over link 0, once.
    for (i, m) in msgs[16..].iter().enumerate() {
        send_chunk(&mut a, &to, m, 116 + i as u64);
    }
    let id = *a.conns.iter().find(|(_, c)| c.link != 0).unwrap().0;
    a.fail_conn(id, Error::TIMEDOUT, &mut ca);
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 32);
    // A moment more: nothing arrives twice.
    for _ in 0..200 {
        a.poll(&mut ca);
        b.poll(&mut cb);
    }
    assert_eq!(cb.got.len(), 32);
    let mut seen = HashSet::new();
    for (src, tag, data) in &cb.got {
        assert_eq!(*src, a.addr());
        assert!(seen.insert(*tag), "message {tag} twice");
        assert_eq!(data, &msgs[(*tag - 100) as usize]);
    }
    assert!(cb.failed_recvs.is_empty());
    assert!(
        a.take_events().is_empty() && b.take_events().is_empty(),
        "no peer failed"
    );
    // The link is dialed again and carries chunks again.
    let t = Instant::now();
    while !a.link_census(pb)[0].0 || !b.link_census(pa)[0].0 {
        assert!(t.elapsed() < Duration::from_secs(5), "link 1 not back");
        a.poll(&mut ca);
        b.poll(&mut cb);
    }
    for (i, m) in msgs[..8].iter().enumerate() {
        send_chunk(&mut a, &to, m, 200 + i as u64);
    }
    pump(&mut [(&mut a, &mut ca), (&mut b, &mut cb)], |p| p[1].1.got.len() == 40);
    assert!(a.link_census(pb)[0].1 > 0, "the link back carries chunks");
}

/// A REQUEST for an extra link from whoever has no established link 0 of
/// that incarnation, or from another source than the one listed, is
/// refused; so is any link once the peer's are taken.
#[test]
fn an_extra_link_is_taken_only_for_an_established_peer_from_its_listed_address() {
    let (mut a, mut b) = (linked_port(), linked_port());
    let (mut ca, mut cb) = (Core::default(), Core::default());
    let refused = |a: &mut TcpPort, ca: &mut Core, from: IpAddr, claim: SocketAddr, nonce: u64, link: u64| {
        let sock = net::source_socket(from).unwrap();
        let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), inet(a.addr()).port());
        let std_sock = std::net::TcpStream::from(sock);
        let _ = std_sock.set_nonblocking(false);
        let s2 = socket_connect(std_sock, to);
        let mut s = s2;
        let x = hello::Extra {
            link,
            ..hello::Extra::default()
        };
        let (h, p) = hello::encode_with(Kind::Request, &claim, nonce, &x);
        s.write_all(&h).unwrap();
        s.write_all(&p).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut got = Vec::new();
        let t = Instant::now();
        while got.len() < 64 && t.elapsed() < Duration::from_secs(5) {
            a.poll(ca);
            let mut buf = [0u8; 256];
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        got.len() >= 64 && WireHdr::from_bytes(&got[..64].try_into().unwrap()).aux == 3
    };
    // No link 0 from that address yet.
    let stranger: SocketAddr = "127.0.0.1:9".parse().unwrap();
    assert!(refused(&mut a, &mut ca, LINK_IP, stranger, 5, 1 | 1 << 8));
    link_up(&mut a, &mut ca, &mut b, &mut cb);
    let (pa, pb) = (inet(a.addr()), inet(b.addr()));
    // The acceptor is the side with the higher address; the dialer claims
    // its own advertised address and nonce.
    let (acc, cacc, dialer) = if hello::keep_own_dial(&pa, &pb) {
        (&mut b, &mut cb, pa)
    } else {
        (&mut a, &mut ca, pb)
    };
    let nonce = {
        let peer = acc.peers.get(&dialer).unwrap();
        acc.conns.get(&peer.conn.unwrap()).unwrap().nonce
    };
    // From link 0's address rather than the listed one.
    assert!(refused(
        acc,
        cacc,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        dialer,
        nonce,
        2 | 1 << 8
    ));
    // Another incarnation.
    assert!(refused(acc, cacc, LINK_IP, dialer, nonce ^ 1, 2 | 1 << 8));
    // Link 1 is taken already; index 4 is beyond the cap.
    assert!(refused(acc, cacc, LINK_IP, dialer, nonce, 1 | 9 << 8));
    assert!(refused(acc, cacc, LINK_IP, dialer, nonce, 4 | 1 << 8));
    assert_eq!(acc.conns.len(), 2, "link 0 and link 1 only");
}

fn socket_connect(s: std::net::TcpStream, to: SocketAddr) -> std::net::TcpStream {
    net::connect(s.as_fd(), &to).ok();
    let t = Instant::now();
    while s.peer_addr().is_err() {
        assert!(t.elapsed() < Duration::from_secs(5), "connect");
        std::thread::sleep(Duration::from_millis(1));
    }
    s
}
