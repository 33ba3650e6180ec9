//! The C side of [`Info`]: copying an application's `struct fi_info` into
//! the Rust form the cores read, and building C `fi_info`s (from libc
//! allocations, which `fi_freeinfo` releases with `free()`, docs/abi.md
//! §1.9) for fi_getinfo and `FI_CONNREQ` events.
//!
//! `Info::from_c` / `Info::to_c` are inherent methods of the core type
//! written here, so that the conversions that read or build C memory live in
//! the C face while callers keep the `Info::from_c(p)` / `info.to_c()` form.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::{DomainAttr, EpAttr, FabricAttr, Info, RxAttr, TxAttr};
use crate::fi::cmem;
use core::ffi::c_char;

/// `$ty` (`TxAttr` or the C `fi_tx_attr`: the same fields) with the fields
/// of `$t` (the other one): the one list of them for both directions.
macro_rules! tx_attr_as {
    ($ty:ident, $t:expr) => {
        $ty {
            caps: $t.caps,
            mode: $t.mode,
            op_flags: $t.op_flags,
            msg_order: $t.msg_order,
            comp_order: $t.comp_order,
            inject_size: $t.inject_size,
            size: $t.size,
            iov_limit: $t.iov_limit,
            rma_iov_limit: $t.rma_iov_limit,
            tclass: $t.tclass,
        }
    };
}

/// As `tx_attr_as`, for `RxAttr` and `fi_rx_attr`.
macro_rules! rx_attr_as {
    ($ty:ident, $r:expr) => {
        $ty {
            caps: $r.caps,
            mode: $r.mode,
            op_flags: $r.op_flags,
            msg_order: $r.msg_order,
            comp_order: $r.comp_order,
            total_buffered_recv: $r.total_buffered_recv,
            size: $r.size,
            iov_limit: $r.iov_limit,
        }
    };
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn str_of(p: *const c_char) -> Option<String> {
    // SAFETY: per the contract.
    unsafe { cmem::opt_str(p) }.ok().flatten().map(str::to_owned)
}

/// # Safety
/// `p` must be NULL or valid for `len` bytes.
unsafe fn bytes_of(p: *const u8, len: usize) -> Option<Vec<u8>> {
    if p.is_null() || len == 0 {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { core::slice::from_raw_parts(p, len) }.to_vec())
}

impl Info {
    /// Copies one C `fi_info` (not its `next` chain).
    ///
    /// # Safety
    /// `p` must point to a valid `fi_info` whose non-NULL pointers are valid.
    #[allow(clippy::manual_map)] // the matches keep each unsafe read visible
    pub(crate) unsafe fn from_c(p: *const fi_info) -> Result<Info> {
        // SAFETY: per the contract.
        let i = unsafe { p.as_ref() }.ok_or(Error::INVAL)?;
        // SAFETY (for the blocks below): every attribute pointer of a valid
        // fi_info is NULL or points to its struct; strings and address buffers
        // are valid for their stated lengths.
        let tx = unsafe { i.tx_attr.as_ref() }.map(tx_attr_from_c);
        let rx = unsafe { i.rx_attr.as_ref() }.map(rx_attr_from_c);
        let ep = match unsafe { i.ep_attr.as_ref() } {
            None => None,
            Some(e) => Some(EpAttr {
                ep_type: e.r#type,
                protocol: e.protocol,
                protocol_version: e.protocol_version,
                max_msg_size: e.max_msg_size,
                msg_prefix_size: e.msg_prefix_size,
                max_order_raw_size: e.max_order_raw_size,
                max_order_war_size: e.max_order_war_size,
                max_order_waw_size: e.max_order_waw_size,
                mem_tag_format: e.mem_tag_format,
                tx_ctx_cnt: e.tx_ctx_cnt,
                rx_ctx_cnt: e.rx_ctx_cnt,
                auth_key: unsafe { bytes_of(e.auth_key, e.auth_key_size) },
            }),
        };
        let domain = match unsafe { i.domain_attr.as_ref() } {
            None => None,
            Some(d) => Some(DomainAttr {
                name: unsafe { str_of(d.name) },
                threading: d.threading,
                control_progress: d.control_progress,
                data_progress: d.data_progress,
                resource_mgmt: d.resource_mgmt,
                av_type: d.av_type,
                mr_mode: d.mr_mode,
                mr_key_size: d.mr_key_size,
                cq_data_size: d.cq_data_size,
                cq_cnt: d.cq_cnt,
                ep_cnt: d.ep_cnt,
                tx_ctx_cnt: d.tx_ctx_cnt,
                rx_ctx_cnt: d.rx_ctx_cnt,
                max_ep_tx_ctx: d.max_ep_tx_ctx,
                max_ep_rx_ctx: d.max_ep_rx_ctx,
                max_ep_stx_ctx: d.max_ep_stx_ctx,
                max_ep_srx_ctx: d.max_ep_srx_ctx,
                cntr_cnt: d.cntr_cnt,
                mr_iov_limit: d.mr_iov_limit,
                caps: d.caps,
                mode: d.mode,
                auth_key: unsafe { bytes_of(d.auth_key, d.auth_key_size) },
                max_err_data: d.max_err_data,
                mr_cnt: d.mr_cnt,
                tclass: d.tclass,
                ..Default::default()
            }),
        };
        let fabric = match unsafe { i.fabric_attr.as_ref() } {
            None => None,
            Some(f) => Some(FabricAttr {
                name: unsafe { str_of(f.name) },
                prov_name: unsafe { str_of(f.prov_name) },
                prov_version: f.prov_version,
                api_version: f.api_version,
            }),
        };
        Ok(Info {
            caps: i.caps,
            mode: i.mode,
            addr_format: i.addr_format,
            src_addr: unsafe { bytes_of(i.src_addr as *const u8, i.src_addrlen) },
            dest_addr: unsafe { bytes_of(i.dest_addr as *const u8, i.dest_addrlen) },
            handle: i.handle as usize,
            tx,
            rx,
            ep,
            domain,
            fabric,
        })
    }

    /// Builds a C `fi_info` (all parts from libc, all five attribute structs
    /// present, `next` NULL). On failure everything allocated is freed.
    pub(crate) fn to_c(&self) -> Result<*mut fi_info> {
        let mut b = CInfoBuilder::default();
        match b.build(self) {
            Ok(p) => Ok(p),
            Err(e) => {
                // SAFETY: `b.info` is NULL or a partially built info whose
                // pointers are NULL or libc allocations.
                unsafe { free_c_info(b.info) };
                Err(e)
            }
        }
    }
}

#[derive(Default)]
struct CInfoBuilder {
    info: *mut fi_info,
}

impl CInfoBuilder {
    fn build(&mut self, s: &Info) -> Result<*mut fi_info> {
        self.info = cmem::calloc_one::<fi_info>()?;
        // SAFETY: `self.info` is a fresh zeroed allocation we own until
        // returned; every pointer stored in it is a fresh libc allocation.
        let i = unsafe { &mut *self.info };
        i.caps = s.caps;
        i.mode = s.mode;
        i.addr_format = s.addr_format;
        i.handle = s.handle as *mut fid;
        if let Some(a) = &s.src_addr {
            i.src_addr = cmem::memdup(a)?;
            i.src_addrlen = a.len();
        }
        if let Some(a) = &s.dest_addr {
            i.dest_addr = cmem::memdup(a)?;
            i.dest_addrlen = a.len();
        }
        i.tx_attr = cmem::calloc_one()?;
        i.rx_attr = cmem::calloc_one()?;
        i.ep_attr = cmem::calloc_one()?;
        // libfabric 1.20+ (its core and its applications) reads the longer
        // struct of abi::v2, whose prefix is the 1.17 one: allocate that.
        i.domain_attr = cmem::calloc_one::<crate::abi::v2::fi_domain_attr>()? as *mut fi_domain_attr;
        i.fabric_attr = cmem::calloc_one()?;
        // SAFETY: the attribute structs were just allocated and zeroed.
        unsafe {
            *i.tx_attr = tx_attr_c(&s.tx.clone().unwrap_or_default());
        }
        // SAFETY: as above.
        unsafe {
            *i.rx_attr = rx_attr_c(&s.rx.clone().unwrap_or_default());
        }
        let e = s.ep.clone().unwrap_or_default();
        // SAFETY: as above.
        let ea = unsafe { &mut *i.ep_attr };
        ea.r#type = e.ep_type;
        ea.protocol = e.protocol;
        ea.protocol_version = e.protocol_version;
        ea.max_msg_size = e.max_msg_size;
        ea.msg_prefix_size = e.msg_prefix_size;
        ea.max_order_raw_size = e.max_order_raw_size;
        ea.max_order_war_size = e.max_order_war_size;
        ea.max_order_waw_size = e.max_order_waw_size;
        ea.mem_tag_format = e.mem_tag_format;
        ea.tx_ctx_cnt = e.tx_ctx_cnt;
        ea.rx_ctx_cnt = e.rx_ctx_cnt;
        if let Some(k) = &e.auth_key {
            ea.auth_key = cmem::memdup(k)? as *mut u8;
            ea.auth_key_size = k.len();
        }
        let d = s.domain.clone().unwrap_or_default();
        // SAFETY: as above.
        let da = unsafe { &mut *i.domain_attr };
        if let Some(n) = &d.name {
            da.name = cmem::strdup(n)?;
        }
        da.threading = d.threading;
        da.control_progress = d.control_progress;
        da.data_progress = d.data_progress;
        da.resource_mgmt = d.resource_mgmt;
        da.av_type = d.av_type;
        da.mr_mode = d.mr_mode;
        da.mr_key_size = d.mr_key_size;
        da.cq_data_size = d.cq_data_size;
        da.cq_cnt = d.cq_cnt;
        da.ep_cnt = d.ep_cnt;
        da.tx_ctx_cnt = d.tx_ctx_cnt;
        da.rx_ctx_cnt = d.rx_ctx_cnt;
        da.max_ep_tx_ctx = d.max_ep_tx_ctx;
        da.max_ep_rx_ctx = d.max_ep_rx_ctx;
        da.max_ep_stx_ctx = d.max_ep_stx_ctx;
        da.max_ep_srx_ctx = d.max_ep_srx_ctx;
        da.cntr_cnt = d.cntr_cnt;
        da.mr_iov_limit = d.mr_iov_limit;
        da.caps = d.caps;
        da.mode = d.mode;
        if let Some(k) = &d.auth_key {
            da.auth_key = cmem::memdup(k)? as *mut u8;
            da.auth_key_size = k.len();
        }
        da.max_err_data = d.max_err_data;
        da.mr_cnt = d.mr_cnt;
        da.tclass = d.tclass;
        // SAFETY: allocated above with the size of the longer struct, of
        // which `da` (no longer used) covered the prefix.
        let tail = unsafe { &mut *(i.domain_attr as *mut crate::abi::v2::fi_domain_attr) };
        tail.max_ep_auth_key = d.max_ep_auth_key;
        tail.max_group_id = d.max_group_id;
        tail.max_cntr_value = d.max_cntr_value;
        tail.max_err_cntr_value = d.max_err_cntr_value;
        let f = s.fabric.clone().unwrap_or_default();
        // SAFETY: as above.
        let fa = unsafe { &mut *i.fabric_attr };
        if let Some(n) = &f.name {
            fa.name = cmem::strdup(n)?;
        }
        if let Some(n) = &f.prov_name {
            fa.prov_name = cmem::strdup(n)?;
        }
        fa.prov_version = f.prov_version;
        fa.api_version = f.api_version;
        Ok(self.info)
    }
}

/// A C transmit attribute block in Rust form (fi_getinfo's hints,
/// `fi_stx_context`).
pub(crate) fn tx_attr_from_c(t: &fi_tx_attr) -> TxAttr {
    tx_attr_as!(TxAttr, t)
}

/// A C receive attribute block in Rust form (fi_getinfo's hints,
/// `fi_srx_context`).
pub(crate) fn rx_attr_from_c(r: &fi_rx_attr) -> RxAttr {
    rx_attr_as!(RxAttr, r)
}

/// Builds the C list (libc allocations, linked through `next`); on failure
/// frees what was built.
pub(crate) fn info_list_to_c(list: &[Info]) -> Result<*mut fi_info> {
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

/// Frees a list of C infos built by [`Info::to_c`] (what `fi_freeinfo`
/// does, without calling into libfabric — usable in unit tests too).
///
/// # Safety
/// `p` must be NULL or a list whose parts are NULL or libc allocations.
pub(crate) unsafe fn free_c_info(mut p: *mut fi_info) {
    while !p.is_null() {
        // SAFETY: per the contract, every pointer is NULL or owned by libc.
        unsafe {
            let next = (*p).next;
            let i = &*p;
            cmem::free(i.src_addr);
            cmem::free(i.dest_addr);
            cmem::free(i.tx_attr);
            cmem::free(i.rx_attr);
            if !i.ep_attr.is_null() {
                cmem::free((*i.ep_attr).auth_key);
            }
            cmem::free(i.ep_attr);
            if !i.domain_attr.is_null() {
                cmem::free((*i.domain_attr).auth_key);
                cmem::free((*i.domain_attr).name);
            }
            cmem::free(i.domain_attr);
            if !i.fabric_attr.is_null() {
                cmem::free((*i.fabric_attr).name);
                cmem::free((*i.fabric_attr).prov_name);
            }
            cmem::free(i.fabric_attr);
            cmem::free(p);
            p = next;
        }
    }
}

/// The C `fi_tx_attr` of transmit attributes (fi_getinfo's answers, a
/// scalable endpoint's transmit contexts).
pub(crate) fn tx_attr_c(t: &TxAttr) -> fi_tx_attr {
    tx_attr_as!(fi_tx_attr, t)
}

/// The C `fi_rx_attr` of receive attributes (as [`tx_attr_c`]).
pub(crate) fn rx_attr_c(r: &RxAttr) -> fi_rx_attr {
    rx_attr_as!(fi_rx_attr, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_round_trip() {
        let info = Info {
            caps: FI_MSG | FI_TAGGED,
            mode: FI_CONTEXT,
            addr_format: FI_ADDR_STR,
            src_addr: Some(b"abc\0".to_vec()),
            dest_addr: None,
            handle: 0,
            tx: Some(TxAttr {
                inject_size: 64,
                size: 128,
                ..Default::default()
            }),
            rx: Some(RxAttr {
                size: 256,
                ..Default::default()
            }),
            ep: Some(EpAttr {
                ep_type: FI_EP_RDM,
                mem_tag_format: !0,
                ..Default::default()
            }),
            domain: Some(DomainAttr {
                name: Some("shm".into()),
                threading: FI_THREAD_SAFE,
                ..Default::default()
            }),
            fabric: Some(FabricAttr {
                name: Some("rustfab".into()),
                ..Default::default()
            }),
        };
        let c = info.to_c().unwrap();
        // SAFETY: just built by to_c.
        let back = unsafe { Info::from_c(c) }.unwrap();
        assert_eq!(back, info);
        // SAFETY: built by to_c, freed once.
        unsafe { free_c_info(c) };
    }
}
