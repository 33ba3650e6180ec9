//! The TCP connection handshake and the one-connection-per-pair rule.
//! Pure logic (no sockets) so that every rule is unit-tested.
//!
//! A connection starts with a HELLO record from the side that dialed
//! (`REQUEST`), answered by one HELLO from the side that accepted
//! (`ACCEPT`; `REJECT`: "I keep the connection I dialed to you; use
//! that one"; or `REFUSE`, with a reason: the peer gives up on this
//! address). Nothing else flows before the answer, so the loser of a
//! simultaneous connect has sent no data on the connection it drops.
//! With an authentication key (docs/security.md) the dialer's `PROOF`
//! follows the ACCEPT, before any data:
//!
//! ```text
//! WireHdr: op = HELLO, aux = kind (0 request, 1 accept, 2 reject,
//!          3 refuse, 4 proof), data = HELLO_VERSION (2),
//!          tag = the sender's incarnation nonce,
//!          offset = 1 when the sender has an authentication key, else 0,
//!          len = payload = size of the address + 48,
//!          msg_id = the RTS prefix the sender wants pushed to it
//!          (`Hints::rts_prefix`; 0: none); a REFUSE: its reason,
//!          reserved = 0, or on a REQUEST (and its answers) for an extra
//!          link of an established pair: link index | generation << 8
//!          (`links.rs`)
//! payload: the sender's listening address as fi_getname returns it
//!          (struct sockaddr_in or sockaddr_in6, 16 or 28 bytes),
//!          then a 16-byte challenge, then a 32-byte MAC (zeros where
//!          unused)
//! ```
//!
//! Keyed exchange (HMAC-SHA256 under the shared key; `d` the dialer, `a`
//! the acceptor, addresses as their HELLOs carry them, nonces the
//! incarnation nonces):
//!
//! ```text
//! d → a  REQUEST  offset 1, challenge cd
//! a → d  ACCEPT   offset 1, challenge ca, MAC("rustfab-tcp-accept", cd, ca, d, a, nd, na)
//! d → a  PROOF    offset 1, MAC("rustfab-tcp-proof", cd, ca, d, a, nd, na)   then data
//! ```
//!
//! Each side proves the key over the other's fresh challenge, so a
//! recorded exchange cannot be replayed, and the two labels keep one
//! side's MAC from being reflected as the other's. The acceptor takes the
//! connection as the peer only after the PROOF checks out; until then the
//! stream may carry nothing but that PROOF.
//!
//! The nonce is random per endpoint: a HELLO from a known address with a
//! new nonce is a restarted peer; its connection is taken once the old one
//! is seen to be dead (never displacing a live one: see [`decide`]).

use crate::abi::{FI_SOCKADDR_IN, FI_SOCKADDR_IN6};
use crate::transport::addr::{Addr, SIN6_LEN, SIN_LEN};
use crate::transport::proto::{op, WireHdr};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::net::SocketAddr;

/// Version of the handshake payload (`WireHdr::data` of a HELLO). 2: the
/// challenge and MAC follow the address, and REFUSE and PROOF exist.
pub(crate) const HELLO_VERSION: u64 = 2;
/// Bytes of a challenge.
pub(crate) const CHALLENGE_LEN: usize = 16;
/// Bytes of a MAC (HMAC-SHA256).
pub(crate) const MAC_LEN: usize = 32;
const AUTH_LEN: usize = CHALLENGE_LEN + MAC_LEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Request,
    Accept,
    Reject,
    Refuse,
    Proof,
}

impl Kind {
    fn code(self) -> u32 {
        match self {
            Kind::Request => 0,
            Kind::Accept => 1,
            Kind::Reject => 2,
            Kind::Refuse => 3,
            Kind::Proof => 4,
        }
    }
}

/// Why an acceptor refused a connection (`msg_id` of a REFUSE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The claimed address's IP is not the connection's source IP.
    Address = 1,
    /// A live connection holds the claimed address (or it is the
    /// acceptor's own).
    InUse = 2,
    /// The acceptor has an authentication key; the request had none.
    KeyRequired = 3,
    /// The request has a key; the acceptor has none.
    NoKeyHere = 4,
    /// The PROOF did not check out.
    BadProof = 5,
    /// The acceptor holds as many connections as it may, none idle.
    Full = 6,
}

impl Refusal {
    pub(crate) fn from_code(c: u64) -> Option<Refusal> {
        Some(match c {
            1 => Refusal::Address,
            2 => Refusal::InUse,
            3 => Refusal::KeyRequired,
            4 => Refusal::NoKeyHere,
            5 => Refusal::BadProof,
            6 => Refusal::Full,
            _ => return None,
        })
    }

    /// In words, for the log line each side writes.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Refusal::Address => "the claimed address is not the connection's source",
            Refusal::InUse => "a live connection holds that address",
            Refusal::KeyRequired => "the acceptor requires an authentication key and the dialer has none",
            Refusal::NoKeyHere => "the dialer has an authentication key and the acceptor has none",
            Refusal::BadProof => "the authentication proof is wrong (a different key)",
            Refusal::Full => "the acceptor's connection cap is reached with no idle connection",
        }
    }
}

/// A validated handshake record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) kind: Kind,
    pub(crate) addr: SocketAddr,
    pub(crate) nonce: u64,
    /// The sender has an authentication key.
    pub(crate) keyed: bool,
    pub(crate) challenge: [u8; CHALLENGE_LEN],
    pub(crate) mac: [u8; MAC_LEN],
    /// `msg_id`: the RTS prefix asked for, or a REFUSE's reason.
    pub(crate) word: u64,
    /// `reserved`: 0, or the extra link this connection is to be
    /// (index | generation << 8, `links.rs`).
    pub(crate) link: u64,
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

/// What a HELLO says besides its kind and sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extra {
    pub(crate) keyed: bool,
    pub(crate) challenge: [u8; CHALLENGE_LEN],
    pub(crate) mac: [u8; MAC_LEN],
    /// `msg_id` (RTS prefix, or REFUSE reason).
    pub(crate) word: u64,
    /// `reserved`: the extra link (see [`Hello::link`]).
    pub(crate) link: u64,
}

#[cfg(test)]
/// The header and payload of an unkeyed HELLO.
pub(crate) fn encode(kind: Kind, me: &SocketAddr, nonce: u64) -> ([u8; crate::transport::proto::HDR_LEN], Vec<u8>) {
    encode_with(kind, me, nonce, &Extra::default())
}

/// A HELLO of `kind` from `me`.
pub(crate) fn encode_with(
    kind: Kind,
    me: &SocketAddr,
    nonce: u64,
    x: &Extra,
) -> ([u8; crate::transport::proto::HDR_LEN], Vec<u8>) {
    let mut payload = Addr::Inet(*me).to_bytes();
    payload.extend_from_slice(&x.challenge);
    payload.extend_from_slice(&x.mac);
    let mut h = WireHdr::new(op::HELLO);
    h.aux = kind.code();
    h.data = HELLO_VERSION;
    h.tag = nonce;
    h.offset = u64::from(x.keyed);
    h.len = payload.len() as u64;
    h.payload = payload.len() as u32;
    h.msg_id = x.word;
    h.reserved = x.link;
    (h.to_bytes(), payload)
}

/// The RTS prefix a (parsed) HELLO asks for, clamped to what one DATA
/// record carries.
pub(crate) fn rts_prefix(h: &Hello) -> usize {
    h.word.min(super::limits::EAGER_MAX as u64) as usize
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
        3 => Kind::Refuse,
        4 => Kind::Proof,
        _ => return Err(BadHello::Kind),
    };
    if h.flags != 0 || h.offset > 1 {
        return Err(BadHello::Flags);
    }
    let alen = if v6 { SIN6_LEN } else { SIN_LEN };
    if payload.len() != alen + AUTH_LEN || h.len != payload.len() as u64 || h.payload as usize != payload.len() {
        return Err(BadHello::Address);
    }
    let fmt = if v6 { FI_SOCKADDR_IN6 } else { FI_SOCKADDR_IN };
    let addr = match Addr::parse(fmt, &payload[..alen]) {
        Ok((Addr::Inet(a), n)) if n == alen => a,
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
    let mut challenge = [0u8; CHALLENGE_LEN];
    challenge.copy_from_slice(&payload[alen..alen + CHALLENGE_LEN]);
    let mut mac = [0u8; MAC_LEN];
    mac.copy_from_slice(&payload[alen + CHALLENGE_LEN..]);
    Ok(Hello {
        kind,
        addr,
        nonce: h.tag,
        keyed: h.offset == 1,
        challenge,
        mac,
        word: h.msg_id,
        link: h.reserved,
    })
}

/// What both sides of a keyed exchange sign: the two challenges, the two
/// addresses and the two incarnation nonces (dialer's first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Transcript {
    pub(crate) dialer: SocketAddr,
    pub(crate) dialer_nonce: u64,
    pub(crate) dialer_challenge: [u8; CHALLENGE_LEN],
    pub(crate) acceptor: SocketAddr,
    pub(crate) acceptor_nonce: u64,
    pub(crate) acceptor_challenge: [u8; CHALLENGE_LEN],
}

/// Which side's MAC (distinct labels: one side's MAC is never the other's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Acceptor,
    Dialer,
}

fn keyed_mac(key: &[u8], side: Side, t: &Transcript) -> Hmac<Sha256> {
    // HMAC takes keys of any length (hashed when longer than a block).
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts any key length");
    m.update(match side {
        Side::Acceptor => b"rustfab-tcp-accept",
        Side::Dialer => b"rustfab-tcp-proof\0",
    });
    m.update(&t.dialer_challenge);
    m.update(&t.acceptor_challenge);
    m.update(&Addr::Inet(t.dialer).to_bytes());
    m.update(&Addr::Inet(t.acceptor).to_bytes());
    m.update(&t.dialer_nonce.to_le_bytes());
    m.update(&t.acceptor_nonce.to_le_bytes());
    m
}

/// The MAC `side` sends over `t`.
pub(crate) fn sign(key: &[u8], side: Side, t: &Transcript) -> [u8; MAC_LEN] {
    keyed_mac(key, side, t).finalize().into_bytes().into()
}

/// Whether `mac` is `side`'s MAC over `t` (compared in constant time).
pub(crate) fn verify(key: &[u8], side: Side, t: &Transcript, mac: &[u8; MAC_LEN]) -> bool {
    keyed_mac(key, side, t).verify_slice(mac).is_ok()
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
    /// A live connection holds the address (a restarted peer whose old
    /// connection has not ended yet, or an impostor): hold the new one
    /// until the old one is seen to end, refuse it if it does not.
    Park,
    /// Keep ours; refuse the new connection.
    Reject,
    /// Somebody else claims our own address.
    Refuse,
}

/// The one-connection-per-pair rule. A new connection never displaces a
/// live one: only the end of the old connection (end of stream, reset,
/// keepalive or user timeout) lets a newcomer claiming the same address in.
pub(crate) fn decide(me: &SocketAddr, my_nonce: u64, req: &Hello, existing: Existing) -> Decision {
    if req.addr == *me {
        return if req.nonce == my_nonce {
            Decision::SelfConn
        } else {
            Decision::Refuse
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
            if nonce == req.nonce && dialed && keep_own_dial(me, &req.addr) {
                // The peer's half of a simultaneous connect, arriving after
                // our dial was accepted: the peer has dropped it already.
                Decision::Reject
            } else {
                Decision::Park
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
        max_chunk: 1 << 30,
        max_iov: 8,
    };

    fn hi(kind: Kind, addr: SocketAddr, nonce: u64) -> Hello {
        Hello {
            kind,
            addr,
            nonce,
            keyed: false,
            challenge: [0; CHALLENGE_LEN],
            mac: [0; MAC_LEN],
            word: 0,
            link: 0,
        }
    }

    fn round_trip(kind: Kind, a: &str, nonce: u64) -> Result<Hello, BadHello> {
        let addr = sa(a);
        let (h, p) = encode(kind, &addr, nonce);
        let h = WireHdr::from_bytes(&h);
        assert_eq!(h.check(&LIM), Ok(()));
        parse(&h, &p, Family::of(&addr))
    }

    #[test]
    fn hello_round_trips() {
        for k in [Kind::Request, Kind::Accept, Kind::Reject, Kind::Refuse, Kind::Proof] {
            assert_eq!(round_trip(k, "127.0.0.1:9228", 7), Ok(hi(k, sa("127.0.0.1:9228"), 7)));
        }
        // The keyed fields travel.
        let x = Extra {
            keyed: true,
            challenge: [3; CHALLENGE_LEN],
            mac: [4; MAC_LEN],
            word: 99,
            link: 0,
        };
        let (h, p) = encode_with(Kind::Accept, &sa("[::1]:7"), 5, &x);
        let got = parse(&WireHdr::from_bytes(&h), &p, Family::V6).unwrap();
        assert!(got.keyed);
        assert_eq!((got.challenge, got.mac, got.word), (x.challenge, x.mac, 99));
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
        h.data = 1; // the first version (no challenge) is refused
        assert_eq!(parse(&h, &p, Family::V4), Err(BadHello::Version));
        let mut h = good;
        h.offset = 2;
        assert_eq!(parse(&h, &p, Family::V4), Err(BadHello::Flags));
        let mut h = good;
        h.aux = 5;
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
        let req_from = |addr: SocketAddr, nonce| hi(Kind::Request, addr, nonce);
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
        // The higher side never sees its dial accepted in that race: an
        // established dialed connection plus a request waits for the old
        // connection to end (never displaced while it lives).
        assert_eq!(
            decide(&b, 2, &req_from(a, 1), Existing::Up { dialed: true, nonce: 1 }),
            Decision::Park
        );
    }

    #[test]
    fn restart_and_self() {
        let (a, b) = (sa("127.0.0.1:4000"), sa("127.0.0.1:5000"));
        let req = |nonce| hi(Kind::Request, b, nonce);
        assert_eq!(decide(&a, 1, &req(2), Existing::None), Decision::Adopt);
        // Same address, new incarnation (or an impostor: a nonce is no
        // proof): parked until the live connection ends, whatever the
        // tie-break says.
        assert_eq!(
            decide(&a, 1, &req(3), Existing::Up { dialed: true, nonce: 2 }),
            Decision::Park
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
            Decision::Park
        );
        assert_eq!(
            decide(
                &a,
                1,
                &req(2),
                Existing::Up {
                    dialed: false,
                    nonce: 2
                }
            ),
            Decision::Park
        );
        let self_req = hi(Kind::Request, a, 1);
        assert_eq!(decide(&a, 1, &self_req, Existing::Dialing), Decision::SelfConn);
        let impostor = Hello { nonce: 99, ..self_req };
        assert_eq!(decide(&a, 1, &impostor, Existing::None), Decision::Refuse);
    }

    fn transcript() -> Transcript {
        Transcript {
            dialer: sa("10.0.0.1:5000"),
            dialer_nonce: 11,
            dialer_challenge: [1; CHALLENGE_LEN],
            acceptor: sa("10.0.0.2:6000"),
            acceptor_nonce: 22,
            acceptor_challenge: [2; CHALLENGE_LEN],
        }
    }

    #[test]
    fn macs_prove_the_key_over_the_whole_transcript() {
        let t = transcript();
        let key = b"a shared secret";
        let m = sign(key, Side::Acceptor, &t);
        assert!(verify(key, Side::Acceptor, &t, &m));
        // Another key, the other side's label, or any field changed: no.
        assert!(!verify(b"another secret", Side::Acceptor, &t, &m));
        assert!(!verify(key, Side::Dialer, &t, &m));
        let changes: [fn(&mut Transcript); 6] = [
            |t| t.dialer = "10.0.0.3:5000".parse().unwrap(),
            |t| t.dialer_nonce += 1,
            |t| t.dialer_challenge[15] ^= 1,
            |t| t.acceptor = "10.0.0.2:6001".parse().unwrap(),
            |t| t.acceptor_nonce += 1,
            |t| t.acceptor_challenge[0] ^= 1,
        ];
        for change in changes {
            let mut u = t;
            change(&mut u);
            assert!(!verify(key, Side::Acceptor, &u, &m));
        }
        // Any key length works (HMAC hashes long ones).
        let long = vec![7u8; 500];
        assert!(verify(&long, Side::Dialer, &t, &sign(&long, Side::Dialer, &t)));
    }
}
