//! The C face of event queues: `fi_eq_open`, the `fid_eq` operations, and
//! the C layouts the core does not know: events copied into the
//! application's buffer, `struct fi_eq_err_entry` with fi_eq(3)'s
//! `err_data` rules (API ≥ 1.5 and a caller buffer: copy into it; else point
//! at the EQ-owned bytes), and the `fi_info` an unread `FI_CONNREQ` owns.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::eq::{Eq, EqAttr, ReadMode, MAX_EVENT_LEN};
use crate::core::fabric::Fabric;
use crate::core::users::Held;
use crate::core::wait::Holds;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

impl FiObject for Eq {
    const CLOSE: &'static str = "eq close";
    type Header = fid_eq;
    const CLASS: usize = FI_CLASS_EQ;
    fn wake_for_close(&self) {
        self.wait().close();
    }
}

static EQ_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(fi::close_when_idle::<Eq>),
    bind: Some(noops::no_bind),
    control: Some(eq_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: core::mem::size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

/// The core's form of an `fi_eq_attr` (its wait set is taken in `open`).
fn eq_attr(a: &fi_eq_attr) -> EqAttr {
    EqAttr {
        size: a.size,
        flags: a.flags,
        wait_obj: a.wait_obj,
    }
}

/// `fi_eq_open`.
pub(crate) fn open(f: &Obj<Fabric>, attr: &fi_eq_attr, ctx: *mut c_void) -> Result<*mut fid_eq> {
    let set = if attr.wait_obj == FI_WAIT_SET {
        let s = fi::wait::set_for_fabric(attr.wait_set as *mut fid, &f.core)?;
        Some(Held::new(s))
    } else {
        None
    };
    let holds = Holds {
        parent: Some(Held::new(Arc::clone(&f.core))),
        set,
    };
    let eq = Eq::new(&eq_attr(attr), f.api_version(), holds, Some(release_unread))?;
    eq.wait().add_engine(&f.core.engine)?;
    let hdr = fid_eq {
        fid: fid {
            fclass: FI_CLASS_EQ,
            context: ctx,
            ops: &EQ_FI_OPS,
        },
        ops: &EQ_OPS,
    };
    Ok(Obj::create(hdr, eq))
}

/// An `FI_CONNREQ` event rustfab queued and nobody read still owns its
/// `fi_info` (built with libc allocations, like every info rustfab hands
/// out) and the connection request behind `info->handle`.
fn release_unread(event: u32, bytes: &[u8]) {
    if event != FI_CONNREQ || bytes.len() < core::mem::size_of::<fi_eq_cm_entry>() {
        return;
    }
    // SAFETY: the bytes hold at least a `fi_eq_cm_entry`; read unaligned.
    let info = unsafe { (bytes.as_ptr() as *const fi_eq_cm_entry).read_unaligned() }.info;
    if info.is_null() {
        return;
    }
    // SAFETY: rustfab built this info (pep.rs) and nobody else has it; its
    // handle is looked up in the registry, never read directly.
    unsafe {
        fi::pep::discard_connreq((*info).handle);
        fi::attr::free_c_info(info);
    }
}

/// The EQ core behind a `struct fid*` (for binding AVs, domains, endpoints).
/// Any pointer: one that is not a live rustfab Eq is `-FI_EINVAL`.
pub(crate) fn from_fid(p: *mut fid) -> Result<Arc<Eq>> {
    fi::core_of(p)
}

/// `fi_eq_read` into the application's memory.
///
/// # Safety
/// `event` must be NULL or writable; `buf` NULL or valid for `len` bytes.
unsafe fn read_c(eq: &Eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> Result<usize> {
    if buf.is_null() {
        return Err(Error::INVAL);
    }
    eq.read(len, ReadMode::from_flags(flags), |ev, bytes| {
        // SAFETY: the core hands out at most `len` bytes, which `buf` holds.
        unsafe { write_event(event, buf, ev, bytes) }
    })
}

/// # Safety
/// As [`read_c`], with `bytes.len() <= len`.
unsafe fn write_event(event: *mut u32, buf: *mut c_void, ev: u32, bytes: &[u8]) {
    // SAFETY: per the contract.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len()) };
    if !event.is_null() {
        // SAFETY: writable per the contract.
        unsafe { event.write_unaligned(ev) };
    }
}

/// `fi_eq_readerr` into the application's `struct fi_eq_err_entry`.
///
/// # Safety
/// `buf` must be NULL or valid for a `struct fi_eq_err_entry` (48 bytes in
/// every API version) whose `err_data`, when used, holds `err_data_size`
/// bytes.
unsafe fn read_err_c(eq: &Eq, buf: *mut fi_eq_err_entry, flags: u64) -> Result<usize> {
    if buf.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: `buf` is a readable fi_eq_err_entry per the contract.
    let (app_ptr, app_size) = unsafe {
        (
            core::ptr::addr_of!((*buf).err_data).read_unaligned(),
            core::ptr::addr_of!((*buf).err_data_size).read_unaligned(),
        )
    };
    let into_app = eq.api_version() >= fi_version(1, 5) && app_size > 0 && !app_ptr.is_null();
    let out = eq.read_err(ReadMode::from_flags(flags), |e| {
        let mut out = fi_eq_err_entry {
            fid: e.fid,
            context: e.context,
            data: e.data,
            err: e.err,
            prov_errno: e.prov_errno,
            err_data: core::ptr::null_mut(),
            err_data_size: 0,
        };
        if into_app {
            let n = app_size.min(e.err_data.len());
            // SAFETY: the application's buffer holds `app_size` bytes.
            unsafe { core::ptr::copy_nonoverlapping(e.err_data.as_ptr(), app_ptr as *mut u8, n) };
            out.err_data = app_ptr;
            out.err_data_size = n;
        } else {
            // The EQ keeps these bytes until the next read (core/eq.rs).
            if !e.err_data.is_empty() {
                out.err_data = e.err_data.as_ptr() as *mut c_void;
            }
            out.err_data_size = e.err_data.len();
        }
        out
    })?;
    // SAFETY: writable per the contract.
    unsafe { buf.write_unaligned(out) };
    Ok(core::mem::size_of::<fi_eq_err_entry>())
}

unsafe extern "C" fn eq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<Eq, c_int>("eq control", f as *const c_void, |o| {
            fi::wait::control(o.core.shown_wait(), cmd, arg)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn eq_read(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_read().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_read", eq as *const c_void, |o| {
            read_c(&o.core, event, buf, len, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_readerr().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_readerr", eq as *const c_void, |o| {
            read_err_c(&o.core, buf, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_write(eq: *mut fid_eq, event: u32, buf: *const c_void, len: usize, _flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_write().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_write", eq as *const c_void, |o| {
            // (Longer events are refused by the core too; checked here so
            // that no slice longer than any event is ever formed.)
            if buf.is_null() || len > MAX_EVENT_LEN {
                return Err(Error::INVAL);
            }
            // SAFETY: `buf` holds `len` bytes (fi_eq_write's contract); the
            // core copies them at once.
            let bytes = core::slice::from_raw_parts(buf as *const u8, len);
            o.core.write(event, bytes).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_sread(
    eq: *mut fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    // SAFETY: arguments come from the application through fi_eq_sread().
    unsafe {
        fi::call_obj_blocking::<Eq, isize>("fi_eq_sread", eq as *const c_void, |o| {
            o.core.check_can_block()?;
            if buf.is_null() {
                return Err(Error::INVAL);
            }
            let mode = ReadMode::from_flags(flags);
            o.core
                .sread(len, timeout, mode, |ev, bytes| {
                    // SAFETY: at most `len` bytes, which `buf` holds.
                    write_event(event, buf, ev, bytes)
                })
                .map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_strerror(
    eq: *mut fid_eq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: arguments come from the application through fi_eq_strerror().
    unsafe {
        fi::call_obj::<Eq, *const c_char>("fi_eq_strerror", eq as *const c_void, |_| {
            Ok(fi::cq::strerror_into(prov_errno, buf, len))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::eq::EqError;

    fn eq_v(flags: u64, api: u32) -> Arc<Eq> {
        let a = fi_eq_attr {
            size: 8,
            flags,
            wait_obj: FI_WAIT_NONE,
            signaling_vector: 0,
            wait_set: core::ptr::null_mut(),
        };
        Eq::new(&eq_attr(&a), api, Holds::none(), Some(release_unread)).unwrap()
    }

    fn eq() -> Arc<Eq> {
        eq_v(FI_WRITE, fi_version(1, 17))
    }

    fn err_entry() -> fi_eq_err_entry {
        // SAFETY: plain old data.
        unsafe { core::mem::zeroed() }
    }

    fn read_err(q: &Eq, e: &mut fi_eq_err_entry, flags: u64) -> Result<usize> {
        // SAFETY: a whole fi_eq_err_entry whose err_data matches its size.
        unsafe { read_err_c(q, e, flags) }
    }

    fn mk(n: u8) -> EqError {
        EqError {
            fid: 0x10 as *mut fid,
            context: 0x20 as *mut c_void,
            data: 3,
            err: FI_ECONNREFUSED,
            prov_errno: 111,
            err_data: vec![n; 6],
        }
    }

    #[test]
    fn null_buffers_are_rejected() {
        let q = eq();
        let mut ev = 0;
        // SAFETY (the calls below): NULL is rejected before anything is
        // read or written.
        unsafe {
            assert_eq!(read_c(&q, &mut ev, core::ptr::null_mut(), 24, 0), Err(Error::INVAL));
            assert_eq!(read_err_c(&q, core::ptr::null_mut(), 0), Err(Error::INVAL));
        }
    }

    #[test]
    fn events_and_their_type_are_copied_out() {
        let q = eq();
        let big = [3u8; 100];
        q.write(FI_CONNECTED, &big).unwrap();
        let mut out = [0u8; 200];
        let mut ev = 0;
        // SAFETY: 200 writable bytes.
        let n = unsafe { read_c(&q, &mut ev, out.as_mut_ptr() as *mut c_void, 200, 0) };
        assert_eq!((n, ev), (Ok(100), FI_CONNECTED));
        assert_eq!(&out[..100], &big[..]);
        assert!(out[100..].iter().all(|&b| b == 0));
    }

    #[test]
    fn err_data_both_ways() {
        let q = eq();
        q.push_error(mk(1)).unwrap();
        q.push_error(mk(2)).unwrap();
        q.push_error(mk(3)).unwrap();
        // Caller's buffer, with FI_PEEK first.
        let mut buf = [0u8; 4];
        let mut e = err_entry();
        e.err_data = buf.as_mut_ptr() as *mut c_void;
        e.err_data_size = 4;
        assert_eq!(read_err(&q, &mut e, FI_PEEK), Ok(48));
        assert_eq!(
            (e.err, e.prov_errno, e.data, e.err_data_size),
            (FI_ECONNREFUSED, 111, 3, 4)
        );
        assert_eq!(buf, [1; 4]);
        e.err_data_size = 4;
        assert_eq!(read_err(&q, &mut e, 0), Ok(48));
        assert_eq!((e.fid as usize, e.context as usize), (0x10, 0x20));
        // Provider buffer (size 0), peek then read.
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, FI_PEEK), Ok(48));
        assert_eq!(e.err_data_size, 6);
        // SAFETY: the EQ's buffer holds err_data_size bytes.
        assert_eq!(unsafe { *(e.err_data as *const [u8; 6]) }, [2; 6]);
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, 0), Ok(48));
        // SAFETY: valid until the next read.
        assert_eq!(unsafe { *(e.err_data as *const [u8; 6]) }, [2; 6]);
        // API 1.4 ignores the caller's buffer.
        let old = eq_v(0, fi_version(1, 4));
        old.push_error(mk(4)).unwrap();
        let mut buf = [0u8; 8];
        let mut e = err_entry();
        e.err_data = buf.as_mut_ptr() as *mut c_void;
        e.err_data_size = 8;
        assert_eq!(read_err(&old, &mut e, 0), Ok(48));
        assert_ne!(e.err_data, buf.as_mut_ptr() as *mut c_void);
        assert_eq!(buf, [0; 8]);
        // No err_data: NULL, 0.
        let mut none = mk(5);
        none.err_data.clear();
        q.push_error(none).unwrap();
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, 0), Ok(48));
        assert_eq!(e.data, 3, "the third error");
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, 0), Ok(48));
        assert!(e.err_data.is_null() && e.err_data_size == 0);
        assert_eq!(read_err(&q, &mut e, 0), Err(Error::AGAIN));
    }

    /// A queued FI_CONNREQ owns its info; the EQ frees it if never read.
    #[test]
    fn unread_connreq_info_is_freed() {
        let info = crate::core::attr::Info::default().to_c().unwrap();
        let cm = fi_eq_cm_entry {
            fid: core::ptr::null_mut(),
            info,
        };
        let q = eq();
        // SAFETY: plain old data.
        q.push_event(FI_CONNREQ, unsafe { crate::transport::addr::as_bytes(&cm) })
            .unwrap();
        drop(q); // frees `info` (valgrind/ASan would flag a leak or double free)
    }
}
