//! The reliable-datagram (`FI_EP_RDM`) endpoint core: posting sends and
//! receives, the message protocols on top of a transport, completion
//! generation, cancel, peer failure. No C types beyond plain values: the
//! thunks in `ep/mod.rs` translate the libfabric calls into [`SendArgs`] /
//! [`RecvArgs`].
//!
//! Protocols (docs/protocol.md):
//! * **eager** (≤ `EAGER_MAX`, and every inject): one EAGER record carries the
//!   data; the receiver copies it straight from the ring into the matched
//!   buffer (one copy each way), or into the unexpected queue within the
//!   endpoint's budget — beyond it the ring is left full (backpressure) and
//!   the sender's posts return -FI_EAGAIN.
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

pub mod buffered;
pub mod matching;

use self::buffered::{BufMsg, BufOpts, Buffered, PrefixStream, Stage, BUF_HANDLE, PREFIX_AUX};
use self::matching::{IovList, Matching, PostedRecv, RtsInfo, UnexBody, Unexpected};
use crate::abi::*;
use crate::base::collections::{FastMap, FastSet, Slab};
use crate::base::error::{Error, Result};
use crate::core::av::Av;
use crate::core::cntr::Cntr;
use crate::core::cq::{Cq, CqEntry, CqErrEntry};
use crate::core::users::Held;
use crate::transport::addr::Addr;
use crate::transport::proto::{flag, op, WireHdr, IOV_ENTRY};
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Place, Port, Sent};
use core::ffi::c_void;
use std::time::{Duration, Instant};

/// Endpoint attributes that govern the data path (from `fi_info`, setopt).
#[derive(Clone, Debug)]
pub struct EpConfig {
    pub caps: u64,
    pub tx_op_flags: u64,
    pub rx_op_flags: u64,
    pub tx_size: usize,
    pub rx_size: usize,
    pub inject_size: usize,
    pub max_msg_size: usize,
    pub min_multi_recv: usize,
    /// Bytes of unexpected data the endpoint may hold.
    pub unexp_budget: usize,
    /// Cross-memory attach allowed (FI_RUSTFAB_SHM_CMA).
    pub cma: bool,
    /// A connected (`FI_EP_MSG`) endpoint's one peer: sends go there
    /// whatever their destination address, and no AV is used.
    pub fixed_peer: Option<Addr>,
}

/// What the endpoint is bound to (fixed once enabled).
#[derive(Default)]
pub struct Binds {
    pub av: Option<Held<Av>>,
    pub tx_cq: Option<Held<Cq>>,
    pub tx_selective: bool,
    pub rx_cq: Option<Held<Cq>>,
    pub rx_selective: bool,
    pub send_cntr: Option<Held<Cntr>>,
    pub recv_cntr: Option<Held<Cntr>>,
    pub eq: Option<Held<crate::core::eq::Eq>>,
}

/// The endpoint's bindings as the engine uses them during one call: where
/// completions go and how addresses resolve. Borrowed from [`Binds`] (what
/// `fi_ep_bind` recorded); the engine's tests build one around their own
/// CQs, counters and address table.
#[derive(Clone, Copy, Default)]
pub struct Bound<'a> {
    pub av: Option<&'a dyn AddrBook>,
    pub tx_cq: Option<&'a Cq>,
    pub tx_selective: bool,
    pub rx_cq: Option<&'a Cq>,
    pub rx_selective: bool,
    pub send_cntr: Option<&'a Cntr>,
    pub recv_cntr: Option<&'a Cntr>,
}

impl<'a> From<&'a Binds> for Bound<'a> {
    fn from(b: &'a Binds) -> Bound<'a> {
        Bound {
            av: b.av.as_deref().map(|av| av as &dyn AddrBook),
            tx_cq: b.tx_cq.as_deref(),
            tx_selective: b.tx_selective,
            rx_cq: b.rx_cq.as_deref(),
            rx_selective: b.rx_selective,
            send_cntr: b.send_cntr.as_deref(),
            recv_cntr: b.recv_cntr.as_deref(),
        }
    }
}

/// Address resolution the engine needs from an address vector: the peer
/// behind an `fi_addr` (sends, directed receives) and the `fi_addr` of a
/// source (`FI_SOURCE`).
pub trait AddrBook {
    fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr>;
    fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t>;
}

impl AddrBook for Av {
    fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        Av::lookup_addr(self, fi_addr)
    }
    fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        Av::reverse_lookup(self, a)
    }
}

/// A send as the thunks describe it.
pub struct SendArgs {
    pub dest: fi_addr_t,
    pub iov: IovList,
    pub tagged: bool,
    pub tag: u64,
    pub data: u64,
    /// Effective operation flags.
    pub flags: u64,
    pub context: usize,
    /// `fi_inject`/`fi_injectdata`: buffer reusable on return, no completion.
    pub inject_call: bool,
}

/// A receive as the thunks describe it.
pub struct RecvArgs {
    pub src: fi_addr_t,
    pub iov: IovList,
    pub tagged: bool,
    pub tag: u64,
    pub ignore: u64,
    pub flags: u64,
    pub context: usize,
}

enum TxState {
    /// Queued in the transport; then done, or waiting for an ACK (`ack`).
    WaitSent { ack: bool },
    /// Waiting for the receiver's ACK.
    WaitAck,
    /// Streaming DATA records for receiver handle `handle`, bytes
    /// `off .. end` (a ranged CTS asks for part of the message).
    Streaming { handle: u32, off: usize, end: usize },
}

struct TxOp {
    peer: Addr,
    context: usize,
    flags: u64,
    tagged: bool,
    len: usize,
    iov: IovList,
    state: TxState,
    want_completion: bool,
    /// Holds a CQ slot (admission control at post time).
    claimed: bool,
    /// The eager limit towards this peer (DATA chunk size when streaming).
    eager_limit: usize,
}

/// A receive being filled by DATA records (no-CMA rendezvous).
struct RxStream {
    recv: PostedRecv,
    dst: IovList,
    buf: usize,
    src: Addr,
    src_pid: i32,
    hdr: WireHdr,
    take: usize,
    got: usize,
    extra_flags: u64,
    last_check: Instant,
    /// Bytes of the DATA record being placed (0: none in flight).
    chunk: usize,
}

/// Placement handles of streamed receives have this bit set (in-flight
/// eager placements use slab handles below it).
const STREAM_HANDLE: u32 = 1 << 31;

/// A payload being placed into a matched receive (two-phase delivery).
struct Inflight {
    recv: PostedRecv,
    src: Addr,
    hdr: WireHdr,
    buf: usize,
    take: usize,
    extra_flags: u64,
}

/// A matched rendezvous message whose data is still to be fetched.
struct PendingPull {
    recv: PostedRecv,
    dst: IovList,
    src: Addr,
    src_pid: i32,
    hdr: WireHdr,
    rts: RtsInfo,
    extra_flags: u64,
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
}

pub struct Inner {
    port: Box<dyn Port>,
    st: State,
}

pub use crate::transport::PEER_FAILED;

const STREAM_LIVENESS: Duration = Duration::from_millis(100);

impl Inner {
    pub fn new(port: Box<dyn Port>, cfg: EpConfig) -> Inner {
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
            },
        }
    }

    pub fn addr(&self) -> Addr {
        self.port.addr()
    }

    pub fn wait_fd(&self) -> std::os::fd::RawFd {
        self.port.wait_fd()
    }

    pub fn set_sleepers(&mut self, n: usize) {
        self.port.set_sleepers(n);
    }

    pub fn has_pending(&self) -> bool {
        self.port.has_pending()
    }

    pub fn config(&self) -> &EpConfig {
        &self.st.cfg
    }

    pub fn config_mut(&mut self) -> &mut EpConfig {
        &mut self.st.cfg
    }

    /// Whether operations wait on peers (see `State::waits_on_peers`).
    pub fn waits_on_peers(&self) -> bool {
        self.st.waits_on_peers()
    }

    pub fn tx_outstanding(&self) -> usize {
        self.st.tx.len()
    }

    pub fn rx_posted(&self) -> usize {
        self.st.m.posted_count() + self.st.rx.len() + self.st.inflight.len() + self.st.pulls.len()
    }

    /// One progress pass: consume inbound records, fetch matched rendezvous
    /// data, send what that produced, stream pending rendezvous data, notice
    /// dead peers.
    pub fn progress<'a>(&mut self, b: impl Into<Bound<'a>>) {
        self.pass(&b.into());
    }

    fn pass(&mut self, b: &Bound<'_>) {
        let (port, st) = (&mut self.port, &mut self.st);
        port.poll(&mut Dlv { st, b });
        st.after_poll(port.as_mut(), b);
    }

    pub fn send<'a>(&mut self, b: impl Into<Bound<'a>>, a: SendArgs) -> Result<()> {
        let b = &b.into();
        let peer = match self.st.cfg.fixed_peer {
            Some(p) => p,
            None => {
                let av = b.av.as_ref().ok_or(Error::NOAV)?;
                self.port.canonical(&av.lookup_addr(a.dest).ok_or(Error::INVAL)?)
            }
        };
        let len = a.iov.total();
        let cfg = &self.st.cfg;
        if len > cfg.max_msg_size {
            return Err(Error::MSGSIZE);
        }
        let inject = a.inject_call || a.flags & FI_INJECT != 0;
        if inject && len > cfg.inject_size {
            return Err(Error::MSGSIZE);
        }
        if self.st.tx.len() >= cfg.tx_size {
            self.pass(b);
            if self.st.tx.len() >= self.st.cfg.tx_size {
                return Err(Error::AGAIN);
            }
        }
        let want_completion = !a.inject_call && (!b.tx_selective || a.flags & FI_COMPLETION != 0);
        // FI_RM_ENABLED: an operation that could overrun the CQ is refused
        // with -FI_EAGAIN at post time; the slot is ours until completion.
        let claimed = match &b.tx_cq {
            Some(cq) if !a.inject_call => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            _ => false,
        };
        if a.flags & FI_MORE != 0 {
            self.port.more_coming();
        }
        let r = self.send_claimed(b, a, peer, want_completion, claimed);
        if r.is_err() && claimed {
            if let Some(cq) = &b.tx_cq {
                cq.unclaim_slot();
            }
        }
        r
    }

    fn send_claimed(
        &mut self,
        b: &Bound<'_>,
        a: SendArgs,
        peer: Addr,
        want_completion: bool,
        claimed: bool,
    ) -> Result<()> {
        let len = a.iov.total();
        let inject = a.inject_call || a.flags & FI_INJECT != 0;
        let delivery = a.flags & (FI_DELIVERY_COMPLETE | FI_MATCH_COMPLETE) != 0 && !a.inject_call;
        let id = self.st.next_id;
        let mut h = WireHdr::new(op::EAGER);
        h.tag = a.tag;
        h.data = a.data;
        h.msg_id = id;
        h.len = len as u64;
        if a.tagged {
            h.flags |= flag::TAGGED;
        }
        if a.flags & FI_REMOTE_CQ_DATA != 0 {
            h.flags |= flag::REMOTE_CQ_DATA;
        }
        let mut op = TxOp {
            peer,
            context: a.context,
            flags: a.flags,
            tagged: a.tagged,
            len,
            iov: a.iov,
            state: TxState::WaitAck,
            want_completion,
            claimed,
            eager_limit: self.port.eager_limit_for(&peer),
        };
        if len <= op.eager_limit || inject {
            if delivery {
                h.flags |= flag::ACK_REQ;
            }
            let sent = self.send_retry(b, &peer, &h, Payload::Iov(&a.iov, 0, len), inject)?;
            self.st.next_id += 1;
            match (sent, delivery) {
                (Sent::Done, false) => self.st.finish_tx(b, op, Ok(())),
                (Sent::Done, true) => {
                    self.st.tx.insert(id, op);
                }
                (Sent::Queued, ack) => {
                    op.state = TxState::WaitSent { ack };
                    self.st.tx.insert(id, op);
                }
            }
        } else {
            h.op = op::RTS;
            if self.st.cfg.cma {
                h.flags |= flag::CMA_OK;
            }
            let segs = a.iov.segments();
            h.aux = segs.len() as u32;
            let mut table = Vec::with_capacity(segs.len() * IOV_ENTRY);
            for &(p, l) in segs {
                table.extend_from_slice(&(p as u64).to_le_bytes());
                table.extend_from_slice(&(l as u64).to_le_bytes());
            }
            // A receiver with buffered receives asked for the message's
            // start right behind the RTS (`Port::rts_prefix`): both records
            // go out back to back, or neither does.
            let push = self.port.rts_prefix(&peer).min(len).min(op.eager_limit);
            if push > 0 {
                h.flags |= flag::PUSH;
                h.offset = push as u64;
                let need = table.len() + push + 4 * crate::transport::proto::HDR_LEN;
                if self.port.room(&peer) < need {
                    self.pass(b);
                    if self.port.room(&peer) < need {
                        return Err(Error::AGAIN);
                    }
                }
            }
            self.send_retry(b, &peer, &h, Payload::Bytes(&table), true)?;
            if push > 0 {
                let mut d = WireHdr::new(op::DATA);
                d.flags = flag::PUSH;
                d.msg_id = id;
                d.len = len as u64;
                // Cannot fail for room (checked above); a failing peer ends
                // the send through its failure event.
                let _ = self.port.send(&peer, &d, Payload::Iov(&a.iov, 0, push), false);
            }
            self.st.next_id += 1;
            self.st.tx.insert(id, op);
        }
        Ok(())
    }

    fn send_retry(&mut self, b: &Bound<'_>, peer: &Addr, h: &WireHdr, p: Payload<'_>, copy: bool) -> Result<Sent> {
        match self.port.send(peer, h, p, copy) {
            Err(e) if e == Error::AGAIN => {
                // Our own backlog or unconsumed records may be in the way:
                // one progress pass, then one more try.
                self.pass(b);
                self.port.send(peer, h, p, copy)
            }
            r => r,
        }
    }

    pub fn recv<'a>(&mut self, b: impl Into<Bound<'a>>, a: RecvArgs) -> Result<()> {
        let b = &b.into();
        if self.st.buf.is_some() && a.flags & (FI_CLAIM | FI_DISCARD) != 0 && a.flags & FI_PEEK == 0 {
            return self.buf_claim(b, a);
        }
        let src = if a.src != FI_ADDR_UNSPEC && self.st.cfg.caps & FI_DIRECTED_RECV != 0 {
            let av = b.av.as_ref().ok_or(Error::NOAV)?;
            Some(self.port.canonical(&av.lookup_addr(a.src).ok_or(Error::INVAL)?))
        } else {
            None
        };
        if a.flags & FI_MULTI_RECV != 0 && (a.tagged || self.st.cfg.caps & FI_MULTI_RECV == 0) {
            return Err(Error::BADFLAGS);
        }
        if a.flags & (FI_PEEK | FI_CLAIM) == 0 && self.rx_posted() >= self.st.cfg.rx_size {
            self.pass(b);
            if self.rx_posted() >= self.st.cfg.rx_size {
                return Err(Error::AGAIN);
            }
        }
        let claimed = match &b.rx_cq {
            Some(cq) => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            None => false,
        };
        let r = PostedRecv {
            context: a.context,
            iov: a.iov,
            src,
            tagged: a.tagged,
            tag: a.tag,
            ignore: a.ignore,
            flags: a.flags,
            used: 0,
            claimed,
        };
        let res = self.recv_claimed(b, r);
        if res.is_err() && claimed {
            if let Some(cq) = &b.rx_cq {
                cq.unclaim_slot();
            }
        }
        res
    }

    fn recv_claimed(&mut self, b: &Bound<'_>, r: PostedRecv) -> Result<()> {
        let a_flags = r.flags;
        if a_flags & FI_PEEK != 0 {
            self.pass(b);
            self.st.peek(b, &r);
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        if a_flags & FI_CLAIM != 0 {
            self.st.claim(b, r)?;
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        self.st.post_recv(b, r);
        self.st.after_poll(self.port.as_mut(), b);
        Ok(())
    }

    /// `fi_cancel`: a posted receive with this context completes with
    /// FI_ECANCELED (exactly one completion). Sends cannot be cancelled.
    pub fn cancel<'a>(&mut self, b: impl Into<Bound<'a>>, context: usize) -> Result<()> {
        let b = &b.into();
        let r = self.st.m.cancel(context).ok_or(Error::NOENT)?;
        self.st.complete_rx_err(b, &r, Error::CANCELED, 0, 0, 0, 0);
        Ok(())
    }

    /// A connected endpoint lost its connection (`fi_shutdown`, the peer's
    /// shutdown or death, a failed connect): every operation still
    /// outstanding completes with `e` (exactly once), and buffered
    /// unexpected messages are dropped. fi_cm(3): "Outstanding operations
    /// posted to the endpoint when fi_shutdown is called will be canceled".
    pub fn fail_all<'a>(&mut self, b: impl Into<Bound<'a>>, e: Error) {
        let b = &b.into();
        let st = &mut self.st;
        let ids: Vec<u64> = st.tx.keys().copied().collect();
        for id in ids {
            if let Some(t) = st.tx.remove(&id) {
                st.finish_tx(b, t, Err(e));
            }
        }
        let hs: Vec<u32> = st.rx.iter_mut().map(|(h, _)| h).collect();
        for h in hs {
            if let Some(s) = st.rx.remove(h) {
                let len = s.hdr.len as usize;
                st.complete_rx_err(b, &s.recv, e, s.hdr.tag, s.hdr.data, len, s.extra_flags);
            }
        }
        let hs: Vec<u32> = st.inflight.iter_mut().map(|(h, _)| h).collect();
        for h in hs {
            if let Some(f) = st.inflight.remove(h) {
                let len = f.hdr.len as usize;
                st.complete_rx_err(b, &f.recv, e, f.hdr.tag, f.hdr.data, len, f.extra_flags);
            }
        }
        for p in std::mem::take(&mut st.pulls) {
            let len = p.hdr.len as usize;
            st.complete_rx_err(b, &p.recv, e, p.hdr.tag, p.hdr.data, len, p.extra_flags);
        }
        for r in st.m.drain_posted() {
            st.complete_rx_err(b, &r, e, r.tag, 0, 0, 0);
        }
        if let Some(p) = st.cfg.fixed_peer {
            st.m.drop_unexpected_from(&p);
        }
        st.outbox.clear();
    }

    /// Endpoint close: orderly goodbye to peers; nothing more completes.
    pub fn close(&mut self) {
        self.st.buf_close(self.port.as_mut());
        self.port.close();
    }
}

/// The endpoint core as the transport calls it during `poll`.
struct Dlv<'a> {
    st: &'a mut State,
    b: &'a Bound<'a>,
}

impl Delivery for Dlv<'_> {
    fn place(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr) -> Place {
        self.st.place(self.b, src, src_pid, hdr)
    }
    fn placed(&mut self, handle: u32, result: Result<()>) {
        self.st.placed(self.b, handle, result)
    }
    fn buffered(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, data: Vec<u8>) {
        self.st.buffered(src, src_pid, hdr, data)
    }
    fn control(&mut self, src: &Addr, src_pid: i32, hdr: &WireHdr, payload: &dyn PayloadIn) -> Disposition {
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
    fn after_poll(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        // Every branch is skipped cheaply when idle: this runs on every
        // progress pass (every CQ read of a polling application).
        if !self.pulls.is_empty() {
            self.run_pulls(port, b);
        }
        self.buf_run_pulls(port, b);
        for (to, h) in self.outbox.drain(..) {
            // A dead peer's control records are dropped: its failure is
            // reported through the peer events instead.
            let _ = port.send_ctl(&to, &h);
        }
        if !self.tx.is_empty() {
            self.pump(port, b);
        }
        self.watch_peers(port, b);
    }

    // ------------------------------------------------------------ inbound

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
                Disposition::Consumed
            }
            op::CTS => {
                if let Some(t) = self.tx.get_mut(&h.msg_id) {
                    if t.peer == *src && matches!(t.state, TxState::WaitAck) && t.len > t.eager_limit {
                        // RANGE: only bytes `offset .. len` (a buffered
                        // receiver fetching a message's prefix).
                        let (off, end) = if h.flags & flag::RANGE != 0 {
                            (h.offset as usize, h.len as usize)
                        } else {
                            (0, t.len)
                        };
                        if off < end && end <= t.len {
                            t.state = TxState::Streaming {
                                handle: h.aux,
                                off,
                                end,
                            };
                        }
                    }
                }
                Disposition::Consumed
            }
            _ => Disposition::Consumed,
        }
    }

    fn on_ack(&mut self, b: &Bound<'_>, src: &Addr, h: &WireHdr) {
        let Some(t) = self.tx.get(&h.msg_id) else { return };
        if t.peer != *src || matches!(t.state, TxState::WaitSent { .. }) {
            return; // not ours to complete: a confused or hostile peer
        }
        let Some(t) = self.tx.remove(&h.msg_id) else { return };
        let status = match h.aux {
            0 => Ok(()),
            e => Err(Error(e as i32)),
        };
        self.finish_tx(b, t, status);
    }

    fn sent(&mut self, b: &Bound<'_>, msg_id: u64, result: Result<()>) {
        let Some(t) = self.tx.get_mut(&msg_id) else { return };
        let TxState::WaitSent { ack } = t.state else { return };
        if result.is_ok() && ack {
            t.state = TxState::WaitAck;
            return;
        }
        let t = self.tx.remove(&msg_id).expect("op just found");
        self.finish_tx(b, t, result);
    }

    /// Where the payload of an arriving MSG goes (fi_msg(3)/fi_tagged(3)
    /// matching; multi-recv buffers take messages at their fill offset).
    fn place(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr) -> Place {
        if h.op == op::DATA {
            return self.place_data(src, h);
        }
        let tagged = h.flags & flag::TAGGED != 0;
        let len = h.len as usize;
        while let Some(idx) = self.m.find_posted(tagged, src, h.tag) {
            let multi = self
                .m
                .posted_mut(tagged, idx)
                .is_some_and(|r| r.flags & FI_MULTI_RECV != 0);
            if !multi {
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                let take = len.min(r.iov.total());
                let (dst, buf) = (r.iov, r.iov.addr_at(0));
                let handle = self.inflight.insert(Inflight {
                    recv: r,
                    src: *src,
                    hdr: *h,
                    buf,
                    take,
                    extra_flags: 0,
                });
                return Place::Into { handle, dst, take };
            }
            if !b.rx_cq.as_ref().is_none_or(|c| c.has_room()) {
                return Place::Stall;
            }
            let min = self.cfg.min_multi_recv.max(1);
            let r = self.m.posted_mut(tagged, idx).expect("index just found");
            if len > r.iov.total() - r.used {
                // Does not fit what is left: release this buffer and match
                // the message against the next receive.
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                self.release_multi(b, &r);
                continue;
            }
            let dst = r.iov.sub(r.used, len);
            let buf = r.iov.addr_at(r.used);
            r.used += len;
            let done = r.iov.total() - r.used < min;
            let mut snapshot = r.clone();
            snapshot.claimed &= done; // the buffer's claim pays for its final completion
            if done {
                self.m.take_posted(tagged, idx);
            }
            let extra_flags = if done { FI_MULTI_RECV } else { 0 };
            let handle = self.inflight.insert(Inflight {
                recv: snapshot,
                src: *src,
                hdr: *h,
                buf,
                take: len,
                extra_flags,
            });
            return Place::Into { handle, dst, take: len };
        }
        if self.buf.is_some() {
            return self.buf_place(b, src, src_pid, h);
        }
        if self.m.can_buffer(len) {
            Place::Buffer
        } else {
            Place::Stall
        }
    }

    fn placed(&mut self, b: &Bound<'_>, handle: u32, result: Result<()>) {
        if handle & STREAM_HANDLE != 0 {
            return self.stream_placed(b, handle & !STREAM_HANDLE, result);
        }
        if handle & BUF_HANDLE != 0 {
            return self.buf_placed(b, handle & !BUF_HANDLE, result);
        }
        let Some(f) = self.inflight.remove(handle) else { return };
        let len = f.hdr.len as usize;
        match result {
            Ok(()) => {
                self.complete_rx(
                    b,
                    &f.recv,
                    Some(f.src),
                    &f.hdr,
                    f.buf,
                    f.take,
                    len - f.take,
                    f.extra_flags,
                );
                if f.hdr.flags & flag::ACK_REQ != 0 {
                    self.ack(f.src, f.hdr.msg_id, None, f.take);
                }
            }
            Err(e) => self.complete_rx_err(b, &f.recv, e, f.hdr.tag, f.hdr.data, len, f.extra_flags),
        }
    }

    fn buffered(&mut self, src: &Addr, src_pid: i32, h: &WireHdr, data: Vec<u8>) {
        self.m.push_unexpected(Unexpected {
            src: *src,
            src_pid,
            msg_id: h.msg_id,
            tagged: h.flags & flag::TAGGED != 0,
            tag: h.tag,
            data: h.data,
            wire_flags: h.flags,
            len: h.len as usize,
            body: UnexBody::Eager(data),
            claimed_by: None,
        });
    }

    /// A multi-recv buffer with too little room left is handed back with an
    /// (empty) FI_MULTI_RECV completion.
    fn release_multi(&mut self, b: &Bound<'_>, r: &PostedRecv) {
        let h = WireHdr::default();
        self.complete_rx(b, r, None, &h, r.iov.addr_at(r.used), 0, 0, FI_MULTI_RECV);
    }

    fn parse_rts(h: &WireHdr, p: &dyn PayloadIn) -> Option<RtsInfo> {
        let table = p.to_vec();
        let mut remote = Vec::with_capacity(table.len() / IOV_ENTRY);
        let mut total: u64 = 0;
        for e in table.chunks_exact(IOV_ENTRY) {
            let a = u64::from_le_bytes(e[..8].try_into().ok()?);
            let l = u64::from_le_bytes(e[8..].try_into().ok()?);
            total = total.checked_add(l)?;
            remote.push((a, l));
        }
        if total < h.len {
            return None;
        }
        Some(RtsInfo {
            msg_id: h.msg_id,
            remote,
            cma_ok: h.flags & flag::CMA_OK != 0,
        })
    }

    fn on_rts(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr, p: &dyn PayloadIn) -> Disposition {
        let Some(rts) = Self::parse_rts(h, p) else {
            self.ack(*src, h.msg_id, Some(Error::IO), 0);
            return Disposition::Consumed;
        };
        if h.len > self.cfg.max_msg_size as u64 {
            // Larger than this endpoint takes (a sender with
            // FI_VARIABLE_MSG, or a different max_msg_size): the send
            // fails, the connection stays.
            self.ack(*src, h.msg_id, Some(Error::MSGSIZE), 0);
            return Disposition::Consumed;
        }
        let tagged = h.flags & flag::TAGGED != 0;
        let len = h.len as usize;
        while let Some(idx) = self.m.find_posted(tagged, src, h.tag) {
            let multi = self
                .m
                .posted_mut(tagged, idx)
                .is_some_and(|r| r.flags & FI_MULTI_RECV != 0);
            if !multi {
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                let dst = r.iov;
                self.pulls.push(PendingPull {
                    recv: r,
                    dst,
                    src: *src,
                    src_pid,
                    hdr: *h,
                    rts,
                    extra_flags: 0,
                });
                return Disposition::Consumed;
            }
            let min = self.cfg.min_multi_recv.max(1);
            let r = self.m.posted_mut(tagged, idx).expect("index just found");
            if len > r.iov.total() - r.used {
                let r = self.m.take_posted(tagged, idx).expect("index just found");
                self.release_multi(b, &r);
                continue;
            }
            let dst = r.iov.sub(r.used, len);
            r.used += len;
            let done = r.iov.total() - r.used < min;
            let mut snapshot = r.clone();
            snapshot.claimed &= done;
            if done {
                self.m.take_posted(tagged, idx);
            }
            let extra_flags = if done { FI_MULTI_RECV } else { 0 };
            self.pulls.push(PendingPull {
                recv: snapshot,
                dst,
                src: *src,
                src_pid,
                hdr: *h,
                rts,
                extra_flags,
            });
            return Disposition::Consumed;
        }
        if self.buf.is_some() {
            return self.buf_rts(b, src, src_pid, h, rts);
        }
        if !self.m.can_buffer(rts.remote.len() * IOV_ENTRY) {
            return Disposition::Stall;
        }
        self.m.push_unexpected(Unexpected {
            src: *src,
            src_pid,
            msg_id: h.msg_id,
            tagged,
            tag: h.tag,
            data: h.data,
            wire_flags: h.flags,
            len,
            body: UnexBody::Rendezvous(rts),
            claimed_by: None,
        });
        Disposition::Consumed
    }

    /// Moves matched rendezvous messages into place: CMA when the transport
    /// can, else asks the sender to stream (CTS).
    fn run_pulls(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        for p in std::mem::take(&mut self.pulls) {
            let len = p.hdr.len as usize;
            let take = len.min(p.dst.total());
            let buf = p.dst.addr_at(0);
            if self.cfg.cma && p.rts.cma_ok && !self.no_cma.contains(&p.src) && p.src_pid > 0 {
                match port.pull(p.src_pid, &p.rts.remote, &p.dst, take) {
                    Ok(_) => {
                        self.ack(p.src, p.hdr.msg_id, None, take);
                        self.complete_rx(b, &p.recv, Some(p.src), &p.hdr, buf, take, len - take, p.extra_flags);
                        continue;
                    }
                    Err(e) if e == Error::OPNOTSUPP => {
                        self.no_cma.insert(p.src);
                    }
                    Err(e) => {
                        self.ack(p.src, p.hdr.msg_id, Some(e), 0);
                        let err = if e == Error::CONNRESET { PEER_FAILED } else { e };
                        self.complete_rx_err(b, &p.recv, err, p.hdr.tag, p.hdr.data, len, p.extra_flags);
                        continue;
                    }
                }
            }
            let msg_id = p.hdr.msg_id;
            let src = p.src;
            let handle = self.rx.insert(RxStream {
                recv: p.recv,
                dst: p.dst,
                buf,
                src: p.src,
                src_pid: p.src_pid,
                hdr: p.hdr,
                take,
                got: 0,
                extra_flags: p.extra_flags,
                last_check: Instant::now(),
                chunk: 0,
            });
            let mut cts = WireHdr::new(op::CTS);
            cts.msg_id = msg_id;
            cts.aux = handle;
            self.outbox.push((src, cts));
        }
    }

    /// Where a DATA chunk of a streamed rendezvous message goes: straight
    /// into the matched receive at the chunk's offset (the part beyond a
    /// truncated receive is discarded). Stray or out-of-order chunks are
    /// dropped whole.
    fn place_data(&mut self, src: &Addr, h: &WireHdr) -> Place {
        if h.flags & flag::PUSH != 0 {
            return self.buf_place_pushed(src, h);
        }
        if h.aux & PREFIX_AUX != 0 {
            return self.buf_place_prefix(src, h);
        }
        let Some(s) = self.rx.get_mut(h.aux) else {
            return Place::Discard;
        };
        if s.src != *src || s.hdr.msg_id != h.msg_id || h.len != s.hdr.len || h.offset as usize != s.got || s.chunk != 0
        {
            return Place::Discard;
        }
        let off = h.offset as usize;
        let n = h.payload as usize;
        let take = if off < s.take { n.min(s.take - off) } else { 0 };
        s.chunk = n;
        Place::Into {
            handle: STREAM_HANDLE | h.aux,
            dst: s.dst.sub(off, take),
            take,
        }
    }

    fn stream_placed(&mut self, b: &Bound<'_>, handle: u32, result: Result<()>) {
        let Some(s) = self.rx.get_mut(handle) else { return };
        if let Err(e) = result {
            let s = self.rx.remove(handle).expect("stream just found");
            let len = s.hdr.len as usize;
            self.complete_rx_err(b, &s.recv, e, s.hdr.tag, s.hdr.data, len, s.extra_flags);
            return;
        }
        s.got += s.chunk;
        s.chunk = 0;
        s.last_check = Instant::now();
        if s.got >= s.hdr.len as usize {
            let s = self.rx.remove(handle).expect("stream just found");
            self.ack(s.src, s.hdr.msg_id, None, s.take);
            let len = s.hdr.len as usize;
            self.complete_rx(
                b,
                &s.recv,
                Some(s.src),
                &s.hdr,
                s.buf,
                s.take,
                len - s.take,
                s.extra_flags,
            );
        }
    }

    // ------------------------------------------------------------ posting

    fn post_recv(&mut self, b: &Bound<'_>, mut r: PostedRecv) {
        while let Some(idx) = self.m.find_unexpected(&r, None) {
            let u = self.m.take_unexpected(idx).expect("index just found");
            if r.flags & FI_MULTI_RECV == 0 {
                let dst = r.iov;
                self.deliver_unexpected(b, r, dst, u, 0);
                return;
            }
            if u.len > r.iov.total() - r.used {
                // Put the message back where it was; release the buffer.
                self.m.push_unexpected_front(u);
                self.release_multi(b, &r);
                return;
            }
            let dst = r.iov.sub(r.used, u.len);
            r.used += u.len;
            let done = r.iov.total() - r.used < self.cfg.min_multi_recv.max(1);
            let mut snapshot = r.clone();
            snapshot.claimed &= done;
            self.deliver_unexpected(b, snapshot, dst, u, if done { FI_MULTI_RECV } else { 0 });
            if done {
                return;
            }
        }
        self.m.post(r);
    }

    fn deliver_unexpected(&mut self, b: &Bound<'_>, r: PostedRecv, dst: IovList, u: Unexpected, extra: u64) {
        let h = WireHdr {
            flags: u.wire_flags,
            len: u.len as u64,
            tag: u.tag,
            data: u.data,
            msg_id: u.msg_id,
            ..WireHdr::new(op::EAGER)
        };
        match u.body {
            UnexBody::Eager(data) => {
                let n = copy_bytes_to_iov(&data, &dst);
                let buf = dst.addr_at(0);
                self.complete_rx(b, &r, Some(u.src), &h, buf, n, u.len - n, extra);
                if u.wire_flags & flag::ACK_REQ != 0 {
                    self.ack(u.src, u.msg_id, None, n);
                }
            }
            UnexBody::Rendezvous(rts) => self.pulls.push(PendingPull {
                recv: r,
                dst,
                src: u.src,
                src_pid: u.src_pid,
                hdr: h,
                rts,
                extra_flags: extra,
            }),
        }
    }

    /// FI_PEEK (fi_tagged(3)): report a matching unexpected message without
    /// receiving it; FI_CLAIM reserves it for a later FI_CLAIM receive;
    /// FI_DISCARD drops it. No match: an FI_ENOMSG error completion.
    fn peek(&mut self, b: &Bound<'_>, r: &PostedRecv) {
        let Some(idx) = self.m.find_unexpected(r, None) else {
            self.complete_rx_err(b, r, Error::NOMSG, r.tag, 0, 0, 0);
            return;
        };
        let u = self.m.unexpected_at(idx).expect("index just found");
        let h = WireHdr {
            flags: u.wire_flags,
            len: u.len as u64,
            tag: u.tag,
            data: u.data,
            ..WireHdr::new(op::EAGER)
        };
        let (src, len, msg_id) = (u.src, u.len, u.msg_id);
        if r.flags & FI_DISCARD != 0 {
            let u = self.m.take_unexpected(idx).expect("index just found");
            if matches!(u.body, UnexBody::Rendezvous(_)) || u.wire_flags & flag::ACK_REQ != 0 {
                self.ack(src, msg_id, None, 0);
            }
        } else if r.flags & FI_CLAIM != 0 {
            if let Some(u) = self.m.unexpected_mut(idx) {
                u.claimed_by = Some(r.context);
            }
        }
        // The peek completion reports the message's length; no data moved.
        let mut rr = r.clone();
        rr.flags |= FI_COMPLETION;
        self.complete_rx(b, &rr, Some(src), &h, 0, len, 0, r.flags & (FI_CLAIM | FI_DISCARD));
    }

    /// FI_CLAIM receive: takes the message an earlier FI_PEEK|FI_CLAIM with
    /// the same context reserved (FI_DISCARD: drop it instead).
    fn claim(&mut self, b: &Bound<'_>, r: PostedRecv) -> Result<()> {
        let idx = self
            .m
            .find_unexpected(
                &PostedRecv {
                    src: None,
                    ignore: !0,
                    ..r.clone()
                },
                Some(r.context),
            )
            .ok_or(Error::INVAL)?;
        let u = self.m.take_unexpected(idx).expect("index just found");
        if r.flags & FI_DISCARD != 0 {
            if matches!(u.body, UnexBody::Rendezvous(_)) || u.wire_flags & flag::ACK_REQ != 0 {
                self.ack(u.src, u.msg_id, None, 0);
            }
            let h = WireHdr {
                flags: u.wire_flags,
                len: u.len as u64,
                tag: u.tag,
                data: u.data,
                ..WireHdr::new(op::EAGER)
            };
            self.complete_rx(b, &r, Some(u.src), &h, 0, 0, 0, FI_CLAIM | FI_DISCARD);
            return Ok(());
        }
        let dst = r.iov;
        self.deliver_unexpected(b, r, dst, u, FI_CLAIM);
        Ok(())
    }

    // ------------------------------------------------------------ sending

    fn pump(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut failed = Vec::new();
        for (id, t) in self.tx.iter_mut() {
            let TxState::Streaming { handle, off, end } = &mut t.state else {
                continue;
            };
            while *off < *end {
                let room = port.room(&t.peer);
                let n = (*end - *off).min(t.eager_limit).min(room);
                if n == 0 || (n < 4096 && n < *end - *off) {
                    break;
                }
                let mut h = WireHdr::new(op::DATA);
                h.msg_id = *id;
                h.len = t.len as u64;
                h.offset = *off as u64;
                h.aux = *handle;
                if *off + n == *end {
                    h.flags |= flag::LAST;
                }
                match port.send(&t.peer, &h, Payload::Iov(&t.iov, *off, n), false) {
                    Ok(_) => *off += n,
                    Err(e) if e == Error::AGAIN => break,
                    Err(_) => {
                        failed.push(*id);
                        break;
                    }
                }
            }
            if let TxState::Streaming { off, end, .. } = t.state {
                if off >= end {
                    t.state = TxState::WaitAck;
                }
            }
        }
        for id in failed {
            if let Some(t) = self.tx.remove(&id) {
                self.finish_tx(b, t, Err(PEER_FAILED));
            }
        }
    }

    /// Whether operations wait on peers (liveness checks and a bounded
    /// sleep are needed so a dead peer is noticed).
    pub fn waits_on_peers(&self) -> bool {
        !self.tx.is_empty() || !self.rx.is_empty() || self.buf.as_ref().is_some_and(|x| x.streaming())
    }

    fn watch_peers(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        // Liveness checks cost a clock read and possibly a /proc read: do
        // them only while something waits on a peer, every 64th pass.
        self.watch_tick = self.watch_tick.wrapping_add(1);
        if self.waits_on_peers() && self.watch_tick.is_multiple_of(64) {
            self.check_liveness(port, b);
        }
        self.handle_events(port, b);
    }

    fn check_liveness(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let mut last: Option<Addr> = None;
        for t in self.tx.values() {
            if last != Some(t.peer) {
                port.check_peer(&t.peer);
                last = Some(t.peer);
            }
        }
        self.buf_liveness(port, b);
        if self.rx.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut dead = Vec::new();
        for (h, s) in self.rx.iter_mut() {
            if now.duration_since(s.last_check) >= STREAM_LIVENESS {
                s.last_check = now;
                if !port.sender_alive(s.src_pid, &s.src) {
                    dead.push(h);
                }
            }
        }
        for h in dead {
            if let Some(s) = self.rx.remove(h) {
                let len = s.hdr.len as usize;
                self.complete_rx_err(b, &s.recv, PEER_FAILED, s.hdr.tag, s.hdr.data, len, s.extra_flags);
            }
        }
    }

    fn handle_events(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        for ev in port.take_events() {
            let PeerEvent::Failed(peer) = ev;
            let ids: Vec<u64> = self
                .tx
                .iter()
                .filter(|(_, t)| t.peer == peer)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if let Some(t) = self.tx.remove(&id) {
                    self.finish_tx(b, t, Err(PEER_FAILED));
                }
            }
            let hs: Vec<u32> = self
                .rx
                .iter_mut()
                .filter(|(_, s)| s.src == peer)
                .map(|(h, _)| h)
                .collect();
            for h in hs {
                if let Some(s) = self.rx.remove(h) {
                    let len = s.hdr.len as usize;
                    self.complete_rx_err(b, &s.recv, PEER_FAILED, s.hdr.tag, s.hdr.data, len, s.extra_flags);
                }
            }
            self.buf_peer_failed(b, &peer);
        }
    }

    // ------------------------------------------------------------ completions

    fn finish_tx(&mut self, b: &Bound<'_>, t: TxOp, status: Result<()>) {
        let flags = FI_SEND | if t.tagged { FI_TAGGED } else { FI_MSG };
        let entry = CqEntry {
            len: 0,
            ..CqEntry::new(t.context as *mut c_void, flags)
        };
        match status {
            Ok(()) => {
                if let Some(c) = &b.send_cntr {
                    c.inc();
                }
                cq_success(b.tx_cq, t.claimed, t.want_completion, entry);
            }
            Err(e) => {
                if let Some(c) = &b.send_cntr {
                    c.inc_err();
                }
                let entry = CqEntry { len: t.len, ..entry };
                cq_error(b.tx_cq, t.claimed, CqErrEntry::new(entry, e.0));
            }
        }
        let _ = t.flags;
    }

    fn src_fi_addr(&self, b: &Bound<'_>, src: &Addr) -> Option<fi_addr_t> {
        b.av.as_ref().and_then(|av| av.reverse_lookup(src))
    }

    /// A receive completed with `n` bytes placed at `buf` (`olen` > 0:
    /// truncated, reported as FI_ETRUNC with `len = n`, `olen` = the rest).
    #[allow(clippy::too_many_arguments)]
    fn complete_rx(
        &mut self,
        b: &Bound<'_>,
        r: &PostedRecv,
        src: Option<Addr>,
        h: &WireHdr,
        buf: usize,
        n: usize,
        olen: usize,
        extra: u64,
    ) {
        let cq_data = h.flags & flag::REMOTE_CQ_DATA != 0;
        let flags =
            FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG } | if cq_data { FI_REMOTE_CQ_DATA } else { 0 } | extra;
        let src_fi = match &src {
            Some(a) if self.cfg.caps & (FI_SOURCE | FI_SOURCE_ERR) != 0 => self.src_fi_addr(b, a),
            _ => None,
        };
        let entry = CqEntry {
            op_context: r.context as *mut c_void,
            flags,
            len: n,
            buf: buf as *mut c_void,
            data: if cq_data { h.data } else { 0 },
            tag: if r.tagged { h.tag } else { 0 },
            src: src_fi.unwrap_or(FI_ADDR_NOTAVAIL),
        };
        let err = if olen > 0 {
            Some((Error::TRUNC, Vec::new()))
        } else if let (None, Some(a)) = (src_fi, src.filter(|_| self.cfg.caps & FI_SOURCE_ERR != 0)) {
            // fi_cq(3) FI_SOURCE_ERR: the source is not in the AV; report it
            // as an error whose err_data is the raw address (insertable).
            Some((Error::ADDRNOTAVAIL, a.to_bytes()))
        } else {
            None
        };
        match err {
            None => {
                if let Some(c) = &b.recv_cntr {
                    c.inc();
                }
                let want = !b.rx_selective || r.flags & FI_COMPLETION != 0;
                cq_success(b.rx_cq, r.claimed, want, entry);
            }
            Some((e, err_data)) => {
                if let Some(c) = &b.recv_cntr {
                    c.inc_err();
                }
                cq_error(
                    b.rx_cq,
                    r.claimed,
                    CqErrEntry {
                        entry,
                        olen,
                        err: e.0,
                        prov_errno: e.0,
                        err_data,
                    },
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn complete_rx_err(
        &mut self,
        b: &Bound<'_>,
        r: &PostedRecv,
        e: Error,
        tag: u64,
        data: u64,
        olen: usize,
        extra: u64,
    ) {
        if let Some(c) = &b.recv_cntr {
            c.inc_err();
        }
        let flags = FI_RECV | if r.tagged { FI_TAGGED } else { FI_MSG } | extra;
        let entry = CqEntry {
            data,
            tag,
            ..CqEntry::new(r.context as *mut c_void, flags)
        };
        cq_error(
            b.rx_cq,
            r.claimed,
            CqErrEntry {
                olen,
                ..CqErrEntry::new(entry, e.0)
            },
        );
    }
}

// ------------------------------------------------------------ buffered receives
//
// fi_msg(3) "Buffered Receives" on top of the protocols above (bookkeeping in
// `buffered.rs`). A message no posted receive takes is admitted to the pool
// instead of the unexpected queue: an eager payload is placed straight into a
// pool buffer (`Place::Into` with a BUF_HANDLE handle); a rendezvous message
// keeps all but its first `want` bytes (FI_OPT_BUFFERED_MIN) at the sender.
// Those arrive in the DATA record the sender pushed right behind its RTS
// (flag::PUSH, because we advertised the size through the transport); a
// sender that did not push (it did not know yet) is asked for them — CMA on
// shm, else a ranged CTS whose DATA records carry PREFIX_AUX. Admission takes
// a CQ slot for the report (FI_RM_ENABLED admission) and pool room; either
// missing stalls the sender. FI_CLAIM turns the message into a normal receive
// (copy from the pool, or a rendezvous pull into the claim's buffers);
// FI_DISCARD releases it and acknowledges a rendezvous sender without moving
// its data.

impl Inner {
    /// Turns buffered receives on (`FI_BUFFERED_RECV` in the endpoint's
    /// mode): `pool` bytes of provider buffers.
    pub fn enable_buffered(&mut self, pool: usize) {
        let pool = pool.max(self::buffered::MIN_POOL);
        // The smallest eager limit of the port's peers (auto: shm's).
        let opts = BufOpts::new(self.port.eager_limit(), pool);
        self.st.buf = Some(Box::new(Buffered::new(opts, pool)));
        self.advertise_rts_prefix();
    }

    /// Tells peers (through the transport) how much of each rendezvous
    /// message to push behind its RTS: `FI_OPT_BUFFERED_MIN`, the prefix a
    /// report with FI_MORE carries. Called again when the option changes.
    pub fn advertise_rts_prefix(&mut self) {
        if let Some(bf) = self.st.buf.as_ref() {
            let n = bf.opts.min;
            self.port.set_rts_prefix(n);
        }
    }

    /// The endpoint's `fid_ep*`, for `fi_recv_context.ep`.
    pub fn set_ep_fid(&mut self, fid: usize) {
        if let Some(bf) = self.st.buf.as_mut() {
            bf.ep_fid = fid;
        }
    }

    /// `FI_OPT_BUFFERED_LIMIT`/`_MIN`; None without buffered receives.
    pub fn buffered_opts(&mut self) -> Option<&mut BufOpts> {
        self.st.buf.as_mut().map(|bf| &mut bf.opts)
    }

    /// A receive posted with FI_CLAIM or FI_DISCARD whose context is the
    /// `fi_recv_context` of a reported message. Anything else: -FI_EINVAL
    /// (the pointer is only looked up, never followed).
    fn buf_claim(&mut self, b: &Bound<'_>, a: RecvArgs) -> Result<()> {
        let Some(bf) = self.st.buf.as_mut() else {
            return Err(Error::INVAL);
        };
        let h = bf.lookup(a.context).ok_or(Error::INVAL)?;
        if a.flags & FI_DISCARD != 0 {
            // "the receive input buffer(s) and length parameters are
            // ignored"; no completion (the buffer is simply released).
            let m = bf.remove(h).ok_or(Error::INVAL)?;
            bf.release(m.buf);
            if m.remote.is_some() && !m.sender_gone {
                self.st.ack(m.src, m.hdr.msg_id, None, 0);
            }
            self.st.after_poll(self.port.as_mut(), b);
            return Ok(());
        }
        // A claim completes like any receive: CQ admission first.
        let claimed = match &b.rx_cq {
            Some(cq) => {
                if cq.claim_slot().is_err() {
                    self.pass(b);
                    cq.claim_slot()?;
                }
                true
            }
            None => false,
        };
        let m = self
            .st
            .buf
            .as_mut()
            .and_then(|bf| bf.lookup(a.context).and_then(|h| bf.remove(h)));
        let Some(m) = m else {
            if claimed {
                if let Some(cq) = &b.rx_cq {
                    cq.unclaim_slot();
                }
            }
            return Err(Error::INVAL);
        };
        let len = m.len();
        // "The 'context' of the associated CQ entry will be set to the
        // 'context' value passed in through the fi_recv_context structure,
        // and the CQ entry flags will have the FI_CLAIM bit set."
        let r = PostedRecv {
            context: m.buf.recv_context_value(),
            iov: a.iov,
            src: None,
            tagged: m.hdr.flags & flag::TAGGED != 0,
            tag: m.hdr.tag,
            ignore: 0,
            flags: a.flags,
            used: 0,
            claimed,
        };
        let take = len.min(a.iov.total());
        let buf = a.iov.addr_at(0);
        if m.remote.is_none() || take <= m.want {
            // Everything the claim takes is here.
            // SAFETY: `a.iov` is the claim's buffer (valid for the call,
            // fi_msg(3)); the pool buffer holds `want >= take` bytes.
            let n = unsafe { m.buf.copy_out(take.min(m.want), &a.iov) };
            if m.remote.is_some() && !m.sender_gone {
                self.st.ack(m.src, m.hdr.msg_id, None, n);
            }
            let (src, hdr) = (m.src, m.hdr);
            self.st.buf_release(m.buf);
            self.st.complete_rx(b, &r, Some(src), &hdr, buf, n, len - n, FI_CLAIM);
        } else if m.sender_gone || !self.port.sender_alive(m.src_pid, &m.src) {
            // The rest died with its sender: the claim completes in error
            // (exactly once), nothing is fetched.
            let hdr = m.hdr;
            self.st.buf_release(m.buf);
            self.st
                .complete_rx_err(b, &r, PEER_FAILED, hdr.tag, hdr.data, len, FI_CLAIM);
        } else if let Some(rts) = m.remote {
            // The rest is at the sender: a matched rendezvous from here on
            // (single CMA copy on shm, else the sender streams it).
            let (src, src_pid, hdr) = (m.src, m.src_pid, m.hdr);
            self.st.buf_release(m.buf);
            self.st.pulls.push(PendingPull {
                recv: r,
                dst: a.iov,
                src,
                src_pid,
                hdr,
                rts,
                extra_flags: FI_CLAIM,
            });
        }
        self.st.after_poll(self.port.as_mut(), b);
        Ok(())
    }
}

impl State {
    fn buf_release(&mut self, buf: self::buffered::PoolBuf) {
        if let Some(bf) = self.buf.as_mut() {
            bf.release(buf);
        }
    }

    /// An eager message nobody posted for: into a pool buffer.
    fn buf_place(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr) -> Place {
        let len = h.len as usize;
        let Some(cq) = b.rx_cq else {
            return Place::Stall;
        };
        if cq.claim_slot().is_err() {
            return Place::Stall;
        }
        let Some(bf) = self.buf.as_mut() else {
            cq.unclaim_slot();
            return Place::Stall;
        };
        let Some(hd) = bf.admit(*src, src_pid, *h, len, None) else {
            cq.unclaim_slot();
            return Place::Stall;
        };
        let Some(m) = bf.get_mut(hd) else {
            return Place::Stall;
        };
        m.placing = true;
        Place::Into {
            handle: BUF_HANDLE | hd,
            dst: m.buf.data_iov(0, len),
            take: len,
        }
    }

    /// A rendezvous message nobody posted for: admitted, its prefix (or all
    /// of it, up to the limit) fetched after this pass.
    fn buf_rts(&mut self, b: &Bound<'_>, src: &Addr, src_pid: i32, h: &WireHdr, rts: RtsInfo) -> Disposition {
        let len = h.len as usize;
        let Some(cq) = b.rx_cq else {
            return Disposition::Stall;
        };
        if cq.claim_slot().is_err() {
            return Disposition::Stall;
        }
        let Some(bf) = self.buf.as_mut() else {
            cq.unclaim_slot();
            return Disposition::Stall;
        };
        let want = bf.opts.want(len);
        let pushed = if h.flags & flag::PUSH != 0 {
            h.offset as usize
        } else {
            0
        };
        let Some(hd) = bf.admit(*src, src_pid, *h, want, Some(rts)) else {
            cq.unclaim_slot();
            return Disposition::Stall;
        };
        let Some(m) = bf.get_mut(hd) else {
            return Disposition::Consumed;
        };
        if want == 0 {
            m.stage = Stage::Ready;
            self.buf_report(b);
        } else if pushed >= want {
            // The prefix follows in this sender's next records.
            m.stream = Some(PrefixStream {
                got: 0,
                chunk: 0,
                last_check: Instant::now(),
                pushed: true,
            });
        } else {
            // Not pushed (a sender that did not know what we want yet):
            // fetched after this pass.
            bf.pulls.push(hd);
        }
        Disposition::Consumed
    }

    /// A payload (eager, or a prefix chunk) is in its pool buffer.
    fn buf_placed(&mut self, b: &Bound<'_>, hd: u32, result: Result<()>) {
        let Some(bf) = self.buf.as_mut() else { return };
        let Some(m) = bf.get_mut(hd) else { return };
        m.placing = false;
        if m.doomed {
            if let Some(m) = bf.remove(hd) {
                bf.release(m.buf);
            }
            if let Some(cq) = &b.rx_cq {
                cq.unclaim_slot();
            }
            return;
        }
        if result.is_err() {
            // The sender was lost mid-payload: the message never existed for
            // the application.
            return self.buf_drop(b, hd, None);
        }
        if let Some(s) = m.stream.as_mut() {
            s.got += s.chunk;
            s.chunk = 0;
            s.last_check = Instant::now();
            if s.got < m.want {
                return;
            }
            m.stream = None;
        }
        m.stage = Stage::Ready;
        let (src, msg_id, len) = (m.src, m.hdr.msg_id, m.len());
        if m.remote.is_some() && m.want == len {
            // All of it is here: the sender's buffer is free.
            m.remote = None;
            self.ack(src, msg_id, None, len);
        } else if m.remote.is_none() && m.hdr.flags & flag::ACK_REQ != 0 {
            // Delivery complete: the data is in the provider's buffer and
            // about to be reported.
            self.ack(src, msg_id, None, len);
        }
        self.buf_report(b);
    }

    /// A message that was never reported goes away (its sender failed, or
    /// its bytes could not be fetched: `ack` tells the sender why).
    fn buf_drop(&mut self, b: &Bound<'_>, hd: u32, ack: Option<Error>) {
        let Some(bf) = self.buf.as_mut() else { return };
        let Some(m) = bf.drop_unreported(hd) else { return };
        bf.release(m.buf);
        if let Some(cq) = &b.rx_cq {
            cq.unclaim_slot();
        }
        if let (Some(e), Some(_)) = (ack, m.remote) {
            self.ack(m.src, m.hdr.msg_id, Some(e), 0);
        }
        // Later messages of that sender may now be reported.
        self.buf_report(b);
    }

    /// Starts the prefix fetches admitted during the pass.
    fn buf_run_pulls(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let Some(bf) = self.buf.as_mut() else { return };
        if bf.pulls.is_empty() {
            return;
        }
        let pulls = std::mem::take(&mut bf.pulls);
        for hd in pulls {
            let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
                continue;
            };
            let Some(rts) = m.remote.as_ref() else { continue };
            let (src, src_pid, want, len, msg_id) = (m.src, m.src_pid, m.want, m.len(), m.hdr.msg_id);
            if self.cfg.cma && rts.cma_ok && !self.no_cma.contains(&src) && src_pid > 0 {
                let dst = m.buf.data_iov(0, want);
                match port.pull(src_pid, &rts.remote, &dst, want) {
                    Ok(_) => {
                        m.stage = Stage::Ready;
                        if want == len {
                            m.remote = None;
                            self.ack(src, msg_id, None, len);
                        }
                        continue;
                    }
                    Err(e) if e == Error::OPNOTSUPP => {
                        self.no_cma.insert(src);
                    }
                    Err(e) => {
                        self.buf_drop(b, hd, Some(e));
                        continue;
                    }
                }
            }
            let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
                continue;
            };
            m.stream = Some(PrefixStream {
                got: 0,
                chunk: 0,
                last_check: Instant::now(),
                pushed: false,
            });
            let mut cts = WireHdr::new(op::CTS);
            cts.flags = flag::RANGE;
            cts.msg_id = msg_id;
            cts.offset = 0;
            cts.len = want as u64;
            cts.aux = PREFIX_AUX | hd;
            self.outbox.push((src, cts));
        }
        self.buf_report(b);
    }

    /// A DATA record of a prefix fetch: into the message's pool buffer at
    /// its offset (checked like any streamed chunk; strays are dropped).
    fn buf_place_prefix(&mut self, src: &Addr, h: &WireHdr) -> Place {
        let hd = h.aux & !PREFIX_AUX;
        let Some(m) = self.buf.as_mut().and_then(|bf| bf.get_mut(hd)) else {
            return Place::Discard;
        };
        if m.stream.as_ref().is_none_or(|s| s.pushed) || m.src != *src || m.hdr.msg_id != h.msg_id {
            return Place::Discard;
        }
        place_chunk(m, hd, h)
    }

    /// A DATA record a sender pushed behind its RTS: into the pool buffer
    /// of that message if it waits for it, else dropped (an endpoint
    /// without buffered receives, a message a posted receive took, a push
    /// too short for what we want).
    fn buf_place_pushed(&mut self, src: &Addr, h: &WireHdr) -> Place {
        let Some(bf) = self.buf.as_mut() else {
            return Place::Discard;
        };
        let Some(hd) = bf.find_pushed(src, h.msg_id) else {
            return Place::Discard;
        };
        match bf.get_mut(hd) {
            Some(m) => place_chunk(m, hd, h),
            None => Place::Discard,
        }
    }

    /// Reports every message whose turn it is.
    fn buf_report(&mut self, b: &Bound<'_>) {
        loop {
            let Some(bf) = self.buf.as_mut() else { return };
            let Some(hd) = bf.next_report() else { return };
            let (ep, more_than) = (bf.ep_fid, bf.opts.limit);
            let Some(m) = bf.get(hd) else { continue };
            m.buf.write_recv_context(ep);
            let len = m.len();
            // The report is a receive of the message itself: op_context is
            // the fi_recv_context, buf the provider's copy, len the total.
            let r = PostedRecv {
                context: m.buf.ctx_addr(),
                iov: IovList::new(),
                src: None,
                tagged: m.hdr.flags & flag::TAGGED != 0,
                tag: m.hdr.tag,
                ignore: 0,
                flags: FI_COMPLETION,
                used: 0,
                claimed: true,
            };
            let (src, hdr, data) = (m.src, m.hdr, m.buf.data_addr());
            let more = if len > more_than { FI_MORE } else { 0 };
            self.complete_rx(b, &r, Some(src), &hdr, data, len, 0, more);
        }
    }

    /// Prefix fetches from senders that died are dropped.
    fn buf_liveness(&mut self, port: &mut dyn Port, b: &Bound<'_>) {
        let Some(bf) = self.buf.as_mut() else { return };
        if !bf.streaming() {
            return;
        }
        let now = Instant::now();
        let mut dead = Vec::new();
        for hd in bf.handles() {
            let Some(m) = bf.get_mut(hd) else { continue };
            let Some(s) = m.stream.as_mut() else { continue };
            if now.duration_since(s.last_check) >= STREAM_LIVENESS {
                s.last_check = now;
                if !port.sender_alive(m.src_pid, &m.src) {
                    dead.push(hd);
                }
            }
        }
        for hd in dead {
            self.buf_drop(b, hd, None);
        }
    }

    /// A peer failed: its messages still arriving are dropped; reported ones
    /// stay (the application claims or discards them) but what of them is
    /// still at the sender is gone.
    fn buf_peer_failed(&mut self, b: &Bound<'_>, peer: &Addr) {
        let Some(bf) = self.buf.as_mut() else { return };
        let mut drop = Vec::new();
        for hd in bf.held_from(peer) {
            let Some(m) = bf.get_mut(hd) else { continue };
            if m.stage == Stage::Reported {
                m.sender_gone = true;
            } else {
                drop.push(hd);
            }
        }
        for hd in drop {
            self.buf_drop(b, hd, None);
        }
    }

    /// Endpoint close: senders still waiting on messages we held learn that
    /// they will not be taken (FI_ECANCELED).
    fn buf_close(&mut self, port: &mut dyn Port) {
        let Some(bf) = self.buf.as_mut() else { return };
        for hd in bf.handles() {
            let Some(m) = bf.get(hd) else { continue };
            if m.remote.is_some() && !m.sender_gone {
                let mut h = WireHdr::new(op::ACK);
                h.msg_id = m.hdr.msg_id;
                h.aux = Error::CANCELED.0 as u32;
                let _ = port.send_ctl(&m.src, &h);
            }
        }
    }
}

/// Queues a success completion (or, for a silent one, gives back the
/// slot the operation claimed). A refused push means the CQ is in its
/// overrun state, which the application learns from the CQ itself.
fn cq_success(cq: Option<&Cq>, claimed: bool, wanted: bool, e: CqEntry) {
    let Some(cq) = cq else { return };
    match (wanted, claimed) {
        (true, true) => drop(cq.push_claimed(e)),
        (true, false) => drop(cq.push(e)),
        (false, true) => cq.unclaim_slot(),
        (false, false) => {}
    }
}

/// Queues an error completion (always reported, fi_cq(3)).
fn cq_error(cq: Option<&Cq>, claimed: bool, e: CqErrEntry) {
    let Some(cq) = cq else { return };
    let _ = if claimed {
        cq.push_err_claimed(e)
    } else {
        cq.push_err(e)
    };
}

fn copy_bytes_to_iov(data: &[u8], dst: &IovList) -> usize {
    let mut done = 0;
    dst.for_range(0, data.len(), |p, n, off| {
        // SAFETY: `p..p+n` is application memory of the matched receive
        // (valid until its completion); `data[off..off+n]` is in bounds.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr().add(off), p as *mut u8, n) };
        done += n;
    });
    done
}

/// A streamed chunk `h` of pool message `m` (handle `hd`): into its buffer
/// at the chunk's offset if it is the next one the message's stream expects
/// (one in flight at a time), else dropped. Only the first `want` bytes are
/// kept; the rest of the chunk is read past.
fn place_chunk(m: &mut BufMsg, hd: u32, h: &WireHdr) -> Place {
    let Some(s) = m.stream.as_mut() else {
        return Place::Discard;
    };
    if h.len != m.hdr.len || h.offset as usize != s.got || s.chunk != 0 {
        return Place::Discard;
    }
    let off = h.offset as usize;
    let n = h.payload as usize;
    let take = if off < m.want { n.min(m.want - off) } else { 0 };
    s.chunk = n;
    m.placing = true;
    Place::Into {
        handle: BUF_HANDLE | hd,
        dst: m.buf.data_iov(off, take),
        take,
    }
}

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;
