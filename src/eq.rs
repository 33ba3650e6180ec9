//! Event queues (`fi_eq(3)`).
//!
//! An [`Eq`] core owns a bounded FIFO of events (the exact bytes
//! `fi_eq_read` copies out: a `struct fi_eq_entry`, or a `struct
//! fi_eq_cm_entry` plus connection data), a separate error queue, its
//! [`WaitObj`] and a hold on its fabric. Producers are the application
//! (`fi_eq_write`, only with `FI_WRITE`) and rustfab itself through
//! [`Eq::push_event`] / [`Eq::push_error`] (AV async inserts, `FI_MR_COMPLETE`,
//! connection management).
//!
//! Decisions:
//! * **Errors first**, like the CQ: "Attempting to read from an EQ while an
//!   item is in the error queue results in an FI_EAVAIL failure."
//! * **Bounded, never overrun.** `attr.size` (default [`DEFAULT_EQ_SIZE`])
//!   bounds events plus errors; a full EQ answers producers with -FI_EAGAIN
//!   (`fi_eq_write` returns it, rustfab's producers retry), so the overrun
//!   state of fi_eq(3) NOTES never arises. One event holds at most
//!   [`MAX_EVENT_LEN`] bytes.
//! * **`fi_eq_write`** needs `FI_WRITE` at open ("If the FI_WRITE flag is not
//!   set, then the application may not invoke fi_eq_write": -FI_EINVAL, as
//!   the sockets provider returns) and at least a `struct fi_eq_entry` ("all
//!   events starting with a struct fi_eq_entry header"): shorter or NULL
//!   buffers are -FI_EINVAL. Its `flags` are ignored (none is defined).
//! * **`fi_eq_read`** copies `min(len, event size)` bytes and returns that
//!   count (fi_eq(3) lets CM data be cut to "the buffer space provided by the
//!   application"), but never cuts the event's header: a `len` below
//!   `struct fi_eq_entry` (24 bytes; 16 for `fi_eq_cm_entry` events) is
//!   -FI_ETOOSMALL and the event stays queued. `FI_PEEK` leaves it queued;
//!   other flags are ignored.
//! * **`fi_eq_readerr`** fills the 48-byte `fi_eq_err_entry` (the same size
//!   in every API version) with the CQ's `err_data` rule: API ≥ 1.5 and the
//!   application's `err_data_size > 0` → copy `min()` bytes into its buffer;
//!   otherwise point at an EQ-owned buffer "valid until a subsequent read call
//!   against the EQ". `FI_PEEK` is honoured.
//! * **`FI_CONNREQ`**: the `info` inside the event belongs to the application
//!   once read without `FI_PEEK`; events still queued when the EQ closes have
//!   their `info` freed here.
//! * `fi_eq_sread` on `FI_WAIT_NONE`/`FI_WAIT_SET` EQs returns -FI_ENOSYS
//!   ("It is invalid for applications to call this function ...", util's
//!   answer); the timeout is in ms, -FI_EAGAIN when it passes.
//! * Reads progress the fabric's engine plus any engine added later with
//!   [`WaitObj::add_engine`] (passive endpoints' listeners).

use crate::abi::*;
use crate::error::{Error, Result};
use crate::fabric::Fabric;
use crate::ffi::{self, noops, FiObject, HasUsers, Held, Obj, Users};
use crate::sys::Deadline;
use crate::wait::{WaitObj, WaitSet, Waitable};
use core::ffi::{c_char, c_int, c_void};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// Events (plus errors) an EQ holds when `attr.size == 0`.
pub const DEFAULT_EQ_SIZE: usize = 1024;
/// Largest event rustfab queues (header plus CM data).
pub const MAX_EVENT_LEN: usize = 64 * 1024;

const EQ_ENTRY_LEN: usize = core::mem::size_of::<fi_eq_entry>();
const EQ_CM_ENTRY_LEN: usize = core::mem::size_of::<fi_eq_cm_entry>();

/// An error event as `fi_eq_readerr` will return it.
pub struct EqError {
    pub fid: *mut fid,
    pub context: *mut c_void,
    pub data: u64,
    /// Positive FI_E* code.
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}

// SAFETY: `fid` and `context` are handed back to the application unchanged;
// rustfab never dereferences them.
unsafe impl Send for EqError {}

struct Event {
    event: u32,
    bytes: Vec<u8>,
}

impl Event {
    /// The part of the event a read may not cut.
    fn header_len(&self) -> usize {
        let h = match self.event {
            FI_CONNREQ | FI_CONNECTED | FI_SHUTDOWN => EQ_CM_ENTRY_LEN,
            _ => EQ_ENTRY_LEN,
        };
        h.min(self.bytes.len())
    }

    /// The `info` an `FI_CONNREQ` event carries (owned by the event).
    fn connreq_info(&self) -> *mut fi_info {
        if self.event != FI_CONNREQ || self.bytes.len() < EQ_CM_ENTRY_LEN {
            return core::ptr::null_mut();
        }
        // SAFETY: the bytes hold at least a `fi_eq_cm_entry`; read unaligned.
        unsafe { (self.bytes.as_ptr() as *const fi_eq_cm_entry).read_unaligned() }.info
    }
}

struct Queue {
    events: VecDeque<Event>,
    errs: VecDeque<EqError>,
    size: usize,
    /// Provider-owned `err_data` of the last `fi_eq_readerr`.
    err_data: Vec<u8>,
}

impl Queue {
    fn full(&self) -> bool {
        self.events.len() + self.errs.len() >= self.size
    }
    fn ready(&self) -> bool {
        !self.events.is_empty() || !self.errs.is_empty()
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        for e in self.events.drain(..) {
            let info = e.connreq_info();
            // SAFETY: an unread FI_CONNREQ event still owns its info (built by
            // rustfab with libc allocations, like every info it hands out).
            unsafe { crate::attr::free_c_info(info) };
        }
    }
}

/// The EQ core. See the module documentation.
pub struct Eq {
    users: Users,
    context: usize,
    flags: u64,
    api_version: u32,
    wait: WaitObj,
    q: Mutex<Queue>,
    set: Option<Held<WaitSet>>,
    _fabric: Option<Held<Fabric>>,
}

impl FiObject for Eq {
    type Header = fid_eq;
    const CLASS: usize = FI_CLASS_EQ;
}

impl HasUsers for Eq {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Waitable for Eq {
    fn wait_obj(&self) -> &WaitObj {
        &self.wait
    }
    fn ready(&self) -> bool {
        self.q.lock().ready()
    }
}

impl Eq {
    /// Builds an EQ core; `set` for `FI_WAIT_SET`, `fabric` None only for
    /// cores driven directly (unit tests). The caller adds engines.
    pub fn new(
        attr: &fi_eq_attr,
        api_version: u32,
        set: Option<Held<WaitSet>>,
        fabric: Option<Held<Fabric>>,
        context: *mut c_void,
    ) -> Result<Arc<Eq>> {
        if attr.flags & !(FI_WRITE | FI_AFFINITY) != 0 {
            return Err(Error::INVAL);
        }
        if !crate::wait::valid_object_kind(attr.wait_obj) {
            return Err(Error::INVAL);
        }
        let set = if attr.wait_obj == FI_WAIT_SET {
            Some(set.ok_or(Error::INVAL)?)
        } else {
            None
        };
        let wait = WaitObj::new(attr.wait_obj, set.as_ref().map(|s| s.arc().clone()))?;
        let eq = Arc::new(Eq {
            users: Users::default(),
            context: context as usize,
            flags: attr.flags,
            api_version,
            wait,
            q: Mutex::new(Queue {
                events: VecDeque::new(),
                errs: VecDeque::new(),
                size: if attr.size == 0 { DEFAULT_EQ_SIZE } else { attr.size },
                err_data: Vec::new(),
            }),
            set,
            _fabric: fabric,
        });
        if let Some(s) = &eq.set {
            let member: Arc<dyn Waitable> = eq.clone();
            s.add_member(Arc::downgrade(&member));
        }
        Ok(eq)
    }

    pub fn context(&self) -> *mut c_void {
        self.context as *mut c_void
    }

    pub fn wait(&self) -> &WaitObj {
        &self.wait
    }

    /// Queues an event; `entry` is the exact bytes `fi_eq_read` copies out
    /// (a `struct fi_eq_entry`, or a `struct fi_eq_cm_entry` plus CM data).
    /// `Err(EAGAIN)` when the EQ is full. For `FI_CONNREQ` the EQ owns the
    /// `info` until the application reads the event.
    pub fn push_event(&self, event: u32, entry: &[u8]) -> Result<()> {
        if entry.len() > MAX_EVENT_LEN {
            return Err(Error::INVAL);
        }
        {
            let mut q = self.q.lock();
            if q.full() {
                return Err(Error::AGAIN);
            }
            q.events.push_back(Event {
                event,
                bytes: entry.to_vec(),
            });
        }
        self.wait.notify();
        Ok(())
    }

    /// Queues an error event (read with `fi_eq_readerr`). `Err(EAGAIN)` when
    /// the EQ is full.
    pub fn push_error(&self, e: EqError) -> Result<()> {
        {
            let mut q = self.q.lock();
            if q.full() {
                return Err(Error::AGAIN);
            }
            q.errs.push_back(e);
        }
        self.wait.notify();
        Ok(())
    }

    fn before_read(&self) {
        self.wait.on_read();
        self.wait.progress();
    }

    /// `fi_eq_write`.
    ///
    /// # Safety
    /// `buf` must be NULL or valid for reads of `len` bytes.
    pub unsafe fn write_raw(&self, event: u32, buf: *const c_void, len: usize) -> Result<usize> {
        if self.flags & FI_WRITE == 0 {
            return Err(Error::INVAL);
        }
        if buf.is_null() || len < EQ_ENTRY_LEN || len > MAX_EVENT_LEN {
            return Err(Error::INVAL);
        }
        // SAFETY: `buf` holds `len` bytes per the contract; copied at once.
        let bytes = unsafe { core::slice::from_raw_parts(buf as *const u8, len) };
        self.push_event(event, bytes)?;
        Ok(len)
    }

    /// `fi_eq_read`.
    ///
    /// # Safety
    /// `event` must be NULL or writable; `buf` NULL or valid for `len` bytes.
    pub unsafe fn read_raw(&self, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> Result<usize> {
        if buf.is_null() {
            return Err(Error::INVAL);
        }
        self.before_read();
        let mut q = self.q.lock();
        if !q.errs.is_empty() {
            return Err(Error::AVAIL);
        }
        let Some(ev) = q.events.front() else {
            return Err(Error::AGAIN);
        };
        if len < ev.header_len() {
            return Err(Error::TOOSMALL);
        }
        let n = len.min(ev.bytes.len());
        // SAFETY: `buf` holds `len >= n` bytes per the contract.
        unsafe { core::ptr::copy_nonoverlapping(ev.bytes.as_ptr(), buf as *mut u8, n) };
        if !event.is_null() {
            // SAFETY: writable per the contract.
            unsafe { event.write_unaligned(ev.event) };
        }
        if flags & FI_PEEK == 0 {
            // The CONNREQ info (if any) now belongs to the application.
            q.events.pop_front();
        }
        Ok(n)
    }

    /// `fi_eq_readerr`.
    ///
    /// # Safety
    /// `buf` must be NULL or valid for a `struct fi_eq_err_entry`.
    pub unsafe fn read_err_raw(&self, buf: *mut fi_eq_err_entry, flags: u64) -> Result<usize> {
        if buf.is_null() {
            return Err(Error::INVAL);
        }
        self.before_read();
        let mut q = self.q.lock();
        let peek = flags & FI_PEEK != 0;
        let Some(e) = q.errs.front() else {
            return Err(Error::AGAIN);
        };
        let mut out = fi_eq_err_entry {
            fid: e.fid,
            context: e.context,
            data: e.data,
            err: e.err,
            prov_errno: e.prov_errno,
            err_data: core::ptr::null_mut(),
            err_data_size: 0,
        };
        // SAFETY: `buf` is a readable fi_eq_err_entry (48 bytes in every
        // API version).
        let (app_ptr, app_size) = unsafe {
            (
                core::ptr::addr_of!((*buf).err_data).read_unaligned(),
                core::ptr::addr_of!((*buf).err_data_size).read_unaligned(),
            )
        };
        if self.api_version >= fi_version(1, 5) && app_size > 0 && !app_ptr.is_null() {
            let n = app_size.min(e.err_data.len());
            // SAFETY: the application's buffer holds `app_size` bytes.
            unsafe { core::ptr::copy_nonoverlapping(e.err_data.as_ptr(), app_ptr as *mut u8, n) };
            out.err_data = app_ptr;
            out.err_data_size = n;
            if !peek {
                q.errs.pop_front();
            }
        } else if peek {
            // Valid while the entry stays queued (the application serialises
            // access to the EQ while processing errors).
            if !e.err_data.is_empty() {
                out.err_data = e.err_data.as_ptr() as *mut c_void;
            }
            out.err_data_size = e.err_data.len();
        } else {
            let e = q.errs.pop_front().expect("front exists");
            q.err_data = e.err_data;
            if !q.err_data.is_empty() {
                out.err_data = q.err_data.as_mut_ptr() as *mut c_void;
            }
            out.err_data_size = q.err_data.len();
        }
        drop(q);
        // SAFETY: writable per the contract.
        unsafe { buf.write_unaligned(out) };
        Ok(core::mem::size_of::<fi_eq_err_entry>())
    }

    /// `fi_eq_sread`.
    ///
    /// # Safety
    /// As [`Eq::read_raw`].
    pub unsafe fn sread_raw(
        &self,
        event: *mut u32,
        buf: *mut c_void,
        len: usize,
        timeout: i32,
        flags: u64,
    ) -> Result<usize> {
        if !self.wait.can_block() {
            return Err(Error::NOSYS);
        }
        if buf.is_null() {
            return Err(Error::INVAL);
        }
        let deadline = Deadline::from_ms(timeout);
        loop {
            let woke = self.wait.block_until(&|| self.q.lock().ready(), deadline);
            // SAFETY: forwarded from this function's contract.
            match unsafe { self.read_raw(event, buf, len, flags) } {
                Err(Error::AGAIN) if woke.is_ok() && !deadline.expired() => continue,
                r => return r,
            }
        }
    }

    /// `fi_trywait` on this EQ; a member of a wait set defers to its set.
    pub fn trywait(&self) -> Result<()> {
        match &self.set {
            Some(s) => s.trywait(),
            None => self.wait.trywait(&|| self.q.lock().ready()),
        }
    }

    /// `fi_control(FI_GETWAIT / FI_GETWAITOBJ)`.
    ///
    /// # Safety
    /// `arg` must match the command and wait kind.
    pub unsafe fn control(&self, cmd: i32, arg: *mut c_void) -> Result<()> {
        let w = match &self.set {
            Some(s) => &s.obj,
            None => &self.wait,
        };
        match cmd {
            // SAFETY: forwarded from this function's contract.
            FI_GETWAIT => unsafe { w.get_wait(arg) },
            // SAFETY: FI_GETWAITOBJ takes an `enum fi_wait_obj *`.
            FI_GETWAITOBJ => unsafe { ffi::write_out(arg as *mut u32, w.kind_for_getwaitobj()) },
            _ => Err(Error::NOSYS),
        }
    }
}

// ---- the C face ----

static EQ_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(eq_close),
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

/// `fi_eq_open`.
pub fn open(f: &Obj<Fabric>, attr: &fi_eq_attr, ctx: *mut c_void) -> Result<*mut fid_eq> {
    let set = if attr.wait_obj == FI_WAIT_SET {
        // SAFETY: `wait_set` is NULL or the application's fid_wait.
        let s = unsafe { crate::wait::set_for_fabric(attr.wait_set as *mut fid, &f.core) }?;
        Some(Held::new(s))
    } else {
        None
    };
    let eq = Eq::new(attr, f.api_version(), set, Some(Held::new(f.core.clone())), ctx)?;
    eq.wait.add_engine(&f.core.engine)?;
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

/// The EQ core behind a `struct fid*` (for binding AVs, domains, endpoints).
///
/// # Safety
/// `p` must be NULL or readable as a `struct fid`.
pub unsafe fn from_fid(p: *mut fid) -> Result<Arc<Eq>> {
    // SAFETY: per the contract.
    Ok(unsafe { Obj::<Eq>::from_ptr(p as *const c_void) }?.core.clone())
}

/// # Safety
/// `p` must be readable as a `struct fid`.
pub unsafe fn trywait_fid(p: *mut fid) -> Result<()> {
    // SAFETY: per the contract.
    unsafe { Obj::<Eq>::from_ptr(p as *const c_void) }?.core.trywait()
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        ffi::call_obj::<Eq, c_int>("eq close", f as *const c_void, |o| {
            // fi_eq(3): "The EQ must not be bound to any other objects prior
            // to being closed, otherwise the call will return -FI_EBUSY."
            o.core.users.check_idle()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

unsafe extern "C" fn eq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        ffi::call_obj::<Eq, c_int>("eq control", f as *const c_void, |o| {
            o.core.control(cmd, arg)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn eq_read(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_read().
    unsafe {
        ffi::call_obj::<Eq, isize>("fi_eq_read", eq as *const c_void, |o| {
            o.core.read_raw(event, buf, len, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_readerr().
    unsafe {
        ffi::call_obj::<Eq, isize>("fi_eq_readerr", eq as *const c_void, |o| {
            o.core.read_err_raw(buf, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_write(eq: *mut fid_eq, event: u32, buf: *const c_void, len: usize, _flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_write().
    unsafe {
        ffi::call_obj::<Eq, isize>("fi_eq_write", eq as *const c_void, |o| {
            o.core.write_raw(event, buf, len).map(|n| n as isize)
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
        ffi::call_obj::<Eq, isize>("fi_eq_sread", eq as *const c_void, |o| {
            o.core.sread_raw(event, buf, len, timeout, flags).map(|n| n as isize)
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
        ffi::call_obj::<Eq, *const c_char>("fi_eq_strerror", eq as *const c_void, |_| {
            Ok(crate::cq::strerror_into(prov_errno, buf, len))
        })
    }
}
