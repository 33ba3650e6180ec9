//! The shm transport's doorbell (docs/shm.md, "Waking a sleeper"): each
//! endpoint binds a unix datagram socket in the abstract namespace and
//! sleeps in epoll on it; a sender that sees the owner asleep sends it one
//! byte. Datagrams carry no data that matters: a socket with something
//! queued is simply readable.

use crate::base::error::Result;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// A doorbell's address: an abstract-namespace unix name (no file; it
/// disappears with the socket).
#[derive(Clone, Debug)]
pub struct DoorbellAddr(SocketAddrUnix);

impl DoorbellAddr {
    /// The abstract name `name` (without the leading NUL the kernel uses to
    /// tell abstract names from paths).
    pub fn new(name: &[u8]) -> Result<DoorbellAddr> {
        Ok(DoorbellAddr(SocketAddrUnix::new_abstract_name(name)?))
    }
}

fn dgram_socket() -> Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::DGRAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The receiving end, bound to its address; readable while rung.
#[derive(Debug)]
pub struct Doorbell(OwnedFd);

impl Doorbell {
    /// Binds a non-blocking socket to `addr`; fails (`ADDRINUSE`) if someone
    /// holds that name already.
    pub fn bind(addr: &DoorbellAddr) -> Result<Doorbell> {
        let fd = dgram_socket()?;
        rustix::net::bind(&fd, &addr.0)?;
        Ok(Doorbell(fd))
    }

    /// The descriptor to wait on (readable while a ring is queued).
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Takes every queued ring; returns how many there were. Never blocks.
    pub fn drain(&self) -> usize {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while let Ok((got, _)) = rustix::net::recv(&self.0, &mut buf[..], RecvFlags::DONTWAIT) {
            if got == 0 {
                break;
            }
            n += 1;
        }
        n
    }
}

/// An unbound datagram socket that rings other endpoints' doorbells.
#[derive(Debug)]
pub struct Ringer(OwnedFd);

impl Ringer {
    pub fn new() -> Result<Ringer> {
        Ok(Ringer(dgram_socket()?))
    }

    /// Sends one byte to `to`, never blocking. Returns whether it was
    /// queued; failure needs no handling by callers: a full queue already
    /// means "readable", and no listener means nobody to wake.
    pub fn ring(&self, to: &DoorbellAddr) -> bool {
        rustix::net::sendto(&self.0, &[1u8], SendFlags::DONTWAIT, &to.0).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Error;
    use std::time::Duration;

    fn addr() -> DoorbellAddr {
        let r = crate::sys::random_u64().unwrap_or(7);
        DoorbellAddr::new(format!("rustfab-systest-{r:016x}").as_bytes()).unwrap()
    }

    #[test]
    fn ring_makes_readable_and_drain_clears() {
        let a = addr();
        let bell = Doorbell::bind(&a).unwrap();
        let ringer = Ringer::new().unwrap();
        assert!(!crate::sys::poll_readable(bell.fd(), Some(Duration::ZERO)));
        assert_eq!(bell.drain(), 0);
        assert!(ringer.ring(&a));
        assert!(ringer.ring(&a));
        assert!(crate::sys::poll_readable(bell.fd(), Some(Duration::from_secs(5))));
        assert_eq!(bell.drain(), 2);
        assert!(!crate::sys::poll_readable(bell.fd(), Some(Duration::ZERO)));
    }

    #[test]
    fn one_owner_per_name_and_nobody_listening() {
        let a = addr();
        let bell = Doorbell::bind(&a).unwrap();
        assert_eq!(Doorbell::bind(&a).err(), Some(Error::ADDRINUSE));
        drop(bell);
        // The name went with the socket: ringing it fails quietly, and it
        // can be bound again.
        assert!(!Ringer::new().unwrap().ring(&a));
        let _again = Doorbell::bind(&a).unwrap();
    }
}
