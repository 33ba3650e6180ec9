//! Memory registration (`fi_mr(3)`): memory regions, their keys, and the
//! domain's key → region map every RMA target access is checked against.
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
//!   [`MrMap::access`] implements both.
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
//!   without `FI_MR_ENDPOINT` is -FI_EINVAL. Binding to a counter with
//!   `FI_REMOTE_WRITE` and/or `FI_REMOTE_READ` makes it count every remote
//!   write (read) segment done in the region (`Region::count`, called by
//!   the RMA target); the MR's close releases the counter. A disabled region fails
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
//! [`MrMap`] is a `parking_lot::RwLock` around a hash map (`FastMap`: the
//! data path looks a key up for every RMA access and atomic; only the
//! local application inserts keys, so a peer cannot choose colliding ones,
//! and provider keys come from the keyed `keygen`): `verify` and
//! `get` (data path) take the read lock, registration and close the write
//! lock. An `Mr` is immutable after creation except its enable/bind state
//! (atomics and a mutex).

use crate::abi::*;
use crate::base::error::{Error, Result};
use crate::core::cntr::Cntr;
use crate::core::domain::Domain;
use crate::core::mr_map::*;
pub(crate) use crate::core::mr_map::{Addressing, KeyRequest, MrMap, Region, Start, EACCES};
use crate::core::users::{HasUsers, Held, Users};
use parking_lot::Mutex;
use std::sync::Arc;

/// Most iovecs one registration may name (fi_getinfo's `mr_iov_limit`).
pub(crate) const MR_IOV_LIMIT: usize = 8;
/// Bytes of an MR key (fi_getinfo's `mr_key_size`).
pub(crate) const MR_KEY_SIZE: usize = 8;
/// Access bits a registration may ask for (fi_mr(3) "access").
pub(crate) const MR_ACCESS: u64 =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_COLLECTIVE;
/// Registration flags rustfab accepts.
const REG_FLAGS: u64 = FI_RMA_EVENT;

/// The registration rules a domain's `mr_mode` amounts to (see the module
/// comment): BASIC expanded, SCALABLE/UNSPEC removed.
pub(crate) fn effective_mode(mr_mode: i32) -> i32 {
    let mut m = mr_mode & !(FI_MR_BASIC | FI_MR_SCALABLE);
    if mr_mode & FI_MR_BASIC != 0 {
        m |= FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    }
    m
}

// ---------------------------------------------------------------------------
// Registration requests
// ---------------------------------------------------------------------------

/// One registration, whichever call it came through, copied out of C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RegRequest {
    pub(crate) iov: Vec<(usize, usize)>,
    pub(crate) access: u64,
    pub(crate) offset: u64,
    pub(crate) requested_key: u64,
    /// The registration's `context` (an opaque value, the fid's context).
    pub(crate) context: usize,
    pub(crate) auth_key_size: usize,
    pub(crate) iface: u32,
    pub(crate) flags: u64,
}

/// The domain facts a registration depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegRules {
    /// Effective mode ([`effective_mode`]).
    pub(crate) mode: i32,
    /// `domain_attr->mr_key_size` (0 = 8).
    pub(crate) key_size: usize,
}

impl RegRequest {
    /// Argument checks, then the region and key request it amounts to.
    pub(crate) fn check(&self, rules: RegRules) -> Result<(Region, KeyRequest)> {
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
        let addressing = if m & FI_MR_VIRT_ADDR != 0 {
            Addressing::Virtual
        } else {
            Addressing::Offset
        };
        let start = if starts_disabled {
            Start::Disabled
        } else {
            Start::Enabled
        };
        let region = Region::new(self.iov.clone(), self.access, addressing, start);
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
pub(crate) struct Mr {
    users: Users,
    domain: Held<Domain>,
    pub(crate) key: u64,
    pub(crate) region: Arc<Region>,
    /// `fi_mr_bind` target (endpoint fid) under FI_MR_ENDPOINT.
    bound_ep: Mutex<Option<usize>>,
    mode: i32,
}

impl HasUsers for Mr {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Mr {
    /// `fi_mr_reg`/`regv`/`regattr`: checks `req` against `domain`'s rules
    /// and enters the region in the domain's key map.
    pub(crate) fn register(domain: &Arc<Domain>, req: &RegRequest) -> Result<Arc<Mr>> {
        let rules = RegRules {
            mode: effective_mode(domain.mr_mode()),
            key_size: domain.domain_attr().mr_key_size,
        };
        let (region, key_req) = req.check(rules)?;
        let region = Arc::new(region);
        let key = domain.mrs.insert(key_req, region.clone())?;
        Ok(Arc::new(Mr {
            users: Users::default(),
            domain: Held::new(domain.clone()),
            key,
            region,
            bound_ep: Mutex::new(None),
            mode: rules.mode,
        }))
    }

    /// Takes the region out of the domain's map (a registration that
    /// failed after `register`, or a close).
    pub(crate) fn unregister(&self) {
        let _ = self.domain.mrs.remove(self.key);
    }

    /// `fi_close`: "there must be no opened endpoints or counters associated
    /// with the MR".
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        self.unregister();
        // The counters are free to close once the MR is.
        *self.region.cntrs.lock() = RegionCntrs::default();
        Ok(())
    }

    /// `fi_mr_bind` to a counter: `FI_REMOTE_WRITE` ("an event whenever a
    /// remote RMA write ... modifies the memory region") and/or
    /// `FI_REMOTE_READ` (likewise for reads); anything else -FI_EBADFLAGS,
    /// none -FI_EINVAL. A later binding replaces an earlier one.
    pub(crate) fn bind_cntr(&self, cntr: Arc<Cntr>, flags: u64) -> Result<()> {
        if flags & !(FI_REMOTE_WRITE | FI_REMOTE_READ) != 0 {
            return Err(Error::BADFLAGS);
        }
        if flags == 0 {
            return Err(Error::INVAL);
        }
        let mut c = self.region.cntrs.lock();
        if flags & FI_REMOTE_WRITE != 0 {
            c.write = Some(Held::new(cntr.clone()));
        }
        if flags & FI_REMOTE_READ != 0 {
            c.read = Some(Held::new(cntr));
        }
        Ok(())
    }

    /// `fi_mr_bind` to an endpoint (`ep` identifies it): "Endpoint bindings
    /// are needed if the provider associates memory regions with endpoints
    /// (see FI_MR_ENDPOINT)".
    pub(crate) fn bind_ep(&self, ep: usize, flags: u64) -> Result<()> {
        if self.mode & FI_MR_ENDPOINT == 0 || flags != 0 {
            return Err(Error::INVAL);
        }
        if self.region.is_enabled() {
            // "After calling fi_mr_enable(), no further resource bindings
            // may be made to the memory region."
            return Err(Error::OPBADSTATE);
        }
        *self.bound_ep.lock() = Some(ep);
        Ok(())
    }

    /// `fi_mr_enable`.
    pub(crate) fn enable(&self) -> Result<()> {
        if self.mode & FI_MR_ENDPOINT != 0 && self.bound_ep.lock().is_none() {
            // "must be bound to an endpoint prior to being enabled"
            return Err(Error::OPBADSTATE);
        }
        self.region.enable();
        Ok(())
    }

    /// The raw form of the key (`fi_mr_raw_attr`): 8 bytes, little-endian.
    pub(crate) fn raw_key(&self) -> [u8; MR_KEY_SIZE] {
        self.key.to_le_bytes()
    }
}

/// The key behind a raw key (`fi_mr_map_raw`): the inverse of
/// [`Mr::raw_key`]. Mapping allocates nothing, so unmapping is a no-op.
pub(crate) fn key_from_raw(raw: [u8; MR_KEY_SIZE]) -> u64 {
    u64::from_le_bytes(raw)
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
            context: 0,
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
        let r = || Arc::new(Region::new(vec![(0x1000, 16)], 0, Addressing::Offset, Start::Enabled));
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
                .insert(
                    KeyRequest::Provider,
                    Arc::new(Region::new(vec![(1, 1)], 0, Addressing::Virtual, Start::Enabled)),
                )
                .unwrap();
            assert_ne!(k, FI_KEY_NOTAVAIL);
            assert!(seen.insert(k));
        }
        assert_eq!(m.len(), 2000);
        let m2 = MrMap::default();
        let k2 = m2.insert(
            KeyRequest::Provider,
            Arc::new(Region::new(vec![(1, 1)], 0, Addressing::Virtual, Start::Enabled)),
        );
        assert!(!seen.contains(&k2.unwrap()) || m2.len() == 1);
    }

    #[test]
    fn verify_offsets_are_zero_based_without_virt_addr() {
        let m = MrMap::default();
        let base = 0x10_0000usize;
        let k = m
            .insert(
                KeyRequest::App { key: 1, key_size: 8 },
                Arc::new(Region::new(
                    vec![(base, 100)],
                    FI_REMOTE_WRITE,
                    Addressing::Offset,
                    Start::Enabled,
                )),
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
                Arc::new(Region::new(
                    vec![(base, 64)],
                    FI_REMOTE_READ,
                    Addressing::Virtual,
                    Start::Enabled,
                )),
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
            Addressing::Offset,
            Start::Enabled,
        );
        assert_eq!(r.len(), 26);
        assert_eq!(r.segments(5, 10), Ok(vec![(0x1005, 5), (0x5000, 5)]));
        assert_eq!(r.segments(18, 8), Ok(vec![(0x5008, 2), (0x100a, 6)]));
        assert_eq!(r.segments(20, 7), Err(EACCES));
        let v = Region::new(
            vec![(0x1000, 10), (0x100a, 6), (0x5000, 4)],
            FI_REMOTE_READ,
            Addressing::Virtual,
            Start::Enabled,
        );
        assert_eq!(v.segments(0x1008, 4), Ok(vec![(0x1008, 2), (0x100a, 2)]));
        assert_eq!(v.segments(0x100e, 4), Err(EACCES), "gap between iovecs");
        assert_eq!(v.segments(0x5000, 4), Ok(vec![(0x5000, 4)]));
        assert_eq!(v.segments(0x5004, 0), Ok(vec![]));
        assert_eq!(v.segments(0x9000, 0), Err(EACCES));
    }

    #[test]
    fn disabled_regions_fail_verify() {
        let m = MrMap::default();
        let r = Arc::new(Region::new(
            vec![(0x1000, 8)],
            FI_REMOTE_READ,
            Addressing::Offset,
            Start::Disabled,
        ));
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
        assert!(region.addressing == Addressing::Offset && region.is_enabled());
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
        assert_eq!(region.addressing, Addressing::Virtual);
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
    fn registration_enable_bind_and_close() {
        let f = crate::core::fabric::Fabric::open(None, Default::default()).unwrap();
        let info = crate::core::attr::Info {
            domain: Some(crate::core::attr::DomainAttr {
                mr_mode: FI_MR_ENDPOINT | FI_MR_PROV_KEY,
                ..Default::default()
            }),
            ..Default::default()
        };
        let d = Domain::open(&f, info, crate::core::fabric::API_VERSION).unwrap();
        let mr = Mr::register(&d, &req(vec![(0x1000, 64)])).unwrap();
        assert!(!d.mrs.is_empty() && !mr.region.is_enabled());
        assert_eq!(mr.enable(), Err(Error::OPBADSTATE), "FI_MR_ENDPOINT: bind first");
        assert_eq!(mr.bind_ep(7, 1), Err(Error::INVAL));
        mr.bind_ep(7, 0).unwrap();
        mr.enable().unwrap();
        assert_eq!(mr.bind_ep(7, 0), Err(Error::OPBADSTATE));
        assert_eq!(key_from_raw(mr.raw_key()), mr.key);
        assert_eq!(d.close(), Err(Error::BUSY), "an MR keeps its domain open");
        mr.close().unwrap();
        assert!(d.mrs.is_empty());
        drop(mr);
        d.close().unwrap();
        // Without FI_MR_ENDPOINT, binding to an endpoint is -FI_EINVAL.
        let d = Domain::open(&f, Default::default(), crate::core::fabric::API_VERSION).unwrap();
        let mr = Mr::register(&d, &req(vec![(0x1000, 64)])).unwrap();
        assert!(mr.region.is_enabled());
        assert_eq!(mr.bind_ep(7, 0), Err(Error::INVAL));
        assert_eq!(mr.key, 0xC0DE, "the application's key");
        assert_eq!(Mr::register(&d, &req(vec![(0x2000, 8)])).err(), Some(Error::NOKEY));
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Mr>();
        check::<MrMap>();
        check::<Region>();
    }
}
