//! Every system call and libc function rustfab makes lives under `sys/`
//! (tests/layering.rs checks it): waiting (eventfd, epoll, poll, monotonic
//! deadlines), processes (pids, liveness), random numbers, and in the
//! submodules shared-memory segments ([`shm`]), the shm doorbell socket
//! ([`doorbell`]), cross-memory reads ([`cma`]), socket address layouts
//! ([`sockaddr`]), name resolution ([`resolve`]) and pthread objects
//! ([`mutex_cond`]).
//!
//! Descriptors are [`OwnedFd`]s (closed by dropping them) and calls go
//! through rustix where it has them; libc remains for what rustix lacks
//! (`process_vm_readv`, `getaddrinfo`, `atexit`, pthread mutex/cond, `recvmsg` of
//! the doorbell's credentials).

pub(crate) mod cma;
pub(crate) mod cmem;
pub(crate) mod doorbell;
pub(crate) mod mutex_cond;
pub(crate) mod net;
pub(crate) mod resolve;
pub(crate) mod shm;
pub(crate) mod sockaddr;
pub(crate) mod udp;
pub(crate) use mutex_cond::MutexCond;

use crate::base::error::{Error, Result};
use core::mem::MaybeUninit;
use rustix::event::{epoll, EventfdFlags, Timespec};
#[cfg(test)]
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// A non-blocking eventfd used as a doorbell: readable while signalled.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> Result<EventFd> {
        Ok(EventFd(rustix::event::eventfd(
            0,
            EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
        )?))
    }
    /// Makes the fd readable (idempotent until drained).
    pub(crate) fn signal(&self) {
        // EAGAIN (counter saturated) still leaves the fd readable, which is
        // all a doorbell needs.
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }
    /// Clears the readable state. Returns whether it was signalled.
    pub(crate) fn drain(&self) -> bool {
        let mut v = [0u8; 8];
        matches!(rustix::io::read(&self.0, &mut v), Ok(8))
    }
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// An epoll set (level-triggered). Nested epoll fds are allowed as members:
/// an epoll fd is readable while any of its members is ready.
#[derive(Debug)]
pub(crate) struct Epoll(OwnedFd);

pub(crate) const IN: u32 = epoll::EventFlags::IN.bits();
pub(crate) const OUT: u32 = epoll::EventFlags::OUT.bits();

/// Borrows a descriptor the caller passes as a raw number; a negative one
/// (no descriptor) is `EBADF`, as the kernel would say.
///
/// # Safety
/// `fd`, if not negative, must be open for the duration of the borrow.
unsafe fn borrow(fd: RawFd) -> Result<BorrowedFd<'static>> {
    if fd < 0 {
        return Err(Errno::BADF.into());
    }
    // SAFETY: forwarded to the caller; the borrow never outlives the call
    // that makes it (every use below passes it straight to one syscall).
    Ok(unsafe { BorrowedFd::borrow_raw(fd) })
}

impl Epoll {
    pub(crate) fn new() -> Result<Epoll> {
        Ok(Epoll(epoll::create(epoll::CreateFlags::CLOEXEC)?))
    }
    /// Adds `fd` (or updates it if already a member). `fd` must be open.
    pub(crate) fn add(&self, fd: RawFd, events: u32, token: u64) -> Result<()> {
        // SAFETY: callers pass descriptors they hold open across the call;
        // a closed number fails with EBADF, it is never dereferenced.
        let member = unsafe { borrow(fd) }?;
        let flags = epoll::EventFlags::from_bits_retain(events);
        match epoll::add(&self.0, member, epoll::EventData::new_u64(token), flags) {
            Err(Errno::EXIST) => self.modify(fd, events, token),
            r => Ok(r?),
        }
    }
    pub(crate) fn modify(&self, fd: RawFd, events: u32, token: u64) -> Result<()> {
        // SAFETY: as in `add`.
        let member = unsafe { borrow(fd) }?;
        let flags = epoll::EventFlags::from_bits_retain(events);
        Ok(epoll::modify(&self.0, member, epoll::EventData::new_u64(token), flags)?)
    }
    pub(crate) fn delete(&self, fd: RawFd) {
        // Errors (fd already closed or never added) are irrelevant here.
        // SAFETY: as in `add`.
        if let Ok(member) = unsafe { borrow(fd) } {
            let _ = epoll::delete(&self.0, member);
        }
    }
    /// Waits up to `timeout` (None = forever) and returns the ready tokens.
    pub(crate) fn wait(&self, out: &mut Vec<(u64, u32)>, max: usize, timeout: Option<Duration>) -> Result<usize> {
        let max = max.clamp(1, 256);
        // Not initialised: this runs on every progress pass (a 3 KiB memset
        // per call showed up in profiles); the kernel writes what it returns.
        let mut evs = [const { MaybeUninit::<epoll::Event>::uninit() }; 256];
        let ts = timespec(timeout);
        let ready = match epoll::wait(&self.0, &mut evs[..max], ts.as_ref()) {
            Ok((ready, _)) => ready,
            Err(Errno::INTR) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        out.clear();
        out.extend(ready.iter().map(|&ev| {
            // Copied out first: the kernel's struct is packed on x86-64.
            let (data, flags) = (ev.data, ev.flags);
            (data.u64(), flags.bits())
        }));
        Ok(out.len())
    }
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Milliseconds for poll/epoll: None → -1 (forever); rounds up so a short
/// timeout never becomes a busy zero-timeout loop.
pub(crate) fn timeout_ms(t: Option<Duration>) -> libc::c_int {
    match t {
        None => -1,
        Some(d) => {
            let ms = d.as_nanos().div_ceil(1_000_000);
            ms.min(i32::MAX as u128) as libc::c_int
        }
    }
}

/// `timeout_ms` as the kernel's timespec (None = forever): whole
/// milliseconds, so poll/epoll_wait keep their millisecond interface and
/// rounding.
fn timespec(t: Option<Duration>) -> Option<Timespec> {
    t.map(|_| {
        let ms = i64::from(timeout_ms(t));
        Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000) * 1_000_000,
        }
    })
}

#[cfg(test)]
/// Waits until `fd` is readable or the timeout expires. Returns readiness.
pub(crate) fn poll_readable(fd: RawFd, timeout: Option<Duration>) -> bool {
    // SAFETY: test callers pass descriptors they hold open.
    let Ok(fd) = (unsafe { borrow(fd) }) else {
        return false;
    };
    let mut p = [PollFd::new(&fd, PollFlags::IN)];
    matches!(rustix::event::poll(&mut p, timespec(timeout).as_ref()), Ok(n) if n > 0)
}

/// A deadline for libfabric's `int timeout` (milliseconds, negative = none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    pub(crate) fn from_ms(timeout: i32) -> Deadline {
        if timeout < 0 {
            Deadline(None)
        } else {
            Deadline(Some(Instant::now() + Duration::from_millis(timeout as u64)))
        }
    }
    #[cfg(test)]
    pub(crate) fn never() -> Deadline {
        Deadline(None)
    }
    pub(crate) fn after(d: Duration) -> Deadline {
        Deadline(Some(Instant::now() + d))
    }
    /// Time left (None = infinite); Some(0) once expired.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.0.map(|t| t.saturating_duration_since(Instant::now()))
    }
    pub(crate) fn expired(&self) -> bool {
        matches!(self.remaining(), Some(d) if d.is_zero())
    }
}

/// This process's id.
pub(crate) fn getpid() -> i32 {
    rustix::process::getpid().as_raw_nonzero().get()
}

/// Effective uid.
pub(crate) fn geteuid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// What tells the processes that share this kernel, /dev/shm and IPC from
/// all others: the boot id, and this process's IPC and mount namespaces
/// (the targets of /proc/self/ns/ipc and mnt). Empty strings where
/// unreadable.
pub(crate) fn host_facts() -> [String; 3] {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = |p: &str| {
        std::fs::read_link(p)
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    [
        boot.trim().to_string(),
        ns("/proc/self/ns/ipc"),
        ns("/proc/self/ns/mnt"),
    ]
}

/// Eight random bytes from the kernel (`getrandom`, blocking only until the
/// pool is first initialised); None if the call fails or comes back short.
pub(crate) fn random_u64() -> Option<u64> {
    let mut b = [0u8; 8];
    match rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()) {
        Ok(8) => Some(u64::from_ne_bytes(b)),
        _ => None,
    }
}

/// The process `membarrier_register` registered (0: none yet): a forked
/// child is a new process and registers again.
static MEMBARRIER_PID: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

/// Registers this process for the barriers [`membarrier_global`] issues in
/// other processes (`MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED`, once per
/// process; not on the fast path): whether it may rely on them, i.e. use a
/// compiler barrier where the shm wake-up handshake would otherwise need a
/// full fence (docs/shm.md, "Waking a sleeper"). False when the kernel
/// lacks the command (Linux < 4.16) or a seccomp filter refuses it: the
/// caller then keeps its fences.
pub(crate) fn membarrier_register() -> bool {
    use core::sync::atomic::Ordering;
    use rustix::thread::{membarrier, membarrier_query, MembarrierCommand as C};
    let pid = getpid();
    if MEMBARRIER_PID.load(Ordering::Acquire) == pid {
        return true;
    }
    let q = membarrier_query();
    if !q.contains_command(C::GlobalExpedited) || !q.contains_command(C::RegisterGlobalExpedited) {
        return false;
    }
    if membarrier(C::RegisterGlobalExpedited).is_err() {
        return false;
    }
    MEMBARRIER_PID.store(pid, Ordering::Release);
    true
}

/// A full memory barrier on every thread of every process registered with
/// [`membarrier_register`] that is running now (one that is not running
/// passes a barrier when it is scheduled), and on this thread
/// (`MEMBARRIER_CMD_GLOBAL_EXPEDITED`: inter-processor interrupts, a few
/// microseconds). False if the kernel refused (then nothing was ordered).
pub(crate) fn membarrier_global() -> bool {
    rustix::thread::membarrier(rustix::thread::MembarrierCommand::GlobalExpedited).is_ok()
}

/// Runs `f` when the process calls `exit()` (not when it is killed).
pub(crate) fn at_exit(f: extern "C" fn()) -> Result<()> {
    // SAFETY: registers a plain extern "C" function with no arguments,
    // which is all atexit asks of it.
    match unsafe { libc::atexit(f) } {
        0 => Ok(()),
        _ => Err(Error::NOMEM),
    }
}

/// Gives up the CPU (`FI_WAIT_YIELD`).
pub(crate) fn yield_now() {
    std::thread::yield_now();
}

#[cfg(test)]
thread_local! {
    /// /proc/<pid>/stat reads made by this thread (tests count them).
    pub static PROC_READS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Start time of process `pid` in clock ticks since boot (field 22 of
/// /proc/<pid>/stat): with the pid it identifies a process incarnation, so
/// a recycled pid is not mistaken for a live peer.
pub(crate) fn proc_start_time(pid: i32) -> Option<u64> {
    #[cfg(test)]
    PROC_READS.with(|n| n.set(n.get() + 1));
    // One open, one read (the line ends in a newline), one close: a
    // growing String cost a statx and six reads per call, and the call is
    // made on every first contact (the owner's and the sender's check).
    use std::io::Read;
    let mut f = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 1024];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if buf[n - 1] == b'\n' {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    // The command name (before the last ')') may be any bytes.
    let close = buf[..n].iter().rposition(|&b| b == b')')?;
    let rest = core::str::from_utf8(&buf[close + 1..n]).ok()?;
    // After ") " come fields 3.. ; starttime is field 22 → index 19.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether some process has the id `pid` (signal 0: `ESRCH` is the only
/// answer that proves there is none).
pub(crate) fn pid_exists(pid: i32) -> bool {
    match rustix::process::Pid::from_raw(pid) {
        Some(p) if pid > 0 => !matches!(rustix::process::test_kill_process(p), Err(Errno::SRCH)),
        _ => false,
    }
}

/// Whether the process incarnation (pid, start time) still exists.
pub(crate) fn process_alive(pid: i32, start: u64) -> bool {
    if pid <= 0 {
        return false;
    }
    match proc_start_time(pid) {
        Some(t) => t == start,
        None => {
            // No /proc entry: the process is gone (or /proc is unavailable,
            // in which case fall back to signal 0).
            // Signal 0 only checks existence and permission.
            let signalable =
                rustix::process::Pid::from_raw(pid).is_some_and(|p| rustix::process::test_kill_process(p).is_ok());
            signalable && !std::path::Path::new("/proc/self").exists()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_in_epoll_signal_and_drain() {
        let ep = Epoll::new().unwrap();
        let e = EventFd::new().unwrap();
        ep.add(e.fd(), IN, 7).unwrap();
        // Adding again updates rather than failing (EEXIST → modify).
        ep.add(e.fd(), IN, 9).unwrap();
        let mut out = Vec::new();
        assert_eq!(ep.wait(&mut out, 8, Some(Duration::ZERO)).unwrap(), 0);
        assert!(!e.drain());
        e.signal();
        e.signal();
        assert_eq!(ep.wait(&mut out, 8, Some(Duration::from_secs(5))).unwrap(), 1);
        assert_eq!(out, vec![(9, IN)]);
        assert!(poll_readable(e.fd(), Some(Duration::ZERO)));
        assert!(e.drain(), "two signals, one drain");
        assert!(!poll_readable(e.fd(), Some(Duration::ZERO)));
        // An epoll set is itself pollable: readable while a member is.
        let outer = Epoll::new().unwrap();
        outer.add(ep.fd(), IN, 1).unwrap();
        e.signal();
        assert_eq!(outer.wait(&mut out, 1, Some(Duration::from_secs(5))).unwrap(), 1);
        assert_eq!(out, vec![(1, IN)]);
        ep.delete(e.fd());
        assert_eq!(ep.wait(&mut out, 8, Some(Duration::ZERO)).unwrap(), 0);
        // A number that is not a descriptor is refused, not trusted.
        assert!(ep.add(-1, IN, 0).is_err());
    }

    #[test]
    fn timeouts_round_up_to_whole_milliseconds() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_micros(1500))), 2);
        assert_eq!(timeout_ms(Some(Duration::from_secs(u64::MAX))), i32::MAX);
        let ts = timespec(Some(Duration::from_micros(2_000_001))).unwrap();
        assert_eq!((ts.tv_sec, ts.tv_nsec), (2, 1_000_000));
        assert!(timespec(None).is_none());
    }

    #[test]
    fn processes_and_random_numbers() {
        let me = getpid();
        assert!(me > 0);
        assert_eq!(me as u32, std::process::id());
        let start = proc_start_time(me).unwrap();
        assert!(process_alive(me, start));
        assert!(!process_alive(me, start + 1), "another incarnation of our pid");
        assert!(!process_alive(0, 0));
        assert!(!process_alive(-1, 0));
        assert!(pid_exists(me));
        assert!(!pid_exists(0));
        assert!(!pid_exists(0x7fff_fff0), "above any pid_max");
        let (a, b) = (random_u64().unwrap(), random_u64().unwrap());
        assert_ne!(a, b);
        assert!(a != 0 || b != 0);
    }
}
