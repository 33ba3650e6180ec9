//! Connection management records of connected (`FI_EP_MSG`) endpoints over
//! TCP. Pure encoding and validation (no sockets), so every rule is
//! unit-tested; `connected.rs` uses them for both sides (the active
//! endpoint, and the passive endpoint's listener and connection requests).
//!
//! One TCP connection carries one pair of connected endpoints. It starts with exactly
//! one record from the connecting side and one answer:
//!
//! ```text
//! client                                  server (passive endpoint)
//!   connect()  ───────────────────────────▶ accept(): handshake pending
//!   CONNREQ + client's CM data ───────────▶ FI_CONNREQ event (info, data)
//!                                            fi_accept(ep, data) / fi_reject(pep, data)
//!   FI_CONNECTED (data) ◀─────────────────── ACCEPT + server's CM data
//!   or FI_ECONNREFUSED (err_data) ◀───────── REJECT + server's CM data, close
//! ```
//!
//! After ACCEPT both directions carry the endpoint records of
//! docs/protocol.md (EAGER, RTS, CTS, DATA, ACK) exactly as between two RDM
//! endpoints, and BYE announces an orderly `fi_shutdown`.
//!
//! ```text
//! WireHdr: op = HELLO, aux = kind (16 CONNREQ, 17 ACCEPT, 18 REJECT),
//!          data = CM_VERSION, len = payload = CM data bytes (<= CM_DATA_MAX),
//!          msg_id = the sender's RTS prefix (buffered receives, as in the
//!          RDM HELLO; <= EAGER_MAX, 0 in a REJECT),
//!          flags = 0, or SHM_OFFER (CONNREQ, ACCEPT) with
//!            tag = the sender's host id (docs/auto.md, never 0),
//!            offset = the token of its shm segment (never 0),
//!            reserved = its pid (1 ..= i32::MAX);
//!          without SHM_OFFER: tag, offset, reserved = 0
//! payload: the application's connection data
//! ```
//!
//! The shm offer (docs/shm.md, "Connected endpoints"): an endpoint on the
//! shm or auto transport says where its shared-memory segment is; when both
//! ends offer and are on one host, the connection's data moves over shm
//! rings and the TCP connection carries only BYE (and its liveness).
//!
//! The kinds and `data` differ from the RDM handshake (`hello.rs`: kinds
//! 0..=2, `data` = its version), so a connected endpoint dialing an RDM listener,
//! or the reverse, is refused by either side's validation instead of being
//! misread.

use crate::transport::proto::{op, WireHdr, HDR_LEN};

/// Most bytes of connection data (`FI_OPT_CM_DATA_SIZE`): what one
/// handshake record may carry (the reader's control buffer).
pub(crate) const CM_DATA_MAX: usize = crate::transport::tcp::framing::CTL_MAX;
/// Version of the connection handshake ("RFCM" + 1), in `WireHdr::data`.
pub(crate) const CM_VERSION: u64 = 0x5246_434d_0000_0001;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmKind {
    ConnReq,
    Accept,
    Reject,
}

impl CmKind {
    fn code(self) -> u32 {
        match self {
            CmKind::ConnReq => 16,
            CmKind::Accept => 17,
            CmKind::Reject => 18,
        }
    }
}

/// Why a handshake record was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadCm {
    /// Not a connection handshake (another op, or another handshake's version).
    Version,
    Kind,
    /// Non-zero fields that must be zero.
    Fields,
    Length,
}

/// `WireHdr::flags` of a CONNREQ or ACCEPT carrying a [`ShmOffer`].
pub(crate) const SHM_OFFER: u32 = 1;

/// Where the sender's shared-memory segment is (see the module
/// documentation). What a peer claims here is checked before use
/// (`connected.rs`: same host, a segment that opens, owned by that pid, and
/// records only from that pid as the kernel names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShmOffer {
    pub(crate) host: u64,
    pub(crate) token: u64,
    pub(crate) pid: i32,
}

/// The record for `kind` with `data` (the caller checked `data.len()`
/// against [`CM_DATA_MAX`]), the RTS prefix this side wants pushed to it
/// (`Hints::set_rts_prefix`) and its shm offer (never in a REJECT): header
/// bytes and payload.
pub(crate) fn encode(
    kind: CmKind,
    data: &[u8],
    rts_prefix: usize,
    offer: Option<ShmOffer>,
) -> ([u8; HDR_LEN], Vec<u8>) {
    let n = data.len().min(CM_DATA_MAX);
    let mut h = WireHdr::new(op::HELLO);
    h.aux = kind.code();
    h.data = CM_VERSION;
    h.len = n as u64;
    h.payload = n as u32;
    h.msg_id = rts_prefix.min(crate::transport::tcp::EAGER_MAX) as u64;
    if let Some(o) = offer.filter(|_| kind != CmKind::Reject) {
        h.flags = SHM_OFFER;
        h.tag = o.host;
        h.offset = o.token;
        h.reserved = o.pid as u64;
    }
    (h.to_bytes(), data[..n].to_vec())
}

/// The shm offer of a validated handshake record, if it has one.
pub(crate) fn shm_offer(h: &WireHdr) -> Option<ShmOffer> {
    (h.flags == SHM_OFFER).then_some(ShmOffer {
        host: h.tag,
        token: h.offset,
        pid: h.reserved as i32,
    })
}

/// The RTS prefix a validated handshake record asks for.
pub(crate) fn rts_prefix(h: &WireHdr) -> usize {
    h.msg_id as usize
}

/// Validates a handshake record whose header passed `WireHdr::check`.
pub(crate) fn parse(h: &WireHdr, payload: &[u8]) -> Result<CmKind, BadCm> {
    if h.op != op::HELLO || h.data != CM_VERSION {
        return Err(BadCm::Version);
    }
    let kind = match h.aux {
        16 => CmKind::ConnReq,
        17 => CmKind::Accept,
        18 => CmKind::Reject,
        _ => return Err(BadCm::Kind),
    };
    if h.msg_id > crate::transport::tcp::EAGER_MAX as u64 {
        return Err(BadCm::Fields);
    }
    match h.flags {
        0 if h.tag == 0 && h.offset == 0 && h.reserved == 0 => {}
        // An offer: in a CONNREQ or an ACCEPT only, every field set, the
        // pid one a process can have.
        SHM_OFFER
            if kind != CmKind::Reject
                && h.tag != 0
                && h.offset != 0
                && h.reserved >= 1
                && h.reserved <= i32::MAX as u64 => {}
        _ => return Err(BadCm::Fields),
    }
    if payload.len() > CM_DATA_MAX || h.payload as usize != payload.len() || h.len != payload.len() as u64 {
        return Err(BadCm::Length);
    }
    Ok(kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::Limits;

    const LIM: Limits = Limits {
        max_payload: 1 << 16,
        max_chunk: 1 << 16,
        max_iov: 8,
    };

    #[test]
    fn round_trip_every_kind_and_size() {
        for kind in [CmKind::ConnReq, CmKind::Accept, CmKind::Reject] {
            for n in [0usize, 1, 17, CM_DATA_MAX] {
                let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
                let (h, p) = encode(kind, &data, n, None);
                let h = WireHdr::from_bytes(&h);
                assert_eq!(h.check(&LIM), Ok(()));
                assert_eq!(parse(&h, &p), Ok(kind));
                assert_eq!(rts_prefix(&h), n);
                assert_eq!(p, data);
            }
        }
    }

    #[test]
    fn hostile_or_foreign_records_refused() {
        let (h, p) = encode(CmKind::ConnReq, b"abc", 0, None);
        let good = WireHdr::from_bytes(&h);
        // The RDM handshake (hello.rs) is not a connection handshake, either way.
        let (rh, rp) = crate::transport::tcp::hello::encode(
            crate::transport::tcp::hello::Kind::Request,
            &"127.0.0.1:5".parse().unwrap(),
            7,
        );
        assert_eq!(parse(&WireHdr::from_bytes(&rh), &rp), Err(BadCm::Version));
        assert!(crate::transport::tcp::hello::parse(&good, &p, crate::transport::tcp::hello::Family::V4).is_err());
        let mut x = good;
        x.aux = 2;
        assert_eq!(parse(&x, &p), Err(BadCm::Kind));
        let mut x = good;
        x.tag = 1;
        assert_eq!(parse(&x, &p), Err(BadCm::Fields));
        // A prefix beyond what any eager record could carry.
        let mut x = good;
        x.msg_id = crate::transport::tcp::EAGER_MAX as u64 + 1;
        assert_eq!(parse(&x, &p), Err(BadCm::Fields));
        x.msg_id = u64::MAX;
        assert_eq!(parse(&x, &p), Err(BadCm::Fields));
        let mut x = good;
        x.payload = 4;
        assert_eq!(parse(&x, &p), Err(BadCm::Length));
        let mut x = good;
        x.op = op::BYE;
        assert_eq!(parse(&x, &p), Err(BadCm::Version));
        // Too much data is cut to the limit when encoding.
        let (h, p) = encode(CmKind::Accept, &[1u8; CM_DATA_MAX + 10], usize::MAX, None);
        assert_eq!(p.len(), CM_DATA_MAX);
        let h = WireHdr::from_bytes(&h);
        assert_eq!(parse(&h, &p), Ok(CmKind::Accept));
        assert_eq!(rts_prefix(&h), crate::transport::tcp::EAGER_MAX, "prefix clamped");
    }

    #[test]
    fn shm_offer_round_trip_and_hostile_values_refused() {
        let o = ShmOffer {
            host: 0x1122_3344_5566_7788,
            token: 0xabcd,
            pid: 4242,
        };
        for kind in [CmKind::ConnReq, CmKind::Accept] {
            let (h, p) = encode(kind, b"xy", 0, Some(o));
            let h = WireHdr::from_bytes(&h);
            assert_eq!(h.check(&LIM), Ok(()));
            assert_eq!(parse(&h, &p), Ok(kind));
            assert_eq!(shm_offer(&h), Some(o));
        }
        // Never in a REJECT: dropped when encoding, refused when read.
        let (h, p) = encode(CmKind::Reject, b"", 0, Some(o));
        let h = WireHdr::from_bytes(&h);
        assert_eq!(shm_offer(&h), None);
        assert_eq!(parse(&h, &p), Ok(CmKind::Reject));
        let mut x = h;
        x.flags = SHM_OFFER;
        x.tag = 1;
        x.offset = 1;
        x.reserved = 1;
        assert_eq!(parse(&x, &p), Err(BadCm::Fields));
        let (h, p) = encode(CmKind::ConnReq, b"", 0, Some(o));
        let good = WireHdr::from_bytes(&h);
        // Each field zero or out of range, an unknown flag, fields without the flag.
        for f in [
            |x: &mut WireHdr| x.tag = 0,
            |x: &mut WireHdr| x.offset = 0,
            |x: &mut WireHdr| x.reserved = 0,
            |x: &mut WireHdr| x.reserved = i32::MAX as u64 + 1,
            |x: &mut WireHdr| x.reserved = u64::MAX,
            |x: &mut WireHdr| x.flags = SHM_OFFER | 2,
            |x: &mut WireHdr| x.flags = 2,
            |x: &mut WireHdr| x.flags = 0,
        ] {
            let mut x = good;
            f(&mut x);
            assert_eq!(parse(&x, &p), Err(BadCm::Fields), "{x:?}");
        }
    }
}
