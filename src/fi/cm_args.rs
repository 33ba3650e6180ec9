//! Arguments of the connection-management calls (fi_cm(3)) in C form,
//! shared by connected endpoints (`connected.rs`) and passive endpoints
//! (`pep.rs`): socket addresses in and out, connection data and its size
//! option.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::connected::CM_DATA_MAX;
use crate::fi;
use crate::transport::addr::Addr;
use core::ffi::{c_int, c_void};
use std::net::SocketAddr;

/// The socket address in `b`, an address of format `fmt`.
pub(crate) fn sockaddr_of(fmt: u32, b: &[u8]) -> Result<SocketAddr> {
    match Addr::parse(fmt, b) {
        Ok((Addr::Inet(a), _)) => Ok(a),
        _ => Err(Error::INVAL),
    }
}

/// Copies an address out with fi_cm(3)'s getname/getpeer rules.
///
/// # Safety
/// `addr` must be NULL or valid for `*addrlen` bytes; `addrlen` NULL or
/// readable and writable.
pub(crate) unsafe fn copy_name(a: SocketAddr, addr: *mut c_void, addrlen: *mut usize) -> Result<c_int> {
    if addrlen.is_null() {
        return Err(Error::INVAL);
    }
    let bytes = Addr::Inet(a).to_bytes();
    // SAFETY: per the contract.
    let room = unsafe { *addrlen };
    // SAFETY: per the contract.
    unsafe { *addrlen = bytes.len() };
    let n = room.min(bytes.len());
    if !addr.is_null() {
        // SAFETY: `addr` holds `room >= n` bytes per the contract.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, n) };
    }
    if room < bytes.len() || addr.is_null() {
        return Err(Error::TOOSMALL);
    }
    Ok(0)
}

/// Reads an address of format `fmt` from application memory whose length
/// the format implies (`fi_connect`, `fi_setname`).
///
/// # Safety
/// `p` must be NULL or point to a socket address of the endpoint's format.
pub(crate) unsafe fn read_sockaddr(fmt: u32, p: *const c_void, len: Option<usize>) -> Result<SocketAddr> {
    if p.is_null() {
        return Err(Error::INVAL);
    }
    let n = match fmt {
        FI_SOCKADDR_IN => crate::transport::addr::SIN_LEN,
        FI_SOCKADDR_IN6 => crate::transport::addr::SIN6_LEN,
        _ => {
            // SAFETY: every socket address starts with its family.
            let fam = unsafe { (p as *const libc::sa_family_t).read_unaligned() } as i32;
            match fam {
                libc::AF_INET => crate::transport::addr::SIN_LEN,
                libc::AF_INET6 => crate::transport::addr::SIN6_LEN,
                _ => return Err(Error::INVAL),
            }
        }
    };
    if len.is_some_and(|l| l < n) {
        return Err(Error::INVAL);
    }
    // SAFETY: an address of this family holds `n` bytes (the contract).
    let b = unsafe { core::slice::from_raw_parts(p as *const u8, n) };
    sockaddr_of(FI_FORMAT_UNSPEC, b)
}

/// Connection data from the application, checked against the limit.
///
/// # Safety
/// `param` must be NULL or valid for `len` bytes.
pub(crate) unsafe fn cm_data<'a>(param: *const c_void, len: usize) -> Result<&'a [u8]> {
    if len > CM_DATA_MAX {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    unsafe { fi::slice_in(param as *const u8, len) }
}

/// Writes `FI_OPT_CM_DATA_SIZE` (a `size_t`) for endpoints and passive
/// endpoints.
///
/// # Safety
/// `val` NULL or writable for `*len` bytes; `len` NULL or read/writable.
pub(crate) unsafe fn cm_data_size_opt(val: *mut c_void, len: *mut usize) -> c_int {
    fi::call("fi_getopt", || {
        if val.is_null() || len.is_null() {
            return Err(Error::INVAL);
        }
        // SAFETY: per the contract.
        if unsafe { *len } < core::mem::size_of::<usize>() {
            // SAFETY: per the contract.
            unsafe { *len = core::mem::size_of::<usize>() };
            return Err(Error::TOOSMALL);
        }
        // SAFETY: per the contract (at least a size_t of room, unaligned ok).
        unsafe {
            (val as *mut usize).write_unaligned(CM_DATA_MAX);
            *len = core::mem::size_of::<usize>();
        }
        Ok(0)
    })
}
