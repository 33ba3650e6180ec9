//! A completion as a CQ holds it: [`CqEntry`], the one internal record
//! every format is cut from, [`CqErrEntry`] for error completions, and
//! [`CqErrRead`], what reading an error hands out. Shared by the CQ
//! (`cq.rs`) and its queue (`cq_queue.rs`).

use crate::abi::*;
use core::ffi::c_void;

/// One completion, the CQ's internal record. Every format is cut from it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CqEntry {
    /// The application's context of the operation (NULL when none).
    pub(crate) op_context: *mut c_void,
    /// Completion flags (`FI_SEND`, `FI_RECV`, `FI_MSG`, `FI_TAGGED`, ...).
    pub(crate) flags: u64,
    /// Received length (receives only).
    pub(crate) len: usize,
    /// Where data was placed (multi-recv only).
    pub(crate) buf: *mut c_void,
    /// Remote CQ data (with `FI_REMOTE_CQ_DATA`).
    pub(crate) data: u64,
    /// Received tag (tagged receives).
    pub(crate) tag: u64,
    /// Source address for `fi_cq_readfrom`; `FI_ADDR_NOTAVAIL` when unknown.
    pub(crate) src: fi_addr_t,
}

// SAFETY: `op_context` and `buf` are opaque application pointers that rustfab
// never dereferences; they are only handed back to the application.
unsafe impl Send for CqEntry {}
// SAFETY: as above: the pointers are plain values to rustfab.
unsafe impl Sync for CqEntry {}

impl Default for CqEntry {
    fn default() -> CqEntry {
        CqEntry {
            op_context: core::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: core::ptr::null_mut(),
            data: 0,
            tag: 0,
            src: FI_ADDR_NOTAVAIL,
        }
    }
}

impl CqEntry {
    /// An entry with only a context and flags (sends, RMA, ...).
    pub(crate) fn new(op_context: *mut c_void, flags: u64) -> CqEntry {
        CqEntry {
            op_context,
            flags,
            ..CqEntry::default()
        }
    }
}

/// An error completion, as `fi_cq_readerr` returns it.
#[derive(Clone, Debug)]
pub(crate) struct CqErrEntry {
    /// The fields shared with successful completions.
    pub(crate) entry: CqEntry,
    /// Bytes that did not fit (`FI_ETRUNC`).
    pub(crate) olen: usize,
    /// Positive `FI_E*` code.
    pub(crate) err: i32,
    /// Provider-specific code (rustfab: a positive errno/`FI_E*` from the
    /// transport, one of rustfab's why codes, or 0).
    pub(crate) prov_errno: i32,
    /// Provider-specific data (the raw source address for `FI_SOURCE_ERR`).
    pub(crate) err_data: Vec<u8>,
}

impl CqErrEntry {
    /// An operation that ended with `err`; `prov_errno` is the why code
    /// rustfab gives that error (a failed dial), or 0.
    pub(crate) fn new(entry: CqEntry, err: i32) -> CqErrEntry {
        CqErrEntry {
            entry,
            olen: 0,
            err,
            prov_errno: crate::transport::prov_errno_of(crate::base::error::Error(err)),
            err_data: Vec::new(),
        }
    }

    #[cfg(test)]
    /// A truncated receive: fi_cq(3) "olen specifies the amount of data that
    /// did not fit into the available receive buffer and was discarded".
    pub(crate) fn truncated(entry: CqEntry, olen: usize) -> CqErrEntry {
        CqErrEntry {
            olen,
            ..CqErrEntry::new(entry, FI_ETRUNC)
        }
    }

    #[cfg(test)]
    /// `FI_SOURCE_ERR`: a message received successfully whose source is not in
    /// the AV; `raw_addr` is the source in the domain's address format.
    pub(crate) fn source_unknown(entry: CqEntry, raw_addr: &[u8]) -> CqErrEntry {
        CqErrEntry {
            err_data: raw_addr.to_vec(),
            prov_errno: FI_EADDRNOTAVAIL,
            ..CqErrEntry::new(entry, FI_EADDRNOTAVAIL)
        }
    }
}

/// What [`Cq::read_err`](crate::core::cq::Cq::read_err) hands out.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CqErrRead<'a> {
    /// An error completion. Its `err_data` stays where it is until the next
    /// `read_err` (the provider-owned buffer of fi_cq(3)).
    Entry(&'a CqErrEntry),
    /// The one `FI_EOVERRUN` event of an overrun CQ (no entry, no
    /// `err_data`).
    Overrun,
}
