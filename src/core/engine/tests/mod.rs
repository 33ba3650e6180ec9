//! The engine tested alone: endpoints joined by the in-memory network of
//! `sim.rs`, completions read from real CQ and counter cores. Each test
//! drives progress explicitly (poll A, poll B, ...) and asserts exact
//! completion fields and, where the protocol is the point, the records on
//! the wire.

mod buffered;
mod corners;
mod dgram;
mod directed;
mod eager;
mod failure;
mod lanes;
mod push_whole;
mod rendezvous;
mod rma;
mod split;

use super::directed::RecvMatching;
use super::sim::{Net, SimOpts, SimPort};
use super::{AddrBook, AvView, Bound, EpConfig, Inner, RecvArgs, SendArgs};
use crate::abi::v2::API_NEWEST;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::av::{AvFormat, AvState, GenerationWord};
use crate::core::cntr::Cntr;
use crate::core::cq::Cq;
use crate::core::domain::TransportKind;
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use core::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

impl AddrBook for AvState {
    fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        AvState::lookup_addr(self, fi_addr)
    }
    fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        AvState::reverse_lookup(self, a)
    }
    fn generation_word(&self) -> GenerationWord<'_> {
        AvState::generation_word(self)
    }
}

/// The data-path settings of a test endpoint (queue sizes small enough to
/// reach their limits).
pub(super) fn cfg() -> EpConfig {
    EpConfig {
        caps: FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_MULTI_RECV,
        tx_op_flags: 0,
        rx_op_flags: 0,
        tx_size: 64,
        rx_size: 64,
        inject_size: 64,
        max_msg_size: 1 << 30,
        min_multi_recv: 64,
        unexp_budget: 8 << 20,
        cma: true,
        pull_batch_bytes: crate::core::settings::DEFAULT_SHM_PULL_BATCH,
        // The split on, at the provider's default threshold (docs/shm.md;
        // tests/split.rs relies on it whatever the default becomes).
        split_min: 256 << 10,
        // Off unless a test asks (tests/split.rs): the tests below count
        // pulls and records of messages of every size.
        split_lone_min: 0,
        stream_lone_max: 0,
        // Short: a test closing with a push unanswered and its peer never
        // progressing waits this long (tests/split.rs sets its own).
        close_wait: Duration::from_millis(20),
        fixed_peer: None,
        msg_prefix: 0,
        matching: RecvMatching::of(FI_DIRECTED_RECV | FI_MULTI_RECV, API_NEWEST),
        dgram: false,
    }
}

/// How to build one endpoint of a test network.
#[derive(Clone)]
pub(super) struct Spec {
    pub(super) sim: SimOpts,
    pub(super) cfg: EpConfig,
    pub(super) cq_size: usize,
    pub(super) tx_selective: bool,
    pub(super) rx_selective: bool,
    /// Buffered receives with this pool (bytes).
    pub(super) buffered: Option<usize>,
    /// Put every endpoint in this one's AV (false: none, for FI_SOURCE_ERR).
    pub(super) av_all: bool,
}

impl Spec {
    pub(super) fn new(sim: SimOpts) -> Spec {
        Spec {
            sim,
            cfg: cfg(),
            cq_size: 128,
            tx_selective: false,
            rx_selective: false,
            buffered: None,
            av_all: true,
        }
    }
}

/// What a test endpoint reports to: real CQ and counter cores and a real
/// AV table (`fi_addr` i = the i-th endpoint of the network).
pub(super) struct Sinks {
    pub(super) tx_cq: Arc<Cq>,
    pub(super) rx_cq: Arc<Cq>,
    pub(super) send_cntr: Arc<Cntr>,
    pub(super) recv_cntr: Arc<Cntr>,
    pub(super) av: AvState,
    tx_selective: bool,
    rx_selective: bool,
}

impl Sinks {
    fn bound(&self) -> Bound<'_> {
        Bound {
            av: Some(AvView::new(&self.av)),
            tx_cq: Some(&self.tx_cq),
            tx_selective: self.tx_selective,
            rx_cq: Some(&self.rx_cq),
            rx_selective: self.rx_selective,
            send_cntr: Some(&self.send_cntr),
            recv_cntr: Some(&self.recv_cntr),
            ..Default::default()
        }
    }
}

pub(super) struct Ep {
    pub(super) inner: Inner,
    pub(super) addr: Addr,
    pub(super) s: Sinks,
}

fn cq(size: usize) -> Arc<Cq> {
    let attr = crate::core::cq::CqAttr {
        size,
        flags: 0,
        format: FI_CQ_FORMAT_TAGGED,
        wait_obj: FI_WAIT_NONE,
        wait_cond: FI_CQ_COND_NONE,
    };
    Cq::new(&attr, fi_version(1, 17), crate::core::wait::Holds::none(), 0).expect("cq")
}

fn cntr() -> Arc<Cntr> {
    let attr = crate::core::cntr::CntrAttr {
        events: FI_CNTR_EVENTS_COMP,
        wait_obj: FI_WAIT_NONE,
        flags: 0,
    };
    Cntr::new(&attr, crate::core::wait::Holds::none(), 0).expect("cntr")
}

/// An endpoint of spec `s` on `port`, with its own CQs and counters and an
/// empty AV of `av_size` entries.
fn endpoint(port: SimPort, s: &Spec, av_size: usize) -> Ep {
    let mut inner = Inner::new(Box::new(port), s.cfg.clone());
    if let Some(pool) = s.buffered {
        inner.enable_buffered(pool);
        inner.set_ep_fid(0xe9);
    }
    let addr = inner.addr();
    Ep {
        inner,
        addr,
        s: Sinks {
            tx_cq: cq(s.cq_size),
            rx_cq: cq(s.cq_size),
            send_cntr: cntr(),
            recv_cntr: cntr(),
            av: AvState::new(0, TransportKind::Shm, AvFormat::Str, av_size),
            tx_selective: s.tx_selective,
            rx_selective: s.rx_selective,
        },
    }
}

/// Endpoints on one network; each AV holds all of them in order.
pub(super) fn network(specs: &[Spec]) -> (Net, Vec<Ep>) {
    let net = Net::new();
    let mut eps: Vec<Ep> = specs
        .iter()
        .map(|s| endpoint(net.port(s.sim), s, specs.len()))
        .collect();
    let addrs: Vec<Result<Addr>> = eps.iter().map(|e| Ok(e.addr)).collect();
    for (e, s) in eps.iter_mut().zip(specs) {
        if s.av_all {
            e.s.av.insert_batch(&addrs, None).expect("av");
        }
    }
    (net, eps)
}

/// Two endpoints of the same kind: A is `fi_addr` 0, B is 1.
pub(super) fn pair(sim: SimOpts) -> (Net, Ep, Ep) {
    pair_of(Spec::new(sim), Spec::new(sim))
}

pub(super) fn pair_of(a: Spec, b: Spec) -> (Net, Ep, Ep) {
    let (net, mut v) = network(&[a, b]);
    let b = v.pop().expect("b");
    let a = v.pop().expect("a");
    (net, a, b)
}

/// `old`'s process dies and a new endpoint of spec `s` opens at its
/// address ([`Net::restart`]); its AV holds `peers` in order.
pub(super) fn restart(net: &Net, old: Ep, s: &Spec, peers: &[Addr]) -> Ep {
    let e = endpoint(net.restart(&old.addr, s.sim), s, peers.len());
    let addrs: Vec<Result<Addr>> = peers.iter().map(|a| Ok(*a)).collect();
    e.s.av.insert_batch(&addrs, None).expect("av");
    e
}

pub(super) const A: fi_addr_t = 0;
pub(super) const B: fi_addr_t = 1;

/// A send of `buf` to `dest` (untagged, no flags).
pub(super) fn sargs(dest: fi_addr_t, buf: &[u8], ctx: usize) -> SendArgs {
    SendArgs {
        dest,
        iov: IovList::single(buf.as_ptr() as usize, buf.len()),
        tagged: false,
        tag: 0,
        data: 0,
        flags: 0,
        context: ctx,
        inject_call: false,
    }
}

/// A receive into `buf` from anyone (untagged, no flags).
pub(super) fn rargs(buf: &mut [u8], ctx: usize) -> RecvArgs {
    RecvArgs {
        src: FI_ADDR_UNSPEC,
        iov: IovList::single(buf.as_mut_ptr() as usize, buf.len()),
        tagged: false,
        tag: 0,
        ignore: 0,
        flags: 0,
        context: ctx,
    }
}

/// Bytes `0, 1, 2, ...` (mod 251) shifted by `seed`.
pub(super) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| ((i % 251) as u8).wrapping_add(seed)).collect()
}

/// A successful completion, every field of `fi_cq_tagged_entry` plus the
/// source `fi_cq_readfrom` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Comp {
    pub(super) ctx: usize,
    pub(super) flags: u64,
    pub(super) len: usize,
    pub(super) buf: usize,
    pub(super) data: u64,
    pub(super) tag: u64,
    pub(super) src: fi_addr_t,
}

/// An error completion as `fi_cq_readerr` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ErrComp {
    pub(super) ctx: usize,
    pub(super) flags: u64,
    pub(super) len: usize,
    pub(super) buf: usize,
    pub(super) data: u64,
    pub(super) tag: u64,
    pub(super) olen: usize,
    pub(super) err: i32,
    pub(super) err_data: Vec<u8>,
}

impl Comp {
    /// A send completion (len, buf, data, tag 0; no source).
    pub(super) fn send(ctx: usize, flags: u64) -> Comp {
        Comp {
            ctx,
            flags,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            src: FI_ADDR_NOTAVAIL,
        }
    }

    /// A receive completion of `len` bytes at `buf`.
    pub(super) fn recv(ctx: usize, flags: u64, len: usize, buf: usize) -> Comp {
        Comp {
            ctx,
            flags,
            len,
            buf,
            data: 0,
            tag: 0,
            src: FI_ADDR_NOTAVAIL,
        }
    }
}

impl ErrComp {
    pub(super) fn new(ctx: usize, flags: u64, err: i32) -> ErrComp {
        ErrComp {
            ctx,
            flags,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            olen: 0,
            err,
            err_data: Vec::new(),
        }
    }
}

/// Everything queued in `cq`: successes, then errors (the CQ keeps the
/// two apart; fi_cq_read answers -FI_EAVAIL while errors wait).
pub(super) fn drain(cq: &Cq) -> (Vec<Comp>, Vec<ErrComp>) {
    use crate::core::cq::CqErrRead;
    let mut errs = Vec::new();
    let mut oks = Vec::new();
    while let Ok(Some(e)) = cq.read_err(|r| match r {
        CqErrRead::Entry(e) => Some(ErrComp {
            ctx: e.entry.op_context as usize,
            flags: e.entry.flags,
            len: e.entry.len,
            buf: e.entry.buf as usize,
            data: e.entry.data,
            tag: e.entry.tag,
            olen: e.olen,
            err: e.err,
            err_data: e.err_data.clone(),
        }),
        CqErrRead::Overrun => None,
    }) {
        errs.push(e);
    }
    loop {
        let mut got = None;
        match cq.read(1, |_, e| {
            got = Some(Comp {
                ctx: e.op_context as usize,
                flags: e.flags,
                len: e.len,
                buf: e.buf as usize,
                data: e.data,
                tag: e.tag,
                src: e.src,
            })
        }) {
            Ok(_) => oks.extend(got),
            Err(e) => {
                assert!(e == Error::AGAIN, "cq read: {e:?}");
                break;
            }
        }
    }
    (oks, errs)
}

impl Ep {
    pub(super) fn progress(&mut self) {
        // The endpoint's pass (`Source::progress` runs `progress_in`).
        self.inner.progress_in(&self.s.bound());
    }

    pub(super) fn send(&mut self, a: SendArgs) -> Result<()> {
        self.inner.send(self.s.bound(), a)
    }

    pub(super) fn recv(&mut self, a: RecvArgs) -> Result<()> {
        self.inner.recv(self.s.bound(), a)
    }

    pub(super) fn cancel(&mut self, ctx: usize) -> Result<()> {
        self.inner.cancel(self.s.bound(), ctx)
    }

    /// Send completions so far (successes, errors).
    pub(super) fn tx(&self) -> (Vec<Comp>, Vec<ErrComp>) {
        drain(&self.s.tx_cq)
    }

    /// Receive completions so far (successes, errors).
    pub(super) fn rx(&self) -> (Vec<Comp>, Vec<ErrComp>) {
        drain(&self.s.rx_cq)
    }

    /// Only successful send completions (asserts no error).
    pub(super) fn tx_ok(&self) -> Vec<Comp> {
        let (ok, err) = self.tx();
        assert!(err.is_empty(), "unexpected send errors: {err:?}");
        ok
    }

    /// Only successful receive completions (asserts no error).
    pub(super) fn rx_ok(&self) -> Vec<Comp> {
        let (ok, err) = self.rx();
        assert!(err.is_empty(), "unexpected receive errors: {err:?}");
        ok
    }

    /// (successes, errors) of the send counter.
    pub(super) fn send_count(&self) -> (u64, u64) {
        (self.s.send_cntr.read(), self.s.send_cntr.read_err())
    }

    pub(super) fn recv_count(&self) -> (u64, u64) {
        (self.s.recv_cntr.read(), self.s.recv_cntr.read_err())
    }
}

/// Polls every endpoint, in order, `passes` times.
pub(super) fn run(eps: &mut [&mut Ep], passes: usize) {
    for _ in 0..passes {
        for e in eps.iter_mut() {
            e.progress();
        }
    }
}

pub(super) const TRECV: u64 = FI_RECV | FI_TAGGED;
pub(super) const MRECV: u64 = FI_RECV | FI_MSG;
pub(super) const TSEND: u64 = FI_SEND | FI_TAGGED;
pub(super) const MSEND: u64 = FI_SEND | FI_MSG;
