//! The shm transport's doorbell (docs/shm.md, "Waking a sleeper"): each
//! endpoint binds a unix datagram socket and sleeps in epoll on it; a sender
//! that sees the owner asleep sends it one byte, and a sender that claims a
//! slot in the owner's segment sends it a short "who I am" datagram.
//!
//! Security (docs/security.md, "Shared memory"): the socket is a file in a
//! private directory (`/dev/shm/rustfab-<uid>/`, mode 0700, owned by us:
//! other users can neither reach it nor take its name), and it receives
//! with `SO_PASSCRED`, so every datagram comes with the sender's pid and uid
//! as the kernel knows them; the owner drops datagrams of other uids and
//! believes a sender's pid only from these credentials.

use crate::base::error::{Error, Result};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SendFlags, SocketAddrUnix, SocketFlags, SocketType};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// Makes sure `dir` is a directory of ours that nobody else may enter:
/// created 0700 if missing; an existing one must be a real directory (not a
/// symlink), owned by our euid, with no group/other permission bits.
/// Anything else is refused (`Err(ACCES)`), never repaired or followed.
pub(crate) fn private_dir(dir: &Path) -> Result<()> {
    match rustix::fs::mkdir(dir, Mode::RWXU) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| Error::ACCES)?;
    let st = rustix::fs::fstat(&fd)?;
    let ours = st.st_uid == rustix::process::geteuid().as_raw() && st.st_mode & 0o077 == 0;
    if !ours {
        return Err(Error::ACCES);
    }
    Ok(())
}

/// Removes a file (a doorbell left by a process that was killed).
pub(crate) fn remove(path: &Path) -> bool {
    rustix::fs::unlink(path).is_ok()
}

/// The names in the doorbells' directory `dir` (none if it cannot be read).
pub(crate) fn names_in(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// A doorbell's address: the path of its socket file.
#[derive(Clone, Debug)]
pub(crate) struct DoorbellAddr(SocketAddrUnix);

impl DoorbellAddr {
    /// The socket file `path` (at most 107 bytes).
    pub(crate) fn new(path: &Path) -> Result<DoorbellAddr> {
        Ok(DoorbellAddr(SocketAddrUnix::new(path)?))
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

/// Who sent a datagram, as the kernel says (`SCM_CREDENTIALS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cred {
    pub pid: i32,
    pub uid: u32,
}

/// The receiving end, bound to its socket file (removed when dropped);
/// readable while rung.
#[derive(Debug)]
pub(crate) struct Doorbell {
    fd: OwnedFd,
    path: PathBuf,
}

impl Doorbell {
    /// Binds a non-blocking socket to the file `path`, which must not exist
    /// (`ADDRINUSE`: the caller removes a dead owner's file first), and asks
    /// for every datagram's credentials.
    pub(crate) fn bind(path: &Path) -> Result<Doorbell> {
        let addr = DoorbellAddr::new(path)?;
        let fd = dgram_socket()?;
        rustix::net::sockopt::set_socket_passcred(&fd, true)?;
        rustix::net::bind(&fd, &addr.0)?;
        Ok(Doorbell {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The descriptor to wait on (readable while a datagram is queued).
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Takes every queued datagram, never blocking: `f` gets the sender's
    /// credentials and the bytes (at most 64) of each; a datagram that came
    /// without credentials is dropped unseen. Returns how many there were.
    pub(crate) fn drain(&self, f: &mut dyn FnMut(Cred, &[u8])) -> usize {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while let Some((got, cred)) = self.recv_one(&mut buf) {
            n += 1;
            if let Some(c) = cred {
                f(c, &buf[..got.min(buf.len())]);
            }
        }
        n
    }

    /// One datagram and its credentials (`recvmsg` by hand: rustix reads
    /// them into a type whose pid may not be 0, which the kernel reports for
    /// a sender outside our pid namespace). None: nothing queued.
    fn recv_one(&self, buf: &mut [u8]) -> Option<(usize, Option<Cred>)> {
        // u64 words: the control buffer must be aligned for cmsghdr.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: an all-zero msghdr is valid (no name, no buffers).
        let mut msg: libc::msghdr = unsafe { core::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = core::mem::size_of_val(&control);
        // SAFETY: `msg` points at `iov` (into `buf`) and `control`, both
        // live and writable for the call; the descriptor is ours.
        let got = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if got < 0 {
            return None;
        }
        let mut cred = None;
        // SAFETY: the CMSG_* macros walk the control buffer the kernel
        // filled (msg_controllen bytes of `control`); a ucred payload is
        // read unaligned as three plain integers.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let want = libc::CMSG_LEN(core::mem::size_of::<libc::ucred>() as u32) as usize;
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_CREDENTIALS
                    && (*c).cmsg_len as usize >= want
                {
                    let u = libc::CMSG_DATA(c).cast::<libc::ucred>().read_unaligned();
                    cred = Some(Cred { pid: u.pid, uid: u.uid });
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Some((got as usize, cred))
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // The name goes with the endpoint (a killed owner's is removed by
        // the next owner of the address, or by the sweep of dead segments).
        remove(&self.path);
    }
}

/// An unbound datagram socket that rings other endpoints' doorbells.
#[derive(Debug)]
pub(crate) struct Ringer(OwnedFd);

impl Ringer {
    pub(crate) fn new() -> Result<Ringer> {
        Ok(Ringer(dgram_socket()?))
    }

    /// Sends one byte to `to`, never blocking. Returns whether it was
    /// queued; failure needs no handling by callers: a full queue already
    /// means "readable", and no listener means nobody to wake.
    pub(crate) fn ring(&self, to: &DoorbellAddr) -> bool {
        self.send(to, &[1u8]).is_ok()
    }

    /// Sends `bytes` as one datagram to `to`, never blocking
    /// (`Err(AGAIN)`: the owner's queue is full now).
    pub(crate) fn send(&self, to: &DoorbellAddr, bytes: &[u8]) -> Result<()> {
        rustix::net::sendto(&self.0, bytes, SendFlags::DONTWAIT, &to.0)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn dir() -> PathBuf {
        let d = PathBuf::from(format!("/dev/shm/rustfab-{}", crate::sys::geteuid()));
        private_dir(&d).unwrap();
        d
    }

    fn path() -> PathBuf {
        let r = crate::sys::random_u64().unwrap_or(7);
        dir().join(format!("systest-{r:016x}"))
    }

    #[test]
    fn ring_makes_readable_drain_clears_and_names_the_sender() {
        let p = path();
        let bell = Doorbell::bind(&p).unwrap();
        let a = DoorbellAddr::new(&p).unwrap();
        let ringer = Ringer::new().unwrap();
        assert!(!crate::sys::poll_readable(bell.fd(), Some(Duration::ZERO)));
        assert_eq!(bell.drain(&mut |_, _| panic!("nothing queued")), 0);
        assert!(ringer.ring(&a));
        ringer.send(&a, b"hello").unwrap();
        assert!(crate::sys::poll_readable(bell.fd(), Some(Duration::from_secs(5))));
        let mut seen = Vec::new();
        assert_eq!(bell.drain(&mut |c, b| seen.push((c, b.to_vec()))), 2);
        let me = Cred {
            pid: crate::sys::getpid(),
            uid: crate::sys::geteuid(),
        };
        assert_eq!(seen, vec![(me, vec![1u8]), (me, b"hello".to_vec())]);
        assert!(!crate::sys::poll_readable(bell.fd(), Some(Duration::ZERO)));
    }

    #[test]
    fn one_owner_per_name_file_removed_with_the_socket() {
        let p = path();
        let bell = Doorbell::bind(&p).unwrap();
        assert_eq!(Doorbell::bind(&p).err(), Some(Error::ADDRINUSE));
        assert!(p.exists());
        drop(bell);
        assert!(!p.exists(), "socket file removed on drop");
        // Nobody listening: ringing fails quietly; the name can be bound again.
        assert!(!Ringer::new().unwrap().ring(&DoorbellAddr::new(&p).unwrap()));
        let _again = Doorbell::bind(&p).unwrap();
    }

    #[test]
    fn private_dir_refuses_what_is_not_ours_alone() {
        let base = dir();
        let r = crate::sys::random_u64().unwrap_or(9);
        let d = base.join(format!("systest-dir-{r:016x}"));
        private_dir(&d).unwrap();
        let md = std::fs::metadata(&d).unwrap();
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        assert_eq!(md.mode() & 0o777, 0o700);
        private_dir(&d).unwrap();
        // Opened up to the group: refused, not repaired.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o750)).unwrap();
        assert_eq!(private_dir(&d).err(), Some(Error::ACCES));
        // A symlink to a private directory is not followed.
        let l = base.join(format!("systest-link-{r:016x}"));
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&d, &l).unwrap();
        assert_eq!(private_dir(&l).err(), Some(Error::ACCES));
        std::fs::remove_file(&l).unwrap();
        std::fs::remove_dir(&d).unwrap();
    }
}
