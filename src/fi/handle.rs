//! Checked recovery of rustfab objects from the `fid` pointers C hands back.
//!
//! Every object rustfab gives to C is an [`Obj<T>`]: the public libfabric
//! header (`fid_cq`, `fid_ep`, ...) first, so that C sees exactly the struct it
//! expects, then a magic word, a poison flag and the safe Rust core
//! (`Arc<T>`, shareable with objects bound to it). C owns the `Obj` between
//! `create` and `close`; the core may outlive it while an internal user (a
//! progress thread, a bound endpoint) still holds the `Arc`.
//!
//! A pointer from C is read only if it is the address of a live `Obj`
//! ([`live`](crate::fi::live), the registry `create` adds to and `destroy`
//! removes from): a foreign fid, a closed handle or a made-up struct is
//! refused with `-FI_EINVAL` unread.

use crate::abi::*;
use crate::base::error::{Error, Result};
use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
}

/// The core behind an application's `struct fid*` of class `T::CLASS` (a
/// CQ given to `fi_ep_bind`, an EQ given to `fi_domain_bind`, ...); any
/// other pointer is `-FI_EINVAL`.
pub(crate) fn core_of<T: FiObject>(p: *mut fid) -> Result<Arc<T>> {
    // SAFETY: the reference lives only for the clone of the core.
    Ok(unsafe { Obj::<T>::from_ptr(p as *const c_void) }?.core.clone())
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
    pub(crate) core: Arc<T>,
}

impl<T: FiObject> Obj<T> {
    fn magic() -> u64 {
        MAGIC_BASE ^ (T::CLASS as u64) ^ ((core::mem::size_of::<T::Header>() as u64) << 32)
    }

    /// Moves a new object to the heap and returns the header pointer for C.
    pub(crate) fn create(hdr: T::Header, core: Arc<T>) -> *mut T::Header {
        let b = Box::new(Obj {
            hdr,
            magic: AtomicU64::new(Self::magic()),
            poisoned: AtomicBool::new(false),
            core,
        });
        let p = Box::into_raw(b);
        super::live::insert(p as usize);
        p as *mut T::Header
    }

    /// Recovers the object behind a pointer from C: NULL, a pointer that is
    /// not a live rustfab object (foreign, made up, closed) or one of another
    /// class → `-FI_EINVAL`. Nothing is read before the registry says the
    /// pointer is a live `Obj`.
    ///
    /// # Safety
    /// The returned reference must not be used after the object is
    /// destroyed, which only its `fi_close` does (a call racing with the
    /// close of its own object is the application's error, libfabric's
    /// threading rules). Any pointer value may be passed.
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

    /// Frees an object; the caller has checked that nothing uses it. It
    /// leaves the registry first: a later use of the pointer (a second
    /// `fi_close`) is `-FI_EINVAL` and reads nothing.
    ///
    /// # Safety
    /// `this` must come from `from_ptr` and no other reference to it may be
    /// used afterwards (C gave up the pointer by calling close).
    pub(crate) unsafe fn destroy(this: &Obj<T>) {
        // SAFETY: forwarded; freed right after.
        let p = unsafe { Self::unregister(this) };
        // SAFETY: unregistered just now, freed once.
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

    /// Frees an object `unregister` returned.
    ///
    /// # Safety
    /// `p` comes from `unregister` and is freed once.
    pub(crate) unsafe fn free_unregistered(p: *mut Obj<T>) {
        // SAFETY: `p` was produced by Box::into_raw in `create`.
        drop(unsafe { Box::from_raw(p) });
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
