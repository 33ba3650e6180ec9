//! Records through rings: laps, rewinds, large rings, a full /dev/shm, corruption.

use super::*;

#[test]
fn eager_round_trip_between_ports() {
    let mut a = port();
    let mut b = port();
    let msg: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let mut h = eager(&msg);
    h.tag = 77;
    a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
    let mut got = Vec::new();
    b.poll_records(&mut |r| {
        assert_eq!(r.src, a.addr());
        assert_eq!(r.hdr.tag, 77);
        got = r.payload_vec();
        Disposition::Consumed
    });
    assert_eq!(got, msg);
    // Stall leaves the record for later.
    a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
    let mut seen = 0;
    b.poll_records(&mut |_| {
        seen += 1;
        Disposition::Stall
    });
    b.poll_records(&mut |_| {
        seen += 1;
        Disposition::Consumed
    });
    assert_eq!(seen, 2);
    b.poll_records(&mut |_| panic!("record delivered twice"));
}

#[test]
fn records_straddling_the_ring_end_arrive_whole() {
    // Multi-cell records of sizes that do not divide the ring: over
    // several laps some start near its end and wrap (write_record's and
    // copy_to_iov's loop path), most do not (their plain-copy path,
    // `Ring::linear`). Every byte is checked, read whole, into two
    // segments, and from an offset. With a compact tagged header (24
    // bytes): 6, 17 and 40 bytes take one cell, 41, 64, 65, 100 and 104
    // two (fixed-size copies), 105 three.
    let mut a = port();
    let mut b = port();
    let sizes = [17usize, 100, 500, 3000, 64, 65, 6, 40, 41, 104, 105];
    let mut cells = 0u64;
    let mut i = 0usize;
    while cells < 5 * segment::NCELLS as u64 {
        let n = sizes[i % sizes.len()];
        let msg: Vec<u8> = (0..n).map(|k| (k * 7 + i * 13) as u8).collect();
        let mut h = eager(&msg);
        h.tag = i as u64;
        a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).unwrap();
        cells += ring::cells_for(proto::compact_len(h.flags) + n);
        let mut seen = 0;
        b.poll_records(&mut |r| {
            seen += 1;
            assert_eq!(r.hdr.tag, i as u64);
            assert!(r.payload_vec() == msg, "record {i} ({n} B): payload_vec differs");
            let mut whole = vec![0u8; n];
            // SAFETY: `whole` holds n writable bytes.
            let got = unsafe { r.copy_to_iov(0, n, &IovList::single(whole.as_mut_ptr() as usize, n), 0) };
            assert!(got == n && whole == msg, "record {i} ({n} B): copy_to_iov differs");
            let (mut x, mut y) = (vec![0u8; n / 3], vec![0u8; n]);
            let mut two = IovList::new();
            two.push(x.as_mut_ptr() as usize, x.len());
            two.push(y.as_mut_ptr() as usize, y.len());
            // From byte 5 of the payload into byte 1 of the list.
            // SAFETY: both segments are ours and writable.
            let got = unsafe { r.copy_to_iov(5, n - 5, &two, 1) };
            assert_eq!(got, n - 5);
            let mut joined = x.clone();
            joined.extend_from_slice(&y);
            assert!(
                joined[1..n - 4] == msg[5..],
                "record {i} ({n} B): copy from an offset differs"
            );
            Disposition::Consumed
        });
        assert_eq!(seen, 1);
        i += 1;
    }
}

/// A receiver with large rings (`with_ring_cells`): the sender takes
/// the ring's size from its segment, large records sent one at a time
/// are never rewound (each goes right after the last, round the whole
/// ring), and all arrive whole and in order over several laps.
#[test]
fn large_rings_are_gone_round_without_rewinding() {
    let mut a = port();
    let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
    let token = b.token();
    let n_cells = 16384u64;
    // Eager records larger than ring::EMPTY_REWIND_MAX cells, one at a
    // time (the ring empty at every send, as in a ping-pong), and a small
    // one now and then.
    let sizes = [16000usize, 8300, 12000, 300, 16000, 9000];
    let (mut sent, mut next, mut wraps) = (0usize, 0usize, 0);
    let msg_of = |i: usize| -> Vec<u8> { (0..sizes[i % sizes.len()]).map(|k| (k * 7 + i * 13) as u8).collect() };
    while sent < 1500 {
        let msg = msg_of(sent);
        let mut h = eager(&msg);
        h.tag = sent as u64;
        let before = a.peer(token).map(|p| p.tail).unwrap_or(0);
        a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).expect("send");
        let p = a.peer(token).unwrap();
        assert_eq!(
            p.ring.ncells(),
            n_cells,
            "the sender did not take the owner's ring size"
        );
        let cells = ring::cells_for(proto::compact_len(h.flags) + msg.len());
        // A small record at the small lap may go back to the first
        // cell (`small_records_keep_the_default_lap_in_large_rings`).
        let small_lap = cells < ring::REWIND_MIN
            && (before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN
            && p.tail % n_cells == cells;
        assert!(
            p.tail == before + cells || small_lap,
            "record {sent} was not written right after the last"
        );
        if !small_lap && ((before % n_cells) + cells > n_cells || p.tail % n_cells < before % n_cells) {
            wraps += 1;
        }
        sent += 1;
        b.poll_records(&mut |r| {
            assert_eq!(r.hdr.tag, next as u64, "record lost, doubled or out of order");
            assert!(r.payload_vec() == msg_of(next), "record {next}: payload differs");
            next += 1;
            Disposition::Consumed
        });
    }
    assert_eq!(next, sent, "each record is taken in the pass right after it");
    assert!(b.take_events().is_empty(), "the receiver failed the sender");
    assert!(wraps >= 5, "went round the ring {wraps} times");
}

/// Where /dev/shm has no room for the rest of a large ring (past the
/// small lap), the sender stays within the cells it has for good:
/// records that do not fit before `ring::SMALL_LAP` go
/// back to the first cell, in a ping-pong and in a stream (which waits
/// for the consumer when it cannot), every record arrives whole and in
/// order, and nothing past the small lap is written — its pages stay
/// holes in the segment file (a write there would have raised SIGBUS
/// in a full /dev/shm).
#[test]
fn a_full_dev_shm_keeps_a_sender_within_the_cells_its_claim_allocated() {
    use std::os::unix::fs::MetadataExt;
    let mut a = port();
    let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
    let (token, baddr) = (b.token(), b.addr());
    let path = format!("/dev/shm{}", segment::seg_name(token).to_str().unwrap());
    let resident = || std::fs::metadata(&path).unwrap().blocks() * 512;
    let (mut sent, mut next) = (0u64, 0u64);
    // Records of `len` bytes, each its tag's low byte throughout.
    let mut send = |a: &mut ShmPort, len: usize| -> Result<u64> {
        let msg = vec![sent as u8; len];
        let mut h = eager(&msg);
        h.tag = sent;
        a.send_record(&baddr, &h, Payload::Bytes(&msg))?;
        sent += 1;
        Ok(a.peer(token).unwrap().tail)
    };
    let mut drain = |b: &mut ShmPort| {
        b.poll_records(&mut |r| {
            assert_eq!(r.hdr.tag, next, "record lost, doubled or out of order");
            assert_eq!(r.payload_vec(), vec![r.hdr.tag as u8; r.hdr.len as usize]);
            next += 1;
            Disposition::Consumed
        });
    };
    send(&mut a, 1).unwrap();
    drain(&mut b);
    let after_claim = resident();
    let p = a.peer(token).unwrap();
    assert_eq!(p.reserved, ring::RESERVE_FIRST);
    p.seg
        .no_room_from
        .store(ring::SMALL_LAP, core::sync::atomic::Ordering::Relaxed);
    // A ping-pong of records too large to rewind in a large ring
    // (more than ring::EMPTY_REWIND_MAX cells), then of middle ones.
    for len in [16000usize, 4000, 900] {
        for _ in 0..40 {
            let tail = send(&mut a, len).expect("a ping-pong never waits");
            assert!(tail % 16384 < ring::SMALL_LAP, "a record reached cell {}", tail % 16384);
            drain(&mut b);
        }
    }
    assert!(a.peer(token).unwrap().confined);
    // Streams: as many as the cells take, then the consumer drains.
    for len in [16000usize, 1000, 8] {
        for _ in 0..6 {
            let mut n = 0;
            while let Ok(tail) = send(&mut a, len) {
                assert!(tail % 16384 < ring::SMALL_LAP, "a record reached cell {}", tail % 16384);
                n += 1;
            }
            assert!(n > 0, "a stream of {len}-byte records sent nothing");
            drain(&mut b);
        }
    }
    assert_eq!(next, sent);
    assert!(b.take_events().is_empty(), "the receiver failed the sender");
    let grown = resident() - after_claim;
    let small_lap = ring::SMALL_LAP * ring::CELL as u64;
    assert!(
        grown <= small_lap + 4096,
        "{grown} bytes allocated, more than the small lap"
    );
}

/// Without room in /dev/shm for the cells a ring needs to work at all
/// (`ring::RESERVE_WORKING`), a send that needs them fails with
/// -FI_ENOMEM and the peer fails for good; and the pair fails both
/// ways: the owner drains what it sent, then fails it as a peer
/// (what it waits on from it, an ACK or a CTS, cannot come), and ends
/// its own ring to it as at a close (a BYE) or never opens one.
#[test]
fn no_room_for_a_working_ring_fails_the_pair_both_ways() {
    for b_sent_first in [true, false] {
        let mut a = port();
        let mut b = port();
        let (token, aaddr, baddr) = (b.token(), a.addr(), b.addr());
        let one = eager(&[1]);
        if b_sent_first {
            b.send_record(&aaddr, &one, Payload::Bytes(&[1])).unwrap();
        }
        a.send_record(&baddr, &one, Payload::Bytes(&[1])).unwrap();
        a.peer(token)
            .unwrap()
            .seg
            .no_room_from
            .store(ring::RESERVE_FIRST, core::sync::atomic::Ordering::Relaxed);
        let big = vec![2u8; 8000];
        assert_eq!(
            a.send_record(&baddr, &eager(&big), Payload::Bytes(&big)),
            Err(Error::NOMEM)
        );
        assert_eq!(a.take_events(), vec![PeerEvent::NoRoom(baddr)]);
        assert_eq!(
            a.send_record(&baddr, &one, Payload::Bytes(&[1])),
            Err(Error::CONNRESET),
            "the peer stays failed"
        );
        assert_eq!(ops(&mut b), vec![op::EAGER], "what was sent before arrives");
        assert_eq!(
            b.take_events(),
            vec![PeerEvent::Failed(aaddr)],
            "b_sent_first {b_sent_first}"
        );
        assert_eq!(
            b.send_record(&aaddr, &one, Payload::Bytes(&[1])),
            Err(Error::CONNRESET),
            "b's ring to a ends too"
        );
        let want = if b_sent_first { vec![op::EAGER, op::BYE] } else { vec![] };
        assert_eq!(ops(&mut a), want, "b_sent_first {b_sent_first}");
    }
}

/// No room for even the first page of a ring to a peer we owe a reply
/// (a control record): the reply is lost, so we fail the peer for
/// good and tell its owner by a datagram, which it believes only from
/// the process whose segment the named token is, and fails us in turn.
#[test]
fn a_reply_with_no_room_for_its_ring_fails_the_pair_both_ways() {
    let mut a = port();
    let mut b = port();
    let (aaddr, baddr) = (a.addr(), b.addr());
    let one = eager(&[1]);
    b.send_record(&aaddr, &one, Payload::Bytes(&[1])).unwrap();
    a.peers.no_room_for_claims = true;
    assert_eq!(
        a.send_record(&baddr, &one, Payload::Bytes(&[1])),
        Err(Error::NOMEM),
        "a send of our own only fails"
    );
    assert_eq!(a.take_events(), vec![]);
    // A refusal naming a token that has no segment: not believed.
    let seg = Segment::open(b.token()).unwrap();
    let bell = DoorbellAddr::new(&segment::doorbell_path(b.token())).unwrap();
    tell_owner(
        &a.ring_tx,
        &seg,
        &bell,
        &segment::refusal_bytes(b.token(), 12345, 12),
        "test",
    );
    seg.nudge();
    b.poll_records(&mut |_| Disposition::Consumed);
    assert_eq!(b.take_events(), vec![]);
    let ack = WireHdr::new(op::ACK);
    assert_eq!(a.send_ctl(&baddr, &ack), Err(Error::NOMEM));
    assert_eq!(a.take_events(), vec![PeerEvent::NoRoom(baddr)]);
    a.peers.no_room_for_claims = false;
    assert_eq!(
        a.send_record(&baddr, &one, Payload::Bytes(&[1])),
        Err(Error::CONNRESET),
        "for good"
    );
    assert_eq!(ops(&mut b), vec![]);
    assert_eq!(b.take_events(), vec![PeerEvent::Failed(aaddr)]);
    assert_eq!(
        b.send_record(&aaddr, &one, Payload::Bytes(&[1])),
        Err(Error::CONNRESET),
        "b's ring to a ends too"
    );
}

/// In a large ring small records keep the default ring's lap: taken
/// one at a time (a ping-pong: the ring empty at every send) they go
/// back to the first cell at `ring::SMALL_REWIND_AT`, never reaching
/// `ring::SMALL_LAP` (where the pages a claim allocates end), while large
/// records go on round the whole ring from wherever the tail is; a
/// stream of small records goes back at the small lap too when the
/// consumer left the start free. Every record arrives whole and in
/// order.
#[test]
fn small_records_keep_the_default_lap_in_large_rings() {
    let mut a = port();
    let mut b = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
    let token = b.token();
    let baddr = b.addr();
    let n_cells = 16384u64;
    let (mut sent, mut next) = (0u64, 0u64);
    let mut send = |a: &mut ShmPort, msg: &[u8]| -> (u64, u64) {
        let before = a.peer(token).map(|p| p.tail).unwrap_or(0);
        let mut h = eager(msg);
        h.tag = sent;
        a.send_record(&baddr, &h, Payload::Bytes(msg)).expect("send");
        sent += 1;
        (before, a.peer(token).unwrap().tail)
    };
    let mut drain = |b: &mut ShmPort| {
        b.poll_records(&mut |r| {
            assert_eq!(r.hdr.tag, next, "record lost, doubled or out of order");
            assert_eq!(r.payload_vec().len(), r.hdr.len as usize);
            next += 1;
            Disposition::Consumed
        });
    };
    // A small ping-pong: never past the small lap, and back at the start.
    let (mut rewinds, mut furthest) = (0, 0);
    for _ in 0..3 * ring::SMALL_LAP {
        let (before, after) = send(&mut a, b"x");
        furthest = furthest.max(after % n_cells);
        if after % n_cells < before % n_cells {
            assert!(
                (before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN,
                "rewound at {before}"
            );
            rewinds += 1;
        }
        drain(&mut b);
    }
    assert!(rewinds >= 2, "small records rewound {rewinds} times");
    assert!(furthest < ring::SMALL_LAP, "small records reached cell {furthest}");
    // Eager records up to ring::EMPTY_REWIND_MAX cells in a ping-pong
    // rewind as in a default ring: two places in turn.
    let mid = vec![5u8; 4000];
    let mut places = std::collections::BTreeSet::new();
    for _ in 0..64 {
        let (_, after) = send(&mut a, &mid);
        places.insert(after % n_cells);
        drain(&mut b);
    }
    assert!(
        places.len() <= 3,
        "4000-byte records in a ping-pong took {} places",
        places.len()
    );
    // Larger ones in a ping-pong: each right after the last, past the
    // small lap and round the ring.
    let big = vec![7u8; 16000];
    assert!(ring::cells_for(proto::compact_len(eager(&big).flags) + big.len()) > ring::EMPTY_REWIND_MAX);
    let mut past = false;
    for _ in 0..n_cells / 128 {
        let (before, after) = send(&mut a, &big);
        assert_eq!(
            after,
            before + ring::cells_for(proto::compact_len(eager(&big).flags) + big.len()),
            "a large record rewound"
        );
        past |= after % n_cells > 4 * ring::SMALL_LAP;
        drain(&mut b);
    }
    assert!(past, "large records stayed within the small lap");
    // Small records one at a time up to just before the small lap (round
    // the ring's end first if the large ones left the tail past it),
    // then streamed across it with nothing consumed: the consumer left
    // the start of the ring free, so the stream too goes back there at
    // the small lap, as in a default ring.
    while !(ring::SMALL_LAP - 200..ring::SMALL_LAP - 100).contains(&(a.peer(token).unwrap().tail % n_cells)) {
        send(&mut a, b"y");
        drain(&mut b);
    }
    let mut streamed_back = false;
    for _ in 0..300 {
        let (before, after) = send(&mut a, b"z");
        if after != before + 1 {
            assert!((before % n_cells).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN && after % n_cells == 1);
            streamed_back = true;
        }
    }
    assert!(streamed_back, "the stream did not go back at the small lap");
    drain(&mut b);
    assert_eq!(next, sent);
    assert!(b.take_events().is_empty(), "the receiver failed the sender");
}

/// Large records go back to the ring's first cell when the receiver
/// has left room there (ring.rs, rewinding; segment version 6), with
/// the receiver keeping up or several records behind, stalling now and
/// then: every record arrives once, whole, in order, and the sender did
/// rewind (its tail went back to the ring's start from far before its
/// end) as well as go on round the ring.
#[test]
fn large_records_rewind_and_arrive_whole_in_order() {
    let mut a = port();
    let mut b = port();
    let token = b.token();
    // Records of 400 at a time: large and small mixed (rewinding), then
    // small ones only (300 bytes, 6 cells: no rewind), which take the
    // sender round the ring.
    let size = |i: usize| {
        let sizes = [4096usize, 1000, 4096, 17, 2000, 16000, 4096, 300, 8000];
        if (i / 400).is_multiple_of(2) {
            sizes[i % sizes.len()]
        } else {
            300
        }
    };
    let n_cells = segment::NCELLS as u64;
    let (mut rewinds, mut wraps) = (0, 0);
    let mut sent = 0usize;
    let mut next = 0usize;
    for round in 1..10_000usize {
        if sent == 1600 {
            break;
        }
        // A batch of 1 to 4 records before the receiver looks, or as
        // many as the ring takes (so that it goes round).
        let batch = if round % 10 == 0 { 64 } else { 1 + round % 4 };
        for _ in 0..batch {
            let n = size(sent);
            let msg: Vec<u8> = (0..n).map(|k| (k * 3 + sent * 11) as u8).collect();
            let mut h = eager(&msg);
            h.tag = sent as u64;
            let before = a.peer(token).unwrap().tail;
            match a.send_record(&b.addr(), &h, Payload::Bytes(&msg)) {
                Ok(()) => {}
                Err(e) if e == Error::AGAIN => break,
                Err(e) => panic!("send: {e:?}"),
            }
            let p = a.peer(token).unwrap();
            let cells = ring::cells_for(proto::compact_len(h.flags) + n);
            let (from, to) = (before % n_cells, p.tail % n_cells);
            if to == cells && from != 0 && n_cells - from >= cells {
                rewinds += 1;
            } else if to < from {
                wraps += 1;
            }
            sent += 1;
        }
        // Every fifth look stalls on its first record once.
        let mut stall = round.is_multiple_of(5);
        b.poll_records(&mut |r| {
            if stall {
                stall = false;
                return Disposition::Stall;
            }
            let i = next;
            let n = size(i);
            assert_eq!(r.hdr.tag, i as u64, "record lost, doubled or out of order");
            let msg: Vec<u8> = (0..n).map(|k| (k * 3 + i * 11) as u8).collect();
            assert!(r.payload_vec() == msg, "record {i} ({n} B): payload differs");
            next += 1;
            Disposition::Consumed
        });
    }
    for _ in 0..sent {
        if next == sent {
            break;
        }
        b.poll_records(&mut |r| {
            assert_eq!(r.hdr.tag, next as u64, "record lost, doubled or out of order");
            next += 1;
            Disposition::Consumed
        });
    }
    assert!(b.take_events().is_empty(), "the receiver failed the sender");
    assert_eq!(next, sent, "records not delivered");
    assert!(rewinds > 20, "{rewinds} rewinds");
    assert!(wraps > 0, "never went round the ring");
}

/// A rewind marker at a lap's first cell would skip a whole lap: the
/// receiver fails that sender instead (a hostile or broken sender).
#[test]
fn a_rewind_marker_at_the_ring_start_is_corruption() {
    let mut a = port();
    let mut b = port();
    let token = b.token();
    let msg = [1u8; 8];
    a.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).unwrap();
    b.poll_records(&mut |_| Disposition::Consumed);
    let p = a.peer(token).unwrap();
    assert_eq!(p.tail, 1);
    // A marker at the next lap's first cell (where the consumed record
    // was), then one at the tail (cell 1) sending the receiver there.
    // SAFETY: we are the ring's producer and the ring is empty: both
    // cells are free.
    unsafe {
        p.ring.publish_rewind(segment::NCELLS as u64);
        p.ring.publish_rewind(1);
    }
    let mut seen = 0;
    b.poll_records(&mut |_| {
        seen += 1;
        Disposition::Consumed
    });
    assert_eq!(seen, 0);
    let ev = b.take_events();
    assert!(
        matches!(ev.as_slice(), [PeerEvent::Failed(x)] if *x == a.addr()),
        "{ev:?}"
    );
}

#[test]
fn sends_alternating_between_peers_reach_each_its_own() {
    // The last peer used is remembered (`Peers::last`): a send to any
    // other peer must find that peer's own ring, in either order.
    let mut a = port();
    let mut b = port();
    let mut c = port();
    let (ab, ac) = (b.addr(), c.addr());
    for (tag, to) in [ab, ac, ac, ab, ac, ab].iter().enumerate() {
        let mut h = eager(&[tag as u8]);
        h.tag = tag as u64;
        a.send_record(to, &h, Payload::Bytes(&[tag as u8])).unwrap();
    }
    let tags = |p: &mut ShmPort| {
        let mut v = Vec::new();
        p.poll_records(&mut |r| {
            assert_eq!(r.src, a.addr());
            assert_eq!(r.payload_vec(), vec![r.hdr.tag as u8]);
            v.push(r.hdr.tag);
            Disposition::Consumed
        });
        v
    };
    assert_eq!(tags(&mut b), vec![0, 3, 5]);
    assert_eq!(tags(&mut c), vec![1, 2, 4]);
}

#[test]
fn records_of_a_sender_that_closed_before_our_first_pass_are_delivered() {
    // The sender claims a slot, writes, and closes (its process exits)
    // before the owner polls once: fabtests fi_multi_ep lost its
    // finalize message this way (the owner skipped closed slots when
    // discovering new ones, and the slot leaked).
    let mut a = port();
    let mut b = port();
    let mut h = WireHdr::new(op::EAGER);
    h.len = 4;
    h.tag = 9;
    a.send_record(&b.addr(), &h, Payload::Bytes(&[1, 2, 3, 4])).unwrap();
    a.close();
    let mut got = Vec::new();
    for _ in 0..3 {
        b.poll_records(&mut |r| {
            got.push((r.hdr.op, r.payload_vec()));
            Disposition::Consumed
        });
    }
    assert_eq!(got.first(), Some(&(op::EAGER, vec![1, 2, 3, 4])));
    // The drained closed slot went back to the pool.
    assert_eq!(b.inbound.iter().count(), 0);
}

#[test]
fn ring_full_gives_again_then_recovers() {
    let mut a = port();
    let mut b = port();
    let msg = vec![5u8; EAGER_MAX];
    let mut h = WireHdr::new(op::EAGER);
    h.len = msg.len() as u64;
    let mut sent = 0;
    while a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok() {
        sent += 1;
        assert!(sent < 1000);
    }
    assert!(sent >= 7);
    let mut n = 0;
    b.poll_records(&mut |_| {
        n += 1;
        Disposition::Consumed
    });
    assert_eq!(n, sent);
    assert!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok());
}

#[test]
fn a_pass_reports_whether_a_peer_moved() {
    // The CQ's idle rule (core/cq.rs) yields only while no peer moves:
    // a record consumed, or room made in the ring a send was refused
    // on, counts; a pass with neither does not.
    let mut a = port();
    let mut b = port();
    let none = |_: InRecord<'_>| -> Disposition { panic!("nothing was sent to a") };
    assert!(!a.poll_records(&mut none.clone()), "nothing moved");
    let (h, msg) = fill(&mut a, &b);
    assert!(!a.poll_records(&mut none.clone()), "b has consumed nothing");
    let mut n = 0;
    let moved = b.poll_records(&mut |_| {
        n += 1;
        if n == 1 {
            Disposition::Consumed
        } else {
            Disposition::Stall
        }
    });
    assert!(moved, "b consumed a record");
    assert!(!b.poll_records(&mut |_| Disposition::Stall), "b consumed nothing more");
    // a fills that room and is refused again before its next pass:
    // the head it saw last stays the one compared.
    assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Ok(()));
    assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
    assert!(a.poll_records(&mut none.clone()), "b made room");
    assert!(!a.poll_records(&mut none.clone()), "b did not move again");
    assert!(a.rare.waiting().is_some());
    assert!(b.poll_records(&mut |_| Disposition::Consumed));
    assert!(a.poll_records(&mut none.clone()), "b took the rest");
    assert!(
        a.rare.waiting().is_none(),
        "a still watches a ring with nothing of its own left"
    );
    assert!(!a.poll_records(&mut none.clone()));
}

#[test]
fn retries_against_a_full_ring_do_not_read_proc_each_time() {
    // A sender spinning on -FI_EAGAIN towards a slow receiver asks
    // whether the receiver lives at most every LIVENESS_PERIOD (a /proc
    // read is three system calls), not on every retry.
    let mut a = port();
    let b = port();
    let (h, msg) = fill(&mut a, &b);
    let t0 = Instant::now();
    let before = sys::PROC_READS.with(|n| n.get());
    for _ in 0..1000 {
        assert_eq!(a.send_record(&b.addr(), &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
    }
    let reads = sys::PROC_READS.with(|n| n.get()) - before;
    let periods = (t0.elapsed().as_millis() / LIVENESS_PERIOD.as_millis()) as u64;
    assert!(reads <= 1 + periods, "{reads} /proc reads for 1000 retries");
}

#[test]
fn corrupt_record_breaks_only_that_peer() {
    let mut a = port();
    let mut c = port();
    let mut b = port();
    // `a` writes a record with a bad version straight into its ring
    // (a word without the magic would not read as published at all).
    let bad = WireHdr {
        version: 0x7e,
        ..WireHdr::new(op::EAGER)
    };
    a.send_record(&b.addr(), &bad, Payload::None).unwrap();
    let mut good = WireHdr::new(op::EAGER);
    good.len = 1;
    c.send_record(&b.addr(), &good, Payload::Bytes(&[9])).unwrap();
    let mut from = vec![];
    b.poll_records(&mut |r| {
        from.push(r.src);
        Disposition::Consumed
    });
    assert_eq!(from, vec![c.addr()]);
    assert_eq!(b.take_events(), vec![PeerEvent::Failed(a.addr())]);
}

/// A sender pushes rendezvous messages whole (`Hints::push_whole`) only into
/// a receiver's large ring: 64 KiB into a 1 MiB ring, nothing into the
/// default 128 KiB one, nothing towards an address that is not shm.
#[test]
fn messages_are_pushed_whole_only_into_large_rings() {
    use crate::transport::Hints;
    let mut a = port();
    let small = port();
    let large = ShmPort::with_ring_cells(crate::transport::addr::shm_token_random(), LIM, 16384).unwrap();
    assert_eq!(Hints::push_whole(&mut a, &large.addr()), 64 << 10);
    assert_eq!(Hints::push_whole(&mut a, &small.addr()), 0);
    let tcp = Addr::Inet("127.0.0.1:1".parse().unwrap());
    assert_eq!(Hints::push_whole(&mut a, &tcp), 0);
}

/// A sender that pushed a message whole and waits for the answer
/// (`Hints::watch_consumer`) sees the receiver's progress through its
/// records as movement, until the receiver has taken them all.
#[test]
fn a_watched_consumer_taking_our_records_counts_as_movement() {
    use crate::transport::Hints;
    let mut a = port();
    let mut b = port();
    let none = |_: InRecord<'_>| -> Disposition { panic!("nothing was sent to a") };
    let msg = vec![5u8; 3000];
    for _ in 0..2 {
        a.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).unwrap();
    }
    assert!(!a.poll_records(&mut none.clone()), "nothing watched");
    Hints::watch_consumer(&mut a, &b.addr());
    assert!(!a.poll_records(&mut none.clone()), "b has consumed nothing");
    let mut n = 0;
    b.poll_records(&mut |_| {
        n += 1;
        if n == 1 {
            Disposition::Consumed
        } else {
            Disposition::Stall
        }
    });
    assert!(a.poll_records(&mut none.clone()), "b took one record");
    assert!(!a.poll_records(&mut none.clone()), "b did not move again");
    b.poll_records(&mut |_| Disposition::Consumed);
    assert!(a.poll_records(&mut none.clone()), "b took the rest");
    assert!(a.rare.waiting().is_none(), "nothing of a's left in b's ring");
}
