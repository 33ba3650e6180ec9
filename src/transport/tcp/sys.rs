//! The socket system calls of the TCP transport, each in a small safe
//! wrapper: non-blocking stream sockets, `sendmsg` (gather, `MSG_NOSIGNAL`),
//! `readv` (scatter), socket options, a monotonic `timerfd` for deadlines,
//! and the host's interface addresses (`getifaddrs`).
//!
//! Raw iovecs are used for application memory on purpose: the transport
//! never forms a Rust reference to a buffer the application owns.

use crate::base::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn cvt(r: libc::c_int) -> Result<libc::c_int> {
    if r < 0 {
        Err(Error::last_os())
    } else {
        Ok(r)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A socket address in C form.
pub struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    pub fn from(a: &SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for
                // sockaddr_in.
                unsafe { core::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                core::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { core::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                core::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn ptr(&self) -> *const libc::sockaddr {
        &self.storage as *const _ as *const libc::sockaddr
    }

    /// Decodes an address the kernel filled in.
    fn to_socket_addr(&self) -> Option<SocketAddr> {
        match self.storage.ss_family as i32 {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let sin = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let s = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in6) };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    u32::from_be(s.sin6_flowinfo),
                    s.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn family(a: &SocketAddr) -> libc::c_int {
    if a.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// A new non-blocking, close-on-exec stream socket of `a`'s family.
pub fn stream_socket(a: &SocketAddr) -> Result<OwnedFd> {
    // SAFETY: socket creation has no memory preconditions; the fd is checked.
    let fd = cvt(unsafe {
        libc::socket(
            family(a),
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            core::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Binds (as [`bound_socket`]) and listens.
pub fn listen(a: &SocketAddr, backlog: i32) -> Result<OwnedFd> {
    let s = bound_socket(a)?;
    start_listening(s.as_raw_fd(), backlog)?;
    Ok(s)
}

/// A socket bound to `a` but not listening (a passive endpoint's address
/// after `fi_setname`, or an active endpoint's chosen source address), with
/// SO_REUSEADDR so that a restarted endpoint can take its port back while
/// old connections are in TIME_WAIT; IPv6 sockets are v6-only (an address
/// names one family).
pub fn bound_socket(a: &SocketAddr) -> Result<OwnedFd> {
    let s = stream_socket(a)?;
    let fd = s.as_raw_fd();
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if a.is_ipv6() {
        setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    let ra = RawAddr::from(a);
    // SAFETY: `ra` holds a valid sockaddr of `ra.len` bytes.
    cvt(unsafe { libc::bind(fd, ra.ptr(), ra.len) })?;
    Ok(s)
}

/// Turns a bound socket into a listener (again: a new backlog).
pub fn start_listening(fd: RawFd, backlog: i32) -> Result<()> {
    // SAFETY: plain call on the caller's socket.
    cvt(unsafe { libc::listen(fd, backlog) }).map(|_| ())
}

/// The address of a connected socket's peer.
pub fn peer_addr(fd: RawFd) -> Result<SocketAddr> {
    // SAFETY: zeroed storage is valid; getpeername writes at most `len` bytes.
    let mut ra = RawAddr {
        storage: unsafe { core::mem::zeroed() },
        len: core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
    };
    // SAFETY: `storage` has `len` writable bytes.
    cvt(unsafe { libc::getpeername(fd, &mut ra.storage as *mut _ as *mut libc::sockaddr, &mut ra.len) })?;
    ra.to_socket_addr().ok_or(Error::INVAL)
}

/// Ends our direction of a connection (FIN after what is queued).
pub fn shutdown_write(fd: RawFd) {
    // SAFETY: plain call on the caller's socket; errors (not connected)
    // leave nothing to do.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// The address a socket is bound to.
pub fn local_addr(fd: RawFd) -> Result<SocketAddr> {
    // SAFETY: zeroed storage is valid; getsockname writes at most `len` bytes.
    let mut ra = RawAddr {
        storage: unsafe { core::mem::zeroed() },
        len: core::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
    };
    // SAFETY: `storage` has `len` writable bytes.
    cvt(unsafe { libc::getsockname(fd, &mut ra.storage as *mut _ as *mut libc::sockaddr, &mut ra.len) })?;
    ra.to_socket_addr().ok_or(Error::INVAL)
}

/// Accepts one connection (non-blocking, close-on-exec).
/// `Ok(None)`: nothing pending.
pub fn accept(fd: RawFd) -> Result<Option<OwnedFd>> {
    loop {
        // SAFETY: NULL address arguments are allowed; the fd is checked.
        let r = unsafe {
            libc::accept4(
                fd,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if r >= 0 {
            // SAFETY: a fresh descriptor we own.
            return Ok(Some(unsafe { OwnedFd::from_raw_fd(r) }));
        }
        match errno() {
            libc::EINTR => continue,
            libc::EAGAIN => return Ok(None),
            // The connection died in the backlog: try the next one.
            libc::ECONNABORTED | libc::EPROTO => continue,
            e => return Err(Error::from_errno(e)),
        }
    }
}

/// Starts a non-blocking connect. `Ok(true)`: connected at once;
/// `Ok(false)`: in progress (writable when done, then [`take_error`]).
pub fn connect(fd: RawFd, a: &SocketAddr) -> Result<bool> {
    let ra = RawAddr::from(a);
    // SAFETY: `ra` holds a valid sockaddr of `ra.len` bytes.
    let r = unsafe { libc::connect(fd, ra.ptr(), ra.len) };
    if r == 0 {
        return Ok(true);
    }
    match errno() {
        libc::EINPROGRESS | libc::EINTR => Ok(false),
        e => Err(Error::from_errno(e)),
    }
}

/// The pending error of a socket (SO_ERROR), e.g. of a finished connect.
pub fn take_error(fd: RawFd) -> Option<Error> {
    let mut v: libc::c_int = 0;
    let mut len = core::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live and sized for SO_ERROR.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Some(Error::last_os());
    }
    (v != 0).then(|| Error::from_errno(v))
}

/// Options every data connection gets: no Nagle delay, a bounded send
/// buffer (backpressure reaches the sender instead of megabytes piling up
/// in the kernel), keepalive probes and a user timeout so that a dead or
/// unreachable peer is noticed in bounded time even when the link is idle.
pub fn tune_connection(fd: RawFd, sndbuf: usize, keepalive: Duration, user_timeout: Duration) {
    let secs = keepalive.as_secs().clamp(1, 3600) as libc::c_int;
    // Failures are not fatal: the connection works without them.
    let _ = setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    let _ = setsockopt_int(
        fd,
        libc::SOL_SOCKET,
        libc::SO_SNDBUF,
        sndbuf.min(i32::MAX as usize) as libc::c_int,
    );
    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    let _ = setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs);
    let _ = setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, (secs / 3).max(1));
    let _ = setsockopt_int(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
    let _ = setsockopt_int(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        user_timeout.as_millis().min(i32::MAX as u128) as libc::c_int,
    );
}

/// What a non-blocking transfer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Io {
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
pub unsafe fn send_iov(fd: RawFd, iov: &[libc::iovec]) -> Io {
    if iov.is_empty() {
        return Io::Done(0);
    }
    // SAFETY: msghdr is plain data; all-zero means no name and no control.
    let mut m: libc::msghdr = unsafe { core::mem::zeroed() };
    m.msg_iov = iov.as_ptr() as *mut libc::iovec;
    m.msg_iovlen = iov.len() as _;
    loop {
        // SAFETY: `m` describes the caller's iovecs (readable per contract).
        let r = unsafe { libc::sendmsg(fd, &m, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
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

/// Scatters stream bytes into `iov`.
///
/// # Safety
/// Every iovec must describe writable memory nobody else accesses meanwhile.
pub unsafe fn read_iov(fd: RawFd, iov: &[libc::iovec]) -> Io {
    if iov.is_empty() {
        return Io::Done(0);
    }
    loop {
        // SAFETY: the iovecs are writable per contract.
        let r = unsafe { libc::readv(fd, iov.as_ptr(), iov.len() as libc::c_int) };
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

/// A monotonic timer descriptor (readable once it expires).
pub struct TimerFd(OwnedFd);

impl TimerFd {
    pub fn new() -> Result<TimerFd> {
        // SAFETY: no memory preconditions; the fd is checked.
        let fd = cvt(unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) })?;
        // SAFETY: a fresh descriptor we own.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Fires once after `after` (None: disarmed).
    pub fn set(&self, after: Option<Duration>) {
        let d = after.map(|d| d.max(Duration::from_micros(1))).unwrap_or(Duration::ZERO);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is valid; the old value is not wanted (NULL).
        unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, core::ptr::null_mut()) };
    }

    /// Clears the expired state.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; non-blocking.
        unsafe { libc::read(self.0.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }

    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// One address of a network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    pub name: String,
    pub up: bool,
    pub loopback: bool,
    pub ip: IpAddr,
}

/// The host's interface addresses, in the kernel's order.
pub fn interfaces() -> Vec<IfAddr> {
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
        // SAFETY: `ifa_addr` points to a sockaddr whose family field is
        // valid; the family tells the real type, read below.
        let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let ip = match fam {
            libc::AF_INET => {
                // SAFETY: family AF_INET: a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()))
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6: a sockaddr_in6.
                let s = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::V6(Ipv6Addr::from(s.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let flags = ifa.ifa_flags as libc::c_int;
        out.push(IfAddr {
            name,
            up: flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0,
            loopback: flags & libc::IFF_LOOPBACK != 0,
            ip,
        });
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}
