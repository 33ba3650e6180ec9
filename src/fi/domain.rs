//! The C face of domains: `fi_domain` (from the fabric's ops), the
//! `fid_domain` operations that open AVs, CQs, counters, poll sets and
//! endpoints, `fi_domain_bind`, close, and the raw-key `fi_control`
//! commands (forwarded to `fi/mr.rs`).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::attr::Info;
use crate::core::domain::Domain;
use crate::core::fabric::Fabric;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};

impl FiObject for Domain {
    type Header = fid_domain;
    const CLASS: usize = FI_CLASS_DOMAIN;
}

static DOMAIN_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(domain_close),
    bind: Some(domain_bind),
    control: Some(domain_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: core::mem::size_of::<fi_ops_domain>(),
    av_open: Some(domain_av_open),
    cq_open: Some(domain_cq_open),
    endpoint: Some(domain_endpoint),
    scalable_ep: Some(domain_scalable_ep),
    cntr_open: Some(domain_cntr_open),
    poll_open: Some(domain_poll_open),
    stx_ctx: Some(domain_stx_ctx),
    srx_ctx: Some(domain_srx_ctx),
    query_atomic: Some(domain_query_atomic),
    query_collective: Some(domain_query_collective),
    endpoint2: Some(domain_endpoint2),
};

/// `fi_domain`.
///
/// # Safety
/// `info` must be NULL or a valid `fi_info`.
pub(crate) unsafe fn open(fabric: &Obj<Fabric>, info: *const fi_info, context: *mut c_void) -> Result<*mut fid_domain> {
    // SAFETY: per the contract.
    let info = unsafe { Info::from_c(info) }?;
    let core = Domain::open(&fabric.core, info, fabric.api_version())?;
    let hdr = fid_domain {
        fid: fid {
            fclass: FI_CLASS_DOMAIN,
            context,
            ops: &DOMAIN_FI_OPS,
        },
        ops: &DOMAIN_OPS,
        mr: &fi::mr::MR_OPS,
    };
    Ok(Obj::create(hdr, core))
}

/// Undoes `open` when the out-pointer turned out to be unusable.
pub(crate) fn destroy_unreturned(d: *mut fid_domain) {
    // SAFETY: `d` was just returned by `open` and never reached the caller.
    if let Ok(o) = unsafe { Obj::<Domain>::from_ptr(d as *const c_void) } {
        // SAFETY: nobody else knows the pointer.
        unsafe { Obj::destroy_unshared(o) };
    }
}

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        fi::call_close::<Domain>("domain close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// `fi_control` on a domain: the raw MR key commands (`fi_mr_map_raw`,
/// `fi_mr_unmap_key`) are handled by `mr`; others are -FI_ENOSYS.
unsafe extern "C" fn domain_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control().
    unsafe {
        fi::call_obj::<Domain, c_int>("domain control", f as *const c_void, |o| {
            fi::mr::domain_control(o, command, arg)
        })
    }
}

/// `fi_domain_bind`: an EQ for asynchronous events (`FI_REG_MR`: memory
/// registrations report `FI_MR_COMPLETE` there).
unsafe extern "C" fn domain_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_domain_bind().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_domain_bind", f as *const c_void, |o| {
            // Flags first: a bad flag is -FI_EBADFLAGS whatever `bfid` is.
            if flags & !FI_REG_MR != 0 {
                return Err(Error::BADFLAGS);
            }
            o.core.bind_eq(fi::eq::from_fid(bfid)?, flags)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_av_open(
    d: *mut fid_domain,
    attr: *mut fi_av_attr,
    av: *mut *mut fid_av,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_av_open().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_av_open", d as *const c_void, |o| {
            if av.is_null() {
                return Err(Error::INVAL);
            }
            let (p, map_addr) = fi::av::open(o, fi::read_in(attr)?, ctx)?;
            if let Some(m) = map_addr.filter(|_| (*attr).map_addr.is_null()) {
                (*attr).map_addr = m;
            }
            // fi_av(3): with FI_AV_UNSPEC "The AV type used will be returned
            // through the type field in fi_av_attr."
            (*attr).r#type = crate::core::av::effective_type((*attr).r#type);
            fi::write_out(av, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_cq_open(
    d: *mut fid_domain,
    attr: *mut fi_cq_attr,
    cq: *mut *mut fid_cq,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_cq_open().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_cq_open", d as *const c_void, |o| {
            let attr = fi::read_in(attr)?;
            // Refuse a NULL out-pointer before creating anything (no leak).
            if cq.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::cq::open(o, attr, ctx)?;
            fi::write_out(cq, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_cntr_open(
    d: *mut fid_domain,
    attr: *mut fi_cntr_attr,
    cntr: *mut *mut fid_cntr,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_cntr_open().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_cntr_open", d as *const c_void, |o| {
            let attr = fi::read_in(attr)?;
            // Refuse a NULL out-pointer before creating anything (no leak).
            if cntr.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::cntr::open(o, attr, ctx)?;
            fi::write_out(cntr, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_poll_open(
    d: *mut fid_domain,
    attr: *mut fi_poll_attr,
    pollset: *mut *mut fid_poll,
) -> c_int {
    // SAFETY: arguments come from the application through fi_poll_open().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_poll_open", d as *const c_void, |o| {
            let attr = fi::read_in(attr)?;
            // Refuse a NULL out-pointer before creating anything (no leak).
            if pollset.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::poll::open(o, attr)?;
            fi::write_out(pollset, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_endpoint(
    d: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_endpoint().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_endpoint", d as *const c_void, |o| {
            // Refuse a NULL out-pointer before creating anything (no leak).
            if ep.is_null() {
                return Err(Error::INVAL);
            }
            // SAFETY: NULL or the application's valid fi_info.
            let info = Info::from_c(info)?;
            // The message and tagged tables: the common ones, or those
            // that step over an FI_MSG_PREFIX first (fi/prefix.rs).
            let tables = fi::prefix::tables(&info)?;
            let p = if info.ep.as_ref().is_some_and(|e| e.ep_type == FI_EP_MSG) {
                fi::connected::open(o, &info, ctx, tables)?
            } else if crate::core::dgram::is_dgram(&info) {
                fi::dgram::open(o, &info, ctx, tables)?
            } else {
                fi::ep::open(o, &info, ctx, tables)?
            };
            fi::write_out(ep, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_endpoint2(
    d: *mut fid_domain,
    info: *mut fi_info,
    ep: *mut *mut fid_ep,
    flags: u64,
    ctx: *mut c_void,
) -> c_int {
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    // SAFETY: same arguments as fi_endpoint.
    unsafe { domain_endpoint(d, info, ep, ctx) }
}

/// `fi_scalable_ep` (fi/scalable.rs).
unsafe extern "C" fn domain_scalable_ep(
    d: *mut fid_domain,
    info: *mut fi_info,
    sep: *mut *mut fid_ep,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_scalable_ep().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_scalable_ep", d as *const c_void, |o| {
            if sep.is_null() || info.is_null() {
                return Err(Error::INVAL);
            }
            // SAFETY: the application's valid fi_info.
            let info = Info::from_c(info)?;
            let p = fi::scalable::open(o, &info, ctx)?;
            fi::write_out(sep, p)?;
            Ok(0)
        })
    }
}

/// `fi_stx_context` (fi/shared_ctx.rs).
unsafe extern "C" fn domain_stx_ctx(
    d: *mut fid_domain,
    attr: *mut fi_tx_attr,
    stx: *mut *mut fid_stx,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_stx_context().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_stx_context", d as *const c_void, |o| {
            if stx.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::shared_ctx::open_stx(o, attr, ctx)?;
            fi::write_out(stx, p)?;
            Ok(0)
        })
    }
}

/// `fi_srx_context` (fi/shared_ctx.rs).
unsafe extern "C" fn domain_srx_ctx(
    d: *mut fid_domain,
    attr: *mut fi_rx_attr,
    srx: *mut *mut fid_ep,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_srx_context().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_srx_context", d as *const c_void, |o| {
            if srx.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::shared_ctx::open_srx(o, attr, ctx)?;
            fi::write_out(srx, p)?;
            Ok(0)
        })
    }
}

/// `fi_query_atomic`: the table of `core/atomic.rs` (flags 0,
/// `FI_FETCH_ATOMIC` or `FI_COMPARE_ATOMIC`): `count` elements of `size`
/// bytes at most per call.
unsafe extern "C" fn domain_query_atomic(
    d: *mut fid_domain,
    datatype: u32,
    op: u32,
    attr: *mut fi_atomic_attr,
    flags: u64,
) -> c_int {
    // SAFETY: arguments come from the application through fi_query_atomic().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_query_atomic", d as *const c_void, |_| {
            if attr.is_null() {
                return Err(Error::INVAL);
            }
            let kind = crate::core::atomic::AtomicKind::from_query_flags(flags)?;
            let count = crate::core::atomic::valid(kind, op, datatype)?;
            fi::write_out(
                attr,
                fi_atomic_attr {
                    count,
                    size: crate::core::atomic::datatype_size(datatype),
                },
            )?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn domain_query_collective(
    d: *mut fid_domain,
    _: u32,
    attr: *mut fi_collective_attr,
    _: u64,
) -> c_int {
    // SAFETY: arguments come from the application through fi_query_collective().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_query_collective", d as *const c_void, |_| {
            if attr.is_null() {
                return Err(Error::INVAL);
            }
            Err(Error::OPNOTSUPP)
        })
    }
}
