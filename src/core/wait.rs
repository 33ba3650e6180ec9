//! Wait objects, wait sets and `fi_trywait`.
//!
//! Every CQ, EQ and counter owns a [`WaitObj`]. Internally each one (except
//! `FI_WAIT_NONE`) is an eventfd doorbell inside an epoll set into which the
//! progress engines that feed the object are nested; a thread blocked in
//! `sread`/`fi_cntr_wait`/`fi_wait` sleeps in that epoll set, so it wakes both
//! when another thread queues an entry and when a transport descriptor turns
//! readable (then it progresses and re-checks). Idle waits use no CPU.
//!
//! What `FI_GETWAIT` exposes depends on the kind:
//! * `FI_WAIT_FD`: the epoll fd itself (usable in poll/select/epoll);
//! * `FI_WAIT_POLLFD`: the same fd as a one-entry `struct pollfd` array;
//! * `FI_WAIT_MUTEX_COND`: real pthread objects, broadcast on every queued
//!   entry; a progress thread runs while such an object exists, since the
//!   application sleeps where rustfab cannot progress for it;
//! * `FI_WAIT_UNSPEC`: internal only (same mechanism as FD);
//! * `FI_WAIT_YIELD`: `sread` spins with `sched_yield`;
//! * `FI_WAIT_SET`: the object notifies its wait set.
//!
//! Lost wake-ups: the producer queues, then (after a SeqCst fence) reads
//! `armed`; a waiter increments `armed`, fences, then re-checks the queue.
//! One of the two always sees the other. `fi_trywait` arms the object for an
//! application that will poll the fd itself (the fi_trywait(3) contract), and
//! the next read disarms it, so the busy path costs no system call.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::fabric::Fabric;
use crate::core::progress::Engine;
use crate::core::users::{HasUsers, Held, Users};
use crate::sys::{self, Deadline, Epoll, EventFd, MutexCond};
use parking_lot::Mutex;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// The wait kinds a CQ/EQ/counter may be opened with.
pub(crate) fn valid_object_kind(kind: u32) -> bool {
    matches!(
        kind,
        FI_WAIT_NONE | FI_WAIT_UNSPEC | FI_WAIT_SET | FI_WAIT_FD | FI_WAIT_MUTEX_COND | FI_WAIT_YIELD | FI_WAIT_POLLFD
    )
}

/// How long a blocking wait polls before it sleeps.
pub(crate) const SPIN_FOR: std::time::Duration = std::time::Duration::from_micros(50);

/// Tests: every wait kind a counter waits on (`FI_WAIT_NONE` polls).
#[cfg(test)]
pub(crate) const CNTR_KINDS: [u32; 5] = [
    FI_WAIT_UNSPEC,
    FI_WAIT_FD,
    FI_WAIT_MUTEX_COND,
    FI_WAIT_YIELD,
    FI_WAIT_NONE,
];

pub(crate) struct WaitObj {
    kind: u32,
    /// Internal doorbell + sleeping set (absent for FI_WAIT_NONE).
    efd: Option<EventFd>,
    epoll: Option<Epoll>,
    mc: Option<MutexCond>,
    set: Option<Arc<WaitSet>>,
    /// No doorbell, condition variable or set: nobody can wait on this
    /// object in the kernel (FI_WAIT_NONE, FI_WAIT_YIELD), so `notify` has
    /// nothing to do (a flag tested inline, not a call per completion).
    silent: bool,
    /// Threads (and trywait-armed applications) that need the doorbell.
    armed: AtomicUsize,
    fd_armed: AtomicBool,
    /// `fi_cq_signal`: the next (or current) blocking call returns EAGAIN.
    signaled: AtomicBool,
    /// The object is being closed: every blocking call returns ECANCELED.
    closed: AtomicBool,
    /// Copy-on-write snapshot: readers clone the `Arc` (no allocation on
    /// the read path, which progresses on every call); `add_engine` swaps in
    /// a new vector.
    engines: Mutex<Arc<Vec<Arc<Engine>>>>,
    /// The first engine (a CQ's or counter's domain), readable without a
    /// lock: the progress pass every read runs starts here.
    first: std::sync::OnceLock<Arc<Engine>>,
    /// More than one engine feeds this object (EQs bound across domains).
    several: std::sync::atomic::AtomicBool,
}

impl WaitObj {
    /// `set` is required for (and only used with) `FI_WAIT_SET`.
    pub(crate) fn new(kind: u32, set: Option<Arc<WaitSet>>) -> Result<WaitObj> {
        if !valid_object_kind(kind) {
            return Err(Error::INVAL);
        }
        if kind == FI_WAIT_SET && set.is_none() {
            return Err(Error::INVAL);
        }
        // Only kinds that sleep in the kernel need the doorbell: NONE never
        // blocks, YIELD spins, and a SET member notifies its set instead.
        let (efd, epoll) = if matches!(kind, FI_WAIT_NONE | FI_WAIT_YIELD | FI_WAIT_SET) {
            (None, None)
        } else {
            let efd = EventFd::new()?;
            let ep = Epoll::new()?;
            ep.add(efd.fd(), sys::IN, 0)?;
            (Some(efd), Some(ep))
        };
        let mc = if kind == FI_WAIT_MUTEX_COND {
            Some(MutexCond::new()?)
        } else {
            None
        };
        let set = if kind == FI_WAIT_SET { set } else { None };
        Ok(WaitObj {
            kind,
            silent: efd.is_none() && mc.is_none() && set.is_none(),
            efd,
            epoll,
            mc,
            set,
            armed: AtomicUsize::new(0),
            fd_armed: AtomicBool::new(false),
            signaled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            engines: Mutex::new(Arc::new(Vec::new())),
            first: std::sync::OnceLock::new(),
            several: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub(crate) fn kind(&self) -> u32 {
        self.kind
    }

    /// Whether `sread`-style blocking calls are allowed (fi_cq(3): not with
    /// FI_WAIT_NONE or FI_WAIT_SET).
    pub(crate) fn can_block(&self) -> bool {
        !matches!(self.kind, FI_WAIT_NONE | FI_WAIT_SET)
    }

    /// Makes `engine`'s progress part of this object's waits.
    pub(crate) fn add_engine(&self, engine: &Arc<Engine>) -> Result<()> {
        let mut v = self.engines.lock();
        if v.iter().any(|e| Arc::ptr_eq(e, engine)) {
            return Ok(());
        }
        let mut next: Vec<Arc<Engine>> = (**v).clone();
        if let Some(ep) = &self.epoll {
            ep.add(engine.fd(), sys::IN, 1)?;
        }
        if self.kind == FI_WAIT_MUTEX_COND {
            engine.require_thread();
        }
        if let Some(set) = &self.set {
            // `fi_wait` on the set (a fabric object) progresses the engine
            // from any thread: real locks from now on (base/serial.rs).
            engine.mode().lock_for_good();
            set.obj.add_engine(engine)?;
        }
        next.push(engine.clone());
        if self.first.set(engine.clone()).is_err() {
            self.several.store(true, Ordering::Release);
        }
        *v = Arc::new(next);
        Ok(())
    }

    /// The engines feeding this object (a shared snapshot, no allocation).
    pub(crate) fn engines(&self) -> Arc<Vec<Arc<Engine>>> {
        self.engines.lock().clone()
    }

    /// Runs a progress pass on every engine that feeds this object.
    ///
    /// Inlined into the CQ and counter reads: the one-engine case (a CQ of
    /// one domain) is a flag test and the engine's pass, without a call
    /// frame of its own (~15 instructions per empty CQ read); several
    /// engines take the out-of-line walk. Whether any engine's pass saw a
    /// peer move ([`Engine::progress`]).
    #[inline(always)]
    pub(crate) fn progress(&self) -> bool {
        if self.several.load(Ordering::Acquire) {
            self.progress_all()
        } else if let Some(e) = self.first.get() {
            e.progress()
        } else {
            false
        }
    }

    #[inline(never)]
    fn progress_all(&self) -> bool {
        let mut moved = false;
        for e in self.engines().iter() {
            moved |= e.progress();
        }
        moved
    }

    /// Called by a producer after it queued something (or changed a counter).
    #[inline]
    pub(crate) fn notify(&self) {
        if !self.silent {
            self.notify_waiters();
        }
    }

    #[inline(never)]
    fn notify_waiters(&self) {
        // Only objects with a doorbell can have an armed sleeper; the fence
        // (Dekker with `arm`) is skipped for the others (FI_WAIT_NONE CQs of
        // polling applications: the common fast path).
        if let Some(efd) = &self.efd {
            fence(Ordering::SeqCst);
            if self.armed.load(Ordering::Relaxed) > 0 {
                efd.signal();
            }
        }
        if let Some(mc) = &self.mc {
            mc.broadcast();
        }
        if let Some(set) = &self.set {
            set.notify();
        }
    }

    /// `fi_cq_signal`: wake blocked readers, who return -FI_EAGAIN.
    pub(crate) fn signal(&self) {
        self.signaled.store(true, Ordering::Release);
        if let Some(efd) = &self.efd {
            efd.signal();
        }
        if let Some(mc) = &self.mc {
            mc.broadcast();
        }
        if let Some(set) = &self.set {
            set.notify();
        }
    }

    /// The object is being closed (`fi_close` from another thread): wakes
    /// every thread blocked in [`WaitObj::block_until`] and makes it, and any
    /// later one, return `Err(CANCELED)`. The doorbell is rung whether or
    /// not a sleeper is armed, and stays readable: a waiter about to sleep
    /// sees either the flag or the doorbell.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(efd) = &self.efd {
            efd.signal();
        }
        if let Some(mc) = &self.mc {
            mc.broadcast();
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn arm(&self) {
        self.armed.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
        for e in self.engines().iter() {
            e.arm();
        }
    }

    fn disarm(&self) {
        for e in self.engines().iter() {
            e.disarm();
        }
        self.armed.fetch_sub(1, Ordering::AcqRel);
    }

    fn engines_pending(&self) -> bool {
        self.engines().iter().any(|e| e.has_pending())
    }

    /// Blocks until `ready()` holds (Ok), the deadline passes or
    /// [`WaitObj::signal`] is called (Err(EAGAIN)), or the object is closed
    /// ([`WaitObj::close`], Err(CANCELED)). Progresses before every
    /// check. A kind without a sleeping object (`FI_WAIT_NONE`, `FI_WAIT_SET`,
    /// `FI_WAIT_YIELD`) yields between passes instead of sleeping. CQs and EQs
    /// check `can_block` first (fi_cq(3)/fi_eq(3)); counters wait on every
    /// kind (`cntr.rs`).
    pub(crate) fn block_until(&self, ready: &dyn Fn() -> bool, deadline: Deadline) -> Result<()> {
        let mut scratch = Vec::new();
        // Before sleeping, poll for a short while: a peer that answers within
        // microseconds (a ping-pong) is then seen without the cost of a
        // sleep and a wake-up. Idle waits still sleep after SPIN_FOR.
        let spin_until = std::time::Instant::now() + SPIN_FOR;
        let mut spins = 0u32;
        loop {
            if self.is_closed() {
                return Err(Error::CANCELED);
            }
            self.progress();
            if ready() {
                return Ok(());
            }
            if self.signaled.swap(false, Ordering::AcqRel) || deadline.expired() {
                return Err(Error::AGAIN);
            }
            if self.kind == FI_WAIT_YIELD || self.epoll.is_none() {
                sys::yield_now();
                continue;
            }
            spins += 1;
            if !spins.is_multiple_of(16) || std::time::Instant::now() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            self.arm();
            self.progress();
            let mut slept = Ok(0);
            if !ready() && !self.engines_pending() && !self.signaled.load(Ordering::Acquire) && !self.is_closed() {
                if let Some(ep) = &self.epoll {
                    // Sources that wait on peers need a pass now and then to
                    // notice a dead one: cap the sleep.
                    let mut limit = deadline.remaining();
                    if self.engines().iter().any(|e| e.wants_timer()) {
                        let t = crate::core::progress::TIMER_PERIOD;
                        limit = Some(limit.map_or(t, |l| l.min(t)));
                    }
                    slept = ep.wait(&mut scratch, 8, limit);
                }
            }
            if let Some(efd) = &self.efd {
                efd.drain();
                // A close rings once for every sleeper: leave the doorbell
                // ringing for the others (the flag was set before the
                // ring this drain may have taken).
                if self.is_closed() {
                    efd.signal();
                }
            }
            // Disarm before reporting an epoll failure: a leaked arm would
            // make every later notify pay a system call.
            self.disarm();
            slept?;
        }
    }

    /// `fi_trywait` for this object: Ok if the application may block on the
    /// native wait object now, Err(EAGAIN) if something is ready already.
    pub(crate) fn trywait(&self, ready: &dyn Fn() -> bool) -> Result<()> {
        if self.kind == FI_WAIT_NONE {
            return Err(Error::INVAL);
        }
        // Poll briefly first (as block_until does): if something arrives
        // within SPIN_FOR the application reads it without sleeping.
        let spin_until = std::time::Instant::now() + SPIN_FOR;
        let mut spins = 0u32;
        loop {
            self.progress();
            if ready() {
                return Err(Error::AGAIN);
            }
            spins += 1;
            if spins.is_multiple_of(16) && std::time::Instant::now() >= spin_until {
                break;
            }
            std::hint::spin_loop();
        }
        if let Some(efd) = &self.efd {
            efd.drain();
        }
        if !self.fd_armed.swap(true, Ordering::AcqRel) {
            self.arm();
        } else {
            fence(Ordering::SeqCst);
        }
        self.progress();
        if ready() || self.engines_pending() {
            return Err(Error::AGAIN);
        }
        Ok(())
    }

    /// Called on every read: an application that read after trywait is no
    /// longer blocked on the native object, so stop paying for doorbells.
    #[inline]
    pub(crate) fn on_read(&self) {
        if self.fd_armed.load(Ordering::Relaxed) && self.fd_armed.swap(false, Ordering::AcqRel) {
            self.disarm();
        }
    }

    /// What `fi_control(FI_GETWAIT)` hands the application for this kind
    /// (the C face writes it into the command's argument).
    /// `Err(NODATA)`: UNSPEC, YIELD, NONE and SET have no native object.
    pub(crate) fn native(&self) -> Result<NativeWait<'_>> {
        match self.kind {
            FI_WAIT_FD => Ok(NativeWait::Fd(self.epoll.as_ref().ok_or(Error::INVAL)?.fd())),
            FI_WAIT_POLLFD => Ok(NativeWait::PollFd(self.epoll.as_ref().ok_or(Error::INVAL)?.fd())),
            FI_WAIT_MUTEX_COND => Ok(NativeWait::MutexCond(self.mc.as_ref().ok_or(Error::INVAL)?)),
            _ => Err(Error::NODATA),
        }
    }
}

/// The native wait object of a [`WaitObj`], as `FI_GETWAIT` exposes it.
#[derive(Clone, Copy)]
pub(crate) enum NativeWait<'a> {
    /// `FI_WAIT_FD`: the epoll fd (an `int`).
    Fd(RawFd),
    /// `FI_WAIT_POLLFD`: the same fd, as a one-entry `struct pollfd` array.
    PollFd(RawFd),
    /// `FI_WAIT_MUTEX_COND`: the pthread objects (a `struct fi_mutex_cond`).
    MutexCond(&'a MutexCond),
}

impl Drop for WaitObj {
    fn drop(&mut self) {
        if self.kind == FI_WAIT_MUTEX_COND {
            for e in self.engines.lock().iter() {
                e.release_thread();
            }
        }
        if self.fd_armed.load(Ordering::Relaxed) {
            for e in self.engines.lock().iter() {
                e.disarm();
            }
        }
    }
}

/// The wait object a CQ, EQ or counter shows the application: its wait
/// set's when it belongs to one (as util does), else its own.
pub(crate) struct MemberWait<'a> {
    pub(crate) own: &'a WaitObj,
    pub(crate) set: Option<&'a WaitSet>,
}

impl<'a> MemberWait<'a> {
    /// The object `FI_GETWAIT`/`FI_GETWAITOBJ` describe.
    pub(crate) fn shown(&self) -> &'a WaitObj {
        self.set.map_or(self.own, |s| &s.obj)
    }

    /// `fi_trywait`: a member of a wait set defers to its set.
    pub(crate) fn trywait(&self, ready: &dyn Fn() -> bool) -> Result<()> {
        match self.set {
            Some(s) => s.trywait(),
            None => self.own.trywait(ready),
        }
    }
}

/// What a CQ, EQ or counter core holds on to: its parent (a CQ's or
/// counter's domain, an EQ's fabric; None only for cores driven directly by
/// unit tests) and, with `FI_WAIT_SET`, its wait set.
pub(crate) struct Holds<P: HasUsers + ?Sized> {
    pub(crate) parent: Option<Held<P>>,
    pub(crate) set: Option<Held<WaitSet>>,
}

impl<P: HasUsers + ?Sized> Holds<P> {
    /// Nothing held (unit tests).
    #[cfg(test)]
    pub(crate) fn none() -> Holds<P> {
        Holds {
            parent: None,
            set: None,
        }
    }

    /// The wait set a member opened with `wait_obj` joins: required for
    /// (and only used with) `FI_WAIT_SET`.
    pub(crate) fn set_for(&mut self, wait_obj: u32) -> Result<Option<Held<WaitSet>>> {
        match (wait_obj, self.set.take()) {
            (FI_WAIT_SET, Some(s)) => Ok(Some(s)),
            (FI_WAIT_SET, None) => Err(Error::INVAL),
            _ => Ok(None),
        }
    }
}

/// A member of a wait set or poll set: a CQ, EQ or counter core.
pub(crate) trait Waitable: Send + Sync {
    /// Whether the object has something for the application.
    fn ready(&self) -> bool;
}

/// A wait set (`fi_wait_open`): one wait object shared by several CQs, EQs
/// and counters opened with `FI_WAIT_SET`. Members hold it with
/// `Held<WaitSet>`, so closing it returns -FI_EBUSY while any exists
/// (fi_poll(3): "The wait set must not be bound to any other opened
/// resources prior to being closed"); it holds the fabric it was opened
/// from.
pub(crate) struct WaitSet {
    pub(crate) obj: WaitObj,
    members: Mutex<Vec<Weak<dyn Waitable>>>,
    users: Users,
    fabric: Option<Held<Fabric>>,
}

impl HasUsers for WaitSet {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl WaitSet {
    /// Wait sets may use FD, POLLFD, MUTEX_COND, YIELD or UNSPEC (→ FD).
    /// `fabric` is None only for sets driven directly (unit tests).
    pub(crate) fn new(kind: u32, fabric: Option<Held<Fabric>>) -> Result<Arc<WaitSet>> {
        let kind = match kind {
            FI_WAIT_UNSPEC => FI_WAIT_FD,
            FI_WAIT_FD | FI_WAIT_POLLFD | FI_WAIT_MUTEX_COND | FI_WAIT_YIELD => kind,
            _ => return Err(Error::INVAL),
        };
        Ok(Arc::new(WaitSet {
            obj: WaitObj::new(kind, None)?,
            members: Mutex::new(Vec::new()),
            users: Users::default(),
            fabric,
        }))
    }

    /// `fi_wait_open`: FD, POLLFD, MUTEX_COND, YIELD or UNSPEC (an FD set).
    /// fi_poll(3): flags "is reserved and must be set to 0 by the caller".
    /// The set's waits progress the fabric's engine; members add their own
    /// (domain) engines when they join.
    pub(crate) fn open(fabric: &Arc<Fabric>, kind: u32, flags: u64) -> Result<Arc<WaitSet>> {
        if flags != 0 {
            return Err(Error::INVAL);
        }
        let set = WaitSet::new(kind, Some(Held::new(fabric.clone())))?;
        set.obj.add_engine(&fabric.engine)?;
        Ok(set)
    }

    /// Whether the set was opened from `fabric` (a CQ, EQ or counter may
    /// only join a set of its own fabric).
    pub(crate) fn belongs_to(&self, fabric: &Arc<Fabric>) -> bool {
        self.fabric.as_ref().is_some_and(|f| Arc::ptr_eq(f.arc(), fabric))
    }

    pub(crate) fn add_member(&self, m: Weak<dyn Waitable>) {
        let mut v = self.members.lock();
        v.retain(|w| w.strong_count() > 0);
        v.push(m);
    }

    fn notify(&self) {
        self.obj.notify();
    }

    pub(crate) fn any_ready(&self) -> bool {
        let members: Vec<_> = self.members.lock().iter().filter_map(Weak::upgrade).collect();
        members.iter().any(|m| m.ready())
    }

    /// `fi_wait`: Ok once a member has something (or a member's
    /// `fi_cq_signal` woke the set); -FI_ETIMEDOUT when the timeout passes
    /// first, as libfabric's util and sockets wait sets return.
    pub(crate) fn wait(&self, timeout_ms: i32) -> Result<()> {
        let deadline = Deadline::from_ms(timeout_ms);
        match self.obj.block_until(&|| self.any_ready(), deadline) {
            Ok(()) => Ok(()),
            Err(Error::AGAIN) if deadline.expired() && !self.any_ready() => Err(Error::TIMEDOUT),
            Err(Error::AGAIN) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn trywait(&self) -> Result<()> {
        self.obj.trywait(&|| self.any_ready())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    struct Flag {
        w: WaitObj,
        n: AtomicU64,
    }
    impl Waitable for Flag {
        fn ready(&self) -> bool {
            self.n.load(Ordering::Acquire) > 0
        }
    }

    #[test]
    fn timeout_is_honoured() {
        let w = WaitObj::new(FI_WAIT_UNSPEC, None).unwrap();
        let t = Instant::now();
        assert_eq!(w.block_until(&|| false, Deadline::from_ms(50)), Err(Error::AGAIN));
        let el = t.elapsed();
        assert!(el >= Duration::from_millis(50), "returned early: {el:?}");
    }

    #[test]
    fn signal_wakes_blocked_waiter() {
        let w = Arc::new(WaitObj::new(FI_WAIT_FD, None).unwrap());
        let w2 = w.clone();
        let h = std::thread::spawn(move || w2.block_until(&|| false, Deadline::never()));
        std::thread::sleep(Duration::from_millis(20));
        w.signal();
        assert_eq!(h.join().unwrap(), Err(Error::AGAIN));
    }

    /// A close wakes every thread blocked on the object, of every kind that
    /// can block, and each returns CANCELED at once; so does a wait begun
    /// after the close.
    #[test]
    fn close_wakes_every_waiter_with_canceled() {
        for kind in CNTR_KINDS {
            let w = Arc::new(WaitObj::new(kind, None).unwrap());
            let waiters: Vec<_> = (0..3)
                .map(|_| {
                    let w = w.clone();
                    std::thread::spawn(move || {
                        let r = w.block_until(&|| false, Deadline::from_ms(10_000));
                        (r, Instant::now())
                    })
                })
                .collect();
            // Past the spin: asleep in epoll (the kinds that have it).
            std::thread::sleep(Duration::from_millis(50));
            let closed = Instant::now();
            w.close();
            for h in waiters {
                let (r, at) = h.join().unwrap();
                assert_eq!(r, Err(Error::CANCELED), "kind {kind}");
                assert!(at - closed < Duration::from_secs(2), "kind {kind}: {:?}", at - closed);
            }
            assert_eq!(w.block_until(&|| true, Deadline::from_ms(10_000)), Err(Error::CANCELED));
        }
    }

    #[test]
    fn closing_a_wait_set_ends_fi_wait() {
        let set = WaitSet::new(FI_WAIT_FD, None).unwrap();
        let s2 = set.clone();
        let h = std::thread::spawn(move || s2.wait(10_000));
        std::thread::sleep(Duration::from_millis(50));
        set.obj.close();
        assert_eq!(h.join().unwrap(), Err(Error::CANCELED));
    }

    #[test]
    fn none_and_set_cannot_block_and_set_requires_set() {
        assert!(!WaitObj::new(FI_WAIT_NONE, None).unwrap().can_block());
        assert!(WaitObj::new(FI_WAIT_SET, None).is_err());
        assert!(WaitObj::new(99, None).is_err());
        let s = WaitSet::new(FI_WAIT_FD, None).unwrap();
        assert!(!WaitObj::new(FI_WAIT_SET, Some(s)).unwrap().can_block());
    }

    /// Producer/waiter stress: every produced item must be observed; a lost
    /// wake-up shows up as a waiter stuck past the generous deadline.
    #[test]
    fn no_lost_wakeups() {
        for kind in [FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND] {
            let f = Arc::new(Flag {
                w: WaitObj::new(kind, None).unwrap(),
                n: AtomicU64::new(0),
            });
            let rounds = 2000;
            let f2 = f.clone();
            let consumer = std::thread::spawn(move || {
                for _ in 0..rounds {
                    let r =
                        f2.w.block_until(&|| f2.n.load(Ordering::Acquire) > 0, Deadline::from_ms(10_000));
                    if r.is_err() {
                        return false;
                    }
                    f2.n.fetch_sub(1, Ordering::AcqRel);
                }
                true
            });
            for i in 0..rounds {
                while f.n.load(Ordering::Acquire) > 0 {
                    std::hint::spin_loop();
                }
                if i % 7 == 0 {
                    std::thread::yield_now();
                }
                f.n.fetch_add(1, Ordering::AcqRel);
                f.w.notify();
            }
            assert!(consumer.join().unwrap(), "lost wake-up with kind {kind}");
        }
    }

    /// The fi_trywait protocol with an external poll(): after a successful
    /// trywait, a later notify must make the fd readable.
    #[test]
    fn trywait_then_poll_sees_notify() {
        let f = Arc::new(Flag {
            w: WaitObj::new(FI_WAIT_FD, None).unwrap(),
            n: AtomicU64::new(0),
        });
        let Ok(NativeWait::Fd(fd)) = f.w.native() else {
            panic!("an FD wait object has an fd")
        };
        for _ in 0..200 {
            assert!(f.w.trywait(&|| f.ready()).is_ok());
            let f2 = f.clone();
            let h = std::thread::spawn(move || {
                f2.n.fetch_add(1, Ordering::AcqRel);
                f2.w.notify();
            });
            assert!(
                sys::poll_readable(fd, Some(Duration::from_secs(10))),
                "fd not readable after notify"
            );
            h.join().unwrap();
            f.w.on_read();
            f.n.store(0, Ordering::Release);
        }
        // Something queued before trywait: EAGAIN.
        f.n.store(1, Ordering::Release);
        assert_eq!(f.w.trywait(&|| f.ready()), Err(Error::AGAIN));
    }

    #[test]
    fn wait_set_wakes_for_member() {
        let set = WaitSet::new(FI_WAIT_FD, None).unwrap();
        let m = Arc::new(Flag {
            w: WaitObj::new(FI_WAIT_SET, Some(set.clone())).unwrap(),
            n: AtomicU64::new(0),
        });
        let mw: Arc<dyn Waitable> = m.clone();
        set.add_member(Arc::downgrade(&mw));
        assert_eq!(set.wait(10), Err(Error::TIMEDOUT));
        let m2 = m.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            m2.n.fetch_add(1, Ordering::AcqRel);
            m2.w.notify();
        });
        assert_eq!(set.wait(10_000), Ok(()));
        h.join().unwrap();
    }
}
