//! Cross-memory attach (process_vm_readv/writev): single copies between
//! processes, one by one and batched.

use crate::base::error::{Error, Result};
use crate::sys::cma::{self, CmaError, IoRange};
use crate::transport::iov::IovList;
use crate::transport::{PullJob, PushJob};

/// Pulls `len` bytes of a sender's buffer (`remote` segments, starting at
/// logical offset `remote_off`) into `dst` at `dst_off`, with
/// `process_vm_readv`. Errors: NOSYS/PERM-like → CMA unavailable
/// (`Err(OPNOTSUPP)`), peer gone → `Err(CONNRESET)`, bad remote
/// addresses → `Err(IO)`.
pub(super) fn pull(pid: i32, remote: &[(u64, u64)], dst: &IovList, len: usize) -> Result<usize> {
    let (local, rem) = cma_ranges(dst, remote, len);
    // SAFETY: the local ranges are the receive's application buffers,
    // writable until it completes (fi_recv contract) and never referenced by
    // Rust code; the remote ones are addresses in the peer process, which
    // only the kernel touches (checked there).
    cma_result(unsafe { cma::read_process(pid, &local, &rem, len) })
}

/// Most ranges one `process_vm_readv` takes on each side (`UIO_MAXIOV`).
pub(super) const CMA_MAX_RANGES: usize = 1024;

/// The pulls `jobs` from one sender in one `process_vm_readv` (repeated
/// only after partial copies, as [`pull`]): `Ok` when all of every job
/// was copied. More ranges than one call takes: `Err(INVAL)`, nothing
/// copied (the caller pulls one by one).
pub(super) fn pull_batch(pid: i32, jobs: &[PullJob<'_>]) -> Result<()> {
    let (local, rem, len) = batch_ranges(jobs.iter().map(|j| (j.dst, j.remote, j.len)))?;
    // SAFETY: as in `pull`: the local ranges are the receives' application
    // buffers, writable until they complete and never referenced by Rust
    // code; the remote ones are only touched by the kernel in the peer.
    match cma_result(unsafe { cma::read_process(pid, &local, &rem, len) }) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Error::IO),
        Err(e) => Err(e),
    }
}

/// The pushes `jobs` into one receiver in one `process_vm_writev`, as
/// [`pull_batch`]: `Ok` when all of every job was written.
pub(super) fn push_batch(pid: i32, jobs: &[PushJob<'_>]) -> Result<()> {
    let (local, rem, len) = batch_ranges(jobs.iter().map(|j| (j.src, j.remote, j.len)))?;
    // SAFETY: as in `push`: the local ranges are send buffers the core
    // holds until the receiver's ACK, only read here; the remote ones are
    // the receiver's own buffers in its process, which only the kernel
    // touches (checked there).
    match cma_result(unsafe { cma::write_process(pid, &local, &rem, len) }) {
        Ok(n) if n == len => Ok(()),
        Ok(_) => Err(Error::IO),
        Err(e) => Err(e),
    }
}

/// The ranges of one batched cross-memory copy: each job's (local
/// buffer, peer's segments, bytes) in turn, and the bytes in all.
/// `Err(INVAL)`: a job's ranges do not cover exactly its bytes on both
/// sides (the single call would pair one job's source with the next
/// one's buffer), or more ranges than one call takes.
pub(super) fn batch_ranges<'a>(
    jobs: impl Iterator<Item = (&'a IovList, &'a [(u64, u64)], usize)>,
) -> Result<(Vec<IoRange>, Vec<IoRange>, usize)> {
    let cap = jobs.size_hint().0 * 2;
    let mut local: Vec<IoRange> = Vec::with_capacity(cap);
    let mut rem: Vec<IoRange> = Vec::with_capacity(cap);
    let mut len = 0usize;
    for (mine, theirs, n) in jobs {
        let (l, r) = cma_ranges(mine, theirs, n);
        let (ln, rn) = (
            l.iter().map(IoRange::len).sum::<usize>(),
            r.iter().map(IoRange::len).sum::<usize>(),
        );
        if ln != n || rn != n {
            return Err(Error::INVAL);
        }
        local.extend_from_slice(&l);
        rem.extend_from_slice(&r);
        len += n;
    }
    if local.len() > CMA_MAX_RANGES || rem.len() > CMA_MAX_RANGES {
        return Err(Error::INVAL);
    }
    Ok((local, rem, len))
}

/// Writes `len` bytes of `src` into a peer's buffers (`remote` segments)
/// with `process_vm_writev`: an RMA read served by its target. Errors as
/// [`pull`].
pub(super) fn push(pid: i32, remote: &[(u64, u64)], src: &IovList, len: usize) -> Result<usize> {
    let (local, rem) = cma_ranges(src, remote, len);
    // SAFETY: the local ranges are registered memory the core checked
    // (key, range, access) for this read, only read here; the remote ones
    // are the reader's own buffers in its process, which only the kernel
    // touches (checked there).
    cma_result(unsafe { cma::write_process(pid, &local, &rem, len) })
}

/// The first `len` bytes of `local` and of the peer's `remote` segments
/// (address, length) as the ranges of one cross-memory copy.
pub(super) fn cma_ranges(local: &IovList, remote: &[(u64, u64)], len: usize) -> (Vec<IoRange>, Vec<IoRange>) {
    let mut l: Vec<IoRange> = Vec::with_capacity(8);
    local.for_range(0, len, |p, n, _| l.push(IoRange::new(p, n)));
    let mut rem: Vec<IoRange> = Vec::with_capacity(remote.len());
    let mut left = len;
    for &(a, n) in remote {
        if left == 0 {
            break;
        }
        let n = (n as usize).min(left);
        rem.push(IoRange::new(a as usize, n));
        left -= n;
    }
    (l, rem)
}

/// A cross-memory copy's failure as the engine sees it.
pub(super) fn cma_result(r: core::result::Result<usize, CmaError>) -> Result<usize> {
    r.map_err(|e| match e {
        CmaError::Gone => Error::CONNRESET,
        CmaError::Fault => Error::IO,
        CmaError::Refused => Error::OPNOTSUPP,
    })
}
