//! Data structures and fid objects of libfabric 1.17 (`<rdma/fabric.h>`,
//! `fi_domain.h`, `fi_eq.h`, `fi_endpoint.h`, `fi_rma.h`, `fi_atomic.h`,
//! `fi_collective.h`, `providers/fi_prov.h`). Field names are the C names.

use super::abi_structs;
use super::vtables::*;
use core::ffi::{c_char, c_int, c_void};

pub type fi_addr_t = u64;
pub type size_t = usize;

/// Opaque stand-ins for pthread objects (only pointers to them are mirrored).
pub type pthread_mutex_t = libc::pthread_mutex_t;
pub type pthread_cond_t = libc::pthread_cond_t;

abi_structs! { type_layouts;
    /// `struct fid`: the header every fabric object starts with.
    struct fid { fclass: size_t, context: *mut c_void, ops: *const fi_ops }
    struct fi_context { internal: [*mut c_void; 4] }
    struct fi_context2 { internal: [*mut c_void; 8] }
    struct fi_provider {
        version: u32,
        fi_version: u32,
        context: fi_context,
        name: *const c_char,
        getinfo: Option<unsafe extern "C" fn(u32, *const c_char, *const c_char, u64, *const fi_info, *mut *mut fi_info) -> c_int>,
        fabric: Option<unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int>,
        cleanup: Option<unsafe extern "C" fn()>,
    }

    struct fi_tx_attr {
        caps: u64, mode: u64, op_flags: u64, msg_order: u64, comp_order: u64,
        inject_size: size_t, size: size_t, iov_limit: size_t, rma_iov_limit: size_t, tclass: u32,
    }
    struct fi_rx_attr {
        caps: u64, mode: u64, op_flags: u64, msg_order: u64, comp_order: u64,
        total_buffered_recv: size_t, size: size_t, iov_limit: size_t,
    }
    struct fi_ep_attr {
        r#type: u32, protocol: u32, protocol_version: u32,
        max_msg_size: size_t, msg_prefix_size: size_t,
        max_order_raw_size: size_t, max_order_war_size: size_t, max_order_waw_size: size_t,
        mem_tag_format: u64, tx_ctx_cnt: size_t, rx_ctx_cnt: size_t,
        auth_key_size: size_t, auth_key: *mut u8,
    }
    struct fi_domain_attr {
        domain: *mut fid_domain, name: *mut c_char,
        threading: u32, control_progress: u32, data_progress: u32, resource_mgmt: u32,
        av_type: u32, mr_mode: c_int,
        mr_key_size: size_t, cq_data_size: size_t, cq_cnt: size_t, ep_cnt: size_t,
        tx_ctx_cnt: size_t, rx_ctx_cnt: size_t, max_ep_tx_ctx: size_t, max_ep_rx_ctx: size_t,
        max_ep_stx_ctx: size_t, max_ep_srx_ctx: size_t, cntr_cnt: size_t, mr_iov_limit: size_t,
        caps: u64, mode: u64, auth_key: *mut u8, auth_key_size: size_t,
        max_err_data: size_t, mr_cnt: size_t, tclass: u32,
    }
    struct fi_fabric_attr {
        fabric: *mut fid_fabric, name: *mut c_char, prov_name: *mut c_char,
        prov_version: u32, api_version: u32,
    }
    struct fi_info {
        next: *mut fi_info, caps: u64, mode: u64, addr_format: u32,
        src_addrlen: size_t, dest_addrlen: size_t, src_addr: *mut c_void, dest_addr: *mut c_void,
        handle: *mut fid,
        tx_attr: *mut fi_tx_attr, rx_attr: *mut fi_rx_attr, ep_attr: *mut fi_ep_attr,
        domain_attr: *mut fi_domain_attr, fabric_attr: *mut fi_fabric_attr,
        nic: *mut fid_nic,
    }
    struct fi_device_attr {
        name: *mut c_char, device_id: *mut c_char, device_version: *mut c_char,
        vendor_id: *mut c_char, driver: *mut c_char, firmware: *mut c_char,
    }
    struct fi_pci_attr { domain_id: u16, bus_id: u8, device_id: u8, function_id: u8 }
    struct fi_bus_attr { bus_type: u32, attr: fi_pci_attr }
    struct fi_link_attr { address: *mut c_char, mtu: size_t, speed: size_t, state: u32, network_type: *mut c_char }

    struct fid_fabric { fid: fid, ops: *const fi_ops_fabric, api_version: u32 }
    struct fid_domain { fid: fid, ops: *const fi_ops_domain, mr: *const fi_ops_mr }
    struct fid_mr { fid: fid, mem_desc: *mut c_void, key: u64 }
    struct fid_av { fid: fid, ops: *const fi_ops_av }
    struct fid_av_set { fid: fid, ops: *const fi_ops_av_set }
    struct fid_cq { fid: fid, ops: *const fi_ops_cq }
    struct fid_cntr { fid: fid, ops: *const fi_ops_cntr }
    struct fid_eq { fid: fid, ops: *const fi_ops_eq }
    struct fid_wait { fid: fid, ops: *const fi_ops_wait }
    struct fid_poll { fid: fid, ops: *const fi_ops_poll }
    struct fid_ep {
        fid: fid, ops: *const fi_ops_ep, cm: *const fi_ops_cm, msg: *const fi_ops_msg,
        rma: *const fi_ops_rma, tagged: *const fi_ops_tagged, atomic: *const fi_ops_atomic,
        collective: *const fi_ops_collective,
    }
    struct fid_pep { fid: fid, ops: *const fi_ops_ep, cm: *const fi_ops_cm }
    struct fid_stx { fid: fid, ops: *const fi_ops_ep }
    struct fid_nic {
        fid: fid, device_attr: *mut fi_device_attr, bus_attr: *mut fi_bus_attr,
        link_attr: *mut fi_link_attr, prov_attr: *mut c_void,
    }
    struct fid_mc { fid: fid, fi_addr: fi_addr_t }

    struct fi_alias { fid: *mut *mut fid, flags: u64 }
    struct fi_fid_var { name: c_int, val: *mut c_void }
    struct fi_mr_raw_attr { flags: u64, base_addr: *mut u64, raw_key: *mut u8, key_size: *mut size_t }
    struct fi_mr_map_raw { flags: u64, base_addr: u64, raw_key: *mut u8, key_size: size_t, key: *mut u64 }
    struct fi_param { name: *const c_char, r#type: u32, help_string: *const c_char, value: *const c_char }
    struct fi_recv_context { ep: *mut fid_ep, context: *mut c_void }
    struct fi_ioc { addr: *mut c_void, count: size_t }

    struct fi_av_attr {
        r#type: u32, rx_ctx_bits: c_int, count: size_t, ep_per_node: size_t,
        name: *const c_char, map_addr: *mut c_void, flags: u64,
    }
    struct fi_av_set_attr {
        count: size_t, start_addr: fi_addr_t, end_addr: fi_addr_t, stride: u64,
        comm_key_size: size_t, comm_key: *mut u8, flags: u64,
    }
    /// `device` is a C union of `uint64_t reserved` and several `int`s.
    struct fi_mr_attr {
        mr_iov: *const libc::iovec, iov_count: size_t, access: u64, offset: u64,
        requested_key: u64, context: *mut c_void, auth_key_size: size_t, auth_key: *mut u8,
        iface: u32, device: u64,
    }
    struct fi_mr_modify { flags: u64, attr: fi_mr_attr }
    struct fi_atomic_attr { count: size_t, size: size_t }
    struct fi_collective_attr { op: u32, datatype: u32, datatype_attr: fi_atomic_attr, max_members: size_t, mode: u64 }

    struct fi_wait_attr { wait_obj: u32, flags: u64 }
    struct fi_mutex_cond { mutex: *mut pthread_mutex_t, cond: *mut pthread_cond_t }
    struct fi_wait_pollfd { change_index: u64, nfds: size_t, fd: *mut libc::pollfd }
    struct fi_poll_attr { flags: u64 }
    struct fi_eq_attr { size: size_t, flags: u64, wait_obj: u32, signaling_vector: c_int, wait_set: *mut fid_wait }
    struct fi_eq_entry { fid: *mut fid, context: *mut c_void, data: u64 }
    struct fi_eq_err_entry {
        fid: *mut fid, context: *mut c_void, data: u64, err: c_int, prov_errno: c_int,
        err_data: *mut c_void, err_data_size: size_t,
    }
    /// Followed in memory by the connection data (C flexible array `data[]`).
    struct fi_eq_cm_entry { fid: *mut fid, info: *mut fi_info }
    struct fi_cq_entry { op_context: *mut c_void }
    struct fi_cq_msg_entry { op_context: *mut c_void, flags: u64, len: size_t }
    struct fi_cq_data_entry { op_context: *mut c_void, flags: u64, len: size_t, buf: *mut c_void, data: u64 }
    struct fi_cq_tagged_entry { op_context: *mut c_void, flags: u64, len: size_t, buf: *mut c_void, data: u64, tag: u64 }
    struct fi_cq_err_entry {
        op_context: *mut c_void, flags: u64, len: size_t, buf: *mut c_void, data: u64, tag: u64,
        olen: size_t, err: c_int, prov_errno: c_int, err_data: *mut c_void, err_data_size: size_t,
    }
    struct fi_cq_attr {
        size: size_t, flags: u64, format: u32, wait_obj: u32, signaling_vector: c_int,
        wait_cond: u32, wait_set: *mut fid_wait,
    }
    struct fi_cntr_attr { events: u32, wait_obj: u32, wait_set: *mut fid_wait, flags: u64 }

    struct fi_msg {
        msg_iov: *const libc::iovec, desc: *mut *mut c_void, iov_count: size_t,
        addr: fi_addr_t, context: *mut c_void, data: u64,
    }
    struct fi_msg_tagged {
        msg_iov: *const libc::iovec, desc: *mut *mut c_void, iov_count: size_t,
        addr: fi_addr_t, tag: u64, ignore: u64, context: *mut c_void, data: u64,
    }
    struct fi_rma_iov { addr: u64, len: size_t, key: u64 }
    struct fi_rma_ioc { addr: u64, count: size_t, key: u64 }
    struct fi_msg_rma {
        msg_iov: *const libc::iovec, desc: *mut *mut c_void, iov_count: size_t, addr: fi_addr_t,
        rma_iov: *const fi_rma_iov, rma_iov_count: size_t, context: *mut c_void, data: u64,
    }
    struct fi_msg_atomic {
        msg_iov: *const fi_ioc, desc: *mut *mut c_void, iov_count: size_t, addr: fi_addr_t,
        rma_iov: *const fi_rma_ioc, rma_iov_count: size_t, datatype: u32, op: u32,
        context: *mut c_void, data: u64,
    }
}

/// Size of `struct fi_cq_err_entry` as applications built for API < 1.5 know
/// it (no `err_data_size`; `include/ofi_abi.h: fi_cq_err_entry_1_0`).
pub const FI_CQ_ERR_ENTRY_1_0_SIZE: usize = 72;

const _: () = assert!(core::mem::size_of::<fid>() == 24);
const _: () = assert!(core::mem::size_of::<fi_info>() == 120);
const _: () = assert!(core::mem::size_of::<fi_cq_err_entry>() == 80);
const _: () = assert!(core::mem::size_of::<fi_provider>() == 72);
