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
//!   allow it ([`OPTIONAL_MODE`] is the one-line hook); `FI_MSG_PREFIX`
//!   too, with its `msg_prefix_size` (`core/prefix.rs` decides).
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
    crate::core::prefix::answer(hints.map_or(0, |h| h.mode), &mut info);
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
mod tests {
    use super::*;
    use crate::transport::addr::SHM_ADDR_LEN;

    const V: u32 = fi_version(1, 17);

    /// The tests below are about the RDM entries; this shadows
    /// `super::getinfo` to leave the FI_EP_MSG entry out (it has its own
    /// tests, `msg_entry_*`).
    fn getinfo(q: &Query) -> Result<Vec<Info>> {
        let rdm: Vec<Info> = super::getinfo(q)?
            .into_iter()
            .filter(|i| i.ep.as_ref().is_none_or(|e| e.ep_type != FI_EP_MSG))
            .collect();
        if rdm.is_empty() {
            Err(Error::NODATA)
        } else {
            Ok(rdm)
        }
    }

    fn query<'a>(hints: Option<&'a Info>) -> Query<'a> {
        Query {
            version: V,
            node: None,
            service: None,
            flags: 0,
            hints,
            transports: TransportChoice::ShmTcp,
        }
    }

    /// Hints as `fi_allocinfo` makes them: every attr present and zeroed.
    fn alloc_hints() -> Info {
        Info {
            tx: Some(TxAttr::default()),
            rx: Some(RxAttr::default()),
            ep: Some(EpAttr::default()),
            domain: Some(DomainAttr::default()),
            fabric: Some(FabricAttr::default()),
            ..Default::default()
        }
    }

    fn names(list: &[Info]) -> Vec<String> {
        list.iter()
            .map(|i| i.domain.as_ref().unwrap().name.clone().unwrap())
            .collect()
    }

    fn run(h: &Info) -> Result<Vec<Info>> {
        getinfo(&query(Some(h)))
    }

    fn run_names(h: &Info) -> Vec<String> {
        run(h).map(|l| names(&l)).unwrap_or_default()
    }

    fn addr(b: &Option<Vec<u8>>) -> Option<Addr> {
        b.as_ref().map(|b| Addr::parse(FI_FORMAT_UNSPEC, b).unwrap().0)
    }

    fn sock(s: &str) -> Addr {
        Addr::Inet(s.parse().unwrap())
    }

    #[test]
    fn null_hints_give_shm_then_tcp_complete() {
        let l = getinfo(&query(None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        for (i, t) in l
            .iter()
            .zip(TEMPLATES.iter().filter(|t| t.transport != TransportKind::Auto))
        {
            assert_eq!(i.caps, t.caps & !FI_VARIABLE_MSG);
            assert_eq!(i.mode, 0);
            let e = i.ep.as_ref().unwrap();
            assert_eq!(e.ep_type, FI_EP_RDM);
            assert_eq!(e.protocol, t.protocol);
            assert_eq!(e.protocol_version, 1);
            assert_eq!(e.max_msg_size, 1 << 30);
            assert_eq!(e.mem_tag_format, 0xaaaa_aaaa_aaaa_aaaa);
            assert_eq!((e.tx_ctx_cnt, e.rx_ctx_cnt), (1, 1));
            let d = i.domain.as_ref().unwrap();
            assert_eq!(d.threading, FI_THREAD_SAFE);
            assert_eq!(
                (d.control_progress, d.data_progress),
                (FI_PROGRESS_MANUAL, FI_PROGRESS_MANUAL)
            );
            assert_eq!(d.resource_mgmt, FI_RM_ENABLED);
            assert_eq!(d.av_type, FI_AV_UNSPEC);
            assert_eq!(d.mr_mode, 0);
            assert_eq!(d.cq_data_size, 8);
            assert_eq!(d.max_err_data, 64);
            assert_eq!(d.caps, t.caps & DOMAIN_LEVEL_CAPS);
            let f = i.fabric.as_ref().unwrap();
            assert_eq!(f.name.as_deref(), Some("rustfab"));
            assert_eq!(f.prov_name, None);
            assert_eq!(f.prov_version, PROVIDER_VERSION);
            let tx = i.tx.as_ref().unwrap();
            assert_eq!(
                tx.caps,
                FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE
            );
            assert_eq!((tx.msg_order, tx.comp_order), (FI_ORDER_SAS, FI_ORDER_NONE));
            assert_eq!(
                (tx.inject_size, tx.size, tx.iov_limit, tx.rma_iov_limit),
                (INJECT_SIZE, 1024, 8, 8)
            );
            let rx = i.rx.as_ref().unwrap();
            assert_eq!(rx.caps, RX_CAPS & !FI_VARIABLE_MSG);
            assert_eq!((rx.size, rx.iov_limit, rx.total_buffered_recv), (1024, 8, 0));
            // Every entry has a source address (the wildcard) and no dest.
            assert!(i.src_addr.is_some());
            assert!(i.dest_addr.is_none());
        }
        assert_eq!(l[0].addr_format, FI_ADDR_STR);
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
        assert_eq!(l[0].src_addr.as_ref().unwrap().len(), SHM_ADDR_LEN);
        assert_eq!(l[1].addr_format, FI_SOCKADDR_IN);
        assert_eq!(addr(&l[1].src_addr), Some(sock("0.0.0.0:0")));
        // shm is host-local and says so.
        assert_eq!(l[0].caps & FI_REMOTE_COMM, 0);
        assert_ne!(l[1].caps & FI_REMOTE_COMM, 0);
    }

    #[test]
    fn tx_rx_caps_never_carry_domain_caps() {
        for i in getinfo(&query(None)).unwrap() {
            assert_eq!(i.tx.unwrap().caps & DOMAIN_LEVEL_CAPS, 0);
            assert_eq!(i.rx.unwrap().caps & DOMAIN_LEVEL_CAPS, 0);
        }
    }

    #[test]
    fn transport_parameter_selects() {
        assert_eq!(TransportChoice::parse("all"), Some(TransportChoice::All));
        assert_eq!(TransportChoice::parse(""), Some(TransportChoice::All));
        assert_eq!(
            TransportChoice::parse("auto"),
            Some(TransportChoice::Only(TransportKind::Auto))
        );
        assert_eq!(
            TransportChoice::parse(" SHM "),
            Some(TransportChoice::Only(TransportKind::Shm))
        );
        assert_eq!(
            TransportChoice::parse("tcp"),
            Some(TransportChoice::Only(TransportKind::Tcp))
        );
        assert_eq!(TransportChoice::parse("udp"), None);
        assert_eq!(TransportChoice::parse("shm, tcp"), Some(TransportChoice::ShmTcp));
        assert_eq!(TransportChoice::parse("shm,udp"), None);
        for (choice, want) in [
            (TransportChoice::All, vec!["auto", "shm", "tcp"]),
            (TransportChoice::ShmTcp, vec!["shm", "tcp"]),
            (TransportChoice::Only(TransportKind::Auto), vec!["auto"]),
            (TransportChoice::Only(TransportKind::Shm), vec!["shm"]),
            (TransportChoice::Only(TransportKind::Tcp), vec!["tcp"]),
        ] {
            let q = Query {
                transports: choice,
                ..query(None)
            };
            assert_eq!(names(&getinfo(&q).unwrap()), want);
        }
        // The only transport left does not match the hints: nothing at all.
        let mut h = alloc_hints();
        h.caps = FI_REMOTE_COMM;
        let q = Query {
            transports: TransportChoice::Only(TransportKind::Shm),
            ..query(Some(&h))
        };
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    }

    #[test]
    fn fi_info_verbose_hints_give_both() {
        // fi_info -v: mode ~0, domain mode ~0, mr_mode ~(BASIC|SCALABLE).
        let mut h = alloc_hints();
        h.mode = !0;
        h.fabric.as_mut().unwrap().prov_name = Some("rustfab".into());
        let d = h.domain.as_mut().unwrap();
        d.mode = !0;
        d.mr_mode = !(FI_MR_BASIC | FI_MR_SCALABLE);
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        for i in &l {
            assert_eq!(i.mode, OPTIONAL_MODE);
            assert_eq!(i.rx.as_ref().unwrap().mode, OPTIONAL_MODE);
            assert_eq!(i.domain.as_ref().unwrap().mr_mode, 0);
            assert_eq!(i.domain.as_ref().unwrap().mode, 0);
        }
    }

    #[test]
    fn prov_name_hints_never_reject() {
        for n in ["rustfab", "RUSTFAB", "rustfab;^ofi_rxm", "rustfab;ofi_rxm", "^ofi_rxm"] {
            let mut h = alloc_hints();
            h.fabric.as_mut().unwrap().prov_name = Some(n.into());
            assert_eq!(run_names(&h), ["shm", "tcp"], "{n}");
        }
    }

    #[test]
    fn caps_must_be_a_subset() {
        for bad in [
            FI_COLLECTIVE,
            FI_RMA | FI_ATOMIC | FI_COLLECTIVE,
            FI_HMEM,
            FI_RMA_PMEM,
            FI_SHARED_AV,
            FI_TRIGGER,
        ] {
            let mut h = alloc_hints();
            h.caps = bad;
            assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{bad:#x}");
        }
        // Remote communication: tcp only.
        let mut h = alloc_hints();
        h.caps = FI_TAGGED | FI_REMOTE_COMM;
        assert_eq!(run_names(&h), ["tcp"]);
    }

    #[test]
    fn caps_are_narrowed_to_the_request() {
        let mut h = alloc_hints();
        h.caps = FI_TAGGED;
        let l = run(&h).unwrap();
        assert_eq!(l[0].caps, FI_TAGGED | FI_SEND | FI_RECV | FI_LOCAL_COMM);
        assert_eq!(
            l[1].caps,
            FI_TAGGED | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM
        );
        assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_TAGGED | FI_SEND);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_TAGGED | FI_RECV);
        assert_eq!(l[1].domain.as_ref().unwrap().caps, FI_LOCAL_COMM | FI_REMOTE_COMM);

        // Open MPI's request (docs/mpi.md §2): tcp only, all of it granted.
        h.caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_eq!(l[0].caps, h.caps | FI_SEND | FI_RECV);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_TAGGED | FI_RECV | FI_DIRECTED_RECV);

        // Only secondary caps: the default primary ones come with them.
        h.caps = FI_SOURCE;
        let l = run(&h).unwrap();
        assert_eq!(
            l[0].caps,
            FI_SOURCE | FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SEND | FI_RECV | FI_LOCAL_COMM
        );

        // A receive-only endpoint gets no tx caps.
        h.caps = FI_MSG | FI_RECV;
        let l = run(&h).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV);

        // A primary rx cap alone lands in rx_attr (fabtests' caps check).
        h.caps = FI_DIRECTED_RECV;
        let l = run(&h).unwrap();
        assert_eq!(l[0].caps, FI_DIRECTED_RECV | FI_LOCAL_COMM);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_DIRECTED_RECV);
        assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);

        // FI_SOURCE_ERR brings FI_SOURCE.
        h.caps = FI_MSG | FI_SOURCE_ERR;
        assert_ne!(run(&h).unwrap()[0].caps & FI_SOURCE, 0);

        // tx/rx caps hints narrow tx/rx caps.
        let mut h = alloc_hints();
        h.tx.as_mut().unwrap().caps = FI_TAGGED;
        h.rx.as_mut().unwrap().caps = FI_MSG | FI_MULTI_RECV | FI_SEND /* ignored */;
        let l = run(&h).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_TAGGED | FI_SEND);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV | FI_MULTI_RECV);
    }

    /// Atomics are offered on every entry and matched like RMA: asked for
    /// (fi_rdm_atomic's FI_MSG | FI_ATOMICS), both sides, every direction;
    /// a request naming RMA only gets no atomics, and the reverse.
    #[test]
    fn atomics_on_every_entry() {
        let mut h = alloc_hints();
        h.caps = FI_MSG | FI_ATOMIC;
        let l = run(&h).unwrap();
        assert_eq!(l.len(), 2);
        for i in &l {
            let dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
            assert_eq!(i.caps & (ATOMIC_CAPS | FI_RMA), FI_ATOMIC | dirs);
            assert_eq!(
                i.tx.as_ref().unwrap().caps & !(FI_MSG | FI_SEND),
                FI_ATOMIC | FI_READ | FI_WRITE
            );
            assert_eq!(
                i.rx.as_ref().unwrap().caps & !(FI_MSG | FI_RECV),
                FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE
            );
        }
        h.caps = FI_RMA;
        for i in run(&h).unwrap() {
            assert_eq!(i.caps & FI_ATOMIC, 0, "RMA alone brings no atomics");
        }
        h.caps = FI_ATOMIC | FI_REMOTE_WRITE;
        for i in run(&h).unwrap() {
            assert_eq!(i.caps & (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ), 0);
            assert_eq!(i.tx.as_ref().unwrap().caps & FI_ATOMIC, 0, "target only");
        }
        // The connected entry too.
        let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_ATOMIC)))).unwrap();
        assert_eq!(l[0].caps & FI_ATOMIC, FI_ATOMIC);
    }

    /// RMA is offered on the RDM entries (the connected entry: the
    /// msg_entry tests; this file's `getinfo` leaves it out), with the attributes
    /// fabtests' fi_getinfo_test checks: FI_RMA in info, tx and rx caps,
    /// the directions named or all of them, nothing beyond what was asked,
    /// no RMA ordering (so no ordering sizes).
    #[test]
    fn rma_on_rdm_entries() {
        let mut h = alloc_hints();
        h.caps = FI_RMA;
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        for i in &l {
            let dirs = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
            assert_eq!(i.caps & !(FI_LOCAL_COMM | FI_REMOTE_COMM), FI_RMA | dirs);
            assert_eq!(i.tx.as_ref().unwrap().caps, FI_RMA | FI_READ | FI_WRITE);
            assert_eq!(i.rx.as_ref().unwrap().caps, FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE);
            assert_eq!(i.tx.as_ref().unwrap().rma_iov_limit, RMA_IOV_LIMIT);
            let e = i.ep.as_ref().unwrap();
            assert_eq!(
                (e.max_order_raw_size, e.max_order_war_size, e.max_order_waw_size),
                (0, 0, 0)
            );
        }
        // One side only: the other attribute has no RMA.
        h.caps = FI_MSG | FI_RMA | FI_WRITE;
        let l = run(&h).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().caps, FI_MSG | FI_SEND | FI_RMA | FI_WRITE);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_MSG | FI_RECV);
        h.caps = FI_RMA | FI_REMOTE_WRITE | FI_RMA_EVENT;
        let l = run(&h).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().caps, 0);
        assert_eq!(l[0].rx.as_ref().unwrap().caps, FI_RMA | FI_REMOTE_WRITE | FI_RMA_EVENT);
        // fi_rdm_rma_event's and fi_rma_bw's requests.
        h.caps = FI_MSG | FI_RMA | FI_RMA_EVENT;
        assert_eq!(run_names(&h), ["shm", "tcp"]);
        h.caps = FI_MSG | FI_RMA;
        h.domain.as_mut().unwrap().resource_mgmt = FI_RM_ENABLED;
        h.tx.as_mut().unwrap().rma_iov_limit = 2;
        let l = run(&h).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().rma_iov_limit, 2, "echoed");
        // No RMA ordering is offered (fi_getinfo_test then expects ENODATA).
        let mut h = alloc_hints();
        h.caps = FI_RMA;
        h.tx.as_mut().unwrap().msg_order = FI_ORDER_RAW;
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
        // Asked for messaging only: no RMA anywhere in the answer.
        let mut h = alloc_hints();
        h.caps = FI_MSG | FI_TAGGED;
        for i in run(&h).unwrap() {
            assert_eq!(i.caps & RMA_CAPS, 0);
            assert_eq!(i.tx.as_ref().unwrap().caps & RMA_CAPS, 0);
            assert_eq!(i.rx.as_ref().unwrap().caps & RMA_CAPS, 0);
        }
    }

    #[test]
    fn effective_caps_rules() {
        assert_eq!(effective_caps(TCP_CAPS, 0), TCP_CAPS & !FI_VARIABLE_MSG);
        assert_eq!(
            effective_caps(TCP_CAPS, FI_MSG | FI_VARIABLE_MSG),
            FI_MSG | FI_VARIABLE_MSG | FI_SEND | FI_RECV | COMM_CAPS
        );
        assert_eq!(effective_caps(TCP_CAPS, FI_MSG), FI_MSG | FI_SEND | FI_RECV | COMM_CAPS);
        assert_eq!(effective_caps(TCP_CAPS, FI_MSG | FI_SEND), FI_MSG | FI_SEND | COMM_CAPS);
        assert_eq!(
            effective_caps(SHM_CAPS, FI_MSG | FI_LOCAL_COMM),
            FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM
        );
        assert_eq!(
            effective_caps(TCP_CAPS, FI_MULTI_RECV),
            FI_MULTI_RECV | FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SEND | FI_RECV | COMM_CAPS
        );
        // RMA: all directions when none is named, only what is named else;
        // never with a request that names other primary caps only, nor
        // with a bare secondary request (FI_RMA_EVENT aside).
        const DIRS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
        assert_eq!(effective_caps(SHM_CAPS, FI_RMA), FI_RMA | DIRS | FI_LOCAL_COMM);
        assert_eq!(
            effective_caps(SHM_CAPS, FI_MSG | FI_RMA),
            FI_MSG | FI_SEND | FI_RECV | FI_RMA | DIRS | FI_LOCAL_COMM
        );
        assert_eq!(
            effective_caps(SHM_CAPS, FI_RMA | FI_READ),
            FI_RMA | FI_READ | FI_LOCAL_COMM
        );
        assert_eq!(effective_caps(TCP_CAPS, FI_MSG | FI_TAGGED) & RMA_CAPS, 0);
        assert_eq!(effective_caps(TCP_CAPS, FI_SOURCE) & RMA_CAPS, 0);
        assert_eq!(
            effective_caps(SHM_CAPS, FI_RMA_EVENT) & RMA_CAPS,
            RMA_CAPS,
            "FI_RMA_EVENT implies FI_RMA"
        );
        assert_eq!(effective_caps(SHM_CAPS, 0) & RMA_CAPS, RMA_CAPS, "no hints: all");
        // Results never exceed what is offered.
        for req in [
            0,
            FI_MSG,
            FI_SOURCE,
            FI_TAGGED | FI_SOURCE_ERR,
            FI_RECV,
            FI_RMA,
            FI_RMA | FI_WRITE,
        ] {
            assert_eq!(effective_caps(SHM_CAPS, req) & !SHM_CAPS, 0, "{req:#x}");
        }
    }

    #[test]
    fn ep_type_and_mode() {
        let mut h = alloc_hints();
        h.ep.as_mut().unwrap().ep_type = FI_EP_RDM;
        assert_eq!(run_names(&h), ["shm", "tcp"]);
        for t in [FI_EP_MSG, FI_EP_DGRAM, FI_EP_SOCK_STREAM, 77] {
            h.ep.as_mut().unwrap().ep_type = t;
            assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{t}");
        }
        // No mode bits are required.
        let mut h = alloc_hints();
        h.mode = 0;
        assert_eq!(run(&h).unwrap()[0].mode, 0);
        h.mode = FI_CONTEXT | FI_CONTEXT2;
        assert_eq!(run(&h).unwrap()[0].mode, 0);
        h.mode = FI_CONTEXT | FI_BUFFERED_RECV;
        assert_eq!(run(&h).unwrap()[0].mode, OPTIONAL_MODE & FI_BUFFERED_RECV);
    }

    #[test]
    fn addr_format_selects_transport() {
        let mut h = alloc_hints();
        for (f, want) in [
            (FI_ADDR_STR, vec!["shm"]),
            (FI_SOCKADDR_IN, vec!["tcp"]),
            (FI_SOCKADDR_IN6, vec!["tcp"]),
            (FI_SOCKADDR, vec!["tcp"]),
            (FI_FORMAT_UNSPEC, vec!["shm", "tcp"]),
        ] {
            h.addr_format = f;
            assert_eq!(run_names(&h), want, "{f}");
        }
        let l = {
            h.addr_format = FI_SOCKADDR_IN6;
            run(&h).unwrap()
        };
        assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
        assert_eq!(addr(&l[0].src_addr), Some(sock("[::]:0")));
        for f in [FI_SOCKADDR_IB, FI_ADDR_PSMX, 6, 7, 8, 10, 99] {
            h.addr_format = f;
            assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{f}");
        }
    }

    #[test]
    fn names_must_match() {
        let mut h = alloc_hints();
        h.domain.as_mut().unwrap().name = Some("tcp".into());
        assert_eq!(run_names(&h), ["tcp"]);
        h.domain.as_mut().unwrap().name = Some("SHM".into());
        assert_eq!(run_names(&h), ["shm"]);
        h.domain.as_mut().unwrap().name = Some("eth0".into());
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
        let mut h = alloc_hints();
        h.fabric.as_mut().unwrap().name = Some("RustFab".into());
        assert_eq!(run_names(&h), ["shm", "tcp"]);
        h.fabric.as_mut().unwrap().name = Some("192.0.2.0/24".into());
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
        let mut h = alloc_hints();
        h.fabric.as_mut().unwrap().prov_version = PROVIDER_VERSION + 1;
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    }

    /// Each mutation pushes one value just beyond what rustfab offers.
    #[test]
    fn auth_keys_only_on_tcp_rdm_and_echoed() {
        for (on_ep, key) in [(true, vec![1u8, 2]), (false, vec![0u8])] {
            let mut h = alloc_hints();
            if on_ep {
                h.ep.as_mut().unwrap().auth_key = Some(key.clone());
            } else {
                h.domain.as_mut().unwrap().auth_key = Some(key.clone());
            }
            let list = run(&h).unwrap();
            assert!(!list.is_empty());
            for i in &list {
                let d = i.domain.as_ref().unwrap();
                assert_eq!(d.name.as_deref(), Some("tcp"));
                assert_eq!(i.ep.as_ref().unwrap().ep_type, FI_EP_RDM);
                assert_eq!(d.max_ep_auth_key, 1);
                let echoed = if on_ep {
                    &i.ep.as_ref().unwrap().auth_key
                } else {
                    &d.auth_key
                };
                assert_eq!(echoed.as_ref(), Some(&key));
            }
        }
    }

    #[test]
    fn every_limit_is_enforced() {
        type Mutate = fn(&mut Info);
        let cases: &[(&str, Mutate)] = &[
            ("tx size", |h| h.tx.as_mut().unwrap().size = QUEUE_SIZE + 1),
            ("tx iov", |h| h.tx.as_mut().unwrap().iov_limit = IOV_LIMIT + 1),
            ("inject", |h| h.tx.as_mut().unwrap().inject_size = INJECT_SIZE + 1),
            ("rma iov", |h| h.tx.as_mut().unwrap().rma_iov_limit = RMA_IOV_LIMIT + 1),
            ("tx order", |h| {
                h.tx.as_mut().unwrap().msg_order = FI_ORDER_SAS | FI_ORDER_RAW
            }),
            ("tx comp", |h| h.tx.as_mut().unwrap().comp_order = FI_ORDER_STRICT),
            ("tx op", |h| h.tx.as_mut().unwrap().op_flags = FI_COMMIT_COMPLETE),
            ("tx caps", |h| h.tx.as_mut().unwrap().caps = FI_COLLECTIVE),
            ("tx tclass", |h| h.tx.as_mut().unwrap().tclass = 0x100 | 64),
            ("rx size", |h| h.rx.as_mut().unwrap().size = QUEUE_SIZE + 1),
            ("rx iov", |h| h.rx.as_mut().unwrap().iov_limit = IOV_LIMIT + 1),
            ("rx buffered", |h| h.rx.as_mut().unwrap().total_buffered_recv = 1),
            ("rx order", |h| h.rx.as_mut().unwrap().msg_order = FI_ORDER_DATA),
            ("rx comp", |h| h.rx.as_mut().unwrap().comp_order = FI_ORDER_DATA),
            ("rx op", |h| h.rx.as_mut().unwrap().op_flags = FI_DELIVERY_COMPLETE),
            ("rx caps", |h| h.rx.as_mut().unwrap().caps = FI_COLLECTIVE),
            ("max msg", |h| h.ep.as_mut().unwrap().max_msg_size = (1 << 30) + 1),
            ("protocol", |h| h.ep.as_mut().unwrap().protocol = FI_PROTO_SOCK_TCP),
            ("proto ver", |h| h.ep.as_mut().unwrap().protocol_version = 2),
            ("tx ctx", |h| h.ep.as_mut().unwrap().tx_ctx_cnt = 2),
            ("rx ctx", |h| h.ep.as_mut().unwrap().rx_ctx_cnt = 2),
            ("shared tx", |h| h.ep.as_mut().unwrap().tx_ctx_cnt = FI_SHARED_CONTEXT),
            ("cq data", |h| h.domain.as_mut().unwrap().cq_data_size = 9),
            ("key size", |h| h.domain.as_mut().unwrap().mr_key_size = 9),
            ("cq cnt", |h| h.domain.as_mut().unwrap().cq_cnt = CQ_CNT + 1),
            ("ep cnt", |h| h.domain.as_mut().unwrap().ep_cnt = EP_CNT + 1),
            ("dom tx ctx", |h| {
                h.domain.as_mut().unwrap().tx_ctx_cnt = DOMAIN_TX_CTX_CNT + 1
            }),
            ("dom rx ctx", |h| {
                h.domain.as_mut().unwrap().rx_ctx_cnt = DOMAIN_RX_CTX_CNT + 1
            }),
            ("max ep tx", |h| h.domain.as_mut().unwrap().max_ep_tx_ctx = 2),
            ("max ep rx", |h| h.domain.as_mut().unwrap().max_ep_rx_ctx = 2),
            ("stx", |h| h.domain.as_mut().unwrap().max_ep_stx_ctx = 1),
            ("srx", |h| h.domain.as_mut().unwrap().max_ep_srx_ctx = 1),
            ("cntr", |h| h.domain.as_mut().unwrap().cntr_cnt = CNTR_CNT + 1),
            ("mr iov", |h| h.domain.as_mut().unwrap().mr_iov_limit = MR_IOV_LIMIT + 1),
            ("mr cnt", |h| h.domain.as_mut().unwrap().mr_cnt = MR_CNT + 1),
            ("err data", |h| {
                h.domain.as_mut().unwrap().max_err_data = MAX_ERR_DATA + 1
            }),
            ("dom caps", |h| h.domain.as_mut().unwrap().caps = FI_SHARED_AV),
            ("dom tclass", |h| h.domain.as_mut().unwrap().tclass = 0x206),
            ("threading", |h| h.domain.as_mut().unwrap().threading = 6),
            ("ctrl prog", |h| h.domain.as_mut().unwrap().control_progress = 3),
            ("data prog", |h| h.domain.as_mut().unwrap().data_progress = 3),
            ("rm", |h| h.domain.as_mut().unwrap().resource_mgmt = 3),
            ("av type", |h| h.domain.as_mut().unwrap().av_type = 3),
            ("mr mode", |h| {
                h.domain.as_mut().unwrap().mr_mode = FI_MR_BASIC | FI_MR_LOCAL
            }),
        ];
        for (what, mutate) in cases {
            let mut h = alloc_hints();
            mutate(&mut h);
            assert_eq!(run(&h).unwrap_err(), Error::NODATA, "{what}");
        }
        // Exactly at the limit is fine.
        let mut h = alloc_hints();
        let tx = h.tx.as_mut().unwrap();
        (tx.size, tx.iov_limit, tx.inject_size) = (QUEUE_SIZE, IOV_LIMIT, INJECT_SIZE);
        h.ep.as_mut().unwrap().max_msg_size = 1 << 30;
        h.domain.as_mut().unwrap().cq_data_size = 8;
        assert_eq!(run_names(&h), ["shm", "tcp"]);
    }

    #[test]
    fn remote_comm_domain_cap_selects_tcp() {
        let mut h = alloc_hints();
        h.domain.as_mut().unwrap().caps = FI_REMOTE_COMM;
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_ne!(l[0].domain.as_ref().unwrap().caps & FI_REMOTE_COMM, 0);
        h.domain.as_mut().unwrap().caps = FI_LOCAL_COMM;
        assert_eq!(run_names(&h), ["shm", "tcp"]);
    }

    #[test]
    fn requested_values_are_echoed() {
        let mut h = alloc_hints();
        h.handle = 0x1234;
        let d = h.domain.as_mut().unwrap();
        d.threading = FI_THREAD_DOMAIN;
        d.control_progress = FI_PROGRESS_AUTO;
        d.data_progress = FI_PROGRESS_AUTO;
        d.resource_mgmt = FI_RM_DISABLED;
        d.av_type = FI_AV_MAP;
        d.tclass = FI_TC_BEST_EFFORT;
        let tx = h.tx.as_mut().unwrap();
        tx.op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
        tx.size = 100;
        tx.iov_limit = 1;
        tx.inject_size = 64;
        tx.msg_order = FI_ORDER_SAS;
        let rx = h.rx.as_mut().unwrap();
        rx.op_flags = FI_COMPLETION | FI_MULTI_RECV;
        rx.size = 200;
        rx.iov_limit = 2;
        let e = h.ep.as_mut().unwrap();
        e.tx_ctx_cnt = 1;
        e.mem_tag_format = 0x0fff_ffff_ffff_ffff;
        for i in run(&h).unwrap() {
            assert_eq!(i.handle, 0x1234);
            let d = i.domain.unwrap();
            assert_eq!(d.threading, FI_THREAD_DOMAIN);
            assert_eq!(
                (d.control_progress, d.data_progress),
                (FI_PROGRESS_AUTO, FI_PROGRESS_AUTO)
            );
            assert_eq!(d.resource_mgmt, FI_RM_DISABLED);
            assert_eq!(d.av_type, FI_AV_MAP);
            assert_eq!(d.tclass, FI_TC_BEST_EFFORT);
            let tx = i.tx.unwrap();
            assert_eq!(tx.op_flags, FI_COMPLETION | FI_DELIVERY_COMPLETE);
            assert_eq!((tx.size, tx.iov_limit, tx.inject_size), (100, 1, 64));
            assert_eq!(tx.msg_order, FI_ORDER_SAS);
            let rx = i.rx.unwrap();
            assert_eq!(rx.op_flags, FI_COMPLETION | FI_MULTI_RECV);
            assert_eq!((rx.size, rx.iov_limit), (200, 2));
            // The tag format stays ours: bit 63 is always usable.
            assert_eq!(i.ep.unwrap().mem_tag_format, MEM_TAG_FORMAT);
        }
        // Every threading level is granted as asked.
        for lvl in [
            FI_THREAD_SAFE,
            FI_THREAD_FID,
            FI_THREAD_DOMAIN,
            FI_THREAD_COMPLETION,
            FI_THREAD_ENDPOINT,
        ] {
            let mut h = alloc_hints();
            h.domain.as_mut().unwrap().threading = lvl;
            assert_eq!(run(&h).unwrap()[1].domain.as_ref().unwrap().threading, lvl);
        }
        for av in [FI_AV_MAP, FI_AV_TABLE] {
            let mut h = alloc_hints();
            h.domain.as_mut().unwrap().av_type = av;
            assert_eq!(run(&h).unwrap()[0].domain.as_ref().unwrap().av_type, av);
        }
    }

    #[test]
    fn open_mpi_hints_get_tcp() {
        // ompi mtl/ofi (docs/mpi.md §2).
        let mut h = alloc_hints();
        h.caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
        h.mode = FI_CONTEXT | FI_CONTEXT2;
        h.ep.as_mut().unwrap().ep_type = FI_EP_RDM;
        h.tx.as_mut().unwrap().op_flags = FI_COMPLETION;
        h.rx.as_mut().unwrap().op_flags = FI_COMPLETION;
        h.tx.as_mut().unwrap().msg_order = FI_ORDER_SAS;
        h.rx.as_mut().unwrap().msg_order = FI_ORDER_SAS;
        let d = h.domain.as_mut().unwrap();
        d.threading = FI_THREAD_DOMAIN;
        d.av_type = FI_AV_MAP;
        d.resource_mgmt = FI_RM_ENABLED;
        d.cq_data_size = 4;
        h.fabric.as_mut().unwrap().prov_name = Some("rustfab".into());
        let l = getinfo(&Query {
            version: fi_version(1, 5),
            ..query(Some(&h))
        })
        .unwrap();
        assert_eq!(names(&l), ["tcp"]);
        let i = &l[0];
        assert_eq!(i.mode, 0);
        assert_eq!(i.tx.as_ref().unwrap().op_flags, FI_COMPLETION);
        assert_eq!(i.rx.as_ref().unwrap().op_flags, FI_COMPLETION);
        assert_eq!(i.domain.as_ref().unwrap().mr_mode, 0);
        assert_eq!(i.domain.as_ref().unwrap().threading, FI_THREAD_DOMAIN);
        assert!(i.ep.as_ref().unwrap().mem_tag_format >> 63 == 1);
    }

    #[test]
    fn mr_mode_per_version() {
        let v14 = fi_version(1, 4);
        let v10 = fi_version(1, 0);
        let v15 = fi_version(1, 5);
        // No hints / unspecified.
        assert_eq!(alter_mr_mode(V, None), 0);
        assert_eq!(alter_mr_mode(v15, Some(0)), 0);
        assert_eq!(alter_mr_mode(v14, None), FI_MR_SCALABLE);
        assert_eq!(alter_mr_mode(v10, Some(FI_MR_UNSPEC)), FI_MR_SCALABLE);
        // BASIC / SCALABLE asked for are kept, in every version.
        for v in [v10, v14, v15, V] {
            assert!(check_mr_mode(v, FI_MR_BASIC).is_ok());
            assert_eq!(alter_mr_mode(v, Some(FI_MR_BASIC)), FI_MR_BASIC);
            assert!(check_mr_mode(v, FI_MR_SCALABLE).is_ok());
            assert_eq!(alter_mr_mode(v, Some(FI_MR_SCALABLE)), FI_MR_SCALABLE);
            assert!(check_mr_mode(v, FI_MR_BASIC | FI_MR_SCALABLE).is_err());
            assert!(check_mr_mode(v, FI_MR_BASIC | FI_MR_VIRT_ADDR).is_err());
        }
        // Modern bits: none required, any accepted, none reported.
        for m in [
            FI_MR_LOCAL,
            FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED,
            !(FI_MR_BASIC | FI_MR_SCALABLE),
        ] {
            assert!(check_mr_mode(V, m).is_ok(), "{m:#x}");
            assert_eq!(alter_mr_mode(V, Some(m)), 0);
            // ... but they are not values of the old enum.
            assert!(check_mr_mode(v14, m).is_err());
        }

        // Through getinfo.
        let mut h = alloc_hints();
        let mr = |l: Vec<Info>| l[0].domain.as_ref().unwrap().mr_mode;
        for v in [v10, v14] {
            let q = Query {
                version: v,
                ..query(None)
            };
            assert_eq!(mr(getinfo(&q).unwrap()), FI_MR_SCALABLE);
            h.domain.as_mut().unwrap().mr_mode = FI_MR_BASIC;
            let q = Query {
                version: v,
                ..query(Some(&h))
            };
            assert_eq!(mr(getinfo(&q).unwrap()), FI_MR_BASIC);
            h.domain.as_mut().unwrap().mr_mode = FI_MR_LOCAL;
            let q = Query {
                version: v,
                ..query(Some(&h))
            };
            assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
        }
        h.domain.as_mut().unwrap().mr_mode = FI_MR_SCALABLE;
        assert_eq!(mr(run(&h).unwrap()), FI_MR_SCALABLE);
        h.domain.as_mut().unwrap().mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR;
        assert_eq!(mr(run(&h).unwrap()), 0);
    }

    fn with_node<'a>(
        node: Option<&'a str>,
        service: Option<&'a str>,
        flags: u64,
        hints: Option<&'a Info>,
    ) -> Query<'a> {
        Query {
            node,
            service,
            flags,
            ..query(hints)
        }
    }

    #[test]
    fn layering_queries_need_rustfab_named() {
        // ofi_rxm's query for a core provider to layer over: refused unless
        // the application asked for "rustfab;ofi_rxm" (the core passes
        // "rustfab;^ofi_rxm" down), whatever the core's version.
        let mut h = Info::default();
        let q = |h: &Info| getinfo(&with_node(None, None, OFI_CORE_PROV_ONLY, Some(h))).map(|l| l.len());
        assert_eq!(q(&h), Err(Error::NODATA));
        for name in ["^ofi_rxm", "tcp;^ofi_rxm", "verbs;^ofi_rxm", "rustfabx;^ofi_rxm"] {
            h.fabric = Some(FabricAttr {
                prov_name: Some(name.into()),
                ..Default::default()
            });
            assert_eq!(q(&h), Err(Error::NODATA), "{name}");
        }
        for name in ["rustfab;^ofi_rxm", "RustFab;^ofi_rxm", "rustfab"] {
            h.fabric = Some(FabricAttr {
                prov_name: Some(name.into()),
                ..Default::default()
            });
            assert!(q(&h).is_ok_and(|n| n > 0), "{name}");
        }
        // Applications' own queries are not affected.
        assert!(getinfo(&query(None)).is_ok());
    }

    #[test]
    fn node_service_destination() {
        let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        let tok = shm_token_for(Some("127.0.0.1"), Some("9228"));
        assert_eq!(addr(&l[0].dest_addr), Some(Addr::Shm(tok)));
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
        assert_eq!(l[0].dest_addr.as_ref().unwrap().len(), SHM_ADDR_LEN);
        assert_eq!(addr(&l[1].dest_addr), Some(sock("127.0.0.1:9228")));
        // Source: the local address routing to it, any port.
        assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:0")));
        assert_eq!(l[1].addr_format, FI_SOCKADDR_IN);

        // Service alone names a local destination.
        let l = getinfo(&with_node(None, Some("9228"), 0, None)).unwrap();
        assert_eq!(
            addr(&l[0].dest_addr),
            Some(Addr::Shm(shm_token_for(None, Some("9228"))))
        );
        let d = addr(&l[1].dest_addr).unwrap();
        assert!(matches!(d, Addr::Inet(a) if a.ip().is_loopback() && a.port() == 9228));

        // localhost resolves (to IPv4 first).
        let l = getinfo(&with_node(Some("localhost"), Some("9228"), 0, None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        assert_eq!(addr(&l[1].dest_addr), Some(sock("127.0.0.1:9228")));
    }

    #[test]
    fn node_service_ipv6() {
        let mut h = alloc_hints();
        h.addr_format = FI_SOCKADDR_IN6;
        let l = getinfo(&with_node(Some("::1"), Some("9228"), 0, Some(&h))).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
        assert_eq!(addr(&l[0].dest_addr), Some(sock("[::1]:9228")));
        assert_eq!(addr(&l[0].src_addr), Some(sock("[::1]:0")));
        // Without a stated format an IPv6-only node still works.
        let l = getinfo(&with_node(Some("::1"), Some("9228"), 0, None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        assert_eq!(l[1].addr_format, FI_SOCKADDR_IN6);
        // An IPv4 format cannot hold it.
        h.addr_format = FI_SOCKADDR_IN;
        let q = with_node(Some("::1"), Some("9228"), 0, Some(&h));
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
        // FI_SOURCE with IPv6 and no node: the IPv6 wildcard.
        h.addr_format = FI_SOCKADDR_IN6;
        let l = getinfo(&with_node(None, Some("9228"), FI_SOURCE, Some(&h))).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(sock("[::]:9228")));
    }

    #[test]
    fn fi_source_resolution() {
        let tok = shm_token_for(Some("127.0.0.1"), Some("9228"));
        let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(tok)));
        assert_eq!(l[0].dest_addr, None);
        assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:9228")));
        assert_eq!(l[1].dest_addr, None);

        // Node without service: anonymous shm endpoint, any tcp port.
        let l = getinfo(&with_node(Some("127.0.0.1"), None, FI_SOURCE, None)).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));
        assert_eq!(addr(&l[1].src_addr), Some(sock("127.0.0.1:0")));

        // Service without node: named shm endpoint, tcp wildcard:service.
        let l = getinfo(&with_node(None, Some("9228"), FI_SOURCE, None)).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(shm_token_for(None, Some("9228")))));
        assert_eq!(addr(&l[1].src_addr), Some(sock("0.0.0.0:9228")));

        // FI_SOURCE needs a node or a service.
        assert_eq!(
            getinfo(&with_node(None, None, FI_SOURCE, None)).unwrap_err(),
            Error::INVAL
        );

        // A source node is not subject to the locality rule (it is ours).
        let l = getinfo(&with_node(Some("localhost"), Some("1"), FI_SOURCE, None)).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
    }

    #[test]
    fn remote_node_selects_tcp_only() {
        // TEST-NET-3: never an address of this host.
        let l = getinfo(&with_node(Some("203.0.113.5"), Some("9228"), 0, None)).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_eq!(addr(&l[0].dest_addr), Some(sock("203.0.113.5:9228")));
        assert!(l[0].src_addr.is_some());
        let q = Query {
            transports: TransportChoice::Only(TransportKind::Shm),
            ..with_node(Some("203.0.113.5"), Some("9228"), 0, None)
        };
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
        // Unresolvable: nothing.
        let q = with_node(Some("no-such-host.invalid"), Some("9228"), 0, None);
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
    }

    #[test]
    fn local_detection() {
        assert!(node_is_local("127.0.0.1", true));
        assert!(node_is_local("127.3.4.5", true));
        assert!(node_is_local("::1", true));
        assert!(node_is_local("0.0.0.0", true));
        assert!(node_is_local("localhost", false));
        assert!(!node_is_local("localhost", true), "FI_NUMERICHOST refuses names");
        assert!(!node_is_local("203.0.113.5", true));
        assert!(!node_is_local("no-such-host.invalid", false));
        // An address of one of this host's interfaces is local.
        let mine = route_source(&"203.0.113.5:1".parse().unwrap());
        if !mine.ip().is_unspecified() {
            assert!(node_is_local(&mine.ip().to_string(), true));
        }
    }

    #[test]
    fn numerichost_is_respected() {
        let q = with_node(Some("localhost"), Some("9228"), FI_NUMERICHOST, None);
        assert_eq!(getinfo(&q).unwrap_err(), Error::NODATA);
        let q = with_node(Some("127.0.0.1"), Some("9228"), FI_NUMERICHOST, None);
        assert_eq!(names(&getinfo(&q).unwrap()), ["shm", "tcp"]);
    }

    #[test]
    fn hint_addresses_are_copied_and_select() {
        // An shm destination in the hints: shm only, copied through.
        let shm = Addr::Shm(0x1234_5678_9abc_def0);
        let mut h = alloc_hints();
        h.addr_format = FI_ADDR_STR;
        h.dest_addr = Some(shm.to_bytes());
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["shm"]);
        assert_eq!(addr(&l[0].dest_addr), Some(shm));
        assert_eq!(addr(&l[0].src_addr), Some(Addr::Shm(SHM_ANY_TOKEN)));

        // A tcp source in the hints (format unstated): tcp only, kept.
        let mut h = alloc_hints();
        h.src_addr = Some(sock("127.0.0.1:5555").to_bytes());
        let l = run(&h).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:5555")));
        // ... and with node/service the destination is resolved next to it.
        let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:5555")));
        assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:9228")));
        // FI_SOURCE: the resolved node replaces the hint's source.
        let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, Some(&h))).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:9228")));

        // An IPv6 hint address makes node resolution IPv6.
        let mut h = alloc_hints();
        h.dest_addr = Some(sock("[::1]:7").to_bytes());
        let l = getinfo(&with_node(Some("localhost"), Some("9228"), FI_SOURCE, Some(&h)));
        // localhost is IPv4-only in some /etc/hosts; either IPv6 or nothing.
        if let Ok(l) = l {
            assert_eq!(l[0].addr_format, FI_SOCKADDR_IN6);
            assert_eq!(addr(&l[0].dest_addr), Some(sock("[::1]:7")));
        }

        // Garbage addresses and mismatched formats: nothing.
        let mut h = alloc_hints();
        h.addr_format = FI_ADDR_STR;
        h.src_addr = Some(sock("127.0.0.1:1").to_bytes());
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
        let mut h = alloc_hints();
        h.dest_addr = Some(vec![0xff; 8]);
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
        // A source and destination of different families.
        let mut h = alloc_hints();
        h.src_addr = Some(sock("127.0.0.1:1").to_bytes());
        h.dest_addr = Some(sock("[::1]:1").to_bytes());
        assert_eq!(run(&h).unwrap_err(), Error::NODATA);
    }

    #[test]
    fn node_as_address_string() {
        let shm = Addr::Shm(0x00ab_cdef_0123_4567);
        let s = shm.to_string_form();
        let l = getinfo(&with_node(Some(&s), None, 0, None)).unwrap();
        assert_eq!(names(&l), ["shm"]);
        assert_eq!(addr(&l[0].dest_addr), Some(shm));
        let l = getinfo(&with_node(Some(&s), Some("99"), FI_SOURCE, None)).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(shm));
        let l = getinfo(&with_node(Some("fi_sockaddr_in://127.0.0.1:4242"), None, 0, None)).unwrap();
        assert_eq!(names(&l), ["tcp"]);
        assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:4242")));
    }

    #[test]
    fn c_list_round_trip_and_free() {
        let l = getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, None)).unwrap();
        let head = to_c_list(&l).unwrap();
        let mut p = head;
        let mut back = Vec::new();
        while !p.is_null() {
            // SAFETY: a list just built by to_c_list.
            back.push(unsafe { Info::from_c(p) }.unwrap());
            // SAFETY: as above.
            p = unsafe { (*p).next };
        }
        // Hints are read as 1.17 structs (an application's may be that
        // short): the fields of newer APIs come back as zero.
        let mut l = l;
        for i in &mut l {
            let d = i.domain.as_mut().unwrap();
            (
                d.max_ep_auth_key,
                d.max_group_id,
                d.max_cntr_value,
                d.max_err_cntr_value,
            ) = (0, 0, 0, 0);
        }
        assert_eq!(back, l);
        // SAFETY: built by to_c_list, freed once.
        unsafe { free_c_info(head) };
    }

    #[test]
    fn getinfo_c_arguments() {
        let mut out: *mut fi_info = core::ptr::dangling_mut();
        // SAFETY: valid NUL-terminated strings and out pointer.
        let r = unsafe {
            getinfo_c(
                V,
                c"127.0.0.1".as_ptr(),
                c"9228".as_ptr(),
                0,
                core::ptr::null(),
                &mut out,
            )
        };
        assert_eq!(r, Ok(()));
        assert!(!out.is_null());
        // SAFETY: the list getinfo_c returned.
        unsafe { free_c_info(out) };
        // SAFETY: NULL out pointer is refused before any use.
        let r = unsafe {
            getinfo_c(
                V,
                core::ptr::null(),
                core::ptr::null(),
                0,
                core::ptr::null(),
                core::ptr::null_mut(),
            )
        };
        assert_eq!(r, Err(Error::INVAL));
        // No match: the out pointer is left NULL.
        let mut out: *mut fi_info = core::ptr::dangling_mut();
        let h = Info {
            caps: FI_TRIGGER,
            ..alloc_hints()
        }
        .to_c()
        .unwrap();
        // SAFETY: `h` is a valid info built by to_c.
        let r = unsafe { getinfo_c(V, core::ptr::null(), core::ptr::null(), 0, h, &mut out) };
        assert_eq!(r, Err(Error::NODATA));
        assert!(out.is_null());
        // SAFETY: built by to_c, freed once.
        unsafe { free_c_info(h) };
    }

    #[test]
    fn auto_entry_first_with_both_comm_caps() {
        let q = Query {
            transports: TransportChoice::All,
            ..query(None)
        };
        let l = getinfo(&q).unwrap();
        assert_eq!(names(&l), ["auto", "shm", "tcp"]);
        let a = &l[0];
        assert_eq!(a.addr_format, FI_ADDR_STR);
        assert_eq!(
            a.caps & (FI_LOCAL_COMM | FI_REMOTE_COMM),
            FI_LOCAL_COMM | FI_REMOTE_COMM
        );
        match addr(&a.src_addr) {
            Some(Addr::Auto { host, shm, .. }) => {
                assert_eq!(host, crate::transport::addr::host_id());
                assert_eq!(shm, SHM_ANY_TOKEN);
            }
            other => panic!("auto entry without an auto source address: {other:?}"),
        }
    }

    #[test]
    fn auto_node_service_resolution() {
        let q = Query {
            transports: TransportChoice::Only(TransportKind::Auto),
            node: Some("127.0.0.1"),
            service: Some("9228"),
            ..query(None)
        };
        let l = getinfo(&q).unwrap();
        match addr(&l[0].dest_addr) {
            Some(Addr::Auto { host, shm, inet }) => {
                assert_eq!(
                    host,
                    crate::transport::addr::host_id(),
                    "a local node is reached over shm"
                );
                assert_eq!(shm, shm_token_for(None, Some("9228")));
                assert_eq!(inet, "127.0.0.1:9228".parse().unwrap());
            }
            other => panic!("{other:?}"),
        }
        let q = Query { flags: FI_SOURCE, ..q };
        let l = getinfo(&q).unwrap();
        match addr(&l[0].src_addr) {
            Some(Addr::Auto { shm, inet, .. }) => {
                assert_eq!(shm, shm_token_for(None, Some("9228")));
                assert_eq!(inet.port(), 9228);
            }
            other => panic!("{other:?}"),
        }
        // A remote node: host unknown (0), so peers use TCP.
        let q = Query {
            node: Some("192.0.2.7"),
            flags: 0,
            ..q
        };
        let l = getinfo(&q).unwrap();
        assert!(matches!(addr(&l[0].dest_addr), Some(Addr::Auto { host: 0, .. })));
        // Socket address formats exclude the auto entry.
        let mut h = alloc_hints();
        h.addr_format = FI_SOCKADDR_IN;
        let q = Query {
            transports: TransportChoice::All,
            hints: Some(&h),
            node: None,
            service: None,
            ..query(None)
        };
        assert_eq!(names(&getinfo(&q).unwrap()), ["tcp"]);
    }

    fn msg_hints(caps: u64) -> Info {
        let mut h = alloc_hints();
        h.caps = caps;
        h.ep.as_mut().unwrap().ep_type = FI_EP_MSG;
        h
    }

    #[test]
    fn what_older_apis_had_is_offered_only_at_them() {
        let at = |version: u32, h: &Info| {
            super::getinfo(&Query {
                version,
                ..query(Some(h))
            })
        };
        // FI_VARIABLE_MSG (capability bit 48) up to 1.20.
        let h = msg_hints(FI_MSG | FI_VARIABLE_MSG);
        assert_ne!(at(fi_version(1, 20), &h).unwrap()[0].caps & FI_VARIABLE_MSG, 0);
        for v in [fi_version(1, 21), fi_version(1, 22), fi_version(2, 0), fi_version(2, 6)] {
            // 1.21/1.22: undefined; 2.x: FI_EXACT_DIRECTED_RECV, not offered.
            assert_eq!(at(v, &h).unwrap_err(), Error::NODATA, "{v:#x}");
            let l = at(v, &msg_hints(FI_MSG)).unwrap();
            assert!(l
                .iter()
                .all(|i| i.caps & (1 << 48) == 0 && i.rx.as_ref().unwrap().caps & (1 << 48) == 0));
        }
        // FI_BUFFERED_RECV (mode bit 51) up to 1.22.
        let mut h = alloc_hints();
        h.mode = FI_CONTEXT | FI_BUFFERED_RECV;
        assert_eq!(at(fi_version(1, 22), &h).unwrap()[0].mode, FI_BUFFERED_RECV);
        for v in [fi_version(2, 0), fi_version(2, 5)] {
            let l = at(v, &h).unwrap();
            assert!(l
                .iter()
                .all(|i| i.mode & FI_BUFFERED_RECV == 0 && i.rx.as_ref().unwrap().mode == 0));
        }
    }

    #[test]
    fn msg_entry_comes_after_every_rdm_entry() {
        let l = super::getinfo(&query(None)).unwrap();
        let types: Vec<(String, u32)> = l
            .iter()
            .map(|i| {
                (
                    names(std::slice::from_ref(i))[0].clone(),
                    i.ep.as_ref().unwrap().ep_type,
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("shm".into(), FI_EP_RDM),
                ("tcp".into(), FI_EP_RDM),
                ("shm".into(), FI_EP_MSG),
                ("tcp".into(), FI_EP_MSG)
            ]
        );
        // The shm and tcp MSG entries differ in their domain, protocol and
        // locality only: shm reaches this host alone.
        let (ms, m) = (&l[2], &l[3]);
        assert_eq!(ms.caps, m.caps & !FI_REMOTE_COMM);
        assert_ne!(m.caps & FI_REMOTE_COMM, 0);
        assert_eq!(ms.domain.as_ref().unwrap().caps & FI_REMOTE_COMM, 0);
        assert_eq!(ms.tx.as_ref().unwrap().caps, m.tx.as_ref().unwrap().caps);
        assert_eq!(ms.rx.as_ref().unwrap().caps, m.rx.as_ref().unwrap().caps);
        assert_eq!(ms.addr_format, FI_SOCKADDR_IN);
        assert_eq!(ms.ep.as_ref().unwrap().protocol, SHM_PROTOCOL);
        // FI_VARIABLE_MSG is offered but only given when asked for.
        assert_eq!(m.caps, crate::fi::connected::MSG_CAPS & !FI_VARIABLE_MSG);
        let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_VARIABLE_MSG)))).unwrap();
        assert_ne!(l[0].caps & FI_VARIABLE_MSG, 0);
        assert_eq!(m.caps & (FI_SOURCE | FI_DIRECTED_RECV), 0);
        assert_eq!(m.caps & RMA_CAPS, RMA_CAPS, "RMA on connected endpoints too");
        assert_eq!(m.caps & ATOMIC_CAPS, ATOMIC_CAPS, "atomics too");
        assert_eq!(
            m.tx.as_ref().unwrap().caps,
            FI_MSG | FI_TAGGED | FI_SEND | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE
        );
        assert_eq!(
            m.rx.as_ref().unwrap().caps,
            FI_MSG
                | FI_TAGGED
                | FI_RECV
                | FI_MULTI_RECV
                | FI_RMA
                | FI_ATOMIC
                | FI_REMOTE_READ
                | FI_REMOTE_WRITE
                | FI_RMA_EVENT
        );
        assert_eq!(m.addr_format, FI_SOCKADDR_IN);
        assert_eq!(m.ep.as_ref().unwrap().protocol, TCP_PROTOCOL);
        // shm alone and auto alone offer their connected endpoints, with
        // sockaddr addresses (set up over TCP, data over shm).
        let h = msg_hints(0);
        for t in [TransportKind::Shm, TransportKind::Auto] {
            let q = Query {
                transports: TransportChoice::Only(t),
                ..query(Some(&h))
            };
            let l = super::getinfo(&q).unwrap();
            assert_eq!(names(&l), [t.domain_name()]);
            assert_eq!(l[0].addr_format, FI_SOCKADDR_IN);
            assert_eq!(l[0].caps & (RMA_CAPS | ATOMIC_CAPS), RMA_CAPS | ATOMIC_CAPS);
            let with_sin = Query {
                transports: TransportChoice::Only(t),
                ..with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))
            };
            assert_eq!(
                addr(&super::getinfo(&with_sin).unwrap()[0].dest_addr),
                Some(sock("127.0.0.1:9228"))
            );
        }
        // A remote node never selects shm; auto reaches it (over TCP).
        let remote = |t| Query {
            transports: TransportChoice::Only(t),
            ..with_node(Some("192.0.2.1"), Some("9228"), FI_NUMERICHOST, Some(&h))
        };
        assert_eq!(super::getinfo(&remote(TransportKind::Shm)).unwrap_err(), Error::NODATA);
        assert_eq!(names(&super::getinfo(&remote(TransportKind::Auto)).unwrap()), ["auto"]);
    }

    /// A refusal is logged with the line that decided it, also when a
    /// shared check (`subset`, `at_most`) decided it for its caller.
    #[test]
    fn a_skip_names_the_line_that_decided_it() {
        let here = line!() + 1;
        let e = subset(1, 0, "not offered").unwrap_err();
        assert_eq!((e.at.file(), e.at.line(), e.why), (file!(), here, "not offered"));
        let here = line!() + 1;
        let e = at_most(2, 1, "too many").unwrap_err();
        assert_eq!((e.at.file(), e.at.line()), (file!(), here));
    }

    #[test]
    fn msg_entry_hints_and_addresses() {
        let h = msg_hints(FI_MSG);
        let l = super::getinfo(&query(Some(&h))).unwrap();
        assert_eq!(names(&l), ["shm", "tcp"]);
        assert_eq!(l[0].caps, FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM);
        assert_eq!(l[1].caps, FI_MSG | FI_SEND | FI_RECV | FI_LOCAL_COMM | FI_REMOTE_COMM);
        // Asking for FI_REMOTE_COMM leaves shm out.
        let hr = msg_hints(FI_MSG | FI_REMOTE_COMM);
        assert_eq!(names(&super::getinfo(&query(Some(&hr))).unwrap()), ["tcp"]);
        // fi_rma_bw -e msg's request.
        let l = super::getinfo(&query(Some(&msg_hints(FI_MSG | FI_RMA)))).unwrap();
        assert_eq!(l[0].tx.as_ref().unwrap().rma_iov_limit, RMA_IOV_LIMIT);
        // Capabilities the connected data path does not have.
        for c in [FI_SOURCE, FI_DIRECTED_RECV] {
            assert_eq!(
                super::getinfo(&query(Some(&msg_hints(FI_MSG | c)))).unwrap_err(),
                Error::NODATA
            );
        }
        // Client: dest_addr is the server; server (FI_SOURCE): src_addr.
        let l = super::getinfo(&with_node(Some("127.0.0.1"), Some("9228"), 0, Some(&h))).unwrap();
        assert_eq!(addr(&l[0].dest_addr), Some(sock("127.0.0.1:9228")));
        assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:0")));
        let l = super::getinfo(&with_node(Some("127.0.0.1"), Some("9228"), FI_SOURCE, Some(&h))).unwrap();
        assert_eq!(addr(&l[0].src_addr), Some(sock("127.0.0.1:9228")));
        assert!(l[0].dest_addr.is_none());
        // FI_INJECT as a default send flag (fabtests fi_msg_inject -A inject).
        let mut hi = msg_hints(FI_MSG);
        hi.tx.as_mut().unwrap().op_flags = FI_INJECT;
        assert_eq!(
            super::getinfo(&query(Some(&hi))).unwrap()[0]
                .tx
                .as_ref()
                .unwrap()
                .op_flags,
            FI_INJECT
        );
        // A name that does not resolve (fabtests' negative test): no entry.
        let q = with_node(Some("g00n13s"), Some("9228"), 0, Some(&h));
        assert_eq!(super::getinfo(&q).unwrap_err(), Error::NODATA);
    }
}
