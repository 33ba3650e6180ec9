//! Completion queues (`fi_cq(3)`).
//!
//! # What a CQ owns
//! One [`Cq`] core per `fi_cq_open`: a success queue (a preallocated ring of
//! [`CqEntry`], the one internal completion record), a separate error queue
//! of [`CqErrEntry`], the CQ's [`WaitObj`], and the holds on its domain and
//! (for `FI_WAIT_SET`) its wait set. Endpoints (the producers) hold
//! `Held<Cq>`; the application reads through the `fid_cq` vtable of the C
//! face (`fi/cq.rs`), which writes what [`Cq::read`] and [`Cq::read_err`]
//! hand out into the application's buffers.
//!
//! # Decisions
//! * **One record, converted at read time.** Every completion is stored as a
//!   [`CqEntry`] and written out (by the C face) in the format chosen at
//!   open, one entry at a time as [`Cq::read`] pops it: no copy in between,
//!   no allocation.
//!   `FI_CQ_FORMAT_UNSPEC` is read as `FI_CQ_FORMAT_CONTEXT` (libfabric's util
//!   CQ does the same): an application that did not name a format can only
//!   count on `op_context` coming first, and the 8-byte context entry is the
//!   only format that can never write past a buffer sized for any format.
//! * **Errors first.** fi_cq(3): "Attempting to read from a CQ while an item
//!   is in the error queue results in fi_cq_read failing with a return code of
//!   -FI_EAVAIL." A pending error therefore takes priority over queued
//!   successes (as in the sockets provider; util instead keeps one FIFO).
//! * **`err_data`.** API ≥ 1.5 and the application's `err_data_size > 0`
//!   (with a non-NULL `err_data`): copy `min()` bytes into its buffer and set
//!   `err_data_size` to the count. Otherwise `err_data` points at a buffer the
//!   CQ owns, valid until the next `fi_cq_readerr` ("The contents of the buffer
//!   will remain valid until a subsequent read call against the CQ": the CQ
//!   keeps the last error read), and `err_data_size` is its length. API <
//!   1.5 applications allocate the 72-byte `fi_cq_err_entry_1_0`: exactly
//!   that many bytes are written.
//! * **Capacity and overrun.** Completions are never lost and memory is
//!   bounded. The capacity is `max(attr.size, Σ reservations)`, where each
//!   bound endpoint reserves its `tx_size + rx_size` ([`Cq::reserve_capacity`]).
//!   Endpoints bound their outstanding operations (posts return -FI_EAGAIN at
//!   `tx_size`/`rx_size`), so every posted operation's completion fits. (A
//!   CQ that instead failed posts against `attr.size` would deadlock Open MPI,
//!   which pre-posts more receives than a small CQ's size.) Errors count
//!   against the same capacity. For operations whose slot is only freed when
//!   the application *reads* the completion (what FI_RM_ENABLED promises even
//!   to an application that never reads), endpoints claim a slot at post time
//!   ([`Cq::claim_slot`], -FI_EAGAIN when full) and push with
//!   [`Cq::push_claimed`]. If an unclaimed push finds no room anyway (a bug or
//!   misuse), the CQ enters the overrun state of fi_cq(3) NOTES: "Read
//!   operations will continue to return any valid, non-corrupted completions
//!   ... After all valid completions have been retrieved, any attempt to read
//!   the CQ will result in it returning an FI_EOVERRUN error event." Here: the
//!   queued entries (and queued errors) are read first, then one read returns
//!   -FI_EAVAIL and `fi_cq_readerr` returns an entry with `err =
//!   FI_EOVERRUN`; from then on every read and readerr returns -FI_EOVERRUN
//!   and later pushes are dropped ("Overrun completion queues are considered
//!   fatal"). There is no unbounded spill queue.
//! * **`FI_SOURCE_ERR`.** A received message whose source is not in the AV
//!   is pushed as an error ([`CqErrEntry::source_unknown`]): `err =
//!   FI_EADDRNOTAVAIL`, the raw source address in `err_data` ("This may be
//!   passed directly into an fi_av_insert call").
//! * **Blocking calls.** `fi_cq_sread`/`sreadfrom` on a CQ opened with
//!   `FI_WAIT_NONE` or `FI_WAIT_SET` ("It is invalid for applications to call
//!   these functions if the CQ has been configured with a wait object of
//!   FI_WAIT_NONE or FI_WAIT_SET") return -FI_ENOSYS, as util's EQ and counter
//!   do for the same misuse. The timeout is in ms (negative = infinite);
//!   -FI_EAGAIN on timeout or after `fi_cq_signal`. With
//!   `FI_CQ_COND_THRESHOLD`, `cond` *is* the threshold (a `size_t` passed as
//!   the pointer value, as libfabric's util and sockets providers read it),
//!   capped at `count`; the wait ends early on an error entry or the timeout,
//!   and then returns whatever is queued ("Applications should not rely on
//!   the condition necessarily being true when a blocking read call
//!   returns").
//! * **The queue.** The queue, its slot accounting (capacity, claims,
//!   overrun) and the `any` flag that lets a read of an empty CQ skip the
//!   lock live in `cq_queue.rs`, generic over the lock and the atomic so
//!   that its loom models (`make loom`) check the code this core runs.
//! * **Manual progress.** A read first runs the domain's progress engine
//!   ([`WaitObj::progress`]) and tells the wait object that the application
//!   is reading ([`WaitObj::on_read`], which ends a `fi_trywait` arm). Two
//!   `fi_cq_read`s skip the pass: one that finds entries queued (all but
//!   every [`PROGRESS_EVERY`]-th), and the one drain read right after a
//!   read whose pass delivered, with nothing posted since ([`Cq::drained`]);
//!   the read after either progresses.
//!
//! # Producer API (for endpoints)
//! * bind/close: [`Cq::reserve_capacity`]`(tx_size + rx_size)` /
//!   [`Cq::release_capacity`]`(same)`;
//! * a completion: [`Cq::push`]`(CqEntry)`; an error completion:
//!   [`Cq::push_err`]`(CqErrEntry)` (one lock, no allocation, no system call
//!   unless a waiter is armed);
//! * completions without a post (multi-recv deliveries, remote CQ data):
//!   check [`Cq::has_room`] first and stall the transport while it is false;
//! * optional admission control: [`Cq::claim_slot`] at post time,
//!   [`Cq::push_claimed`]/[`Cq::push_err_claimed`] for that operation's
//!   completion, [`Cq::unclaim_slot`] if it ends without one.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::base::serial::LockMode;
pub(crate) use crate::core::cq_entry::{CqEntry, CqErrEntry, CqErrRead};
use crate::core::cq_queue::{CqQueue, Queue};
use crate::core::domain::Domain;
use crate::core::users::{HasUsers, Held, Users};
use crate::core::wait::{Holds, MemberWait, WaitObj, WaitSet, Waitable};
use crate::sys::Deadline;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Default number of entries when `attr.size == 0`.
pub(crate) const DEFAULT_CQ_SIZE: usize = 1024;
/// Largest `attr.size` accepted (the ring is preallocated): larger sizes
/// return -FI_EINVAL, which fabtests' `cq_open_close_sizes` accepts as the
/// provider's limit.
pub(crate) const MAX_CQ_SIZE: usize = 1 << 20;

/// Reads of a CQ that holds entries return them without a progress pass
/// first (the pass would find the next completions, which a later read
/// gets): a ping-pong's send completion, queued when the send returned, is
/// read without polling the rings again. Every PROGRESS_EVERY-th such read
/// still progresses, so an application that always finds entries (a deep
/// CQ read one entry at a time) keeps its endpoints moving.
const PROGRESS_EVERY: u32 = 16;

/// [`Cq::drained`] when no read is to be skipped.
const NOT_DRAINED: usize = usize::MAX;

/// The CQ core. See the module documentation.
pub(crate) struct Cq {
    users: Users,
    /// The `context` given to `fi_cq_open` (returned by `fi_poll`), an
    /// opaque value.
    context: usize,
    format: u32,
    wait_cond: u32,
    /// `fid_fabric.api_version` of the parent fabric (err_data rules).
    api_version: u32,
    wait: WaitObj,
    q: CqQueue,
    /// Reads that found entries and skipped the progress pass in a row.
    skipped: AtomicU32,
    /// After an `fi_cq_read` whose progress pass found completions that it
    /// returned: the queue's [`taken_mark`](CqQueue::taken_mark) then; else
    /// [`NOT_DRAINED`] (cleared by the next read that finds the queue
    /// empty). That read, when the mark is unmoved (nothing posted to
    /// complete here since), returns -FI_EAGAIN without a pass: it is an
    /// application draining the CQ (Open MPI's mtl ofi reads until
    /// -FI_EAGAIN after every completion), and the pass just ran. Only one
    /// read is skipped: the one after progresses again (liveness), and
    /// `fi_cq_sread`, `fi_trywait`, `fi_cq_readerr` and zero-count reads
    /// always progress.
    drained: AtomicUsize,
    set: Option<Held<WaitSet>>,
    _domain: Option<Held<Domain>>,
    /// `fi_cq_read` calls in a row that found nothing while no peer moved
    /// (see [`IDLE_YIELD_AFTER`]).
    idle: AtomicU32,
    /// Empty reads between two yields once they began (a power of two,
    /// IDLE_YIELD_EVERY ..= IDLE_YIELD_EVERY_MAX): doubles after a yield
    /// that found nothing else to run, back to IDLE_YIELD_EVERY after one
    /// that did (see [`YIELD_ALONE`]). Kept across idle spells.
    yield_every: AtomicU32,
    #[cfg(test)]
    yields: AtomicU32,
    /// Tests: what the next yields "took" in nanoseconds (0: measured).
    #[cfg(test)]
    yield_took_ns: std::sync::atomic::AtomicU64,
}

/// A process that polls an empty CQ (Open MPI's mtl ofi waits in a loop of
/// `fi_cq_read`) keeps its core busy; when the machine has more busy
/// processes than cores (several ranks per core, or "hosts" sharing a
/// machine), the ranks that do have work then wait for a scheduler tick —
/// a shm ping-pong went from microseconds to milliseconds next to two
/// ranks polling for a collective. So after IDLE_YIELD_AFTER empty reads in
/// a row (4-10 microseconds of polling: longer than a small-message
/// round trip, so a ping-pong does not get there), every
/// IDLE_YIELD_EVERY-th empty read yields the processor (`sched_yield`):
/// cheap when nothing else wants the core, and the core goes to the ranks
/// that have work when something does. A read that returns a completion
/// starts the count anew. (1024 reads and every 8th left the 2 x 2 ping-pong
/// at ~150 us: when both ping-pong ranks share a core each of them waited
/// the whole count before giving the core to the other; 64 and every 2nd
/// brought it to ~14 us, and `make bench`'s shm latency and bandwidth did
/// not get worse — docs/performance-history.md "Scale".)
///
/// Only reads whose progress pass saw no peer move count (`Port::poll`:
/// shm, a record consumed or the consumer of a ring we wait on for room
/// advancing its head; TCP, a record sent or bytes read within the last
/// ~200 us: an answer between hosts is a network round trip away). A peer that moves runs on another
/// processor: yielding ours cannot help it, and on a core shared with a
/// third busy process a yield hands that process a whole slice — a 4 KiB
/// stream fell from ~7,000 to 20-380 MB/s (docs/performance-history.md "4 KiB
/// under load"). A read that sees a peer move starts the count anew, so
/// the yields begin IDLE_YIELD_AFTER reads after the peer went still.
///
/// A yield with nothing else to run on the processor is a system call of
/// ~0.7 us here, and a message that arrives meanwhile waits for it: a 4 KiB
/// or 64 KiB ping-pong's wait is longer than 64 empty reads, and Open MPI's
/// 64 KiB ping-pong made ~0.8 yields per message. So the interval adapts
/// (`yield_every`): a yield back within YIELD_ALONE doubles it, up to
/// IDLE_YIELD_EVERY_MAX empty reads (~20-40 us of polling per yield); a
/// longer one (another process ran) brings it back to IDLE_YIELD_EVERY.
/// On a processor of its own a polling loop so stops yielding after a few
/// yields; on a shared one it keeps yielding (docs/performance-history.md
/// "yieldback").
pub(crate) const IDLE_YIELD_AFTER: u32 = 64;
pub(crate) const IDLE_YIELD_EVERY: u32 = 2;
pub(crate) const IDLE_YIELD_EVERY_MAX: u32 = 1024;
const _: () = assert!(IDLE_YIELD_EVERY.is_power_of_two() && IDLE_YIELD_EVERY_MAX.is_power_of_two());
/// A yield that returned sooner than this ran nobody else (a yield that
/// does runs the other task until it yields or its slice ends: tens of
/// microseconds or more).
pub(crate) const YIELD_ALONE: std::time::Duration = std::time::Duration::from_micros(2);

impl HasUsers for Cq {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Waitable for Cq {
    fn ready(&self) -> bool {
        self.q.lock().ready(1)
    }
}

/// What `fi_cq_open` asks for: `struct CqAttr` without its pointers
/// (the wait set arrives as a [`Holds`]) and the unused `signaling_vector`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CqAttr {
    pub(crate) size: usize,
    pub(crate) flags: u64,
    pub(crate) format: u32,
    pub(crate) wait_obj: u32,
    pub(crate) wait_cond: u32,
}

/// Checks a CQ's attributes the way fi_cq(3) defines their fields.
fn check_attr(attr: &CqAttr) -> Result<()> {
    if attr.flags & !FI_AFFINITY != 0 {
        return Err(Error::INVAL);
    }
    if !matches!(
        attr.format,
        FI_CQ_FORMAT_UNSPEC | FI_CQ_FORMAT_CONTEXT | FI_CQ_FORMAT_MSG | FI_CQ_FORMAT_DATA | FI_CQ_FORMAT_TAGGED
    ) {
        return Err(Error::INVAL);
    }
    if !crate::core::wait::valid_object_kind(attr.wait_obj) {
        return Err(Error::INVAL);
    }
    // "This field is ignored if wait_obj is set to FI_WAIT_NONE."
    if attr.wait_obj != FI_WAIT_NONE && !matches!(attr.wait_cond, FI_CQ_COND_NONE | FI_CQ_COND_THRESHOLD) {
        return Err(Error::INVAL);
    }
    if attr.size > MAX_CQ_SIZE {
        return Err(Error::INVAL);
    }
    Ok(())
}

impl Cq {
    /// Builds a CQ core (the caller adds the progress engines).
    pub(crate) fn new(attr: &CqAttr, api_version: u32, mut holds: Holds<Domain>, context: usize) -> Result<Arc<Cq>> {
        check_attr(attr)?;
        let set = holds.set_for(attr.wait_obj)?;
        let size = if attr.size == 0 { DEFAULT_CQ_SIZE } else { attr.size };
        let wait = WaitObj::new(attr.wait_obj, set.as_ref().map(|s| s.arc().clone()))?;
        let mode = holds
            .parent
            .as_ref()
            .map(|d| d.engine.mode().clone())
            .unwrap_or_else(LockMode::locked);
        let cq = Arc::new(Cq {
            users: Users::default(),
            context,
            format: attr.format,
            wait_cond: if attr.wait_obj == FI_WAIT_NONE {
                FI_CQ_COND_NONE
            } else {
                attr.wait_cond
            },
            api_version,
            wait,
            skipped: AtomicU32::new(0),
            drained: AtomicUsize::new(NOT_DRAINED),
            q: CqQueue::new(Queue::new(size)?, mode),
            set,
            _domain: holds.parent,
            idle: AtomicU32::new(0),
            yield_every: AtomicU32::new(IDLE_YIELD_EVERY),
            #[cfg(test)]
            yields: AtomicU32::new(0),
            #[cfg(test)]
            yield_took_ns: std::sync::atomic::AtomicU64::new(0),
        });
        if let Some(s) = &cq.set {
            let member: Arc<dyn Waitable> = cq.clone();
            s.add_member(Arc::downgrade(&member));
        }
        Ok(cq)
    }

    /// The `context` passed to `fi_cq_open`.
    pub(crate) fn context(&self) -> usize {
        self.context
    }

    /// The `FI_CQ_FORMAT_*` chosen at open (how the C face writes entries).
    pub(crate) fn format(&self) -> u32 {
        self.format
    }

    /// `fid_fabric.api_version` of the parent fabric (`err_data` rules and
    /// the size of `fi_cq_err_entry`).
    pub(crate) fn api_version(&self) -> u32 {
        self.api_version
    }

    /// The locking mode its queue follows (its domain's; base/serial.rs).
    pub(crate) fn lock_mode(&self) -> &Arc<LockMode> {
        self.q.lock_mode()
    }

    pub(crate) fn wait(&self) -> &WaitObj {
        &self.wait
    }

    #[cfg(test)]
    /// Current capacity: `max(attr.size, Σ reservations)`.
    pub(crate) fn capacity(&self) -> usize {
        self.q.cap()
    }

    // ---- producer API ----

    /// An endpoint bound to this CQ: `n` = its queue depth (`tx_size` and/or
    /// `rx_size`, whichever directions it binds). Grows the ring now so that
    /// pushes never allocate.
    pub(crate) fn reserve_capacity(&self, n: usize) -> Result<()> {
        self.q.reserve(n)
    }

    /// Undoes [`Cq::reserve_capacity`] when the endpoint closes. Completions
    /// it left in the queue stay readable.
    pub(crate) fn release_capacity(&self, n: usize) {
        self.q.release(n)
    }

    /// Whether one more unclaimed completion fits now. Producers of
    /// completions that no post announced (multi-recv deliveries) stall
    /// while this is false.
    pub(crate) fn has_room(&self) -> bool {
        self.q.has_room()
    }

    /// Queues a completion. One lock, no allocation, a system call only when
    /// a waiter is armed. `Err(FI_EOVERRUN)`: the CQ had no room (the entry
    /// is dropped and the CQ is now in the overrun state) or was overrun.
    pub(crate) fn push(&self, e: CqEntry) -> Result<()> {
        let r = self.q.push(e);
        self.wait.notify();
        r
    }

    /// Queues an error completion (read with `fi_cq_readerr`).
    pub(crate) fn push_err(&self, e: CqErrEntry) -> Result<()> {
        let r = self.q.push_err(e);
        self.wait.notify();
        r
    }

    /// Admission control at post time: sets aside room for the completion of
    /// one operation. `Err(EAGAIN)`: the CQ is full of unread completions,
    /// the post must fail with -FI_EAGAIN (fi_domain(3), FI_RM_ENABLED:
    /// "failing (returning -FI_EAGAIN) the posting of operations that could
    /// result in CQ overruns").
    #[inline]
    pub(crate) fn claim_slot(&self) -> Result<()> {
        self.q.claim()
    }

    /// The claimed operation ended without a completion entry.
    pub(crate) fn unclaim_slot(&self) {
        self.q.unclaim()
    }

    /// Queues the completion of an operation that claimed a slot.
    pub(crate) fn push_claimed(&self, e: CqEntry) -> Result<()> {
        let r = self.q.push_claimed(e);
        self.wait.notify();
        r
    }

    /// Queues the error completion of an operation that claimed a slot.
    pub(crate) fn push_err_claimed(&self, e: CqErrEntry) -> Result<()> {
        let r = self.q.push_err_claimed(e);
        self.wait.notify();
        r
    }

    // ---- consumer API (the application, through the thunks) ----

    /// Whether the progress pass saw a peer move (`WaitObj::progress`;
    /// `false` when the pass was skipped).
    #[inline(always)]
    fn before_read(&self) -> bool {
        self.before_read_in::<false>().unwrap_or(false)
    }

    /// The progress pass before a read, unless entries are queued (see
    /// [`PROGRESS_EVERY`]) or, with `MAY_SKIP`, the read is the drain right
    /// after a delivering pass ([`Cq::drained`]; `MAY_SKIP` only for `fi_cq_read`
    /// with a count, so the other reads carry no test). None when the pass
    /// was skipped, else whether it saw a peer move.
    #[inline(always)]
    fn before_read_in<const MAY_SKIP: bool>(&self) -> Option<bool> {
        self.wait.on_read();
        if self.q.any() {
            // One reader polls a CQ in practice; concurrent readers only
            // miscount, which moves a pass (plain load and store).
            let n = self.skipped.load(Ordering::Relaxed).wrapping_add(1);
            self.skipped.store(n, Ordering::Relaxed);
            if !n.is_multiple_of(PROGRESS_EVERY) {
                return None;
            }
        } else {
            // Plain loads and stores: concurrent readers at worst skip or
            // run one pass more; every skip clears the mark, so the read
            // after a skip progresses.
            let d = self.drained.load(Ordering::Relaxed);
            if d != NOT_DRAINED {
                self.drained.store(NOT_DRAINED, Ordering::Relaxed);
                if MAY_SKIP && d == self.q.taken_mark() {
                    return None;
                }
            }
        }
        Some(self.wait.progress())
    }

    /// `fi_cq_read`/`fi_cq_readfrom`: pops up to `count` entries, oldest
    /// first, handing each to `out` with its index (the C face writes it in
    /// the CQ's format; nothing is copied or allocated on the way).
    /// `count == 0` returns 0 if entries are queued (what util's poll set
    /// uses to test a CQ).
    #[inline(always)]
    pub(crate) fn read(&self, count: usize, out: impl FnMut(usize, &CqEntry)) -> Result<usize> {
        let pass = if count > 0 {
            self.before_read_in::<true>()
        } else {
            self.before_read_in::<false>()
        };
        let r = self.q.take(count, out);
        if pass.is_some() {
            if let Ok(n) = r {
                if n > 0 {
                    self.drained.store(self.q.taken_mark(), Ordering::Relaxed);
                }
            }
        }
        let moved = pass == Some(true);
        // One reader polls a CQ in practice; concurrent readers at worst
        // miscount, which only moves a yield (plain load and store: no
        // locked instruction on the polling path).
        match r {
            // Nothing to read, and no peer moved: count, and yield once the
            // count says so (IDLE_YIELD_AFTER).
            Err(Error::AGAIN) if !moved => {
                let n = self.idle.load(Ordering::Relaxed).wrapping_add(1);
                self.idle.store(n, Ordering::Relaxed);
                if n >= IDLE_YIELD_AFTER {
                    let every = self.yield_every.load(Ordering::Relaxed);
                    if n & every.wrapping_sub(1) == 0 {
                        self.idle_yield(every);
                    }
                }
            }
            // A completion, or a peer that moved (it runs on another
            // processor: yielding ours cannot help it): the count starts
            // anew.
            Ok(n) if n > 0 => self.reset_idle(),
            Err(Error::AGAIN) => self.reset_idle(),
            _ => {}
        }
        r
    }

    /// One idle yield, and the interval to the next: a yield that came
    /// back within [`YIELD_ALONE`] found nothing else to run on this
    /// processor (it was a system call and nothing more), so the next one
    /// waits twice as many empty reads, up to IDLE_YIELD_EVERY_MAX; one
    /// that took longer gave the processor to someone who wanted it, and
    /// the yields go back to every IDLE_YIELD_EVERY-th read.
    #[cold]
    #[inline(never)]
    fn idle_yield(&self, every: u32) {
        let t0 = std::time::Instant::now();
        crate::sys::yield_now();
        #[allow(unused_mut)]
        let mut took = t0.elapsed();
        #[cfg(test)]
        {
            self.yields.fetch_add(1, Ordering::Relaxed);
            let ns = self.yield_took_ns.load(Ordering::Relaxed);
            if ns != 0 {
                took = std::time::Duration::from_nanos(ns);
            }
        }
        let next = if took < YIELD_ALONE {
            (every.saturating_mul(2)).min(IDLE_YIELD_EVERY_MAX)
        } else {
            IDLE_YIELD_EVERY
        };
        if next != every {
            self.yield_every.store(next, Ordering::Relaxed);
        }
    }

    #[inline(always)]
    fn reset_idle(&self) {
        if self.idle.load(Ordering::Relaxed) != 0 {
            self.idle.store(0, Ordering::Relaxed);
        }
    }

    /// [`Cq::read`] without the idle accounting (`sread` waits its own way).
    #[inline(always)]
    fn take(&self, count: usize, out: impl FnMut(usize, &CqEntry)) -> Result<usize> {
        self.before_read();
        self.q.take(count, out)
    }

    /// `fi_cq_readerr`: `f` sees the oldest error completion, or the
    /// `FI_EOVERRUN` event once an overrun CQ has handed out everything
    /// valid. The entry read stays with the CQ until the next `read_err`, so
    /// the C face may point the application at its `err_data`.
    pub(crate) fn read_err<R>(&self, f: impl FnOnce(CqErrRead<'_>) -> R) -> Result<R> {
        self.before_read();
        self.q.take_err(f)
    }

    /// -FI_ENOSYS unless blocking reads are allowed (not with
    /// `FI_WAIT_NONE` or `FI_WAIT_SET`, see the module documentation).
    pub(crate) fn check_can_block(&self) -> Result<()> {
        if self.wait.can_block() {
            Ok(())
        } else {
            Err(Error::NOSYS)
        }
    }

    /// `fi_cq_sread`/`fi_cq_sreadfrom`: [`Cq::read`] once entries are queued
    /// (with `FI_CQ_COND_THRESHOLD`: `cond` of them, capped at `count`), an
    /// error is, the timeout (ms, negative = infinite) passed or
    /// [`Cq::signal`] was called; `Err(CANCELED)` when the CQ is closed
    /// meanwhile ([`WaitObj::close`]).
    pub(crate) fn sread(
        &self,
        count: usize,
        cond: usize,
        timeout: i32,
        mut out: impl FnMut(usize, &CqEntry),
    ) -> Result<usize> {
        self.check_can_block()?;
        // FI_CQ_COND_THRESHOLD: "the cond field is interpreted as a size_t
        // threshold value" (the pointer value itself, as util/sockets read it).
        let threshold = if self.wait_cond == FI_CQ_COND_THRESHOLD {
            cond.min(count).max(1)
        } else {
            1
        };
        let deadline = Deadline::from_ms(timeout);
        loop {
            let woke = self.wait.block_until(&|| self.q.lock().ready(threshold), deadline);
            // Closed under the reader (fi_close from another thread): the
            // entries go with the CQ ("Any completions which remain on the
            // CQ when it is closed are lost").
            if woke == Err(Error::CANCELED) {
                return Err(Error::CANCELED);
            }
            match self.take(count, &mut out) {
                // Another reader took the entries: keep waiting.
                Err(Error::AGAIN) if woke.is_ok() && !deadline.expired() => continue,
                // "If the timeout expires or the calling thread is signaled
                // and no data is available ..., -FI_EAGAIN is returned."
                r => return r,
            }
        }
    }

    /// `fi_cq_signal`: "unblock any thread waiting in fi_cq_sread".
    pub(crate) fn signal(&self) -> Result<()> {
        if self.wait.kind() == FI_WAIT_NONE {
            // "only available if the CQ was configured with a wait object"
            return Err(Error::NOSYS);
        }
        match &self.set {
            // A member of a wait set cannot sread; wake `fi_wait` instead.
            Some(s) => s.obj.signal(),
            None => self.wait.signal(),
        }
        Ok(())
    }

    /// `fi_trywait` on this CQ; a member of a wait set defers to its set.
    pub(crate) fn trywait(&self) -> Result<()> {
        self.member_wait().trywait(&|| self.q.lock().ready(1))
    }

    fn member_wait(&self) -> MemberWait<'_> {
        MemberWait {
            own: &self.wait,
            set: self.set.as_deref(),
        }
    }

    /// The wait object `FI_GETWAIT`/`FI_GETWAITOBJ` describe: a wait-set
    /// member answers with its set's object (as util does).
    pub(crate) fn shown_wait(&self) -> &WaitObj {
        self.member_wait().shown()
    }

    #[cfg(test)]
    /// Where the `err_data` of the last error read lives.
    fn last_err_data_ptr(&self) -> Option<*const u8> {
        self.q.lock().last_err.as_ref().map(|e| e.err_data.as_ptr())
    }

    /// Whether the application has something to read (`fi_poll`).
    pub(crate) fn has_events(&self) -> bool {
        self.q.lock().ready(1)
    }
}

#[cfg(test)]
mod tests;
