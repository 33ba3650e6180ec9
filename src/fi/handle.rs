//! Checked recovery of rustfab objects from the `fid` pointers C hands back.
//!
//! Every object rustfab gives to C is an [`Obj<T>`]: the public libfabric
//! header (`fid_cq`, `fid_ep`, ...) first, so that C sees exactly the struct it
//! expects, then a magic word, a poison flag, the count of calls inside the
//! object and the safe Rust core (`Arc<T>`, shareable with objects bound to
//! it). C owns the `Obj` between `create` and `close`; the core may outlive
//! it while an internal user (a progress thread, a bound endpoint) still
//! holds the `Arc`.
//!
//! A pointer from C is read only if it is the address of a live `Obj`
//! ([`live`](crate::fi::live), the registry `create` adds to and `destroy`
//! removes from): a foreign fid, a closed handle or a made-up struct is
//! refused with `-FI_EINVAL` unread.
//!
//! Closing under a caller: a counted call (every close, every blocking call
//! — `fi_cq_sread`, `fi_cntr_wait`, `fi_eq_sread`, `fi_wait` — and every
//! call at all on an object that counts them all: those of `FI_THREAD_SAFE`
//! domains and everything that is not a CQ, counter or endpoint) enters the
//! object ([`Obj::enter`]) before it touches the core and leaves it after.
//! `destroy` marks the object closing (later entries are refused with
//! `-FI_EINVAL`), takes it out of the registry, wakes the threads blocked
//! inside ([`FiObject::wake_for_close`]: they return `-FI_ECANCELED`) and
//! waits until no other call is inside before it drops the core. The memory
//! of an `Obj` is never given back to the allocator: it is kept for the next
//! object of its type, so a call that passed the registry just before the
//! close may still touch the entry count and the flag, which stay valid and
//! tell it the object is gone.
use crate::abi::*;
use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use core::ffi::c_void;
use core::mem::ManuallyDrop;
use parking_lot::Mutex;
use std::any::TypeId;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// A public libfabric object header: `#[repr(C)]` and starting with `struct fid`.
///
/// # Safety
/// Implementors must be `#[repr(C)]` with a `fid` as their first field.
pub(crate) unsafe trait FidHeader: 'static {}
// SAFETY: each of these mirrors starts with `struct fid` (checked against the C
// headers by the ABI test).
unsafe impl FidHeader for fid_fabric {}
unsafe impl FidHeader for fid_domain {}
unsafe impl FidHeader for fid_mr {}
unsafe impl FidHeader for fid_av {}
unsafe impl FidHeader for fid_cq {}
unsafe impl FidHeader for fid_cntr {}
unsafe impl FidHeader for fid_eq {}
unsafe impl FidHeader for fid_wait {}
unsafe impl FidHeader for fid_poll {}
unsafe impl FidHeader for fid_ep {}
unsafe impl FidHeader for fid_pep {}
unsafe impl FidHeader for fid_stx {}
unsafe impl FidHeader for fid {}

/// A Rust core that C sees through a header of type `Header`.
pub(crate) trait FiObject: Send + Sync + Sized + 'static {
    type Header: FidHeader;
    /// The `fid.fclass` value of this object.
    const CLASS: usize;
    /// How [`close_when_idle`](crate::fi::close_when_idle) names its call
    /// (logs, injected panics).
    const CLOSE: &'static str = "close";
    /// The core has failed (the progress thread caught a panic in it): every
    /// call but close gets `-FI_EOTHER`, as for a poisoned object.
    fn failed(&self) -> bool {
        false
    }
    /// Wakes every thread blocked in a call on this object (`fi_close` is
    /// under way): they return `-FI_ECANCELED`. Objects nobody can block on
    /// have nothing to do.
    fn wake_for_close(&self) {}
}

/// The core behind an application's `struct fid*` of class `T::CLASS` (a
/// CQ given to `fi_ep_bind`, an EQ given to `fi_domain_bind`, ...); any
/// other pointer is `-FI_EINVAL`.
pub(crate) fn core_of<T: FiObject>(p: *mut fid) -> Result<Arc<T>> {
    // SAFETY: the reference lives only for the clone of the core, made
    // inside the object (a close waits for it).
    let o = unsafe { Obj::<T>::from_ptr(p as *const c_void) }?;
    o.enter()?;
    let core = Arc::clone(&o.core);
    o.leave();
    Ok(core)
}

/// The class of a live rustfab object (`fi_ep_bind` and the like dispatch
/// on it); any other pointer (NULL, foreign, closed) is `-FI_EINVAL`,
/// without reading it.
#[inline]
pub(crate) fn class_of(p: *const fid) -> Result<usize> {
    if !super::live::contains(p as usize) {
        return Err(Error::INVAL);
    }
    // SAFETY: `p` is a live Obj (registry), which starts with a `struct fid`.
    Ok(unsafe { (*p).fclass })
}

const MAGIC_BASE: u64 = 0x7275_7374_6661_6200; // "rustfab\0"

/// The allocation behind every fid rustfab returns.
#[repr(C)]
pub(crate) struct Obj<T: FiObject> {
    /// What C sees. Must stay the first field.
    pub(crate) hdr: T::Header,
    magic: AtomicU64,
    poisoned: AtomicBool,
    /// Set by `destroy`: the object is going; no call may enter any more.
    closing: AtomicBool,
    /// A close call is under way (a second one at once is `-FI_EBUSY`).
    closer: AtomicBool,
    /// Every call is counted, not only closes and blocking calls.
    count_all: AtomicBool,
    /// Counted calls inside the object now.
    inside: AtomicUsize,
    /// Dropped by `destroy` once no other call is inside; valid whenever
    /// the object is live (a call that entered finds it so).
    pub(crate) core: ManuallyDrop<Arc<T>>,
}

/// The memory of closed objects, by type, for the next `create` of that
/// type (see the module documentation: never freed), oldest first: a closed
/// handle's address comes back only after every other free one of its type,
/// so a stale handle names a newer object as late as possible. At most as
/// many entries per type as objects of that type were ever open at once.
static RECYCLED: Mutex<Option<FastMap<TypeId, VecDeque<usize>>>> = Mutex::new(None);

/// What kind of call a thunk makes ([`call_obj_as`](crate::fi::call_obj_as)).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// Counted only on objects that count every call.
    Plain,
    /// A call that may sleep: always counted, woken by a close.
    Blocking,
    /// `fi_close`: always counted; one at a time.
    Close,
}

impl<T: FiObject> Obj<T> {
    fn magic() -> u64 {
        MAGIC_BASE ^ (T::CLASS as u64) ^ ((core::mem::size_of::<T::Header>() as u64) << 32)
    }

    /// Moves a new object to the heap and returns the header pointer for C;
    /// every call on it is counted.
    pub(crate) fn create(hdr: T::Header, core: Arc<T>) -> *mut T::Header {
        Self::create_counting(hdr, core, true)
    }

    /// As [`create`](Self::create); with `count_all` false only closes and
    /// blocking calls are counted (objects of a domain whose threading level
    /// has the application serialise its calls on the object: no locked
    /// instruction on their data path).
    pub(crate) fn create_counting(hdr: T::Header, core: Arc<T>, count_all: bool) -> *mut T::Header {
        let reused = RECYCLED
            .lock()
            .as_mut()
            .and_then(|m| m.get_mut(&TypeId::of::<T>()))
            .and_then(|q| q.pop_front());
        let p = match reused {
            Some(a) => {
                let p = a as *mut Obj<T>;
                // SAFETY: `p` is the memory of a closed Obj<T> (its core
                // dropped, out of the registry, `closing` set): no call
                // reads `hdr` or `core` of it until `closing` is cleared
                // below, which publishes these writes (Release). Calls
                // that passed the registry before its close may still touch
                // the atomics, which are not rewritten but stored to.
                unsafe {
                    core::ptr::addr_of_mut!((*p).hdr).write(hdr);
                    core::ptr::addr_of_mut!((*p).core).write(ManuallyDrop::new(core));
                    (*p).poisoned.store(false, Ordering::Relaxed);
                    (*p).closer.store(false, Ordering::Relaxed);
                    (*p).count_all.store(count_all, Ordering::Relaxed);
                    (*p).magic.store(Self::magic(), Ordering::Relaxed);
                    (*p).closing.store(false, Ordering::Release);
                }
                p
            }
            None => Box::into_raw(Box::new(Obj {
                hdr,
                magic: AtomicU64::new(Self::magic()),
                poisoned: AtomicBool::new(false),
                closing: AtomicBool::new(false),
                closer: AtomicBool::new(false),
                count_all: AtomicBool::new(count_all),
                inside: AtomicUsize::new(0),
                core: ManuallyDrop::new(core),
            })),
        };
        super::live::insert(p as usize);
        p as *mut T::Header
    }

    /// Enters the object for a counted call; `-FI_EINVAL` once it is
    /// closing (then it is not inside). The count and the flag are ordered
    /// against `destroy`'s (SeqCst both sides): either the close sees this
    /// call inside and waits for it, or this call sees the close and does
    /// not go in. A call that entered leaves with [`Obj::leave`].
    #[inline]
    pub(crate) fn enter(&self) -> Result<()> {
        self.inside.fetch_add(1, Ordering::SeqCst);
        if self.closing.load(Ordering::SeqCst) {
            self.leave();
            return Err(Error::INVAL);
        }
        Ok(())
    }

    /// Ends a call [`Obj::enter`] let in.
    #[inline]
    pub(crate) fn leave(&self) {
        self.inside.fetch_sub(1, Ordering::Release);
    }

    /// Whether every call on this object is counted.
    #[inline(always)]
    pub(crate) fn counts_all(&self) -> bool {
        self.count_all.load(Ordering::Relaxed)
    }

    /// Claims the object for a close call (one at a time): `-FI_EBUSY`
    /// while another thread's close runs. Released by [`Obj::end_close`]
    /// when the close fails and leaves the object open.
    pub(crate) fn begin_close(&self) -> Result<()> {
        if self.closer.swap(true, Ordering::AcqRel) {
            return Err(Error::BUSY);
        }
        Ok(())
    }

    pub(crate) fn end_close(&self) {
        self.closer.store(false, Ordering::Release);
    }

    /// Recovers the object behind a pointer from C: NULL, a pointer that is
    /// not a live rustfab object (foreign, made up, closed) or one of another
    /// class → `-FI_EINVAL`. Nothing is read before the registry says the
    /// pointer is a live `Obj`.
    ///
    /// # Safety
    /// The memory behind the returned reference is never freed, but a close
    /// drops its core: the core may be used only inside the object (between
    /// [`Obj::enter`] and [`Obj::leave`]) or where no close can run meanwhile
    /// (the object's own close; an uncounted call, whose threading level
    /// has the application serialise it with the close). Any pointer value
    /// may be passed.
    #[inline]
    pub(crate) unsafe fn from_ptr<'a>(p: *const c_void) -> Result<&'a Obj<T>> {
        if Self::class_ok(p)? != T::CLASS {
            return Err(Error::INVAL);
        }
        let obj = p as *const Obj<T>;
        // SAFETY: a live object of class T::CLASS is an Obj<T> (one FiObject
        // type per class), created by `create`: the magic word is ours.
        let magic = unsafe { (*obj).magic.load(Ordering::Relaxed) };
        if magic != Self::magic() {
            return Err(Error::INVAL);
        }
        // SAFETY: live (registry), class and magic match: a live Obj<T>.
        Ok(unsafe { &*obj })
    }

    #[inline]
    fn class_ok(p: *const c_void) -> Result<usize> {
        class_of(p as *const fid)
    }

    /// Closes an object from its close call (which is inside it, counted):
    /// marks it closing, takes it out of the registry (a later use of the
    /// pointer, a second `fi_close`, is `-FI_EINVAL` and reads nothing),
    /// wakes the threads blocked in it and waits until every other call has
    /// left, then drops the core and keeps the memory for reuse.
    ///
    /// # Safety
    /// `this` must come from `from_ptr` in the object's close call, and no
    /// other reference to it may be used afterwards (C gave up the pointer
    /// by calling close).
    pub(crate) unsafe fn destroy(this: &Obj<T>) {
        // SAFETY: forwarded; the close call itself is the one inside.
        unsafe { Self::retire(this, 1) }
    }

    /// Frees an object that never reached the application (a failed open):
    /// no call can be inside it.
    ///
    /// # Safety
    /// As for `destroy`, for an object whose pointer nobody else has.
    pub(crate) unsafe fn destroy_unshared(this: &Obj<T>) {
        // SAFETY: forwarded; nobody is inside.
        unsafe { Self::retire(this, 0) }
    }

    /// `destroy` with `own` calls of the caller's inside.
    ///
    /// # Safety
    /// As for `destroy`.
    unsafe fn retire(this: &Obj<T>, own: usize) {
        // SeqCst: ordered against `enter` (its documentation).
        this.closing.store(true, Ordering::SeqCst);
        // SAFETY: forwarded.
        let p = unsafe { Self::unregister(this) };
        this.core.wake_for_close();
        let mut spins = 0u32;
        while this.inside.load(Ordering::SeqCst) > own {
            // Woken waiters leave within a progress pass; a plain call in
            // flight within its own run.
            spins += 1;
            if spins < 100 {
                crate::sys::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        // SAFETY: unregistered just now, retired once.
        unsafe { Self::free_unregistered(p) };
    }

    /// Takes an object out of the registry without freeing it (its address
    /// stays taken: see the CONNREQ quarantine in `fi/pep.rs`). Every use of
    /// the pointer from C is `-FI_EINVAL` from now on.
    ///
    /// # Safety
    /// As for `destroy`; the pointer returned is freed with
    /// `free_unregistered` at most once.
    pub(crate) unsafe fn unregister(this: &Obj<T>) -> *mut Obj<T> {
        let p = this as *const Obj<T> as *mut Obj<T>;
        let was_live = super::live::remove(p as usize);
        debug_assert!(was_live, "unregister of an object not in the registry");
        this.magic.store(0, Ordering::Relaxed);
        p
    }

    /// Drops the core of an object `unregister` returned and keeps its
    /// memory for the next object of the type.
    ///
    /// # Safety
    /// `p` comes from `unregister`, is freed once, and no call uses its
    /// core any more (none is inside, and `closing` is set or nobody else
    /// knows the pointer).
    pub(crate) unsafe fn free_unregistered(p: *mut Obj<T>) {
        // SAFETY: `p` is an Obj from `create`; nothing reads its core
        // (contract), so the core may be dropped in place, once; other
        // threads touch only its atomics.
        unsafe {
            (*p).closing.store(true, Ordering::SeqCst);
            ManuallyDrop::drop(&mut *core::ptr::addr_of_mut!((*p).core));
        }
        RECYCLED
            .lock()
            .get_or_insert_with(FastMap::default)
            .entry(TypeId::of::<T>())
            .or_default()
            .push_back(p as usize);
    }

    /// The `struct fid*` C knows this object by.
    pub(crate) fn fid_ptr(&self) -> *mut fid {
        &self.hdr as *const T::Header as *mut fid
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Relaxed)
    }

    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Relaxed);
    }
}

/// Whether every call on a CQ, counter or endpoint of `d` is counted
/// (`fi/handle.rs`, closing under a caller): not when the domain's threading
/// level has the application serialise the calls on each such object
/// (`FI_THREAD_FID`, `_ENDPOINT`, `_COMPLETION`, `_DOMAIN`, fi_domain(3)), so
/// that a close cannot race a call on it; there only blocking calls and
/// closes are counted, and the data path takes no locked instruction for it.
pub(crate) fn counts_every_call(d: &crate::core::domain::Domain) -> bool {
    !matches!(
        d.domain_attr().threading,
        FI_THREAD_FID | FI_THREAD_ENDPOINT | FI_THREAD_COMPLETION | FI_THREAD_DOMAIN
    )
}

/// Stores `value` through an out-pointer from C.
///
/// # Safety
/// `out` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) -> Result<()> {
    if out.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: non-NULL and writable per the caller's contract.
    unsafe { out.write(value) };
    Ok(())
}

/// Borrows a C struct passed by pointer, NULL → `-FI_EINVAL`.
///
/// # Safety
/// `p` must be NULL or valid for reads of `T` for the returned lifetime.
pub(crate) unsafe fn read_in<'a, T>(p: *const T) -> Result<&'a T> {
    // SAFETY: per the caller's contract.
    unsafe { p.as_ref() }.ok_or(Error::INVAL)
}

/// Borrows a C array, NULL with `n > 0` → `-FI_EINVAL`.
///
/// # Safety
/// When non-NULL, `p` must be valid for reads of `n` elements.
pub(crate) unsafe fn slice_in<'a, T>(p: *const T, n: usize) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: per the caller's contract.
    Ok(unsafe { core::slice::from_raw_parts(p, n) })
}
