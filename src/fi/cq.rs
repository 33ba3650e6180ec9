//! The C face of completion queues: `fi_cq_open`, the `fid_cq` operations,
//! and the C layouts the core does not know: entries written in the
//! application's format straight from the queue (one entry at a time as the
//! core pops it: no copy, no allocation on this hot path), and
//! `struct fi_cq_err_entry` with fi_cq(3)'s `err_data` rules (core/cq.rs).

use crate::abi::libfabric::fi_strerror;
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cq::{Cq, CqAttr, CqEntry, CqErrRead};
use crate::core::domain::Domain;
use crate::core::users::Held;
use crate::core::wait::Holds;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

impl FiObject for Cq {
    const CLOSE: &'static str = "cq close";
    type Header = fid_cq;
    const CLASS: usize = FI_CLASS_CQ;
    fn wake_for_close(&self) {
        self.wait().close();
    }
}

static CQ_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(fi::close_when_idle::<Cq>),
    bind: Some(noops::no_bind),
    control: Some(cq_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

/// The `fid_cq` operations of a CQ of format `F`: one table per format,
/// chosen at open, so that `fi_cq_read`/`fi_cq_readfrom` write entries
/// without loading and switching on the format per call.
const fn cq_ops<const F: u32>() -> fi_ops_cq {
    fi_ops_cq {
        size: core::mem::size_of::<fi_ops_cq>(),
        read: Some(cq_read::<F>),
        readfrom: Some(cq_readfrom::<F>),
        readerr: Some(cq_readerr),
        sread: Some(cq_sread),
        sreadfrom: Some(cq_sreadfrom),
        signal: Some(cq_signal),
        strerror: Some(cq_strerror),
    }
}

static CQ_OPS_CONTEXT: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_CONTEXT>();
static CQ_OPS_MSG: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_MSG>();
static CQ_OPS_DATA: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_DATA>();
static CQ_OPS_TAGGED: fi_ops_cq = cq_ops::<FI_CQ_FORMAT_TAGGED>();

/// The operations table of a CQ of `format` (`FI_CQ_FORMAT_UNSPEC` is
/// read as `FI_CQ_FORMAT_CONTEXT`, core/cq.rs).
fn ops_for(format: u32) -> &'static fi_ops_cq {
    match format {
        FI_CQ_FORMAT_MSG => &CQ_OPS_MSG,
        FI_CQ_FORMAT_DATA => &CQ_OPS_DATA,
        FI_CQ_FORMAT_TAGGED => &CQ_OPS_TAGGED,
        _ => &CQ_OPS_CONTEXT,
    }
}

/// The core's form of an `fi_cq_attr` (its wait set is taken in `open`).
pub(crate) fn cq_attr(a: &fi_cq_attr) -> CqAttr {
    CqAttr {
        size: a.size,
        flags: a.flags,
        format: a.format,
        wait_obj: a.wait_obj,
        wait_cond: a.wait_cond,
    }
}

/// `fi_cq_open`.
pub(crate) fn open(d: &Obj<Domain>, attr: &fi_cq_attr, ctx: *mut c_void) -> Result<*mut fid_cq> {
    let set = if attr.wait_obj == FI_WAIT_SET {
        let s = fi::wait::set_for_fabric(attr.wait_set as *mut fid, d.core.fabric())?;
        Some(Held::new(s))
    } else {
        None
    };
    let holds = Holds {
        parent: Some(Held::new(Arc::clone(&d.core))),
        set,
    };
    let cq = Cq::new(&cq_attr(attr), d.core.api_version, holds, ctx as usize)?;
    cq.wait().add_engine(&d.core.engine)?;
    let hdr = fid_cq {
        fid: fid {
            fclass: FI_CLASS_CQ,
            context: ctx,
            ops: &CQ_FI_OPS,
        },
        ops: ops_for(cq.format()),
    };
    Ok(Obj::create_counting(hdr, cq, fi::counts_every_call(&d.core)))
}

/// The CQ core behind a `struct fid*` (endpoints' `fi_ep_bind`).
/// Any pointer: one that is not a live rustfab Cq is `-FI_EINVAL`.
pub(crate) fn from_fid(p: *mut fid) -> Result<Arc<Cq>> {
    fi::core_of(p)
}

#[cfg(test)]
/// Bytes one entry of `format` takes in the application's buffer.
fn entry_size(format: u32) -> usize {
    match format {
        FI_CQ_FORMAT_MSG => core::mem::size_of::<fi_cq_msg_entry>(),
        FI_CQ_FORMAT_DATA => core::mem::size_of::<fi_cq_data_entry>(),
        FI_CQ_FORMAT_TAGGED => core::mem::size_of::<fi_cq_tagged_entry>(),
        _ => core::mem::size_of::<fi_cq_entry>(),
    }
}

/// Writes entry `i` of an application array of `format` entries.
/// `FI_CQ_FORMAT_UNSPEC` is written as `FI_CQ_FORMAT_CONTEXT` (core/cq.rs).
///
/// # Safety
/// `buf` must be valid for writes of `(i + 1) * entry_size(format)` bytes.
#[inline(always)]
unsafe fn write_entry(format: u32, buf: *mut c_void, i: usize, e: &CqEntry) {
    // SAFETY (all arms): the caller guarantees room for entry `i`; unaligned
    // writes make no assumption about the application's buffer alignment.
    unsafe {
        match format {
            FI_CQ_FORMAT_MSG => (buf as *mut fi_cq_msg_entry).add(i).write_unaligned(fi_cq_msg_entry {
                op_context: e.op_context,
                flags: e.flags,
                len: e.len,
            }),
            FI_CQ_FORMAT_DATA => (buf as *mut fi_cq_data_entry).add(i).write_unaligned(fi_cq_data_entry {
                op_context: e.op_context,
                flags: e.flags,
                len: e.len,
                buf: e.buf,
                data: e.data,
            }),
            FI_CQ_FORMAT_TAGGED => (buf as *mut fi_cq_tagged_entry)
                .add(i)
                .write_unaligned(fi_cq_tagged_entry {
                    op_context: e.op_context,
                    flags: e.flags,
                    len: e.len,
                    buf: e.buf,
                    data: e.data,
                    tag: e.tag,
                }),
            _ => (buf as *mut fi_cq_entry).add(i).write_unaligned(fi_cq_entry {
                op_context: e.op_context,
            }),
        }
    }
}

/// Writes entry `i` and (for `readfrom`) its source address.
///
/// # Safety
/// As [`write_entry`]; `src` NULL or valid for `i + 1` addresses.
#[inline(always)]
unsafe fn write_out(format: u32, buf: *mut c_void, src: *mut fi_addr_t, i: usize, e: &CqEntry) {
    // SAFETY: forwarded from this function's contract.
    unsafe { write_entry(format, buf, i, e) };
    if !src.is_null() {
        // SAFETY: `src` holds entry `i`'s address per the contract.
        unsafe { src.add(i).write_unaligned(e.src) };
    }
}

/// `fi_cq_read`/`fi_cq_readfrom` into the application's arrays, for a CQ
/// of format `F` (the thunks of [`cq_ops`]; the format is a constant, so
/// each entry is written with no switch).
///
/// # Safety
/// `buf` must be NULL or valid for `count` entries of format `F`; `src`
/// NULL or valid for `count` addresses.
#[inline(always)]
unsafe fn read_fmt<const F: u32>(cq: &Cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t) -> Result<usize> {
    if buf.is_null() && count > 0 {
        return Err(Error::INVAL);
    }
    // SAFETY: the core hands out at most `count` entries, which fit.
    cq.read(count, |i, e| unsafe { write_out(F, buf, src, i, e) })
}

/// `fi_cq_sread`/`fi_cq_sreadfrom`; `cond` is the pointer value (the
/// threshold with `FI_CQ_COND_THRESHOLD`).
///
/// # Safety
/// As [`read_fmt`], for the CQ's format.
unsafe fn sread_c(
    cq: &Cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> Result<usize> {
    cq.check_can_block()?;
    if buf.is_null() && count > 0 {
        return Err(Error::INVAL);
    }
    let format = cq.format();
    // SAFETY: the core hands out at most `count` entries, which fit.
    cq.sread(count, cond as usize, timeout, |i, e| unsafe {
        write_out(format, buf, src, i, e)
    })
}

/// `fi_cq_readerr` into the application's `struct fi_cq_err_entry`.
///
/// # Safety
/// `buf` must be NULL or valid for a `struct fi_cq_err_entry` as the
/// application's API version defines it (72 bytes before 1.5, 80 from
/// 1.5, 88 from 1.20),
/// whose `err_data` (≥ 1.5, when used) holds `err_data_size` bytes.
unsafe fn read_err_c(cq: &Cq, buf: *mut fi_cq_err_entry) -> Result<usize> {
    if buf.is_null() {
        return Err(Error::INVAL);
    }
    let v15 = cq.api_version() >= fi_version(1, 5);
    // SAFETY: `buf` is readable (contract); the input fields are only read
    // when the application's struct has them (>= 1.5).
    let (app_ptr, app_size) = unsafe {
        if v15 {
            (
                core::ptr::addr_of!((*buf).err_data).read_unaligned(),
                core::ptr::addr_of!((*buf).err_data_size).read_unaligned(),
            )
        } else {
            (core::ptr::null_mut(), 0)
        }
    };
    let mut src_addr = FI_ADDR_NOTAVAIL;
    let out = cq.read_err(|r| {
        let mut out = fi_cq_err_entry {
            op_context: core::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: core::ptr::null_mut(),
            data: 0,
            tag: 0,
            olen: 0,
            err: 0,
            prov_errno: 0,
            err_data: core::ptr::null_mut(),
            err_data_size: 0,
        };
        match r {
            CqErrRead::Entry(e) => {
                out.op_context = e.entry.op_context;
                out.flags = e.entry.flags;
                out.len = e.entry.len;
                out.buf = e.entry.buf;
                out.data = e.entry.data;
                out.tag = e.entry.tag;
                out.olen = e.olen;
                out.err = e.err;
                out.prov_errno = e.prov_errno;
                src_addr = e.entry.src;
                if app_size > 0 && !app_ptr.is_null() {
                    // fi_cq(3): "On input, err_data should reference a data
                    // buffer of size err_data_size."
                    let n = app_size.min(e.err_data.len());
                    // SAFETY: the application's buffer holds `app_size` bytes.
                    unsafe { core::ptr::copy_nonoverlapping(e.err_data.as_ptr(), app_ptr as *mut u8, n) };
                    out.err_data = app_ptr;
                    out.err_data_size = n;
                } else {
                    // "on output err_data will be set to a data buffer owned
                    // by the provider ... valid until a subsequent read": the
                    // CQ keeps this entry until then.
                    if !e.err_data.is_empty() {
                        out.err_data = e.err_data.as_ptr() as *mut c_void;
                    }
                    out.err_data_size = e.err_data.len();
                }
            }
            CqErrRead::Overrun => {
                out.err = FI_EOVERRUN;
                out.prov_errno = FI_EOVERRUN;
            }
        }
        out
    })?;
    if cq.api_version() >= crate::abi::v2::API_FIRST_1_20_FIELDS {
        // The 1.20+ entry ends with `src_addr`: the sender of a receive that
        // failed after matching, when it is in the AV (docs/libfabric2.md).
        let buf = buf as *mut crate::abi::v2::fi_cq_err_entry;
        // SAFETY: an application of API 1.20+ passes the 88-byte entry
        // (the contract); the 1.17 entry is its prefix.
        unsafe {
            (buf as *mut fi_cq_err_entry).write_unaligned(out);
            core::ptr::addr_of_mut!((*buf).src_addr).write_unaligned(src_addr);
        }
    } else if v15 {
        // SAFETY: an 80-byte entry per the contract.
        unsafe { buf.write_unaligned(out) };
    } else {
        // SAFETY: only the 72 bytes of `fi_cq_err_entry_1_0` exist.
        unsafe {
            core::ptr::copy_nonoverlapping(
                &out as *const fi_cq_err_entry as *const u8,
                buf as *mut u8,
                FI_CQ_ERR_ENTRY_1_0_SIZE,
            )
        };
    }
    Ok(1)
}

/// What `fi_cq_strerror` says for an operation whose peer no dial could
/// reach (`UNREACHABLE_PROV_ERRNO`).
const UNREACHABLE_TEXT: &core::ffi::CStr = c"cannot reach the peer: no connection to its address from this host's interfaces (refused, no route or timed out); if the hosts share another interface, set FI_RUSTFAB_IFACE on every process to it";

/// `fi_cq_strerror` for CQs and EQs: rustfab's text for its own why codes,
/// else libfabric's for `prov_errno` (the other provider codes are
/// errno/`FI_E*` values), copied into `buf` when one is given.
///
/// # Safety
/// `buf` must be NULL or valid for `len` bytes.
pub(crate) unsafe fn strerror_into(prov_errno: i32, buf: *mut c_char, len: usize) -> *const c_char {
    let s = if prov_errno == crate::transport::UNREACHABLE_PROV_ERRNO {
        UNREACHABLE_TEXT.as_ptr()
    } else {
        // SAFETY: fi_strerror accepts any int and returns a static string.
        unsafe { fi_strerror(prov_errno.saturating_abs()) }
    };
    if buf.is_null() || len == 0 || s.is_null() {
        return s;
    }
    // SAFETY: `s` is NUL-terminated; `buf` holds `len` bytes.
    unsafe {
        let text = core::ffi::CStr::from_ptr(s).to_string_lossy();
        fi::cmem::copy_cstr(&text, buf, len);
    }
    buf
}

unsafe extern "C" fn cq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<Cq, c_int>("cq control", f as *const c_void, |o| {
            fi::wait::control(o.core.shown_wait(), cmd, arg)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn cq_read<const F: u32>(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: arguments come from the application through fi_cq_read(); a
    // CQ reached through the table of format F has format F (`ops_for`).
    unsafe {
        fi::call_obj::<Cq, isize>("fi_cq_read", cq as *const c_void, |o| {
            read_fmt::<F>(&o.core, buf, count, core::ptr::null_mut()).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn cq_readfrom<const F: u32>(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> isize {
    // SAFETY: arguments come from the application through fi_cq_readfrom();
    // the format as in `cq_read`.
    unsafe {
        fi::call_obj::<Cq, isize>("fi_cq_readfrom", cq as *const c_void, |o| {
            read_fmt::<F>(&o.core, buf, count, src).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry, _flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_cq_readerr().
    unsafe {
        fi::call_obj::<Cq, isize>("fi_cq_readerr", cq as *const c_void, |o| {
            read_err_c(&o.core, buf).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn cq_sread(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: arguments come from the application through fi_cq_sread().
    unsafe {
        fi::call_obj_blocking::<Cq, isize>("fi_cq_sread", cq as *const c_void, |o| {
            sread_c(&o.core, buf, count, core::ptr::null_mut(), cond, timeout).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: arguments come from the application through fi_cq_sreadfrom().
    unsafe {
        fi::call_obj_blocking::<Cq, isize>("fi_cq_sreadfrom", cq as *const c_void, |o| {
            sread_c(&o.core, buf, count, src, cond, timeout).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    // SAFETY: the argument comes from the application through fi_cq_signal().
    unsafe {
        fi::call_obj::<Cq, c_int>("fi_cq_signal", cq as *const c_void, |o| {
            o.core.signal()?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn cq_strerror(
    cq: *mut fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: arguments come from the application through fi_cq_strerror().
    unsafe {
        fi::call_obj::<Cq, *const c_char>("fi_cq_strerror", cq as *const c_void, |_| {
            Ok(strerror_into(prov_errno, buf, len))
        })
    }
}

#[cfg(test)]
mod tests;
