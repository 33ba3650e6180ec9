//! The C socket-address layouts (`struct sockaddr_in` / `sockaddr_in6`) as
//! bytes: libfabric's `FI_SOCKADDR_IN[6]` address formats are exactly these
//! structs, so addresses cross the C boundary in this form.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// Bytes of a `struct sockaddr_in`.
pub(crate) const SIN_LEN: usize = core::mem::size_of::<libc::sockaddr_in>();
/// Bytes of a `struct sockaddr_in6`.
pub(crate) const SIN6_LEN: usize = core::mem::size_of::<libc::sockaddr_in6>();

/// Which layout a byte string holds, by its family field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    V4,
    V6,
}

/// The layout named by the family field (the first two bytes, native
/// order); None for any other family or fewer than two bytes.
pub(crate) fn kind(b: &[u8]) -> Option<Kind> {
    let fam = i32::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
    match fam {
        libc::AF_INET => Some(Kind::V4),
        libc::AF_INET6 => Some(Kind::V6),
        _ => None,
    }
}

/// Bytes one address of `kind` occupies.
pub(crate) fn len(kind: Kind) -> usize {
    match kind {
        Kind::V4 => SIN_LEN,
        Kind::V6 => SIN6_LEN,
    }
}

/// Decodes the address of layout `want` at the front of `b`; None if `b`
/// is shorter than that layout or its family field says otherwise.
pub(crate) fn decode(b: &[u8], want: Kind) -> Option<SocketAddr> {
    if kind(b)? != want || b.len() < len(want) {
        return None;
    }
    Some(match want {
        Kind::V4 => {
            // SAFETY: at least SIN_LEN bytes (checked); read_unaligned copes
            // with any alignment, and every bit pattern is a valid
            // sockaddr_in (plain integers).
            let sin: libc::sockaddr_in = unsafe { core::ptr::read_unaligned(b.as_ptr().cast()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)))
        }
        Kind::V6 => {
            // SAFETY: as above, SIN6_LEN bytes of plain integers.
            let s: libc::sockaddr_in6 = unsafe { core::ptr::read_unaligned(b.as_ptr().cast()) };
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(s.sin6_addr.s6_addr),
                u16::from_be(s.sin6_port),
                u32::from_be(s.sin6_flowinfo),
                s.sin6_scope_id,
            ))
        }
    })
}

/// The C struct for `a`, as bytes (SIN_LEN or SIN6_LEN of them).
pub(crate) fn encode(a: &SocketAddr) -> Vec<u8> {
    /// # Safety
    /// `T` is a C struct of plain integers without padding.
    unsafe fn bytes<T>(t: &T) -> Vec<u8> {
        // SAFETY: `t` is live; the slice covers exactly its bytes, all
        // initialised (no padding per the contract).
        unsafe { core::slice::from_raw_parts((t as *const T).cast::<u8>(), core::mem::size_of::<T>()) }.to_vec()
    }
    match a {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in is 2+2+4+8 bytes of integers, no padding.
            unsafe { bytes(&sin) }
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 is 2+2+4+16+4 bytes of integers, no
            // padding.
            unsafe { bytes(&sin6) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip_and_mismatches_are_refused() {
        assert_eq!((SIN_LEN, SIN6_LEN), (16, 28));
        let v4: SocketAddr = "10.1.2.3:4567".parse().unwrap();
        let v6: SocketAddr = "[fe80::1%3]:80".parse().unwrap();
        let (b4, b6) = (encode(&v4), encode(&v6));
        assert_eq!((b4.len(), b6.len()), (SIN_LEN, SIN6_LEN));
        assert_eq!(&b4[2..8], &[0x11, 0xd7, 10, 1, 2, 3], "network byte order");
        assert_eq!((kind(&b4), kind(&b6)), (Some(Kind::V4), Some(Kind::V6)));
        assert_eq!(decode(&b4, Kind::V4), Some(v4));
        assert_eq!(decode(&b6, Kind::V6), Some(v6));
        assert_eq!(decode(&b4, Kind::V6), None);
        assert_eq!(decode(&b6[..SIN6_LEN - 1], Kind::V6), None);
        assert_eq!(kind(&[0u8; 16]), None);
        assert_eq!(kind(&[2u8]), None);
    }
}
