//! The owner's side: senders announced and verified, the doorbell, reclaimed and idle slots, CMA.

use super::*;

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
    assert_eq!(SingleCopy::pull(&b, 1, &remote, &iov, 8).err(), Some(Error::CONNRESET));
    assert_eq!(SingleCopy::pull(&b, 0, &remote, &iov, 8).err(), Some(Error::CONNRESET));
    assert_eq!(dst, [0u8; 8]);
    match SingleCopy::pull(&b, sys::getpid(), &remote, &iov, 8) {
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
