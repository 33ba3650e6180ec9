//! The provider descriptor libfabric loads: `fi_prov_ini` returns a pointer to
//! a writable, static `struct fi_provider` (libfabric writes its context at
//! registration, docs/abi.md §1.5), whose `getinfo`, `fabric` and `cleanup` slots
//! lead into the rest of rustfab.

pub(crate) mod getinfo;
pub(crate) mod params;
mod version;

#[cfg(test)]
pub(crate) use version::PROVIDER_NAME;
pub(crate) use version::PROVIDER_VERSION;

use crate::abi::*;
use crate::core::fabric::API_VERSION;
use crate::fi;
use core::ffi::{c_char, c_int, c_void};

/// Must be `static mut` (in `.data`): libfabric writes `context` into it.
static mut PROVIDER: fi_provider = fi_provider {
    version: PROVIDER_VERSION,
    fi_version: API_VERSION,
    context: fi_context {
        internal: [core::ptr::null_mut(); 4],
    },
    name: c"rustfab".as_ptr(),
    getinfo: Some(getinfo_thunk),
    fabric: Some(fabric_thunk),
    cleanup: Some(cleanup_thunk),
};

fn provider_ptr() -> *mut fi_provider {
    &raw mut PROVIDER
}

/// Byte offset of `disable_layering` in libfabric 1.17's internal
/// `struct ofi_prov_context` (type: 4 bytes, disable_logging: 1 byte,
/// disable_layering: 1 byte), which lives in `fi_provider.context`.
const DISABLE_LAYERING_OFFSET: usize = 5;

/// Body of `fi_prov_ini` (declared in `capi.rs`). Cheap and side-effect
/// free: it runs even when `FI_PROVIDER` later filters rustfab out.
pub(crate) fn init() -> *mut fi_provider {
    let r = std::panic::catch_unwind(|| {
        let prov = provider_ptr();
        // ofi_rxm would otherwise layer over our FI_EP_MSG entries and its
        // `rustfab;ofi_rxm` entries would come back *before* our native RDM
        // ones (docs/abi.md §1.8). Pre-setting disable_layering keeps the
        // native entries only. The context layout is internal to libfabric,
        // so this is done only for the cores whose layout we checked (1.17
        // to 2.6: the same `struct ofi_prov_context` in every one); for any
        // core, fi_getinfo also refuses utility providers' layering queries
        // unless the application named rustfab (getinfo::OFI_CORE_PROV_ONLY).
        // SAFETY: fi_version() is a pure function of libfabric.
        let v = unsafe { crate::abi::libfabric::libfabric_version() };
        if (fi_version(1, 17)..=fi_version(2, 6)).contains(&v) {
            // SAFETY: `prov` is our static; `context` is 32 bytes, so byte 5 is
            // inside it; libfabric is not using the struct yet (we have not
            // returned it).
            unsafe {
                let ctx = &raw mut (*prov).context as *mut u8;
                *ctx.add(DISABLE_LAYERING_OFFSET) = 1;
            }
        }
        // SAFETY: `prov` is our static provider descriptor.
        unsafe { crate::provider::params::define_all(prov) };
        crate::base::log::attach(prov);
        prov
    });
    r.unwrap_or(core::ptr::null_mut())
}

unsafe extern "C" fn getinfo_thunk(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    fi::call("getinfo", || {
        // Read for what reading them logs: a bad value's warning and the
        // settings in effect (FI_LOG_LEVEL=info fi_info shows them), before
        // any fabric is opened.
        let _ = crate::provider::params::settings();
        // SAFETY: libfabric passes NUL-terminated strings or NULL, an app-owned
        // hints struct or NULL, and a writable out pointer.
        unsafe { crate::provider::getinfo::getinfo_c(version, node, service, flags, hints, info) }.map(|_| 0)
    })
}

unsafe extern "C" fn fabric_thunk(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    fi::call("fabric", || {
        // SAFETY: libfabric passes the app's fabric attr and out pointer.
        let attr = unsafe { fi::read_in(attr) }?;
        let f = fi::fabric::open(attr, context, crate::provider::params::settings())?;
        // SAFETY: out pointer from libfabric (checked for NULL).
        unsafe { fi::write_out(fabric, f) }?;
        Ok(0)
    })
}

/// Called from libfabric's destructor: stop every thread rustfab started.
unsafe extern "C" fn cleanup_thunk() {
    let _ = std::panic::catch_unwind(crate::core::progress::stop_all_threads);
}
