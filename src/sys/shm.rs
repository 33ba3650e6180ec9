//! POSIX shared-memory objects and shared mappings, for the shm transport's
//! segments (docs/shm.md): create one exclusively and privately, open,
//! inspect, map, list and unlink them. Names are shm names (`/name`, as for
//! `shm_open`); the transport decides what they are and what to check.

use crate::base::error::{Error, Result};
use core::ptr::NonNull;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::shm;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, OwnedFd};

/// Where Linux keeps the shm namespace (what `shm_open` opens under).
const SHM_DIR: &str = "/dev/shm";

/// The page size segments are laid out in (x86-64's). Not asked of the
/// system: rustix's `page_size` reads the auxiliary vector, which valgrind
/// does not map where rustix looks (an invalid read, then a crash, under
/// `make memcheck`). Where pages are larger, `madvise` of a range aligned
/// to this fails and the callers fall back (`SharedMap::discard`,
/// `populate`).
pub(crate) const PAGE: usize = 4096;

/// glibc's `shm_open` adds `O_NOFOLLOW` (a symlink planted under the shm
/// directory is never followed) and `O_CLOEXEC`; rustix's, which opens the
/// file itself, adds only `O_CLOEXEC`, so the first is asked for here.
fn flags(f: shm::OFlags) -> shm::OFlags {
    f | shm::OFlags::from_bits_retain(OFlags::NOFOLLOW.bits())
}

/// How [`open`] opens an existing object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    ReadOnly,
    ReadWrite,
}

/// Creates the object `name` of `len` bytes, read-write, mode 0600
/// (`O_CREAT|O_EXCL`: never an existing one). `Err(ADDRINUSE)` if the name
/// exists; on any later failure the new name is removed again, so an error
/// leaves nothing behind.
pub(crate) fn create(name: &CStr, len: usize) -> Result<OwnedFd> {
    let fd = match shm::open(
        name,
        flags(shm::OFlags::CREATE | shm::OFlags::EXCL | shm::OFlags::RDWR),
        Mode::RUSR | Mode::WUSR,
    ) {
        Ok(fd) => fd,
        Err(Errno::EXIST) => return Err(Error::ADDRINUSE),
        Err(e) => return Err(e.into()),
    };
    if let Err(e) = rustix::fs::ftruncate(&fd, len as u64) {
        unlink(name);
        return Err(e.into());
    }
    Ok(fd)
}

/// Opens the existing object `name` (nothing is created).
pub(crate) fn open(name: &CStr, access: Access) -> Result<OwnedFd> {
    let mode = match access {
        Access::ReadOnly => shm::OFlags::RDONLY,
        Access::ReadWrite => shm::OFlags::RDWR,
    };
    Ok(shm::open(name, flags(mode), Mode::empty())?)
}

/// Removes the name `name` (mappings and open descriptors stay valid).
/// Returns whether a name was removed.
pub(crate) fn unlink(name: &CStr) -> bool {
    shm::unlink(name).is_ok()
}

/// What an opener checks about an object before trusting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub uid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    /// Last status change, seconds since the epoch.
    pub ctime: i64,
}

/// `fstat` of an open object.
pub(crate) fn meta(fd: impl AsFd) -> Result<Meta> {
    let st = rustix::fs::fstat(fd)?;
    Ok(Meta {
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        size: st.st_size as u64,
        ctime: st.st_ctime,
    })
}

/// Bytes free in the shm namespace's file system (`statvfs` of /dev/shm:
/// blocks available to us times the fragment size); 0 if it cannot be
/// read.
pub(crate) fn free_bytes() -> u64 {
    rustix::fs::statvfs(SHM_DIR)
        .map(|v| v.f_bavail.saturating_mul(v.f_frsize))
        .unwrap_or(0)
}

/// Reads up to `buf.len()` bytes at `offset` without mapping the object
/// (`pread`); the number read.
pub(crate) fn read_at(fd: impl AsFd, buf: &mut [u8], offset: u64) -> Result<usize> {
    Ok(rustix::io::pread(fd, buf, offset)?)
}

/// Writes `buf` into the object at `offset` (`pwrite`): the bytes written.
pub(crate) fn write_at(fd: impl AsFd, buf: &[u8], offset: u64) -> Result<usize> {
    Ok(rustix::io::pwrite(fd, buf, offset)?)
}

/// The shm names (`/name`) that start with `/<prefix>`, for sweeping
/// objects left behind by dead processes. Empty if the namespace cannot be
/// listed.
pub(crate) fn list(prefix: &str) -> Vec<CString> {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let n = e.file_name();
            let n = n.to_str()?;
            n.starts_with(prefix).then(|| CString::new(format!("/{n}")).ok())?
        })
        .collect()
}

/// A shared read-write mapping of an object, unmapped when dropped.
///
/// It only hands out the base address: the memory may be written by other
/// processes at any time, so it is reached through raw pointers (atomics for
/// control words, copies for payload), never through a Rust reference.
#[derive(Debug)]
pub(crate) struct SharedMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is a range of the process's address space, valid from
// any thread until dropped; `SharedMap` itself gives no access to the bytes,
// only their address.
unsafe impl Send for SharedMap {}
// SAFETY: as above; `&SharedMap` allows nothing but reading the address.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps the first `len` bytes of `fd` shared, read-write. The descriptor
    /// may be closed afterwards.
    pub(crate) fn new(fd: impl AsFd, len: usize) -> Result<SharedMap> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint, no
        // MAP_FIXED) replaces nothing of ours; it is only reached through the
        // raw address below.
        let p = unsafe {
            rustix::mm::mmap(
                core::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let base = NonNull::new(p.cast::<u8>()).ok_or(Error::NOMEM)?;
        Ok(SharedMap { base, len })
    }

    /// Maps the first `len` bytes of `fd` shared and read-only (`fd` may
    /// be opened read-only): this process can never write the bytes.
    pub(crate) fn new_read_only(fd: impl AsFd, len: usize) -> Result<SharedMap> {
        // SAFETY: as in `new`: a fresh kernel-chosen mapping, reached only
        // through the raw address.
        let p = unsafe { rustix::mm::mmap(core::ptr::null_mut(), len, ProtFlags::READ, MapFlags::SHARED, fd, 0)? };
        let base = NonNull::new(p.cast::<u8>()).ok_or(Error::NOMEM)?;
        Ok(SharedMap { base, len })
    }

    /// The first byte of the mapping (page-aligned).
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Allocates and maps the pages of bytes `off .. off + len` of the
    /// mapped object for writing (`MADV_POPULATE_WRITE`, Linux 5.14), as
    /// writes would, in one call; their contents are unchanged. Once it
    /// succeeded, writing those pages cannot fail for want of memory in the
    /// file system (until they are discarded). `off` and `len` multiples of
    /// [`PAGE`] and inside the mapping, else `-FI_EINVAL`. `-FI_ENOMEM`:
    /// the file system has no room for them (a full `/dev/shm`: a write
    /// there would raise `SIGBUS`); `-FI_EOPNOTSUPP`: the kernel cannot
    /// tell (before 5.14).
    pub(crate) fn populate(&self, off: usize, len: usize) -> Result<()> {
        self.check_range(off, len)?;
        // SAFETY: the range lies inside our shared mapping (checked above);
        // populating changes no byte of it.
        let r = unsafe {
            rustix::mm::madvise(
                self.base.as_ptr().add(off).cast(),
                len,
                rustix::mm::Advice::LinuxPopulateWrite,
            )
        };
        match r {
            Ok(()) => Ok(()),
            // EFAULT: "a SIGBUS would have been generated on actual access"
            // (madvise(2)): no page to be had.
            Err(Errno::FAULT | Errno::NOMEM | Errno::NOSPC) => Err(Error::NOMEM),
            Err(_) => Err(Error::OPNOTSUPP),
        }
    }

    /// [`SharedMap::populate`] where only a lack of room is an error: the
    /// pages are allocated, or the kernel cannot tell (before Linux 5.14:
    /// they fault in as they are touched), else `-FI_ENOMEM`.
    pub(crate) fn reserve(&self, off: usize, len: usize) -> Result<()> {
        match self.populate(off, len) {
            Err(Error::NOMEM) => Err(Error::NOMEM),
            _ => Ok(()),
        }
    }

    fn check_range(&self, off: usize, len: usize) -> Result<()> {
        if !off.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) || off.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(Error::INVAL);
        }
        Ok(())
    }

    /// Gives the pages of bytes `off .. off + len` of the mapped object
    /// back (`MADV_REMOVE`: a hole punched in the file, so every process
    /// mapping it reads zeros there from now on, and `/dev/shm` has the
    /// memory again). `off` and `len` must be multiples of [`PAGE`] and
    /// inside the mapping, else `-FI_EINVAL`; an error leaves the bytes as
    /// they were.
    pub(crate) fn discard(&self, off: usize, len: usize) -> Result<()> {
        self.check_range(off, len)?;
        // SAFETY: the range lies inside our shared mapping (checked above);
        // MADV_REMOVE only replaces its bytes with zeros, which every user
        // of the mapping already expects another process may write there
        // (it is reached through raw pointers and atomics only).
        unsafe { rustix::mm::madvise(self.base.as_ptr().add(off).cast(), len, rustix::mm::Advice::LinuxRemove)? };
        Ok(())
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: `base..base+len` is the mapping `new` made and nothing
        // else unmaps it; its users hold the `SharedMap` (or something that
        // owns it) for as long as they use the address.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::{AtomicU64, Ordering};

    fn scratch_name() -> CString {
        let r = crate::sys::random_u64().unwrap_or(1);
        CString::new(format!("/rustfab-systest-{}-{r:016x}", crate::sys::geteuid())).unwrap()
    }

    #[test]
    fn create_is_exclusive_private_and_sized() {
        let name = scratch_name();
        let fd = create(&name, 3 * 4096).unwrap();
        let m = meta(&fd).unwrap();
        assert_eq!(m.mode, 0o600, "created private whatever the umask");
        assert_eq!(m.uid, crate::sys::geteuid());
        assert_eq!(m.size, 3 * 4096);
        // O_EXCL: the live name cannot be created again.
        assert_eq!(create(&name, 4096).err(), Some(Error::ADDRINUSE));
        let listed = list(&name.to_str().unwrap()[1..]);
        assert_eq!(listed, vec![name.clone()]);
        assert!(unlink(&name));
        assert!(!unlink(&name), "second unlink finds nothing");
        assert!(open(&name, Access::ReadOnly).is_err());
        assert!(list(&name.to_str().unwrap()[1..]).is_empty());
    }

    #[test]
    fn two_mappings_share_bytes_and_pread_sees_them() {
        let name = scratch_name();
        let fd = create(&name, 8192).unwrap();
        let a = SharedMap::new(&fd, 8192).unwrap();
        drop(fd);
        let fd2 = open(&name, Access::ReadWrite).unwrap();
        let b = SharedMap::new(&fd2, 8192).unwrap();
        assert_ne!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.as_ptr() as usize % 4096, 0);
        // SAFETY: offset 4096 is inside both mappings, 8-aligned, and only
        // accessed atomically.
        let (wa, wb) = unsafe {
            (
                AtomicU64::from_ptr(a.as_ptr().add(4096).cast()),
                AtomicU64::from_ptr(b.as_ptr().add(4096).cast()),
            )
        };
        wa.store(0x1122_3344_5566_7788, Ordering::SeqCst);
        assert_eq!(wb.load(Ordering::SeqCst), 0x1122_3344_5566_7788);
        let mut buf = [0u8; 8];
        assert_eq!(read_at(&fd2, &mut buf, 4096).unwrap(), 8);
        assert_eq!(u64::from_ne_bytes(buf), 0x1122_3344_5566_7788);
        // A read past the end returns nothing rather than failing.
        assert_eq!(read_at(&fd2, &mut buf, 8192).unwrap(), 0);
        // The name can go while mappings live on.
        assert!(unlink(&name));
        wb.store(5, Ordering::SeqCst);
        assert_eq!(wa.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn bad_names_and_missing_objects_fail_cleanly() {
        let missing = scratch_name();
        assert!(open(&missing, Access::ReadWrite).is_err());
        assert!(!unlink(&missing));
        // A name with an inner slash is not an shm name.
        let bad = CString::new("/rustfab/../x").unwrap();
        assert!(create(&bad, 4096).is_err());
    }
}
