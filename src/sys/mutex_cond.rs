//! Real pthread mutex + condition variable pairs for `FI_WAIT_MUTEX_COND`:
//! `FI_GETWAIT` hands the application pointers to them, and the application
//! may `pthread_cond_wait` on them itself, so they must be genuine pthread
//! objects at stable addresses (boxed), signalled under the mutex.

use crate::base::error::{Error, Result};

pub(crate) struct MutexCond {
    mutex: Box<libc::pthread_mutex_t>,
    cond: Box<libc::pthread_cond_t>,
}

// SAFETY: pthread mutexes and condition variables are designed to be used
// from any thread; the boxes give them stable addresses.
unsafe impl Send for MutexCond {}
// SAFETY: as above; all access goes through pthread calls.
unsafe impl Sync for MutexCond {}

impl MutexCond {
    pub(crate) fn new() -> Result<MutexCond> {
        let mut mutex = Box::new(libc::PTHREAD_MUTEX_INITIALIZER);
        // SAFETY: zeroed pthread_cond_t is immediately initialised below.
        let mut cond: Box<libc::pthread_cond_t> = Box::new(unsafe { core::mem::zeroed() });
        // SAFETY: attr is initialised before use and destroyed after; the
        // mutex/cond pointers are valid boxes.
        unsafe {
            // Error-checking mutex: an application may call into rustfab
            // (fi_cq_read, fi_cntr_add, ...) while holding this mutex — the
            // usual "lock; while (read == EAGAIN) cond_wait" pattern — and
            // the entries that call queues broadcast under the same mutex.
            // EDEADLK tells `broadcast` that the caller already holds it.
            let mut attr: libc::pthread_mutexattr_t = core::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_settype(&mut attr, libc::PTHREAD_MUTEX_ERRORCHECK);
            let r = libc::pthread_mutex_init(&mut *mutex, &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if r != 0 {
                return Err(Error::from_errno(r));
            }
            // Default (CLOCK_REALTIME) condition: applications that wait on it
            // with pthread_cond_timedwait expect realtime deadlines.
            let r = libc::pthread_cond_init(&mut *cond, core::ptr::null());
            if r != 0 {
                libc::pthread_mutex_destroy(&mut *mutex);
                return Err(Error::from_errno(r));
            }
        }
        Ok(MutexCond { mutex, cond })
    }

    pub(crate) fn mutex_ptr(&self) -> *mut libc::pthread_mutex_t {
        &*self.mutex as *const _ as *mut _
    }

    pub(crate) fn cond_ptr(&self) -> *mut libc::pthread_cond_t {
        &*self.cond as *const _ as *mut _
    }

    /// Wakes every waiter, taking the mutex so that a waiter that checked the
    /// predicate under the mutex cannot miss the broadcast.
    pub(crate) fn broadcast(&self) {
        // SAFETY: initialised pthread objects at stable addresses.
        unsafe {
            let r = libc::pthread_mutex_lock(self.mutex_ptr());
            libc::pthread_cond_broadcast(self.cond_ptr());
            // EDEADLK: this thread already holds the mutex (it called into
            // rustfab from inside its own critical section): leave it held.
            if r == 0 {
                libc::pthread_mutex_unlock(self.mutex_ptr());
            }
        }
    }
}

impl Drop for MutexCond {
    fn drop(&mut self) {
        // SAFETY: nobody can hold the objects once the owner is dropped.
        unsafe {
            libc::pthread_cond_destroy(&mut *self.cond);
            libc::pthread_mutex_destroy(&mut *self.mutex);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller that holds the mutex (the application's own critical
    /// section) can still trigger a broadcast without deadlocking.
    #[test]
    fn broadcast_while_caller_holds_mutex() {
        let mc = MutexCond::new().unwrap();
        // SAFETY: initialised mutex; locked and unlocked by this thread.
        unsafe { assert_eq!(libc::pthread_mutex_lock(mc.mutex_ptr()), 0) };
        mc.broadcast();
        // Still held by us: unlocking succeeds exactly once.
        // SAFETY: as above.
        unsafe {
            assert_eq!(libc::pthread_mutex_unlock(mc.mutex_ptr()), 0);
            assert_ne!(libc::pthread_mutex_unlock(mc.mutex_ptr()), 0);
        }
        mc.broadcast();
    }
}
