//! Property tests: arbitrary garbage written into a live segment by another
//! thread (as a process of the owner's user could) while its owner consumes
//! and two senders produce. The slot the garbage lands in may lose or garble
//! its own records and fail; the owner never panics, never reads outside
//! its mapping (the garbage names indices and lengths), never takes more
//! than a bounded number of passes, and the other sender's messages all
//! arrive, whole and in order (docs/security.md "Same user").

use super::*;
use super::{ring, segment};
use crate::base::error::Error;
use crate::transport::addr::Addr;
use crate::transport::proto::op;
use crate::transport::proto::{self, Limits, WireHdr};
use crate::transport::{Disposition, Payload};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use proptest::prelude::*;
use segment::NSLOTS;

const LIM: Limits = Limits {
    max_payload: EAGER_MAX,
    max_chunk: EAGER_MAX,
    max_iov: 8,
};

/// Messages the bystander sends (and the victim tries to) per case.
const MESSAGES: u64 = 200;

/// Where a scribble lands: the victim slot's ring (its first 16 KiB: the
/// indices and the cells records are written to), its control line, or the
/// segment's header (the ready list included).
#[derive(Clone, Copy, Debug)]
enum Region {
    Ring,
    Control,
    /// The first lines of the ring (its indices, its first cells) and the
    /// control line of the slot the next claimer takes (nobody's yet).
    NextRing,
    NextControl,
    Header,
}

/// One store of the garbage writer: `value` at word `word` of `region`
/// (taken modulo its size), after `pause` spins.
#[derive(Clone, Copy, Debug)]
struct Scribble {
    region: Region,
    word: usize,
    value: u64,
    pause: u8,
}

fn scribbles(header: bool) -> impl Strategy<Value = Vec<Scribble>> {
    let region = if header {
        prop_oneof![
            Just(Region::Ring),
            Just(Region::Control),
            Just(Region::NextRing),
            Just(Region::Header)
        ]
        .boxed()
    } else {
        prop_oneof![
            3 => Just(Region::Ring),
            1 => Just(Region::Control),
            2 => Just(Region::NextRing),
            1 => Just(Region::NextControl),
        ]
        .boxed()
    };
    // Values: anything, and words that look like our own (the record
    // magic with a lap tag, small indices, slot states) far more often than
    // chance would make them.
    let value = prop_oneof![
        any::<u64>(),
        (0u64..4, any::<u32>()).prop_map(|(s, pid)| s | 1 << 8 | (pid as u64) << 32),
        (any::<u16>(), 0u64..8).prop_map(|(f, lap)| proto::MAGIC as u64 | (f as u64) << 16 | lap << 48),
        0u64..70_000,
        Just(0u64),
        Just(u64::MAX),
    ];
    proptest::collection::vec(
        (region, 0usize..4096, value, any::<u8>()).prop_map(|(region, word, value, pause)| Scribble {
            region,
            word,
            value,
            pause,
        }),
        1..64,
    )
}

fn pattern(tag: u64, n: usize) -> Vec<u8> {
    (0..n).map(|k| (tag as usize * 31 + k * 7) as u8).collect()
}

fn port() -> ShmPort {
    ShmPort::new(crate::transport::addr::shm_token_random(), LIM).unwrap()
}

/// A tagged EAGER header for `len` bytes.
fn eager(tag: u64, len: usize) -> WireHdr {
    let mut h = WireHdr::new(op::EAGER);
    h.flags = proto::flag::TAGGED;
    h.tag = tag;
    h.len = len as u64;
    h
}

/// One case: `garbage` stored (over and over, until the consumer is done)
/// into the victim's slot or the header while `b` consumes from the victim
/// `a` and the bystander `c`. `header`: garbage may land in the header, which
/// may cost every sender (only the absence of panics and hangs is checked).
fn run(garbage: &[Scribble], header: bool) {
    let mut b = port();
    let mut a = port();
    let mut c = port();
    // Both senders known to the owner before the garbage starts.
    let first = |p: &mut ShmPort, b: &ShmPort| {
        let h = eager(u64::MAX, 1);
        p.send_record(&b.addr(), &h, Payload::Bytes(&[1])).unwrap();
    };
    first(&mut a, &b);
    first(&mut c, &b);
    let mut got: Vec<(Addr, u64, Vec<u8>)> = Vec::new();
    let collect = |b: &mut ShmPort, got: &mut Vec<(Addr, u64, Vec<u8>)>| {
        b.poll_records(&mut |r| {
            got.push((r.src, r.hdr.tag, r.payload_vec()));
            Disposition::Consumed
        })
    };
    for _ in 0..4 {
        collect(&mut b, &mut got);
    }
    let Some(i) = b.inbound.iter().position(|s| s.sender.token == a.token) else {
        panic!("the victim's slot was not taken in");
    };
    let slot = b.inbound.v[i].slot;
    let base = b.seg.as_ptr() as usize;
    let ring = b.seg.ring(slot).cell(0) as usize - 2 * ring::CELL;
    let control = base + segment::HEADER + slot * segment::SLOT_CTL;
    let next = b.seg.claim_seq() as usize % NSLOTS;
    assert_eq!(b.seg.slot_state(next), segment::SLOT_FREE);
    let next_ring = b.seg.ring(next).cell(0) as usize - 2 * ring::CELL;
    let next_control = base + segment::HEADER + next * segment::SLOT_CTL;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 100_000 {
                for g in garbage {
                    let at = match g.region {
                        Region::Ring => ring + (g.word % 2048) * 8,
                        Region::Control => control + (g.word % 8) * 8,
                        // Its first lines: the indices and the first cells.
                        Region::NextRing => next_ring + (g.word % 32) * 8,
                        Region::NextControl => next_control + (g.word % 8) * 8,
                        Region::Header if header => base + (g.word % 128) * 8,
                        Region::Header => continue,
                    };
                    for _ in 0..g.pause {
                        core::hint::spin_loop();
                    }
                    // SAFETY: `at` lies in the segment's mapping (the victim
                    // ring's first 16 KiB, its control line, or the header's
                    // first KiB), 8-aligned, and the mapping outlives this
                    // scoped thread (`b` is dropped after the scope). Every
                    // party accesses these words atomically or copies them.
                    unsafe { AtomicU64::from_ptr(at as *mut u64) }.store(g.value, Ordering::Relaxed);
                    n += 1;
                }
            }
        });
        let mut sent = 0u64;
        let mut passes = 0u32;
        let mut c_events = Vec::new();
        while sent < MESSAGES {
            passes += 1;
            assert!(passes < 100_000, "the bystander's messages stopped moving");
            let n = 1 + (sent as usize * 37) % 300;
            let msg = pattern(sent, n);
            let h = eager(sent, n);
            match c.send_record(&b.addr(), &h, Payload::Bytes(&msg)) {
                Ok(()) => sent += 1,
                Err(e) if e == Error::AGAIN => {}
                Err(e) => {
                    assert!(header, "the bystander's send failed: {e:?}");
                    break;
                }
            }
            let _ = a.send_record(&b.addr(), &h, Payload::Bytes(&msg));
            collect(&mut b, &mut got);
            // Taken as the endpoint's pass would (a send waits for that
            // after a failure).
            c_events.extend(c.take_events());
        }
        stop.store(true, Ordering::Relaxed);
        assert!(
            header || c_events.is_empty(),
            "the bystander saw a failure: {c_events:?}"
        );
    });
    for _ in 0..64 {
        collect(&mut b, &mut got);
    }
    if header {
        return;
    }
    let from_c: Vec<u64> = got
        .iter()
        .filter(|(src, tag, data)| *src == c.addr() && *tag != u64::MAX && *data == pattern(*tag, data.len()))
        .map(|(_, tag, _)| *tag)
        .collect();
    assert_eq!(from_c, (0..MESSAGES).collect::<Vec<_>>(), "the bystander's messages");
    for ev in b.take_events() {
        assert_eq!(*ev.peer(), a.addr(), "a peer other than the victim failed");
    }
    // A new sender after the garbage: its claim resets whatever ring it
    // takes, and its message arrives.
    let mut d = port();
    let h = eager(7, 3);
    d.send_record(&b.addr(), &h, Payload::Bytes(&pattern(7, 3)))
        .expect("a new sender's first send");
    let mut late = Vec::new();
    for _ in 0..64 {
        collect(&mut b, &mut late);
    }
    let from_d: Vec<_> = late.iter().filter(|(src, _, _)| *src == d.addr()).collect();
    assert_eq!(from_d, vec![&(d.addr(), 7, pattern(7, 3))], "the new sender's message");
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .map_or(48, |n| n.min(512)),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Garbage in one slot (its ring and control line) costs that slot.
    #[test]
    fn garbage_in_a_live_slot_costs_only_that_slot(g in scribbles(false)) {
        run(&g, false);
    }

    /// Garbage anywhere in the header too: no panic, no hang.
    #[test]
    fn garbage_in_a_live_segment_never_panics_or_hangs(g in scribbles(true)) {
        run(&g, true);
    }
}
