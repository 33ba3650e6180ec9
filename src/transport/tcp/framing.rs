//! Record framing on a TCP stream: the receive state machine ([`Reader`])
//! and the per-peer send queue ([`WriteQueue`]). Both are pure: they move
//! bytes through the [`ByteSource`] / [`ByteSink`] traits, which the port
//! implements with `readv` / `sendmsg` and the tests with scripted streams
//! cut into arbitrary pieces.
//!
//! Receiving a record (docs/protocol.md):
//! 1. read the 64-byte header into the reader's own buffer, decode it and
//!    validate everything with `WireHdr::check` against the endpoint's
//!    limits, then the ops a TCP stream may carry;
//! 2. EAGER, DATA, and the RMA chunks WRITE and READ_RESP (`op::placed`):
//!    ask the endpoint core where the payload goes (`place`) and read
//!    it **straight into the matched receive buffer** (scatter read over the
//!    application's iov; the bytes beyond a truncated receive go to a
//!    scratch buffer and are dropped), or into a vector sized exactly to the
//!    message for an unexpected one (the core checked its budget first), or
//!    nowhere (`Stall`: the header stays, the socket is not read again until
//!    a later pass accepts it);
//! 3. control records (ACK) are at most `CTL_MAX` bytes, read into the
//!    reader's fixed buffer; handshake records go back to the port.
//!
//! A read that fetches a header, or finishes a payload, also asks for up to
//! [`READ_AHEAD`] bytes more in the same system call (the following
//! records): a stream of small messages then costs about one `readv` per
//! read-ahead buffer instead of two per message, for one copy of those
//! small payloads out of the read-ahead buffer. The bulk of a large
//! payload is still read straight into the matched receive buffer (no copy).
//!
//! Memory per connection: the 64-byte header, `CTL_MAX` control bytes and
//! the read-ahead buffer; nothing a peer says can make the reader allocate
//! beyond what the core's placement allows.

use crate::base::error::{Error, Result};
use crate::sys::net::Io;
use crate::transport::iov::IovList;
use crate::transport::proto::{flag, op, BadRecord, Limits, WireHdr, HDR_LEN};
use crate::transport::{Disposition, PayloadIn, Place};
use std::collections::VecDeque;

/// Largest control payload (HELLO: an address; `WireHdr::check` caps it).
pub(crate) const CTL_MAX: usize = 256;
/// Most iovecs one read or write uses.
const IOV_BATCH: usize = 128;

/// A control payload as it goes on a stream. An RTS names the sender's
/// buffers for a pull by cross-memory attach, which no TCP peer can do:
/// their addresses are zeroed (the message is known to the peer by its
/// `msg_id` alone; only the lengths stay) and `CMA_OK` is cleared, so no
/// address of ours ever reaches the network.
pub(crate) fn outgoing_payload(h: &mut WireHdr, b: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    if h.op == op::RTS {
        h.flags &= !flag::CMA_OK;
        for e in v.chunks_exact_mut(16) {
            e[..8].fill(0);
        }
    }
    v
}

/// Where stream bytes come from.
pub(crate) trait ByteSource {
    /// Scatters available bytes into `iov` in order.
    ///
    /// # Safety
    /// Every iovec must describe writable memory.
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io;
}

/// Where stream bytes go.
pub(crate) trait ByteSink {
    /// Gathers bytes from `iov` onto the stream.
    ///
    /// # Safety
    /// Every iovec must describe readable memory.
    unsafe fn write(&mut self, iov: &[libc::iovec]) -> Io;
}

/// The endpoint core as the reader sees it (the port adds the source).
pub(crate) trait Sink {
    fn place(&mut self, hdr: &WireHdr) -> Place;
    fn placed(&mut self, handle: u32, result: Result<()>);
    fn buffered(&mut self, hdr: &WireHdr, data: Vec<u8>);
    fn control(&mut self, hdr: &WireHdr, payload: &[u8]) -> Disposition;
}

/// Why a stream cannot go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Broken {
    /// The socket failed (reset, timeout, ...).
    Io(Error),
    /// End of stream in the middle of a record.
    Truncated,
    /// A header that fails validation.
    Bad(BadRecord),
    /// A valid record that this stream may not carry now (data before the
    /// handshake, a second handshake, rendezvous records).
    Protocol,
}

/// What a stream may carry now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Before the connection is established: only handshake records (and
    /// BYE); anything else is a protocol violation.
    Handshake,
    /// Established: the endpoint records (and BYE); a second handshake
    /// record is a protocol violation.
    Established,
}

/// How a [`Reader::pump`] call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing more to read now.
    Drained,
    /// The per-call read budget is used up; more may be waiting.
    Budget,
    /// The core cannot take the current record now (backpressure).
    Stalled,
    /// A HELLO or BYE for the connection layer; a HELLO's payload is
    /// [`Reader::link_payload`].
    Link(WireHdr),
    /// Orderly end of stream at a record boundary.
    Eof,
    Broken(Broken),
}

enum State {
    /// Filling the header buffer (`hdr_got` bytes so far).
    Header,
    /// Filling the control buffer.
    Ctl { hdr: WireHdr, got: usize },
    /// A complete control record waiting for the core.
    CtlReady { hdr: WireHdr },
    /// An EAGER header waiting for a placement.
    Place { hdr: WireHdr },
    /// Payload into a matched receive: bytes `< take` to `dst`, the rest
    /// dropped; `got` payload bytes consumed so far.
    Into {
        hdr: WireHdr,
        handle: u32,
        dst: IovList,
        take: usize,
        got: usize,
    },
    /// Unexpected payload into an exactly sized vector.
    Buffer { hdr: WireHdr, buf: Vec<u8> },
    /// A whole unexpected payload, handed to the core only now: the core
    /// is asked again (`place`), so that a receive posted while the bytes
    /// were arriving takes this message (copied from the vector) and the
    /// order of arrival is kept.
    Staged { hdr: WireHdr, buf: Vec<u8> },
    /// Payload nobody wants.
    Discard { hdr: WireHdr, got: usize },
}

/// Bytes a reader reads ahead of the record it is on.
pub(crate) const READ_AHEAD: usize = 4096;

/// One connection's receive side.
pub(crate) struct Reader {
    hdr_buf: [u8; HDR_LEN],
    hdr_got: usize,
    ctl: [u8; CTL_MAX],
    link_len: usize,
    state: State,
    /// Stream bytes read ahead (`ahead[ahead_pos..ahead_len]` come next).
    /// A read that fetches a header or finishes a payload also asks for up
    /// to [`READ_AHEAD`] more bytes, so that a small record (or several)
    /// costs one read instead of two per record; the read-ahead bytes are
    /// then copied where they belong. Large payloads are still read
    /// straight into the matched receive buffer. Reads only happen when
    /// this buffer is empty.
    ahead: Box<[u8]>,
    ahead_pos: usize,
    ahead_len: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

/// Before a read in `Reader::pump`: why not to make it (the last read came
/// back short, or the pass used its reads), else `None` with the read
/// counted.
fn read_gate(drained: bool, reads: &mut usize, max_reads: usize) -> Option<Outcome> {
    if drained {
        return Some(Outcome::Drained);
    }
    if *reads == max_reads {
        return Some(Outcome::Budget);
    }
    *reads += 1;
    None
}

fn iov(p: *const u8, n: usize) -> libc::iovec {
    libc::iovec {
        iov_base: p as *mut libc::c_void,
        iov_len: n,
    }
}

/// An iovec a read writes into: the pointer must come from a mutable
/// borrow (`as_mut_ptr`), taken after any `&mut self` call whose result
/// goes into the same iovec array (such a call re-asserts unique access to
/// the whole reader and would invalidate a pointer into its inline
/// buffers; Miri's Stacked Borrows check, `make miri`).
fn iov_mut(p: *mut u8, n: usize) -> libc::iovec {
    libc::iovec {
        iov_base: p as *mut libc::c_void,
        iov_len: n,
    }
}

impl Reader {
    pub(crate) fn new() -> Reader {
        Reader {
            hdr_buf: [0; HDR_LEN],
            hdr_got: 0,
            ctl: [0; CTL_MAX],
            link_len: 0,
            state: State::Header,
            ahead: vec![0u8; READ_AHEAD].into_boxed_slice(),
            ahead_pos: 0,
            ahead_len: 0,
        }
    }

    /// The payload of the last [`Outcome::Link`] record.
    pub(crate) fn link_payload(&self) -> &[u8] {
        &self.ctl[..self.link_len]
    }

    #[cfg(test)]
    /// Whether a record is partly read (end of stream now would cut it).
    pub(crate) fn mid_record(&self) -> bool {
        !matches!(self.state, State::Header) || self.hdr_got > 0 || self.ahead_avail() > 0
    }

    /// Bytes held for an unexpected message not yet handed to the core.
    pub(crate) fn staged_bytes(&self) -> usize {
        match &self.state {
            State::Buffer { hdr, .. } => hdr.payload as usize,
            State::Staged { buf, .. } => buf.len(),
            _ => 0,
        }
    }

    /// Whether the reader holds stream bytes it has not handed over (a
    /// stalled record, read-ahead bytes): the socket may be empty, so a
    /// sleeper would not wake for them.
    pub(crate) fn holds_input(&self) -> bool {
        self.waiting_for_core() || self.ahead_avail() > 0
    }

    /// Whether the reader waits for the core (`Stall`).
    pub(crate) fn waiting_for_core(&self) -> bool {
        matches!(
            self.state,
            State::Place { .. } | State::CtlReady { .. } | State::Staged { .. }
        )
    }

    /// The stream is gone: a payload being placed into a receive buffer
    /// completes in error (exactly once); everything else is dropped.
    pub(crate) fn abort(&mut self, sink: &mut dyn Sink, err: Error) {
        if let State::Into { handle, .. } = std::mem::replace(&mut self.state, State::Header) {
            sink.placed(handle, Err(err));
        }
        self.hdr_got = 0;
        self.ahead_pos = 0;
        self.ahead_len = 0;
    }

    fn ahead_avail(&self) -> usize {
        self.ahead_len - self.ahead_pos
    }

    /// Takes up to `n` read-ahead bytes: their range in `ahead`.
    fn take_ahead(&mut self, n: usize) -> core::ops::Range<usize> {
        let n = n.min(self.ahead_avail());
        let r = self.ahead_pos..self.ahead_pos + n;
        self.ahead_pos += n;
        r
    }

    /// The iovec for a read-ahead (only used when the buffer is empty).
    fn ahead_iov(&mut self) -> libc::iovec {
        iov(self.ahead.as_mut_ptr(), self.ahead.len())
    }

    /// Accounts a read of `n` bytes of which the first `want` were asked
    /// for by the record (the rest landed in the read-ahead buffer, if it
    /// was offered). Returns the record's share.
    fn split_read(&mut self, n: usize, want: usize) -> usize {
        let p = n.min(want);
        self.ahead_pos = 0;
        self.ahead_len = n - p;
        p
    }

    /// Reads and dispatches records until the socket is drained, the core
    /// stalls, a link record arrives, or `max_reads` reads were made.
    /// `stage`: whether the handshake is done (data records allowed).
    /// `scratch` receives dropped payload bytes.
    pub(crate) fn pump(
        &mut self,
        src: &mut dyn ByteSource,
        sink: &mut dyn Sink,
        lim: &Limits,
        stage: Stage,
        scratch: &mut [u8],
        max_reads: usize,
    ) -> Outcome {
        let mut local = [0u8; 64];
        let scratch: &mut [u8] = if scratch.is_empty() { &mut local } else { scratch };
        let established = stage == Stage::Established;
        let mut reads = 0usize;
        // The last read came back short: the socket has nothing more now.
        let mut drained = false;
        loop {
            match &mut self.state {
                State::Header => {
                    if self.hdr_got < HDR_LEN {
                        let r = self.take_ahead(HDR_LEN - self.hdr_got);
                        let n = r.len();
                        self.hdr_buf[self.hdr_got..self.hdr_got + n].copy_from_slice(&self.ahead[r]);
                        self.hdr_got += n;
                    }
                    if self.hdr_got < HDR_LEN {
                        if let Some(stop) = read_gate(drained, &mut reads, max_reads) {
                            return stop;
                        }
                        let want = HDR_LEN - self.hdr_got;
                        let ahead = self.ahead_iov();
                        let v = [iov_mut(self.hdr_buf[self.hdr_got..].as_mut_ptr(), want), ahead];
                        // SAFETY: the iovecs cover the unfilled tail of our
                        // own header buffer and our (empty) read-ahead buffer.
                        match unsafe { src.read(&v) } {
                            Io::Done(n) => {
                                let n = n.min(want + READ_AHEAD);
                                self.hdr_got += self.split_read(n, want);
                                drained = n < want + READ_AHEAD;
                                continue;
                            }
                            Io::Blocked => return Outcome::Drained,
                            Io::Eof => {
                                return if self.hdr_got == 0 {
                                    Outcome::Eof
                                } else {
                                    Outcome::Broken(Broken::Truncated)
                                }
                            }
                            Io::Failed(e) => return Outcome::Broken(Broken::Io(e)),
                        }
                    }
                    self.hdr_got = 0;
                    let hdr = WireHdr::from_bytes(&self.hdr_buf);
                    if let Err(b) = hdr.check(lim) {
                        return Outcome::Broken(Broken::Bad(b));
                    }
                    let allowed = match hdr.op {
                        op::HELLO => !established,
                        op::BYE => true,
                        op::EAGER | op::ACK | op::RTS | op::CTS | op::DATA => established,
                        // RMA (docs/rma.md): chunks are placed like DATA.
                        o if op::is_rma(o) => established,
                        _ => false,
                    };
                    // The compact eager header is shm's ring form only
                    // (proto.rs); on a stream every record has the full one.
                    if !allowed || hdr.flags & flag::COMPACT != 0 {
                        return Outcome::Broken(Broken::Protocol);
                    }
                    let n = hdr.payload as usize;
                    self.state = match hdr.op {
                        // Payload-carrying data records are placed by the core
                        // (straight into the matched buffer).
                        o if op::placed(o) => State::Place { hdr },
                        _ if n > CTL_MAX => return Outcome::Broken(Broken::Bad(BadRecord::Length)),
                        _ if n > 0 => State::Ctl { hdr, got: 0 },
                        op::HELLO | op::BYE => {
                            self.link_len = 0;
                            return Outcome::Link(hdr);
                        }
                        _ => State::CtlReady { hdr },
                    };
                }
                State::Ctl { hdr, got } => {
                    let (hdr, got0) = (*hdr, *got);
                    let n = hdr.payload as usize;
                    if got0 < n {
                        let r = self.take_ahead(n - got0);
                        let k = r.len();
                        self.ctl[got0..got0 + k].copy_from_slice(&self.ahead[r]);
                        if let State::Ctl { got, .. } = &mut self.state {
                            *got = got0 + k;
                        }
                        if k > 0 {
                            continue;
                        }
                        if let Some(stop) = read_gate(drained, &mut reads, max_reads) {
                            return stop;
                        }
                        let want = n - got0;
                        let ahead = self.ahead_iov();
                        let v = [iov_mut(self.ctl[got0..].as_mut_ptr(), want), ahead];
                        // SAFETY: the iovecs cover part of our control buffer
                        // (`n <= CTL_MAX`, checked with the header) and our
                        // (empty) read-ahead buffer.
                        match unsafe { src.read(&v) } {
                            Io::Done(k) => {
                                let k = k.min(want + READ_AHEAD);
                                let p = self.split_read(k, want);
                                if let State::Ctl { got, .. } = &mut self.state {
                                    *got = got0 + p;
                                }
                                drained = k < want + READ_AHEAD;
                                continue;
                            }
                            Io::Blocked => return Outcome::Drained,
                            Io::Eof => return Outcome::Broken(Broken::Truncated),
                            Io::Failed(e) => return Outcome::Broken(Broken::Io(e)),
                        }
                    }
                    if hdr.op == op::HELLO || hdr.op == op::BYE {
                        self.link_len = n;
                        self.state = State::Header;
                        return Outcome::Link(hdr);
                    }
                    self.state = State::CtlReady { hdr };
                }
                State::CtlReady { hdr } => {
                    let hdr = *hdr;
                    let n = hdr.payload as usize;
                    match sink.control(&hdr, &self.ctl[..n]) {
                        Disposition::Consumed => self.state = State::Header,
                        Disposition::Stall => return Outcome::Stalled,
                    }
                }
                State::Place { hdr } => {
                    let hdr = *hdr;
                    let len = hdr.payload as usize;
                    self.state = match sink.place(&hdr) {
                        Place::Into { handle, dst, take } => State::Into {
                            hdr,
                            handle,
                            dst,
                            take: take.min(len).min(dst.total()),
                            got: 0,
                        },
                        Place::Buffer => State::Buffer {
                            hdr,
                            buf: Vec::with_capacity(len),
                        },
                        Place::Discard => State::Discard { hdr, got: 0 },
                        Place::Stall => return Outcome::Stalled,
                    };
                }
                State::Into {
                    hdr,
                    handle,
                    dst,
                    take,
                    got,
                } => {
                    let (len, handle, dst, take, got0) = (hdr.payload as usize, *handle, *dst, *take, *got);
                    if got0 == len {
                        self.state = State::Header;
                        sink.placed(handle, Ok(()));
                        continue;
                    }
                    if self.ahead_avail() > 0 {
                        // Read-ahead bytes first: the part below `take` goes
                        // to the receive buffer, the rest is dropped.
                        let r = self.take_ahead(len - got0);
                        let a = r.len();
                        let to_dst = if got0 < take { (take - got0).min(a) } else { 0 };
                        // SAFETY: `dst` is the matched receive's buffer (the
                        // core's placement contract); the bytes are ours.
                        unsafe {
                            PayloadIn::copy_to_iov(&self.ahead[r.start..r.start + to_dst], 0, to_dst, &dst, got0)
                        };
                        if let State::Into { got, .. } = &mut self.state {
                            *got = got0 + a;
                        }
                        continue;
                    }
                    if let Some(stop) = read_gate(drained, &mut reads, max_reads) {
                        return stop;
                    }
                    let mut v = [iov(core::ptr::null(), 0); IOV_BATCH];
                    let mut nv = 0;
                    let mut want = 0;
                    if got0 < take {
                        dst.for_range(got0, take - got0, |p, n, _| {
                            if nv < IOV_BATCH - 2 {
                                v[nv] = iov(p as *const u8, n);
                                nv += 1;
                                want += n;
                            }
                        });
                    }
                    if got0 + want >= take && got0 + want < len {
                        let d = (len - (got0 + want)).min(scratch.len());
                        v[nv] = iov_mut(scratch.as_mut_ptr(), d);
                        nv += 1;
                        want += d;
                    }
                    match self.read_payload(src, &mut v, nv, want, len - got0) {
                        Ok((p, short)) => {
                            if let State::Into { got, .. } = &mut self.state {
                                *got = got0 + p;
                            }
                            drained = short;
                        }
                        Err(o) => return o,
                    }
                }
                State::Buffer { hdr, buf } => {
                    let len = hdr.payload as usize;
                    if buf.len() == len {
                        let (hdr, buf) = (*hdr, std::mem::take(buf));
                        self.state = State::Staged { hdr, buf };
                        continue;
                    }
                    let have = buf.len();
                    if self.ahead_avail() > 0 {
                        let r = self.take_ahead(len - have);
                        if let State::Buffer { buf, .. } = &mut self.state {
                            buf.extend_from_slice(&self.ahead[r]);
                        }
                        continue;
                    }
                    if let Some(stop) = read_gate(drained, &mut reads, max_reads) {
                        return stop;
                    }
                    let want = len - have;
                    let State::Buffer { buf, .. } = &mut self.state else {
                        continue;
                    };
                    let spare = buf.spare_capacity_mut().as_mut_ptr() as *mut u8;
                    let mut v = [iov_mut(spare, want), iov(core::ptr::null(), 0)];
                    match self.read_payload(src, &mut v, 1, want, want) {
                        Ok((p, short)) => {
                            if let State::Buffer { buf, .. } = &mut self.state {
                                // SAFETY: `read_payload` wrote `p <= want`
                                // initialised bytes at the start of the spare
                                // capacity (`want` bytes of it were reserved).
                                unsafe { buf.set_len(buf.len() + p) };
                            }
                            drained = short;
                        }
                        Err(o) => return o,
                    }
                }
                State::Staged { hdr, buf } => {
                    // Ask again: a receive posted while the payload was
                    // arriving must get this message, not the next one.
                    let hdr = *hdr;
                    match sink.place(&hdr) {
                        Place::Stall => return Outcome::Stalled,
                        p => {
                            let buf = std::mem::take(buf);
                            self.state = State::Header;
                            match p {
                                Place::Into { handle, dst, take } => {
                                    let n = take.min(buf.len());
                                    // SAFETY: `dst` is the matched receive's
                                    // buffer (the core's placement contract).
                                    unsafe { PayloadIn::copy_to_iov(&buf[..], 0, n, &dst, 0) };
                                    sink.placed(handle, Ok(()));
                                }
                                Place::Buffer => sink.buffered(&hdr, buf),
                                _ => {}
                            }
                        }
                    }
                }
                State::Discard { hdr, got } => {
                    let (len, got0) = (hdr.payload as usize, *got);
                    if got0 == len {
                        self.state = State::Header;
                        continue;
                    }
                    if self.ahead_avail() > 0 {
                        let a = self.take_ahead(len - got0).len();
                        if let State::Discard { got, .. } = &mut self.state {
                            *got = got0 + a;
                        }
                        continue;
                    }
                    if let Some(stop) = read_gate(drained, &mut reads, max_reads) {
                        return stop;
                    }
                    let want = (len - got0).min(scratch.len());
                    let mut v = [iov_mut(scratch.as_mut_ptr(), want), iov(core::ptr::null(), 0)];
                    match self.read_payload(src, &mut v, 1, want, len - got0) {
                        Ok((p, short)) => {
                            if let State::Discard { got, .. } = &mut self.state {
                                *got = got0 + p;
                            }
                            drained = short;
                        }
                        Err(o) => return o,
                    }
                }
            }
        }
    }

    /// One read of payload bytes (`want` of them described by `v[..nv]`);
    /// when that is all the payload left (`want == rest`), the read also
    /// fills the read-ahead buffer (the next header, and more). Returns
    /// (payload bytes read, whether the read came back short). Called only
    /// with the read-ahead buffer empty.
    fn read_payload(
        &mut self,
        src: &mut dyn ByteSource,
        v: &mut [libc::iovec],
        mut nv: usize,
        want: usize,
        rest: usize,
    ) -> core::result::Result<(usize, bool), Outcome> {
        let mut total = want;
        if want == rest && nv < v.len() {
            v[nv] = self.ahead_iov();
            nv += 1;
            total += READ_AHEAD;
        }
        // SAFETY: the iovecs describe the matched receive buffer (valid and
        // ours to write until the receive completes — the core's placement
        // contract), the reader's scratch or read-ahead buffers, or a
        // vector's spare capacity, all writable.
        match unsafe { src.read(&v[..nv]) } {
            Io::Done(n) => {
                let n = n.min(total);
                let p = self.split_read(n, want);
                Ok((p, n < total))
            }
            Io::Blocked => Ok((0, true)),
            Io::Eof => Err(Outcome::Broken(Broken::Truncated)),
            Io::Failed(e) => Err(Outcome::Broken(Broken::Io(e))),
        }
    }
}

/// The payload of a queued record.
pub(crate) enum Body {
    None,
    /// Copied (inject, or a copy requested).
    Owned(Vec<u8>),
    /// The application's buffer, sent in place (valid until the send's
    /// completion, fi_msg(3)).
    Iov(IovList),
}

/// A record waiting to go out.
pub(crate) struct OutRecord {
    hdr: [u8; HDR_LEN],
    body: Body,
    len: usize,
    /// Bytes of header + payload already written.
    done: usize,
    /// The message to report through `Delivery::sent` once written.
    pub(crate) notify: Option<u64>,
    /// An answer to a peer's request (a control record): counted in its
    /// queue's [`WriteQueue::replies`].
    reply: bool,
}

/// What one queued answer to a peer (an ACK, RMA_ACK, CTS: a control
/// record without payload) holds in memory: the record itself.
pub(crate) const REPLY_COST: usize = core::mem::size_of::<OutRecord>();

impl OutRecord {
    pub(crate) fn new(hdr: [u8; HDR_LEN], body: Body) -> OutRecord {
        let len = match &body {
            Body::None => 0,
            Body::Owned(v) => v.len(),
            Body::Iov(l) => l.total(),
        };
        OutRecord {
            hdr,
            body,
            len,
            done: 0,
            notify: None,
            reply: false,
        }
    }

    fn total(&self) -> usize {
        HDR_LEN + self.len
    }

    /// Replaces an application buffer by a copy (the caller may reuse it).
    pub(crate) fn make_owned(&mut self) {
        if let Body::Iov(l) = &self.body {
            let mut v = Vec::with_capacity(self.len);
            l.for_range(0, self.len, |p, n, _| {
                // SAFETY: application memory named by the send's iov, valid
                // during the send call that asks for the copy.
                v.extend_from_slice(unsafe { core::slice::from_raw_parts(p as *const u8, n) })
            });
            self.body = Body::Owned(v);
        }
    }

    /// Appends iovecs for the unwritten bytes; false if `v` ran out of room.
    fn gather(&self, v: &mut IovBuf) -> bool {
        let cap = IOV_BATCH;
        let mut skip = self.done;
        if skip < HDR_LEN {
            if v.len() == cap {
                return false;
            }
            v.push(iov(self.hdr[skip..].as_ptr(), HDR_LEN - skip));
            skip = 0;
        } else {
            skip -= HDR_LEN;
        }
        match &self.body {
            Body::None => true,
            Body::Owned(b) => {
                if skip < b.len() {
                    if v.len() == cap {
                        return false;
                    }
                    v.push(iov(b[skip..].as_ptr(), b.len() - skip));
                }
                true
            }
            Body::Iov(l) => {
                let mut fit = true;
                l.for_range(skip, self.len - skip.min(self.len), |p, n, _| {
                    if v.len() == cap {
                        fit = false;
                    } else {
                        v.push(iov(p as *const u8, n));
                    }
                });
                fit
            }
        }
    }
}

/// Up to [`IOV_BATCH`] iovecs on the stack (one `sendmsg`'s worth).
struct IovBuf {
    v: [libc::iovec; IOV_BATCH],
    n: usize,
}

impl IovBuf {
    fn new() -> IovBuf {
        IovBuf {
            v: [iov(core::ptr::null(), 0); IOV_BATCH],
            n: 0,
        }
    }
    fn clear(&mut self) {
        self.n = 0;
    }
    fn len(&self) -> usize {
        self.n
    }
    fn push(&mut self, i: libc::iovec) {
        self.v[self.n] = i;
        self.n += 1;
    }
    fn as_slice(&self) -> &[libc::iovec] {
        &self.v[..self.n]
    }
}

/// Send coalescing. The first data record after a progress pass is written
/// at once (a ping-pong pays nothing); the small ones posted behind it
/// before the next pass wait in the queue and go out together, in one
/// `sendmsg`, at that pass — a burst of N small sends then costs about two
/// system calls instead of N, on both sides (the receiver's read-ahead takes
/// them in one read). Nothing waits while somebody sleeps on the engine (a
/// blocked reader, an FD armed by `fi_trywait`, a progress thread): the
/// arming flushes, and records posted meanwhile are written at once.
/// `FI_MORE` on a send makes even the first record of a burst wait.
/// `FI_RUSTFAB_TCP_COALESCE=0` turns the implicit part off (every send is
/// written at once unless it carries `FI_MORE`), for applications that post
/// a burst and then compute for long without calling into libfabric.
pub(crate) struct Cork {
    /// A data record was queued since the last progress pass (or the
    /// application announced more with `FI_MORE`).
    burst: bool,
    /// Somebody sleeps on the engine: write everything at once.
    sleepers: bool,
    /// `FI_RUSTFAB_TCP_COALESCE` (default on); `FI_MORE` works either way.
    implicit: bool,
}

/// Largest payload a record may have to wait in a burst.
pub(crate) const CORK_RECORD_MAX: usize = 4096;
/// A burst is written once this many bytes wait.
pub(crate) const CORK_BYTES: usize = 32 << 10;

impl Cork {
    /// Coalesces bursts without `FI_MORE` when the settings say so
    /// (`FI_RUSTFAB_TCP_COALESCE`).
    pub(crate) fn new(settings: &super::TcpSettings) -> Cork {
        Cork {
            burst: false,
            sleepers: false,
            implicit: settings.coalesce,
        }
    }

    /// A data record with `payload` bytes was just queued, leaving
    /// `unsent` bytes in its queue: may it wait for the next pass?
    pub(crate) fn defer(&mut self, payload: usize, unsent: usize) -> bool {
        let wait = self.burst && !self.sleepers && payload <= CORK_RECORD_MAX && unsent < CORK_BYTES;
        self.burst = self.implicit;
        wait
    }

    /// `FI_MORE`: the application posts more at once.
    pub(crate) fn more(&mut self) {
        self.burst = true;
    }

    /// A progress pass (which writes what waits) ends the burst.
    pub(crate) fn end_burst(&mut self) {
        self.burst = false;
    }

    pub(crate) fn set_sleepers(&mut self, n: usize) {
        self.sleepers = n > 0;
    }
}

/// A peer's queue of records (FIFO: FI_ORDER_SAS).
#[derive(Default)]
pub(crate) struct WriteQueue {
    q: VecDeque<OutRecord>,
    unsent: usize,
    /// Bytes of memory the queued answers to the peer's requests hold
    /// ([`REPLY_COST`] each): what the peer's budget bounds.
    replies: usize,
}

/// A queue that emptied with room for more than this many records gives
/// the memory back (a flood's answers, drained, leave nothing behind).
const KEEP_CAPACITY: usize = 256;

impl WriteQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Bytes queued and not yet written.
    pub(crate) fn unsent(&self) -> usize {
        self.unsent
    }

    pub(crate) fn push(&mut self, r: OutRecord) {
        self.unsent += r.total() - r.done;
        self.q.push_back(r);
    }

    /// Queues an answer to one of the peer's requests (counted in
    /// [`WriteQueue::replies`]).
    pub(crate) fn push_reply(&mut self, mut r: OutRecord) {
        r.reply = true;
        self.replies += REPLY_COST;
        self.push(r);
    }

    /// Bytes of memory the queued answers to the peer's requests hold.
    pub(crate) fn replies(&self) -> usize {
        self.replies
    }

    pub(crate) fn back_mut(&mut self) -> Option<&mut OutRecord> {
        self.q.back_mut()
    }

    /// Moves every record of `other` behind ours (a connection taking the
    /// records that waited for it).
    pub(crate) fn append(&mut self, other: &mut WriteQueue) {
        self.unsent += std::mem::take(&mut other.unsent);
        self.replies += std::mem::take(&mut other.replies);
        self.q.append(&mut other.q);
    }

    /// Writes as much as the stream takes. Records finished meanwhile
    /// that asked for it are appended to `sent`. `Ok(true)`: queue empty.
    pub(crate) fn flush(&mut self, out: &mut dyn ByteSink, sent: &mut Vec<u64>) -> Result<bool> {
        // On the stack: a send that writes at once allocates nothing here.
        let mut v = IovBuf::new();
        while !self.q.is_empty() {
            v.clear();
            let mut want = 0;
            for r in &self.q {
                let before = v.len();
                let fit = r.gather(&mut v);
                want += v.as_slice()[before..].iter().map(|i| i.iov_len).sum::<usize>();
                if !fit {
                    break;
                }
            }
            // SAFETY: the iovecs describe our records' headers and owned
            // payloads, or application buffers that stay valid until the
            // send completes (reported below, after they are written).
            let n = match unsafe { out.write(v.as_slice()) } {
                Io::Done(n) => n.min(want),
                Io::Blocked => return Ok(false),
                Io::Eof => return Err(Error::CONNRESET),
                Io::Failed(e) => return Err(e),
            };
            self.advance(n, sent);
            if n < want {
                return Ok(self.q.is_empty());
            }
        }
        Ok(true)
    }

    fn advance(&mut self, mut n: usize, sent: &mut Vec<u64>) {
        self.unsent -= n.min(self.unsent);
        while n > 0 {
            let Some(r) = self.q.front_mut() else { break };
            let left = r.total() - r.done;
            if n < left {
                r.done += n;
                return;
            }
            n -= left;
            if let Some(id) = r.notify {
                sent.push(id);
            }
            if r.reply {
                self.replies -= REPLY_COST.min(self.replies);
            }
            self.q.pop_front();
        }
        // Zero-length leftovers (never produced: every record has a header).
        if self.q.is_empty() && self.q.capacity() > KEEP_CAPACITY {
            self.q.shrink_to(KEEP_CAPACITY);
        }
    }

    /// Empties the queue; returns the messages that wanted a report.
    pub(crate) fn take_notifications(&mut self) -> Vec<u64> {
        self.unsent = 0;
        self.replies = 0;
        self.q.drain(..).filter_map(|r| r.notify).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::flag;

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

    impl Sink for Core {
        fn place(&mut self, hdr: &WireHdr) -> Place {
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
        fn buffered(&mut self, hdr: &WireHdr, data: Vec<u8>) {
            self.budget -= data.len();
            self.evs.push(Ev::Buffered(hdr.tag, data));
        }
        fn control(&mut self, hdr: &WireHdr, _payload: &[u8]) -> Disposition {
            self.evs.push(Ev::Ctl(hdr.op, hdr.msg_id));
            Disposition::Consumed
        }
    }

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
            let o = r.pump(s, c, &LIM, Stage::Established, &mut scratch, 7);
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
                match r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 5) {
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
            r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 9),
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
            r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 100),
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
            r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 100),
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
            o = r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 3);
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
            r.pump(&mut s, &mut core, &LIM, Stage::Established, &mut scratch, 3),
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
            r.pump(&mut s, &mut Core::new(), &LIM, Stage::Handshake, &mut scratch, 9),
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
}
