//! The endpoint engine (RDM endpoints, and connected `FI_EP_MSG` ones with
//! a fixed peer): posting sends and receives, the message protocols on top
//! of a transport, completion generation, cancel, peer failure. No C types
//! beyond plain values: the thunks in `src/fi/ep.rs` translate the
//! libfabric calls into [`SendArgs`] / [`RecvArgs`]. It reaches its
//! transport only through [`Port`] and is reached back through
//! [`Delivery`] ([`EngineDelivery`] during a poll).
//!
//! Modules: `send` (post-time checks, eager records, `sent`/ACK, send
//! completions), `recv` (posting, cancel, matching arrivals, the unexpected
//! queue, peek/claim), `matching` (posted and unexpected queues, tag rule,
//! budget; pure), `rendezvous` (RTS, CMA pull or CTS/DATA streaming),
//! `buffered` (buffered receives; `buffered/held.rs` is their pure
//! bookkeeping), `peers` (liveness, failure events), `connected` (what
//! FI_EP_MSG adds: the fixed peer, `fail_all`), `completion` (CQ entries and
//! counters), `stall` (backpressure stalls, for the debug log). Tests:
//! `sim.rs` (an in-memory network of engines) and `tests/`.
//!
//! Protocols (docs/protocol.md):
//! * **eager** (≤ `EAGER_MAX`, and every inject): one EAGER record carries the
//!   data; the receiver copies it straight from the ring into the matched
//!   buffer (one copy each way), or into the unexpected queue within the
//!   endpoint's budget and the sending peer's fair share of it — beyond
//!   either the ring is left full (backpressure) and the sender's posts
//!   return -FI_EAGAIN.
//! * **rendezvous** (larger): an RTS record names the sender's buffer; the
//!   receiver, once matched, copies it with `process_vm_readv` (single copy)
//!   and ACKs; without CMA it answers CTS and the sender streams DATA records
//!   through the ring (pipelined copy-through-segment). The send completes on
//!   the ACK.
//! * **delivery complete** on eager sends: the record asks for an ACK, sent
//!   once the data is in the application's buffer.
//!
//! Completion levels: inject-complete and transmit-complete are reached when
//! the eager record is in the receiver's ring (the target's memory);
//! delivery-complete waits for the ACK. Every posted operation yields exactly
//! one completion (success or error), except `fi_inject*` (none) and
//! selective-completion successes without FI_COMPLETION.
//!
//! Locking: one mutex per endpoint around all of its state; completions are
//! pushed to CQs (their own locks) while it is held — the order is always
//! endpoint → CQ, never the reverse (CQ reads progress before locking).

mod atomic;
pub(crate) mod buffered;
mod completion;
mod connected;
pub(crate) mod matching;
mod peers;
mod recv;
mod rendezvous;
mod rma;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use rendezvous::parse_rts;
mod send;
mod stall;

pub(crate) use self::atomic::AtomicArgs;
use self::buffered::{Buffered, BUF_HANDLE, PREFIX_AUX};
use self::completion::{cq_success, tx_error, Received, RxFailure, RxIdent};
use self::matching::{IovList, Matching, PostedRecv, RtsInfo, UnexBody, Unexpected};
use self::peers::STREAM_LIVENESS;
use self::recv::Inflight;
use self::rendezvous::{PendingPull, RxStream, STREAM_HANDLE};
pub(crate) use self::rma::{RmaArgs, RmaBinds, RmaBound, RmaIov, RmaIovList, RmaKind, RMA_IOV_MAX};
use self::send::{TxOp, TxState};
use crate::abi::*;
use crate::base::collections::{FastMap, FastSet, Slab};
use crate::base::error::{Error, Result};
use crate::core::av::{Av, GenerationWord};
use crate::core::cntr::Cntr;
use crate::core::cq::{Cq, CqEntry, CqErrEntry};
use crate::core::users::Held;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr, IOV_ENTRY};
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, Place, Port, PullJob, Sent};
use core::borrow::Borrow;
use core::ffi::c_void;
use std::time::{Duration, Instant};

/// Endpoint attributes that govern the data path (from `fi_info`, setopt).
#[derive(Clone, Debug)]
pub(crate) struct EpConfig {
    pub(crate) caps: u64,
    pub(crate) tx_op_flags: u64,
    pub(crate) rx_op_flags: u64,
    pub(crate) tx_size: usize,
    pub(crate) rx_size: usize,
    pub(crate) inject_size: usize,
    pub(crate) max_msg_size: usize,
    pub(crate) min_multi_recv: usize,
    /// Bytes of unexpected data the endpoint may hold.
    pub(crate) unexp_budget: usize,
    /// Cross-memory attach allowed (FI_RUSTFAB_SHM_CMA).
    pub(crate) cma: bool,
    /// Bytes of rendezvous messages from one sender pulled with one
    /// `process_vm_readv` at most (FI_RUSTFAB_SHM_PULL_BATCH; 0: one call
    /// per message).
    pub(crate) pull_batch_bytes: usize,
    /// Rendezvous messages of at least this many bytes (CMA) are split:
    /// the receiver pulls the first half while the sender pushes the rest
    /// (FI_RUSTFAB_SHM_SPLIT_MIN; 0: never).
    pub(crate) split_min: usize,
    /// A rendezvous message that is its sender's only pull in a pass is
    /// split from this many bytes (FI_RUSTFAB_SHM_SPLIT_LONE_MIN; 0: only
    /// from `split_min`; `split_min` 0 turns both off).
    pub(crate) split_lone_min: usize,
    /// A rendezvous message that is its sender's only pull in a pass and
    /// takes at most this many bytes is streamed through our ring (CTS)
    /// instead of pulled or split: set only when our shm rings are large
    /// (FI_RUSTFAB_SHM_RING_CELLS from `STREAM_RING_MIN`, with
    /// FI_RUSTFAB_SHM_STREAM_LONE_MAX; 0: never, and on connected endpoints,
    /// whose shm port keeps the default size; docs/shm.md "Ring size").
    pub(crate) stream_lone_max: usize,
    /// How long `fi_close` waits at most for peers that may still be
    /// writing into this endpoint's memory (split receives' pushes, CMA RMA
    /// reads' pushes; FI_RUSTFAB_SHM_CLOSE_WAIT; docs/shm.md, Large
    /// messages).
    pub(crate) close_wait: Duration,
    /// A connected (`FI_EP_MSG`) endpoint's one peer: sends go there
    /// whatever their destination address, and no AV is used.
    pub(crate) fixed_peer: Option<Addr>,
    /// `FI_MSG_PREFIX` bytes in front of every message buffer, counted in
    /// receive completions' `len` (`core/prefix.rs`; 0: no prefix).
    pub(crate) msg_prefix: usize,
}

/// What the endpoint is bound to (fixed once enabled).
#[derive(Default)]
pub(crate) struct Binds {
    pub(crate) av: Option<Held<Av>>,
    pub(crate) tx_cq: Option<Held<Cq>>,
    pub(crate) tx_selective: bool,
    pub(crate) rx_cq: Option<Held<Cq>>,
    pub(crate) rx_selective: bool,
    pub(crate) send_cntr: Option<Held<Cntr>>,
    pub(crate) recv_cntr: Option<Held<Cntr>>,
    pub(crate) eq: Option<Held<crate::core::eq::Eq>>,
    /// Counters of RMA events (`FI_READ`, `FI_WRITE`, `FI_REMOTE_*`).
    pub(crate) rma: RmaBinds,
}

/// The endpoint's bindings as the engine uses them during one call: where
/// completions go and how addresses resolve. Borrowed from [`Binds`] (what
/// `fi_ep_bind` recorded); the engine's tests build one around their own
/// CQs, counters and address table.
#[derive(Clone, Copy, Default)]
pub(crate) struct Bound<'a> {
    pub(crate) av: Option<AvView<'a>>,
    pub(crate) tx_cq: Option<&'a Cq>,
    pub(crate) tx_selective: bool,
    pub(crate) rx_cq: Option<&'a Cq>,
    pub(crate) rx_selective: bool,
    pub(crate) send_cntr: Option<&'a Cntr>,
    pub(crate) recv_cntr: Option<&'a Cntr>,
    pub(crate) rma: RmaBound<'a>,
}

impl<'a> From<&'a Binds> for Bound<'a> {
    fn from(b: &'a Binds) -> Bound<'a> {
        Bound {
            av: b.av.as_deref().map(|av| AvView::new(av)),
            tx_cq: b.tx_cq.as_deref(),
            tx_selective: b.tx_selective,
            rx_cq: b.rx_cq.as_deref(),
            rx_selective: b.rx_selective,
            send_cntr: b.send_cntr.as_deref(),
            recv_cntr: b.recv_cntr.as_deref(),
            rma: (&b.rma).into(),
        }
    }
}

/// An enabled endpoint's bindings, fixed, with the [`Bound`] view of them
/// built once: every post and every progress pass takes that view, which
/// they would otherwise build each time (nine `Option<Held<_>>` fields
/// turned into references), several times per small-message round trip.
///
/// Its fields are private and it is only made from an owned [`Binds`]:
/// nothing can change the bindings while the view exists (only `&Binds`
/// is handed out).
pub(crate) struct FrozenBinds {
    binds: Binds,
    /// Borrows from `binds`, whose lifetime the type cannot name: only
    /// handed out shortened to a borrow of `self` ([`FrozenBinds::bound`]).
    view: Bound<'static>,
}

impl FrozenBinds {
    pub(crate) fn new(binds: Binds) -> FrozenBinds {
        let view = Bound::from(&binds);
        // SAFETY: every reference in `view` points into an object behind an
        // `Arc` that `binds` holds (`Held`: the AV, the CQs, the counters),
        // never into `binds` itself, so moving `binds` into `self` (and
        // `self` anywhere) leaves them valid; they stay valid while `binds`
        // holds those `Arc`s, i.e. while `self` lives, because no `&mut`
        // to `binds` exists once it is here (private field, no method gives
        // one) and nothing is dropped from it before `self` is. The
        // `'static` is never seen outside: `bound` returns `Bound<'a>` for a
        // borrow `'a` of `self` (Bound is covariant in its lifetime).
        let view = unsafe { std::mem::transmute::<Bound<'_>, Bound<'static>>(view) };
        FrozenBinds { binds, view }
    }

    /// The bindings as the engine uses them (a copy of the built view).
    #[inline]
    pub(crate) fn bound(&self) -> Bound<'_> {
        self.view
    }

    /// The built view itself, for a caller that only needs a reference
    /// (a progress pass: no 80-byte copy per pass).
    #[inline]
    pub(crate) fn view(&self) -> &Bound<'_> {
        &self.view
    }
}

// SAFETY: `view` only refers to objects `binds` holds (see `new`): the CQs
// and counters (Sync) and the AV behind the `dyn AddrBook` and its
// generation word (an `AtomicU64` inside it), which the trait object type
// does not say is Sync but which is the `Av` of `binds.av` (Sync): sharing or sending a FrozenBinds shares or sends exactly what
// sharing or sending its `Binds` does, and `Binds` is Send + Sync (checked
// below).
unsafe impl Sync for FrozenBinds {}
// SAFETY: as above.
unsafe impl Send for FrozenBinds {}
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Binds>();
};

impl std::ops::Deref for FrozenBinds {
    type Target = Binds;
    fn deref(&self) -> &Binds {
        &self.binds
    }
}

impl<'a> From<&'a FrozenBinds> for Bound<'a> {
    #[inline]
    fn from(b: &'a FrozenBinds) -> Bound<'a> {
        b.bound()
    }
}

/// Address resolution the engine needs from an address vector: the peer
/// behind an `fi_addr` (sends, directed receives) and the `fi_addr` of a
/// source (`FI_SOURCE`).
pub(crate) trait AddrBook {
    fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr>;
    fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t>;
    /// The word that changes whenever an earlier `lookup_addr` result may
    /// have become wrong (an AV's count of removals, core/av.rs): a lookup
    /// made after reading it may be reused while it stays the same. Asked
    /// once, when the view is built ([`AvView::new`]).
    fn generation_word(&self) -> GenerationWord<'_>;
}

impl AddrBook for Av {
    fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        Av::lookup_addr(self, fi_addr)
    }
    fn generation_word(&self) -> GenerationWord<'_> {
        self.state.generation_word()
    }
    fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        Av::reverse_lookup(self, a)
    }
}

/// A bound AV as the engine uses it: its lookups (dyn calls, under the
/// table's read lock) and its generation word, borrowed when the view is
/// built, so that the destination cache's test on every send is a plain
/// load (core/av.rs, "Thread safety").
#[derive(Clone, Copy)]
pub(crate) struct AvView<'a> {
    book: &'a dyn AddrBook,
    gen: GenerationWord<'a>,
}

impl<'a> AvView<'a> {
    pub(crate) fn new(book: &'a dyn AddrBook) -> AvView<'a> {
        AvView {
            book,
            gen: book.generation_word(),
        }
    }

    pub(crate) fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        self.book.lookup_addr(fi_addr)
    }

    pub(crate) fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        self.book.reverse_lookup(a)
    }

    /// The AV's removal count (`GenerationWord::get`), with no call.
    #[inline]
    pub(crate) fn generation(&self) -> u64 {
        self.gen.get()
    }

    /// Which AV this is (the destination cache's key).
    #[inline]
    pub(crate) fn id(&self) -> usize {
        self.gen.id()
    }
}

/// A send as the thunks describe it.
///
/// `I` holds the buffer list: the C face lends it (`&IovList`: a 136-byte
/// list moved into the arguments is a call to `memcpy` per post), the
/// engine's tests own it.
pub(crate) struct SendArgs<I: Borrow<IovList> = IovList> {
    pub(crate) dest: fi_addr_t,
    pub(crate) iov: I,
    pub(crate) tagged: bool,
    pub(crate) tag: u64,
    pub(crate) data: u64,
    /// Effective operation flags.
    pub(crate) flags: u64,
    pub(crate) context: usize,
    /// `fi_inject`/`fi_injectdata`: buffer reusable on return, no completion.
    pub(crate) inject_call: bool,
}

/// A receive as the thunks describe it.
/// (`I` as for [`SendArgs`].)
pub(crate) struct RecvArgs<I: Borrow<IovList> = IovList> {
    pub(crate) src: fi_addr_t,
    pub(crate) iov: I,
    pub(crate) tagged: bool,
    pub(crate) tag: u64,
    pub(crate) ignore: u64,
    pub(crate) flags: u64,
    pub(crate) context: usize,
}

impl<I: Borrow<IovList>> RecvArgs<I> {
    /// The same arguments owning a copy of the buffer list.
    pub(crate) fn owned(&self) -> RecvArgs {
        RecvArgs {
            src: self.src,
            iov: *self.iov.borrow(),
            tagged: self.tagged,
            tag: self.tag,
            ignore: self.ignore,
            flags: self.flags,
            context: self.context,
        }
    }
}

struct State {
    cfg: EpConfig,
    inflight: Slab<Inflight>,
    pulls: Vec<PendingPull>,
    m: Matching,
    tx: FastMap<u64, TxOp>,
    rx: Slab<RxStream>,
    next_id: u64,
    /// Control records produced while consuming (sent after the pass).
    outbox: Vec<(Addr, WireHdr)>,
    /// Peers whose CMA attempts failed: stream from them instead.
    no_cma: FastSet<Addr>,
    watch_tick: u32,
    /// Buffered receives (FI_BUFFERED_RECV): None on endpoints without.
    buf: Option<Box<Buffered>>,
    /// RMA operations and the target's work (`rma.rs`).
    rma: rma::Rma,
    /// The last destination resolved through the AV (`destination`).
    dest: Option<DestCache>,
    /// Stalls of our sends, and of peers' messages held back (debug log;
    /// made at the first refusal seen with debug lines enabled).
    stalls: Option<Box<stall::Stalls>>,
}

/// A resolved destination: `fi_addr` in the AV at address `av` gave
/// `addr` (canonical for the port) when the AV's generation was `gen`
/// (read before the lookup; core/av.rs, "Thread safety").
#[derive(Clone, Copy)]
struct DestCache {
    av: usize,
    fi_addr: fi_addr_t,
    gen: u64,
    addr: Addr,
}

pub(crate) struct Inner {
    port: Box<dyn Port>,
    st: State,
}

pub(crate) use crate::transport::PEER_FAILED;

/// The pause between the passes of a close waiting for peers' pushes
/// ([`Inner::close`]): short against the copy of a large push (a 512 KiB
/// part of a split message), long enough to leave a shared core to the
/// peer.
const CLOSE_NAP: Duration = Duration::from_micros(50);

impl Inner {
    /// `fi_setname` before `fi_enable`: the endpoint moves to `port` (no
    /// traffic has flowed; the old port closes when dropped here).
    pub(crate) fn replace_port(&mut self, port: Box<dyn Port>) {
        self.port = port;
        self.advertise_rts_prefix();
    }

    pub(crate) fn new(port: Box<dyn Port>, cfg: EpConfig) -> Inner {
        Inner {
            port,
            st: State {
                m: Matching::new(cfg.unexp_budget),
                cfg,
                inflight: Slab::default(),
                pulls: Vec::new(),
                tx: FastMap::default(),
                rx: Slab::default(),
                next_id: 1,
                outbox: Vec::new(),
                no_cma: Default::default(),
                watch_tick: 0,
                buf: None,
                rma: Default::default(),
                dest: None,
                stalls: None,
            },
        }
    }

    pub(crate) fn addr(&self) -> Addr {
        self.port.addr()
    }

    pub(crate) fn wait_fd(&self) -> std::os::fd::RawFd {
        self.port.wait_fd()
    }

    pub(crate) fn set_sleepers(&mut self, n: usize) {
        self.port.set_sleepers(n);
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.port.has_pending()
    }

    pub(crate) fn config(&self) -> &EpConfig {
        &self.st.cfg
    }

    pub(crate) fn config_mut(&mut self) -> &mut EpConfig {
        &mut self.st.cfg
    }

    /// Whether operations wait on peers (see `State::waits_on_peers`).
    pub(crate) fn waits_on_peers(&self) -> bool {
        self.st.waits_on_peers()
    }

    pub(crate) fn tx_outstanding(&self) -> usize {
        self.st.tx.len() + self.st.rma.outstanding()
    }

    pub(crate) fn rx_posted(&self) -> usize {
        self.st.m.posted_count() + self.st.rx.len() + self.st.inflight.len() + self.st.pulls.len()
    }

    /// One progress pass: consume inbound records, fetch matched rendezvous
    /// data, send what that produced, stream pending rendezvous data, notice
    /// dead peers.
    pub(crate) fn progress<'a>(&mut self, b: impl Into<Bound<'a>>) {
        self.pass(&b.into());
    }

    /// [`Inner::progress`] with the view borrowed, not copied (the pass of
    /// `Source::progress`, run by every empty CQ read). Returns whether the
    /// transport saw a peer move ([`Port::poll`]).
    ///
    /// The pass's body is here, inlined into this caller only: a call frame
    /// less per empty CQ read, while the post paths keep calling
    /// [`Inner::pass`], which is this body out of line.
    #[inline(always)]
    pub(crate) fn progress_in(&mut self, b: &Bound<'_>) -> bool {
        let (port, st) = (&mut self.port, &mut self.st);
        let moved = port.poll(&mut EngineDelivery { st, b });
        st.after_poll(port.as_mut(), b);
        moved
    }

    fn pass(&mut self, b: &Bound<'_>) {
        self.progress_in(b);
    }

    /// Endpoint close: waits (at most `cfg.close_wait`) until no peer may
    /// still be writing into the application's buffers, then orderly
    /// goodbye to peers; nothing more completes.
    pub(crate) fn close(&mut self) {
        self.close_with(&mut || std::thread::sleep(CLOSE_NAP));
    }

    /// [`Inner::close`], calling `idle` between the passes of its wait
    /// (the engine's tests progress the peer there).
    pub(crate) fn close_with(&mut self, idle: &mut dyn FnMut()) {
        self.await_pushes(idle);
        self.st.buf_close(self.port.as_mut());
        self.port.close();
    }

    /// Progresses the endpoint (completions go nowhere: no CQ or counter
    /// is bound in these passes) until no peer may be writing into our
    /// memory — every split receive has its `PUSHED` (or its sender is
    /// gone: dead, or its `BYE` read) and every CMA read its target's
    /// answer (or the target failed) — or until `cfg.close_wait` ran out.
    /// Past the bound a push already started may still land in a buffer
    /// the application frees after the close (docs/shm.md, Large
    /// messages): logged. A bound of 0: no wait at all (the close goes on
    /// at once).
    fn await_pushes(&mut self, idle: &mut dyn FnMut()) {
        if self.st.cfg.close_wait.is_zero() || !self.st.pushed_into() {
            return;
        }
        let b = Bound::default();
        let deadline = Instant::now() + self.st.cfg.close_wait;
        loop {
            self.pass(&b);
            self.st.forget_dead_pushers(self.port.as_mut(), &b);
            if !self.st.pushed_into() {
                return;
            }
            if Instant::now() >= deadline {
                crate::base::log::log_warn!(
                    FI_LOG_EP_CTRL,
                    "endpoint closed with a peer's write into its buffers unanswered after {:?} (split \
                     receive or CMA read; FI_RUSTFAB_SHM_CLOSE_WAIT): a push already under way may still \
                     land in them",
                    self.st.cfg.close_wait
                );
                return;
            }
            idle();
        }
    }
}

/// The endpoint core as the transport calls it during `poll`.
struct EngineDelivery<'a> {
    st: &'a mut State,
    b: &'a Bound<'a>,
}

impl Delivery for EngineDelivery<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        if op::is_rma(hdr.op) {
            return self.st.rma_place(self.b, src, hdr);
        }
        let p = self.st.place(self.b, src, src_pid, hdr);
        if p == Place::Discard && hdr.op == op::EAGER && hdr.flags & flag::ACK_ARRIVE != 0 {
            // Off the socket and dropped: transmit complete all the same.
            self.st.ack(*src, hdr.msg_id, None, 0);
        }
        p
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        if rma::owns_handle(handle) {
            return self.st.rma_placed(self.b, handle, result);
        }
        self.st.placed(self.b, handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.st.buffered(src, src_pid, hdr, data)
    }
    fn deliver(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if self.st.deliver_matched(self.b, src, hdr, payload) {
            return Disposition::Consumed;
        }
        crate::transport::place_and_copy(self, src, src_pid, hdr, payload)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
        if op::is_rma(hdr.op) {
            return self.st.rma_control(self.b, src, src_pid, hdr, payload);
        }
        self.st.control(self.b, src, src_pid, hdr, payload)
    }
    fn sent(&mut self, msg_id: u64, result: Result<()>) {
        self.st.sent(self.b, msg_id, result)
    }
}

impl State {
    fn ack(&mut self, to: Addr, msg_id: u64, status: Option<Error>, taken: usize) {
        let mut h = WireHdr::new(op::ACK);
        h.msg_id = msg_id;
        h.len = taken as u64;
        h.aux = status.map(|e| e.0 as u32).unwrap_or(0);
        self.outbox.push((to, h));
    }

    /// Work that needs the port, after it handed us records: rendezvous
    /// pulls, control records, DATA streaming, peer liveness.
    ///
    /// This runs on every progress pass (every CQ read of a polling
    /// application) and is nearly always idle: the tests are inlined into
    /// the pass and the work is an out-of-line call, so that an idle pass
    /// sets up no frame for it.
    #[inline]
    fn after_poll(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        if !self.pulls.is_empty()
            || self.buf_has_pulls()
            || self.rma.busy()
            || !self.outbox.is_empty()
            || !self.tx.is_empty()
        {
            self.after_poll_work(port, b);
        }
        self.watch_peers(port, b);
    }

    #[inline(never)]
    fn after_poll_work(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        if !self.pulls.is_empty() {
            self.run_pulls(port, b);
        }
        self.buf_run_pulls(port, b);
        self.rma_after_poll(port, b);
        for (to, h) in self.outbox.drain(..) {
            // A dead peer's control records are dropped: its failure is
            // reported through the peer events instead.
            let _ = port.send_ctl(&to, &h);
        }
        if !self.tx.is_empty() {
            self.pump(port, b);
        }
    }

    fn control(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr, p: &dyn PayloadIn) -> Disposition {
        match h.op {
            op::RTS => self.on_rts(b, src, src_pid, h, p),
            op::ACK => {
                self.on_ack(b, src, h);
                Disposition::Consumed
            }
            op::BYE => {
                // shm: the sender closed its endpoint (its ring is done);
                // what of its messages is still in its memory is gone.
                self.buf_peer_failed(b, src);
                self.rma_peer_failed(b, src, PEER_FAILED);
                self.forget_owed(b, src, PEER_FAILED);
                // Nor is its receive buffer: a push asked for before it
                // closed is not made (the send waits for its end as any).
                for t in self.tx.values_mut() {
                    if t.peer == *src && matches!(t.state, TxState::Pushing { .. }) {
                        t.state = TxState::WaitAck;
                    }
                }
                // Its pushes into our split receives are over (a push is
                // made and answered within one of its passes, before its
                // close): what was not answered will never be.
                self.split_sender_gone(b, src);
                Disposition::Consumed
            }
            op::CTS => {
                self.on_cts(src, src_pid, h, p);
                Disposition::Consumed
            }
            op::PUSHED => {
                self.on_pushed(b, src, h);
                Disposition::Consumed
            }
            _ => Disposition::Consumed,
        }
    }
}

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
