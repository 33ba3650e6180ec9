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
use crate::base::error::{Error, Result};
use crate::core::fabric::Fabric;
use crate::core::users::{HasUsers, Held, Users};
use crate::core::wait::{MemberWait, WaitObj, WaitSet, Waitable};
use crate::fi::{self, noops, FiObject, Obj};
use crate::sys::Deadline;
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
            if !info.is_null() {
                // SAFETY: the info was built by rustfab; its handle is NULL or
                // the connection request rustfab created for it.
                unsafe { crate::fi::pep::discard_connreq((*info).handle) };
            }
            // SAFETY: an unread FI_CONNREQ event still owns its info (built by
            // rustfab with libc allocations, like every info it hands out).
            unsafe { crate::fi::attr::free_c_info(info) };
        }
    }
}

/// The EQ core. See the module documentation.
pub struct Eq {
    users: Users,
    flags: u64,
    api_version: u32,
    wait: WaitObj,
    q: Mutex<Queue>,
    set: Option<Held<WaitSet>>,
    _fabric: Option<Held<Fabric>>,
}

impl FiObject for Eq {
    const CLOSE: &'static str = "eq close";
    type Header = fid_eq;
    const CLASS: usize = FI_CLASS_EQ;
}

impl HasUsers for Eq {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Waitable for Eq {
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
    ) -> Result<Arc<Eq>> {
        if attr.flags & !(FI_WRITE | FI_AFFINITY) != 0 {
            return Err(Error::INVAL);
        }
        if !crate::core::wait::valid_object_kind(attr.wait_obj) {
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
        if buf.is_null() || !(EQ_ENTRY_LEN..=MAX_EVENT_LEN).contains(&len) {
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
        self.member_wait().trywait(&|| self.q.lock().ready())
    }

    fn member_wait(&self) -> MemberWait<'_> {
        MemberWait {
            own: &self.wait,
            set: self.set.as_deref(),
        }
    }

    /// `fi_control(FI_GETWAIT / FI_GETWAITOBJ)`.
    ///
    /// # Safety
    /// `arg` must match the command and wait kind.
    pub unsafe fn control(&self, cmd: i32, arg: *mut c_void) -> Result<()> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.member_wait().control(cmd, arg) }.unwrap_or(Err(Error::NOSYS))
    }
}

// ---- the C face ----

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

/// `fi_eq_open`.
pub fn open(f: &Obj<Fabric>, attr: &fi_eq_attr, ctx: *mut c_void) -> Result<*mut fid_eq> {
    let set = if attr.wait_obj == FI_WAIT_SET {
        // SAFETY: `wait_set` is NULL or the application's fid_wait.
        let s = unsafe { crate::core::wait::set_for_fabric(attr.wait_set as *mut fid, &f.core) }?;
        Some(Held::new(s))
    } else {
        None
    };
    let eq = Eq::new(attr, f.api_version(), set, Some(Held::new(f.core.clone())))?;
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
    unsafe { fi::core_of(p) }
}

unsafe extern "C" fn eq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<Eq, c_int>("eq control", f as *const c_void, |o| {
            o.core.control(cmd, arg)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn eq_read(eq: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_read().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_read", eq as *const c_void, |o| {
            o.core.read_raw(event, buf, len, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_readerr(eq: *mut fid_eq, buf: *mut fi_eq_err_entry, flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_readerr().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_readerr", eq as *const c_void, |o| {
            o.core.read_err_raw(buf, flags).map(|n| n as isize)
        })
    }
}

unsafe extern "C" fn eq_write(eq: *mut fid_eq, event: u32, buf: *const c_void, len: usize, _flags: u64) -> isize {
    // SAFETY: arguments come from the application through fi_eq_write().
    unsafe {
        fi::call_obj::<Eq, isize>("fi_eq_write", eq as *const c_void, |o| {
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
        fi::call_obj::<Eq, isize>("fi_eq_sread", eq as *const c_void, |o| {
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
        fi::call_obj::<Eq, *const c_char>("fi_eq_strerror", eq as *const c_void, |_| {
            Ok(crate::core::cq::strerror_into(prov_errno, buf, len))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn attr(size: usize, flags: u64, wait_obj: u32) -> fi_eq_attr {
        fi_eq_attr {
            size,
            flags,
            wait_obj,
            signaling_vector: 0,
            wait_set: core::ptr::null_mut(),
        }
    }

    fn eq_v(size: usize, flags: u64, wait_obj: u32, api: u32) -> Arc<Eq> {
        Eq::new(&attr(size, flags, wait_obj), api, None, None).unwrap()
    }

    fn eq(size: usize, flags: u64, wait_obj: u32) -> Arc<Eq> {
        eq_v(size, flags, wait_obj, fi_version(1, 17))
    }

    fn entry(ctx: usize) -> fi_eq_entry {
        fi_eq_entry {
            fid: core::ptr::null_mut(),
            context: ctx as *mut c_void,
            data: 7,
        }
    }

    fn bytes_of<T>(t: &T) -> &[u8] {
        // SAFETY: the EQ structs are plain old data.
        unsafe { core::slice::from_raw_parts(t as *const T as *const u8, core::mem::size_of::<T>()) }
    }

    fn write(q: &Eq, ev: u32, e: &fi_eq_entry) -> Result<usize> {
        // SAFETY: `e` is a readable fi_eq_entry.
        unsafe {
            q.write_raw(
                ev,
                e as *const fi_eq_entry as *const c_void,
                core::mem::size_of::<fi_eq_entry>(),
            )
        }
    }

    fn read(q: &Eq, flags: u64) -> Result<(u32, fi_eq_entry)> {
        let mut ev = u32::MAX;
        let mut e = entry(0);
        // SAFETY: `e` is a writable fi_eq_entry of the length passed.
        let n = unsafe {
            q.read_raw(
                &mut ev,
                &mut e as *mut fi_eq_entry as *mut c_void,
                core::mem::size_of::<fi_eq_entry>(),
                flags,
            )
        }?;
        assert_eq!(n, core::mem::size_of::<fi_eq_entry>());
        Ok((ev, e))
    }

    fn read_err(q: &Eq, e: &mut fi_eq_err_entry, flags: u64) -> Result<usize> {
        // SAFETY: a whole fi_eq_err_entry whose err_data matches its size.
        unsafe { q.read_err_raw(e, flags) }
    }

    fn err_entry() -> fi_eq_err_entry {
        // SAFETY: plain old data.
        unsafe { core::mem::zeroed() }
    }

    /// fabtests eq_write_read_self / eq_wait_read_peek.
    #[test]
    fn write_read_and_peek() {
        let q = eq(32, FI_WRITE, FI_WAIT_NONE);
        for i in 0..5 {
            assert_eq!(write(&q, FI_NOTIFY, &entry(i)), Ok(24));
        }
        for i in 0..10 {
            let (ev, e) = read(&q, if i & 1 == 1 { 0 } else { FI_PEEK }).unwrap();
            assert_eq!(ev, FI_NOTIFY);
            assert_eq!(e.context as usize, i / 2);
            assert_eq!(e.data, 7);
        }
        assert_eq!(read(&q, 0).err(), Some(Error::AGAIN));
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, 0), Err(Error::AGAIN));
    }

    /// fabtests eq_size_verify: `size` writes fit; rustfab then pushes back.
    #[test]
    fn size_bounds_the_queue() {
        let q = eq(32, FI_WRITE, FI_WAIT_NONE);
        for i in 0..32 {
            write(&q, FI_NOTIFY, &entry(i)).unwrap();
        }
        assert_eq!(write(&q, FI_NOTIFY, &entry(33)), Err(Error::AGAIN));
        assert_eq!(
            q.push_error(EqError {
                fid: core::ptr::null_mut(),
                context: core::ptr::null_mut(),
                data: 0,
                err: FI_EIO,
                prov_errno: 0,
                err_data: vec![],
            }),
            Err(Error::AGAIN)
        );
        read(&q, 0).unwrap();
        write(&q, FI_NOTIFY, &entry(33)).unwrap();
    }

    #[test]
    fn write_rules() {
        let q = eq(4, 0, FI_WAIT_NONE);
        assert_eq!(write(&q, FI_NOTIFY, &entry(1)), Err(Error::INVAL), "needs FI_WRITE");
        let q = eq(4, FI_WRITE, FI_WAIT_NONE);
        let e = entry(1);
        // SAFETY: 8 readable bytes (a too-short event is what is under test).
        let r = unsafe { q.write_raw(FI_NOTIFY, &e as *const fi_eq_entry as *const c_void, 8) };
        assert_eq!(r, Err(Error::INVAL));
        // SAFETY: NULL is rejected before any read.
        assert_eq!(
            unsafe { q.write_raw(FI_NOTIFY, core::ptr::null(), 24) },
            Err(Error::INVAL)
        );
        // Longer events (CM data) are kept whole.
        let big = [3u8; 100];
        // SAFETY: 100 readable bytes.
        assert_eq!(
            unsafe { q.write_raw(FI_CONNECTED, big.as_ptr() as *const c_void, 100) },
            Ok(100)
        );
        let mut out = [0u8; 200];
        let mut ev = 0;
        // SAFETY: 200 writable bytes.
        let n = unsafe { q.read_raw(&mut ev, out.as_mut_ptr() as *mut c_void, 200, 0) };
        assert_eq!((n, ev), (Ok(100), FI_CONNECTED));
        assert_eq!(&out[..100], &big[..]);
    }

    #[test]
    fn short_reads_cut_data_never_the_header() {
        let q = eq(4, FI_WRITE, FI_WAIT_NONE);
        let mut cm = vec![0u8; 16 + 40];
        cm[16..].fill(9);
        q.push_event(FI_SHUTDOWN, &cm).unwrap();
        let mut out = [0u8; 64];
        let mut ev = 0;
        // SAFETY (these raw reads): `out` holds 64 bytes, every len is <= 64.
        let r = unsafe { q.read_raw(&mut ev, out.as_mut_ptr() as *mut c_void, 15, 0) };
        assert_eq!(r, Err(Error::TOOSMALL));
        // SAFETY: as above.
        let r = unsafe { q.read_raw(&mut ev, out.as_mut_ptr() as *mut c_void, 20, 0) };
        assert_eq!(r, Ok(20), "CM data may be cut to the buffer");
        q.push_event(FI_NOTIFY, bytes_of(&entry(5))).unwrap();
        // SAFETY: as above.
        let r = unsafe { q.read_raw(&mut ev, out.as_mut_ptr() as *mut c_void, 16, 0) };
        assert_eq!(r, Err(Error::TOOSMALL));
        // SAFETY: NULL is rejected first.
        let r = unsafe { q.read_raw(&mut ev, core::ptr::null_mut(), 24, 0) };
        assert_eq!(r, Err(Error::INVAL));
        assert_eq!(read(&q, 0).unwrap().1.context as usize, 5);
    }

    #[test]
    fn errors_first_and_err_data_both_ways() {
        let q = eq(8, FI_WRITE, FI_WAIT_NONE);
        write(&q, FI_NOTIFY, &entry(1)).unwrap();
        let mk = |n: u8| EqError {
            fid: 0x10 as *mut fid,
            context: 0x20 as *mut c_void,
            data: 3,
            err: FI_ECONNREFUSED,
            prov_errno: 111,
            err_data: vec![n; 6],
        };
        q.push_error(mk(1)).unwrap();
        q.push_error(mk(2)).unwrap();
        q.push_error(mk(3)).unwrap();
        assert_eq!(read(&q, 0).err(), Some(Error::AVAIL));
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
        let old = eq_v(8, 0, FI_WAIT_NONE, fi_version(1, 4));
        old.push_error(mk(4)).unwrap();
        let mut buf = [0u8; 8];
        let mut e = err_entry();
        e.err_data = buf.as_mut_ptr() as *mut c_void;
        e.err_data_size = 8;
        assert_eq!(read_err(&old, &mut e, 0), Ok(48));
        assert_ne!(e.err_data, buf.as_mut_ptr() as *mut c_void);
        assert_eq!(buf, [0; 8]);
        // Remaining: one error, then the event.
        let mut e = err_entry();
        assert_eq!(read_err(&q, &mut e, 0), Ok(48));
        assert_eq!(read(&q, 0).unwrap().1.context as usize, 1);
    }

    /// fabtests eq_wait_fd_sread / eq_wait_sread_peek.
    #[test]
    fn sread_timeout_and_peek() {
        let q = eq(32, FI_WRITE, FI_WAIT_FD);
        let mut ev = 0;
        let mut e = entry(0);
        let ep = &mut e as *mut fi_eq_entry as *mut c_void;
        let t = Instant::now();
        // SAFETY (the sread calls here): `ep` is a writable 24-byte entry.
        let r = unsafe { q.sread_raw(&mut ev, ep, 24, 100, 0) };
        assert_eq!(r, Err(Error::AGAIN));
        assert!(t.elapsed() >= Duration::from_millis(100));
        write(&q, FI_NOTIFY, &entry(4)).unwrap();
        let t = Instant::now();
        // SAFETY: as above.
        assert_eq!(unsafe { q.sread_raw(&mut ev, ep, 24, 2000, FI_PEEK) }, Ok(24));
        // SAFETY: as above.
        assert_eq!(unsafe { q.sread_raw(&mut ev, ep, 24, 2000, 0) }, Ok(24));
        assert!(t.elapsed() < Duration::from_millis(500));
        assert_eq!(e.context as usize, 4);
        let none = eq(4, FI_WRITE, FI_WAIT_NONE);
        // SAFETY: as above.
        assert_eq!(unsafe { none.sread_raw(&mut ev, ep, 24, 10, 0) }, Err(Error::NOSYS));
        // A producer thread wakes a blocked reader.
        let q2 = q.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            write(&q2, FI_NOTIFY, &entry(9)).unwrap();
        });
        // SAFETY: as above.
        assert_eq!(unsafe { q.sread_raw(&mut ev, ep, 24, -1, 0) }, Ok(24));
        h.join().unwrap();
        assert_eq!(e.context as usize, 9);
    }

    /// fabtests eq_wait_fd_poll: trywait, fd quiet, write, fd readable.
    #[test]
    fn fd_trywait_and_poll() {
        let q = eq(32, FI_WRITE, FI_WAIT_FD);
        let mut fd = -1;
        // SAFETY: FD kind takes an int*.
        unsafe { q.control(FI_GETWAIT, &mut fd as *mut i32 as *mut c_void) }.unwrap();
        assert_eq!(q.trywait(), Ok(()));
        assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        write(&q, FI_NOTIFY, &entry(1)).unwrap();
        assert!(crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        assert_eq!(q.trywait(), Err(Error::AGAIN));
        read(&q, 0).unwrap();
        assert_eq!(q.trywait(), Ok(()));
        assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
    }

    #[test]
    fn bad_attributes() {
        let mk = |a: fi_eq_attr| Eq::new(&a, fi_version(1, 17), None, None).err();
        assert_eq!(mk(attr(0, FI_SEND, FI_WAIT_NONE)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, 0, 42)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, 0, FI_WAIT_SET)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, FI_WRITE | FI_AFFINITY, FI_WAIT_MUTEX_COND)), None);
        assert_eq!(q_size(&eq(0, 0, FI_WAIT_NONE)), DEFAULT_EQ_SIZE);
    }

    fn q_size(q: &Eq) -> usize {
        q.q.lock().size
    }

    /// A queued FI_CONNREQ owns its info; the EQ frees it if never read.
    #[test]
    fn unread_connreq_info_is_freed() {
        let info = crate::core::attr::Info::default().to_c().unwrap();
        let cm = fi_eq_cm_entry {
            fid: core::ptr::null_mut(),
            info,
        };
        let q = eq(4, 0, FI_WAIT_NONE);
        q.push_event(FI_CONNREQ, bytes_of(&cm)).unwrap();
        drop(q); // frees `info` (valgrind/ASan would flag a leak or double free)
    }

    /// A wait set with two CQs and one EQ: wakes for the EQ's event, times
    /// out otherwise, and stays busy while it has members.
    #[test]
    fn wait_set_with_cqs_and_an_eq() {
        for kind in [FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_UNSPEC, FI_WAIT_YIELD] {
            let set = WaitSet::new(kind).unwrap();
            let cq_attr = fi_cq_attr {
                size: 4,
                flags: 0,
                format: FI_CQ_FORMAT_CONTEXT,
                wait_obj: FI_WAIT_SET,
                signaling_vector: 0,
                wait_cond: 0,
                wait_set: core::ptr::null_mut(),
            };
            let mk_cq = || {
                crate::core::cq::Cq::new(
                    &cq_attr,
                    fi_version(1, 17),
                    Some(Held::new(set.clone())),
                    None,
                    core::ptr::null_mut(),
                )
                .unwrap()
            };
            let (c1, c2) = (mk_cq(), mk_cq());
            let q = Eq::new(
                &attr(8, FI_WRITE, FI_WAIT_SET),
                fi_version(1, 17),
                Some(Held::new(set.clone())),
                None,
            )
            .unwrap();
            assert_eq!(set.users().count(), 3);
            let t = Instant::now();
            assert_eq!(set.wait(50), Err(Error::AGAIN), "kind {kind}");
            assert!(t.elapsed() >= Duration::from_millis(50));
            let q2 = q.clone();
            let h = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                write(&q2, FI_NOTIFY, &entry(1)).unwrap();
            });
            assert_eq!(set.wait(10_000), Ok(()), "kind {kind}");
            h.join().unwrap();
            assert_eq!(read(&q, 0).unwrap().1.context as usize, 1);
            assert_eq!(set.trywait(), Ok(()));
            c2.push(crate::core::cq::CqEntry::default()).unwrap();
            assert_eq!(set.trywait(), Err(Error::AGAIN));
            drop((c1, c2, q));
            assert_eq!(set.users().count(), 0);
        }
    }
}
