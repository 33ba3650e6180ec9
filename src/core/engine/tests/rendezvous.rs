//! Rendezvous: RTS, then a CMA pull or CTS and streamed DATA, then ACK;
//! truncation, unexpected requests, multi-receive, refusals, the records
//! on the wire, and what a confused or hostile peer's records do.

use super::*;
use crate::transport::proto::{flag, op, WireHdr};

/// A send of two segments of `msg` (split at `cut`).
fn split_send(msg: &[u8], cut: usize, ctx: usize) -> SendArgs {
    let mut iov = IovList::new();
    iov.push(msg.as_ptr() as usize, cut);
    iov.push(msg.as_ptr() as usize + cut, msg.len() - cut);
    SendArgs {
        iov,
        ..sargs(B, msg, ctx)
    }
}

/// A receive into two segments of `buf` (split at `cut`).
pub(super) fn split_recv(buf: &mut [u8], cut: usize, ctx: usize) -> RecvArgs {
    let mut iov = IovList::new();
    iov.push(buf.as_mut_ptr() as usize, cut);
    iov.push(buf.as_mut_ptr() as usize + cut, buf.len() - cut);
    RecvArgs { iov, ..rargs(buf, ctx) }
}

pub(super) fn ops(net: &Net) -> Vec<u8> {
    net.log().iter().map(|r| r.hdr.op).collect()
}

#[test]
fn cma_pull_is_one_copy_and_the_ack_completes_the_send() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(100_000, 3);
    let mut buf = vec![0u8; 100_000];
    b.recv(split_recv(&mut buf, 30_000, 2)).unwrap();
    a.send(split_send(&msg, 40_000, 1)).unwrap();
    assert_eq!(a.tx_ok(), vec![], "waits for the ACK");
    b.progress();
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, 100_000, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    assert_eq!(net.pulls(&b.addr), 1);
    assert_eq!(a.tx_ok(), vec![]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    let log = net.log();
    assert_eq!(ops(&net), vec![op::RTS, op::ACK]);
    let (rts, ack) = (log[0].hdr, log[1].hdr);
    assert_eq!(
        (rts.flags, rts.len, rts.aux, rts.payload, rts.offset),
        (flag::CMA_OK, 100_000, 2, 32, 0)
    );
    assert_eq!((ack.msg_id, ack.len, ack.aux, ack.flags), (rts.msg_id, 100_000, 0, 0));
    assert_eq!((log[0].from, log[0].to), (a.addr, b.addr));
}

/// Many streams to one peer whose queue is full: a pass asks the port for
/// room once for that peer, not once per stream (tcp: the 64 streams of
/// `fi_rdm_tagged_bw -W 64` would be 64 hash lookups per pass), and every
/// stream still finishes, in order.
#[test]
fn streams_to_a_full_peer_ask_for_room_once_a_pass() {
    let mut sim = SimOpts::shm();
    sim.cma = super::super::sim::Cma::Refused;
    let (net, mut a, mut b) = pair(sim);
    let msg = pattern(100_000, 5);
    let mut bufs = vec![vec![0u8; 100_000]; 16];
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(rargs(buf, 100 + i)).unwrap();
    }
    for i in 0..16 {
        a.send(sargs(B, &msg, 1 + i)).unwrap();
    }
    b.progress(); // 16 RTS: the pulls are refused, 16 CTS go back
    a.progress(); // CTS: the first streams fill the ring
    let before = net.rooms(&a.addr);
    a.progress(); // nothing drained: no room for any stream
    let asked = net.rooms(&a.addr) - before;
    assert!(asked <= 2, "{asked} room calls in one pass to a full peer");
    run(&mut [&mut b, &mut a], 200);
    assert_eq!(a.tx_ok().len(), 16);
    assert_eq!(b.rx_ok().len(), 16);
    for buf in &bufs {
        assert_eq!(buf, &msg);
    }
}

#[test]
fn without_cma_the_sender_streams_data_chunks() {
    let mut sim = SimOpts::shm();
    sim.cma = super::super::sim::Cma::Refused;
    let (net, mut a, mut b) = pair(sim);
    let msg = pattern(100_000, 4);
    let mut buf = vec![0u8; 100_000];
    b.recv(split_recv(&mut buf, 50_001, 2)).unwrap();
    a.send(split_send(&msg, 12_345, 1)).unwrap();
    b.progress(); // RTS: the pull is refused, CTS goes back
    a.progress(); // CTS: DATA records within the ring's room
    assert_eq!(a.tx_ok(), vec![]);
    b.progress(); // DATA placed, ACK
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, 100_000, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    let log = net.log();
    let rts = log[0].hdr;
    let cts = log[1].hdr;
    assert_eq!(cts.op, op::CTS);
    assert_eq!((cts.msg_id, cts.flags, cts.len, cts.offset), (rts.msg_id, 0, 0, 0));
    let data: Vec<WireHdr> = log.iter().filter(|r| r.hdr.op == op::DATA).map(|r| r.hdr).collect();
    assert_eq!(data.len(), 7, "16 KiB chunks");
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d.offset, i as u64 * 16384);
        assert_eq!(d.len, 100_000);
        assert_eq!(d.aux, cts.aux, "the receiver's handle, echoed");
        assert_eq!(d.msg_id, rts.msg_id);
        assert_eq!(d.flags, if i == 6 { flag::LAST } else { 0 });
        assert_eq!(d.payload as usize, if i == 6 { 100_000 - 6 * 16384 } else { 16384 });
    }
    assert_eq!(log.last().unwrap().hdr.op, op::ACK);
    // The second message to the same peer asks for streaming at once.
    net.clear_log();
    b.recv(rargs(&mut buf, 3)).unwrap();
    a.send(sargs(B, &msg, 4)).unwrap();
    run(&mut [&mut b, &mut a], 3);
    assert_eq!(ops(&net)[..2], [op::RTS, op::CTS]);
    assert_eq!(a.tx_ok().len(), 1);
    assert_eq!(b.rx_ok().len(), 1);
}

#[test]
fn streaming_follows_the_rings_room() {
    let mut sim = SimOpts::shm();
    sim.cma = super::super::sim::Cma::Refused;
    sim.window = 40_000;
    let (net, mut a, mut b) = pair(sim);
    let msg = pattern(300_000, 5);
    let mut buf = vec![0u8; 300_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    let mut passes = 0;
    while b.rx_ok().is_empty() {
        run(&mut [&mut b, &mut a], 1);
        passes += 1;
        assert!(passes < 100);
    }
    assert!(passes > 3, "took several rounds");
    assert_eq!(buf, msg);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    // Each chunk fit the room the ring had when it was written.
    let data = net.log().into_iter().filter(|r| r.hdr.op == op::DATA).count();
    assert!(data > 300_000 / 16384);
}

#[test]
fn tcp_rendezvous_streams_with_queued_writes() {
    let (net, mut a, mut b) = pair(SimOpts::tcp());
    let msg = pattern(200_000, 6);
    let mut buf = vec![0u8; 200_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(SendArgs {
        tagged: true,
        tag: 77,
        ..sargs(B, &msg, 1)
    })
    .unwrap();
    let mut rb = vec![0u8; 200_000];
    b.recv(RecvArgs {
        tagged: true,
        tag: 77,
        ..rargs(&mut rb, 3)
    })
    .unwrap();
    run(&mut [&mut a, &mut b], 12);
    assert_eq!(
        b.rx_ok(),
        vec![Comp {
            tag: 77,
            ..Comp::recv(3, TRECV, 200_000, rb.as_ptr() as usize)
        }]
    );
    assert_eq!(rb, msg);
    assert_eq!(a.tx_ok(), vec![Comp::send(1, TSEND)]);
    let log = net.log();
    assert_eq!(log[0].hdr.flags, flag::TAGGED | flag::CMA_OK);
    assert_eq!(log[1].hdr.op, op::CTS, "TCP senders report no pid: no pull is tried");
    // One chunk: up to the chunk limit (1 MiB) on tcp, not the eager limit.
    let data: Vec<WireHdr> = log.iter().filter(|r| r.hdr.op == op::DATA).map(|r| r.hdr).collect();
    assert_eq!(data.len(), 1, "one chunk");
    assert_eq!(
        (data[0].offset, data[0].payload, data[0].flags & flag::LAST),
        (0, 200_000, flag::LAST)
    );
    b.cancel(2).unwrap();
}

#[test]
fn rendezvous_truncation_pulls_what_fits_and_acks_the_whole() {
    use super::super::sim::Cma::{Pull, Refused};
    // Pulled, streamed, and pushed whole behind the RTS (`push_whole`).
    for (cma, push) in [(Pull, 0), (Refused, 0), (Pull, 128 << 10)] {
        let mut s = Spec::new(SimOpts::shm());
        (s.sim.cma, s.sim.push_whole, s.cfg.stream_lone_max) = (cma, push, push);
        let (net, mut a, mut b) = pair_of(s.clone(), s);
        let msg = pattern(100_000, 7);
        let mut buf = vec![0u8; 30_000];
        b.recv(rargs(&mut buf, 2)).unwrap();
        a.send(SendArgs {
            flags: FI_REMOTE_CQ_DATA,
            data: 42,
            ..sargs(B, &msg, 1)
        })
        .unwrap();
        run(&mut [&mut b, &mut a], 4);
        let (ok, err) = b.rx();
        assert!(ok.is_empty());
        assert_eq!(
            err,
            vec![ErrComp {
                len: 30_000,
                buf: buf.as_ptr() as usize,
                olen: 70_000,
                data: 42,
                ..ErrComp::new(2, MRECV | FI_REMOTE_CQ_DATA, FI_ETRUNC)
            }],
            "{cma:?}"
        );
        assert_eq!(&buf[..], &msg[..30_000]);
        assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)], "{cma:?}");
        let ack = net.log().into_iter().find(|r| r.hdr.op == op::ACK).unwrap();
        assert_eq!((ack.hdr.len, ack.hdr.aux), (30_000, 0));
        let pushed = net
            .log()
            .iter()
            .any(|r| r.hdr.op == op::DATA && r.hdr.flags & flag::PUSH != 0);
        assert_eq!(pushed, push != 0, "{cma:?}");
    }
}

#[test]
fn unexpected_rendezvous_is_pulled_when_the_receive_comes() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    let msg = pattern(70_000, 8);
    a.send(sargs(B, &msg, 1)).unwrap();
    b.progress();
    assert_eq!(net.pulls(&b.addr), 0, "only the descriptor is kept");
    let mut buf = vec![0u8; 70_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    assert_eq!(b.rx_ok(), vec![Comp::recv(2, MRECV, 70_000, buf.as_ptr() as usize)]);
    assert_eq!(buf, msg);
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
}

#[test]
fn multi_recv_takes_rendezvous_messages_at_its_offset() {
    for cma in [super::super::sim::Cma::Pull, super::super::sim::Cma::Refused] {
        let mut sim = SimOpts::shm();
        sim.cma = cma;
        let (_net, mut a, mut b) = pair(sim);
        let mut big = vec![0u8; 250_000];
        let base = big.as_ptr() as usize;
        b.recv(RecvArgs {
            flags: FI_MULTI_RECV,
            ..rargs(&mut big, 9)
        })
        .unwrap();
        let (m1, m2, m3) = (pattern(100_000, 1), pattern(100_000, 2), pattern(100_000, 3));
        a.send(sargs(B, &m1, 1)).unwrap();
        a.send(sargs(B, &m2, 2)).unwrap();
        a.send(sargs(B, &m3, 3)).unwrap();
        run(&mut [&mut b, &mut a], 6);
        let mut got = b.rx_ok();
        got.sort_by_key(|c| c.buf);
        assert_eq!(
            got,
            vec![
                Comp::recv(9, MRECV, 100_000, base),
                Comp::recv(9, MRECV, 100_000, base + 100_000),
                Comp::recv(9, FI_MULTI_RECV, 0, base + 200_000),
            ],
            "{cma:?}"
        );
        assert_eq!(&big[..100_000], &m1[..]);
        assert_eq!(&big[100_000..200_000], &m2[..]);
        // The third waits, unexpected.
        assert_eq!(a.tx_ok().len(), 2);
    }
}

#[test]
fn a_message_above_max_msg_size_is_refused_with_emsgsize() {
    let mut sb = Spec::new(SimOpts::shm());
    sb.cfg.max_msg_size = 50_000;
    let (net, mut a, mut b) = pair_of(Spec::new(SimOpts::shm()), sb);
    let msg = pattern(100_000, 0);
    let mut buf = vec![0u8; 100_000];
    b.recv(rargs(&mut buf, 2)).unwrap();
    a.send(sargs(B, &msg, 1)).unwrap();
    run(&mut [&mut b, &mut a], 2);
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 100_000,
            ..ErrComp::new(1, MSEND, FI_EMSGSIZE)
        }]
    );
    assert_eq!(a.send_count(), (0, 1));
    assert!(b.rx_ok().is_empty(), "the receive stays posted");
    assert_eq!(net.pulls(&b.addr), 0);
    b.cancel(2).unwrap();
}

#[test]
fn a_failed_pull_fails_both_sides_with_its_error() {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    net.pull_fault(&b.addr, Some(Error::IO));
    let msg = pattern(100_000, 0);
    let mut buf = vec![0u8; 100_000];
    b.recv(RecvArgs {
        tagged: true,
        tag: 3,
        ..rargs(&mut buf, 2)
    })
    .unwrap();
    a.send(SendArgs {
        tagged: true,
        tag: 3,
        ..sargs(B, &msg, 1)
    })
    .unwrap();
    run(&mut [&mut b, &mut a], 2);
    assert_eq!(
        b.rx().1,
        vec![ErrComp {
            tag: 3,
            olen: 100_000,
            ..ErrComp::new(2, TRECV, FI_EIO)
        }]
    );
    assert_eq!(
        a.tx().1,
        vec![ErrComp {
            len: 100_000,
            ..ErrComp::new(1, TSEND, FI_EIO)
        }]
    );
}

#[test]
fn hostile_records_cost_nothing_but_themselves() {
    let (net, mut v) = network(&[
        Spec::new(SimOpts::shm()),
        Spec::new(SimOpts::shm()),
        Spec::new(SimOpts::shm()),
    ]);
    let (a, b, c) = (v[0].addr, v[1].addr, v[2].addr);
    let msg = pattern(100_000, 1);
    let mut sim_cma_off = vec![0u8; 100_000];
    v[0].send(sargs(B, &msg, 1)).unwrap();
    let rts = net.log()[0].hdr;
    // An ACK from a third party, an ACK for an unknown message, a CTS from
    // a third party and a CTS for a range outside the message: ignored.
    let mut ack = WireHdr::new(op::ACK);
    ack.msg_id = rts.msg_id;
    net.forge(&c, &a, ack, &[]);
    ack.msg_id = 999;
    net.forge(&b, &a, ack, &[]);
    let mut cts = WireHdr::new(op::CTS);
    cts.msg_id = rts.msg_id;
    net.forge(&c, &a, cts, &[]);
    cts.flags = flag::RANGE;
    cts.offset = 10;
    cts.len = 200_000;
    net.forge(&b, &a, cts, &[]);
    v[0].progress();
    assert_eq!(v[0].tx_ok(), vec![], "still waiting for B");
    assert_eq!(net.log().iter().filter(|r| r.hdr.op == op::DATA).count(), 0);
    // Stray DATA, an RTS whose table is shorter than its length: the first
    // is dropped, the second refused with FI_EIO.
    let mut data = WireHdr::new(op::DATA);
    data.len = 100;
    data.aux = 5;
    net.forge(&c, &b, data, &[7u8; 100]);
    let mut bad = WireHdr::new(op::RTS);
    bad.len = 1000;
    bad.aux = 1;
    bad.msg_id = 55;
    let mut table = Vec::new();
    table.extend_from_slice(&(sim_cma_off.as_mut_ptr() as u64).to_le_bytes());
    table.extend_from_slice(&10u64.to_le_bytes());
    net.forge(&c, &b, bad, &table);
    v[1].recv(rargs(&mut sim_cma_off, 2)).unwrap();
    v[1].progress();
    assert_eq!(v[1].rx_ok().len(), 1, "B's own message from A is unaffected");
    let refusal = net
        .log()
        .into_iter()
        .find(|r| r.hdr.op == op::ACK && r.to == c)
        .expect("an answer to C");
    assert_eq!((refusal.hdr.msg_id, refusal.hdr.aux), (55, Error::IO.0 as u32));
    // A record that fails validation cuts off its sender only.
    let mut broken = WireHdr::new(op::EAGER);
    broken.magic = 0xbad;
    net.forge(&c, &b, broken, &[]);
    v[1].progress();
    assert_eq!(net.broken_links(&b), vec![c]);
    v[0].progress();
    assert_eq!(v[0].tx_ok(), vec![Comp::send(1, MSEND)]);
}

#[test]
fn an_ack_before_the_record_left_completes_it_only_once_written() {
    let mut sa = Spec::new(SimOpts::tcp());
    sa.sim.window = 200;
    let (net, mut a, mut b) = pair_of(sa, Spec::new(SimOpts::tcp()));
    let m = pattern(100, 0);
    a.send(sargs(B, &m, 1)).unwrap();
    a.progress();
    assert_eq!(a.tx_ok(), vec![Comp::send(1, MSEND)]);
    // The next record cannot leave (B has not read the first). An ACK for
    // it now must not complete it before it is written; it is kept (on a
    // real connection the write of a queued record is reported at the next
    // pass, and the answer can be read before that).
    a.send(SendArgs {
        flags: FI_DELIVERY_COMPLETE,
        ..sargs(B, &m, 2)
    })
    .unwrap();
    let id = net.log()[1].hdr.msg_id;
    let mut ack = WireHdr::new(op::ACK);
    ack.msg_id = id;
    net.forge(&b.addr, &a.addr, ack, &[]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![]);
    b.progress();
    a.progress();
    assert_eq!(
        a.tx_ok(),
        vec![Comp::send(2, MSEND)],
        "written: the kept ACK completes it"
    );
    let (mut r1, mut r2) = (vec![0u8; 100], vec![0u8; 100]);
    b.recv(rargs(&mut r1, 3)).unwrap();
    b.recv(rargs(&mut r2, 4)).unwrap();
    run(&mut [&mut b, &mut a], 3);
    assert_eq!(a.tx_ok(), vec![], "the real ACK finds nothing");
    // A second ACK for the same message finds nothing.
    net.forge(&b.addr, &a.addr, ack, &[]);
    a.progress();
    assert_eq!(a.tx_ok(), vec![]);
}

/// Five 100 KB messages matched in one pass: one batched pull copies them
/// all (one `process_vm_readv` on shm), each lands whole in its receive.
/// The split off (else the sender pushes the last two: split.rs).
fn five_pulled(batch: usize, fault: Option<Error>) -> (Net, Vec<Vec<u8>>, Vec<Vec<u8>>, Ep, Ep) {
    let (net, mut a, mut b) = pair(SimOpts::shm());
    b.inner.config_mut().pull_batch_bytes = batch;
    b.inner.config_mut().split_min = 0;
    net.pull_fault(&b.addr, fault);
    let msgs: Vec<Vec<u8>> = (0..5).map(|i| pattern(100_000, 10 + i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..5).map(|_| vec![0u8; 100_000]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.recv(split_recv(buf, 1_000 + i, 10 + i)).unwrap();
    }
    for (i, m) in msgs.iter().enumerate() {
        a.send(split_send(m, 7_000 * (i + 1), i)).unwrap();
    }
    b.progress();
    (net, msgs, bufs, a, b)
}

#[test]
fn rendezvous_messages_matched_together_are_pulled_in_one_batch() {
    let (net, msgs, bufs, mut a, b) = five_pulled(1 << 20, None);
    let got = b.rx_ok();
    assert_eq!(got.len(), 5);
    for (i, c) in got.iter().enumerate() {
        assert_eq!(*c, Comp::recv(10 + i, MRECV, 100_000, bufs[i].as_ptr() as usize));
        assert!(bufs[i] == msgs[i], "message {i} landed whole");
    }
    assert_eq!((net.pulls(&b.addr), net.pull_batches(&b.addr)), (5, 1));
    a.progress();
    assert_eq!(a.tx_ok().len(), 5);
    // A limit of 250 KB: batches of two, two and one (the last alone).
    let (net, msgs, bufs, _a, b) = five_pulled(250_000, None);
    assert_eq!(b.rx_ok().len(), 5);
    assert_eq!(bufs, msgs);
    assert_eq!((net.pulls(&b.addr), net.pull_batches(&b.addr)), (5, 2));
    // 0: one pull per message.
    let (net, msgs, bufs, _a, b) = five_pulled(0, None);
    assert_eq!(b.rx_ok().len(), 5);
    assert_eq!(bufs, msgs);
    assert_eq!((net.pulls(&b.addr), net.pull_batches(&b.addr)), (5, 0));
}

#[test]
fn a_failed_batch_is_pulled_one_by_one_each_with_its_error() {
    let (net, _msgs, bufs, mut a, b) = five_pulled(1 << 20, Some(Error::IO));
    let (ok, err) = b.rx();
    assert_eq!(ok, vec![], "no receive completes with data it did not get");
    assert_eq!(err.len(), 5);
    assert!(err.iter().all(|e| e.err == FI_EIO), "{err:?}");
    assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 0)));
    assert_eq!(net.pull_batches(&b.addr), 0);
    a.progress();
    let (ok, err) = a.tx();
    assert_eq!((ok.len(), err.len()), (0, 5));
}
