//! Fuzz harness bodies (docs/testing.md). Each `pub fn <target>(data)`
//! takes arbitrary bytes, drives one decoder of peer- or application-
//! controlled input through the provider's own code, and panics when a
//! property fails. The same bodies run
//! * from the cargo-fuzz targets in `fuzz/` (nightly; `make fuzz`), built
//!   with the cargo feature `fuzzing` (which is all that compiles this
//!   module outside `cargo test`), and
//! * as bounded property tests on stable in `cargo test`
//!   (`fuzzing::tests`, proptest inputs built from real frames, then
//!   mutated), and over the committed seed corpus `fuzz/corpus/<target>/`.
//!
//! The module is the top of the layering (`tests/layering.rs`): it may use
//! every layer, nothing uses it. It is never compiled into the provider.

use crate::abi::*;
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::av::{check_dest, AvFormat, AvState};
use crate::core::domain::TransportKind;
use crate::provider::getinfo::{getinfo, Query, TransportChoice};
use crate::transport::addr::Addr;
use crate::transport::connected::cm;
use crate::transport::iov::IovList;
use crate::transport::proto::{compact_len, flag, op, Limits, WireHdr, HDR_LEN, IOV_ENTRY, MAGIC};
use crate::transport::shm::ring::{self, cells_for, Ring, CELL};
use crate::transport::shm::sync;
use crate::transport::tcp::framing::{Broken, ByteSource, Outcome, Reader, Stage, CTL_MAX};
use crate::transport::tcp::{hello, TcpPort};
use crate::transport::{Disposition, Place};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A harness body.
pub type Body = fn(&[u8]);

/// The fuzz targets: name (the `fuzz/fuzz_targets/<name>.rs` file and the
/// corpus directory) and body.
pub const TARGETS: &[(&str, Body)] = &[
    ("tcp_reader", tcp_reader),
    ("records", records),
    ("shm_ring", shm_ring),
    ("getinfo_hints", getinfo_hints),
    ("av_insert", av_insert),
    ("tcp_live", tcp_live),
];

/// Reads fuzzer bytes as values; past the end everything is zero.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data, pos: 0 }
    }
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }
    fn u32(&mut self) -> u32 {
        self.u64() as u32
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let s = self.pos.min(self.data.len());
        let e = (s + n).min(self.data.len());
        self.pos += n;
        &self.data[s..e]
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[s..]
    }
    /// Mostly one of `choices`; sometimes 0 or a raw value.
    fn pick(&mut self, choices: &[u64]) -> u64 {
        match self.u8() {
            i @ 0..=223 => choices[i as usize % choices.len()],
            224..=239 => 0,
            _ => self.u64(),
        }
    }
}

// ---------------------------------------------------------------------------
// tcp_reader: the TCP stream reader under any chunking of any bytes
// ---------------------------------------------------------------------------

/// Limits of the reader targets: small enough that a payload allocation
/// stays cheap, large enough for real records.
const READER_LIM: Limits = Limits {
    max_payload: 1 << 16,
    max_chunk: 1 << 16,
    max_iov: 8,
};

/// What the reader handed the core (or the connection layer).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    /// Payload placed into a receive: the bytes that reached it, and the
    /// completion status.
    Placed(WireHdr, Vec<u8>, bool),
    Buffered(WireHdr, Vec<u8>),
    Ctl(WireHdr, Vec<u8>),
    Link(WireHdr, Vec<u8>),
}

/// Where the core puts a record: a pure function of its header, so that
/// the expected events follow from the record list alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Choice {
    Into(usize),
    Buffer,
    Discard,
}

fn choice(h: &WireHdr) -> Choice {
    match h.tag % 4 {
        0 => Choice::Into((h.data % 301) as usize),
        1 => Choice::Buffer,
        2 => Choice::Discard,
        _ => Choice::Into(1 << 17),
    }
}

/// What the core says when a buffered payload has fully arrived and the
/// reader asks again: some records find a receive posted meanwhile.
fn choice_when_staged(h: &WireHdr) -> Choice {
    if h.tag & 8 != 0 {
        Choice::Into((h.data % 301) as usize)
    } else {
        Choice::Buffer
    }
}

/// Whether the core answers Stall once before taking this record.
fn stalls(h: &WireHdr) -> bool {
    h.tag & 4 != 0
}

/// A core that places by [`choice`], stalls once where [`stalls`] says and
/// records every event.
struct FuzzCore {
    evs: Vec<Ev>,
    /// The receive buffer of the placement in flight.
    inflight: Option<(u32, WireHdr, Vec<u8>, usize)>,
    next_handle: u32,
    stalled: bool,
    /// The record's payload is being buffered (the next place() is the
    /// reader asking again once it is whole).
    buffering: bool,
}

impl FuzzCore {
    fn new() -> FuzzCore {
        FuzzCore {
            evs: Vec::new(),
            inflight: None,
            next_handle: 1,
            stalled: false,
            buffering: false,
        }
    }
    fn stall_once(&mut self, h: &WireHdr) -> bool {
        if stalls(h) && !self.stalled {
            self.stalled = true;
            return true;
        }
        self.stalled = false;
        false
    }
}

impl crate::transport::Delivery for FuzzCore {
    fn place(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr) -> Place {
        assert!(self.inflight.is_none(), "place() while a placement is in flight");
        if self.stall_once(hdr) {
            return Place::Stall;
        }
        let ch = if std::mem::take(&mut self.buffering) {
            choice_when_staged(hdr)
        } else {
            choice(hdr)
        };
        match ch {
            Choice::Into(cap) => {
                let cap = cap.min(hdr.payload as usize);
                let mut buf = vec![0u8; cap];
                let dst = IovList::single(buf.as_mut_ptr() as usize, buf.len());
                let handle = self.next_handle;
                self.next_handle += 1;
                self.inflight = Some((handle, *hdr, buf, cap));
                Place::Into { handle, dst, take: cap }
            }
            Choice::Buffer => {
                self.buffering = true;
                Place::Buffer
            }
            Choice::Discard => Place::Discard,
        }
    }
    fn placed(&mut self, handle: u32, result: crate::base::error::Result<()>) {
        let (h, hdr, buf, _) = self.inflight.take().expect("placed() without a placement");
        assert_eq!(h, handle, "placed() for another handle");
        self.evs.push(Ev::Placed(hdr, buf, result.is_ok()));
    }
    fn buffered(&mut self, _src: &Addr, _src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.buffering = false;
        assert_eq!(data.len(), hdr.payload as usize, "buffered payload of the wrong length");
        self.evs.push(Ev::Buffered(*hdr, data));
    }
    fn control(
        &mut self,
        _src: &Addr,
        _src_pid: i32,
        hdr: &WireHdr,
        payload: &dyn crate::transport::PayloadIn,
    ) -> Disposition {
        if self.stall_once(hdr) {
            return Disposition::Stall;
        }
        self.evs.push(Ev::Ctl(*hdr, payload.to_vec()));
        Disposition::Consumed
    }
    fn sent(&mut self, _msg_id: u64, _result: crate::base::error::Result<()>) {
        unreachable!("a reader reports no sends")
    }
}

/// A stream handing out its bytes in pieces of the cut sizes (cycled),
/// with a Blocked now and then, then end of stream.
struct Chunked<'a> {
    data: &'a [u8],
    pos: usize,
    cuts: Vec<usize>,
    k: usize,
    block_every: usize,
}

impl ByteSource for Chunked<'_> {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> crate::sys::net::Io {
        use crate::sys::net::Io;
        self.k += 1;
        if self.block_every > 0 && self.k.is_multiple_of(self.block_every) {
            return Io::Blocked;
        }
        if self.pos == self.data.len() {
            return Io::Eof;
        }
        let mut n = (self.data.len() - self.pos).min(self.cuts[self.k % self.cuts.len()]);
        let mut done = 0;
        for v in iov {
            if n == 0 {
                break;
            }
            let m = n.min(v.iov_len);
            // SAFETY: the reader's iovecs describe writable memory of
            // `iov_len` bytes (the ByteSource contract); the source range
            // is inside `data`.
            unsafe { core::ptr::copy_nonoverlapping(self.data.as_ptr().add(self.pos), v.iov_base as *mut u8, m) };
            self.pos += m;
            done += m;
            n -= m;
        }
        Io::Done(done)
    }
}

/// How a whole stream ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Eof,
    Broken(Broken),
}

/// Runs the reader over `stream` cut by `cuts` until it ends; the events
/// and how it ended. `start` is the stage of a new connection (a link
/// record moves a handshaking stream to established, as the port does).
fn run_reader(stream: &[u8], cuts: &[usize], block_every: usize, start: Stage, max_reads: usize) -> (Vec<Ev>, End) {
    let mut src = Chunked {
        data: stream,
        pos: 0,
        cuts: cuts.iter().map(|&c| c.max(1)).collect(),
        k: 0,
        block_every,
    };
    let mut core = FuzzCore::new();
    let mut r = Reader::new();
    let mut scratch = vec![0u8; 1 + cuts.first().copied().unwrap_or(0) % 200];
    let mut stage = start;
    // Every call either moves at least one byte or one record, or returns
    // Blocked/Stalled (each at most every other call here): the bound is a
    // hang detector, far above what any input needs.
    let bound = 8 * stream.len() + 10_000;
    for _ in 0..bound {
        match r.pump(
            &mut src,
            &mut core,
            &crate::transport::tcp::conn::NullSink::PEER,
            &READER_LIM,
            stage,
            &mut scratch,
            max_reads,
        ) {
            Outcome::Drained | Outcome::Budget | Outcome::Stalled => {}
            Outcome::Link(h) => {
                core.evs.push(Ev::Link(h, r.link_payload().to_vec()));
                if h.op == op::HELLO {
                    stage = Stage::Established;
                }
            }
            Outcome::Eof => return (core.evs, End::Eof),
            Outcome::Broken(b) => {
                r.abort(&mut core, crate::base::error::Error::CONNRESET);
                r.abort(&mut core, crate::base::error::Error::CONNRESET);
                return (core.evs, End::Broken(b));
            }
        }
    }
    panic!("the reader made no progress: {} bytes, cuts {cuts:?}", stream.len());
}

/// The records of a stream decoded in one piece, by the rules of
/// docs/protocol.md written out again: the events a correct reader must
/// produce under the [`FuzzCore`] policy, and how the stream ends.
fn reference_decode(stream: &[u8], start: Stage) -> (Vec<Ev>, End) {
    let mut evs = Vec::new();
    let mut at = 0;
    let mut established = start == Stage::Established;
    loop {
        let left = stream.len() - at;
        if left == 0 {
            return (evs, End::Eof);
        }
        if left < HDR_LEN {
            return (evs, End::Broken(Broken::Truncated));
        }
        let hdr = WireHdr::from_bytes(stream[at..at + HDR_LEN].try_into().expect("64 bytes"));
        if let Err(b) = hdr.check(&READER_LIM) {
            return (evs, End::Broken(Broken::Bad(b)));
        }
        let allowed = match hdr.op {
            op::HELLO => !established,
            op::BYE => true,
            _ => established,
        };
        // shm's compact eager form is never valid on a stream.
        if !allowed || hdr.flags & flag::COMPACT != 0 {
            return (evs, End::Broken(Broken::Protocol));
        }
        let n = hdr.payload as usize;
        let data = &stream[at + HDR_LEN..];
        let whole = data.len() >= n;
        match hdr.op {
            // Messages, rendezvous chunks, the RMA chunks (WRITE,
            // READ_RESP) and the atomic requests and answers (staged by the
            // target, fetched values) are placed by the core; the rest are
            // control.
            op::EAGER | op::DATA | op::WRITE | op::READ_RESP | op::ATOMIC | op::ATOMIC_RESP => match choice(&hdr) {
                Choice::Into(cap) => {
                    let cap = cap.min(n);
                    let got = data.len().min(cap);
                    let mut buf = vec![0u8; cap];
                    buf[..got].copy_from_slice(&data[..got]);
                    evs.push(Ev::Placed(hdr, buf, whole));
                }
                Choice::Buffer if whole => match choice_when_staged(&hdr) {
                    Choice::Into(cap) => {
                        let cap = cap.min(n);
                        evs.push(Ev::Placed(hdr, data[..cap].to_vec(), true));
                    }
                    _ => evs.push(Ev::Buffered(hdr, data[..n].to_vec())),
                },
                _ => {}
            },
            _ if n > CTL_MAX => {
                return (
                    evs,
                    End::Broken(Broken::Bad(crate::transport::proto::BadRecord::Length)),
                )
            }
            op::HELLO | op::BYE if whole => {
                evs.push(Ev::Link(hdr, data[..n].to_vec()));
                if hdr.op == op::HELLO {
                    established = true;
                }
            }
            _ if whole => evs.push(Ev::Ctl(hdr, data[..n].to_vec())),
            _ => {}
        }
        if !whole {
            return (evs, End::Broken(Broken::Truncated));
        }
        at += HDR_LEN + n;
    }
}

/// The TCP stream reader (`transport/tcp/framing.rs`, `Reader::pump`) over
/// arbitrary bytes cut into arbitrary pieces. Properties: no panic, no
/// hang; the events (placements with the bytes that reached each receive
/// buffer, buffered payloads, control and link records) and the end of the
/// stream equal those of the one-piece reference decode, whatever the
/// cuts, read budget and interleaved EAGAINs.
///
/// Input: a control byte (bit 0: start in the handshake stage; bits 1-3:
/// reads per call; bits 4-7: n > 0, an EAGAIN every n+1 reads), four cut sizes,
/// then the stream.
pub fn tcp_reader(data: &[u8]) {
    let mut c = Cursor::new(data);
    let ctl = c.u8();
    let cuts: Vec<usize> = (0..4)
        .map(|i| {
            let b = c.u8() as usize;
            // Mostly small pieces, sometimes whole header+payload runs.
            if i == 3 && b > 200 {
                b * 64
            } else {
                b % 97 + 1
            }
        })
        .collect();
    let stream = c.rest();
    let start = if ctl & 1 != 0 {
        Stage::Handshake
    } else {
        Stage::Established
    };
    let max_reads = 1 + ((ctl >> 1) & 7) as usize;
    // 0: never; else every 2nd .. 16th read.
    let block_every = match (ctl >> 4) as usize {
        0 => 0,
        n => n + 1,
    };
    let want = reference_decode(stream, start);
    let got = run_reader(stream, &cuts, block_every, start, max_reads);
    assert_eq!(got, want, "reader != reference decode (cuts {cuts:?}, ctl {ctl:#x})");
    // The same stream in one piece gives the same again.
    let whole = run_reader(stream, &[usize::MAX / 2], 0, start, 64);
    assert_eq!(whole, want, "one-piece reader != reference decode");
}

// ---------------------------------------------------------------------------
// records: header, HELLO, CM, rendezvous and shm doorbell decoders
// ---------------------------------------------------------------------------

// Chunks (DATA, WRITE, READ_RESP) may be larger than eager payloads (tcp).
const RECORD_LIM: Limits = Limits {
    max_payload: crate::transport::shm::EAGER_MAX,
    max_chunk: crate::transport::tcp::CHUNK_MAX,
    max_iov: 8,
};

/// The record decoders over arbitrary bytes: the first 64 are a header, the
/// rest its payload. Properties: header bytes round-trip; an accepted
/// header's lengths are consistent with its op and within the limits (so
/// no later code reads past a buffer); an accepted HELLO or CM record has
/// exactly the payload length it claims and encodes back to the same
/// record (CM: byte for byte; HELLO: to a record that parses the same);
/// an accepted RTS table has `aux` entries covering the message; the shm
/// doorbell's "who I am" datagram parses only at its exact length and
/// encodes back to the same bytes; a datagram endpoint's UDP datagram is
/// accepted only as an EAGER record with exactly its payload.
pub fn records(data: &[u8]) {
    let mut hb = [0u8; HDR_LEN];
    let n = data.len().min(HDR_LEN);
    hb[..n].copy_from_slice(&data[..n]);
    let payload = &data[n..];
    let h = WireHdr::from_bytes(&hb);
    assert_eq!(h.to_bytes(), hb, "header bytes do not round-trip");
    let ok = h.check(&RECORD_LIM).is_ok();
    if ok {
        let p = h.payload as usize;
        let len_ok = match h.op {
            op::EAGER => p as u64 == h.len && p <= RECORD_LIM.max_payload,
            op::RTS => {
                (1..=RECORD_LIM.max_iov).contains(&(h.aux as usize))
                    && p == h.aux as usize * IOV_ENTRY
                    && h.len > 0
                    && h.offset <= h.len
            }
            op::CTS if h.flags & flag::SPLIT != 0 => {
                (1..=crate::transport::proto::SPLIT_IOV_MAX as u64).contains(&h.reserved)
                    && p as u64 == h.reserved * IOV_ENTRY as u64
                    && h.offset < h.len
            }
            op::ACK | op::CTS | op::BYE | op::PUSHED => p == 0,
            op::DATA => p <= RECORD_LIM.max_chunk && h.offset.checked_add(p as u64).is_some_and(|e| e <= h.len),
            op::HELLO => p <= CTL_MAX,
            // RMA (docs/protocol.md, docs/rma.md): a chunk lies inside its
            // segment; a pull request carries its (address, length) table,
            // `reserved` entries, required with CMA_OK and only then.
            op::WRITE | op::READ_RESP => {
                p <= RECORD_LIM.max_chunk && h.reserved.checked_add(p as u64).is_some_and(|e| e <= h.len)
            }
            op::WRITE_REQ | op::READ_REQ => {
                let cma = h.flags & flag::CMA_OK != 0;
                let table = h.reserved <= RECORD_LIM.max_iov as u64 && p as u64 == h.reserved * IOV_ENTRY as u64;
                table
                    && if h.op == op::WRITE_REQ {
                        cma && h.reserved >= 1 && h.len > 0
                    } else {
                        (h.reserved >= 1) == cma
                    }
            }
            op::RMA_ACK => p == 0,
            // Atomics (docs/rma.md): the payload is exactly the operand
            // (none for FI_ATOMIC_READ) plus, for compare, the compare
            // values; an answer carries nothing or the whole segment.
            op::ATOMIC_RESP => p <= RECORD_LIM.max_payload && (p == 0 || p as u64 == h.len),
            op::ATOMIC => {
                let (kind, aop) = (h.reserved >> 16, h.reserved & 0xff);
                let operand = if aop == 10 { 0 } else { h.len as u128 };
                let want = match kind {
                    0 | 1 => operand,
                    2 => h.len as u128 + operand,
                    _ => u128::MAX,
                };
                p <= RECORD_LIM.max_payload && h.reserved >> 24 == 0 && p as u128 == want
            }
            o => panic!("check() accepted op {o}"),
        };
        assert!(len_ok, "check() accepted inconsistent lengths: {h:?}");
        assert!(h.flags & !flag::ALL == 0 && h.magic == crate::transport::proto::MAGIC);
    }
    // The same bytes as one UDP datagram of a datagram endpoint
    // (transport/udp/framing.rs): accepted only as an EAGER record whose
    // payload is exactly the bytes after its header and within one
    // datagram; the same bytes reported longer by the kernel (cut short)
    // never are.
    {
        use crate::transport::udp::framing;
        if let Ok((u, range)) = framing::parse(data, data.len()) {
            assert!(data.len() >= HDR_LEN && u == h && u.op == op::EAGER);
            assert_eq!(range, HDR_LEN..data.len());
            assert_eq!(u.payload as usize, range.len());
            assert!(range.len() <= framing::MAX_PAYLOAD && u.check(&framing::LIMITS).is_ok());
        }
        assert_eq!(
            framing::parse(data, data.len() + 1).map(|_| ()),
            Err(framing::Drop::Truncated)
        );
    }
    // The TCP handshakes (parse is called only after check()).
    for fam in [hello::Family::V4, hello::Family::V6] {
        if let Ok(x) = hello::parse(&h, payload, fam) {
            let alen = if fam == hello::Family::V6 { 28 } else { 16 };
            assert_eq!(payload.len(), alen + hello::CHALLENGE_LEN + hello::MAC_LEN);
            assert_eq!(h.payload as usize, payload.len());
            assert!(x.addr.port() != 0 && !x.addr.ip().is_unspecified());
            assert_eq!(hello::Family::of(&x.addr), fam);
            let extra = hello::Extra {
                keyed: x.keyed,
                challenge: x.challenge,
                mac: x.mac,
                word: x.word,
                link: x.link,
            };
            let kind_code = h.aux;
            let (eh, ep) = hello::encode_with(x.kind, &x.addr, x.nonce, &extra);
            let eh = WireHdr::from_bytes(&eh);
            assert_eq!(eh.aux, kind_code);
            assert_eq!(hello::parse(&eh, &ep, fam), Ok(x), "HELLO does not re-encode to itself");
            if ok {
                assert_eq!(eh.check(&RECORD_LIM), Ok(()));
            }
            assert!(hello::rts_prefix(&x) <= crate::transport::tcp::EAGER_MAX);
        }
    }
    if let Ok(kind) = cm::parse(&h, payload) {
        assert!(payload.len() <= cm::CM_DATA_MAX);
        assert!(cm::rts_prefix(&h) <= crate::transport::tcp::EAGER_MAX);
        if ok {
            let (eh, ep) = cm::encode(kind, payload, cm::rts_prefix(&h), cm::shm_offer(&h));
            assert_eq!(
                (eh, ep.as_slice()),
                (hb, payload),
                "CM record does not re-encode to itself"
            );
        }
    }
    // Rendezvous: the RTS iov table.
    if ok && h.op == op::RTS && payload.len() >= h.payload as usize {
        let table = &payload[..h.payload as usize];
        if let Some(info) = crate::core::engine::parse_rts(&h, &crate::transport::Bytes(table)) {
            assert_eq!(info.remote.len(), h.aux as usize);
            let total = info.remote.iter().try_fold(0u64, |s, &(_, l)| s.checked_add(l));
            assert!(total.is_some_and(|t| t >= h.len), "RTS table shorter than the message");
            assert_eq!(info.msg_id, h.msg_id);
        }
    }
    // The shm doorbell's "who I am" datagram.
    use crate::transport::shm::segment;
    let owner = if data.len() >= 16 {
        u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"))
    } else {
        0
    };
    if let Some((claim, sender)) = segment::parse_hello(owner, data) {
        assert_eq!(data.len(), segment::HELLO_LEN);
        assert!(claim.slot < segment::NSLOTS);
        assert_eq!(&segment::hello_bytes(owner, claim, sender)[..], data);
    }
}

// ---------------------------------------------------------------------------
// shm_ring: the shm record consumer over a fuzzed ring image
// ---------------------------------------------------------------------------

/// The shm consumer (`transport/shm/mod.rs`, `consume_slot`) over a ring
/// image whose head and cells are arbitrary (a hostile or corrupted
/// sender; segment version 7: a record is there when its first cell's
/// first word carries the magic and the lap tag of its index, and a first
/// word `ring::REWIND` (tagged) sends the consumer on to the next lap's
/// first cell). Properties: no panic; the consumer hands out
/// exactly the records (headers and payload bytes, through both copy
/// paths) of a reference walk, in order, consuming at most one ring's
/// worth of cells per call (a ring whose every first word is set must not
/// keep it forever); it releases exactly the cells of the records it
/// consumed and writes no cell; a ring it breaks on is one the reference
/// finds corrupt (a record failing `check`, or not shorter than the ring:
/// a producer keeps one cell free).
///
/// Input: ring size (2..64 cells), head, how many cells from the head are
/// written, which record to stall on, then the cells' bytes. A written
/// cell's first word that carries the magic is given the lap tag of its
/// index (as a producer publishes it; any other word is left as it is); an
/// unwritten cell's first word keeps its bytes unless they would read as
/// published there, when one tag bit is flipped (as a producer leaves the
/// cell where the next record starts: ring.rs).
pub fn shm_ring(data: &[u8]) {
    let mut c = Cursor::new(data);
    let ncells = 2usize << (c.u8() % 6);
    let head = match c.u8() % 4 {
        0 => 0,
        1 => u64::MAX - (c.u8() as u64),
        _ => c.u64(),
    };
    let written = c.u8() as usize % (ncells + 1);
    let stall_at = c.u8() as usize;
    let cells = c.rest();
    let mut backing = vec![0u64; ring::ring_bytes(ncells) / 8 + 8];
    let base = {
        let p = backing.as_mut_ptr() as usize;
        ((p + 63) & !63) as *mut u8
    };
    // SAFETY: `base` is 64-aligned inside `backing`, which has room for
    // ring_bytes(ncells) bytes after the alignment and outlives the ring.
    let r = unsafe { Ring::new(base, ncells) };
    let cell_of = |i: u64| (i % ncells as u64) as usize;
    // The ready bits of index `i` (ring.rs: the magic, the lap's tag).
    let lap_shift = ncells.trailing_zeros();
    let ready_bits = |i: u64| (i >> lap_shift) << sync::LAP_TAG_SHIFT | MAGIC as u64;
    // The image, by ring position, its first words tagged as published or
    // not (above).
    let mut image: Vec<u8> = (0..ncells * CELL).map(|i| cells.get(i).copied().unwrap_or(0)).collect();
    for k in 0..ncells {
        let pos = head.wrapping_add(k as u64);
        let at = cell_of(pos) * CELL;
        let mut w = u64::from_le_bytes(image[at..at + 8].try_into().expect("8 bytes"));
        if k < written && w as u16 == MAGIC {
            w = w & !sync::LAP_TAG | ready_bits(pos) & sync::LAP_TAG;
        } else if k >= written && w & sync::READY_BITS == ready_bits(pos) {
            w ^= 1 << sync::LAP_TAG_SHIFT;
        }
        image[at..at + 8].copy_from_slice(&w.to_le_bytes());
    }
    r.reset();
    // SAFETY: the ring is ours alone here (no other side): writing its
    // whole cell area from cell 0 is in bounds.
    unsafe { r.write_at(0, 0, &image) };
    r.release(head); // the head word
    let first_word = |img: &[u8], i: u64| {
        let at = cell_of(i) * CELL;
        u64::from_le_bytes(img[at..at + 8].try_into().expect("8 bytes"))
    };
    // The reference walk over the image: the records, each with the cells
    // of the rewind markers (segment version 6) walked before it, and
    // those walked after the last one.
    let (want_recs, skipped_after, want_corrupt) = {
        let img = &image;
        let mut recs = Vec::new();
        let mut corrupt = false;
        let mut pos = head;
        let mut skipped = 0u64;
        while pos.wrapping_sub(head) < ncells as u64 && first_word(img, pos) & sync::READY_BITS == ready_bits(pos) {
            let first = first_word(img, pos) & !sync::LAP_TAG;
            if first == ring::REWIND {
                // On at the next lap's first cell; a marker at a lap's
                // first cell would skip a whole lap: corrupt.
                let k = ncells as u64 - cell_of(pos) as u64;
                if k == ncells as u64 {
                    corrupt = true;
                    break;
                }
                skipped += k;
                pos = pos.wrapping_add(k);
                continue;
            }
            let at = cell_of(pos) * CELL;
            // A compact EAGER header (its payload from `compact_len`) or
            // a full one (from byte 64); its first word untagged.
            let mut hb: [u8; HDR_LEN] = img[at..at + HDR_LEN].try_into().expect("64 bytes");
            hb[..8].copy_from_slice(&first.to_le_bytes());
            let (h, off) = WireHdr::decode(&hb);
            if h.check(&RECORD_LIM).is_err() {
                corrupt = true;
                break;
            }
            let compact = h.flags & flag::COMPACT != 0;
            assert_eq!(off, if compact { compact_len(h.flags) } else { HDR_LEN });
            let n = h.payload as usize;
            let span = cells_for(off + n);
            if span >= ncells as u64 {
                corrupt = true;
                break;
            }
            let lin: Vec<u8> = (0..span as usize * CELL)
                .map(|j| img[(cell_of(pos) * CELL + j) % (ncells * CELL)])
                .collect();
            let p = lin[off..off + n].to_vec();
            recs.push((h, p, span, skipped));
            skipped = 0;
            pos = pos.wrapping_add(span);
        }
        (recs, skipped, corrupt)
    };
    let mut got = Vec::new();
    let mut calls = 0usize;
    let res = crate::transport::shm::consume_image(r, head, &RECORD_LIM, &mut |rec| {
        calls += 1;
        assert!(calls <= want_recs.len() + 1, "the consumer walks past the reference");
        if calls == stall_at {
            return Disposition::Stall;
        }
        let n = rec.payload_len();
        let v = rec.payload_vec();
        assert_eq!(v.len(), n);
        // The copy into an application iov, in two pieces, clipped.
        let mut a = vec![0u8; n / 2 + 1];
        let mut b = vec![0u8; n];
        let mut iov = IovList::new();
        iov.push(a.as_mut_ptr() as usize, a.len());
        iov.push(b.as_mut_ptr() as usize, b.len());
        // SAFETY: the iov describes our two vectors.
        let k = unsafe { rec.copy_to_iov(0, usize::MAX, &iov, 0) };
        assert_eq!(k, n, "copy_to_iov copied a different length");
        let mut joined = a;
        joined.extend_from_slice(&b);
        assert_eq!(&joined[..n], &v[..], "the two copy paths disagree");
        // And into one segment (the small messages' fixed-size copy), at an
        // offset.
        let mut one = vec![0u8; n + 3];
        let mut iov = IovList::new();
        iov.push(one.as_mut_ptr() as usize, one.len());
        // SAFETY: the iov describes our vector.
        let k = unsafe { rec.copy_to_iov(0, usize::MAX, &iov, 3) };
        assert_eq!(k, n, "copy_to_iov (one segment) copied a different length");
        assert_eq!(&one[3..], &v[..], "the one-segment copy disagrees");
        got.push((rec.hdr, v));
        Disposition::Consumed
    });
    let stalled = stall_at >= 1 && stall_at <= want_recs.len();
    let take = if stalled { stall_at - 1 } else { want_recs.len() };
    let want_hdrs: Vec<_> = want_recs[..take].iter().map(|(h, p, _, _)| (*h, p.clone())).collect();
    assert_eq!(got, want_hdrs, "consumer != reference walk");
    // Released: the consumed records and the markers before them; walked
    // (the consumer's own head): also the markers after the last one.
    let consumed: u64 = want_recs[..take].iter().map(|r| r.2 + r.3).sum();
    let walked = consumed + want_recs.get(take).map_or(skipped_after, |r| r.3);
    let (new_head, broke) = res;
    assert_eq!(
        new_head,
        head.wrapping_add(walked),
        "walked a different number of cells"
    );
    assert_eq!(
        r.free_cells(head.wrapping_add(consumed)),
        Ok(ncells as u64 - 1),
        "the shared head word is not what was released"
    );
    let mut after = vec![0u8; ncells * CELL];
    // SAFETY: the whole cell area of our private ring, from cell 0.
    unsafe { r.read_at(0, 0, after.as_mut_ptr(), after.len()) };
    assert!(after == image, "the consumer wrote a cell");
    assert_eq!(
        broke,
        want_corrupt && !stalled,
        "consumer broke on a sound ring or missed corruption"
    );
}

// ---------------------------------------------------------------------------
// getinfo_hints: fi_getinfo's hint matching over any hints
// ---------------------------------------------------------------------------

fn fuzz_info(c: &mut Cursor) -> Info {
    let caps_bits = [
        FI_MSG,
        FI_TAGGED,
        FI_MSG | FI_TAGGED,
        FI_MSG | FI_TAGGED | FI_SEND | FI_RECV,
        FI_RMA,
        FI_ATOMIC,
        FI_DIRECTED_RECV | FI_TAGGED,
        FI_SOURCE | FI_MSG,
        FI_MULTI_RECV | FI_MSG,
        FI_LOCAL_COMM | FI_REMOTE_COMM | FI_MSG,
    ];
    let caps = c.pick(&caps_bits);
    let mode = c.pick(&[FI_CONTEXT, FI_CONTEXT2, FI_CONTEXT | FI_CONTEXT2, FI_MSG_PREFIX]);
    let addr_format = c.pick(&[
        FI_FORMAT_UNSPEC as u64,
        FI_SOCKADDR as u64,
        FI_SOCKADDR_IN as u64,
        FI_SOCKADDR_IN6 as u64,
        FI_ADDR_STR as u64,
    ]) as u32;
    let sel = c.u8();
    // Addresses: rarely, mostly real ones of every format, else raw bytes.
    let addr = |c: &mut Cursor, bit: u8| {
        (sel & bit != 0 && c.u8() < 64).then(|| match c.u8() % 5 {
            0 => Addr::Shm(0x1234).to_bytes(),
            1 => Addr::Inet("127.0.0.1:5000".parse().expect("an address")).to_bytes(),
            2 => Addr::Inet("[::1]:5000".parse().expect("an address")).to_bytes(),
            3 => b"fi_sockaddr_in://127.0.0.1:5000\0".to_vec(),
            _ => {
                let n = c.u8() as usize % 40;
                c.bytes(n).to_vec()
            }
        })
    };
    let src_addr = addr(c, 1);
    let dest_addr = addr(c, 2);
    let ep = (sel & 4 != 0).then(|| EpAttr {
        ep_type: c.pick(&[
            FI_EP_UNSPEC as u64,
            FI_EP_RDM as u64,
            FI_EP_MSG as u64,
            FI_EP_DGRAM as u64,
        ]) as u32,
        protocol: c.pick(&[0]) as u32,
        max_msg_size: c.pick(&[0, 1 << 20, usize::MAX as u64]) as usize,
        msg_prefix_size: c.pick(&[0]) as usize,
        mem_tag_format: c.pick(&[0, u64::MAX, 0xaaaa_aaaa_aaaa_aaaa]),
        tx_ctx_cnt: c.pick(&[0, 1]) as usize,
        rx_ctx_cnt: c.pick(&[0, 1]) as usize,
        auth_key: (c.u8() & 1 != 0).then(|| {
            let n = c.u8() as usize % 40;
            c.bytes(n).to_vec()
        }),
        ..Default::default()
    });
    let domain = (sel & 8 != 0).then(|| DomainAttr {
        name: (c.u8() & 1 != 0).then(|| ["shm", "tcp", "auto", "x", ""][c.u8() as usize % 5].to_string()),
        threading: c.pick(&[
            0,
            FI_THREAD_SAFE as u64,
            FI_THREAD_DOMAIN as u64,
            FI_THREAD_COMPLETION as u64,
        ]) as u32,
        control_progress: c.pick(&[0, FI_PROGRESS_AUTO as u64, FI_PROGRESS_MANUAL as u64]) as u32,
        data_progress: c.pick(&[0, FI_PROGRESS_AUTO as u64, FI_PROGRESS_MANUAL as u64]) as u32,
        resource_mgmt: c.pick(&[0, FI_RM_ENABLED as u64, FI_RM_DISABLED as u64]) as u32,
        av_type: c.pick(&[0, FI_AV_MAP as u64, FI_AV_TABLE as u64]) as u32,
        mr_mode: c.pick(&[0, FI_MR_LOCAL as u64, FI_MR_BASIC as u64, FI_MR_SCALABLE as u64]) as i32,
        cq_data_size: c.pick(&[0, 8]) as usize,
        ep_cnt: c.pick(&[0, 1]) as usize,
        caps: c.pick(&[FI_LOCAL_COMM, FI_REMOTE_COMM]),
        mode: c.pick(&[0]),
        auth_key: None,
        tclass: c.pick(&[0]) as u32,
        ..Default::default()
    });
    let fabric = (sel & 16 != 0).then(|| FabricAttr {
        name: (c.u8() & 1 != 0).then(|| ["rustfab", "RUSTFAB", "other"][c.u8() as usize % 3].to_string()),
        prov_name: (c.u8() & 1 != 0).then(|| ["rustfab", "rustfab;ofi_rxm", "shm"][c.u8() as usize % 3].to_string()),
        prov_version: c.u32(),
        api_version: c.u32(),
    });
    let tx = (sel & 32 != 0).then(|| TxAttr {
        caps: c.pick(&caps_bits),
        mode: c.pick(&[0]),
        op_flags: c.pick(&[0, FI_COMPLETION, FI_INJECT_COMPLETE, FI_DELIVERY_COMPLETE]),
        msg_order: c.pick(&[0, FI_ORDER_SAS]),
        inject_size: c.pick(&[0, 64]) as usize,
        size: c.pick(&[0, 64]) as usize,
        iov_limit: c.pick(&[0, 1, 4]) as usize,
        tclass: c.pick(&[0]) as u32,
        ..Default::default()
    });
    let rx = (sel & 64 != 0).then(|| RxAttr {
        caps: c.pick(&caps_bits),
        op_flags: c.pick(&[0, FI_MULTI_RECV]),
        msg_order: c.pick(&[0, FI_ORDER_SAS]),
        total_buffered_recv: c.pick(&[0]) as usize,
        size: c.pick(&[0, 64]) as usize,
        iov_limit: c.pick(&[0, 1, 4]) as usize,
        ..Default::default()
    });
    Info {
        caps,
        mode,
        addr_format,
        src_addr,
        dest_addr,
        handle: 0,
        tx,
        rx,
        ep,
        domain,
        fabric,
    }
}

/// fi_getinfo (`provider/getinfo.rs`, `getinfo`: hint parsing, matching
/// against every template, alteration) with arbitrary hints and no node or
/// service. Properties: no panic; an error is `FI_ENODATA` or `FI_EINVAL`;
/// each entry offered honours the hints' endpoint type, has an address of
/// the format it names, and, given back as hints (what applications do
/// with `fi_dupinfo`), is offered again.
pub fn getinfo_hints(data: &[u8]) {
    let mut c = Cursor::new(data);
    let version = [
        fi_version(1, 17),
        fi_version(1, 18),
        fi_version(1, 20),
        fi_version(2, 0),
        fi_version(2, 5),
    ][c.u8() as usize % 5];
    let hints = fuzz_info(&mut c);
    let q = Query {
        version,
        node: None,
        service: None,
        flags: 0,
        hints: Some(&hints),
        transports: TransportChoice::All,
    };
    match getinfo(&q) {
        Err(e) => assert!(
            e == crate::base::error::Error::NODATA || e == crate::base::error::Error::INVAL,
            "fi_getinfo failed with {e:?}"
        ),
        Ok(list) => {
            assert!(!list.is_empty());
            for i in &list {
                let ep_type = i.ep.as_ref().map(|e| e.ep_type).unwrap_or(0);
                if let Some(h) = hints.ep.as_ref().filter(|e| e.ep_type != FI_EP_UNSPEC) {
                    assert_eq!(ep_type, h.ep_type, "an entry of another endpoint type");
                }
                let src = i.src_addr.as_deref().expect("an entry without a source address");
                let (a, _) = Addr::parse(i.addr_format, src).expect("an entry whose address does not parse");
                assert_eq!(a.format(), i.addr_format);
                let again = Query { hints: Some(i), ..q };
                let name = i.domain.as_ref().and_then(|d| d.name.clone());
                let back =
                    getinfo(&again).unwrap_or_else(|e| panic!("an offered entry is refused as hints ({e:?}): {i:?}"));
                assert!(
                    back.iter()
                        .any(|b| b.domain.as_ref().and_then(|d| d.name.clone()) == name),
                    "an offered entry given back as hints offers another domain"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// av_insert: AV insertion of arbitrary address bytes
// ---------------------------------------------------------------------------

/// AV insertion (`core/av.rs`: decoding in the AV's format, destination
/// checks, the table) of arbitrary address bytes, split as `fi_av_insert`
/// walks them (NUL-terminated strings, or sockaddr slots of the first
/// entry's size). Properties: no panic; an entry is inserted exactly when
/// it decodes and passes `check_dest`; every inserted entry is found again
/// by index and by reverse lookup, and its lookup form decodes back to the
/// same address; the string form parses back to the same address.
pub fn av_insert(data: &[u8]) {
    let mut c = Cursor::new(data);
    let transport = [TransportKind::Shm, TransportKind::Tcp, TransportKind::Auto][c.u8() as usize % 3];
    let fmt = [
        FI_FORMAT_UNSPEC,
        FI_SOCKADDR,
        FI_SOCKADDR_IN,
        FI_SOCKADDR_IN6,
        FI_ADDR_STR,
    ][c.u8() as usize % 5];
    let format = AvFormat::for_domain(transport, fmt);
    let bytes = c.rest();
    let mut entries: Vec<&[u8]> = Vec::new();
    if format == AvFormat::Str {
        entries.extend(bytes.split_inclusive(|&b| b == 0).take(64));
    } else if bytes.len() >= 2 {
        let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
        let stride = format.stride(family);
        entries.extend(bytes.chunks_exact(stride).take(64));
    }
    let decoded: Vec<_> = entries.iter().map(|e| format.decode(e)).collect();
    let av = AvState::new(0, transport, format, entries.len());
    let checked = av.validate(decoded.clone());
    let res = av.insert_batch(&checked, None).expect("no memory shortage here");
    assert_eq!(res.len(), entries.len());
    let table = av.table.read();
    for (i, r) in res.iter().enumerate() {
        let want = decoded[i].and_then(|a| check_dest(transport, format, a));
        assert_eq!(
            r.is_ok(),
            want.is_ok(),
            "entry {i}: inserted != decodes and passes check_dest"
        );
        let Ok(idx) = r else { continue };
        let a = want.expect("checked");
        assert_eq!(
            table.get(*idx).map(|e| e.addr),
            Some(a),
            "entry {i} not found by its index"
        );
        let rev = table.reverse(&a).expect("an inserted address has a reverse lookup");
        assert_eq!(table.get(rev).map(|e| e.addr), Some(a));
        let stored = format.encode(&a);
        assert_eq!(format.decode(&stored), Ok(a), "lookup form does not decode back");
        // The string form (fi_av_straddr's, like libfabric's own) carries
        // no IPv6 flow label.
        let mut plain = a;
        if let Addr::Inet(SocketAddr::V6(v6)) = &mut plain {
            v6.set_flowinfo(0);
        }
        assert_eq!(
            Addr::parse_str(&a.to_string_form()),
            Ok(plain),
            "string form does not parse back"
        );
    }
}

// ---------------------------------------------------------------------------
// tcp_live: a live TCP port against a hostile peer over loopback sockets
// ---------------------------------------------------------------------------

/// Limits of the live ports: real records of every kind, large payloads
/// included (an allocation bounded by what the fuzzer's peer writes).
const LIVE_LIM: Limits = Limits {
    max_payload: 1 << 20,
    max_chunk: 1 << 20,
    max_iov: 8,
};

/// The key of keyed runs (the victim's and the honest peer's), and a wrong
/// one the hostile peer may prove instead.
const LIVE_KEY: &[u8] = b"rustfab live-connection fuzz key";
const WRONG_KEY: &[u8] = b"not the key";

/// How long a live case waits for anything the victim owes (an honest
/// message, a report, its state for the hostile peer gone): a hang fails.
const LIVE_PATIENCE: Duration = Duration::from_secs(5);

/// Actions of one hostile peer at most per case.
const LIVE_STEPS: usize = 160;

/// The core of the victim port and of the honest one: every message from
/// `friend` is kept whole (the honest exchange is checked byte for byte);
/// records from anybody else are placed, buffered or dropped by their tag,
/// or stalled while `stall_others` holds (the victim reading slowly).
#[derive(Default)]
struct LiveCore {
    friend: Option<Addr>,
    from_friend: Vec<(u64, Vec<u8>)>,
    friend_failures: usize,
    inflight: std::collections::HashMap<u32, (bool, u64, Vec<u8>)>,
    next: u32,
    sent: Vec<(u64, crate::base::error::Result<()>)>,
    stall_others: bool,
    other_bytes: usize,
}

impl crate::transport::Delivery for LiveCore {
    fn place(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr) -> Place {
        let friend = self.friend == Some(*src);
        let cap = if friend {
            hdr.len.min(1 << 20) as usize
        } else if self.stall_others {
            return Place::Stall;
        } else {
            match hdr.tag % 3 {
                0 => (hdr.len as usize).min(4096),
                1 => return Place::Buffer,
                _ => return Place::Discard,
            }
        };
        let mut buf = vec![0u8; cap];
        let dst = IovList::single(buf.as_mut_ptr() as usize, buf.len());
        self.next += 1;
        self.inflight.insert(self.next, (friend, hdr.tag, buf));
        Place::Into {
            handle: self.next,
            dst,
            take: cap.min(hdr.len as usize),
        }
    }
    fn placed(&mut self, handle: u32, result: crate::base::error::Result<()>) {
        let (friend, tag, buf) = self.inflight.remove(&handle).expect("placed: a handle place() gave");
        match (friend, result) {
            (true, Ok(())) => self.from_friend.push((tag, buf)),
            (true, Err(_)) => self.friend_failures += 1,
            (false, _) => self.other_bytes += buf.len(),
        }
    }
    fn buffered(&mut self, src: &Addr, _pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        if self.friend == Some(*src) {
            self.from_friend.push((hdr.tag, data));
        } else {
            self.other_bytes += data.len();
        }
    }
    fn control(
        &mut self,
        _src: &Addr,
        _pid: i32,
        _hdr: &WireHdr,
        _payload: &dyn crate::transport::PayloadIn,
    ) -> Disposition {
        Disposition::Consumed
    }
    fn sent(&mut self, msg_id: u64, result: crate::base::error::Result<()>) {
        self.sent.push((msg_id, result));
    }
}

/// The victim and its honest peer, polled together; failure events are
/// collected (none may ever name the honest peer).
struct LivePair {
    victim: TcpPort,
    vc: LiveCore,
    honest: TcpPort,
    hc: LiveCore,
    /// Failure events the victim reported (peers).
    failed: Vec<Addr>,
    /// Sends the victim made: (msg_id, to the honest peer, to whom).
    sends: Vec<(u64, bool, Addr)>,
    /// Messages the victim sent the honest peer (tag, bytes), in order.
    to_honest: Vec<(u64, Vec<u8>)>,
    next_id: u64,
}

impl LivePair {
    fn poll(&mut self) {
        use crate::transport::Port;
        self.victim.poll(&mut self.vc);
        let staged = self.victim.census().staged;
        assert!(
            staged <= crate::transport::DEFAULT_UNEXP_BUDGET,
            "the victim stages {staged} bytes of unexpected payloads, over its budget"
        );
        if self.victim.has_events() {
            for e in self.victim.take_events() {
                // As the engine does: the event ends every send to the
                // peer the transport has not reported (tcp/failure.rs).
                for s in self.sends.iter().filter(|s| s.2 == *e.peer()) {
                    if !self.vc.sent.iter().any(|r| r.0 == s.0) {
                        self.vc.sent.push((s.0, Err(e.cause())));
                    }
                }
                self.failed.push(*e.peer());
            }
        }
        self.honest.poll(&mut self.hc);
        if self.honest.has_events() {
            let ev = self.honest.take_events();
            assert!(ev.is_empty(), "the honest peer saw the victim fail: {ev:?}");
        }
    }

    /// The victim sends `n` bytes tagged `tag` to `to`; `Err` is a result
    /// like any other towards the hostile peer, never towards the honest.
    fn send(&mut self, to: &Addr, tag: u64, n: usize) {
        use crate::transport::{Payload, Port, Sent};
        self.next_id += 1;
        let id = self.next_id;
        let honest = *to == self.honest.addr();
        let bytes = pattern(n, id as u8);
        let mut h = WireHdr::new(op::EAGER);
        h.flags = flag::TAGGED;
        h.tag = tag;
        h.len = n as u64;
        h.msg_id = id;
        let t = Instant::now();
        loop {
            match self.victim.send(to, &h, Payload::Bytes(&bytes), true) {
                Ok(Sent::Done) => self.vc.sent.push((id, Ok(()))),
                Ok(Sent::Queued) => {}
                Err(crate::base::error::Error::AGAIN) if honest => {
                    assert!(
                        t.elapsed() < LIVE_PATIENCE,
                        "the victim never had room for the honest peer"
                    );
                    self.poll();
                    continue;
                }
                Err(e) => {
                    assert!(!honest, "a send to the honest peer failed: {e:?}");
                    return;
                }
            }
            break;
        }
        self.sends.push((id, honest, *to));
        if honest {
            self.to_honest.push((tag, bytes));
        }
    }

    /// Polls until `done` holds; `what` names it when the patience runs out.
    fn pump_until(&mut self, what: &str, mut done: impl FnMut(&mut LivePair) -> bool) {
        let t = Instant::now();
        while !done(self) {
            assert!(t.elapsed() < LIVE_PATIENCE, "hang: {what}");
            self.poll();
        }
    }

    /// One message each way between the victim and the honest peer, whole
    /// and in order, and every send the victim made to it reported done.
    fn honest_exchange(&mut self, tag: u64) {
        use crate::transport::{Payload, Port, Sent};
        let (va, ha) = (self.victim.addr(), self.honest.addr());
        self.send(&ha, tag, 100 + tag as usize);
        let want = self.to_honest.clone();
        self.pump_until("the honest peer's messages from the victim", |p| {
            p.hc.from_friend.len() >= want.len()
        });
        assert_eq!(
            self.hc.from_friend, want,
            "the honest peer got other bytes than the victim sent"
        );
        let back = pattern(200, tag as u8);
        let mut h = WireHdr::new(op::EAGER);
        h.flags = flag::TAGGED;
        h.tag = tag;
        h.len = back.len() as u64;
        let n = self.vc.from_friend.len();
        let r = self.honest.send(&va, &h, Payload::Bytes(&back), true);
        assert!(
            matches!(r, Ok(Sent::Done | Sent::Queued)),
            "the honest peer's send: {r:?}"
        );
        self.pump_until("the victim's message from the honest peer", |p| {
            p.vc.from_friend.len() > n
        });
        assert_eq!(self.vc.from_friend[n], (tag, back));
        assert_eq!(self.vc.friend_failures + self.hc.friend_failures, 0);
        let sends = self.sends.clone();
        self.pump_until("reports of the victim's sends to the honest peer", |p| {
            sends
                .iter()
                .filter(|s| s.1)
                .all(|s| p.vc.sent.iter().any(|r| r.0 == s.0))
        });
        for (id, r) in &self.vc.sent {
            if sends.iter().any(|s| s.0 == *id && s.1) {
                assert_eq!(*r, Ok(()), "a send to the honest peer failed");
            }
        }
    }
}

/// The hostile peer: a raw socket, what it has still to write, and the
/// start of what it read (the victim's HELLO, for a keyed answer).
struct Hostile {
    sock: std::net::TcpStream,
    out: Vec<u8>,
    inbox: Vec<u8>,
    /// It dialed the victim (else the victim dialed it).
    dialed: bool,
    /// The address its HELLOs claim.
    me: SocketAddr,
    nonce: u64,
    challenge: [u8; hello::CHALLENGE_LEN],
    /// The key it proves with (`None`: an unkeyed HELLO).
    key: Option<&'static [u8]>,
}

impl Hostile {
    /// The victim's first record, a HELLO, once read whole.
    fn their_hello(&self) -> Option<hello::Hello> {
        if self.inbox.len() < HDR_LEN {
            return None;
        }
        let h = WireHdr::from_bytes(self.inbox[..HDR_LEN].try_into().ok()?);
        let p = self.inbox.get(HDR_LEN..HDR_LEN + h.payload as usize)?;
        hello::parse(&h, p, hello::Family::V4).ok()
    }

    fn transcript(&self, theirs: &hello::Hello) -> hello::Transcript {
        let (d, a) = if self.dialed {
            (
                (self.me, self.nonce, self.challenge),
                (theirs.addr, theirs.nonce, theirs.challenge),
            )
        } else {
            (
                (theirs.addr, theirs.nonce, theirs.challenge),
                (self.me, self.nonce, self.challenge),
            )
        };
        hello::Transcript {
            dialer: d.0,
            dialer_nonce: d.1,
            dialer_challenge: d.2,
            acceptor: a.0,
            acceptor_nonce: a.1,
            acceptor_challenge: a.2,
        }
    }

    fn hello(&self, kind: hello::Kind, mac: [u8; hello::MAC_LEN], word: u64) -> Vec<u8> {
        let x = hello::Extra {
            keyed: self.key.is_some(),
            challenge: self.challenge,
            mac,
            word,
            link: 0,
        };
        let (h, p) = hello::encode_with(kind, &self.me, self.nonce, &x);
        let mut v = h.to_vec();
        v.extend(p);
        v
    }

    /// A real frame of kind `k`, its fields from `c`: the handshake record
    /// this side sends (REQUEST or ACCEPT, keyed right when it knows the
    /// key and has read the victim's HELLO), a PROOF, a wrong-way HELLO,
    /// messages, control records, BYE, RMA and atomic records.
    fn frame(&self, k: u8, c: &mut Cursor) -> Vec<u8> {
        let theirs = self.their_hello();
        let mac = |side| match (self.key, theirs) {
            (Some(key), Some(t)) => hello::sign(key, side, &self.transcript(&t)),
            _ => [0; hello::MAC_LEN],
        };
        match k % 9 {
            0 if self.dialed => self.hello(
                hello::Kind::Request,
                [0; hello::MAC_LEN],
                c.pick(&[0, 64, 4096, 1 << 20]),
            ),
            0 => self.hello(hello::Kind::Accept, mac(hello::Side::Acceptor), c.pick(&[0, 64, 4096])),
            1 => self.hello(hello::Kind::Proof, mac(hello::Side::Dialer), 0),
            2 => {
                let kind = [
                    hello::Kind::Request,
                    hello::Kind::Accept,
                    hello::Kind::Reject,
                    hello::Kind::Refuse,
                ][c.u8() as usize % 4];
                self.hello(kind, mac(hello::Side::Acceptor), c.pick(&[1, 2, 3, 4, 5, 6, 7]))
            }
            3 | 4 => {
                let n = c.pick(&[0, 1, 63, 64, 1000, 65536, 70000, 1 << 20]) as usize;
                eager(c.u8() as u64, c.u64(), &pattern(n.min(1 << 21), 5))
            }
            5 => ctl(
                c.pick(&[op::ACK as u64, op::CTS as u64, op::BYE as u64, op::RTS as u64]) as u8,
                c.u64(),
            ),
            6 => ctl(op::BYE, 0),
            7 => {
                let r = rma_records();
                r[c.u8() as usize % r.len()].1.clone()
            }
            _ => match c.u8() % 2 {
                0 => rts(
                    c.pick(&[100_000, 1 << 20, u64::MAX]),
                    &[(0x1000, 60_000), (0, 40_000)],
                    c.u8() as u64,
                ),
                _ => data_rec(
                    c.pick(&[1000, 1 << 20]),
                    c.pick(&[0, 900, 1 << 40]),
                    &pattern(100, 2),
                    3,
                ),
            },
        }
    }

    /// Writes up to `n` bytes of what waits (a full socket takes less).
    fn write(&mut self, n: usize) {
        let n = n.min(self.out.len());
        if let Ok(w) = self.sock.write(&self.out[..n]) {
            self.out.drain(..w);
        }
    }

    /// Reads up to `n` bytes, keeping the first 4 KiB.
    fn read(&mut self, n: usize) {
        let mut buf = vec![0u8; n.min(1 << 20)];
        if let Ok(r) = self.sock.read(&mut buf) {
            let keep = r.min(4096usize.saturating_sub(self.inbox.len()));
            self.inbox.extend_from_slice(&buf[..keep]);
        }
    }
}

/// Input layout: byte 0 the set-up (bit 0: the hostile peer dials the
/// victim, else the victim dials it; bit 1: the victim and the honest peer
/// have a key; bits 2-3: the hostile peer's key: none, the right one, a
/// wrong one, the right one; bits 4-5: the address its HELLOs claim: its
/// own listener, the honest peer's, the victim's, a dead one), bytes 1-8
/// its nonce, then actions, each a byte and its arguments: a real frame
/// (kind byte, then a mutation byte: 0xf0 and above overwrite one byte of
/// the frame), garbage, write n bytes of what waits, read n bytes, poll
/// the victim (1-8 passes, or passes for up to 6 ms), the victim sends to the hostile peer, the victim
/// sends to the honest peer, the victim stalls (reads slowly from) the
/// hostile peer or resumes, half close, pause. The input's end closes the
/// hostile socket.
///
/// Properties: no panic; no hang (everything the victim owes arrives within
/// [`LIVE_PATIENCE`], the handshake deadlines expired by the fuzzer's
/// clock); the honest peer, connected before, exchanges messages whole and
/// in order during and after, and none of its operations fails; failures
/// name only the hostile peer's addresses; the victim never stages more
/// unexpected payload bytes than its budget; once the hostile socket is
/// closed every send to it is reported and the victim holds nothing for it
/// (one connection and one peer, the honest one; no parked request, no
/// handshake, no staged bytes).
pub fn tcp_live(data: &[u8]) {
    use crate::transport::tcp::{AuthKey, TcpSettings};
    use crate::transport::Port;
    let mut c = Cursor::new(data);
    let setup = c.u8();
    let nonce = c.u64() | 1;
    let keyed = setup & 2 != 0;
    let settings = TcpSettings {
        auth_key: keyed.then(|| AuthKey(LIVE_KEY.to_vec())),
        ..TcpSettings::default()
    };
    let lo: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let victim = TcpPort::new(lo, LIVE_LIM, &settings).expect("the victim's port");
    let honest = TcpPort::new(lo, LIVE_LIM, &settings).expect("the honest port");
    let (va, ha) = (victim.addr(), honest.addr());
    let mut p = LivePair {
        victim,
        vc: LiveCore {
            friend: Some(ha),
            ..LiveCore::default()
        },
        honest,
        hc: LiveCore {
            friend: Some(va),
            ..LiveCore::default()
        },
        failed: Vec::new(),
        sends: Vec::new(),
        to_honest: Vec::new(),
        next_id: 0,
    };
    p.honest_exchange(1);

    let listener = std::net::TcpListener::bind(lo).expect("the hostile listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let own = listener.local_addr().expect("its address");
    let (Addr::Inet(vs), Addr::Inet(hs)) = (va, ha) else {
        unreachable!("tcp addresses")
    };
    let claim = [own, hs, vs, "127.0.0.1:1".parse().expect("an address")][(setup >> 4) as usize % 4];
    let dialed = setup & 1 != 0;
    let sock = if dialed {
        std::net::TcpStream::connect(vs).expect("connect to the victim")
    } else {
        // The victim dials the hostile listener for a message to it.
        p.send(&Addr::Inet(own), 7, 10);
        let t = Instant::now();
        loop {
            if let Ok((s, _)) = listener.accept() {
                break s;
            }
            assert!(t.elapsed() < LIVE_PATIENCE, "hang: the victim never dialed");
            p.poll();
        }
    };
    sock.set_nonblocking(true).expect("nonblocking");
    let mut evil = Hostile {
        sock,
        out: Vec::new(),
        inbox: Vec::new(),
        dialed,
        me: claim,
        nonce,
        challenge: [nonce as u8; hello::CHALLENGE_LEN],
        key: match (setup >> 2) & 3 {
            0 => None,
            2 => Some(WRONG_KEY),
            _ => Some(LIVE_KEY),
        },
    };
    // Sends to the hostile peer go to the address it claims, unless that is
    // the victim's own (a send there is a send to itself).
    let target = Addr::Inet(if dialed && claim != vs { claim } else { own });
    let mut tag = 100;
    for _ in 0..LIVE_STEPS {
        if c.pos >= c.data.len() {
            break;
        }
        match c.u8() % 11 {
            0 | 1 => {
                let k = c.u8();
                let mut f = evil.frame(k, &mut c);
                let m = c.u8();
                if m >= 0xf0 && !f.is_empty() {
                    let at = c.u8() as usize % f.len();
                    f[at] = c.u8();
                }
                evil.out.extend(f);
            }
            2 => {
                let n = c.u8() as usize % 80;
                evil.out.extend_from_slice(c.bytes(n));
            }
            3 => evil.write(c.pick(&[1, 7, 63, 64, 65, 200, 4096, 1 << 22]) as usize),
            4 => evil.read(c.pick(&[1, 16, 64, 128, 4096, 1 << 20]) as usize),
            5 => match c.u8() {
                k @ 0..=0x7f => (0..=k % 8).for_each(|_| p.poll()),
                k => {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(50 * (k as u64 & 0x7f)) {
                        p.poll();
                    }
                }
            },
            6 => p.send(
                &target,
                c.u8() as u64,
                c.pick(&[0, 10, 1000, 65536]).min(65536) as usize,
            ),
            7 => {
                tag += 1;
                p.send(&Addr::Inet(hs), tag, 50);
            }
            8 => p.vc.stall_others = !p.vc.stall_others,
            9 => {
                let _ = evil.sock.shutdown(std::net::Shutdown::Write);
            }
            _ => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    // The honest peer still works while the hostile connection is open.
    p.vc.stall_others = false;
    p.honest_exchange(2);
    drop(evil);
    drop(listener);
    // Everything the victim owes the hostile peer ends: its sends are
    // reported, its state goes. Deadlines (a refused dial's wait, a parked
    // request) come by the fuzzer's clock after 50 ms.
    let t = Instant::now();
    let mut warped = false;
    loop {
        if !warped && t.elapsed() > Duration::from_millis(50) {
            p.victim.expire_deadlines();
            warped = true;
        }
        let c = p.victim.census();
        let unreported: Vec<u64> = p
            .sends
            .iter()
            .map(|s| s.0)
            .filter(|id| !p.vc.sent.iter().any(|r| r.0 == *id))
            .collect();
        if unreported.is_empty() && c.conns == 1 && c.peers == 1 && c.parked == 0 && !c.handshakes && c.staged == 0 {
            break;
        }
        assert!(
            t.elapsed() < LIVE_PATIENCE,
            "hang: the victim holds on to the hostile peer: {c:?}, sends not reported {unreported:?}"
        );
        p.poll();
    }
    assert!(!p.failed.contains(&ha), "the victim failed the honest peer");
    p.honest_exchange(3);
}

// ---------------------------------------------------------------------------
// Seeds: real frames, for the committed corpus and the property tests
// ---------------------------------------------------------------------------

/// A record: header `h` (its `payload` set here) followed by `payload`.
fn record(mut h: WireHdr, payload: &[u8]) -> Vec<u8> {
    h.payload = payload.len() as u32;
    let mut v = h.to_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

fn eager(tag: u64, data: u64, payload: &[u8]) -> Vec<u8> {
    let h = WireHdr {
        flags: flag::TAGGED,
        tag,
        data,
        len: payload.len() as u64,
        ..WireHdr::new(op::EAGER)
    };
    record(h, payload)
}

fn ctl(o: u8, id: u64) -> Vec<u8> {
    let mut h = WireHdr::new(o);
    h.msg_id = id;
    h.to_bytes().to_vec()
}

fn rts(len: u64, segs: &[(u64, u64)], tag: u64) -> Vec<u8> {
    let mut h = WireHdr::new(op::RTS);
    h.tag = tag;
    h.len = len;
    h.aux = segs.len() as u32;
    h.payload = (segs.len() * IOV_ENTRY) as u32;
    h.msg_id = 77;
    let mut v = h.to_bytes().to_vec();
    for &(a, l) in segs {
        v.extend_from_slice(&a.to_le_bytes());
        v.extend_from_slice(&l.to_le_bytes());
    }
    v
}

fn data_rec(len: u64, offset: u64, payload: &[u8], tag: u64) -> Vec<u8> {
    let h = WireHdr {
        flags: flag::LAST,
        tag,
        len,
        offset,
        ..WireHdr::new(op::DATA)
    };
    record(h, payload)
}

fn hello_rec(kind: hello::Kind, addr: &str, keyed: bool) -> Vec<u8> {
    let x = hello::Extra {
        keyed,
        challenge: [7; hello::CHALLENGE_LEN],
        mac: [9; hello::MAC_LEN],
        word: 4096,
        link: 0,
    };
    let (h, p) = hello::encode_with(kind, &addr.parse().expect("an address"), 0x1234_5678, &x);
    let mut v = h.to_vec();
    v.extend_from_slice(&p);
    v
}

fn cm_rec(kind: cm::CmKind, data: &[u8]) -> Vec<u8> {
    let (h, p) = cm::encode(kind, data, 4096, None);
    let mut v = h.to_vec();
    v.extend_from_slice(&p);
    v
}

/// An RMA or atomic record (docs/rma.md): operation `id`, target segment
/// `seg` at (`addr`, `len`, key), `reserved` as the op defines it, then
/// `payload`.
#[allow(clippy::too_many_arguments)]
fn rma_rec(
    o: u8,
    flags: u32,
    msg_id: u64,
    aux: u32,
    offset: u64,
    len: u64,
    tag: u64,
    reserved: u64,
    payload: &[u8],
) -> Vec<u8> {
    let h = WireHdr {
        flags,
        msg_id,
        aux,
        offset,
        len,
        tag,
        reserved,
        ..WireHdr::new(o)
    };
    record(h, payload)
}

/// An (address, length) table as pull requests carry it.
fn iov_table(segs: &[(u64, u64)]) -> Vec<u8> {
    segs.iter()
        .flat_map(|&(a, l)| a.to_le_bytes().into_iter().chain(l.to_le_bytes()))
        .collect()
}

/// One record of every RMA and atomic kind the engines send (the shapes of
/// `core/engine/rma.rs` and `atomic.rs`): a pushed write chunk, a pull
/// write request, a streamed and a pulled read request, a read chunk, an
/// acknowledgement (plain and "cannot pull"), atomics of the three kinds
/// (FI_SUM on int64, FI_ATOMIC_READ, FI_CSWAP) and a fetched answer.
fn rma_records() -> Vec<(&'static str, Vec<u8>)> {
    const INT64: u64 = 6 << 8;
    let last = flag::LAST | flag::FINAL;
    vec![
        (
            "rma_write_chunk",
            rma_rec(op::WRITE, last, 11, 0, 0x10_0000, 300, 0xbeef, 200, &pattern(100, 5)),
        ),
        (
            "rma_write_req",
            rma_rec(
                op::WRITE_REQ,
                flag::CMA_OK | flag::FINAL,
                12,
                0,
                0x20_0000,
                1 << 20,
                0xbeef,
                2,
                &iov_table(&[(0x7f00_0000, 1 << 19), (0x7f10_0000, 1 << 19)]),
            ),
        ),
        (
            "rma_read_req_streamed",
            rma_rec(op::READ_REQ, flag::FINAL, 13, 1, 0x30_0000, 5000, 0xbeef, 0, &[]),
        ),
        (
            "rma_read_req_pulled",
            rma_rec(
                op::READ_REQ,
                flag::CMA_OK | flag::FINAL,
                14,
                0,
                0x30_0000,
                4096,
                0xbeef,
                1,
                &iov_table(&[(0x7f20_0000, 4096)]),
            ),
        ),
        (
            "rma_read_resp",
            rma_rec(op::READ_RESP, flag::LAST, 13, 1, 0, 5000, 0, 4900, &pattern(100, 6)),
        ),
        ("rma_ack", rma_rec(op::RMA_ACK, 0, 11, 0, 0, 0, 0, 0, &[])),
        ("rma_ack_cannot_pull", {
            let mut v = rma_rec(op::RMA_ACK, 0, 12, 0, 0, 0, 0, 0, &[]);
            let mut h = WireHdr::from_bytes(v[..HDR_LEN].try_into().expect("a header"));
            h.data = FI_EOPNOTSUPP as u64;
            v[..HDR_LEN].copy_from_slice(&h.to_bytes());
            v
        }),
        (
            "atomic_sum_int64",
            rma_rec(
                op::ATOMIC,
                flag::FINAL,
                15,
                0,
                0x40_0000,
                16,
                0xcafe,
                2 | INT64,
                &pattern(16, 7),
            ),
        ),
        (
            "atomic_fetch_read",
            rma_rec(
                op::ATOMIC,
                flag::FINAL,
                16,
                0,
                0x40_0000,
                8,
                0xcafe,
                10 | INT64 | 1 << 16,
                &[],
            ),
        ),
        (
            "atomic_cswap",
            rma_rec(
                op::ATOMIC,
                flag::FINAL,
                17,
                0,
                0x40_0000,
                8,
                0xcafe,
                12 | INT64 | 2 << 16,
                &pattern(16, 8),
            ),
        ),
        (
            "atomic_resp_fetched",
            rma_rec(op::ATOMIC_RESP, 0, 16, 0, 0, 8, 0, 0, &pattern(8, 9)),
        ),
    ]
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A TCP stream of real records: handshake, then data of every kind.
pub fn seed_stream() -> Vec<u8> {
    let mut s = hello_rec(hello::Kind::Request, "127.0.0.1:4000", false);
    // Tags 0..16: every placement the fuzz core makes (see `choice`).
    for i in 0..16u64 {
        let n = [0usize, 5, 16, 100, 1000, 5000][i as usize % 6];
        s.extend(eager(i, 50 + 7 * i, &pattern(n, i as u8)));
    }
    s.extend(ctl(op::ACK, 42));
    s.extend(rts(100_000, &[(0, 60_000), (0, 40_000)], 5));
    s.extend(ctl(op::CTS, 77));
    s.extend(data_rec(100_000, 99_000, &pattern(1000, 3), 6));
    s.extend(ctl(op::BYE, 0));
    s
}

/// A ring image (the `shm_ring` input) holding `records` published from
/// cell 0 (with inline records where the payload fits).
pub fn seed_ring(log2_cells: u8, head_sel: u8, records: &[Vec<u8>]) -> Vec<u8> {
    let mut cells = Vec::new();
    for r in records {
        let h = WireHdr::from_bytes(r[..HDR_LEN].try_into().expect("a header"));
        let p = &r[HDR_LEN..];
        if h.op == op::EAGER {
            // As shm writes them: the compact header, the payload after it.
            let (w, _) = h.compact(p.len());
            let words = w.iter().flat_map(|x| x.to_le_bytes());
            let mut rec: Vec<u8> = words.take(compact_len(h.flags)).collect();
            rec.extend_from_slice(p);
            cells.extend_from_slice(&rec);
        } else {
            cells.extend_from_slice(r);
        }
        cells.resize(cells.len().div_ceil(CELL) * CELL, 0);
    }
    let used = (cells.len() / CELL) as u8;
    let mut v = vec![log2_cells, head_sel, used, 0];
    v.extend(cells);
    v
}

/// `tcp_live` scripts (see its input layout): real handshakes, keyed and
/// not, from either side, then data, paced and cut in various ways.
fn live_seeds() -> Vec<(&'static str, Vec<u8>)> {
    // Actions (the bytes `tcp_live` reads for each).
    const HS: &[u8] = &[0, 0, 1, 0]; // our HELLO (REQUEST or ACCEPT), word 64
    const PROOF: &[u8] = &[0, 1, 0];
    const WRITE_ALL: &[u8] = &[3, 7];
    const WRITE_1: &[u8] = &[3, 0];
    const WRITE_65: &[u8] = &[3, 4];
    const READ_ALL: &[u8] = &[4, 5];
    const READ_16: &[u8] = &[4, 1];
    const POLL: &[u8] = &[5, 0x94]; // 1 ms of passes
    const BYE: &[u8] = &[0, 6, 0];
    const SEND_HOSTILE: &[u8] = &[6, 9, 2]; // 1000 bytes
    const SEND_BIG_HOSTILE: &[u8] = &[6, 10, 3]; // 64 KiB
    const SEND_HONEST: &[u8] = &[7];
    const STALL: &[u8] = &[8];
    const HALF_CLOSE: &[u8] = &[9];
    const GARBAGE: &[u8] = &[2, 12, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8];
    // An eager message of 1000 bytes (tag 3: placed), and one of 64 KiB
    // (tag 4: buffered).
    const MSG: &[u8] = &[0, 3, 4, 3, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    const BIG: &[u8] = &[0, 3, 5, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    const RMA: &[u8] = &[0, 7, 2, 0];
    let script = |setup: u8, acts: &[&[u8]]| {
        let mut v = vec![setup];
        v.extend(0x5eed_0000_0000_0001u64.to_le_bytes());
        acts.iter().for_each(|a| v.extend_from_slice(a));
        v
    };
    let talk: &[&[u8]] = &[
        MSG,
        WRITE_ALL,
        POLL,
        SEND_HOSTILE,
        POLL,
        READ_ALL,
        RMA,
        WRITE_ALL,
        POLL,
        SEND_HONEST,
        POLL,
        BYE,
        WRITE_ALL,
        POLL,
    ];
    let with = |head: &[&'static [u8]], tail: &[&'static [u8]]| -> Vec<&'static [u8]> {
        head.iter().chain(tail).copied().collect()
    };
    let talk_static: Vec<&'static [u8]> = talk.to_vec();
    let mut out = vec![
        // The hostile peer dials, unkeyed, claiming its own listener.
        (
            "dial_hello_then_data",
            script(0x01, &with(&[HS, WRITE_ALL, POLL, READ_ALL], &talk_static)),
        ),
        // Keyed, the right key: REQUEST, the victim's ACCEPT, PROOF.
        (
            "dial_keyed_proof_then_data",
            script(
                0x07,
                &with(&[HS, WRITE_ALL, POLL, READ_ALL, PROOF, WRITE_ALL, POLL], &talk_static),
            ),
        ),
        // Keyed, a wrong key: the PROOF is refused.
        (
            "dial_wrong_key",
            script(
                0x0b,
                &with(&[HS, WRITE_ALL, POLL, READ_ALL, PROOF, WRITE_ALL, POLL], &talk_static),
            ),
        ),
        // The victim dials (for a message), the hostile peer answers.
        (
            "accept_then_data",
            script(0x00, &with(&[POLL, READ_ALL, HS, WRITE_ALL, POLL], &talk_static)),
        ),
        (
            "accept_keyed_then_data",
            script(
                0x06,
                &with(&[POLL, READ_ALL, HS, WRITE_ALL, POLL, READ_ALL], &talk_static),
            ),
        ),
        // Claims the honest peer's address (parked, then refused), the
        // victim's own, a dead one.
        (
            "dial_impostor",
            script(0x11, &with(&[HS, WRITE_ALL, POLL, READ_ALL], &talk_static)),
        ),
        (
            "dial_claims_the_victim",
            script(0x21, &with(&[HS, WRITE_ALL, POLL, READ_ALL], &talk_static)),
        ),
        (
            "accept_claims_a_dead_address",
            script(0x30, &[POLL, READ_ALL, HS, WRITE_ALL, POLL, MSG, WRITE_ALL, POLL]),
        ),
        // Byte by byte, polls between, closed in the middle of a message.
        (
            "dial_bytewise_cut_mid_message",
            script(
                0x01,
                &[
                    HS, MSG, WRITE_1, POLL, WRITE_1, POLL, WRITE_65, POLL, WRITE_65, POLL, WRITE_1, READ_16, WRITE_65,
                    POLL, WRITE_65, POLL, WRITE_65, POLL, WRITE_65, POLL, WRITE_65, POLL,
                ],
            ),
        ),
        // Garbage after the handshake; BYE before the handshake.
        (
            "dial_garbage_after_hello",
            script(
                0x01,
                &[HS, WRITE_ALL, POLL, GARBAGE, WRITE_ALL, POLL, MSG, WRITE_ALL, POLL],
            ),
        ),
        (
            "dial_bye_first",
            script(0x01, &[BYE, WRITE_ALL, POLL, HS, WRITE_ALL, POLL]),
        ),
        // The victim reads slowly (stalls) while the peer floods, and the
        // peer never reads while the victim sends it 64 KiB messages.
        (
            "dial_flood_both_ways_unread",
            script(
                0x01,
                &[
                    HS,
                    WRITE_ALL,
                    POLL,
                    STALL,
                    BIG,
                    BIG,
                    BIG,
                    MSG,
                    MSG,
                    WRITE_ALL,
                    POLL,
                    SEND_BIG_HOSTILE,
                    SEND_BIG_HOSTILE,
                    SEND_BIG_HOSTILE,
                    POLL,
                    SEND_HONEST,
                    POLL,
                    WRITE_ALL,
                    POLL,
                    STALL,
                    POLL,
                    HALF_CLOSE,
                    POLL,
                ],
            ),
        ),
    ];
    out.sort_by_key(|s| s.0);
    out
}

/// The seed corpus: (target, file name, bytes), from real frames.
pub fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let stream = seed_stream();
    let mut reader = |name: &str, ctl: u8, cuts: [u8; 4], s: &[u8]| {
        let mut v = vec![ctl];
        v.extend_from_slice(&cuts);
        v.extend_from_slice(s);
        out.push(("tcp_reader", name.to_string(), v));
    };
    reader("handshake_then_data_bytewise", 0x01, [1, 1, 1, 1], &stream);
    reader("handshake_then_data_mixed_cuts", 0x37, [63, 1, 65, 250], &stream);
    reader("data_whole", 0x0e, [96, 96, 96, 255], &stream[stream.len() - 2000..]);
    let mut bad = eager(1, 0, b"abc");
    bad.extend(eager(2, 0, b"xyz"));
    bad[64 + 3 + 3] = 200; // the second header's op
    reader("bad_op_after_a_record", 0x00, [7, 3, 64, 10], &bad);
    let mut cut = eager(4, 0, &pattern(300, 1));
    cut.truncate(200);
    reader("truncated_payload", 0x10, [5, 9, 13, 17], &cut);

    let mut rec = |name: &str, v: Vec<u8>| out.push(("records", name.to_string(), v));
    rec("eager", eager(1, 2, b"hello"));
    rec("rts", rts(100_000, &[(0x1000, 50_000), (0x9000, 50_000)], 1));
    rec("data", data_rec(1000, 900, &pattern(100, 2), 3));
    rec("hello_v4", hello_rec(hello::Kind::Request, "10.1.2.3:4000", true));
    rec("hello_v6", hello_rec(hello::Kind::Accept, "[fe80::1]:4000", false));
    rec("cm_connreq", cm_rec(cm::CmKind::ConnReq, b"private data"));
    rec("cm_reject", cm_rec(cm::CmKind::Reject, b""));
    rec(
        "shm_doorbell_hello",
        crate::transport::shm::segment::hello_bytes(
            0xabcd,
            crate::transport::shm::segment::Claim { slot: 3, gen: 9 },
            0x1111,
        )
        .to_vec(),
    );

    for (name, v) in rma_records() {
        out.push(("records", name.to_string(), v));
    }

    let small = [
        eager(1, 0, b"hi"),
        eager(2, 5, &pattern(100, 1)),
        ctl(op::ACK, 3),
        rts(1 << 20, &[(0x1000, 1 << 20)], 4),
        data_rec(1 << 20, 0, &pattern(200, 2), 5),
    ];
    let mut ring_seed = |name: &str, v: Vec<u8>| out.push(("shm_ring", name.to_string(), v));
    ring_seed("mixed_records", seed_ring(4, 0, &small));
    ring_seed("wrapping_indices", seed_ring(5, 1, &small));
    let mut partial = seed_ring(4, 0, &[eager(9, 0, &pattern(1000, 3))]);
    partial[2] = 3; // only 3 of the record's cells written
    ring_seed("record_over_unwritten_cells", partial);
    // A 300-byte eager record (6 cells) in a 4-cell ring: corruption.
    ring_seed(
        "record_longer_than_the_ring",
        seed_ring(1, 0, &[eager(7, 0, &pattern(300, 4))]),
    );
    // Every cell of a 4-cell ring holds a record (no honest producer does
    // that: one cell stays free): one lap per call, never an endless walk.
    let lap: Vec<_> = (0..4).map(|i| eager(i, 0, b"lap")).collect();
    ring_seed("every_cell_a_record", seed_ring(1, 0, &lap));

    // Rewinding (segment version 6) in a 16-cell ring, head at cell 10:
    // records in cells 10 and 11, the marker in 12, the next record at the
    // lap's first cell (0), cell 1 zero; and a marker at a lap's first
    // cell (head 16), which is corruption.
    let one = |tag: u64| seed_ring(4, 0, &[eager(tag, 0, b"rw")])[4..4 + CELL].to_vec();
    let rewound = |head: u64, marks: &[usize], recs: &[(usize, u64)]| {
        let mut cells = vec![0u8; 16 * CELL];
        for &(at, tag) in recs {
            cells[at * CELL..(at + 1) * CELL].copy_from_slice(&one(tag));
        }
        for &at in marks {
            cells[at * CELL..at * CELL + 8].copy_from_slice(&ring::REWIND.to_le_bytes());
        }
        let mut v = vec![3u8, 2];
        v.extend(head.to_le_bytes());
        v.extend([16, 0]);
        v.extend(cells);
        v
    };
    ring_seed("rewind_marker", rewound(10, &[12], &[(10, 1), (11, 2), (0, 3)]));
    ring_seed("rewind_marker_at_the_ring_start", rewound(16, &[0], &[(1, 1)]));

    let rma: Vec<Vec<u8>> = rma_records().into_iter().map(|r| r.1).collect();
    out.push(("shm_ring", "rma_and_atomic_records".to_string(), seed_ring(6, 2, &rma)));
    let mut rma_stream = hello_rec(hello::Kind::Request, "127.0.0.1:4000", false);
    rma.iter().for_each(|r| rma_stream.extend(r));
    let mut v = vec![0x25u8, 17, 64, 3, 200];
    v.extend(rma_stream);
    out.push(("tcp_reader", "handshake_then_rma_and_atomics".to_string(), v));

    for (name, v) in live_seeds() {
        out.push(("tcp_live", name.to_string(), v));
    }

    let mut gi = |name: &str, v: Vec<u8>| out.push(("getinfo_hints", name.to_string(), v));
    gi("rdm_tagged", vec![0, 1, 0, 0, 4, 1, 1, 1, 1, 0, 0, 0, 0]);
    gi(
        "msg_endpoint",
        vec![1, 0, 1, 5, 12, 2, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1],
    );
    gi("everything", vec![3; 64]);

    let mut av = |name: &str, v: Vec<u8>| out.push(("av_insert", name.to_string(), v));
    let shm_str = Addr::Shm(0x1234).to_bytes();
    let mut strs = vec![0u8, 4];
    strs.extend(&shm_str);
    strs.extend(b"fi_sockaddr_in://10.0.0.1:7\0garbage\0");
    av("shm_strings", strs);
    let mut sins = vec![1u8, 2];
    for a in ["10.0.0.1:7", "127.0.0.1:0", "224.0.0.1:9"] {
        sins.extend(Addr::Inet(a.parse().expect("an address")).to_bytes());
    }
    av("tcp_sockaddr_in", sins);
    let mut sin6 = vec![1u8, 3];
    sin6.extend(Addr::Inet("[::1]:9".parse().expect("an address")).to_bytes());
    av("tcp_sockaddr_in6", sin6);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Cases per property in `cargo test` (`PROPTEST_CASES` overrides):
    /// enough to find a planted bug, few enough for make test.
    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(512),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    /// Mutations of a real input: bytes overwritten, inserted, removed, and
    /// the input cut; most cases keep most of the structure.
    fn mutated(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
        let len = seed.len().max(1);
        (
            proptest::collection::vec((0..len, any::<u8>(), 0u8..4), 0..6),
            0..=len,
            any::<bool>(),
        )
            .prop_map(move |(edits, cut, do_cut)| {
                let mut v = seed.clone();
                for (at, b, kind) in edits {
                    let at = at.min(v.len().saturating_sub(1));
                    match kind {
                        0 | 1 if !v.is_empty() => v[at] = b,
                        2 => v.insert(at, b),
                        _ if !v.is_empty() => {
                            v.remove(at);
                        }
                        _ => v.push(b),
                    }
                }
                if do_cut {
                    v.truncate(cut);
                }
                v
            })
    }

    fn seeds_of(target: &str) -> Vec<Vec<u8>> {
        seeds().into_iter().filter(|s| s.0 == target).map(|s| s.2).collect()
    }

    /// Inputs: a seed of the target, mutated, or plain random bytes.
    fn inputs(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
        let seeds = seeds_of(target);
        let n = seeds.len();
        prop_oneof![
            4 => (0..n).prop_flat_map(move |i| mutated(seeds[i].clone())),
            1 => proptest::collection::vec(any::<u8>(), 0..512),
        ]
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn prop_tcp_reader(data in inputs("tcp_reader")) { tcp_reader(&data) }

        #[test]
        fn prop_records(data in inputs("records")) { records(&data) }

        #[test]
        fn prop_shm_ring(data in inputs("shm_ring")) { shm_ring(&data) }

        #[test]
        fn prop_av_insert(data in inputs("av_insert")) { av_insert(&data) }
    }

    proptest! {
        // Real sockets and two ports per case (10-100 ms): fewer cases.
        #![proptest_config(ProptestConfig { cases: config().cases / 32, ..config() })]

        #[test]
        fn prop_tcp_live(data in inputs("tcp_live")) { tcp_live(&data) }
    }

    proptest! {
        // fi_getinfo resolves interfaces for each tcp entry: fewer cases.
        #![proptest_config(ProptestConfig { cases: config().cases / 4, ..config() })]

        #[test]
        fn prop_getinfo_hints(data in proptest::collection::vec(any::<u8>(), 0..160)) { getinfo_hints(&data) }
    }

    /// The committed corpus is what [`seeds`] makes (regenerate with
    /// `make fuzz-corpus`), and every file of every corpus directory (the
    /// seeds and anything a fuzzing run added) passes its target.
    #[test]
    fn corpus_passes_and_seeds_are_committed() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (target, name, bytes) in seeds() {
            let p = root.join(target).join(&name);
            let on_disk = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (make fuzz-corpus)", p.display()));
            assert_eq!(
                on_disk,
                bytes,
                "{} differs from its seed (make fuzz-corpus)",
                p.display()
            );
        }
        for (target, body) in TARGETS {
            let dir = root.join(target);
            let mut n = 0;
            for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
                let p = e.expect("a directory entry").path();
                body(&std::fs::read(&p).expect("a corpus file"));
                n += 1;
            }
            assert!(n > 0, "{}: empty corpus", dir.display());
        }
    }

    /// Writes the seed corpus (`make fuzz-corpus` runs this).
    #[test]
    #[ignore]
    fn write_seed_corpus() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
        for (target, name, bytes) in seeds() {
            let d = root.join(target);
            std::fs::create_dir_all(&d).expect("corpus directory");
            std::fs::write(d.join(name), bytes).expect("corpus file");
        }
    }
}
