//! `fi_getinfo`: what rustfab offers, matched against the application's hints.
//!
//! Flow: [`getinfo_c`] turns the C arguments into Rust ([`Info::from_c`] for
//! the hints) and calls [`getinfo`], which walks [`TEMPLATES`] in order. For
//! each template: transport selection (`transport_filter`), hint checks
//! ([`check_hints`], libfabric util's `ofi_check_info`), alteration
//! ([`alter`], util's `ofi_alter_info`) and address resolution
//! (`shm_addresses` / `tcp_addresses`). Only name resolution
//! (`getaddrinfo`, a UDP probe socket) touches the system; everything else is
//! pure and unit-tested below. The survivors are converted with
//! [`Info::to_c`] (libc allocations) and chained through `next`.
//!
//! # Decisions
//! Taken from the issue (docs/abi.md §4.1–4.3, docs/mpi.md §2):
//! * Entries in [`TEMPLATES`] order: auto RDM, shm RDM, tcp RDM, then auto,
//!   shm and tcp MSG. `FI_RUSTFAB_TRANSPORT` (a list of auto, shm, tcp; `all`/unset:
//!   every one) keeps the rows of the named transports.
//! * `fabric_attr->prov_name` stays NULL (core fills it in); `prov_name`
//!   hints (`rustfab`, `rustfab;^ofi_rxm`, …) are never a reason to reject.
//! * caps are exactly what the data path delivers ([`SHM_CAPS`],
//!   [`TCP_CAPS`], `MSG_CAPS`); shm, RDM and MSG, has no `FI_REMOTE_COMM`
//!   (it is host-local).
//! * mode: nothing is required. `FI_BUFFERED_RECV` is echoed when the hints
//!   allow it ([`OPTIONAL_MODE`] is the one-line hook).
//! * Values the application asks for are echoed (threading, progress,
//!   resource management, AV type, op_flags, queue sizes, iov limits);
//!   everything the hints ask for must be within what rustfab offers.
//! * mr_mode: template `FI_MR_BASIC | FI_MR_SCALABLE`; API ≥ 1.5 reports no
//!   required bits (0) unless the hints ask for exactly BASIC or SCALABLE,
//!   which are kept.
//!
//! Added here:
//! * tx/rx `caps` never carry `FI_LOCAL_COMM`/`FI_REMOTE_COMM`: those are
//!   domain-level capabilities (`fi_domain(3)`); they appear in `info->caps`
//!   and `domain_attr->caps`. fabtests' `fi_getinfo_test` fails an info
//!   whose tx/rx caps contain them.
//! * Every entry has a `src_addr` (fabtests check it even without node,
//!   service or FI_SOURCE, as util providers do). When no named source exists
//!   it is a wildcard: the shm address with token [`SHM_ANY_TOKEN`] (0, which
//!   `shm_token_for`/`shm_token_random` never produce) or `0.0.0.0:0` /
//!   `[::]:0` for tcp. An endpoint opened with a wildcard picks a fresh
//!   random token / any interface and an ephemeral port. This includes
//!   FI_SOURCE with a node but no service, where the issue asked for no
//!   `src_addr` at all: fabtests' `getinfo_src2`/`no_hints2` require one.
//! * The locality rule applies to destination nodes only; an FI_SOURCE node
//!   names this host by definition.
//! * Requested caps (`effective_caps`): a request naming only secondary
//!   caps gets the offered primary ones, a bare `FI_MSG`/`FI_TAGGED` both
//!   directions, one naming neither `FI_LOCAL_COMM` nor `FI_REMOTE_COMM` the
//!   offered locality (`fi_getinfo(3)`), `FI_SOURCE_ERR` brings `FI_SOURCE`.
//!   Non-requested secondary caps are not added. A direction the request
//!   excludes (`FI_MSG | FI_RECV`) leaves the other attr's caps empty.
//! * Without FI_SOURCE, tcp's `src_addr` is the local address the kernel
//!   would route to `dest_addr` from, port 0 (util's `ofi_get_src_addr`);
//!   shm's is the wildcard.
//! * `FI_SOURCE` with neither node nor service is `-FI_EINVAL`
//!   (`fi_getinfo(3)`: "either the node and/or service parameter must be
//!   non-NULL"), as in util.
//! * A destination `node` is local when one of its addresses is loopback,
//!   unspecified, or can be bound on this host. A node that does not resolve
//!   is not local (shm is skipped; tcp cannot resolve it either → ENODATA).
//! * `node` may also be an address string (`fi_rustfab_shm://<16 hex>`,
//!   `fi_sockaddr_in://a.b.c.d:port`, `fi_sockaddr_in6://[..]:port`); it is
//!   used as is, selects its transport, and `service` is ignored.
//! * Address family for tcp: `hints->addr_format` (IN or IN6) decides; else
//!   the family of an address in the hints; else IPv4 is preferred, IPv6
//!   used when the node only resolves to IPv6 (`-n ::1` works without
//!   `-a FI_SOCKADDR_IN6`). `FI_SOCKADDR` (any sockaddr) selects tcp too.
//! * In `FI_VERSION < 1.5` an unspecified mr_mode is answered with
//!   `FI_MR_SCALABLE`, the same semantics as modern mr_mode 0.
//! * Domain limits (cq_cnt, ep_cnt, mr_cnt, …) are checked, not echoed.
//! * op_flags accepted: tx `FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE |
//!   FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE` (a default `FI_INJECT`
//!   makes every send an inject: at most `inject_size` bytes), rx
//!   `FI_COMPLETION | FI_MULTI_RECV`.
//! * tclass: a quality-of-service hint. Every valid value (unspecified, a
//!   DSCP value `FI_TC_DSCP | 0..63`, or one of the six labels) is accepted
//!   and echoed, as util does (it does not check tclass at all; fabtests'
//!   pingpong asks for `FI_TC_LOW_LATENCY`); invalid encodings are refused.
//! * An unknown `FI_RUSTFAB_TRANSPORT` value is reported (FI_LOG_WARN) and
//!   treated as `auto`.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::domain::TransportKind;
use crate::core::ep::INJECT_SIZE;
use crate::core::fabric::FABRIC_NAME;
use crate::fi::attr::free_c_info;
use crate::fi::{self, cmem};
use crate::provider::PROVIDER_VERSION;
use crate::sys::net::ip_is_local;
use crate::sys::resolve::Lookup;
use crate::transport::addr::{shm_token_for, Addr};
use core::ffi::c_char;
use std::cell::OnceCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

// ---- What rustfab offers -------------------------------------------------

/// `ep_attr->protocol` values are provider-specific (`fabric.h`).
pub const FI_PROV_SPECIFIC: u32 = 1 << 31;
pub const SHM_PROTOCOL: u32 = FI_PROV_SPECIFIC | 1;
pub const TCP_PROTOCOL: u32 = FI_PROV_SPECIFIC | 2;
pub const AUTO_PROTOCOL: u32 = FI_PROV_SPECIFIC | 3;
pub const PROTOCOL_VERSION: u32 = 1;
pub const SHM_MAX_MSG_SIZE: usize = 1 << 30;
pub const TCP_MAX_MSG_SIZE: usize = 1 << 30;
/// tx and rx queue depth (`tx_attr->size`, `rx_attr->size`).
pub const QUEUE_SIZE: usize = 1024;
pub const IOV_LIMIT: usize = 8;
/// Target segments of one RMA operation (`tx_attr->rma_iov_limit`).
pub const RMA_IOV_LIMIT: usize = crate::core::engine::RMA_IOV_MAX;
/// Open MPI needs bit 63 (docs/mpi.md §2); matching uses all 64 bits.
pub const MEM_TAG_FORMAT: u64 = 0xaaaa_aaaa_aaaa_aaaa;
pub const MSG_ORDER: u64 = FI_ORDER_SAS;
pub const COMP_ORDER: u64 = FI_ORDER_NONE;
pub const MR_KEY_SIZE: usize = 8;
pub const CQ_DATA_SIZE: usize = 8;
pub const CQ_CNT: usize = 256;
pub const EP_CNT: usize = 256;
pub const DOMAIN_TX_CTX_CNT: usize = 256;
pub const DOMAIN_RX_CTX_CNT: usize = 256;
pub const CNTR_CNT: usize = 256;
pub const MR_IOV_LIMIT: usize = 8;
pub const MR_CNT: usize = 65536;
/// err_data carries a raw source address for `FI_SOURCE_ERR`.
pub const MAX_ERR_DATA: usize = 64;

/// RMA (docs/rma.md): reads and writes, both ends, with remote events.
pub const RMA_CAPS: u64 = crate::core::rma::RMA_CAPS;
/// Atomics (docs/rma.md, Atomics): both ends.
pub const ATOMIC_CAPS: u64 = crate::core::rma::ATOMIC_CAPS;
/// The RMA and atomic direction caps (`fi_getinfo(3)`: none named means all).
const RMA_DIRECTION_CAPS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// The primary caps the directions apply to.
const REMOTE_MEMORY: u64 = FI_RMA | FI_ATOMIC;
/// Tx-side and rx-side RMA and atomic caps.
const RMA_TX_CAPS: u64 = REMOTE_MEMORY | FI_READ | FI_WRITE;
const RMA_RX_CAPS: u64 = REMOTE_MEMORY | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;

/// Capabilities the shm data path delivers. Host-local only.
pub const SHM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_LOCAL_COMM
    | RMA_CAPS
    | ATOMIC_CAPS;
/// Capabilities the tcp data path delivers.
pub const TCP_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM
    | RMA_CAPS
    | ATOMIC_CAPS;

/// Caps that may appear in `tx_attr->caps` (masked with the entry's caps).
pub const TX_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND | RMA_TX_CAPS;
/// Caps that may appear in `rx_attr->caps` (masked with the entry's caps).
pub const RX_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | RMA_RX_CAPS;
/// Domain-level capabilities (`fi_domain(3)`).
pub const DOMAIN_LEVEL_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV;

/// Primary capabilities (`fi_getinfo(3)`, CAPABILITIES): enabled only when
/// asked for.
const PRIMARY_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_ATOMIC
    | FI_MULTICAST
    | FI_NAMED_RX_CTX
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_HMEM
    | FI_COLLECTIVE;
const MSG_DIRECTION_CAPS: u64 = FI_SEND | FI_RECV;
const COMM_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;
/// Rx-only caps an application may leave in `tx_attr->caps` (util's
/// `OFI_IGNORED_TX_CAPS`), and tx-only caps in `rx_attr->caps`.
const IGNORED_TX_CAPS: u64 = FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_SOURCE_ERR
    | DOMAIN_LEVEL_CAPS;
const IGNORED_RX_CAPS: u64 =
    FI_READ | FI_WRITE | FI_SEND | FI_FENCE | FI_MULTICAST | FI_NAMED_RX_CTX | DOMAIN_LEVEL_CAPS;

/// Default operation flags the data path honours.
pub const TX_OP_FLAGS: u64 =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
pub const RX_OP_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV;

/// Mode bits rustfab requires of every application: none.
pub const REQUIRED_MODE: u64 = 0;
/// Mode bits rustfab uses when the application allows them: buffered
/// receives (`fi_recv_context`, `src/ep/buffered.rs`). Set to 0 to stop
/// offering them.
pub const OPTIONAL_MODE: u64 = FI_BUFFERED_RECV;

/// [`OPTIONAL_MODE`] at an API version: `FI_BUFFERED_RECV` exists up to 1.22
/// (2.0 turned mode bit 51 into an internal flag).
pub fn optional_mode(version: u32) -> u64 {
    if version <= crate::abi::v2::API_LAST_BUFFERED_RECV {
        OPTIONAL_MODE
    } else {
        OPTIONAL_MODE & !FI_BUFFERED_RECV
    }
}

/// `FI_TC_BEST_EFFORT` (`fabric.h`: `FI_TC_LABEL`).
const FI_TC_BEST_EFFORT: u32 = 0x200;

/// The shm address that names no segment: an endpoint opened with it picks
/// a fresh random token.
pub const SHM_ANY_TOKEN: u64 = 0;

/// One fi_getinfo entry rustfab can offer. Adding an endpoint type or a
/// transport is one more row in [`TEMPLATES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Template {
    pub transport: TransportKind,
    pub ep_type: u32,
    pub caps: u64,
    pub protocol: u32,
    pub max_msg_size: usize,
}

impl Template {
    /// The transport whose addresses the entry uses: connected endpoints
    /// set up over TCP on every transport (sockaddr addresses, as fi_cm(3)
    /// and fabtests expect); the shm and auto ones then move their data
    /// over shm (docs/shm.md, Connected endpoints).
    pub fn addressing(&self) -> TransportKind {
        if self.ep_type == FI_EP_MSG {
            TransportKind::Tcp
        } else {
            self.transport
        }
    }

    /// The template as an application of API `version` sees it: capability
    /// bit 48 is `FI_VARIABLE_MSG` up to 1.20 only (undefined in 1.21 and
    /// 1.22, `FI_EXACT_DIRECTED_RECV` from 2.0, which rustfab does not
    /// offer: docs/libfabric2.md).
    pub fn at_version(&self, version: u32) -> Template {
        let mut t = *self;
        if version > crate::abi::v2::API_LAST_VARIABLE_MSG {
            t.caps &= !FI_VARIABLE_MSG;
        }
        t
    }
}

/// What rustfab offers, in the order fi_getinfo returns it. The auto entry
/// comes first: one address, shared memory to peers on this host and TCP to
/// the others, so it honestly has both FI_LOCAL_COMM and FI_REMOTE_COMM
/// (what Open MPI asks for) and applications that take the first entry get
/// the fast path on a node and reach across nodes too.
pub const TEMPLATES: &[Template] = &[
    Template {
        transport: TransportKind::Auto,
        ep_type: FI_EP_RDM,
        caps: TCP_CAPS,
        protocol: AUTO_PROTOCOL,
        max_msg_size: TCP_MAX_MSG_SIZE,
    },
    Template {
        transport: TransportKind::Shm,
        ep_type: FI_EP_RDM,
        caps: SHM_CAPS,
        protocol: SHM_PROTOCOL,
        max_msg_size: SHM_MAX_MSG_SIZE,
    },
    Template {
        transport: TransportKind::Tcp,
        ep_type: FI_EP_RDM,
        caps: TCP_CAPS,
        protocol: TCP_PROTOCOL,
        max_msg_size: TCP_MAX_MSG_SIZE,
    },
    // Connected endpoints (fi/connected.rs), after every RDM entry:
    // applications that take the first entry get native RDM (ofi_rxm does
    // not layer over these: provider.rs sets disable_layering). In the RDM
    // order: auto (shm to this host, TCP to others), shm, tcp.
    Template {
        transport: TransportKind::Auto,
        ep_type: FI_EP_MSG,
        caps: crate::fi::connected::MSG_CAPS,
        protocol: AUTO_PROTOCOL,
        max_msg_size: TCP_MAX_MSG_SIZE,
    },
    // A shm connection carries its data over shm only: a peer on another
    // host is refused (docs/shm.md, Connected endpoints), so no
    // FI_REMOTE_COMM, as on the shm RDM entry.
    Template {
        transport: TransportKind::Shm,
        ep_type: FI_EP_MSG,
        caps: crate::fi::connected::MSG_CAPS & !FI_REMOTE_COMM,
        protocol: SHM_PROTOCOL,
        max_msg_size: TCP_MAX_MSG_SIZE,
    },
    Template {
        transport: TransportKind::Tcp,
        ep_type: FI_EP_MSG,
        caps: crate::fi::connected::MSG_CAPS,
        protocol: TCP_PROTOCOL,
        max_msg_size: TCP_MAX_MSG_SIZE,
    },
];

/// The unaltered entry for a template (before hints and addresses).
pub fn template_info(t: &Template, version: u32) -> Info {
    Info {
        caps: t.caps,
        mode: REQUIRED_MODE,
        addr_format: match t.addressing() {
            TransportKind::Shm | TransportKind::Auto => FI_ADDR_STR,
            TransportKind::Tcp => FI_SOCKADDR_IN,
        },
        src_addr: None,
        dest_addr: None,
        handle: 0,
        tx: Some(TxAttr {
            caps: t.caps & TX_CAPS,
            mode: 0,
            op_flags: 0,
            msg_order: MSG_ORDER,
            comp_order: COMP_ORDER,
            inject_size: INJECT_SIZE,
            size: QUEUE_SIZE,
            iov_limit: IOV_LIMIT,
            rma_iov_limit: if t.caps & REMOTE_MEMORY != 0 { RMA_IOV_LIMIT } else { 0 },
            tclass: FI_TC_UNSPEC,
        }),
        rx: Some(RxAttr {
            caps: t.caps & RX_CAPS,
            mode: 0,
            op_flags: 0,
            msg_order: MSG_ORDER,
            comp_order: COMP_ORDER,
            total_buffered_recv: 0,
            size: QUEUE_SIZE,
            iov_limit: IOV_LIMIT,
        }),
        ep: Some(EpAttr {
            ep_type: t.ep_type,
            protocol: t.protocol,
            protocol_version: PROTOCOL_VERSION,
            max_msg_size: t.max_msg_size,
            msg_prefix_size: 0,
            max_order_raw_size: 0,
            max_order_war_size: 0,
            max_order_waw_size: 0,
            mem_tag_format: MEM_TAG_FORMAT,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key: None,
        }),
        domain: Some(DomainAttr {
            name: Some(t.transport.domain_name().to_string()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_MANUAL,
            data_progress: FI_PROGRESS_MANUAL,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_UNSPEC,
            mr_mode: FI_MR_BASIC | FI_MR_SCALABLE,
            mr_key_size: MR_KEY_SIZE,
            cq_data_size: CQ_DATA_SIZE,
            cq_cnt: CQ_CNT,
            ep_cnt: EP_CNT,
            tx_ctx_cnt: DOMAIN_TX_CTX_CNT,
            rx_ctx_cnt: DOMAIN_RX_CTX_CNT,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            max_ep_stx_ctx: 0,
            max_ep_srx_ctx: 0,
            cntr_cnt: CNTR_CNT,
            mr_iov_limit: MR_IOV_LIMIT,
            caps: t.caps & DOMAIN_LEVEL_CAPS,
            mode: 0,
            auth_key: None,
            max_err_data: MAX_ERR_DATA,
            mr_cnt: MR_CNT,
            tclass: FI_TC_UNSPEC,
            // One authorization key per endpoint on tcp RDM endpoints
            // (docs/security.md; API 1.20+), none elsewhere; no peer groups
            // (2.0+); counters count to the end of a u64 (2.5+).
            max_ep_auth_key: usize::from(t.transport == TransportKind::Tcp && t.ep_type == FI_EP_RDM),
            max_group_id: 0,
            max_cntr_value: u64::MAX,
            max_err_cntr_value: u64::MAX,
        }),
        fabric: Some(FabricAttr {
            name: Some(FABRIC_NAME.to_string()),
            // Core fills prov_name in (docs/abi.md §0.3); setting it would give
            // "rustfab;rustfab".
            prov_name: None,
            prov_version: PROVIDER_VERSION,
            api_version: version,
        }),
    }
}

// ---- The request ---------------------------------------------------------

/// Which transports `FI_RUSTFAB_TRANSPORT` lets fi_getinfo offer: a set,
/// written as a comma-separated list (`shm,tcp`), or `all` (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportChoice(u8);

#[allow(non_upper_case_globals)]
impl TransportChoice {
    /// Every transport (the default).
    pub const All: TransportChoice = TransportChoice(0b111);
    #[cfg(test)]
    /// shm and tcp without the auto entry.
    pub const ShmTcp: TransportChoice = TransportChoice(0b110);

    fn bit(t: TransportKind) -> u8 {
        match t {
            TransportKind::Auto => 1,
            TransportKind::Shm => 2,
            TransportKind::Tcp => 4,
        }
    }

    #[cfg(test)]
    #[allow(non_snake_case)]
    pub fn Only(t: TransportKind) -> TransportChoice {
        TransportChoice(Self::bit(t))
    }

    /// Parses the parameter value (case-insensitive); `None` if unknown.
    pub fn parse(s: &str) -> Option<TransportChoice> {
        let s = s.trim().to_ascii_lowercase();
        if s.is_empty() || s == "all" {
            return Some(TransportChoice::All);
        }
        let mut set = 0;
        for part in s.split(',') {
            set |= Self::bit(TransportKind::from_domain_name(part.trim())?);
        }
        Some(TransportChoice(set))
    }

    /// The current `FI_RUSTFAB_TRANSPORT` setting.
    pub fn from_param() -> TransportChoice {
        match crate::provider::params::get_str("transport") {
            None => TransportChoice::All,
            Some(s) => TransportChoice::parse(&s).unwrap_or_else(|| {
                crate::provider::params::warn_once(
                    core::panic::Location::caller(),
                    format!("FI_RUSTFAB_TRANSPORT={s:?} is not all or a list of auto, shm, tcp; using all"),
                );
                TransportChoice::All
            }),
        }
    }

    pub fn allows(self, t: TransportKind) -> bool {
        self.0 & Self::bit(t) != 0
    }
}

/// The arguments of one fi_getinfo call, in Rust.
#[derive(Clone, Copy, Debug)]
pub struct Query<'a> {
    pub version: u32,
    pub node: Option<&'a str>,
    pub service: Option<&'a str>,
    pub flags: u64,
    pub hints: Option<&'a Info>,
    pub transports: TransportChoice,
}

impl Query<'_> {
    fn source(&self) -> bool {
        self.flags & FI_SOURCE != 0
    }
    fn numeric(&self) -> bool {
        self.flags & FI_NUMERICHOST != 0
    }
}

/// Why one template (or the whole request) was not offered, and the line
/// that decided it: logged at FI_LOG_INFO, like util's `FI_INFO` lines, with
/// that line rather than the logging call's.
#[derive(Clone, Copy, Debug)]
struct Skip {
    why: &'static str,
    at: &'static core::panic::Location<'static>,
}

/// A [`Skip`] raised at the caller's line.
#[track_caller]
fn skip(why: &'static str) -> Skip {
    Skip {
        why,
        at: core::panic::Location::caller(),
    }
}

impl core::fmt::Display for Skip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.why)
    }
}

type Check = core::result::Result<(), Skip>;

/// What the hints and `node` say about addresses, parsed once per call.
struct Prepared {
    /// `hints->addr_format` (0 = any).
    format: u32,
    hint_src: Option<Addr>,
    hint_dest: Option<Addr>,
    /// `node` written as an address string.
    node_addr: Option<Addr>,
    /// Whether the destination `node` is this host (computed on first use).
    node_local: OnceCell<bool>,
}

impl Prepared {
    fn new(q: &Query) -> core::result::Result<Prepared, Skip> {
        let format = q.hints.map_or(FI_FORMAT_UNSPEC, |h| h.addr_format);
        match format {
            FI_FORMAT_UNSPEC | FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 | FI_ADDR_STR => {}
            _ => return Err(skip("address format not supported")),
        }
        let parse = |b: Option<&[u8]>| -> core::result::Result<Option<Addr>, Skip> {
            match b {
                None => Ok(None),
                Some(b) => Addr::parse(format, b)
                    .map(|(a, _)| Some(a))
                    .map_err(|_| skip("hints carry an address rustfab cannot parse")),
            }
        };
        let hint_src = parse(q.hints.and_then(|h| h.src_addr.as_deref()))?;
        let hint_dest = parse(q.hints.and_then(|h| h.dest_addr.as_deref()))?;
        let node_addr = q.node.and_then(|n| Addr::parse_str(n).ok());
        Ok(Prepared {
            format,
            hint_src,
            hint_dest,
            node_addr,
            node_local: OnceCell::new(),
        })
    }

    /// Every address the request names (each one selects its transport).
    fn addresses(&self) -> impl Iterator<Item = &Addr> {
        self.hint_src
            .iter()
            .chain(self.hint_dest.iter())
            .chain(self.node_addr.iter())
    }
}

// ---- Entry point ---------------------------------------------------------

/// `provider->getinfo`.
///
/// # Safety
/// The C arguments of `fi_provider.getinfo`: `node`/`service` NULL or
/// NUL-terminated, `hints` NULL or a valid `fi_info`, `info` a writable out
/// pointer (or NULL, which is refused).
pub unsafe fn getinfo_c(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> Result<()> {
    // SAFETY: `info` is NULL (refused) or writable per the contract. It is
    // cleared first so that no caller ever sees a stale pointer.
    unsafe { fi::write_out(info, core::ptr::null_mut()) }?;
    // SAFETY: NULL or NUL-terminated per the contract.
    let node = unsafe { cmem::opt_str(node) }?;
    // SAFETY: as above.
    let service = unsafe { cmem::opt_str(service) }?;
    let hints = if hints.is_null() {
        None
    } else {
        // SAFETY: non-NULL and valid per the contract.
        Some(unsafe { Info::from_c(hints) }?)
    };
    let q = Query {
        version,
        node,
        service,
        flags,
        hints: hints.as_ref(),
        transports: TransportChoice::from_param(),
    };
    let list = getinfo(&q)?;
    let head = to_c_list(&list)?;
    // SAFETY: checked non-NULL and writable above.
    unsafe { *info = head };
    Ok(())
}

/// Builds the C list (libc allocations, linked through `next`); on failure
/// frees what was built.
fn to_c_list(list: &[Info]) -> Result<*mut fi_info> {
    let mut head: *mut fi_info = core::ptr::null_mut();
    let mut tail: *mut fi_info = core::ptr::null_mut();
    for i in list {
        match i.to_c() {
            Ok(p) => {
                if tail.is_null() {
                    head = p;
                } else {
                    // SAFETY: `tail` is the last entry we built and own.
                    unsafe { (*tail).next = p };
                }
                tail = p;
            }
            Err(e) => {
                // SAFETY: `head` is NULL or a list built by `Info::to_c`.
                unsafe { free_c_info(head) };
                return Err(e);
            }
        }
    }
    Ok(head)
}

/// fi_getinfo in Rust: every template that satisfies the request, altered
/// by the hints and with its addresses resolved, in [`TEMPLATES`] order.
/// `Err(NODATA)` when nothing matches.
/// libfabric's internal fi_getinfo flag with which a utility provider asks
/// for core providers to layer over (`OFI_CORE_PROV_ONLY` in the core's
/// `include/ofi.h`, the same bit from 1.17 to 2.6).
pub const OFI_CORE_PROV_ONLY: u64 = 1 << 59;

/// Whether the hints' `prov_name` names rustfab as one of its layers (the
/// core turns "rustfab;ofi_rxm" into "rustfab;^ofi_rxm" for the core query;
/// a "^name" excludes).
fn names_rustfab(hints: Option<&Info>) -> bool {
    hints
        .and_then(|h| h.fabric.as_ref())
        .and_then(|f| f.prov_name.as_deref())
        .is_some_and(|n| {
            n.split(';')
                .any(|p| p.eq_ignore_ascii_case(crate::core::fabric::FABRIC_NAME))
        })
}

pub fn getinfo(q: &Query) -> Result<Vec<Info>> {
    if q.flags & OFI_CORE_PROV_ONLY != 0 && !names_rustfab(q.hints) {
        // A utility provider (ofi_rxm) looking for a core provider to layer
        // over: only when the application named rustfab in its layering
        // request ("rustfab;ofi_rxm"). Native RDM entries are what users get.
        crate::base::log::log_info!(
            FI_LOG_CORE,
            "fi_getinfo: not offered for layering (ask for rustfab;ofi_rxm)"
        );
        return Err(Error::NODATA);
    }
    if q.source() && q.node.is_none() && q.service.is_none() {
        crate::base::log::log_info!(FI_LOG_CORE, "fi_getinfo: FI_SOURCE set, but no node or service");
        return Err(Error::INVAL);
    }
    let p = match Prepared::new(q) {
        Ok(p) => p,
        Err(why) => {
            crate::base::log::log_info_at!(FI_LOG_CORE, why.at, "fi_getinfo: {why}");
            return Err(Error::NODATA);
        }
    };
    let mut out = Vec::new();
    for t in TEMPLATES {
        match offer(q, &p, t) {
            Ok(info) => out.push(info),
            Err(why) => crate::base::log::log_info_at!(
                FI_LOG_CORE,
                why.at,
                "fi_getinfo: {} entry skipped: {why}",
                t.transport.domain_name(),
            ),
        }
    }
    if out.is_empty() {
        Err(Error::NODATA)
    } else {
        Ok(out)
    }
}

/// One template against the request.
fn offer(q: &Query, p: &Prepared, t: &Template) -> core::result::Result<Info, Skip> {
    let t = &t.at_version(q.version);
    transport_filter(q, p, t)?;
    let base = template_info(t, q.version);
    if let Some(h) = q.hints {
        check_hints(t, &base, h, q.version)?;
    }
    let mut info = alter(t, base, q.hints, q.version);
    let (src, dest) = match t.addressing() {
        TransportKind::Shm => shm_addresses(q, p),
        TransportKind::Tcp => tcp_addresses(q, p)?,
        TransportKind::Auto => auto_addresses(q, p)?,
    };
    info.addr_format = src.format();
    info.src_addr = Some(src.to_bytes());
    info.dest_addr = dest.map(|d| d.to_bytes());
    Ok(info)
}

fn transport_of(a: &Addr) -> TransportKind {
    match a {
        Addr::Shm(_) => TransportKind::Shm,
        Addr::Inet(_) => TransportKind::Tcp,
        Addr::Auto { .. } => TransportKind::Auto,
    }
}

/// Whether the request may use this template's transport at all: the
/// transport parameter, the address format and addresses in the hints, the
/// domain name, and the locality of a destination node.
fn transport_filter(q: &Query, p: &Prepared, t: &Template) -> Check {
    if !q.transports.allows(t.transport) {
        return Err(skip("FI_RUSTFAB_TRANSPORT excludes it"));
    }
    let format_ok = match p.format {
        FI_ADDR_STR => t.addressing() != TransportKind::Tcp,
        FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => t.addressing() == TransportKind::Tcp,
        _ => true,
    };
    if !format_ok {
        return Err(skip("address format belongs to another transport"));
    }
    if p.addresses().any(|a| transport_of(a) != t.addressing()) {
        return Err(skip("an address in the request belongs to another transport"));
    }
    if let Some(name) = q.hints.and_then(|h| h.domain.as_ref()).and_then(|d| d.name.as_deref()) {
        if !name.eq_ignore_ascii_case(t.transport.domain_name()) {
            return Err(skip("domain name does not match"));
        }
    }
    if t.transport == TransportKind::Shm && !q.source() && p.node_addr.is_none() {
        if let Some(node) = q.node {
            if !*p.node_local.get_or_init(|| node_is_local(node, q.numeric())) {
                return Err(skip("node is not this host (shm is host-local)"));
            }
        }
    }
    Ok(())
}

// ---- Hint checks (util's ofi_check_info) ----------------------------------

#[track_caller]
fn at_most(hint: usize, ours: usize, why: &'static str) -> Check {
    if hint > ours {
        Err(skip(why))
    } else {
        Ok(())
    }
}

#[track_caller]
fn subset(hint: u64, ours: u64, why: &'static str) -> Check {
    if hint & !ours != 0 {
        Err(skip(why))
    } else {
        Ok(())
    }
}

fn tclass_ok(tclass: u32) -> bool {
    const FI_TC_DSCP: u32 = 0x100;
    const FI_TC_NETWORK_CTRL: u32 = FI_TC_BEST_EFFORT + 5;
    tclass == FI_TC_UNSPEC
        || (tclass & !0xff == FI_TC_DSCP && tclass & 0xff <= 63)
        || (FI_TC_BEST_EFFORT..=FI_TC_NETWORK_CTRL).contains(&tclass)
}

/// util's `ofi_max_tag`: the largest tag a `mem_tag_format` can hold.
fn max_tag(format: u64) -> u64 {
    if format == 0 {
        0
    } else {
        u64::MAX >> format.leading_zeros()
    }
}

/// Checks the hints against one template (`base` is its unaltered entry).
fn check_hints(t: &Template, base: &Info, h: &Info, version: u32) -> Check {
    if let Some(e) = &h.ep {
        if e.ep_type != FI_EP_UNSPEC && e.ep_type != t.ep_type {
            return Err(skip("endpoint type not offered"));
        }
    }
    subset(h.caps, t.caps, "unsupported capabilities")?;
    // Our required mode bits must all be in the hints' mode.
    subset(REQUIRED_MODE, h.mode, "needed mode not set")?;
    if let Some(f) = &h.fabric {
        check_fabric(f)?;
    }
    if let (Some(d), Some(ours)) = (&h.domain, &base.domain) {
        check_domain(ours, d, version)?;
    }
    if let (Some(e), Some(ours)) = (&h.ep, &base.ep) {
        let keys = base.domain.as_ref().is_some_and(|d| d.max_ep_auth_key > 0);
        check_ep(ours, e, h.caps, keys)?;
    }
    if let (Some(r), Some(ours)) = (&h.rx, &base.rx) {
        check_rx(ours, r)?;
    }
    if let (Some(x), Some(ours)) = (&h.tx, &base.tx) {
        check_tx(ours, x)?;
    }
    Ok(())
}

fn check_fabric(f: &FabricAttr) -> Check {
    // prov_name is the core's business (docs/abi.md §1.8): never a reason here.
    if f.name.as_deref().is_some_and(|n| !n.eq_ignore_ascii_case(FABRIC_NAME)) {
        return Err(skip("fabric name does not match"));
    }
    if f.prov_version > PROVIDER_VERSION {
        return Err(skip("provider version too new"));
    }
    Ok(())
}

/// util's `ofi_check_mr_mode` for a provider whose template is
/// `FI_MR_BASIC | FI_MR_SCALABLE` and which requires no modern bit.
fn check_mr_mode(version: u32, hint: i32) -> Check {
    const WHY: &str = "memory registration mode not supported";
    if version < fi_version(1, 5) {
        // The old enum: only these three values exist.
        return match hint {
            FI_MR_UNSPEC | FI_MR_BASIC | FI_MR_SCALABLE => Ok(()),
            _ => Err(skip(WHY)),
        };
    }
    if hint & FI_MR_BASIC != 0 {
        // "FI_MR_BASIC ... may not be combined with other mode bits".
        return if hint & !FI_MR_BASIC != 0 {
            Err(skip(WHY))
        } else {
            Ok(())
        };
    }
    if hint & FI_MR_SCALABLE != 0 {
        return if hint & !FI_MR_SCALABLE != 0 {
            Err(skip(WHY))
        } else {
            Ok(())
        };
    }
    // Modern bits: rustfab requires none of them, so any set will do.
    Ok(())
}

/// The mr_mode returned for a (validated) hint; `None` = no domain hints.
pub fn alter_mr_mode(version: u32, hint: Option<i32>) -> i32 {
    let h = hint.unwrap_or(FI_MR_UNSPEC);
    if h & (FI_MR_BASIC | FI_MR_SCALABLE) != 0 {
        // Exactly BASIC or exactly SCALABLE: the application asked for
        // those semantics and must see them kept (docs/abi.md §4.1).
        h
    } else if version < fi_version(1, 5) {
        FI_MR_SCALABLE
    } else {
        0
    }
}

fn check_domain(ours: &DomainAttr, d: &DomainAttr, version: u32) -> Check {
    // Names: compared by transport_filter.
    if d.threading > FI_THREAD_ENDPOINT {
        // FI_THREAD_SAFE satisfies every valid level; unknown values do not.
        return Err(skip("invalid threading model"));
    }
    if d.control_progress > FI_PROGRESS_MANUAL {
        return Err(skip("invalid control progress model"));
    }
    if d.data_progress > FI_PROGRESS_MANUAL {
        return Err(skip("invalid data progress model"));
    }
    if d.resource_mgmt > FI_RM_ENABLED {
        return Err(skip("invalid resource management model"));
    }
    if d.av_type > FI_AV_TABLE {
        return Err(skip("invalid AV type"));
    }
    check_mr_mode(version, d.mr_mode)?;
    at_most(d.mr_key_size, ours.mr_key_size, "MR key size too large")?;
    at_most(d.cq_data_size, ours.cq_data_size, "CQ data size too large")?;
    at_most(d.cq_cnt, ours.cq_cnt, "CQ count too large")?;
    at_most(d.ep_cnt, ours.ep_cnt, "endpoint count too large")?;
    at_most(d.tx_ctx_cnt, ours.tx_ctx_cnt, "tx context count too large")?;
    at_most(d.rx_ctx_cnt, ours.rx_ctx_cnt, "rx context count too large")?;
    at_most(d.max_ep_tx_ctx, ours.max_ep_tx_ctx, "max_ep_tx_ctx too large")?;
    at_most(d.max_ep_rx_ctx, ours.max_ep_rx_ctx, "max_ep_rx_ctx too large")?;
    at_most(
        d.max_ep_stx_ctx,
        ours.max_ep_stx_ctx,
        "shared tx contexts not supported",
    )?;
    at_most(
        d.max_ep_srx_ctx,
        ours.max_ep_srx_ctx,
        "shared rx contexts not supported",
    )?;
    at_most(d.cntr_cnt, ours.cntr_cnt, "counter count too large")?;
    at_most(d.mr_iov_limit, ours.mr_iov_limit, "MR iov limit too large")?;
    at_most(d.mr_cnt, ours.mr_cnt, "MR count too large")?;
    at_most(d.max_err_data, ours.max_err_data, "max err data too large")?;
    subset(d.caps, ours.caps, "requested domain caps not supported")?;
    subset(ours.mode, d.mode, "required domain mode missing")?;
    if d.auth_key.as_ref().is_some_and(|k| !k.is_empty()) && ours.max_ep_auth_key == 0 {
        return Err(skip("authorization keys not supported"));
    }
    if !tclass_ok(d.tclass) {
        return Err(skip("traffic class not supported"));
    }
    Ok(())
}

fn check_ep(ours: &EpAttr, e: &EpAttr, caps: u64, keys: bool) -> Check {
    if e.protocol != FI_PROTO_UNSPEC && e.protocol != ours.protocol {
        return Err(skip("protocol not supported"));
    }
    if e.protocol_version > ours.protocol_version {
        return Err(skip("protocol version not supported"));
    }
    at_most(e.max_msg_size, ours.max_msg_size, "max message size too large")?;
    // One tx and one rx context per endpoint, no shared contexts (a
    // FI_SHARED_CONTEXT request is SIZE_MAX and fails here too).
    at_most(e.tx_ctx_cnt, ours.tx_ctx_cnt, "tx_ctx_cnt too large")?;
    at_most(e.rx_ctx_cnt, ours.rx_ctx_cnt, "rx_ctx_cnt too large")?;
    if caps & (FI_RMA | FI_ATOMIC) != 0 {
        at_most(
            e.max_order_raw_size,
            ours.max_order_raw_size,
            "max_order_raw_size too large",
        )?;
        at_most(
            e.max_order_war_size,
            ours.max_order_war_size,
            "max_order_war_size too large",
        )?;
        at_most(
            e.max_order_waw_size,
            ours.max_order_waw_size,
            "max_order_waw_size too large",
        )?;
    }
    if e.auth_key.as_ref().is_some_and(|k| !k.is_empty()) && !keys {
        return Err(skip("authorization keys not supported"));
    }
    if (caps == 0 || caps & FI_TAGGED != 0) && max_tag(e.mem_tag_format) > max_tag(ours.mem_tag_format) {
        return Err(skip("tag format too wide"));
    }
    Ok(())
}

fn check_tx(ours: &TxAttr, x: &TxAttr) -> Check {
    subset(x.caps & !IGNORED_TX_CAPS, ours.caps, "tx caps not supported")?;
    subset(x.op_flags, TX_OP_FLAGS, "tx op_flags not supported")?;
    subset(x.msg_order, ours.msg_order, "tx msg_order not supported")?;
    subset(x.comp_order, ours.comp_order, "tx comp_order not supported")?;
    at_most(x.inject_size, ours.inject_size, "inject size too large")?;
    at_most(x.size, ours.size, "tx size too large")?;
    at_most(x.iov_limit, ours.iov_limit, "tx iov_limit too large")?;
    at_most(x.rma_iov_limit, ours.rma_iov_limit, "rma_iov_limit too large")?;
    if !tclass_ok(x.tclass) {
        return Err(skip("traffic class not supported"));
    }
    Ok(())
}

fn check_rx(ours: &RxAttr, r: &RxAttr) -> Check {
    subset(r.caps & !IGNORED_RX_CAPS, ours.caps, "rx caps not supported")?;
    subset(r.op_flags, RX_OP_FLAGS, "rx op_flags not supported")?;
    subset(r.msg_order, ours.msg_order, "rx msg_order not supported")?;
    subset(r.comp_order, ours.comp_order, "rx comp_order not supported")?;
    at_most(
        r.total_buffered_recv,
        ours.total_buffered_recv,
        "total_buffered_recv too large",
    )?;
    at_most(r.size, ours.size, "rx size too large")?;
    at_most(r.iov_limit, ours.iov_limit, "rx iov_limit too large")?;
    Ok(())
}

// ---- Alteration (util's ofi_alter_info) -----------------------------------

/// `FI_MSG`/`FI_TAGGED` without a direction mean both directions.
fn with_directions(caps: u64) -> u64 {
    if caps & (FI_MSG | FI_TAGGED) != 0 && caps & MSG_DIRECTION_CAPS == 0 {
        caps | MSG_DIRECTION_CAPS
    } else {
        caps
    }
}

/// `FI_RMA` or `FI_ATOMIC` without a direction means every direction
/// offered (util's `ofi_get_caps`).
fn with_rma_directions(caps: u64, offered: u64) -> u64 {
    if caps & REMOTE_MEMORY != 0 && caps & RMA_DIRECTION_CAPS == 0 {
        caps | (offered & RMA_DIRECTION_CAPS)
    } else {
        caps
    }
}

/// The RMA part of a tx (`side` = `FI_READ | FI_WRITE`, `RMA_TX_CAPS`) or
/// rx (`FI_REMOTE_READ | FI_REMOTE_WRITE`, `RMA_RX_CAPS`) attribute's caps:
/// present when the caps have `FI_RMA` or `FI_ATOMIC` and that side is
/// named or no direction is.
fn rma_side(caps: u64, side: u64, mask: u64) -> u64 {
    if caps & REMOTE_MEMORY != 0 && (caps & side != 0 || caps & RMA_DIRECTION_CAPS == 0) {
        caps & mask
    } else {
        0
    }
}

/// Whether `caps` allow one direction (`FI_SEND` or `FI_RECV`): named, or no
/// direction named at all.
fn allows(caps: u64, direction: u64) -> bool {
    caps & direction != 0 || caps & MSG_DIRECTION_CAPS == 0
}

/// The caps of the returned entry: everything offered when the application
/// asked for nothing, else what it asked for (already a subset of `offered`)
/// plus what that request implies: the offered primary caps when it named
/// only secondary ones, both directions for a bare `FI_MSG`/`FI_TAGGED`,
/// the offered locality when it named neither `FI_LOCAL_COMM` nor
/// `FI_REMOTE_COMM` (`fi_getinfo(3)`), and `FI_SOURCE` with `FI_SOURCE_ERR`.
///
/// `FI_VARIABLE_MSG` is never implied (by an empty request or one naming
/// only secondary caps): it turns the receive side into buffered receives
/// (fi_msg(3) "Variable Length Messages"), so only an application that names
/// it gets it. `FI_RMA` is implied by an empty request only (or by
/// `FI_RMA_EVENT`), `FI_ATOMIC` by an empty request only; either without a
/// direction gets every direction.
pub fn effective_caps(offered: u64, requested: u64) -> u64 {
    if requested == 0 {
        return offered & !FI_VARIABLE_MSG;
    }
    let mut c = requested;
    if c & PRIMARY_CAPS == 0 {
        // RMA comes only with a request that names it (or FI_RMA_EVENT):
        // the messaging primaries are what a bare secondary request meant
        // before RMA was offered, and still means.
        let rma = if c & FI_RMA_EVENT != 0 { FI_RMA } else { 0 };
        c |= offered & PRIMARY_CAPS & !(FI_VARIABLE_MSG | REMOTE_MEMORY) | (offered & rma);
    }
    c = with_rma_directions(with_directions(c), offered) & (offered | requested);
    if c & COMM_CAPS == 0 {
        c |= offered & COMM_CAPS;
    }
    if c & FI_SOURCE_ERR != 0 {
        c |= offered & FI_SOURCE;
    }
    c
}

/// Narrows `base` (the template's entry) to the validated hints.
pub fn alter(t: &Template, mut info: Info, hints: Option<&Info>, version: u32) -> Info {
    let requested = hints.map_or(0, |h| h.caps);
    info.caps = effective_caps(t.caps, requested);
    let ep_caps = with_directions(info.caps);
    info.mode = REQUIRED_MODE | (hints.map_or(0, |h| h.mode) & optional_mode(version));
    if let Some(h) = hints {
        info.handle = h.handle;
    }

    let hd = hints.and_then(|h| h.domain.as_ref());
    if let Some(d) = info.domain.as_mut() {
        d.mr_mode = alter_mr_mode(version, hd.map(|h| h.mr_mode));
        d.caps = (info.caps | hd.map_or(0, |h| h.caps)) & t.caps & DOMAIN_LEVEL_CAPS;
        if let Some(h) = hd {
            // Every valid level is satisfiable (FI_THREAD_SAFE underneath);
            // MPICH insists on getting FI_THREAD_DOMAIN back (docs/mpi.md §2).
            if h.threading != FI_THREAD_UNSPEC {
                d.threading = h.threading;
            }
            if h.control_progress != FI_PROGRESS_UNSPEC {
                d.control_progress = h.control_progress;
            }
            if h.data_progress != FI_PROGRESS_UNSPEC {
                d.data_progress = h.data_progress;
            }
            if h.resource_mgmt != FI_RM_UNSPEC {
                d.resource_mgmt = h.resource_mgmt;
            }
            if h.av_type != FI_AV_UNSPEC {
                d.av_type = h.av_type;
            }
            if h.tclass != FI_TC_UNSPEC {
                d.tclass = h.tclass;
            }
            if d.max_ep_auth_key > 0 && h.auth_key.as_ref().is_some_and(|k| !k.is_empty()) {
                d.auth_key = h.auth_key.clone();
            }
        }
    }

    if let (Some(e), Some(h)) = (info.ep.as_mut(), hints.and_then(|h| h.ep.as_ref())) {
        if h.tx_ctx_cnt != 0 {
            e.tx_ctx_cnt = h.tx_ctx_cnt;
        }
        if h.rx_ctx_cnt != 0 {
            e.rx_ctx_cnt = h.rx_ctx_cnt;
        }
        if h.auth_key.as_ref().is_some_and(|k| !k.is_empty()) {
            // Accepted by check_hints only where keys are supported.
            e.auth_key = h.auth_key.clone();
        }
    }

    let htx = hints.and_then(|h| h.tx.as_ref());
    if let Some(x) = info.tx.as_mut() {
        let asked = htx.map_or(0, |h| h.caps & !IGNORED_TX_CAPS);
        let caps = if asked != 0 {
            with_rma_directions(with_directions(asked), ep_caps) & ep_caps
        } else {
            ep_caps
        };
        let msg = if allows(caps, FI_SEND) {
            caps & TX_CAPS & !RMA_TX_CAPS
        } else {
            0
        };
        x.caps = msg | rma_side(caps, FI_READ | FI_WRITE, RMA_TX_CAPS);
        if let Some(h) = htx {
            x.op_flags = h.op_flags;
            if h.inject_size != 0 {
                x.inject_size = h.inject_size;
            }
            if h.size != 0 {
                x.size = h.size;
            }
            if h.iov_limit != 0 {
                x.iov_limit = h.iov_limit;
            }
            if h.rma_iov_limit != 0 {
                x.rma_iov_limit = h.rma_iov_limit;
            }
            if h.tclass != FI_TC_UNSPEC {
                x.tclass = h.tclass;
            }
        }
    }

    let hrx = hints.and_then(|h| h.rx.as_ref());
    if let Some(r) = info.rx.as_mut() {
        let asked = hrx.map_or(0, |h| h.caps & !IGNORED_RX_CAPS);
        let caps = if asked != 0 {
            with_rma_directions(with_directions(asked), ep_caps) & ep_caps
        } else {
            ep_caps
        };
        let msg = if allows(caps, FI_RECV) {
            caps & RX_CAPS & !RMA_RX_CAPS
        } else {
            0
        };
        r.caps = msg | rma_side(caps, FI_REMOTE_READ | FI_REMOTE_WRITE, RMA_RX_CAPS);
        r.mode = info.mode & FI_BUFFERED_RECV;
        if let Some(h) = hrx {
            r.op_flags = h.op_flags;
            r.total_buffered_recv = h.total_buffered_recv;
            if h.size != 0 {
                r.size = h.size;
            }
            if h.iov_limit != 0 {
                r.iov_limit = h.iov_limit;
            }
        }
    }
    info
}

// ---- Addresses ------------------------------------------------------------

/// `(src_addr, dest_addr)` of an shm entry. Named endpoints use
/// `shm_token_for(node, service)`, like the built-in shm's
/// `smr_resolve_addr`; without a name the source is the wildcard.
fn shm_addresses(q: &Query, p: &Prepared) -> (Addr, Option<Addr>) {
    let any = Addr::Shm(SHM_ANY_TOKEN);
    let named = || Addr::Shm(shm_token_for(q.node, q.service));
    if q.source() {
        let src = match (p.node_addr, q.service) {
            (Some(a), _) => a,
            (None, Some(_)) => named(),
            // A node without a service names no endpoint: anonymous.
            (None, None) => p.hint_src.unwrap_or(any),
        };
        (src, p.hint_dest)
    } else {
        let dest = match p.node_addr {
            Some(a) => Some(a),
            None if q.node.is_some() || q.service.is_some() => Some(named()),
            None => p.hint_dest,
        };
        (p.hint_src.unwrap_or(any), dest)
    }
}

/// `(src_addr, dest_addr)` of an auto entry: the shm token as for shm, the
/// IPv4 address as for tcp, and the host identity (ours for the source; a
/// destination's only if its IP is on this host — else 0, "use TCP").
fn auto_addresses(q: &Query, p: &Prepared) -> core::result::Result<(Addr, Option<Addr>), Skip> {
    let split = |a: &Option<Addr>, shm: bool| -> Option<Addr> {
        match *a {
            Some(Addr::Auto { shm: tok, inet, .. }) => Some(if shm {
                Addr::Shm(tok)
            } else {
                Addr::Inet(SocketAddr::V4(inet))
            }),
            other => other,
        }
    };
    let view = |shm: bool| Prepared {
        format: if shm { FI_ADDR_STR } else { FI_SOCKADDR_IN },
        hint_src: split(&p.hint_src, shm),
        hint_dest: split(&p.hint_dest, shm),
        node_addr: split(&p.node_addr, shm),
        node_local: OnceCell::new(),
    };
    let (shm_src, shm_dest) = shm_addresses(q, &view(true));
    let (tcp_src, tcp_dest) = tcp_addresses(q, &view(false))?;
    let v4 = |a: Addr| match a {
        Addr::Inet(SocketAddr::V4(v)) => Some(v),
        _ => None,
    };
    let token = |a: Option<Addr>| match a {
        Some(Addr::Shm(t)) => t,
        _ => SHM_ANY_TOKEN,
    };
    let src_inet = v4(tcp_src).ok_or_else(|| skip("auto addresses are IPv4"))?;
    let src = match p.hint_src {
        Some(a @ Addr::Auto { .. }) => a,
        _ => Addr::Auto {
            host: crate::transport::addr::host_id(),
            shm: token(Some(shm_src)),
            inet: src_inet,
        },
    };
    let dest = match (p.hint_dest, p.node_addr, tcp_dest) {
        (_, Some(a @ Addr::Auto { .. }), _) if !q.source() => Some(a),
        (Some(a @ Addr::Auto { .. }), _, _) => Some(a),
        (_, _, Some(d)) => {
            let inet = v4(d).ok_or_else(|| skip("auto addresses are IPv4"))?;
            let local = ip_is_local(IpAddr::V4(*inet.ip()));
            Some(Addr::Auto {
                host: if local { crate::transport::addr::host_id() } else { 0 },
                shm: token(shm_dest),
                inet,
            })
        }
        _ => None,
    };
    Ok((src, dest))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// No preference stated: IPv4 first, IPv6 if that is all there is.
    Any,
    V4,
    V6,
}

impl Family {
    fn of(a: &SocketAddr) -> Family {
        if a.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }
    fn wildcard(self, port: u16) -> SocketAddr {
        match self {
            Family::V6 => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            _ => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        }
    }
}

fn inet(a: &Option<Addr>) -> Option<SocketAddr> {
    match a {
        Some(Addr::Inet(s)) => Some(*s),
        _ => None,
    }
}

/// `(src_addr, dest_addr)` of a tcp entry, resolved with getaddrinfo.
fn tcp_addresses(q: &Query, p: &Prepared) -> core::result::Result<(Addr, Option<Addr>), Skip> {
    let hint_src = inet(&p.hint_src);
    let hint_dest = inet(&p.hint_dest);
    let node_addr = inet(&p.node_addr);
    let family = match p.format {
        FI_SOCKADDR_IN => Family::V4,
        FI_SOCKADDR_IN6 => Family::V6,
        _ => node_addr
            .or(hint_src)
            .or(hint_dest)
            .map_or(Family::Any, |a| Family::of(&a)),
    };
    let named = node_addr.is_some() || q.node.is_some() || q.service.is_some();
    let (src, dest) = if q.source() {
        let src = match node_addr {
            Some(a) => a,
            None => resolve(
                q.node,
                q.service,
                family,
                Lookup {
                    passive: true,
                    numeric: q.numeric(),
                },
            )?,
        };
        (src, hint_dest)
    } else {
        let dest = match node_addr {
            Some(a) => Some(a),
            None if named => Some(resolve(
                q.node,
                q.service,
                family,
                Lookup {
                    passive: false,
                    numeric: q.numeric(),
                },
            )?),
            None => hint_dest,
        };
        let src = match (hint_src, dest) {
            (Some(s), _) => s,
            (None, Some(d)) => route_source(&d),
            (None, None) => family.wildcard(0),
        };
        (src, dest)
    };
    if family != Family::Any && Family::of(&src) != family {
        return Err(skip("address does not have the requested family"));
    }
    if dest.is_some_and(|d| Family::of(&d) != Family::of(&src)) {
        return Err(skip("source and destination address families differ"));
    }
    Ok((Addr::Inet(src), dest.map(Addr::Inet)))
}

/// getaddrinfo for TCP: every distinct result, in resolver order.
fn getaddrinfo(
    node: Option<&str>,
    service: Option<&str>,
    family: Family,
    how: Lookup,
) -> core::result::Result<Vec<SocketAddr>, Skip> {
    let fam = match family {
        Family::Any => crate::sys::resolve::Family::Any,
        Family::V4 => crate::sys::resolve::Family::V4,
        Family::V6 => crate::sys::resolve::Family::V6,
    };
    crate::sys::resolve::resolve(node, service, fam, how).ok_or_else(|| skip("cannot resolve node/service"))
}

/// One address for node/service: the first of the requested family, or for
/// no stated family the first IPv4 result, else the first IPv6 one.
fn resolve(
    node: Option<&str>,
    service: Option<&str>,
    family: Family,
    how: Lookup,
) -> core::result::Result<SocketAddr, Skip> {
    let all = getaddrinfo(node, service, family, how)?;
    let pick = match family {
        Family::Any => all.iter().find(|a| a.is_ipv4()).or(all.first()),
        _ => all.first(),
    };
    pick.copied()
        .ok_or_else(|| skip("node/service has no address of the requested family"))
}

/// Whether `node` is this host: one of its addresses is loopback,
/// unspecified, or can be bound here.
fn node_is_local(node: &str, numeric: bool) -> bool {
    match getaddrinfo(
        Some(node),
        None,
        Family::Any,
        Lookup {
            passive: false,
            numeric,
        },
    ) {
        Ok(all) => all.iter().any(|a| ip_is_local(a.ip())),
        Err(_) => false,
    }
}

/// The local address the kernel would use to reach `dest`, port 0 (util's
/// `ofi_get_src_addr`); the wildcard if there is no route.
fn route_source(dest: &SocketAddr) -> SocketAddr {
    match crate::sys::net::route_source(dest.ip()) {
        Some(ip) => SocketAddr::new(ip, 0),
        None => Family::of(dest).wildcard(0),
    }
}

#[cfg(test)]
mod tests;
