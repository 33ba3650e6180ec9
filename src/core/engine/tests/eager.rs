//! Eager messages: matching, unexpected messages and their budget,
//! truncation, multi-receive buffers, cancel, completion levels, selective
//! completion, remote CQ data, peek/claim/discard, queue limits.

use super::*;
use crate::transport::proto::{flag, op, WireHdr};

#[test]
fn eager_untagged_send_and_receive() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(100, 1);
    let mut buf = vec![0u8; 200];
    b.recv(rargs(&mut buf, 0x61)).unwrap();
    a.send(sargs(B, &msg, 0x51)).unwrap();
    // shm: the record is in B's ring, so the send is transmit-complete now.
    assert_eq!(a.tx_ok(), vec![Comp::send(0x51, MSEND)]);
    assert_eq!(b.rx_ok(), vec![], "nothing before B polls");
    b.progress();
    assert_eq!(b.rx_ok(), vec![Comp::recv(0x61, MRECV, 100, buf.as_ptr() as usize)]);
    assert_eq!(&buf[..100], &msg[..]);
    assert_eq!(a.send_count(), (1, 0));
    assert_eq!(b.recv_count(), (1, 0));
}

#[test]
fn queued_sends_complete_when_written_and_payloads_may_trickle() {
    let (_net, mut a, mut b) = pair(SimOpts::tcp());
    let msg = pattern(3000, 2);
    let mut buf = vec![0u8; 3000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    assert_eq!(a.tx_ok(), vec![], "queued: not transmit-complete yet");
    b.progress();
    assert_eq!(b.rx_ok(), vec![], "nothing written yet");
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "Delivery::sent completes it");
    b.progress();
    assert_eq!(b.rx_ok(), vec![], "the payload is still arriving");
    b.progress();
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, 3000, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
}

#[test]
fn tagged_matching_honours_ignore_masks_and_kinds() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let (mut r1, mut r2, mut r3, mut r4) = (vec![0u8; 16], vec![0u8; 16], vec![0u8; 16], vec![0u8; 16]);
    b.recv(RecvArgs {
        tagged: true,
        tag: 0x10,
        ignore: 0x0f,
        ..rargs(&mut r1, 1)
    })
    .unwrap();
    b.recv(RecvArgs {
        tagged: true,
        tag: 0x10,
        ..rargs(&mut r2, 2)
    })
    .unwrap();
    b.recv(rargs(&mut r3, 3)).unwrap(); // untagged: never takes a tagged message
    for (tag, seed) in [(0x1f, 1u8), (0x10, 2), (0x20, 3)] {
        let m = pattern(8, seed);
        a.send(SendArgs {
            tagged: true,
            tag,
            ..sargs(B, &m, 0x100 + tag as usize)
        })
        .unwrap();
    }
    assert_eq!(
        a.tx_ok(),
        vec![
            Comp::send(0x11f, TSEND),
            Comp::send(0x110, TSEND),
            Comp::send(0x120, TSEND)
        ]
    );
    b.progress();
    let got = b.rx_ok();
    assert_eq!(
        got,
        vec![
            Comp {
                tag: 0x1f,
                ..Comp::recv(1, TRECV, 8, r1.as_ptr() as usize)
            },
            Comp {
                tag: 0x10,
                ..Comp::recv(2, TRECV, 8, r2.as_ptr() as usize)
            },
        ]
    );
    assert_eq!(&r1[..8], &pattern(8, 1)[..]);
    assert_eq!(&r2[..8], &pattern(8, 2)[..]);
    // Tag 0x20 waits as unexpected; a matching tagged receive takes it at
    // once, at post time.
    b.recv(RecvArgs {
        tagged: true,
        tag: 0x20,
        ..rargs(&mut r4, 4)
    })
    .unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp {
            tag: 0x20,
            ..Comp::recv(4, TRECV, 8, r4.as_ptr() as usize)
        }]
    );
    assert_eq!(&r4[..8], &pattern(8, 3)[..]);
    // The untagged receive is still posted.
    b.cancel(3).unwrap();
    assert_eq!(b.rx().1, vec![ErrComp::new(3, MRECV, FI_ECANCELED)]);
}

#[test]
fn directed_receive_and_fi_source() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.caps |= FI_SOURCE;
    let (_net, mut v) = network(&[Spec::new(SimOpts::shm()), sb, Spec::new(SimOpts::shm())]);
    let (mut from_c, mut any) = (vec![0u8; 8], vec![0u8; 8]);
    {
        let b = &mut v[1];
        b.recv(RecvArgs {
            src: 2,
            ..rargs(&mut from_c, 1)
        })
        .unwrap();
        b.recv(rargs(&mut any, 2)).unwrap();
        let mut nowhere = [0u8; 1];
        assert_eq!(
            b.recv(RecvArgs {
                src: 77,
                ..rargs(&mut nowhere, 3)
            }),
            Err(Error::INVAL),
            "a source not in the AV"
        );
    }
    let (ma, mc) = (b"from a!!".to_vec(), b"from c!!".to_vec());
    v[0].send(sargs(B, &ma, 10)).unwrap();
    v[2].send(sargs(B, &mc, 30)).unwrap();
    v[1].progress();
    let mut got = v[1].rx_ok();
    got.sort_by_key(|c| c.ctx);
    assert_eq!(
        got,
        vec![
            Comp {
                src: 2,
                ..Comp::recv(1, MRECV, 8, from_c.as_ptr() as usize)
            },
            Comp {
                src: 0,
                ..Comp::recv(2, MRECV, 8, any.as_ptr() as usize)
            },
        ]
    );
    assert_eq!(from_c, mc);
    assert_eq!(any, ma);
}

#[test]
fn without_directed_recv_the_source_is_ignored() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.caps &= !FI_DIRECTED_RECV;
    sb.cfg.matching = RecvMatching::of(sb.cfg.caps, API_NEWEST);
    let (_net, mut v) = network(&[Spec::new(SimOpts::shm()), sb, Spec::new(SimOpts::shm())]);
    let mut buf = vec![0u8; 8];
    v[1].recv(RecvArgs {
        src: 2,
        ..rargs(&mut buf, 1)
    })
    .unwrap();
    let m = pattern(8, 9);
    v[0].send(sargs(B, &m, 10)).unwrap();
    v[1].progress();
    assert_eq!(v[1].rx_ok(), vec![Comp::recv(1, MRECV, 8, buf.as_ptr() as usize)]);
}

#[test]
fn fi_source_err_reports_unknown_sources_with_their_address() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.caps |= FI_SOURCE | FI_SOURCE_ERR;
    sb.av_all = false;
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let mut buf = vec![0u8; 8];
    b.recv(rargs(&mut buf, 1)).unwrap();
    let m = pattern(8, 1);
    a.send(sargs(B, &m, 10)).unwrap();
    b.progress();
    let (ok, err) = b.rx();
    assert!(ok.is_empty());
    assert_eq!(
        err,
        vec![ErrComp {
            len: 8,
            buf: buf.as_ptr() as usize,
            err_data: a.addr.to_bytes(),
            ..ErrComp::new(1, MRECV, FI_EADDRNOTAVAIL)
        }]
    );
    assert_eq!(buf, m, "the data arrived all the same");
    assert_eq!(b.recv_count(), (0, 1));
}

#[test]
fn sends_and_directed_receives_need_an_av() {
    let (_net, mut a, _b) = pair(SimOpts::shm());
    let m = [0u8; 4];
    assert_eq!(a.send(sargs(9, &m, 1)), Err(Error::INVAL), "not in the AV");
    fn no_av(s: &Sinks) -> Bound<'_> {
        Bound { av: None, ..s.bound() }
    }
    assert_eq!(a.inner.send(no_av(&a.s), sargs(B, &m, 1)), Err(Error::NOAV));
    let mut r = [0u8; 4];
    assert_eq!(
        a.inner.recv(
            no_av(&a.s),
            RecvArgs {
                src: B,
                ..rargs(&mut r, 2)
            }
        ),
        Err(Error::NOAV)
    );
}

/// A send to an AV entry removed since the last send to it fails with
/// -FI_EINVAL (the send path reuses its last lookup only while the AV
/// removed nothing, core/av.rs "Thread safety"), and the address inserted
/// again is reached under its new index.
#[test]
fn a_removed_destination_is_not_reused() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(8, 3);
    let mut buf = vec![0u8; 8];
    b.recv(rargs(&mut buf, 0x61)).unwrap();
    a.send(sargs(B, &m, 0x51)).unwrap();
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
    let addr = a.s.av.lookup_addr(B).unwrap();
    a.s.av.remove(&[B]).unwrap();
    assert_eq!(a.send(sargs(B, &m, 0x52)), Err(Error::INVAL), "sent to a removed entry");
    let again = a.s.av.insert_batch(&[Ok(addr)], None).unwrap()[0].unwrap();
    assert_ne!(again, B);
    let mut buf2 = vec![0u8; 8];
    b.recv(rargs(&mut buf2, 0x62)).unwrap();
    a.send(sargs(again, &m, 0x53)).unwrap();
    assert_eq!(a.send(sargs(B, &m, 0x54)), Err(Error::INVAL), "still removed");
    b.progress();
    assert_eq!(b.rx_ok().len(), 1);
    assert_eq!(buf2, m);
}

#[test]
fn unexpected_messages_wait_for_a_late_receive_in_order() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let msgs: Vec<Vec<u8>> = (0..3).map(|i| pattern(100 + i, i as u8)).collect();
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress();
    assert_eq!(b.rx_ok(), vec![]);
    let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; 200]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
    }
    // Each receive took the oldest unexpected message at post time.
    let got = b.rx_ok();
    let want: Vec<Comp> = (0..3)
        .map(|i| Comp::recv(10 + i, MRECV, 100 + i, bufs[i].as_ptr() as usize))
        .collect();
    assert_eq!(got, want);
    for i in 0..3 {
        assert_eq!(&bufs[i][..100 + i], &msgs[i][..]);
    }
}

#[test]
fn unexpected_budget_stalls_the_sender_and_resumes() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.unexp_budget = super::super::matching::UNEXP_OVERHEAD + 100;
    let mut sa = Spec::new(SimOpts::shm());
    // Room for three 100-byte records (a compact 16-byte header + payload,
    // in cells: 128 bytes each).
    sa.sim.window = 3 * 128;
    let (net, mut a, mut b) = pair_of(sa, sb);
    let msgs: Vec<Vec<u8>> = (0..4).map(|i| pattern(100, i as u8)).collect();
    for (i, m) in msgs.iter().take(3).enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    // The pair's window is full: the post fails, nothing is lost.
    assert_eq!(a.send(sargs(B, &msgs[3], 3)), Err(Error::AGAIN));
    assert_eq!(a.tx_ok().len(), 3);
    b.progress();
    assert_eq!(net.queued(&a.addr, &b.addr), 2, "one taken into the budget, two stay");
    b.progress();
    assert_eq!(net.queued(&a.addr, &b.addr), 2, "still no budget");
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 100]).collect();
    let mut done = 0;
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
        if i == 0 {
            // Room again at A: the fourth message goes now.
            a.send(sargs(B, &msgs[3], 3)).unwrap();
        }
        b.progress();
        done += b.rx_ok().len();
    }
    assert_eq!(done, 4);
    for i in 0..4 {
        assert_eq!(bufs[i], msgs[i], "message {i} in order");
    }
    assert_eq!(net.queued(&a.addr, &b.addr), 0);
}

#[test]
fn eager_truncation_reports_olen() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(100, 5);
    let mut buf = vec![0u8; 40];
    b.recv(rargs(&mut buf, 7)).unwrap();
    a.send(SendArgs {
        flags: FI_REMOTE_CQ_DATA,
        data: 0xdada,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    b.progress();
    let (ok, err) = b.rx();
    assert!(ok.is_empty());
    assert_eq!(
        err,
        vec![ErrComp {
            len: 40,
            buf: buf.as_ptr() as usize,
            olen: 60,
            data: 0xdada,
            ..ErrComp::new(7, MRECV | FI_REMOTE_CQ_DATA, FI_ETRUNC)
        }]
    );
    assert_eq!(&buf[..], &m[..40]);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "the sender completes normally");
    assert_eq!(b.recv_count(), (0, 1));
    // Truncation of an unexpected message, at post time.
    a.send(sargs(B, &m, 2)).unwrap();
    b.progress();
    let mut small = vec![0u8; 10];
    b.recv(rargs(&mut small, 8)).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            len: 10,
            buf: small.as_ptr() as usize,
            olen: 90,
            ..ErrComp::new(8, MRECV, FI_ETRUNC)
        }]
    );
}

#[test]
fn multi_recv_buffers_fill_then_release() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let mut big = vec![0u8; 1000];
    let base = big.as_ptr() as usize;
    b.recv(RecvArgs {
        flags: FI_MULTI_RECV,
        ..rargs(&mut big, 9)
    })
    .unwrap();
    let msgs: Vec<Vec<u8>> = [300, 300, 300, 200]
        .iter()
        .enumerate()
        .map(|(i, &n)| pattern(n, i as u8))
        .collect();
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress();
    assert_eq!(
        b.rx_ok(),
        vec![
            Comp::recv(9, MRECV, 300, base),
            Comp::recv(9, MRECV, 300, base + 300),
            Comp::recv(9, MRECV, 300, base + 600),
            // 200 bytes do not fit the 100 left: the buffer is released.
            Comp::recv(9, FI_MULTI_RECV, 0, base + 900),
        ]
    );
    for i in 0..3 {
        assert_eq!(&big[i * 300..(i + 1) * 300], &msgs[i][..]);
    }
    // The fourth waits as unexpected; a new buffer it fills exactly
    // (less than min_multi_recv left) takes it and is released with it.
    let mut next = vec![0u8; 200];
    b.recv(RecvArgs {
        flags: FI_MULTI_RECV,
        ..rargs(&mut next, 10)
    })
    .unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp::recv(10, MRECV | FI_MULTI_RECV, 200, next.as_ptr() as usize)]
    );
    assert_eq!(next, msgs[3]);
    // A buffer too small for the unexpected head is handed back at once
    // and the message stays queued.
    a.send(sargs(B, &msgs[0], 20)).unwrap();
    b.progress();
    let mut tiny = vec![0u8; 100];
    b.recv(RecvArgs {
        flags: FI_MULTI_RECV,
        ..rargs(&mut tiny, 11)
    })
    .unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp::recv(11, FI_MULTI_RECV, 0, tiny.as_ptr() as usize)]
    );
    let mut plain = vec![0u8; 300];
    b.recv(rargs(&mut plain, 12)).unwrap();
    assert_eq!(b.rx_ok(), vec![Comp::recv(12, MRECV, 300, plain.as_ptr() as usize)]);
}

#[test]
fn multi_recv_is_untagged_and_needs_the_capability() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.caps &= !FI_MULTI_RECV;
    sb.cfg.matching = RecvMatching::of(sb.cfg.caps, API_NEWEST);
    let (_net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let mut buf = vec![0u8; 100];
    let tagged = RecvArgs {
        tagged: true,
        flags: FI_MULTI_RECV,
        ..rargs(&mut buf, 1)
    };
    assert_eq!(a.recv(tagged), Err(Error::BADFLAGS));
    let mut buf2 = vec![0u8; 100];
    assert_eq!(
        b.recv(RecvArgs {
            flags: FI_MULTI_RECV,
            ..rargs(&mut buf2, 1)
        }),
        Err(Error::BADFLAGS)
    );
}

#[test]
fn cancel_completes_a_posted_receive_once_and_not_sends() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let mut buf = vec![0u8; 10];
    b.recv(RecvArgs {
        tagged: true,
        tag: 44,
        ..rargs(&mut buf, 5)
    })
    .unwrap();
    b.cancel(5).unwrap();
    assert_eq!(b.cancel(5), Err(Error::NOENT));
    assert_eq!(b.rx().1, vec![ErrComp::new(5, TRECV, FI_ECANCELED)]);
    assert_eq!(b.recv_count(), (0, 1));
    // A message for it now is unexpected.
    let m = pattern(10, 0);
    a.send(SendArgs {
        tagged: true,
        tag: 44,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    b.progress();
    assert!(b.rx_ok().is_empty());
    // Sends cannot be cancelled (a rendezvous send waits for its ACK).
    let big = pattern(100_000, 1);
    a.send(sargs(B, &big, 2)).unwrap();
    assert_eq!(a.cancel(2), Err(Error::NOENT));
}

#[test]
fn inject_calls_complete_silently() {
    // shm: the record is written at once (the no-CQ-work path of an inject);
    // tcp: queued, completed when the transport reports it sent.
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let (_net, mut a, mut b) = pair(sim);
        let mut m = pattern(64, 3);
        a.send(SendArgs {
            inject_call: true,
            ..sargs(B, &m, 1)
        })
        .unwrap();
        // The buffer is the application's again at once.
        m.fill(0);
        let too_big = pattern(65, 0);
        assert_eq!(
            a.send(SendArgs {
                inject_call: true,
                ..sargs(B, &too_big, 2)
            }),
            Err(Error::MSGSIZE)
        );
        assert_eq!(
            a.send(SendArgs {
                flags: FI_INJECT,
                ..sargs(B, &too_big, 2)
            }),
            Err(Error::MSGSIZE)
        );
        run(&mut [&mut a, &mut b], 2);
        assert_eq!(a.tx_ok(), vec![], "fi_inject: no completion");
        assert_eq!(a.send_count(), (1, 0), "but the counter counts it");
        let mut buf = vec![0u8; 64];
        b.recv(rargs(&mut buf, 3)).unwrap();
        assert_eq!(buf, pattern(64, 3), "the copy made at post time arrived");
        // FI_INJECT on a normal send: a completion all the same.
        a.send(SendArgs {
            flags: FI_INJECT,
            ..sargs(B, &m, 4)
        })
        .unwrap();
        a.progress();
        assert_eq!(a.tx_ok(), vec![Comp::send(4, MSEND)]);
    }
}

#[test]
fn delivery_complete_waits_for_the_receivers_ack() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let (net, mut a, mut b) = pair(sim);
        let m = pattern(500, 7);
        a.send(SendArgs {
            flags: FI_DELIVERY_COMPLETE,
            ..sargs(B, &m, 1)
        })
        .unwrap();
        run(&mut [&mut a, &mut b], 3);
        // Unexpected at B: in its queue, not in the application's buffer.
        assert_eq!(a.tx_ok(), vec![], "{sim:?}: not delivered yet");
        let eager = net.log().into_iter().find(|r| r.hdr.op == op::EAGER).unwrap();
        assert_eq!(eager.hdr.flags & flag::ACK_REQ, flag::ACK_REQ);
        let mut buf = vec![0u8; 500];
        b.recv(rargs(&mut buf, 2)).unwrap();
        assert_eq!(b.rx_ok().len(), 1);
        run(&mut [&mut a, &mut b], 2);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "{sim:?}");
        let ack = net.log().into_iter().find(|r| r.hdr.op == op::ACK).unwrap();
        assert_eq!((ack.hdr.msg_id, ack.hdr.len, ack.hdr.aux), (eager.hdr.msg_id, 500, 0));
        // Matched on arrival: the ACK follows the placement.
        net.clear_log();
        let mut buf2 = vec![0u8; 500];
        b.recv(rargs(&mut buf2, 3)).unwrap();
        a.send(SendArgs {
            flags: FI_DELIVERY_COMPLETE,
            ..sargs(B, &m, 4)
        })
        .unwrap();
        run(&mut [&mut a, &mut b], 4);
        assert_eq!(a.tx_ok(), vec![Comp::send(4, MSEND)], "{sim:?}");
        assert_eq!(b.rx_ok().len(), 1);
    }
}

#[test]
fn selective_completion_reports_only_what_asks() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.tx_selective = true;
    let mut sb = Spec::new(SimOpts::shm());
    sb.rx_selective = true;
    let (_net, mut a, mut b) = pair_of(sa, sb);
    let m = pattern(20, 0);
    let (mut r1, mut r2, mut r3) = (vec![0u8; 20], vec![0u8; 20], vec![0u8; 10]);
    b.recv(rargs(&mut r1, 1)).unwrap();
    b.recv(RecvArgs {
        flags: FI_COMPLETION,
        ..rargs(&mut r2, 2)
    })
    .unwrap();
    b.recv(rargs(&mut r3, 3)).unwrap();
    a.send(sargs(B, &m, 10)).unwrap();
    a.send(SendArgs {
        flags: FI_COMPLETION,
        ..sargs(B, &m, 11)
    })
    .unwrap();
    a.send(sargs(B, &m, 12)).unwrap();
    b.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(11, MSEND)]);
    assert_eq!(a.send_count(), (3, 0));
    let (ok, err) = b.rx();
    assert_eq!(ok, vec![Comp::recv(2, MRECV, 20, r2.as_ptr() as usize)]);
    // Errors are always reported (the third is truncated).
    assert_eq!(
        err,
        vec![ErrComp {
            len: 10,
            buf: r3.as_ptr() as usize,
            olen: 10,
            ..ErrComp::new(3, MRECV, FI_ETRUNC)
        }]
    );
    assert_eq!(b.recv_count(), (2, 1));
}

#[test]
fn remote_cq_data_only_with_the_flag() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let m = pattern(4, 0);
    let (mut r1, mut r2) = (vec![0u8; 4], vec![0u8; 4]);
    b.recv(RecvArgs {
        tagged: true,
        ignore: !0,
        ..rargs(&mut r1, 1)
    })
    .unwrap();
    b.recv(RecvArgs {
        tagged: true,
        ignore: !0,
        ..rargs(&mut r2, 2)
    })
    .unwrap();
    a.send(SendArgs {
        tagged: true,
        tag: 5,
        flags: FI_REMOTE_CQ_DATA,
        data: 0x1234_5678_9abc,
        ..sargs(B, &m, 10)
    })
    .unwrap();
    a.send(SendArgs {
        tagged: true,
        tag: 6,
        data: 0x99,
        ..sargs(B, &m, 11)
    })
    .unwrap();
    b.progress();
    assert_eq!(
        b.rx_ok(),
        vec![
            Comp {
                data: 0x1234_5678_9abc,
                tag: 5,
                ..Comp::recv(1, TRECV | FI_REMOTE_CQ_DATA, 4, r1.as_ptr() as usize)
            },
            Comp {
                tag: 6,
                ..Comp::recv(2, TRECV, 4, r2.as_ptr() as usize)
            },
        ]
    );
}

#[test]
fn peek_claim_and_discard() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let tagged = |tag: u64, flags: u64, buf: &mut [u8], ctx: usize| RecvArgs {
        tagged: true,
        tag,
        flags,
        ..rargs(buf, ctx)
    };
    let mut none: [u8; 0] = [];
    // Nothing there: FI_ENOMSG.
    b.recv(tagged(7, FI_PEEK, &mut none, 1)).unwrap();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            tag: 7,
            ..ErrComp::new(1, TRECV, FI_ENOMSG)
        }]
    );
    let m = pattern(50, 1);
    a.send(SendArgs {
        tagged: true,
        tag: 7,
        flags: FI_REMOTE_CQ_DATA,
        data: 3,
        ..sargs(B, &m, 100)
    })
    .unwrap();
    // A peek polls by itself: it finds the message, leaves it there.
    b.recv(tagged(7, FI_PEEK, &mut none, 2)).unwrap();
    let peeked = Comp {
        tag: 7,
        data: 3,
        ..Comp::recv(2, TRECV | FI_REMOTE_CQ_DATA, 50, 0)
    };
    assert_eq!(b.rx_ok(), vec![peeked.clone()]);
    b.recv(tagged(7, FI_PEEK | FI_CLAIM, &mut none, 3)).unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp {
            ctx: 3,
            flags: peeked.flags | FI_CLAIM,
            ..peeked.clone()
        }]
    );
    // Claimed: an ordinary receive no longer sees it.
    let mut other = vec![0u8; 50];
    b.recv(tagged(7, 0, &mut other, 4)).unwrap();
    assert!(b.rx_ok().is_empty());
    let mut mine = vec![0u8; 50];
    assert_eq!(
        b.recv(tagged(7, FI_CLAIM, &mut mine, 99)),
        Err(Error::INVAL),
        "not claimed by 99"
    );
    b.recv(tagged(0, FI_CLAIM, &mut mine, 3)).unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp {
            tag: 7,
            data: 3,
            ..Comp::recv(3, TRECV | FI_REMOTE_CQ_DATA | FI_CLAIM, 50, mine.as_ptr() as usize)
        }]
    );
    assert_eq!(mine, m);
    b.cancel(4).unwrap();
    b.rx();
    // FI_PEEK | FI_DISCARD drops it.
    a.send(SendArgs {
        tagged: true,
        tag: 8,
        ..sargs(B, &m, 101)
    })
    .unwrap();
    b.recv(tagged(8, FI_PEEK | FI_DISCARD, &mut none, 5)).unwrap();
    assert_eq!(
        b.rx_ok(),
        vec![Comp {
            tag: 8,
            ..Comp::recv(5, TRECV | FI_DISCARD, 50, 0)
        }]
    );
    b.recv(tagged(8, FI_PEEK, &mut none, 6)).unwrap();
    assert_eq!(b.rx().1.len(), 1, "gone: FI_ENOMSG");
    // FI_CLAIM | FI_DISCARD after a claiming peek.
    a.send(SendArgs {
        tagged: true,
        tag: 9,
        ..sargs(B, &m, 102)
    })
    .unwrap();
    b.recv(tagged(9, FI_PEEK | FI_CLAIM, &mut none, 7)).unwrap();
    b.recv(tagged(9, FI_CLAIM | FI_DISCARD, &mut none, 7)).unwrap();
    let got = b.rx_ok();
    assert_eq!(
        got[1],
        Comp {
            tag: 9,
            ..Comp::recv(7, TRECV | FI_CLAIM | FI_DISCARD, 0, 0)
        }
    );
    // A discarded rendezvous message is acknowledged without its data.
    net.clear_log();
    let big = pattern(100_000, 4);
    a.send(SendArgs {
        tagged: true,
        tag: 10,
        ..sargs(B, &big, 103)
    })
    .unwrap();
    b.recv(tagged(10, FI_PEEK | FI_DISCARD, &mut none, 8)).unwrap();
    a.progress();
    assert_eq!(a.tx_ok().last(), Some(&Comp::send(103, TSEND)));
    assert_eq!(net.pulls(&b.addr), 0);
    let ack = net.log().into_iter().find(|r| r.hdr.op == op::ACK).unwrap();
    assert_eq!((ack.hdr.len, ack.hdr.aux), (0, 0));
}

#[test]
fn queue_limits_refuse_posts_with_eagain() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.cfg.tx_size = 2;
    sa.cfg.rx_size = 2;
    let mut sb = Spec::new(SimOpts::shm());
    sb.cq_size = 2;
    let (_net, mut a, mut b) = pair_of(sa, sb);
    let big = pattern(100_000, 0);
    a.send(sargs(B, &big, 1)).unwrap();
    a.send(sargs(B, &big, 2)).unwrap();
    assert_eq!(a.send(sargs(B, &big, 3)), Err(Error::AGAIN), "tx_size outstanding");
    assert_eq!(a.inner.tx_outstanding(), 2);
    let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; 8]).collect();
    let (x, rest) = bufs.split_at_mut(1);
    a.recv(rargs(&mut x[0], 1)).unwrap();
    a.recv(rargs(&mut rest[0], 2)).unwrap();
    assert_eq!(a.recv(rargs(&mut rest[1], 3)), Err(Error::AGAIN), "rx_size posted");
    assert_eq!(a.inner.rx_posted(), 2);
    // B's CQ holds two: a third post cannot be sure of a slot.
    let mut more: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; 8]).collect();
    let (x, rest) = more.split_at_mut(1);
    b.recv(rargs(&mut x[0], 1)).unwrap();
    b.recv(rargs(&mut rest[0], 2)).unwrap();
    assert_eq!(b.recv(rargs(&mut rest[1], 3)), Err(Error::AGAIN), "CQ slots");
    // Too large for max_msg_size.
    let mut sc = Spec::new(SimOpts::shm());
    sc.cfg.max_msg_size = 10;
    let (_n2, mut c, _d) = pair_of(sc, Spec::new(SimOpts::shm()));
    assert_eq!(c.send(sargs(B, &pattern(11, 0), 1)), Err(Error::MSGSIZE));
}

#[test]
fn fi_more_tells_the_transport() {
    let (net, mut a, _b) = pair(SimOpts::tcp());
    let m = pattern(10, 0);
    a.send(SendArgs {
        flags: FI_MORE,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    a.send(sargs(B, &m, 2)).unwrap();
    assert_eq!(net.more_calls(&a.addr), 1);
}

/// A peer flooding unexpected messages gets its share of
/// the budget and no more (the rest of its records wait in the transport);
/// another peer's message still gets into the unexpected queue, where a peek
/// finds it. Without the per-peer share the flooder would hold the whole
/// budget and the peek would say FI_ENOMSG.
#[test]
fn a_flooding_peer_cannot_hold_the_whole_unexpected_budget() {
    for sim in [SimOpts::shm(), SimOpts::tcp()] {
        let cost = super::super::matching::UNEXP_OVERHEAD + 100;
        let mut sb = Spec::new(sim);
        sb.cfg.unexp_budget = 8 * cost;
        let (net, mut eps) = network(&[Spec::new(sim), sb, Spec::new(sim)]);
        let mut c = eps.pop().expect("c");
        let mut b = eps.pop().expect("b");
        let mut a = eps.pop().expect("a");
        let tagged = |tag: u64, buf: &[u8], ctx: usize| SendArgs {
            tagged: true,
            tag,
            ..sargs(B, buf, ctx)
        };
        let flood: Vec<Vec<u8>> = (0..20).map(|i| pattern(100, i as u8)).collect();
        for (i, m) in flood.iter().enumerate() {
            a.send(tagged(1, m, i)).unwrap();
        }
        run(&mut [&mut a, &mut b], 3);
        assert_eq!(net.queued(&a.addr, &b.addr), 16, "A holds half of the budget");
        let m = pattern(100, 99);
        c.send(tagged(2, &m, 100)).unwrap();
        run(&mut [&mut c, &mut a, &mut b], 3);
        assert_eq!(net.queued(&c.addr, &b.addr), 0, "C's message is in");
        let mut none: [u8; 0] = [];
        b.recv(RecvArgs {
            tagged: true,
            tag: 2,
            flags: FI_PEEK,
            ..rargs(&mut none, 50)
        })
        .unwrap();
        assert_eq!(
            b.rx_ok(),
            vec![Comp {
                tag: 2,
                ..Comp::recv(50, TRECV, 100, 0)
            }],
            "the peek finds C's message"
        );
        assert!(net.queued(&a.addr, &b.addr) > 0, "A is still back-pressured");
        // Receiving drains A's share: all of A's messages arrive, in order.
        let mut bufs: Vec<Vec<u8>> = (0..20).map(|_| vec![0u8; 100]).collect();
        let mut got = 0;
        for (i, buf) in bufs.iter_mut().enumerate() {
            b.recv(RecvArgs {
                tagged: true,
                tag: 1,
                ..rargs(buf, 200 + i)
            })
            .unwrap();
            run(&mut [&mut a, &mut b], 2);
            got += b.rx_ok().len();
        }
        assert_eq!(got, 20);
        assert_eq!(bufs, flood);
        let mut mine = vec![0u8; 100];
        b.recv(RecvArgs {
            tagged: true,
            tag: 2,
            ..rargs(&mut mine, 300)
        })
        .unwrap();
        assert_eq!(b.rx_ok().len(), 1);
        assert_eq!(mine, m);
    }
}

/// A named `FI_TRANSMIT_COMPLETE` (docs/protocol.md, Completion levels):
/// on tcp the record asks `ACK_ARRIVE` and the send completes when the
/// receiver has the whole record off its socket — without any receive
/// posted (an application that waits for its sends before posting its
/// receives must not hang), and not before the receiver progressed; an
/// ACK for it from another peer, or for another id, completes nothing.
/// With no level named, or inject complete, it completes once written; on
/// shm every level but delivery complete completes in the ring.
#[test]
fn transmit_complete_waits_for_arrival_not_for_a_receive() {
    let specs = [
        Spec::new(SimOpts::tcp()),
        Spec::new(SimOpts::tcp()),
        Spec::new(SimOpts::tcp()),
    ];
    let (net, v) = network(&specs);
    let [mut a, mut b, c]: [Ep; 3] = v.try_into().ok().expect("three");
    let m = pattern(3000, 5);
    a.send(SendArgs {
        flags: FI_TRANSMIT_COMPLETE,
        ..sargs(B, &m, 1)
    })
    .unwrap();
    for _ in 0..5 {
        a.progress();
    }
    assert_eq!(a.tx_ok(), vec![], "written is not transmit complete on tcp");
    let eager = net.log().into_iter().find(|r| r.hdr.op == op::EAGER).unwrap();
    assert_eq!(eager.hdr.flags & (flag::ACK_ARRIVE | flag::ACK_REQ), flag::ACK_ARRIVE);
    // Forged answers: from C, and from B for another id.
    let mut ack = WireHdr::new(op::ACK);
    ack.msg_id = eager.hdr.msg_id;
    net.forge(&c.addr, &a.addr, ack, &[]);
    let mut other = ack;
    other.msg_id ^= 1;
    net.forge(&b.addr, &a.addr, other, &[]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![], "a forged ACK completes nothing");
    // B progresses with no receive posted: the record is taken (unexpected)
    // and answered.
    run(&mut [&mut a, &mut b], 6);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "answered on arrival");
    let acks: Vec<_> = net.log().into_iter().filter(|r| r.hdr.op == op::ACK).collect();
    assert_eq!(acks.len(), 1);
    assert_eq!(
        (acks[0].hdr.msg_id, acks[0].hdr.len, acks[0].hdr.aux),
        (eager.hdr.msg_id, 3000, 0)
    );
    let mut buf = vec![0u8; 3000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    run(&mut [&mut a, &mut b], 2);
    assert_eq!(b.rx_ok().len(), 1);
    assert_eq!(buf, m);
    assert_eq!(
        net.log().into_iter().filter(|r| r.hdr.op == op::ACK).count(),
        1,
        "no second ACK"
    );
    // Matched on arrival: answered once placed.
    let mut buf2 = vec![0u8; 3000];
    b.recv(rargs(&mut buf2, 3)).unwrap();
    a.send(SendArgs {
        flags: FI_TRANSMIT_COMPLETE,
        ..sargs(B, &m, 4)
    })
    .unwrap();
    run(&mut [&mut a, &mut b], 6);
    assert_eq!(a.tx_ok(), vec![Comp::send(4, MSEND)]);
    assert_eq!(b.rx_ok().len(), 1);
    assert_eq!(buf2, m);
    // No level, and inject complete: complete once written, B idle.
    for (ctx, level) in [(5, 0), (6, FI_INJECT_COMPLETE)] {
        net.clear_log();
        a.send(SendArgs {
            flags: level,
            ..sargs(B, &m, ctx)
        })
        .unwrap();
        a.progress();
        assert_eq!(a.tx_ok(), vec![Comp::send(ctx, MSEND)], "level {level:#x}");
        let e = net.log().into_iter().find(|r| r.hdr.op == op::EAGER).unwrap();
        assert_eq!(e.hdr.flags & (flag::ACK_ARRIVE | flag::ACK_REQ), 0);
    }
    // shm: transmit complete is the ring; nothing is asked of the peer.
    let (net, mut a, _b) = pair(SimOpts::shm());
    a.send(SendArgs {
        flags: FI_TRANSMIT_COMPLETE,
        ..sargs(B, &m, 7)
    })
    .unwrap();
    assert_eq!(a.tx_ok(), vec![Comp::send(7, MSEND)]);
    assert_eq!(net.log()[0].hdr.flags & flag::ACK_ARRIVE, 0);
}

/// An eager send the transport has no room for makes one progress pass and
/// tries once more (`send_again`): to itself, an endpoint whose window is
/// full of its own records consumes them in that pass, and the send goes.
#[test]
fn a_full_window_is_passed_once_and_the_send_retried() {
    let mut sa = Spec::new(SimOpts::shm());
    // Room for three 100-byte records (128 bytes each in cells).
    sa.sim.window = 3 * 128;
    let (_net, mut a, _b) = pair_of(sa, Spec::new(SimOpts::shm()));
    let msgs: Vec<Vec<u8>> = (0..4).map(|i| pattern(100, i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 100]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        a.recv(rargs(buf, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().take(3).enumerate() {
        a.send(sargs(A, m, i)).unwrap();
    }
    assert_eq!(a.rx_ok().len(), 0, "nothing consumed yet");
    // The window is full: the first try fails, the pass delivers the
    // three, the second try is written.
    a.send(sargs(A, &msgs[3], 3)).unwrap();
    assert_eq!(a.rx_ok().len(), 3);
    a.progress();
    assert_eq!(a.rx_ok().len(), 1);
    assert_eq!(a.tx_ok().len(), 4);
    assert_eq!(bufs, msgs);
}
