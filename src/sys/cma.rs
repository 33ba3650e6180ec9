//! Cross-memory attach: copying straight out of another process's memory
//! with `process_vm_readv` (one copy for large shm messages, docs/shm.md)
//! and into it with `process_vm_writev` (RMA reads, docs/rma.md).
//! rustix has no wrapper for it, so this is libc.

/// One range of memory: a destination in this process, or a source in the
/// peer's address space (which the kernel checks, never this process).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct IoRange(libc::iovec);

impl IoRange {
    pub(crate) fn new(addr: usize, len: usize) -> IoRange {
        IoRange(libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.0.iov_len
    }

    /// The same range without its first `skip` bytes (`skip <= len`).
    fn skip(&self, skip: usize) -> IoRange {
        IoRange::new(self.0.iov_base as usize + skip, self.0.iov_len - skip)
    }
}

/// Why a cross-memory read failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmaError {
    /// The process no longer exists (`ESRCH`).
    Gone,
    /// A range is not mapped in one of the processes (`EFAULT`), or the
    /// ranges ended before `len` bytes.
    Fault,
    /// The kernel refuses (ptrace restrictions, `EPERM`; no such system
    /// call, `ENOSYS`; ...): the caller copies another way.
    Refused,
}

/// The ranges of `v` after its first `skip` bytes.
fn after(v: &[IoRange], mut skip: usize) -> Vec<IoRange> {
    let mut out = Vec::with_capacity(v.len());
    for r in v {
        if skip >= r.len() {
            skip -= r.len();
            continue;
        }
        out.push(r.skip(skip));
        skip = 0;
    }
    out
}

/// Copies `len` bytes from the ranges `remote` of process `pid` into the
/// ranges `local` of this one, in order, repeating the call after partial
/// copies (the kernel stops at page-run boundaries).
///
/// # Safety
/// Every `local` range must be memory of this process that may be written
/// for the duration of the call and that no Rust reference points into.
pub(crate) unsafe fn read_process(
    pid: i32,
    local: &[IoRange],
    remote: &[IoRange],
    len: usize,
) -> Result<usize, CmaError> {
    // SAFETY: the local ranges are writable per the caller's contract; the
    // remote ones are only read by the kernel in the other process.
    unsafe { copy(libc::process_vm_readv, pid, local, remote, len) }
}

/// Copies `len` bytes from the ranges `local` of this process into the
/// ranges `remote` of process `pid`, in order, with `process_vm_writev`
/// (an RMA read served by its target straight into the initiator's
/// buffers), repeating the call after partial copies.
///
/// # Safety
/// Every `local` range must be memory of this process that may be read
/// for the duration of the call. The remote ranges are only touched by the
/// kernel, in the other process (checked there: EFAULT).
pub(crate) unsafe fn write_process(
    pid: i32,
    local: &[IoRange],
    remote: &[IoRange],
    len: usize,
) -> Result<usize, CmaError> {
    // SAFETY: the local ranges are readable per the caller's contract; the
    // remote ones are only written by the kernel in the other process.
    unsafe { copy(libc::process_vm_writev, pid, local, remote, len) }
}

/// `process_vm_readv` or `process_vm_writev` (the same arguments).
type CmaCall = unsafe extern "C" fn(
    libc::pid_t,
    *const libc::iovec,
    libc::c_ulong,
    *const libc::iovec,
    libc::c_ulong,
    libc::c_ulong,
) -> libc::ssize_t;

/// The loop both directions share: `call` until `len` bytes moved, the
/// ranges shifted past what a partial copy did.
///
/// # Safety
/// The local ranges must be memory of this process that `call` may access
/// (written by `process_vm_readv`, read by `process_vm_writev`) for the
/// duration of the call, with no Rust reference into memory it writes.
unsafe fn copy(call: CmaCall, pid: i32, local: &[IoRange], remote: &[IoRange], len: usize) -> Result<usize, CmaError> {
    let mut done = 0usize;
    while done < len {
        // The first pass uses the caller's ranges as they are; only a
        // partial copy needs shifted copies of them.
        let (lv, rv);
        let (l, r) = if done == 0 {
            (local, remote)
        } else {
            (lv, rv) = (after(local, done), after(remote, done));
            (&lv[..], &rv[..])
        };
        // SAFETY: `IoRange` is a transparent `iovec`, so both slices are
        // arrays of iovecs of the given lengths; the local ranges may be
        // accessed per the caller's contract, the remote ones are touched
        // only by the kernel in the other process (checked there: EFAULT).
        let n = unsafe {
            call(
                pid,
                l.as_ptr().cast::<libc::iovec>(),
                l.len() as libc::c_ulong,
                r.as_ptr().cast::<libc::iovec>(),
                r.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 {
            return Err(match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::ESRCH) => CmaError::Gone,
                Some(libc::EFAULT) => CmaError::Fault,
                _ => CmaError::Refused,
            });
        }
        if n == 0 {
            return Err(CmaError::Fault);
        }
        done += n as usize;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads this process's own memory (scattered → gathered), or reports
    /// that the kernel refuses CMA here, never anything else.
    #[test]
    fn reads_own_memory_across_ranges() {
        let src: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + 5) as u8).collect();
        let mut a = vec![0u8; 100_001];
        let mut b = vec![0u8; src.len() - a.len()];
        let local = [
            IoRange::new(a.as_mut_ptr() as usize, a.len()),
            IoRange::new(b.as_mut_ptr() as usize, b.len()),
        ];
        let base = src.as_ptr() as usize;
        let remote = [
            IoRange::new(base, 4097),
            IoRange::new(base + 4097, 150_000),
            IoRange::new(base + 154_097, src.len() - 154_097),
        ];
        // SAFETY: `a` and `b` are ours, writable, and not borrowed while
        // the call runs.
        match unsafe { read_process(crate::sys::getpid(), &local, &remote, src.len()) } {
            Ok(n) => {
                assert_eq!(n, src.len());
                assert_eq!(&src[..a.len()], &a[..]);
                assert_eq!(&src[a.len()..], &b[..]);
            }
            Err(e) => assert_eq!(e, CmaError::Refused, "CMA failed for another reason"),
        }
    }

    #[test]
    fn bad_remote_ranges_and_dead_processes_are_reported() {
        let mut dst = vec![0u8; 64];
        let local = [IoRange::new(dst.as_mut_ptr() as usize, dst.len())];
        let me = crate::sys::getpid();
        // Address 8 is never mapped.
        let bad = [IoRange::new(8, 64)];
        // SAFETY: `dst` is ours and writable.
        let r = unsafe { read_process(me, &local, &bad, 64) };
        assert!(matches!(r, Err(CmaError::Fault | CmaError::Refused)), "{r:?}");
        // Remote ranges shorter than `len`: the copy cannot complete.
        let short = [IoRange::new(dst.as_ptr() as usize, 16)];
        let mut out = vec![0u8; 64];
        let local = [IoRange::new(out.as_mut_ptr() as usize, out.len())];
        // SAFETY: `out` is ours and writable.
        let r = unsafe { read_process(me, &local, &short, 64) };
        assert!(matches!(r, Err(CmaError::Fault | CmaError::Refused)), "{r:?}");
        // A pid that cannot exist (above the kernel's pid_max limit).
        // SAFETY: as above.
        let r = unsafe { read_process(0x7fff_fff0, &local, &short, 16) };
        assert!(matches!(r, Err(CmaError::Gone | CmaError::Refused)), "{r:?}");
    }

    /// Writes into this process's own memory (gathered → scattered), or
    /// reports that the kernel refuses CMA here; bad ranges and dead
    /// processes are reported, never written.
    #[test]
    fn writes_own_memory_across_ranges() {
        let src: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + 1) as u8).collect();
        let mut a = vec![0u8; 70_001];
        let mut b = vec![0u8; src.len() - a.len()];
        let local = [
            IoRange::new(src.as_ptr() as usize, 5000),
            IoRange::new(src.as_ptr() as usize + 5000, src.len() - 5000),
        ];
        let remote = [
            IoRange::new(a.as_mut_ptr() as usize, a.len()),
            IoRange::new(b.as_mut_ptr() as usize, b.len()),
        ];
        // SAFETY: `src` is ours and readable; `a` and `b` are written by the
        // kernel only while no Rust reference to them is used.
        match unsafe { write_process(crate::sys::getpid(), &local, &remote, src.len()) } {
            Ok(n) => {
                assert_eq!(n, src.len());
                assert_eq!(&src[..a.len()], &a[..]);
                assert_eq!(&src[a.len()..], &b[..]);
            }
            Err(e) => assert_eq!(e, CmaError::Refused, "CMA failed for another reason"),
        }
        let bad = [IoRange::new(8, 64)];
        // SAFETY: as above; address 8 is never mapped.
        let r = unsafe { write_process(crate::sys::getpid(), &local, &bad, 64) };
        assert!(matches!(r, Err(CmaError::Fault | CmaError::Refused)), "{r:?}");
        // SAFETY: as above.
        let r = unsafe { write_process(0x7fff_fff0, &local, &remote, 16) };
        assert!(matches!(r, Err(CmaError::Gone | CmaError::Refused)), "{r:?}");
    }
}
