//! A domain's memory regions as the data path sees them: a [`Region`]
//! (the registered iovecs, access rights, bound counters) and the
//! [`MrMap`] from keys to regions that RMA and atomic accesses are checked
//! against. The MR object (`fi_mr_reg` and its calls) is `mr.rs`.

use crate::abi::*;
use crate::base::collections::FastMap;
use crate::base::error::{Error, Result};
use crate::core::cntr::Cntr;
use crate::core::users::Held;
use crate::transport::iov::IovList;
use parking_lot::{Mutex, RwLock};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// fi_errno.h: `FI_EKEYREJECTED` = EKEYREJECTED.
pub(crate) const EKEYREJECTED: Error = Error(FI_EKEYREJECTED);
/// fi_errno.h: `FI_EACCES` = EACCES.
pub(crate) const EACCES: Error = Error(FI_EACCES);

// ---------------------------------------------------------------------------
// Regions and the key map (pure logic)
// ---------------------------------------------------------------------------

/// How peers name a region's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Addressing {
    /// `FI_MR_VIRT_ADDR`: by virtual address, inside the registered iovecs.
    Virtual,
    /// By 0-based offset, counted across the iovecs in order.
    Offset,
}

/// Whether a region takes accesses from the start or only after
/// `fi_mr_enable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    Enabled,
    Disabled,
}

/// Counters bound to a region (`fi_mr_bind` with a counter).
#[derive(Default)]
pub(crate) struct RegionCntrs {
    pub(crate) write: Option<Held<Cntr>>,
    pub(crate) read: Option<Held<Cntr>>,
}

/// One registered region: what a peer may touch, and how it addresses it.
pub(crate) struct Region {
    /// (base address, length) of each registered buffer, in order.
    pub(crate) iov: Vec<(usize, usize)>,
    pub(crate) access: u64,
    pub(crate) addressing: Addressing,
    enabled: AtomicBool,
    /// Counted when a remote write (read) of a segment in the region is
    /// done; taken out when the MR closes.
    pub(crate) cntrs: Mutex<RegionCntrs>,
}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Region")
            .field("iov", &self.iov)
            .field("access", &self.access)
            .field("addressing", &self.addressing)
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Region {
    pub(crate) fn new(iov: Vec<(usize, usize)>, access: u64, addressing: Addressing, start: Start) -> Region {
        Region {
            iov,
            access,
            addressing,
            enabled: AtomicBool::new(start == Start::Enabled),
            cntrs: Mutex::new(RegionCntrs::default()),
        }
    }

    /// A remote write (`FI_REMOTE_WRITE`) or read (`FI_REMOTE_READ`) of a
    /// segment in the region is done: its bound counter counts it.
    pub(crate) fn count(&self, access: u64) {
        let c = self.cntrs.lock();
        let cntr = if access == FI_REMOTE_WRITE { &c.write } else { &c.read };
        if let Some(cntr) = cntr {
            cntr.inc();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.iov.iter().map(|&(_, l)| l).sum()
    }

    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    pub(crate) fn enable(&self) {
        self.enabled.store(true, Ordering::Release);
    }

    /// The address a peer uses for the region's first byte.
    pub(crate) fn base_addr(&self) -> u64 {
        if self.addressing == Addressing::Virtual {
            self.iov.first().map_or(0, |&(b, _)| b as u64)
        } else {
            0
        }
    }

    /// The host memory behind `[addr, addr + len)` as a peer names it, or
    /// -FI_EACCES if any byte is outside the region. A region has at most
    /// [`MR_IOV_LIMIT`] buffers, so the pieces fit an [`IovList`].
    pub(crate) fn range(&self, addr: u64, len: usize) -> Result<IovList> {
        let end = addr.checked_add(len as u64).ok_or(EACCES)?;
        let mut out = IovList::new();
        if self.addressing == Addressing::Virtual {
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
                if !out.push(cur as usize, (stop - cur) as usize) {
                    return Err(EACCES);
                }
                cur = stop;
            }
            return Ok(out);
        }
        // 0-based offsets across the iovecs in order.
        let total: u64 = self.iov.iter().map(|&(_, l)| l as u64).sum();
        if end > total {
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
            if !out.push(b + off as usize, n as usize) {
                return Err(EACCES);
            }
            left -= n;
            off = 0;
        }
        Ok(out)
    }

    #[cfg(test)]
    /// [`Region::range`] as a vector of (address, length).
    pub(crate) fn segments(&self, addr: u64, len: usize) -> Result<Vec<(usize, usize)>> {
        self.range(addr, len).map(|l| l.segments().to_vec())
    }
}

/// Which key a registration gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyRequest {
    /// FI_MR_PROV_KEY: the provider picks.
    Provider,
    /// The application's `requested_key`, limited to `key_size` bytes.
    App { key: u64, key_size: usize },
}

#[derive(Default)]
struct MapInner {
    regions: FastMap<u64, Arc<Region>>,
    /// Counter fed to `keygen` for provider keys.
    next: u64,
    /// Random per map (std seeds it from the OS).
    keygen: RandomState,
}

/// The domain's key → region map. `is_empty` keeps the domain open while
/// any MR exists; `access` is what RMA targets call.
#[derive(Default)]
pub(crate) struct MrMap {
    inner: RwLock<MapInner>,
}

impl MrMap {
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.read().regions.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.read().regions.len()
    }

    /// Adds a region under a key; returns the key.
    pub(crate) fn insert(&self, req: KeyRequest, region: Arc<Region>) -> Result<u64> {
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

    pub(crate) fn remove(&self, key: u64) -> Result<Arc<Region>> {
        self.inner.write().regions.remove(&key).ok_or(Error::NOKEY)
    }

    #[cfg(test)]
    pub(crate) fn get(&self, key: u64) -> Option<Arc<Region>> {
        self.inner.read().regions.get(&key).cloned()
    }

    /// Checks a peer's access to `[addr, addr + len)` of the region `key`
    /// and returns the host memory to copy to/from: what an RMA target
    /// calls before every access (docs/rma.md). Unknown key → -FI_EINVAL;
    /// missing access right, disabled region or out of range → -FI_EACCES
    /// (as `util_mr_map.c:ofi_mr_map_verify`).
    pub(crate) fn access(&self, key: u64, addr: u64, len: usize, access: u64) -> Result<IovList> {
        let m = self.inner.read();
        let r = m.regions.get(&key).ok_or(Error::INVAL)?;
        if access & r.access != access || !r.is_enabled() {
            return Err(EACCES);
        }
        r.range(addr, len)
    }

    /// Counts a finished remote access (`FI_REMOTE_WRITE`/`FI_REMOTE_READ`)
    /// on the counter bound to `key`'s region, if any.
    pub(crate) fn count(&self, key: u64, access: u64) {
        if let Some(r) = self.inner.read().regions.get(&key) {
            r.count(access);
        }
    }

    #[cfg(test)]
    /// [`MrMap::access`] as a vector of (address, length).
    pub(crate) fn verify(&self, key: u64, addr: u64, len: usize, access: u64) -> Result<Vec<(usize, usize)>> {
        self.access(key, addr, len, access).map(|l| l.segments().to_vec())
    }
}
