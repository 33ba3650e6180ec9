//! Datagram (`FI_EP_DGRAM`) endpoints, fi_endpoint(3): "connectionless,
//! unreliable datagram communication. Message boundaries are maintained,
//! but the maximum message size may be limited". An RDM endpoint's engine
//! and core (`core/ep.rs`) carry them, configured so that every message is
//! one eager record of its transport (docs/dgram.md):
//!
//! * shm and auto domains: the endpoint's shm port (its rings), so
//!   `max_msg_size` is one ring record's payload (`shm::EAGER_MAX`) and
//!   the peers are those of this host; a full ring refuses a send with
//!   `-FI_EAGAIN` (fi_msg(3)) as on RDM endpoints. A send to an address
//!   no endpoint holds (never opened, closed, its process gone) completes
//!   and the datagram is lost ([`ShmDgram`]), as over UDP.
//! * tcp domain: a UDP socket (`transport/udp/`), addressed by its socket
//!   address; `max_msg_size` is what one UDP datagram carries.
//!
//! No rendezvous, no acknowledgement and no completion level beyond
//! transmit complete (fi_cq(3): delivery complete "applies only to reliable
//! endpoints"): a send completes when its record is written.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::domain::{Domain, TransportKind};
use crate::core::engine::Inner;
use crate::core::ep::{config_from, shm_port};
use crate::transport::addr::Addr;
use crate::transport::proto::WireHdr;
use crate::transport::shm::ShmPort;
use crate::transport::udp::UdpPort;
use crate::transport::{Delivery, Hints, Payload, PeerEvent, Port, Sent, SingleCopy};
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// Capabilities of a datagram endpoint whose info names none.
const DGRAM_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV;

/// Capabilities a datagram endpoint cannot have: RMA and atomics (they
/// need answers from the target) and variable-length messages (a message
/// is one datagram at most). The rest of what the transports offer —
/// messages, tagged messages, multi-receive buffers, `FI_SOURCE`, directed
/// receives — it has (fi_getinfo's entries: the RDM caps without these).
pub(crate) const DGRAM_REFUSED_CAPS: u64 = crate::core::rma::RMA_CAPS | crate::core::rma::ATOMIC_CAPS | FI_VARIABLE_MSG;

/// `max_msg_size` of a datagram endpoint on `transport`: one shm record's
/// payload, or one UDP datagram's.
pub(crate) const fn max_msg_size(transport: TransportKind) -> usize {
    match transport {
        TransportKind::Shm | TransportKind::Auto => crate::transport::shm::EAGER_MAX,
        TransportKind::Tcp => crate::transport::udp::framing::MAX_PAYLOAD,
    }
}

/// Whether `info` asks for a datagram endpoint.
pub(crate) fn is_dgram(info: &Info) -> bool {
    info.ep.as_ref().is_some_and(|e| e.ep_type == FI_EP_DGRAM)
}

/// The engine of a datagram endpoint on `domain`, its port named by
/// `info`'s src_addr.
pub(crate) fn dgram_engine(domain: &Domain, info: &Info) -> Result<Inner> {
    if !is_dgram(info) || info.caps & DGRAM_REFUSED_CAPS != 0 {
        return Err(Error::INVAL);
    }
    let settings = &domain.fabric().settings;
    let mut cfg = config_from(info, DGRAM_CAPS, settings, domain.api_version);
    let limit = max_msg_size(domain.transport);
    cfg.max_msg_size = cfg.max_msg_size.min(limit);
    cfg.inject_size = cfg.inject_size.min(limit);
    cfg.dgram = true;
    // Eager records only: none of the large-message paths.
    cfg.cma = false;
    cfg.split_min = 0;
    cfg.stream_lone_max = 0;
    Ok(Inner::new(dgram_port(domain, info)?, cfg))
}

/// The port of a datagram endpoint at `info`'s src_addr (a wildcard — token
/// 0, port 0 — means "choose"): the shm port on shm and auto, a UDP socket
/// on tcp.
pub(crate) fn dgram_port(domain: &Domain, info: &Info) -> Result<Box<dyn Port>> {
    let settings = &domain.fabric().settings;
    Ok(match domain.transport {
        TransportKind::Shm | TransportKind::Auto => Box::new(ShmDgram::new(shm_port(info, settings)?)),
        TransportKind::Tcp => {
            let src: SocketAddr = match &info.src_addr {
                Some(b) => match Addr::parse(info.addr_format, b) {
                    Ok((Addr::Inet(a), _)) => a,
                    _ => return Err(Error::INVAL),
                },
                None if info.addr_format == FI_SOCKADDR_IN6 => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
                None => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            };
            let tcp = &settings.tcp;
            if tcp.auth_key.is_some() {
                crate::base::log::log_warn!(
                    FI_LOG_EP_CTRL,
                    "FI_RUSTFAB_AUTH_KEY is set, but datagram (FI_EP_DGRAM) endpoints take no key: their datagrams are not authenticated"
                );
            }
            Box::new(UdpPort::new(src, tcp.iface.as_deref(), &tcp.route_hints)?)
        }
    })
}

/// The shm port of a datagram endpoint. Datagrams are unreliable
/// (fi_endpoint(3)), so a send to an address whose endpoint is absent —
/// never opened or closed (no segment), its process dead, or found gone
/// after contact — completes as sent and the datagram is lost, as a UDP
/// datagram to a port nobody holds is; the loss is counted and logged
/// (debug, rate-limited). An RDM endpoint's shm port refuses such a send
/// (`-FI_EADDRNOTAVAIL`, `-FI_ECONNRESET`). A full ring still refuses
/// with `-FI_EAGAIN`: the peer is there, and will read.
pub(crate) struct ShmDgram {
    port: ShmPort,
    /// Datagrams lost to absent peers.
    lost: u64,
}

impl ShmDgram {
    pub(crate) fn new(port: ShmPort) -> ShmDgram {
        ShmDgram { port, lost: 0 }
    }

    /// Whether `r`, a send's result, says nobody holds the address.
    fn absent<T>(r: &Result<T>) -> bool {
        matches!(r, Err(e) if *e == Error::ADDRNOTAVAIL || *e == Error::CONNRESET)
    }

    #[cold]
    #[inline(never)]
    fn lose(&mut self, peer: &Addr, why: Error) {
        self.lost += 1;
        crate::base::log::log_debug_limited!(
            FI_LOG_EP_DATA,
            "shm datagram to {peer:?} lost: no endpoint holds the address ({why}; {} so far)",
            self.lost
        );
    }
}

impl Port for ShmDgram {
    fn addr(&self) -> Addr {
        self.port.addr()
    }
    fn wait_fd(&self) -> RawFd {
        Port::wait_fd(&self.port)
    }
    fn set_sleepers(&mut self, n: usize) {
        Port::set_sleepers(&mut self.port, n)
    }
    fn has_pending(&self) -> bool {
        Port::has_pending(&self.port)
    }
    fn eager_limit(&self) -> usize {
        self.port.eager_limit()
    }
    fn eager_limit_for(&self, peer: &Addr) -> usize {
        self.port.eager_limit_for(peer)
    }
    fn chunk_limit_for(&self, peer: &Addr) -> usize {
        self.port.chunk_limit_for(peer)
    }
    fn canonical(&self, a: &Addr) -> Addr {
        self.port.canonical(a)
    }
    #[inline]
    fn send(&mut self, peer: &Addr, hdr: &WireHdr, payload: Payload<'_>, copy: bool) -> Result<Sent> {
        let r = self.port.send(peer, hdr, payload, copy);
        if Self::absent(&r) {
            self.lose(peer, r.err().unwrap_or(Error::ADDRNOTAVAIL));
            return Ok(Sent::Done);
        }
        r
    }
    fn queued_at_peer(&self, peer: &Addr) -> bool {
        self.port.queued_at_peer(peer)
    }
    fn send_ctl(&mut self, peer: &Addr, hdr: &WireHdr) -> Result<()> {
        let r = Port::send_ctl(&mut self.port, peer, hdr);
        if Self::absent(&r) {
            return Ok(());
        }
        r
    }
    fn room(&mut self, peer: &Addr) -> usize {
        Port::room(&mut self.port, peer)
    }
    fn poll(&mut self, d: &mut dyn Delivery) -> bool {
        self.port.poll(d)
    }
    fn check_peer(&mut self, peer: &Addr) -> bool {
        Port::check_peer(&mut self.port, peer)
    }
    fn sender_alive(&self, src_pid: i32, peer: &Addr) -> bool {
        Port::sender_alive(&self.port, src_pid, peer)
    }
    fn take_events(&mut self) -> Vec<PeerEvent> {
        Port::take_events(&mut self.port)
    }
    fn has_events(&self) -> bool {
        self.port.has_events()
    }
    fn single_copy(&self) -> Option<&dyn SingleCopy> {
        self.port.single_copy()
    }
    fn close(&mut self) {
        Port::close(&mut self.port)
    }
    fn hints(&mut self) -> Option<&mut dyn Hints> {
        self.port.hints()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::addr::shm_token_random;
    use crate::transport::proto::{op, Limits};

    /// An shm port at a fresh address, with a datagram endpoint's limits.
    fn shm() -> ShmPort {
        let one_record = crate::transport::shm::EAGER_MAX;
        ShmPort::new(
            shm_token_random(),
            Limits {
                max_payload: one_record,
                max_chunk: one_record,
                max_iov: 8,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_send_to_an_address_nobody_holds_is_lost_not_refused() {
        let nobody = Addr::Shm(shm_token_random());
        let h = WireHdr::new(op::EAGER);
        // An RDM endpoint's port refuses it...
        let mut rdm = shm();
        assert_eq!(
            Port::send(&mut rdm, &nobody, &h, Payload::None, false),
            Err(Error::ADDRNOTAVAIL)
        );
        // ...a datagram endpoint's sends it into the void, counted.
        let mut a = ShmDgram::new(shm());
        for n in 1..=3 {
            assert!(matches!(a.send(&nobody, &h, Payload::None, false), Ok(Sent::Done)));
            assert_eq!(a.lost, n);
        }
        // A peer that is there is reached, and nothing counted.
        let b = shm();
        assert!(matches!(a.send(&b.addr(), &h, Payload::None, false), Ok(Sent::Done)));
        assert_eq!(a.lost, 3);
        // Once it is gone, it is nobody's again: its failure is reported
        // first (-FI_EAGAIN until the endpoint takes it, as on RDM), then
        // the send is lost.
        let gone = b.addr();
        drop(b);
        assert_eq!(a.send(&gone, &h, Payload::None, false).err(), Some(Error::AGAIN));
        assert!(matches!(a.take_events()[..], [PeerEvent::Failed(p)] if p == gone));
        assert!(matches!(a.send(&gone, &h, Payload::None, false), Ok(Sent::Done)));
        assert_eq!(a.lost, 4);
        // A wrong kind of address is still the caller's error.
        let inet = Addr::Inet("127.0.0.1:1".parse().unwrap());
        assert_eq!(a.send(&inet, &h, Payload::None, false).err(), Some(Error::INVAL));
    }
}
