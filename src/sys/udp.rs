//! The UDP sockets of datagram (`FI_EP_DGRAM`) endpoints on the tcp domain
//! (`transport/udp/`): a bound non-blocking socket, one datagram sent to an
//! address, one received with its source and its true length.

use crate::base::error::{Error, Result};
use rustix::io::Errno;
use rustix::net::{sockopt, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, OwnedFd};

/// Bytes asked for each of the socket's kernel buffers: room for a burst
/// of full datagrams before the kernel drops (it clamps the request to
/// `net.core.rmem_max`/`wmem_max`; a smaller buffer only drops sooner).
const SOCKET_BUFFER: usize = 4 << 20;

/// A non-blocking, close-on-exec UDP socket bound to `a` (port 0: the
/// kernel picks one); IPv6 sockets are v6-only (an address names one
/// family).
pub(crate) fn udp_socket(a: &SocketAddr) -> Result<OwnedFd> {
    let family = if a.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let s = rustix::net::socket_with(
        family,
        SocketType::DGRAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(Error::from)?;
    if a.is_ipv6() {
        sockopt::set_ipv6_v6only(&s, true).map_err(Error::from)?;
    }
    // Best effort: the default buffers work, only with fewer datagrams in
    // flight.
    let _ = sockopt::set_socket_recv_buffer_size(&s, SOCKET_BUFFER);
    let _ = sockopt::set_socket_send_buffer_size(&s, SOCKET_BUFFER);
    rustix::net::bind(&s, a).map_err(Error::from)?;
    Ok(s)
}

/// The address a socket is bound to.
pub(crate) fn udp_local_addr(fd: BorrowedFd<'_>) -> Result<SocketAddr> {
    let a = rustix::net::getsockname(fd).map_err(Error::from)?;
    SocketAddr::try_from(a).map_err(|_| Error::INVAL)
}

/// Sends `buf` as one datagram to `to`. `Err(AGAIN)`: the socket's buffer
/// is full now; any other error is the kernel's for this datagram (no
/// route, a message too long for the path).
pub(crate) fn udp_send_to(fd: BorrowedFd<'_>, buf: &[u8], to: &SocketAddr) -> Result<()> {
    loop {
        match rustix::net::sendto(fd, buf, SendFlags::NOSIGNAL, to) {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Err(Error::AGAIN),
            Err(e) => return Err(Error::from(e)),
        }
    }
}

/// One received datagram: its true length (more than the buffer when it
/// was cut short) and its source.
pub(crate) struct Received {
    pub(crate) len: usize,
    pub(crate) from: Option<SocketAddr>,
}

/// Receives one datagram into `buf`; `Ok(None)` when none is waiting.
/// Errors the kernel queues on the socket (an ICMP answer to an earlier
/// send) are returned once and then cleared.
pub(crate) fn udp_recv_from(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<Option<Received>> {
    loop {
        match rustix::net::recvfrom(fd, &mut *buf, RecvFlags::TRUNC) {
            Ok((_, len, from)) => {
                let from = from.and_then(|a| SocketAddr::try_from(a).ok());
                return Ok(Some(Received { len, from }));
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(None),
            Err(e) => return Err(Error::from(e)),
        }
    }
}
