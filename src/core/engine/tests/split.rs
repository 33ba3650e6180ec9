//! Split rendezvous (docs/protocol.md): above `split_min` the receiver
//! pulls the first half while the sender pushes the rest (`CTS|SPLIT`,
//! `PUSHED`), a window of messages matched together split by message (the
//! sender pushes the last ones whole); a refused push costs only the copy;
//! hostile records and a dead sender cost only that peer.

use super::super::sim::Cma;
use super::*;
use crate::transport::proto::{flag, op, Limits, WireHdr, SPLIT_IOV_MAX};
use std::time::Duration;

const LEN: usize = 600_000;
/// Half of `LEN`, page-aligned down.
const AT: usize = 299_008;

// A receive into two segments of a buffer; the ops of the records sent.
use super::rendezvous::{ops, split_recv as two_seg_recv};

/// The split receive (context 2) failed with `FI_ECONNRESET`, and nothing
/// of it waits on the peer any more.
fn assert_reset(b: &mut Ep) {
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: LEN,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
    assert!(!b.inner.waits_on_peers());
}

/// `b` posts a receive of `LEN` bytes (context 2), `a` sends a `LEN`-byte
/// pattern (context 1) and `b`'s pass answers the RTS with `CTS|SPLIT`
/// (and pulls the first half): the message and the receive buffer.
fn split_started(a: &mut Ep, b: &mut Ep, seed: u8) -> (Vec<u8>, Vec<u8>) {
    let msg = pattern(LEN, seed);
    let mut buf = vec![0u8; LEN];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress();
    (msg, buf)
}

#[test]
fn a_split_message_arrives_whole_from_both_copies() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(LEN, 7);
    let mut buf = vec![0u8; LEN];
    // The receive's second segment starts inside the pushed part.
    b.recv(two_seg_recv(&mut buf, 400_000, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress(); // RTS: CTS|SPLIT out, first half pulled
    assert_eq!(b.rx_ok(), vec![], "waits for the pushed half");
    assert_eq!(buf[..AT], msg[..AT]);
    assert!(buf[AT..].iter().all(|&x| x == 0), "the second half is the sender's");
    a.progress(); // CTS|SPLIT: pushed, PUSHED out
    assert_eq!(a.tx_ok(), vec![], "waits for the ACK");
    b.progress(); // PUSHED: complete, ACK
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, LEN, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    assert_eq!((net.pulls(&b.addr), net.pushes(&a.addr)), (1, 1));
    assert_eq!(ops(&net), vec![op::RTS, op::CTS, op::PUSHED, op::ACK]);
    let log = net.log();
    let (rts, cts, pushed, ack) = (log[0].hdr, log[1].hdr, log[2].hdr, log[3].hdr);
    assert_eq!(
        (cts.flags, cts.msg_id, cts.offset, cts.len, cts.reserved, cts.payload),
        (flag::SPLIT, rts.msg_id, AT as u64, LEN as u64, 2, 32)
    );
    assert_eq!(
        (pushed.msg_id, pushed.aux, pushed.offset, pushed.len, pushed.reserved),
        (rts.msg_id, cts.aux, AT as u64, LEN as u64, 0)
    );
    assert_eq!((ack.msg_id, ack.len, ack.aux), (rts.msg_id, LEN as u64, 0));
}

#[test]
fn below_the_threshold_or_turned_off_the_receiver_pulls_alone() {
    // split_lone_min off: only split_min decides (the lone rule: below).
    for (len, min) in [(200_000, 256 << 10), (LEN, 0)] {
        assert_eq!(one_message(len, min, 0), (vec![op::RTS, op::ACK], 0));
    }
}

#[test]
fn a_refused_push_is_pulled_by_the_receiver() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.sim.cma = Cma::Refused; // the sender's process_vm_writev fails
    let (net, mut a, mut b) = pair_of(sa, Spec::new(SimOpts::shm()));
    let msg = pattern(LEN, 9);
    let mut buf = vec![0u8; LEN];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    run(&mut [&mut b, &mut a], 3);
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, LEN, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    assert_eq!((net.pulls(&b.addr), net.pushes(&a.addr)), (2, 0));
    assert_eq!(ops(&net), vec![op::RTS, op::CTS, op::PUSHED, op::ACK]);
    let pushed = net.log()[2].hdr;
    assert_eq!(pushed.reserved, Error::OPNOTSUPP.0 as u64);
}

#[test]
fn forged_pushed_records_do_not_complete_a_split() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(LEN, 3);
    let mut buf = vec![0u8; LEN];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress();
    let cts = net.log()[1].hdr;
    assert_eq!((cts.op, cts.flags), (op::CTS, flag::SPLIT));
    let good = {
        let mut h = WireHdr::new(op::PUSHED);
        h.msg_id = cts.msg_id;
        h.aux = cts.aux;
        h.offset = cts.offset;
        h.len = cts.len;
        h
    };
    let bad = [
        WireHdr {
            msg_id: cts.msg_id + 1,
            ..good
        },
        WireHdr {
            aux: cts.aux ^ 1,
            ..good
        },
        WireHdr { offset: 0, ..good },
        WireHdr {
            len: cts.len - 1,
            ..good
        },
    ];
    for h in bad {
        net.forge(&a.addr, &b.addr, h, &[]);
        b.progress();
    }
    assert_eq!(b.rx(), (vec![], vec![]), "no forged PUSHED completes it");
    // The real exchange still completes, with the bytes right.
    run(&mut [&mut a, &mut b], 3);
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, LEN, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    // A late copy of the right record finds nothing.
    net.forge(&a.addr, &b.addr, good, &[]);
    run(&mut [&mut a, &mut b], 2);
    assert_eq!((b.rx(), a.tx()), ((vec![], vec![]), (vec![], vec![])));
}

#[test]
fn a_split_cts_that_does_not_fit_the_message_is_refused_unpushed() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(LEN, 4);
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress(); // unexpected at B
    let rts = net.log()[0].hdr;
    let scratch = vec![0u8; LEN];
    let entry = |a: usize, l: usize| {
        let mut e = (a as u64).to_le_bytes().to_vec();
        e.extend_from_slice(&(l as u64).to_le_bytes());
        e
    };
    let p = scratch.as_ptr() as usize;
    let cts = |off: u64, len: u64, n: u64| {
        let mut h = WireHdr::new(op::CTS);
        h.flags = flag::SPLIT;
        h.msg_id = rts.msg_id;
        h.aux = 5;
        h.offset = off;
        h.len = len;
        h.reserved = n;
        h
    };
    // Table one byte short; part beyond the message; another message.
    let cases: [(WireHdr, Vec<u8>); 3] = [
        (cts(AT as u64, LEN as u64, 1), entry(p, LEN - AT - 1)),
        (cts(AT as u64, LEN as u64 + 1, 1), entry(p, LEN + 1 - AT)),
        (
            WireHdr {
                msg_id: rts.msg_id + 7,
                ..cts(AT as u64, LEN as u64, 1)
            },
            entry(p, LEN - AT),
        ),
    ];
    for (h, t) in cases {
        net.clear_log();
        net.forge(&b.addr, &a.addr, h, &t);
        a.progress();
        let answers: Vec<WireHdr> = net.log().iter().map(|r| r.hdr).collect();
        if h.msg_id == rts.msg_id {
            assert_eq!(answers.len(), 1);
            assert_eq!(
                (answers[0].op, answers[0].reserved),
                (op::PUSHED, Error::INVAL.0 as u64)
            );
        } else {
            assert_eq!(answers, vec![], "no send of ours: dropped");
        }
    }
    assert_eq!(net.pushes(&a.addr), 0);
    assert!(scratch.iter().all(|&x| x == 0));
    assert_eq!(a.tx(), (vec![], vec![]), "the send still waits");
    // The header check: SPLIT only on CTS, a bounded table, offset < len.
    let lim = Limits {
        max_payload: 16384,
        max_chunk: 16384,
        max_iov: 1024,
    };
    let mut h = cts(AT as u64, LEN as u64, 1);
    h.payload = 16;
    assert!(h.check(&lim).is_ok());
    h.reserved = SPLIT_IOV_MAX as u64 + 1;
    h.payload = 16 * h.reserved as u32;
    assert!(h.check(&lim).is_err(), "too many entries");
    let mut h = cts(LEN as u64, LEN as u64, 1);
    h.payload = 16;
    assert!(h.check(&lim).is_err(), "empty part");
    let mut h = cts(AT as u64, LEN as u64, 1);
    h.payload = 32;
    assert!(h.check(&lim).is_err(), "payload is not the table");
    let mut d = WireHdr::new(op::DATA);
    d.flags = flag::SPLIT;
    assert!(d.check(&lim).is_err(), "SPLIT on another op");
    let mut c = WireHdr::new(op::CTS);
    c.payload = 16;
    assert!(c.check(&lim).is_err(), "a plain CTS stays empty");
}

#[test]
fn a_sender_dying_mid_split_fails_only_that_receive() {
    let mut specs = vec![Spec::new(SimOpts::shm()); 3];
    specs[2].cfg.split_min = 0;
    let (net, mut v) = network(&specs);
    let mut c = v.pop().unwrap();
    let mut b = v.pop().unwrap();
    let mut a = v.pop().unwrap();
    let msg = pattern(LEN, 5);
    let mut buf = vec![0u8; LEN];
    let mut buf2 = vec![0u8; 1000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress(); // split started: CTS|SPLIT out, first half pulled
    net.kill(&a.addr); // never pushes, never answers
    std::thread::sleep(std::time::Duration::from_millis(120));
    run(&mut [&mut b], 128);
    assert_reset(&mut b);
    // Another peer's messages still arrive.
    b.recv(rargs(&mut buf2, 3)).unwrap();
    let m2 = pattern(1000, 6);
    c.send(sargs(B, &m2, 4)).unwrap();
    run(&mut [&mut c, &mut b], 2);
    assert_eq!(b.rx_ok(), vec![Comp::recv(3, MRECV, 1000, buf2.as_ptr() as usize)]);
    assert_eq!(buf2, m2);
}

#[test]
fn a_receiver_that_closed_is_not_pushed_to() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let (_msg, buf) = split_started(&mut a, &mut b, 8); // CTS|SPLIT out
    let mut idles = 0;
    // The sender does not progress: the close waits its bound (20 ms,
    // `cfg`), then says BYE behind the CTS.
    b.inner.close_with(&mut || idles += 1);
    assert!(idles > 0, "waited for the PUSHED until the bound");
    a.progress(); // both read in one pass: no push into a closed endpoint
    assert_eq!(net.pushes(&a.addr), 0);
    assert!(buf[AT..].iter().all(|&x| x == 0));
    assert!(!ops(&net).contains(&op::PUSHED));
}

/// A receiver closing its endpoint with the sender's push outstanding: the
/// close progresses the endpoint until the `PUSHED`, so every byte is in
/// the buffer before it returns (the application may free it then);
/// nothing completes once closed; the sender gets its ACK.
#[test]
fn a_close_waits_for_the_senders_push() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.close_wait = Duration::from_secs(3600);
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let (msg, buf) = split_started(&mut a, &mut b, 10); // CTS|SPLIT out, first half pulled
    let mut idles = 0;
    b.inner.close_with(&mut || {
        idles += 1;
        assert!(idles < 100, "still waiting after the sender's PUSHED");
        if idles == 3 {
            a.progress(); // the sender's pass: push, PUSHED
        }
    });
    assert_eq!(idles, 3, "waited, and returned at the PUSHED");
    assert_eq!(net.pushes(&a.addr), 1);
    assert_eq!(buf, msg, "every byte in before the close returned");
    assert_eq!(b.rx(), (vec![], vec![]), "nothing completes once closed");
    assert_eq!(ops(&net), vec![op::RTS, op::CTS, op::PUSHED, op::ACK, op::BYE]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
}

/// A sender that died, or closed its endpoint (its BYE: a push is made
/// and answered within one of its passes, so none is under way), ends a
/// closing receiver's wait at once, whatever the bound.
#[test]
fn a_close_does_not_wait_for_a_sender_that_is_gone() {
    for closed in [false, true] {
        let mut sb = Spec::new(SimOpts::shm());
        sb.cfg.close_wait = Duration::from_secs(3600);
        let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
        let (_msg, buf) = split_started(&mut a, &mut b, 11); // CTS|SPLIT out
        if closed {
            a.inner.close(); // BYE (the CTS|SPLIT unread)
        } else {
            net.kill(&a.addr);
        }
        let mut idles = 0;
        b.inner.close_with(&mut || {
            idles += 1;
            assert!(idles < 100, "waiting on a sender that is gone (closed: {closed})");
        });
        assert_eq!(idles, 0, "closed: {closed}");
        assert_eq!(net.pushes(&a.addr), 0);
        assert!(buf[AT..].iter().all(|&x| x == 0));
    }
}

/// A sender's BYE fails the split receives it left unanswered (it pushes
/// nothing more, and its buffer may be gone): the receive does not wait
/// for the liveness of a process that lives on.
#[test]
fn a_senders_close_fails_its_unanswered_split() {
    let (_net, mut a, mut b) = pair(SimOpts::shm());
    let (_msg, _buf) = split_started(&mut a, &mut b, 12); // CTS|SPLIT out
    a.inner.close();
    b.progress();
    assert_reset(&mut b);
}

/// `FI_RUSTFAB_SHM_CLOSE_WAIT=0`: the close neither waits nor progresses
/// (the PUSHED already in its queue is not read: no ACK goes out).
#[test]
fn a_close_wait_of_zero_does_not_wait() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.close_wait = Duration::ZERO;
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let (_msg, _buf) = split_started(&mut a, &mut b, 14); // CTS|SPLIT out
    a.progress(); // pushed, PUSHED out
    let mut idles = 0;
    b.inner.close_with(&mut || idles += 1);
    assert_eq!(idles, 0);
    assert_eq!(ops(&net), vec![op::RTS, op::CTS, op::PUSHED, op::BYE]);
}

/// `a` sends one `len`-byte message to `b` with `split_min` and
/// `split_lone_min` set on `b`: the records exchanged and the pushes `a`
/// made, after checking the message arrived whole.
fn one_message(len: usize, min: usize, lone_min: usize) -> (Vec<u8>, usize) {
    let (ops, _, pushes) = one_message_with(len, 3, |c| (c.split_min, c.split_lone_min) = (min, lone_min));
    (ops, pushes)
}

/// `a` sends one `len`-byte message to `b` with `set` applied to both
/// endpoints' configuration, `rounds` rounds of passes: the records
/// exchanged, `b`'s pulls and `a`'s pushes, after checking the message
/// arrived whole.
fn one_message_with(len: usize, rounds: usize, set: impl Fn(&mut EpConfig)) -> (Vec<u8>, usize, usize) {
    let mut s = Spec::new(SimOpts::shm());
    set(&mut s.cfg);
    let (net, mut a, mut b) = pair_of(s.clone(), s);
    let msg = pattern(len, 3);
    let mut buf = vec![0u8; len];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    run(&mut [&mut b, &mut a], rounds);
    assert_eq!(buf, msg);
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, len, buf.as_ptr() as usize)]);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    (ops(&net), net.pulls(&b.addr), net.pushes(&a.addr))
}

#[test]
fn a_lone_message_is_split_from_split_lone_min() {
    let split = vec![op::RTS, op::CTS, op::PUSHED, op::ACK];
    let whole = vec![op::RTS, op::ACK];
    // Alone in its pass (a ping-pong): split from split_lone_min.
    assert_eq!(one_message(100_000, 256 << 10, 32 << 10), (split.clone(), 1));
    assert_eq!(one_message(32 << 10, 256 << 10, 32 << 10), (split, 1));
    // Below it, with it off, or with the split off altogether: whole.
    assert_eq!(one_message(30_000, 256 << 10, 32 << 10), (whole.clone(), 0));
    assert_eq!(one_message(100_000, 256 << 10, 0), (whole.clone(), 0));
    assert_eq!(one_message(100_000, 0, 32 << 10), (whole, 0));
}

/// With `stream_lone_max` set (our rings are large), a lone message up to
/// it streams (CTS, DATA records through the ring, ACK: no pull, no push),
/// one above it is split (the lone rule), and messages matched together are
/// still pulled in a batch.
#[test]
fn a_lone_message_up_to_stream_lone_max_streams_through_the_ring() {
    let stream = |len: usize, max: usize| {
        let (mut o, pulls, pushes) = one_message_with(len, 8, |c| {
            (c.split_min, c.split_lone_min, c.stream_lone_max) = (256 << 10, 16 << 10, max)
        });
        o.dedup(); // the DATA records
        (o, pulls, pushes)
    };
    let streamed = vec![op::RTS, op::CTS, op::DATA, op::ACK];
    assert_eq!(stream(100_000, 256 << 10), (streamed.clone(), 0, 0));
    assert_eq!(stream(256 << 10, 256 << 10), (streamed, 0, 0));
    // Above it, or with it off: split (the lone rule).
    let split = vec![op::RTS, op::CTS, op::PUSHED, op::ACK];
    assert_eq!(stream((256 << 10) + 64, 256 << 10), (split.clone(), 1, 1));
    assert_eq!(stream(100_000, 0), (split, 1, 1));
    // Messages matched together are still batched, not streamed.
    matched_together_are_batched(256 << 10);
}

/// Two messages matched together, below `split_min` together: one batch,
/// no message split on its own (no CTS round trip each). From `split_min`
/// bytes a run is split at batch level, by message
/// (`a_window_matched_together_is_split_at_batch_level`).
#[test]
fn messages_matched_together_are_batched_not_split() {
    matched_together_are_batched(0);
}

/// [`messages_matched_together_are_batched_not_split`] with
/// `stream_lone_max` set as given.
fn matched_together_are_batched(stream_lone_max: usize) {
    let mut s = Spec::new(SimOpts::shm());
    s.cfg.split_lone_min = 32 << 10;
    s.cfg.stream_lone_max = stream_lone_max;
    let (net, mut a, mut b) = pair_of(s.clone(), s);
    let msgs: Vec<Vec<u8>> = (0..2).map(|i| pattern(100_000, 20 + i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; 100_000]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress(); // both RTS in one pass: one batch, no CTS|SPLIT
    assert_eq!(b.rx_ok().len(), 2);
    assert_eq!(bufs, msgs);
    assert_eq!((net.pulls(&b.addr), net.pull_batches(&b.addr)), (2, 1));
    a.progress();
    assert_eq!(a.tx_ok().len(), 2);
    assert_eq!(net.pushes(&a.addr), 0);
    assert!(!ops(&net).contains(&op::CTS));
}

/// `n` messages of `len` bytes from `a` to `b` (contexts `i` and `10 + i`),
/// all matched in `b`'s one pass, with `split_min` on both: the network,
/// the messages, the receive buffers and both endpoints after that pass.
fn window(n: usize, len: usize, min: usize) -> (Net, Vec<Vec<u8>>, Vec<Vec<u8>>, Ep, Ep) {
    let mut s = Spec::new(SimOpts::shm());
    (s.cfg.split_min, s.cfg.split_lone_min) = (min, 16 << 10);
    let (net, mut a, mut b) = pair_of(s.clone(), s);
    let msgs: Vec<Vec<u8>> = (0..n).map(|i| pattern(len, 30 + i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; len]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress();
    (net, msgs, bufs, a, b)
}

/// The receive completions of contexts `ctxs` into `bufs`, in that order.
fn recvs(bufs: &[Vec<u8>], ctxs: std::ops::Range<usize>, len: usize) -> Vec<Comp> {
    ctxs.map(|i| Comp::recv(10 + i, MRECV, len, bufs[i].as_ptr() as usize))
        .collect()
}

/// A window of messages matched together (a run of one sender's pulls of
/// at least `split_min` bytes) is split at batch level: the receiver pulls
/// the first half of the messages in one batch while the sender pushes the
/// last half, whole, in one batch of its own; every message arrives whole
/// and the receives complete in order.
#[test]
fn a_window_matched_together_is_split_at_batch_level() {
    const N: usize = 8;
    const LEN: usize = 40_000; // 320,000 bytes in all: above split_min
    let (net, msgs, bufs, mut a, mut b) = window(N, LEN, 256 << 10);
    // The pulled half completes at once, in order; the rest is the sender's.
    assert_eq!(b.rx_ok(), recvs(&bufs, 0..N / 2, LEN));
    assert_eq!(bufs[..N / 2], msgs[..N / 2]);
    assert!(bufs[N / 2..].iter().all(|m| m.iter().all(|&x| x == 0)));
    assert_eq!((net.pulls(&b.addr), net.pull_batches(&b.addr)), (N / 2, 1));
    // One CTS|SPLIT per pushed message, whole (offset 0), in order.
    let log = net.log();
    let rts: Vec<WireHdr> = log.iter().map(|r| r.hdr).filter(|h| h.op == op::RTS).collect();
    let cts: Vec<WireHdr> = log.iter().map(|r| r.hdr).filter(|h| h.op == op::CTS).collect();
    assert_eq!(rts.len(), N);
    let want: Vec<_> = rts[N / 2..]
        .iter()
        .map(|r| (flag::SPLIT, r.msg_id, 0, LEN as u64))
        .collect();
    let got: Vec<_> = cts.iter().map(|c| (c.flags, c.msg_id, c.offset, c.len)).collect();
    assert_eq!(got, want);
    a.progress(); // the CTS|SPLITs: one push batch, PUSHED for each in order
    assert_eq!((net.pushes(&a.addr), net.push_batches(&a.addr)), (N / 2, 1));
    let pushed: Vec<u64> = net
        .log()
        .iter()
        .filter(|r| r.hdr.op == op::PUSHED)
        .map(|r| r.hdr.msg_id)
        .collect();
    assert_eq!(pushed, rts[N / 2..].iter().map(|r| r.msg_id).collect::<Vec<_>>());
    b.progress(); // the PUSHED answers: the rest completes, in order
    assert_eq!(b.rx_ok(), recvs(&bufs, N / 2..N, LEN));
    assert_eq!(bufs, msgs);
    a.progress();
    assert_eq!(a.tx_ok().len(), N);
    assert_eq!(net.pulls(&b.addr), N / 2, "nothing copied twice");
}

/// A refused push (the sender may not use CMA) costs only the copy: the
/// receiver pulls each message the sender did not push, whole.
#[test]
fn a_refused_batch_push_is_pulled_by_the_receiver() {
    let mut sa = Spec::new(SimOpts::shm());
    sa.sim.cma = Cma::Refused;
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.split_lone_min = 16 << 10;
    let (net, mut a, mut b) = pair_of(sa, sb);
    let msgs: Vec<Vec<u8>> = (0..4).map(|i| pattern(100_000, 40 + i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|_| vec![0u8; 100_000]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    b.progress();
    assert_eq!(b.rx_ok(), recvs(&bufs, 0..2, 100_000));
    run(&mut [&mut a, &mut b], 3);
    assert_eq!(b.rx_ok(), recvs(&bufs, 2..4, 100_000));
    assert_eq!(bufs, msgs);
    assert_eq!(a.tx_ok().len(), 4);
    assert_eq!((net.pulls(&b.addr), net.pushes(&a.addr)), (4, 0));
    let refused = net.log().iter().filter(|r| r.hdr.op == op::PUSHED).count();
    assert_eq!(refused, 2);
}

/// What decides the batch-level split: a run below `split_min` is pulled
/// in one batch, no CTS (no per-message split storm for a few messages
/// matched together); `split_min` 0 turns it off for any run; a run's
/// sender never pushes more than half of its bytes, nor its first
/// message.
#[test]
fn the_batch_split_takes_half_of_a_run_above_split_min_only() {
    let cts_of = |net: &Net| net.log().iter().filter(|r| r.hdr.op == op::CTS).count();
    // 4 x 60,000 = 240,000: below 256 KiB.
    let (net, msgs, bufs, _a, b) = window(4, 60_000, 256 << 10);
    assert_eq!(b.rx_ok().len(), 4);
    assert_eq!(bufs, msgs);
    assert_eq!((cts_of(&net), net.pull_batches(&b.addr)), (0, 1));
    // Off: a window of 1.6 MB, pulled in batches, no CTS.
    let (net, msgs, bufs, _a, b) = window(16, 100_000, 0);
    assert_eq!(b.rx_ok().len(), 16);
    assert_eq!(bufs, msgs);
    assert_eq!(cts_of(&net), 0);
    // Odd sizes: 3 x 100,000: one pushed (two would be more than half).
    let (net, _msgs, _bufs, _a, b) = window(3, 100_000, 256 << 10);
    assert_eq!((b.rx_ok().len(), cts_of(&net)), (2, 1));
}
