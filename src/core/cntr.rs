//! Counters (`fi_cntr(3)`).
//!
//! A [`Cntr`] core is two atomics (successes and errors), its [`WaitObj`]
//! and holds on its domain (and wait set). Endpoints hold `Held<Cntr>` and
//! count with [`Cntr::inc`] / [`Cntr::inc_err`] (one atomic add plus the
//! wait object's notify, which costs a system call only when a waiter is
//! armed); the application reads, adds, sets and waits through the
//! `fid_cntr` vtable of the C face (`fi/cntr.rs`).
//!
//! Decisions:
//! * `attr.events` must be `FI_CNTR_EVENTS_COMP` (the only value 1.17
//!   defines) and `attr.flags` 0 ("Flags are reserved for future use, and
//!   must be set to 0"); anything else is -FI_EINVAL.
//! * `fi_cntr_wait`: 0 once the value reaches the threshold; "Any change in
//!   a counter's error value will unblock any thread inside fi_cntr_wait"
//!   → -FI_EAVAIL (what util returns); "If the call returns due to timeout,
//!   -FI_ETIMEDOUT will be returned". fi_cntr(3) calls a wait on an
//!   `FI_WAIT_NONE` or `FI_WAIT_SET` counter invalid, and util answers
//!   -FI_ENOSYS (`fi_no_cntr_wait`); but the sockets provider waits on any
//!   counter (progress, then check), and applications rely on it: fabtests'
//!   `fi_multi_mr` waits (30 s timeout) on region counters opened
//!   `FI_WAIT_NONE`. Such a counter has no object of its own to sleep on,
//!   so its wait progresses the domain and checks, yielding the processor
//!   between passes (as `FI_WAIT_YIELD`), under the same threshold, error
//!   and timeout rules.
//! * Readiness (for `fi_trywait` and wait sets): the value or the error value
//!   differs from what the application last read with `fi_cntr_read` /
//!   `fi_cntr_readerr` — so an increment that lands between the
//!   application's read and its `fi_trywait` is never slept through.
//! * `fi_poll` reports a counter when its value or error value changed since
//!   the previous `fi_poll` on that poll set (libfabric util's reading of
//!   fi_poll(3); the checkpoint lives in the poll set, see `poll.rs`).
//! * Reads progress the domain's engine (manual progress).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::trigger::{Counted, Triggers};
use crate::core::users::{AnyParent, HasUsers, Held, Users};
use crate::core::wait::{Holds, MemberWait, WaitObj, WaitSet, Waitable};
use crate::sys::Deadline;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What `fi_cntr_open` asks for: `struct CntrAttr` without its wait
/// set (which arrives as a [`Holds`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CntrAttr {
    pub(crate) events: u32,
    pub(crate) wait_obj: u32,
    pub(crate) flags: u64,
}

/// The counter core. See the module documentation.
pub(crate) struct Cntr {
    users: Users,
    /// The `context` given to `fi_cntr_open` (returned by `fi_poll`).
    context: usize,
    value: AtomicU64,
    err: AtomicU64,
    /// What the application last read (readiness for trywait/wait sets).
    seen_value: AtomicU64,
    seen_err: AtomicU64,
    wait: WaitObj,
    set: Option<Held<WaitSet>>,
    _domain: Option<Held<AnyParent>>,
    /// Triggered operations queued on this counter (`core/trigger.rs`).
    triggers: Triggers,
}

impl Counted for Cntr {
    fn value(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }
    fn triggers(&self) -> &Triggers {
        &self.triggers
    }
}

impl HasUsers for Cntr {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Waitable for Cntr {
    fn ready(&self) -> bool {
        self.changed_since_read()
    }
}

impl Cntr {
    /// Builds a counter core (the caller adds engines).
    pub(crate) fn new(attr: &CntrAttr, mut holds: Holds<AnyParent>, context: usize) -> Result<Arc<Cntr>> {
        if attr.events != FI_CNTR_EVENTS_COMP || attr.flags != 0 {
            return Err(Error::INVAL);
        }
        if !crate::core::wait::valid_object_kind(attr.wait_obj) {
            return Err(Error::INVAL);
        }
        let set = holds.set_for(attr.wait_obj)?;
        let wait = WaitObj::new(attr.wait_obj, set.as_ref().map(|s| s.arc().clone()))?;
        let c = Arc::new(Cntr {
            users: Users::default(),
            context,
            value: AtomicU64::new(0),
            err: AtomicU64::new(0),
            seen_value: AtomicU64::new(0),
            seen_err: AtomicU64::new(0),
            wait,
            set,
            _domain: holds.parent,
            triggers: Triggers::default(),
        });
        if let Some(s) = &c.set {
            let member: Arc<dyn Waitable> = c.clone();
            s.add_member(Arc::downgrade(&member));
        }
        Ok(c)
    }

    /// The `context` passed to `fi_cntr_open`.
    pub(crate) fn context(&self) -> usize {
        self.context
    }

    pub(crate) fn wait(&self) -> &WaitObj {
        &self.wait
    }

    // ---- producer API ----

    /// One successful completion.
    #[inline]
    pub(crate) fn inc(&self) {
        self.add(1);
    }

    /// One completion in error.
    #[inline]
    pub(crate) fn inc_err(&self) {
        self.add_err(1);
    }

    /// `fi_cntr_add` (and batched increments).
    pub(crate) fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::AcqRel);
        self.wait.notify();
    }

    /// `fi_cntr_adderr`.
    pub(crate) fn add_err(&self, n: u64) {
        self.err.fetch_add(n, Ordering::AcqRel);
        self.wait.notify();
    }

    /// `fi_cntr_set`.
    pub(crate) fn set(&self, v: u64) {
        self.value.store(v, Ordering::Release);
        self.wait.notify();
    }

    /// `fi_cntr_seterr`.
    pub(crate) fn set_err(&self, v: u64) {
        self.err.store(v, Ordering::Release);
        self.wait.notify();
    }

    // ---- consumer API ----

    /// The values without progress or bookkeeping (poll sets, tests).
    pub(crate) fn peek(&self) -> (u64, u64) {
        (self.value.load(Ordering::Acquire), self.err.load(Ordering::Acquire))
    }

    fn changed_since_read(&self) -> bool {
        let (v, e) = self.peek();
        v != self.seen_value.load(Ordering::Acquire) || e != self.seen_err.load(Ordering::Acquire)
    }

    fn before_read(&self) {
        self.wait.on_read();
        self.wait.progress();
    }

    /// `fi_cntr_read`.
    pub(crate) fn read(&self) -> u64 {
        self.before_read();
        let v = self.value.load(Ordering::Acquire);
        self.seen_value.store(v, Ordering::Release);
        v
    }

    /// `fi_cntr_readerr`.
    pub(crate) fn read_err(&self) -> u64 {
        self.before_read();
        let e = self.err.load(Ordering::Acquire);
        self.seen_err.store(e, Ordering::Release);
        e
    }

    /// `fi_cntr_wait`; `Err(CANCELED)` when the counter is closed meanwhile
    /// ([`WaitObj::close`]).
    pub(crate) fn wait_for(&self, threshold: u64, timeout: i32) -> Result<()> {
        let err0 = self.err.load(Ordering::Acquire);
        let deadline = Deadline::from_ms(timeout);
        let ready = || self.value.load(Ordering::Acquire) >= threshold || self.err.load(Ordering::Acquire) != err0;
        loop {
            let r = self.wait.block_until(&ready, deadline);
            // Closed under the waiter (fi_close from another thread).
            if r == Err(Error::CANCELED) {
                return r;
            }
            // "Upon successful return from this call, the counter will be
            // greater than or equal to the input threshold value."
            if self.value.load(Ordering::Acquire) >= threshold {
                return Ok(());
            }
            if self.err.load(Ordering::Acquire) != err0 {
                return Err(Error::AVAIL);
            }
            match r {
                // Ready, then set back by fi_cntr_set before we looked.
                Ok(()) if !deadline.expired() => continue,
                // Counters have no signal call: the only wake-up without a
                // reason is the deadline.
                Ok(()) | Err(Error::AGAIN) => return Err(Error::TIMEDOUT),
                Err(e) => return Err(e),
            }
        }
    }

    /// `fi_trywait` on this counter; a member of a wait set defers to it.
    pub(crate) fn trywait(&self) -> Result<()> {
        self.member_wait().trywait(&|| self.changed_since_read())
    }

    fn member_wait(&self) -> MemberWait<'_> {
        MemberWait {
            own: &self.wait,
            set: self.set.as_deref(),
        }
    }

    /// The wait object `FI_GETWAIT`/`FI_GETWAITOBJ` describe (a wait-set
    /// member's is its set's).
    pub(crate) fn shown_wait(&self) -> &WaitObj {
        self.member_wait().shown()
    }

    /// `fi_control(FI_GETOPSFLAG)`: fi_cntr(3) lists the command, but a
    /// counter has no operational flags, so they read as 0.
    pub(crate) fn ops_flags(&self) -> u64 {
        0
    }

    /// `fi_control(FI_SETOPSFLAG)`: only 0 can be set (-FI_EBADFLAGS).
    pub(crate) fn set_ops_flags(&self, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn attr(wait_obj: u32) -> CntrAttr {
        CntrAttr {
            events: FI_CNTR_EVENTS_COMP,
            wait_obj,
            flags: 0,
        }
    }

    fn cntr(wait_obj: u32) -> Arc<Cntr> {
        Cntr::new(&attr(wait_obj), Holds::none(), 0).unwrap()
    }

    /// fabtests cntr_loop: set/seterr/add/adderr/read/readerr.
    #[test]
    fn values() {
        let c = cntr(FI_WAIT_NONE);
        c.set(5);
        c.set_err(10);
        c.add(5);
        c.add_err(5);
        c.inc();
        c.inc_err();
        assert_eq!((c.read(), c.read_err()), (11, 16));
    }

    /// fi_close from another thread ends a blocked fi_cntr_wait with
    /// CANCELED, on every kind (FI_WAIT_NONE polls).
    #[test]
    fn close_ends_a_blocked_wait_with_canceled() {
        for kind in crate::core::wait::CNTR_KINDS {
            let c = cntr(kind);
            let c2 = c.clone();
            let h = std::thread::spawn(move || c2.wait_for(1, 10_000));
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            c.wait().close();
            assert_eq!(h.join().unwrap(), Err(Error::CANCELED), "kind {kind}");
            assert!(t.elapsed() < Duration::from_secs(2));
        }
    }

    #[test]
    fn wait_threshold_timeout_and_errors() {
        // FI_WAIT_NONE: no object to sleep on, the wait polls (fi_multi_mr).
        for kind in crate::core::wait::CNTR_KINDS {
            let c = cntr(kind);
            let t = Instant::now();
            assert_eq!(c.wait_for(1, 50), Err(Error::TIMEDOUT), "kind {kind}");
            assert!(t.elapsed() >= Duration::from_millis(50));
            let c2 = c.clone();
            let h = std::thread::spawn(move || {
                for _ in 0..5 {
                    std::thread::sleep(Duration::from_millis(5));
                    c2.inc();
                }
            });
            assert_eq!(c.wait_for(5, 10_000), Ok(()), "kind {kind}");
            assert!(c.read() >= 5);
            h.join().unwrap();
            assert_eq!(c.wait_for(3, 0), Ok(()), "already reached");
            // "Any change in a counter's error value will unblock any thread
            // inside fi_cntr_wait."
            let c2 = c.clone();
            let h = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                c2.inc_err();
            });
            assert_eq!(c.wait_for(100, 10_000), Err(Error::AVAIL), "kind {kind}");
            h.join().unwrap();
        }
    }

    #[test]
    fn no_lost_wakeups() {
        for kind in [FI_WAIT_FD, FI_WAIT_UNSPEC, FI_WAIT_MUTEX_COND] {
            let c = cntr(kind);
            let total = 5000u64;
            let c2 = c.clone();
            let h = std::thread::spawn(move || {
                for i in 0..total {
                    c2.inc();
                    if i % 13 == 0 {
                        std::thread::yield_now();
                    }
                }
            });
            for n in 1..=total {
                assert_eq!(c.wait_for(n, 10_000), Ok(()), "kind {kind} stuck at {n}");
            }
            h.join().unwrap();
        }
    }

    /// Ready for fi_trywait = changed since the application last read it.
    #[test]
    fn trywait_and_fd() {
        let c = cntr(FI_WAIT_FD);
        let Ok(crate::core::wait::NativeWait::Fd(fd)) = c.shown_wait().native() else {
            panic!("an FD counter shows an fd")
        };
        assert_eq!(c.trywait(), Ok(()));
        assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        c.add(2);
        assert!(crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        assert_eq!(c.trywait(), Err(Error::AGAIN));
        assert_eq!(c.read(), 2);
        assert_eq!(c.trywait(), Ok(()));
        c.inc_err();
        assert_eq!(c.trywait(), Err(Error::AGAIN));
        assert_eq!(c.read_err(), 1);
        assert_eq!(c.trywait(), Ok(()));
        assert_eq!(cntr(FI_WAIT_NONE).trywait(), Err(Error::INVAL));
    }

    #[test]
    fn bad_attributes_and_ops_flags() {
        let mut a = attr(FI_WAIT_NONE);
        a.flags = 1;
        assert!(Cntr::new(&a, Holds::none(), 0).is_err());
        let mut a = attr(FI_WAIT_NONE);
        a.events = 1;
        assert!(Cntr::new(&a, Holds::none(), 0).is_err());
        assert!(Cntr::new(&attr(77), Holds::none(), 0).is_err());
        assert!(Cntr::new(&attr(FI_WAIT_SET), Holds::none(), 0).is_err());
        let c = cntr(FI_WAIT_UNSPEC);
        assert_eq!(c.ops_flags(), 0);
        assert_eq!(c.set_ops_flags(0), Ok(()));
        assert_eq!(c.set_ops_flags(1), Err(Error::BADFLAGS));
        assert_eq!(c.shown_wait().native().err(), Some(Error::NODATA));
    }
}
