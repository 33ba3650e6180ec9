//! The connection state machine over real loopback sockets, without a port
//! or a C layer: phases, the reader's outcomes, the stall rule, the write
//! queue's gate, deadlines and the alarm.

use super::*;
use crate::transport::connected::cm::{self, CmKind};
use crate::transport::proto::{flag, op};
use crate::transport::tcp::framing::{Body, OutRecord};
use std::io::{Read as _, Write};
use std::net::{TcpListener, TcpStream};

const LIM: Limits = Limits {
    max_payload: 1 << 20,
    max_chunk: 1 << 20,
    max_iov: 8,
};

/// A core that buffers every message, or stalls.
#[derive(Default)]
struct Core {
    got: Vec<(u64, Vec<u8>)>,
    stall: bool,
}

impl Delivery for Core {
    fn place(&mut self, _src: &Addr, _src_pid: i32, _hdr: &WireHdr) -> Place {
        if self.stall {
            Place::Stall
        } else {
            Place::Buffer
        }
    }
    fn placed(&mut self, _handle: u32, _result: Result<()>) {}
    fn buffered(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.got.push((hdr.tag, data));
    }
    fn control(&mut self, _src: &Addr, _src_pid: i32, _hdr: &WireHdr, _payload: &dyn PayloadIn) -> Disposition {
        Disposition::Consumed
    }
    fn sent(&mut self, _msg_id: u64, _result: Result<()>) {}
}

fn eager(tag: u64, payload: &[u8]) -> Vec<u8> {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = flag::TAGGED;
    h.tag = tag;
    h.len = payload.len() as u64;
    h.payload = payload.len() as u32;
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// An accepted connection (due in 10 s) and its client's blocking stream.
fn pair() -> (Conn, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    s.set_nonblocking(true).unwrap();
    (Conn::accepted(OwnedFd::from(s), Duration::from_secs(10)), client)
}

/// Reads until something other than `Idle` with nothing delivered happens
/// (or 5 s: a hang guard, not a timing assertion).
fn read_some(c: &mut Conn, core: &mut Core) -> Read {
    let t = Instant::now();
    let before = core.got.len();
    let mut scratch = [0u8; 64];
    loop {
        let r = c.read(core, &NullSink::PEER, &LIM, &mut scratch);
        if r != Read::Idle || core.got.len() > before {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "nothing arrived");
        crate::sys::poll_readable(c.sock.as_raw_fd(), Some(Duration::from_millis(100)));
    }
}

/// An accepted connection reads only the handshake record until its owner
/// makes it `Up`; the records the client sent right behind it were read
/// ahead with it and come out afterwards, nothing lost.
#[test]
fn request_first_then_the_records_read_ahead_with_it() {
    let (mut c, mut client) = pair();
    assert_eq!(c.phase(), Phase::AwaitRequest);
    assert!(c.deadline().is_some());
    let (h, p) = cm::encode(CmKind::ConnReq, b"hi", 0, None);
    let mut bytes = h.to_vec();
    bytes.extend(&p);
    bytes.extend(eager(7, b"behind"));
    client.write_all(&bytes).unwrap();
    let mut core = Core::default();
    let Read::Link(hdr) = read_some(&mut c, &mut core) else {
        panic!("the request first")
    };
    assert_eq!(cm::parse(&hdr, c.link_payload()), Ok(CmKind::ConnReq));
    assert_eq!(c.link_payload(), b"hi");
    assert!(c.reader().holds_input(), "the record behind it was read ahead");
    c.set_phase(Phase::Up);
    assert_eq!(read_some(&mut c, &mut core), Read::Idle);
    assert_eq!(core.got, vec![(7, b"behind".to_vec())]);
}

/// Every way a stream ends is one `End`, with the error it gives what was
/// in flight.
#[test]
fn reader_outcomes_end_the_stream_one_way_each() {
    // Data before the handshake: a protocol violation.
    let (mut c, mut client) = pair();
    client.write_all(&eager(1, b"early")).unwrap();
    assert_eq!(
        read_some(&mut c, &mut Core::default()),
        Read::Ended(End::Violation(Broken::Protocol))
    );
    // A bad header.
    let (mut c, mut client) = pair();
    c.set_phase(Phase::Up);
    client.write_all(&[0xffu8; 64]).unwrap();
    let r = read_some(&mut c, &mut Core::default());
    assert!(matches!(r, Read::Ended(End::Violation(Broken::Bad(_)))), "{r:?}");
    // End of stream at a record boundary: orderly, a reset for the core.
    let (mut c, mut client) = pair();
    c.set_phase(Phase::Up);
    client.write_all(&eager(2, b"last")).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut core = Core::default();
    let mut r = read_some(&mut c, &mut core);
    if r == Read::Idle {
        r = read_some(&mut c, &mut core);
    }
    assert_eq!(r, Read::Ended(End::Eof));
    assert_eq!(End::Eof.error(), Error::CONNRESET);
    assert_eq!(core.got, vec![(2, b"last".to_vec())]);
    // End of stream inside a record.
    let (mut c, mut client) = pair();
    c.set_phase(Phase::Up);
    client.write_all(&eager(3, b"cut short")[..70]).unwrap();
    drop(client);
    assert_eq!(
        read_some(&mut c, &mut Core::default()),
        Read::Ended(End::Violation(Broken::Truncated))
    );
    // A reset (the client closes with our data unread): the socket's error.
    let (mut c, client) = pair();
    c.set_phase(Phase::Up);
    c.queue_mut()
        .push(OutRecord::new(WireHdr::new(op::ACK).to_bytes(), Body::None));
    assert!(c.flush(&mut Vec::new()));
    drop(client);
    let r = read_some(&mut c, &mut Core::default());
    assert_eq!(r, Read::Ended(End::Failed(Error::CONNRESET)));
    assert_eq!(End::Failed(Error::CONNRESET).error(), Error::CONNRESET);
}

/// Backpressure: a stalled stream drops its input interest (sleepers do
/// not spin), a broken stalled stream is reported as such, and offering
/// input back re-arms it and says the record waits in our buffers.
#[test]
fn a_stall_drops_input_until_input_is_offered_again() {
    let epoll = Epoll::new().unwrap();
    let (mut c, mut client) = pair();
    c.set_phase(Phase::Up);
    c.watch(&epoll, 7).unwrap();
    assert_eq!(c.interest(), Some(IN));
    client.write_all(&eager(1, b"wait")).unwrap();
    let mut core = Core {
        stall: true,
        ..Core::default()
    };
    assert_eq!(read_some(&mut c, &mut core), Read::Stalled);
    assert!(c.stalled());
    c.update(&epoll);
    assert_eq!(c.interest(), Some(0));
    assert_eq!(
        c.ready(IN),
        Ready::Io {
            write: false,
            read: true
        }
    );
    assert!(matches!(c.ready(libc::EPOLLHUP as u32), Ready::Broken(_)));
    // "A receive was posted."
    assert!(c.offer_input(&epoll), "the record is in our buffers");
    assert_eq!(c.interest(), Some(IN));
    assert!(c.stalled(), "still stalled until a read takes it");
    core.stall = false;
    assert_eq!(read_some(&mut c, &mut core), Read::Idle);
    assert!(!c.stalled());
    assert_eq!(core.got, vec![(1, b"wait".to_vec())]);
    assert!(!c.offer_input(&epoll), "nothing to offer");
    c.unwatch(&epoll);
    assert_eq!(c.interest(), None);
}

/// Nothing is written while the connect is in progress; once connected the
/// queue goes out in order and reports the records that asked for it.
#[test]
fn the_queue_waits_for_the_connect_then_reports_what_it_wrote() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = l.local_addr().unwrap();
    let mut c = Conn::dial(None, &to, Duration::from_secs(10)).unwrap();
    assert_eq!(c.phase(), Phase::Dialing);
    assert_eq!(c.want(), OUT);
    let mut h = WireHdr::new(op::EAGER);
    h.tag = 5;
    h.len = 4;
    h.payload = 4;
    let mut r = OutRecord::new(h.to_bytes(), Body::Owned(b"data".to_vec()));
    r.notify = Some(5);
    c.queue_mut().push(r);
    let mut sent = Vec::new();
    assert!(!c.flush(&mut sent), "not while dialing");
    assert!(sent.is_empty());
    let epoll = Epoll::new().unwrap();
    c.watch(&epoll, 3).unwrap();
    let mut ready = Vec::new();
    let t = Instant::now();
    let ev = loop {
        epoll.wait(&mut ready, 4, Some(Duration::from_millis(100))).unwrap();
        if let Some(&(3, ev)) = ready.first() {
            break ev;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no connect");
    };
    assert_eq!(c.ready(ev), Ready::Dialed(Ok(())));
    c.set_phase(Phase::AwaitAnswer);
    assert_eq!(c.want(), IN | OUT);
    assert!(c.flush(&mut sent));
    assert_eq!(sent, vec![(5, Ok(()))]);
    c.update(&epoll);
    assert_eq!(c.interest(), Some(IN));
    let (mut srv, _) = l.accept().unwrap();
    let mut got = [0u8; 68];
    srv.read_exact(&mut got).unwrap();
    assert_eq!(&got[64..], b"data");
}

#[test]
fn a_dial_to_a_closed_port_fails_with_its_reason() {
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    match Conn::dial(None, &dead, Duration::from_secs(10)) {
        Err(e) => assert_eq!(e, Error::CONNREFUSED),
        Ok(c) => {
            let t = Instant::now();
            loop {
                crate::sys::poll_readable(c.sock.as_raw_fd(), Some(Duration::from_millis(100)));
                if let Ready::Dialed(r) = c.ready(OUT) {
                    if r.is_err() {
                        assert_eq!(r, Err(Error::CONNREFUSED));
                        break;
                    }
                }
                assert!(t.elapsed() < Duration::from_secs(5), "no refusal");
            }
        }
    }
}

/// A dial to a loopback port nobody listens on may be given that very
/// port as its source (the kernel picks any free one) and connect to
/// itself (TCP's simultaneous open). Such a dial fails as refused, and its
/// socket is aborted (no TIME_WAIT): the port stays free for a restarted
/// endpoint to listen on (else its bind fails with EADDRINUSE for a
/// minute).
#[test]
fn a_dial_connected_to_itself_is_refused_and_frees_its_port() {
    // A source bound the way a dial's is (no SO_REUSEADDR), to a free port
    // the dial then targets: the self-connect the kernel may pick at random.
    let me = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let from = net::stream_socket(&me).unwrap();
    rustix::net::bind(&from, &me).unwrap();
    let got = match Conn::dial(Some(from), &me, Duration::from_secs(10)) {
        Err(e) => Err(e),
        Ok(c) => {
            let t = Instant::now();
            let r = loop {
                crate::sys::poll_readable(c.sock.as_raw_fd(), Some(Duration::from_millis(10)));
                if let Ready::Dialed(r) = c.ready(OUT) {
                    break r;
                }
                assert!(t.elapsed() < Duration::from_secs(5), "no outcome");
            };
            drop(c);
            r
        }
    };
    assert_eq!(got, Err(Error::CONNREFUSED));
    // The port is free for a listener (as a restarted endpoint binds it).
    assert!(net::listen(&me, 8).is_ok());
}

/// A deadline expires when it is due, not before; the alarm fires once
/// for the earliest deadline, rings at once on demand, and disarms.
#[test]
fn deadlines_and_the_alarm() {
    let (mut c, _client) = pair();
    let due = c.deadline().unwrap();
    assert!(!c.expired(due - Duration::from_millis(1)));
    assert!(c.expired(due));
    c.set_deadline(None);
    assert!(!c.expired(due + Duration::from_secs(100)));

    let mut a = Alarm::new().unwrap();
    assert!(!a.armed());
    assert!(!a.due());
    a.arm(Some(Instant::now() + Duration::from_millis(5)));
    assert!(a.armed());
    assert!(crate::sys::poll_readable(a.fd(), Some(Duration::from_secs(5))));
    a.fired();
    assert!(a.due(), "fired: deadlines are due");
    assert!(!a.due(), "once");
    assert!(!a.armed());
    assert!(!crate::sys::poll_readable(a.fd(), Some(Duration::ZERO)), "drained");
    a.ring();
    assert!(crate::sys::poll_readable(a.fd(), Some(Duration::from_secs(5))));
    assert!(a.due(), "a ring is due at once, even before its token is seen");
    a.fired();
    assert!(a.due());
    a.arm(Some(Instant::now() + Duration::from_secs(3600)));
    assert!(!a.due(), "not due yet");
    a.arm(None);
    assert!(!a.armed());
    assert!(!crate::sys::poll_readable(a.fd(), Some(Duration::from_millis(10))));
}
