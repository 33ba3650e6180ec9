//! A CQ's queue and its slot accounting under `FI_THREAD_SAFE`: the
//! success and error queues, the capacity and the overrun state behind one
//! lock; the slot counters (claims at post time take no lock) and the
//! `any` flag that lets a read of an empty CQ return without taking the
//! lock beside it. The protocol is written once, generic over the lock and
//! the atomics ([`Prims`]): the CQ core (`cq.rs`) runs it on `parking_lot`
//! and std atomics ([`Native`]), the loom models (`cq_queue/models.rs`,
//! `cfg(loom)`, `make loom`) on loom's mutex and atomics, so the code they
//! check is the code the provider runs (as `transport/shm/sync.rs` does for
//! the shm ring).
//!
//! * Capacity: `max(attr.size, Σ reservations)`; queued entries, queued
//!   errors and claimed slots together never exceed it.
//! * Slots are counted outside the lock by two counters: `taken` (slots
//!   ever taken: claims and unclaimed pushes, less unclaims; its top bit,
//!   [`DEAD`], set for good when the CQ overruns) and `freed` (entries and
//!   errors ever read, stored only by readers, under the lock: a plain
//!   load and store). Slots in use = `taken - freed`. A claim at post time
//!   ([`CqQueue::claim`]) loads `freed` (Acquire), then `taken`, and takes
//!   a slot with one compare-exchange of `taken` when `taken - freed <
//!   cap`: no lock, one locked instruction (uncontended: producers are the
//!   endpoints bound to the CQ). Loading `freed` first is what keeps `taken
//!   - freed` from going negative: every read counted in `freed` was of an
//!   entry whose slot was taken before the read (the lock orders them), so
//!   the later load of `taken` sees that take.
//! * A claimed completion ([`CqQueue::push_claimed`]) always fits (its slot
//!   is already counted: the push only queues); an unclaimed one takes its
//!   slot the same way under the lock, and one that finds no room starts
//!   the overrun state of fi_cq(3) (the entry is dropped, `DEAD` set, valid
//!   entries are still read first, then one `FI_EOVERRUN` event, then
//!   -FI_EOVERRUN for good).
//! * The `any` flag: every unlock (the guard's drop, still inside the
//!   lock) stores whether a read would find something (an entry, an
//!   error, the overrun state), so it is exact whenever no one holds the
//!   lock. A push's unlock ([`PushGuard`]) stores `true` without that
//!   test: a push always leaves something to read (its entry, or the
//!   overrun state that refused it); a take ([`CqQueue::take`]) only
//!   shortens the success queue, so it stores `false` when it leaves that
//!   queue empty with no error queued and no overrun, and nothing else.
//!   An empty read loads it (Acquire) and returns -FI_EAGAIN without
//!   locking; a read that runs after a push completed (happens-after it)
//!   sees `true` unless another reader emptied the queue meanwhile. A read
//!   racing a push may miss the newest entry, as it would by reading a
//!   moment earlier.

use super::cq_entry::{CqEntry, CqErrEntry, CqErrRead};
use crate::base::error::{Error, Result};
use crate::base::serial::{LockMode, ModeGuard, ModeMutex};
use core::ops::DerefMut;
use core::sync::atomic::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Overrun {
    No,
    /// Entries were dropped; the FI_EOVERRUN error is still to be read.
    Pending,
    /// The FI_EOVERRUN error was read; the CQ is dead.
    Reported,
}

/// The top bit of `taken`: the CQ overran (set once, never cleared), so
/// that a claim's room test fails and its slow path says -FI_EOVERRUN.
const DEAD: usize = 1 << (usize::BITS - 1);

/// Everything behind the CQ's one lock.
pub(crate) struct Queue {
    pub(crate) ok: VecDeque<CqEntry>,
    pub(crate) errs: VecDeque<CqErrEntry>,
    pub(crate) size: usize,
    pub(crate) reserved: usize,
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
            overrun: Overrun::No,
            last_err: None,
        })
    }
    pub(crate) fn cap(&self) -> usize {
        self.size.max(self.reserved)
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
    type Count;
    fn new_lock(q: Queue, mode: Arc<LockMode>) -> Self::Lock;
    fn lock(l: &Self::Lock) -> Self::Guard<'_>;
    /// Whether the lock is in its domain's serial mode now
    /// (base/serial.rs): then no other thread touches the queue or its
    /// counters, and a claim takes its slot with a plain store.
    fn serial(l: &Self::Lock) -> bool;
    fn new_flag(v: bool) -> Self::Flag;
    fn load(f: &Self::Flag, o: Ordering) -> bool;
    fn store(f: &Self::Flag, v: bool, o: Ordering);
    fn new_count(v: usize) -> Self::Count;
    fn get(c: &Self::Count, o: Ordering) -> usize;
    fn set(c: &Self::Count, v: usize, o: Ordering);
    /// `compare_exchange(cur, new, Relaxed, Relaxed).is_ok()`.
    fn cas(c: &Self::Count, cur: usize, new: usize) -> bool;
    fn fetch_sub(c: &Self::Count, v: usize) -> usize;
    fn fetch_or(c: &Self::Count, v: usize) -> usize;
}

/// The provider's: the domain's mode lock (base/serial.rs: a plain flag
/// at `FI_THREAD_DOMAIN`, else `parking_lot`'s mutex, which never
/// poisons) and std's atomics.
pub(crate) struct Native;

impl Prims for Native {
    type Lock = ModeMutex<Queue>;
    type Guard<'a> = ModeGuard<'a, Queue>;
    type Flag = core::sync::atomic::AtomicBool;
    #[inline(always)]
    fn new_lock(q: Queue, mode: Arc<LockMode>) -> Self::Lock {
        ModeMutex::new(q, mode)
    }
    #[inline(always)]
    fn lock(l: &Self::Lock) -> Self::Guard<'_> {
        l.lock()
    }
    #[inline(always)]
    fn serial(l: &Self::Lock) -> bool {
        l.is_serial()
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
    type Count = core::sync::atomic::AtomicUsize;
    #[inline(always)]
    fn new_count(v: usize) -> Self::Count {
        core::sync::atomic::AtomicUsize::new(v)
    }
    #[inline(always)]
    fn get(c: &Self::Count, o: Ordering) -> usize {
        c.load(o)
    }
    #[inline(always)]
    fn set(c: &Self::Count, v: usize, o: Ordering) {
        c.store(v, o)
    }
    #[inline(always)]
    fn cas(c: &Self::Count, cur: usize, new: usize) -> bool {
        c.compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
    #[inline(always)]
    fn fetch_sub(c: &Self::Count, v: usize) -> usize {
        c.fetch_sub(v, Ordering::Relaxed)
    }
    #[inline(always)]
    fn fetch_or(c: &Self::Count, v: usize) -> usize {
        c.fetch_or(v, Ordering::Relaxed)
    }
}

/// The CQ's queue behind its lock, with the `any` flag (module
/// documentation).
pub(crate) struct CqQueue<P: Prims = Native> {
    m: P::Lock,
    any: P::Flag,
    /// Slots ever taken (claims, unclaimed pushes, less unclaims), with
    /// [`DEAD`] once overrun (module documentation).
    taken: P::Count,
    /// Entries and errors ever read; stored under the lock only.
    freed: P::Count,
    /// `max(size, reserved)`, stored under the lock (reserve, release).
    cap: P::Count,
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

/// The lock held by a push: its drop sets the `any` flag, then unlocks.
/// Every push leaves something for a reader, whether it queued its entry
/// or found the CQ overrun (the overrun state is read as an event), so
/// the flag is `true` after it without recomputing [`Queue::any`].
pub(crate) struct PushGuard<'a, P: Prims + 'a> {
    q: P::Guard<'a>,
    any: &'a P::Flag,
}

impl<P: Prims> Drop for PushGuard<'_, P> {
    #[inline(always)]
    fn drop(&mut self) {
        // Inside the lock, as `QueueGuard`'s.
        debug_assert!(self.q.any(), "a push left nothing to read");
        if !P::load(self.any, Ordering::Relaxed) {
            P::store(self.any, true, Ordering::Release);
        }
    }
}

impl<P: Prims> core::ops::Deref for PushGuard<'_, P> {
    type Target = Queue;
    #[inline(always)]
    fn deref(&self) -> &Queue {
        &self.q
    }
}

impl<P: Prims> core::ops::DerefMut for PushGuard<'_, P> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Queue {
        &mut self.q
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

impl CqQueue<Native> {
    /// The locking mode the lock follows (base/serial.rs).
    pub(crate) fn lock_mode(&self) -> &Arc<LockMode> {
        self.m.mode()
    }
}

impl<P: Prims> CqQueue<P> {
    /// A queue whose lock follows `mode` (its CQ's domain's).
    pub(crate) fn new(q: Queue, mode: Arc<LockMode>) -> CqQueue<P> {
        CqQueue {
            any: P::new_flag(q.any()),
            taken: P::new_count(0),
            freed: P::new_count(0),
            cap: P::new_count(q.cap()),
            m: P::new_lock(q, mode),
        }
    }

    /// Takes one slot if `taken - freed < cap` (module documentation).
    /// `Err(AGAIN)`: full; `Err(OVERRUN)`: overrun.
    #[inline(always)]
    fn take_slot(&self) -> Result<()> {
        loop {
            // `freed` first: see the module documentation.
            let f = P::get(&self.freed, Ordering::Acquire);
            let t = P::get(&self.taken, Ordering::Relaxed);
            if t.wrapping_sub(f) >= P::get(&self.cap, Ordering::Relaxed) {
                return Err(if t & DEAD != 0 { Error::OVERRUN } else { Error::AGAIN });
            }
            if P::serial(&self.m) {
                // No other thread (base/serial.rs): no read-modify-write.
                P::set(&self.taken, t.wrapping_add(1), Ordering::Relaxed);
                return Ok(());
            }
            if P::cas(&self.taken, t, t.wrapping_add(1)) {
                return Ok(());
            }
        }
    }

    /// Room for an unclaimed completion (its slot taken), or the start of
    /// the overrun state. Under the lock (`q`).
    #[inline(always)]
    fn admit_unclaimed(&self, q: &mut Queue) -> Result<()> {
        if q.overrun != Overrun::No {
            return Err(Error::OVERRUN);
        }
        if self.take_slot().is_ok() {
            return Ok(());
        }
        q.overrun = Overrun::Pending;
        P::fetch_or(&self.taken, DEAD);
        Err(Error::OVERRUN)
    }

    /// `n` entries or errors were read (under the lock: readers are
    /// serialised by it, so a plain load and store).
    #[inline(always)]
    fn freed(&self, n: usize) {
        let f = P::get(&self.freed, Ordering::Relaxed);
        P::set(&self.freed, f.wrapping_add(n), Ordering::Release);
    }

    /// Whether one more unclaimed completion fits now (not overrun).
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        let f = P::get(&self.freed, Ordering::Acquire);
        let t = P::get(&self.taken, Ordering::Relaxed);
        t.wrapping_sub(f) < P::get(&self.cap, Ordering::Relaxed)
    }

    /// Current capacity: `max(attr.size, Σ reservations)`.
    #[cfg(test)]
    pub(crate) fn cap(&self) -> usize {
        P::get(&self.cap, Ordering::Relaxed)
    }

    #[inline(always)]
    pub(crate) fn lock(&self) -> QueueGuard<'_, P> {
        QueueGuard {
            q: P::lock(&self.m),
            any: &self.any,
        }
    }

    /// The lock for a push ([`PushGuard`]: its unlock sets the flag).
    #[inline(always)]
    fn lock_for_push(&self) -> PushGuard<'_, P> {
        PushGuard {
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

    /// Slots taken so far (claims and unclaimed pushes, less unclaims): it
    /// moves whenever an operation that will complete here is posted or an
    /// unclaimed completion is pushed. A plain load: a stale value only
    /// makes [`Cq::read`](crate::core::cq::Cq::read) progress once more.
    #[inline(always)]
    pub(crate) fn taken_mark(&self) -> usize {
        P::get(&self.taken, Ordering::Relaxed)
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
        P::set(&self.cap, q.cap(), Ordering::Relaxed);
        Ok(())
    }

    /// Undoes [`CqQueue::reserve`]; queued completions stay readable.
    pub(crate) fn release(&self, n: usize) {
        let mut q = self.lock();
        q.reserved = q.reserved.saturating_sub(n);
        P::set(&self.cap, q.cap(), Ordering::Relaxed);
    }

    /// A completion no claim announced. `Err(FI_EOVERRUN)`: no room (the
    /// entry is dropped and the CQ now overrun) or already overrun.
    #[inline(always)]
    pub(crate) fn push(&self, e: CqEntry) -> Result<()> {
        let mut q = self.lock_for_push();
        self.admit_unclaimed(&mut q).map(|()| q.ok.push_back(e))
    }

    /// An error completion no claim announced.
    pub(crate) fn push_err(&self, e: CqErrEntry) -> Result<()> {
        let mut q = self.lock_for_push();
        self.admit_unclaimed(&mut q).map(|()| q.errs.push_back(e))
    }

    /// Sets aside room for one operation's completion. `Err(EAGAIN)`: full
    /// of unread completions and claims; `Err(OVERRUN)`: overrun.
    /// No lock: one compare-exchange (module documentation).
    #[inline(always)]
    pub(crate) fn claim(&self) -> Result<()> {
        self.take_slot()
    }

    /// The claimed operation ended without a completion: its slot is
    /// given back.
    pub(crate) fn unclaim(&self) {
        P::fetch_sub(&self.taken, 1);
    }

    /// The completion of an operation that claimed a slot: it fits (the
    /// slot is counted), unless the CQ overran meanwhile (dropped).
    #[inline(always)]
    pub(crate) fn push_claimed(&self, e: CqEntry) -> Result<()> {
        let mut q = self.lock_for_push();
        if q.overrun != Overrun::No {
            return Err(Error::OVERRUN);
        }
        q.ok.push_back(e);
        Ok(())
    }

    /// The error completion of an operation that claimed a slot.
    pub(crate) fn push_err_claimed(&self, e: CqErrEntry) -> Result<()> {
        let mut q = self.lock_for_push();
        if q.overrun != Overrun::No {
            return Err(Error::OVERRUN);
        }
        q.errs.push_back(e);
        Ok(())
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
        // The lock without a guard that recomputes the flag: a take
        // changes nothing but `ok`, and only makes it shorter, so the flag
        // (exact at the last unlock) can only have to go from `true` to
        // `false`, which is stored below when `ok` is left empty (`errs`
        // is, or the take returns before changing anything).
        let mut q = P::lock(&self.m);
        if !q.errs.is_empty() {
            return Err(Error::AVAIL);
        }
        if q.ok.is_empty() {
            return Err(match q.overrun {
                Overrun::No => {
                    // A flag left `true` by an unlock that did not clear
                    // it (an `out` that unwound): cleared here.
                    P::store(&self.any, false, Ordering::Release);
                    Error::AGAIN
                }
                Overrun::Pending => Error::AVAIL,
                Overrun::Reported => Error::OVERRUN,
            });
        }
        let n = count.min(q.ok.len());
        for i in 0..n {
            let Some(e) = q.ok.pop_front() else { break };
            out(i, &e);
        }
        self.freed(n);
        if q.ok.is_empty() && q.overrun == Overrun::No {
            P::store(&self.any, false, Ordering::Release);
        }
        Ok(n)
    }

    /// `f` sees the oldest error, or the one `FI_EOVERRUN` event once an
    /// overrun queue has handed out every valid entry; the error read is
    /// kept until the next call (its `err_data` stays valid).
    pub(crate) fn take_err<R>(&self, f: impl FnOnce(CqErrRead<'_>) -> R) -> Result<R> {
        let mut q = self.lock();
        match q.errs.pop_front() {
            Some(e) => {
                self.freed(1);
                Ok(f(CqErrRead::Entry(q.last_err.insert(e))))
            }
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
mod models;
