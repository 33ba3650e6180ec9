//! rustfab's transports and the one interface the endpoint core uses for
//! them. `proto` is the record header both share; `shm` moves data between
//! processes on one host; `tcp` between hosts.
//!
//! Delivery is two-phase so that a stream transport can read a payload
//! straight into the matched receive buffer: when a message header arrives
//! the transport asks the endpoint core where the payload goes
//! ([`Delivery::place`]), moves it there (in one go for shm, as bytes arrive
//! for TCP), then reports completion ([`Delivery::placed`]).

pub(crate) mod addr;
pub(crate) mod auto;
pub(crate) mod connected;
pub(crate) mod iov;
pub(crate) mod proto;
pub(crate) mod shm;
pub(crate) mod tcp;
pub(crate) mod udp;

use crate::base::error::{Error, Result};
use crate::transport::addr::Addr;
use iov::IovList;
use proto::WireHdr;
use std::os::fd::RawFd;

/// The error a peer's failure (it died, reset its connection or broke the
/// protocol) gives the operations that involve it: one of the codes
/// fi_msg(3) allows (FI_ECANCELED, FI_ECONNRESET, FI_EIO), chosen once.
pub(crate) const PEER_FAILED: Error = Error::CONNRESET;

/// `prov_errno` of an error completion whose operation ended because no
/// connection to its peer could be made (the dial was refused, found no
/// route or timed out): most often the peer advertised an address of an
/// interface this host cannot reach. `fi_cq_strerror` names
/// `FI_RUSTFAB_IFACE` for it. rustfab's own codes start at 4096, above
/// every errno and `FI_E*` value (header: `FI_RUSTFAB_ERR_UNREACHABLE`).
pub(crate) const UNREACHABLE_PROV_ERRNO: i32 = 4096;

/// Whether `e` is what a failed dial gives the operations waiting on the
/// peer (`PeerEvent::Unreachable`, and tcp's queued records): the codes
/// only a dial produces among operation errors.
pub(crate) fn is_unreachable(e: Error) -> bool {
    matches!(
        e,
        Error::CONNREFUSED | Error::TIMEDOUT | Error(crate::abi::FI_EHOSTUNREACH) | Error(crate::abi::FI_ENETUNREACH)
    )
}

/// The `prov_errno` an operation's error entry carries for `e`: the why
/// code of the failures rustfab explains itself, else 0 (`err` says it).
pub(crate) fn prov_errno_of(e: Error) -> i32 {
    if is_unreachable(e) {
        UNREACHABLE_PROV_ERRNO
    } else {
        0
    }
}

/// Bytes of unexpected (not yet matched) message data an endpoint holds by
/// default (`FI_RUSTFAB_UNEXP_BUDGET`).
pub(crate) const DEFAULT_UNEXP_BUDGET: usize = 8 << 20;

/// Bytes a receiver with buffered receives wants pushed behind an RTS,
/// assumed until it says otherwise (`FI_OPT_BUFFERED_MIN`'s default).
pub(crate) const DEFAULT_RTS_PREFIX: usize = 4096;

/// Bytes to put after a record header.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    None,
    Bytes(&'a [u8]),
    /// `len` bytes starting at logical offset `off` of an application iov.
    Iov(&'a IovList, usize, usize),
}

impl Payload<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::None => 0,
            Payload::Bytes(b) => b.len(),
            Payload::Iov(_, _, n) => *n,
        }
    }

    /// Calls `f` with each contiguous piece of the payload.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8])) {
        match self {
            Payload::None => {}
            Payload::Bytes(b) => f(b),
            Payload::Iov(iov, off, len) => iov.for_range(*off, *len, |p, n, _| {
                // SAFETY: application memory named by the operation's iov,
                // valid until the operation completes (fi_msg(3)).
                f(unsafe { core::slice::from_raw_parts(p as *const u8, n) })
            }),
        }
    }
}

/// Outcome of handing a record to the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// The record is at the target (shm ring) or fully handed to the kernel.
    Done,
    /// Queued; [`Delivery::sent`] reports when it is out (payload buffers
    /// must stay valid until then, unless the send asked for a copy).
    Queued,
}

/// Where a message payload goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// `take` bytes into `dst`, the rest discarded; then `placed(handle, ..)`.
    Into { handle: u32, dst: IovList, take: usize },
    /// Unexpected: hand the whole payload over (`buffered`); the core has
    /// checked its budget.
    Buffer,
    /// Drop the payload.
    Discard,
    /// Not now (no budget, no CQ room): leave it; ask again later.
    Stall,
}

/// What the consumer did with a control record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    Consumed,
    /// Leave it (backpressure); the transport stops reading that peer.
    Stall,
}

/// A received payload the core can copy from.
pub(crate) trait PayloadIn {
    /// Copies payload bytes `off .. off + len` (clipped) into application
    /// memory `dst` at logical offset `dst_off`; returns bytes copied.
    ///
    /// # Safety
    /// `dst` must describe writable application memory.
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize;
    fn to_vec(&self) -> Vec<u8>;
}

impl PayloadIn for [u8] {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        let len = len.min(<[u8]>::len(self).saturating_sub(off));
        let mut done = 0;
        dst.for_range(dst_off, len, |p, n, _| {
            // SAFETY: `p..p+n` is application memory per the contract; the
            // source range is inside `self`.
            unsafe { core::ptr::copy_nonoverlapping(self.as_ptr().add(off + done), p as *mut u8, n) };
            done += n;
        });
        done
    }
    fn to_vec(&self) -> Vec<u8> {
        <[u8]>::to_vec(self)
    }
}

/// A payload the transport holds whole in its own memory (a control
/// record's, read into a stream reader's buffer; a simulated record's).
pub(crate) struct Bytes<'a>(pub(crate) &'a [u8]);

impl PayloadIn for Bytes<'_> {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        // SAFETY: forwarded contract.
        unsafe { PayloadIn::copy_to_iov(self.0, off, len, dst, dst_off) }
    }
    fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// The endpoint core, as a transport sees it.
pub(crate) trait Delivery {
    /// An EAGER header arrived from `src`: where does its payload go?
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place;
    /// The payload of an `Into` placement is in place (Err: the peer was
    /// lost before all of it arrived; `Error::AGAIN`, for a DATA chunk
    /// only: withdrawn, the chunk comes again).
    fn placed(&mut self, handle: u32, result: Result<()>);
    /// The whole payload of a `Buffer` placement.
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>);
    /// An EAGER or DATA record whose whole payload is at hand (shm: in the
    /// ring, readable until this returns): place, copy and complete it in
    /// one step. The default goes through `place`/`placed`; the engine
    /// overrides it to complete a matched receive without parking it as an
    /// in-flight placement.
    fn deliver(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        place_and_copy(self, src, src_pid, hdr, payload)
    }
    /// Any other record (ACK, RTS, CTS, DATA, ...).
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition;
    /// A `Sent::Queued` record went out (or could not).
    fn sent(&mut self, msg_id: u64, result: Result<()>);
}

/// [`Delivery::deliver`] in two steps: ask where the payload goes, copy it
/// there, report it placed (or hand it over whole, or drop it, or stall).
pub(crate) fn place_and_copy<D: Delivery + ?Sized>(
    d: &mut D,
    src: &Addr,
    src_pid: i32,
    hdr: &WireHdr,
    payload: &dyn PayloadIn,
) -> Disposition {
    match d.place(src, src_pid, hdr) {
        Place::Into { handle, dst, take } => {
            // SAFETY: `dst` is the core's placement for this payload (a
            // matched receive's application buffer or a pool buffer), valid
            // until `placed`.
            unsafe { payload.copy_to_iov(0, take, &dst, 0) };
            d.placed(handle, Ok(()));
            Disposition::Consumed
        }
        Place::Buffer => {
            d.buffered(src, src_pid, hdr, payload.to_vec());
            Disposition::Consumed
        }
        Place::Discard => Disposition::Consumed,
        Place::Stall => Disposition::Stall,
    }
}

/// One pull of a [`SingleCopy::pull_batch`]: the sender's segments (address,
/// length, from its RTS), the receive's buffer, the bytes to copy.
#[derive(Clone, Copy)]
pub(crate) struct PullJob<'a> {
    pub remote: &'a [(u64, u64)],
    pub dst: &'a IovList,
    pub len: usize,
}

/// One push of a [`SingleCopy::push_batch`]: the receiver's segments (address,
/// length, from its `CTS|SPLIT`), our own bytes to write, how many.
#[derive(Clone, Copy)]
pub(crate) struct PushJob<'a> {
    pub remote: &'a [(u64, u64)],
    pub src: &'a IovList,
    pub len: usize,
}

/// A peer-level failure the endpoint turns into error completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerEvent {
    /// The peer is gone, reset, or broke the protocol.
    Failed(Addr),
    /// /dev/shm had no room for our ring to the peer (docs/shm.md, "A full
    /// /dev/shm"): the peer is failed as by `Failed`, and what waited on it
    /// ends with FI_ENOMEM, the cause, rather than `PEER_FAILED`.
    NoRoom(Addr),
    /// The peer refused us, or we it, for its authentication key (tcp):
    /// failed as by `Failed`, and what waited on it ends with FI_EACCES,
    /// the cause (messages, RMA and atomics alike).
    Denied(Addr),
    /// No connection to the peer could be made (tcp: the dial was
    /// refused, found no route or timed out; the error is the dial's, one
    /// of [`is_unreachable`]'s): failed as by `Failed`, and what waited on
    /// it ends with that error.
    Unreachable(Addr, Error),
}

impl PeerEvent {
    pub(crate) fn peer(&self) -> &Addr {
        match self {
            PeerEvent::Failed(a) | PeerEvent::NoRoom(a) | PeerEvent::Denied(a) | PeerEvent::Unreachable(a, _) => a,
        }
    }

    /// The error the operations that involve the peer end with.
    pub(crate) fn cause(&self) -> Error {
        match self {
            PeerEvent::Failed(_) => PEER_FAILED,
            PeerEvent::NoRoom(_) => Error::NOMEM,
            PeerEvent::Denied(_) => Error::ACCES,
            PeerEvent::Unreachable(_, e) => *e,
        }
    }
}

/// One endpoint's attachment to a transport: what every transport does —
/// send records to a peer (`send`, `send_ctl`, with the limits and room
/// that bound them), consume what arrived (`poll`, calling the engine's
/// [`Delivery`]), report failed peers (`take_events`; liveness with
/// `check_peer` and `sender_alive`), wake and let sleep (`wait_fd`,
/// `has_pending`, `set_sleepers`). What only some transports can do sits
/// behind two optional capabilities: a single copy between processes
/// ([`Port::single_copy`], shm) and the advice the engine and the
/// transport exchange ([`Port::hints`]).
pub(crate) trait Port: Send {
    fn addr(&self) -> Addr;
    /// Readable when the port has something to progress (sleepers wait on it).
    fn wait_fd(&self) -> RawFd;
    /// Number of threads about to sleep on this port's engine (0: none).
    fn set_sleepers(&mut self, n: usize);
    /// Work is waiting that a progress pass would handle: do not sleep.
    fn has_pending(&self) -> bool;
    /// Messages above this many bytes go by rendezvous (RTS).
    fn eager_limit(&self) -> usize;
    /// The eager limit towards one peer (ports that combine transports
    /// differ per peer).
    fn eager_limit_for(&self, _peer: &Addr) -> usize {
        self.eager_limit()
    }
    /// The largest chunk of an accepted transfer (rendezvous `DATA`, RMA
    /// `WRITE`) towards one peer: what its receiver's `Limits::max_chunk`
    /// takes (the eager limit on shm; larger on a TCP stream).
    fn chunk_limit_for(&self, peer: &Addr) -> usize {
        self.eager_limit_for(peer)
    }
    /// The form of a peer's address this port reports as `src` and keys its
    /// peers by (the auto port turns an auto address into the shm or TCP
    /// address it will use). The core compares addresses in this form.
    fn canonical(&self, a: &Addr) -> Addr {
        *a
    }
    /// Sends one record. `copy`: the payload must be copied before return
    /// (inject). `Err(AGAIN)`: no room now.
    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent>;
    /// Whether a record `send` accepts for `peer` is then in the peer's own
    /// receive queue (shm: its ring), always `Sent::Done`: the operation is
    /// no longer the sender's, which fi_cq(3) calls transmit complete on a
    /// reliable endpoint. An RMA write or a non-fetching atomic completes
    /// then, without the target's answer, unless delivery complete was
    /// asked (docs/rma.md, Completions). TCP: no (the kernel's socket
    /// buffer is still the sender's side of the network: a named transmit
    /// complete waits for the peer's answer, docs/protocol.md).
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        false
    }
    /// Sends a control record without payload, queuing it if there is no
    /// room (bounded by the endpoint's outstanding operations).
    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()>;
    /// Payload bytes one more record to `peer` could carry right now.
    fn room(&mut self, peer: &Addr) -> usize;
    /// Consumes whatever arrived, calling into the core. Returns whether
    /// this pass saw a peer move: it consumed a record, or a peer consumed
    /// from a ring this port waits on (shm) — a peer that moves runs on
    /// another processor, so yielding ours cannot help it (the CQ's idle
    /// rule, core/cq.rs `IDLE_YIELD_AFTER`). TCP, which cannot see its
    /// peers run: a record sent or bytes read within the last
    /// `tcp::moved::MOVED_WINDOW` (an answer may be on its way).
    fn poll(&mut self, d: &mut dyn Delivery) -> bool;
    /// Rate-limited check that a peer we wait on is still there.
    fn check_peer(&mut self, peer: &Addr) -> bool;
    /// Whether the sender of a transfer we wait on is still there.
    fn sender_alive(&self, src_pid: i32, peer: &Addr) -> bool;
    /// Failures noticed since the last call.
    fn take_events(&mut self) -> Vec<PeerEvent>;
    /// False only when [`Port::take_events`] would do nothing and return
    /// nothing, so the core may skip the call (every pass asks: a port
    /// that cannot say cheaply keeps this default).
    fn has_events(&self) -> bool {
        true
    }
    /// Copies straight between this process's memory and a peer's, where
    /// the transport can (shm: cross-memory attach). `None`: it cannot; the
    /// core streams rendezvous and RMA data as records instead.
    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        None
    }
    /// Orderly goodbye to peers.
    fn close(&mut self);
    /// The advice the core and the transport exchange ([`Hints`]); `None`:
    /// the transport takes none and gives none.
    fn hints(&mut self) -> Option<&mut dyn Hints> {
        None
    }
}

impl<'a> dyn Port + 'a {
    /// [`Port::single_copy`] as a result: `Err(OPNOTSUPP)` where the
    /// transport has none, the answer on which the core streams instead.
    pub(crate) fn copier(&self) -> Result<&dyn SingleCopy> {
        self.single_copy().ok_or(Error::OPNOTSUPP)
    }

    /// [`Hints::more_coming`], where the transport takes hints. Out of line
    /// and cold: `FI_MORE` is rare, the send path it is on is not.
    #[cold]
    #[inline(never)]
    pub(crate) fn more_coming(&mut self) {
        if let Some(h) = self.hints() {
            h.more_coming();
        }
    }
}

/// A single copy between two processes' memories, without the peer's help:
/// the rendezvous and RMA data paths of a transport whose peers share this
/// host's kernel ([`Port::single_copy`]). A pid is always one the
/// transport's records reported for the peer.
pub(crate) trait SingleCopy {
    /// Pulls a rendezvous payload from the sender's memory (shm CMA).
    /// `Err(OPNOTSUPP)`: not possible here; the core asks for streaming.
    fn pull(&self, src_pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize>;
    /// Several pulls from one sender in one cross-memory copy (shm: one
    /// `process_vm_readv` for the lot, whose fixed cost — ~3 µs per call
    /// here — a 64 KiB pull paid alone). `Ok` only when every job's `len`
    /// bytes were copied; on any `Err` the core repeats each pull alone
    /// (copying again is harmless: the receives are not complete yet), so
    /// the failing one gets its own error. The default copies nothing.
    fn pull_batch(&self, _src_pid: i32, _jobs: &[PullJob<'_>]) -> Result<()> {
        Err(Error::OPNOTSUPP)
    }
    /// Writes `len` bytes of `src` (memory of this process the core has
    /// checked) into a peer's buffers `remote` (shm CMA: an RMA read served
    /// by its target straight into the initiator's memory; `dst_pid` as a
    /// record reported it). `Err(OPNOTSUPP)`: not possible here; the core
    /// streams the data instead.
    fn push(&self, _dst_pid: i32, _remote: &[(u64, u64)], _src: &IovList, _len: usize) -> Result<usize> {
        Err(Error::OPNOTSUPP)
    }
    /// Several pushes into one receiver in one cross-memory copy (shm: one
    /// `process_vm_writev`), as [`SingleCopy::pull_batch`] for pulls: `Ok` only
    /// when every job's `len` bytes were written; on any `Err` the core
    /// pushes each alone (writing again is harmless: the receiver waits
    /// for the answers). The default writes nothing.
    fn push_batch(&self, _dst_pid: i32, _jobs: &[PushJob<'_>]) -> Result<()> {
        Err(Error::OPNOTSUPP)
    }
}

/// Advice between the core and a transport that no record depends on: a
/// transport without it ([`Port::hints`] `None`) still delivers everything,
/// only without the saving each names (a rendezvous receiver then fetches
/// the bytes it wanted pushed with a ranged CTS; a burst is written record
/// by record).
pub(crate) trait Hints {
    /// Bytes of every rendezvous message this endpoint wants pushed right
    /// behind its RTS (buffered receives report a message only with its
    /// first `FI_OPT_BUFFERED_MIN` bytes; fetching them later would put them
    /// behind the sender's next messages). 0: none. Peers learn it through
    /// the transport (shm segment header, TCP HELLO).
    fn set_rts_prefix(&mut self, _n: usize) {}
    /// `FI_MORE` on a send: the application posts more at once, so the
    /// transport may hold this message back to write it with those.
    fn more_coming(&mut self) {}
    /// Bytes `peer` asked to have pushed behind an RTS (0: none, unknown).
    fn rts_prefix(&mut self, _peer: &Addr) -> usize {
        0
    }
    /// Largest rendezvous message this transport would rather have pushed
    /// whole behind its RTS to `peer` (DATA records through a ring large
    /// enough that writing it costs the sender little), so that a receive
    /// already posted takes it without a CTS round trip. 0: never.
    fn push_whole(&mut self, _peer: &Addr) -> usize {
        0
    }
    /// We wrote `peer` records it has still to consume and now wait for its
    /// answer (a message pushed whole): its progress through them counts
    /// as a peer moving (`Port::poll`'s answer), so a waiting CQ does not
    /// yield while the peer copies.
    fn watch_consumer(&mut self, _peer: &Addr) {}
}
