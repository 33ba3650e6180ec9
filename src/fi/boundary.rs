//! Every `extern "C"` thunk runs its body through [`call`] (or
//! [`call_obj`]): a panic is caught and becomes `-FI_EOTHER`, an `Err(e)`
//! becomes `-e`, and an object whose method panicked is marked poisoned so
//! that later calls on it fail cleanly instead of touching broken state.
//!
//! Panic policy (README "Panic policy"): the crate is built with
//! `panic = "unwind"` so that a bug surfaces as an error code in the
//! application, never as an abort of its process and never as unwinding into C.

use crate::base::error::{Error, Result};
use crate::core::users::HasUsers;
use crate::fi::handle::{CallKind, FiObject, Obj};
use core::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How a C return type represents an error.
pub(crate) trait FfiRet: Sized {
    fn from_err(e: Error) -> Self;
}

impl FfiRet for c_int {
    fn from_err(e: Error) -> c_int {
        -e.0
    }
}

impl FfiRet for isize {
    fn from_err(e: Error) -> isize {
        -(e.0 as isize)
    }
}

/// Counter reads have no error channel; an invalid counter reads as 0.
impl FfiRet for u64 {
    fn from_err(_: Error) -> u64 {
        0
    }
}

/// `strerror`/`straddr`-style functions: an invalid call yields NULL, which
/// is what libfabric's own `fi_av_straddr` returns for a bad address.
impl FfiRet for *const c_char {
    fn from_err(_: Error) -> *const c_char {
        core::ptr::null()
    }
}

fn report_panic(what: &str, payload: &(dyn std::any::Any + Send)) {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    crate::base::log::log_warn!(crate::abi::FI_LOG_CORE, "internal error in {what}: {msg}");
}

/// Test builds only: panics when `FI_RUSTFAB_TEST_PANIC` names `what`.
#[cfg(feature = "panic-test")]
fn injected_panic(what: &str) {
    static TARGET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let t = TARGET.get_or_init(|| std::env::var("FI_RUSTFAB_TEST_PANIC").ok());
    if t.as_deref() == Some(what) {
        panic!("injected panic in {what}");
    }
}

#[cfg(not(feature = "panic-test"))]
#[inline(always)]
fn injected_panic(_: &str) {}

/// Runs a thunk body: `Ok(v)` → `v`, `Err(e)` → `-e`, panic → `-FI_EOTHER`.
pub(crate) fn call<R: FfiRet>(what: &'static str, f: impl FnOnce() -> Result<R>) -> R {
    match catch_unwind(AssertUnwindSafe(|| {
        injected_panic(what);
        f()
    })) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => R::from_err(e),
        Err(p) => {
            report_panic(what, &*p);
            R::from_err(Error::OTHER)
        }
    }
}

/// Runs a method of a rustfab object reached through a C pointer: checks the
/// pointer (NULL, class, magic → `-FI_EINVAL`), refuses poisoned objects, and
/// poisons the object if the method panics. A plain call: counted only on
/// objects that count every call (`fi/handle.rs`).
///
/// # Safety
/// `p` must be NULL or point to memory readable as a `struct fid` (any fid
/// the application received from libfabric qualifies).
#[inline(always)]
pub(crate) unsafe fn call_obj<T: FiObject, R: FfiRet>(
    what: &'static str,
    p: *const core::ffi::c_void,
    f: impl FnOnce(&Obj<T>) -> Result<R>,
) -> R {
    // SAFETY: forwarded.
    unsafe { call_obj_as(CallKind::Plain, what, p, f) }
}

/// [`call_obj`] for a call that may block (`fi_cq_sread`, `fi_cntr_wait`,
/// `fi_eq_sread`, `fi_wait`): always inside the object, so that a close
/// from another thread wakes it (`-FI_ECANCELED`) and waits for it to
/// leave before the object goes.
///
/// # Safety
/// As for [`call_obj`].
pub(crate) unsafe fn call_obj_blocking<T: FiObject, R: FfiRet>(
    what: &'static str,
    p: *const core::ffi::c_void,
    f: impl FnOnce(&Obj<T>) -> Result<R>,
) -> R {
    // SAFETY: forwarded.
    unsafe { call_obj_as(CallKind::Blocking, what, p, f) }
}

/// [`call_obj`] for an object's close: inside the object (its `destroy`
/// waits for every other call to leave) and one at a time (a second close
/// meanwhile is `-FI_EBUSY`). A failed object may be closed.
///
/// # Safety
/// As for [`call_obj`].
pub(crate) unsafe fn call_close<T: FiObject>(
    what: &'static str,
    p: *const core::ffi::c_void,
    f: impl FnOnce(&Obj<T>) -> Result<c_int>,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { call_obj_as(CallKind::Close, what, p, f) }
}

/// The body of [`call_obj`], [`call_obj_blocking`] and [`call_close`]. An
/// uncounted call (a plain one on an object that does not count them all)
/// costs one flag test more than the checks and the call.
///
/// # Safety
/// As for [`call_obj`].
#[inline(always)]
unsafe fn call_obj_as<T: FiObject, R: FfiRet>(
    kind: CallKind,
    what: &'static str,
    p: *const core::ffi::c_void,
    f: impl FnOnce(&Obj<T>) -> Result<R>,
) -> R {
    // SAFETY: forwarded from this function's contract.
    let obj = match unsafe { Obj::<T>::from_ptr(p) } {
        Ok(o) => o,
        Err(e) => return R::from_err(e),
    };
    let counted = kind != CallKind::Plain || obj.counts_all();
    if counted {
        if let Err(e) = obj.enter() {
            return R::from_err(e);
        }
    }
    let r = 'call: {
        if obj.is_poisoned() || (obj.core.failed() && kind != CallKind::Close) {
            break 'call R::from_err(Error::OTHER);
        }
        if kind == CallKind::Close {
            if let Err(e) = obj.begin_close() {
                break 'call R::from_err(e);
            }
        }
        match catch_unwind(AssertUnwindSafe(|| {
            injected_panic(what);
            f(obj)
        })) {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                // A close that failed leaves the object open.
                if kind == CallKind::Close {
                    obj.end_close();
                }
                R::from_err(e)
            }
            Err(p) => {
                report_panic(what, &*p);
                obj.poison();
                if kind == CallKind::Close {
                    obj.end_close();
                }
                R::from_err(Error::OTHER)
            }
        }
    };
    // After a successful close the memory is still valid (never freed),
    // only the count is touched.
    if counted {
        obj.leave();
    }
    r
}

/// `fi_close` for objects that are simply freed once nothing refers to them
/// (fabric, EQ, CQ, counter): `-FI_EBUSY` while bound or in use (their man
/// pages: "If resources are still associated with the ... when attempting
/// to close, the call will return -FI_EBUSY").
///
/// # Safety
/// Called by libfabric with the application's fid (any pointer is checked).
pub(crate) unsafe extern "C" fn close_when_idle<T: FiObject + HasUsers>(f: *mut crate::abi::fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        call_close::<T>(T::CLOSE, f as *const core::ffi::c_void, |o| {
            o.core.users().check_idle()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}
