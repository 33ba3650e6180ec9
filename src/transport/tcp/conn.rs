//! One TCP connection: the state machine every connection of the TCP
//! transport runs, whoever owns it — an RDM port's dials and accepted
//! connections ([`super::TcpPort`]), a connected endpoint's one connection
//! ([`crate::transport::connected`]), and a listener's handshakes
//! ([`super::listener`], for RDM ports and passive endpoints alike).
//!
//! ```text
//!  dial ──▶ Dialing ──(connect done)──▶ AwaitAnswer ──(answer)──▶ Up
//!  accept ─▶ AwaitRequest ──(request read)──▶ Held ──(owner answers)──▶ Up
//!                                         └──(owner refuses)──▶ Closing
//! ```
//!
//! What is the same for all of them lives here, once:
//! * **reading**: one loop over the framing outcomes ([`Conn::read`]):
//!   records go to a [`Delivery`] (the endpoint core through [`CoreSink`]),
//!   handshake records and BYE come back to the owner ([`Read::Link`]),
//!   backpressure stalls the stream ([`Read::Stalled`]: input interest
//!   dropped until [`Conn::offer_input`]), and every way a stream ends is
//!   one [`End`];
//! * **writing**: one [`WriteQueue`] per connection, handshake records
//!   first, written whenever the phase allows ([`Conn::flush`]); a write
//!   error dooms the connection for the owner's next pass;
//! * **waiting**: the events it needs in its owner's epoll set
//!   ([`Conn::watch`]/[`Conn::update`]), what an epoll event means
//!   ([`Conn::ready`]), and one deadline ([`Conn::deadline`]) that the
//!   owner's [`Alarm`] (one timer for all of its deadlines) wakes it for.
//!
//! The owners add only their protocol: the RDM HELLO and its tie-break
//! (`hello.rs`), the CM exchange of connected endpoints
//! (`transport/connected/cm.rs`), and what a failure means for the
//! endpoint core.

use super::framing::{Broken, ByteSink, ByteSource, Outcome, Reader, Stage, WriteQueue, REPLY_COST};
use super::limits::TUNING;
use crate::base::error::{Error, Result};
use crate::sys::net::{self, Io, TimerFd};
use crate::sys::{Epoll, IN, OUT};
use crate::transport::addr::Addr;
use crate::transport::proto::{Limits, WireHdr};
use crate::transport::{Delivery, Disposition, PayloadIn, Place};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Reads per connection per progress pass (fairness between sockets; a busy
/// peer cannot monopolise a pass).
pub(crate) const READS_PER_PASS: usize = 32;

/// Where a connection is (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Our dial: the TCP connect is in progress (writable when done).
    Dialing,
    /// Our dial is connected; our request is queued or written and the
    /// peer's answer is awaited.
    AwaitAnswer,
    /// Accepted by a listener: the peer's request is awaited.
    AwaitRequest,
    /// The request was read and the owner has not answered yet (a passive
    /// endpoint waits for the application). Nothing is read meanwhile.
    Held,
    /// Established: records flow both ways.
    Up,
    /// Writing a last record (a refusal), then closed.
    Closing,
}

/// How a stream ended ([`Read::Ended`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// End of stream at a record boundary.
    Eof,
    /// The socket failed (reset, keepalive or user timeout, ...).
    Failed(Error),
    /// The peer broke the protocol (a bad header, a record the stream may
    /// not carry now, end of stream inside a record).
    Violation(Broken),
}

impl End {
    /// The error the end gives what was in flight: the socket's own, else
    /// a reset (the peer is gone or cut off).
    pub(crate) fn error(self) -> Error {
        match self {
            End::Failed(e) => e,
            End::Eof | End::Violation(_) => Error::CONNRESET,
        }
    }
}

/// What a [`Conn::read`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Nothing more to read now (drained, or this pass's reads are used).
    Idle,
    /// The core cannot take the current record: the stream is not read
    /// again until it can (the input interest is dropped).
    Stalled,
    /// A handshake record or BYE for the owner; a handshake record's
    /// payload is [`Conn::link_payload`].
    Link(WireHdr),
    /// The stream ended.
    Ended(End),
}

/// What an epoll event on a connection asks its owner to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ready {
    /// The dial finished: connected, or its error.
    Dialed(Result<()>),
    /// A stalled stream broke: the peer is gone (its unread records cannot
    /// be taken now, and the error would wake sleepers forever).
    Broken(Error),
    /// Write what waits (`write`) and/or read (`read`).
    Io { write: bool, read: bool },
}

/// A non-blocking socket as the framing layer's byte source and sink.
pub(crate) struct Fd<'a>(pub(crate) BorrowedFd<'a>);

impl ByteSource for Fd<'_> {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io {
        // SAFETY: forwarded contract.
        unsafe { net::read_iov(self.0, iov) }
    }
}

impl ByteSink for Fd<'_> {
    unsafe fn write(&mut self, iov: &[libc::iovec]) -> Io {
        // SAFETY: forwarded contract.
        unsafe { net::send_iov(self.0, iov) }
    }
}

/// A socket that counts the bytes read from it.
struct Counting<'a> {
    fd: Fd<'a>,
    got: usize,
}

impl ByteSource for Counting<'_> {
    unsafe fn read(&mut self, iov: &[libc::iovec]) -> Io {
        // SAFETY: forwarded contract.
        let r = unsafe { self.fd.read(iov) };
        if let Io::Done(n) = r {
            self.got += n;
        }
        r
    }
}

/// The endpoint core behind a connection's reader: a [`Delivery`] that
/// forwards to the core's and adds what one connection among others needs
/// — the peer's answer budget and the staging cap shared with the other
/// connections — which is why it exists beside the core's own.
pub(crate) struct CoreSink<'a> {
    pub(crate) d: &'a mut dyn Delivery,
    /// Bytes other connections hold for unexpected messages still arriving
    /// (the core counts them against its budget only once handed over);
    /// with several connections filling vectors at once, their sum stays
    /// within one budget's worth of `staging_max` (one message at a time
    /// always may go, whatever its size).
    pub(crate) staged_elsewhere: usize,
    pub(crate) staging_max: usize,
    /// Bytes of answers the peer's records may still make us queue
    /// towards it (its budget, docs/security.md "Peer budgets"): each
    /// record taken is charged one answer ([`REPLY_COST`]); when the
    /// budget cannot pay for one, the record is left in the stream
    /// (backpressure) and `over_budget` says why.
    pub(crate) reply_room: usize,
    pub(crate) over_budget: bool,
}

impl<'a> CoreSink<'a> {
    /// A sink for the only connection there is (no other staging).
    pub(crate) fn new(d: &'a mut dyn Delivery) -> CoreSink<'a> {
        CoreSink {
            d,
            staged_elsewhere: 0,
            staging_max: usize::MAX,
            reply_room: usize::MAX,
            over_budget: false,
        }
    }

    /// Pays for the answer a record may make us queue; false (the record
    /// must wait) when the peer's budget cannot.
    #[inline]
    fn charge(&mut self) -> bool {
        if self.reply_room < REPLY_COST {
            self.over_budget = true;
            return false;
        }
        self.reply_room -= REPLY_COST;
        true
    }
}

impl Delivery for CoreSink<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        if !self.charge() {
            return Place::Stall;
        }
        match self.d.place(src, src_pid, hdr) {
            Place::Buffer
                if self.staged_elsewhere > 0
                    && self.staged_elsewhere.saturating_add(hdr.len as usize) > self.staging_max =>
            {
                self.reply_room += REPLY_COST;
                Place::Stall
            }
            p => {
                if p == Place::Stall {
                    self.reply_room += REPLY_COST;
                }
                p
            }
        }
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.d.placed(handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.d.buffered(src, src_pid, hdr, data)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if !self.charge() {
            return Disposition::Stall;
        }
        let r = self.d.control(src, src_pid, hdr, payload);
        if r == Disposition::Stall {
            self.reply_room += REPLY_COST;
        }
        r
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.d.sent(msg_id, result)
    }
}

/// The [`Delivery`] of a handshake's reader: a handshake has no data
/// records (the reader refuses them before the connection is established),
/// so nothing reaches a core and there is no core to pass it.
pub(crate) struct NullSink;

impl NullSink {
    /// The source a handshake's reader is given (no record reaches a core).
    pub(crate) const PEER: Addr = Addr::Inet(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
}

impl Delivery for NullSink {
    fn place(&mut self, _src: &Addr, _src_pid: i32, _hdr: &WireHdr) -> Place {
        Place::Discard
    }
    fn placed(&mut self, _handle: u32, _result: Result<()>) {}
    fn buffered(&mut self, _src: &Addr, _src_pid: i32, _hdr: &WireHdr, _data: Vec<u8>) {}
    fn control(&mut self, _src: &Addr, _src_pid: i32, _hdr: &WireHdr, _payload: &dyn PayloadIn) -> Disposition {
        Disposition::Consumed
    }
    fn sent(&mut self, _msg_id: u64, _result: Result<()>) {}
}

/// One connection (see the module documentation).
pub(crate) struct Conn {
    sock: OwnedFd,
    phase: Phase,
    reader: Reader,
    queue: WriteQueue,
    deadline: Option<Instant>,
    /// The token and the events registered in the owner's epoll set (None:
    /// not in it).
    token: u64,
    interest: Option<u32>,
    /// The core could not take the current record: not reading.
    stalled: bool,
    /// An error found while writing (outside the owner's pass), for the
    /// owner's next pass.
    doomed: Option<Error>,
    /// Bytes the last [`Conn::read`] took from the socket.
    last_got: usize,
    /// Bytes [`Conn::poll_input`] took, counted in the next read's.
    polled_got: usize,
}

impl Conn {
    fn new(sock: OwnedFd, phase: Phase, deadline: Option<Instant>) -> Conn {
        Conn {
            sock,
            phase,
            reader: Reader::new(),
            queue: WriteQueue::default(),
            deadline,
            token: 0,
            interest: None,
            stalled: false,
            doomed: None,
            last_got: 0,
            polled_got: 0,
        }
    }

    /// Starts a dial to `to` from `from` (a socket bound already) or from a
    /// new socket; it must be connected by `timeout` from now.
    pub(crate) fn dial(from: Option<OwnedFd>, to: &SocketAddr, timeout: Duration) -> Result<Conn> {
        let sock = match from {
            Some(s) => s,
            None => net::stream_socket(to)?,
        };
        net::tune_connection(sock.as_fd(), &TUNING);
        net::connect(sock.as_fd(), to)?;
        Ok(Conn::new(sock, Phase::Dialing, Some(Instant::now() + timeout)))
    }

    /// A connection a listener accepted; its request is due by `timeout`.
    pub(crate) fn accepted(sock: OwnedFd, timeout: Duration) -> Conn {
        net::tune_connection(sock.as_fd(), &TUNING);
        Conn::new(sock, Phase::AwaitRequest, Some(Instant::now() + timeout))
    }

    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// Sets the socket options again, to `t`.
    pub(crate) fn tune(&self, t: &net::Tuning) {
        net::tune_connection(self.sock.as_fd(), t);
    }

    pub(crate) fn set_phase(&mut self, p: Phase) {
        self.phase = p;
    }

    /// When the owner gives up on the connection's current phase.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    pub(crate) fn set_deadline(&mut self, t: Option<Instant>) {
        self.deadline = t;
    }

    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|t| t <= now)
    }

    pub(crate) fn local_addr(&self) -> Result<SocketAddr> {
        net::local_addr(self.sock.as_fd())
    }

    pub(crate) fn peer_addr(&self) -> Result<SocketAddr> {
        net::peer_addr(self.sock.as_fd())
    }

    pub(crate) fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The payload of the last [`Read::Link`] record.
    pub(crate) fn link_payload(&self) -> &[u8] {
        self.reader.link_payload()
    }

    /// The stream is gone: a payload being placed into a receive buffer
    /// completes with `err` (exactly once); nothing is read any more.
    pub(crate) fn abort_reader(&mut self, sink: &mut dyn Delivery, err: Error) {
        self.reader.abort(sink, err);
        self.stalled = false;
    }

    pub(crate) fn stalled(&self) -> bool {
        self.stalled
    }

    pub(crate) fn queue(&self) -> &WriteQueue {
        &self.queue
    }

    pub(crate) fn queue_mut(&mut self) -> &mut WriteQueue {
        &mut self.queue
    }

    pub(crate) fn doomed(&self) -> Option<Error> {
        self.doomed
    }

    pub(crate) fn take_doomed(&mut self) -> Option<Error> {
        self.doomed.take()
    }

    /// The socket's pending error (SO_ERROR): a finished connect's result,
    /// or why a connection broke.
    fn socket_error(&self) -> Option<Error> {
        net::take_error(self.sock.as_fd())
    }

    /// Writes what the queue holds, unless the connect is still in progress
    /// or the connection is doomed. Records finished meanwhile that asked
    /// for a report are added to `sent`; an error dooms the connection.
    /// Returns whether the queue is empty. The owner updates the interest.
    pub(crate) fn flush(&mut self, sent: &mut Vec<(u64, Result<()>)>) -> bool {
        if self.phase == Phase::Dialing || self.doomed.is_some() {
            return self.queue.is_empty();
        }
        let mut done = Vec::new();
        let r = self.queue.flush(&mut Fd(self.sock.as_fd()), &mut done);
        sent.extend(done.into_iter().map(|id| (id, Ok(()))));
        match r {
            Ok(empty) => empty,
            Err(e) => {
                self.doomed = Some(e);
                false
            }
        }
    }

    /// The events the connection needs now: the connect's completion; input
    /// unless the core stalled the stream (nothing is read on a refused
    /// connection); output while something waits.
    pub(crate) fn want(&self) -> u32 {
        match self.phase {
            Phase::Dialing => OUT,
            Phase::Held => 0,
            Phase::Closing => OUT,
            _ => (if self.stalled { 0 } else { IN }) | (if self.queue.is_empty() { 0 } else { OUT }),
        }
    }

    /// Registers the connection in `epoll` under `token`.
    pub(crate) fn watch(&mut self, epoll: &Epoll, token: u64) -> Result<()> {
        let want = self.want();
        epoll.add(self.sock.as_raw_fd(), want, token)?;
        self.token = token;
        self.interest = Some(want);
        Ok(())
    }

    /// Leaves the owner's epoll set (nothing wakes anyone for it).
    pub(crate) fn unwatch(&mut self, epoll: &Epoll) {
        if self.interest.take().is_some() {
            epoll.delete(self.sock.as_raw_fd());
        }
    }

    /// The events registered now (None: not watched).
    pub(crate) fn interest(&self) -> Option<u32> {
        self.interest
    }

    /// Whether the connection waits for `EPOLLOUT` (registered for it: a
    /// write the socket had no room for, or a connect in progress).
    pub(crate) fn waits_to_write(&self) -> bool {
        self.interest.is_some_and(|i| i & OUT != 0)
    }

    /// Brings the registered events in line with [`Conn::want`] (a system
    /// call only when they change).
    pub(crate) fn update(&mut self, epoll: &Epoll) {
        let Some(have) = self.interest else { return };
        let want = self.want();
        if want != have && epoll.modify(self.sock.as_raw_fd(), want, self.token).is_ok() {
            self.interest = Some(want);
        }
    }

    /// What epoll event `ev` asks the owner to do.
    pub(crate) fn ready(&self, ev: u32) -> Ready {
        let err_hup = ev & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        if self.phase == Phase::Dialing {
            if ev & OUT != 0 || err_hup {
                return Ready::Dialed(match self.socket_error() {
                    Some(e) => Err(e),
                    // Nobody listened at the address (the kernel gave the
                    // dial that port as its source): refused, and the port
                    // is left free for whoever binds it next (a restarted
                    // endpoint), not held in TIME_WAIT by our close.
                    None if net::connected_to_itself(self.sock.as_fd()) => {
                        net::reset_on_close(self.sock.as_fd());
                        Err(Error::CONNREFUSED)
                    }
                    None => Ok(()),
                });
            }
            return Ready::Io {
                write: false,
                read: false,
            };
        }
        if self.stalled && err_hup {
            return Ready::Broken(self.socket_error().unwrap_or(Error::CONNRESET));
        }
        Ready::Io {
            write: ev & OUT != 0,
            read: ev & IN != 0 || err_hup,
        }
    }

    /// Reads and dispatches records until the socket is drained, the core
    /// stalls, a handshake record or BYE arrives, or this pass's reads are
    /// used; `sink` takes the endpoint records. Until the connection is
    /// [`Phase::Up`] only handshake records (and BYE) may arrive. The owner
    /// updates the interest afterwards (a stall drops the input).
    pub(crate) fn read(&mut self, sink: &mut dyn Delivery, peer: &Addr, lim: &Limits, scratch: &mut [u8]) -> Read {
        let stage = if self.phase == Phase::Up {
            Stage::Established
        } else {
            Stage::Handshake
        };
        let mut src = Counting {
            fd: Fd(self.sock.as_fd()),
            got: 0,
        };
        let out = self
            .reader
            .pump(&mut src, sink, peer, lim, stage, scratch, READS_PER_PASS);
        self.last_got = src.got + std::mem::take(&mut self.polled_got);
        match out {
            Outcome::Drained | Outcome::Budget => {
                self.stalled = false;
                Read::Idle
            }
            Outcome::Stalled => {
                self.stalled = true;
                Read::Stalled
            }
            Outcome::Link(h) => Read::Link(h),
            Outcome::Eof => {
                crate::base::log::log_debug!(crate::abi::FI_LOG_EP_DATA, "tcp: peer closed its connection");
                Read::Ended(End::Eof)
            }
            Outcome::Broken(Broken::Io(e)) => Read::Ended(End::Failed(e)),
            Outcome::Broken(b) => {
                crate::base::log::log_warn!(crate::abi::FI_LOG_EP_DATA, "tcp: cutting off a peer: {b:?}");
                Read::Ended(End::Violation(b))
            }
        }
    }

    /// An established stream's poll, before any of [`Conn::read`]'s work:
    /// between records it reads what arrived into the reader's read-ahead
    /// buffer (the read `read` would start with) and says whether `read`
    /// has anything to do; false: nothing arrived (and
    /// [`Conn::last_got`] is 0). Mid-record, or with bytes held, true
    /// without reading. An idle stream's pass then costs one `recv` and
    /// no dispatch.
    pub(crate) fn poll_input(&mut self) -> bool {
        match self.reader.poll(&mut Fd(self.sock.as_fd())) {
            None => {
                self.last_got = 0;
                false
            }
            Some(n) => {
                self.polled_got += n;
                true
            }
        }
    }

    /// Bytes the last [`Conn::read`] took from the socket (0: it found
    /// nothing there).
    pub(crate) fn last_got(&self) -> usize {
        self.last_got
    }

    /// Whether the connection is read now: established, not stalled, not
    /// doomed.
    pub(crate) fn readable_now(&self) -> bool {
        self.phase == Phase::Up && !self.stalled && self.doomed.is_none()
    }

    /// A receive may have been posted: a stalled stream gets its input
    /// interest back so that a thread sleeping on the owner's epoll set
    /// wakes and the next pass retries it (a pass that still cannot place
    /// the record drops the interest again: no spinning). Returns whether
    /// the stalled record (or bytes read ahead) sits in the reader's
    /// buffers rather than in the socket, where input interest alone would
    /// not wake a sleeper: the owner then rings its [`Alarm`].
    pub(crate) fn offer_input(&mut self, epoll: &Epoll) -> bool {
        if !self.stalled {
            return false;
        }
        self.stalled = false;
        self.update(epoll);
        self.stalled = true;
        self.reader.holds_input()
    }

    /// Ends our direction (FIN after what the kernel holds).
    pub(crate) fn shutdown_write(&self) {
        net::shutdown_write(self.sock.as_fd());
    }

    /// Reads and drops what is pending, so that closing ends the connection
    /// with FIN rather than RST (the kernel resets a connection closed with
    /// unread data; data already handed to it then still reaches the peer).
    pub(crate) fn discard_input(&self) {
        net::discard_input(self.sock.as_fd(), 16);
    }
}

/// One timer for all of an owner's deadlines: armed for the earliest, with
/// a system call only when that changes.
pub(crate) struct Alarm {
    timer: TimerFd,
    at: Option<Instant>,
    /// The timer fired since the last [`Alarm::due`].
    rang: bool,
}

impl Alarm {
    pub(crate) fn new() -> Result<Alarm> {
        Ok(Alarm {
            timer: TimerFd::new()?,
            at: None,
            rang: false,
        })
    }

    /// The descriptor to put in the owner's epoll set (readable when due).
    pub(crate) fn fd(&self) -> RawFd {
        self.timer.fd()
    }

    /// Fires at `next` (None: disarmed).
    pub(crate) fn arm(&mut self, next: Option<Instant>) {
        if next != self.at {
            self.at = next;
            self.timer
                .set(next.map(|t| t.saturating_duration_since(Instant::now())));
        }
    }

    /// Fires now: a sleeper must wake for work its sockets do not show.
    pub(crate) fn ring(&mut self) {
        self.timer.set(Some(Duration::from_micros(1)));
        self.at = Some(Instant::now());
    }

    /// The timer's token was ready in the owner's wait: clears it and
    /// makes [`Alarm::due`] true.
    pub(crate) fn fired(&mut self) {
        self.timer.drain();
        self.rang = true;
    }

    /// After the owner's wait: true when deadlines are due now (the timer
    /// fired, or its time passed); the owner then checks its deadlines and
    /// arms the timer again.
    pub(crate) fn due(&mut self) -> bool {
        if std::mem::take(&mut self.rang) || self.at.is_some_and(|t| t <= Instant::now()) {
            self.at = None;
            return true;
        }
        false
    }

    /// Whether the timer is armed.
    pub(crate) fn armed(&self) -> bool {
        self.at.is_some()
    }
}

#[cfg(test)]
mod tests;
