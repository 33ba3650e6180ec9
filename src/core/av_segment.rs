//! The shm object behind a named (shared) AV (core/av_shared.rs has the
//! rules): `/dev/shm/rustfab-av-<uid>-<name>`, created by the first opener
//! without `FI_READ` (mode 0600, `O_EXCL`), which is then its only writer;
//! `FI_READ` openers map it read-only. This file knows the layout and
//! every access to it; it knows nothing of addresses (entries are bytes).
//!
//! ```text
//!  0      magic, version, format (transport and address layout, chosen by
//!         the caller), capacity, count (entries published; Release by the
//!         writer), creator pid, creator start time  (64 bytes, 8-byte words)
//!  64     the map array: capacity fi_addr_t, entry i's fi_addr (= i) —
//!         what `map_addr` points to; rustfab never reads it
//!  E      (64 + 8 * capacity, rounded up to 64) capacity entries of 128
//!         bytes: a length word, then at most 120 bytes of address
//! ```
//!
//! Everything is read as single aligned 8-byte loads (volatile: no Rust
//! reference to the memory, which other processes write and which a
//! reader maps read-only; the writer stores atomically), at offsets
//! bounded by the capacity this process saw at open (the header's copy may
//! be rewritten by anyone): a same-user writer's garbage costs the entries
//! it lands in, never a read outside the mapping.

use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::shm::{Access, SharedMap};
use core::sync::atomic::{AtomicU64, Ordering};
use parking_lot::Mutex;
use std::ffi::CString;

const MAGIC: u64 = u64::from_le_bytes(*b"RFSHAV01");
const VERSION: u64 = 1;
const HDR: usize = 64;
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_FORMAT: usize = 16;
const H_CAPACITY: usize = 24;
const H_COUNT: usize = 32;
const H_PID: usize = 40;
const H_START: usize = 48;
/// Bytes per entry: a length word and 15 words of address.
const ENTRY: usize = 128;
pub(crate) const ENTRY_DATA: usize = ENTRY - 8;
/// Entries a named AV holds at least (`count` is only a hint, and
/// applications often pass 1).
pub(crate) const MIN_CAPACITY: usize = 1024;
/// Entries a named AV holds at most (8.5 MiB of /dev/shm).
const MAX_CAPACITY: usize = 1 << 16;
/// Longest AV name (the object name must fit in a file name).
const MAX_NAME: usize = 200;
const PAGE: usize = 4096;

fn entries_off(cap: usize) -> usize {
    (HDR + 8 * cap).next_multiple_of(64)
}

fn seg_size(cap: usize) -> usize {
    (entries_off(cap) + ENTRY * cap).next_multiple_of(PAGE)
}

/// The shm object name of AV `name` for this user: `name` is 1 to 200
/// bytes of letters, digits, `.`, `_` and `-` (anything else, e.g. a `/`,
/// is -FI_EINVAL).
pub(crate) fn object_name(name: &str, uid: u32) -> Result<CString> {
    let ok = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
    if name.is_empty() || name.len() > MAX_NAME || !name.bytes().all(ok) {
        return Err(Error::INVAL);
    }
    CString::new(format!("/rustfab-av-{uid}-{name}")).map_err(|_| Error::INVAL)
}

/// The capacity a creator gives a named AV for a `count` hint.
fn capacity_for(count: usize) -> usize {
    count.clamp(MIN_CAPACITY, MAX_CAPACITY)
}

/// The header as read with `pread` (no mapping yet).
#[derive(Debug, PartialEq, Eq)]
struct Header {
    format: u64,
    capacity: usize,
    pid: i32,
    start: u64,
}

/// Reads and checks an existing object's owner, mode, size and header.
fn read_header(fd: &std::os::fd::OwnedFd) -> Result<Header> {
    let meta = sys::shm::meta(fd)?;
    if meta.uid != sys::geteuid() || meta.mode & 0o077 != 0 {
        return Err(Error::INVAL);
    }
    let mut b = [0u8; HDR];
    if sys::shm::read_at(fd, &mut b, 0)? != HDR {
        return Err(Error::INVAL);
    }
    let w = |off: usize| u64::from_ne_bytes(b[off..off + 8].try_into().expect("8 bytes"));
    let capacity = w(H_CAPACITY);
    if w(H_MAGIC) != MAGIC || w(H_VERSION) != VERSION || capacity == 0 || capacity > MAX_CAPACITY as u64 {
        return Err(Error::INVAL);
    }
    let capacity = capacity as usize;
    if meta.size != seg_size(capacity) as u64 {
        return Err(Error::INVAL);
    }
    Ok(Header {
        format: w(H_FORMAT),
        capacity,
        pid: i32::try_from(w(H_PID)).map_err(|_| Error::INVAL)?,
        start: w(H_START),
    })
}

/// Whether the creator named by a readable header still runs.
fn creator_alive(fd: &std::os::fd::OwnedFd) -> bool {
    read_header(fd).is_ok_and(|h| h.pid > 0 && sys::process_alive(h.pid, h.start))
}

/// The object names created and not removed yet, with the pid of the
/// process that created each: removed at that process's `exit()` too (a
/// creator that exits without `fi_close`), never at a forked child's.
static CREATED: Mutex<Vec<(i32, CString)>> = Mutex::new(Vec::new());
static ATEXIT: std::sync::Once = std::sync::Once::new();

extern "C" fn unlink_created_at_exit() {
    if let Some(mut v) = CREATED.try_lock() {
        let me = sys::getpid();
        for (_, name) in v.drain(..).filter(|(pid, _)| *pid == me) {
            sys::shm::unlink(&name);
        }
    }
}

/// One process's view of a named AV.
pub(crate) struct AvSegment {
    map: SharedMap,
    /// Entries the segment holds, as this process saw at open (bounds
    /// every access; the header's copy may be rewritten by anyone).
    capacity: usize,
    /// The creator: inserts and publishes; unlinks the name when dropped.
    writer: bool,
    object: CString,
    /// Serializes publishing (writer) or copying entries (reader) with the
    /// local table's index order.
    order: Mutex<()>,
}

impl core::fmt::Debug for AvSegment {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AvSegment")
            .field("object", &self.object)
            .field("writer", &self.writer)
            .finish()
    }
}

impl AvSegment {
    /// Opens the named AV `name`: read-only and existing (its creator
    /// alive, its header's format word `code`) with `read_only`, else
    /// created with room for `count` entries (at least [`MIN_CAPACITY`]).
    /// Errors: a bad name -FI_EINVAL; `FI_READ` of an AV that does not
    /// exist -FI_ENOENT, of a foreign or mismatched one -FI_EINVAL;
    /// creating one whose creator runs -FI_EBUSY (one writer per named AV).
    pub(crate) fn open(name: &str, read_only: bool, code: u64, count: usize) -> Result<AvSegment> {
        let object = object_name(name, sys::geteuid())?;
        if read_only {
            let fd = sys::shm::open(&object, Access::ReadOnly).map_err(|_| Error::NOENT)?;
            let h = read_header(&fd)?;
            if h.format != code {
                return Err(Error::INVAL);
            }
            if !(h.pid > 0 && sys::process_alive(h.pid, h.start)) {
                return Err(Error::NOENT);
            }
            let map = SharedMap::new_read_only(&fd, seg_size(h.capacity))?;
            return Ok(AvSegment {
                map,
                capacity: h.capacity,
                writer: false,
                object,
                order: Mutex::new(()),
            });
        }
        let capacity = capacity_for(count);
        let size = seg_size(capacity);
        ATEXIT.call_once(|| {
            // Without the registration the name is still removed on close,
            // and replaced by the next creator once this process is gone.
            let _ = sys::at_exit(unlink_created_at_exit);
        });
        let fd = match sys::shm::create(&object, size) {
            Err(Error::ADDRINUSE) => {
                // A name left by a creator that died is taken over.
                if let Ok(old) = sys::shm::open(&object, Access::ReadOnly) {
                    if creator_alive(&old) {
                        return Err(Error::BUSY);
                    }
                }
                sys::shm::unlink(&object);
                sys::shm::create(&object, size)?
            }
            r => r?,
        };
        let fail = |e: Error| {
            sys::shm::unlink(&object);
            e
        };
        // Allocate every page now (a write to a hole of a full /dev/shm
        // would raise SIGBUS; pwrite reports it).
        let zeros = vec![0u8; PAGE];
        for off in (0..size).step_by(PAGE) {
            if sys::shm::write_at(&fd, &zeros, off as u64).map_err(fail)? != PAGE {
                return Err(fail(Error::NOMEM));
            }
        }
        let pid = sys::getpid();
        let mut h = [0u8; HDR];
        for (off, v) in [
            (H_MAGIC, MAGIC),
            (H_VERSION, VERSION),
            (H_FORMAT, code),
            (H_CAPACITY, capacity as u64),
            (H_COUNT, 0),
            (H_PID, pid as u64),
            (H_START, sys::proc_start_time(pid).unwrap_or(0)),
        ] {
            h[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        }
        if sys::shm::write_at(&fd, &h, 0).map_err(fail)? != HDR {
            return Err(fail(Error::NOMEM));
        }
        let map = SharedMap::new(&fd, size).map_err(fail)?;
        CREATED.lock().push((pid, object.clone()));
        Ok(AvSegment {
            map,
            capacity,
            writer: true,
            object,
            order: Mutex::new(()),
        })
    }

    /// What `fi_av_attr.map_addr` returns: the map array in this process's
    /// mapping (entry i's `fi_addr` at index i).
    pub(crate) fn map_addr(&self) -> *mut u8 {
        // SAFETY: HDR is inside the mapping (seg_size > HDR).
        unsafe { self.map.as_ptr().add(HDR) }
    }

    /// The address of the 8-byte word at `off`, which must be 8-aligned
    /// and inside the mapping (a bug otherwise: offsets come from this
    /// process's capacity, never from the segment).
    fn at(&self, off: usize) -> *mut u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= seg_size(self.capacity));
        // SAFETY: inside the mapping (checked above; the mapping is
        // `seg_size(capacity)` bytes from a page-aligned base).
        unsafe { self.map.as_ptr().add(off).cast() }
    }

    /// Reads the word at `off` (one aligned 8-byte load; no reference to
    /// the memory is made: other processes may write it at any time, and a
    /// reader's mapping is read-only).
    fn load(&self, off: usize) -> u64 {
        // SAFETY: aligned and inside the mapping, which lives as long as
        // `self` (`at`); a volatile read of a u64 is one load, whatever
        // another process writes there meanwhile.
        unsafe { core::ptr::read_volatile(self.at(off)) }
    }

    /// Writes the word at `off` (the writer: its mapping is read-write),
    /// atomically with `order`.
    fn store(&self, off: usize, v: u64, order: Ordering) {
        assert!(self.writer);
        // SAFETY: aligned and inside our read-write mapping (`at`), which
        // lives as long as `self`; the word is only written atomically here
        // and only read with single loads elsewhere.
        unsafe { AtomicU64::from_ptr(self.at(off)) }.store(v, order);
    }

    /// Entries the segment holds (fixed at open).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether this process created the AV (and may write it).
    pub(crate) fn is_writer(&self) -> bool {
        self.writer
    }

    /// The object's name, for log lines.
    pub(crate) fn object(&self) -> &CString {
        &self.object
    }

    /// Held while entries are published (writer) or copied (reader), so
    /// that the local table's indices follow the segment's.
    pub(crate) fn order(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.order.lock()
    }

    /// Writes entry `idx` (its bytes, at most [`ENTRY_DATA`], and its map
    /// slot); a reader sees it once [`publish`](Self::publish) covers it.
    pub(crate) fn write_entry(&self, idx: usize, bytes: &[u8]) {
        assert!(self.writer && idx < self.capacity && bytes.len() <= ENTRY_DATA);
        let base = entries_off(self.capacity) + idx * ENTRY;
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.store(base + 8 + 8 * i, u64::from_ne_bytes(w), Ordering::Relaxed);
        }
        self.store(base, bytes.len() as u64, Ordering::Relaxed);
        self.store(HDR + 8 * idx, idx as u64, Ordering::Relaxed);
    }

    /// Makes entries `0..count` visible to readers (Release: a reader that
    /// sees the count sees the entries' bytes).
    pub(crate) fn publish(&self, count: usize) {
        self.store(H_COUNT, count as u64, Ordering::Release);
    }

    /// The number of published entries, at most the capacity.
    pub(crate) fn published(&self) -> usize {
        let n = self.load(H_COUNT);
        // Pairs with the writer's Release store of the count: the entries'
        // loads that follow are not made before this one.
        core::sync::atomic::fence(Ordering::Acquire);
        n.min(self.capacity as u64) as usize
    }

    /// A copy of entry `idx`'s bytes; -FI_EINVAL for an index past the
    /// capacity or a length word out of range.
    pub(crate) fn entry(&self, idx: usize) -> Result<Vec<u8>> {
        if idx >= self.capacity {
            return Err(Error::INVAL);
        }
        let base = entries_off(self.capacity) + idx * ENTRY;
        let len = self.load(base);
        if len == 0 || len > ENTRY_DATA as u64 {
            return Err(Error::INVAL);
        }
        let mut bytes = Vec::with_capacity(ENTRY_DATA);
        for i in 0..ENTRY_DATA / 8 {
            bytes.extend_from_slice(&self.load(base + 8 + 8 * i).to_ne_bytes());
        }
        bytes.truncate(len as usize);
        Ok(bytes)
    }
}

impl Drop for AvSegment {
    /// The creator removes the name: the AV no longer exists for new
    /// openers; readers keep their mapping and the entries they see.
    fn drop(&mut self) {
        if self.writer {
            CREATED.lock().retain(|(_, n)| *n != self.object);
            sys::shm::unlink(&self.object);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A name no other test (or run) uses.
    pub(crate) fn unique(tag: &str) -> String {
        format!("ut-{tag}-{}-{:x}", sys::getpid(), sys::random_u64().unwrap_or(7))
    }

    /// Overwrites word `off` of entry `idx` as a same-user process could.
    pub(crate) fn scribble(seg: &AvSegment, idx: usize, off: usize, v: u64) {
        seg.store(entries_off(seg.capacity) + idx * ENTRY + off, v, Ordering::Relaxed);
    }

    /// Overwrites the published count.
    pub(crate) fn scribble_count(seg: &AvSegment, v: u64) {
        seg.store(H_COUNT, v, Ordering::Release);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(
            object_name("server_av", 1000).unwrap().to_str().unwrap(),
            "/rustfab-av-1000-server_av"
        );
        for bad in ["", "a/b", "..\u{e9}", "sp ace", &"x".repeat(MAX_NAME + 1)] {
            assert_eq!(object_name(bad, 1).err(), Some(Error::INVAL), "{bad:?}");
        }
    }

    #[test]
    fn open_rules() {
        let name = unique("open");
        assert_eq!(
            AvSegment::open(&name, true, 7, 0).err(),
            Some(Error::NOENT),
            "must exist"
        );
        let w = AvSegment::open(&name, false, 7, 1).unwrap();
        assert!(w.is_writer());
        assert_eq!(w.capacity(), MIN_CAPACITY);
        assert_eq!(
            AvSegment::open(&name, false, 7, 1).err(),
            Some(Error::BUSY),
            "one writer"
        );
        assert_eq!(
            AvSegment::open(&name, true, 8, 0).err(),
            Some(Error::INVAL),
            "other format"
        );
        let r = AvSegment::open(&name, true, 7, 0).unwrap();
        assert!(!r.is_writer());
        assert_eq!(r.published(), 0);
        w.write_entry(0, b"abc");
        w.write_entry(1, &[9u8; ENTRY_DATA]);
        assert_eq!(r.published(), 0, "not before publish");
        w.publish(2);
        assert_eq!(r.published(), 2);
        assert_eq!(r.entry(0).unwrap(), b"abc");
        assert_eq!(r.entry(1).unwrap(), vec![9u8; ENTRY_DATA]);
        assert_eq!(r.entry(2), Err(Error::INVAL), "never written");
        assert_eq!(r.entry(MIN_CAPACITY), Err(Error::INVAL));
        // SAFETY: the map array has capacity u64 words; read as a copy.
        let m1 = unsafe { core::ptr::read_volatile((r.map_addr() as *const u64).add(1)) };
        assert_eq!(m1, 1);
        drop(w);
        assert_eq!(
            AvSegment::open(&name, true, 7, 0).err(),
            Some(Error::NOENT),
            "the creator's drop removes the name"
        );
        assert_eq!(r.entry(0).unwrap(), b"abc", "a reader keeps its mapping");
    }

    #[test]
    fn garbage_is_bounded() {
        let name = unique("garbage");
        let w = AvSegment::open(&name, false, 1, 0).unwrap();
        w.write_entry(0, b"ok");
        scribble(&w, 0, 0, u64::MAX);
        scribble_count(&w, u64::MAX);
        let r = AvSegment::open(&name, true, 1, 0).unwrap();
        assert_eq!(r.published(), MIN_CAPACITY);
        assert_eq!(r.entry(0), Err(Error::INVAL));
    }

    #[test]
    fn stale_name_of_a_dead_creator_is_taken_over() {
        let name = unique("stale");
        let object = object_name(&name, sys::geteuid()).unwrap();
        let fd = sys::shm::create(&object, seg_size(MIN_CAPACITY)).unwrap();
        let mut h = [0u8; HDR];
        h[..8].copy_from_slice(&MAGIC.to_ne_bytes());
        sys::shm::write_at(&fd, &h, 0).unwrap();
        let w = AvSegment::open(&name, false, 1, 0).unwrap();
        assert!(w.is_writer());
    }
}
