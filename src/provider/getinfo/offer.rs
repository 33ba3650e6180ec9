//! What rustfab offers: the entries (templates) fi_getinfo starts from,
//! their attributes and limits.

use crate::abi::*;
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::core::dgram;
use crate::core::domain::TransportKind;
use crate::core::ep::INJECT_SIZE;
use crate::core::fabric::FABRIC_NAME;
use crate::provider::PROVIDER_VERSION;

// ---- What rustfab offers -------------------------------------------------

/// `ep_attr->protocol` values are provider-specific (`fabric.h`).
pub(crate) const FI_PROV_SPECIFIC: u32 = 1 << 31;
pub(crate) const SHM_PROTOCOL: u32 = FI_PROV_SPECIFIC | 1;
pub(crate) const TCP_PROTOCOL: u32 = FI_PROV_SPECIFIC | 2;
pub(crate) const AUTO_PROTOCOL: u32 = FI_PROV_SPECIFIC | 3;
/// Datagram endpoints on the tcp domain: rustfab's records over UDP.
pub(crate) const UDP_PROTOCOL: u32 = FI_PROV_SPECIFIC | 4;
pub(crate) const PROTOCOL_VERSION: u32 = 1;
pub(crate) const SHM_MAX_MSG_SIZE: usize = 1 << 30;
pub(crate) const TCP_MAX_MSG_SIZE: usize = 1 << 30;
/// tx and rx queue depth (`tx_attr->size`, `rx_attr->size`).
pub(crate) const QUEUE_SIZE: usize = 1024;
pub(crate) const IOV_LIMIT: usize = 8;
/// Target segments of one RMA operation (`tx_attr->rma_iov_limit`).
pub(crate) const RMA_IOV_LIMIT: usize = crate::core::engine::RMA_IOV_MAX;
/// Open MPI needs bit 63 (docs/mpi.md §2); matching uses all 64 bits.
pub(crate) const MEM_TAG_FORMAT: u64 = 0xaaaa_aaaa_aaaa_aaaa;
pub(crate) const MSG_ORDER: u64 = FI_ORDER_SAS;
pub(crate) const COMP_ORDER: u64 = FI_ORDER_NONE;
pub(crate) const MR_KEY_SIZE: usize = 8;
pub(crate) const CQ_DATA_SIZE: usize = 8;
pub(crate) const CQ_CNT: usize = 256;
pub(crate) const EP_CNT: usize = 256;
pub(crate) const DOMAIN_TX_CTX_CNT: usize = 256;
pub(crate) const DOMAIN_RX_CTX_CNT: usize = 256;
pub(crate) const CNTR_CNT: usize = 256;
pub(crate) const MR_IOV_LIMIT: usize = 8;
pub(crate) const MR_CNT: usize = 65536;
/// err_data carries a raw source address for `FI_SOURCE_ERR`.
pub(crate) const MAX_ERR_DATA: usize = 64;

/// RMA (docs/rma.md): reads and writes, both ends, with remote events.
pub(crate) const RMA_CAPS: u64 = crate::core::rma::RMA_CAPS;
/// Atomics (docs/rma.md, Atomics): both ends.
pub(crate) const ATOMIC_CAPS: u64 = crate::core::rma::ATOMIC_CAPS;
/// The RMA and atomic direction caps (`fi_getinfo(3)`: none named means all).
pub(super) const RMA_DIRECTION_CAPS: u64 = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
/// The primary caps the directions apply to.
pub(super) const REMOTE_MEMORY: u64 = FI_RMA | FI_ATOMIC;
/// Tx-side and rx-side RMA and atomic caps.
pub(super) const RMA_TX_CAPS: u64 = REMOTE_MEMORY | FI_READ | FI_WRITE;
pub(super) const RMA_RX_CAPS: u64 = REMOTE_MEMORY | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;

/// Capabilities the shm data path delivers. Host-local only.
pub(crate) const SHM_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_SEND
    | FI_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_LOCAL_COMM
    | FI_TRIGGER
    | FI_SHARED_AV
    | FI_NAMED_RX_CTX
    | RMA_CAPS
    | ATOMIC_CAPS;
/// Capabilities the tcp data path delivers.
pub(crate) const TCP_CAPS: u64 = FI_MSG
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
    | FI_TRIGGER
    | FI_SHARED_AV
    | FI_NAMED_RX_CTX
    | RMA_CAPS
    | ATOMIC_CAPS;

/// What the RDM entries add for applications of API 2.0 and later
/// (docs/libfabric2.md, "Receive matching and addressing of 2.x"): the
/// receive-matching capabilities of `core/engine/directed.rs` and user ids
/// for AV entries. Bits 45, 46 and 48 mean other things before 2.0.
pub(crate) const CAPS_2_0: u64 = crate::abi::v2::FI_TAGGED_DIRECTED_RECV
    | crate::abi::v2::FI_EXACT_DIRECTED_RECV
    | crate::abi::v2::FI_TAGGED_MULTI_RECV
    | FI_AV_USER_ID;
/// The rx-side ones.
const RX_CAPS_2_0: u64 = crate::abi::v2::FI_TAGGED_DIRECTED_RECV
    | crate::abi::v2::FI_EXACT_DIRECTED_RECV
    | crate::abi::v2::FI_TAGGED_MULTI_RECV;

/// Caps that may appear in `tx_attr->caps` (masked with the entry's caps).
pub(crate) const TX_CAPS: u64 = FI_MSG | FI_TAGGED | FI_SEND | FI_TRIGGER | FI_NAMED_RX_CTX | RMA_TX_CAPS;
/// Caps that may appear in `rx_attr->caps` (masked with the entry's caps).
pub(crate) const RX_CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RECV
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | RX_CAPS_2_0
    | RMA_RX_CAPS;
/// Domain-level capabilities (`fi_domain(3)`; `FI_AV_USER_ID` from 2.0).
pub(crate) const DOMAIN_LEVEL_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SHARED_AV | FI_AV_USER_ID;

/// Primary capabilities (`fi_getinfo(3)`, CAPABILITIES): enabled only when
/// asked for.
pub(super) const PRIMARY_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_ATOMIC
    | FI_MULTICAST
    | FI_NAMED_RX_CTX
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | FI_HMEM
    | FI_COLLECTIVE
    | crate::abi::v2::FI_TAGGED_DIRECTED_RECV
    | FI_AV_USER_ID;
pub(super) const MSG_DIRECTION_CAPS: u64 = FI_SEND | FI_RECV;
pub(super) const COMM_CAPS: u64 = FI_LOCAL_COMM | FI_REMOTE_COMM;
/// Rx-only caps an application may leave in `tx_attr->caps` (util's
/// `OFI_IGNORED_TX_CAPS`), and tx-only caps in `rx_attr->caps`.
pub(super) const IGNORED_TX_CAPS: u64 = FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_RECV
    | FI_DIRECTED_RECV
    | FI_VARIABLE_MSG
    | RX_CAPS_2_0
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_RMA_EVENT
    | FI_SOURCE_ERR
    | DOMAIN_LEVEL_CAPS;
pub(super) const IGNORED_RX_CAPS: u64 =
    FI_READ | FI_WRITE | FI_SEND | FI_FENCE | FI_MULTICAST | FI_NAMED_RX_CTX | DOMAIN_LEVEL_CAPS;

/// Default operation flags the data path honours.
pub(crate) const TX_OP_FLAGS: u64 =
    FI_COMPLETION | FI_INJECT | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE;
pub(crate) const RX_OP_FLAGS: u64 = FI_COMPLETION | FI_MULTI_RECV;

/// Mode bits rustfab requires of every application: none.
pub(crate) const REQUIRED_MODE: u64 = 0;
/// Mode bits rustfab uses when the application allows them: buffered
/// receives (`fi_recv_context`, `src/ep/buffered.rs`). Set to 0 to stop
/// offering them.
pub(crate) const OPTIONAL_MODE: u64 = FI_BUFFERED_RECV;

/// [`OPTIONAL_MODE`] at an API version: `FI_BUFFERED_RECV` exists up to 1.22
/// (2.0 turned mode bit 51 into an internal flag).
pub(crate) fn optional_mode(version: u32) -> u64 {
    if version <= crate::abi::v2::API_LAST_BUFFERED_RECV {
        OPTIONAL_MODE
    } else {
        OPTIONAL_MODE & !FI_BUFFERED_RECV
    }
}

/// `FI_TC_BEST_EFFORT` (`fabric.h`: `FI_TC_LABEL`).
pub(super) const FI_TC_BEST_EFFORT: u32 = 0x200;

/// The shm address that names no segment: an endpoint opened with it picks
/// a fresh random token.
pub(crate) const SHM_ANY_TOKEN: u64 = 0;

/// One fi_getinfo entry rustfab can offer. Adding an endpoint type or a
/// transport is one more row in [`TEMPLATES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Template {
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
    pub(crate) fn addressing(&self) -> TransportKind {
        if self.ep_type == FI_EP_MSG {
            TransportKind::Tcp
        } else if self.ep_type == FI_EP_DGRAM && self.transport == TransportKind::Auto {
            // Datagrams on auto go over the shm rings only (core/dgram.rs):
            // shm addresses.
            TransportKind::Shm
        } else {
            self.transport
        }
    }

    /// The template as an application of API `version` sees it: capability
    /// bit 48 is `FI_VARIABLE_MSG` up to 1.20 only (undefined in 1.21 and
    /// 1.22, `FI_EXACT_DIRECTED_RECV` from 2.0); from 2.0 the entries with
    /// directed receives (the RDM ones) add [`CAPS_2_0`].
    pub(crate) fn at_version(&self, version: u32) -> Template {
        let mut t = *self;
        if version > crate::abi::v2::API_LAST_VARIABLE_MSG {
            t.caps &= !FI_VARIABLE_MSG;
        }
        if version >= crate::abi::v2::API_FIRST_2_0 && t.caps & FI_DIRECTED_RECV != 0 {
            t.caps |= CAPS_2_0;
        }
        t
    }
}

/// What rustfab offers, in the order fi_getinfo returns it. The auto entry
/// comes first: one address, shared memory to peers on this host and TCP to
/// the others, so it honestly has both FI_LOCAL_COMM and FI_REMOTE_COMM
/// (what Open MPI asks for) and applications that take the first entry get
/// the fast path on a node and reach across nodes too.
pub(crate) const TEMPLATES: &[Template] = &[
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
    // Datagram endpoints (core/dgram.rs), last: over the shm rings on auto
    // and shm (peers on this host only, so no FI_REMOTE_COMM), over UDP on
    // tcp; a message is at most one record or datagram.
    Template {
        transport: TransportKind::Auto,
        ep_type: FI_EP_DGRAM,
        caps: DGRAM_CAPS & !FI_REMOTE_COMM,
        protocol: SHM_PROTOCOL,
        max_msg_size: dgram::max_msg_size(TransportKind::Auto),
    },
    Template {
        transport: TransportKind::Shm,
        ep_type: FI_EP_DGRAM,
        caps: DGRAM_CAPS & !FI_REMOTE_COMM,
        protocol: SHM_PROTOCOL,
        max_msg_size: dgram::max_msg_size(TransportKind::Shm),
    },
    Template {
        transport: TransportKind::Tcp,
        ep_type: FI_EP_DGRAM,
        caps: DGRAM_CAPS,
        protocol: UDP_PROTOCOL,
        max_msg_size: dgram::max_msg_size(TransportKind::Tcp),
    },
];

/// Capabilities of the datagram entries: those of tcp RDM ones that a
/// datagram endpoint can have.
// Named AVs, triggered operations and receive contexts are built and
// tested for RDM endpoints only: not offered on datagram ones.
const DGRAM_CAPS: u64 = TCP_CAPS & !(dgram::DGRAM_REFUSED_CAPS | FI_SHARED_AV | FI_TRIGGER | FI_NAMED_RX_CTX);

/// The message order an entry promises: UDP datagrams may be reordered on
/// the way (none); rings and streams keep it.
fn msg_order(t: &Template) -> u64 {
    if t.ep_type == FI_EP_DGRAM && t.transport == TransportKind::Tcp {
        FI_ORDER_NONE
    } else {
        MSG_ORDER
    }
}

/// The unaltered entry for a template (before hints and addresses).
pub(crate) fn template_info(t: &Template, version: u32) -> Info {
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
            msg_order: msg_order(t),
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
            msg_order: msg_order(t),
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
            // Scalable endpoints (core/scalable.rs) are RDM endpoints.
            max_ep_tx_ctx: if t.ep_type == FI_EP_RDM {
                crate::core::scalable::MAX_CTX
            } else {
                1
            },
            max_ep_rx_ctx: if t.ep_type == FI_EP_RDM {
                crate::core::scalable::MAX_CTX
            } else {
                1
            },
            // Shared contexts (core/shared_ctx.rs): one of each per
            // endpoint, reported only to hints that ask (hints.rs, alter).
            max_ep_stx_ctx: 1,
            max_ep_srx_ctx: 1,
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
