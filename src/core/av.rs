//! Address vectors (`fi_av(3)`): the table that turns endpoint addresses
//! into the `fi_addr_t` values used on the data path.
//!
//! # Decisions (each one documented in `fi_av(3)` terms)
//! * **One table for both types.** `FI_AV_TABLE` and `FI_AV_MAP` both hand
//!   out indices: the n-th successful insertion into an AV gets `fi_addr`
//!   n, counted across calls from 0, exactly as `FI_AV_TABLE` requires. For
//!   `FI_AV_MAP` the value is opaque to the application anyway; indices are
//!   stable and cheap to look up. `FI_AV_UNSPEC` picks `FI_AV_TABLE` and is
//!   reported back through `attr->type` ("The AV type used will be returned
//!   through the type field"). The domain's `av_type` does not restrict the
//!   type: rustfab supports both everywhere.
//! * **Removed slots are tombstones, never reused.** An endpoint may still
//!   have traffic in flight to or from a removed peer; a reused index would
//!   silently redirect it to a different peer. fi_av(3) allows this ("Since
//!   fi_av_remove is provider-specific ... it may be difficult to determine
//!   what the next assigned index will be"). A tombstone costs one slot.
//! * **Duplicates are new entries.** Inserting an address that is already in
//!   the AV gives it a new index (fi_av(3) leaves duplicates undefined). With
//!   `FI_AV_TABLE`, index = insertion order is a promise applications (MPI:
//!   rank = index, and its own address is in the list) rely on, so returning
//!   the old index would break them. The reverse lookup (`FI_SOURCE`) answers
//!   with the oldest live entry for an address.
//! * **Address formats** follow the domain's transport: an shm domain takes
//!   `FI_ADDR_STR` names (`fi_rustfab_shm://<16 hex>`), packed back to back
//!   and walked by `strlen + 1` as libfabric's own shm provider does (the
//!   man page's "array of strings (char **)" sentence is not what any
//!   provider implements); a tcp domain takes `sockaddr_in` / `sockaddr_in6`
//!   packed at the size of the domain's `addr_format` (`FI_SOCKADDR`: the
//!   size of the first entry's family, as libfabric's util AV does), or
//!   `fi_sockaddr_in[6]://` strings if the domain was opened with
//!   `FI_ADDR_STR`. An address of the wrong transport, garbage, a zero shm
//!   token, a zero port or an unspecified/multicast IP is a failed entry.
//! * **Named (shared) AVs** (a non-NULL `name`) live in a shm object of
//!   this user (core/av_shared.rs): the creator inserts, `FI_READ` openers
//!   see its entries under the same `fi_addr` values and `map_addr`.
//!   `FI_READ` without a name is -FI_EINVAL.
//! * **Asynchronous mode**: when the AV was opened with `FI_EVENT` (an EQ
//!   must then be bound first, else -FI_ENOEQ) or an EQ is bound, every
//!   insert call returns 0 and reports one `fi_eq_err_entry` per failed
//!   address (`data` = its index in the call) followed by one
//!   `FI_AV_COMPLETE` `fi_eq_entry` (`data` = number inserted). Insertion
//!   itself is done before the call returns, so `fi_addr` is final then. If
//!   the EQ cannot take an event (full), the call returns that error; the
//!   addresses it inserted stay inserted.
//! * `fi_av_lookup` copies `min(*addrlen, needed)` bytes, sets `*addrlen` to
//!   the needed size and returns 0 even when truncated (fi_av(3); libfabric's
//!   util and shm AVs do the same). A truncated string address is still
//!   NUL-terminated, as shm's lookup does.
//! * `fi_av_straddr` returns NULL for an address it cannot decode in the
//!   AV's format (like libfabric's `ofi_straddr`), `buf` otherwise.
//!
//! # Thread safety
//! `Av` is `Send + Sync`. The table sits behind a `parking_lot::RwLock`:
//! the data-path lookups (`lookup_addr`, `reverse_lookup`) take the read
//! lock and may run concurrently from any number of threads; insert and
//! remove take the write lock for the table update only (addresses are
//! parsed and resolved before it is taken). The bound EQ has its own mutex.
//!
//! The send path does not take the read lock for a destination it resolved
//! before: an index is never reused, so what an `fi_addr` names changes
//! only when it is removed, and every `fi_av_remove` that removed something
//! bumps `removals` (inside the write lock, after the table changed). An
//! endpoint keeps the last `fi_addr` it resolved with the `removals` it
//! read *before* that lookup, and reuses it while `removals` is unchanged
//! (`AvState::generation_word`, engine `Inner::destination`). The endpoint
//! reads `removals` through a reference to it taken when `fi_enable` built
//! its bound view (`GenerationWord`, engine `AvView`): an Acquire load of
//! the word itself, with no call; the reference stays valid because the
//! view lives no longer than the endpoint's hold on the AV. A send that reads
//! the old count while a removal is under way is one ordered before that
//! removal, as with the read lock; a send that starts after `fi_av_remove`
//! returned (ordered after it by the application) reads the new count,
//! looks up again and gets -FI_EINVAL.

use crate::abi::*;
use crate::base::error::{Error, Result};
pub(crate) use crate::core::av_addr::{check_dest, resolve_inet, AvFormat, NodeSeq, SvcSeq};
use crate::core::av_segment::AvSegment;
use crate::core::domain::{Domain, TransportKind};
use crate::core::eq::Eq;
use crate::core::users::{HasUsers, Held, Users};
use crate::transport::addr::{self, Addr};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// `FI_EVENT` (`fi_domain.h`: `#define FI_EVENT FI_COMPLETION`), the
/// `fi_av_attr.flags` bit asking for asynchronous inserts.
pub(crate) const FI_EVENT: u64 = FI_COMPLETION;
/// `fi_av_attr.flags` accepted by `fi_av_open`.
const OPEN_FLAGS: u64 = FI_EVENT | FI_READ | FI_SYMMETRIC | FI_AV_USER_ID;
/// Flags accepted by the insert calls (fi_av(3) lists exactly these).
const INSERT_FLAGS: u64 = FI_MORE | FI_SYNC_ERR | FI_AV_USER_ID;
/// Longest `FI_ADDR_STR` address the C face scans for its NUL before giving
/// up on the rest of a packed array (rustfab's own names are 34 bytes).
pub(crate) const MAX_STR_ADDR: usize = 256;
/// Upper bound of the slots pre-allocated from the `count` hint (the table
/// grows past it on demand; the hint must not make us allocate gigabytes).
const MAX_COUNT_HINT: usize = 1 << 16;

// ---------------------------------------------------------------------------
// The table (pure logic)
// ---------------------------------------------------------------------------

/// One live AV entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AvEntry {
    pub(crate) addr: Addr,
    /// The application's id for this peer (`FI_AV_USER_ID`), reported
    /// instead of the index as the source of incoming messages.
    pub(crate) user_id: Option<fi_addr_t>,
}

/// The live indices of one address, oldest first (usually exactly one).
#[derive(Clone, Debug)]
enum Indices {
    One(u64),
    Many(Vec<u64>),
}

impl Indices {
    fn first(&self) -> u64 {
        match self {
            Indices::One(i) => *i,
            Indices::Many(v) => v[0],
        }
    }
}

/// Index → entry (with tombstones) and address → indices. Owned by one
/// [`Av`] behind its lock.
#[derive(Default, Debug)]
pub(crate) struct AvTable {
    /// `None` = removed; a slot is never reused.
    slots: Vec<Option<AvEntry>>,
    by_addr: HashMap<Addr, Indices>,
    live: usize,
}

impl AvTable {
    #[cfg(test)]
    /// Number of live entries.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The index the next insertion will get.
    pub(crate) fn next_index(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Makes room for `n` more entries, or fails with -FI_ENOMEM instead of
    /// aborting the process on an absurd count.
    pub(crate) fn reserve(&mut self, n: usize) -> Result<()> {
        self.slots.try_reserve(n).map_err(|_| Error::NOMEM)?;
        self.by_addr.try_reserve(n).map_err(|_| Error::NOMEM)
    }

    /// Appends an entry and returns its index.
    pub(crate) fn insert(&mut self, addr: Addr, user_id: Option<fi_addr_t>) -> u64 {
        let idx = self.slots.len() as u64;
        self.slots.push(Some(AvEntry { addr, user_id }));
        self.live += 1;
        for key in index_keys(&addr) {
            match self.by_addr.get_mut(&key) {
                None => {
                    self.by_addr.insert(key, Indices::One(idx));
                }
                Some(ix) => match ix {
                    Indices::One(first) => *ix = Indices::Many(vec![*first, idx]),
                    Indices::Many(v) => v.push(idx),
                },
            }
        }
        idx
    }

    /// Appends a removed slot (a shared AV's entry that failed its checks).
    pub(crate) fn push_removed(&mut self) {
        self.slots.push(None);
    }

    pub(crate) fn get(&self, idx: fi_addr_t) -> Option<&AvEntry> {
        usize::try_from(idx)
            .ok()
            .and_then(|i| self.slots.get(i))
            .and_then(|s| s.as_ref())
    }

    /// Removes every listed entry, or none: an index that is unknown,
    /// already removed or listed twice fails the whole call with -FI_EINVAL.
    pub(crate) fn remove_all(&mut self, list: &[fi_addr_t]) -> Result<()> {
        let mut seen = std::collections::HashSet::with_capacity(list.len());
        for &i in list {
            if self.get(i).is_none() || !seen.insert(i) {
                return Err(Error::INVAL);
            }
        }
        for &i in list {
            let e = self.slots[i as usize].take().expect("checked above");
            self.live -= 1;
            for key in index_keys(&e.addr) {
                let drop_key = match self.by_addr.get_mut(&key) {
                    Some(Indices::One(_)) => true,
                    Some(ix @ Indices::Many(_)) => {
                        if let Indices::Many(v) = ix {
                            v.retain(|&x| x != i);
                            if v.len() == 1 {
                                *ix = Indices::One(v[0]);
                            }
                        }
                        false
                    }
                    None => false,
                };
                if drop_key {
                    self.by_addr.remove(&key);
                }
            }
        }
        Ok(())
    }

    /// `fi_av_set_user_id`: the id entry `idx` reports from now on
    /// (-FI_EINVAL for an index that is not live).
    pub(crate) fn set_user_id(&mut self, idx: fi_addr_t, user_id: fi_addr_t) -> Result<()> {
        let slot = usize::try_from(idx)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
            .and_then(|s| s.as_mut())
            .ok_or(Error::INVAL)?;
        slot.user_id = Some(user_id);
        Ok(())
    }

    /// The `fi_addr_t` to report for a peer's address: its user id when it
    /// was inserted with `FI_AV_USER_ID`, else its index (oldest live entry).
    pub(crate) fn reverse(&self, addr: &Addr) -> Option<fi_addr_t> {
        let idx = self.by_addr.get(addr)?.first();
        let e = self.get(idx)?;
        Some(e.user_id.unwrap_or(idx))
    }
}

/// The keys an entry is found under by reverse lookup: its address, and for
/// an auto address also the shm and TCP addresses the transports report as
/// a message's source (transport/auto.rs).
fn index_keys(a: &Addr) -> impl Iterator<Item = Addr> {
    let parts = match *a {
        Addr::Auto { shm, inet, .. } => [Some(*a), Some(Addr::Shm(shm)), Some(Addr::Inet(SocketAddr::V4(inet)))],
        _ => [Some(*a), None, None],
    };
    parts.into_iter().flatten()
}

// ---------------------------------------------------------------------------
// Asynchronous reporting
// ---------------------------------------------------------------------------

/// Where the results of an asynchronous insert go: the bound EQ, or a
/// recorder in unit tests.
pub(crate) trait AvEvents {
    /// One failed address: `index` within the call, positive `err`.
    fn error(&self, index: usize, err: i32) -> Result<()>;
    /// The call's completion: `count` addresses inserted.
    fn complete(&self, count: usize) -> Result<()>;
}

/// fi_av(3): "one EQ error entry generated for each failed address
/// insertion, followed by one non-error event indicating that the insertion
/// operation has completed".
pub(crate) fn report_async(results: &[Result<fi_addr_t>], sink: &dyn AvEvents) -> Result<()> {
    let mut ok = 0;
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(_) => ok += 1,
            Err(e) => sink.error(i, e.0)?,
        }
    }
    sink.complete(ok)
}

// ---------------------------------------------------------------------------
// The AV object
// ---------------------------------------------------------------------------

/// An AV's removal count as an endpoint's bound view holds it
/// ([`AvState::generation_word`]): it can only be read, with the ordering
/// the module documentation's argument needs, and names its AV.
#[derive(Clone, Copy)]
pub(crate) struct GenerationWord<'a>(&'a AtomicU64);

impl GenerationWord<'_> {
    /// The removal count (Acquire: pairs with the Release bump of
    /// `remove`, module documentation).
    #[inline]
    pub(crate) fn get(self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Which AV this is (the address of its count): equal for two words
    /// of the same live AV, different for two live AVs.
    #[inline]
    pub(crate) fn id(self) -> usize {
        self.0 as *const AtomicU64 as usize
    }
}

/// What an AV decided at open time plus its table: the part of [`Av`] that
/// needs no C objects (unit-testable on its own).
#[derive(Debug)]
pub(crate) struct AvState {
    /// `fi_av_attr.flags`.
    pub(crate) flags: u64,
    pub(crate) transport: TransportKind,
    pub(crate) format: AvFormat,
    pub(crate) table: RwLock<AvTable>,
    /// `fi_av_remove` calls that removed entries (module documentation:
    /// the send path's cached lookups).
    removals: AtomicU64,
}

impl AvState {
    pub(crate) fn new(flags: u64, transport: TransportKind, format: AvFormat, count_hint: usize) -> AvState {
        let mut t = AvTable::default();
        let _ = t.reserve(count_hint.min(MAX_COUNT_HINT));
        AvState {
            flags,
            transport,
            format,
            table: RwLock::new(t),
            removals: AtomicU64::new(0),
        }
    }

    /// Removes every listed entry, or none (`AvTable::remove_all`); a
    /// removal that took entries out invalidates the endpoints' cached
    /// lookups (bumps `removals`, still inside the write lock).
    pub(crate) fn remove(&self, list: &[fi_addr_t]) -> Result<()> {
        let mut t = self.table.write();
        t.remove_all(list)?;
        if !list.is_empty() {
            self.removals.fetch_add(1, Ordering::Release);
        }
        Ok(())
    }

    /// What a cached lookup is valid for: lookups made after reading this
    /// word stay right while it is unchanged (module documentation). An
    /// endpoint takes it when its bound view is built (engine `AvView`, at
    /// `fi_enable`) and reads it on every send with no call.
    #[inline]
    pub(crate) fn generation_word(&self) -> GenerationWord<'_> {
        GenerationWord(&self.removals)
    }

    /// Checks decoded entries against the transport.
    pub(crate) fn validate(&self, addrs: Vec<Result<Addr>>) -> Vec<Result<Addr>> {
        addrs
            .into_iter()
            .map(|r| r.and_then(|a| check_dest(self.transport, self.format, a)))
            .collect()
    }

    /// Inserts the valid entries, in order, under one write lock; returns
    /// each entry's `fi_addr` or error. Err only when memory runs out (then
    /// nothing was inserted).
    pub(crate) fn insert_batch(
        &self,
        addrs: &[Result<Addr>],
        user_ids: Option<&[fi_addr_t]>,
    ) -> Result<Vec<Result<fi_addr_t>>> {
        let mut out = Vec::new();
        out.try_reserve_exact(addrs.len()).map_err(|_| Error::NOMEM)?;
        let valid = addrs.iter().filter(|a| a.is_ok()).count();
        // An AV opened with FI_AV_USER_ID reports FI_ADDR_NOTAVAIL for an
        // entry until fi_av_set_user_id names it (fi_av(3)).
        let unset = (self.flags & FI_AV_USER_ID != 0).then_some(FI_ADDR_NOTAVAIL);
        let mut t = self.table.write();
        t.reserve(valid)?;
        for (i, a) in addrs.iter().enumerate() {
            out.push(match a {
                Ok(a) => Ok(t.insert(*a, user_ids.map(|u| u[i]).or(unset))),
                Err(e) => Err(*e),
            });
        }
        Ok(out)
    }

    /// Resolves one `node`/`service` pair for this AV.
    pub(crate) fn resolve(&self, node: &str, service: Option<&str>) -> Result<Addr> {
        let a = if service.is_none() && Addr::parse_str(node).is_ok() {
            // "Applications may also pass in an FI_ADDR_STR formatted
            // address as the node parameter ... the service parameter must
            // be NULL."
            Addr::parse_str(node)?
        } else {
            match self.transport {
                // The same mapping fi_getinfo uses for node/service.
                TransportKind::Shm => Addr::Shm(addr::shm_token_for(Some(node), service)),
                TransportKind::Auto => {
                    // The mapping fi_getinfo uses: shm token by service,
                    // TCP address by node/service, host known if local.
                    let Addr::Inet(SocketAddr::V4(inet)) = resolve_inet(node, service, libc::AF_INET)? else {
                        return Err(Error::INVAL);
                    };
                    let local = crate::sys::net::ip_is_local(std::net::IpAddr::V4(*inet.ip()));
                    Addr::Auto {
                        host: if local { addr::host_id() } else { 0 },
                        shm: addr::shm_token_for(Some(node), service),
                        inet,
                    }
                }
                TransportKind::Tcp => {
                    let family = match self.format {
                        AvFormat::SockaddrIn => libc::AF_INET,
                        _ => libc::AF_UNSPEC,
                    };
                    resolve_inet(node, service, family)?
                }
            }
        };
        check_dest(self.transport, self.format, a)
    }

    /// All `nodecnt × svccnt` addresses of `fi_av_insertsym`, "All service
    /// addresses for a node will be inserted before the next node". Errors
    /// in the arguments fail the call; a name that does not resolve fails
    /// its entry only.
    pub(crate) fn resolve_sym(
        &self,
        node: &str,
        nodecnt: usize,
        service: Option<&str>,
        svccnt: usize,
    ) -> Result<Vec<Result<Addr>>> {
        let total = nodecnt.checked_mul(svccnt).ok_or(Error::INVAL)?;
        if total > i32::MAX as usize {
            return Err(Error::INVAL);
        }
        if total == 0 {
            return Ok(Vec::new());
        }
        let max_svc = match self.transport {
            TransportKind::Tcp | TransportKind::Auto => u16::MAX as u64,
            TransportKind::Shm => u64::MAX,
        };
        let nodes = NodeSeq::new(node, nodecnt)?;
        let svcs = SvcSeq::new(service, svccnt, max_svc)?;
        let mut out = Vec::new();
        out.try_reserve_exact(total).map_err(|_| Error::NOMEM)?;
        for n in 0..nodecnt {
            let name = nodes.nth(n);
            for s in 0..svccnt {
                out.push(self.resolve(&name, svcs.nth(s).as_deref()));
            }
        }
        Ok(out)
    }

    pub(crate) fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        self.table.read().get(fi_addr).map(|e| e.addr)
    }

    /// `fi_av_set_user_id` (2.0): only on an AV opened with
    /// `FI_AV_USER_ID`; no flags (`FI_AUTH_KEY`: no authorization keys).
    pub(crate) fn set_user_id(&self, fi_addr: fi_addr_t, user_id: fi_addr_t, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if self.flags & FI_AV_USER_ID == 0 {
            return Err(Error::INVAL);
        }
        self.table.write().set_user_id(fi_addr, user_id)
    }

    pub(crate) fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        self.table.read().reverse(a)
    }
}

/// The most `rx_ctx_bits` an AV takes: enough for contexts far beyond the
/// `flag::LANES` a scalable endpoint has (an address naming a context the
/// peer does not have is refused by that peer), and a table of 2^48
/// entries still addressable.
pub(crate) const MAX_RX_CTX_BITS: u32 = 16;

/// What `fi_av_open` asks for (`struct fi_av_attr` without its pointers).
#[derive(Clone, Debug, Default)]
pub(crate) struct AvAttr {
    pub(crate) av_type: u32,
    pub(crate) count: usize,
    pub(crate) flags: u64,
    pub(crate) rx_ctx_bits: i32,
    /// The `name` of a shared AV.
    pub(crate) name: Option<String>,
}

/// An address vector. Owns its table; holds its domain (which therefore
/// cannot close first) and the bound EQ. Endpoints that bind it take a
/// [`Held<Av>`], which keeps `fi_close(av)` at -FI_EBUSY.
pub(crate) struct Av {
    users: Users,
    /// Keeps `fi_close(domain)` at -FI_EBUSY while the AV is open.
    _domain: Held<Domain>,
    pub(crate) state: AvState,
    eq: Mutex<Option<Held<Eq>>>,
    /// The segment of a named AV.
    pub(crate) shared: Option<AvSegment>,
    /// `rx_ctx_bits`: the high bits of an `fi_addr` that name a receive
    /// context of a scalable endpoint (`fi_rx_addr`); masked off before a
    /// lookup.
    pub(crate) rx_ctx_bits: u32,
}

impl HasUsers for Av {
    fn users(&self) -> &Users {
        &self.users
    }
}

impl Av {
    /// `fi_av_open`.
    pub(crate) fn open(domain: &Arc<Domain>, attr: &AvAttr) -> Result<Arc<Av>> {
        if attr.flags & !OPEN_FLAGS != 0 {
            return Err(Error::INVAL);
        }
        // rx_ctx_bits: receive contexts of scalable endpoints
        // (core/scalable.rs), up to `MAX_RX_CTX_BITS` of the address.
        if !(0..=MAX_RX_CTX_BITS as i32).contains(&attr.rx_ctx_bits) {
            return Err(Error::INVAL);
        }
        let av_type = effective_type(attr.av_type);
        if av_type != FI_AV_MAP && av_type != FI_AV_TABLE {
            return Err(Error::INVAL);
        }
        if attr.flags & FI_AV_USER_ID != 0 && !user_ids_at_open(domain) {
            // fi_domain(3): "If this domain capability is not set, address
            // vectors cannot be opened with FI_AV_USER_ID."
            return Err(Error::INVAL);
        }
        let format = AvFormat::for_domain(domain.transport, domain.info.addr_format);
        let read_only = attr.flags & FI_READ != 0;
        let shared = match &attr.name {
            Some(n) => Some(Av::open_segment(n, read_only, domain.transport, format, attr.count)?),
            // "An AV opened for read-only access must be named".
            None if read_only => return Err(Error::INVAL),
            None => None,
        };
        Ok(Arc::new(Av {
            users: Users::default(),
            _domain: Held::new(domain.clone()),
            state: AvState::new(attr.flags, domain.transport, format, attr.count),
            eq: Mutex::new(None),
            shared,
            rx_ctx_bits: attr.rx_ctx_bits as u32,
        }))
    }

    /// `fi_close`: "there must be no opened endpoints associated with the
    /// AV"; releases the bound EQ.
    pub(crate) fn close(&self) -> Result<()> {
        self.users.check_idle()?;
        self.eq.lock().take();
        Ok(())
    }

    /// `fi_av_bind`: an EQ for asynchronous inserts. "Flags are reserved
    /// for future use and must be 0." One EQ per AV.
    pub(crate) fn bind_eq(&self, eq: Arc<Eq>, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error::INVAL);
        }
        let mut slot = self.eq.lock();
        if slot.is_some() {
            return Err(Error::BUSY);
        }
        *slot = Some(Held::new(eq));
        Ok(())
    }

    /// The address behind an `fi_addr` (data path: destination of a send),
    /// without the receive context bits `fi_rx_addr` put in.
    pub(crate) fn lookup_addr(&self, fi_addr: fi_addr_t) -> Option<Addr> {
        let a = match self.rx_ctx_bits {
            0 => fi_addr,
            n => fi_addr & (!0u64 >> n),
        };
        self.state
            .lookup_addr(a)
            .or_else(|| self.shared_catch_up().then(|| self.state.lookup_addr(a))?)
    }

    /// The `fi_addr` to report as the source of a message from `a`
    /// (`FI_SOURCE`): the user id if one was given with `FI_AV_USER_ID`.
    pub(crate) fn reverse_lookup(&self, a: &Addr) -> Option<fi_addr_t> {
        self.state
            .reverse_lookup(a)
            .or_else(|| self.shared_catch_up().then(|| self.state.reverse_lookup(a))?)
    }

    /// `fi_av_remove`; a shared AV's entries are not removed (-FI_ENOSYS).
    pub(crate) fn remove(&self, list: &[fi_addr_t]) -> Result<()> {
        if self.shared.is_some() {
            return Err(Error::NOSYS);
        }
        self.state.remove(list)
    }

    /// Checks the flags of an insert call and returns the EQ to report to
    /// when the call is asynchronous. (With `FI_SYNC_ERR` the C face also
    /// checks the call's error array.)
    pub(crate) fn prepare_insert(&self, flags: u64) -> Result<Option<Arc<Eq>>> {
        if flags & !INSERT_FLAGS != 0 {
            return Err(Error::BADFLAGS);
        }
        let eq = self.eq.lock().as_ref().map(|h| h.arc().clone());
        if self.state.flags & FI_EVENT != 0 && eq.is_none() {
            // "any insertions attempted before an EQ is bound to the AV will
            // fail with -FI_ENOEQ"
            return Err(Error::NOEQ);
        }
        if flags & FI_AV_USER_ID != 0 && self.state.flags & FI_AV_USER_ID != 0 {
            // "Using the FI_AV_USER_ID flag per insert is invalid if the AV
            // was opened with the FI_AV_USER_ID".
            return Err(Error::INVAL);
        }
        if flags & FI_SYNC_ERR != 0 && eq.is_some() {
            // "This flag applies to synchronous insertions only"
            return Err(Error::BADFLAGS);
        }
        Ok(eq)
    }

    /// Checks decoded addresses against the transport and inserts the
    /// valid ones (with their user ids for `FI_AV_USER_ID`); returns each
    /// entry's `fi_addr` or error. Err only when memory runs out.
    pub(crate) fn insert(
        &self,
        addrs: Vec<Result<Addr>>,
        user_ids: Option<&[fi_addr_t]>,
    ) -> Result<Vec<Result<fi_addr_t>>> {
        let addrs = self.state.validate(addrs);
        let results = match &self.shared {
            Some(_) => self.shared_insert(addrs, user_ids)?,
            None => self.state.insert_batch(&addrs, user_ids)?,
        };
        for (i, r) in results.iter().enumerate() {
            if let Err(e) = r {
                crate::base::log::log_info!(FI_LOG_AV, "fi_av_insert: entry {i} rejected: {e}");
            }
        }
        Ok(results)
    }

    /// `fi_av_set_user_id` ([`AvState::set_user_id`]).
    pub(crate) fn set_user_id(&self, fi_addr: fi_addr_t, user_id: fi_addr_t, flags: u64) -> Result<()> {
        self.state.set_user_id(fi_addr, user_id, flags)
    }

    /// `fi_av_lookup` into a buffer of `cap` bytes: the bytes to copy (the
    /// stored form, truncated to `cap`) and the size the whole address needs.
    pub(crate) fn lookup(&self, fi_addr: fi_addr_t, cap: usize) -> Result<(Vec<u8>, usize)> {
        let a = self.lookup_addr(fi_addr).ok_or(Error::INVAL)?;
        let format = self.state.format;
        let stored = format.encode(&a);
        Ok((lookup_bytes(&stored, format == AvFormat::Str, cap), stored.len()))
    }
}

/// Whether AVs of `domain` may be opened with `FI_AV_USER_ID`: a 2.0+
/// domain that negotiated the capability (fi_domain(3)).
fn user_ids_at_open(domain: &Domain) -> bool {
    domain.api_version >= crate::abi::v2::API_FIRST_2_0
        && (domain.info.caps | domain.info.domain.as_ref().map_or(0, |d| d.caps)) & FI_AV_USER_ID != 0
}

/// The type an `fi_av_open` with this requested type gets.
pub(crate) fn effective_type(requested: u32) -> u32 {
    if requested == FI_AV_UNSPEC {
        FI_AV_TABLE
    } else {
        requested
    }
}

/// What `fi_av_lookup` writes for a stored address into a buffer of `cap`
/// bytes: "If the actual address is larger than what can fit into the
/// buffer, it will be truncated." A truncated string keeps its NUL.
pub(crate) fn lookup_bytes(stored: &[u8], is_str: bool, cap: usize) -> Vec<u8> {
    if cap >= stored.len() {
        return stored.to_vec();
    }
    let mut v = stored[..cap].to_vec();
    if is_str {
        if let Some(last) = v.last_mut() {
            *last = 0;
        }
    }
    v
}

#[cfg(test)]
mod tests;
