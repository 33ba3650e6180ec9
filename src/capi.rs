//! rustfab's public C surface: the provider entry point libfabric looks up
//! with `dlsym`, and the constants rustfab adds for C users. cbindgen turns
//! this file (and only this file) into `include/rustfab.h`; `make header`
//! regenerates it and `make test` fails if the committed header drifts.

/// Opaque here; the real layout is `struct fi_provider` from
/// `<rdma/providers/fi_prov.h>` (mirrored and checked in `abi`).
#[repr(C)]
pub struct fi_provider {
    _opaque: [u8; 0],
}

/// Length in bytes (including the NUL) of every shared-memory endpoint
/// address (`FI_ADDR_STR`, `"fi_rustfab_shm://" + 16 hex digits`).
pub const RUSTFAB_SHM_ADDR_LEN: usize = 34;

// The header's constant is the transport's (a literal above, for cbindgen).
const _: () = assert!(RUSTFAB_SHM_ADDR_LEN == crate::transport::addr::SHM_ADDR_LEN);

/// The entry point libfabric calls after `dlopen` (its `FI_EXT_INI`).
/// Returns rustfab's writable, static provider descriptor.
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut fi_provider {
    crate::provider::init() as *mut fi_provider
}
