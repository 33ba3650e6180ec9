//! The less-travelled branches: stalls and refusals at their limits,
//! failures at awkward moments, buffered receives whose sender and receiver
//! disagree on sizes.

use super::super::buffered::{getopt, setopt};
use super::super::sim::Cma;
use super::*;
use crate::transport::proto::{flag, op, WireHdr};

fn buffered(sim: SimOpts) -> Spec {
    let mut s = Spec::new(sim);
    s.buffered = Some(1 << 20);
    s
}

fn streaming() -> SimOpts {
    SimOpts {
        cma: Cma::Refused,
        window: 40_000,
        ..SimOpts::shm()
    }
}

#[test]
fn a_reset_ends_a_stream_through_the_failure_event() {
    let (net, mut a, mut b) = pair(streaming());
    let m = pattern(300_000, 1);
    let mut buf = vec![0u8; 300_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &m, 1)).unwrap();
    run(&mut [&mut b, &mut a], 2);
    net.reset(&a.addr, &b.addr);
    run(&mut [&mut b, &mut a], 1);
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 300_000,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 300_000,
            ..ErrComp::new(1, MSEND, FI_ECONNRESET)
        }]
    );
}

#[test]
fn a_full_send_cq_refuses_the_post() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.cq_size = 1;
    let (_net, mut a, _b) = pair_of(sa, Spec::new(SimOpts::shm()));
    let m = pattern(10, 0);
    a.send(sargs(B, &m, 1)).unwrap();
    assert_eq!(a.send(sargs(B, &m, 2)), Err(Error::AGAIN));
    assert_eq!(a.tx_ok().len(), 1);
    a.send(sargs(B, &m, 3)).unwrap();
    assert_eq!(a.tx_ok(), vec![Comp::send(3, MSEND)]);
}

#[test]
fn an_rts_and_its_prefix_go_together_or_not_at_all() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.sim.window = 4000;
    let (net, mut a, _b) = pair_of(sa, buffered(SimOpts::shm()));
    let m = pattern(100_000, 0);
    assert_eq!(a.send(sargs(B, &m, 1)), Err(Error::AGAIN));
    assert!(net.log().is_empty(), "neither record left");
    assert_eq!(a.inner.tx_outstanding(), 0);
}

#[test]
fn multi_recv_buffers_fill_on_arrival() {
    for sim in [SimOpts::shm(), streaming()] {
        let (_net, mut a, mut b) = pair(sim);
        let mut big = vec![0u8; 1000];
        let base = big.as_ptr() as usize;
        b.recv(RecvArgs {
            flags: FI_MULTI_RECV,
            ..rargs(&mut big, 9)
        })
        .unwrap();
        let (m1, m2) = (pattern(500, 1), pattern(450, 2));
        a.send(sargs(B, &m1, 1)).unwrap();
        a.send(sargs(B, &m2, 2)).unwrap();
        b.progress();
        assert_eq!(
            b.rx_ok(),
            vec![
                Comp::recv(9, MRECV, 500, base),
                Comp::recv(9, MRECV | FI_MULTI_RECV, 450, base + 500)
            ]
        );
        let mut huge = vec![0u8; 200_000];
        let hbase = huge.as_ptr() as usize;
        b.recv(RecvArgs {
            flags: FI_MULTI_RECV,
            ..rargs(&mut huge, 10)
        })
        .unwrap();
        let (m3, m4) = (pattern(100_000, 3), pattern(99_990, 4));
        a.send(sargs(B, &m3, 3)).unwrap();
        a.send(sargs(B, &m4, 4)).unwrap();
        run(&mut [&mut b, &mut a], 20);
        let mut got = b.rx_ok();
        got.sort_by_key(|c| c.buf);
        assert_eq!(
            got,
            vec![
                Comp::recv(10, MRECV, 100_000, hbase),
                Comp::recv(10, MRECV | FI_MULTI_RECV, 99_990, hbase + 100_000)
            ]
        );
        assert!(huge[100_000..199_990] == m4[..]);
    }
}

#[test]
fn unexpected_rendezvous_requests_count_against_the_budget() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.unexp_budget = super::super::matching::UNEXP_OVERHEAD + 16;
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let m = pattern(100_000, 0);
    a.send(sargs(B, &m, 1)).unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    b.progress();
    assert_eq!(net.queued(&a.addr, &b.addr), 1, "the second RTS waits in the ring");
    let (mut r1, mut r2) = (vec![0u8; 100_000], vec![0u8; 100_000]);
    b.recv(rargs(&mut r1, 3)).unwrap();
    b.recv(rargs(&mut r2, 4)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok().len(), 2);
    assert_eq!(r2, m);
}

#[test]
fn a_claimed_then_discarded_delivery_complete_message_is_acknowledged() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(30, 0);
    a.send(SendArgs {
        tagged: true,
        tag: 1,
        flags: FI_DELIVERY_COMPLETE,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    let peek = |flags: u64, ctx: usize| RecvArgs {
        tagged: true,
        tag: 1,
        flags,
        iov: IovList::new(),
        ..rargs(&mut [], ctx)
    };
    b.recv(peek(FI_PEEK | FI_CLAIM, 5)).unwrap();
    b.recv(peek(FI_CLAIM | FI_DISCARD, 5)).unwrap();
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, TSEND)]);
}

#[test]
fn fail_all_ends_streams_and_payloads_in_flight() {
    let mut sim = SimOpts::tcp();
    sim.window = 100_000;
    let (net, mut a, mut b) = pair(sim);
    let big = pattern(400_000, 1);
    let (mut r1, mut r2) = (vec![0u8; 400_000], vec![0u8; 10]);
    b.recv(rargs(&mut r1, 1)).unwrap();
    b.recv(RecvArgs {
        tagged: true,
        ..rargs(&mut r2, 2)
    })
    .unwrap();
    a.send(sargs(B, &big, 10)).unwrap();
    run(&mut [&mut a, &mut b], 4);
    assert!(net.log().iter().any(|r| r.hdr.op == op::DATA), "streaming");
    b.inner.fail_all(b.s.bound(), Error::CANCELED);
    let (ok, mut err) = b.rx();
    assert!(ok.is_empty());
    err.sort_by_key(|e| e.ctx);
    assert_eq!(
        err,
        vec![
            ErrComp {
                olen: 400_000,
                ..ErrComp::new(1, MRECV, FI_ECANCELED)
            },
            ErrComp::new(2, TRECV, FI_ECANCELED)
        ]
    );
    assert_eq!(b.inner.rx_posted(), 0);
    run(&mut [&mut a, &mut b], 4);
    assert_eq!(b.rx(), (vec![], vec![]), "chunks still arriving find nothing");
}

#[test]
fn fail_all_ends_a_payload_being_placed() {
    let (_net, mut a, mut b) = pair(SimOpts::tcp());
    let m = pattern(3000, 1);
    let mut buf = vec![0u8; 3000];
    b.recv(rargs(&mut buf, 1)).unwrap();
    a.send(sargs(B, &m, 10)).unwrap();
    a.progress();
    b.progress(); // placed, the payload still coming
    b.inner.fail_all(b.s.bound(), Error::CANCELED);
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 3000,
            ..ErrComp::new(1, MRECV, FI_ECANCELED)
        }]
    );
    b.progress();
    assert_eq!(b.rx(), (vec![], vec![]), "its late arrival completes nothing");
}

#[test]
fn a_receiver_with_a_larger_eager_limit_fetches_whole_messages() {
    for cma in [Cma::Pull, Cma::Refused] {
        let small = SimOpts { cma, ..SimOpts::shm() };
        let large = SimOpts {
            cma,
            eager_limit: 65536,
            ..SimOpts::shm()
        };
        let (net, mut a, mut b) = pair_of(Spec::new(small), buffered(large));
        assert_eq!(getopt(&mut b.inner, FI_OPT_BUFFERED_LIMIT), Ok(65536));
        let m = pattern(30_000, 3);
        a.send(sargs(B, &m, 1)).unwrap();
        let mut got = Vec::new();
        for _ in 0..6 {
            run(&mut [&mut b, &mut a], 1);
            got.extend(b.rx_ok());
        }
        assert_eq!(got.len(), 1, "{cma:?}");
        assert_eq!(got[0].flags, MRECV, "all of it is here: no FI_MORE");
        // SAFETY: the report's buffer holds the whole message.
        let held = unsafe { core::slice::from_raw_parts(got[0].buf as *const u8, 30_000) };
        assert!(held == &m[..]);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "acknowledged once all was here");
        let ack = net.log().into_iter().find(|r| r.hdr.op == op::ACK).unwrap();
        assert_eq!(ack.hdr.len, 30_000);
    }
}

#[test]
fn a_failed_prefix_fetch_drops_the_message_and_tells_the_sender() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm()));
    let m = pattern(100_000, 0);
    a.send(sargs(B, &m, 1)).unwrap();
    setopt(&mut b.inner, FI_OPT_BUFFERED_MIN, 8192).unwrap();
    net.pull_fault(&b.addr, Some(Error::IO));
    run(&mut [&mut b, &mut a], 2);
    assert_eq!(b.rx(), (vec![], vec![]), "never reported");
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 100_000,
            ..ErrComp::new(1, MSEND, FI_EIO)
        }]
    );
}

#[test]
fn a_prefix_from_a_sender_that_died_is_given_up() {
    let (net, mut a, mut b) = pair_of(Spec::new(streaming()), buffered(streaming()));
    let m = pattern(100_000, 0);
    let tail = pattern(10, 1);
    a.send(sargs(B, &m, 1)).unwrap();
    a.send(sargs(B, &tail, 2)).unwrap();
    setopt(&mut b.inner, FI_OPT_BUFFERED_MIN, 8192).unwrap();
    b.progress(); // asks A for the prefix (ranged CTS); A never answers
    assert!(b.inner.waits_on_peers());
    net.kill(&a.addr);
    std::thread::sleep(std::time::Duration::from_millis(120));
    run(&mut [&mut b], 64);
    // The message never existed for the application; the one behind it
    // is reported.
    let got = b.rx_ok();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].len, 10);
    assert!(!b.inner.waits_on_peers());
}

#[test]
fn a_reset_drops_messages_still_filling() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::tcp()), buffered(SimOpts::tcp()));
    let m = pattern(100_000, 0);
    a.send(sargs(B, &m, 1)).unwrap();
    setopt(&mut b.inner, FI_OPT_BUFFERED_MIN, 8192).unwrap();
    run(&mut [&mut a, &mut b], 2);
    net.reset(&a.addr, &b.addr);
    run(&mut [&mut a, &mut b], 2);
    assert_eq!(b.rx(), (vec![], vec![]));
    assert_eq!(a.tx().1.len(), 1);
}

#[test]
fn stray_prefix_chunks_are_dropped() {
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm()));
    let mut d = WireHdr::new(op::DATA);
    d.len = 100;
    d.aux = super::super::buffered::PREFIX_AUX | 7;
    net.forge(&a.addr, &b.addr, d, &[1u8; 100]);
    d.aux = 0;
    d.flags = flag::PUSH;
    net.forge(&a.addr, &b.addr, d, &[1u8; 100]);
    b.progress();
    assert_eq!(b.rx(), (vec![], vec![]));
    // A real exchange still works (and a pushed chunk at the wrong offset
    // is dropped, not placed).
    let m = pattern(100_000, 1);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
    let _ = a.tx();
}

#[test]
fn a_minimum_of_zero_reports_large_messages_at_once() {
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), buffered(SimOpts::shm()));
    setopt(&mut b.inner, FI_OPT_BUFFERED_MIN, 0).unwrap();
    let m = pattern(100_000, 1);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    let got = b.rx_ok();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].len, got[0].flags), (100_000, MRECV | FI_MORE));
}

#[test]
fn a_full_cq_stalls_buffered_rendezvous_requests() {
    let mut sb = buffered(SimOpts::shm());
    sb.cq_size = 1;
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let m = pattern(100_000, 1);
    a.send(sargs(B, &m, 1)).unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
    assert_eq!(net.queued(&a.addr, &b.addr), 2, "the second RTS and its prefix wait");
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
}
