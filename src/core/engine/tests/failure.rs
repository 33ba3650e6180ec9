//! Peer failure (every operation waiting on a failed peer completes once,
//! with FI_ECONNRESET; nothing else is touched), a connected endpoint's end
//! (`fail_all`), and per-peer message order.

use super::super::sim::{Cma, Writes};
use super::*;
use crate::transport::proto::op;

#[test]
fn a_dead_receiver_fails_sends_waiting_for_its_ack() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(100_000, 1);
    a.send(SendArgs {
        tagged: true,
        tag: 6,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    b.progress(); // unexpected at B: only the descriptor
    assert!(a.inner.waits_on_peers());
    net.kill(&b.addr);
    // Liveness is checked every 64th pass while something waits.
    run(&mut [&mut a], 64);
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 100_000,
            ..ErrComp::new(1, TSEND, FI_ECONNRESET)
        }]
    );
    assert_eq!(a.send_count(), (0, 1));
    assert!(!a.inner.waits_on_peers());
    // Later sends to it fail at once.
    assert_eq!(a.send(sargs(B, &m, 2)), Err(Error::CONNRESET));
    run(&mut [&mut a], 64);
    assert_eq!(a.tx(), (vec![], vec![]), "exactly one completion");
}

#[test]
fn a_connection_reset_fails_both_ends_in_flight_operations() {
    let mut sim = SimOpts::tcp();
    sim.window = 100_000;
    let (net, mut a, mut b) = pair(sim);
    let m = pattern(400_000, 2);
    let mut buf = vec![0u8; 400_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    let mut other = vec![0u8; 10];
    b.recv(RecvArgs {
        tagged: true,
        ..rargs(&mut other, 3)
    })
    .unwrap();
    a.send(sargs(B, &m, 1)).unwrap();
    run(&mut [&mut a, &mut b], 4);
    assert!(net.log().iter().any(|r| r.hdr.op == op::DATA), "streaming started");
    assert!(b.rx_ok().is_empty());
    net.reset(&a.addr, &b.addr);
    run(&mut [&mut a, &mut b], 2);
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 400_000,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 400_000,
            ..ErrComp::new(1, MSEND, FI_ECONNRESET)
        }]
    );
    // A receive that merely could have matched the peer stays posted.
    b.cancel(3).unwrap();
    assert_eq!(b.rx().1, vec![ErrComp::new(3, TRECV, FI_ECANCELED)]);
}

#[test]
fn a_payload_cut_off_mid_arrival_completes_in_error() {
    let (net, mut a, mut b) = pair(SimOpts::tcp());
    let m = pattern(3000, 3);
    let mut buf = vec![0u8; 3000];
    b.recv(RecvArgs {
        tagged: true,
        tag: 1,
        ..rargs(&mut buf, 2)
    })
    .unwrap();
    a.send(SendArgs {
        tagged: true,
        tag: 1,
        flags: FI_REMOTE_CQ_DATA,
        data: 5,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    a.progress();
    b.progress(); // the header is placed; the payload is still coming
    net.reset(&a.addr, &b.addr);
    b.progress();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            tag: 1,
            data: 5,
            olen: 3000,
            ..ErrComp::new(2, TRECV, FI_ECONNRESET)
        }]
    );
    assert!(!b.inner.waits_on_peers());
}

#[test]
fn a_sender_that_dies_mid_stream_is_noticed_by_the_receiver() {
    let mut sim = SimOpts::shm();
    sim.cma = Cma::Refused;
    sim.window = 40_000;
    let (net, mut a, mut b) = pair(sim);
    let m = pattern(300_000, 4);
    let mut buf = vec![0u8; 300_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &m, 1)).unwrap();
    run(&mut [&mut b, &mut a], 2);
    assert!(b.inner.waits_on_peers(), "a stream from A is open");
    net.kill(&a.addr);
    // What A wrote before it died still arrives (and shows it alive)...
    run(&mut [&mut b], 2);
    assert!(b.rx().1.is_empty());
    // ...then the engine checks a stream's sender once its liveness period
    // passed (100 ms) without data, on every 64th pass.
    std::thread::sleep(std::time::Duration::from_millis(120));
    run(&mut [&mut b], 64);
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 300_000,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
}

#[test]
fn a_pull_from_a_dead_sender_fails_the_receive() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(100_000, 5);
    a.send(sargs(B, &m, 1)).unwrap();
    b.progress();
    net.kill(&a.addr);
    let mut buf = vec![0u8; 100_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: 100_000,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
}

#[test]
fn unexpected_messages_of_a_failed_peer_stay_and_others_are_untouched() {
    let (net, mut v) = network(&[
        Spec::new(SimOpts::tcp()),
        Spec::new(SimOpts::tcp()),
        Spec::new(SimOpts::tcp()),
    ]);
    let m = pattern(100, 6);
    v[0].send(sargs(B, &m, 1)).unwrap();
    v[2].send(sargs(B, &m, 3)).unwrap();
    for _ in 0..3 {
        for e in v.iter_mut() {
            e.progress();
        }
    }
    net.reset(&v[0].addr, &v[1].addr);
    v[1].progress();
    // Eager data already here is the application's to receive.
    let mut bufs = [vec![0u8; 100], vec![0u8; 100]];
    let (x, y) = bufs.split_at_mut(1);
    v[1].recv(rargs(&mut x[0], 10)).unwrap();
    v[1].recv(rargs(&mut y[0], 11)).unwrap();
    assert_eq!(v[1].rx_ok().len(), 2);
}

#[test]
fn fail_all_ends_a_connected_endpoints_operations_once() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.av_all = false;
    let (net, mut a, mut b) = pair_of(sa, Spec::new(SimOpts::shm()));
    a.inner.config_mut().fixed_peer = Some(b.addr);
    // The destination address is ignored: everything goes to the peer.
    let m = pattern(100, 1);
    a.send(sargs(12345, &m, 1)).unwrap();
    let big = pattern(100_000, 2);
    a.send(sargs(12345, &big, 2)).unwrap();
    let mut tbuf = vec![0u8; 100];
    a.recv(RecvArgs {
        tagged: true,
        ..rargs(&mut tbuf, 3)
    })
    .unwrap();
    b.progress();
    assert_eq!(net.queued(&a.addr, &b.addr), 0, "both reached B");
    // An unexpected message from the peer is dropped with the connection.
    b.send(sargs(A, &m, 9)).unwrap();
    a.progress();
    a.inner.fail_all(a.s.bound(), Error::CANCELED);
    assert_eq!(
        a.tx(),
        (
            vec![Comp::send(1, MSEND)],
            vec![ErrComp {
                len: 100_000,
                ..ErrComp::new(2, MSEND, FI_ECANCELED)
            }]
        )
    );
    assert_eq!(a.rx(), (vec![], vec![ErrComp::new(3, TRECV, FI_ECANCELED)]));
    assert_eq!(a.inner.tx_outstanding(), 0);
    assert_eq!(a.inner.rx_posted(), 0);
    let mut buf = vec![0u8; 100];
    a.recv(rargs(&mut buf, 4)).unwrap();
    a.progress();
    assert_eq!(a.rx_ok(), vec![], "the unexpected message went with the connection");
}

#[test]
fn messages_from_one_peer_match_in_the_order_sent() {
    let shm_stream = SimOpts {
        cma: Cma::Refused,
        window: 64 << 10,
        ..SimOpts::shm()
    };
    let tcp_ring = SimOpts {
        writes: Writes::Ring,
        ..SimOpts::tcp()
    };
    for sim in [SimOpts::shm(), shm_stream, SimOpts::tcp(), tcp_ring] {
        let (_net, mut a, mut b) = pair(sim);
        let sizes = [10, 40_000, 2_000, 0, 100_000, 16_384, 16_385, 5, 70_000, 1];
        let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| pattern(n, i as u8)).collect();
        let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n.max(1)]).collect();
        // Half the receives before, half after the messages arrive.
        for (i, buf) in bufs.iter_mut().enumerate().take(5) {
            b.recv(RecvArgs {
                tagged: true,
                ignore: !0,
                ..rargs(buf, 100 + i)
            })
            .unwrap();
        }
        for (i, m) in msgs.iter().enumerate() {
            loop {
                match a.send(SendArgs {
                    tagged: true,
                    tag: i as u64,
                    ..sargs(B, m, i)
                }) {
                    Ok(()) => break,
                    Err(e) if e == Error::AGAIN => run(&mut [&mut b, &mut a], 1),
                    Err(e) => panic!("{e:?}"),
                }
            }
        }
        run(&mut [&mut b, &mut a], 4);
        for (i, buf) in bufs.iter_mut().enumerate().skip(5) {
            b.recv(RecvArgs {
                tagged: true,
                ignore: !0,
                ..rargs(buf, 100 + i)
            })
            .unwrap();
        }
        let mut got = Vec::new();
        let mut sent = 0;
        for _ in 0..40 {
            run(&mut [&mut b, &mut a], 1);
            got.extend(b.rx_ok());
            sent += a.tx_ok().len();
        }
        assert_eq!(sent, sizes.len(), "{sim:?}");
        got.sort_by_key(|c| c.ctx);
        for (i, c) in got.iter().enumerate() {
            assert_eq!((c.ctx, c.tag, c.len), (100 + i, i as u64, sizes[i]), "{sim:?}");
            assert_eq!(&bufs[i][..sizes[i]], &msgs[i][..], "{sim:?}: message {i}");
        }
        assert_eq!(got.len(), sizes.len());
    }
}

#[test]
fn idle_accessors_report_the_ports_state() {
    let (_net, mut a, b) = pair(SimOpts::shm());
    assert_eq!(a.inner.addr(), a.addr);
    assert_eq!(a.inner.wait_fd(), -1);
    a.inner.set_sleepers(1);
    assert!(!a.inner.has_pending());
    let m = pattern(10, 0);
    let mut ep_b = b;
    ep_b.send(sargs(A, &m, 1)).unwrap();
    assert!(a.inner.has_pending());
    assert_eq!(a.inner.config().tx_size, 64);
}

/// An `fi_inject` that fails after its call returned (queued behind a full
/// window when the connection resets) makes no CQ error entry: it has no
/// context, and an error entry with a NULL `op_context` is taken for their
/// own request by MPI libraries (Open MPI's mtl ofi dereferences it). The
/// bound counter counts the error; a send with a context still gets its
/// error entry.
#[test]
fn a_failed_inject_counts_an_error_but_makes_no_context_less_entry() {
    let mut sim = SimOpts::tcp();
    sim.window = 1000;
    let (net, mut a, mut b) = pair(sim);
    let big = pattern(60_000, 1);
    let small = pattern(8, 2);
    let mut buf = vec![0u8; 60_000];
    b.recv(rargs(&mut buf, 9)).unwrap();
    a.send(sargs(B, &big, 1)).unwrap();
    a.send(SendArgs {
        inject_call: true,
        context: 0,
        ..sargs(B, &small, 0)
    })
    .unwrap();
    a.send(sargs(B, &small, 3)).unwrap();
    net.reset(&a.addr, &b.addr);
    run(&mut [&mut a, &mut b], 4);
    // The first send is in the socket's queue (done); the inject and the
    // send behind it wait for room when the connection resets.
    let (ok, errs) = a.tx();
    assert_eq!(ok.iter().map(|c| c.ctx).collect::<Vec<_>>(), [1]);
    assert_eq!(
        errs.iter().map(|e| (e.ctx, e.err)).collect::<Vec<_>>(),
        [(3, FI_ECONNRESET)],
        "the send with a context fails with its entry, the inject with none"
    );
    assert_eq!(a.send_count(), (1, 2), "the inject's error is counted");
}

/// What the engine owes a peer when it takes the peer's failure — the ACK
/// of a delivery-complete message held unexpected, the answer (ACK or CTS)
/// to a rendezvous request held unexpected — is dropped: records carry no
/// incarnation and message ids start at 1 in every endpoint, so an answer
/// sent later would reach a new endpoint at the same address and complete
/// (or, a CTS, start streaming) its own operation with that id early. The
/// held messages themselves stay the application's: an eager one is
/// received, a rendezvous one (its data was in the dead process) fails.
#[test]
fn answers_owed_to_a_failed_peer_never_reach_its_restarted_incarnation() {
    let dc = |m: &[u8], ctx| SendArgs {
        flags: FI_DELIVERY_COMPLETE,
        ..sargs(B, m, ctx)
    };
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        for (old_len, new_len) in [(100, 200), (100, 150_000), (100_000, 200), (100_000, 150_000)] {
            let what = format!("{sim:?}: old {old_len} B, new {new_len} B");
            let (net, mut a, mut b) = pair(sim);
            let (a_addr, b_addr) = (a.addr, b.addr);
            let old = pattern(old_len, 1);
            a.send(dc(&old, 1)).unwrap();
            run(&mut [&mut a, &mut b], 3);
            assert!(a.tx_ok().is_empty(), "{what}: A's send waits for B's receive");
            // A dies and comes back at its address; B takes the failure.
            let mut a2 = restart(&net, a, &Spec::new(sim), &[a_addr, b_addr]);
            b.progress();
            // The new incarnation's first send has msg_id 1 too.
            let new = pattern(new_len, 2);
            a2.send(dc(&new, 7)).unwrap();
            run(&mut [&mut a2, &mut b], 3);
            net.clear_log();
            // The first receive takes the old incarnation's message.
            let mut first = vec![0u8; 200_000];
            b.recv(rargs(&mut first, 10)).unwrap();
            run(&mut [&mut b, &mut a2], 4);
            assert!(
                !net.log().iter().any(|r| r.from == b_addr && r.to == a_addr),
                "{what}: B answered the old incarnation's message: {:?}",
                net.log()
            );
            assert!(a2.tx_ok().is_empty(), "{what}: the new send completed early");
            if old_len <= 16384 {
                assert_eq!(b.rx_ok(), vec![Comp::recv(10, MRECV, old_len, first.as_ptr() as usize)]);
                assert_eq!(&first[..old_len], &old[..], "{what}");
            } else {
                assert_eq!(
                    b.rx(),
                    (
                        vec![],
                        vec![ErrComp {
                            olen: old_len,
                            ..ErrComp::new(10, MRECV, FI_ECONNRESET)
                        }]
                    ),
                    "{what}"
                );
            }
            // The second receive takes the new one's, which then completes.
            let mut second = vec![0u8; 200_000];
            b.recv(rargs(&mut second, 11)).unwrap();
            run(&mut [&mut b, &mut a2], 8);
            assert_eq!(
                b.rx_ok(),
                vec![Comp::recv(11, MRECV, new_len, second.as_ptr() as usize)],
                "{what}"
            );
            assert_eq!(&second[..new_len], &new[..], "{what}");
            assert_eq!(a2.tx_ok(), vec![Comp::send(7, MSEND)], "{what}");
        }
    }
}

/// A reset while sends wait in the transport's queue (tcp: written at the
/// next pass): the transport drops them unreported and its one failure
/// event ends them, each once, in the order they were posted.
#[test]
fn sends_queued_in_the_transport_end_once_in_posting_order_on_the_failure_event() {
    let (net, mut a, b) = pair(SimOpts::tcp());
    let m = pattern(100, 1);
    for ctx in 1..=12 {
        a.send(sargs(B, &m, ctx)).unwrap();
    }
    net.reset(&a.addr, &b.addr);
    run(&mut [&mut a], 2);
    let want: Vec<ErrComp> = (1..=12)
        .map(|ctx| ErrComp {
            len: 100,
            ..ErrComp::new(ctx, MSEND, FI_ECONNRESET)
        })
        .collect();
    assert_eq!(a.tx(), (vec![], want));
    run(&mut [&mut a], 64);
    assert_eq!(a.tx(), (vec![], vec![]), "exactly one completion each");
}
