//! Triggered operations, the C face (`fi_trigger(3)`): a data-transfer call
//! made with `FI_TRIGGER` (in its flags, or in the operation flags of an
//! alias endpoint, `fi/alias.rs`) is not posted but copied — the message
//! structure and every array it points to — and queued on the counter its
//! `struct fi_triggered_context` names (`core/trigger.rs`). When the
//! counter reaches the threshold the copy is replayed: the same thunk is
//! called again with the copied message and the flags without
//! `FI_TRIGGER`, so a triggered operation is checked and posted exactly as
//! an untriggered one. The buffers themselves are not copied: fi_trigger(3)
//! has the application keep them, and the context, valid until the
//! operation completes.
//!
//! Decisions:
//! * Only `FI_TRIGGER_THRESHOLD` is implemented. `FI_TRIGGER_XPU` needs
//!   `FI_XPU`/`FI_HMEM`, which rustfab does not offer: -FI_ENOSYS ("If a
//!   specific request is not supported by the provider, it will fail the
//!   operation with -FI_ENOSYS"); an unknown event type is -FI_EINVAL, as
//!   is a NULL context or a counter that is not a live rustfab counter.
//! * `FI_TRIGGER` on an endpoint opened without the `FI_TRIGGER` capability
//!   is an unknown flag there: -FI_EBADFLAGS, as before the capability
//!   existed ("An endpoint must be created with the FI_TRIGGER capability
//!   in order for triggered operations to be specified").
//! * The endpoint must be enabled (-FI_EOPBADSTATE), as for any post. What
//!   the post itself would reject (a bad iovec, an unknown address, too
//!   many segments) is found when the operation is issued and reported as
//!   an error completion carrying its context (`report_failure`), the
//!   arrays' counts being bounded here ([`MAX_ARRAY`], -FI_EINVAL).
//! * Closing the endpoint frees the operations it queued ([`forget_ep`]);
//!   closing the counter frees those queued on it (`fi/cntr.rs`).

use super::ep_obj::{with_ep, Ep};
use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cntr::Cntr;
use crate::core::cq_entry::{CqEntry, CqErrEntry};
use crate::core::engine::FrozenBinds;
use crate::core::trigger::{self, Counted, Deferred};
use crate::fi;
use core::ffi::c_void;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

type V = *mut c_void;
type D = *mut *mut c_void;
type E = *mut fid_ep;
pub(crate) type MsgFn = unsafe extern "C" fn(E, *const fi_msg, u64) -> isize;
pub(crate) type TaggedFn = unsafe extern "C" fn(E, *const fi_msg_tagged, u64) -> isize;
pub(crate) type RmaFn = unsafe extern "C" fn(E, *const fi_msg_rma, u64) -> isize;
pub(crate) type AtomicFn = unsafe extern "C" fn(E, *const fi_msg_atomic, u64) -> isize;
pub(crate) type FetchFn = unsafe extern "C" fn(E, *const fi_msg_atomic, *mut fi_ioc, D, usize, u64) -> isize;
pub(crate) type CompareFn =
    unsafe extern "C" fn(E, *const fi_msg_atomic, *const fi_ioc, D, usize, *mut fi_ioc, D, usize, u64) -> isize;

/// Longest array a triggered call may name (iovecs, descriptors, target
/// segments): far above every limit rustfab advertises, so that a post
/// the limits allow is never refused here, and a bound on the copy.
pub(crate) const MAX_ARRAY: usize = 256;

/// Which kind of operation failed to issue: where its error completion
/// goes and which counter counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpClass {
    Send {
        tagged: bool,
    },
    Recv {
        tagged: bool,
    },
    Read,
    Write,
    /// An atomic; `fetch`: one that returns the old value (counted as a read).
    Atomic {
        fetch: bool,
    },
}

/// The error completion of an operation whose issue failed with `err`:
/// on the transmit CQ (the receive CQ for a receive), with the
/// operation's `context`, and one error on the counter that would have
/// counted it.
pub(crate) fn report_failure(binds: &FrozenBinds, class: OpClass, context: usize, err: Error) {
    let b = binds.view();
    let (flags, cq, cntr) = match class {
        OpClass::Send { tagged } => (FI_SEND | if tagged { FI_TAGGED } else { FI_MSG }, b.tx_cq, b.send_cntr),
        OpClass::Recv { tagged } => (FI_RECV | if tagged { FI_TAGGED } else { FI_MSG }, b.rx_cq, b.recv_cntr),
        OpClass::Read => (FI_RMA | FI_READ, b.tx_cq, b.rma.read),
        OpClass::Write => (FI_RMA | FI_WRITE, b.tx_cq, b.rma.write),
        OpClass::Atomic { fetch: true } => (FI_ATOMIC | FI_READ, b.tx_cq, b.rma.read),
        OpClass::Atomic { fetch: false } => (FI_ATOMIC | FI_WRITE, b.tx_cq, b.rma.write),
    };
    if let Some(cq) = cq {
        let entry = CqEntry {
            op_context: context as *mut core::ffi::c_void,
            flags,
            len: 0,
            buf: core::ptr::null_mut(),
            data: 0,
            tag: 0,
            src: FI_ADDR_NOTAVAIL,
        };
        if cq.push_err(CqErrEntry::new(entry, err.0)).is_err() {
            crate::base::log::log_warn!(
                FI_LOG_EP_DATA,
                "a triggered operation failed ({err:?}) and its CQ has no room for the error entry"
            );
        }
    }
    if let Some(c) = cntr {
        c.inc_err();
    }
}

/// A copied C array: `ptr()` is what the replayed call sees (NULL when
/// the application passed NULL).
struct Arr<T> {
    v: Option<Vec<T>>,
    /// The count the application gave (kept as given for the replay).
    n: usize,
}

impl<T: Copy> Arr<T> {
    /// Copies `n` elements at `p` (NULL stays NULL).
    ///
    /// # Safety
    /// `p` must be NULL or valid for `n` elements when `n <= MAX_ARRAY`.
    unsafe fn copy(p: *const T, n: usize) -> Result<Arr<T>> {
        if n > MAX_ARRAY {
            return Err(Error::INVAL);
        }
        if p.is_null() {
            return Ok(Arr { v: None, n });
        }
        // SAFETY: per the contract, non-NULL and within the bound.
        Ok(Arr {
            v: Some(unsafe { fi::slice_in(p, n) }?.to_vec()),
            n,
        })
    }
    fn ptr(&mut self) -> *mut T {
        self.v.as_mut().map_or(core::ptr::null_mut(), |v| v.as_mut_ptr())
    }
}

/// The call to replay, with its message and the copies of its arrays.
enum Call {
    Msg {
        f: MsgFn,
        m: fi_msg,
        iov: Arr<libc::iovec>,
        desc: Arr<V>,
    },
    Tagged {
        f: TaggedFn,
        m: fi_msg_tagged,
        iov: Arr<libc::iovec>,
        desc: Arr<V>,
    },
    Rma {
        f: RmaFn,
        m: fi_msg_rma,
        iov: Arr<libc::iovec>,
        desc: Arr<V>,
        rma: Arr<fi_rma_iov>,
    },
    Atomic {
        m: AtomicMsg,
        then: AtomicThen,
    },
}

/// A `fi_msg_atomic` and its arrays.
struct AtomicMsg {
    m: fi_msg_atomic,
    ioc: Arr<fi_ioc>,
    desc: Arr<V>,
    rma: Arr<fi_rma_ioc>,
}

impl AtomicMsg {
    /// # Safety
    /// `m`'s arrays must hold their counts (when within [`MAX_ARRAY`]).
    unsafe fn copy(m: &fi_msg_atomic) -> Result<AtomicMsg> {
        // SAFETY: forwarded.
        unsafe {
            Ok(AtomicMsg {
                m: *m,
                ioc: Arr::copy(m.msg_iov, m.iov_count)?,
                desc: Arr::copy(m.desc, m.iov_count)?,
                rma: Arr::copy(m.rma_iov, m.rma_iov_count)?,
            })
        }
    }
    fn fixed(&mut self) -> *const fi_msg_atomic {
        self.m.msg_iov = self.ioc.ptr();
        self.m.desc = self.desc.ptr();
        self.m.rma_iov = self.rma.ptr();
        &self.m
    }
}

/// What an atomic call adds to its message.
enum AtomicThen {
    Plain(AtomicFn),
    Fetch {
        f: FetchFn,
        res: Arr<fi_ioc>,
        res_desc: Arr<V>,
    },
    Compare {
        f: CompareFn,
        cmp: Arr<fi_ioc>,
        cmp_desc: Arr<V>,
        res: Arr<fi_ioc>,
        res_desc: Arr<V>,
    },
}

/// One queued operation (`core/trigger.rs`'s [`Deferred`]).
struct Replay {
    /// The endpoint's `fid_ep` (the one the thunk was called on).
    ep: usize,
    flags: u64,
    class: OpClass,
    context: usize,
    call: Call,
}

// SAFETY: the pointers a Replay holds are the application's addresses
// (buffers, descriptors, its context, its endpoint) carried as values and
// handed back to the thunk that would have received them; rustfab reads
// them only inside that thunk, as for any call, and the arrays they sit in
// are the Replay's own copies.
unsafe impl Send for Replay {}

impl Replay {
    /// Calls the thunk again with the copied arguments.
    fn replay(&mut self) -> isize {
        let e = self.ep as E;
        let flags = self.flags;
        // SAFETY: the copies hold what the application passed (their
        // pointers re-aimed at the copies); the endpoint is live: its close
        // frees this operation first (`forget_ep`), and the thunk checks
        // the pointer against the registry of live handles anyway.
        unsafe {
            match &mut self.call {
                Call::Msg { f, m, iov, desc } => {
                    m.msg_iov = iov.ptr();
                    m.desc = desc.ptr();
                    f(e, m, flags)
                }
                Call::Tagged { f, m, iov, desc } => {
                    m.msg_iov = iov.ptr();
                    m.desc = desc.ptr();
                    f(e, m, flags)
                }
                Call::Rma { f, m, iov, desc, rma } => {
                    m.msg_iov = iov.ptr();
                    m.desc = desc.ptr();
                    m.rma_iov = rma.ptr();
                    f(e, m, flags)
                }
                Call::Atomic { m, then } => {
                    let msg = m.fixed();
                    match then {
                        AtomicThen::Plain(f) => f(e, msg, flags),
                        AtomicThen::Fetch { f, res, res_desc } => f(e, msg, res.ptr(), res_desc.ptr(), res.n, flags),
                        AtomicThen::Compare {
                            f,
                            cmp,
                            cmp_desc,
                            res,
                            res_desc,
                        } => {
                            let (nc, nr) = (cmp.n, res.n);
                            f(
                                e,
                                msg,
                                cmp.ptr(),
                                cmp_desc.ptr(),
                                nc,
                                res.ptr(),
                                res_desc.ptr(),
                                nr,
                                flags,
                            )
                        }
                    }
                }
            }
        }
    }
}

impl Deferred for Replay {
    fn issue(&mut self) -> Result<()> {
        match self.replay() {
            0 => Ok(()),
            r if r < 0 && r >= -(i32::MAX as isize) => Err(Error((-r) as i32)),
            _ => Err(Error::OTHER),
        }
    }
    fn fail(self: Box<Self>, err: Error) {
        // The endpoint's bindings: where its completions go.
        if let Ok(ep) = fi::core_of::<Ep>(self.ep as *mut fid) {
            if let Ok(b) = ep.bound() {
                report_failure(b, self.class, self.context, err);
            }
        }
    }
    fn owner(&self) -> usize {
        self.ep
    }
}

/// Counters that have held triggered operations (for [`forget_ep`]);
/// untouched until the first one is queued.
static QUEUED_ON: Mutex<Vec<Weak<Cntr>>> = Mutex::new(Vec::new());
static ANY_QUEUED: AtomicBool = AtomicBool::new(false);

/// The endpoint `ep` is being closed: the operations it queued are freed.
pub(crate) fn forget_ep(ep: usize) {
    if !ANY_QUEUED.load(Ordering::Acquire) {
        return;
    }
    let live: Vec<Arc<Cntr>> = {
        let mut v = QUEUED_ON.lock();
        v.retain(|w| w.strong_count() > 0);
        v.iter().filter_map(Weak::upgrade).collect()
    };
    for c in live {
        c.triggers().purge(ep);
    }
}

fn remember(c: &Arc<Cntr>) {
    let mut v = QUEUED_ON.lock();
    if !v.iter().any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(c))) {
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(c));
    }
    ANY_QUEUED.store(true, Ordering::Release);
}

/// The counter and threshold a triggered context names.
///
/// # Safety
/// `context` must be NULL or a readable `struct fi_triggered_context`.
unsafe fn condition(context: V) -> Result<(Arc<Cntr>, u64)> {
    // SAFETY: per the contract.
    let t = unsafe { fi::read_in(context as *const fi_triggered_context) }?;
    match t.event_type {
        FI_TRIGGER_THRESHOLD => {}
        FI_TRIGGER_XPU => return Err(Error::NOSYS),
        _ => return Err(Error::INVAL),
    }
    // SAFETY: the union's `threshold` member (a pointer and a size_t) is
    // within `trigger` (three pointers), which `t` holds.
    let th = unsafe { &*(t.trigger.as_ptr() as *const fi_trigger_threshold) };
    let c = fi::cntr::from_fid(th.cntr as *mut fid)?;
    Ok((c, th.threshold as u64))
}

/// The message structures a triggered call names: where the triggered
/// context is.
trait Message: Copy {
    fn context(&self) -> V;
}
impl Message for fi_msg {
    fn context(&self) -> V {
        self.context
    }
}
impl Message for fi_msg_tagged {
    fn context(&self) -> V {
        self.context
    }
}
impl Message for fi_msg_rma {
    fn context(&self) -> V {
        self.context
    }
}
impl Message for fi_msg_atomic {
    fn context(&self) -> V {
        self.context
    }
}

/// Queues the call `build` copies from message `m`, made on endpoint `e`
/// with `FI_TRIGGER` in `flags` (a NULL message: -FI_EINVAL); issues it at
/// once if the counter is already at its threshold.
///
/// # Safety
/// `e` and `m` come from the application's call; `build` reads the
/// message's arrays (their contract is the thunk's).
unsafe fn defer<M: Message>(
    what: &'static str,
    e: E,
    m: *const M,
    flags: u64,
    class: OpClass,
    build: impl FnOnce(&M) -> Result<Call>,
) -> isize {
    // SAFETY: forwarded from the application's call.
    unsafe {
        with_ep(what, e as *const c_void, |o| {
            let m = fi::read_in(m)?;
            if o.core.inner.lock().config().caps & FI_TRIGGER == 0 {
                return Err(Error::BADFLAGS);
            }
            o.core.bound()?;
            let (cntr, threshold) = condition(m.context())?;
            let op = Box::new(Replay {
                ep: e as usize,
                flags: flags & !FI_TRIGGER,
                class,
                context: m.context() as usize,
                call: build(m)?,
            });
            cntr.triggers().push(threshold, op)?;
            remember(&cntr);
            let counted: Arc<dyn Counted> = cntr.clone();
            trigger::watch(&counted, &cntr.wait().engines());
            trigger::fire(&*cntr);
            Ok(0isize)
        })
    }
}

/// `fi_sendmsg`/`fi_recvmsg` with `FI_TRIGGER`; `f` is the thunk itself.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn msg(what: &'static str, e: E, m: *const fi_msg, flags: u64, f: MsgFn, recv: bool) -> isize {
    let class = if recv {
        OpClass::Recv { tagged: false }
    } else {
        OpClass::Send { tagged: false }
    };
    // SAFETY: the message's arrays hold their counts (the caller's contract).
    unsafe {
        defer(what, e, m, flags, class, |m| {
            Ok(Call::Msg {
                f,
                m: *m,
                iov: Arr::copy(m.msg_iov, m.iov_count)?,
                desc: Arr::copy(m.desc, m.iov_count)?,
            })
        })
    }
}

/// `fi_tsendmsg`/`fi_trecvmsg` with `FI_TRIGGER`.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn tagged(
    what: &'static str,
    e: E,
    m: *const fi_msg_tagged,
    flags: u64,
    f: TaggedFn,
    recv: bool,
) -> isize {
    let class = if recv {
        OpClass::Recv { tagged: true }
    } else {
        OpClass::Send { tagged: true }
    };
    // SAFETY: as in `msg`.
    unsafe {
        defer(what, e, m, flags, class, |m| {
            Ok(Call::Tagged {
                f,
                m: *m,
                iov: Arr::copy(m.msg_iov, m.iov_count)?,
                desc: Arr::copy(m.desc, m.iov_count)?,
            })
        })
    }
}

/// `fi_readmsg`/`fi_writemsg` with `FI_TRIGGER`.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn rma(what: &'static str, e: E, m: *const fi_msg_rma, flags: u64, f: RmaFn, read: bool) -> isize {
    let class = if read { OpClass::Read } else { OpClass::Write };
    // SAFETY: as in `msg`.
    unsafe {
        defer(what, e, m, flags, class, |m| {
            Ok(Call::Rma {
                f,
                m: *m,
                iov: Arr::copy(m.msg_iov, m.iov_count)?,
                desc: Arr::copy(m.desc, m.iov_count)?,
                rma: Arr::copy(m.rma_iov, m.rma_iov_count)?,
            })
        })
    }
}

/// `fi_atomicmsg` with `FI_TRIGGER`.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn atomic(what: &'static str, e: E, m: *const fi_msg_atomic, flags: u64, f: AtomicFn) -> isize {
    let class = OpClass::Atomic { fetch: false };
    // SAFETY: as in `msg`.
    unsafe {
        defer(what, e, m, flags, class, |m| {
            Ok(Call::Atomic {
                m: AtomicMsg::copy(m)?,
                then: AtomicThen::Plain(f),
            })
        })
    }
}

/// A C array and its descriptors, as the fetch and compare calls pass them.
type IocArgs<P> = (P, D, usize);

/// `fi_fetch_atomicmsg` with `FI_TRIGGER`.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn fetch_atomic(
    what: &'static str,
    e: E,
    m: *const fi_msg_atomic,
    res: IocArgs<*mut fi_ioc>,
    flags: u64,
    f: FetchFn,
) -> isize {
    let class = OpClass::Atomic { fetch: true };
    // SAFETY: as in `msg`; the result arrays hold their count.
    unsafe {
        defer(what, e, m, flags, class, |m| {
            let (res, res_desc) = (Arr::copy(res.0, res.2)?, Arr::copy(res.1, res.2)?);
            let then = AtomicThen::Fetch { f, res, res_desc };
            Ok(Call::Atomic {
                m: AtomicMsg::copy(m)?,
                then,
            })
        })
    }
}

/// `fi_compare_atomicmsg` with `FI_TRIGGER`.
///
/// # Safety
/// The thunk's arguments.
pub(crate) unsafe fn compare_atomic(
    what: &'static str,
    e: E,
    m: *const fi_msg_atomic,
    (cmp, res): (IocArgs<*const fi_ioc>, IocArgs<*mut fi_ioc>),
    flags: u64,
    f: CompareFn,
) -> isize {
    let class = OpClass::Atomic { fetch: true };
    // SAFETY: as in `msg`; the compare and result arrays hold their counts.
    unsafe {
        defer(what, e, m, flags, class, |m| {
            let (cmp, cmp_desc) = (Arr::copy(cmp.0, cmp.2)?, Arr::copy(cmp.1, cmp.2)?);
            let (res, res_desc) = (Arr::copy(res.0, res.2)?, Arr::copy(res.1, res.2)?);
            let then = AtomicThen::Compare {
                f,
                cmp,
                cmp_desc,
                res,
                res_desc,
            };
            Ok(Call::Atomic {
                m: AtomicMsg::copy(m)?,
                then,
            })
        })
    }
}
