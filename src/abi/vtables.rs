//! Operation tables (vtables) of libfabric 1.17. Every slot is an
//! `Option<unsafe extern "C" fn>` (same size as a C function pointer); rustfab
//! fills every slot of every table it hands out (docs/abi.md §3.3).

use super::abi_structs;
use super::types::*;
use core::ffi::{c_char, c_int, c_void};
use libc::iovec;

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
