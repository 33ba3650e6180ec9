//! The socket system calls of the TCP transport, each in a small safe
//! wrapper: non-blocking stream sockets, socket options, accept/connect,
//! addresses, a monotonic `timerfd` for deadlines (through rustix, on
//! `OwnedFd`/`BorrowedFd`: no descriptor is a raw integer that could be
//! closed twice), and, through libc, what rustix does not offer or what
//! must stay raw: the host's interface addresses (`getifaddrs`) and the
//! gather/scatter I/O (`sendmsg`, `readv`) whose iovecs point into
//! application memory.
//!
//! Raw iovecs are used for application memory on purpose: the transport
//! never forms a Rust reference to a buffer the application owns.

use crate::base::error::{Error, Result};
use rustix::io::Errno;
use rustix::net::{sockopt, AddressFamily, Shutdown, SocketFlags, SocketType};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

fn err(e: Errno) -> Error {
    Error::from(e)
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A new non-blocking, close-on-exec stream socket of `a`'s family.
pub(crate) fn stream_socket(a: &SocketAddr) -> Result<OwnedFd> {
    let family = if a.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(err)
}

/// Binds (as [`bound_socket`]) and listens.
pub(crate) fn listen(a: &SocketAddr, backlog: i32) -> Result<OwnedFd> {
    let s = bound_socket(a)?;
    start_listening(s.as_fd(), backlog)?;
    Ok(s)
}

/// A socket bound to `a` but not listening (a passive endpoint's address
/// after `fi_setname`, or an active endpoint's chosen source address), with
/// SO_REUSEADDR so that a restarted endpoint can take its port back while
/// old connections are in TIME_WAIT; IPv6 sockets are v6-only (an address
/// names one family).
pub(crate) fn bound_socket(a: &SocketAddr) -> Result<OwnedFd> {
    let s = stream_socket(a)?;
    sockopt::set_socket_reuseaddr(&s, true).map_err(err)?;
    if a.is_ipv6() {
        sockopt::set_ipv6_v6only(&s, true).map_err(err)?;
    }
    rustix::net::bind(&s, a).map_err(err)?;
    Ok(s)
}

/// A socket for a dial from `ip`: bound to it (IP_BIND_ADDRESS_NO_PORT:
/// the port is chosen at connect time, so dials from one address to many
/// peers do not use up the ephemeral ports), so that the connection's
/// source is the address the dialer advertises.
pub(crate) fn source_socket(ip: IpAddr) -> Result<OwnedFd> {
    let a = SocketAddr::new(ip, 0);
    let s = stream_socket(&a)?;
    if ip.is_ipv6() {
        sockopt::set_ipv6_v6only(&s, true).map_err(err)?;
    }
    let one: libc::c_int = 1;
    // SAFETY: a valid socket, an int option of the right size (failure only
    // costs the port reservation).
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            core::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    rustix::net::bind(&s, &a).map_err(err)?;
    Ok(s)
}

/// Turns a bound socket into a listener (again: a new backlog).
pub(crate) fn start_listening(fd: BorrowedFd<'_>, backlog: i32) -> Result<()> {
    rustix::net::listen(fd, backlog).map_err(err)
}

/// The address of a connected socket's peer.
pub(crate) fn peer_addr(fd: BorrowedFd<'_>) -> Result<SocketAddr> {
    let a = rustix::net::getpeername(fd).map_err(err)?.ok_or(Error::NOTCONN)?;
    SocketAddr::try_from(a).map_err(|_| Error::INVAL)
}

/// The address a socket is bound to.
pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> Result<SocketAddr> {
    let a = rustix::net::getsockname(fd).map_err(err)?;
    SocketAddr::try_from(a).map_err(|_| Error::INVAL)
}

/// Ends our direction of a connection (FIN after what is queued).
pub(crate) fn shutdown_write(fd: BorrowedFd<'_>) {
    // Errors (not connected) leave nothing to do.
    let _ = rustix::net::shutdown(fd, Shutdown::Write);
}

/// Accepts one connection (non-blocking, close-on-exec).
/// `Ok(None)`: nothing pending.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> Result<Option<OwnedFd>> {
    loop {
        match rustix::net::accept_with(fd, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC) {
            Ok(s) => return Ok(Some(s)),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(None),
            // The connection died in the backlog: try the next one.
            Err(Errno::CONNABORTED | Errno::PROTO) => continue,
            Err(e) => return Err(err(e)),
        }
    }
}

/// Starts a non-blocking connect. `Ok(true)`: connected at once;
/// `Ok(false)`: in progress (writable when done, then [`take_error`]).
pub(crate) fn connect(fd: BorrowedFd<'_>, a: &SocketAddr) -> Result<bool> {
    match rustix::net::connect(fd, a) {
        Ok(()) => Ok(true),
        Err(Errno::INPROGRESS | Errno::INTR) => Ok(false),
        Err(e) => Err(err(e)),
    }
}

/// Whether a connected socket is connected to itself: a dial to a local
/// port nobody listens on that the kernel gave that same port as its
/// source (TCP's simultaneous open then connects it to itself).
pub(crate) fn connected_to_itself(fd: BorrowedFd<'_>) -> bool {
    matches!((local_addr(fd), peer_addr(fd)), (Ok(l), Ok(p)) if l == p)
}

/// Makes the socket's close a reset (SO_LINGER 0): no TIME_WAIT is left
/// holding its port.
pub(crate) fn reset_on_close(fd: BorrowedFd<'_>) {
    // Failure only leaves the port in TIME_WAIT for a while.
    let _ = sockopt::set_socket_linger(fd, Some(std::time::Duration::ZERO));
}

/// The pending error of a socket (SO_ERROR), e.g. of a finished connect.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> Option<Error> {
    match sockopt::socket_error(fd) {
        Ok(Ok(())) => None,
        Ok(Err(e)) | Err(e) => Some(err(e)),
    }
}

/// What every data connection gets (see [`tune_connection`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tuning {
    /// Kernel send buffer: enough for full speed on a LAN, small enough that
    /// a stalled receiver pushes back on the sender's posts.
    pub(crate) sndbuf: usize,
    /// Idle time before keepalive probes (3 unanswered probes end it).
    pub(crate) keepalive: Duration,
    /// Unacknowledged data older than this ends the connection.
    pub(crate) user_timeout: Duration,
}

/// Options every data connection gets: no Nagle delay, a bounded send
/// buffer (backpressure reaches the sender instead of megabytes piling up
/// in the kernel), keepalive probes and a user timeout so that a dead or
/// unreachable peer is noticed in bounded time even when the link is idle.
pub(crate) fn tune_connection(fd: BorrowedFd<'_>, t: &Tuning) {
    let idle = Duration::from_secs(t.keepalive.as_secs().clamp(1, 3600));
    let interval = Duration::from_secs((idle.as_secs() / 3).max(1));
    // Failures are not fatal: the connection works without them.
    let _ = sockopt::set_tcp_nodelay(fd, true);
    let (wmem_max, auto_max) = kernel_send_limits();
    if let Some(n) = send_buffer_request(t.sndbuf, wmem_max, auto_max) {
        let _ = sockopt::set_socket_send_buffer_size(fd, n.min(i32::MAX as usize));
    }
    let _ = sockopt::set_socket_keepalive(fd, true);
    let _ = sockopt::set_tcp_keepidle(fd, idle);
    let _ = sockopt::set_tcp_keepintvl(fd, interval);
    let _ = sockopt::set_tcp_keepcnt(fd, 3);
    let _ = sockopt::set_tcp_user_timeout(fd, t.user_timeout.as_millis().min(i32::MAX as u128) as u32);
}

/// The `SO_SNDBUF` to ask for, if any. The kernel caps a request at
/// `net.core.wmem_max` (212,992 bytes on a stock kernel) and doubles it, and
/// a socket given one no longer autotunes (up to `net.ipv4.tcp_wmem`'s
/// maximum, 4 MiB by default). So: `want` capped at `wmem_max`, unless that
/// gives less than autotuning would reach — then None, and the connection
/// autotunes (bounded by that maximum, the administrator's). Either way
/// the kernel's buffer per connection is bounded.
pub(crate) fn send_buffer_request(want: usize, wmem_max: Option<usize>, auto_max: Option<usize>) -> Option<usize> {
    let granted = wmem_max.map_or(want, |m| want.min(m));
    match auto_max {
        Some(auto) if granted.saturating_mul(2) < auto => None,
        _ => Some(granted),
    }
}

/// `net.core.wmem_max` and the maximum of `net.ipv4.tcp_wmem`, read once
/// (None where /proc does not say).
fn kernel_send_limits() -> (Option<usize>, Option<usize>) {
    static LIMITS: std::sync::OnceLock<(Option<usize>, Option<usize>)> = std::sync::OnceLock::new();
    *LIMITS.get_or_init(|| {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let wmem_max = read("/proc/sys/net/core/wmem_max").and_then(|s| s.trim().parse().ok());
        let auto_max =
            read("/proc/sys/net/ipv4/tcp_wmem").and_then(|s| s.split_whitespace().nth(2).and_then(|x| x.parse().ok()));
        (wmem_max, auto_max)
    })
}

/// What a non-blocking transfer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Io {
    /// This many bytes (> 0).
    Done(usize),
    /// Nothing now (EAGAIN).
    Blocked,
    /// End of stream (reads only).
    Eof,
    Failed(Error),
}

/// Gathers `iov` onto the stream (`sendmsg` with `MSG_NOSIGNAL`: a closed
/// peer is an error, never a SIGPIPE in the application).
///
/// # Safety
/// Every iovec must describe readable memory.
pub(crate) unsafe fn send_iov(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> Io {
    if iov.is_empty() {
        return Io::Done(0);
    }
    // SAFETY: msghdr is plain data; all-zero means no name and no control.
    let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
    m.msg_iov = iov.as_ptr() as *mut libc::iovec;
    m.msg_iovlen = iov.len() as _;
    loop {
        // SAFETY: `m` describes the caller's iovecs (readable per contract);
        // `fd` is a live descriptor for the duration of the borrow.
        let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &m, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if r >= 0 {
            return Io::Done(r as usize);
        }
        match errno() {
            libc::EINTR => continue,
            libc::EAGAIN => return Io::Blocked,
            e => return Io::Failed(Error::from_errno(e)),
        }
    }
}

/// Scatters stream bytes from a stream socket into `iov`: one buffer is a
/// `recv`, several a `recvmsg`, both `MSG_DONTWAIT`. Either is cheaper than
/// `readv` on a socket (no file-position lock, no VFS permission and range
/// checks; one buffer also no iovec array to import), and a polling
/// transport's empty reads are most of its system calls.
///
/// # Safety
/// Every iovec must describe writable memory nobody else accesses meanwhile.
pub(crate) unsafe fn read_iov(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> Io {
    if iov.is_empty() {
        return Io::Done(0);
    }
    // SAFETY: msghdr is plain data; all-zero means no name and no control.
    let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
    m.msg_iov = iov.as_ptr() as *mut libc::iovec;
    m.msg_iovlen = iov.len() as _;
    loop {
        let r = if let [one] = iov {
            // SAFETY: the buffer is writable per contract; `fd` is live.
            unsafe { libc::recv(fd.as_raw_fd(), one.iov_base, one.iov_len, libc::MSG_DONTWAIT) }
        } else {
            // SAFETY: `m` describes the caller's iovecs (writable per
            // contract); `fd` is live.
            unsafe { libc::recvmsg(fd.as_raw_fd(), &mut m, libc::MSG_DONTWAIT) }
        };
        if r > 0 {
            return Io::Done(r as usize);
        }
        if r == 0 {
            return Io::Eof;
        }
        match errno() {
            libc::EINTR => continue,
            libc::EAGAIN => return Io::Blocked,
            e => return Io::Failed(Error::from_errno(e)),
        }
    }
}

/// Reads and drops what is pending on a socket (at most `max_reads` reads
/// of 4 KiB), so that closing it ends the connection with FIN, not RST
/// (the kernel resets a connection closed with unread data).
pub(crate) fn discard_input(fd: BorrowedFd<'_>, max_reads: usize) {
    let mut buf = [0u8; 4096];
    for _ in 0..max_reads {
        match rustix::io::read(fd, &mut buf) {
            Ok(n) if n > 0 => continue,
            Err(Errno::INTR) => continue,
            _ => break,
        }
    }
}

/// A monotonic timer descriptor (readable once it expires).
#[derive(Debug)]
pub(crate) struct TimerFd(OwnedFd);

impl TimerFd {
    pub(crate) fn new() -> Result<TimerFd> {
        use rustix::time::{TimerfdClockId, TimerfdFlags};
        rustix::time::timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map(TimerFd)
        .map_err(err)
    }

    /// Fires once after `after` (None: disarmed).
    pub(crate) fn set(&self, after: Option<Duration>) {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec};
        let d = after.map(|d| d.max(Duration::from_micros(1))).unwrap_or(Duration::ZERO);
        let spec = Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
                tv_nsec: d.subsec_nanos() as _,
            },
        };
        let _ = rustix::time::timerfd_settime(&self.0, TimerfdTimerFlags::empty(), &spec);
    }

    /// Clears the expired state.
    pub(crate) fn drain(&self) {
        let mut v = [0u8; 8];
        let _ = rustix::io::read(&self.0, &mut v);
    }

    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

/// The local address the kernel would send from to reach `dest` (a UDP
/// socket connected to it: no packet leaves), `None` without a route.
pub(crate) fn route_source(dest: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = match dest {
        IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    // Any port: connecting a UDP socket only picks the route.
    s.connect(SocketAddr::new(dest, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// Whether `ip` belongs to this host: loopback, unspecified (this host's
/// "any"), or an address a socket can be bound to here. The one answer to
/// "is this peer on my host?" (the auto transport, fi_getinfo's locality
/// rule, a connected endpoint's shm offer).
pub(crate) fn ip_is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// One address of a network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IfAddr {
    pub(crate) name: String,
    /// Administratively up (`IFF_UP`).
    pub(crate) up: bool,
    /// The link carries traffic: operationally up (`IFF_RUNNING`: operstate
    /// "up" or "unknown") with carrier (`IFF_LOWER_UP`). False for a link
    /// that is down, dormant or NO-CARRIER, such as a bridge none of whose
    /// ports is up.
    pub(crate) carrier: bool,
    pub(crate) loopback: bool,
    /// A bridge device (`/sys/class/net/NAME/bridge` exists): its address is
    /// usually a host-only network (docker0, virbr0).
    pub(crate) bridge: bool,
    pub(crate) ip: IpAddr,
}

/// Whether the interface `name` is a bridge device.
fn is_bridge(name: &str) -> bool {
    // Kernel interface names never hold '/'; refuse anything that would
    // leave /sys/class/net.
    !name.is_empty()
        && !name.contains('/')
        && name != "."
        && name != ".."
        && std::path::Path::new("/sys/class/net")
            .join(name)
            .join("bridge")
            .exists()
}

/// The host's interface addresses, in the kernel's order.
pub(crate) fn interfaces() -> Vec<IfAddr> {
    let mut head: *mut libc::ifaddrs = core::ptr::null_mut();
    // SAFETY: `head` is a valid out pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is an element of the list getifaddrs returned,
        // which is not freed yet.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: `ifa_addr` points to a socket address of its family's
        // size (the kernel fills each entry for its family); the decoder
        // reads the family first and then only an inet/inet6 address.
        let len = match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
            libc::AF_INET => core::mem::size_of::<libc::sockaddr_in>(),
            libc::AF_INET6 => core::mem::size_of::<libc::sockaddr_in6>(),
            _ => continue,
        };
        // SAFETY: as above: `len` bytes of the family's address.
        let Some(sa) = (unsafe { super::resolve::socket_addr_from_raw(ifa.ifa_addr, len) }) else {
            continue;
        };
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let flags = ifa.ifa_flags as libc::c_int;
        let bridge = is_bridge(&name);
        out.push(IfAddr {
            name,
            up: flags & libc::IFF_UP != 0,
            carrier: flags & libc::IFF_RUNNING != 0 && flags & libc::IFF_LOWER_UP != 0,
            loopback: flags & libc::IFF_LOOPBACK != 0,
            bridge,
            ip: sa.ip(),
        });
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_wildcard_are_local() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(ip_is_local(ip("127.0.0.1")));
        assert!(ip_is_local(ip("0.0.0.0")));
        assert!(ip_is_local(ip("::1")));
        // TEST-NET-1 (RFC 5737), .1: not an address of this host.
        assert!(!ip_is_local(ip("192.0.2.1")));
    }

    /// Loopback is listed up, with carrier and not a bridge; a name that
    /// would leave /sys/class/net is never a bridge.
    #[test]
    fn interfaces_report_carrier_and_bridges() {
        let ifs = interfaces();
        if let Some(lo) = ifs.iter().find(|a| a.loopback) {
            assert!(lo.up && lo.carrier && !lo.bridge, "{lo:?}");
        }
        assert!(!is_bridge(""));
        assert!(!is_bridge(".."));
        assert!(!is_bridge("../net/lo"));
    }

    /// The send buffer asked for: capped at `wmem_max`, and none (autotuning)
    /// where the cap would leave less than autotuning reaches (a stock
    /// kernel's 212,992-byte `wmem_max` against its 4 MiB `tcp_wmem`).
    #[test]
    fn send_buffer_never_asks_for_less_than_autotuning() {
        let req = send_buffer_request;
        const M: usize = 1 << 20;
        assert_eq!(req(4 * M, Some(4 * M), Some(4 * M)), Some(4 * M));
        assert_eq!(req(4 * M, Some(212_992), Some(4 * M)), None, "stock kernel: autotune");
        assert_eq!(
            req(4 * M, Some(2 * M), Some(4 * M)),
            Some(2 * M),
            "2 MiB asked, 4 MiB granted"
        );
        assert_eq!(req(4 * M, Some(16 * M), Some(6 * M)), Some(4 * M));
        assert_eq!(req(4 * M, None, None), Some(4 * M), "no /proc: ask");
        assert_eq!(req(4 * M, Some(1 << 16), None), Some(1 << 16));
    }

    /// The wrappers over rustix behave as the transport relies on: a
    /// refused connect reports through SO_ERROR, accept is non-blocking,
    /// names decode to std addresses, and a timer fires once.
    #[test]
    fn sockets_and_timer_behave() {
        let l = listen(&"127.0.0.1:0".parse().unwrap(), 4).unwrap();
        let at = local_addr(l.as_fd()).unwrap();
        assert!(at.ip().is_loopback() && at.port() != 0);
        assert_eq!(accept(l.as_fd()).unwrap().map(|_| ()), None, "nothing pending");
        let c = stream_socket(&at).unwrap();
        let _ = connect(c.as_fd(), &at).unwrap();
        let mut s = None;
        for _ in 0..1000 {
            s = accept(l.as_fd()).unwrap();
            if s.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let s = s.expect("accepted");
        assert_eq!(peer_addr(s.as_fd()).unwrap(), local_addr(c.as_fd()).unwrap());
        assert_eq!(take_error(c.as_fd()), None);
        tune_connection(
            s.as_fd(),
            &Tuning {
                sndbuf: 1 << 16,
                keepalive: Duration::from_secs(5),
                user_timeout: Duration::from_secs(15),
            },
        );
        assert!(sockopt::tcp_nodelay(&s).unwrap());
        assert_eq!(sockopt::tcp_user_timeout(&s).unwrap(), 15_000);
        // A closed port: the connect fails (at once on loopback, or later
        // through SO_ERROR).
        let dead = local_addr(bound_socket(&"127.0.0.1:0".parse().unwrap()).unwrap().as_fd()).unwrap();
        let d = stream_socket(&dead).unwrap();
        match connect(d.as_fd(), &dead) {
            Err(e) => assert_eq!(e, Error::CONNREFUSED),
            Ok(_) => {
                std::thread::sleep(Duration::from_millis(50));
                assert_eq!(take_error(d.as_fd()), Some(Error::CONNREFUSED));
            }
        }
        let t = TimerFd::new().unwrap();
        t.set(Some(Duration::from_millis(1)));
        assert!(crate::sys::poll_readable(t.fd(), Some(Duration::from_secs(5))));
        t.drain();
        assert!(!crate::sys::poll_readable(t.fd(), Some(Duration::ZERO)));
    }
}
