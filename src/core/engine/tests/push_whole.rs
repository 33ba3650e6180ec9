//! Rendezvous messages pushed whole behind their RTS (`Hints::push_whole`,
//! docs/protocol.md): a lone message to a peer whose transport prefers it
//! goes in `DATA|PUSH` records right behind the RTS; a receive posted in
//! time takes them with no CTS; an unexpected one drops them and the
//! message moves once a receive matches; a window of sends is pulled in
//! batches as before.

use super::*;
use crate::transport::proto::{flag, op};

use super::rendezvous::ops;

/// Both endpoints like shm with large rings: lone messages stream up to
/// 256 KiB, and the transport takes messages up to 64 KiB whole.
fn spec() -> Spec {
    let mut s = Spec::new(SimOpts::shm());
    s.sim.push_whole = 64 << 10;
    s.cfg.stream_lone_max = 256 << 10;
    s
}

/// DATA records that carried `flag::PUSH`, and their payload bytes.
fn pushed(net: &Net) -> (usize, usize) {
    let log = net.log();
    let recs = log
        .iter()
        .filter(|r| r.hdr.op == op::DATA && r.hdr.flags & flag::PUSH != 0);
    recs.fold((0, 0), |(n, b), r| (n + 1, b + r.hdr.payload as usize))
}

#[test]
fn a_lone_message_goes_whole_behind_its_rts_and_a_posted_receive_takes_it_without_cts() {
    let (net, mut a, mut b) = pair_of(spec(), spec());
    let len = 64 << 10;
    let msg = pattern(len, 7);
    let mut buf = vec![0u8; len];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    // The RTS and every chunk are out in the send call itself, and the
    // sender watches the receiver take them (no idle yield meanwhile).
    assert_eq!(pushed(&net), (4, len));
    assert_eq!(net.watches(&a.addr), 1);
    b.progress();
    assert_eq!(buf, msg);
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, len, buf.as_ptr() as usize)]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    let mut o = ops(&net);
    o.dedup();
    assert_eq!(o, vec![op::RTS, op::DATA, op::ACK]);
    assert_eq!(net.pulls(&b.addr), 0);
}

/// An RTS that meets no receive: its pushed records are dropped, and once a
/// receive matches, the message (alone) is streamed on the receiver's CTS.
/// With a ring that holds only part of it (24 KiB), the sender is still
/// pushing when the CTS comes, and streams from the start for it.
#[test]
fn an_unexpected_pushed_message_moves_once_a_receive_matches_even_mid_push() {
    for window in [256 << 10, 24 << 10] {
        let mut s = spec();
        s.sim.window = window;
        let (net, mut a, mut b) = pair_of(s.clone(), s);
        let len = 64 << 10;
        let msg = pattern(len, 11);
        a.send(sargs(B, &msg, 1)).unwrap();
        assert_eq!(pushed(&net).1 < len, window < len, "window {window}");
        b.progress(); // RTS unexpected, what was pushed dropped
        assert_eq!(b.rx_ok(), vec![]);
        let mut buf = vec![0u8; len];
        b.recv(rargs(&mut buf, 2)).unwrap();
        run(&mut [&mut b, &mut a], 12);
        assert_eq!(buf, msg, "window {window}");
        assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, len, buf.as_ptr() as usize)]);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
        assert!(ops(&net).contains(&op::CTS));
    }
}

#[test]
fn only_a_lone_send_is_pushed_whole_a_window_is_pulled() {
    let (net, mut a, mut b) = pair_of(spec(), spec());
    let len = 64 << 10;
    let msgs: Vec<Vec<u8>> = (0..3).map(|i| pattern(len, 20 + i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; len]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().enumerate() {
        a.send(sargs(B, m, i)).unwrap();
    }
    run(&mut [&mut b, &mut a], 4);
    assert_eq!(bufs, msgs);
    assert_eq!(b.rx_ok().len(), 3);
    assert_eq!(a.tx_ok().len(), 3);
    // The first went whole; the two behind it waited on the same peer.
    assert_eq!(pushed(&net), (4, len));
    assert_eq!(net.pulls(&b.addr), 2);
}

#[test]
fn above_push_whole_or_without_lone_streaming_nothing_is_pushed() {
    for (len, lone_max) in [((64 << 10) + 1, 256 << 10), (64 << 10, 0)] {
        let mut s = spec();
        s.cfg.stream_lone_max = lone_max;
        let (net, mut a, mut b) = pair_of(s.clone(), s);
        let msg = pattern(len, 5);
        let mut buf = vec![0u8; len];
        b.recv(rargs(&mut buf, 2)).unwrap();
        a.send(sargs(B, &msg, 1)).unwrap();
        run(&mut [&mut b, &mut a], 4);
        assert_eq!(buf, msg);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
        assert_eq!(pushed(&net), (0, 0), "len {len}, stream_lone_max {lone_max}");
    }
}

/// A sender that closes its endpoint while its message is half pushed (the
/// ring had room for part of it): its BYE fails the receive
/// (`FI_ECONNRESET`), which would otherwise wait on a process that lives on.
#[test]
fn a_senders_close_fails_a_receive_it_was_pushing_into() {
    let mut s = spec();
    s.sim.window = 24 << 10;
    let (net, mut a, mut b) = pair_of(s.clone(), s);
    let len = 64 << 10;
    let msg = pattern(len, 17);
    let mut buf = vec![0u8; len];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress(); // matched: the pushed part in, the rest to come
    assert!(b.inner.waits_on_peers());
    a.inner.close();
    b.progress();
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            olen: len,
            ..ErrComp::new(2, MRECV, FI_ECONNRESET)
        }]
    );
    assert!(!b.inner.waits_on_peers());
    assert!(ops(&net).contains(&op::BYE));
}
