//! The receive state machine: records read from a stream, validated, and
//! handed to the core or the port (see [`super`]).

use super::{ByteSource, CTL_MAX, IOV_BATCH};
use crate::base::error::Error;
use crate::sys::net::Io;
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{flag, op, BadRecord, Limits, WireHdr, HDR_LEN};
use crate::transport::{Bytes, Delivery, Disposition, PayloadIn, Place};

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

/// Bytes a reader reads ahead of the record it is on (a header read asks
/// for the header and this much behind it): a record with up to 8 KiB - 64
/// of payload arrives in one read. A read that fills the buffer is followed
/// by another (more may wait), so no record with a power-of-two payload
/// fills it exactly: a 4 KiB message is one read, not one and an empty one.
pub(crate) const READ_AHEAD: usize = 8 << 10;

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
    /// [`Reader::poll`] found the stream at its end or failed: the next
    /// header read returns this instead of reading.
    polled: Option<Io>,
    /// [`Reader::poll`] read less than the buffer holds: the socket had no
    /// more then, so the next pump does not read again for nothing.
    polled_short: bool,
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

pub(super) fn iov(p: *const u8, n: usize) -> libc::iovec {
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
pub(super) fn iov_mut(p: *mut u8, n: usize) -> libc::iovec {
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
            polled: None,
            polled_short: false,
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
        self.waiting_for_core() || self.ahead_avail() > 0 || self.polled.is_some()
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
    pub(crate) fn abort(&mut self, sink: &mut dyn Delivery, err: Error) {
        if let State::Into { handle, .. } = std::mem::replace(&mut self.state, State::Header) {
            sink.placed(handle, Err(err));
        }
        self.hdr_got = 0;
        self.ahead_pos = 0;
        self.ahead_len = 0;
        self.polled = None;
        self.polled_short = false;
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

    /// Whether the stream is between records with nothing read ahead: the
    /// next pump starts with a header read.
    fn at_boundary(&self) -> bool {
        matches!(self.state, State::Header) && self.hdr_got == 0 && self.ahead_avail() == 0 && self.polled.is_none()
    }

    /// An idle stream's poll: between records, reads what arrived into the
    /// read-ahead buffer (the read a pump would start with) and says
    /// whether a pump has anything to do: bytes came (`Some(n)`), or the
    /// stream ended or failed (`Some(0)`, kept for the pump to report);
    /// `None`: nothing arrived. Anywhere else (mid-record, bytes or an
    /// outcome held) it reads nothing and answers `Some(0)`: pump.
    pub(crate) fn poll(&mut self, src: &mut dyn ByteSource) -> Option<usize> {
        if !self.at_boundary() {
            return Some(0);
        }
        let v = [self.ahead_iov()];
        // SAFETY: the iovec covers our own (empty) read-ahead buffer.
        match unsafe { src.read(&v) } {
            Io::Done(n) => {
                let n = n.min(READ_AHEAD);
                self.ahead_pos = 0;
                self.ahead_len = n;
                self.polled_short = n < READ_AHEAD;
                Some(n)
            }
            Io::Blocked => None,
            io => {
                self.polled = Some(io);
                Some(0)
            }
        }
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
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pump(
        &mut self,
        src: &mut dyn ByteSource,
        sink: &mut dyn Delivery,
        peer: &Addr,
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
        let mut drained = std::mem::take(&mut self.polled_short);
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
                        // The header and what follows it are read into the
                        // (empty) read-ahead buffer alone and the header is
                        // copied out at the top of the loop: one buffer,
                        // so the system call is a plain `recv` (no iovec
                        // array for the kernel to import), which is also
                        // what every empty poll of the stream costs.
                        let v = [self.ahead_iov()];
                        let got = match self.polled.take() {
                            Some(io) => io,
                            // SAFETY: the iovec covers our own (empty)
                            // read-ahead buffer.
                            None => unsafe { src.read(&v) },
                        };
                        match got {
                            Io::Done(n) => {
                                let n = n.min(READ_AHEAD);
                                self.ahead_pos = 0;
                                self.ahead_len = n;
                                drained = n < READ_AHEAD;
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
                    match sink.control(peer, 0, &hdr, &Bytes(&self.ctl[..n])) {
                        Disposition::Consumed => self.state = State::Header,
                        Disposition::Stall => return Outcome::Stalled,
                    }
                }
                State::Place { hdr } => {
                    let hdr = *hdr;
                    let len = hdr.payload as usize;
                    self.state = match sink.place(peer, 0, &hdr) {
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
                    match sink.place(peer, 0, &hdr) {
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
                                Place::Buffer => sink.buffered(peer, 0, &hdr, buf),
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
