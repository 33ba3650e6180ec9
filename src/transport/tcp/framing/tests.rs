//! The reader and the write queue over scripted streams cut into
//! arbitrary pieces.

use super::reader::READ_AHEAD;
use super::writer::{CORK_BYTES, CORK_RECORD_MAX};
use super::*;
use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{BadRecord, Limits};
use crate::transport::{Delivery, Disposition, PayloadIn, Place};
use std::collections::VecDeque;

const LIM: Limits = Limits {
    max_payload: 1 << 20,
    max_chunk: 1 << 20,
    max_iov: 8,
};

/// A stream that hands out its bytes in pieces of the given sizes
/// (cycled), then Blocked (or Eof when `eof`).
struct Script {
    data: Vec<u8>,
    pos: usize,
    cuts: Vec<usize>,
    k: usize,
    eof: bool,
    /// Only this many bytes are "in the socket" so far.
    avail: usize,
}

impl Script {
    fn new(data: Vec<u8>, cuts: &[usize]) -> Script {
        let avail = data.len();
        Script {
            data,
            pos: 0,
            cuts: cuts.to_vec(),
            k: 0,
            eof: false,
            avail,
        }
    }
}

impl ByteSource for Script {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io {
        let left = self.avail - self.pos;
        if left == 0 {
            return if self.eof && self.avail == self.data.len() {
                Io::Eof
            } else {
                Io::Blocked
            };
        }
        let mut n = left.min(self.cuts[self.k % self.cuts.len()].max(1));
        self.k += 1;
        let mut done = 0;
        for v in iov {
            if n == 0 {
                break;
            }
            let m = n.min(v.iov_len);
            // SAFETY: test iovecs describe writable memory.
            unsafe { core::ptr::copy_nonoverlapping(self.data.as_ptr().add(self.pos), v.iov_base as *mut u8, m) };
            self.pos += m;
            done += m;
            n -= m;
        }
        Io::Done(done)
    }
}

#[derive(Debug, PartialEq)]
enum Ev {
    Placed(u32, Result<()>),
    Buffered(u64, Vec<u8>),
    Ctl(u8, u64),
}

/// A core: receives posted as (buffer, capacity); no receive → buffer
/// while `budget` lasts, else stall.
struct Core {
    recvs: VecDeque<(u32, Vec<u8>)>,
    done: Vec<(u32, Vec<u8>)>,
    inflight: Option<(u32, Vec<u8>)>,
    budget: usize,
    discard_tag: Option<u64>,
    evs: Vec<Ev>,
}

impl Core {
    fn new() -> Core {
        Core {
            recvs: VecDeque::new(),
            done: Vec::new(),
            inflight: None,
            budget: usize::MAX,
            discard_tag: None,
            evs: Vec::new(),
        }
    }
}

impl Delivery for Core {
    fn place(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr) -> Place {
        if Some(hdr.tag) == self.discard_tag {
            return Place::Discard;
        }
        if let Some((h, mut buf)) = self.recvs.pop_front() {
            let dst = IovList::single(buf.as_mut_ptr() as usize, buf.len());
            let take = (hdr.len as usize).min(buf.len());
            self.inflight = Some((h, buf));
            return Place::Into { handle: h, dst, take };
        }
        if (hdr.len as usize) <= self.budget {
            Place::Buffer
        } else {
            Place::Stall
        }
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        let (h, buf) = self.inflight.take().expect("a placement in flight");
        assert_eq!(h, handle);
        self.done.push((h, buf));
        self.evs.push(Ev::Placed(handle, result));
    }
    fn buffered(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.budget -= data.len();
        self.evs.push(Ev::Buffered(hdr.tag, data));
    }
    fn control(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr, _payload: &dyn PayloadIn) -> Disposition {
        self.evs.push(Ev::Ctl(hdr.op, hdr.msg_id));
        Disposition::Consumed
    }
    fn sent(&mut self, _msg_id: u64, _result: Result<()>) {
        unreachable!("a reader reports no sends")
    }
}

/// The source the reader names for every record here.
const PEER: Addr = Addr::Shm(7);

fn msg(tag: u64, payload: &[u8]) -> Vec<u8> {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = flag::TAGGED;
    h.tag = tag;
    h.len = payload.len() as u64;
    h.payload = payload.len() as u32;
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

fn ack(id: u64) -> Vec<u8> {
    let mut h = WireHdr::new(op::ACK);
    h.msg_id = id;
    h.to_bytes().to_vec()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Pumps until the script is drained (bounded).
fn run(r: &mut Reader, s: &mut Script, c: &mut Core, scratch_len: usize) -> Outcome {
    let mut scratch = vec![0u8; scratch_len];
    for _ in 0..100_000 {
        let o = r.pump(s, c, &PEER, &LIM, Stage::Established, &mut scratch, 7);
        match o {
            Outcome::Budget => continue,
            Outcome::Drained if s.pos < s.avail => continue,
            o => return o,
        }
    }
    panic!("reader did not finish")
}

#[test]
fn any_chunking_gives_the_same_records() {
    let a = pattern(1000, 1);
    let b = pattern(5, 2);
    let c = pattern(70_000, 3);
    let mut stream = msg(1, &a);
    stream.extend(ack(42));
    stream.extend(msg(2, &b));
    stream.extend(msg(3, &[]));
    stream.extend(msg(4, &c));
    for cuts in [
        vec![1],
        vec![2, 3],
        vec![63, 1, 65],
        vec![64],
        vec![7000],
        vec![1 << 20],
        vec![13, 999, 1],
    ] {
        let mut s = Script::new(stream.clone(), &cuts);
        let mut core = Core::new();
        // Receives for 1 (exact) and 4 (truncated to 100); 2 and 3 unexpected.
        core.recvs.push_back((11, vec![0; 1000]));
        let mut r = Reader::new();
        let mut scratch = vec![0u8; 4096];
        // #2 and #3 fit the budget; #4 stalls until its receive is posted.
        core.budget = 5;
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds < 200_000, "cuts {cuts:?}");
            match r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 5) {
                Outcome::Stalled => {
                    assert_eq!(core.evs.len(), 4, "cuts {cuts:?}");
                    assert!(core.recvs.is_empty());
                    core.recvs.push_back((14, vec![0; 100]));
                }
                Outcome::Budget => {}
                Outcome::Drained if s.pos < s.avail || r.mid_record() => {}
                Outcome::Drained => break,
                o => panic!("unexpected {o:?} with cuts {cuts:?}"),
            }
        }
        assert_eq!(
            core.evs,
            vec![
                Ev::Placed(11, Ok(())),
                Ev::Ctl(op::ACK, 42),
                Ev::Buffered(2, b.clone()),
                Ev::Buffered(3, vec![]),
                Ev::Placed(14, Ok(())),
            ],
            "cuts {cuts:?}"
        );
        assert_eq!(core.done[0].1, a);
        assert_eq!(core.done[1].1, c[..100].to_vec(), "truncated prefix");
    }
}

#[test]
fn truncation_drains_exactly_the_rest() {
    // A 10 000-byte message into a 10-byte receive, then a message that
    // must arrive intact (the stream stays in step). Tiny scratch.
    let big = pattern(10_000, 9);
    let next = pattern(300, 4);
    let mut stream = msg(1, &big);
    stream.extend(msg(2, &next));
    for cuts in [vec![1], vec![17, 64], vec![100_000]] {
        let mut s = Script::new(stream.clone(), &cuts);
        let mut core = Core::new();
        core.recvs.push_back((1, vec![0; 10]));
        core.recvs.push_back((2, vec![0; 300]));
        let mut r = Reader::new();
        assert_eq!(run(&mut r, &mut s, &mut core, 33), Outcome::Drained);
        assert_eq!(core.done[0].1, big[..10].to_vec());
        assert_eq!(core.done[1].1, next);
        assert!(!r.mid_record());
    }
}

/// A receive posted while an unexpected payload is still arriving takes
/// that message (not the one after it): arrival order is kept.
#[test]
fn receive_posted_during_an_unexpected_payload_gets_it() {
    let first = pattern(3000, 1);
    let second = pattern(10, 2);
    let mut stream = msg(1, &first);
    stream.extend(msg(2, &second));
    let mut s = Script::new(stream, &[1000]);
    s.avail = 64 + 1000; // header and part of the payload so far
    let mut core = Core::new();
    let mut r = Reader::new();
    let mut scratch = vec![0u8; 64];
    assert_eq!(
        r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 9),
        Outcome::Drained
    );
    assert!(core.evs.is_empty());
    core.recvs.push_back((3, vec![0; 3000]));
    s.avail = s.data.len();
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(core.evs, vec![Ev::Placed(3, Ok(())), Ev::Buffered(2, second.clone())]);
    assert_eq!(core.done[0].1, first);
    // No room at all: the message waits (header read, payload not).
    let mut s = Script::new(msg(5, &first), &[100_000]);
    let mut core = Core::new();
    core.budget = 2000;
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Stalled);
    core.budget = 3000;
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(core.evs, vec![Ev::Buffered(5, first)]);
}

#[test]
fn discard_placement_skips_payload() {
    let mut stream = msg(5, &pattern(5000, 1));
    stream.extend(msg(6, &pattern(10, 2)));
    let mut s = Script::new(stream, &[999]);
    let mut core = Core::new();
    core.discard_tag = Some(5);
    let mut r = Reader::new();
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(core.evs, vec![Ev::Buffered(6, pattern(10, 2))]);
}

/// Small records arriving together cost one read per read-ahead
/// buffer, not two per record; a stall keeps what was read ahead, and
/// the records behind it come out in order afterwards.
#[test]
fn read_ahead_batches_small_records() {
    let mut stream = Vec::new();
    for i in 0..100u64 {
        stream.extend(msg(i, &pattern(64, i as u8)));
    }
    let mut s = Script::new(stream.clone(), &[1 << 20]);
    let mut core = Core::new();
    let mut r = Reader::new();
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(core.evs.len(), 100);
    for (i, e) in core.evs.iter().enumerate() {
        assert_eq!(*e, Ev::Buffered(i as u64, pattern(64, i as u8)));
    }
    // 100 x 128 bytes: about 12800 / (64 + READ_AHEAD) reads (+ the
    // one that finds the socket empty), far below 200.
    assert!(s.k <= 12800 / READ_AHEAD + 3, "{} reads", s.k);
    // Stall in the middle: read-ahead bytes wait, nothing is lost.
    let mut s = Script::new(stream, &[1 << 20]);
    let mut core = Core::new();
    core.budget = 64 * 10;
    let mut r = Reader::new();
    let mut scratch = vec![0u8; 64];
    assert_eq!(
        r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 100),
        Outcome::Stalled
    );
    assert_eq!(core.evs.len(), 10);
    assert!(r.mid_record());
    core.budget = usize::MAX;
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(core.evs.len(), 100);
    assert_eq!(core.evs[99], Ev::Buffered(99, pattern(64, 99)));
    // abort drops read-ahead bytes.
    let mut s = Script::new(msg(1, &pattern(10, 1)).repeat(3), &[1 << 20]);
    let mut core = Core::new();
    core.budget = 10;
    let mut r = Reader::new();
    assert_eq!(
        r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 100),
        Outcome::Stalled
    );
    r.abort(&mut core, Error::CONNRESET);
    assert!(!r.mid_record());
}

#[test]
fn stall_then_resume_keeps_order() {
    let mut stream = msg(1, &pattern(100, 1));
    stream.extend(msg(2, &pattern(100, 2)));
    stream.extend(msg(3, &pattern(100, 3)));
    let mut s = Script::new(stream, &[50]);
    let mut core = Core::new();
    core.budget = 150; // room for one unexpected message
    let mut r = Reader::new();
    let mut scratch = vec![0u8; 64];
    let mut o;
    loop {
        o = r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 3);
        if o != Outcome::Budget && !(o == Outcome::Drained && s.pos < s.avail) {
            break;
        }
    }
    assert_eq!(o, Outcome::Stalled);
    assert_eq!(core.evs, vec![Ev::Buffered(1, pattern(100, 1))]);
    assert!(r.waiting_for_core());
    // Still no room: stays stalled without reading.
    let pos = s.pos;
    assert_eq!(
        r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 3),
        Outcome::Stalled
    );
    assert_eq!(s.pos, pos);
    // A receive is posted: #2 goes there, #3 is buffered.
    core.recvs.push_back((7, vec![0; 100]));
    core.budget = 1000;
    assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Drained);
    assert_eq!(
        core.evs,
        vec![
            Ev::Buffered(1, pattern(100, 1)),
            Ev::Placed(7, Ok(())),
            Ev::Buffered(3, pattern(100, 3))
        ]
    );
    assert_eq!(core.done[0].1, pattern(100, 2));
}

#[test]
fn malformed_headers_break_the_stream() {
    let good = msg(1, b"abc");
    let cases: Vec<(Vec<u8>, Broken)> = vec![
        (
            {
                let mut v = good.clone();
                v[0] = 0;
                v
            },
            Broken::Bad(BadRecord::Magic),
        ),
        (
            {
                let mut v = good.clone();
                v[2] = 9;
                v
            },
            Broken::Bad(BadRecord::Version),
        ),
        (
            {
                let mut v = good.clone();
                v[3] = 200;
                v
            },
            Broken::Bad(BadRecord::Op),
        ),
        (
            {
                // A garbage length far above max_msg: refused before any
                // allocation.
                let mut h = WireHdr::new(op::EAGER);
                h.len = u32::MAX as u64;
                h.payload = u32::MAX;
                h.to_bytes().to_vec()
            },
            Broken::Bad(BadRecord::Length),
        ),
        (
            {
                // A control record may not carry a payload (CTS).
                let mut h = WireHdr::new(op::CTS);
                h.msg_id = 1;
                h.payload = 8;
                h.to_bytes().to_vec()
            },
            Broken::Bad(BadRecord::Length),
        ),
        (
            {
                // A HELLO after the handshake.
                let mut h = WireHdr::new(op::HELLO);
                h.payload = 0;
                h.to_bytes().to_vec()
            },
            Broken::Protocol,
        ),
        (
            {
                // shm's compact eager form on a stream.
                let mut h = WireHdr::new(op::EAGER);
                h.flags = flag::COMPACT;
                h.len = 3;
                h.payload = 3;
                let mut v = h.to_bytes().to_vec();
                v.extend_from_slice(b"abc");
                v
            },
            Broken::Protocol,
        ),
    ];
    for (bytes, want) in cases {
        for cuts in [vec![1], vec![1000]] {
            let mut s = Script::new(bytes.clone(), &cuts);
            let mut core = Core::new();
            let mut r = Reader::new();
            assert_eq!(run(&mut r, &mut s, &mut core, 64), Outcome::Broken(want));
            assert!(core.evs.is_empty());
        }
    }
    // Data before the handshake is a protocol error too.
    let mut s = Script::new(good, &[64]);
    let mut r = Reader::new();
    let mut scratch = [0u8; 8];
    assert_eq!(
        r.pump(&mut s, &mut Core::new(), &PEER, &LIM, Stage::Handshake, &mut scratch, 9),
        Outcome::Broken(Broken::Protocol)
    );
}

#[test]
fn end_of_stream_mid_record_fails_the_placement_once() {
    let payload = pattern(1000, 5);
    let stream = msg(1, &payload);
    for cut_at in [0usize, 1, 63, 64, 65, 500, 1063] {
        let mut s = Script::new(stream[..cut_at].to_vec(), &[7]);
        s.eof = true;
        let mut core = Core::new();
        core.recvs.push_back((9, vec![0; 1000]));
        let mut r = Reader::new();
        let mut o = Outcome::Drained;
        for _ in 0..10_000 {
            o = run(&mut r, &mut s, &mut core, 64);
            if o != Outcome::Drained {
                break;
            }
        }
        if cut_at == 0 {
            assert_eq!(o, Outcome::Eof);
        } else {
            assert_eq!(o, Outcome::Broken(Broken::Truncated), "cut at {cut_at}");
        }
        r.abort(&mut core, Error::CONNRESET);
        r.abort(&mut core, Error::CONNRESET);
        let fails = core.evs.iter().filter(|e| matches!(e, Ev::Placed(_, Err(_)))).count();
        assert_eq!(fails, usize::from(cut_at >= 64), "cut at {cut_at}");
    }
}

#[test]
fn link_records_go_to_the_port() {
    let (h, p) = crate::transport::tcp::hello::encode(
        crate::transport::tcp::hello::Kind::Request,
        &"127.0.0.1:7".parse().unwrap(),
        5,
    );
    let mut stream = h.to_vec();
    stream.extend(&p);
    stream.extend(WireHdr::new(op::BYE).to_bytes());
    let mut s = Script::new(stream, &[1]);
    let mut r = Reader::new();
    let mut core = Core::new();
    let mut scratch = [0u8; 8];
    let mut got = vec![];
    for _ in 0..1000 {
        match r.pump(
            &mut s,
            &mut core,
            &PEER,
            &LIM,
            if got.is_empty() {
                Stage::Handshake
            } else {
                Stage::Established
            },
            &mut scratch,
            4,
        ) {
            Outcome::Link(h) => got.push((h.op, r.link_payload().to_vec())),
            Outcome::Drained if s.pos == s.avail => break,
            _ => {}
        }
    }
    assert_eq!(got, vec![(op::HELLO, p), (op::BYE, vec![])]);
}

/// A sink that takes at most `cap` bytes per call (then Blocked once).
struct Trickle {
    out: Vec<u8>,
    cap: usize,
    block_next: bool,
}

impl ByteSink for Trickle {
    unsafe fn write(&mut self, iov: &[libc::iovec]) -> Io {
        if self.block_next {
            self.block_next = false;
            return Io::Blocked;
        }
        self.block_next = true;
        let mut n = 0;
        for v in iov {
            let m = (self.cap - n).min(v.iov_len);
            // SAFETY: test iovecs describe readable memory.
            self.out
                .extend_from_slice(unsafe { core::slice::from_raw_parts(v.iov_base as *const u8, m) });
            n += m;
            if n == self.cap {
                break;
            }
        }
        Io::Done(n)
    }
}

#[test]
fn write_queue_survives_partial_writes_and_reports_in_order() {
    let mut app = pattern(5000, 7);
    let split = IovList::single(app.as_mut_ptr() as usize, 2000);
    let mut two = split;
    two.push(app.as_mut_ptr() as usize + 2000, 3000);
    let recs: Vec<(WireHdr, Body, Option<u64>)> = vec![
        (WireHdr::new(op::EAGER), Body::Iov(two), Some(1)),
        (WireHdr::new(op::ACK), Body::None, None),
        (WireHdr::new(op::EAGER), Body::Owned(vec![1, 2, 3]), Some(3)),
    ];
    let mut expect = Vec::new();
    let mut q = WriteQueue::default();
    for (h, b, n) in recs {
        expect.extend_from_slice(&h.to_bytes());
        match &b {
            Body::Owned(v) => expect.extend_from_slice(v),
            Body::Iov(_) => expect.extend_from_slice(&app),
            Body::None => {}
        }
        let mut r = OutRecord::new(h.to_bytes(), b);
        r.notify = n;
        q.push(r);
    }
    assert_eq!(q.unsent(), expect.len());
    for cap in [1usize, 7, 64, 100_000] {
        let mut q2 = WriteQueue::default();
        let mut r = OutRecord::new(WireHdr::new(op::EAGER).to_bytes(), Body::Iov(two));
        r.notify = Some(9);
        q2.push(r);
        let mut t = Trickle {
            out: vec![],
            cap,
            block_next: false,
        };
        let mut sent = vec![];
        let mut rounds = 0;
        while !q2.flush(&mut t, &mut sent).unwrap() {
            rounds += 1;
            assert!(rounds < 100_000);
        }
        assert_eq!(sent, vec![9]);
        assert_eq!(&t.out[64..], &app[..]);
    }
    let mut t = Trickle {
        out: vec![],
        cap: 10,
        block_next: false,
    };
    let mut sent = vec![];
    while !q.flush(&mut t, &mut sent).unwrap() {}
    assert_eq!(t.out, expect);
    assert_eq!(sent, vec![1, 3]);
    assert_eq!(q.unsent(), 0);
}

#[test]
fn cork_holds_only_small_records_behind_the_first_of_a_burst() {
    let mut c = Cork {
        burst: false,
        sleepers: false,
        implicit: true,
    };
    assert!(!c.defer(64, 128), "the first after a pass goes at once");
    assert!(c.defer(64, 256), "the ones behind it wait");
    assert!(!c.defer(CORK_RECORD_MAX + 1, 6000), "a large one writes the queue");
    assert!(!c.defer(64, CORK_BYTES), "so does a full burst");
    c.end_burst();
    assert!(!c.defer(64, 128), "a pass ends the burst");
    c.set_sleepers(1);
    assert!(!c.defer(64, 256), "nothing waits while somebody sleeps");
    c.set_sleepers(0);
    assert!(c.defer(64, 384));

    // FI_RUSTFAB_TCP_COALESCE=0: only FI_MORE holds a record.
    let mut c = Cork {
        burst: false,
        sleepers: false,
        implicit: false,
    };
    assert!(!c.defer(64, 128));
    assert!(!c.defer(64, 256));
    c.more();
    assert!(c.defer(64, 384), "FI_MORE holds it");
    assert!(!c.defer(64, 512), "the last of the batch writes them all");
}

#[test]
fn make_owned_copies_the_application_buffer() {
    let mut app = pattern(100, 1);
    let mut r = OutRecord::new(
        WireHdr::new(op::EAGER).to_bytes(),
        Body::Iov(IovList::single(app.as_mut_ptr() as usize, 100)),
    );
    r.make_owned();
    let copy = app.clone();
    app.iter_mut().for_each(|b| *b = 0);
    let mut q = WriteQueue::default();
    q.push(r);
    let mut t = Trickle {
        out: vec![],
        cap: 1 << 20,
        block_next: false,
    };
    assert!(q.flush(&mut t, &mut vec![]).unwrap());
    assert_eq!(&t.out[64..], &copy[..]);
}

/// A source that records how many buffers each read was given.
struct Buffers<'a> {
    s: &'a mut Script,
    per_read: Vec<usize>,
}

impl ByteSource for Buffers<'_> {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io {
        self.per_read.push(iov.len());
        // SAFETY: forwarded contract.
        unsafe { self.s.read(iov) }
    }
}

/// Waiting for a header (every empty poll of an idle stream) is a read
/// into one buffer, which the socket layer makes a plain `recv`; a 1 B
/// and a 4 KiB record (each with its header) arrive in one read each,
/// into a posted receive, and that read comes back short, so no empty
/// read follows it before the record is handed over.
#[test]
fn a_header_is_read_into_one_buffer_with_what_follows() {
    for n in [1usize, 4096] {
        let payload = pattern(n, 9);
        let mut s = Script::new(msg(3, &payload), &[1 << 20]);
        let mut core = Core::new();
        core.recvs.push_back((1, vec![0u8; n]));
        let mut r = Reader::new();
        let mut src = Buffers {
            s: &mut s,
            per_read: Vec::new(),
        };
        let mut scratch = [0u8; 64];
        let o = r.pump(&mut src, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 8);
        assert_eq!(o, Outcome::Drained);
        assert_eq!(core.evs, vec![Ev::Placed(1, Ok(()))]);
        assert_eq!(core.done[0].1, payload);
        assert_eq!(src.per_read, vec![1], "{n} B: buffers per read");
        // The empty stream is then polled with one buffer too.
        let o = r.pump(&mut src, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 8);
        assert_eq!(o, Outcome::Drained);
        assert_eq!(src.per_read, vec![1, 1], "{n} B: buffers per read");
    }
}

/// A source that gives one outcome and then asserts it is not read again.
struct Once(Option<Io>);

impl ByteSource for Once {
    unsafe fn read(&mut self, _iov: &[libc::iovec]) -> Io {
        self.0.take().expect("read once only")
    }
}

/// An idle stream's poll reads into the read-ahead buffer alone: nothing
/// there costs that one read and no pump; a record that came is then
/// handed over by the pump without another read (the poll's read was
/// short); an end of stream or a failure the poll found is what the pump
/// reports, without reading again.
#[test]
fn an_idle_stream_is_polled_with_one_read_and_what_it_finds_is_kept() {
    let mut r = Reader::new();
    let mut core = Core::new();
    let mut scratch = [0u8; 64];
    // Nothing arrived.
    let mut s = Script::new(Vec::new(), &[1 << 20]);
    let mut src = Buffers {
        s: &mut s,
        per_read: Vec::new(),
    };
    assert_eq!(r.poll(&mut src), None);
    assert_eq!(src.per_read, vec![1]);
    // A record arrived: the poll brings it, the pump reads nothing more.
    let payload = pattern(100, 4);
    let rec = msg(5, &payload);
    let mut s = Script::new(rec.clone(), &[1 << 20]);
    let mut src = Buffers {
        s: &mut s,
        per_read: Vec::new(),
    };
    assert_eq!(r.poll(&mut src), Some(rec.len()));
    let o = r.pump(&mut src, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 8);
    assert_eq!(o, Outcome::Drained);
    assert_eq!(core.evs, vec![Ev::Buffered(5, payload)]);
    assert_eq!(src.per_read, vec![1], "the pump read again");
    // Mid-record the poll reads nothing and sends the caller to the pump.
    let half = msg(6, &pattern(10, 1));
    let mut s = Script::new(half[..20].to_vec(), &[1 << 20]);
    assert_eq!(r.poll(&mut s), Some(20));
    let o = r.pump(&mut s, &mut core, &PEER, &LIM, Stage::Established, &mut scratch, 8);
    assert_eq!(o, Outcome::Drained);
    assert_eq!(r.poll(&mut Once(None)), Some(0));
    // The end of the stream and a failure are kept for the pump.
    for (io, want) in [
        (Io::Eof, Outcome::Eof),
        (
            Io::Failed(Error::CONNRESET),
            Outcome::Broken(Broken::Io(Error::CONNRESET)),
        ),
    ] {
        let mut r = Reader::new();
        assert_eq!(r.poll(&mut Once(Some(io))), Some(0));
        let o = r.pump(
            &mut Once(None),
            &mut core,
            &PEER,
            &LIM,
            Stage::Established,
            &mut scratch,
            8,
        );
        assert_eq!(o, want);
    }
}
