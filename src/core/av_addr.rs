//! Address formats of an AV (how the addresses handed to `fi_av_insert`
//! are laid out, by domain transport and `addr_format`), the destination
//! check every inserted address passes, and node/service names
//! (`fi_av_insertsvc`, `fi_av_insertsym`) resolved to addresses.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::domain::TransportKind;
use crate::transport::addr::{self, Addr};
use core::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

// ---------------------------------------------------------------------------
// Address formats
// ---------------------------------------------------------------------------

/// How the addresses handed to one AV are laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AvFormat {
    /// `FI_ADDR_STR`: NUL-terminated strings packed back to back.
    Str,
    /// `FI_SOCKADDR_IN`: 16-byte `sockaddr_in`s.
    SockaddrIn,
    /// `FI_SOCKADDR_IN6`: 28-byte slots (`sockaddr_in6`, or `sockaddr_in`
    /// in the first 16 bytes).
    SockaddrIn6,
    /// `FI_SOCKADDR` / unspecified: slots of the first entry's family size.
    Sockaddr,
}

/// Why an entry was not inserted; becomes the positive `FI_E*` reported in
/// `FI_SYNC_ERR` arrays and EQ error entries.
fn addr_invalid() -> Error {
    Error::INVAL
}

impl AvFormat {
    /// The format an AV of this domain reads (see the module comment).
    pub(crate) fn for_domain(transport: TransportKind, addr_format: u32) -> AvFormat {
        match transport {
            TransportKind::Shm | TransportKind::Auto => AvFormat::Str,
            TransportKind::Tcp => match addr_format {
                FI_SOCKADDR_IN => AvFormat::SockaddrIn,
                FI_SOCKADDR_IN6 => AvFormat::SockaddrIn6,
                FI_ADDR_STR => AvFormat::Str,
                _ => AvFormat::Sockaddr,
            },
        }
    }

    /// Whether a decoded address may be stored by an AV of this format.
    fn accepts(self, a: &Addr) -> bool {
        !matches!(
            (self, a),
            (AvFormat::SockaddrIn, Addr::Inet(SocketAddr::V6(_)))
                | (
                    AvFormat::SockaddrIn | AvFormat::SockaddrIn6 | AvFormat::Sockaddr,
                    Addr::Shm(_)
                )
        )
    }

    /// The binary form `fi_av_lookup` returns: "the same format as those
    /// stored by the AV".
    pub(crate) fn encode(self, a: &Addr) -> Vec<u8> {
        match self {
            AvFormat::Str => {
                let mut v = a.to_string_form().into_bytes();
                v.push(0);
                v
            }
            _ => a.to_bytes(),
        }
    }

    /// Slot size of a sockaddr array whose first entry has address family
    /// `family` (0 for `Str`, whose entries are walked by their NUL).
    pub(crate) fn stride(self, family: u16) -> usize {
        match self {
            AvFormat::SockaddrIn => addr::SIN_LEN,
            AvFormat::SockaddrIn6 => addr::SIN6_LEN,
            AvFormat::Sockaddr => {
                if family as i32 == libc::AF_INET6 {
                    addr::SIN6_LEN
                } else {
                    addr::SIN_LEN
                }
            }
            AvFormat::Str => 0,
        }
    }

    /// Decodes one address of this format (no destination checks): for
    /// `Str`, the string with its NUL; for sockaddr formats, one slot.
    pub(crate) fn decode(self, bytes: &[u8]) -> Result<Addr> {
        let fmt = match self {
            AvFormat::Str => FI_ADDR_STR,
            AvFormat::SockaddrIn => FI_SOCKADDR_IN,
            // A v6-sized slot may hold either family.
            _ => FI_SOCKADDR,
        };
        Addr::parse(fmt, bytes).map(|(a, _)| a)
    }
}

/// Whether an address can be a destination on this transport.
pub(crate) fn check_dest(transport: TransportKind, format: AvFormat, a: Addr) -> Result<Addr> {
    if !format.accepts(&a) {
        return Err(addr_invalid());
    }
    let inet_ok = |sa: &SocketAddr| {
        let ip = sa.ip();
        let bcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
        !(sa.port() == 0 || ip.is_unspecified() || ip.is_multicast() || bcast)
    };
    match (transport, a) {
        (TransportKind::Shm, Addr::Shm(tok)) if tok != 0 => Ok(a),
        // The auto transport also takes plain shm and TCP addresses (the
        // source addresses it reports, e.g. in FI_SOURCE_ERR's err_data).
        (TransportKind::Auto, Addr::Auto { shm, inet, .. }) => {
            if shm != 0 && inet_ok(&SocketAddr::V4(inet)) {
                Ok(a)
            } else {
                Err(Error::ADDRNOTAVAIL)
            }
        }
        (TransportKind::Auto, Addr::Shm(tok)) if tok != 0 => Ok(a),
        (TransportKind::Auto, Addr::Inet(sa)) if inet_ok(&sa) => Ok(a),
        (TransportKind::Tcp, Addr::Inet(sa)) => {
            let ip = sa.ip();
            let bcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
            if sa.port() == 0 || ip.is_unspecified() || ip.is_multicast() || bcast {
                Err(Error::ADDRNOTAVAIL)
            } else {
                Ok(a)
            }
        }
        (TransportKind::Shm, Addr::Shm(_)) => Err(Error::ADDRNOTAVAIL),
        _ => Err(addr_invalid()),
    }
}

// ---------------------------------------------------------------------------
// Node / service names (fi_av_insertsvc, fi_av_insertsym)
// ---------------------------------------------------------------------------

/// The node names of `fi_av_insertsym`: "Inserted node addresses will be of
/// the range {node, node + nodecnt - 1}". IP literals count up as addresses;
/// other names count up their numeric suffix ("If node is a non-numeric
/// string, such as a hostname, it must contain a numeric suffix if
/// nodecnt > 1"), keeping its zero padding (`node01` → `node02`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NodeSeq {
    Single(String),
    V4(u32),
    V6(u128),
    Suffix { prefix: String, start: u64, width: usize },
}

impl NodeSeq {
    pub(crate) fn new(node: &str, nodecnt: usize) -> Result<NodeSeq> {
        if node.is_empty() {
            return Err(Error::INVAL);
        }
        if nodecnt <= 1 {
            return Ok(NodeSeq::Single(node.to_string()));
        }
        let last = (nodecnt - 1) as u128;
        if let Ok(v4) = node.parse::<Ipv4Addr>() {
            let base = u32::from(v4);
            if base as u128 + last > u32::MAX as u128 {
                return Err(Error::INVAL);
            }
            return Ok(NodeSeq::V4(base));
        }
        if let Ok(v6) = node.parse::<Ipv6Addr>() {
            let base = u128::from(v6);
            base.checked_add(last).ok_or(Error::INVAL)?;
            return Ok(NodeSeq::V6(base));
        }
        let digits = node.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 18 {
            return Err(Error::INVAL);
        }
        let (prefix, num) = node.split_at(node.len() - digits);
        let start: u64 = num.parse().map_err(|_| Error::INVAL)?;
        start.checked_add(last as u64).ok_or(Error::INVAL)?;
        Ok(NodeSeq::Suffix {
            prefix: prefix.to_string(),
            start,
            width: digits,
        })
    }

    pub(crate) fn nth(&self, i: usize) -> String {
        match self {
            NodeSeq::Single(s) => s.clone(),
            NodeSeq::V4(b) => Ipv4Addr::from(b + i as u32).to_string(),
            NodeSeq::V6(b) => Ipv6Addr::from(b + i as u128).to_string(),
            NodeSeq::Suffix { prefix, start, width } => {
                format!("{prefix}{:0width$}", start + i as u64, width = *width)
            }
        }
    }
}

/// The services of `fi_av_insertsym`: "{service, service + svccnt - 1}".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SvcSeq {
    /// `service` NULL (only with svccnt 1).
    None,
    Single(String),
    Numeric(u64),
}

impl SvcSeq {
    /// `max` is the largest valid service number (65535 for TCP ports).
    pub(crate) fn new(service: Option<&str>, svccnt: usize, max: u64) -> Result<SvcSeq> {
        match service {
            None if svccnt <= 1 => Ok(SvcSeq::None),
            None => Err(Error::INVAL),
            Some(s) if svccnt <= 1 => Ok(SvcSeq::Single(s.to_string())),
            Some(s) => {
                let start: u64 = s.parse().map_err(|_| Error::INVAL)?;
                match start.checked_add(svccnt as u64 - 1) {
                    Some(last) if last <= max => Ok(SvcSeq::Numeric(start)),
                    _ => Err(Error::INVAL),
                }
            }
        }
    }

    pub(crate) fn nth(&self, i: usize) -> Option<String> {
        match self {
            SvcSeq::None => None,
            SvcSeq::Single(s) => Some(s.clone()),
            SvcSeq::Numeric(b) => Some((b + i as u64).to_string()),
        }
    }
}

/// Resolves a TCP `node`/`service` pair (numeric fast path, else
/// `getaddrinfo`). `family` restricts the result (AF_UNSPEC for any).
pub(crate) fn resolve_inet(node: &str, service: Option<&str>, family: c_int) -> Result<Addr> {
    if let (Ok(ip), Some(Ok(port))) = (node.parse::<IpAddr>(), service.map(str::parse::<u16>)) {
        let fam_ok = match ip {
            IpAddr::V4(_) => family != libc::AF_INET6,
            IpAddr::V6(_) => family != libc::AF_INET,
        };
        return if fam_ok {
            Ok(Addr::Inet(SocketAddr::new(ip, port)))
        } else {
            Err(Error::ADDRNOTAVAIL)
        };
    }
    let fam = match family {
        libc::AF_INET => crate::sys::resolve::Family::V4,
        libc::AF_INET6 => crate::sys::resolve::Family::V6,
        _ => crate::sys::resolve::Family::Any,
    };
    crate::sys::resolve::resolve(Some(node), service, fam, Default::default())
        .and_then(|v| v.into_iter().next())
        .map(Addr::Inet)
        .ok_or(Error::ADDRNOTAVAIL)
}
