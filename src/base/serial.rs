//! Locks that take no locked instruction while the application serialises
//! every call on a domain (`FI_THREAD_DOMAIN` with manual progress).
//!
//! fi_domain(3), `FI_THREAD_DOMAIN`: "the provider may assume that the
//! application serializes access across all objects in a domain". Under that
//! promise the endpoint, CQ and progress-engine locks of the data path are
//! never contended, yet each `parking_lot` lock and unlock is a `lock
//! cmpxchg`, dozens of them per small-message round trip (docs/performance-history.md
//! "serial"). A [`ModeMutex`] looks at its
//! domain's [`LockMode`] instead:
//!
//! * **serial**: the lock is a `held` flag moved with plain (relaxed) loads
//!   and stores, no read-modify-write. `try_lock` of a held lock still fails
//!   (the progress pass relies on that), and a `lock` of a held one — which
//!   would deadlock in the locked mode — panics (caught at the C boundary)
//!   instead of handing out a second `&mut`;
//! * **locked**: a `parking_lot` raw mutex.
//!
//! A mode goes from serial to locked once, for good ([`LockMode::lock_for_good`]),
//! before anything outside the application's serialisation can reach the
//! domain's objects: a progress thread, a wait set's `fi_wait`, a CQ or
//! counter bound across domains, a poll set of another domain, a
//! connection-oriented endpoint (its connection is driven from the
//! fabric's EQ). Each of those happens in a call the application orders
//! against every other call on the domain, holding none of its locks, so
//! no serial critical section is open when the mode changes, and the other
//! thread starts (or is handed the object) after it. The guard remembers
//! the mode it locked in, so an unlock always matches its lock. Where each
//! switch is made: docs/architecture.md "Locks and threading levels".

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};
use parking_lot::lock_api::RawMutex as _;
use std::sync::Arc;

/// A domain's locking mode, shared by the locks of its objects.
pub(crate) struct LockMode {
    serial: AtomicBool,
}

impl LockMode {
    /// Real locks, for every object that is not under one application
    /// thread's serialisation.
    pub(crate) fn locked() -> Arc<LockMode> {
        Arc::new(LockMode {
            serial: AtomicBool::new(false),
        })
    }

    /// Plain-store locks until [`LockMode::lock_for_good`].
    ///
    /// # Safety
    /// Until the mode is switched, no two threads may hold or take locks of
    /// this mode at the same time: the caller has the application's
    /// `FI_THREAD_DOMAIN` promise for every call that reaches them, and
    /// switches the mode before any other thread can reach them.
    pub(crate) unsafe fn serial() -> Arc<LockMode> {
        Arc::new(LockMode {
            serial: AtomicBool::new(true),
        })
    }

    #[inline(always)]
    pub(crate) fn is_serial(&self) -> bool {
        // Relaxed: the thread that may contend is started, or handed the
        // object, after the switch, which orders the switch before it.
        self.serial.load(Ordering::Relaxed)
    }

    /// From now on every lock of this mode is a real lock. Called with no
    /// lock of the mode held (module documentation).
    pub(crate) fn lock_for_good(&self) {
        if self.serial.swap(false, Ordering::Release) {
            crate::base::log::log_info!(crate::abi::FI_LOG_DOMAIN, "domain locks made real for good");
        }
    }
}

/// A mutex whose lock is a plain flag while its [`LockMode`] is serial.
pub(crate) struct ModeMutex<T> {
    mode: Arc<LockMode>,
    raw: parking_lot::RawMutex,
    held: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which exists only
// while the lock is held: by the raw mutex in the locked mode, by the
// `held` flag in the serial mode, whose contract (`LockMode::serial`) is
// that no two threads take these locks at the same time.
unsafe impl<T: Send> Sync for ModeMutex<T> {}
// SAFETY: moving the mutex moves its data (`T: Send`).
unsafe impl<T: Send> Send for ModeMutex<T> {}

/// A held [`ModeMutex`]; unlocks in the mode it locked in.
pub(crate) struct ModeGuard<'a, T> {
    m: &'a ModeMutex<T>,
    serial: bool,
}

#[cold]
#[inline(never)]
fn reentered() -> ! {
    panic!("a lock was taken again while held (serial mode: FI_THREAD_DOMAIN calls overlapped or a lock re-entered)")
}

impl<T> ModeMutex<T> {
    pub(crate) fn new(data: T, mode: Arc<LockMode>) -> ModeMutex<T> {
        ModeMutex {
            mode,
            raw: parking_lot::RawMutex::INIT,
            held: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    /// The mode this lock follows.
    pub(crate) fn mode(&self) -> &Arc<LockMode> {
        &self.mode
    }

    /// Whether this lock is in the serial mode now.
    #[inline(always)]
    pub(crate) fn is_serial(&self) -> bool {
        self.mode.is_serial()
    }

    #[inline(always)]
    pub(crate) fn lock(&self) -> ModeGuard<'_, T> {
        if self.mode.is_serial() {
            if self.held.load(Ordering::Relaxed) {
                reentered();
            }
            self.held.store(true, Ordering::Relaxed);
            ModeGuard { m: self, serial: true }
        } else {
            self.raw.lock();
            ModeGuard { m: self, serial: false }
        }
    }

    #[inline(always)]
    pub(crate) fn try_lock(&self) -> Option<ModeGuard<'_, T>> {
        if self.mode.is_serial() {
            if self.held.load(Ordering::Relaxed) {
                return None;
            }
            self.held.store(true, Ordering::Relaxed);
            Some(ModeGuard { m: self, serial: true })
        } else if self.raw.try_lock() {
            Some(ModeGuard { m: self, serial: false })
        } else {
            None
        }
    }
}

impl<T> Drop for ModeGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.serial {
            self.m.held.store(false, Ordering::Relaxed);
        } else {
            // SAFETY: this guard took the raw mutex in `lock`/`try_lock`
            // and is its only holder.
            unsafe { self.m.raw.unlock() }
        }
    }
}

impl<T> core::ops::Deref for ModeGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock (module documentation).
        unsafe { &*self.m.data.get() }
    }
}

impl<T> core::ops::DerefMut for ModeGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and `&mut self` makes this the
        // only reference made through it.
        unsafe { &mut *self.m.data.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn serial_try_lock_of_a_held_lock_fails_and_unlock_frees_it() {
        // SAFETY: one thread.
        let m = ModeMutex::new(1, unsafe { LockMode::serial() });
        let g = m.lock();
        assert!(m.try_lock().is_none());
        drop(g);
        *m.try_lock().unwrap() += 1;
        assert_eq!(*m.lock(), 2);
    }

    #[test]
    fn serial_relock_panics_instead_of_aliasing() {
        // SAFETY: one thread.
        let m = ModeMutex::new(0, unsafe { LockMode::serial() });
        let _g = m.lock();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _h = m.lock();
        }));
        assert!(r.is_err());
    }

    #[test]
    fn locked_for_good_the_locks_exclude_each_other() {
        // SAFETY: the switch happens before the second thread exists.
        let mode = unsafe { LockMode::serial() };
        let m = Arc::new(ModeMutex::new(0usize, mode.clone()));
        *m.lock() += 1;
        mode.lock_for_good();
        assert!(!m.is_serial());
        let inside = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (m, inside) = (m.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = m.lock();
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                        *g += 1;
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(*m.lock(), 40_001);
    }

    #[test]
    fn a_guard_unlocks_in_the_mode_it_locked_in() {
        // SAFETY: one thread.
        let mode = unsafe { LockMode::serial() };
        let m = ModeMutex::new(0, mode.clone());
        let g = m.lock();
        // Not allowed by the contract while held; the guard must still
        // release what it took (the flag), not the raw mutex it never took.
        mode.lock_for_good();
        drop(g);
        assert!(m.try_lock().is_some());
    }
}
