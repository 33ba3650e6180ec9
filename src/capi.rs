//! rustfab's public C surface: the provider entry point libfabric looks up
//! with `dlsym`, and what an application may want to know about rustfab at
//! compile time. cbindgen turns the constants of this file (and only this
//! file) into `include/rdma/fi_ext_rustfab.h`, installed with the provider;
//! `make header` regenerates it and `make header-check` (part of `make test`)
//! fails if the committed header drifts. The header's string macros (provider
//! name, address prefixes, domain and parameter names) are written in
//! `cbindgen.toml`, because the cbindgen we pin cannot emit `&str` constants;
//! the tests at the end of this file hold them to the code. Every numeric
//! value is checked against the code that gives it its meaning at compile
//! time (`mod checks`).

use crate::provider::getinfo::FI_PROV_SPECIFIC;

/// Opaque here; the real layout is `struct fi_provider` from
/// `<rdma/providers/fi_prov.h>` (mirrored and checked in `abi`).
#[repr(C)]
pub struct fi_provider {
    _opaque: [u8; 0],
}

/// rustfab's major version (Cargo.toml's).
pub const FI_RUSTFAB_MAJOR_VERSION: u32 = 0;
/// rustfab's minor version (Cargo.toml's).
pub const FI_RUSTFAB_MINOR_VERSION: u32 = 2;
/// `ep_attr->protocol` of the auto entry (`FI_PROV_SPECIFIC | 3`).
pub const FI_RUSTFAB_PROTO_AUTO: u32 = FI_PROV_SPECIFIC | 3;
/// `ep_attr->protocol` of the shm entry (`FI_PROV_SPECIFIC | 1`).
pub const FI_RUSTFAB_PROTO_SHM: u32 = FI_PROV_SPECIFIC | 1;
/// `ep_attr->protocol` of the tcp entries (`FI_PROV_SPECIFIC | 2`).
pub const FI_RUSTFAB_PROTO_TCP: u32 = FI_PROV_SPECIFIC | 2;
/// `ep_attr->protocol` of the tcp domain's datagram (`FI_EP_DGRAM`, UDP)
/// entry (`FI_PROV_SPECIFIC | 4`).
pub const FI_RUSTFAB_PROTO_UDP: u32 = FI_PROV_SPECIFIC | 4;

/// Length in bytes (including the NUL) of every shm endpoint address
/// (`FI_ADDR_STR`, the prefix + 16 hex digits).
pub const FI_RUSTFAB_SHM_ADDR_LEN: usize = 34;
/// Length in bytes (including the NUL) of every auto endpoint address
/// (`FI_ADDR_STR`, the prefix + 16 hex digits of host identity, 16 of shm
/// token, 8 of IPv4 address, 4 of port). tcp addresses are a
/// `struct sockaddr_in` or `sockaddr_in6`.
pub const FI_RUSTFAB_AUTO_ADDR_LEN: usize = 58;

/// Most bytes of connection data `fi_connect`, `fi_accept` and `fi_reject`
/// carry (what `fi_getopt(FI_OPT_CM_DATA_SIZE)` returns).
pub const FI_RUSTFAB_CM_DATA_MAX: usize = 256;

/// `prov_errno` of an operation's error entry when no connection to its
/// peer could be made from this host (the dial was refused, found no
/// route or timed out; `err` is that error): `fi_cq_strerror` says so and
/// names `FI_RUSTFAB_IFACE`. rustfab's own `prov_errno` codes start here,
/// above every errno and `FI_E*` value.
pub const FI_RUSTFAB_ERR_UNREACHABLE: i32 = 4096;

/// The entry point libfabric calls after `dlopen` (its `FI_EXT_INI`).
/// Returns rustfab's writable, static provider descriptor. Not in the
/// header: applications never call it.
#[no_mangle]
pub extern "C" fn fi_prov_ini() -> *mut fi_provider {
    crate::provider::init() as *mut fi_provider
}

/// Holds the header's numbers to the code that gives them their meaning:
/// a mismatch fails the build (and `cargo check`).
/// cbindgen:ignore
mod checks {
    use super::*;

    // cbindgen cannot read Cargo's version, so the header's copy is written
    // out above and must follow Cargo.toml.
    const _: () = assert!(
        crate::provider::PROVIDER_VERSION == crate::abi::fi_version(FI_RUSTFAB_MAJOR_VERSION, FI_RUSTFAB_MINOR_VERSION),
        "Cargo.toml's version changed: update FI_RUSTFAB_MAJOR/MINOR_VERSION in src/capi.rs and \
         FI_RUSTFAB_VERSION_STRING in cbindgen.toml, then run make header"
    );
    const _: () = assert!(FI_RUSTFAB_SHM_ADDR_LEN == crate::transport::addr::SHM_ADDR_LEN);
    const _: () = assert!(FI_RUSTFAB_AUTO_ADDR_LEN == crate::transport::addr::AUTO_ADDR_LEN);
    const _: () = assert!(FI_RUSTFAB_PROTO_AUTO == crate::provider::getinfo::AUTO_PROTOCOL);
    const _: () = assert!(FI_RUSTFAB_PROTO_SHM == crate::provider::getinfo::SHM_PROTOCOL);
    const _: () = assert!(FI_RUSTFAB_PROTO_TCP == crate::provider::getinfo::TCP_PROTOCOL);
    const _: () = assert!(FI_RUSTFAB_PROTO_UDP == crate::provider::getinfo::UDP_PROTOCOL);
    const _: () = assert!(FI_RUSTFAB_ERR_UNREACHABLE == crate::transport::UNREACHABLE_PROV_ERRNO);
    const _: () = assert!(FI_RUSTFAB_CM_DATA_MAX == crate::transport::connected::cm::CM_DATA_MAX);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::TransportKind;
    use std::collections::HashMap;

    /// The committed header's string macros (`#define NAME "value"`), in order.
    fn string_macros() -> Vec<(String, String)> {
        let header = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/include/rdma/fi_ext_rustfab.h"));
        header
            .lines()
            .filter_map(|l| l.strip_prefix("#define "))
            .filter_map(|l| l.split_once(' '))
            .filter_map(|(name, v)| {
                let v = v.trim().strip_prefix('"')?.strip_suffix('"')?;
                Some((name.to_string(), v.to_string()))
            })
            .collect()
    }

    #[test]
    fn header_strings_are_the_codes() {
        let m: HashMap<_, _> = string_macros().into_iter().collect();
        let get = |k: &str| m.get(k).map(String::as_str).unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!(get("FI_RUSTFAB_PROV_NAME"), crate::provider::PROVIDER_NAME);
        assert_eq!(get("FI_RUSTFAB_VERSION_STRING"), env!("CARGO_PKG_VERSION"));
        assert_eq!(get("FI_RUSTFAB_DOMAIN_AUTO"), TransportKind::Auto.domain_name());
        assert_eq!(get("FI_RUSTFAB_DOMAIN_SHM"), TransportKind::Shm.domain_name());
        assert_eq!(get("FI_RUSTFAB_DOMAIN_TCP"), TransportKind::Tcp.domain_name());
        assert_eq!(get("FI_RUSTFAB_SHM_ADDR_PREFIX"), crate::transport::addr::SHM_PREFIX);
        assert_eq!(get("FI_RUSTFAB_AUTO_ADDR_PREFIX"), crate::transport::addr::AUTO_PREFIX);
    }

    #[test]
    fn every_parameter_has_its_name_in_the_header() {
        let header: Vec<String> = string_macros()
            .into_iter()
            .filter(|(k, _)| k.starts_with("FI_RUSTFAB_ENV_"))
            .map(|(k, v)| {
                assert_eq!(k, format!("FI_RUSTFAB_ENV_{}", &v["FI_RUSTFAB_".len()..]));
                v
            })
            .collect();
        let declared: Vec<String> = crate::provider::params::PARAMS
            .iter()
            .map(|p| format!("FI_RUSTFAB_{}", p.name.to_ascii_uppercase()))
            .collect();
        assert_eq!(header, declared);
    }

    #[test]
    fn address_lengths_match_real_addresses() {
        use crate::transport::addr::Addr;
        assert_eq!(Addr::Shm(1).to_bytes().len(), FI_RUSTFAB_SHM_ADDR_LEN);
        let auto = Addr::Auto {
            host: 1,
            shm: 2,
            inet: "10.0.0.1:7".parse().unwrap(),
        };
        assert_eq!(auto.to_bytes().len(), FI_RUSTFAB_AUTO_ADDR_LEN);
    }
}
