//! Memory registration (`fi_mr(3)`): memory regions, their keys, and the
//! domain's key → region map that RMA targets will be checked against.
//!
//! # Decisions
//! * **Modes** come from the `mr_mode` of the info passed to `fi_domain`
//!   (docs/abi.md §4.3), normalised by [`effective_mode`]: `FI_MR_BASIC` means
//!   `FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY` ("Basic Memory
//!   Registration"), `FI_MR_SCALABLE` and the pre-1.5 `FI_MR_UNSPEC` mean
//!   none of them.
//! * **Keys**: without `FI_MR_PROV_KEY` the application's `requested_key` is
//!   the key; one already in use is -FI_ENOKEY (`util_mr_map.c` does the
//!   same), one outside `mr_key_size` bytes or equal to `FI_KEY_NOTAVAIL` is
//!   -FI_EKEYREJECTED ("The key may be out of the range supported by the
//!   provider"). With `FI_MR_PROV_KEY` rustfab picks the key: a keyed hash
//!   (SipHash with a per-domain random key) of a counter, so keys are unique
//!   within the domain and not guessable by a peer ("Remote memory keys
//!   provide limited protection against unwanted access").
//! * **Addresses**: without `FI_MR_VIRT_ADDR`, RMA target addresses are
//!   0-based offsets into the region ("accessible by peers starting at a
//!   base address of 0"), counted across the region's iovecs in order; with
//!   it they are virtual addresses that must fall inside registered iovecs.
//!   [`MrMap::verify`] implements both.
//! * **Only host memory**: `iface` is read only when the domain negotiated
//!   `FI_HMEM` ("This field is ignored unless the application has requested
//!   the FI_HMEM capability"); anything but `FI_HMEM_SYSTEM` is then
//!   -FI_ENOSYS. `auth_key*` are read only for API ≥ 1.5 ("This field is
//!   ignored unless the fabric is opened with API version 1.5 or greater");
//!   a non-empty one is -FI_EINVAL (rustfab has no authorization keys).
//!   Fields are read one by one, so an application built against an older
//!   `struct fi_mr_attr` is never read past its end.
//! * **Arguments**: `access` may be 0 or any OR of FI_SEND, FI_RECV,
//!   FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_COLLECTIVE
//!   (others -FI_EINVAL); `offset` "must be 0"; 1 ≤ iov count ≤
//!   [`MR_IOV_LIMIT`]; a NULL base with a non-zero length is -FI_EINVAL;
//!   `flags` may hold FI_RMA_EVENT, anything else is -FI_EBADFLAGS.
//! * **Enabling**: with `FI_MR_ENDPOINT` (or `FI_MR_RMA_EVENT` and the
//!   FI_RMA_EVENT flag) a region starts disabled; `fi_mr_bind` to an
//!   endpoint (flags 0) and `fi_mr_enable` enable it. Binding to an endpoint
//!   without `FI_MR_ENDPOINT` is -FI_EINVAL; binding to a counter is
//!   -FI_ENOSYS ("if the provider does not support reporting events based on
//!   access to registered memory regions"). A disabled region fails
//!   `verify`.
//! * **Raw keys** (`fi_mr_raw_attr`, `fi_mr_map_raw`, `fi_mr_unmap_key`) are
//!   supported for every region, as fi_mr(3) recommends for portable
//!   applications: the raw key is the 8-byte key, little-endian; `base_addr`
//!   is the address a peer adds offsets to (the region's first byte with
//!   `FI_MR_VIRT_ADDR`, else 0). Mapping allocates nothing, so unmapping is
//!   a no-op.
//! * `fi_mr_refresh` succeeds: rustfab never caches page mappings (it copies
//!   or uses `process_vm_*` at transfer time), so there is nothing to update.
//! * **Asynchronous registration**: with an EQ bound to the domain with
//!   `FI_REG_MR`, a successful registration writes `*mr` and then queues
//!   `FI_MR_COMPLETE` (`fi_eq_entry`: fid = the MR, context = the
//!   registration's context). If the EQ refuses the event the registration
//!   is undone and the call fails with the EQ's error.
//! * `fid_mr.mem_desc` is the `fid_mr` pointer itself, so a data-transfer
//!   `desc` can be checked with the same class/magic test as any fid.
//!
//! # Thread safety
//! [`MrMap`] is a `parking_lot::RwLock` around a hash map: `verify` and
//! `get` (data path) take the read lock, registration and close the write
//! lock. An `Mr` is immutable after creation except its enable/bind state
//! (atomics and a mutex).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::domain::Domain;
use crate::core::eq::Eq;
use crate::core::users::{HasUsers, Held, Users};
use crate::fi::{self, noops, FiObject, Obj};
use core::ffi::{c_int, c_void};
use parking_lot::{Mutex, RwLock};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Most iovecs one registration may name (fi_getinfo's `mr_iov_limit`).
pub const MR_IOV_LIMIT: usize = 8;
/// Bytes of an MR key (fi_getinfo's `mr_key_size`).
pub const MR_KEY_SIZE: usize = 8;
/// Access bits a registration may ask for (fi_mr(3) "access").
pub const MR_ACCESS: u64 = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE;
/// Registration flags rustfab accepts.
const REG_FLAGS: u64 = FI_RMA_EVENT;
/// fi_errno.h: `FI_EKEYREJECTED` = EKEYREJECTED.
const EKEYREJECTED: Error = Error(FI_EKEYREJECTED);
#[cfg(test)]
/// fi_errno.h: `FI_EACCES` = EACCES.
const EACCES: Error = Error(FI_EACCES);

/// The registration rules a domain's `mr_mode` amounts to (see the module
/// comment): BASIC expanded, SCALABLE/UNSPEC removed.
pub fn effective_mode(mr_mode: i32) -> i32 {
    let mut m = mr_mode & !(FI_MR_BASIC | FI_MR_SCALABLE);
    if mr_mode & FI_MR_BASIC != 0 {
        m |= FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    }
    m
}

// ---------------------------------------------------------------------------
// Regions and the key map (pure logic)
// ---------------------------------------------------------------------------

/// One registered region: what a peer may touch, and how it addresses it.
#[derive(Debug)]
pub struct Region {
    /// (base address, length) of each registered buffer, in order.
    pub iov: Vec<(usize, usize)>,
    #[cfg_attr(not(test), allow(dead_code))] // checked by `verify` (tests; RMA is not offered yet)
    pub access: u64,
    /// Peers address the region by virtual address (FI_MR_VIRT_ADDR), not
    /// by 0-based offset.
    pub virt_addr: bool,
    enabled: AtomicBool,
}

impl Region {
    pub fn new(iov: Vec<(usize, usize)>, access: u64, virt_addr: bool, enabled: bool) -> Region {
        Region {
            iov,
            access,
            virt_addr,
            enabled: AtomicBool::new(enabled),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.iov.iter().map(|&(_, l)| l).sum()
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    /// The address a peer uses for the region's first byte.
    pub fn base_addr(&self) -> u64 {
        if self.virt_addr {
            self.iov.first().map_or(0, |&(b, _)| b as u64)
        } else {
            0
        }
    }

    #[cfg(test)]
    /// The host memory segments behind `[addr, addr + len)` as a peer names
    /// them, or -FI_EACCES if any byte is outside the region.
    pub fn segments(&self, addr: u64, len: usize) -> Result<Vec<(usize, usize)>> {
        let end = addr.checked_add(len as u64).ok_or(EACCES)?;
        let mut out = Vec::new();
        if self.virt_addr {
            // Virtual addresses: every byte must lie in some registered iov.
            if len == 0 {
                let inside = self
                    .iov
                    .iter()
                    .any(|&(b, l)| addr >= b as u64 && addr <= b as u64 + l as u64);
                return if inside { Ok(out) } else { Err(EACCES) };
            }
            let mut cur = addr;
            while cur < end {
                let &(b, l) = self
                    .iov
                    .iter()
                    .find(|&&(b, l)| cur >= b as u64 && cur < b as u64 + l as u64)
                    .ok_or(EACCES)?;
                let stop = end.min(b as u64 + l as u64);
                out.push((cur as usize, (stop - cur) as usize));
                cur = stop;
            }
            return Ok(out);
        }
        // 0-based offsets across the iovecs in order.
        if end > self.len() as u64 {
            return Err(EACCES);
        }
        let (mut off, mut left) = (addr, len as u64);
        for &(b, l) in &self.iov {
            if left == 0 {
                break;
            }
            let l = l as u64;
            if off >= l {
                off -= l;
                continue;
            }
            let n = left.min(l - off);
            out.push((b + off as usize, n as usize));
            left -= n;
            off = 0;
        }
        Ok(out)
    }
}

/// Which key a registration gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRequest {
    /// FI_MR_PROV_KEY: the provider picks.
    Provider,
    /// The application's `requested_key`, limited to `key_size` bytes.
    App { key: u64, key_size: usize },
}

#[derive(Default)]
struct MapInner {
    regions: HashMap<u64, Arc<Region>>,
    /// Counter fed to `keygen` for provider keys.
    next: u64,
    /// Random per map (std seeds it from the OS).
    keygen: RandomState,
}

/// The domain's key → region map. `is_empty` keeps the domain open while
/// any MR exists; `verify` is what RMA targets will call.
#[derive(Default)]
pub struct MrMap {
    inner: RwLock<MapInner>,
}

impl MrMap {
    pub fn is_empty(&self) -> bool {
        self.inner.read().regions.is_empty()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.read().regions.len()
    }

    /// Adds a region under a key; returns the key.
    pub fn insert(&self, req: KeyRequest, region: Arc<Region>) -> Result<u64> {
        let mut m = self.inner.write();
        let key = match req {
            KeyRequest::App { key, key_size } => {
                let fits = key_size >= 8 || key_size == 0 || key < (1u64 << (8 * key_size));
                if key == FI_KEY_NOTAVAIL || !fits {
                    return Err(EKEYREJECTED);
                }
                if m.regions.contains_key(&key) {
                    // "The requested_key is already in use."
                    return Err(Error::NOKEY);
                }
                key
            }
            KeyRequest::Provider => loop {
                let mut h = m.keygen.build_hasher();
                h.write_u64(m.next);
                m.next = m.next.wrapping_add(1);
                let k = h.finish();
                if k != FI_KEY_NOTAVAIL && !m.regions.contains_key(&k) {
                    break k;
                }
            },
        };
        m.regions.try_reserve(1).map_err(|_| Error::NOMEM)?;
        m.regions.insert(key, region);
        Ok(key)
    }

    pub fn remove(&self, key: u64) -> Result<Arc<Region>> {
        self.inner.write().regions.remove(&key).ok_or(Error::NOKEY)
    }

    #[cfg(test)]
    pub fn get(&self, key: u64) -> Option<Arc<Region>> {
        self.inner.read().regions.get(&key).cloned()
    }

    #[cfg(test)]
    /// Checks a peer's access to `[addr, addr + len)` of the region `key`
    /// and returns the host segments to copy to/from. Unknown key →
    /// -FI_EINVAL; missing access right, disabled region or out of range →
    /// -FI_EACCES (as `util_mr_map.c:ofi_mr_map_verify`).
    pub fn verify(&self, key: u64, addr: u64, len: usize, access: u64) -> Result<Vec<(usize, usize)>> {
        let r = self.get(key).ok_or(Error::INVAL)?;
        if access & r.access != access || !r.is_enabled() {
            return Err(EACCES);
        }
        r.segments(addr, len)
    }
}

// ---------------------------------------------------------------------------
// Registration requests
// ---------------------------------------------------------------------------

/// One registration, whichever call it came through, copied out of C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegRequest {
    pub iov: Vec<(usize, usize)>,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: usize,
    pub iface: u32,
    pub flags: u64,
}

/// The domain facts a registration depends on.
#[derive(Clone, Copy, Debug)]
pub struct RegRules {
    /// Effective mode ([`effective_mode`]).
    pub mode: i32,
    /// `domain_attr->mr_key_size` (0 = 8).
    pub key_size: usize,
}

impl RegRequest {
    /// Argument checks, then the region and key request it amounts to.
    pub fn check(&self, rules: RegRules) -> Result<(Region, KeyRequest)> {
        if self.flags & !REG_FLAGS != 0 {
            return Err(Error::BADFLAGS);
        }
        if self.access & !MR_ACCESS != 0 || self.offset != 0 || self.auth_key_size != 0 {
            return Err(Error::INVAL);
        }
        if self.iov.is_empty() || self.iov.len() > MR_IOV_LIMIT {
            return Err(Error::INVAL);
        }
        for &(b, l) in &self.iov {
            if (b == 0 && l > 0) || b.checked_add(l).is_none() {
                return Err(Error::INVAL);
            }
        }
        if self.iface != FI_HMEM_SYSTEM {
            return Err(Error::NOSYS);
        }
        let m = rules.mode;
        let starts_disabled = m & FI_MR_ENDPOINT != 0 || (m & FI_MR_RMA_EVENT != 0 && self.flags & FI_RMA_EVENT != 0);
        let region = Region::new(
            self.iov.clone(),
            self.access,
            m & FI_MR_VIRT_ADDR != 0,
            !starts_disabled,
        );
        let key = if m & FI_MR_PROV_KEY != 0 {
            KeyRequest::Provider
        } else {
            KeyRequest::App {
                key: self.requested_key,
                key_size: rules.key_size,
            }
        };
        Ok((region, key))
    }
}

// ---------------------------------------------------------------------------
// The MR object
// ---------------------------------------------------------------------------

/// A registered memory region as the application holds it. Its entry in the
/// domain's map lives exactly as long as the object.
pub struct Mr {
    users: Users,
    domain: Held<Domain>,
    pub key: u64,
    pub region: Arc<Region>,
    /// `fi_mr_bind` target (endpoint fid) under FI_MR_ENDPOINT.
    bound_ep: Mutex<Option<usize>>,
    mode: i32,
}

impl FiObject for Mr {
    type Header = fid_mr;
    const CLASS: usize = FI_CLASS_MR;
}

impl HasUsers for Mr {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Mr {}

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
    let dom = &d.core;
    let attr = dom.domain_attr();
    let rules = RegRules {
        mode: effective_mode(dom.mr_mode()),
        key_size: attr.mr_key_size,
    };
    let (region, key_req) = req.check(rules)?;
    let region = Arc::new(region);
    let key = dom.mrs.insert(key_req, region.clone())?;
    let core = Arc::new(Mr {
        users: Users::default(),
        domain: Held::new(dom.clone()),
        key,
        region,
        bound_ep: Mutex::new(None),
        mode: rules.mode,
    });
    let hdr = fid_mr {
        fid: fid {
            fclass: FI_CLASS_MR,
            context: req.context,
            ops: &MR_FI_OPS,
        },
        mem_desc: core::ptr::null_mut(),
        key,
    };
    let p = Obj::create(hdr, core);
    // SAFETY: `p` is the fresh object; nobody else has it yet. The
    // descriptor is the object itself (see the module comment).
    unsafe { (*p).mem_desc = p as *mut c_void };
    // "the mr output parameter will be written before any event associated
    // with the operation may be read by the application"
    // SAFETY: checked non-NULL above; valid per the contract.
    unsafe { out.write(p) };
    let eq: Option<Arc<Eq>> = dom
        .eq
        .lock()
        .as_ref()
        .filter(|(_, flags)| flags & FI_REG_MR != 0)
        .map(|(eq, _)| eq.arc().clone());
    if let Some(eq) = eq {
        let entry = mr_complete_entry(p as *mut fid, req.context);
        // SAFETY: fi_eq_entry is plain data.
        if let Err(e) = eq.push_event(FI_MR_COMPLETE, unsafe { crate::transport::addr::as_bytes(&entry) }) {
            let _ = dom.mrs.remove(key);
            // SAFETY: `p` came from Obj::create above and the failed call
            // means the application must not use it.
            if let Ok(o) = unsafe { Obj::<Mr>::from_ptr(p as *const c_void) } {
                // SAFETY: nothing else uses the object: the failed call
                // tells the application `*mr` is not valid.
                unsafe { Obj::destroy(o) };
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
            context: core::ptr::addr_of!((*attr).context).read(),
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

fn domain_has_hmem(d: &Domain) -> bool {
    (d.info.caps | d.domain_attr().caps) & FI_HMEM != 0
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
                context,
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
                context,
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
            let req = read_attr(attr, d.core.api_version, domain_has_hmem(&d.core), flags)?;
            register(d, req, mr)
        })
    }
}

/// The domain's `fi_ops_mr` (`fid_domain.mr`).
pub static MR_OPS: fi_ops_mr = fi_ops_mr {
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
        fi::call_obj::<Mr, c_int>("mr close", f as *const c_void, |o| {
            // "there must be no opened endpoints or counters associated with the MR"
            o.core.users.check_idle()?;
            let _ = o.core.domain.mrs.remove(o.core.key);
            Obj::destroy(o);
            Ok(0)
        })
    }
}

/// `fi_mr_bind`: "Endpoint bindings are needed if the provider associates
/// memory regions with endpoints (see FI_MR_ENDPOINT)"; counters count RMA
/// events, which rustfab does not generate.
unsafe extern "C" fn mr_bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: arguments come from the application through fi_mr_bind().
    unsafe {
        fi::call_obj::<Mr, c_int>("fi_mr_bind", f as *const c_void, |o| {
            let class = fi::read_in(bfid)?.fclass;
            match class {
                FI_CLASS_EP => {
                    if o.core.mode & FI_MR_ENDPOINT == 0 || flags != 0 {
                        return Err(Error::INVAL);
                    }
                    if o.core.region.is_enabled() {
                        // "After calling fi_mr_enable(), no further resource
                        // bindings may be made to the memory region."
                        return Err(Error::OPBADSTATE);
                    }
                    *o.core.bound_ep.lock() = Some(bfid as usize);
                    Ok(0)
                }
                FI_CLASS_CNTR => Err(Error::NOSYS),
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
        core::ptr::copy_nonoverlapping(mr.key.to_le_bytes().as_ptr(), a.raw_key, MR_KEY_SIZE);
    }
    Ok(0)
}

unsafe extern "C" fn mr_control(f: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: arguments come from the application through fi_control() and
    // its wrappers (fi_mr_enable, fi_mr_refresh, fi_mr_raw_attr).
    unsafe {
        fi::call_obj::<Mr, c_int>("mr control", f as *const c_void, |o| match command {
            FI_ENABLE => {
                if o.core.mode & FI_MR_ENDPOINT != 0 && o.core.bound_ep.lock().is_none() {
                    // "must be bound to an endpoint prior to being enabled"
                    return Err(Error::OPBADSTATE);
                }
                o.core.region.enable();
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
pub unsafe fn domain_control(_d: &Obj<Domain>, command: c_int, arg: *mut c_void) -> Result<c_int> {
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
                m.key.write(u64::from_le_bytes(raw));
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

    fn req(iov: Vec<(usize, usize)>) -> RegRequest {
        RegRequest {
            iov,
            access: FI_REMOTE_READ | FI_REMOTE_WRITE,
            offset: 0,
            requested_key: 0xC0DE,
            context: core::ptr::null_mut(),
            auth_key_size: 0,
            iface: FI_HMEM_SYSTEM,
            flags: 0,
        }
    }
    const SCALABLE: RegRules = RegRules { mode: 0, key_size: 8 };

    #[test]
    fn modes_normalised() {
        assert_eq!(
            effective_mode(FI_MR_BASIC),
            FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY
        );
        assert_eq!(effective_mode(FI_MR_SCALABLE), 0);
        assert_eq!(effective_mode(FI_MR_UNSPEC), 0);
        assert_eq!(
            effective_mode(FI_MR_LOCAL | FI_MR_PROV_KEY),
            FI_MR_LOCAL | FI_MR_PROV_KEY
        );
    }

    #[test]
    fn app_keys_and_duplicates() {
        let m = MrMap::default();
        let r = || Arc::new(Region::new(vec![(0x1000, 16)], 0, false, true));
        let app = |key| KeyRequest::App { key, key_size: 8 };
        assert!(m.is_empty());
        assert_eq!(m.insert(app(7), r()), Ok(7));
        assert_eq!(m.insert(app(7), r()), Err(Error::NOKEY));
        assert_eq!(m.insert(app(FI_KEY_NOTAVAIL), r()), Err(EKEYREJECTED));
        assert_eq!(
            m.insert(
                KeyRequest::App {
                    key: 0x1_0000,
                    key_size: 2
                },
                r()
            ),
            Err(EKEYREJECTED)
        );
        assert_eq!(
            m.insert(
                KeyRequest::App {
                    key: 0xffff,
                    key_size: 2
                },
                r()
            ),
            Ok(0xffff)
        );
        assert_eq!(m.len(), 2);
        assert!(m.remove(7).is_ok());
        assert_eq!(m.remove(7).err(), Some(Error::NOKEY));
        assert_eq!(m.insert(app(7), r()), Ok(7), "a closed key can be reused");
    }

    #[test]
    fn provider_keys_unique() {
        let m = MrMap::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            let k = m
                .insert(KeyRequest::Provider, Arc::new(Region::new(vec![(1, 1)], 0, true, true)))
                .unwrap();
            assert_ne!(k, FI_KEY_NOTAVAIL);
            assert!(seen.insert(k));
        }
        assert_eq!(m.len(), 2000);
        let m2 = MrMap::default();
        let k2 = m2.insert(KeyRequest::Provider, Arc::new(Region::new(vec![(1, 1)], 0, true, true)));
        assert!(!seen.contains(&k2.unwrap()) || m2.len() == 1);
    }

    #[test]
    fn verify_offsets_are_zero_based_without_virt_addr() {
        let m = MrMap::default();
        let base = 0x10_0000usize;
        let k = m
            .insert(
                KeyRequest::App { key: 1, key_size: 8 },
                Arc::new(Region::new(vec![(base, 100)], FI_REMOTE_WRITE, false, true)),
            )
            .unwrap();
        assert_eq!(m.verify(k, 0, 100, FI_REMOTE_WRITE), Ok(vec![(base, 100)]));
        assert_eq!(m.verify(k, 10, 5, FI_REMOTE_WRITE), Ok(vec![(base + 10, 5)]));
        assert_eq!(m.verify(k, 100, 0, FI_REMOTE_WRITE), Ok(vec![]));
        assert_eq!(m.verify(k, 96, 5, FI_REMOTE_WRITE), Err(EACCES));
        assert_eq!(
            m.verify(k, base as u64, 1, FI_REMOTE_WRITE),
            Err(EACCES),
            "not a virtual address"
        );
        assert_eq!(m.verify(k, 0, 1, FI_REMOTE_READ), Err(EACCES), "access not granted");
        assert_eq!(m.verify(k, u64::MAX, 2, FI_REMOTE_WRITE), Err(EACCES), "overflow");
        assert_eq!(m.verify(99, 0, 1, FI_REMOTE_WRITE), Err(Error::INVAL));
    }

    #[test]
    fn verify_virtual_addresses_with_virt_addr() {
        let m = MrMap::default();
        let base = 0x20_0000usize;
        let k = m
            .insert(
                KeyRequest::App { key: 2, key_size: 8 },
                Arc::new(Region::new(vec![(base, 64)], FI_REMOTE_READ, true, true)),
            )
            .unwrap();
        assert_eq!(m.verify(k, base as u64 + 8, 8, FI_REMOTE_READ), Ok(vec![(base + 8, 8)]));
        assert_eq!(
            m.verify(k, 8, 8, FI_REMOTE_READ),
            Err(EACCES),
            "offsets are not addresses"
        );
        assert_eq!(m.verify(k, base as u64 + 60, 8, FI_REMOTE_READ), Err(EACCES));
        assert_eq!(m.get(k).unwrap().base_addr(), base as u64);
    }

    #[test]
    fn verify_spans_iovecs() {
        let r = Region::new(
            vec![(0x1000, 10), (0x5000, 10), (0x100a, 6)],
            FI_REMOTE_READ,
            false,
            true,
        );
        assert_eq!(r.len(), 26);
        assert_eq!(r.segments(5, 10), Ok(vec![(0x1005, 5), (0x5000, 5)]));
        assert_eq!(r.segments(18, 8), Ok(vec![(0x5008, 2), (0x100a, 6)]));
        assert_eq!(r.segments(20, 7), Err(EACCES));
        let v = Region::new(vec![(0x1000, 10), (0x100a, 6), (0x5000, 4)], FI_REMOTE_READ, true, true);
        assert_eq!(v.segments(0x1008, 4), Ok(vec![(0x1008, 2), (0x100a, 2)]));
        assert_eq!(v.segments(0x100e, 4), Err(EACCES), "gap between iovecs");
        assert_eq!(v.segments(0x5000, 4), Ok(vec![(0x5000, 4)]));
        assert_eq!(v.segments(0x5004, 0), Ok(vec![]));
        assert_eq!(v.segments(0x9000, 0), Err(EACCES));
    }

    #[test]
    fn disabled_regions_fail_verify() {
        let m = MrMap::default();
        let r = Arc::new(Region::new(vec![(0x1000, 8)], FI_REMOTE_READ, false, false));
        let k = m.insert(KeyRequest::Provider, r.clone()).unwrap();
        assert_eq!(m.verify(k, 0, 8, FI_REMOTE_READ), Err(EACCES));
        r.enable();
        assert!(m.verify(k, 0, 8, FI_REMOTE_READ).is_ok());
    }

    #[test]
    fn request_checks() {
        assert!(req(vec![(0x1000, 4)]).check(SCALABLE).is_ok());
        let mut r = req(vec![(0x1000, 4)]);
        r.access = 0;
        assert!(
            r.check(SCALABLE).is_ok(),
            "access 0 is allowed (fabtests registers with it)"
        );
        r.access = FI_MSG;
        assert_eq!(r.check(SCALABLE).err(), Some(Error::INVAL));
        let mut r = req(vec![(0x1000, 4)]);
        r.flags = FI_RMA_EVENT;
        assert!(r.check(SCALABLE).is_ok());
        r.flags = 1 << 40;
        assert_eq!(r.check(SCALABLE).err(), Some(Error::BADFLAGS));
        assert_eq!(req(vec![(0, 4)]).check(SCALABLE).err(), Some(Error::INVAL));
        assert!(req(vec![(0, 0)]).check(SCALABLE).is_ok());
        assert_eq!(req(vec![(usize::MAX, 4)]).check(SCALABLE).err(), Some(Error::INVAL));
        assert_eq!(req(vec![]).check(SCALABLE).err(), Some(Error::INVAL));
        assert_eq!(req(vec![(1, 1); 9]).check(SCALABLE).err(), Some(Error::INVAL));
        assert!(req(vec![(1, 1); 8]).check(SCALABLE).is_ok());
        let mut r = req(vec![(1, 1)]);
        r.offset = 4;
        assert_eq!(r.check(SCALABLE).err(), Some(Error::INVAL));
        let mut r = req(vec![(1, 1)]);
        r.iface = 1;
        assert_eq!(r.check(SCALABLE).err(), Some(Error::NOSYS));
        let mut r = req(vec![(1, 1)]);
        r.auth_key_size = 4;
        assert_eq!(r.check(SCALABLE).err(), Some(Error::INVAL));
    }

    #[test]
    fn request_mode_effects() {
        let (region, key) = req(vec![(0x1000, 4)]).check(SCALABLE).unwrap();
        assert!(!region.virt_addr && region.is_enabled());
        assert_eq!(
            key,
            KeyRequest::App {
                key: 0xC0DE,
                key_size: 8
            }
        );
        let basic = RegRules {
            mode: effective_mode(FI_MR_BASIC),
            key_size: 8,
        };
        let (region, key) = req(vec![(0x1000, 4)]).check(basic).unwrap();
        assert!(region.virt_addr);
        assert_eq!(key, KeyRequest::Provider);
        let ep = RegRules {
            mode: FI_MR_ENDPOINT,
            key_size: 8,
        };
        assert!(!req(vec![(0x1000, 4)]).check(ep).unwrap().0.is_enabled());
        let rma_ev = RegRules {
            mode: FI_MR_RMA_EVENT,
            key_size: 8,
        };
        assert!(req(vec![(0x1000, 4)]).check(rma_ev).unwrap().0.is_enabled());
        let mut r = req(vec![(0x1000, 4)]);
        r.flags = FI_RMA_EVENT;
        assert!(!r.check(rma_ev).unwrap().0.is_enabled());
    }

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

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Mr>();
        check::<MrMap>();
        check::<Region>();
    }
}
