//! Facts about this host's addresses that several cores and fi_getinfo
//! need (the auto transport's "is this peer on my host?").

use std::net::SocketAddr;

/// Whether an IP address belongs to this host (loopback, unspecified, or
/// bindable here).
pub(crate) fn ip_is_local(a: &SocketAddr) -> bool {
    if a.ip().is_loopback() || a.ip().is_unspecified() {
        return true;
    }
    crate::sys::net::bindable(a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_wildcard_are_local() {
        assert!(ip_is_local(&"127.0.0.1:5".parse().unwrap()));
        assert!(ip_is_local(&"0.0.0.0:0".parse().unwrap()));
        assert!(ip_is_local(&"[::1]:7".parse().unwrap()));
        // TEST-NET-1 (RFC 5737) is never assigned to a host.
        assert!(!ip_is_local(&"192.0.2.1:5".parse().unwrap()));
    }
}
