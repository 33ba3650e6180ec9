//! Triggered operations (`fi_trigger(3)`, `FI_TRIGGER_THRESHOLD`): data
//! transfers queued on a counter and issued once its value (successes)
//! reaches their threshold.
//!
//! * Every counter owns a [`Triggers`] queue, sorted by threshold and, for
//!   equal thresholds, by submission ("Threshold operations are triggered
//!   in the order of the threshold values ... If two triggered operations
//!   have the same threshold, they will be triggered in the order in which
//!   they were submitted to the endpoint"). What an operation is and how it
//!   is issued is the C face's business ([`Deferred`]: a copy of the call,
//!   replayed without `FI_TRIGGER`); the queue only orders and hands out.
//! * Issuing never happens under a lock of the data path: a counter that
//!   reaches a threshold inside a progress pass or a post (with an
//!   endpoint's lock held) does nothing but count; its operations are issued
//!   by [`fire`], called from the application's `fi_cntr_add` /
//!   `fi_cntr_set`, from the submission itself (a counter already past the
//!   threshold) and from a [`TriggerSource`] that the counter registers with
//!   its engines when its first operation is queued — a source of its own,
//!   called between the endpoints' sources of a pass, so with no endpoint
//!   lock held. An untriggered operation meets none of this: a counter
//!   without triggered operations counts as before (one atomic add).
//! * One thread issues a counter's operations at a time (`firing`), so that
//!   two threads finding the counter past two thresholds cannot issue them
//!   out of order; a thread that finds another issuing leaves it a note
//!   (`again`) and the issuing one looks once more before it stops.
//! * An operation whose issue fails with `-FI_EAGAIN` (no room in the
//!   transmit queue) stays first in the queue and is tried again on the next
//!   pass; any other failure is reported as an error completion carrying its
//!   context ([`Deferred::fail`]; the C face writes it, `fi/trigger.rs`).
//! * Closing a counter frees its queued operations ([`Triggers::close`]);
//!   closing an endpoint frees those it submitted ([`Triggers::purge`]).

use crate::base::error::{Error, Result};
use crate::core::progress::{Engine, Source};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// Operations one counter may hold queued; one more is -FI_EAGAIN.
pub(crate) const MAX_QUEUED: usize = 1 << 16;

/// A queued operation, as the C face built it.
pub(crate) trait Deferred: Send {
    /// Issues the operation. `Err(AGAIN)`: not now, keep it queued.
    fn issue(&mut self) -> Result<()>;
    /// The issue failed with `err`: report it (an error completion).
    fn fail(self: Box<Self>, err: Error);
    /// The endpoint the operation was submitted to ([`Triggers::purge`]).
    fn owner(&self) -> usize;
}

struct Entry {
    threshold: u64,
    op: Box<dyn Deferred>,
}

/// An engine a counter's [`TriggerSource`] was added to, and the source.
type Watched = (Weak<Engine>, Arc<dyn Source>);

/// A counter's queue of triggered operations. See the module documentation.
pub(crate) struct Triggers {
    /// The lowest queued threshold; `u64::MAX` when none is queued.
    next: AtomicU64,
    /// Sorted by threshold, submission order among equals.
    queue: Mutex<Vec<Entry>>,
    firing: AtomicBool,
    again: AtomicBool,
    /// The engines this counter's [`TriggerSource`] was added to.
    sources: Mutex<Vec<Watched>>,
}

impl Default for Triggers {
    fn default() -> Triggers {
        Triggers {
            next: AtomicU64::new(u64::MAX),
            queue: Mutex::new(Vec::new()),
            firing: AtomicBool::new(false),
            again: AtomicBool::new(false),
            sources: Mutex::new(Vec::new()),
        }
    }
}

/// What a counter is to its triggered operations: a value to compare and
/// the queue (implemented by `core/cntr.rs`'s `Cntr`).
pub(crate) trait Counted: Send + Sync {
    /// The success count, without progress.
    fn value(&self) -> u64;
    fn triggers(&self) -> &Triggers;
}

impl Triggers {
    /// Whether an operation is queued whose threshold `value` reaches.
    #[inline]
    pub(crate) fn due(&self, value: u64) -> bool {
        value >= self.next.load(Ordering::Acquire)
    }

    /// Operations queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.queue.lock().len()
    }

    /// Queues `op` behind every operation with a threshold not above
    /// `threshold`. -FI_EAGAIN when [`MAX_QUEUED`] are queued.
    pub(crate) fn push(&self, threshold: u64, op: Box<dyn Deferred>) -> Result<()> {
        let mut q = self.queue.lock();
        if q.len() >= MAX_QUEUED {
            return Err(Error::AGAIN);
        }
        let at = q.partition_point(|e| e.threshold <= threshold);
        q.insert(at, Entry { threshold, op });
        self.set_next(&q);
        Ok(())
    }

    fn set_next(&self, q: &[Entry]) {
        self.next
            .store(q.first().map_or(u64::MAX, |e| e.threshold), Ordering::Release);
    }

    /// Takes the first queued operation if `value` reaches its threshold.
    fn take_due(&self, value: u64) -> Option<Entry> {
        let mut q = self.queue.lock();
        if q.first().is_none_or(|e| e.threshold > value) {
            return None;
        }
        let e = q.remove(0);
        self.set_next(&q);
        Some(e)
    }

    /// Puts back an operation taken by [`Triggers::take_due`], first.
    fn put_back(&self, e: Entry) {
        let mut q = self.queue.lock();
        q.insert(0, e);
        self.set_next(&q);
    }

    /// Frees the operations `owner` (an endpoint being closed) submitted.
    /// Returns how many were freed.
    pub(crate) fn purge(&self, owner: usize) -> usize {
        let gone: Vec<Entry> = {
            let mut q = self.queue.lock();
            let (gone, kept) = std::mem::take(&mut *q).into_iter().partition(|e| e.op.owner() == owner);
            *q = kept;
            self.set_next(&q);
            gone
        };
        gone.len()
    }

    /// The counter is being closed: its source leaves the engines, its
    /// queued operations are freed (never issued).
    pub(crate) fn close(&self) {
        let sources = std::mem::take(&mut *self.sources.lock());
        for (e, s) in sources {
            if let Some(e) = e.upgrade() {
                e.remove_source(&s);
            }
        }
        let q = std::mem::take(&mut *self.queue.lock());
        self.next.store(u64::MAX, Ordering::Release);
        drop(q);
    }
}

/// Adds `c`'s [`TriggerSource`] to each of `engines` it is not in yet
/// (at the first queued operation).
pub(crate) fn watch(c: &Arc<dyn Counted>, engines: &[Arc<Engine>]) {
    let mut have = c.triggers().sources.lock();
    for e in engines {
        if have.iter().any(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(e))) {
            continue;
        }
        let s: Arc<dyn Source> = Arc::new(TriggerSource {
            cntr: Arc::downgrade(c),
        });
        e.add_source(s.clone());
        have.push((Arc::downgrade(e), s));
    }
}

/// Issues every queued operation of `c` whose threshold its value reaches,
/// in order; with no lock of the data path held (module documentation).
pub(crate) fn fire(c: &dyn Counted) {
    let t = c.triggers();
    if !t.due(c.value()) {
        return;
    }
    loop {
        if t.firing.swap(true, Ordering::AcqRel) {
            // Another thread issues: it looks again before it stops.
            t.again.store(true, Ordering::Release);
            return;
        }
        t.again.store(false, Ordering::Release);
        let mut blocked = false;
        while let Some(mut e) = t.take_due(c.value()) {
            match e.op.issue() {
                Ok(()) => {}
                Err(Error::AGAIN) => {
                    t.put_back(e);
                    blocked = true;
                    break;
                }
                Err(err) => e.op.fail(err),
            }
        }
        t.firing.store(false, Ordering::Release);
        if blocked || !t.again.load(Ordering::Acquire) || !t.due(c.value()) {
            return;
        }
    }
}

/// A counter with queued operations as a source of its engine: each pass
/// issues what became due (module documentation).
struct TriggerSource {
    cntr: Weak<dyn Counted>,
}

impl Source for TriggerSource {
    fn progress(&self) -> bool {
        if let Some(c) = self.cntr.upgrade() {
            fire(&*c);
        }
        false
    }
    fn has_pending(&self) -> bool {
        self.cntr.upgrade().is_some_and(|c| c.triggers().due(c.value()))
    }
}

#[cfg(test)]
mod tests;
