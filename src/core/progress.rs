//! The progress engine: one per domain (and one per fabric for connection
//! management of passive endpoints).
//!
//! rustfab's data progress is manual by default: every CQ/counter/EQ read,
//! every blocking wait and every post calls [`Engine::progress`], which asks
//! each registered [`Source`] (an endpoint's transport state) to move data
//! without blocking. To sleep, a waiter nests [`Engine::fd`] — an epoll set
//! holding every source's descriptors — into its own epoll set, after
//! [`Engine::arm`] has told the sources that somebody sleeps (so that, e.g.,
//! a shared-memory peer rings our doorbell instead of relying on polling).
//!
//! A progress thread runs only while something needs one: `FI_PROGRESS_AUTO`
//! was requested, or a `FI_WAIT_MUTEX_COND` object exists (the application
//! then sleeps on our condition variable and nobody else would progress).
//! Threads are joined when their engine is dropped and by the provider's
//! `cleanup` at `fi_fini`.

use crate::base::error::Result;
use crate::base::serial::{LockMode, ModeMutex};
use crate::sys::{self, Epoll, EventFd};
use parking_lot::Mutex;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Something that can make progress: an endpoint's transport state, a
/// passive endpoint's listener.
pub(crate) trait Source: Send + Sync {
    /// Moves whatever can move without blocking. Returns whether the pass
    /// saw a peer move (`Port::poll`): a CQ's idle rule does not yield
    /// the processor to a peer that runs elsewhere (cq.rs,
    /// `IDLE_YIELD_AFTER`). `false` when it cannot tell.
    fn progress(&self) -> bool;
    /// The number of sleepers on this source's engine changed (0 = nobody
    /// sleeps; > 0 = peers must wake us rather than rely on polling).
    fn set_sleepers(&self, _sleepers: usize) {}
    /// Whether the source has work that progress would complete now
    /// (e.g. data in a shared-memory ring): a waiter must not sleep then.
    fn has_pending(&self) -> bool {
        false
    }
    /// Whether the source waits on peers and must be progressed now and
    /// then even without any event (liveness checks): sleepers then wake at
    /// least every [`TIMER_PERIOD`].
    fn wants_timer(&self) -> bool {
        false
    }
    /// The progress thread caught a panic in this source's `progress`: its
    /// state may be half updated, so it must fail every later call (the
    /// C face reports `-FI_EOTHER`, as for a panic in a thunk) instead of
    /// going on. The thread no longer progresses it.
    fn fail_after_panic(&self) {}
}

/// Longest sleep while a source wants its timer.
pub(crate) const TIMER_PERIOD: Duration = Duration::from_millis(100);

/// An engine's sources, each also as a plain pointer to its object: a pass
/// calls through `refs` (a dyn call on a `*const dyn Source`) instead of
/// through the `Arc` (whose object offset is computed from the vtable's
/// alignment on every call: ~5 instructions per source per pass, every
/// empty CQ read). `refs[i]` is `&*arcs[i]`; both change together, under
/// the engine's lock, and only through the methods below.
#[derive(Default)]
struct Sources {
    arcs: Vec<Arc<dyn Source>>,
    refs: Vec<SourceRef>,
}

struct SourceRef(*const dyn Source);

// SAFETY: a SourceRef is a pointer to an object that `Sources::arcs` holds
// (an `Arc<dyn Source>`, whose objects are Send + Sync by the trait's
// bounds); sharing or sending it shares or sends a `&dyn Source`.
unsafe impl Send for SourceRef {}
// SAFETY: as above.
unsafe impl Sync for SourceRef {}

impl Sources {
    fn push(&mut self, s: Arc<dyn Source>) {
        self.refs.push(SourceRef(Arc::as_ptr(&s)));
        self.arcs.push(s);
    }
    /// Removes every occurrence of `s`, keeping the others' order.
    fn remove(&mut self, s: &Arc<dyn Source>) {
        let mut i = self.arcs.len();
        while i > 0 {
            i -= 1;
            if Arc::ptr_eq(&self.arcs[i], s) {
                self.arcs.remove(i);
                self.refs.remove(i);
            }
        }
    }
    fn swap_remove_at(&mut self, i: usize) {
        self.arcs.swap_remove(i);
        self.refs.swap_remove(i);
    }
}

impl std::ops::Deref for Sources {
    type Target = [Arc<dyn Source>];
    fn deref(&self) -> &[Arc<dyn Source>] {
        &self.arcs
    }
}

pub(crate) struct Engine {
    epoll: Epoll,
    /// Wakes a progress thread (and anyone nesting `epoll`) on demand.
    kick: EventFd,
    /// The sources, behind the lock that also serialises progress passes:
    /// a pass (run on every CQ, counter and EQ read) is one uncontended
    /// `try_lock` and a walk over the vector — no reference counting, no
    /// allocation. A pass that finds the lock taken is skipped (the thread
    /// holding it produces the completions). Sources hold strong references
    /// and must be removed explicitly (endpoint close does).
    /// Its lock follows the locking mode of the domain this engine
    /// progresses, shared by the endpoints' and CQs' locks
    /// (base/serial.rs; real locks for a fabric's engine and a passive
    /// endpoint's): [`Engine::mode`].
    sources: ModeMutex<Sources>,
    sleepers: AtomicUsize,
    /// Reasons to run a progress thread (AUTO progress, MUTEX_COND objects).
    auto_users: AtomicUsize,
    thread: Mutex<Option<(JoinHandle<()>, Arc<AtomicBool>)>>,
}

impl Engine {
    pub(crate) fn new() -> Result<Arc<Engine>> {
        Engine::with_mode(LockMode::locked())
    }

    /// An engine whose sources' locks (and its own) follow `mode`.
    pub(crate) fn with_mode(mode: Arc<LockMode>) -> Result<Arc<Engine>> {
        let epoll = Epoll::new()?;
        let kick = EventFd::new()?;
        epoll.add(kick.fd(), sys::IN, 0)?;
        Ok(Arc::new(Engine {
            epoll,
            kick,
            sources: ModeMutex::new(Sources::default(), mode),
            sleepers: AtomicUsize::new(0),
            auto_users: AtomicUsize::new(0),
            thread: Mutex::new(None),
        }))
    }

    /// The locking mode of this engine's domain (base/serial.rs).
    pub(crate) fn mode(&self) -> &Arc<LockMode> {
        self.sources.mode()
    }

    /// The epoll set to nest into a waiter's epoll set.
    pub(crate) fn fd(&self) -> RawFd {
        self.epoll.fd()
    }

    /// Adds a descriptor whose readiness should wake sleepers.
    pub(crate) fn watch_fd(&self, fd: RawFd, events: u32) -> Result<()> {
        self.epoll.add(fd, events, fd as u64)
    }

    pub(crate) fn unwatch_fd(&self, fd: RawFd) {
        self.epoll.delete(fd);
    }

    pub(crate) fn add_source(&self, s: Arc<dyn Source>) {
        let mut v = self.sources.lock();
        s.set_sleepers(self.sleepers.load(Ordering::Acquire));
        v.push(s);
    }

    pub(crate) fn remove_source(&self, s: &Arc<dyn Source>) {
        self.sources.lock().remove(s);
    }

    /// One non-blocking progress pass over every source (inlined into
    /// [`crate::core::wait::WaitObj::progress`], so into every CQ read).
    /// Whether a source saw a peer move ([`Source::progress`]); `false`
    /// when another thread holds the pass (it cannot tell).
    #[inline(always)]
    pub(crate) fn progress(&self) -> bool {
        let Some(v) = self.sources.try_lock() else { return false };
        let mut moved = false;
        for s in v.refs.iter() {
            // SAFETY: `refs` points into the objects `arcs` holds, both
            // changed together under this lock, which is held (`Sources`).
            moved |= unsafe { (*s.0).progress() };
        }
        moved
    }

    /// The progress thread's pass: like [`Engine::progress`], but a panic
    /// in one source is caught here (nothing above this thread would catch
    /// it: the thread would die and every `FI_PROGRESS_AUTO` endpoint of the
    /// domain would silently stop moving). The source that panicked is
    /// failed and dropped from the engine; the others go on.
    fn progress_catching(&self) {
        let Some(mut v) = self.sources.try_lock() else { return };
        let mut i = 0;
        while i < v.len() {
            let s = &v[i];
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.progress())) {
                Ok(_) => i += 1,
                Err(p) => {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|m| m.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    crate::base::log::log_warn!(
                        crate::abi::FI_LOG_CORE,
                        "internal error in the progress thread: {msg}; the endpoint it was progressing fails from now on"
                    );
                    s.fail_after_panic();
                    v.swap_remove_at(i);
                }
            }
        }
    }

    /// Whether a source needs periodic progress even without events.
    pub(crate) fn wants_timer(&self) -> bool {
        self.sources.lock().iter().any(|s| s.wants_timer())
    }

    /// Whether any source has work waiting (do not sleep).
    pub(crate) fn has_pending(&self) -> bool {
        self.sources.lock().iter().any(|s| s.has_pending())
    }

    /// Registers a sleeper: sources switch to "wake me" mode.
    pub(crate) fn arm(&self) {
        let v = self.sources.lock();
        let n = self.sleepers.fetch_add(1, Ordering::AcqRel) + 1;
        if n == 1 {
            for s in v.iter() {
                s.set_sleepers(n);
            }
        }
    }

    pub(crate) fn disarm(&self) {
        let v = self.sources.lock();
        let n = self.sleepers.fetch_sub(1, Ordering::AcqRel) - 1;
        if n == 0 {
            for s in v.iter() {
                s.set_sleepers(0);
            }
        }
    }

    /// Wakes anyone sleeping on this engine's fd (the progress thread too).
    pub(crate) fn kick(&self) {
        self.kick.signal();
    }

    /// Asks for a progress thread (counted; [`Engine::release_thread`] undoes).
    pub(crate) fn require_thread(self: &Arc<Self>) {
        // The thread passes over the sources beside the application's
        // calls: real locks from now on, before it exists.
        self.mode().lock_for_good();
        if self.auto_users.fetch_add(1, Ordering::AcqRel) > 0 {
            return;
        }
        let mut t = self.thread.lock();
        if t.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(self);
        let stop2 = stop.clone();
        let h = std::thread::Builder::new()
            .name("rustfab-progress".into())
            .spawn(move || progress_thread(weak, stop2));
        if let Ok(h) = h {
            registry_add(stop.clone());
            *t = Some((h, stop));
        }
    }

    pub(crate) fn release_thread(&self) {
        if self.auto_users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.stop_thread();
        }
    }

    fn stop_thread(&self) {
        let t = self.thread.lock().take();
        if let Some((h, stop)) = t {
            stop.store(true, Ordering::Release);
            self.kick();
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
                // The stop kick was for the thread, which is gone: left
                // signalled it would keep `epoll` (nested into every FD wait
                // object fed by this engine) readable forever.
                self.kick.drain();
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn progress_thread(engine: Weak<Engine>, stop: Arc<AtomicBool>) {
    let mut ready = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let Some(e) = engine.upgrade() else { break };
        e.progress_catching();
        e.arm();
        let pending = e.has_pending();
        if !pending {
            // Bounded sleep: a lost edge can delay progress by at most this.
            let _ = e.epoll.wait(&mut ready, 16, Some(Duration::from_millis(100)));
        }
        e.kick.drain();
        e.disarm();
        drop(e);
    }
    registry_remove(&stop);
}

/// Stop flags of every running progress thread, for `cleanup`.
static THREADS: Mutex<Vec<Arc<AtomicBool>>> = Mutex::new(Vec::new());

fn registry_add(stop: Arc<AtomicBool>) {
    THREADS.lock().push(stop);
}

fn registry_remove(stop: &Arc<AtomicBool>) {
    THREADS.lock().retain(|s| !Arc::ptr_eq(s, stop));
}

/// Provider cleanup (libfabric's destructor): tell every progress thread to
/// stop and wait (bounded) for them to go. The library is linked NODELETE, so
/// a thread that is still finishing cannot run unmapped code.
pub(crate) fn stop_all_threads() {
    for s in THREADS.lock().iter() {
        s.store(true, Ordering::Release);
    }
    let deadline = sys::Deadline::after(Duration::from_secs(2));
    while !THREADS.lock().is_empty() && !deadline.expired() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that panics on its first pass (when told to), and counts
    /// its passes and whether it was failed.
    struct Probe {
        panic_once: AtomicBool,
        passes: AtomicUsize,
        failed: AtomicBool,
    }

    impl Probe {
        fn new(panics: bool) -> Arc<Probe> {
            Arc::new(Probe {
                panic_once: AtomicBool::new(panics),
                passes: AtomicUsize::new(0),
                failed: AtomicBool::new(false),
            })
        }
    }

    impl Source for Probe {
        fn progress(&self) -> bool {
            self.passes.fetch_add(1, Ordering::AcqRel);
            if self.panic_once.swap(false, Ordering::AcqRel) {
                panic!("planted panic in a source");
            }
            false
        }
        fn wants_timer(&self) -> bool {
            true
        }
        fn has_pending(&self) -> bool {
            true
        }
        fn fail_after_panic(&self) {
            self.failed.store(true, Ordering::Release);
        }
    }

    /// A panic inside the progress thread is caught: the source that
    /// panicked is failed and no longer progressed, the other sources of
    /// the engine go on being progressed by the thread, and the thread
    /// still stops when asked. (Without the catch the thread dies at the
    /// panic and `good` is never progressed again.)
    #[test]
    fn a_panic_in_the_progress_thread_fails_only_that_source() {
        let e = Engine::new().unwrap();
        let bad = Probe::new(true);
        let good = Probe::new(false);
        e.add_source(bad.clone());
        e.add_source(good.clone());
        e.require_thread();
        let deadline = sys::Deadline::after(Duration::from_secs(10));
        while !bad.failed.load(Ordering::Acquire) && !deadline.expired() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            bad.failed.load(Ordering::Acquire),
            "the panicking source was not failed"
        );
        let seen = good.passes.load(Ordering::Acquire);
        while good.passes.load(Ordering::Acquire) < seen + 100 && !deadline.expired() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            good.passes.load(Ordering::Acquire) >= seen + 100,
            "the other source is no longer progressed after the panic"
        );
        assert_eq!(
            bad.passes.load(Ordering::Acquire),
            1,
            "a failed source was progressed again"
        );
        e.release_thread();
        assert!(e.thread.lock().is_none());
        // A manual pass (a CQ read's: through the sources' plain pointers)
        // no longer reaches the failed source either.
        e.progress();
        assert_eq!(
            bad.passes.load(Ordering::Acquire),
            1,
            "a manual pass progressed the failed source"
        );
    }

    /// A pass progresses every source once, in order, and a removed source
    /// no more (the pass calls through `Sources::refs`, which must follow
    /// `arcs`).
    #[test]
    fn a_pass_reaches_exactly_the_registered_sources() {
        let e = Engine::new().unwrap();
        let p: Vec<Arc<Probe>> = (0..3).map(|_| Probe::new(false)).collect();
        let dyns: Vec<Arc<dyn Source>> = p.iter().map(|x| x.clone() as Arc<dyn Source>).collect();
        for d in &dyns {
            e.add_source(d.clone());
        }
        let passes = || p.iter().map(|x| x.passes.load(Ordering::Acquire)).collect::<Vec<_>>();
        e.progress();
        assert_eq!(passes(), [1, 1, 1]);
        e.remove_source(&dyns[1]);
        e.progress();
        assert_eq!(passes(), [2, 1, 2], "a removed source was progressed");
        e.remove_source(&dyns[0]);
        e.progress();
        assert_eq!(passes(), [2, 1, 3]);
        e.add_source(dyns[1].clone());
        e.progress();
        assert_eq!(passes(), [2, 2, 4]);
    }

    /// Stopping the progress thread must not leave the engine's epoll set
    /// readable (it is nested into every FD wait object it feeds).
    #[test]
    fn stopped_thread_leaves_the_engine_quiet() {
        let e = Engine::new().unwrap();
        assert!(!sys::poll_readable(e.fd(), Some(Duration::ZERO)));
        e.require_thread();
        e.release_thread();
        assert!(!sys::poll_readable(e.fd(), Some(Duration::ZERO)));
    }
}
