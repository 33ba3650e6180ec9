//! What libfabric 1.18–2.6 changed in the structs and constants rustfab
//! shares with the core and applications (docs/libfabric2.md has the whole
//! list and what rustfab does with each).
//!
//! The structs here are the newest layouts, under their C names; the 1.17
//! ones in `types` are their prefixes (checked by a test below). rustfab
//! allocates the newest size for what the core or a newer application may
//! read whole (`fi_domain_attr` in fi_getinfo results) and writes the new
//! fields only for callers whose API version has them.
//!
//! `abi-dump --api 2.6` prints these layouts and constants, and `make
//! abi-check` compares them with `abi/libfabric-2.6.txt`, the same facts
//! printed from libfabric 2.6.0's headers (regenerated and compared again
//! when those headers are at hand: `LIBFABRIC2_PREFIX`).

use super::layout::{abi_consts, abi_structs, fi_version};
use super::types::{fi_addr_t, fi_av_set_attr, fid_av, fid_av_set, fid_domain, size_t};
use core::ffi::{c_char, c_int, c_void};

abi_structs! { v2_layouts;
    /// `struct fi_domain_attr` of 1.20+ (`max_ep_auth_key`), 2.0+
    /// (`max_group_id`) and 2.5+ (`max_cntr_value`, `max_err_cntr_value`).
    /// 2.0 made `data_progress` a union with `progress` (same place).
    struct fi_domain_attr {
        domain: *mut fid_domain, name: *mut c_char,
        threading: u32, control_progress: u32, data_progress: u32, resource_mgmt: u32,
        av_type: u32, mr_mode: c_int,
        mr_key_size: size_t, cq_data_size: size_t, cq_cnt: size_t, ep_cnt: size_t,
        tx_ctx_cnt: size_t, rx_ctx_cnt: size_t, max_ep_tx_ctx: size_t, max_ep_rx_ctx: size_t,
        max_ep_stx_ctx: size_t, max_ep_srx_ctx: size_t, cntr_cnt: size_t, mr_iov_limit: size_t,
        caps: u64, mode: u64, auth_key: *mut u8, auth_key_size: size_t,
        max_err_data: size_t, mr_cnt: size_t, tclass: u32,
        max_ep_auth_key: size_t, max_group_id: u32,
        max_cntr_value: u64, max_err_cntr_value: u64,
    }
    /// `struct fi_cq_err_entry` of 1.20+: `src_addr` at the end (the
    /// source of a failed receive; `fi_cq_readerr` presets it to
    /// `FI_ADDR_NOTAVAIL` for providers that leave it).
    struct fi_cq_err_entry {
        op_context: *mut c_void, flags: u64, len: size_t, buf: *mut c_void, data: u64, tag: u64,
        olen: size_t, err: c_int, prov_errno: c_int, err_data: *mut c_void, err_data_size: size_t,
        src_addr: u64,
    }
    /// `struct fi_ops_av` of 1.20+ (`insert_auth_key`, `lookup_auth_key`)
    /// and 2.0+ (`set_user_id`). The inline wrappers check `size` before
    /// calling a slot past the 1.17 ones.
    struct fi_ops_av {
        size: size_t,
        insert: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, size_t, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
        insertsvc: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
        insertsym: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, size_t, *const c_char, size_t, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
        remove: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_addr_t, size_t, u64) -> c_int>,
        lookup: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut size_t) -> c_int>,
        straddr: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, *mut c_char, *mut size_t) -> *const c_char>,
        av_set: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, *mut c_void) -> c_int>,
        insert_auth_key: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, size_t, *mut fi_addr_t, u64) -> c_int>,
        lookup_auth_key: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut size_t) -> c_int>,
        set_user_id: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, fi_addr_t, u64) -> c_int>,
    }
}

abi_consts! { v2_const_values;
    FI_MAJOR_VERSION: u32 = 2;
    FI_MINOR_VERSION: u32 = 6;
    // Capability bits of API 2.0+ (bits 45, 46 and 48 meant
    // FI_HMEM_HOST_ALLOC, FI_HMEM_DEVICE_ONLY and FI_VARIABLE_MSG before).
    FI_TAGGED_DIRECTED_RECV: u64 = 1 << 45;
    FI_TAGGED_MULTI_RECV: u64 = 1 << 46;
    FI_EXACT_DIRECTED_RECV: u64 = 1 << 48;
    // Flag of API 1.20+.
    FI_AUTH_KEY: u64 = 1 << 57;
    // Errors of 2.x.
    FI_ENOMR: i32 = 270;
    FI_EFIREWALLADDR: i32 = 271;
    // `FI_VARIABLE_MSG` is defined as 0 from 1.21 on (the capability is gone).
    FI_VARIABLE_MSG: u64 = 0;
}

/// The newest API rustfab implements.
pub const API_NEWEST: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

/// The last API version with `FI_VARIABLE_MSG` (capability bit 48).
pub const API_LAST_VARIABLE_MSG: u32 = fi_version(1, 20);
/// The last API version with `FI_BUFFERED_RECV` (mode bit 51).
pub const API_LAST_BUFFERED_RECV: u32 = fi_version(1, 22);
/// The first API version whose `fi_domain_attr` has `max_ep_auth_key` and
/// whose `fi_cq_err_entry` has `src_addr`.
pub const API_FIRST_1_20_FIELDS: u32 = fi_version(1, 20);
/// The first API version with capability bits 45, 46, 48 as above.
pub const API_FIRST_2_0: u32 = fi_version(2, 0);

#[cfg(test)]
mod tests {
    use super::*;

    /// The 1.17 structs are prefixes of the newer ones: every 1.17 field
    /// sits at the same offset with the same size.
    #[test]
    fn v1_17_layouts_are_prefixes() {
        let mut old = super::super::types::type_layouts();
        old.extend(super::super::types::vtable_layouts());
        for new in v2_layouts() {
            let o = old.iter().find(|s| s.name == new.name).expect("mirrored in 1.17 too");
            assert!(new.size > o.size, "{} grew", new.name);
            for f in &o.fields {
                let n = new.fields.iter().find(|g| g.name == f.name).expect("field kept");
                assert_eq!((n.offset, n.size), (f.offset, f.size), "{}.{}", new.name, f.name);
            }
        }
    }
}
