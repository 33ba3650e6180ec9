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
mod tests {
    use super::*;
    use crate::core::cq::CqErrEntry;

    const V17: u32 = fi_version(1, 17);

    fn attr(size: usize, format: u32, wait_obj: u32) -> fi_cq_attr {
        fi_cq_attr {
            size,
            flags: 0,
            format,
            wait_obj,
            signaling_vector: 0,
            wait_cond: FI_CQ_COND_NONE,
            wait_set: core::ptr::null_mut(),
        }
    }

    fn cq(size: usize, format: u32, wait_obj: u32) -> Arc<Cq> {
        Cq::new(&cq_attr(&attr(size, format, wait_obj)), V17, Holds::none(), 0).unwrap()
    }

    /// `fi_cq_read` (`src` NULL) or `fi_cq_readfrom` through the operations
    /// table `open` installs for the CQ's format (`ops_for`), on a handle
    /// made for the call and closed after it.
    ///
    /// # Safety
    /// `buf` must be NULL or valid for `count` entries of the CQ's format;
    /// `src` NULL or valid for `count` addresses.
    unsafe fn read_c(cq: &Arc<Cq>, buf: *mut c_void, count: usize, src: *mut fi_addr_t) -> Result<usize> {
        let hdr = fid_cq {
            fid: fid {
                fclass: FI_CLASS_CQ,
                context: core::ptr::null_mut(),
                ops: &CQ_FI_OPS,
            },
            ops: ops_for(cq.format()),
        };
        let p = Obj::create(hdr, cq.clone());
        // SAFETY: `p` is the live handle just made; its table is static;
        // the buffers are forwarded from this function's contract.
        let r = unsafe {
            let ops = &*(*p).ops;
            let r = if src.is_null() {
                ops.read.expect("read")(p, buf, count)
            } else {
                ops.readfrom.expect("readfrom")(p, buf, count, src)
            };
            assert_eq!(CQ_FI_OPS.close.expect("close")(p as *mut fid), 0);
            r
        };
        if r < 0 {
            Err(Error(-r as i32))
        } else {
            Ok(r as usize)
        }
    }

    /// fi_close from another thread while fi_cq_sread waits: the reader
    /// returns -FI_ECANCELED, the close 0, and the handle no longer holds
    /// the core (dropped once the reader had left).
    #[test]
    fn close_under_sread_through_the_c_face() {
        let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
        let hdr = fid_cq {
            fid: fid {
                fclass: FI_CLASS_CQ,
                context: core::ptr::null_mut(),
                ops: &CQ_FI_OPS,
            },
            ops: ops_for(q.format()),
        };
        let p = Obj::create(hdr, q.clone()) as usize;
        let reader = std::thread::spawn(move || {
            let p = p as *mut fid_cq;
            let mut e = fi_cq_entry {
                op_context: core::ptr::null_mut(),
            };
            // SAFETY: `p` is live until the close below, which waits for
            // this call; `e` holds one entry of the CQ's format.
            unsafe {
                (*(*p).ops).sread.expect("sread")(
                    p,
                    &mut e as *mut fi_cq_entry as *mut c_void,
                    1,
                    core::ptr::null(),
                    10_000,
                )
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        let t = std::time::Instant::now();
        // SAFETY: the handle made above, closed once.
        assert_eq!(unsafe { CQ_FI_OPS.close.expect("close")(p as *mut fid) }, 0);
        assert_eq!(reader.join().unwrap(), -(FI_ECANCELED as isize));
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(Arc::strong_count(&q), 1, "the closed handle still holds the core");
    }

    /// `read_c` into a typed array (the type must match the CQ's format).
    fn read<T>(q: &Arc<Cq>, buf: &mut [T], n: usize) -> Result<usize> {
        assert!(n <= buf.len() && core::mem::size_of::<T>() == entry_size(q.format()));
        // SAFETY: `buf` holds `n` entries of the CQ's format.
        unsafe { read_c(q, buf.as_mut_ptr() as *mut c_void, n, core::ptr::null_mut()) }
    }

    fn readfrom<T>(q: &Arc<Cq>, buf: &mut [T], n: usize, src: &mut [u64]) -> Result<usize> {
        assert!(n <= buf.len() && n <= src.len() && core::mem::size_of::<T>() == entry_size(q.format()));
        // SAFETY: `buf` and `src` hold `n` entries each.
        unsafe { read_c(q, buf.as_mut_ptr() as *mut c_void, n, src.as_mut_ptr()) }
    }

    fn read_err(q: &Cq, e: &mut fi_cq_err_entry) -> Result<usize> {
        // SAFETY: a whole 80-byte entry; its err_data (if any) is set up by
        // the test to match err_data_size.
        unsafe { read_err_c(q, e) }
    }

    fn ctx(n: usize) -> *mut c_void {
        n as *mut c_void
    }

    fn full_entry(n: usize) -> CqEntry {
        CqEntry {
            op_context: ctx(n),
            flags: FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA,
            len: 100 + n,
            buf: ctx(0x1000 + n),
            data: 0xdada_0000 + n as u64,
            tag: 0x7a90_0000 + n as u64,
            src: n as u64,
        }
    }

    fn zeroed<T>() -> T {
        // SAFETY: only used for the plain-old-data CQ entry structs.
        unsafe { core::mem::zeroed() }
    }

    fn err_entry() -> fi_cq_err_entry {
        zeroed()
    }

    #[test]
    fn every_format_maps_its_fields() {
        let q = cq(8, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE);
        q.push(full_entry(1)).unwrap();
        let mut t = [zeroed::<fi_cq_tagged_entry>(); 2];
        assert_eq!(read(&q, &mut t, 2), Ok(1));
        let e = full_entry(1);
        assert_eq!(t[0].op_context, e.op_context);
        assert_eq!(t[0].flags, e.flags);
        assert_eq!(t[0].len, e.len);
        assert_eq!(t[0].buf, e.buf);
        assert_eq!(t[0].data, e.data);
        assert_eq!(t[0].tag, e.tag);

        let q = cq(8, FI_CQ_FORMAT_DATA, FI_WAIT_NONE);
        q.push(full_entry(2)).unwrap();
        q.push(full_entry(3)).unwrap();
        let mut d = [zeroed::<fi_cq_data_entry>(); 2];
        assert_eq!(read(&q, &mut d, 2), Ok(2));
        for (i, n) in [2usize, 3].iter().enumerate() {
            let e = full_entry(*n);
            assert_eq!((d[i].op_context, d[i].flags, d[i].len), (e.op_context, e.flags, e.len));
            assert_eq!((d[i].buf, d[i].data), (e.buf, e.data));
        }

        let q = cq(8, FI_CQ_FORMAT_MSG, FI_WAIT_NONE);
        q.push(full_entry(4)).unwrap();
        q.push(full_entry(5)).unwrap();
        let mut m = [zeroed::<fi_cq_msg_entry>(); 2];
        assert_eq!(read(&q, &mut m, 2), Ok(2));
        assert_eq!(
            (m[1].op_context, m[1].flags, m[1].len),
            (ctx(5), full_entry(5).flags, 105)
        );

        let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        q.push(full_entry(6)).unwrap();
        q.push(full_entry(7)).unwrap();
        let mut c = [zeroed::<fi_cq_entry>(); 2];
        assert_eq!(read(&q, &mut c, 2), Ok(2));
        assert_eq!((c[0].op_context, c[1].op_context), (ctx(6), ctx(7)));
    }

    /// UNSPEC is CONTEXT: 8-byte entries, nothing written past them.
    #[test]
    fn unspec_reads_as_context() {
        let q = cq(8, FI_CQ_FORMAT_UNSPEC, FI_WAIT_NONE);
        assert_eq!(entry_size(FI_CQ_FORMAT_UNSPEC), 8);
        q.push(full_entry(1)).unwrap();
        q.push(full_entry(2)).unwrap();
        let mut raw = [0xa5u8; 32];
        // SAFETY: 32 bytes hold two 8-byte context entries (and more).
        let r = unsafe { read_c(&q, raw.as_mut_ptr() as *mut c_void, 2, core::ptr::null_mut()) };
        assert_eq!(r, Ok(2));
        assert_eq!(u64::from_ne_bytes(raw[0..8].try_into().unwrap()), 1);
        assert_eq!(u64::from_ne_bytes(raw[8..16].try_into().unwrap()), 2);
        assert!(raw[16..].iter().all(|&b| b == 0xa5));
    }

    #[test]
    fn readfrom_reports_source_addresses() {
        let q = cq(8, FI_CQ_FORMAT_MSG, FI_WAIT_NONE);
        q.push(full_entry(5)).unwrap();
        q.push(CqEntry::new(ctx(9), FI_SEND | FI_MSG)).unwrap();
        let mut m = [zeroed::<fi_cq_msg_entry>(); 4];
        let mut src = [0u64; 4];
        assert_eq!(readfrom(&q, &mut m, 4, &mut src), Ok(2));
        assert_eq!(src[0], 5);
        assert_eq!(src[1], FI_ADDR_NOTAVAIL);
    }

    #[test]
    fn empty_zero_count_and_null_buffer() {
        let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        let mut c = [zeroed::<fi_cq_entry>(); 1];
        assert_eq!(read(&q, &mut c, 1), Err(Error::AGAIN));
        let null = core::ptr::null_mut();
        // SAFETY (the raw calls below): NULL buffers are what is under test;
        // read_c checks them before any write.
        assert_eq!(unsafe { read_c(&q, null, 0, core::ptr::null_mut()) }, Err(Error::AGAIN));
        q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { read_c(&q, null, 1, core::ptr::null_mut()) }, Err(Error::INVAL));
        // SAFETY: as above.
        assert_eq!(unsafe { read_c(&q, null, 0, core::ptr::null_mut()) }, Ok(0));
        assert_eq!(read(&q, &mut c, 1), Ok(1));
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e), Err(Error::AGAIN));
        // SAFETY: as above.
        assert_eq!(unsafe { read_err_c(&q, core::ptr::null_mut()) }, Err(Error::INVAL));
    }

    #[test]
    fn a_failed_dial_has_its_own_prov_errno_and_text() {
        use crate::transport::UNREACHABLE_PROV_ERRNO;
        for e in [FI_ECONNREFUSED, FI_EHOSTUNREACH, FI_ENETUNREACH, FI_ETIMEDOUT] {
            assert_eq!(
                CqErrEntry::new(CqEntry::new(ctx(1), FI_SEND), e).prov_errno,
                UNREACHABLE_PROV_ERRNO
            );
        }
        for e in [FI_EIO, FI_ECONNRESET, FI_EACCES, FI_ECANCELED] {
            assert_eq!(CqErrEntry::new(CqEntry::new(ctx(1), FI_SEND), e).prov_errno, 0);
        }
        let mut buf = [0 as c_char; 512];
        // SAFETY: `buf` holds 512 bytes; the result is NUL-terminated.
        let text = unsafe {
            let p = strerror_into(UNREACHABLE_PROV_ERRNO, buf.as_mut_ptr(), buf.len());
            assert_eq!(p, buf.as_ptr());
            core::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
        };
        assert!(
            text.contains("cannot reach the peer") && text.contains("FI_RUSTFAB_IFACE"),
            "{text}"
        );
        // SAFETY: NULL buffer: the static text itself.
        let p = unsafe { strerror_into(UNREACHABLE_PROV_ERRNO, core::ptr::null_mut(), 0) };
        assert_eq!(p, UNREACHABLE_TEXT.as_ptr());
    }

    #[test]
    fn err_data_into_the_callers_buffer() {
        let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        let mut err = CqErrEntry::new(CqEntry::new(ctx(1), FI_RECV), FI_EIO);
        err.prov_errno = 77;
        err.err_data = vec![1, 2, 3, 4, 5, 6, 7, 8];
        q.push_err(err.clone()).unwrap();
        q.push_err(err).unwrap();
        // Smaller buffer: min() bytes, size updated.
        let mut small = [0u8; 4];
        let mut e = err_entry();
        e.err_data = small.as_mut_ptr() as *mut c_void;
        e.err_data_size = small.len();
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert_eq!((e.err, e.prov_errno, e.err_data_size), (FI_EIO, 77, 4));
        assert_eq!(e.err_data, small.as_mut_ptr() as *mut c_void);
        assert_eq!(small, [1, 2, 3, 4]);
        // Bigger buffer: all 8.
        let mut big = [0u8; 32];
        let mut e = err_entry();
        e.err_data = big.as_mut_ptr() as *mut c_void;
        e.err_data_size = big.len();
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert_eq!(e.err_data_size, 8);
        assert_eq!(&big[..9], &[1, 2, 3, 4, 5, 6, 7, 8, 0]);
    }

    #[test]
    fn err_data_in_a_provider_buffer_when_size_is_zero() {
        let q = cq(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        let mut err = CqErrEntry::new(CqEntry::new(ctx(1), FI_RECV), FI_EIO);
        err.err_data = vec![9, 8, 7];
        q.push_err(err).unwrap();
        let mut e = err_entry();
        e.err_data = 0x1234 as *mut c_void; // ignored: size 0
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert_eq!(e.err_data_size, 3);
        assert!(!e.err_data.is_null() && e.err_data != 0x1234 as *mut c_void);
        // SAFETY: the provider buffer holds err_data_size bytes until the next read.
        let got = unsafe { core::slice::from_raw_parts(e.err_data as *const u8, 3) };
        assert_eq!(got, &[9, 8, 7]);
        // No err_data at all: NULL, 0.
        q.push_err(CqErrEntry::new(CqEntry::new(ctx(2), FI_RECV), FI_EIO))
            .unwrap();
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert!(e.err_data.is_null());
        assert_eq!(e.err_data_size, 0);
    }

    /// API < 1.5: the application's struct is the 72-byte
    /// fi_cq_err_entry_1_0; bytes past it are never written, err_data always
    /// points at the provider's buffer.
    #[test]
    fn api_1_4_gets_the_72_byte_entry() {
        let q = Cq::new(
            &cq_attr(&attr(8, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE)),
            fi_version(1, 4),
            Holds::none(),
            0,
        )
        .unwrap();
        let mut err = CqErrEntry::new(CqEntry::new(ctx(3), FI_RECV), FI_EIO);
        err.err_data = vec![5, 5];
        q.push_err(err).unwrap();
        let mut raw = [0xeeu8; 96];
        // The app's own buffer would sit where 1.5 has err_data/err_data_size;
        // it is not looked at.
        // SAFETY: 96 bytes are more than the 72 a 1.4 entry needs.
        assert_eq!(
            unsafe { read_err_c(&q, raw.as_mut_ptr() as *mut fi_cq_err_entry) },
            Ok(1)
        );
        assert!(raw[72..].iter().all(|&b| b == 0xee), "wrote past 72 bytes");
        // SAFETY: 96 readable bytes; the entry is plain old data.
        let e: fi_cq_err_entry = unsafe { (raw.as_ptr() as *const fi_cq_err_entry).read_unaligned() };
        assert_eq!((e.op_context, e.err), (ctx(3), FI_EIO));
        assert!(!e.err_data.is_null());
        // SAFETY: the provider's buffer holds the two bytes.
        assert_eq!(unsafe { *(e.err_data as *const [u8; 2]) }, [5, 5]);
    }

    /// FI_SOURCE_ERR (fi_cq(3)): "fi_cq_readfrom will return -FI_EAVAIL, even
    /// if the data were received successfully", then err FI_EADDRNOTAVAIL
    /// with the raw source address in err_data.
    #[test]
    fn source_err_entry() {
        let q = cq(8, FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE);
        let raw = b"fi_rustfab_shm://00000000deadbeef\0";
        let mut ent = full_entry(1);
        ent.src = FI_ADDR_NOTAVAIL;
        q.push_err(CqErrEntry::source_unknown(ent, raw)).unwrap();
        let mut t = [zeroed::<fi_cq_tagged_entry>(); 1];
        let mut src = [0u64; 1];
        assert_eq!(readfrom(&q, &mut t, 1, &mut src), Err(Error::AVAIL));
        let mut buf = [0u8; 64];
        let mut e = err_entry();
        e.err_data = buf.as_mut_ptr() as *mut c_void;
        e.err_data_size = buf.len();
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert_eq!(e.err, FI_EADDRNOTAVAIL);
        assert_eq!(
            (e.op_context, e.len, e.tag, e.data),
            (ent.op_context, ent.len, ent.tag, ent.data)
        );
        assert_eq!(&buf[..e.err_data_size], &raw[..]);
    }

    /// The overrun event carries no err_data, whatever buffer the
    /// application offers.
    #[test]
    fn overrun_event_in_c() {
        let q = cq(1, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        q.push(CqEntry::new(ctx(1), FI_SEND)).unwrap();
        assert_eq!(q.push(CqEntry::new(ctx(2), FI_SEND)), Err(Error::OVERRUN));
        let mut c = [zeroed::<fi_cq_entry>(); 1];
        assert_eq!(read(&q, &mut c, 1), Ok(1));
        let mut buf = [0u8; 8];
        let mut e = err_entry();
        e.err_data = buf.as_mut_ptr() as *mut c_void;
        e.err_data_size = buf.len();
        assert_eq!(read_err(&q, &mut e), Ok(1));
        assert_eq!((e.err, e.prov_errno), (FI_EOVERRUN, FI_EOVERRUN));
        assert!(e.err_data.is_null() && e.err_data_size == 0 && e.op_context.is_null());
        assert_eq!(read_err(&q, &mut e), Err(Error::OVERRUN));
    }

    #[test]
    fn sread_checks_in_order() {
        let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_NONE);
        let null = core::ptr::null_mut();
        // SAFETY (both calls): NULL buffers are refused before any write.
        unsafe {
            assert_eq!(
                sread_c(&q, null, 1, null as _, core::ptr::null(), 10),
                Err(Error::NOSYS)
            );
            let q = cq(4, FI_CQ_FORMAT_CONTEXT, FI_WAIT_FD);
            assert_eq!(
                sread_c(&q, null, 1, null as _, core::ptr::null(), 10),
                Err(Error::INVAL)
            );
        }
    }
}
