//! One error type for the whole provider: a positive libfabric errno.
//! Thunks return it negated (`-FI_E*`), in one place (`fi::boundary`).

use crate::abi::*;

/// A libfabric error code (`FI_E*`, positive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Error(pub i32);

pub(crate) type Result<T> = core::result::Result<T, Error>;

impl Error {
    pub(crate) const AGAIN: Error = Error(FI_EAGAIN);
    pub(crate) const NOMEM: Error = Error(FI_ENOMEM);
    pub(crate) const BUSY: Error = Error(FI_EBUSY);
    pub(crate) const INVAL: Error = Error(FI_EINVAL);
    pub(crate) const NOSYS: Error = Error(FI_ENOSYS);
    pub(crate) const NODATA: Error = Error(FI_ENODATA);
    pub(crate) const NOENT: Error = Error(FI_ENOENT);
    pub(crate) const NOMSG: Error = Error(FI_ENOMSG);
    pub(crate) const MSGSIZE: Error = Error(FI_EMSGSIZE);
    pub(crate) const OPNOTSUPP: Error = Error(FI_EOPNOTSUPP);
    pub(crate) const NOPROTOOPT: Error = Error(FI_ENOPROTOOPT);
    pub(crate) const ADDRNOTAVAIL: Error = Error(FI_EADDRNOTAVAIL);
    pub(crate) const ADDRINUSE: Error = Error(FI_EADDRINUSE);
    pub(crate) const CANCELED: Error = Error(FI_ECANCELED);
    pub(crate) const CONNREFUSED: Error = Error(FI_ECONNREFUSED);
    pub(crate) const ACCES: Error = Error(FI_EACCES);
    pub(crate) const CONNRESET: Error = Error(FI_ECONNRESET);
    pub(crate) const NOTCONN: Error = Error(FI_ENOTCONN);
    pub(crate) const TIMEDOUT: Error = Error(FI_ETIMEDOUT);
    pub(crate) const IO: Error = Error(FI_EIO);
    pub(crate) const OTHER: Error = Error(FI_EOTHER);
    pub(crate) const TOOSMALL: Error = Error(FI_ETOOSMALL);
    pub(crate) const OPBADSTATE: Error = Error(FI_EOPBADSTATE);
    pub(crate) const AVAIL: Error = Error(FI_EAVAIL);
    pub(crate) const BADFLAGS: Error = Error(FI_EBADFLAGS);
    pub(crate) const NOEQ: Error = Error(FI_ENOEQ);
    pub(crate) const NOCQ: Error = Error(FI_ENOCQ);
    pub(crate) const TRUNC: Error = Error(FI_ETRUNC);
    pub(crate) const NOKEY: Error = Error(FI_ENOKEY);
    pub(crate) const NOAV: Error = Error(FI_ENOAV);
    pub(crate) const OVERRUN: Error = Error(FI_EOVERRUN);

    /// A POSIX errno as an error (libfabric's low codes are errno values).
    pub(crate) fn from_errno(e: i32) -> Error {
        if e <= 0 {
            Error::OTHER
        } else {
            Error(e)
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::from_errno(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

/// The system calls under `sys/` (rustix) report failures as an `Errno`
/// value rather than through the thread's `errno`; `?` turns it into ours.
impl From<rustix::io::Errno> for Error {
    fn from(e: rustix::io::Errno) -> Error {
        Error::from_errno(e.raw_os_error())
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", strerror(self.0))
    }
}

/// Text for a libfabric error code, matching `fi_strerror` for the codes
/// libfabric defines itself and `strerror` for the POSIX ones.
pub(crate) fn strerror(code: i32) -> String {
    let code = code.abs();
    let s = match code {
        FI_EOTHER => "Unspecified error",
        FI_ETOOSMALL => "Provided buffer is too small",
        FI_EOPBADSTATE => "Operation not permitted in current state",
        FI_EAVAIL => "Error available",
        FI_EBADFLAGS => "Flags not supported",
        FI_ENOEQ => "Missing or unavailable event queue",
        FI_EDOMAIN => "Invalid resource domain",
        FI_ENOCQ => "Missing or unavailable completion queue",
        FI_ECRC => "CRC error",
        FI_ETRUNC => "Truncation error",
        FI_ENOKEY => "Required key not available",
        FI_ENOAV => "Missing or unavailable address vector",
        FI_EOVERRUN => "Queue has been overrun",
        FI_ENORX => "Receiver not ready, no receive buffers available",
        _ => {
            return std::io::Error::from_raw_os_error(code)
                .to_string()
                .split(" (os error")
                .next()
                .unwrap_or("Unknown error")
                .to_string()
        }
    };
    s.to_string()
}
