//! A connected endpoint's transport over real loopback sockets: the client
//! is a `Connection`; the server side is a passive listener handing its
//! connection request to a second `Connection` accepting, or a plain socket
//! playing a (hostile) server.

use super::*;
use crate::transport::iov::IovList;
use crate::transport::proto::op;
use crate::transport::tcp::flood_tests::{Answering, Flood, BUDGET};
use crate::transport::tcp::EAGER_MAX;
use crate::transport::Delivery;
use crate::transport::{Disposition, PayloadIn, Place};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

const LIM: Limits = Limits {
    max_payload: EAGER_MAX,
    max_chunk: EAGER_MAX,
    max_iov: 8,
};

fn opts() -> ConnOptions {
    ConnOptions {
        limits: LIM,
        settings: TcpSettings::default(),
        shm: ShmUse::Never,
    }
}

fn any() -> SocketAddr {
    "0.0.0.0:0".parse().unwrap()
}

/// Polls a passive listener until a connection request arrives.
fn request(l: &mut PassiveListener) -> ConnRequest {
    let t = Instant::now();
    loop {
        l.poll();
        if let Some(r) = l.next() {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no request");
        crate::sys::poll_readable(l.wait_fd(), Some(Duration::from_millis(100)));
    }
}

/// A scripted core: posted receives (owned buffers), else buffer.
#[derive(Default)]
struct Core {
    recvs: VecDeque<Vec<u8>>,
    inflight: HashMap<u32, Vec<u8>>,
    next: u32,
    got: Vec<Vec<u8>>,
    failed: Vec<Error>,
    sent: Vec<(u64, Result<()>)>,
}

impl Delivery for Core {
    fn place(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr) -> Place {
        assert_eq!(*src, CONNECTED_PEER);
        match self.recvs.pop_front() {
            Some(mut buf) => {
                self.next += 1;
                let dst = IovList::single(buf.as_mut_ptr() as usize, buf.len());
                let take = (hdr.len as usize).min(buf.len());
                self.inflight.insert(self.next, buf);
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
        let buf = self.inflight.remove(&handle).expect("known handle");
        match result {
            Ok(()) => self.got.push(buf),
            Err(e) => self.failed.push(e),
        }
    }
    fn buffered(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, data: Vec<u8>) {
        self.got.push(data);
    }
    fn control(&mut self, _src: &Addr, _pid: i32, _hdr: &WireHdr, _p: &dyn PayloadIn) -> Disposition {
        Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.sent.push((msg_id, result));
    }
}

fn events_until(s: &Arc<Connection>, p: &mut ConnectedPort, c: &mut Core) -> CmEvent {
    let t = Instant::now();
    loop {
        p.poll(c);
        if let Some(e) = s.take_cm_events().into_iter().next() {
            return e;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no event");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls the client's and the server's port in turn until `done` holds
/// for their cores (at most 5 s).
fn pump_until(
    (cp, cc): (&mut ConnectedPort, &mut Core),
    (sp, sc): (&mut ConnectedPort, &mut Core),
    done: impl Fn(&Core, &Core) -> bool,
) {
    let t = Instant::now();
    while !done(cc, sc) {
        cp.poll(cc);
        sp.poll(sc);
        assert!(t.elapsed() < Duration::from_secs(5), "nothing arrived");
    }
}

/// Reads one CM record from a blocking socket.
fn read_cm(s: &mut TcpStream) -> (CmKind, Vec<u8>) {
    let mut h = [0u8; proto::HDR_LEN];
    s.read_exact(&mut h).unwrap();
    let h = WireHdr::from_bytes(&h);
    let mut p = vec![0u8; h.payload as usize];
    s.read_exact(&mut p).unwrap();
    (cm::parse(&h, &p).unwrap(), p)
}

fn write_cm(s: &mut TcpStream, kind: CmKind, data: &[u8]) {
    let (h, p) = cm::encode(kind, data, 0, None);
    s.write_all(&h).unwrap();
    s.write_all(&p).unwrap();
}

fn msg(len: usize, id: u64) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.len = len as u64;
    h.msg_id = id;
    h
}

/// The endpoint's state is one function of its life and its connection's
/// phase: each phase of an open connection is exactly one state, an idle or
/// ended endpoint is that whatever its connection's phase (an ended
/// established connection stays open in `Phase::Up`), and an open endpoint
/// without a connection (its dial failed at once) is still connecting until
/// its next pass ends it.
#[test]
fn link_state_is_one_function_of_life_and_phase() {
    use Phase::*;
    let open = [
        (Dialing, LinkState::Connecting),
        (AwaitAnswer, LinkState::Connecting),
        (AwaitRequest, LinkState::Accepting),
        (Held, LinkState::Accepting),
        (Up, LinkState::Up),
        (Closing, LinkState::Down),
    ];
    for (p, want) in open {
        assert_eq!(LinkState::of(Life::Open, Some(p)), want, "{p:?}");
        assert_eq!(LinkState::of(Life::Idle, Some(p)), LinkState::Idle, "{p:?}");
        assert_eq!(LinkState::of(Life::Down, Some(p)), LinkState::Down, "{p:?}");
    }
    assert_eq!(LinkState::of(Life::Idle, None), LinkState::Idle);
    assert_eq!(LinkState::of(Life::Open, None), LinkState::Connecting);
    assert_eq!(LinkState::of(Life::Down, None), LinkState::Down);
    // The lock-free copy the endpoint layer reads is the derived state, and
    // it survives the round trip through its byte.
    for s in [
        LinkState::Idle,
        LinkState::Accepting,
        LinkState::Connecting,
        LinkState::Up,
        LinkState::Down,
    ] {
        assert_eq!(LinkState::from_u8(s as u8), s);
    }
    let cs = Connection::new_client("127.0.0.1:0".parse().unwrap(), &opts()).unwrap();
    assert_eq!(cs.state(), LinkState::Idle);
    assert_eq!(cs.state(), cs.inner.lock().state());
}

/// Client connects with data, the passive listener reads it and hands the
/// connection to an accepting endpoint, data flows both ways, an orderly
/// shutdown ends both sides with one event each.
#[test]
fn connect_accept_data_shutdown() {
    let mut l = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
    let to = l.local_addr().unwrap();
    let cs = Connection::new_client("127.0.0.1:0".parse().unwrap(), &opts()).unwrap();
    let bound = cs.local().unwrap();
    assert_ne!(bound.port(), 0, "bound before connect: getname works");
    let (mut cp, mut cc) = (cs.port(), Core::default());
    assert_eq!(cs.connect(to, &[7u8; CM_DATA_MAX + 1]), Err(Error::INVAL));
    cs.connect(to, b"hello").unwrap();
    assert_eq!(cs.state(), LinkState::Connecting);
    assert_eq!(cs.connect(to, b""), Err(Error::OPBADSTATE), "once in a lifetime");
    cp.poll(&mut cc);
    let req = request(&mut l);
    assert_eq!(req.data(), b"hello");
    assert_eq!(req.peer(), bound);
    assert_eq!(req.local(), to);
    let ss = Connection::new_accepting(req, &opts()).unwrap();
    assert_eq!(ss.peer(), Some(bound));
    let (mut sp, mut sc) = (ss.port(), Core::default());
    assert_eq!(ss.state(), LinkState::Accepting);
    ss.accept(b"world").unwrap();
    assert_eq!(ss.take_cm_events(), vec![CmEvent::Connected(vec![])]);
    assert_eq!(
        events_until(&cs, &mut cp, &mut cc),
        CmEvent::Connected(b"world".to_vec())
    );
    assert_eq!(cs.state(), LinkState::Up);
    assert_eq!(cs.local(), Some(bound), "same address after connect");
    assert_eq!(cs.peer(), Some(to));
    // Data, both ways, through the endpoint records.
    let a = vec![1u8; 1000];
    let b = vec![2u8; 60_000];
    let ia = IovList::single(a.as_ptr() as usize, a.len());
    cp.send(&CONNECTED_PEER, &msg(a.len(), 1), Payload::Iov(&ia, 0, a.len()), false)
        .unwrap();
    let ib = IovList::single(b.as_ptr() as usize, b.len());
    sc.recvs.push_back(vec![0; 10]); // truncating receive for the first
    sp.send(&CONNECTED_PEER, &msg(b.len(), 2), Payload::Iov(&ib, 0, b.len()), false)
        .unwrap();
    pump_until((&mut cp, &mut cc), (&mut sp, &mut sc), |c, s| {
        !c.got.is_empty() && !s.got.is_empty()
    });
    assert_eq!(sc.got[0], vec![1u8; 10]);
    assert_eq!(cc.got[0], b);
    // Orderly shutdown from the client.
    cs.shutdown();
    assert_eq!(
        events_until(&cs, &mut cp, &mut cc),
        CmEvent::Shutdown { err: Error::CANCELED }
    );
    assert_eq!(
        events_until(&ss, &mut sp, &mut sc),
        CmEvent::Shutdown { err: Error::CONNRESET }
    );
    assert_eq!(cs.state(), LinkState::Down);
    assert_eq!(ss.state(), LinkState::Down);
    // Posts fail at once afterwards; a second shutdown is a no-op.
    assert_eq!(
        cp.send(&CONNECTED_PEER, &msg(a.len(), 3), Payload::Iov(&ia, 0, a.len()), false),
        Err(Error::NOTCONN)
    );
    cs.shutdown();
    cp.poll(&mut cc);
    assert!(cs.take_cm_events().is_empty());
}

#[test]
fn reject_carries_the_servers_data() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cs = Connection::new_client(any(), &opts()).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    cs.connect(l.local_addr().unwrap(), &[9u8; CM_DATA_MAX]).unwrap();
    cp.poll(&mut cc);
    let (mut srv, _) = l.accept().unwrap();
    assert_eq!(read_cm(&mut srv), (CmKind::ConnReq, vec![9u8; CM_DATA_MAX]));
    write_cm(&mut srv, CmKind::Reject, b"no thanks");
    drop(srv);
    assert_eq!(
        events_until(&cs, &mut cp, &mut cc),
        CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: b"no thanks".to_vec()
        }
    );
    assert_eq!(cs.state(), LinkState::Down);
}

#[test]
fn closed_port_is_refused() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cs = Connection::new_client(any(), &opts()).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    cs.connect(SocketAddr::from(([127, 0, 0, 1], port)), b"x").unwrap();
    assert_eq!(
        events_until(&cs, &mut cp, &mut cc),
        CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: vec![]
        }
    );
}

/// A server that closes without answering, or answers with garbage, or
/// sends data before its answer: the attempt fails, nothing panics.
#[test]
fn hostile_or_silent_servers() {
    for case in 0..3 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let cs = Connection::new_client(any(), &opts()).unwrap();
        let (mut cp, mut cc) = (cs.port(), Core::default());
        cs.connect(l.local_addr().unwrap(), b"").unwrap();
        cp.poll(&mut cc);
        let (mut srv, _) = l.accept().unwrap();
        read_cm(&mut srv);
        match case {
            0 => {}
            1 => srv.write_all(&[0xffu8; 64]).unwrap(),
            _ => {
                let mut h = msg(4, 1);
                h.payload = 4;
                srv.write_all(&h.to_bytes()).unwrap();
                srv.write_all(b"data").unwrap();
            }
        }
        drop(srv);
        match events_until(&cs, &mut cp, &mut cc) {
            CmEvent::Refused { err, data } => {
                assert!(data.is_empty());
                assert_eq!(err, Error::CONNREFUSED, "case {case}");
            }
            e => panic!("case {case}: {e:?}"),
        }
        assert!(cc.got.is_empty());
    }
}

/// The peer vanishes with data in flight: the client hears FI_SHUTDOWN
/// (ECONNRESET), a send still queued fails, later sends fail at once.
#[test]
fn peer_death_ends_the_connection() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cs = Connection::new_client(any(), &opts()).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    cs.connect(l.local_addr().unwrap(), b"").unwrap();
    cp.poll(&mut cc);
    let (mut srv, _) = l.accept().unwrap();
    read_cm(&mut srv);
    write_cm(&mut srv, CmKind::Accept, b"");
    assert_eq!(events_until(&cs, &mut cp, &mut cc), CmEvent::Connected(vec![]));
    // Fill the path until a send is queued (more than the kernel's send
    // buffer, 8 MiB, and the peer's receive buffer hold).
    let big = vec![5u8; 32 << 20];
    let iov = IovList::single(big.as_ptr() as usize, big.len());
    let r = cp
        .send(
            &CONNECTED_PEER,
            &msg(big.len(), 9),
            Payload::Iov(&iov, 0, big.len()),
            false,
        )
        .unwrap();
    assert_eq!(r, Sent::Queued);
    drop(srv); // unread data: the kernel resets the connection
    let ev = events_until(&cs, &mut cp, &mut cc);
    assert!(matches!(ev, CmEvent::Shutdown { .. }), "{ev:?}");
    assert_eq!(cc.sent.len(), 1);
    assert!(cc.sent[0].1.is_err());
    assert_eq!(
        cp.send(&CONNECTED_PEER, &msg(1, 10), Payload::Bytes(b"x"), true),
        Err(Error::NOTCONN)
    );
}

/// As for RDM ports (see `the_wait_fd_leaves_four_epoll_levels_above_it`
/// there): neither a connected endpoint's set nor a passive listener's
/// nests a set of its own.
#[test]
fn wait_fds_leave_four_epoll_levels_above_them() {
    let l = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
    let c = Connection::new_client(any(), &opts()).unwrap();
    for fd in [l.wait_fd(), c.wait_fd] {
        let sets: Vec<Epoll> = (0..4).map(|_| Epoll::new().unwrap()).collect();
        let mut below = fd;
        for s in &sets {
            s.add(below, IN, 0).unwrap();
            below = s.fd();
        }
    }
}

// ---- the shm data path (docs/shm.md, Connected endpoints)

fn opts_shm(shm: ShmUse) -> ConnOptions {
    ConnOptions { shm, ..opts() }
}

/// A connected pair through a passive listener on loopback, the client
/// with `client`, the server with `server`.
struct Pair {
    cs: Arc<Connection>,
    cp: ConnectedPort,
    cc: Core,
    ss: Arc<Connection>,
    sp: ConnectedPort,
    sc: Core,
}

fn pair(client: ShmUse, server: ShmUse) -> Pair {
    let mut l = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
    let cs = Connection::new_client("127.0.0.1:0".parse().unwrap(), &opts_shm(client)).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    cs.connect(l.local_addr().unwrap(), b"hi").unwrap();
    cp.poll(&mut cc);
    let req = request(&mut l);
    assert_eq!(req.data(), b"hi", "the offer is not connection data");
    let ss = Connection::new_accepting(req, &opts_shm(server)).unwrap();
    let (sp, sc) = (ss.port(), Core::default());
    ss.accept(b"yo").unwrap();
    assert_eq!(ss.take_cm_events(), vec![CmEvent::Connected(vec![])]);
    assert_eq!(events_until(&cs, &mut cp, &mut cc), CmEvent::Connected(b"yo".to_vec()));
    Pair { cs, cp, cc, ss, sp, sc }
}

fn token_of(c: &Connection) -> u64 {
    c.inner.lock().shm.as_ref().unwrap().token()
}

/// Both ends on shm (or auto) on this host: the data path is the shm rings,
/// both ways; what the client sends before its fi_shutdown reaches the
/// server before the end does, even when the server hears of the end (the
/// TCP BYE) before it looked at its ring.
#[test]
fn local_ends_move_their_data_over_shm_and_drain_before_the_end() {
    for (client, server) in [
        (ShmUse::Only, ShmUse::Only),
        (ShmUse::Local, ShmUse::Local),
        (ShmUse::Local, ShmUse::Only),
    ] {
        let Pair {
            cs,
            mut cp,
            mut cc,
            ss,
            mut sp,
            mut sc,
        } = pair(client, server);
        assert!(cs.via_shm() && ss.via_shm(), "{client:?}/{server:?}");
        assert!(cp.queued_at_peer(&CONNECTED_PEER));
        assert_eq!(cp.eager_limit(), crate::transport::shm::EAGER_MAX);
        let a = vec![1u8; 1000];
        let b = vec![2u8; 16_000];
        assert_eq!(
            cp.send(&CONNECTED_PEER, &msg(a.len(), 1), Payload::Bytes(&a), true),
            Ok(Sent::Done)
        );
        assert_eq!(
            sp.send(&CONNECTED_PEER, &msg(b.len(), 2), Payload::Bytes(&b), true),
            Ok(Sent::Done)
        );
        pump_until((&mut cp, &mut cc), (&mut sp, &mut sc), |c, s| {
            !c.got.is_empty() && !s.got.is_empty()
        });
        assert_eq!((&sc.got[0], &cc.got[0]), (&a, &b));
        // The TCP connection carried none of it: nothing queued or read.
        assert!(ss.inner.lock().conn.as_ref().unwrap().queue().is_empty());
        // Three more, then the client's fi_shutdown (BYE over TCP).
        for i in 0..3u8 {
            cp.send(&CONNECTED_PEER, &msg(1, 10 + i as u64), Payload::Bytes(&[i]), true)
                .unwrap();
        }
        cs.shutdown();
        assert_eq!(
            events_until(&cs, &mut cp, &mut cc),
            CmEvent::Shutdown { err: Error::CANCELED }
        );
        // The server reads its socket only (no pass over the ring first).
        let t = Instant::now();
        let ev = loop {
            ss.with(|c| c.read(&mut sc));
            if let Some(e) = ss.take_cm_events().into_iter().next() {
                break e;
            }
            assert!(t.elapsed() < Duration::from_secs(5), "no BYE");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(ev, CmEvent::Shutdown { err: Error::CONNRESET });
        assert_eq!(sc.got[1..], [vec![0u8], vec![1], vec![2]], "delivered before the end");
    }
}

/// auto to a peer that offers nothing (tcp): the TCP data path; shm
/// refuses it, on either side.
#[test]
fn shm_refuses_what_it_cannot_reach_and_auto_falls_back_to_tcp() {
    for (client, server) in [(ShmUse::Local, ShmUse::Never), (ShmUse::Never, ShmUse::Local)] {
        let Pair {
            cs,
            mut cp,
            mut cc,
            ss,
            mut sp,
            mut sc,
        } = pair(client, server);
        assert!(!cs.via_shm() && !ss.via_shm());
        cp.send(&CONNECTED_PEER, &msg(3, 1), Payload::Bytes(b"abc"), true)
            .unwrap();
        pump_until((&mut cp, &mut cc), (&mut sp, &mut sc), |_, s| !s.got.is_empty());
        assert_eq!(sc.got[0], b"abc");
    }
    // shm client, tcp server: the server accepts without an offer, the
    // client refuses (and the server hears the end).
    let mut l = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
    let cs = Connection::new_client(any(), &opts_shm(ShmUse::Only)).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    cs.connect(l.local_addr().unwrap(), b"").unwrap();
    cp.poll(&mut cc);
    let ss = Connection::new_accepting(request(&mut l), &opts()).unwrap();
    let (mut sp, mut sc) = (ss.port(), Core::default());
    ss.accept(b"").unwrap();
    assert_eq!(ss.take_cm_events(), vec![CmEvent::Connected(vec![])]);
    assert_eq!(
        events_until(&cs, &mut cp, &mut cc),
        CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: vec![]
        }
    );
    assert!(matches!(events_until(&ss, &mut sp, &mut sc), CmEvent::Shutdown { .. }));
    // tcp client, shm server: refused at fi_accept (REJECT).
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cs = Connection::new_client(any(), &opts()).unwrap();
    let (mut cp, mut cc) = (cs.port(), Core::default());
    let mut pl = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
    drop(l);
    cs.connect(pl.local_addr().unwrap(), b"").unwrap();
    cp.poll(&mut cc);
    let ss = Connection::new_accepting(request(&mut pl), &opts_shm(ShmUse::Only)).unwrap();
    ss.accept(b"").unwrap();
    assert_eq!(
        ss.take_cm_events(),
        vec![CmEvent::Refused {
            err: Error::CONNREFUSED,
            data: vec![]
        }]
    );
    assert_eq!(ss.state(), LinkState::Down);
    assert!(matches!(events_until(&cs, &mut cp, &mut cc), CmEvent::Refused { .. }));
}

/// A CONNREQ whose offer names another host, a segment that does not open,
/// one owned by another pid, or the server's own: that connection is
/// refused (REJECT) by an shm server; auto takes only the first over TCP.
#[test]
fn hostile_offers_refuse_only_their_connection() {
    let other = ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap();
    let me = crate::sys::getpid();
    let host = crate::transport::addr::host_id();
    type MakeOffer<'a> = Box<dyn Fn(u64) -> ShmOffer + 'a>;
    let cases: Vec<(&str, MakeOffer)> = vec![
        (
            "other host",
            Box::new(|_| ShmOffer {
                host: host ^ 1,
                token: other.token(),
                pid: me,
            }),
        ),
        (
            "no segment",
            Box::new(|_| ShmOffer {
                host,
                token: crate::transport::addr::shm_token_random(),
                pid: me,
            }),
        ),
        (
            "other pid",
            Box::new(|_| ShmOffer {
                host,
                token: other.token(),
                pid: me + 1,
            }),
        ),
        (
            "its own",
            Box::new(|own| ShmOffer {
                host,
                token: own,
                pid: me,
            }),
        ),
    ];
    for (server, expect_tcp) in [(ShmUse::Only, [false; 4]), (ShmUse::Local, [true, false, false, false])] {
        for (i, (what, offer)) in cases.iter().enumerate() {
            let mut l = PassiveListener::on(net::bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap(), 8).unwrap();
            let mut cli = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            // The request first (its offer needs the server's token for
            // "its own": the listener reads it before the server exists).
            let req_of = |l: &mut PassiveListener, cli: &mut TcpStream, o: ShmOffer| {
                let (h, p) = cm::encode(CmKind::ConnReq, b"", 0, Some(o));
                cli.write_all(&h).unwrap();
                cli.write_all(&p).unwrap();
                request(l)
            };
            let req = req_of(&mut l, &mut cli, offer(1));
            let ss = Connection::new_accepting(req, &opts_shm(server)).unwrap();
            if *what == "its own" {
                ss.inner.lock().peer_offer = Some(offer(token_of(&ss)));
            }
            ss.accept(b"").unwrap();
            let ev = ss.take_cm_events();
            let (kind, _) = read_cm(&mut cli);
            if expect_tcp[i] {
                assert_eq!(ev, vec![CmEvent::Connected(vec![])], "{what}");
                assert_eq!(kind, CmKind::Accept, "{what}");
                assert!(!ss.via_shm());
            } else {
                assert_eq!(
                    ev,
                    vec![CmEvent::Refused {
                        err: Error::CONNREFUSED,
                        data: vec![]
                    }],
                    "{what} ({server:?})"
                );
                assert_eq!(kind, CmKind::Reject, "{what}");
            }
        }
    }
}

/// Records in the server's ring from anybody but the connected peer — here
/// another shm endpoint of this process, so the same verified pid, another
/// token — are dropped; the peer's are delivered.
#[test]
fn records_from_others_than_the_peer_are_dropped() {
    let Pair {
        cs: _cs,
        mut cp,
        mut cc,
        ss,
        mut sp,
        mut sc,
    } = pair(ShmUse::Only, ShmUse::Only);
    let mut intruder = ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap();
    let to = Addr::Shm(token_of(&ss));
    intruder.send_record(&to, &msg(4, 66), Payload::Bytes(b"evil")).unwrap();
    cp.send(&CONNECTED_PEER, &msg(4, 1), Payload::Bytes(b"good"), true)
        .unwrap();
    pump_until((&mut cp, &mut cc), (&mut sp, &mut sc), |_, s| !s.got.is_empty());
    for _ in 0..10 {
        sp.poll(&mut sc);
    }
    assert_eq!(sc.got, vec![b"good".to_vec()]);
    assert_eq!(ss.inner.lock().dropped, 1);
    assert_eq!(ss.state(), LinkState::Up, "a stranger does not end the connection");
}

/// The peer of a connected endpoint streams requests and never reads its
/// answers: the endpoint stops reading it once its answers reach the
/// budget (they never exceed it), then cuts the connection once it stayed
/// there for the budget's timeout (FI_SHUTDOWN with FI_ECONNRESET, as for
/// a reset). Without the budget the answers queue without bound.
#[test]
fn a_peer_that_leaves_its_answers_unread_is_stopped_then_cut_off() {
    let budget = BUDGET;
    let o = ConnOptions {
        settings: TcpSettings {
            budget,
            ..TcpSettings::default()
        },
        ..opts()
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let cs = Connection::new_client(any(), &o).unwrap();
    let (mut cp, mut ca) = (cs.port(), Answering::<Core>::default());
    cs.connect(l.local_addr().unwrap(), b"").unwrap();
    cp.poll(&mut ca);
    // The flooder: it accepts, then sends READ_REQs (any key) as fast as
    // the socket takes them; it never reads.
    let (mut f, _) = l.accept().unwrap();
    read_cm(&mut f);
    write_cm(&mut f, CmKind::Accept, b"");
    assert_eq!(events_until(&cs, &mut cp, &mut ca.core), CmEvent::Connected(vec![]));
    f.set_nonblocking(true).unwrap();
    let mut flood = Flood::new();
    // Answers held in the queue, at most: the budget over what one costs.
    let most = budget.per_peer / crate::transport::tcp::framing::REPLY_COST;
    let mut peak = 0usize;
    let mut ended = None;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(8) && ended.is_none() {
        flood.write(&mut f);
        cp.poll(&mut ca);
        for (_, h) in std::mem::take(&mut ca.outbox) {
            let _ = cp.send_ctl(&CONNECTED_PEER, &h);
        }
        let queued = cs
            .inner
            .lock()
            .conn
            .as_ref()
            .map_or(0, |c| c.queue().unsent() / proto::HDR_LEN);
        peak = peak.max(queued);
        ended = cs.take_cm_events().into_iter().next();
    }
    assert!(peak >= most / 2, "the flood filled the budget ({peak} answers queued)");
    assert!(peak <= most, "{peak} answers queued, beyond the budget's {most}");
    assert_eq!(
        ended,
        Some(CmEvent::Shutdown {
            err: crate::transport::PEER_FAILED
        }),
        "the flooder was cut off once over its budget for its timeout"
    );
    assert_eq!(cs.state(), LinkState::Down);
    assert!(t.elapsed() >= budget.timeout, "not cut off before its timeout");
}
