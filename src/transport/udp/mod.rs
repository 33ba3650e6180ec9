//! The UDP transport: datagram (`FI_EP_DGRAM`) endpoints on the tcp domain.
//! One non-blocking UDP socket per endpoint, addressed by its socket
//! address (`FI_SOCKADDR_IN`/`IN6`, as on the tcp domain's other
//! endpoints); every message is one datagram (`framing.rs`), sent when
//! posted and completed then (a datagram the kernel took is the network's:
//! there is no acknowledgement, retransmission or connection), received on
//! the endpoint's progress passes.
//!
//! What a peer can do to us: send datagrams. Each one that is not a
//! well-formed record is dropped and counted (`framing::Drops`); a
//! well-formed one reaches the endpoint's matching as a message from the
//! source address the kernel reports. UDP source addresses are not
//! authenticated (docs/security.md, "Datagram endpoints"): a datagram
//! endpoint trusts its network as libfabric's udp provider does.

pub(crate) mod framing;

use crate::base::error::{Error, Result};
use crate::sys::udp::{udp_local_addr, udp_recv_from, udp_send_to, udp_socket};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::WireHdr;
use crate::transport::{Delivery, Disposition, Payload, PayloadIn, PeerEvent, Port, Sent};
use framing::{Drop, Drops, MAX_PAYLOAD};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// Datagrams one progress pass reads at most (the rest wait in the
/// socket for the next pass: a flood cannot hold a pass forever).
const PASS_BUDGET: usize = 64;

/// Receive buffer: one byte more than the largest datagram, so that a
/// longer one (cut short) is told apart.
const RECV_BUF: usize = framing::UDP_MAX_DATAGRAM + 1;

/// A received record's payload, as the core copies it.
struct Datagram<'a>(&'a [u8]);

impl PayloadIn for Datagram<'_> {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.copy_to_iov(off, len, dst, dst_off) }
    }
    fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// A datagram endpoint's attachment to UDP.
pub(crate) struct UdpPort {
    sock: OwnedFd,
    /// The address peers send to (the bound one, or for a wildcard IP the
    /// interface address the tcp domain would advertise).
    me: SocketAddr,
    /// The datagram being written.
    out: Vec<u8>,
    /// The datagram last received.
    inb: Box<[u8]>,
    /// A received record the endpoint had no room for (`Place::Stall`): its
    /// source and length in `inb`, offered again on the next pass before
    /// anything else is read (the socket's buffer holds the rest).
    held: Option<(SocketAddr, usize)>,
    drops: Drops,
}

impl UdpPort {
    /// A port bound to `src` (port 0: the kernel picks; a wildcard IP: all
    /// interfaces, and `me` is an interface address chosen as the tcp
    /// domain chooses it, `FI_RUSTFAB_IFACE` first).
    pub(crate) fn new(src: SocketAddr, iface: Option<&str>, route_hints: &[std::net::IpAddr]) -> Result<UdpPort> {
        let sock = udp_socket(&src)?;
        let bound = udp_local_addr(sock.as_fd())?;
        let me = crate::transport::tcp::advertised_addr_with(
            bound,
            iface,
            route_hints,
            &crate::sys::net::interfaces(),
            crate::sys::net::route_source,
        );
        Ok(UdpPort {
            sock,
            me,
            out: Vec::with_capacity(framing::UDP_MAX_DATAGRAM),
            inb: vec![0u8; RECV_BUF].into_boxed_slice(),
            held: None,
            drops: Drops::default(),
        })
    }

    /// What was dropped so far.
    #[cfg(test)]
    pub(crate) fn drops(&self) -> Drops {
        self.drops
    }

    fn dropped(&mut self, why: Drop) {
        self.drops.count(why);
        crate::base::log::log_debug_limited!(
            crate::abi::FI_LOG_EP_DATA,
            "udp {}: datagram dropped ({why:?}; {} so far)",
            self.me,
            self.drops.total()
        );
    }

    /// Offers the record in `inb[..n]` from `from` to the core: false when
    /// it has no room for it now (kept for the next pass).
    fn offer(&mut self, d: &mut dyn Delivery, from: SocketAddr, n: usize) -> bool {
        let (h, range) = match framing::parse(&self.inb[..n], n) {
            Ok(x) => x,
            Err(why) => {
                self.dropped(why);
                return true;
            }
        };
        match d.deliver(&Addr::Inet(from), 0, &h, &Datagram(&self.inb[range])) {
            Disposition::Consumed => true,
            Disposition::Stall => {
                self.held = Some((from, n));
                false
            }
        }
    }

    fn peer(peer: &Addr) -> Result<SocketAddr> {
        match peer {
            Addr::Inet(a) => Ok(*a),
            _ => Err(Error::INVAL),
        }
    }
}

impl Port for UdpPort {
    fn addr(&self) -> Addr {
        Addr::Inet(self.me)
    }

    fn wait_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn set_sleepers(&mut self, _n: usize) {}

    fn has_pending(&self) -> bool {
        false
    }

    fn eager_limit(&self) -> usize {
        MAX_PAYLOAD
    }

    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, _copy: bool) -> Result<Sent> {
        let to = Self::peer(peer)?;
        if payload.len() > MAX_PAYLOAD {
            return Err(Error::MSGSIZE);
        }
        let mut h = *hdr;
        h.payload = payload.len() as u32;
        framing::start(&mut self.out, &h);
        payload.for_each(|p| self.out.extend_from_slice(p));
        match udp_send_to(self.sock.as_fd(), &self.out, &to) {
            Ok(()) => Ok(Sent::Done),
            Err(Error::AGAIN) => Err(Error::AGAIN),
            // Unreliable: a datagram the kernel refused (no route, a path
            // it cannot take) is one lost on the way.
            Err(e) => {
                self.drops.send_failed += 1;
                crate::base::log::log_debug_limited!(
                    crate::abi::FI_LOG_EP_DATA,
                    "udp {}: send to {to} failed ({e}); the datagram is lost",
                    self.me
                );
                Ok(Sent::Done)
            }
        }
    }

    /// A datagram handed to the kernel is no longer the sender's: that is
    /// all an unreliable endpoint's transmit complete means.
    fn queued_at_peer(&self, _peer: &Addr) -> bool {
        true
    }

    /// Datagram endpoints send no control records; one asked for is
    /// sent as a datagram (the receiver drops it), never queued.
    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        self.send(peer, hdr, Payload::None, true).map(|_| ())
    }

    fn room(&mut self, _peer: &Addr) -> usize {
        MAX_PAYLOAD
    }

    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        let mut seen = false;
        if let Some((from, n)) = self.held.take() {
            if !self.offer(d, from, n) {
                return false;
            }
            seen = true;
        }
        for _ in 0..PASS_BUDGET {
            let r = match udp_recv_from(self.sock.as_fd(), &mut self.inb) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                // An error the kernel queued for an earlier send (an ICMP
                // answer): it is reported once; carry on reading.
                Err(_) => continue,
            };
            seen = true;
            let Some(from) = r.from else {
                self.dropped(Drop::NoSource);
                continue;
            };
            if r.len > self.inb.len() {
                self.dropped(Drop::Truncated);
                continue;
            }
            if !self.offer(d, from, r.len) {
                break;
            }
        }
        seen
    }

    fn check_peer(&mut self, _peer: &Addr) -> bool {
        true
    }

    fn sender_alive(&self, _src_pid: i32, _peer: &Addr) -> bool {
        true
    }

    fn take_events(&mut self) -> Vec<PeerEvent> {
        Vec::new()
    }

    fn has_events(&self) -> bool {
        false
    }

    fn close(&mut self) {}
}

#[cfg(test)]
mod tests;
