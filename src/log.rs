//! Logging through libfabric's `fi_log`, so `FI_LOG_LEVEL`, `FI_LOG_PROV` and
//! `FI_LOG_SUBSYS` apply to rustfab as to any provider (ABI.md §1.12).

use crate::abi::*;
use core::ffi::{c_char, c_int};
use std::ffi::CString;

extern "C" {
    fn fi_log_enabled(prov: *const fi_provider, level: u32, subsys: u32) -> c_int;
    fn fi_log(
        prov: *const fi_provider,
        level: u32,
        subsys: u32,
        func: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
}

fn log(level: u32, subsys: u32, msg: &str) {
    if !crate::provider::registered() {
        return;
    }
    let prov = crate::provider::provider_ptr();
    // SAFETY: `prov` is our registered provider (its context was written by
    // libfabric at registration, which fi_log_enabled reads).
    if unsafe { fi_log_enabled(prov, level, subsys) } == 0 {
        return;
    }
    let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: all strings are NUL-terminated; "%s\n" consumes exactly one
    // string argument.
    unsafe {
        fi_log(
            prov,
            level,
            subsys,
            c"rustfab".as_ptr(),
            0,
            c"%s\n".as_ptr(),
            text.as_ptr(),
        );
    }
}

pub fn warn(subsys: u32, msg: &str) {
    log(FI_LOG_WARN, subsys, msg);
}

pub fn info(subsys: u32, msg: &str) {
    log(FI_LOG_INFO, subsys, msg);
}

pub fn debug(subsys: u32, msg: &str) {
    log(FI_LOG_DEBUG, subsys, msg);
}
