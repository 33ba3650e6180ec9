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
use crate::fi::handle::{FiObject, Obj};
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
/// poisons the object if the method panics.
///
/// # Safety
/// `p` must be NULL or point to memory readable as a `struct fid` (any fid
/// the application received from libfabric qualifies).
pub(crate) unsafe fn call_obj<T: FiObject, R: FfiRet>(
    what: &'static str,
    p: *const core::ffi::c_void,
    f: impl FnOnce(&Obj<T>) -> Result<R>,
) -> R {
    // SAFETY: forwarded from this function's contract.
    let obj = match unsafe { Obj::<T>::from_ptr(p) } {
        Ok(o) => o,
        Err(e) => return R::from_err(e),
    };
    if obj.is_poisoned() || (obj.core.failed() && !what.ends_with("close")) {
        return R::from_err(Error::OTHER);
    }
    match catch_unwind(AssertUnwindSafe(|| {
        injected_panic(what);
        f(obj)
    })) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => R::from_err(e),
        Err(p) => {
            report_panic(what, &*p);
            obj.poison();
            R::from_err(Error::OTHER)
        }
    }
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
        call_obj::<T, c_int>(T::CLOSE, f as *const core::ffi::c_void, |o| {
            o.core.users().check_idle()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}
