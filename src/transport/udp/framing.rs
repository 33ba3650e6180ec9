//! One record per datagram: the 64-byte wire header (`proto::WireHdr`, the
//! full form) and then its payload, nothing else. Only `EAGER` records
//! travel (a datagram endpoint's messages are at most one datagram: no
//! rendezvous, no acknowledgements). A datagram that is not exactly such a
//! record — too short, a bad header, a payload length other than what is
//! there, another op — is dropped and counted ([`Drops`]); it reaches no
//! receive and costs nothing else.

use crate::transport::proto::{op, Limits, WireHdr, HDR_LEN};

/// Largest UDP payload over IPv4 (65535 minus the IP and UDP headers),
/// also used for IPv6 so that an address family does not change the
/// endpoint's limits.
pub(crate) const UDP_MAX_DATAGRAM: usize = 65_507;

/// Message bytes one datagram carries: `max_msg_size` of a datagram
/// endpoint on the tcp domain.
pub(crate) const MAX_PAYLOAD: usize = UDP_MAX_DATAGRAM - HDR_LEN;

/// The limits a received header is checked against.
pub(crate) const LIMITS: Limits = Limits {
    max_payload: MAX_PAYLOAD,
    max_chunk: MAX_PAYLOAD,
    max_iov: 1,
};

/// Why a datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drop {
    /// Shorter than a header.
    Short,
    /// The header fails `WireHdr::check` (magic, version, op, flags,
    /// lengths).
    Header,
    /// A well-formed record of another op than `EAGER`.
    Op,
    /// The header's payload length is not the bytes that follow it.
    Length,
    /// Longer than any datagram rustfab sends (cut short by the kernel).
    Truncated,
    /// No IP source address (not a UDP/IP datagram).
    NoSource,
}

/// Datagrams dropped, by reason, and sends that failed (the kernel refused
/// the datagram: no route, a path that cannot carry it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Drops {
    pub(crate) short: u64,
    pub(crate) header: u64,
    pub(crate) op: u64,
    pub(crate) length: u64,
    pub(crate) truncated: u64,
    pub(crate) no_source: u64,
    pub(crate) send_failed: u64,
}

impl Drops {
    pub(crate) fn count(&mut self, why: Drop) {
        let c = match why {
            Drop::Short => &mut self.short,
            Drop::Header => &mut self.header,
            Drop::Op => &mut self.op,
            Drop::Length => &mut self.length,
            Drop::Truncated => &mut self.truncated,
            Drop::NoSource => &mut self.no_source,
        };
        *c += 1;
    }

    pub(crate) fn total(&self) -> u64 {
        self.short + self.header + self.op + self.length + self.truncated + self.no_source
    }
}

/// Writes the datagram for `hdr` into `out` (cleared first): the header;
/// the caller appends the payload.
pub(crate) fn start(out: &mut Vec<u8>, hdr: &WireHdr) {
    out.clear();
    out.extend_from_slice(&hdr.to_bytes());
}

/// The record in a received datagram `d` (its `true_len` as the kernel
/// reported it, more than `d.len()` when it was cut short): the header and
/// the payload's range in `d`, or why it is dropped.
pub(crate) fn parse(d: &[u8], true_len: usize) -> Result<(WireHdr, core::ops::Range<usize>), Drop> {
    if true_len > d.len() {
        return Err(Drop::Truncated);
    }
    let Some(first) = d.first_chunk::<HDR_LEN>() else {
        return Err(Drop::Short);
    };
    let h = WireHdr::from_bytes(first);
    h.check(&LIMITS).map_err(|_| Drop::Header)?;
    if h.op != op::EAGER || h.flags & crate::transport::proto::flag::COMPACT != 0 {
        return Err(Drop::Op);
    }
    if d.len() - HDR_LEN != h.payload as usize {
        return Err(Drop::Length);
    }
    Ok((h, HDR_LEN..d.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::proto::flag;

    fn datagram(h: &WireHdr, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        start(&mut v, h);
        v.extend_from_slice(payload);
        v
    }

    fn eager(n: usize) -> WireHdr {
        let mut h = WireHdr::new(op::EAGER);
        h.len = n as u64;
        h.payload = n as u32;
        h.tag = 0x1234;
        h.data = 77;
        h.flags = flag::TAGGED | flag::REMOTE_CQ_DATA;
        h
    }

    #[test]
    fn a_record_round_trips() {
        let p: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let d = datagram(&eager(p.len()), &p);
        let (h, r) = parse(&d, d.len()).unwrap();
        assert_eq!(h, eager(p.len()));
        assert_eq!(&d[r], &p[..]);
        // Empty and largest payloads.
        let d = datagram(&eager(0), &[]);
        assert_eq!(parse(&d, d.len()).unwrap().1, HDR_LEN..HDR_LEN);
        let big = vec![7u8; MAX_PAYLOAD];
        let d = datagram(&eager(MAX_PAYLOAD), &big);
        assert_eq!(d.len(), UDP_MAX_DATAGRAM);
        assert!(parse(&d, d.len()).is_ok());
    }

    #[test]
    fn hostile_datagrams_are_dropped_with_their_reason() {
        let good = datagram(&eager(10), &[1; 10]);
        // Short: nothing, a byte, one byte less than a header.
        for n in [0, 1, HDR_LEN - 1] {
            assert_eq!(parse(&good[..n], n), Err(Drop::Short), "{n} bytes");
        }
        // Cut short by the kernel.
        assert_eq!(parse(&good, good.len() + 1), Err(Drop::Truncated));
        // Payload length disagreeing with what follows: fewer, more bytes.
        assert_eq!(parse(&good[..good.len() - 1], good.len() - 1), Err(Drop::Length));
        let mut more = good.clone();
        more.push(0);
        assert_eq!(parse(&more, more.len()), Err(Drop::Length));
        // len and payload disagreeing (the header's own check).
        let mut h = eager(10);
        h.len = 11;
        assert_eq!(parse(&datagram(&h, &[0; 10]), HDR_LEN + 10), Err(Drop::Header));
        // A payload length above what a datagram carries.
        let mut h = eager(0);
        h.len = MAX_PAYLOAD as u64 + 1;
        h.payload = h.len as u32;
        let d = datagram(&h, &[]);
        assert_eq!(parse(&d, d.len()), Err(Drop::Header));
        let mut h = eager(0);
        h.len = u64::MAX;
        h.payload = u32::MAX;
        let d = datagram(&h, &[]);
        assert_eq!(parse(&d, d.len()), Err(Drop::Header));
        // Bad magic, version, op, unknown flags.
        for f in [
            |h: &mut WireHdr| h.magic ^= 1,
            |h: &mut WireHdr| h.version += 1,
            |h: &mut WireHdr| h.op = 0,
            |h: &mut WireHdr| h.op = 200,
            |h: &mut WireHdr| h.flags = u32::MAX,
        ] {
            let mut h = eager(0);
            f(&mut h);
            let d = datagram(&h, &[]);
            assert_eq!(parse(&d, d.len()), Err(Drop::Header));
        }
        // Valid records of ops a datagram endpoint does not take.
        for o in [op::ACK, op::BYE] {
            let d = datagram(&WireHdr::new(o), &[]);
            assert_eq!(parse(&d, d.len()), Err(Drop::Op), "op {o}");
        }
        // A compact header (never sent here).
        let mut h = eager(0);
        h.flags |= flag::COMPACT;
        let d = datagram(&h, &[]);
        assert!(parse(&d, d.len()).is_err());
    }

    #[test]
    fn random_bytes_never_panic_and_are_mostly_dropped() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = vec![0u8; 300];
        for _ in 0..20_000 {
            let n = (next() % 300) as usize;
            for b in buf.iter_mut().take(n) {
                *b = next() as u8;
            }
            let _ = parse(&buf[..n], n);
        }
        let mut d = Drops::default();
        d.count(Drop::Short);
        d.count(Drop::Op);
        assert_eq!(d.total(), 2);
    }
}
