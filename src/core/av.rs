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
use crate::core::av_segment::AvSegment;
use crate::core::domain::{Domain, TransportKind};
use crate::core::eq::Eq;
use crate::core::users::{HasUsers, Held, Users};
use crate::transport::addr::{self, Addr};
use core::ffi::c_int;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
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
// Address formats
// ---------------------------------------------------------------------------

/// How the addresses handed to one AV are laid out in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AvFormat {
    /// `FI_ADDR_STR`: NUL-terminated strings packed back to back.
    Str,
    /// `FI_SOCKADDR_IN`: 16-byte `sockaddr_in`s.
    SockaddrIn,
    /// `FI_SOCKADDR_IN6`: 28-byte slots (`sockaddr_in6`, or `sockaddr_in`
    /// in the first 16 bytes).
    SockaddrIn6,
    /// `FI_SOCKADDR` / unspecified: slots of the first entry's family size.
    Sockaddr,
}

/// Why an entry was not inserted; becomes the positive `FI_E*` reported in
/// `FI_SYNC_ERR` arrays and EQ error entries.
fn addr_invalid() -> Error {
    Error::INVAL
}

impl AvFormat {
    /// The format an AV of this domain reads (see the module comment).
    pub(crate) fn for_domain(transport: TransportKind, addr_format: u32) -> AvFormat {
        match transport {
            TransportKind::Shm | TransportKind::Auto => AvFormat::Str,
            TransportKind::Tcp => match addr_format {
                FI_SOCKADDR_IN => AvFormat::SockaddrIn,
                FI_SOCKADDR_IN6 => AvFormat::SockaddrIn6,
                FI_ADDR_STR => AvFormat::Str,
                _ => AvFormat::Sockaddr,
            },
        }
    }

    /// Whether a decoded address may be stored by an AV of this format.
    fn accepts(self, a: &Addr) -> bool {
        !matches!(
            (self, a),
            (AvFormat::SockaddrIn, Addr::Inet(SocketAddr::V6(_)))
                | (
                    AvFormat::SockaddrIn | AvFormat::SockaddrIn6 | AvFormat::Sockaddr,
                    Addr::Shm(_)
                )
        )
    }

    /// The binary form `fi_av_lookup` returns: "the same format as those
    /// stored by the AV".
    pub(crate) fn encode(self, a: &Addr) -> Vec<u8> {
        match self {
            AvFormat::Str => {
                let mut v = a.to_string_form().into_bytes();
                v.push(0);
                v
            }
            _ => a.to_bytes(),
        }
    }

    /// Slot size of a sockaddr array whose first entry has address family
    /// `family` (0 for `Str`, whose entries are walked by their NUL).
    pub(crate) fn stride(self, family: u16) -> usize {
        match self {
            AvFormat::SockaddrIn => addr::SIN_LEN,
            AvFormat::SockaddrIn6 => addr::SIN6_LEN,
            AvFormat::Sockaddr => {
                if family as i32 == libc::AF_INET6 {
                    addr::SIN6_LEN
                } else {
                    addr::SIN_LEN
                }
            }
            AvFormat::Str => 0,
        }
    }

    /// Decodes one address of this format (no destination checks): for
    /// `Str`, the string with its NUL; for sockaddr formats, one slot.
    pub(crate) fn decode(self, bytes: &[u8]) -> Result<Addr> {
        let fmt = match self {
            AvFormat::Str => FI_ADDR_STR,
            AvFormat::SockaddrIn => FI_SOCKADDR_IN,
            // A v6-sized slot may hold either family.
            _ => FI_SOCKADDR,
        };
        Addr::parse(fmt, bytes).map(|(a, _)| a)
    }
}

/// Whether an address can be a destination on this transport.
pub(crate) fn check_dest(transport: TransportKind, format: AvFormat, a: Addr) -> Result<Addr> {
    if !format.accepts(&a) {
        return Err(addr_invalid());
    }
    let inet_ok = |sa: &SocketAddr| {
        let ip = sa.ip();
        let bcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
        !(sa.port() == 0 || ip.is_unspecified() || ip.is_multicast() || bcast)
    };
    match (transport, a) {
        (TransportKind::Shm, Addr::Shm(tok)) if tok != 0 => Ok(a),
        // The auto transport also takes plain shm and TCP addresses (the
        // source addresses it reports, e.g. in FI_SOURCE_ERR's err_data).
        (TransportKind::Auto, Addr::Auto { shm, inet, .. }) => {
            if shm != 0 && inet_ok(&SocketAddr::V4(inet)) {
                Ok(a)
            } else {
                Err(Error::ADDRNOTAVAIL)
            }
        }
        (TransportKind::Auto, Addr::Shm(tok)) if tok != 0 => Ok(a),
        (TransportKind::Auto, Addr::Inet(sa)) if inet_ok(&sa) => Ok(a),
        (TransportKind::Tcp, Addr::Inet(sa)) => {
            let ip = sa.ip();
            let bcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
            if sa.port() == 0 || ip.is_unspecified() || ip.is_multicast() || bcast {
                Err(Error::ADDRNOTAVAIL)
            } else {
                Ok(a)
            }
        }
        (TransportKind::Shm, Addr::Shm(_)) => Err(Error::ADDRNOTAVAIL),
        _ => Err(addr_invalid()),
    }
}

// ---------------------------------------------------------------------------
// Node / service names (fi_av_insertsvc, fi_av_insertsym)
// ---------------------------------------------------------------------------

/// The node names of `fi_av_insertsym`: "Inserted node addresses will be of
/// the range {node, node + nodecnt - 1}". IP literals count up as addresses;
/// other names count up their numeric suffix ("If node is a non-numeric
/// string, such as a hostname, it must contain a numeric suffix if
/// nodecnt > 1"), keeping its zero padding (`node01` → `node02`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NodeSeq {
    Single(String),
    V4(u32),
    V6(u128),
    Suffix { prefix: String, start: u64, width: usize },
}

impl NodeSeq {
    pub(crate) fn new(node: &str, nodecnt: usize) -> Result<NodeSeq> {
        if node.is_empty() {
            return Err(Error::INVAL);
        }
        if nodecnt <= 1 {
            return Ok(NodeSeq::Single(node.to_string()));
        }
        let last = (nodecnt - 1) as u128;
        if let Ok(v4) = node.parse::<Ipv4Addr>() {
            let base = u32::from(v4);
            if base as u128 + last > u32::MAX as u128 {
                return Err(Error::INVAL);
            }
            return Ok(NodeSeq::V4(base));
        }
        if let Ok(v6) = node.parse::<Ipv6Addr>() {
            let base = u128::from(v6);
            base.checked_add(last).ok_or(Error::INVAL)?;
            return Ok(NodeSeq::V6(base));
        }
        let digits = node.bytes().rev().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 18 {
            return Err(Error::INVAL);
        }
        let (prefix, num) = node.split_at(node.len() - digits);
        let start: u64 = num.parse().map_err(|_| Error::INVAL)?;
        start.checked_add(last as u64).ok_or(Error::INVAL)?;
        Ok(NodeSeq::Suffix {
            prefix: prefix.to_string(),
            start,
            width: digits,
        })
    }

    pub(crate) fn nth(&self, i: usize) -> String {
        match self {
            NodeSeq::Single(s) => s.clone(),
            NodeSeq::V4(b) => Ipv4Addr::from(b + i as u32).to_string(),
            NodeSeq::V6(b) => Ipv6Addr::from(b + i as u128).to_string(),
            NodeSeq::Suffix { prefix, start, width } => {
                format!("{prefix}{:0width$}", start + i as u64, width = *width)
            }
        }
    }
}

/// The services of `fi_av_insertsym`: "{service, service + svccnt - 1}".
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SvcSeq {
    /// `service` NULL (only with svccnt 1).
    None,
    Single(String),
    Numeric(u64),
}

impl SvcSeq {
    /// `max` is the largest valid service number (65535 for TCP ports).
    pub(crate) fn new(service: Option<&str>, svccnt: usize, max: u64) -> Result<SvcSeq> {
        match service {
            None if svccnt <= 1 => Ok(SvcSeq::None),
            None => Err(Error::INVAL),
            Some(s) if svccnt <= 1 => Ok(SvcSeq::Single(s.to_string())),
            Some(s) => {
                let start: u64 = s.parse().map_err(|_| Error::INVAL)?;
                match start.checked_add(svccnt as u64 - 1) {
                    Some(last) if last <= max => Ok(SvcSeq::Numeric(start)),
                    _ => Err(Error::INVAL),
                }
            }
        }
    }

    pub(crate) fn nth(&self, i: usize) -> Option<String> {
        match self {
            SvcSeq::None => None,
            SvcSeq::Single(s) => Some(s.clone()),
            SvcSeq::Numeric(b) => Some((b + i as u64).to_string()),
        }
    }
}

/// Resolves a TCP `node`/`service` pair (numeric fast path, else
/// `getaddrinfo`). `family` restricts the result (AF_UNSPEC for any).
pub(crate) fn resolve_inet(node: &str, service: Option<&str>, family: c_int) -> Result<Addr> {
    if let (Ok(ip), Some(Ok(port))) = (node.parse::<IpAddr>(), service.map(str::parse::<u16>)) {
        let fam_ok = match ip {
            IpAddr::V4(_) => family != libc::AF_INET6,
            IpAddr::V6(_) => family != libc::AF_INET,
        };
        return if fam_ok {
            Ok(Addr::Inet(SocketAddr::new(ip, port)))
        } else {
            Err(Error::ADDRNOTAVAIL)
        };
    }
    let fam = match family {
        libc::AF_INET => crate::sys::resolve::Family::V4,
        libc::AF_INET6 => crate::sys::resolve::Family::V6,
        _ => crate::sys::resolve::Family::Any,
    };
    crate::sys::resolve::resolve(Some(node), service, fam, Default::default())
        .and_then(|v| v.into_iter().next())
        .map(Addr::Inet)
        .ok_or(Error::ADDRNOTAVAIL)
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
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn shm(t: u64) -> Addr {
        Addr::Shm(t)
    }
    fn inet(s: &str) -> Addr {
        Addr::Inet(s.parse().unwrap())
    }
    fn shm_state() -> AvState {
        AvState::new(0, TransportKind::Shm, AvFormat::Str, 4)
    }
    fn tcp_state(format: AvFormat) -> AvState {
        AvState::new(0, TransportKind::Tcp, format, 4)
    }

    #[test]
    fn table_indices_are_insertion_order_across_calls() {
        let s = shm_state();
        let a: Vec<Result<Addr>> = (1..=3).map(|t| Ok(shm(t))).collect();
        let r1 = s.insert_batch(&a, None).unwrap();
        let r2 = s.insert_batch(&[Ok(shm(9))], None).unwrap();
        assert_eq!(r1, vec![Ok(0), Ok(1), Ok(2)]);
        assert_eq!(r2, vec![Ok(3)]);
        assert_eq!(s.lookup_addr(2), Some(shm(3)));
        assert_eq!(s.reverse_lookup(&shm(9)), Some(3));
        assert_eq!(s.lookup_addr(4), None);
        assert_eq!(s.lookup_addr(FI_ADDR_NOTAVAIL), None);
    }

    #[test]
    fn bad_entries_take_no_index() {
        let s = shm_state();
        let r = s
            .insert_batch(&[Ok(shm(1)), Err(Error::INVAL), Ok(shm(2))], None)
            .unwrap();
        assert_eq!(r, vec![Ok(0), Err(Error::INVAL), Ok(1)]);
        assert_eq!(s.table.read().len(), 2);
    }

    #[test]
    fn removed_slots_are_tombstones() {
        let mut t = AvTable::default();
        let a = t.insert(shm(1), None);
        let b = t.insert(shm(2), None);
        t.remove_all(&[a]).unwrap();
        assert!(t.get(a).is_none());
        assert_eq!(t.reverse(&shm(1)), None);
        assert_eq!(t.insert(shm(3), None), 2, "index 0 is not reused");
        assert_eq!(t.get(b).unwrap().addr, shm(2));
        assert_eq!(t.len(), 2);
        // Re-inserting a removed address is allowed and gets a new index.
        assert_eq!(t.insert(shm(1), None), 3);
        assert_eq!(t.reverse(&shm(1)), Some(3));
        assert_eq!(t.next_index(), 4);
    }

    #[test]
    fn remove_is_all_or_nothing() {
        let mut t = AvTable::default();
        let a = t.insert(shm(1), None);
        let b = t.insert(shm(2), None);
        assert_eq!(t.remove_all(&[a, 7]), Err(Error::INVAL));
        assert_eq!(t.remove_all(&[a, a]), Err(Error::INVAL));
        assert_eq!(t.len(), 2);
        t.remove_all(&[b, a]).unwrap();
        assert!(t.is_empty());
        assert_eq!(t.remove_all(&[a]), Err(Error::INVAL), "already removed");
        assert_eq!(t.remove_all(&[]), Ok(()));
    }

    #[test]
    fn duplicates_get_new_indices_and_reverse_is_oldest_live() {
        let mut t = AvTable::default();
        let a = t.insert(shm(5), None);
        let b = t.insert(shm(5), None);
        let c = t.insert(shm(5), None);
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(t.reverse(&shm(5)), Some(0));
        t.remove_all(&[a]).unwrap();
        assert_eq!(t.reverse(&shm(5)), Some(1));
        t.remove_all(&[c]).unwrap();
        assert_eq!(t.reverse(&shm(5)), Some(1));
        t.remove_all(&[b]).unwrap();
        assert_eq!(t.reverse(&shm(5)), None);
        assert!(t.by_addr.is_empty());
    }

    #[test]
    fn user_ids_replace_index_in_reverse_lookup() {
        let s = shm_state();
        let r = s.insert_batch(&[Ok(shm(1)), Ok(shm(2))], Some(&[1000, 2000])).unwrap();
        assert_eq!(r, vec![Ok(0), Ok(1)]);
        assert_eq!(s.reverse_lookup(&shm(2)), Some(2000));
        assert_eq!(s.table.read().get(0).unwrap().user_id, Some(1000));
        assert_eq!(s.lookup_addr(1), Some(shm(2)), "data path still uses the index");
    }

    /// An AV opened with FI_AV_USER_ID (2.0): entries report
    /// FI_ADDR_NOTAVAIL until fi_av_set_user_id names them; the data path
    /// keeps the index; set_user_id needs the open flag, no flags, a live
    /// index.
    #[test]
    fn user_ids_set_after_insert() {
        let s = AvState::new(FI_AV_USER_ID, TransportKind::Shm, AvFormat::Str, 4);
        let r = s.insert_batch(&[Ok(shm(1)), Ok(shm(2))], None).unwrap();
        assert_eq!(r, vec![Ok(0), Ok(1)]);
        assert_eq!(s.reverse_lookup(&shm(2)), Some(FI_ADDR_NOTAVAIL));
        s.set_user_id(1, 0xabc, 0).unwrap();
        assert_eq!(s.reverse_lookup(&shm(2)), Some(0xabc));
        assert_eq!(s.reverse_lookup(&shm(1)), Some(FI_ADDR_NOTAVAIL));
        assert_eq!(s.lookup_addr(1), Some(shm(2)));
        assert_eq!(s.set_user_id(7, 1, 0), Err(Error::INVAL), "not an entry");
        assert_eq!(s.set_user_id(0, 1, crate::abi::v2::FI_AUTH_KEY), Err(Error::BADFLAGS));
        s.remove(&[1]).unwrap();
        assert_eq!(s.set_user_id(1, 1, 0), Err(Error::INVAL), "removed");
        assert_eq!(
            shm_state().set_user_id(0, 1, 0),
            Err(Error::INVAL),
            "opened without the flag"
        );
    }

    #[test]
    fn decode_and_stride() {
        let name = shm(0xabc).to_bytes();
        assert_eq!(AvFormat::Str.decode(&name), Ok(shm(0xabc)));
        assert!(AvFormat::Str.decode(b"garbage\0").is_err());
        let v4 = inet("10.0.0.1:9").to_bytes();
        let v6 = inet("[fe80::1]:80").to_bytes();
        assert_eq!(AvFormat::SockaddrIn.decode(&v4), Ok(inet("10.0.0.1:9")));
        assert!(
            AvFormat::SockaddrIn.decode(&v6[..16]).is_err(),
            "a v6 address in a v4 slot"
        );
        assert_eq!(AvFormat::SockaddrIn6.decode(&v6), Ok(inet("[fe80::1]:80")));
        assert_eq!(AvFormat::SockaddrIn6.decode(&v4), Ok(inet("10.0.0.1:9")));
        assert!(AvFormat::Sockaddr.decode(&[0u8; 16]).is_err(), "fabtests' bad address");
        let fam = |b: &[u8]| u16::from_ne_bytes([b[0], b[1]]);
        assert_eq!(AvFormat::Sockaddr.stride(fam(&v4)), addr::SIN_LEN);
        assert_eq!(AvFormat::Sockaddr.stride(fam(&v6)), addr::SIN6_LEN);
        assert_eq!(AvFormat::SockaddrIn.stride(fam(&v6)), addr::SIN_LEN);
        assert_eq!(AvFormat::SockaddrIn6.stride(fam(&v4)), addr::SIN6_LEN);
    }

    #[test]
    fn destinations_checked_against_transport() {
        let s = shm_state();
        let ok = s.validate(vec![Ok(shm(1)), Ok(shm(0)), Ok(inet("1.2.3.4:5")), Err(Error::INVAL)]);
        assert_eq!(ok[0], Ok(shm(1)));
        assert_eq!(ok[1], Err(Error::ADDRNOTAVAIL));
        assert_eq!(ok[2], Err(Error::INVAL));
        let t = tcp_state(AvFormat::SockaddrIn);
        let r = t.validate(vec![
            Ok(inet("1.2.3.4:5")),
            Ok(inet("1.2.3.4:0")),
            Ok(inet("0.0.0.0:5")),
            Ok(inet("224.0.0.1:5")),
            Ok(inet("255.255.255.255:5")),
            Ok(inet("[::1]:5")),
            Ok(shm(3)),
        ]);
        assert_eq!(r[0], Ok(inet("1.2.3.4:5")));
        assert!(r[1..].iter().all(|x| x.is_err()));
        let t6 = tcp_state(AvFormat::Sockaddr);
        assert!(t6.validate(vec![Ok(inet("[::1]:5"))])[0].is_ok());
    }

    #[test]
    fn node_sequences() {
        let v4 = NodeSeq::new("10.1.1.255", 3).unwrap();
        assert_eq!(v4.nth(0), "10.1.1.255");
        assert_eq!(v4.nth(1), "10.1.2.0");
        assert_eq!(NodeSeq::new("255.255.255.255", 2), Err(Error::INVAL));
        let v6 = NodeSeq::new("fe80::ffff", 2).unwrap();
        assert_eq!(v6.nth(1), "fe80::1:0");
        let h = NodeSeq::new("host10", 3).unwrap();
        assert_eq!((h.nth(0), h.nth(2)), ("host10".into(), "host12".into()));
        let p = NodeSeq::new("node007", 4).unwrap();
        assert_eq!(p.nth(3), "node010");
        let w = NodeSeq::new("n9", 2).unwrap();
        assert_eq!(w.nth(1), "n10");
        assert_eq!(NodeSeq::new("host", 2), Err(Error::INVAL));
        assert_eq!(NodeSeq::new("host", 1).unwrap().nth(0), "host");
        assert_eq!(NodeSeq::new("", 1), Err(Error::INVAL));
    }

    #[test]
    fn service_sequences() {
        let s = SvcSeq::new(Some("5000"), 2, 65535).unwrap();
        assert_eq!((s.nth(0), s.nth(1)), (Some("5000".into()), Some("5001".into())));
        assert_eq!(SvcSeq::new(Some("65535"), 2, 65535), Err(Error::INVAL));
        assert_eq!(SvcSeq::new(Some("http"), 2, 65535), Err(Error::INVAL));
        assert_eq!(SvcSeq::new(Some("http"), 1, 65535).unwrap().nth(0), Some("http".into()));
        assert_eq!(SvcSeq::new(None, 1, 65535).unwrap().nth(0), None);
        assert_eq!(SvcSeq::new(None, 2, 65535), Err(Error::INVAL));
    }

    #[test]
    fn insertsym_order_is_node_major() {
        let t = tcp_state(AvFormat::Sockaddr);
        let r = t.resolve_sym("10.1.1.1", 2, Some("5000"), 2).unwrap();
        let want: Vec<Result<Addr>> = ["10.1.1.1:5000", "10.1.1.1:5001", "10.1.1.2:5000", "10.1.1.2:5001"]
            .iter()
            .map(|s| Ok(inet(s)))
            .collect();
        assert_eq!(r, want);
        assert_eq!(t.resolve_sym("10.1.1.1", 0, Some("1"), 5).unwrap(), vec![]);
        assert_eq!(t.resolve_sym("10.1.1.1", usize::MAX, Some("1"), 2), Err(Error::INVAL));
        assert_eq!(
            t.resolve_sym("10.1.1.1", 1 << 20, Some("1"), 1 << 12),
            Err(Error::INVAL)
        );
    }

    #[test]
    fn insertsvc_tcp_and_shm() {
        let t = tcp_state(AvFormat::SockaddrIn);
        assert_eq!(t.resolve("127.0.0.1", Some("9228")), Ok(inet("127.0.0.1:9228")));
        assert!(t.resolve("::1", Some("9228")).is_err(), "v6 into a v4-only AV");
        assert!(t.resolve("127.0.0.1", None).is_err(), "port 0");
        assert_eq!(
            t.resolve("fi_sockaddr_in://127.0.0.1:80", None),
            Ok(inet("127.0.0.1:80"))
        );
        assert!(t.resolve("no-such-host.invalid", Some("1")).is_err());
        let s = shm_state();
        let want = shm(addr::shm_token_for(Some("127.0.0.1"), Some("9228")));
        assert_eq!(s.resolve("127.0.0.1", Some("9228")), Ok(want));
        let name = shm(0x1234).to_string_form();
        assert_eq!(s.resolve(&name, None), Ok(shm(0x1234)));
        assert!(s.resolve("fi_sockaddr_in://127.0.0.1:80", None).is_err());
        let r = s.resolve_sym("host1", 2, Some("7"), 1).unwrap();
        assert_eq!(r[1], Ok(shm(addr::shm_token_for(Some("host2"), Some("7")))));
    }

    #[test]
    fn lookup_truncation() {
        let stored = shm(0x42).to_bytes();
        assert_eq!(lookup_bytes(&stored, true, 100), stored);
        let t = lookup_bytes(&stored, true, 10);
        assert_eq!(t.len(), 10);
        assert_eq!(&t[..9], &stored[..9]);
        assert_eq!(t[9], 0);
        assert!(lookup_bytes(&stored, true, 0).is_empty());
        let sin = inet("1.2.3.4:5").to_bytes();
        assert_eq!(lookup_bytes(&sin, false, 4), sin[..4].to_vec());
    }

    #[test]
    fn encode_matches_format() {
        let a = inet("1.2.3.4:5");
        assert_eq!(AvFormat::SockaddrIn.encode(&a), a.to_bytes());
        assert_eq!(AvFormat::Str.encode(&a), b"fi_sockaddr_in://1.2.3.4:5\0".to_vec());
        assert_eq!(AvFormat::Str.encode(&shm(1)), shm(1).to_bytes());
    }

    #[derive(Default)]
    struct Recorder {
        events: RefCell<Vec<(&'static str, usize, i32)>>,
        fail_complete: bool,
    }
    impl AvEvents for Recorder {
        fn error(&self, index: usize, err: i32) -> Result<()> {
            self.events.borrow_mut().push(("err", index, err));
            Ok(())
        }
        fn complete(&self, count: usize) -> Result<()> {
            if self.fail_complete {
                return Err(Error::AGAIN);
            }
            self.events.borrow_mut().push(("done", count, 0));
            Ok(())
        }
    }

    #[test]
    fn async_reports_errors_then_one_completion() {
        let rec = Recorder::default();
        let results = vec![Ok(0), Err(Error::INVAL), Ok(1), Err(Error::CANCELED)];
        report_async(&results, &rec).unwrap();
        assert_eq!(
            *rec.events.borrow(),
            vec![("err", 1, FI_EINVAL), ("err", 3, FI_ECANCELED), ("done", 2, 0)]
        );
        let rec = Recorder::default();
        report_async(&[], &rec).unwrap();
        assert_eq!(
            *rec.events.borrow(),
            vec![("done", 0, 0)],
            "zero inserts still complete"
        );
        let rec = Recorder {
            fail_complete: true,
            ..Default::default()
        };
        assert_eq!(report_async(&[Ok(0)], &rec), Err(Error::AGAIN));
    }

    #[test]
    fn av_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Av>();
        check::<AvState>();
    }

    #[test]
    fn effective_types() {
        assert_eq!(effective_type(FI_AV_UNSPEC), FI_AV_TABLE);
        assert_eq!(effective_type(FI_AV_MAP), FI_AV_MAP);
        assert_eq!(effective_type(77), 77);
    }
}
