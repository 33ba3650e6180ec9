//! A CQ's queue and its slot accounting under `FI_THREAD_SAFE`: the
//! success and error queues, the capacity, the slots claimed at post time
//! and the overrun state, behind one lock, plus the `any` flag that lets a
//! read of an empty CQ return without taking the lock. The protocol is
//! written once, generic over the lock and the flag ([`Prims`]): the CQ
//! core (`cq.rs`) runs it on `parking_lot` and std atomics ([`Native`]),
//! the loom models below (`cfg(loom)`, `make loom`) on loom's mutex and
//! atomics, so the code they check is the code the provider runs (as
//! `transport/shm/sync.rs` does for the shm ring).
//!
//! * Capacity: `max(attr.size, Σ reservations)`; queued entries, queued
//!   errors and claimed slots together never exceed it.
//! * A claimed completion ([`CqQueue::claim`] at post time,
//!   [`CqQueue::push_claimed`]) always fits; an unclaimed one that finds
//!   no room starts the overrun state of fi_cq(3) (the entry is dropped,
//!   valid entries are still read first, then one `FI_EOVERRUN` event,
//!   then -FI_EOVERRUN for good).
//! * The `any` flag: every unlock (the guard's drop, still inside the
//!   lock) stores whether a read would find something (an entry, an
//!   error, the overrun state), so it is exact whenever no one holds the
//!   lock. An empty read loads it (Acquire) and returns -FI_EAGAIN without
//!   locking; a read that runs after a push completed (happens-after it)
//!   sees `true` unless another reader emptied the queue meanwhile. A read
//!   racing a push may miss the newest entry, as it would by reading a
//!   moment earlier.

use super::cq::{CqEntry, CqErrEntry, CqErrRead};
use crate::base::error::{Error, Result};
use core::ops::DerefMut;
use core::sync::atomic::Ordering;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overrun {
    No,
    /// Entries were dropped; the FI_EOVERRUN error is still to be read.
    Pending,
    /// The FI_EOVERRUN error was read; the CQ is dead.
    Reported,
}

/// Everything behind the CQ's one lock.
pub(crate) struct Queue {
    pub(crate) ok: VecDeque<CqEntry>,
    pub(crate) errs: VecDeque<CqErrEntry>,
    pub(crate) size: usize,
    pub(crate) reserved: usize,
    pub(crate) claimed: usize,
    pub(crate) overrun: Overrun,
    /// The last error read: its `err_data` is the provider-owned buffer
    /// handed out by that `fi_cq_readerr`.
    pub(crate) last_err: Option<CqErrEntry>,
}

impl Queue {
    /// An empty queue of `size` entries (allocated now: pushes never
    /// allocate).
    pub(crate) fn new(size: usize) -> Result<Queue> {
        let mut ok = VecDeque::new();
        ok.try_reserve_exact(size).map_err(|_| Error::NOMEM)?;
        Ok(Queue {
            ok,
            errs: VecDeque::new(),
            size,
            reserved: 0,
            claimed: 0,
            overrun: Overrun::No,
            last_err: None,
        })
    }
    pub(crate) fn cap(&self) -> usize {
        self.size.max(self.reserved)
    }
    fn queued(&self) -> usize {
        self.ok.len() + self.errs.len()
    }
    pub(crate) fn has_room(&self) -> bool {
        self.overrun == Overrun::No && self.queued() + self.claimed < self.cap()
    }
    /// Room for an unclaimed completion, or the start of the overrun state.
    fn admit_unclaimed(&mut self) -> Result<()> {
        if self.has_room() {
            return Ok(());
        }
        if self.overrun == Overrun::No {
            self.overrun = Overrun::Pending;
        }
        Err(Error::OVERRUN)
    }
    /// A claimed completion always fits (its room was set aside), unless the
    /// CQ already overran or no claim is outstanding.
    fn admit_claimed(&mut self) -> Result<()> {
        if self.claimed == 0 {
            return self.admit_unclaimed();
        }
        self.claimed -= 1;
        if self.overrun != Overrun::No {
            return Err(Error::OVERRUN);
        }
        Ok(())
    }
    /// Something for a reader: an error, the overrun state, or `threshold`
    /// entries.
    pub(crate) fn ready(&self, threshold: usize) -> bool {
        !self.errs.is_empty() || self.overrun != Overrun::No || self.ok.len() >= threshold.max(1)
    }
    /// What the `any` flag says after this unlock.
    #[inline]
    fn any(&self) -> bool {
        !self.ok.is_empty() || !self.errs.is_empty() || self.overrun != Overrun::No
    }
}

/// The lock and the flag a [`CqQueue`] is built from.
pub(crate) trait Prims {
    type Lock;
    type Guard<'a>: DerefMut<Target = Queue>
    where
        Self: 'a;
    type Flag;
    fn new_lock(q: Queue) -> Self::Lock;
    fn lock(l: &Self::Lock) -> Self::Guard<'_>;
    fn new_flag(v: bool) -> Self::Flag;
    fn load(f: &Self::Flag, o: Ordering) -> bool;
    fn store(f: &Self::Flag, v: bool, o: Ordering);
}

/// The provider's: `parking_lot`'s mutex (never poisons) and std's atomic.
pub(crate) struct Native;

impl Prims for Native {
    type Lock = parking_lot::Mutex<Queue>;
    type Guard<'a> = parking_lot::MutexGuard<'a, Queue>;
    type Flag = core::sync::atomic::AtomicBool;
    #[inline(always)]
    fn new_lock(q: Queue) -> Self::Lock {
        parking_lot::Mutex::new(q)
    }
    #[inline(always)]
    fn lock(l: &Self::Lock) -> Self::Guard<'_> {
        l.lock()
    }
    #[inline(always)]
    fn new_flag(v: bool) -> Self::Flag {
        core::sync::atomic::AtomicBool::new(v)
    }
    #[inline(always)]
    fn load(f: &Self::Flag, o: Ordering) -> bool {
        f.load(o)
    }
    #[inline(always)]
    fn store(f: &Self::Flag, v: bool, o: Ordering) {
        f.store(v, o)
    }
}

/// The CQ's queue behind its lock, with the `any` flag (module
/// documentation).
pub(crate) struct CqQueue<P: Prims = Native> {
    m: P::Lock,
    any: P::Flag,
}

/// The lock held; its drop stores the `any` flag, then unlocks.
pub(crate) struct QueueGuard<'a, P: Prims + 'a> {
    q: P::Guard<'a>,
    any: &'a P::Flag,
}

impl<P: Prims> Drop for QueueGuard<'_, P> {
    #[inline(always)]
    fn drop(&mut self) {
        // Before `q` (the lock) is dropped: still inside the lock, so the
        // stores of the flag are ordered as the critical sections are.
        let any = self.q.any();
        if any != P::load(self.any, Ordering::Relaxed) {
            P::store(self.any, any, Ordering::Release);
        }
    }
}

impl<P: Prims> core::ops::Deref for QueueGuard<'_, P> {
    type Target = Queue;
    #[inline(always)]
    fn deref(&self) -> &Queue {
        &self.q
    }
}

impl<P: Prims> core::ops::DerefMut for QueueGuard<'_, P> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Queue {
        &mut self.q
    }
}

impl<P: Prims> CqQueue<P> {
    pub(crate) fn new(q: Queue) -> CqQueue<P> {
        CqQueue {
            any: P::new_flag(q.any()),
            m: P::new_lock(q),
        }
    }

    #[inline(always)]
    pub(crate) fn lock(&self) -> QueueGuard<'_, P> {
        QueueGuard {
            q: P::lock(&self.m),
            any: &self.any,
        }
    }

    /// Something (an entry, an error, the overrun state) to read, as of
    /// the last unlock.
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        P::load(&self.any, Ordering::Acquire)
    }

    /// An endpoint binds with queue depth `n`: the capacity grows to
    /// `max(size, Σ n)`, allocated now so that pushes never allocate.
    pub(crate) fn reserve(&self, n: usize) -> Result<()> {
        let mut q = self.lock();
        let reserved = q.reserved.checked_add(n).ok_or(Error::INVAL)?;
        let want = q.size.max(reserved);
        let extra = want.saturating_sub(q.ok.len());
        q.ok.try_reserve(extra).map_err(|_| Error::NOMEM)?;
        q.reserved = reserved;
        Ok(())
    }

    /// Undoes [`CqQueue::reserve`]; queued completions stay readable.
    pub(crate) fn release(&self, n: usize) {
        let mut q = self.lock();
        q.reserved = q.reserved.saturating_sub(n);
    }

    /// A completion no claim announced. `Err(FI_EOVERRUN)`: no room (the
    /// entry is dropped and the CQ now overrun) or already overrun.
    #[inline(always)]
    pub(crate) fn push(&self, e: CqEntry) -> Result<()> {
        let mut q = self.lock();
        q.admit_unclaimed().map(|()| q.ok.push_back(e))
    }

    /// An error completion no claim announced.
    pub(crate) fn push_err(&self, e: CqErrEntry) -> Result<()> {
        let mut q = self.lock();
        q.admit_unclaimed().map(|()| q.errs.push_back(e))
    }

    /// Sets aside room for one operation's completion. `Err(EAGAIN)`: full
    /// of unread completions and claims; `Err(OVERRUN)`: overrun.
    #[inline]
    pub(crate) fn claim(&self) -> Result<()> {
        let mut q = self.lock();
        if q.overrun != Overrun::No {
            return Err(Error::OVERRUN);
        }
        if q.queued() + q.claimed >= q.cap() {
            return Err(Error::AGAIN);
        }
        q.claimed += 1;
        Ok(())
    }

    /// The claimed operation ended without a completion.
    pub(crate) fn unclaim(&self) {
        let mut q = self.lock();
        q.claimed = q.claimed.saturating_sub(1);
    }

    /// The completion of an operation that claimed a slot.
    #[inline(always)]
    pub(crate) fn push_claimed(&self, e: CqEntry) -> Result<()> {
        let mut q = self.lock();
        q.admit_claimed().map(|()| q.ok.push_back(e))
    }

    /// The error completion of an operation that claimed a slot.
    pub(crate) fn push_err_claimed(&self, e: CqErrEntry) -> Result<()> {
        let mut q = self.lock();
        q.admit_claimed().map(|()| q.errs.push_back(e))
    }

    /// Pops up to `count` entries, oldest first, handing each to `out`;
    /// -FI_EAGAIN when empty (without the lock when the flag says so),
    /// -FI_EAVAIL when an error (or the overrun event) is to be read first,
    /// -FI_EOVERRUN once that event was read. `count == 0`: `Ok(0)` when
    /// entries are queued.
    #[inline(always)]
    pub(crate) fn take(&self, count: usize, mut out: impl FnMut(usize, &CqEntry)) -> Result<usize> {
        if !self.any() {
            // Nothing to read: no lock taken (the loop of a polling
            // application).
            return Err(Error::AGAIN);
        }
        let mut q = self.lock();
        if !q.errs.is_empty() {
            return Err(Error::AVAIL);
        }
        if q.ok.is_empty() {
            return Err(match q.overrun {
                Overrun::No => Error::AGAIN,
                Overrun::Pending => Error::AVAIL,
                Overrun::Reported => Error::OVERRUN,
            });
        }
        let n = count.min(q.ok.len());
        for i in 0..n {
            let Some(e) = q.ok.pop_front() else { break };
            out(i, &e);
        }
        Ok(n)
    }

    /// `f` sees the oldest error, or the one `FI_EOVERRUN` event once an
    /// overrun queue has handed out every valid entry; the error read is
    /// kept until the next call (its `err_data` stays valid).
    pub(crate) fn take_err<R>(&self, f: impl FnOnce(CqErrRead<'_>) -> R) -> Result<R> {
        let mut q = self.lock();
        match q.errs.pop_front() {
            Some(e) => Ok(f(CqErrRead::Entry(q.last_err.insert(e)))),
            None => match q.overrun {
                Overrun::Pending if q.ok.is_empty() => {
                    q.overrun = Overrun::Reported;
                    Ok(f(CqErrRead::Overrun))
                }
                Overrun::Reported => Err(Error::OVERRUN),
                _ => Err(Error::AGAIN),
            },
        }
    }
}

#[cfg(all(test, loom))]
mod models {
    //! Exhaustive models (loom, C11 memory model) of the protocol above
    //! with concurrent producers (endpoints completing operations) and
    //! readers (application threads of an FI_THREAD_SAFE domain):
    //! `make loom`.
    use super::*;
    use crate::abi::FI_EIO;
    use core::ffi::c_void;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::Arc;
    use loom::thread;

    struct Loom;

    impl Prims for Loom {
        type Lock = loom::sync::Mutex<Queue>;
        type Guard<'a> = loom::sync::MutexGuard<'a, Queue>;
        type Flag = AtomicBool;
        fn new_lock(q: Queue) -> Self::Lock {
            loom::sync::Mutex::new(q)
        }
        fn lock(l: &Self::Lock) -> Self::Guard<'_> {
            l.lock().expect("model lock")
        }
        fn new_flag(v: bool) -> Self::Flag {
            AtomicBool::new(v)
        }
        fn load(f: &Self::Flag, o: Ordering) -> bool {
            f.load(o)
        }
        fn store(f: &Self::Flag, v: bool, o: Ordering) {
            f.store(v, o)
        }
    }

    type Q = CqQueue<Loom>;

    fn entry(n: usize) -> CqEntry {
        CqEntry::new(n as *mut c_void, 0)
    }

    fn id(e: &CqEntry) -> usize {
        e.op_context as usize
    }

    fn queue(size: usize) -> Arc<Q> {
        Arc::new(CqQueue::new(Queue::new(size).expect("queue")))
    }

    /// What a reader got: success entries and error entries by id.
    #[derive(Default)]
    struct Got {
        ok: Vec<usize>,
        errs: Vec<usize>,
        overrun_events: usize,
    }

    impl Got {
        /// One read as an application does it: fi_cq_read, and on
        /// -FI_EAVAIL fi_cq_readerr. Returns the read's result.
        fn read_once(&mut self, q: &Q) -> Result<usize> {
            let r = q.take(4, |_, e| self.ok.push(id(e)));
            if r == Err(Error::AVAIL) {
                q.take_err(|r| match r {
                    CqErrRead::Entry(e) => self.errs.push(id(&e.entry)),
                    CqErrRead::Overrun => self.overrun_events += 1,
                })
                .expect("-FI_EAVAIL, then fi_cq_readerr finds nothing");
            }
            r
        }

        /// Reads until the queue says -FI_EAGAIN or -FI_EOVERRUN.
        fn drain(&mut self, q: &Q) -> Error {
            loop {
                match self.read_once(q) {
                    Ok(n) => assert!(n > 0, "Ok(0) from a read of 4"),
                    Err(Error::AVAIL) => {}
                    Err(e) => return e,
                }
            }
        }
    }

    /// How a model's producer pushes an unclaimed completion: the real
    /// [`CqQueue::push`], or (planted) around the guard, as code that
    /// locked the queue directly would.
    type PushFn = fn(&Q, CqEntry) -> Result<()>;

    fn push_real(q: &Q, e: CqEntry) -> Result<()> {
        q.push(e)
    }

    fn push_around_the_guard(q: &Q, e: CqEntry) -> Result<()> {
        Loom::lock(&q.m).ok.push_back(e);
        Ok(())
    }

    /// Two producers that claimed their slots (one completes with an
    /// error) and two readers, on a CQ of 2: every completion read exactly
    /// once (nothing lost, nothing doubled), no overrun, and once everything
    /// is read the claims are all returned (2 claims fit again, a third
    /// does not). `claimed_push: false` (planted) pushes the claimed
    /// operations' completions as unclaimed ones.
    fn claimed_model(claimed_push: bool) {
        loom::model(move || {
            let q = queue(2);
            let (q1, q2, q3) = (q.clone(), q.clone(), q.clone());
            let w1 = thread::spawn(move || {
                q1.claim().expect("slot accounting: claim refused on a CQ with room");
                let r = if claimed_push {
                    q1.push_claimed(entry(1))
                } else {
                    q1.push(entry(1))
                };
                assert_eq!(r, Ok(()), "slot accounting: a claimed completion overran");
            });
            let w2 = thread::spawn(move || {
                q2.claim().expect("slot accounting: claim refused on a CQ with room");
                let e = CqErrEntry::new(entry(2), FI_EIO);
                let r = if claimed_push {
                    q2.push_err_claimed(e)
                } else {
                    q2.push_err(e)
                };
                assert_eq!(r, Ok(()), "slot accounting: a claimed completion overran");
            });
            let r1 = thread::spawn(move || {
                let mut g = Got::default();
                let _ = g.read_once(&q3);
                g
            });
            let mut mine = Got::default();
            let _ = mine.read_once(&q);
            w1.join().expect("writer 1");
            w2.join().expect("writer 2");
            let theirs = r1.join().expect("reader");
            // After the writers: a read sees everything not yet read.
            assert_eq!(mine.drain(&q), Error::AGAIN);
            let mut ok = [mine.ok, theirs.ok].concat();
            let mut errs = [mine.errs, theirs.errs].concat();
            ok.sort_unstable();
            errs.sort_unstable();
            assert_eq!(ok, [1], "completion lost or read twice");
            assert_eq!(errs, [2], "error completion lost or read twice");
            assert_eq!(
                mine.overrun_events + theirs.overrun_events,
                0,
                "overrun event without overrun"
            );
            assert_eq!(q.claim(), Ok(()), "slot accounting: claims not returned");
            assert_eq!(q.claim(), Ok(()), "slot accounting: claims not returned");
            assert_eq!(
                q.claim(),
                Err(Error::AGAIN),
                "slot accounting: more claims than capacity"
            );
        });
    }

    #[test]
    fn claimed_completions_are_read_once_and_never_overrun() {
        claimed_model(true);
    }

    #[test]
    #[should_panic(expected = "slot accounting")]
    fn claimed_completions_overrun_when_pushed_unclaimed() {
        claimed_model(false);
    }

    /// A CQ of 1, a producer pushing two unclaimed completions, a reader
    /// reading once meanwhile: the second push overruns exactly when the
    /// first entry is still queued — always if the reader found nothing,
    /// never if the reader's read of it happened before the push. Then the
    /// valid entries are read first, then one FI_EOVERRUN event, then
    /// -FI_EOVERRUN for reads, claims and pushes; without an overrun the
    /// second entry is read and the queue is empty.
    #[test]
    fn overrun_exactly_when_full() {
        loom::model(|| {
            let q = queue(1);
            let read_done = Arc::new(AtomicBool::new(false));
            let (q1, d1) = (q.clone(), read_done.clone());
            let w = thread::spawn(move || {
                assert_eq!(q1.push(entry(1)), Ok(()), "push into an empty CQ");
                let freed = d1.load(Ordering::Acquire);
                let r = q1.push(entry(2));
                if freed {
                    assert_eq!(r, Ok(()), "overrun although the first entry was read");
                }
                r
            });
            let mut g = Got::default();
            let first = g.read_once(&q);
            if first == Ok(1) {
                read_done.store(true, Ordering::Release);
            }
            let second = w.join().expect("writer");
            match first {
                Ok(1) => assert_eq!(g.ok, [1]),
                Err(Error::AGAIN) => {
                    assert_eq!(second, Err(Error::OVERRUN), "a push into a full CQ did not overrun")
                }
                r => panic!("unexpected first read {r:?}"),
            }
            let end = g.drain(&q);
            if second.is_ok() {
                assert_eq!(end, Error::AGAIN);
                assert_eq!(g.ok, [1, 2], "lost, doubled or reordered");
                assert_eq!(g.overrun_events, 0);
            } else {
                assert_eq!(end, Error::OVERRUN, "overrun never reported");
                assert_eq!(g.ok, [1], "the valid entry was not read before the overrun event");
                assert_eq!(g.overrun_events, 1, "not exactly one FI_EOVERRUN event");
                assert_eq!(q.take_err(|_| ()), Err(Error::OVERRUN));
                assert_eq!(q.claim(), Err(Error::OVERRUN));
                assert_eq!(q.push(entry(3)), Err(Error::OVERRUN));
                assert_eq!(q.take(4, |_, _| panic!("entry after overrun")), Err(Error::OVERRUN));
            }
        });
    }

    /// Two producers, each telling the reader when its push has returned
    /// (a Release store the reader Acquires: the read runs after the write
    /// completed), one reader reading meanwhile, then after both writers: the
    /// read of an empty CQ (the `any` flag, no lock) never hides an entry
    /// whose push completed before the read, and every entry is read once.
    fn empty_read_model(push: PushFn) {
        loom::model(move || {
            let q = queue(4);
            let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let mut ws = Vec::new();
            for i in 0..2 {
                let (q1, d1) = (q.clone(), done.clone());
                ws.push(thread::spawn(move || {
                    push(&q1, entry(i + 1)).expect("push into a CQ with room");
                    d1[i].store(true, Ordering::Release);
                }));
            }
            let mut g = Got::default();
            let before: Vec<usize> = (0..2)
                .filter(|&i| done[i].load(Ordering::Acquire))
                .map(|i| i + 1)
                .collect();
            let _ = g.read_once(&q);
            for e in before {
                assert!(g.ok.contains(&e), "a read after a completed push did not see its entry");
            }
            for w in ws {
                w.join().expect("writer");
            }
            // Both pushes completed before these reads.
            assert_eq!(g.drain(&q), Error::AGAIN);
            let mut all = g.ok;
            all.sort_unstable();
            assert_eq!(all, [1, 2], "a read after a completed push did not see its entry");
        });
    }

    #[test]
    fn empty_read_never_hides_a_completed_push() {
        empty_read_model(push_real);
    }

    #[test]
    #[should_panic(expected = "did not see its entry")]
    fn empty_read_hides_a_push_made_around_the_guard() {
        empty_read_model(push_around_the_guard);
    }
}
