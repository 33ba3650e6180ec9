//! What an endpoint is built from: the [`EpConfig`] its info asks for
//! ([`config_from`], with the default queue sizes and limits), and the
//! transport port and engine of a reliable-datagram endpoint on its
//! domain's transport ([`rdm_engine`]; `rdm_port` also serves `fi_setname`).
//! Everything here is a function of the info, the domain and the settings:
//! the endpoint core (`ep.rs`) calls it and nothing here calls back.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::domain::{Domain, TransportKind};
use crate::core::engine::matching::IOV_MAX;
use crate::core::engine::{EpConfig, Inner};
use crate::core::settings::Settings;
use crate::transport::addr::Addr;
use crate::transport::proto::Limits;

/// Defaults when the application's info leaves a size at 0.
pub(crate) const DEFAULT_TX_SIZE: usize = 1024;
pub(crate) const DEFAULT_RX_SIZE: usize = 1024;
/// `tx_attr->inject_size` rustfab offers (fi_getinfo) and applies when the
/// info leaves it at 0.
pub(crate) const INJECT_SIZE: usize = 4096;
pub(crate) const DEFAULT_MAX_MSG_SIZE: usize = 1 << 30;

/// Capabilities of an RDM endpoint whose info names none.
const RDM_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV;

/// The endpoint settings `info` asks for (queue sizes and limits default
/// when 0; `FI_VARIABLE_MSG` lifts `max_msg_size`, fi_msg(3): "Variable
/// messages are not subject to max message length restrictions"), with
/// `default_caps` when it names none. Transport choices (`cma`,
/// `fixed_peer`) are the caller's to adjust. `version`: the fabric's API
/// version, which decides what capability bits 45, 46 and 48 mean.
pub(crate) fn config_from(info: &Info, default_caps: u64, settings: &Settings, version: u32) -> EpConfig {
    let tx = info.tx.clone().unwrap_or_default();
    let rx = info.rx.clone().unwrap_or_default();
    let epa = info.ep.clone().unwrap_or_default();
    let nz = |v: usize, d: usize| if v == 0 { d } else { v };
    let given = if info.caps == 0 { default_caps } else { info.caps };
    let caps = crate::core::engine::directed::engine_caps(given, version);
    EpConfig {
        caps,
        matching: crate::core::engine::directed::RecvMatching::of(given, version),
        tx_op_flags: tx.op_flags,
        rx_op_flags: rx.op_flags,
        tx_size: nz(tx.size, DEFAULT_TX_SIZE),
        rx_size: nz(rx.size, DEFAULT_RX_SIZE),
        inject_size: nz(tx.inject_size, INJECT_SIZE),
        max_msg_size: if caps & FI_VARIABLE_MSG != 0 {
            usize::MAX
        } else {
            nz(epa.max_msg_size, DEFAULT_MAX_MSG_SIZE)
        },
        min_multi_recv: 64,
        unexp_budget: settings.unexp_budget,
        cma: settings.shm_cma,
        pull_batch_bytes: settings.shm_pull_batch,
        split_min: settings.shm_split_min,
        split_lone_min: settings.shm_split_lone_min,
        stream_lone_max: if settings.shm_ring_cells >= crate::core::settings::STREAM_RING_MIN {
            settings.shm_stream_lone_max
        } else {
            0
        },
        close_wait: settings.shm_close_wait,
        fixed_peer: None,
        msg_prefix: crate::core::prefix::msg_prefix(info).unwrap_or(0),
        dgram: false,
    }
}

fn shm_limits() -> Limits {
    Limits {
        max_payload: crate::transport::shm::EAGER_MAX,
        max_chunk: crate::transport::shm::EAGER_MAX,
        max_iov: IOV_MAX,
    }
}

/// Eager records are at most the TCP eager limit; larger messages go by
/// rendezvous (no cross-memory attach over TCP), their DATA chunks (and
/// RMA chunks) up to the TCP chunk limit.
fn tcp_limits() -> Limits {
    Limits {
        max_payload: crate::transport::tcp::EAGER_MAX,
        max_chunk: crate::transport::tcp::CHUNK_MAX,
        max_iov: IOV_MAX,
    }
}

/// The shm port of an shm endpoint: named by fi_getinfo's src_addr (token 0
/// is its wildcard: pick a fresh one).
pub(crate) fn shm_port(info: &Info, settings: &Settings) -> Result<crate::transport::shm::ShmPort> {
    let token = match &info.src_addr {
        Some(b) => match Addr::parse(FI_ADDR_STR, b) {
            Ok((Addr::Shm(0), _)) => crate::transport::addr::shm_token_random(),
            Ok((Addr::Shm(t), _)) => t,
            _ => return Err(Error::INVAL),
        },
        None => crate::transport::addr::shm_token_random(),
    };
    let budget = &settings.tcp.budget;
    crate::transport::shm::ShmPort::with_ring_cells(token, shm_limits(), settings.shm_ring_cells)
        .map(|p| p.with_budget(budget.per_peer, budget.timeout))
}

/// The TCP port of a tcp endpoint: listens on fi_getinfo's src_addr (a
/// wildcard IP or port 0 means "choose"), else any IPv4 (IPv6 for
/// FI_SOCKADDR_IN6).
fn tcp_port(info: &Info, tcp: &crate::transport::tcp::TcpSettings) -> Result<crate::transport::tcp::TcpPort> {
    let src = match &info.src_addr {
        Some(b) => match Addr::parse(info.addr_format, b) {
            Ok((Addr::Inet(a), _)) => a,
            _ => return Err(Error::INVAL),
        },
        None if info.addr_format == FI_SOCKADDR_IN6 => "[::]:0".parse().map_err(|_| Error::INVAL)?,
        None => "0.0.0.0:0".parse().map_err(|_| Error::INVAL)?,
    };
    crate::transport::tcp::TcpPort::new(src, tcp_limits(), tcp)
}

/// The TCP settings of an endpoint: the environment's, with the
/// authentication key the application gives (`ep_attr->auth_key`, else
/// the domain's `domain_attr->auth_key`) in place of
/// `FI_RUSTFAB_AUTH_KEY`'s.
fn tcp_settings(
    domain: &Domain,
    info: &Info,
    env: &crate::transport::tcp::TcpSettings,
) -> crate::transport::tcp::TcpSettings {
    let nonempty = |k: &Option<Vec<u8>>| k.as_ref().filter(|k| !k.is_empty()).cloned();
    let given = info
        .ep
        .as_ref()
        .and_then(|e| nonempty(&e.auth_key))
        .or_else(|| info.domain.as_ref().and_then(|d| nonempty(&d.auth_key)))
        .or_else(|| domain.info.domain.as_ref().and_then(|d| nonempty(&d.auth_key)));
    let mut t = env.clone();
    if let Some(k) = given {
        t.auth_key = Some(crate::transport::tcp::AuthKey(k));
    }
    t
}

/// The engine of a reliable-datagram (`FI_EP_RDM`, or unspecified)
/// endpoint on `domain`'s transport, its port named by `info`'s src_addr.
pub(crate) fn rdm_engine(domain: &Domain, info: &Info) -> Result<Inner> {
    let ep_type = info.ep.as_ref().map(|e| e.ep_type).unwrap_or(FI_EP_RDM);
    if ep_type != FI_EP_RDM && ep_type != FI_EP_UNSPEC {
        return Err(Error::INVAL);
    }
    let settings = &domain.fabric().settings;
    let mut cfg = config_from(info, RDM_CAPS, settings, domain.api_version);
    if domain.transport == TransportKind::Tcp {
        // No cross-memory attach over TCP: large messages are streamed.
        cfg.cma = false;
    }
    Ok(Inner::new(rdm_port(domain, info)?, cfg))
}

/// The port of an RDM endpoint on `domain`'s transport at `info`'s
/// src_addr: exactly there (an address that cannot be taken is an error,
/// never another address); a wildcard (token 0, port 0) means "choose".
pub(super) fn rdm_port(domain: &Domain, info: &Info) -> Result<Box<dyn crate::transport::Port>> {
    let settings = &domain.fabric().settings;
    let tcp = tcp_settings(domain, info, &settings.tcp);
    let port: Box<dyn crate::transport::Port> = match domain.transport {
        TransportKind::Shm => Box::new(shm_port(info, settings)?),
        TransportKind::Tcp => Box::new(tcp_port(info, &tcp)?),
        TransportKind::Auto => {
            let (shm_src, tcp_src) = match &info.src_addr {
                Some(b) => match Addr::parse(FI_ADDR_STR, b) {
                    Ok((Addr::Auto { shm, inet, .. }, _)) => (shm, std::net::SocketAddr::V4(inet)),
                    _ => return Err(Error::INVAL),
                },
                None => (0, "0.0.0.0:0".parse().map_err(|_| Error::INVAL)?),
            };
            let shm = crate::transport::shm::ShmPort::with_ring_cells(
                if shm_src == 0 {
                    crate::transport::addr::shm_token_random()
                } else {
                    shm_src
                },
                shm_limits(),
                settings.shm_ring_cells,
            )?
            .with_budget(settings.tcp.budget.per_peer, settings.tcp.budget.timeout);
            let tcp = crate::transport::tcp::TcpPort::new(tcp_src, tcp_limits(), &tcp)?;
            Box::new(crate::transport::auto::AutoPort::new(shm, tcp)?)
        }
    };
    Ok(port)
}
