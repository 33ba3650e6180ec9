use super::*;
use super::{cma::*, doorbell::*, inbound::*, outbound::*, peer::*, peers::*, port::*, rare, tombs::*};
use super::{ring, segment};
use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::doorbell::{DoorbellAddr, Ringer};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::op;
use crate::transport::proto::{self, Limits, WireHdr, HDR_LEN};
use crate::transport::{Disposition, Payload, PeerEvent, Port, PullJob};
use segment::{Segment, SlotSender, NSLOTS, SLOT_ACTIVE, SLOT_CLOSED, SLOT_FREE};
use std::time::{Duration, Instant};

const LIM: Limits = Limits {
    max_payload: EAGER_MAX,
    max_chunk: EAGER_MAX,
    max_iov: 8,
};

fn port() -> ShmPort {
    ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap()
}

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

/// Fills `a`'s ring towards `b` with eager records.
fn fill(a: &mut ShmPort, b: &ShmPort) -> (WireHdr, Vec<u8>) {
    let msg = vec![5u8; EAGER_MAX];
    let mut h = WireHdr::new(op::EAGER);
    h.len = msg.len() as u64;
    let mut sent = 0;
    while a.send_record(&b.addr(), &h, Payload::Bytes(&msg)).is_ok() {
        sent += 1;
        assert!(sent < 1000);
    }
    (h, msg)
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
fn a_full_ring_whose_owner_closed_fails_at_once() {
    // The owner's closed flag is read on every send (one load): no
    // waiting for the next liveness period. The failure is reported
    // first (the send waits for the endpoint to take it), then sends
    // fail: nobody holds the address.
    let mut a = port();
    let b = port();
    let (h, msg) = fill(&mut a, &b);
    let to = b.addr();
    drop(b);
    assert_eq!(a.send_record(&to, &h, Payload::Bytes(&msg)), Err(Error::AGAIN));
    assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
    assert_eq!(a.send_record(&to, &h, Payload::Bytes(&msg)), Err(Error::CONNRESET));
    assert_eq!(a.send_ctl(&to, &WireHdr::new(op::ACK)), Err(Error::CONNRESET));
    assert!(a.take_events().is_empty());
}

/// An endpoint reopened at a closed one's address (a restarted peer)
/// gets the next send, in a ring of its own segment: the failure of
/// the old incarnation is reported before anything goes to the new one,
/// and nothing written for the old one (a record in its ring, a control
/// record waiting for room) reaches the new one.
#[test]
fn a_peer_reopened_at_its_address_gets_the_next_send_and_nothing_older() {
    let mut a = port();
    let b = port();
    let to = b.addr();
    let Addr::Shm(t) = to else { unreachable!() };
    let (h, msg) = fill(&mut a, &b);
    // A control record for the old incarnation waits for room.
    assert_eq!(a.send_ctl(&to, &WireHdr::new(op::ACK)), Ok(()));
    drop(b);
    let mut b2 = ShmPort::new(t, LIM).unwrap();
    let two = eager(b"two");
    assert_eq!(a.send_record(&to, &two, Payload::Bytes(b"two")), Err(Error::AGAIN));
    assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
    a.send_record(&to, &two, Payload::Bytes(b"two")).unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        b2.poll_records(&mut |r| {
            got.push((r.src, r.hdr.op, r.payload_vec()));
            Disposition::Consumed
        });
        a.poll_records(&mut |_| Disposition::Consumed);
    }
    assert_eq!(got, vec![(a.addr(), op::EAGER, b"two".to_vec())]);
    // And it keeps working both ways.
    a.send_record(&to, &h, Payload::Bytes(&msg)).unwrap();
    b2.send_record(&a.addr(), &two, Payload::Bytes(b"two")).unwrap();
    assert_eq!(ops(&mut b2), vec![op::EAGER]);
    assert_eq!(ops(&mut a), vec![op::EAGER]);
    assert!(a.take_events().is_empty());
}

/// Garbage in an endpoint's header refuses new senders, loudly, until
/// the owner's next look at its header (within SWEEP_ROUNDS eviction
/// rounds) rewrites it; a sender that was there before goes on.
#[test]
fn a_garbage_header_costs_new_senders_only_until_the_owner_rewrites_it() {
    use core::sync::atomic::{AtomicU64, Ordering};
    let mut a = port();
    let mut c = port();
    let mut b = port();
    let one = eager(b"one");
    a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b), vec![op::EAGER]);
    for off in (0..64).step_by(8) {
        // SAFETY: the header's first line, inside the mapping; written
        // as a same-user process would (atomically, not through a
        // reference).
        unsafe { AtomicU64::from_ptr(b.seg.as_ptr().add(off).cast()) }.store(!0, Ordering::Relaxed);
    }
    assert_eq!(
        c.send_record(&b.addr(), &one, Payload::Bytes(b"one")),
        Err(Error::ADDRNOTAVAIL)
    );
    a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
    for _ in 0..(SWEEP_ROUNDS * EVICT_PERIOD) as usize {
        b.poll_records(&mut |_| Disposition::Consumed);
    }
    c.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
    a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b), vec![op::EAGER, op::EAGER]);
    assert!(a.take_events().is_empty() && c.take_events().is_empty());
}

/// Garbage in slots' control lines (as a process of our user could
/// write: a state word with a state none of ours, a closed slot with an
/// abort word no sender writes, garbage identities) costs those slots
/// only, and only until the owner looks: no peer is failed for it (a
/// garbage abort word was taken for a sender giving its ring up, and
/// the peer named by the garbage token refused), the slots come back
/// free, and senders come and go as before.
#[test]
fn garbage_control_lines_cost_only_their_slots() {
    use core::sync::atomic::{AtomicU64, Ordering};
    let mut b = port();
    let line = |slot: usize, words: [u64; 8]| {
        for (k, w) in words.into_iter().enumerate() {
            // SAFETY: the slot's control line (after the 4 KiB header,
            // 64 bytes per slot), inside the mapping; written atomically
            // as a same-user process would.
            unsafe { AtomicU64::from_ptr(b.seg.as_ptr().add(4096 + slot * 64 + k * 8).cast()) }
                .store(w, Ordering::Release);
        }
    };
    let junk = 0x5a5a_5a5a_5a5a_5a5a;
    // Closed, a live pid (ours), an abort word no sender writes.
    line(
        200,
        [
            SLOT_CLOSED | 7 << 8 | (sys::getpid() as u64) << 32,
            junk,
            sys::getpid() as u64,
            1,
            0,
            0xdead_beef,
            junk,
            junk,
        ],
    );
    // A state none of ours.
    line(201, [0xff | junk << 8, junk, junk, junk, junk, junk, junk, junk]);
    b.seg.nudge();
    let t = Instant::now();
    while b.seg.slot_state(200) != SLOT_FREE || b.seg.slot_state(201) != SLOT_FREE {
        assert!(t.elapsed() < Duration::from_secs(5), "garbage slots not freed");
        b.seg.nudge();
        b.poll_records(&mut |_| Disposition::Consumed);
    }
    assert!(b.take_events().is_empty(), "a peer was failed for garbage");
    assert!(b.peers.refused.is_empty(), "a peer was refused for garbage");
    let mut a = port();
    let one = eager(b"one");
    a.send_record(&b.addr(), &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b), vec![op::EAGER]);
    b.send_record(&a.addr(), &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut a), vec![op::EAGER]);
}

/// Mappings of the segment of `token` in this process (/proc/self/maps
/// lines naming it; a removed one's end in " (deleted)").
fn maps_of(token: u64) -> usize {
    let name = segment::seg_name(token).into_string().unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().filter(|l| l.contains(name.as_str())).count()
}

/// A peer that closed its endpoint (after an exchange both ways): once
/// its slot in our segment is seen closed, our mapping of its removed
/// segment goes (its pages with it). A send to its address then reports
/// the failure first and reaches the endpoint reopened there.
#[test]
fn a_closed_peers_segment_is_unmapped_and_its_address_revisited() {
    let mut a = port();
    let mut b = port();
    let (to, t) = (b.addr(), b.token);
    let one = eager(b"one");
    a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
    b.send_record(&a.addr(), &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b), vec![op::EAGER]);
    assert_eq!(ops(&mut a), vec![op::EAGER]);
    assert_eq!(maps_of(t), 2, "b's own mapping and a's");
    drop(b);
    assert_eq!(maps_of(t), 1);
    for _ in 0..4 {
        a.poll_records(&mut |_| Disposition::Consumed);
    }
    assert_eq!(maps_of(t), 0, "a still maps the closed peer's removed segment");
    assert!(a.peers.v.is_empty() && a.peers.gone.contains_key(&t));
    assert!(a.take_events().is_empty(), "reported by the next send, not before");
    let mut b2 = ShmPort::new(t, LIM).unwrap();
    assert_eq!(a.send_record(&to, &one, Payload::Bytes(b"one")), Err(Error::AGAIN));
    assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
    a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b2), vec![op::EAGER]);
    assert!(a.peers.gone.is_empty() && a.peers.v.len() == 1);
    assert_eq!(maps_of(t), 2, "b2's own mapping and a's");
}

/// Tombs are capped: a peer buried with GONE_MAX tombs kept takes an
/// arbitrary one's place, whose failure is reported if it was not yet.
#[test]
fn tombs_are_capped_and_an_evicted_ones_failure_is_reported() {
    let mut a = port();
    let b = port();
    let (to, t) = (b.addr(), b.token);
    a.send_record(&to, &eager(b"one"), Payload::Bytes(b"one")).unwrap();
    let tomb = Tomb {
        reported: false,
        next_look: None,
    };
    for k in 0..GONE_MAX as u64 {
        a.peers.gone.insert(!k, tomb);
    }
    drop(b);
    for _ in 0..(2 * SWEEP_ROUNDS * EVICT_PERIOD) as usize {
        a.poll_records(&mut |_| Disposition::Consumed);
    }
    assert_eq!(maps_of(t), 0);
    assert_eq!(a.peers.gone.len(), GONE_MAX);
    assert!(a.peers.gone.contains_key(&t));
    let ev = a.take_events();
    assert!(
        matches!(ev.as_slice(), [PeerEvent::Failed(Addr::Shm(x))] if *x > u64::MAX - GONE_MAX as u64),
        "{ev:?}"
    );
}

/// A peer whose owner's process is gone (its segment not marked
/// closed: killed; here its pid taken by another process, as our
/// copy of the owner's start time no longer matching says), that never
/// sends to us: the periodic sweep finds it, and our mapping goes;
/// a live peer's (even a failed one's) stays. The address is reached
/// again once a new owner holds it.
#[test]
fn a_dead_owners_segment_is_unmapped_by_the_sweep() {
    let mut a = port();
    let b = port();
    let c = port();
    let (to, t) = (b.addr(), b.token);
    let one = eager(b"one");
    a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
    a.send_record(&c.addr(), &one, Payload::Bytes(b"one")).unwrap();
    a.peers.get_mut(c.token).unwrap().failed = true;
    a.peers.get_mut(t).unwrap().seg.owner_start += 1;
    assert_eq!((maps_of(t), maps_of(c.token)), (2, 2));
    for _ in 0..(2 * SWEEP_ROUNDS * EVICT_PERIOD * PROC_LOOK_SWEEPS) as usize {
        a.poll_records(&mut |_| Disposition::Consumed);
    }
    assert_eq!(maps_of(t), 1, "a still maps the dead owner's segment");
    assert_eq!(maps_of(c.token), 2, "a live owner's segment was unmapped");
    assert_eq!(a.peers.v.len(), 1);
    assert!(a.take_events().is_empty());
    assert!(!a.check_peer(t));
    assert_eq!(a.take_events(), vec![PeerEvent::Failed(to)]);
    assert!(!a.check_peer(t));
    assert!(a.take_events().is_empty(), "reported once");
    drop(b);
    let mut b2 = ShmPort::new(t, LIM).unwrap();
    a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
    assert_eq!(ops(&mut b2), vec![op::EAGER]);
    assert!(a.take_events().is_empty());
}

/// A failed peer whose owner is still there (here: it broke its ring)
/// stays failed: no second ring is claimed in the same segment.
#[test]
fn a_failed_peer_with_a_live_owner_is_not_reopened() {
    let mut a = port();
    let b = port();
    let to = b.addr();
    let one = eager(b"one");
    a.send_record(&to, &one, Payload::Bytes(b"one")).unwrap();
    let i = a.peers.index(b.token).unwrap();
    a.peers.v[i].failed = true;
    let claimed = || (0..NSLOTS).filter(|&s| b.seg.slot_state(s) != SLOT_FREE).count();
    assert_eq!(claimed(), 1);
    for _ in 0..3 {
        assert_eq!(a.send_record(&to, &one, Payload::Bytes(b"one")), Err(Error::CONNRESET));
        a.peers.v[i].next_look = None;
    }
    assert_eq!(claimed(), 1, "a second slot was claimed");
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

#[test]
fn cma_pull_from_self() {
    let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    let mut dst = vec![0u8; src.len()];
    let iov = IovList::single(dst.as_mut_ptr() as usize, dst.len());
    let remote = [
        (src.as_ptr() as u64, 40_000u64),
        (src.as_ptr() as u64 + 40_000, 60_000u64),
    ];
    match pull(sys::getpid(), &remote, &iov, src.len()) {
        Ok(n) => {
            assert_eq!(n, src.len());
            assert_eq!(dst, src);
        }
        Err(e) => assert_eq!(e, Error::OPNOTSUPP, "CMA refused for another reason"),
    }
}

#[test]
fn cma_batch_pairs_each_job_with_its_own_buffer() {
    // Three jobs of different sizes and segmentations, one call: each
    // destination gets its own source's bytes (a job whose ranges were
    // shifted by one would put a neighbour's bytes there).
    let srcs: Vec<Vec<u8>> = (0..3u32)
        .map(|k| (0..30_000 + k * 7_001).map(|i| (i * 7 + k) as u8).collect())
        .collect();
    let mut dsts: Vec<Vec<u8>> = srcs.iter().map(|s| vec![0u8; s.len()]).collect();
    let mut iovs = Vec::new();
    for d in dsts.iter_mut() {
        let mut iov = IovList::new();
        iov.push(d.as_mut_ptr() as usize, 1_000);
        iov.push(d.as_mut_ptr() as usize + 1_000, d.len() - 1_000);
        iovs.push(iov);
    }
    let remotes: Vec<[(u64, u64); 2]> = srcs
        .iter()
        .map(|s| {
            [
                (s.as_ptr() as u64, 12_345),
                (s.as_ptr() as u64 + 12_345, s.len() as u64 - 12_345),
            ]
        })
        .collect();
    let jobs: Vec<PullJob<'_>> = (0..3)
        .map(|k| PullJob {
            remote: &remotes[k],
            dst: &iovs[k],
            len: srcs[k].len(),
        })
        .collect();
    match pull_batch(sys::getpid(), &jobs) {
        Ok(()) => assert_eq!(dsts, srcs),
        Err(e) => assert_eq!(e, Error::OPNOTSUPP, "CMA refused for another reason"),
    }
    // A job whose source is shorter than its length: refused before
    // any copy (the caller then pulls one by one).
    let short = [(srcs[0].as_ptr() as u64, 100u64)];
    let bad = [
        jobs[1],
        PullJob {
            remote: &short,
            ..jobs[0]
        },
    ];
    assert_eq!(pull_batch(sys::getpid(), &bad), Err(Error::INVAL));
}

/// A tagged EAGER header for `b` (the tests tell records apart by tag;
/// a compact header carries the tag only with TAGGED).
fn eager(b: &[u8]) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = proto::flag::TAGGED;
    h.len = b.len() as u64;
    h
}

/// The op of every record `b` has now.
fn ops(b: &mut ShmPort) -> Vec<u8> {
    let mut v = Vec::new();
    b.poll_records(&mut |r| {
        v.push(r.hdr.op);
        Disposition::Consumed
    });
    v
}

/// (source, pid reported) of every record `b` has now.
fn sources(b: &mut ShmPort) -> Vec<(Addr, i32)> {
    let mut v = Vec::new();
    b.poll_records(&mut |r| {
        v.push((r.src, r.src_pid));
        Disposition::Consumed
    });
    v
}

#[test]
fn records_report_the_pid_the_kernel_gave_never_a_claimed_one() {
    let mut a = port();
    let mut b = port();
    a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    assert_eq!(sources(&mut b), vec![(a.addr(), sys::getpid())]);
    assert!(b.verified_sender(sys::getpid()));
    // A forger claims a slot saying it is process 1 (any pid but its
    // own) and even announces the claim: the kernel says who sent the
    // announcement, so the claim is not believed.
    let seg = Segment::open(b.token).unwrap();
    let liar = SlotSender {
        token: 0x1234,
        pid: 1,
        start: sys::proc_start_time(1).unwrap_or(0),
    };
    let c = seg.claim_slot(liar).unwrap();
    let bell = DoorbellAddr::new(&segment::doorbell_path(b.token)).unwrap();
    Ringer::new()
        .unwrap()
        .send(&bell, &segment::hello_bytes(b.token, c, liar.token))
        .unwrap();
    seg.activate(c, liar);
    let mut out = PeerOut::new(seg, bell, c.slot);
    assert_eq!(write_record(&mut out, &eager(&[2]), &Payload::Bytes(&[2])), Ok(true));
    assert_eq!(sources(&mut b), vec![(Addr::Shm(0x1234), 0)], "unverified: pid 0");
    // CMA is refused for any pid but a verified sender's.
    let mut dst = [0u8; 8];
    let iov = IovList::single(dst.as_mut_ptr() as usize, dst.len());
    let src = [7u8; 8];
    let remote = [(src.as_ptr() as u64, 8u64)];
    assert_eq!(Port::pull(&b, 1, &remote, &iov, 8).err(), Some(Error::CONNRESET));
    assert_eq!(Port::pull(&b, 0, &remote, &iov, 8).err(), Some(Error::CONNRESET));
    assert_eq!(dst, [0u8; 8]);
    match Port::pull(&b, sys::getpid(), &remote, &iov, 8) {
        Ok(8) => assert_eq!(dst, src),
        r => assert_eq!(r.err(), Some(Error::OPNOTSUPP)),
    }
}

#[test]
fn announced_senders_are_taken_in_without_reading_every_slot_word() {
    // Each slot word lies in its own page: reading all 256 on every new
    // sender faulted 1 MiB into every segment and cost O(256) per peer.
    let mut b = port();
    let mut senders: Vec<ShmPort> = (0..8).map(|_| port()).collect();
    for (i, a) in senders.iter_mut().enumerate() {
        a.send_record(&b.addr(), &eager(&[i as u8]), Payload::Bytes(&[i as u8]))
            .unwrap();
    }
    let got = sources(&mut b);
    assert_eq!(got.len(), senders.len());
    for a in &senders {
        assert!(
            got.contains(&(a.addr(), sys::getpid())),
            "every sender delivered, verified"
        );
    }
    assert_eq!(b.scans, 0, "announced senders need no full scan");
    // A claim_seq move that nothing announced explains (a sender that
    // found no free slot) is looked into: every slot word, once.
    Segment::open(b.token).unwrap().nudge();
    b.poll_records(&mut |_| Disposition::Consumed);
    assert_eq!(b.scans, 1);
    // ... and at most every LIVENESS_PERIOD.
    Segment::open(b.token).unwrap().nudge();
    b.poll_records(&mut |_| Disposition::Consumed);
    assert_eq!(b.scans, 1);
    // The scan left due is made by a later pass, claim_seq unmoved,
    // once the period is over (`rare::SCAN_DUE`), and then only once.
    b.last_scan = Some(Instant::now() - LIVENESS_PERIOD);
    b.poll_records(&mut |_| Disposition::Consumed);
    assert_eq!(b.scans, 2, "the scan left due is made by a later pass");
    b.last_scan = Some(Instant::now() - LIVENESS_PERIOD);
    b.poll_records(&mut |_| Disposition::Consumed);
    assert_eq!(b.scans, 2, "nothing due after the scan");
}

#[test]
fn a_peer_that_leaves_its_answers_unread_is_not_consumed_beyond_the_backlog_bound() {
    // a streams requests to b and never consumes b's ring; b answers
    // each (a control record, as the engine does after its pass). Once
    // b's ring to a is full the answers queue in b's backlog, which
    // stops at BACKLOG_MAX (plus one pass's worth of a's ring): a's
    // records then stay in its ring and its sends are refused.
    let mut a = port();
    let mut b = port();
    let (sent, refused, peak) = flood_unread(&mut a, &mut b, 64);
    assert!(peak >= BACKLOG_MAX, "the answers filled the bound ({peak})");
    assert!(
        peak <= BACKLOG_MAX + segment::NCELLS,
        "the backlog stopped at its bound ({peak} answers queued)"
    );
    assert!(refused >= 64, "b stopped consuming a's ring ({sent} records sent)");
    // a takes its answers: b consumes a's ring again.
    for _ in 0..BACKLOG_MAX {
        a.poll_records(&mut |_| Disposition::Consumed);
        b.poll_records(&mut |_| Disposition::Consumed);
        if b.peers.get_mut(a.token).is_some_and(|p| p.backlog.is_empty()) {
            break;
        }
    }
    assert!(
        b.peers.get_mut(a.token).is_some_and(|p| p.backlog.is_empty()),
        "drained"
    );
}

/// a streams requests to b and never consumes b's ring; b answers each
/// (a control record, as the engine does after its pass). Returns how
/// many records a sent, after how many passes of b in a row without a
/// record taken it stopped (`passes` of them, or a sent four default
/// bounds' worth), and the longest backlog b kept towards a.
fn flood_unread(a: &mut ShmPort, b: &mut ShmPort, passes: u32) -> (u64, u32, usize) {
    let mut req = WireHdr::new(op::READ_REQ);
    req.len = 64;
    let (mut sent, mut idle, mut peak) = (0u64, 0u32, 0usize);
    while idle < passes && sent < 4 * BACKLOG_MAX as u64 {
        while a.send_record(&b.addr(), &req, Payload::None).is_ok() {
            sent += 1;
        }
        let mut outbox = Vec::new();
        b.poll_records(&mut |r| {
            let mut ack = WireHdr::new(op::RMA_ACK);
            ack.msg_id = r.hdr.msg_id;
            outbox.push((r.src, ack));
            Disposition::Consumed
        });
        idle = if outbox.is_empty() { idle + 1 } else { 0 };
        for (to, h) in outbox {
            let _ = b.send_ctl(&to, &h);
        }
        let backlog = b.peers.get_mut(a.token).map_or(0, |p| p.backlog.len());
        peak = peak.max(backlog);
    }
    (sent, idle, peak)
}

#[test]
fn a_peer_that_stays_at_its_backlog_bound_past_the_timeout_is_cut_off() {
    // Budget: 256 answers (16 KiB of headers), 50 ms. a leaves b's
    // answers unread: b stops consuming a's ring, then, 50 ms on, fails
    // a for cause (its backlog dropped, its ring no longer consumed);
    // c, sending to b meanwhile, is served throughout.
    const BOUND: usize = 256;
    let mut a = port();
    let mut b = port().with_budget(BOUND * HDR_LEN, Duration::from_millis(50));
    let mut c = port();
    flood_unread(&mut a, &mut b, 64);
    let backlog = b.peers.get_mut(a.token).map_or(0, |p| p.backlog.len());
    assert!(
        (BOUND..=BOUND + segment::NCELLS).contains(&backlog),
        "b stopped at its bound ({backlog} answers queued)"
    );
    assert!(b.take_events().is_empty(), "not cut off before the timeout");
    let start = Instant::now();
    let mut served = 0;
    let mut events = Vec::new();
    while events.is_empty() && start.elapsed() < Duration::from_secs(5) {
        c.send_record(&b.addr(), &eager(b"c"), Payload::Bytes(b"c")).unwrap();
        b.poll_records(&mut |r| {
            assert_eq!(r.src, c.addr(), "nothing more of a's is consumed");
            served += 1;
            Disposition::Consumed
        });
        events = b.take_events();
    }
    assert!(start.elapsed() >= Duration::from_millis(40), "cut off at the timeout");
    assert_eq!(events, vec![PeerEvent::Failed(a.addr())], "a alone is cut off");
    assert!(served > 0, "c was served meanwhile");
    let p = b.peers.get_mut(a.token).expect("a's entry is kept (its owner lives)");
    assert!(p.failed && p.backlog.is_empty(), "a's backlog dropped");
    // a takes its answers and sends again: b no longer consumes its ring
    // nor answers it, and c keeps being served.
    a.poll_records(&mut |_| Disposition::Consumed);
    let _ = a.send_record(&b.addr(), &eager(b"a"), Payload::Bytes(b"a"));
    for _ in 0..8 {
        c.send_record(&b.addr(), &eager(b"c"), Payload::Bytes(b"c")).unwrap();
        let mut from = Vec::new();
        b.poll_records(&mut |r| {
            from.push(r.src);
            Disposition::Consumed
        });
        assert_eq!(from, vec![c.addr()]);
    }
    assert_eq!(
        b.send_ctl(&a.addr(), &WireHdr::new(op::RMA_ACK)),
        Err(Error::CONNRESET),
        "nothing more goes to a"
    );
}

#[test]
fn a_control_record_queued_while_another_ring_is_waited_on_goes_out_later() {
    // `rare::BACKLOGGED` alone: a's control records towards b and c
    // are queued (both rings full); c drains first, which ends a's wait
    // on c (the last ring refused) and flushes c's; b drains after: a
    // later pass, with nothing else rare set, must flush b's.
    let mut a = port();
    let mut b = port();
    let mut c = port();
    let mut ctl = WireHdr::new(op::ACK);
    ctl.msg_id = 4242;
    let full = |a: &mut ShmPort, to: &ShmPort| {
        fill(a, to);
        // The cells a large record did not fit in, filled too.
        while a.send_record(&to.addr(), &eager(&[0]), Payload::Bytes(&[0])).is_ok() {}
        a.send_ctl(&to.addr(), &ctl).unwrap();
        assert!(a.rare.get(rare::BACKLOGGED), "queued");
    };
    full(&mut a, &b);
    full(&mut a, &c);
    let drain = |p: &mut ShmPort| {
        let mut ctls = 0;
        for _ in 0..4 {
            p.poll_records(&mut |r| {
                if r.hdr.op == op::ACK {
                    assert_eq!(r.hdr.msg_id, 4242);
                    ctls += 1;
                }
                Disposition::Consumed
            });
        }
        ctls
    };
    let none = |_: InRecord<'_>| -> Disposition { panic!("nothing was sent to a") };
    assert_eq!(drain(&mut c), 0, "c's control record is still queued");
    a.poll_records(&mut none.clone());
    assert!(a.rare.waiting().is_none(), "c took everything a wrote");
    assert_eq!(drain(&mut c), 1, "c's control record went out");
    assert!(a.rare.get(rare::BACKLOGGED), "b's is still queued");
    assert_eq!(drain(&mut b), 0);
    a.poll_records(&mut none.clone());
    assert_eq!(drain(&mut b), 1, "b's control record went out");
    assert!(!a.rare.any(), "nothing queued, nothing waited on");
}

#[test]
fn a_sleepers_doorbell_is_drained_by_every_pass_until_it_wakes() {
    // `rare::SLEEPING`: with a sleeper announced, every record's sender
    // rings the doorbell; the pass that takes the record drains it (or
    // the sleeper would wake at once forever). Contact first, so that
    // no new sender's arrival drains it instead.
    let mut a = port();
    let mut b = port();
    a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    assert_eq!(sources(&mut b).len(), 1);
    b.set_sleepers(1);
    for i in 0..3u8 {
        a.send_record(&b.addr(), &eager(&[i]), Payload::Bytes(&[i])).unwrap();
        assert!(sys::poll_readable(b.wait_fd(), Some(Duration::ZERO)), "rung");
        assert_eq!(sources(&mut b).len(), 1);
        assert!(
            !sys::poll_readable(b.wait_fd(), Some(Duration::ZERO)),
            "the pass drained the doorbell"
        );
    }
    // Awake again: the next pass clears the condition.
    b.set_sleepers(0);
    b.poll_records(&mut |_| Disposition::Consumed);
    assert!(!b.rare.any());
}

#[test]
fn a_full_doorbell_leaves_a_sender_unverified_not_unreachable() {
    let mut b = port();
    let bell = DoorbellAddr::new(&segment::doorbell_path(b.token)).unwrap();
    let junk = Ringer::new().unwrap();
    let mut queued = 0;
    while junk.ring(&bell) {
        queued += 1;
        assert!(queued < 100_000);
    }
    let mut a = port();
    a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    assert_eq!(sources(&mut b), vec![(a.addr(), 0)], "delivered, pid unverified");
    // The owner read its doorbell while taking `a` in: the next sender
    // is verified.
    let mut c = port();
    c.send_record(&b.addr(), &eager(&[2]), Payload::Bytes(&[2])).unwrap();
    assert_eq!(sources(&mut b), vec![(c.addr(), sys::getpid())]);
}

#[test]
fn slots_of_dead_senders_are_reclaimed_live_ones_kept() {
    let mut b = port();
    let seg = Segment::open(b.token).unwrap();
    let me = sys::getpid();
    let start = sys::proc_start_time(me).unwrap();
    // Every slot taken: 200 by "senders" that died (an earlier
    // incarnation of our pid), 20 claimed-not-activated by a pid that
    // cannot exist, the rest by live ones (us).
    let dead = SlotSender {
        token: 1,
        pid: me,
        start: start + 1,
    };
    let live = SlotSender {
        token: 2,
        pid: me,
        start,
    };
    let never = SlotSender {
        token: 3,
        pid: 0x7fff_fff0,
        start: 0,
    };
    let mut live_slots = Vec::new();
    for i in 0..NSLOTS {
        match i {
            0..200 => {
                let c = seg.claim_slot(dead).unwrap();
                seg.activate(c, dead);
            }
            200..220 => {
                seg.claim_slot(never).unwrap();
            }
            _ => {
                let c = seg.claim_slot(live).unwrap();
                seg.activate(c, live);
                live_slots.push(c.slot);
            }
        }
    }
    assert_eq!(seg.claim_slot(live).err(), Some(Error::AGAIN));
    // A new sender finds no slot now, and one once the owner has looked.
    let mut c = port();
    let msg = [5u8; 3];
    assert_eq!(
        c.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).err(),
        Some(Error::AGAIN)
    );
    b.poll_records(&mut |_| Disposition::Consumed);
    b.poll_records(&mut |_| Disposition::Consumed);
    c.send_record(&b.addr(), &eager(&msg), Payload::Bytes(&msg)).unwrap();
    assert_eq!(sources(&mut b), vec![(c.addr(), me)]);
    let free = (0..NSLOTS).filter(|&s| seg.slot_state(s) == SLOT_FREE).count();
    assert_eq!(free, 220 - 1, "dead and never-activated slots freed, one taken by c");
    for s in live_slots {
        assert_eq!(seg.slot_state(s), SLOT_ACTIVE, "a live sender keeps its slot");
    }
}

/// Polls `b` until its rings have gone idle (unwatched), however few.
fn idle_out(b: &mut ShmPort) {
    b.hot_keep = 0;
    for _ in 0..2 * EVICT_PERIOD {
        b.poll_records(&mut |_| panic!("nothing was sent"));
    }
}

#[test]
fn idle_rings_are_not_polled_and_their_next_record_is_signalled() {
    let mut b = port();
    let mut senders: Vec<ShmPort> = (0..8).map(|_| port()).collect();
    for a in senders.iter_mut() {
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    }
    assert_eq!(sources(&mut b).len(), 8);
    assert_eq!(b.inbound.nhot, 8, "rings that just carried records are polled");
    idle_out(&mut b);
    assert_eq!(b.inbound.nhot, 0, "idle rings are still polled on every pass");
    // The next record of an idle sender is found on the next pass.
    senders[5]
        .send_record(&b.addr(), &eager(&[2]), Payload::Bytes(&[2]))
        .unwrap();
    assert_eq!(sources(&mut b), vec![(senders[5].addr(), sys::getpid())]);
    assert_eq!(b.inbound.nhot, 1);
}

#[test]
fn a_few_idle_rings_stay_watched() {
    let mut b = port();
    let mut senders: Vec<ShmPort> = (0..HOT_KEEP + 1).map(|_| port()).collect();
    for a in senders.iter_mut().take(HOT_KEEP) {
        a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    }
    assert_eq!(sources(&mut b).len(), HOT_KEEP);
    for _ in 0..4 * EVICT_PERIOD {
        b.poll_records(&mut |_| panic!("nothing was sent"));
    }
    assert_eq!(b.inbound.nhot, HOT_KEEP, "HOT_KEEP idle rings stay watched");
    // One more: now the idle ones go.
    senders[HOT_KEEP]
        .send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1]))
        .unwrap();
    assert_eq!(sources(&mut b).len(), 1);
    for _ in 0..4 * EVICT_PERIOD {
        b.poll_records(&mut |_| panic!("nothing was sent"));
    }
    assert_eq!(b.inbound.nhot, 0, "above HOT_KEEP idle rings are unwatched");
}

#[test]
fn an_idle_sender_that_closes_gets_its_slot_freed() {
    let mut a = port();
    let mut b = port();
    a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    assert_eq!(sources(&mut b).len(), 1);
    idle_out(&mut b);
    a.close();
    let got = sources(&mut b);
    assert_eq!(got.len(), 1, "the BYE");
    assert_eq!(b.inbound.iter().count(), 0, "the closed slot is not freed");
}

#[test]
fn an_unsignalled_record_in_an_idle_ring_is_found_before_sleeping() {
    // A sender that died between publishing and signalling: its record
    // keeps a waiter from sleeping, and the pass after announcing a
    // sleeper finds it.
    let mut a = port();
    let mut b = port();
    a.send_record(&b.addr(), &eager(&[1]), Payload::Bytes(&[1])).unwrap();
    assert_eq!(sources(&mut b).len(), 1);
    idle_out(&mut b);
    let Addr::Shm(t) = b.addr() else { unreachable!() };
    let p = a.peers.get_mut(t).unwrap();
    assert_eq!(write_record(p, &eager(&[3]), &Payload::Bytes(&[3])), Ok(true));
    assert!(sources(&mut b).is_empty(), "not signalled, not watched");
    assert!(b.has_pending());
    b.set_sleepers(1);
    assert_eq!(sources(&mut b).len(), 1);
    b.set_sleepers(0);
}

#[test]
fn unknown_peer_is_unreachable() {
    let mut a = port();
    let h = WireHdr::new(op::ACK);
    assert!(a
        .send_record(&Addr::Shm(0x1111_2222_3333_4444), &h, Payload::None)
        .is_err());
}
