//! Buffered receives (FI_BUFFERED_RECV): reports in provider buffers,
//! discard and claim, FI_MORE with the pushed or fetched prefix, the pool's
//! and the CQ's backpressure, report order, senders that die or are
//! cancelled, the options.

use super::super::buffered::{getopt, setopt, MIN_POOL};
use super::super::sim::Cma;
use super::*;
use crate::transport::proto::{flag, op};

fn buffered(sim: SimOpts, pool: usize) -> Spec {
    let mut s = Spec::new(sim);
    s.buffered = Some(pool);
    s
}

/// The `fi_recv_context` of a report: (ep, context).
fn recv_context(ctx: usize) -> (usize, usize) {
    // SAFETY: `ctx` is a reported message's fi_recv_context (line 0 of its
    // pool buffer), held until claimed or discarded.
    let rc = unsafe { core::ptr::read(ctx as *const fi_recv_context) };
    (rc.ep as usize, rc.context as usize)
}

fn set_context(ctx: usize, v: usize) {
    // SAFETY: as above; the application may write `context` before claiming.
    unsafe { (*(ctx as *mut fi_recv_context)).context = v as *mut c_void };
}

/// The bytes at a report's `buf`.
fn report_bytes(c: &Comp, n: usize) -> Vec<u8> {
    // SAFETY: a reported buffer holds at least `n` bytes (the test's
    // expectation) until released.
    unsafe { core::slice::from_raw_parts(c.buf as *const u8, n) }.to_vec()
}

fn discard(ep: &mut Ep, ctx: usize) -> Result<()> {
    ep.recv(RecvArgs {
        iov: IovList::new(),
        flags: FI_DISCARD,
        ..rargs(&mut [], ctx)
    })
}

fn claim(ep: &mut Ep, ctx: usize, buf: &mut [u8]) -> Result<()> {
    ep.recv(RecvArgs {
        flags: FI_CLAIM,
        ..rargs(buf, ctx)
    })
}

#[test]
fn eager_messages_are_reported_in_place_and_discarded() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    let m = pattern(100, 1);
    a.send(SendArgs {
        tagged: true,
        tag: 3,
        flags: FI_REMOTE_CQ_DATA,
        data: 9,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    b.progress();
    let got = b.rx_ok();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(
        *r,
        Comp {
            tag: 3,
            data: 9,
            ..Comp::recv(r.ctx, TRECV | FI_REMOTE_CQ_DATA, 100, r.ctx + 64)
        }
    );
    assert_eq!(r.ctx % 64, 0, "64-byte aligned");
    assert_eq!(recv_context(r.ctx), (0xe9, 0));
    assert_eq!(report_bytes(r, 100), m);
    assert_eq!(b.recv_count(), (1, 0));
    discard(&mut b, r.ctx).unwrap();
    assert_eq!(b.rx_ok(), vec![], "a discard has no completion");
    assert_eq!(discard(&mut b, r.ctx), Err(Error::INVAL), "released once");
    let mut buf = [0u8; 8];
    assert_eq!(claim(&mut b, 0x1234, &mut buf), Err(Error::INVAL), "not a report");
    // Posted receives still match first.
    let mut mine = vec![0u8; 100];
    b.recv(rargs(&mut mine, 5)).unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok(), vec![Comp::recv(5, MRECV, 100, mine.as_ptr() as usize)]);
}

#[test]
fn claims_copy_out_and_complete_with_the_applications_context() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::tcp()), buffered(SimOpts::tcp(), 1 << 20));
    let m = pattern(200, 2);
    a.send(SendArgs {
        flags: FI_DELIVERY_COMPLETE,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    run(&mut [&mut a, &mut b], 4);
    // Transmit complete when written; delivery complete once in the
    // provider's buffer, about to be reported (B's ACK).
    assert_eq!(a.tx_ok(), vec![Comp::send(2, MSEND), Comp::send(1, MSEND)]);
    let got = b.rx_ok();
    assert_eq!(got.len(), 2);
    set_context(got[0].ctx, 0x77);
    let mut buf = vec![0u8; 300];
    claim(&mut b, got[0].ctx, &mut buf).unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp::recv(0x77, MRECV | FI_CLAIM, 200, buf.as_ptr() as usize)]
    );
    assert_eq!(&buf[..200], &m[..]);
    let mut small = vec![0u8; 50];
    set_context(got[1].ctx, 0x78);
    claim(&mut b, got[1].ctx, &mut small).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            len: 50,
            buf: small.as_ptr() as usize,
            olen: 150,
            ..ErrComp::new(0x78, MRECV | FI_CLAIM, FI_ETRUNC)
        }]
    );
    assert_eq!(b.recv_count(), (3, 1));
}

#[test]
fn large_messages_come_with_the_pushed_prefix_and_fi_more() {
    for cma in [Cma::Pull, Cma::Refused] {
        let mut sim = SimOpts::shm();
        sim.cma = cma;
        let (net, mut a, mut b) = pair_of(Spec::new(sim), buffered(sim, 1 << 20));
        let m = pattern(100_000, 3);
        a.send(sargs(B, &m, 1)).unwrap();
        let log = net.log();
        assert_eq!(log.len(), 2, "RTS and its prefix, back to back");
        let (rts, data) = (log[0].hdr, log[1].hdr);
        assert_eq!(
            (rts.op, rts.flags, rts.offset),
            (op::RTS, flag::CMA_OK | flag::PUSH, 4096)
        );
        assert_eq!(
            (
                data.op,
                data.flags,
                data.offset,
                data.payload,
                data.len,
                data.aux,
                data.msg_id
            ),
            (op::DATA, flag::PUSH, 0, 4096, 100_000, 0, rts.msg_id)
        );
        b.progress();
        let got = b.rx_ok();
        assert_eq!(got.len(), 1);
        let r = got[0].clone();
        assert_eq!(r, Comp::recv(r.ctx, MRECV | FI_MORE, 100_000, r.ctx + 64));
        assert_eq!(report_bytes(&r, 4096), &m[..4096]);
        assert_eq!(a.tx_ok(), vec![], "the rest is still at the sender");
        set_context(r.ctx, 0x88);
        let mut all = vec![0u8; 100_000];
        claim(&mut b, r.ctx, &mut all).unwrap();
        run(&mut [&mut a, &mut b], 3);
        assert_eq!(
            b.rx_ok(),
            vec![Comp::recv(0x88, MRECV | FI_CLAIM, 100_000, all.as_ptr() as usize)],
            "{cma:?}"
        );
        assert_eq!(all, m);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
        assert_eq!(net.pulls(&b.addr), usize::from(cma == Cma::Pull));
    }
}

#[test]
fn a_short_claim_or_a_discard_of_a_large_message_moves_nothing_more() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    let m = pattern(100_000, 4);
    a.send(sargs(B, &m, 1)).unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    b.progress();
    let got = b.rx_ok();
    assert_eq!(got.len(), 2);
    let mut head = vec![0u8; 1000];
    set_context(got[0].ctx, 0x90);
    claim(&mut b, got[0].ctx, &mut head).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            len: 1000,
            buf: head.as_ptr() as usize,
            olen: 99_000,
            ..ErrComp::new(0x90, MRECV | FI_CLAIM, FI_ETRUNC)
        }]
    );
    assert_eq!(head, &m[..1000]);
    discard(&mut b, got[1].ctx).unwrap();
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND), Comp::send(2, MSEND)]);
    assert_eq!(net.pulls(&b.addr), 0);
    let acks: Vec<(u64, u32)> = net
        .log()
        .iter()
        .filter(|r| r.hdr.op == op::ACK)
        .map(|r| (r.hdr.len, r.hdr.aux))
        .collect();
    assert_eq!(acks, vec![(1000, 0), (0, 0)]);
}

#[test]
fn a_prefix_the_sender_did_not_push_is_fetched() {
    for (sim, cma_pull) in [(SimOpts::shm(), true), (SimOpts::tcp(), false)] {
        let (net, mut a, mut b) = pair_of(Spec::new(sim), buffered(sim, 1 << 20));
        let big = pattern(100_000, 5);
        let small = pattern(10, 6);
        a.send(sargs(B, &big, 1)).unwrap();
        a.send(sargs(B, &small, 2)).unwrap();
        // B wants more than was pushed (it raised FI_OPT_BUFFERED_MIN after
        // A read the old value).
        setopt(&mut b.inner, FI_OPT_BUFFERED_MIN, 8192).unwrap();
        assert_eq!(getopt(&mut b.inner, FI_OPT_BUFFERED_MIN), Ok(8192));
        let mut reports = Vec::new();
        for _ in 0..12 {
            run(&mut [&mut a, &mut b], 1);
            reports.extend(b.rx_ok());
        }
        // Reports keep A's order: the small message waited for the large
        // one's prefix.
        let lens: Vec<(usize, u64)> = reports.iter().map(|c| (c.len, c.flags)).collect();
        assert_eq!(lens, vec![(100_000, MRECV | FI_MORE), (10, MRECV)]);
        assert_eq!(report_bytes(&reports[0], 8192), &big[..8192]);
        assert_eq!(report_bytes(&reports[1], 10), small);
        let log = net.log();
        if cma_pull {
            assert_eq!(net.pulls(&b.addr), 1, "shm: the prefix by CMA");
        } else {
            let cts = log.iter().find(|r| r.hdr.op == op::CTS).expect("a ranged CTS").hdr;
            assert_eq!((cts.flags, cts.offset, cts.len), (flag::RANGE, 0, 8192));
            assert_eq!(
                cts.aux & super::super::buffered::PREFIX_AUX,
                super::super::buffered::PREFIX_AUX
            );
            let data: Vec<_> = log
                .iter()
                .filter(|r| r.hdr.op == op::DATA && r.hdr.flags & flag::PUSH == 0)
                .collect();
            assert_eq!(data.len(), 1);
            assert_eq!(
                (data[0].hdr.offset, data[0].hdr.payload, data[0].hdr.flags),
                (0, 8192, flag::LAST)
            );
        }
        a.progress();
        assert_eq!(a.tx_ok(), vec![Comp::send(2, MSEND)], "the large one waits for a claim");
    }
}

#[test]
fn a_full_pool_stalls_the_sender_until_messages_are_released() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), MIN_POOL));
    let msgs: Vec<Vec<u8>> = (0..16).map(|i| pattern(16_000, i as u8)).collect();
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress();
    let got = b.rx_ok();
    // 16 000 bytes → a 256-line buffer plus overhead: 7 fit half of 256 KiB
    // (one sender's fair share of the pool).
    assert_eq!(got.len(), 7);
    assert_eq!(net.queued(&a.addr, &b.addr), 9, "the rest stays in the ring");
    b.progress();
    assert_eq!(b.rx_ok(), vec![]);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(report_bytes(r, 16_000), msgs[i]);
    }
    for r in &got[..5] {
        discard(&mut b, r.ctx).unwrap();
    }
    b.progress();
    let next = b.rx_ok();
    assert_eq!(next.len(), 5);
    for (i, r) in next.iter().enumerate() {
        assert_eq!(report_bytes(r, 16_000), msgs[7 + i]);
    }
    assert_eq!(net.queued(&a.addr, &b.addr), 4);
}

#[test]
fn a_full_cq_stalls_reports_too() {
    let mut sb = buffered(SimOpts::shm(), 1 << 20);
    sb.cq_size = 4;
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let m = pattern(10, 0);
    for i in 0..6 {
        a.send(sargs(B, &m, i)).unwrap();
    }
    b.progress();
    assert_eq!(b.rx_ok().len(), 4);
    assert_eq!(net.queued(&a.addr, &b.addr), 2);
    b.progress();
    assert_eq!(b.rx_ok().len(), 2, "reading the CQ made room");
}

#[test]
fn a_claim_whose_sender_died_fails_once() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    let m = pattern(100_000, 7);
    let small = pattern(100, 8);
    a.send(SendArgs {
        tagged: true,
        tag: 4,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    a.send(sargs(B, &small, 2)).unwrap();
    b.progress();
    let got = b.rx_ok();
    assert_eq!(got.len(), 2);
    net.kill(&a.addr);
    set_context(got[0].ctx, 0x99);
    let mut all = vec![0u8; 100_000];
    claim(&mut b, got[0].ctx, &mut all).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            tag: 4,
            olen: 100_000,
            ..ErrComp::new(0x99, TRECV | FI_CLAIM, FI_ECONNRESET)
        }]
    );
    assert_eq!(claim(&mut b, got[0].ctx, &mut all), Err(Error::INVAL), "once");
    // What is in the pool can still be claimed.
    let mut buf = vec![0u8; 100];
    set_context(got[1].ctx, 0x9a);
    claim(&mut b, got[1].ctx, &mut buf).unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp::recv(0x9a, MRECV | FI_CLAIM, 100, buf.as_ptr() as usize)]
    );
    assert_eq!(buf, small);
}

#[test]
fn a_senders_bye_ends_what_it_still_holds() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    let m = pattern(100_000, 7);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    let got = b.rx_ok();
    a.inner.close();
    b.progress();
    set_context(got[0].ctx, 0x55);
    let mut all = vec![0u8; 100_000];
    claim(&mut b, got[0].ctx, &mut all).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 100_000,
            ..ErrComp::new(0x55, MRECV | FI_CLAIM, FI_ECONNRESET)
        }]
    );
}

#[test]
fn closing_with_held_messages_cancels_their_senders() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    let m = pattern(100_000, 7);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
    b.inner.close();
    a.progress();
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 100_000,
            ..ErrComp::new(1, MSEND, FI_ECANCELED)
        }]
    );
}

#[test]
fn options_follow_the_setopt_rules() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm(), 1 << 20));
    assert_eq!(getopt(&mut a.inner, FI_OPT_BUFFERED_LIMIT), Err(Error::NOPROTOOPT));
    assert_eq!(setopt(&mut a.inner, FI_OPT_BUFFERED_MIN, 1), Err(Error::NOPROTOOPT));
    assert_eq!(getopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT), Ok(16384));
    assert_eq!(getopt(&mut b.inner, FI_OPT_BUFFERED_MIN), Ok(4096));
    assert_eq!(getopt(&mut b.inner, FI_OPT_MIN_MULTI_RECV), Err(Error::NOPROTOOPT));
    assert_eq!(setopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT, 16385), Err(Error::MSGSIZE));
    setopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT, usize::MAX).unwrap();
    assert_eq!(getopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT), Ok(16384));
    setopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT, 1000).unwrap();
    // A 2000-byte eager message is now "large": FI_MORE with MIN bytes.
    let m = pattern(2000, 1);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    let got = b.rx_ok();
    assert_eq!(got[0].flags, MRECV | FI_MORE);
    assert_eq!(report_bytes(&got[0], 2000), m, "an eager message is all here");
}

/// Buffered receives: a sender flooding the pool gets its share and no
/// more; another sender's message is still reported. Without the
/// per-sender share the flood would fill the pool and the second sender's
/// message would stay in its ring until the application released buffers.
#[test]
fn a_flooding_sender_cannot_fill_the_whole_pool() {
    let mut sb = buffered(SimOpts::shm(), MIN_POOL);
    sb.cq_size = 4096;
    let (net, mut eps) = network(&[Spec::new(SimOpts::shm()), sb, Spec::new(SimOpts::shm())]);
    let mut c = eps.pop().expect("c");
    let mut b = eps.pop().expect("b");
    let mut a = eps.pop().expect("a");
    // 100 bytes are charged 320: the pool holds 819 of them.
    let flood = pattern(100, 1);
    for i in 0..1000 {
        while let Err(e) = a.send(sargs(B, &flood, i)) {
            assert_eq!(e, Error::AGAIN);
            a.tx_ok(); // room in A's CQ; the records stay in B's ring
        }
    }
    b.progress();
    let from_a = b.rx_ok();
    assert_eq!(from_a.len(), MIN_POOL / 2 / 320, "A: half of the pool");
    let m = pattern(100, 99);
    c.send(sargs(B, &m, 5000)).unwrap();
    b.progress();
    let from_c = b.rx_ok();
    assert_eq!(from_c.len(), 1, "C's message is reported");
    assert_eq!(report_bytes(&from_c[0], 100), m);
    assert!(net.queued(&a.addr, &b.addr) > 0, "A waits");
    // Releasing A's messages lets the rest of A's in, in order.
    let mut got = from_a.len();
    for r in from_a.iter().chain(from_c.iter()) {
        discard(&mut b, r.ctx).unwrap();
    }
    for _ in 0..10 {
        b.progress();
        for r in b.rx_ok() {
            assert_eq!(report_bytes(&r, 100), flood);
            discard(&mut b, r.ctx).unwrap();
            got += 1;
        }
    }
    assert_eq!(got, 1000);
}
