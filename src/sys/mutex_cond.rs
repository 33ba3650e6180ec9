//! Real pthread mutex + condition variable pairs for `FI_WAIT_MUTEX_COND`:
//! `FI_GETWAIT` hands the application pointers to them, and the application
//! may `pthread_cond_wait` on them itself, so they must be genuine pthread
//! objects at stable addresses (boxed), signalled under the mutex.

use crate::error::{Error, Result};
use std::time::Duration;

pub struct MutexCond {
    mutex: Box<libc::pthread_mutex_t>,
    cond: Box<libc::pthread_cond_t>,
}

// SAFETY: pthread mutexes and condition variables are designed to be used
// from any thread; the boxes give them stable addresses.
unsafe impl Send for MutexCond {}
// SAFETY: as above; all access goes through pthread calls.
unsafe impl Sync for MutexCond {}

impl MutexCond {
    pub fn new() -> Result<MutexCond> {
        let mut mutex = Box::new(libc::PTHREAD_MUTEX_INITIALIZER);
        // SAFETY: zeroed pthread_cond_t is immediately initialised below.
        let mut cond: Box<libc::pthread_cond_t> = Box::new(unsafe { core::mem::zeroed() });
        // SAFETY: attr is initialised before use and destroyed after; the
        // mutex/cond pointers are valid boxes.
        unsafe {
            let r = libc::pthread_mutex_init(&mut *mutex, core::ptr::null());
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

    pub fn mutex_ptr(&self) -> *mut libc::pthread_mutex_t {
        &*self.mutex as *const _ as *mut _
    }

    pub fn cond_ptr(&self) -> *mut libc::pthread_cond_t {
        &*self.cond as *const _ as *mut _
    }

    /// Wakes every waiter, taking the mutex so that a waiter that checked the
    /// predicate under the mutex cannot miss the broadcast.
    pub fn broadcast(&self) {
        // SAFETY: initialised pthread objects at stable addresses.
        unsafe {
            libc::pthread_mutex_lock(self.mutex_ptr());
            libc::pthread_cond_broadcast(self.cond_ptr());
            libc::pthread_mutex_unlock(self.mutex_ptr());
        }
    }

    /// Locks the mutex, runs `ready`; if it is false, waits on the condition
    /// (up to `timeout`) and returns after one wake-up or the timeout.
    pub fn wait_unless(&self, ready: impl Fn() -> bool, timeout: Option<Duration>) -> bool {
        // SAFETY: initialised pthread objects; the mutex is held around the
        // predicate check and released by pthread_cond_(timed)wait.
        unsafe {
            libc::pthread_mutex_lock(self.mutex_ptr());
            if ready() {
                libc::pthread_mutex_unlock(self.mutex_ptr());
                return true;
            }
            match timeout {
                None => {
                    libc::pthread_cond_wait(self.cond_ptr(), self.mutex_ptr());
                }
                Some(d) => {
                    let mut ts: libc::timespec = core::mem::zeroed();
                    libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts);
                    let total = ts.tv_nsec as u128 + d.as_nanos();
                    ts.tv_sec += (total / 1_000_000_000).min(i32::MAX as u128) as libc::time_t;
                    ts.tv_nsec = (total % 1_000_000_000) as libc::c_long;
                    libc::pthread_cond_timedwait(self.cond_ptr(), self.mutex_ptr(), &ts);
                }
            }
            let r = ready();
            libc::pthread_mutex_unlock(self.mutex_ptr());
            r
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
