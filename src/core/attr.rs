//! Owned Rust copies of `struct fi_info` and its attribute structs.
//!
//! Hints and the infos passed to `fi_domain`/`fi_endpoint` belong to the
//! application and may be freed right after the call (docs/abi.md §1.9), so
//! the C face copies what rustfab needs into these types at the boundary
//! (`fi/attr.rs`: `Info::from_c`, and `Info::to_c` for the way back, built
//! from libc allocations that `fi_freeinfo` releases with `free()`). Every
//! core reads these, never a C `fi_info`.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxAttr {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) op_flags: u64,
    pub(crate) msg_order: u64,
    pub(crate) comp_order: u64,
    pub(crate) inject_size: usize,
    pub(crate) size: usize,
    pub(crate) iov_limit: usize,
    pub(crate) rma_iov_limit: usize,
    pub(crate) tclass: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RxAttr {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) op_flags: u64,
    pub(crate) msg_order: u64,
    pub(crate) comp_order: u64,
    pub(crate) total_buffered_recv: usize,
    pub(crate) size: usize,
    pub(crate) iov_limit: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EpAttr {
    pub(crate) ep_type: u32,
    pub(crate) protocol: u32,
    pub(crate) protocol_version: u32,
    pub(crate) max_msg_size: usize,
    pub(crate) msg_prefix_size: usize,
    pub(crate) max_order_raw_size: usize,
    pub(crate) max_order_war_size: usize,
    pub(crate) max_order_waw_size: usize,
    pub(crate) mem_tag_format: u64,
    pub(crate) tx_ctx_cnt: usize,
    pub(crate) rx_ctx_cnt: usize,
    pub(crate) auth_key: Option<Vec<u8>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DomainAttr {
    pub(crate) name: Option<String>,
    pub(crate) threading: u32,
    pub(crate) control_progress: u32,
    pub(crate) data_progress: u32,
    pub(crate) resource_mgmt: u32,
    pub(crate) av_type: u32,
    pub(crate) mr_mode: i32,
    pub(crate) mr_key_size: usize,
    pub(crate) cq_data_size: usize,
    pub(crate) cq_cnt: usize,
    pub(crate) ep_cnt: usize,
    pub(crate) tx_ctx_cnt: usize,
    pub(crate) rx_ctx_cnt: usize,
    pub(crate) max_ep_tx_ctx: usize,
    pub(crate) max_ep_rx_ctx: usize,
    pub(crate) max_ep_stx_ctx: usize,
    pub(crate) max_ep_srx_ctx: usize,
    pub(crate) cntr_cnt: usize,
    pub(crate) mr_iov_limit: usize,
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) auth_key: Option<Vec<u8>>,
    pub(crate) max_err_data: usize,
    pub(crate) mr_cnt: usize,
    pub(crate) tclass: u32,
    /// Fields of API 1.20+ (`max_ep_auth_key`) and 2.0+/2.5+ (abi::v2):
    /// written for every caller (older applications never read past
    /// `tclass`), never read from hints (a shorter struct may end there).
    pub(crate) max_ep_auth_key: usize,
    pub(crate) max_group_id: u32,
    pub(crate) max_cntr_value: u64,
    pub(crate) max_err_cntr_value: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FabricAttr {
    pub(crate) name: Option<String>,
    pub(crate) prov_name: Option<String>,
    pub(crate) prov_version: u32,
    pub(crate) api_version: u32,
}

/// An owned `fi_info`. Attribute structs are `None` where the C pointer was
/// NULL (hints may leave any of them out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Info {
    pub(crate) caps: u64,
    pub(crate) mode: u64,
    pub(crate) addr_format: u32,
    pub(crate) src_addr: Option<Vec<u8>>,
    pub(crate) dest_addr: Option<Vec<u8>>,
    /// `info->handle` is copied through untouched (a pep or connreq fid).
    pub(crate) handle: usize,
    pub(crate) tx: Option<TxAttr>,
    pub(crate) rx: Option<RxAttr>,
    pub(crate) ep: Option<EpAttr>,
    pub(crate) domain: Option<DomainAttr>,
    pub(crate) fabric: Option<FabricAttr>,
}
