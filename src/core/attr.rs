//! Owned Rust copies of `struct fi_info` and its attribute structs.
//!
//! Hints and the infos passed to `fi_domain`/`fi_endpoint` belong to the
//! application and may be freed right after the call (docs/abi.md §1.9), so
//! the C face copies what rustfab needs into these types at the boundary
//! (`fi/attr.rs`: `Info::from_c`, and `Info::to_c` for the way back, built
//! from libc allocations that `fi_freeinfo` releases with `free()`). Every
//! core reads these, never a C `fi_info`.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxAttr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EpAttr {
    pub ep_type: u32,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key: Option<Vec<u8>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainAttr {
    pub name: Option<String>,
    pub threading: u32,
    pub control_progress: u32,
    pub data_progress: u32,
    pub resource_mgmt: u32,
    pub av_type: u32,
    pub mr_mode: i32,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: Option<Vec<u8>>,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FabricAttr {
    pub name: Option<String>,
    pub prov_name: Option<String>,
    pub prov_version: u32,
    pub api_version: u32,
}

/// An owned `fi_info`. Attribute structs are `None` where the C pointer was
/// NULL (hints may leave any of them out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addr: Option<Vec<u8>>,
    pub dest_addr: Option<Vec<u8>>,
    /// `info->handle` is copied through untouched (a pep or connreq fid).
    pub handle: usize,
    pub tx: Option<TxAttr>,
    pub rx: Option<RxAttr>,
    pub ep: Option<EpAttr>,
    pub domain: Option<DomainAttr>,
    pub fabric: Option<FabricAttr>,
}
