//! The atomic protocol of the shm transport, written once and generic over
//! where its 64-bit words live: in a shared segment (`AtomicU64` reached
//! through `AtomicU64::from_ptr`, ring.rs and segment.rs), or in loom's
//! model checker (`cfg(loom)`, the models below, `make loom`). The ring
//! and the segment call these functions, so the orderings loom checks are
//! the orderings the provider runs.
//!
//! * Ring indices (ring.rs): the producer writes cells, then [`publish`]es
//!   the tail (Release); the consumer reads the tail with [`published`]
//!   (Acquire), copies the record out, then [`release`]s the head
//!   (Release); the producer reads it with [`consumed`] (Acquire) before
//!   reusing cells.
//! * Wake-up (Dekker): a consumer about to sleep [`announce_sleepers`]
//!   (store, then a SeqCst fence) and then re-checks its rings; a producer,
//!   after publishing, asks [`must_wake`] (a SeqCst fence, then a load of
//!   the sleeper count) and rings the doorbell if so. With both fences,
//!   either the consumer's re-check sees the record or the producer sees
//!   the sleeper: no lost wake-up.
//!
//! SeqCst fences rather than SeqCst accesses: C11 gives the same guarantee
//! for both, but loom models SeqCst loads and stores as AcqRel (it would
//! report this handshake as broken) while it models SeqCst fences exactly.
//! On x86-64 the fence is one `lock or` to the stack, the same cost as the
//! `xchg` a SeqCst store compiles to.

use core::sync::atomic::Ordering;

/// A 64-bit word the protocol reads and writes, and the fence of the
/// memory model it lives in.
pub trait Word {
    fn load(&self, o: Ordering) -> u64;
    fn store(&self, v: u64, o: Ordering);
    fn fence(o: Ordering);
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
}

/// Producer: makes the cells written before `new_tail` visible.
#[inline(always)]
pub fn publish<W: Word>(tail: &W, new_tail: u64) {
    tail.store(new_tail, Ordering::Release);
}

/// Consumer: the tail, with the cells published before it.
#[inline(always)]
pub fn published<W: Word>(tail: &W) -> u64 {
    tail.load(Ordering::Acquire)
}

/// Consumer: gives the cells before `new_head` back (read before this).
#[inline(always)]
pub fn release<W: Word>(head: &W, new_head: u64) {
    head.store(new_head, Ordering::Release);
}

/// Producer: the head (cells before it are free again).
#[inline(always)]
pub fn consumed<W: Word>(head: &W) -> u64 {
    head.load(Ordering::Acquire)
}

/// Consumer: `n` threads may sleep (0: none). With `n > 0` the caller must
/// re-check its rings afterwards, and sleep only if they are empty.
#[inline(always)]
pub fn announce_sleepers<W: Word>(sleepers: &W, n: u64) {
    sleepers.store(n, Ordering::Relaxed);
    W::fence(Ordering::SeqCst);
}

/// Producer, after [`publish`]: whether the consumer may be asleep (ring
/// its doorbell).
#[inline(always)]
pub fn must_wake<W: Word>(sleepers: &W) -> bool {
    W::fence(Ordering::SeqCst);
    sleepers.load(Ordering::Relaxed) != 0
}

#[cfg(all(test, loom))]
mod models {
    //! Exhaustive models (loom, C11 memory model): `make loom`.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use loom::thread;

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
    }

    /// A word whose fences do nothing: the handshake with its ordering
    /// weakened, for the model that must fail.
    struct NoFence(AtomicU64);

    impl Word for NoFence {
        fn load(&self, o: Ordering) -> u64 {
            self.0.load(o)
        }
        fn store(&self, v: u64, o: Ordering) {
            self.0.store(v, o)
        }
        fn fence(_: Ordering) {}
    }

    /// One consumer about to sleep, one producer publishing a record: if
    /// the consumer sleeps, the producer rings. `recheck: false` is the
    /// consumer that sleeps without looking at the ring again.
    fn wake_model<W: Word + Send + Sync + 'static>(mk: fn() -> W, recheck: bool) {
        loom::model(move || {
            let tail = Arc::new(mk());
            let sleepers = Arc::new(mk());
            let cell = Arc::new(UnsafeCell::new(0u64));
            let (t2, s2, c2) = (tail.clone(), sleepers.clone(), cell.clone());
            let producer = thread::spawn(move || {
                // SAFETY (model): the producer owns the free cell.
                c2.with_mut(|p| unsafe { *p = 42 });
                publish(&*t2, 1);
                must_wake(&*s2)
            });
            announce_sleepers(&*sleepers, 1);
            let slept = if recheck { published(&*tail) == 0 } else { true };
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
        wake_model(|| AtomicU64::new(0), true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn wake_up_is_lost_without_the_fences() {
        wake_model(|| NoFence(AtomicU64::new(0)), true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn wake_up_is_lost_without_the_recheck() {
        wake_model(|| AtomicU64::new(0), false);
    }

    /// SPSC ring of 2 cells, 3 records: every record consumed once, in
    /// order, with its contents; no cell written while being read (loom's
    /// UnsafeCell reports such a race).
    #[test]
    fn ring_publish_consume() {
        loom::model(|| {
            const N: u64 = 2;
            let tail = Arc::new(AtomicU64::new(0));
            let head = Arc::new(AtomicU64::new(0));
            let cells: Arc<[UnsafeCell<u64>; 2]> = Arc::new([UnsafeCell::new(0), UnsafeCell::new(0)]);
            let (t2, h2, c2) = (tail.clone(), head.clone(), cells.clone());
            let producer = thread::spawn(move || {
                for i in 0..3u64 {
                    while i - consumed(&*h2) >= N {
                        thread::yield_now();
                    }
                    // SAFETY (model): cell i % N is free (checked above).
                    c2[(i % N) as usize].with_mut(|p| unsafe { *p = 100 + i });
                    publish(&*t2, i + 1);
                }
            });
            let mut h = 0u64;
            while h < 3 {
                let t = published(&*tail);
                assert!(t - h <= N, "tail beyond the ring");
                while h < t {
                    // SAFETY (model): cell h % N is published, not released.
                    let v = cells[(h % N) as usize].with(|p| unsafe { *p });
                    assert_eq!(v, 100 + h, "record lost, doubled or out of order");
                    h += 1;
                    release(&*head, h);
                }
                if h < 3 {
                    thread::yield_now();
                }
            }
            producer.join().expect("producer");
        });
    }
}
