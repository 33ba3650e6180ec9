//! The addresses of an entry: source and destination per transport, from
//! the hints, `node` and `service`; name resolution.

use super::offer::SHM_ANY_TOKEN;
use super::request::*;
use crate::abi::*;
use crate::sys::net::ip_is_local;
use crate::sys::resolve::Lookup;
use crate::transport::addr::{shm_token_for, Addr};
use std::cell::OnceCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

// ---- Addresses ------------------------------------------------------------

/// `(src_addr, dest_addr)` of an shm entry. Named endpoints use
/// `shm_token_for(node, service)`, like the built-in shm's
/// `smr_resolve_addr`; without a name the source is the wildcard.
pub(super) fn shm_addresses(q: &Query, p: &Prepared) -> (Addr, Option<Addr>) {
    let any = Addr::Shm(SHM_ANY_TOKEN);
    let named = || Addr::Shm(shm_token_for(q.node, q.service));
    if q.source() {
        let src = match (p.node_addr, q.service) {
            (Some(a), _) => a,
            (None, Some(_)) => named(),
            // A node without a service names no endpoint: anonymous.
            (None, None) => p.hint_src.unwrap_or(any),
        };
        (src, p.hint_dest)
    } else {
        let dest = match p.node_addr {
            Some(a) => Some(a),
            None if q.node.is_some() || q.service.is_some() => Some(named()),
            None => p.hint_dest,
        };
        (p.hint_src.unwrap_or(any), dest)
    }
}

/// `(src_addr, dest_addr)` of an auto entry: the shm token as for shm, the
/// IPv4 address as for tcp, and the host identity (ours for the source; a
/// destination's only if its IP is on this host — else 0, "use TCP").
pub(super) fn auto_addresses(q: &Query, p: &Prepared) -> core::result::Result<(Addr, Option<Addr>), Skip> {
    let split = |a: &Option<Addr>, shm: bool| -> Option<Addr> {
        match *a {
            Some(Addr::Auto { shm: tok, inet, .. }) => Some(if shm {
                Addr::Shm(tok)
            } else {
                Addr::Inet(SocketAddr::V4(inet))
            }),
            other => other,
        }
    };
    let view = |shm: bool| Prepared {
        format: if shm { FI_ADDR_STR } else { FI_SOCKADDR_IN },
        hint_src: split(&p.hint_src, shm),
        hint_dest: split(&p.hint_dest, shm),
        node_addr: split(&p.node_addr, shm),
        node_local: OnceCell::new(),
    };
    let (shm_src, shm_dest) = shm_addresses(q, &view(true));
    let (tcp_src, tcp_dest) = tcp_addresses(q, &view(false))?;
    let v4 = |a: Addr| match a {
        Addr::Inet(SocketAddr::V4(v)) => Some(v),
        _ => None,
    };
    let token = |a: Option<Addr>| match a {
        Some(Addr::Shm(t)) => t,
        _ => SHM_ANY_TOKEN,
    };
    let src_inet = v4(tcp_src).ok_or_else(|| skip("auto addresses are IPv4"))?;
    let src = match p.hint_src {
        Some(a @ Addr::Auto { .. }) => a,
        _ => Addr::Auto {
            host: crate::transport::addr::host_id(),
            shm: token(Some(shm_src)),
            inet: src_inet,
        },
    };
    let dest = match (p.hint_dest, p.node_addr, tcp_dest) {
        (_, Some(a @ Addr::Auto { .. }), _) if !q.source() => Some(a),
        (Some(a @ Addr::Auto { .. }), _, _) => Some(a),
        (_, _, Some(d)) => {
            let inet = v4(d).ok_or_else(|| skip("auto addresses are IPv4"))?;
            let local = ip_is_local(IpAddr::V4(*inet.ip()));
            Some(Addr::Auto {
                host: if local { crate::transport::addr::host_id() } else { 0 },
                shm: token(shm_dest),
                inet,
            })
        }
        _ => None,
    };
    Ok((src, dest))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Family {
    /// No preference stated: IPv4 first, IPv6 if that is all there is.
    Any,
    V4,
    V6,
}

impl Family {
    fn of(a: &SocketAddr) -> Family {
        if a.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }
    fn wildcard(self, port: u16) -> SocketAddr {
        match self {
            Family::V6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            _ => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        }
    }
}

pub(super) fn inet(a: &Option<Addr>) -> Option<SocketAddr> {
    match a {
        Some(Addr::Inet(s)) => Some(*s),
        _ => None,
    }
}

/// `(src_addr, dest_addr)` of a tcp entry, resolved with getaddrinfo.
pub(super) fn tcp_addresses(q: &Query, p: &Prepared) -> core::result::Result<(Addr, Option<Addr>), Skip> {
    let hint_src = inet(&p.hint_src);
    let hint_dest = inet(&p.hint_dest);
    let node_addr = inet(&p.node_addr);
    let family = match p.format {
        FI_SOCKADDR_IN => Family::V4,
        FI_SOCKADDR_IN6 => Family::V6,
        _ => node_addr
            .or(hint_src)
            .or(hint_dest)
            .map_or(Family::Any, |a| Family::of(&a)),
    };
    let named = node_addr.is_some() || q.node.is_some() || q.service.is_some();
    let (src, dest) = if q.source() {
        let src = match node_addr {
            Some(a) => a,
            None => resolve(
                q.node,
                q.service,
                family,
                Lookup {
                    passive: true,
                    numeric: q.numeric(),
                },
            )?,
        };
        (src, hint_dest)
    } else {
        let dest = match node_addr {
            Some(a) => Some(a),
            None if named => Some(resolve(
                q.node,
                q.service,
                family,
                Lookup {
                    passive: false,
                    numeric: q.numeric(),
                },
            )?),
            None => hint_dest,
        };
        let src = match (hint_src, dest) {
            (Some(s), _) => s,
            (None, Some(d)) => route_source(&d),
            (None, None) => family.wildcard(0),
        };
        (src, dest)
    };
    if family != Family::Any && Family::of(&src) != family {
        return Err(skip("address does not have the requested family"));
    }
    if dest.is_some_and(|d| Family::of(&d) != Family::of(&src)) {
        return Err(skip("source and destination address families differ"));
    }
    Ok((Addr::Inet(src), dest.map(Addr::Inet)))
}

/// getaddrinfo for TCP: every distinct result, in resolver order.
pub(super) fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    family: Family,
    how: Lookup,
) -> core::result::Result<Vec<SocketAddr>, Skip> {
    let fam = match family {
        Family::Any => crate::sys::resolve::Family::Any,
        Family::V4 => crate::sys::resolve::Family::V4,
        Family::V6 => crate::sys::resolve::Family::V6,
    };
    crate::sys::resolve::resolve(node, service, fam, how).ok_or_else(|| skip("cannot resolve node/service"))
}

/// One address for node/service: the first of the requested family, or for
/// no stated family the first IPv4 result, else the first IPv6 one.
pub(super) fn resolve(
    node: Option<&str>,
    service: Option<&str>,
    family: Family,
    how: Lookup,
) -> core::result::Result<SocketAddr, Skip> {
    let all = getaddrinfo(node, service, family, how)?;
    let pick = match family {
        Family::Any => all.iter().find(|a| a.is_ipv4()).or(all.first()),
        _ => all.first(),
    };
    pick.copied()
        .ok_or_else(|| skip("node/service has no address of the requested family"))
}

/// Whether `node` is this host: one of its addresses is loopback,
/// unspecified, or can be bound here.
pub(super) fn node_is_local(node: &str, numeric: bool) -> bool {
    match getaddrinfo(
        Some(node),
        None,
        Family::Any,
        Lookup {
            passive: false,
            numeric,
        },
    ) {
        Ok(all) => all.iter().any(|a| ip_is_local(a.ip())),
        Err(_) => false,
    }
}

/// The local address the kernel would use to reach `dest`, port 0 (util's
/// `ofi_get_src_addr`); the wildcard if there is no route.
pub(super) fn route_source(dest: &SocketAddr) -> SocketAddr {
    match crate::sys::net::route_source(dest.ip()) {
        Some(ip) => SocketAddr::new(ip, 0),
        None => Family::of(dest).wildcard(0),
    }
}
