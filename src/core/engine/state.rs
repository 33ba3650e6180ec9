//! An endpoint's state and what it is configured and bound with: its
//! configuration ([`EpConfig`]), the objects bound to it ([`Binds`], seen
//! during a call as a [`Bound`]), the address book view, the arguments of
//! sends and receives, and [`Inner`] (the port and the [`State`]) — the
//! types every file of the engine works on. Their behaviour is in the
//! files of each path (`impl State` and `impl Inner` blocks).
use super::buffered::Buffered;
use super::matching::{IovList, Matching};
use super::types::*;
use crate::abi::*;
use crate::base::collections::{FastMap, FastSet, Slab};
use crate::core::av::{Av, GenerationWord};
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::users::Held;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, WireHdr};
use crate::transport::Port;
use core::borrow::Borrow;
use std::time::Duration;

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
    /// Which receives read or must name their `src_addr`, and which may be
    /// multi-receive buffers (`directed.rs`).
    pub(crate) matching: super::directed::RecvMatching,
    /// A datagram (`FI_EP_DGRAM`) endpoint: unreliable, so no completion
    /// level waits for the peer's answer (`core/dgram.rs`).
    pub(crate) dgram: bool,
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
    /// The context of a scalable endpoint the call is made on (transmit
    /// context for a send, receive context for a receive; `lanes.rs`),
    /// whose bindings the CQ and counter fields above then are; 0 on
    /// other endpoints.
    pub(crate) ctx: u8,
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
            ctx: 0,
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
    pub(super) binds: Binds,
    /// Borrows from `binds`, whose lifetime the type cannot name: only
    /// handed out shortened to a borrow of `self` ([`FrozenBinds::bound`]).
    pub(super) view: Bound<'static>,
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
    /// The AV's `rx_ctx_bits` (`fi_rx_addr`): 0 unless scalable
    /// endpoints' receive contexts are addressed through it.
    fn rx_ctx_bits(&self) -> u32 {
        0
    }
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
    fn rx_ctx_bits(&self) -> u32 {
        self.rx_ctx_bits
    }
}

/// A bound AV as the engine uses it: its lookups (dyn calls, under the
/// table's read lock) and its generation word, borrowed when the view is
/// built, so that the destination cache's test on every send is a plain
/// load (core/av.rs, "Thread safety").
#[derive(Clone, Copy)]
pub(crate) struct AvView<'a> {
    pub(super) book: &'a dyn AddrBook,
    pub(super) gen: GenerationWord<'a>,
    /// The AV's `rx_ctx_bits`, read once.
    pub(super) rx_bits: u32,
}

impl<'a> AvView<'a> {
    pub(crate) fn new(book: &'a dyn AddrBook) -> AvView<'a> {
        AvView {
            book,
            gen: book.generation_word(),
            rx_bits: book.rx_ctx_bits(),
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

    /// The receive context an `fi_addr` names (`fi_rx_addr`; 0 when the
    /// AV has no `rx_ctx_bits`), as the header's `flag::LANE` bits;
    /// `-FI_EINVAL` for a context beyond what a record can name.
    #[cold]
    #[inline(never)]
    pub(crate) fn lane_flags(&self, fi_addr: fi_addr_t) -> Result<u32, crate::base::error::Error> {
        if self.rx_bits == 0 {
            return Ok(0);
        }
        let lane = fi_addr >> (64 - self.rx_bits);
        if lane as usize >= flag::LANES {
            return Err(crate::base::error::Error::INVAL);
        }
        Ok((lane as u32) << flag::LANE_SHIFT)
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

pub(super) struct State {
    pub(super) cfg: EpConfig,
    pub(super) inflight: Slab<Inflight>,
    pub(super) pulls: Vec<PendingPull>,
    pub(super) m: Matching,
    pub(super) tx: FastMap<u64, TxOp>,
    pub(super) rx: Slab<RxStream>,
    pub(super) next_id: u64,
    /// Control records produced while consuming (sent after the pass).
    pub(super) outbox: Vec<(Addr, WireHdr)>,
    /// Peers whose CMA attempts failed: stream from them instead.
    pub(super) no_cma: FastSet<Addr>,
    pub(super) watch_tick: u32,
    /// Buffered receives (FI_BUFFERED_RECV): None on endpoints without.
    pub(super) buf: Option<Box<Buffered>>,
    /// RMA operations and the target's work (`rma.rs`).
    pub(super) rma: Rma,
    /// The last destination resolved through the AV (`destination`).
    pub(super) dest: Option<DestCache>,
    /// Stalls of our sends, and of peers' messages held back (debug log;
    /// made at the first refusal seen with debug lines enabled).
    pub(super) stalls: Option<Box<Stalls>>,
    /// A scalable endpoint's contexts (`lanes.rs`); None on others.
    pub(super) lanes: Option<Box<super::lanes::Lanes>>,
}

/// A resolved destination: `fi_addr` in the AV at address `av` gave
/// `addr` (canonical for the port) when the AV's generation was `gen`
/// (read before the lookup; core/av.rs, "Thread safety"), and the
/// receive context `fi_addr` names (`AvView::lane_flags`).
#[derive(Clone, Copy)]
pub(super) struct DestCache {
    pub(super) av: usize,
    pub(super) fi_addr: fi_addr_t,
    pub(super) gen: u64,
    pub(super) addr: Addr,
    pub(super) lane: Result<u32, crate::base::error::Error>,
}

pub(crate) struct Inner {
    pub(super) port: Box<dyn Port>,
    pub(super) st: State,
}
