//! Data structures and fid objects of libfabric 1.17 (`<rdma/fabric.h>`,
//! `fi_domain.h`, `fi_eq.h`, `fi_endpoint.h`, `fi_rma.h`, `fi_atomic.h`,
//! `fi_collective.h`, `providers/fi_prov.h`). Field names are the C names.

use super::layout::abi_structs;
use core::ffi::{c_char, c_int, c_void};
use libc::iovec;

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
    /// `fi_trigger.h`: the condition of an `FI_TRIGGER_THRESHOLD` trigger.
    struct fi_trigger_threshold { cntr: *mut fid_cntr, threshold: size_t }
    /// `fi_trigger.h`: a triggered operation's context; `trigger` is the
    /// C union (a [`fi_trigger_threshold`] for `FI_TRIGGER_THRESHOLD`).
    struct fi_triggered_context { event_type: u32, trigger: [*mut c_void; 3] }
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

// ---- The vtables: fid objects and their ops tables name each other (a `fid` points at its `fi_ops`, each table takes `fid` pointers), so both live in this one file.
// Operation tables (vtables) of libfabric 1.17. Every slot is an
// `Option<unsafe extern "C" fn>` (same size as a C function pointer); rustfab
// fills every slot of every table it hands out (docs/abi.md §3.3).
type Fid = *mut fid;
type Ep = *mut fid_ep;
type Ctx = *mut c_void;
type Desc = *mut *mut c_void;

abi_structs! { vtable_layouts;
    struct fi_ops {
        size: size_t,
        close: Option<unsafe extern "C" fn(Fid) -> c_int>,
        bind: Option<unsafe extern "C" fn(Fid, Fid, u64) -> c_int>,
        control: Option<unsafe extern "C" fn(Fid, c_int, *mut c_void) -> c_int>,
        ops_open: Option<unsafe extern "C" fn(Fid, *const c_char, u64, *mut *mut c_void, Ctx) -> c_int>,
        tostr: Option<unsafe extern "C" fn(*const fid, *mut c_char, size_t) -> c_int>,
        ops_set: Option<unsafe extern "C" fn(Fid, *const c_char, u64, *mut c_void, Ctx) -> c_int>,
    }
    struct fi_ops_fabric {
        size: size_t,
        domain: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_domain, Ctx) -> c_int>,
        passive_ep: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_pep, Ctx) -> c_int>,
        eq_open: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_eq_attr, *mut *mut fid_eq, Ctx) -> c_int>,
        wait_open: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_wait_attr, *mut *mut fid_wait) -> c_int>,
        trywait: Option<unsafe extern "C" fn(*mut fid_fabric, *mut Fid, c_int) -> c_int>,
        domain2: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_domain, u64, Ctx) -> c_int>,
    }
    struct fi_ops_domain {
        size: size_t,
        av_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_av_attr, *mut *mut fid_av, Ctx) -> c_int>,
        cq_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_cq_attr, *mut *mut fid_cq, Ctx) -> c_int>,
        endpoint: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut Ep, Ctx) -> c_int>,
        scalable_ep: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut Ep, Ctx) -> c_int>,
        cntr_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_cntr_attr, *mut *mut fid_cntr, Ctx) -> c_int>,
        poll_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_poll_attr, *mut *mut fid_poll) -> c_int>,
        stx_ctx: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_tx_attr, *mut *mut fid_stx, Ctx) -> c_int>,
        srx_ctx: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_rx_attr, *mut Ep, Ctx) -> c_int>,
        query_atomic: Option<unsafe extern "C" fn(*mut fid_domain, u32, u32, *mut fi_atomic_attr, u64) -> c_int>,
        query_collective: Option<unsafe extern "C" fn(*mut fid_domain, u32, *mut fi_collective_attr, u64) -> c_int>,
        endpoint2: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut Ep, u64, Ctx) -> c_int>,
    }
    struct fi_ops_mr {
        size: size_t,
        reg: Option<unsafe extern "C" fn(Fid, *const c_void, size_t, u64, u64, u64, u64, *mut *mut fid_mr, Ctx) -> c_int>,
        regv: Option<unsafe extern "C" fn(Fid, *const iovec, size_t, u64, u64, u64, u64, *mut *mut fid_mr, Ctx) -> c_int>,
        regattr: Option<unsafe extern "C" fn(Fid, *const fi_mr_attr, u64, *mut *mut fid_mr) -> c_int>,
    }
    struct fi_ops_av {
        size: size_t,
        insert: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, size_t, *mut fi_addr_t, u64, Ctx) -> c_int>,
        insertsvc: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, Ctx) -> c_int>,
        insertsym: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, size_t, *const c_char, size_t, *mut fi_addr_t, u64, Ctx) -> c_int>,
        remove: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_addr_t, size_t, u64) -> c_int>,
        lookup: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut size_t) -> c_int>,
        straddr: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, *mut c_char, *mut size_t) -> *const c_char>,
        av_set: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, Ctx) -> c_int>,
    }
    struct fi_ops_av_set {
        size: size_t,
        set_union: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
        intersect: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
        diff: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
        insert: Option<unsafe extern "C" fn(*mut fid_av_set, fi_addr_t) -> c_int>,
        remove: Option<unsafe extern "C" fn(*mut fid_av_set, fi_addr_t) -> c_int>,
        addr: Option<unsafe extern "C" fn(*mut fid_av_set, *mut fi_addr_t) -> c_int>,
    }
    struct fi_ops_cq {
        size: size_t,
        read: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, size_t) -> isize>,
        readfrom: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, size_t, *mut fi_addr_t) -> isize>,
        readerr: Option<unsafe extern "C" fn(*mut fid_cq, *mut fi_cq_err_entry, u64) -> isize>,
        sread: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, size_t, *const c_void, c_int) -> isize>,
        sreadfrom: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, size_t, *mut fi_addr_t, *const c_void, c_int) -> isize>,
        signal: Option<unsafe extern "C" fn(*mut fid_cq) -> c_int>,
        strerror: Option<unsafe extern "C" fn(*mut fid_cq, c_int, *const c_void, *mut c_char, size_t) -> *const c_char>,
    }
    struct fi_ops_cntr {
        size: size_t,
        read: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
        readerr: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
        add: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
        set: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
        wait: Option<unsafe extern "C" fn(*mut fid_cntr, u64, c_int) -> c_int>,
        adderr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
        seterr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    }
    struct fi_ops_eq {
        size: size_t,
        read: Option<unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, size_t, u64) -> isize>,
        readerr: Option<unsafe extern "C" fn(*mut fid_eq, *mut fi_eq_err_entry, u64) -> isize>,
        write: Option<unsafe extern "C" fn(*mut fid_eq, u32, *const c_void, size_t, u64) -> isize>,
        sread: Option<unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, size_t, c_int, u64) -> isize>,
        strerror: Option<unsafe extern "C" fn(*mut fid_eq, c_int, *const c_void, *mut c_char, size_t) -> *const c_char>,
    }
    struct fi_ops_wait {
        size: size_t,
        wait: Option<unsafe extern "C" fn(*mut fid_wait, c_int) -> c_int>,
    }
    struct fi_ops_poll {
        size: size_t,
        poll: Option<unsafe extern "C" fn(*mut fid_poll, *mut *mut c_void, c_int) -> c_int>,
        poll_add: Option<unsafe extern "C" fn(*mut fid_poll, Fid, u64) -> c_int>,
        poll_del: Option<unsafe extern "C" fn(*mut fid_poll, Fid, u64) -> c_int>,
    }
    struct fi_ops_ep {
        size: size_t,
        cancel: Option<unsafe extern "C" fn(Fid, Ctx) -> isize>,
        getopt: Option<unsafe extern "C" fn(Fid, c_int, c_int, *mut c_void, *mut size_t) -> c_int>,
        setopt: Option<unsafe extern "C" fn(Fid, c_int, c_int, *const c_void, size_t) -> c_int>,
        tx_ctx: Option<unsafe extern "C" fn(Ep, c_int, *mut fi_tx_attr, *mut Ep, Ctx) -> c_int>,
        rx_ctx: Option<unsafe extern "C" fn(Ep, c_int, *mut fi_rx_attr, *mut Ep, Ctx) -> c_int>,
        rx_size_left: Option<unsafe extern "C" fn(Ep) -> isize>,
        tx_size_left: Option<unsafe extern "C" fn(Ep) -> isize>,
    }
    struct fi_ops_cm {
        size: size_t,
        setname: Option<unsafe extern "C" fn(Fid, *mut c_void, size_t) -> c_int>,
        getname: Option<unsafe extern "C" fn(Fid, *mut c_void, *mut size_t) -> c_int>,
        getpeer: Option<unsafe extern "C" fn(Ep, *mut c_void, *mut size_t) -> c_int>,
        connect: Option<unsafe extern "C" fn(Ep, *const c_void, *const c_void, size_t) -> c_int>,
        listen: Option<unsafe extern "C" fn(*mut fid_pep) -> c_int>,
        accept: Option<unsafe extern "C" fn(Ep, *const c_void, size_t) -> c_int>,
        reject: Option<unsafe extern "C" fn(*mut fid_pep, Fid, *const c_void, size_t) -> c_int>,
        shutdown: Option<unsafe extern "C" fn(Ep, u64) -> c_int>,
        join: Option<unsafe extern "C" fn(Ep, *const c_void, u64, *mut *mut fid_mc, Ctx) -> c_int>,
    }
    struct fi_ops_msg {
        size: size_t,
        recv: Option<unsafe extern "C" fn(Ep, *mut c_void, size_t, *mut c_void, fi_addr_t, Ctx) -> isize>,
        recvv: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, Ctx) -> isize>,
        recvmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg, u64) -> isize>,
        send: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, fi_addr_t, Ctx) -> isize>,
        sendv: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, Ctx) -> isize>,
        sendmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg, u64) -> isize>,
        inject: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, fi_addr_t) -> isize>,
        senddata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, u64, fi_addr_t, Ctx) -> isize>,
        injectdata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, u64, fi_addr_t) -> isize>,
    }
    struct fi_ops_tagged {
        size: size_t,
        recv: Option<unsafe extern "C" fn(Ep, *mut c_void, size_t, *mut c_void, fi_addr_t, u64, u64, Ctx) -> isize>,
        recvv: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, u64, u64, Ctx) -> isize>,
        recvmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_tagged, u64) -> isize>,
        send: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, fi_addr_t, u64, Ctx) -> isize>,
        sendv: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, u64, Ctx) -> isize>,
        sendmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_tagged, u64) -> isize>,
        inject: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, fi_addr_t, u64) -> isize>,
        senddata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, u64, fi_addr_t, u64, Ctx) -> isize>,
        injectdata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, u64, fi_addr_t, u64) -> isize>,
    }
    struct fi_ops_rma {
        size: size_t,
        read: Option<unsafe extern "C" fn(Ep, *mut c_void, size_t, *mut c_void, fi_addr_t, u64, u64, Ctx) -> isize>,
        readv: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, u64, u64, Ctx) -> isize>,
        readmsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_rma, u64) -> isize>,
        write: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, fi_addr_t, u64, u64, Ctx) -> isize>,
        writev: Option<unsafe extern "C" fn(Ep, *const iovec, Desc, size_t, fi_addr_t, u64, u64, Ctx) -> isize>,
        writemsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_rma, u64) -> isize>,
        inject: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, fi_addr_t, u64, u64) -> isize>,
        writedata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, u64, fi_addr_t, u64, u64, Ctx) -> isize>,
        injectdata: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, u64, fi_addr_t, u64, u64) -> isize>,
    }
    struct fi_ops_atomic {
        size: size_t,
        write: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        writev: Option<unsafe extern "C" fn(Ep, *const fi_ioc, Desc, size_t, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        writemsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_atomic, u64) -> isize>,
        inject: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, fi_addr_t, u64, u64, u32, u32) -> isize>,
        readwrite: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        readwritev: Option<unsafe extern "C" fn(Ep, *const fi_ioc, Desc, size_t, *mut fi_ioc, Desc, size_t, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        readwritemsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_atomic, *mut fi_ioc, Desc, size_t, u64) -> isize>,
        compwrite: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *const c_void, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        compwritev: Option<unsafe extern "C" fn(Ep, *const fi_ioc, Desc, size_t, *const fi_ioc, Desc, size_t, *mut fi_ioc, Desc, size_t, fi_addr_t, u64, u64, u32, u32, Ctx) -> isize>,
        compwritemsg: Option<unsafe extern "C" fn(Ep, *const fi_msg_atomic, *const fi_ioc, Desc, size_t, *mut fi_ioc, Desc, size_t, u64) -> isize>,
        writevalid: Option<unsafe extern "C" fn(Ep, u32, u32, *mut size_t) -> c_int>,
        readwritevalid: Option<unsafe extern "C" fn(Ep, u32, u32, *mut size_t) -> c_int>,
        compwritevalid: Option<unsafe extern "C" fn(Ep, u32, u32, *mut size_t) -> c_int>,
    }
    struct fi_ops_collective {
        size: size_t,
        barrier: Option<unsafe extern "C" fn(Ep, fi_addr_t, Ctx) -> isize>,
        broadcast: Option<unsafe extern "C" fn(Ep, *mut c_void, size_t, *mut c_void, fi_addr_t, fi_addr_t, u32, u64, Ctx) -> isize>,
        alltoall: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u32, u64, Ctx) -> isize>,
        allreduce: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u32, u32, u64, Ctx) -> isize>,
        allgather: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u32, u64, Ctx) -> isize>,
        reduce_scatter: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u32, u32, u64, Ctx) -> isize>,
        reduce: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, u32, u32, u64, Ctx) -> isize>,
        scatter: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, u32, u64, Ctx) -> isize>,
        gather: Option<unsafe extern "C" fn(Ep, *const c_void, size_t, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, u32, u64, Ctx) -> isize>,
        msg: Option<unsafe extern "C" fn(Ep, *const c_void, *mut fi_ioc, Desc, size_t, u64) -> isize>,
        barrier2: Option<unsafe extern "C" fn(Ep, fi_addr_t, u64, Ctx) -> isize>,
    }
}
