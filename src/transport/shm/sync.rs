//! The atomic protocol of the shm transport, written once and generic over
//! where its 64-bit words live: in a shared segment (`AtomicU64` reached
//! through `AtomicU64::from_ptr`, ring.rs and segment.rs), or in loom's
//! model checker (`cfg(loom)`, the models below, `make loom`). The ring
//! and the segment call these functions, so the orderings loom checks are
//! the orderings the provider runs.
//!
//! * Ring (ring.rs, segment version 3: readiness in the cell; version 7:
//!   lap tags): the producer writes a record's cells except its first
//!   word, then [`publish`]es it: where the next record will start (the
//!   cell after it), it zeroes the first word only if that stale word of an
//!   earlier lap would read as published there (Relaxed; almost never: a
//!   record's first word carries its lap's tag, [`READY_BITS`]), and then
//!   stores the record's first word, tagged (Release). The consumer polls
//!   the first word of the cell at its head with [`published`] (Acquire),
//!   which takes only a word with the magic and that index's lap tag:
//!   having seen a record, it sees the zero after it too, where one was
//!   stored. It copies the record out, then
//!   [`release`]s the head (Release); the producer reads it with
//!   [`consumed`] (Acquire) before reusing cells.
//!   A producer that goes back to the ring's first cell (ring.rs,
//!   rewinding) publishes the record there first, then stores [`REWIND`]
//!   in the cell at its old tail with [`rewind`] (Release): a consumer that
//!   sees the marker (Acquire) sees that record, not the stale first word
//!   of the record that cell held a lap before.
//! * Wake-up (Dekker): a consumer about to sleep [`announce_sleepers`]
//!   (store, then its barrier, [`owner_fence`]) and then re-checks its
//!   rings; a producer, after publishing, asks [`must_wake`] (its barrier,
//!   [`sender_fence`], then a load of the sleeper count) and rings the
//!   doorbell if so. Either the consumer's re-check sees the record or the
//!   producer sees the sleeper: no lost wake-up. The ready list's
//!   `watched` word (ready.rs) is the same pair.
//!
//! The barriers of the pair ([`Handshake`]): with `Fences` both sides make
//! a SeqCst fence (`lock or` on x86-64, a full barrier: before segment
//! version 4, on every send). With `Membarrier` (segment version 4, the
//! owner's header says so and the sender's process is registered,
//! `sys::membarrier_register`) the sender's barrier is a compiler barrier
//! only, and the consumer's is `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`
//! (`sys::membarrier_global`): every running thread of every registered
//! process executes a full barrier before it returns (a thread not running
//! passes one when scheduled), so a sender's publish-then-load either
//! completed before it (the re-check sees the record), straddles it (the
//! load comes after a barrier that follows the sleeper's store: it sees the
//! sleeper) or starts after it (likewise) — the kernel's documented use of
//! the call (membarrier(2): "turn a full barrier on the fast path into a
//! compiler barrier"). The fast path (every send) loses its full barrier;
//! the slow path (going to sleep, unwatching idle rings) gains a system
//! call, where it sleeps or rarely anyway.
//!
//! SeqCst fences rather than SeqCst accesses: C11 gives the same guarantee
//! for both, but loom models SeqCst loads and stores as AcqRel (it would
//! report this handshake as broken) while it models SeqCst fences exactly.
//! Loom knows no membarrier: its models give the `Membarrier` pair its
//! contract — both barriers a SeqCst fence — and a must-fail model keeps the
//! sender's compiler barrier with only a fence on the consumer's side (a
//! consumer that forgot the membarrier, or a sender not covered by it): the
//! wake-up is lost, so the sender's side needs the membarrier.

use core::sync::atomic::Ordering;

/// A 64-bit word the protocol reads and writes, and the fence of the
/// memory model it lives in.
pub(crate) trait Word {
    fn load(&self, o: Ordering) -> u64;
    fn store(&self, v: u64, o: Ordering);
    fn fence(o: Ordering);
    /// The fast side of the asymmetric pair: a compiler barrier.
    fn light_fence();
    /// The slow side: `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`.
    fn heavy_fence();
}

/// The barriers both sides of a Dekker pair make between their store and
/// their load (module documentation). The owner of a segment chooses at
/// creation and writes it in its header; a sender uses `Membarrier` only
/// if the header says so and its own process is registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handshake {
    /// A SeqCst fence on both sides.
    Fences,
    /// A compiler barrier on the sender's, membarrier on the owner's.
    Membarrier,
}

/// Owner (consumer): the barrier between its store (sleepers, `watched`)
/// and its look at the rings.
#[inline(always)]
pub(crate) fn owner_fence<W: Word>(hs: Handshake) {
    match hs {
        Handshake::Fences => W::fence(Ordering::SeqCst),
        Handshake::Membarrier => W::heavy_fence(),
    }
}

/// Sender (producer): the barrier between publishing a record and its
/// loads of the owner's words (sleepers, `watched`).
#[inline(always)]
pub(crate) fn sender_fence<W: Word>(hs: Handshake) {
    match hs {
        Handshake::Fences => W::fence(Ordering::SeqCst),
        Handshake::Membarrier => W::light_fence(),
    }
}

impl Word for core::sync::atomic::AtomicU64 {
    #[inline(always)]
    fn load(&self, o: Ordering) -> u64 {
        core::sync::atomic::AtomicU64::load(self, o)
    }
    #[inline(always)]
    fn store(&self, v: u64, o: Ordering) {
        core::sync::atomic::AtomicU64::store(self, v, o)
    }
    #[inline(always)]
    fn fence(o: Ordering) {
        core::sync::atomic::fence(o)
    }
    #[inline(always)]
    fn light_fence() {
        core::sync::atomic::compiler_fence(Ordering::SeqCst)
    }
    #[inline]
    fn heavy_fence() {
        // Cannot fail once `membarrier_register` found the command (the
        // only way to `Membarrier`); were it refused, our own fence at
        // least (the other side then has only its compiler barrier).
        if !crate::sys::membarrier_global() {
            core::sync::atomic::fence(Ordering::SeqCst)
        }
    }
}

/// The bits of a ring cell's first word that say "published for this
/// cell index" (segment version 7): the header's magic (bits 0..16, never
/// zero) and the low 16 bits of the index's lap (bits 48..64, [`LAP_TAG`]:
/// the header's flag bits 16..32, which no flag uses). A stale word of an
/// earlier lap carries another lap's tag, so the producer need not zero
/// the cell where the next record starts (a store into a second line per
/// message, which the consumer then fetches: docs/performance-history.md
/// "laptag"); it zeroes it only in the rare case that the stale word would
/// match ([`publish`]: payload that happens to look like a tagged word,
/// or a record start left alone for 65,536 laps). As loaded (x86-64 and
/// aarch64: little-endian, as every word of the format).
pub(crate) const READY_BITS: u64 = 0xffff_0000_0000_ffff;

/// The lap tag's bits of a first word ([`READY_BITS`]).
pub(crate) const LAP_TAG: u64 = 0xffff_0000_0000_0000;

/// Where the lap tag starts in a first word.
pub(crate) const LAP_TAG_SHIFT: u32 = 48;

/// Producer: publishes a record whose other bytes are written. `next` is
/// the first word of the cell after the record (ours: one cell is kept
/// free), where the next record starts; a consumer there would take a
/// word whose [`READY_BITS`] are `next_ready`, so a stale word that has
/// them is zeroed first. Then the record's first word `word` (its tag
/// included) is stored in `first`, last.
#[inline(always)]
pub(crate) fn publish<W: Word>(next: &W, next_ready: u64, first: &W, word: u64) {
    if next.load(Ordering::Relaxed) & READY_BITS == next_ready {
        next.store(0, Ordering::Relaxed);
    }
    first.store(word, Ordering::Release);
}

/// The first word of a rewind marker (ring.rs, segment version 6), its
/// lap tag left out: the magic (so that it reads as published), then
/// version 0 and op 0, which no record has.
pub(crate) const REWIND: u64 = u64::from_le_bytes(*b"FR\x00\x00RW\x00\x00");

/// Producer: marks the cell whose first word is `first` (its old tail,
/// made not to read as published when the record before it was) as a
/// rewind, with the cell's lap tag `tag`, after the record at the next
/// lap's first cell is published (Release: a consumer that sees the
/// marker sees that record).
#[inline(always)]
pub(crate) fn rewind<W: Word>(first: &W, tag: u64) {
    first.store(REWIND | tag, Ordering::Release);
}

/// Consumer: the first word of a record published in the cell whose first
/// word is `first`, with the record's other bytes, its lap tag cleared;
/// None unless the word's [`READY_BITS`] are `ready` (the magic and the
/// tag of the lap the consumer's head is in).
#[inline(always)]
pub(crate) fn published<W: Word>(first: &W, ready: u64) -> Option<u64> {
    let w = first.load(Ordering::Acquire);
    (w & READY_BITS == ready).then_some(w & !LAP_TAG)
}

/// Consumer: gives the cells before `new_head` back (read before this).
#[inline(always)]
pub(crate) fn release<W: Word>(head: &W, new_head: u64) {
    head.store(new_head, Ordering::Release);
}

/// Producer: the head (cells before it are free again).
#[inline(always)]
pub(crate) fn consumed<W: Word>(head: &W) -> u64 {
    head.load(Ordering::Acquire)
}

/// Consumer: `n` threads may sleep (0: none). With `n > 0` the caller must
/// re-check its rings afterwards, and sleep only if they are empty.
#[inline(always)]
pub(crate) fn announce_sleepers<W: Word>(sleepers: &W, n: u64, hs: Handshake) {
    sleepers.store(n, Ordering::Relaxed);
    if n > 0 {
        owner_fence::<W>(hs);
    }
}

/// Producer, after [`publish`]: whether the consumer may be asleep (ring
/// its doorbell).
#[inline(always)]
pub(crate) fn must_wake<W: Word>(sleepers: &W, hs: Handshake) -> bool {
    sender_fence::<W>(hs);
    sleepers.load(Ordering::Relaxed) != 0
}

#[cfg(all(test, loom))]
pub(super) mod models {
    //! Exhaustive models (loom, C11 memory model): `make loom`.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use loom::thread;

    /// The ready bits of a lap-0 cell (the magic, tag 0), and a record's
    /// first word there (the models' rings start at lap 0).
    pub(in crate::transport::shm) const TAG0: u64 = MAGIC;
    pub(in crate::transport::shm) const RECORD: u64 = MAGIC | 1 << 16;
    const MAGIC: u64 = crate::transport::proto::MAGIC as u64;

    /// The ready bits of index `i` in a ring of `n` cells (the magic and
    /// the lap's tag, as ring.rs computes them).
    fn ready_bits(i: u64, n: u64) -> u64 {
        MAGIC | (i / n) << LAP_TAG_SHIFT
    }

    impl Word for AtomicU64 {
        fn load(&self, o: Ordering) -> u64 {
            AtomicU64::load(self, o)
        }
        fn store(&self, v: u64, o: Ordering) {
            AtomicU64::store(self, v, o)
        }
        fn fence(o: Ordering) {
            loom::sync::atomic::fence(o)
        }
        // membarrier's contract (module documentation): the sender's
        // compiler barrier orders as a full fence would, relative to the
        // owner's membarrier.
        fn light_fence() {
            loom::sync::atomic::fence(Ordering::SeqCst)
        }
        fn heavy_fence() {
            loom::sync::atomic::fence(Ordering::SeqCst)
        }
    }

    /// A word whose fences do nothing: the handshake with its ordering
    /// weakened, for the model that must fail.
    pub(in crate::transport::shm) struct NoFence(pub(in crate::transport::shm) AtomicU64);

    impl Word for NoFence {
        fn load(&self, o: Ordering) -> u64 {
            self.0.load(o)
        }
        fn store(&self, v: u64, o: Ordering) {
            self.0.store(v, o)
        }
        fn fence(_: Ordering) {}
        fn light_fence() {}
        fn heavy_fence() {}
    }

    /// The sender's compiler barrier (nothing, to the hardware) against an
    /// owner that makes only its own fence, not the membarrier: what a
    /// sender skipping its fence without being registered (or an owner
    /// without the system call) would run. Must fail.
    pub(in crate::transport::shm) struct NoMembarrier(pub(in crate::transport::shm) AtomicU64);

    impl Word for NoMembarrier {
        fn load(&self, o: Ordering) -> u64 {
            self.0.load(o)
        }
        fn store(&self, v: u64, o: Ordering) {
            self.0.store(v, o)
        }
        fn fence(o: Ordering) {
            loom::sync::atomic::fence(o)
        }
        fn light_fence() {}
        fn heavy_fence() {
            loom::sync::atomic::fence(Ordering::SeqCst)
        }
    }

    /// One consumer about to sleep, one producer publishing a record: if
    /// the consumer sleeps, the producer rings. `recheck: false` is the
    /// consumer that sleeps without looking at the ring again.
    fn wake_model<W: Word + Send + Sync + 'static>(mk: fn() -> W, hs: Handshake, recheck: bool) {
        loom::model(move || {
            let first = Arc::new(mk());
            let next = Arc::new(mk());
            let sleepers = Arc::new(mk());
            let cell = Arc::new(UnsafeCell::new(0u64));
            let (f2, n2, s2, c2) = (first.clone(), next.clone(), sleepers.clone(), cell.clone());
            let producer = thread::spawn(move || {
                // SAFETY (model): the producer owns the free cell.
                c2.with_mut(|p| unsafe { *p = 42 });
                publish(&*n2, TAG0, &*f2, RECORD);
                must_wake(&*s2, hs)
            });
            announce_sleepers(&*sleepers, 1, hs);
            let slept = if recheck {
                published(&*first, TAG0).is_none()
            } else {
                true
            };
            if !slept {
                // SAFETY (model): the cell is published.
                assert_eq!(cell.with(|p| unsafe { *p }), 42, "published cell not visible");
            }
            let rang = producer.join().expect("producer");
            assert!(!slept || rang, "lost wake-up: the consumer sleeps and nobody rings");
        });
    }

    #[test]
    fn wake_up_is_never_lost() {
        wake_model(|| AtomicU64::new(0), Handshake::Fences, true);
    }

    #[test]
    fn wake_up_is_never_lost_with_membarrier() {
        wake_model(|| AtomicU64::new(0), Handshake::Membarrier, true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn wake_up_is_lost_without_the_fences() {
        wake_model(|| NoFence(AtomicU64::new(0)), Handshake::Fences, true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn wake_up_is_lost_with_a_compiler_barrier_and_no_membarrier() {
        wake_model(|| NoMembarrier(AtomicU64::new(0)), Handshake::Membarrier, true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn wake_up_is_lost_without_the_recheck() {
        wake_model(|| AtomicU64::new(0), Handshake::Membarrier, false);
    }

    /// A cell of the model ring: its first word (atomic: published,
    /// polled, cleared) and the rest of its bytes (loom reports a write
    /// racing a read of them).
    struct Cell {
        first: AtomicU64,
        rest: UnsafeCell<u64>,
    }

    /// SPSC ring of 3 cells (at most 2 in use), records of 2, 2 and 1
    /// cells: the third starts at index 4 (cell 1, lap 1), where the first
    /// record's payload left a word that reads as published there (payload
    /// that happens to carry the magic and lap 1's tag). Every record
    /// consumed once, in order, with its contents; no cell written while
    /// it is read. `check_next: false` is the producer that does not look
    /// at the next record's cell (it neither tests nor zeroes it), which
    /// must fail.
    fn ring_model(check_next: bool) {
        loom::model(move || {
            const N: u64 = 3;
            const SIZES: [u64; 3] = [2, 2, 1];
            let head = Arc::new(AtomicU64::new(0));
            let cells: Arc<[Cell; 3]> = Arc::new([
                Cell {
                    first: AtomicU64::new(0),
                    rest: UnsafeCell::new(0),
                },
                Cell {
                    first: AtomicU64::new(0),
                    rest: UnsafeCell::new(0),
                },
                Cell {
                    first: AtomicU64::new(0),
                    rest: UnsafeCell::new(0),
                },
            ]);
            let spare = AtomicU64::new(0);
            let (h2, c2) = (head.clone(), cells.clone());
            let producer = thread::spawn(move || {
                let mut tail = 0u64;
                for (r, &n) in SIZES.iter().enumerate() {
                    // One cell stays free (ring.rs `free_cells`).
                    while tail + n - consumed(&*h2) > N - 1 {
                        thread::yield_now();
                    }
                    let tag = 100 * (r as u64 + 1);
                    for k in 0..n {
                        let c = &c2[((tail + k) % N) as usize];
                        // SAFETY (model): cell is free (checked above).
                        c.rest.with_mut(|p| unsafe { *p = tag + k });
                        if k > 0 {
                            // Payload covers a later cell's first word too
                            // (a memcpy): here a word that reads as
                            // published a lap later, the worst case.
                            let i = tail + k;
                            c.first.store(ready_bits(i + N, N) | (tag + k) << 16, Ordering::Relaxed);
                        }
                    }
                    let at = tail + n;
                    let next = if check_next {
                        &c2[(at % N) as usize].first
                    } else {
                        &spare
                    };
                    let word = ready_bits(tail, N) | tag << 16;
                    publish(next, ready_bits(at, N), &c2[(tail % N) as usize].first, word);
                    tail += n;
                }
            });
            let mut h = 0u64;
            for (r, &n) in SIZES.iter().enumerate() {
                let c = &cells[(h % N) as usize];
                let w = loop {
                    if let Some(w) = published(&c.first, ready_bits(h, N)) {
                        break w;
                    }
                    thread::yield_now();
                };
                let tag = 100 * (r as u64 + 1);
                assert_eq!(w, MAGIC | tag << 16, "record lost, doubled, out of order or stale");
                for k in 0..n {
                    let c = &cells[((h + k) % N) as usize];
                    // SAFETY (model): the record is published, not released.
                    let v = c.rest.with(|p| unsafe { *p });
                    assert_eq!(v, tag + k, "record contents not visible");
                }
                h += n;
                release(&*head, h);
            }
            producer.join().expect("producer");
        });
    }

    /// A producer that rewinds (ring.rs): records of one cell at indices
    /// 1 and 2 of a 4-cell ring; once both are consumed, the third goes to
    /// the next lap's first cell (index 4, cell 0, whose stale first word
    /// is payload that reads as published in lap 1) and the rewind marker
    /// to index 3, its old tail. The consumer takes the marker to the
    /// lap's first cell and must find the third record there, with its
    /// contents. `marker_last: false` stores the marker before the record
    /// is published, which must fail (the stale word reads as a record).
    fn rewind_model(marker_last: bool) {
        loom::model(move || {
            const N: u64 = 4;
            let head = Arc::new(AtomicU64::new(1));
            let cells: Arc<Vec<Cell>> = Arc::new(
                (0..N)
                    .map(|i| Cell {
                        first: AtomicU64::new(if i == 0 { ready_bits(N, N) | 77 << 16 } else { 0 }),
                        rest: UnsafeCell::new(0),
                    })
                    .collect(),
            );
            let (h2, c2) = (head.clone(), cells.clone());
            let producer = thread::spawn(move || {
                let write = |at: u64, tag: u64| {
                    let c = &c2[(at % N) as usize];
                    // SAFETY (model): the cell is free (checked by the caller).
                    c.rest.with_mut(|p| unsafe { *p = tag + 1 });
                    let word = ready_bits(at, N) | tag << 16;
                    publish(
                        &c2[((at + 1) % N) as usize].first,
                        ready_bits(at + 1, N),
                        &c.first,
                        word,
                    );
                };
                write(1, 100);
                write(2, 200);
                // Both consumed: head at 3, cells 1 and 2 free (ring.rs
                // `rewind`); the old tail is 3, the lap's first cell 4.
                while consumed(&*h2) != 3 {
                    thread::yield_now();
                }
                let marker_tag = ready_bits(3, N) & LAP_TAG;
                if marker_last {
                    write(4, 300);
                    rewind(&c2[3].first, marker_tag);
                } else {
                    rewind(&c2[3].first, marker_tag);
                    write(4, 300);
                }
            });
            let mut h = 1u64;
            for tag in [100u64, 200, 300] {
                let w = loop {
                    match published(&cells[(h % N) as usize].first, ready_bits(h, N)) {
                        Some(REWIND) => h += N - h % N,
                        Some(w) => break w,
                        None => thread::yield_now(),
                    }
                };
                assert_eq!(w, MAGIC | tag << 16, "record lost, doubled, out of order or stale");
                // SAFETY (model): the record is published, not released.
                let v = cells[(h % N) as usize].rest.with(|p| unsafe { *p });
                assert_eq!(v, tag + 1, "record contents not visible");
                h += 1;
                release(&*head, h);
            }
            producer.join().expect("producer");
        });
    }

    #[test]
    fn ring_rewind_publishes_the_record_before_the_marker() {
        rewind_model(true);
    }

    #[test]
    #[should_panic(expected = "record lost, doubled, out of order or stale")]
    fn ring_rewind_with_the_marker_first_reads_a_stale_word() {
        rewind_model(false);
    }

    #[test]
    fn ring_publish_consume() {
        ring_model(true);
    }

    #[test]
    #[should_panic(expected = "record lost, doubled, out of order or stale")]
    fn ring_without_checking_the_next_cell_reads_a_stale_word() {
        ring_model(false);
    }
}
