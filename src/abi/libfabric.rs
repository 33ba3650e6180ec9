//! Functions of the libfabric core that rustfab calls (the provider is
//! loaded by, and linked against, `libfabric.so`). Declarations only; the
//! callers say why each call is sound.

use super::types::fi_provider;
use core::ffi::{c_char, c_int};

extern "C" {
    /// The core's version (`FI_VERSION(major, minor)`); a pure function.
    /// (Renamed: [`super::fi_version`] is the `FI_VERSION` macro.)
    #[link_name = "fi_version"]
    pub fn libfabric_version() -> u32;
    /// libfabric's own error strings (static storage).
    pub fn fi_strerror(errnum: c_int) -> *const c_char;
    /// Whether `level`/`subsys` logging is on for `prov` (`FI_LOG_LEVEL`,
    /// `FI_LOG_PROV`, `FI_LOG_SUBSYS`).
    pub fn fi_log_enabled(prov: *const fi_provider, level: u32, subsys: u32) -> c_int;
    /// Writes one log line for `prov` (printf-style).
    pub fn fi_log(
        prov: *const fi_provider,
        level: u32,
        subsys: u32,
        func: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
    /// Declares a runtime parameter so that `fi_info -e` lists it.
    pub fn fi_param_define(prov: *const fi_provider, name: *const c_char, ty: u32, help: *const c_char, ...) -> c_int;
}
