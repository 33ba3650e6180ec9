//! Answers a peer leaves unread: the backlog bound, the cut-off, queued control records.

use super::*;

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
    // Budget: 256 answers (16 KiB of headers), 200 ms. a leaves b's
    // answers unread: b stops consuming a's ring, then, 200 ms on, fails
    // a for cause (its backlog dropped, its ring no longer consumed);
    // c, sending to b meanwhile, is served throughout.
    const BOUND: usize = 256;
    let mut a = port();
    const TIMEOUT: Duration = Duration::from_millis(200);
    let mut b = port().with_budget(BOUND * HDR_LEN, TIMEOUT);
    let mut c = port();
    let start = Instant::now();
    flood_unread(&mut a, &mut b, 64);
    let backlog = b.peers.get_mut(a.token).map_or(0, |p| p.backlog.len());
    assert!(
        (BOUND..=BOUND + segment::NCELLS).contains(&backlog),
        "b stopped at its bound ({backlog} answers queued)"
    );
    assert!(b.take_events().is_empty(), "not cut off before the timeout");
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
    assert!(start.elapsed() >= TIMEOUT, "cut off at the timeout, not before");
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
