//! rustfab's own version and name, as libfabric reports them.

use crate::abi::fi_version;

/// rustfab's own version, as `fi_info -l` prints it and as
/// `fabric_attr->prov_version` carries it: Cargo.toml's major.minor (the
/// only version number; `FI_VERSION` has no room for the patch level).
pub(crate) const PROVIDER_VERSION: u32 = fi_version(
    version_part(env!("CARGO_PKG_VERSION_MAJOR")),
    version_part(env!("CARGO_PKG_VERSION_MINOR")),
);
/// The provider name (`fi_info -l`, `fabric_attr->prov_name`).
#[cfg(test)]
pub(crate) const PROVIDER_NAME: &str = "rustfab";

/// A component of Cargo's version (a decimal digit string) as a number, at
/// compile time; anything else, or more than 16 bits, fails the build.
const fn version_part(s: &str) -> u32 {
    let b = s.as_bytes();
    assert!(!b.is_empty(), "empty version component");
    let mut n: u32 = 0;
    let mut i = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "version component is not a decimal number");
        n = n * 10 + (b[i] - b'0') as u32;
        assert!(n <= 0xffff, "version component does not fit FI_VERSION's 16 bits");
        i += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_version_is_cargos() {
        let mut parts = env!("CARGO_PKG_VERSION").split('.').map(|p| p.parse::<u32>().unwrap());
        let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
        assert_eq!(PROVIDER_VERSION, fi_version(major, minor));
        assert_eq!(version_part("0"), 0);
        assert_eq!(version_part("17"), 17);
        assert_eq!(version_part("65535"), 65535);
    }
}
