//! Endpoint addresses, in the two formats rustfab speaks.
//!
//! * **shm** (`FI_ADDR_STR`): `"fi_rustfab_shm://"` followed by exactly 16
//!   lowercase hex digits (a 64-bit token) and a NUL — always 34 bytes, so
//!   every endpoint name has the same length (Open MPI 4.1.4 requires that)
//!   and arrays of names can be walked either by `strlen + 1` (libfabric's
//!   `FI_ADDR_STR` convention) or by a fixed stride. The token names the
//!   endpoint's shared-memory segment. Random for anonymous endpoints; for
//!   endpoints named by `node`/`service` (fabtests' `-s addr` style) it is a
//!   hash of `"node:service"`, so that a client resolving the same strings
//!   finds the server.
//! * **tcp** (`FI_SOCKADDR_IN` / `FI_SOCKADDR_IN6`): the endpoint's listening
//!   socket address as `struct sockaddr_in` (16 bytes) / `sockaddr_in6` (28).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::sys::sockaddr::{self, Kind};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

pub(crate) const SHM_PREFIX: &str = "fi_rustfab_shm://";
pub(crate) const AUTO_PREFIX: &str = "fi_rustfab://";
/// Bytes of an auto address including its NUL: prefix, then 16 hex digits
/// of host identity, 16 of shm token, 8 of IPv4 address, 4 of port.
pub(crate) const AUTO_ADDR_LEN: usize = AUTO_PREFIX.len() + 16 + 16 + 8 + 4 + 1;
/// Bytes of an shm address including its NUL.
pub(crate) const SHM_ADDR_LEN: usize = SHM_PREFIX.len() + 16 + 1;
pub(crate) const SIN_LEN: usize = sockaddr::SIN_LEN;
pub(crate) const SIN6_LEN: usize = sockaddr::SIN6_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Addr {
    /// A shared-memory endpoint, by segment token.
    Shm(u64),
    /// A TCP endpoint, by listening address.
    Inet(SocketAddr),
    /// An endpoint of the auto transport: reachable over shared memory by
    /// processes on the same host (same `host` identity, see [`host_id`])
    /// and over TCP by everyone else. `host` 0 means "not known to be
    /// local" (a remote node named in fi_getinfo).
    Auto { host: u64, shm: u64, inet: SocketAddrV4 },
}

impl Addr {
    /// The libfabric address format of this address.
    pub(crate) fn format(&self) -> u32 {
        match self {
            Addr::Shm(_) | Addr::Auto { .. } => FI_ADDR_STR,
            Addr::Inet(SocketAddr::V4(_)) => FI_SOCKADDR_IN,
            Addr::Inet(SocketAddr::V6(_)) => FI_SOCKADDR_IN6,
        }
    }

    #[cfg(test)]
    /// Length of the binary form.
    pub(crate) fn len(&self) -> usize {
        match self {
            Addr::Shm(_) => SHM_ADDR_LEN,
            Addr::Auto { .. } => AUTO_ADDR_LEN,
            Addr::Inet(SocketAddr::V4(_)) => SIN_LEN,
            Addr::Inet(SocketAddr::V6(_)) => SIN6_LEN,
        }
    }

    /// The binary form applications see (fi_getname, fi_av_lookup, src_addr).
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        match self {
            Addr::Shm(_) | Addr::Auto { .. } => {
                let mut v = self.to_string_form().into_bytes();
                v.push(0);
                v
            }
            Addr::Inet(a) => sockaddr::encode(&a),
        }
    }

    /// Parses one address of format `fmt` from the front of `b`; returns the
    /// address and the number of bytes it used. `fmt` 0 means "guess from
    /// the bytes" (shm prefix, or the sockaddr family field).
    pub(crate) fn parse(fmt: u32, b: &[u8]) -> Result<(Addr, usize)> {
        let fmt = if fmt == FI_FORMAT_UNSPEC || fmt == FI_SOCKADDR {
            guess_format(b)?
        } else {
            fmt
        };
        match fmt {
            FI_ADDR_STR => {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                let s = std::str::from_utf8(&b[..end]).map_err(|_| Error::INVAL)?;
                let a = Addr::parse_str(s)?;
                Ok((a, (end + 1).min(b.len())))
            }
            FI_SOCKADDR_IN => sockaddr::decode(b, Kind::V4)
                .map(|a| (Addr::Inet(a), SIN_LEN))
                .ok_or(Error::INVAL),
            FI_SOCKADDR_IN6 => sockaddr::decode(b, Kind::V6)
                .map(|a| (Addr::Inet(a), SIN6_LEN))
                .ok_or(Error::INVAL),
            _ => Err(Error::INVAL),
        }
    }

    /// Parses the string form (`fi_av_straddr` output, `FI_ADDR_STR` names,
    /// `fi_sockaddr_in://a.b.c.d:port`, `fi_sockaddr_in6://[..]:port`).
    pub(crate) fn parse_str(s: &str) -> Result<Addr> {
        if let Some(hex) = s.strip_prefix(AUTO_PREFIX) {
            let field = |r: core::ops::Range<usize>| -> Result<u64> {
                let f = hex.get(r).ok_or(Error::INVAL)?;
                if !f.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
                    return Err(Error::INVAL);
                }
                u64::from_str_radix(f, 16).map_err(|_| Error::INVAL)
            };
            if hex.len() != 44 {
                return Err(Error::INVAL);
            }
            let (host, shm) = (field(0..16)?, field(16..32)?);
            let ip = Ipv4Addr::from(field(32..40)? as u32);
            let port = field(40..44)? as u16;
            return Ok(Addr::Auto {
                host,
                shm,
                inet: SocketAddrV4::new(ip, port),
            });
        }
        if let Some(hex) = s.strip_prefix(SHM_PREFIX) {
            if hex.len() != 16 || !hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
                return Err(Error::INVAL);
            }
            return u64::from_str_radix(hex, 16).map(Addr::Shm).map_err(|_| Error::INVAL);
        }
        for p in ["fi_sockaddr_in://", "fi_sockaddr_in6://"] {
            if let Some(rest) = s.strip_prefix(p) {
                return rest.parse::<SocketAddr>().map(Addr::Inet).map_err(|_| Error::INVAL);
            }
        }
        Err(Error::INVAL)
    }

    /// The string form, as `fi_av_straddr` prints it.
    pub(crate) fn to_string_form(self) -> String {
        match self {
            Addr::Shm(tok) => format!("{SHM_PREFIX}{tok:016x}"),
            Addr::Auto { host, shm, inet } => {
                format!(
                    "{AUTO_PREFIX}{host:016x}{shm:016x}{:08x}{:04x}",
                    u32::from(*inet.ip()),
                    inet.port()
                )
            }
            Addr::Inet(a @ SocketAddr::V4(_)) => format!("fi_sockaddr_in://{a}"),
            Addr::Inet(a @ SocketAddr::V6(_)) => format!("fi_sockaddr_in6://{a}"),
        }
    }
}

fn guess_format(b: &[u8]) -> Result<u32> {
    if b.starts_with(SHM_PREFIX.as_bytes()) || b.starts_with(AUTO_PREFIX.as_bytes()) {
        return Ok(FI_ADDR_STR);
    }
    match sockaddr::kind(b) {
        Some(Kind::V4) => Ok(FI_SOCKADDR_IN),
        Some(Kind::V6) => Ok(FI_SOCKADDR_IN6),
        None => Err(Error::INVAL),
    }
}

/// Deterministic token for an shm endpoint named by `node`/`service`
/// (FNV-1a 64; 0 is avoided). Shared memory is host-local and fi_getinfo
/// only picks shm for local nodes, so a service names the endpoint whatever
/// the node is spelled as (`127.0.0.1`, `localhost`, none): a server started
/// without `-s` and a client that names 127.0.0.1 meet. A node alone (no
/// service) names an endpoint by the node string.
pub(crate) fn shm_token_for(node: Option<&str>, service: Option<&str>) -> u64 {
    let s = match service {
        Some(svc) => format!(":{svc}"),
        None => format!("{}:", node.unwrap_or("")),
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    if h == 0 {
        1
    } else {
        h
    }
}

/// This host's identity for the auto transport: processes that share it
/// (same booted kernel, same user, same IPC and mount namespaces — hence the
/// same /dev/shm and the right to open each other's 0600 segments) talk over
/// shared memory; everyone else over TCP. Never 0.
pub(crate) fn host_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let [boot, ipc, mnt] = crate::sys::host_facts();
        let s = format!("{boot}|{}|{ipc}|{mnt}", crate::sys::geteuid());
        shm_token_for(Some(&s), None)
    })
}

/// A fresh random token for an anonymous shm endpoint.
pub(crate) fn shm_token_random() -> u64 {
    match crate::sys::random_u64() {
        Some(t) if t != 0 => t,
        _ => {
            // Fall back to time ^ pid; uniqueness is rechecked by O_EXCL
            // anyway.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (now.as_nanos() as u64) ^ ((crate::sys::getpid() as u64) << 32) | 1
        }
    }
}

/// Views a plain C struct as bytes.
///
/// # Safety
/// `T` must be plain old data (no pointers whose bytes matter, no invalid
/// bit patterns when read back).
pub(crate) unsafe fn as_bytes<T>(t: &T) -> &[u8] {
    // SAFETY: `t` is a live reference; the slice covers exactly its bytes.
    unsafe { core::slice::from_raw_parts(t as *const T as *const u8, core::mem::size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_round_trip_fixed_length() {
        let a = Addr::Shm(0x0123_4567_89ab_cdef);
        let b = a.to_bytes();
        assert_eq!(b.len(), SHM_ADDR_LEN);
        assert_eq!(*b.last().unwrap(), 0);
        assert_eq!(Addr::parse(FI_ADDR_STR, &b).unwrap(), (a, SHM_ADDR_LEN));
        assert_eq!(Addr::parse(0, &b).unwrap().0, a);
        assert_eq!(Addr::parse_str(&a.to_string_form()).unwrap(), a);
    }

    #[test]
    fn auto_round_trip_fixed_length() {
        let a = Addr::Auto {
            host: host_id(),
            shm: 0xfeed,
            inet: "10.1.2.3:4567".parse().unwrap(),
        };
        let b = a.to_bytes();
        assert_eq!(b.len(), AUTO_ADDR_LEN);
        const { assert!(AUTO_ADDR_LEN <= FI_NAME_MAX) };
        assert_eq!(Addr::parse(FI_ADDR_STR, &b).unwrap(), (a, AUTO_ADDR_LEN));
        assert_eq!(Addr::parse(0, &b).unwrap().0, a);
        assert_eq!(Addr::parse_str(&a.to_string_form()).unwrap(), a);
        assert!(Addr::parse_str("fi_rustfab://123").is_err());
        assert!(Addr::parse_str(&format!("{AUTO_PREFIX}{}", "g".repeat(44))).is_err());
        assert_ne!(host_id(), 0);
        assert_eq!(host_id(), host_id());
    }

    #[test]
    fn inet_round_trip() {
        for s in ["127.0.0.1:9228", "[::1]:80"] {
            let a = Addr::Inet(s.parse().unwrap());
            let b = a.to_bytes();
            assert_eq!(b.len(), a.len());
            assert_eq!(Addr::parse(a.format(), &b).unwrap().0, a);
            assert_eq!(Addr::parse(0, &b).unwrap().0, a);
            assert_eq!(Addr::parse_str(&a.to_string_form()).unwrap(), a);
        }
    }

    #[test]
    fn bad_addresses_rejected() {
        assert!(Addr::parse(FI_ADDR_STR, b"fi_rustfab_shm://xyz\0").is_err());
        assert!(Addr::parse(FI_ADDR_STR, b"fi_shm://1234\0").is_err());
        assert!(Addr::parse(FI_SOCKADDR_IN, &[0u8; 4]).is_err());
        assert!(Addr::parse(FI_SOCKADDR_IN, &[0u8; 16]).is_err()); // family 0
        assert!(Addr::parse(0, &[0xffu8; 40]).is_err());
        assert!(Addr::parse(77, &[0u8; 40]).is_err());
    }

    #[test]
    fn named_tokens_are_deterministic() {
        assert_eq!(
            shm_token_for(Some("127.0.0.1"), Some("9228")),
            shm_token_for(Some("127.0.0.1"), Some("9228"))
        );
        assert_eq!(
            shm_token_for(Some("127.0.0.1"), Some("9228")),
            shm_token_for(None, Some("9228"))
        );
        assert_eq!(
            shm_token_for(Some("localhost"), Some("9228")),
            shm_token_for(None, Some("9228"))
        );
        assert_ne!(shm_token_for(Some("a"), None), shm_token_for(Some("b"), None));
        assert_ne!(
            shm_token_for(Some("127.0.0.1"), Some("9228")),
            shm_token_for(Some("127.0.0.1"), Some("9229"))
        );
        assert_ne!(shm_token_random(), shm_token_random());
    }
}
