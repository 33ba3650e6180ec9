//! Peers that closed, died, came back or wrote garbage: failures, tombs, revisits.

use super::*;

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
/// free, and senders keep coming and going.
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
fn unknown_peer_is_unreachable() {
    let mut a = port();
    let h = WireHdr::new(op::ACK);
    assert!(a
        .send_record(&Addr::Shm(0x1111_2222_3333_4444), &h, Payload::None)
        .is_err());
}
