//! Datagram (`FI_EP_DGRAM`) endpoints, fi_endpoint(3): "connectionless,
//! unreliable datagram communication. Message boundaries are maintained,
//! but the maximum message size may be limited". An RDM endpoint's engine
//! and core (`core/ep.rs`) carry them, configured so that every message is
//! one eager record of its transport (docs/dgram.md):
//!
//! * shm and auto domains: the endpoint's shm port (its rings), so
//!   `max_msg_size` is one ring record's payload (`shm::EAGER_MAX`) and
//!   the peers are those of this host; a full ring refuses a send with
//!   `-FI_EAGAIN` (fi_msg(3)) as on RDM endpoints.
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
use crate::transport::udp::UdpPort;
use crate::transport::Port;
use std::net::SocketAddr;

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
        TransportKind::Shm | TransportKind::Auto => Box::new(shm_port(info, settings)?),
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
