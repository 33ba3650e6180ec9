//! Logging through libfabric's `fi_log`, so `FI_LOG_LEVEL`, `FI_LOG_PROV` and
//! `FI_LOG_SUBSYS` apply to rustfab as to any provider.
//!
//! Use the macros: `log_warn!(FI_LOG_EP_CTRL, "tcp: bad HELLO ({why:?})")`.
//! They ask `fi_log_enabled` first and format only when the line will be
//! written, and they pass the calling module and line to `fi_log`. Where a
//! helper logs on behalf of its caller, the `_at` forms take the caller's
//! `Location` (from `#[track_caller]`) and name its file and line instead.

use crate::abi::libfabric::{fi_log, fi_log_enabled};
use crate::abi::*;
use core::ffi::{c_char, c_int, CStr};
use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, Ordering};

/// rustfab's registered provider descriptor; NULL until libfabric has
/// loaded us (logging is only possible then).
static PROVIDER: AtomicPtr<fi_provider> = AtomicPtr::new(core::ptr::null_mut());

/// Called once by `fi_prov_ini` with the descriptor libfabric registers.
pub fn attach(prov: *mut fi_provider) {
    PROVIDER.store(prov, Ordering::Release);
}

/// The provider to log for, if `level`/`subsys` lines are wanted.
#[doc(hidden)]
pub fn enabled(level: u32, subsys: u32) -> Option<*const fi_provider> {
    let prov = PROVIDER.load(Ordering::Acquire);
    if prov.is_null() {
        return None;
    }
    // SAFETY: `prov` is our registered static descriptor (libfabric wrote its
    // context at registration; fi_log_enabled only reads it).
    (unsafe { fi_log_enabled(prov, level, subsys) } != 0).then_some(prov as *const fi_provider)
}

/// Writes one line (the macros call this after [`enabled`]).
#[doc(hidden)]
pub fn emit(prov: *const fi_provider, level: u32, subsys: u32, func: &CStr, line: u32, args: core::fmt::Arguments<'_>) {
    let text = CString::new(args.to_string().replace('\0', " ")).unwrap_or_default();
    // SAFETY: `prov` came from `enabled`; every string is NUL-terminated and
    // "%s\n" consumes exactly the one string argument passed.
    unsafe {
        fi_log(
            prov,
            level,
            subsys,
            func.as_ptr() as *const c_char,
            line as c_int,
            c"%s\n".as_ptr(),
            text.as_ptr(),
        )
    };
}

/// The file a `Location` names, as the NUL-terminated "function" `fi_log`
/// prints before the line number.
#[doc(hidden)]
pub fn location_name(at: &core::panic::Location<'_>) -> CString {
    CString::new(at.file().replace('\0', " ")).unwrap_or_default()
}

/// `log_at!(level, subsys, fmt, args..)`: one line at `level` if enabled.
macro_rules! log_at {
    ($level:expr, $subsys:expr, $($arg:tt)+) => {
        if let Some(prov) = $crate::base::log::enabled($level, $subsys) {
            let func = match ::core::ffi::CStr::from_bytes_with_nul(concat!(module_path!(), "\0").as_bytes()) {
                Ok(f) => f,
                Err(_) => c"rustfab",
            };
            $crate::base::log::emit(prov, $level, $subsys, func, line!(), format_args!($($arg)+));
        }
    };
}

/// `log_at_location!(level, subsys, location, fmt, args..)`: one line at
/// `level` if enabled, attributed to `location`'s file and line.
macro_rules! log_at_location {
    ($level:expr, $subsys:expr, $at:expr, $($arg:tt)+) => {
        if let Some(prov) = $crate::base::log::enabled($level, $subsys) {
            let at: &::core::panic::Location<'_> = $at;
            let func = $crate::base::log::location_name(at);
            $crate::base::log::emit(prov, $level, $subsys, &func, at.line(), format_args!($($arg)+));
        }
    };
}

/// A warning: something went wrong that the application may want to know.
macro_rules! log_warn {
    ($subsys:expr, $($arg:tt)+) => { $crate::base::log::log_at!($crate::abi::FI_LOG_WARN, $subsys, $($arg)+) };
}

/// Information: a request refused, a choice made.
macro_rules! log_info {
    ($subsys:expr, $($arg:tt)+) => { $crate::base::log::log_at!($crate::abi::FI_LOG_INFO, $subsys, $($arg)+) };
}

/// Debugging detail.
macro_rules! log_debug {
    ($subsys:expr, $($arg:tt)+) => { $crate::base::log::log_at!($crate::abi::FI_LOG_DEBUG, $subsys, $($arg)+) };
}

/// A warning attributed to `at` (a `#[track_caller]` helper's caller).
macro_rules! log_warn_at {
    ($subsys:expr, $at:expr, $($arg:tt)+) => { $crate::base::log::log_at_location!($crate::abi::FI_LOG_WARN, $subsys, $at, $($arg)+) };
}

/// Information attributed to `at` (where a refusal was decided).
macro_rules! log_info_at {
    ($subsys:expr, $at:expr, $($arg:tt)+) => { $crate::base::log::log_at_location!($crate::abi::FI_LOG_INFO, $subsys, $at, $($arg)+) };
}

pub(crate) use {log_at, log_at_location, log_debug, log_info, log_info_at, log_warn, log_warn_at};
