//! The C face of the fabric: `provider->fabric()` (`fi_fabric`), the
//! `fid_fabric` operations that open domains, passive endpoints, EQs and
//! wait sets, and `fi_trywait`, which dispatches on each fid's class.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::fabric::Fabric;
use crate::core::settings::Settings;
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};

impl FiObject for Fabric {
    const CLOSE: &'static str = "fabric close";
    type Header = fid_fabric;
    const CLASS: usize = FI_CLASS_FABRIC;
}

static FABRIC_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(fi::close_when_idle::<Fabric>),
    bind: Some(noops::no_bind),
    control: Some(noops::no_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: core::mem::size_of::<fi_ops_fabric>(),
    domain: Some(fabric_domain),
    passive_ep: Some(fabric_passive_ep),
    eq_open: Some(fabric_eq_open),
    wait_open: Some(fabric_wait_open),
    trywait: Some(fabric_trywait),
    domain2: Some(fabric_domain2),
};

/// `provider->fabric()`: opens a fabric for an attr from fi_getinfo.
pub(crate) fn open(attr: &fi_fabric_attr, context: *mut c_void, settings: Settings) -> Result<*mut fid_fabric> {
    // SAFETY: libfabric checked `name` is non-NULL; it is NUL-terminated.
    let name = unsafe { fi::cmem::opt_str(attr.name) }?;
    let core = Fabric::open(name, settings)?;
    let hdr = fid_fabric {
        fid: fid {
            fclass: FI_CLASS_FABRIC,
            context,
            ops: &FABRIC_FI_OPS,
        },
        ops: &FABRIC_OPS,
        // libfabric stores the application's API version here after we return.
        api_version: 0,
    };
    Ok(Obj::create(hdr, core))
}

impl Obj<Fabric> {
    /// The API version the application asked for (written by libfabric after
    /// `fi_fabric` returned, so read lazily).
    pub(crate) fn api_version(&self) -> u32 {
        Fabric::api_version(self.hdr.api_version)
    }
}

unsafe extern "C" fn fabric_domain(
    f: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_domain().
    unsafe {
        fi::call_obj::<Fabric, c_int>("fi_domain", f as *const c_void, |o| {
            // Refuse a NULL out-pointer before creating anything (no leak).
            if dom.is_null() {
                return Err(Error::INVAL);
            }
            let d = fi::domain::open(o, info, context)?;
            if let Err(e) = fi::write_out(dom, d) {
                fi::domain::destroy_unreturned(d);
                return Err(e);
            }
            Ok(0)
        })
    }
}

unsafe extern "C" fn fabric_domain2(
    f: *mut fid_fabric,
    info: *mut fi_info,
    dom: *mut *mut fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    // SAFETY: same arguments as fi_domain.
    unsafe { fabric_domain(f, info, dom, context) }
}

unsafe extern "C" fn fabric_passive_ep(
    f: *mut fid_fabric,
    info: *mut fi_info,
    pep: *mut *mut fid_pep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_passive_ep().
    unsafe {
        fi::call_obj::<Fabric, c_int>("fi_passive_ep", f as *const c_void, |o| {
            // Refuse a NULL out-pointer before creating anything (no leak).
            if pep.is_null() {
                return Err(Error::INVAL);
            }
            let p = fi::pep::open(o, info, context)?;
            fi::write_out(pep, p)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn fabric_eq_open(
    f: *mut fid_fabric,
    attr: *mut fi_eq_attr,
    eq: *mut *mut fid_eq,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_eq_open().
    unsafe {
        fi::call_obj::<Fabric, c_int>("fi_eq_open", f as *const c_void, |o| {
            let attr = fi::read_in(attr)?;
            // Refuse a NULL out-pointer before creating anything (no leak).
            if eq.is_null() {
                return Err(Error::INVAL);
            }
            let e = fi::eq::open(o, attr, context)?;
            fi::write_out(eq, e)?;
            Ok(0)
        })
    }
}

unsafe extern "C" fn fabric_wait_open(
    f: *mut fid_fabric,
    attr: *mut fi_wait_attr,
    waitset: *mut *mut fid_wait,
) -> c_int {
    // SAFETY: arguments come from the application through fi_wait_open().
    unsafe {
        fi::call_obj::<Fabric, c_int>("fi_wait_open", f as *const c_void, |o| {
            let attr = fi::read_in(attr)?;
            // Refuse a NULL out-pointer before creating anything (no leak).
            if waitset.is_null() {
                return Err(Error::INVAL);
            }
            let w = fi::wait::open(o, attr)?;
            fi::write_out(waitset, w)?;
            Ok(0)
        })
    }
}

/// `fi_trywait`: Ok only if every object may be blocked on now.
unsafe extern "C" fn fabric_trywait(f: *mut fid_fabric, fids: *mut *mut fid, count: c_int) -> c_int {
    // SAFETY: arguments come from the application through fi_trywait().
    unsafe {
        fi::call_obj::<Fabric, c_int>("fi_trywait", f as *const c_void, |_| {
            if count < 0 {
                return Err(Error::INVAL);
            }
            let fids = fi::slice_in(fids, count as usize)?;
            for &p in fids {
                match fi::class_of(p)? {
                    FI_CLASS_CQ => fi::cq::from_fid(p)?.trywait()?,
                    FI_CLASS_EQ => fi::eq::from_fid(p)?.trywait()?,
                    FI_CLASS_CNTR => fi::cntr::from_fid(p)?.trywait()?,
                    FI_CLASS_WAIT => fi::wait::trywait_fid(p)?,
                    _ => return Err(Error::INVAL),
                }
            }
            Ok(0)
        })
    }
}
