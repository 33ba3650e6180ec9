//! RMA over the simulated transports: writes and reads of every size class
//! (chunks through the ring or stream, CMA pull and push), remote CQ data,
//! counters on both sides, the target's checks (key, range, access, a
//! region gone in the middle), inject, fallbacks when CMA is refused,
//! failing peers, and records a hostile peer forges.

use super::super::sim::{Cma, Writes};
use super::super::types::AtomicArgs;
use super::super::types::{RmaArgs, RmaBound, RmaIov, RmaIovList, RmaKind};
use crate::core::atomic::{AtomicKind, FI_SUM};
/// `FI_UINT64` (fi_atomic(3) `enum fi_datatype`).
const FI_UINT64: u32 = 7;
use super::*;
use crate::core::mr::{Addressing, KeyRequest, MrMap, Region, Start};
use crate::transport::proto::{flag, op, WireHdr};
use crate::transport::PEER_FAILED;

const EACCES: i32 = FI_EACCES;
const WRITE: u64 = FI_RMA | FI_WRITE;
const READ: u64 = FI_RMA | FI_READ;

/// The counters `fi_ep_bind` attaches for RMA events.
struct Cntrs {
    read: Arc<Cntr>,
    write: Arc<Cntr>,
    remote_read: Arc<Cntr>,
    remote_write: Arc<Cntr>,
}

/// An endpoint with its registrations and RMA counters.
struct R {
    ep: Ep,
    mrs: Arc<MrMap>,
    c: Cntrs,
}

impl R {
    fn new(mut ep: Ep) -> R {
        let mrs = Arc::new(MrMap::default());
        ep.inner.set_mr_map(mrs.clone());
        R {
            ep,
            mrs,
            c: Cntrs {
                read: cntr(),
                write: cntr(),
                remote_read: cntr(),
                remote_write: cntr(),
            },
        }
    }

    /// Runs `f` on the engine with this endpoint's bindings and counters.
    fn with_bound<T>(&mut self, f: impl FnOnce(&mut Inner, Bound<'_>) -> T) -> T {
        let R { ep, c, .. } = self;
        let b = Bound {
            rma: RmaBound {
                read: Some(&c.read),
                write: Some(&c.write),
                remote_read: Some(&c.remote_read),
                remote_write: Some(&c.remote_write),
            },
            ..ep.s.bound()
        };
        f(&mut ep.inner, b)
    }

    fn progress(&mut self) {
        self.with_bound(|inner, b| inner.progress(b));
    }

    fn rma(&mut self, a: RmaArgs) -> Result<()> {
        self.with_bound(|inner, b| inner.rma(b, a))
    }

    fn atomic(&mut self, a: AtomicArgs) -> Result<()> {
        self.with_bound(|inner, b| inner.atomic(b, a))
    }

    /// Registers `buf` (one region) with `access`; offsets or addresses.
    fn register(&self, buf: &mut [u8], access: u64, addressing: Addressing, key: u64) -> u64 {
        let r = Region::new(
            vec![(buf.as_mut_ptr() as usize, buf.len())],
            access,
            addressing,
            Start::Enabled,
        );
        self.mrs
            .insert(KeyRequest::App { key, key_size: 8 }, Arc::new(r))
            .expect("register")
    }

    /// (success, error) counts of one counter.
    fn count(c: &Cntr) -> (u64, u64) {
        (c.read(), c.read_err())
    }
}

fn rma_spec(sim: SimOpts) -> Spec {
    let mut s = Spec::new(sim);
    s.cfg.caps |= FI_RMA;
    s
}

fn rma_pair_of(a: Spec, b: Spec) -> (Net, R, R) {
    let (net, a, b) = pair_of(a, b);
    (net, R::new(a), R::new(b))
}

fn rma_pair(sim: SimOpts) -> (Net, R, R) {
    rma_pair_of(rma_spec(sim), rma_spec(sim))
}

fn drive(a: &mut R, b: &mut R, passes: usize) {
    for _ in 0..passes {
        a.progress();
        b.progress();
    }
}

/// Drives both until `a` has `n` send-side completions (success or error).
fn until_done(a: &mut R, b: &mut R, n: usize) -> (Vec<Comp>, Vec<ErrComp>) {
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        drive(a, b, 1);
        let (o, e) = a.ep.tx();
        ok.extend(o);
        err.extend(e);
        if ok.len() + err.len() >= n {
            return (ok, err);
        }
    }
    panic!("no completion: {} of {n}", ok.len() + err.len());
}

fn write(local: &[u8], addr: u64, key: u64, ctx: usize) -> RmaArgs {
    RmaArgs {
        kind: RmaKind::Write,
        dest: B,
        local: IovList::single(local.as_ptr() as usize, local.len()),
        remote: RmaIovList::single(addr, local.len(), key),
        data: None,
        flags: 0,
        context: ctx,
        inject_call: false,
    }
}

fn read(local: &mut [u8], addr: u64, key: u64, ctx: usize) -> RmaArgs {
    RmaArgs {
        kind: RmaKind::Read,
        local: IovList::single(local.as_mut_ptr() as usize, local.len()),
        ..write(local, addr, key, ctx)
    }
}

/// `a` asking `FI_DELIVERY_COMPLETE`: a write then completes only when the
/// target answered (else, on shm, when its last chunk is in the ring).
fn delivery(a: RmaArgs) -> RmaArgs {
    RmaArgs {
        flags: a.flags | FI_DELIVERY_COMPLETE,
        ..a
    }
}

/// The same local buffer in two pieces (cut at `cut`).
fn split(a: RmaArgs, cut: usize) -> RmaArgs {
    let (p, n) = a.local.segments()[0];
    let mut l = IovList::new();
    l.push(p, cut);
    l.push(p + cut, n - cut);
    RmaArgs { local: l, ..a }
}

fn ops(net: &Net) -> Vec<u8> {
    net.log().iter().map(|r| r.hdr.op).collect()
}

const SIZES: [usize; 7] = [0, 1, 100, 4096, 16384, 16385, 300_000];

/// Every size class, both addressings, on both transports: the target's
/// memory holds exactly what was written (around it nothing changed), the
/// reader gets exactly the target's bytes, every completion and counter.
#[test]
fn writes_and_reads_of_every_size_on_both_transports() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        for addressing in [Addressing::Offset, Addressing::Virtual] {
            let (_net, mut a, mut b) = rma_pair(sim);
            let mut target = vec![0xeeu8; 400_000];
            let base = if addressing == Addressing::Virtual {
                target.as_ptr() as u64
            } else {
                0
            };
            let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, addressing, 7);
            for (i, &n) in SIZES.iter().enumerate() {
                let src = pattern(n, i as u8);
                let at = 1000 + i;
                let args = if n > 10 {
                    split(write(&src, base + at as u64, key, i), n / 3)
                } else {
                    write(&src, base + at as u64, key, i)
                };
                a.rma(args).unwrap();
                let (ok, err) = until_done(&mut a, &mut b, 1);
                assert!(err.is_empty(), "{sim:?} {n}: {err:?}");
                assert_eq!(ok, vec![Comp::send(i, WRITE)], "{n}");
                assert_eq!(&target[at..at + n], &src[..], "{sim:?} write {n}");
                assert_eq!(target[at - 1], 0xee);
                assert_eq!(target[at + n], 0xee, "nothing past the end");
                let mut back = vec![0u8; n];
                let args = if n > 10 {
                    split(read(&mut back, base + at as u64, key, 100 + i), n / 2)
                } else {
                    read(&mut back, base + at as u64, key, 100 + i)
                };
                a.rma(args).unwrap();
                let (ok, err) = until_done(&mut a, &mut b, 1);
                assert!(err.is_empty(), "{sim:?} {n}: {err:?}");
                assert_eq!(ok, vec![Comp::send(100 + i, READ)]);
                assert_eq!(back, src, "{sim:?} read {n}");
                target[at..at + n].fill(0xee);
            }
            let k = SIZES.len() as u64;
            assert_eq!(R::count(&a.c.write), (k, 0));
            assert_eq!(R::count(&a.c.read), (k, 0));
            assert_eq!(R::count(&b.c.remote_write), (k, 0));
            assert_eq!(R::count(&b.c.remote_read), (k, 0));
            assert_eq!(R::count(&a.c.remote_write), (0, 0), "the initiator is no target");
            assert!(b.ep.rx().0.is_empty(), "no CQ entry at the target without CQ data");
        }
    }
}

/// Small writes go in chunks through the ring (one copy into registered
/// memory); large ones to an shm peer are pulled by the target (one copy,
/// CMA); large reads from an shm peer are pushed into the reader (CMA); TCP
/// never uses CMA.
#[test]
fn the_records_each_transport_uses() {
    let (net, mut a, mut b) = rma_pair(SimOpts::shm());
    let mut target = vec![0u8; 100_000];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let src = pattern(100_000, 9);
    // Transmit complete (no level asked): the chunk in the ring completes
    // the write at once and asks no answer.
    a.rma(write(&src[..5000], 0, key, 1)).unwrap();
    assert_eq!(a.ep.tx_ok().len(), 1, "complete when in the ring");
    drive(&mut a, &mut b, 3);
    assert_eq!(ops(&net), vec![op::WRITE]);
    let w = net.log()[0].hdr;
    assert_eq!(
        (w.tag, w.offset, w.len, w.reserved, w.aux, w.payload),
        (key, 0, 5000, 0, 0, 5000)
    );
    assert_eq!(w.flags, flag::LAST | flag::FINAL | flag::NO_ANSWER);
    assert_eq!(target[..5000], src[..5000]);
    // Delivery complete: the target's RMA_ACK completes it.
    net.clear_log();
    a.rma(delivery(write(&src[..5000], 0, key, 1))).unwrap();
    assert_eq!(a.ep.tx_ok().len(), 0, "not before the target's answer");
    until_done(&mut a, &mut b, 1);
    assert_eq!(ops(&net), vec![op::WRITE, op::RMA_ACK]);
    assert_eq!(net.log()[0].hdr.flags, flag::LAST | flag::FINAL);
    net.clear_log();
    // A CMA write is the target's to pull: answered whatever the level.
    a.rma(write(&src, 0, key, 2)).unwrap();
    until_done(&mut a, &mut b, 1);
    assert_eq!(ops(&net), vec![op::WRITE_REQ, op::RMA_ACK]);
    let q = net.log()[0].hdr;
    assert_eq!(
        (q.flags, q.reserved, q.payload, q.len),
        (flag::CMA_OK | flag::FINAL, 1, 16, 100_000)
    );
    assert_eq!(net.pulls(&b.ep.addr), 1);
    assert_eq!(target, src);
    net.clear_log();
    let mut back = vec![0u8; 100_000];
    a.rma(read(&mut back, 0, key, 3)).unwrap();
    until_done(&mut a, &mut b, 1);
    assert_eq!(ops(&net), vec![op::READ_REQ, op::RMA_ACK]);
    assert_eq!(net.pushes(&b.ep.addr), 1);
    assert_eq!(back, src);

    // tcp: write chunks up to the chunk limit (1 MiB), read responses of
    // 64 KiB (docs/protocol.md, Chunk limit).
    const LEN: usize = 2_500_000;
    let (net, mut a, mut b) = rma_pair(SimOpts::tcp());
    let mut target = vec![0u8; LEN];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let src = pattern(LEN, 1);
    a.rma(write(&src, 0, key, 1)).unwrap();
    until_done(&mut a, &mut b, 1);
    assert_eq!(
        *ops(&net).last().unwrap(),
        op::RMA_ACK,
        "tcp: transmit complete is the answer"
    );
    let log = net.log();
    let chunks: Vec<WireHdr> = log.iter().filter(|r| r.hdr.op == op::WRITE).map(|r| r.hdr).collect();
    assert!(
        (3..=4).contains(&chunks.len()),
        "chunks of up to 1 MiB: {}",
        chunks.len()
    );
    let mut off = 0u64;
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.reserved, off, "chunk {i} follows the previous one");
        assert!(c.payload as usize <= 1 << 20);
        assert_eq!(c.flags & flag::LAST != 0, i + 1 == chunks.len());
        off += c.payload as u64;
    }
    assert_eq!(off, LEN as u64);
    assert!(chunks[0].payload > 65536, "larger than an eager payload");
    assert_eq!(target, src);
    net.clear_log();
    let mut back = vec![0u8; LEN];
    a.rma(read(&mut back, 0, key, 2)).unwrap();
    until_done(&mut a, &mut b, 1);
    let o = ops(&net);
    assert_eq!(o[0], op::READ_REQ);
    assert_eq!(o.iter().filter(|&&x| x == op::READ_RESP).count(), LEN.div_ceil(65536));
    assert!(!o.contains(&op::RMA_ACK), "the last chunk completes a streamed read");
    assert_eq!(back, src);
    assert_eq!(net.pulls(&b.ep.addr) + net.pushes(&b.ep.addr), 0);
}

/// A target that may not use CMA (refused by the kernel) answers a pull
/// request with FI_EOPNOTSUPP and gets chunks instead; a read request with
/// a buffer table is streamed. The initiator stops asking that peer.
#[test]
fn refused_cma_falls_back_to_chunks() {
    let mut tsim = SimOpts::shm();
    tsim.cma = Cma::Refused;
    let (net, mut a, mut b) = rma_pair_of(rma_spec(SimOpts::shm()), rma_spec(tsim));
    let mut target = vec![0u8; 100_000];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let src = pattern(100_000, 2);
    a.rma(write(&src, 0, key, 1)).unwrap();
    assert_eq!(until_done(&mut a, &mut b, 1), (vec![Comp::send(1, WRITE)], vec![]));
    assert_eq!(target, src);
    let o = ops(&net);
    assert_eq!(o[..2], [op::WRITE_REQ, op::RMA_ACK]);
    assert_eq!(net.log()[1].hdr.data, FI_EOPNOTSUPP as u64);
    assert!(o[2..].iter().all(|&x| x == op::WRITE || x == op::RMA_ACK));
    net.clear_log();
    let mut back = vec![0u8; 100_000];
    a.rma(read(&mut back, 0, key, 2)).unwrap();
    assert_eq!(until_done(&mut a, &mut b, 1), (vec![Comp::send(2, READ)], vec![]));
    assert_eq!(back, src);
    assert_eq!(
        net.log()[0].hdr.flags & flag::CMA_OK,
        0,
        "no more CMA asked of that peer"
    );
    assert_eq!(ops(&net).iter().filter(|&&x| x == op::READ_RESP).count(), 7);
    // The same with the target's own setting off (FI_RUSTFAB_SHM_CMA=0).
    let mut off = rma_spec(SimOpts::shm());
    off.cfg.cma = false;
    let (net, mut a, mut b) = rma_pair_of(rma_spec(SimOpts::shm()), off);
    let mut target = vec![0u8; 100_000];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let mut back = vec![0u8; 50_000];
    target[..50_000].copy_from_slice(&src[..50_000]);
    a.rma(read(&mut back, 0, key, 2)).unwrap();
    assert_eq!(until_done(&mut a, &mut b, 1), (vec![Comp::send(2, READ)], vec![]));
    assert_eq!(back, src[..50_000]);
    assert_eq!(net.pushes(&b.ep.addr), 0);
}

/// writedata: one receive-CQ entry at the target for the whole operation
/// (even of several segments), after every byte; the remote write counter
/// moves once.
#[test]
fn remote_cq_data_and_events_once_per_operation() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let (_net, mut a, mut b) = rma_pair(sim);
        let mut target = vec![0u8; 300_000];
        let key = b.register(&mut target, FI_REMOTE_WRITE, Addressing::Offset, 5);
        let src = pattern(120_000, 4);
        let mut remote = RmaIovList::default();
        remote.push(RmaIov {
            addr: 200_000,
            len: 20_000,
            key,
        });
        remote.push(RmaIov {
            addr: 0,
            len: 70_000,
            key,
        });
        remote.push(RmaIov {
            addr: 100_000,
            len: 30_000,
            key,
        });
        a.rma(RmaArgs {
            remote,
            data: Some(0xdada),
            flags: FI_REMOTE_CQ_DATA,
            ..write(&src, 0, key, 1)
        })
        .unwrap();
        let (ok, err) = until_done(&mut a, &mut b, 1);
        assert_eq!((ok, err), (vec![Comp::send(1, WRITE)], vec![]));
        assert_eq!(&target[200_000..220_000], &src[..20_000]);
        assert_eq!(&target[..70_000], &src[20_000..90_000]);
        assert_eq!(&target[100_000..130_000], &src[90_000..]);
        let rx = b.ep.rx_ok();
        assert_eq!(
            rx,
            vec![Comp {
                data: 0xdada,
                ..Comp::recv(0, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 30_000, 0)
            }],
            "len: the last segment's"
        );
        assert_eq!(R::count(&b.c.remote_write), (1, 0));
        // Without CQ data: no entry, the counter only.
        a.rma(write(&src[..10], 0, key, 2)).unwrap();
        until_done(&mut a, &mut b, 1);
        assert!(b.ep.rx_ok().is_empty());
        assert_eq!(R::count(&b.c.remote_write), (2, 0));
    }
}

/// What the target refuses: an unknown key (FI_EINVAL), a range outside
/// the region, a right the region does not grant, a disabled region, an
/// endpoint without FI_RMA (FI_EACCES). The target's memory is untouched,
/// the initiator gets one error completion, its counter's error count
/// moves, the target's counters do not.
#[test]
fn refused_accesses_touch_nothing() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        for n in [10usize, 40_000, 100_000] {
            let (_net, mut a, mut b) = rma_pair(sim);
            let mut ro = vec![0x11u8; 100_000];
            let mut wo = vec![0x22u8; 100_000];
            let kro = b.register(&mut ro, FI_REMOTE_READ, Addressing::Offset, 1);
            let kwo = b.register(&mut wo, FI_REMOTE_WRITE, Addressing::Offset, 2);
            let off = Region::new(
                vec![(wo.as_ptr() as usize, 10)],
                FI_REMOTE_WRITE,
                Addressing::Offset,
                Start::Disabled,
            );
            let kdis = b
                .mrs
                .insert(KeyRequest::App { key: 3, key_size: 8 }, Arc::new(off))
                .unwrap();
            let src = pattern(n, 1);
            let mut back = vec![0x55u8; n];
            let cases: Vec<(RmaArgs, i32)> = vec![
                (write(&src, 0, 99, 1), FI_EINVAL),
                (write(&src, 1, kwo, 2), EACCES),
                (write(&src, 0, kro, 3), EACCES),
                (write(&src, 0, kdis, 4), EACCES),
                (read(&mut back, 0, 99, 5), FI_EINVAL),
                (read(&mut back, 1, kro, 6), EACCES),
                (read(&mut back, 0, kwo, 7), EACCES),
                (read(&mut back, 0, kdis, 8), EACCES),
            ];
            for (i, (args, code)) in cases.into_iter().enumerate() {
                let is_write = args.kind == RmaKind::Write;
                let ctx = args.context;
                let mut args = args;
                if n < 100_000 && (ctx == 2 || ctx == 6) {
                    // Out of range: start near the end.
                    args.remote = RmaIovList::single(100_000 - n as u64 + 1, n, args.remote.segments()[0].key);
                }
                a.rma(delivery(args)).unwrap();
                let (ok, err) = until_done(&mut a, &mut b, 1);
                assert!(ok.is_empty(), "{sim:?} {n} case {i}");
                assert_eq!(err.len(), 1);
                let e = &err[0];
                assert_eq!((e.ctx, e.err, e.len), (ctx, code, n), "{sim:?} {n} case {i}");
                assert_eq!(e.flags, if is_write { WRITE } else { READ });
            }
            assert!(ro.iter().all(|&x| x == 0x11), "{sim:?} {n}: read-only region written");
            assert!(wo.iter().all(|&x| x == 0x22), "{sim:?} {n}: region written");
            assert!(back.iter().all(|&x| x == 0x55), "{sim:?} {n}: nothing read");
            assert_eq!(R::count(&a.c.write), (0, 4));
            assert_eq!(R::count(&a.c.read), (0, 4));
            assert_eq!(R::count(&b.c.remote_write), (0, 0));
            assert_eq!(R::count(&b.c.remote_read), (0, 0));
            // Without delivery complete a write on shm completed when it
            // was in the ring: the target still refuses it (logs it) and
            // touches nothing, but the initiator can no longer hear of it
            // (tcp and CMA writes still wait for the answer).
            for (k, addr) in [(99, 0), (kwo, 1), (kro, 0), (kdis, 0)] {
                let mut w = write(&src, addr, k, 9);
                if n < 100_000 && addr == 1 {
                    w.remote = RmaIovList::single(100_000 - n as u64 + 1, n, kwo);
                }
                a.rma(w).unwrap();
                let (ok, err) = until_done(&mut a, &mut b, 1);
                let early = sim.writes == Writes::Ring && n <= sim.eager_limit;
                assert_eq!(
                    (ok.len(), err.len()),
                    if early { (1, 0) } else { (0, 1) },
                    "{sim:?} {n} key {k}"
                );
            }
            drive(&mut a, &mut b, 5);
            assert!(ro.iter().all(|&x| x == 0x11), "{sim:?} {n}: read-only region written");
            assert!(wo.iter().all(|&x| x == 0x22), "{sim:?} {n}: region written");
            assert_eq!(R::count(&b.c.remote_write), (0, 0));
        }
    }
    // A target endpoint opened without FI_RMA takes no RMA at all; one
    // opened for reads only (FI_REMOTE_READ) takes no writes.
    let mut plain = Spec::new(SimOpts::shm());
    plain.cfg.caps &= !FI_RMA;
    let mut read_only = rma_spec(SimOpts::shm());
    read_only.cfg.caps |= FI_REMOTE_READ;
    for spec in [plain, read_only] {
        let (_net, mut a, mut b) = rma_pair_of(rma_spec(SimOpts::shm()), spec);
        let mut t = vec![0u8; 64];
        let k = b.register(&mut t, FI_REMOTE_WRITE | FI_REMOTE_READ, Addressing::Offset, 1);
        a.rma(delivery(write(&[1, 2, 3], 0, k, 1))).unwrap();
        let (_, err) = until_done(&mut a, &mut b, 1);
        assert_eq!(err[0].err, EACCES);
        assert_eq!(t, vec![0u8; 64]);
    }
}

/// A region closed while a read streams from it: the next chunk is not
/// read; the reader's operation fails.
#[test]
fn a_region_closed_mid_read_ends_it() {
    let mut sim = SimOpts::tcp();
    sim.window = 70_000;
    let (_net, mut a, mut b) = rma_pair(sim);
    let mut target = pattern(500_000, 3);
    let key = b.register(&mut target, FI_REMOTE_READ, Addressing::Offset, 1);
    let mut back = vec![0u8; 500_000];
    a.rma(read(&mut back, 0, key, 1)).unwrap();
    drive(&mut a, &mut b, 2);
    b.mrs.remove(key).unwrap();
    let (ok, err) = until_done(&mut a, &mut b, 1);
    assert!(ok.is_empty());
    assert_eq!((err[0].ctx, err[0].err), (1, FI_EINVAL));
    assert!(back[400_000..].iter().all(|&x| x == 0), "nothing after the close");
    assert_eq!(R::count(&b.c.remote_read), (0, 0));
}

/// fi_inject_write: the buffer is the caller's again when the call returns
/// (changing it does not change what arrives), no completion, the counter
/// moves. Larger than inject_size: -FI_EMSGSIZE. With several segments the
/// data is copied.
#[test]
fn inject_writes() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let (_net, mut a, mut b) = rma_pair(sim);
        let mut target = vec![0u8; 256];
        let key = b.register(&mut target, FI_REMOTE_WRITE, Addressing::Offset, 1);
        let mut src = pattern(64, 1);
        let orig = src.clone();
        a.rma(RmaArgs {
            inject_call: true,
            ..write(&src, 0, key, 0)
        })
        .unwrap();
        src.fill(0);
        let mut remote = RmaIovList::default();
        remote.push(RmaIov {
            addr: 100,
            len: 30,
            key,
        });
        remote.push(RmaIov {
            addr: 200,
            len: 34,
            key,
        });
        let mut src2 = pattern(64, 2);
        let orig2 = src2.clone();
        a.rma(RmaArgs {
            remote,
            flags: FI_INJECT,
            ..write(&src2, 0, key, 5)
        })
        .unwrap();
        src2.fill(0);
        drive(&mut a, &mut b, 10);
        assert_eq!(&target[..64], &orig[..]);
        assert_eq!(&target[100..130], &orig2[..30]);
        assert_eq!(&target[200..234], &orig2[30..]);
        let (ok, err) = a.ep.tx();
        assert_eq!(err, vec![]);
        assert_eq!(ok, vec![Comp::send(5, WRITE)], "FI_INJECT on writemsg still completes");
        assert_eq!(R::count(&a.c.write), (2, 0));
        let big = vec![0u8; 65];
        assert_eq!(
            a.rma(RmaArgs {
                inject_call: true,
                ..write(&big, 0, key, 0)
            }),
            Err(Error::MSGSIZE)
        );
    }
}

/// Post-time refusals: no FI_RMA (or no FI_WRITE) on the endpoint, local
/// and remote lengths that differ, no segment, a queue full.
#[test]
fn post_time_checks() {
    let mut plain = Spec::new(SimOpts::shm());
    plain.cfg.caps &= !FI_RMA;
    let mut reads_only = rma_spec(SimOpts::shm());
    reads_only.cfg.caps |= FI_READ;
    let (_net, mut a, mut b) = rma_pair_of(plain, reads_only);
    let buf = [0u8; 8];
    assert_eq!(a.rma(write(&buf, 0, 1, 1)), Err(Error::OPNOTSUPP));
    let mut b_args = write(&buf, 0, 1, 1);
    b_args.dest = A;
    assert_eq!(b.rma(b_args), Err(Error::OPNOTSUPP), "FI_READ only");
    let (_net, mut a, mut b) = rma_pair(SimOpts::shm());
    let mut t = vec![0u8; 8];
    let key = b.register(&mut t, FI_REMOTE_WRITE, Addressing::Offset, 1);
    let mut w = write(&buf, 0, key, 1);
    w.remote = RmaIovList::single(0, 7, key);
    assert_eq!(a.rma(w), Err(Error::INVAL), "lengths differ");
    let mut w = write(&buf, 0, key, 1);
    w.remote = RmaIovList::default();
    assert_eq!(a.rma(w), Err(Error::INVAL), "no segment");
    let mut w = write(&buf, 0, key, 1);
    w.dest = 77;
    assert_eq!(a.rma(w), Err(Error::INVAL), "no such address");
    for i in 0..64 {
        a.rma(delivery(write(&buf, 0, key, i))).unwrap();
    }
    assert_eq!(a.rma(write(&buf, 0, key, 64)), Err(Error::AGAIN), "tx_size");
    assert_eq!(a.ep.inner.tx_outstanding(), 64);
    let (ok, _) = until_done(&mut a, &mut b, 64);
    assert_eq!(ok.len(), 64);
    assert_eq!(a.ep.inner.tx_outstanding(), 0);
    // Transmit-complete writes on shm hold no queue entry once in the ring.
    for i in 0..100 {
        a.rma(write(&buf, 0, key, i)).unwrap();
        assert_eq!(a.ep.inner.tx_outstanding(), 0);
        drive(&mut a, &mut b, 1);
    }
    assert_eq!(a.ep.tx_ok().len(), 100);
}

/// The target dies during a large write (its ring still holds the request)
/// or a read: the initiator's operations fail with the peer error once;
/// a TCP reset in the middle of a streamed read fails it too.
#[test]
fn a_failing_peer_ends_its_operations() {
    let (net, mut a, b) = rma_pair(SimOpts::shm());
    let mut target = vec![0u8; 100_000];
    let key = b.register(&mut target, FI_REMOTE_WRITE | FI_REMOTE_READ, Addressing::Offset, 1);
    let src = pattern(100_000, 1);
    let mut back = vec![0u8; 100_000];
    a.rma(write(&src, 0, key, 1)).unwrap();
    a.rma(read(&mut back, 0, key, 2)).unwrap();
    net.kill(&b.ep.addr);
    // Only A runs now (B's process is gone).
    let (mut ok, mut err) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        a.progress();
        let (o, e) = a.ep.tx();
        ok.extend(o);
        err.extend(e);
        if ok.len() + err.len() == 2 {
            break;
        }
    }
    assert!(ok.is_empty());
    let mut ctxs: Vec<(usize, i32)> = err.iter().map(|e| (e.ctx, e.err)).collect();
    ctxs.sort();
    assert_eq!(ctxs, vec![(1, PEER_FAILED.0), (2, PEER_FAILED.0)]);
    for _ in 0..200 {
        a.progress();
    }
    assert_eq!(a.ep.tx(), (vec![], vec![]), "exactly once");
    assert_eq!(target, vec![0u8; 100_000]);

    let mut sim = SimOpts::tcp();
    sim.window = 70_000;
    let (net, mut a, mut b) = rma_pair(sim);
    let mut target = pattern(400_000, 2);
    let key = b.register(&mut target, FI_REMOTE_READ, Addressing::Offset, 1);
    let mut back = vec![0u8; 400_000];
    a.rma(read(&mut back, 0, key, 3)).unwrap();
    drive(&mut a, &mut b, 2);
    net.reset(&a.ep.addr, &b.ep.addr);
    let (ok, err) = until_done(&mut a, &mut b, 1);
    assert!(ok.is_empty());
    assert_eq!((err[0].ctx, err[0].err), (3, PEER_FAILED.0));
    drive(&mut a, &mut b, 10);
    assert_eq!(a.ep.tx(), (vec![], vec![]));
    assert!(!b.ep.inner.waits_on_peers(), "the target dropped the read");
}

/// Records a confused or hostile peer forges: read data for an operation
/// that does not exist or from someone else, an acknowledgement of
/// another peer's operation, a write with a bad key or beyond its
/// segment's end — dropped or refused, never placed.
#[test]
fn forged_records_are_dropped() {
    let specs = [
        rma_spec(SimOpts::shm()),
        rma_spec(SimOpts::shm()),
        rma_spec(SimOpts::shm()),
    ];
    let (net, v) = network(&specs);
    let mut v: Vec<R> = v.into_iter().map(R::new).collect();
    let mut target = vec![0u8; 64];
    let key = v[1].register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let mut back = vec![0u8; 32];
    v[0].rma(read(&mut back, 0, key, 1)).unwrap();
    let id = net.log()[0].hdr.msg_id;
    let (a0, a1, a2) = (v[0].ep.addr, v[1].ep.addr, v[2].ep.addr);
    // From the third endpoint: data and an ACK for A's read.
    let mut r = WireHdr::new(op::READ_RESP);
    r.msg_id = id;
    r.len = 32;
    r.flags = flag::LAST;
    net.forge(&a2, &a0, r, &[0xff; 32]);
    let mut ack = WireHdr::new(op::RMA_ACK);
    ack.msg_id = id;
    net.forge(&a2, &a0, ack, &[]);
    v[0].progress();
    assert_eq!(v[0].ep.tx(), (vec![], vec![]));
    assert_eq!(back, vec![0u8; 32]);
    // From B itself but for no such operation / out of order.
    let mut r2 = r;
    r2.msg_id = id ^ 1;
    net.forge(&a1, &a0, r2, &[0xff; 32]);
    let mut r3 = r;
    r3.reserved = 8;
    r3.len = 40;
    net.forge(&a1, &a0, r3, &[0xff; 32]);
    v[0].progress();
    assert_eq!(back, vec![0u8; 32]);
    // The real answer still completes the read.
    for _ in 0..5 {
        v[1].progress();
        v[0].progress();
    }
    assert_eq!(v[0].ep.tx_ok(), vec![Comp::send(1, READ)]);
    // A write to an unknown key gets an error ACK, nothing written.
    net.clear_log();
    let mut w = WireHdr::new(op::WRITE);
    w.tag = key + 1;
    w.len = 8;
    w.flags = flag::LAST | flag::FINAL;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    v[1].progress();
    assert_eq!(target, vec![0u8; 64]);
    let log = net.log();
    let a = log.iter().find(|r| r.hdr.op == op::RMA_ACK).expect("an answer");
    assert_eq!((a.to, a.hdr.data), (a2, FI_EINVAL as u64));
    // A write whose segment ends past its region: refused whole, even the
    // chunks inside it.
    let mut w = WireHdr::new(op::WRITE);
    w.tag = key;
    w.len = 65;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    w.reserved = 8;
    w.flags = flag::LAST;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    v[1].progress();
    assert_eq!(target, vec![0u8; 64]);
    // A chunk refused before a valid last one still fails the segment: the
    // key appears in between (registered late).
    net.clear_log();
    let mut t2 = vec![0u8; 16];
    let mut w = WireHdr::new(op::WRITE);
    w.tag = 50;
    w.len = 16;
    w.msg_id = 9;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    v[1].progress();
    v[1].register(&mut t2, FI_REMOTE_WRITE, Addressing::Offset, 50);
    w.reserved = 8;
    w.flags = flag::LAST | flag::FINAL;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    v[1].progress();
    let log = net.log();
    let a = log.iter().find(|r| r.hdr.op == op::RMA_ACK).expect("an answer");
    assert_eq!(a.hdr.data, FI_EINVAL as u64, "the first chunk's refusal");
    assert_eq!(R::count(&v[1].c.remote_write), (0, 0));
    // A write that asks no answer (its initiator completed it at transmit)
    // and is refused: nothing written, nothing sent back.
    net.clear_log();
    let mut w = WireHdr::new(op::WRITE);
    w.tag = key + 7;
    w.len = 8;
    w.flags = flag::LAST | flag::FINAL | flag::NO_ANSWER;
    net.forge(&a2, &a1, w, &[0xff; 8]);
    v[1].progress();
    assert_eq!(target, vec![0u8; 64]);
    assert!(net.log().iter().all(|r| r.to != a2), "no answer");
}

/// A non-fetching atomic on shm completes when its record is in the ring
/// (no answer asked), unless delivery complete is asked; a refused one
/// then changes nothing at the target and can only be logged there. A
/// fetch always waits for its values; a forged `NO_ANSWER` on one does not
/// stop its answer. tcp waits for the answer (transmit complete).
#[test]
fn atomics_complete_at_transmit_unless_delivery_is_asked() {
    let mut spec = rma_spec(SimOpts::shm());
    spec.cfg.caps |= FI_ATOMIC;
    let (net, mut a, mut b) = rma_pair_of(spec.clone(), spec);
    let mut target = vec![0u8; 8];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    let one = 1u64.to_le_bytes();
    let mut res = [0u8; 8];
    let sum = |flags: u64, key: u64| AtomicArgs {
        kind: AtomicKind::Write,
        op: FI_SUM,
        datatype: FI_UINT64,
        dest: B,
        operand: IovList::single(one.as_ptr() as usize, 8),
        compare: IovList::new(),
        result: IovList::new(),
        remote: RmaIovList::single(0, 8, key),
        data: None,
        flags,
        context: 7,
        inject_call: false,
    };
    let word = |t: &[u8]| u64::from_le_bytes(t[..8].try_into().unwrap());
    a.atomic(sum(0, key)).unwrap();
    assert_eq!(a.ep.tx_ok().len(), 1, "complete when in the ring");
    drive(&mut a, &mut b, 3);
    assert_eq!(ops(&net), vec![op::ATOMIC]);
    assert_eq!(net.log()[0].hdr.flags, flag::FINAL | flag::NO_ANSWER);
    assert_eq!(word(&target), 1);
    assert_eq!(R::count(&a.c.write), (1, 0));
    net.clear_log();
    a.atomic(sum(FI_DELIVERY_COMPLETE, key)).unwrap();
    assert_eq!(a.ep.tx_ok().len(), 0, "not before the answer");
    let (ok, _) = until_done(&mut a, &mut b, 1);
    assert_eq!(ok[0].flags, FI_ATOMIC | FI_WRITE);
    assert_eq!(ops(&net), vec![op::ATOMIC, op::ATOMIC_RESP]);
    assert_eq!(word(&target), 2);
    // Refused (no such key): at transmit complete the initiator saw
    // success; the target changed nothing and sent nothing.
    net.clear_log();
    a.atomic(sum(0, key + 5)).unwrap();
    assert_eq!(a.ep.tx_ok().len(), 1);
    drive(&mut a, &mut b, 3);
    assert_eq!(ops(&net), vec![op::ATOMIC]);
    assert_eq!(word(&target), 2);
    a.atomic(sum(FI_DELIVERY_COMPLETE, key + 5)).unwrap();
    let (ok, err) = until_done(&mut a, &mut b, 1);
    assert!(ok.is_empty());
    assert_eq!(err[0].err, FI_EINVAL);
    // A fetch waits for the former value, whatever the level.
    net.clear_log();
    a.atomic(AtomicArgs {
        kind: AtomicKind::Fetch,
        result: IovList::single(res.as_mut_ptr() as usize, 8),
        ..sum(0, key)
    })
    .unwrap();
    assert_eq!(a.ep.tx_ok().len(), 0);
    until_done(&mut a, &mut b, 1);
    assert_eq!(ops(&net), vec![op::ATOMIC, op::ATOMIC_RESP]);
    assert_eq!(u64::from_le_bytes(res), 2);
    assert_eq!(word(&target), 3);
    // A forged fetch with NO_ANSWER is answered all the same.
    net.clear_log();
    let mut f = WireHdr::new(op::ATOMIC);
    f.msg_id = 77;
    f.tag = key;
    f.len = 8;
    f.reserved = u64::from(FI_SUM) | u64::from(FI_UINT64) << 8 | 1 << 16;
    f.flags = flag::FINAL | flag::NO_ANSWER;
    net.forge(&a.ep.addr, &b.ep.addr, f, &one);
    drive(&mut a, &mut b, 3);
    assert!(net
        .log()
        .iter()
        .any(|r| r.hdr.op == op::ATOMIC_RESP && r.hdr.msg_id == 77));
    assert_eq!(word(&target), 4);
    assert_eq!(R::count(&b.c.remote_write), (4, 0), "the target's events, once each");

    let mut spec = rma_spec(SimOpts {
        writes: Writes::Socket,
        ..SimOpts::tcp()
    });
    spec.cfg.caps |= FI_ATOMIC;
    let (net, mut a, mut b) = rma_pair_of(spec.clone(), spec);
    let mut target = vec![0u8; 8];
    let key = b.register(&mut target, FI_REMOTE_READ | FI_REMOTE_WRITE, Addressing::Offset, 1);
    // tcp (docs/rma.md, Completions): a named transmit complete waits for
    // the answer; no level (the provider default) or inject complete
    // completes once written, the target idle, its answer dropped.
    a.atomic(sum(FI_TRANSMIT_COMPLETE, key)).unwrap();
    for _ in 0..5 {
        a.progress();
    }
    assert_eq!(a.ep.tx_ok().len(), 0, "transmit complete: not before the answer");
    until_done(&mut a, &mut b, 1);
    assert_eq!(ops(&net), vec![op::ATOMIC, op::ATOMIC_RESP]);
    assert_eq!(word(&target), 1);
    for (i, level) in [0, FI_INJECT_COMPLETE].into_iter().enumerate() {
        net.clear_log();
        a.atomic(sum(level, key)).unwrap();
        a.progress();
        assert_eq!(a.ep.tx_ok().len(), 1, "level {level:#x}: complete once written");
        assert_eq!(word(&target), 1 + i as u64, "the target did not progress");
        drive(&mut a, &mut b, 3);
        assert_eq!(word(&target), 2 + i as u64);
        assert_eq!(
            ops(&net),
            vec![op::ATOMIC, op::ATOMIC_RESP],
            "answered, the answer dropped"
        );
        assert_eq!(a.ep.tx(), (vec![], vec![]));
    }
}

/// tcp writes (docs/rma.md, Completions): a named `FI_TRANSMIT_COMPLETE`
/// (or delivery) waits for the target's `RMA_ACK`; no level or inject
/// complete completes when the last chunk is written, the target idle.
#[test]
fn tcp_writes_complete_when_written_unless_transmit_is_named() {
    let sim = SimOpts {
        writes: Writes::Socket,
        ..SimOpts::tcp()
    };
    let (_net, mut a, mut b) = rma_pair(sim);
    let mut target = vec![0u8; 1000];
    let key = b.register(&mut target, FI_REMOTE_WRITE, Addressing::Offset, 1);
    let src = pattern(1000, 3);
    for (ctx, level) in [
        (1, FI_TRANSMIT_COMPLETE),
        (2, FI_DELIVERY_COMPLETE),
        (3, 0),
        (4, FI_INJECT_COMPLETE),
    ] {
        target.fill(0);
        a.rma(RmaArgs {
            flags: level,
            ..write(&src, 0, key, ctx)
        })
        .unwrap();
        for _ in 0..5 {
            a.progress();
        }
        let waits = level & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE) != 0;
        assert_eq!(a.ep.tx_ok().len(), usize::from(!waits), "level {level:#x}");
        drive(&mut a, &mut b, 6);
        assert_eq!(a.ep.tx_ok().len(), usize::from(waits), "level {level:#x}");
        assert_eq!(target, src);
    }
}

/// A target whose receive CQ is full leaves a write with CQ data in the
/// transport until there is room (FI_RM_ENABLED: nothing is lost).
#[test]
fn remote_cq_data_waits_for_room() {
    let mut tspec = rma_spec(SimOpts::shm());
    tspec.cq_size = 2;
    let (_net, mut a, mut b) = rma_pair_of(rma_spec(SimOpts::shm()), tspec);
    let mut target = vec![0u8; 64];
    let key = b.register(&mut target, FI_REMOTE_WRITE, Addressing::Offset, 1);
    let src = pattern(8, 1);
    for level in [FI_DELIVERY_COMPLETE, 0] {
        for i in 0..4u64 {
            a.rma(RmaArgs {
                data: Some(i),
                flags: FI_REMOTE_CQ_DATA | level,
                ..write(&src, i * 8, key, i as usize)
            })
            .unwrap();
        }
        if level == 0 {
            // Transmit complete: all four are in the ring.
            assert_eq!(a.ep.tx_ok().len(), 4);
        }
        drive(&mut a, &mut b, 10);
        if level != 0 {
            assert_eq!(a.ep.tx_ok().len(), 2, "two wait for the target's CQ");
        }
        let rx = b.ep.rx_ok();
        assert_eq!(rx.iter().map(|c| c.data).collect::<Vec<_>>(), vec![0, 1]);
        drive(&mut a, &mut b, 10);
        if level != 0 {
            assert_eq!(a.ep.tx_ok().len(), 2);
        }
        assert_eq!(b.ep.rx_ok().iter().map(|c| c.data).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(
            &target[..32],
            &[src.clone(), src.clone(), src.clone(), src.clone()].concat()[..]
        );
        target.fill(0);
    }
}

/// An initiator closing with a CMA read outstanding: the target pushes
/// into the initiator's buffer, so the close waits for its answer (or its
/// failure), progressing the endpoint; nothing completes once closed.
#[test]
fn a_close_waits_for_a_cma_reads_push() {
    for dead in [false, true] {
        let mut sa = rma_spec(SimOpts::shm());
        sa.cfg.close_wait = std::time::Duration::from_secs(3600);
        let (net, mut a, mut b) = rma_pair_of(sa, rma_spec(SimOpts::shm()));
        let src = pattern(300_000, 13);
        let mut target = src.clone();
        let key = b.register(&mut target, FI_REMOTE_READ, Addressing::Offset, 1);
        let mut back = vec![0u8; 300_000];
        a.rma(read(&mut back, 0, key, 2)).unwrap();
        a.progress();
        assert_ne!(net.log()[0].hdr.flags & flag::CMA_OK, 0, "the target pushes");
        if dead {
            net.kill(&b.ep.addr);
        }
        let mut idles = 0;
        a.ep.inner.close_with(&mut || {
            idles += 1;
            assert!(idles < 100, "still waiting (target dead: {dead})");
            if idles == 3 && !dead {
                b.progress(); // the target's pass: push, RMA_ACK
            }
        });
        assert_eq!(a.ep.tx(), (vec![], vec![]), "nothing completes once closed");
        if dead {
            assert!(idles <= 2, "the failure ends the wait: {idles}");
            assert_eq!(net.pushes(&b.ep.addr), 0);
        } else {
            assert_eq!(idles, 3, "waited, and returned at the answer");
            assert_eq!(net.pushes(&b.ep.addr), 1);
            assert_eq!(back, src, "every byte in before the close returned");
        }
    }
}
