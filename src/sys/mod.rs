//! Thin, safe wrappers over the system calls rustfab uses for waiting:
//! eventfd, epoll, poll, pthread mutex/cond (for `FI_WAIT_MUTEX_COND`), and
//! monotonic time. Transports keep their own socket/shm calls in their
//! modules, but every blocking primitive lives here.

pub mod mutex_cond;
pub mod net;
pub mod resolve;
pub use mutex_cond::MutexCond;

use crate::base::error::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

fn cvt(r: libc::c_int) -> Result<libc::c_int> {
    if r < 0 {
        Err(Error::last_os())
    } else {
        Ok(r)
    }
}

/// A non-blocking eventfd used as a doorbell: readable while signalled.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<EventFd> {
        // SAFETY: eventfd has no memory preconditions; the fd is checked.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Makes the fd readable (idempotent until drained).
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64. EAGAIN (counter saturated)
        // still leaves the fd readable, which is all a doorbell needs.
        unsafe { libc::write(self.0.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }
    /// Clears the readable state. Returns whether it was signalled.
    pub fn drain(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; non-blocking.
        let r = unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
        r == 8
    }
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// An epoll set (level-triggered). Nested epoll fds are allowed as members:
/// an epoll fd is readable while any of its members is ready.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

pub const IN: u32 = libc::EPOLLIN as u32;
pub const OUT: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    pub fn new() -> Result<Epoll> {
        // SAFETY: no memory preconditions; the fd is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> Result<()> {
        match self.ctl(libc::EPOLL_CTL_ADD, fd, events, token) {
            Err(Error(e)) if e == libc::EEXIST => self.modify(fd, events, token),
            r => r,
        }
    }
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }
    pub fn delete(&self, fd: RawFd) {
        // Errors (fd already closed or never added) are irrelevant here.
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }
    /// Waits up to `timeout` (None = forever) and returns the ready tokens.
    pub fn wait(&self, out: &mut Vec<(u64, u32)>, max: usize, timeout: Option<Duration>) -> Result<usize> {
        let max = max.clamp(1, 256);
        // Not initialised: this runs on every progress pass (a 3 KiB memset
        // per call showed up in profiles); the kernel writes what it returns.
        let mut evs = [const { core::mem::MaybeUninit::<libc::epoll_event>::uninit() }; 256];
        let ms = timeout_ms(timeout);
        // SAFETY: `evs` has room for `max` events.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                evs.as_mut_ptr() as *mut libc::epoll_event,
                max as libc::c_int,
                ms,
            )
        };
        if n < 0 {
            let e = Error::last_os();
            return if e.0 == libc::EINTR { Ok(0) } else { Err(e) };
        }
        out.clear();
        for ev in &evs[..n as usize] {
            // SAFETY: epoll_wait initialised the first `n` entries.
            let ev = unsafe { ev.assume_init() };
            let (token, events) = (ev.u64, ev.events);
            out.push((token, events));
        }
        Ok(n as usize)
    }
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Milliseconds for poll/epoll: None → -1 (forever); rounds up so a short
/// timeout never becomes a busy zero-timeout loop.
pub fn timeout_ms(t: Option<Duration>) -> libc::c_int {
    match t {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as libc::c_int
        }
    }
}

#[cfg(test)]
/// Waits until `fd` is readable or the timeout expires. Returns readiness.
pub fn poll_readable(fd: RawFd, timeout: Option<Duration>) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms(timeout)) };
    r > 0
}

/// A deadline for libfabric's `int timeout` (milliseconds, negative = none).
#[derive(Clone, Copy, Debug)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    pub fn from_ms(timeout: i32) -> Deadline {
        if timeout < 0 {
            Deadline(None)
        } else {
            Deadline(Some(Instant::now() + Duration::from_millis(timeout as u64)))
        }
    }
    #[cfg(test)]
    pub fn never() -> Deadline {
        Deadline(None)
    }
    pub fn after(d: Duration) -> Deadline {
        Deadline(Some(Instant::now() + d))
    }
    /// Time left (None = infinite); Some(0) once expired.
    pub fn remaining(&self) -> Option<Duration> {
        self.0.map(|t| t.saturating_duration_since(Instant::now()))
    }
    pub fn expired(&self) -> bool {
        matches!(self.remaining(), Some(d) if d.is_zero())
    }
}

/// This process's id.
pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Effective uid.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Gives up the CPU (`FI_WAIT_YIELD`).
pub fn yield_now() {
    std::thread::yield_now();
}

/// Start time of process `pid` in clock ticks since boot (field 22 of
/// /proc/<pid>/stat): with the pid it identifies a process incarnation, so
/// a recycled pid is not mistaken for a live peer.
pub fn proc_start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    // After ") " come fields 3.. ; starttime is field 22 → index 19.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process incarnation (pid, start time) still exists.
pub fn process_alive(pid: i32, start: u64) -> bool {
    if pid <= 0 {
        return false;
    }
    match proc_start_time(pid) {
        Some(t) => t == start,
        None => {
            // No /proc entry: the process is gone (or /proc is unavailable,
            // in which case fall back to signal 0).
            // SAFETY: kill with signal 0 only checks existence/permission.
            let r = unsafe { libc::kill(pid, 0) };
            r == 0 && !std::path::Path::new("/proc/self").exists()
        }
    }
}
