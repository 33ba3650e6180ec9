//! Logging through libfabric's `fi_log`, so `FI_LOG_LEVEL`, `FI_LOG_PROV` and
//! `FI_LOG_SUBSYS` apply to rustfab as to any provider.
//!
//! Use the macros: `log_warn!(FI_LOG_EP_CTRL, "tcp: bad HELLO ({why:?})")`.
//! They ask `fi_log_enabled` first and format only when the line will be
//! written, and they pass the calling module and line to `fi_log`. Where a
//! helper logs on behalf of its caller, the `_at` forms take the caller's
//! `Location` (from `#[track_caller]`) and name its file and line instead.
//!
//! Lines a data path can repeat at any rate (a peer failing, each large
//! message, each stall) use the `_limited` forms: at most [`PER_SECOND`]
//! lines a second from each call site; the first line written after some
//! were dropped says how many ("suppressed K"). The level is asked first,
//! so a disabled level costs that question only (no clock read, no
//! formatting).

use crate::abi::libfabric::{fi_log, fi_log_enabled};
use crate::abi::*;
use core::ffi::{c_char, c_int, CStr};
use std::ffi::CString;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// rustfab's registered provider descriptor; NULL until libfabric has
/// loaded us (logging is only possible then).
static PROVIDER: AtomicPtr<fi_provider> = AtomicPtr::new(core::ptr::null_mut());

/// Called once by `fi_prov_ini` with the descriptor libfabric registers.
pub(crate) fn attach(prov: *mut fi_provider) {
    PROVIDER.store(prov, Ordering::Release);
}

/// The provider to log for, if `level`/`subsys` lines are wanted.
#[doc(hidden)]
pub(crate) fn enabled(level: u32, subsys: u32) -> Option<*const fi_provider> {
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
pub(crate) fn emit(
    prov: *const fi_provider,
    level: u32,
    subsys: u32,
    func: &CStr,
    line: u32,
    args: core::fmt::Arguments<'_>,
) {
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
pub(crate) fn location_name(at: &core::panic::Location<'_>) -> CString {
    CString::new(at.file().replace('\0', " ")).unwrap_or_default()
}

/// Lines a second one `_limited` call site writes at most.
pub(crate) const PER_SECOND: u32 = 10;

/// One call site's budget of lines: the second it last counted in and the
/// lines asked for in that second, and how many were dropped since the
/// last line written. Relaxed atomics: threads racing at a second's turn
/// may write a line or two over the budget, never block.
#[doc(hidden)]
pub(crate) struct RateLimit {
    second: AtomicU64,
    count: AtomicU32,
    suppressed: AtomicU64,
}

impl RateLimit {
    #[allow(clippy::new_without_default)]
    pub(crate) const fn new() -> RateLimit {
        RateLimit {
            second: AtomicU64::new(0),
            count: AtomicU32::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(k)` with `k` the lines
    /// dropped since the last one written, or `None` (dropped, counted).
    pub(crate) fn admit(&self) -> Option<u64> {
        static START: OnceLock<Instant> = OnceLock::new();
        let start = *START.get_or_init(Instant::now);
        // Seconds from 1, so that a site's first line opens its first second.
        self.admit_at(start.elapsed().as_secs() + 1, PER_SECOND)
    }

    /// [`RateLimit::admit`] at second `now`, `per_second` lines a second.
    pub(crate) fn admit_at(&self, now: u64, per_second: u32) -> Option<u64> {
        let seen = self.second.load(Ordering::Relaxed);
        if seen != now
            && self
                .second
                .compare_exchange(seen, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.count.store(0, Ordering::Relaxed);
        }
        if self.count.fetch_add(1, Ordering::Relaxed) < per_second {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

/// The note a rate-limited line ends with: nothing, or how many lines of
/// its call site were dropped before it.
#[doc(hidden)]
pub(crate) struct Suppressed(pub u64);

impl core::fmt::Display for Suppressed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            0 => Ok(()),
            k => write!(f, " (suppressed {k} similar lines)"),
        }
    }
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

/// `log_limited!(level, subsys, fmt, args..)`: as `log_at!`, at most
/// [`PER_SECOND`] lines a second from this call site, the count of dropped
/// ones added to the next line written.
macro_rules! log_limited {
    ($level:expr, $subsys:expr, $($arg:tt)+) => {
        if let Some(prov) = $crate::base::log::enabled($level, $subsys) {
            static LIMIT: $crate::base::log::RateLimit = $crate::base::log::RateLimit::new();
            if let Some(dropped) = LIMIT.admit() {
                let func = match ::core::ffi::CStr::from_bytes_with_nul(concat!(module_path!(), "\0").as_bytes()) {
                    Ok(f) => f,
                    Err(_) => c"rustfab",
                };
                $crate::base::log::emit(
                    prov,
                    $level,
                    $subsys,
                    func,
                    line!(),
                    format_args!("{}{}", format_args!($($arg)+), $crate::base::log::Suppressed(dropped)),
                );
            }
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

/// Debugging detail a data path may repeat, rate-limited (`log_limited!`).
macro_rules! log_debug_limited {
    ($subsys:expr, $($arg:tt)+) => { $crate::base::log::log_limited!($crate::abi::FI_LOG_DEBUG, $subsys, $($arg)+) };
}

/// A warning attributed to `at` (a `#[track_caller]` helper's caller).
macro_rules! log_warn_at {
    ($subsys:expr, $at:expr, $($arg:tt)+) => { $crate::base::log::log_at_location!($crate::abi::FI_LOG_WARN, $subsys, $at, $($arg)+) };
}

/// Information attributed to `at` (where a refusal was decided).
macro_rules! log_info_at {
    ($subsys:expr, $at:expr, $($arg:tt)+) => { $crate::base::log::log_at_location!($crate::abi::FI_LOG_INFO, $subsys, $at, $($arg)+) };
}

pub(crate) use {
    log_at, log_at_location, log_debug, log_debug_limited, log_info, log_info_at, log_limited, log_warn, log_warn_at,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_site_writes_at_most_its_lines_a_second_and_counts_the_rest() {
        let l = RateLimit::new();
        let got: Vec<Option<u64>> = (0..5).map(|_| l.admit_at(1, 3)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(0), None, None]);
        // The next second: the first line written names the two dropped.
        assert_eq!(l.admit_at(2, 3), Some(2));
        assert_eq!(l.admit_at(2, 3), Some(0));
        assert_eq!(l.admit_at(2, 3), Some(0));
        assert_eq!(l.admit_at(2, 3), None);
        // A quiet stretch, then a line at once.
        assert_eq!(l.admit_at(9, 3), Some(1));
    }

    #[test]
    fn the_note_of_dropped_lines_is_empty_when_none_were() {
        assert_eq!(format!("x{}", Suppressed(0)), "x");
        assert_eq!(format!("x{}", Suppressed(4)), "x (suppressed 4 similar lines)");
    }
}
