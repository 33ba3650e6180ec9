//! The C face of memory registration: the domain's `fi_ops_mr`
//! (`fi_mr_reg`, `regv`, `regattr`: each reads its C arguments into a
//! [`RegRequest`], `fi_mr_attr` field by field as the application's API
//! version defines it), the `fid_mr` operations (close, bind, enable,
//! refresh, raw keys), the domain's raw-key commands and the
//! `FI_MR_COMPLETE` event of asynchronous registration.

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::domain::Domain;
use crate::core::mr::{key_from_raw, Mr, RegRequest, MR_IOV_LIMIT, MR_KEY_SIZE};
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};

impl FiObject for Mr {
    type Header = fid_mr;
    const CLASS: usize = FI_CLASS_MR;
}

/// The `FI_MR_COMPLETE` event for an MR (`struct fi_eq_entry`).
fn mr_complete_entry(mr: *mut fid, context: *mut c_void) -> fi_eq_entry {
    fi_eq_entry {
        fid: mr,
        context,
        data: 0,
    }
}

/// Registers `req` in domain `d` and hands the MR to the application.
///
/// # Safety
/// `out` must be NULL or valid for a write of one pointer.
unsafe fn register(d: &Obj<Domain>, req: RegRequest, out: *mut *mut fid_mr) -> Result<c_int> {
    if out.is_null() {
        return Err(Error::INVAL);
    }
    let core = Mr::register(&d.core, &req)?;
    let key = core.key;
    let context = req.context as *mut c_void;
    let hdr = fid_mr {
        fid: fid {
            fclass: FI_CLASS_MR,
            context,
            ops: &MR_FI_OPS,
        },
        mem_desc: core::ptr::null_mut(),
        key,
    };
    let p = Obj::create(hdr, core.clone());
    // SAFETY: `p` is the fresh object; nobody else has it yet. The
    // descriptor is the object itself (see the module comment).
    unsafe { (*p).mem_desc = p as *mut c_void };
    // "the mr output parameter will be written before any event associated
    // with the operation may be read by the application"
    // SAFETY: checked non-NULL above; valid per the contract.
    unsafe { out.write(p) };
    if let Some(eq) = d.core.reg_mr_eq() {
        let entry = mr_complete_entry(p as *mut fid, context);
        // SAFETY: fi_eq_entry is plain data.
        if let Err(e) = eq.push_event(FI_MR_COMPLETE, unsafe { crate::transport::addr::as_bytes(&entry) }) {
            core.unregister();
            // SAFETY: `p` came from Obj::create above and the failed call
            // means the application must not use it.
            if let Ok(o) = unsafe { Obj::<Mr>::from_ptr(p as *const c_void) } {
                // SAFETY: nothing else uses the object: the failed call
                // tells the application `*mr` is not valid.
                unsafe { Obj::destroy_unshared(o) };
            }
            return Err(e);
        }
    }
    Ok(0)
}

/// Reads the fields of an application's `fi_mr_attr` its API version has.
///
/// # Safety
/// `attr` must be NULL or point to a `struct fi_mr_attr` of the layout of
/// `api_version` (at least up to `auth_key` for ≥ 1.5, and `iface` when
/// `hmem` is set); `mr_iov` valid for `iov_count` entries (when that count
/// is within [`MR_IOV_LIMIT`]).
unsafe fn read_attr(attr: *const fi_mr_attr, api_version: u32, hmem: bool, flags: u64) -> Result<RegRequest> {
    if attr.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY (all reads below): field by field, never past what the
    // application's struct version contains.
    unsafe {
        let count = core::ptr::addr_of!((*attr).iov_count).read();
        let iov_p = core::ptr::addr_of!((*attr).mr_iov).read();
        let iov = read_iov(iov_p, count)?;
        let auth_key_size = if api_version >= fi_version(1, 5) {
            core::ptr::addr_of!((*attr).auth_key_size).read()
        } else {
            0
        };
        let iface = if hmem {
            core::ptr::addr_of!((*attr).iface).read()
        } else {
            FI_HMEM_SYSTEM
        };
        Ok(RegRequest {
            iov,
            access: core::ptr::addr_of!((*attr).access).read(),
            offset: core::ptr::addr_of!((*attr).offset).read(),
            requested_key: core::ptr::addr_of!((*attr).requested_key).read(),
            context: core::ptr::addr_of!((*attr).context).read() as usize,
            auth_key_size,
            iface,
            flags,
        })
    }
}

/// Copies an iovec array (count 0 or above the limit: -FI_EINVAL, before
/// anything is read).
///
/// # Safety
/// `iov` must be NULL or valid for `count` iovecs when count ≤ the limit.
unsafe fn read_iov(iov: *const libc::iovec, count: usize) -> Result<Vec<(usize, usize)>> {
    if count == 0 || count > MR_IOV_LIMIT {
        return Err(Error::INVAL);
    }
    // SAFETY: per the contract.
    let s = unsafe { fi::slice_in(iov, count) }?;
    Ok(s.iter().map(|v| (v.iov_base as usize, v.iov_len)).collect())
}

unsafe extern "C" fn reg(
    f: *mut fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_mr_reg().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_mr_reg", f as *const c_void, |d| {
            let req = RegRequest {
                iov: vec![(buf as usize, len)],
                access,
                offset,
                requested_key,
                context: context as usize,
                auth_key_size: 0,
                iface: FI_HMEM_SYSTEM,
                flags,
            };
            register(d, req, mr)
        })
    }
}

unsafe extern "C" fn regv(
    f: *mut fid,
    iov: *const libc::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: arguments come from the application through fi_mr_regv().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_mr_regv", f as *const c_void, |d| {
            let req = RegRequest {
                iov: read_iov(iov, count)?,
                access,
                offset,
                requested_key,
                context: context as usize,
                auth_key_size: 0,
                iface: FI_HMEM_SYSTEM,
                flags,
            };
            register(d, req, mr)
        })
    }
}

unsafe extern "C" fn regattr(f: *mut fid, attr: *const fi_mr_attr, flags: u64, mr: *mut *mut fid_mr) -> c_int {
    // SAFETY: arguments come from the application through fi_mr_regattr().
    unsafe {
        fi::call_obj::<Domain, c_int>("fi_mr_regattr", f as *const c_void, |d| {
            let req = read_attr(attr, d.core.api_version, d.core.has_hmem(), flags)?;
            register(d, req, mr)
        })
    }
}

/// The domain's `fi_ops_mr` (`fid_domain.mr`).
pub(crate) static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: core::mem::size_of::<fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};

static MR_FI_OPS: fi_ops = fi_ops {
    size: core::mem::size_of::<fi_ops>(),
    close: Some(mr_close),
    bind: Some(mr_bind),
    control: Some(mr_control),
    ops_open: Some(noops::no_ops_open),
    tostr: Some(noops::no_tostr),
    ops_set: Some(noops::no_ops_set),
};

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    // SAFETY: `f` comes from the application as this object's fid.
    unsafe {
        fi::call_close::<Mr>("mr close", f as *const c_void, |o| {
            o.core.close()?;
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// `fi_mr_bind`: "Endpoint bindings are needed if the provider associates
/// memory regions with endpoints (see FI_MR_ENDPOINT)"; a counter counts
/// the remote writes (`FI_REMOTE_WRITE`) and reads (`FI_REMOTE_READ`) done
/// in the region (core/mr.rs `bind_cntr`).
unsafe extern "C" fn mr_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_mr_bind().
    unsafe {
        fi::call_obj::<Mr, c_int>("fi_mr_bind", f as *const c_void, |o| {
            let class = fi::class_of(bfid)?;
            match class {
                FI_CLASS_EP => {
                    o.core.bind_ep(bfid as usize, flags)?;
                    Ok(0)
                }
                FI_CLASS_CNTR => {
                    o.core.bind_cntr(fi::cntr::from_fid(bfid)?, flags)?;
                    Ok(0)
                }
                _ => Err(Error::INVAL),
            }
        })
    }
}

/// Writes the raw form of an MR's key (`fi_mr_raw_attr`): -FI_ETOOSMALL
/// with `*key_size` = 8 when the buffer is smaller.
///
/// # Safety
/// `a` must be NULL or a valid `fi_mr_raw_attr` whose non-NULL pointers are
/// valid (`raw_key` for `*key_size` bytes).
unsafe fn get_raw(mr: &Mr, a: *mut fi_mr_raw_attr) -> Result<c_int> {
    // SAFETY: per the contract.
    let a = unsafe { fi::read_in(a) }?;
    if a.flags != 0 {
        return Err(Error::BADFLAGS);
    }
    if a.key_size.is_null() || a.base_addr.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: non-NULL pointers of a valid attr.
    unsafe {
        let cap = *a.key_size;
        a.key_size.write(MR_KEY_SIZE);
        a.base_addr.write(mr.region.base_addr());
        if cap < MR_KEY_SIZE {
            // "If the actual key is larger than what can fit into the
            // buffer, it will return -FI_ETOOSMALL."
            return Err(Error::TOOSMALL);
        }
        if a.raw_key.is_null() {
            return Err(Error::INVAL);
        }
        core::ptr::copy_nonoverlapping(mr.raw_key().as_ptr(), a.raw_key, MR_KEY_SIZE);
    }
    Ok(0)
}

unsafe extern "C" fn mr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control() and
    // its wrappers (fi_mr_enable, fi_mr_refresh, fi_mr_raw_attr).
    unsafe {
        fi::call_obj::<Mr, c_int>("mr control", f as *const c_void, |o| match command {
            FI_ENABLE => {
                o.core.enable()?;
                Ok(0)
            }
            FI_REFRESH => {
                let m = fi::read_in(arg as *const fi_mr_modify)?;
                if m.flags != 0 {
                    return Err(Error::BADFLAGS);
                }
                Ok(0)
            }
            FI_GET_RAW_MR => get_raw(&o.core, arg as *mut fi_mr_raw_attr),
            _ => Err(Error::NOSYS),
        })
    }
}

/// `fi_mr_map_raw` / `fi_mr_unmap_key` (domain `fi_control` commands; the
/// domain's control slot forwards every command here).
///
/// # Safety
/// `arg` must be NULL or point to the command's argument struct.
pub(crate) unsafe fn domain_control(_d: &Obj<Domain>, command: c_int, arg: *mut c_void) -> Result<c_int> {
    match command {
        FI_MAP_RAW_MR => {
            // SAFETY: per the contract.
            let m = unsafe { fi::read_in(arg as *const fi_mr_map_raw) }?;
            if m.flags != 0 {
                return Err(Error::BADFLAGS);
            }
            if m.key_size != MR_KEY_SIZE || m.raw_key.is_null() || m.key.is_null() {
                return Err(Error::INVAL);
            }
            let mut raw = [0u8; MR_KEY_SIZE];
            // SAFETY: raw_key holds key_size = 8 bytes; key is writable.
            unsafe {
                core::ptr::copy_nonoverlapping(m.raw_key, raw.as_mut_ptr(), MR_KEY_SIZE);
                m.key.write(key_from_raw(raw));
            }
            Ok(0)
        }
        FI_UNMAP_KEY => {
            // SAFETY: per the contract (a `uint64_t *`).
            unsafe { fi::read_in(arg as *const u64) }?;
            Ok(0)
        }
        _ => Err(Error::NOSYS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mr_complete_event_layout() {
        let mut ctx = 5u32;
        let e = mr_complete_entry(0x1234 as *mut fid, &mut ctx as *mut u32 as *mut c_void);
        // SAFETY: plain data.
        let b = unsafe { crate::transport::addr::as_bytes(&e) };
        assert_eq!(b.len(), 24);
        assert_eq!(&b[0..8], &0x1234usize.to_ne_bytes());
        assert_eq!(&b[16..24], &0u64.to_ne_bytes());
    }
}
