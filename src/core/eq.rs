//! Event queues (`fi_eq(3)`).
//!
//! An [`Eq`] core owns a bounded FIFO of events (the exact bytes
//! `fi_eq_read` copies out: a `struct fi_eq_entry`, or a `struct
//! fi_eq_cm_entry` plus connection data; the core never looks inside them
//! beyond their length), a separate error queue, its
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
//!   once read without `FI_PEEK`; events still queued when the EQ is dropped
//!   are handed to the [`ReleaseUnread`] hook the C face gave at open, which
//!   frees their `info`.
//! * `fi_eq_sread` on `FI_WAIT_NONE`/`FI_WAIT_SET` EQs returns -FI_ENOSYS
//!   ("It is invalid for applications to call this function ...", util's
//!   answer); the timeout is in ms, -FI_EAGAIN when it passes.
//! * Reads progress the fabric's engine plus any engine added later with
//!   [`WaitObj::add_engine`] (passive endpoints' listeners).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::fabric::Fabric;
use crate::core::users::{HasUsers, Held, Users};
use crate::core::wait::{Holds, MemberWait, WaitObj, WaitSet, Waitable};
use crate::sys::Deadline;
use core::ffi::c_void;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

/// Events (plus errors) an EQ holds when `attr.size == 0`.
pub(crate) const DEFAULT_EQ_SIZE: usize = 1024;
/// Largest event rustfab queues (header plus CM data).
pub(crate) const MAX_EVENT_LEN: usize = 64 * 1024;

const EQ_ENTRY_LEN: usize = core::mem::size_of::<fi_eq_entry>();
const EQ_CM_ENTRY_LEN: usize = core::mem::size_of::<fi_eq_cm_entry>();

/// An error event as `fi_eq_readerr` will return it.
pub(crate) struct EqError {
    pub(crate) fid: *mut fid,
    pub(crate) context: *mut c_void,
    pub(crate) data: u64,
    /// Positive FI_E* code.
    pub(crate) err: i32,
    pub(crate) prov_errno: i32,
    pub(crate) err_data: Vec<u8>,
}

// SAFETY: `fid` and `context` are handed back to the application unchanged;
// rustfab never dereferences them.
unsafe impl Send for EqError {}

/// Called with every event still queued when the EQ is dropped (what it
/// owns, e.g. an `FI_CONNREQ`'s `fi_info`, is then released).
pub(crate) type ReleaseUnread = fn(event: u32, bytes: &[u8]);

/// Whether a read removes what it returns (`FI_PEEK` leaves it queued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadMode {
    Consume,
    Peek,
}

impl ReadMode {
    /// The mode `flags` of `fi_eq_read`/`fi_eq_readerr` ask for.
    pub(crate) fn from_flags(flags: u64) -> ReadMode {
        if flags & FI_PEEK != 0 {
            ReadMode::Peek
        } else {
            ReadMode::Consume
        }
    }
}

struct Event {
    event: u32,
    bytes: Vec<u8>,
    /// Written by the application (`fi_eq_write`): whatever its bytes point
    /// to is the application's, never released by rustfab.
    from_app: bool,
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
}

struct Queue {
    events: VecDeque<Event>,
    errs: VecDeque<EqError>,
    size: usize,
    /// The last error consumed by `fi_eq_readerr`: its `err_data` is the
    /// provider-owned buffer, valid "until a subsequent read call".
    last_err: Option<EqError>,
    release_unread: Option<ReleaseUnread>,
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
        if let Some(release) = self.release_unread {
            for e in self.events.drain(..).filter(|e| !e.from_app) {
                release(e.event, &e.bytes);
            }
        }
    }
}

/// The EQ core. See the module documentation.
pub(crate) struct Eq {
    users: Users,
    flags: u64,
    api_version: u32,
    wait: WaitObj,
    q: Mutex<Queue>,
    set: Option<Held<WaitSet>>,
    _fabric: Option<Held<Fabric>>,
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

/// What `fi_eq_open` asks for: `struct EqAttr` without its wait set
/// (which arrives as a [`Holds`]) and the unused `signaling_vector`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EqAttr {
    pub(crate) size: usize,
    pub(crate) flags: u64,
    pub(crate) wait_obj: u32,
}

impl Eq {
    /// Builds an EQ core (the caller adds engines). `release_unread` frees
    /// what events still queued at the end own.
    pub(crate) fn new(
        attr: &EqAttr,
        api_version: u32,
        mut holds: Holds<Fabric>,
        release_unread: Option<ReleaseUnread>,
    ) -> Result<Arc<Eq>> {
        if attr.flags & !(FI_WRITE | FI_AFFINITY) != 0 {
            return Err(Error::INVAL);
        }
        if !crate::core::wait::valid_object_kind(attr.wait_obj) {
            return Err(Error::INVAL);
        }
        let set = holds.set_for(attr.wait_obj)?;
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
                last_err: None,
                release_unread,
            }),
            set,
            _fabric: holds.parent,
        });
        if let Some(s) = &eq.set {
            let member: Arc<dyn Waitable> = eq.clone();
            s.add_member(Arc::downgrade(&member));
        }
        Ok(eq)
    }

    pub(crate) fn wait(&self) -> &WaitObj {
        &self.wait
    }

    /// `fid_fabric.api_version` of the parent fabric (`err_data` rules).
    pub(crate) fn api_version(&self) -> u32 {
        self.api_version
    }

    /// Queues an event; `entry` is the exact bytes `fi_eq_read` copies out
    /// (a `struct fi_eq_entry`, or a `struct fi_eq_cm_entry` plus CM data).
    /// `Err(EAGAIN)` when the EQ is full. For `FI_CONNREQ` the EQ owns the
    /// `info` until the application reads the event.
    pub(crate) fn push_event(&self, event: u32, entry: &[u8]) -> Result<()> {
        self.queue_event(Event {
            event,
            bytes: entry.to_vec(),
            from_app: false,
        })
    }

    fn queue_event(&self, ev: Event) -> Result<()> {
        if ev.bytes.len() > MAX_EVENT_LEN {
            return Err(Error::INVAL);
        }
        {
            let mut q = self.q.lock();
            if q.full() {
                return Err(Error::AGAIN);
            }
            q.events.push_back(ev);
        }
        self.wait.notify();
        Ok(())
    }

    /// Queues an error event (read with `fi_eq_readerr`). `Err(EAGAIN)` when
    /// the EQ is full.
    pub(crate) fn push_error(&self, e: EqError) -> Result<()> {
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

    /// `fi_eq_write`: the application's event bytes; returns their length.
    pub(crate) fn write(&self, event: u32, bytes: &[u8]) -> Result<usize> {
        if self.flags & FI_WRITE == 0 {
            return Err(Error::INVAL);
        }
        if !(EQ_ENTRY_LEN..=MAX_EVENT_LEN).contains(&bytes.len()) {
            return Err(Error::INVAL);
        }
        self.queue_event(Event {
            event,
            bytes: bytes.to_vec(),
            from_app: true,
        })?;
        Ok(bytes.len())
    }

    /// `fi_eq_read` into a buffer of `len` bytes: `out` receives the event
    /// and its first `min(len, size)` bytes (the C face copies them out);
    /// returns that count. A `len` that would cut the event's header is
    /// -FI_ETOOSMALL and the event stays queued.
    pub(crate) fn read(&self, len: usize, mode: ReadMode, mut out: impl FnMut(u32, &[u8])) -> Result<usize> {
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
        out(ev.event, &ev.bytes[..n]);
        if mode == ReadMode::Consume {
            // The CONNREQ info (if any) now belongs to the application.
            q.events.pop_front();
        }
        Ok(n)
    }

    /// `fi_eq_readerr`: `f` sees the oldest error. Its `err_data` stays where
    /// it is until the next read call against the EQ (the entry is still
    /// queued when peeking, kept as the last error otherwise), so the C
    /// face may hand out a pointer to it as the provider-owned buffer.
    pub(crate) fn read_err<R>(&self, mode: ReadMode, f: impl FnOnce(&EqError) -> R) -> Result<R> {
        self.before_read();
        let mut q = self.q.lock();
        match mode {
            ReadMode::Peek => q.errs.front().map(f).ok_or(Error::AGAIN),
            ReadMode::Consume => {
                let e = q.errs.pop_front().ok_or(Error::AGAIN)?;
                Ok(f(q.last_err.insert(e)))
            }
        }
    }

    /// -FI_ENOSYS unless blocking reads are allowed ("It is invalid for
    /// applications to call this function if the EQ has been configured
    /// with a wait object of FI_WAIT_NONE or FI_WAIT_SET").
    pub(crate) fn check_can_block(&self) -> Result<()> {
        if self.wait.can_block() {
            Ok(())
        } else {
            Err(Error::NOSYS)
        }
    }

    /// `fi_eq_sread`: [`Eq::read`] after waiting up to `timeout` ms
    /// (negative: forever) for something to read; `Err(CANCELED)` when the
    /// EQ is closed meanwhile ([`WaitObj::close`]).
    pub(crate) fn sread(
        &self,
        len: usize,
        timeout: i32,
        mode: ReadMode,
        mut out: impl FnMut(u32, &[u8]),
    ) -> Result<usize> {
        self.check_can_block()?;
        let deadline = Deadline::from_ms(timeout);
        loop {
            let woke = self.wait.block_until(&|| self.q.lock().ready(), deadline);
            // Closed under the reader: its events go with it.
            if woke == Err(Error::CANCELED) {
                return Err(Error::CANCELED);
            }
            match self.read(len, mode, &mut out) {
                Err(Error::AGAIN) if woke.is_ok() && !deadline.expired() => continue,
                r => return r,
            }
        }
    }

    /// `fi_trywait` on this EQ; a member of a wait set defers to its set.
    pub(crate) fn trywait(&self) -> Result<()> {
        self.member_wait().trywait(&|| self.q.lock().ready())
    }

    fn member_wait(&self) -> MemberWait<'_> {
        MemberWait {
            own: &self.wait,
            set: self.set.as_deref(),
        }
    }

    /// The wait object `FI_GETWAIT`/`FI_GETWAITOBJ` describe: the wait set's
    /// for a member of one (as util does), else the EQ's own.
    pub(crate) fn shown_wait(&self) -> &WaitObj {
        self.member_wait().shown()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn attr(size: usize, flags: u64, wait_obj: u32) -> EqAttr {
        EqAttr { size, flags, wait_obj }
    }

    fn eq(size: usize, flags: u64, wait_obj: u32) -> Arc<Eq> {
        Eq::new(&attr(size, flags, wait_obj), fi_version(1, 17), Holds::none(), None).unwrap()
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
        unsafe { crate::transport::addr::as_bytes(t) }
    }

    fn write(q: &Eq, ev: u32, e: &fi_eq_entry) -> Result<usize> {
        q.write(ev, bytes_of(e))
    }

    /// Reads one event into a Vec through the core's callback.
    fn read_bytes(q: &Eq, len: usize, mode: ReadMode) -> Result<(u32, Vec<u8>)> {
        let mut got = (u32::MAX, Vec::new());
        let n = q.read(len, mode, |ev, b| got = (ev, b.to_vec()))?;
        assert_eq!(n, got.1.len());
        Ok(got)
    }

    fn entry_of(b: &[u8]) -> fi_eq_entry {
        assert_eq!(b.len(), EQ_ENTRY_LEN);
        // SAFETY: 24 bytes of a fi_eq_entry, read unaligned.
        unsafe { (b.as_ptr() as *const fi_eq_entry).read_unaligned() }
    }

    fn read(q: &Eq, mode: ReadMode) -> Result<(u32, fi_eq_entry)> {
        read_bytes(q, EQ_ENTRY_LEN, mode).map(|(ev, b)| (ev, entry_of(&b)))
    }

    fn err(n: u8) -> EqError {
        EqError {
            fid: 0x10 as *mut fid,
            context: 0x20 as *mut c_void,
            data: 3,
            err: FI_ECONNREFUSED,
            prov_errno: 111,
            err_data: vec![n; 6],
        }
    }

    /// fabtests eq_write_read_self / eq_wait_read_peek.
    #[test]
    fn write_read_and_peek() {
        let q = eq(32, FI_WRITE, FI_WAIT_NONE);
        for i in 0..5 {
            assert_eq!(write(&q, FI_NOTIFY, &entry(i)), Ok(24));
        }
        for i in 0..10 {
            let mode = if i & 1 == 1 { ReadMode::Consume } else { ReadMode::Peek };
            let (ev, e) = read(&q, mode).unwrap();
            assert_eq!(ev, FI_NOTIFY);
            assert_eq!(e.context as usize, i / 2);
            assert_eq!(e.data, 7);
        }
        assert_eq!(read(&q, ReadMode::Consume).err(), Some(Error::AGAIN));
        assert_eq!(q.read_err(ReadMode::Consume, |_| ()), Err(Error::AGAIN));
        assert_eq!(ReadMode::from_flags(FI_PEEK), ReadMode::Peek);
        assert_eq!(ReadMode::from_flags(0), ReadMode::Consume);
    }

    /// fabtests eq_size_verify: `size` writes fit; rustfab then pushes back.
    #[test]
    fn size_bounds_the_queue() {
        let q = eq(32, FI_WRITE, FI_WAIT_NONE);
        for i in 0..32 {
            write(&q, FI_NOTIFY, &entry(i)).unwrap();
        }
        assert_eq!(write(&q, FI_NOTIFY, &entry(33)), Err(Error::AGAIN));
        assert_eq!(q.push_error(err(1)), Err(Error::AGAIN));
        read(&q, ReadMode::Consume).unwrap();
        write(&q, FI_NOTIFY, &entry(33)).unwrap();
    }

    #[test]
    fn write_rules() {
        let q = eq(4, 0, FI_WAIT_NONE);
        assert_eq!(write(&q, FI_NOTIFY, &entry(1)), Err(Error::INVAL), "needs FI_WRITE");
        let q = eq(4, FI_WRITE, FI_WAIT_NONE);
        let e = entry(1);
        assert_eq!(
            q.write(FI_NOTIFY, &bytes_of(&e)[..8]),
            Err(Error::INVAL),
            "shorter than a header"
        );
        assert_eq!(q.write(FI_NOTIFY, &vec![0; MAX_EVENT_LEN + 1]), Err(Error::INVAL));
        // Longer events (CM data) are kept whole.
        let big = [3u8; 100];
        assert_eq!(q.write(FI_CONNECTED, &big), Ok(100));
        assert_eq!(read_bytes(&q, 200, ReadMode::Consume), Ok((FI_CONNECTED, big.to_vec())));
    }

    #[test]
    fn short_reads_cut_data_never_the_header() {
        let q = eq(4, FI_WRITE, FI_WAIT_NONE);
        let mut cm = vec![0u8; 16 + 40];
        cm[16..].fill(9);
        q.push_event(FI_SHUTDOWN, &cm).unwrap();
        assert_eq!(read_bytes(&q, 15, ReadMode::Consume), Err(Error::TOOSMALL));
        let (ev, b) = read_bytes(&q, 20, ReadMode::Consume).unwrap();
        assert_eq!((ev, b.len()), (FI_SHUTDOWN, 20), "CM data may be cut to the buffer");
        assert_eq!(&b[16..], &[9; 4]);
        q.push_event(FI_NOTIFY, bytes_of(&entry(5))).unwrap();
        assert_eq!(read_bytes(&q, 16, ReadMode::Consume), Err(Error::TOOSMALL));
        assert_eq!(read(&q, ReadMode::Consume).unwrap().1.context as usize, 5);
    }

    #[test]
    fn errors_first_and_peek_keeps_them() {
        let q = eq(8, FI_WRITE, FI_WAIT_NONE);
        write(&q, FI_NOTIFY, &entry(1)).unwrap();
        q.push_error(err(1)).unwrap();
        q.push_error(err(2)).unwrap();
        assert_eq!(read(&q, ReadMode::Consume).err(), Some(Error::AVAIL));
        let seen = |e: &EqError| {
            (
                e.fid as usize,
                e.context as usize,
                e.data,
                e.err,
                e.prov_errno,
                e.err_data.clone(),
            )
        };
        let first = (0x10, 0x20, 3, FI_ECONNREFUSED, 111, vec![1u8; 6]);
        assert_eq!(q.read_err(ReadMode::Peek, seen), Ok(first.clone()));
        assert_eq!(q.read_err(ReadMode::Consume, seen), Ok(first));
        assert_eq!(q.read_err(ReadMode::Consume, |e| e.err_data.clone()), Ok(vec![2; 6]));
        assert_eq!(q.read_err(ReadMode::Peek, |_| ()), Err(Error::AGAIN));
        assert_eq!(read(&q, ReadMode::Consume).unwrap().1.context as usize, 1);
    }

    /// fi_close from another thread ends a blocked fi_eq_sread with
    /// CANCELED.
    #[test]
    fn close_ends_a_blocked_sread_with_canceled() {
        for kind in [FI_WAIT_UNSPEC, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD] {
            let q = eq(32, FI_WRITE, kind);
            let q2 = q.clone();
            let h = std::thread::spawn(move || q2.sread(24, 10_000, ReadMode::Consume, |_, _| ()));
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            q.wait().close();
            assert_eq!(h.join().unwrap(), Err(Error::CANCELED), "kind {kind}");
            assert!(t.elapsed() < Duration::from_secs(2));
        }
    }

    /// fabtests eq_wait_fd_sread / eq_wait_sread_peek.
    #[test]
    fn sread_timeout_and_peek() {
        let q = eq(32, FI_WRITE, FI_WAIT_FD);
        let mut last = None;
        let t = Instant::now();
        let r = q.sread(24, 100, ReadMode::Consume, |_, b| last = Some(entry_of(b)));
        assert_eq!(r, Err(Error::AGAIN));
        assert!(t.elapsed() >= Duration::from_millis(100));
        write(&q, FI_NOTIFY, &entry(4)).unwrap();
        let t = Instant::now();
        assert_eq!(q.sread(24, 2000, ReadMode::Peek, |_, _| ()), Ok(24));
        assert_eq!(
            q.sread(24, 2000, ReadMode::Consume, |_, b| last = Some(entry_of(b))),
            Ok(24)
        );
        assert!(t.elapsed() < Duration::from_millis(500));
        assert_eq!(last.map(|e| e.context as usize), Some(4));
        let none = eq(4, FI_WRITE, FI_WAIT_NONE);
        assert_eq!(none.sread(24, 10, ReadMode::Consume, |_, _| ()), Err(Error::NOSYS));
        assert_eq!(none.check_can_block(), Err(Error::NOSYS));
        // A producer thread wakes a blocked reader.
        let q2 = q.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            write(&q2, FI_NOTIFY, &entry(9)).unwrap();
        });
        assert_eq!(
            q.sread(24, -1, ReadMode::Consume, |_, b| last = Some(entry_of(b))),
            Ok(24)
        );
        h.join().unwrap();
        assert_eq!(last.map(|e| e.context as usize), Some(9));
    }

    /// fabtests eq_wait_fd_poll: trywait, fd quiet, write, fd readable.
    #[test]
    fn fd_trywait_and_poll() {
        let q = eq(32, FI_WRITE, FI_WAIT_FD);
        let Ok(crate::core::wait::NativeWait::Fd(fd)) = q.shown_wait().native() else {
            panic!("an FD EQ shows an fd")
        };
        assert_eq!(q.trywait(), Ok(()));
        assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        write(&q, FI_NOTIFY, &entry(1)).unwrap();
        assert!(crate::sys::poll_readable(fd, Some(Duration::ZERO)));
        assert_eq!(q.trywait(), Err(Error::AGAIN));
        read(&q, ReadMode::Consume).unwrap();
        assert_eq!(q.trywait(), Ok(()));
        assert!(!crate::sys::poll_readable(fd, Some(Duration::ZERO)));
    }

    #[test]
    fn bad_attributes() {
        let mk = |a: EqAttr| Eq::new(&a, fi_version(1, 17), Holds::none(), None).err();
        assert_eq!(mk(attr(0, FI_SEND, FI_WAIT_NONE)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, 0, 42)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, 0, FI_WAIT_SET)), Some(Error::INVAL));
        assert_eq!(mk(attr(0, FI_WRITE | FI_AFFINITY, FI_WAIT_MUTEX_COND)), None);
        assert_eq!(eq(0, 0, FI_WAIT_NONE).q.lock().size, DEFAULT_EQ_SIZE);
    }

    /// Events still queued when the EQ goes away are released through the
    /// hook (the C face frees an FI_CONNREQ's info there); read ones are not.
    #[test]
    fn unread_events_are_released() {
        static RELEASED: AtomicUsize = AtomicUsize::new(0);
        fn count(event: u32, bytes: &[u8]) {
            assert_eq!((event, bytes.len()), (FI_CONNREQ, 20));
            RELEASED.fetch_add(1, Ordering::Relaxed);
        }
        let q = Eq::new(
            &attr(8, FI_WRITE, FI_WAIT_NONE),
            fi_version(1, 17),
            Holds::none(),
            Some(count),
        )
        .unwrap();
        for _ in 0..3 {
            q.push_event(FI_CONNREQ, &[0; 20]).unwrap();
        }
        // The application's own FI_CONNREQ events are not rustfab's to free.
        assert_eq!(q.write(FI_CONNREQ, &[0; 24]), Ok(24));
        read_bytes(&q, 64, ReadMode::Consume).unwrap();
        drop(q);
        assert_eq!(RELEASED.load(Ordering::Relaxed), 2);
    }

    /// A wait set with two CQs and one EQ: wakes for the EQ's event, times
    /// out otherwise, and stays busy while it has members.
    #[test]
    fn wait_set_with_cqs_and_an_eq() {
        for kind in [FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_UNSPEC, FI_WAIT_YIELD] {
            let set = WaitSet::new(kind, None).unwrap();
            let cq_attr = crate::core::cq::CqAttr {
                size: 4,
                flags: 0,
                format: FI_CQ_FORMAT_CONTEXT,
                wait_obj: FI_WAIT_SET,
                wait_cond: 0,
            };
            let mk_cq = || {
                let holds = Holds {
                    parent: None,
                    set: Some(Held::new(set.clone())),
                };
                crate::core::cq::Cq::new(&cq_attr, fi_version(1, 17), holds, 0).unwrap()
            };
            let (c1, c2) = (mk_cq(), mk_cq());
            let q = Eq::new(
                &attr(8, FI_WRITE, FI_WAIT_SET),
                fi_version(1, 17),
                Holds {
                    parent: None,
                    set: Some(Held::new(set.clone())),
                },
                None,
            )
            .unwrap();
            assert_eq!(set.users().count(), 3);
            let t = Instant::now();
            assert_eq!(set.wait(50), Err(Error::TIMEDOUT), "kind {kind}");
            assert!(t.elapsed() >= Duration::from_millis(50));
            let q2 = q.clone();
            let h = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                write(&q2, FI_NOTIFY, &entry(1)).unwrap();
            });
            assert_eq!(set.wait(10_000), Ok(()), "kind {kind}");
            h.join().unwrap();
            assert_eq!(read(&q, ReadMode::Consume).unwrap().1.context as usize, 1);
            assert_eq!(set.trywait(), Ok(()));
            c2.push(crate::core::cq::CqEntry::default()).unwrap();
            assert_eq!(set.trywait(), Err(Error::AGAIN));
            drop((c1, c2, q));
            assert_eq!(set.users().count(), 0);
        }
    }
}
