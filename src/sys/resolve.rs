//! Name resolution: `getaddrinfo` for stream sockets, every distinct IPv4 or
//! IPv6 result in the resolver's order.

use std::ffi::CString;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Which addresses to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Any,
    V4,
    V6,
}

/// How to ask.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lookup {
    /// `AI_PASSIVE`: a NULL node means the wildcard address (to bind).
    pub passive: bool,
    /// `AI_NUMERICHOST`: the node is an address literal, never a name.
    pub numeric: bool,
}

/// Resolves `node`/`service` (either may be None, not both). `None` when
/// the resolver fails or a string holds a NUL.
pub(crate) fn resolve(
    node: Option<&str>,
    service: Option<&str>,
    family: Family,
    how: Lookup,
) -> Option<Vec<SocketAddr>> {
    let cnode = node.map(CString::new).transpose().ok()?;
    let cservice = service.map(CString::new).transpose().ok()?;
    // SAFETY: addrinfo is plain old data; all-zero means "no hints".
    let mut hints: libc::addrinfo = unsafe { core::mem::zeroed() };
    hints.ai_family = match family {
        Family::Any => libc::AF_UNSPEC,
        Family::V4 => libc::AF_INET,
        Family::V6 => libc::AF_INET6,
    };
    hints.ai_socktype = libc::SOCK_STREAM;
    if how.passive {
        hints.ai_flags |= libc::AI_PASSIVE;
    }
    if how.numeric {
        hints.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut res: *mut libc::addrinfo = core::ptr::null_mut();
    // SAFETY: both strings are NUL-terminated or NULL, `hints` is
    // initialised and `res` is a valid out pointer; the list it receives is
    // freed below.
    let rc = unsafe {
        libc::getaddrinfo(
            cnode.as_ref().map_or(core::ptr::null(), |c| c.as_ptr()),
            cservice.as_ref().map_or(core::ptr::null(), |c| c.as_ptr()),
            &hints,
            &mut res,
        )
    };
    if rc != 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut cur = res;
    while !cur.is_null() {
        // SAFETY: `cur` is an element of the list getaddrinfo returned,
        // which is not freed yet.
        let ai = unsafe { &*cur };
        // SAFETY: `ai_addr` is NULL or points to `ai_addrlen` bytes.
        if let Some(a) = unsafe { socket_addr_from_raw(ai.ai_addr, ai.ai_addrlen as usize) } {
            if !out.contains(&a) {
                out.push(a);
            }
        }
        cur = ai.ai_next;
    }
    // SAFETY: `res` came from a successful getaddrinfo and is freed once.
    unsafe { libc::freeaddrinfo(res) };
    Some(out)
}

/// Decodes a `sockaddr_in`/`sockaddr_in6` (anything else: None).
///
/// # Safety
/// `p` must be NULL or point to `len` readable bytes.
pub(crate) unsafe fn socket_addr_from_raw(p: *const libc::sockaddr, len: usize) -> Option<SocketAddr> {
    if p.is_null() || len < core::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family field is readable (checked above).
    let family = unsafe { core::ptr::addr_of!((*p).sa_family).read_unaligned() } as i32;
    match family {
        libc::AF_INET if len >= core::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family and length say `p` holds a sockaddr_in.
            let sin = unsafe { (p as *const libc::sockaddr_in).read_unaligned() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len >= core::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: the family and length say `p` holds a sockaddr_in6.
            let s = unsafe { (p as *const libc::sockaddr_in6).read_unaligned() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_hosts_resolve_without_a_resolver() {
        let v = resolve(
            Some("127.0.0.1"),
            Some("4242"),
            Family::Any,
            Lookup {
                numeric: true,
                ..Default::default()
            },
        );
        assert_eq!(v, Some(vec!["127.0.0.1:4242".parse().unwrap()]));
        let v = resolve(
            None,
            Some("7"),
            Family::V6,
            Lookup {
                passive: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(v, vec!["[::]:7".parse().unwrap()]);
        assert_eq!(
            resolve(
                Some("not an address"),
                None,
                Family::Any,
                Lookup {
                    numeric: true,
                    ..Default::default()
                }
            ),
            None
        );
        assert_eq!(resolve(Some("a\0b"), None, Family::Any, Lookup::default()), None);
    }
}
