//! Which inbound rings an shm endpoint polls: the ready list (docs/shm.md,
//! "Polling"). Written, like `sync.rs`, once and generic over where its words
//! live, so that the loom models below (`make loom`) check the orderings
//! the provider runs.
//!
//! An endpoint has one ring per sender. Polling every ring on every progress
//! pass made a pass cost grow with the number of peers, idle ones included.
//! Now the consumer polls only its *watched* rings (those that carried
//! records lately); every slot has a `watched` word the consumer owns, and
//! the segment header a ready bitmap (one bit per slot) with a summary word
//! (one bit per bitmap word):
//!
//! * Producer, after [`super::sync::publish`]ing a record: its barrier of
//!   the handshake (sync.rs: a compiler barrier with `Membarrier`, a SeqCst
//!   fence with `Fences`), then the owner's sleeper count and its slot's
//!   `watched` word ([`after_publish`], the barrier the wake-up handshake
//!   needs anyway). Not watched: set the slot's ready bit, then the summary
//!   bit ([`signal`]).
//! * Consumer, every pass: one load of the summary; when non-zero,
//!   [`take`] clears and returns the signalled slots, which it watches again
//!   ([`watch`]) and polls.
//! * Consumer, watched rings idle for a while: [`unwatch`] each (store 0),
//!   then one barrier of the handshake for all of them
//!   ([`super::sync::owner_fence`]: membarrier or a SeqCst fence), then
//!   look at each ring once more; records there keep it watched. Dekker
//!   with the producer: either the consumer's second look sees the record,
//!   or the producer sees `watched == 0` and signals. No record is left in
//!   a ring nobody polls.
//! * A sender's slot closing is always signalled (the owner frees it).
//!
//! The common small-message path adds one load (of a line the consumer
//! writes only when it starts or stops watching: no cross-core transfer per
//! message) and a branch per send, and one load and a branch per pass; an
//! idle peer costs a pass nothing.

use super::sync::{sender_fence, Handshake, Word};
use core::sync::atomic::Ordering;

/// A word of the ready bitmap: [`Word`] and the two read-modify-writes the
/// list needs.
pub(crate) trait ReadyWord: Word {
    fn fetch_or(&self, v: u64, o: Ordering) -> u64;
    fn swap(&self, v: u64, o: Ordering) -> u64;
}

impl ReadyWord for core::sync::atomic::AtomicU64 {
    #[inline(always)]
    fn fetch_or(&self, v: u64, o: Ordering) -> u64 {
        core::sync::atomic::AtomicU64::fetch_or(self, v, o)
    }
    #[inline(always)]
    fn swap(&self, v: u64, o: Ordering) -> u64 {
        core::sync::atomic::AtomicU64::swap(self, v, o)
    }
}

/// Producer, after publishing: (the owner may sleep: ring its doorbell,
/// the owner does not watch this ring: [`signal`] it).
#[inline(always)]
pub(crate) fn after_publish<W: Word>(sleepers: &W, watched: &W, hs: Handshake) -> (bool, bool) {
    sender_fence::<W>(hs);
    (
        sleepers.load(Ordering::Relaxed) != 0,
        watched.load(Ordering::Relaxed) == 0,
    )
}

/// Producer: marks slot `bit` of bitmap word `word` (index `w` in the
/// summary) ready. The bit before the summary: a consumer that sees the
/// summary bit finds the slot's bit.
#[inline]
pub(crate) fn signal<W: ReadyWord>(summary: &W, word: &W, w: usize, bit: usize) {
    word.fetch_or(1 << bit, Ordering::AcqRel);
    summary.fetch_or(1 << w, Ordering::AcqRel);
}

/// Consumer: whether any slot may be ready (one load).
#[inline(always)]
pub(crate) fn any<W: Word>(summary: &W) -> bool {
    summary.load(Ordering::Relaxed) != 0
}

/// Consumer: clears the ready slots and calls `f` with each (word index,
/// bit). The summary is cleared before the words it names: a producer that
/// sets a bit after that sets its summary bit again (seen next pass).
#[inline]
pub(crate) fn take<W: ReadyWord>(summary: &W, words: &[&W], mut f: impl FnMut(usize, usize)) {
    let mut s = summary.swap(0, Ordering::AcqRel);
    while s != 0 {
        let w = s.trailing_zeros() as usize;
        s &= s - 1;
        let Some(word) = words.get(w) else { continue };
        let mut b = word.swap(0, Ordering::AcqRel);
        while b != 0 {
            f(w, b.trailing_zeros() as usize);
            b &= b - 1;
        }
    }
}

/// Consumer: polls this ring on every pass from now on (no signals needed).
#[inline(always)]
pub(crate) fn watch<W: Word>(watched: &W) {
    watched.store(1, Ordering::Relaxed);
}

/// Consumer: stops polling a ring; the caller must then make the owner's
/// barrier ([`super::sync::owner_fence`], one for all the rings it
/// unwatches at once) and look at the ring once more (and watch it again
/// if records are there).
#[inline(always)]
pub(crate) fn unwatch<W: Word>(watched: &W) {
    watched.store(0, Ordering::Relaxed);
}

#[cfg(all(test, loom))]
mod models {
    //! Exhaustive models (loom, C11 memory model): `make loom`.
    use super::super::sync::models::{NoFence, NoMembarrier};
    use super::super::sync::models::{RECORD, TAG0};
    use super::super::sync::{owner_fence, publish, published};
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use loom::thread;

    impl ReadyWord for AtomicU64 {
        fn fetch_or(&self, v: u64, o: Ordering) -> u64 {
            AtomicU64::fetch_or(self, v, o)
        }
        fn swap(&self, v: u64, o: Ordering) -> u64 {
            AtomicU64::swap(self, v, o)
        }
    }

    // The must-fail words (fences that do nothing; the sender's compiler
    // barrier against an owner without the membarrier) are sync.rs's.
    impl ReadyWord for NoMembarrier {
        fn fetch_or(&self, v: u64, o: Ordering) -> u64 {
            self.0.fetch_or(v, o)
        }
        fn swap(&self, v: u64, o: Ordering) -> u64 {
            self.0.swap(v, o)
        }
    }

    impl ReadyWord for NoFence {
        fn fetch_or(&self, v: u64, o: Ordering) -> u64 {
            self.0.fetch_or(v, o)
        }
        fn swap(&self, v: u64, o: Ordering) -> u64 {
            self.0.swap(v, o)
        }
    }

    /// A watched ring goes idle: the consumer unwatches it while the
    /// producer publishes a record. Afterwards the consumer must reach the
    /// record: by its second look at the ring, or by the signal. `recheck:
    /// false` is the consumer that unwatches without looking again.
    fn unwatch_model<W: ReadyWord + Send + Sync + 'static>(mk: fn() -> W, hs: Handshake, recheck: bool) {
        loom::model(move || {
            let first = Arc::new(mk());
            let next = Arc::new(mk());
            let watched = Arc::new(mk());
            let sleepers = Arc::new(mk());
            let summary = Arc::new(mk());
            let bits = Arc::new(mk());
            watch(&*watched);
            let (t2, n2, w2, s2, sum2, b2) = (
                first.clone(),
                next.clone(),
                watched.clone(),
                sleepers.clone(),
                summary.clone(),
                bits.clone(),
            );
            let producer = thread::spawn(move || {
                publish(&*n2, TAG0, &*t2, RECORD);
                let (_, sig) = after_publish(&*s2, &*w2, hs);
                if sig {
                    signal(&*sum2, &*b2, 0, 3);
                }
            });
            unwatch(&*watched);
            owner_fence::<W>(hs);
            let mut seen = recheck && published(&*first, TAG0) == Some(RECORD);
            producer.join().expect("producer");
            // Later passes: the consumer reads only the ready list.
            let mut signalled = false;
            if any(&*summary) {
                take(&*summary, &[&*bits], |w, b| signalled |= (w, b) == (0, 3));
            }
            if signalled {
                seen |= published(&*first, TAG0) == Some(RECORD);
            }
            assert!(seen, "lost record: its ring is neither watched nor signalled");
        });
    }

    #[test]
    fn idle_ring_record_is_never_lost() {
        unwatch_model(|| AtomicU64::new(0), Handshake::Fences, true);
    }

    #[test]
    fn idle_ring_record_is_never_lost_with_membarrier() {
        unwatch_model(|| AtomicU64::new(0), Handshake::Membarrier, true);
    }

    #[test]
    #[should_panic(expected = "lost record")]
    fn idle_ring_record_is_lost_without_the_fences() {
        unwatch_model(|| NoFence(AtomicU64::new(0)), Handshake::Fences, true);
    }

    #[test]
    #[should_panic(expected = "lost record")]
    fn idle_ring_record_is_lost_with_a_compiler_barrier_and_no_membarrier() {
        unwatch_model(|| NoMembarrier(AtomicU64::new(0)), Handshake::Membarrier, true);
    }

    #[test]
    #[should_panic(expected = "lost record")]
    fn idle_ring_record_is_lost_without_the_second_look() {
        unwatch_model(|| AtomicU64::new(0), Handshake::Membarrier, false);
    }

    /// Two producers signal two slots of one bitmap word while the consumer
    /// takes the list: every signal is taken, now or on the next pass.
    #[test]
    fn concurrent_signals_are_all_taken() {
        loom::model(|| {
            let summary = Arc::new(AtomicU64::new(0));
            let bits = Arc::new(AtomicU64::new(0));
            let mut hs = Vec::new();
            for bit in [1usize, 2] {
                let (s, b) = (summary.clone(), bits.clone());
                hs.push(thread::spawn(move || signal(&*s, &*b, 0, bit)));
            }
            let mut got = 0u64;
            take(&*summary, &[&*bits], |_, b| got |= 1 << b);
            for h in hs {
                h.join().expect("producer");
            }
            take(&*summary, &[&*bits], |_, b| got |= 1 << b);
            assert_eq!(got, 0b110, "a signal was lost");
        });
    }
}
