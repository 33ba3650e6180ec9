//! The TCP connection handshake and the one-connection-per-pair rule.
//! Pure logic (no sockets) so that every rule is unit-tested.
//!
//! A connection starts with a HELLO record from the side that dialed
//! (`REQUEST`), answered by one HELLO from the side that accepted
//! (`ACCEPT`, or `REJECT`: "I keep the connection I dialed to you; use
//! that one"). Nothing else flows before the answer, so the loser of a
//! simultaneous connect has sent no data on the connection it drops.
//!
//! ```text
//! WireHdr: op = HELLO, aux = kind (0 request, 1 accept, 2 reject),
//!          data = HELLO_VERSION, tag = the sender's incarnation nonce,
//!          len = payload = size of the address,
//!          msg_id = the RTS prefix the sender wants pushed to it
//!          (`Port::rts_prefix`; 0: none — what older peers send)
//! payload: the sender's listening address as fi_getname returns it
//!          (struct sockaddr_in or sockaddr_in6, 16 or 28 bytes)
//! ```
//!
//! The nonce is random per endpoint: a HELLO from a known address with a
//! new nonce is a restarted peer, whose old connection (and everything
//! still pending on it) ends in error before the new one is used.

use crate::abi::{FI_SOCKADDR_IN, FI_SOCKADDR_IN6};
use crate::transport::addr::{Addr, SIN6_LEN, SIN_LEN};
use crate::transport::proto::{op, WireHdr};
use std::net::SocketAddr;

/// Version of the handshake payload (`WireHdr::data` of a HELLO).
pub(crate) const HELLO_VERSION: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Request,
    Accept,
    Reject,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Request => 0,
            Kind::Accept => 1,
            Kind::Reject => 2,
        }
    }
}

/// A validated handshake record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) kind: Kind,
    pub(crate) addr: SocketAddr,
    pub(crate) nonce: u64,
}

/// Why a HELLO was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadHello {
    Version,
    Kind,
    Flags,
    Address,
    Family,
}

#[cfg(test)]
/// The header and payload of a HELLO.
pub(crate) fn encode(kind: Kind, me: &SocketAddr, nonce: u64) -> ([u8; crate::transport::proto::HDR_LEN], Vec<u8>) {
    encode_with_prefix(kind, me, nonce, 0)
}

/// A HELLO that also asks the peer to push `rts_prefix` bytes behind every
/// RTS it sends us.
pub(crate) fn encode_with_prefix(
    kind: Kind,
    me: &SocketAddr,
    nonce: u64,
    rts_prefix: u64,
) -> ([u8; crate::transport::proto::HDR_LEN], Vec<u8>) {
    let payload = Addr::Inet(*me).to_bytes();
    let mut h = WireHdr::new(op::HELLO);
    h.aux = kind.code();
    h.data = HELLO_VERSION;
    h.tag = nonce;
    h.len = payload.len() as u64;
    h.payload = payload.len() as u32;
    h.msg_id = rts_prefix;
    (h.to_bytes(), payload)
}

/// The RTS prefix a (parsed) HELLO asks for, clamped to what one DATA
/// record carries.
pub(crate) fn rts_prefix(h: &WireHdr) -> usize {
    h.msg_id.min(super::EAGER_MAX as u64) as usize
}

/// The address family an endpoint speaks (a connection joins one family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    V4,
    V6,
}

impl Family {
    pub(crate) fn of(a: &SocketAddr) -> Family {
        if a.is_ipv6() {
            Family::V6
        } else {
            Family::V4
        }
    }
}

/// Validates a HELLO whose header already passed `WireHdr::check`, for an
/// endpoint of `family`.
pub(crate) fn parse(h: &WireHdr, payload: &[u8], family: Family) -> Result<Hello, BadHello> {
    let v6 = family == Family::V6;
    if h.op != op::HELLO || h.data != HELLO_VERSION {
        return Err(BadHello::Version);
    }
    let kind = match h.aux {
        0 => Kind::Request,
        1 => Kind::Accept,
        2 => Kind::Reject,
        _ => return Err(BadHello::Kind),
    };
    if h.flags != 0 || h.offset != 0 || h.reserved != 0 {
        return Err(BadHello::Flags);
    }
    let want = if v6 { SIN6_LEN } else { SIN_LEN };
    if payload.len() != want || h.len != payload.len() as u64 || h.payload as usize != payload.len() {
        return Err(BadHello::Address);
    }
    let fmt = if v6 { FI_SOCKADDR_IN6 } else { FI_SOCKADDR_IN };
    let addr = match Addr::parse(fmt, payload) {
        Ok((Addr::Inet(a), n)) if n == payload.len() => a,
        _ => return Err(BadHello::Family),
    };
    if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(BadHello::Address);
    }
    if let SocketAddr::V4(a) = addr {
        if a.ip().is_broadcast() {
            return Err(BadHello::Address);
        }
    }
    Ok(Hello {
        kind,
        addr,
        nonce: h.tag,
    })
}

/// The simultaneous-connect tie-break: when both endpoints dialed each
/// other, the connection dialed by the lower listening address survives
/// (both sides compute the same answer from the same two addresses).
pub(crate) fn keep_own_dial(me: &SocketAddr, peer: &SocketAddr) -> bool {
    order_key(me) < order_key(peer)
}

fn order_key(a: &SocketAddr) -> (u8, [u8; 16], u16) {
    match a {
        SocketAddr::V4(v) => (4, v.ip().to_ipv6_mapped().octets(), v.port()),
        SocketAddr::V6(v) => (6, v.ip().octets(), v.port()),
    }
}

/// What this endpoint knows about the peer a REQUEST comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Existing {
    /// No connection (or waiting for the peer to dial after a reject).
    None,
    /// Our own dial to the peer, not answered yet.
    Dialing,
    /// An established connection (`dialed`: we dialed it) to incarnation
    /// `nonce`.
    Up { dialed: bool, nonce: u64 },
}

/// What to do with an inbound REQUEST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Our own dial to ourselves: read it as inbound from us.
    SelfConn,
    /// Use the new connection for this peer.
    Adopt,
    /// Use the new one; drop our unanswered dial quietly (it carried no data).
    TakeOver,
    /// The old connection is dead from the peer's side (restart, or it gave
    /// up on it): fail it, then use the new one.
    Replace,
    /// Keep ours; refuse the new connection.
    Reject,
}

pub(crate) fn decide(me: &SocketAddr, my_nonce: u64, req: &Hello, existing: Existing) -> Decision {
    if req.addr == *me {
        return if req.nonce == my_nonce {
            Decision::SelfConn
        } else {
            // Somebody else claims our address.
            Decision::Reject
        };
    }
    match existing {
        Existing::None => Decision::Adopt,
        Existing::Dialing => {
            if keep_own_dial(me, &req.addr) {
                Decision::Reject
            } else {
                Decision::TakeOver
            }
        }
        Existing::Up { dialed, nonce } => {
            if nonce != req.nonce {
                Decision::Replace
            } else if dialed && keep_own_dial(me, &req.addr) {
                // The peer's half of a simultaneous connect, arriving after
                // our dial was accepted: the peer has dropped it already.
                Decision::Reject
            } else {
                Decision::Replace
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::{Limits, HDR_LEN};

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const LIM: Limits = Limits {
        max_payload: 1 << 30,
        max_iov: 8,
    };

    fn round_trip(kind: Kind, a: &str, nonce: u64) -> Result<Hello, BadHello> {
        let addr = sa(a);
        let (h, p) = encode(kind, &addr, nonce);
        let h = WireHdr::from_bytes(&h);
        assert_eq!(h.check(&LIM), Ok(()));
        parse(&h, &p, Family::of(&addr))
    }

    #[test]
    fn hello_round_trips() {
        for k in [Kind::Request, Kind::Accept, Kind::Reject] {
            assert_eq!(
                round_trip(k, "127.0.0.1:9228", 7),
                Ok(Hello {
                    kind: k,
                    addr: sa("127.0.0.1:9228"),
                    nonce: 7
                })
            );
        }
        assert_eq!(round_trip(Kind::Request, "[::1]:80", 1).unwrap().addr, sa("[::1]:80"));
    }

    #[test]
    fn bad_hellos_rejected() {
        let me = sa("10.1.2.3:5000");
        let (hb, p) = encode(Kind::Request, &me, 9);
        let good = WireHdr::from_bytes(&hb);
        assert!(parse(&good, &p, Family::V4).is_ok());
        // Wrong family for this endpoint.
        assert_eq!(parse(&good, &p, Family::V6), Err(BadHello::Address));
        let mut h = good;
        h.data = 2;
        assert_eq!(parse(&h, &p, Family::V4), Err(BadHello::Version));
        let mut h = good;
        h.aux = 3;
        assert_eq!(parse(&h, &p, Family::V4), Err(BadHello::Kind));
        let mut h = good;
        h.flags = 1;
        assert_eq!(parse(&h, &p, Family::V4), Err(BadHello::Flags));
        // Truncated / padded address.
        let mut h = good;
        h.payload = 15;
        h.len = 15;
        assert_eq!(parse(&h, &p[..15], Family::V4), Err(BadHello::Address));
        // A sockaddr_in6 payload claiming to be v4-sized garbage: family field wrong.
        let mut garbage = p.clone();
        garbage[0] = 0xff;
        garbage[1] = 0xff;
        assert_eq!(parse(&good, &garbage, Family::V4), Err(BadHello::Family));
        // Wildcard address or port 0 cannot be dialed back.
        for bad in ["0.0.0.0:5000", "10.1.2.3:0", "255.255.255.255:1", "224.0.0.1:5"] {
            let (hb, p) = encode(Kind::Request, &sa(bad), 1);
            assert_eq!(
                parse(&WireHdr::from_bytes(&hb), &p, Family::V4),
                Err(BadHello::Address),
                "{bad}"
            );
        }
        assert_eq!(HDR_LEN, 64);
    }

    #[test]
    fn tie_break_is_antisymmetric() {
        let pairs = [
            ("127.0.0.1:1000", "127.0.0.1:2000"),
            ("127.0.0.1:2000", "127.0.0.2:1000"),
            ("10.0.0.1:5", "9.255.255.255:6"),
            ("[::1]:5", "[::2]:1"),
        ];
        for (a, b) in pairs {
            let (a, b) = (sa(a), sa(b));
            assert!(keep_own_dial(&a, &b) != keep_own_dial(&b, &a), "{a} {b}");
        }
        assert!(keep_own_dial(&sa("127.0.0.1:1000"), &sa("127.0.0.1:2000")));
        assert!(!keep_own_dial(&sa("127.0.0.1:1000"), &sa("127.0.0.1:1000")));
    }

    /// Both sides dial at once: exactly one of the two connections survives,
    /// whatever order the requests are read in.
    #[test]
    fn simultaneous_dial_keeps_exactly_one_connection() {
        let (a, b) = (sa("127.0.0.1:4000"), sa("127.0.0.1:5000"));
        let req_from = |addr: SocketAddr, nonce| Hello {
            kind: Kind::Request,
            addr,
            nonce,
        };
        // a reads b's request while its own dial is unanswered, and vice versa.
        let at_a = decide(&a, 1, &req_from(b, 2), Existing::Dialing);
        let at_b = decide(&b, 2, &req_from(a, 1), Existing::Dialing);
        assert_eq!(at_a, Decision::Reject); // a (lower) keeps its dial
        assert_eq!(at_b, Decision::TakeOver); // b uses a's dial
                                              // b had already accepted a's dial when b's own request reaches a.
        assert_eq!(
            decide(&a, 1, &req_from(b, 2), Existing::Up { dialed: true, nonce: 2 }),
            Decision::Reject
        );
        // The higher side never sees its dial accepted in that race, so an
        // established dialed connection plus a request means "peer gave up".
        assert_eq!(
            decide(&b, 2, &req_from(a, 1), Existing::Up { dialed: true, nonce: 1 }),
            Decision::Replace
        );
    }

    #[test]
    fn restart_and_self() {
        let (a, b) = (sa("127.0.0.1:4000"), sa("127.0.0.1:5000"));
        let req = |nonce| Hello {
            kind: Kind::Request,
            addr: b,
            nonce,
        };
        assert_eq!(decide(&a, 1, &req(2), Existing::None), Decision::Adopt);
        // Same address, new incarnation: the old connection is replaced even
        // where the tie-break would keep it.
        assert_eq!(
            decide(&a, 1, &req(3), Existing::Up { dialed: true, nonce: 2 }),
            Decision::Replace
        );
        assert_eq!(
            decide(
                &a,
                1,
                &req(3),
                Existing::Up {
                    dialed: false,
                    nonce: 2
                }
            ),
            Decision::Replace
        );
        let self_req = Hello {
            kind: Kind::Request,
            addr: a,
            nonce: 1,
        };
        assert_eq!(decide(&a, 1, &self_req, Existing::Dialing), Decision::SelfConn);
        let impostor = Hello { nonce: 99, ..self_req };
        assert_eq!(decide(&a, 1, &impostor, Existing::None), Decision::Reject);
    }
}
