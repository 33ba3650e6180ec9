//! The shared-memory segment of one shm endpoint: a header, then one ring per
//! sender slot. Senders (other endpoints, possibly in other processes, or
//! this one) claim a slot and produce into its ring; the owner consumes.
//!
//! ```text
//!  0      header (4 KiB): magic, version, geometry, owner pid + start time,
//!         uid, token; `sleepers` (own cache line): >0 while the owner may
//!         sleep, so senders must ring its doorbell; `claim_seq` (own line):
//!         bumped whenever a slot becomes active.
//!  4096   slot 0: control line (state, sender token/pid/start time), ring
//!  ...    slot i at 4096 + i * SLOT_STRIDE
//! ```
//!
//! Naming and security: `/dev/shm/rustfab-<uid>-<token>` created with
//! `O_CREAT|O_EXCL` and mode 0600, so another user can neither open ours nor
//! have us use theirs (an opener checks the file's owner and mode, then the
//! header). The owner unlinks the name on close, at `exit()` (atexit
//! registry) and at provider cleanup; names left by killed processes are
//! swept when their owner is gone. Everything read from a segment is
//! validated before use; control words are only accessed atomically.

use super::ring::{ring_bytes, Ring};
use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::shm::{Access, SharedMap};
use core::sync::atomic::{AtomicU64, Ordering};
use parking_lot::Mutex;
use std::ffi::CString;

pub const SEG_MAGIC: u64 = u64::from_le_bytes(*b"RFSHMSEG");
pub const SEG_VERSION: u32 = 1;
pub const HEADER: usize = 4096;
pub const SLOT_CTL: usize = 64;
/// Sender slots per endpoint (peers that may send to it at once).
pub const NSLOTS: usize = 256;
/// Cells per ring (64 bytes each): 128 KiB per sender.
pub const NCELLS: usize = 2048;
pub const SLOT_STRIDE: usize = (SLOT_CTL + ring_bytes(NCELLS)).next_multiple_of(4096);
pub const SEG_SIZE: usize = HEADER + NSLOTS * SLOT_STRIDE;

// Header offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_NCELLS: usize = 16;
const H_START: usize = 24;
const H_TOKEN: usize = 32;
const H_UID: usize = 40;
const H_SLEEPERS: usize = 64;
const H_CLAIM_SEQ: usize = 128;
const H_CLOSED: usize = 192;
/// Bytes the owner wants pushed behind every RTS (`Port::rts_prefix`);
/// 0 (and so in segments of builds without it): none.
const H_RTS_PREFIX: usize = 256;

// Slot control offsets.
const S_STATE: usize = 0;
const S_TOKEN: usize = 8;
const S_PID: usize = 16;
const S_START: usize = 24;

/// Slot states (low byte of the state word).
pub const SLOT_FREE: u64 = 0;
pub const SLOT_CLAIMED: u64 = 1;
pub const SLOT_ACTIVE: u64 = 2;
pub const SLOT_CLOSED: u64 = 3;

/// Who is sending in a slot, as the owner reads it (copied, validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSender {
    pub token: u64,
    pub pid: i32,
    pub start: u64,
}

pub struct Segment {
    /// Reached only through raw pointers and atomics (other processes
    /// write it).
    map: SharedMap,
    name: CString,
    owner: bool,
    /// Owner identity (copied from the header when opened).
    pub owner_pid: i32,
    pub owner_start: u64,
}

/// This user's segment names start with it (in the shm namespace).
fn name_prefix() -> String {
    format!("rustfab-{}-", sys::geteuid())
}

fn seg_name(token: u64) -> CString {
    CString::new(format!("/{}{token:016x}", name_prefix())).unwrap_or_default()
}

/// Names created by this process, unlinked at exit if still present.
static CREATED: Mutex<Vec<CString>> = Mutex::new(Vec::new());
static ATEXIT: std::sync::Once = std::sync::Once::new();

extern "C" fn unlink_all_at_exit() {
    unlink_all();
}

/// Unlinks every segment name this process still owns (exit, cleanup).
pub fn unlink_all() {
    if let Some(mut v) = CREATED.try_lock() {
        for n in v.drain(..) {
            sys::shm::unlink(&n);
        }
    }
}

impl Segment {
    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: every offset used is inside the mapping, 8-aligned, and
        // the word is only accessed atomically by all parties.
        unsafe { AtomicU64::from_ptr(self.map.as_ptr().add(off) as *mut u64) }
    }

    fn read_u64(&self, off: usize) -> u64 {
        self.word(off).load(Ordering::Acquire)
    }

    /// Creates this endpoint's segment (exclusive). A stale segment of the
    /// same name (owner gone) is removed and creation retried once.
    pub fn create(token: u64) -> Result<Segment> {
        ATEXIT.call_once(|| {
            // Without the registration names are still removed on close,
            // at provider cleanup and by the next process's sweep.
            let _ = sys::at_exit(unlink_all_at_exit);
            sweep_stale();
        });
        let name = seg_name(token);
        let mut fd = sys::shm::create(&name, SEG_SIZE);
        if fd.as_ref().err() == Some(&Error::ADDRINUSE) && remove_if_stale(&name) {
            fd = sys::shm::create(&name, SEG_SIZE);
        }
        // The descriptor is closed once mapped (or on failure).
        let map = match SharedMap::new(fd?, SEG_SIZE) {
            Ok(m) => m,
            Err(e) => {
                sys::shm::unlink(&name);
                return Err(e);
            }
        };
        let pid = sys::getpid();
        let start = sys::proc_start_time(pid).unwrap_or(0);
        let seg = Segment {
            map,
            name: name.clone(),
            owner: true,
            owner_pid: pid,
            owner_start: start,
        };
        // Geometry and identity first; the magic last (Release), so an opener
        // that sees the magic sees a complete header.
        seg.word(H_VERSION)
            .store(SEG_VERSION as u64 | ((NSLOTS as u64) << 32), Ordering::Relaxed);
        seg.word(H_NCELLS)
            .store(NCELLS as u64 | ((pid as u32 as u64) << 32), Ordering::Relaxed);
        seg.word(H_START).store(start, Ordering::Relaxed);
        seg.word(H_TOKEN).store(token, Ordering::Relaxed);
        seg.word(H_UID).store(sys::geteuid() as u64, Ordering::Relaxed);
        seg.word(H_MAGIC).store(SEG_MAGIC, Ordering::Release);
        CREATED.lock().push(name);
        Ok(seg)
    }

    /// Maps a peer's segment and validates it: same owner uid, private
    /// mode, expected magic/version/geometry, matching token, live owner.
    pub fn open(token: u64) -> Result<Segment> {
        let name = seg_name(token);
        let fd = sys::shm::open(&name, Access::ReadWrite).map_err(|_| Error::ADDRNOTAVAIL)?;
        let private = sys::shm::meta(&fd)
            .is_ok_and(|m| m.uid == sys::geteuid() && m.mode & 0o077 == 0 && m.size == SEG_SIZE as u64);
        if !private {
            return Err(Error::ADDRNOTAVAIL);
        }
        let map = SharedMap::new(fd, SEG_SIZE)?;
        let mut seg = Segment {
            map,
            name,
            owner: false,
            owner_pid: 0,
            owner_start: 0,
        };
        if seg.read_u64(H_MAGIC) != SEG_MAGIC {
            return Err(Error::ADDRNOTAVAIL);
        }
        let vs = seg.read_u64(H_VERSION);
        let cp = seg.read_u64(H_NCELLS);
        let geometry_ok = (vs & 0xffff_ffff) as u32 == SEG_VERSION
            && (vs >> 32) as usize == NSLOTS
            && (cp & 0xffff_ffff) as usize == NCELLS
            && seg.read_u64(H_TOKEN) == token
            && seg.read_u64(H_UID) == sys::geteuid() as u64;
        if !geometry_ok {
            return Err(Error::ADDRNOTAVAIL);
        }
        seg.owner_pid = (cp >> 32) as u32 as i32;
        seg.owner_start = seg.read_u64(H_START);
        Ok(seg)
    }

    /// Whether the owning process still exists.
    pub fn owner_alive(&self) -> bool {
        self.read_u64(H_CLOSED) == 0 && sys::process_alive(self.owner_pid, self.owner_start)
    }

    /// Owner: mark the segment closed (senders stop using it).
    pub fn mark_closed(&self) {
        self.word(H_CLOSED).store(1, Ordering::Release);
    }

    #[cfg(test)]
    pub fn closed(&self) -> bool {
        self.read_u64(H_CLOSED) != 0
    }

    pub fn sleepers(&self) -> u64 {
        self.word(H_SLEEPERS).load(Ordering::SeqCst)
    }

    pub fn set_sleepers(&self, n: u64) {
        self.word(H_SLEEPERS).store(n, Ordering::SeqCst);
    }

    /// Owner: the RTS prefix it wants (buffered receives).
    pub fn set_rts_prefix(&self, n: u64) {
        self.word(H_RTS_PREFIX).store(n, Ordering::Release);
    }

    /// The RTS prefix the owner wants (a peer-written value: the caller
    /// clamps it).
    pub fn rts_prefix(&self) -> u64 {
        self.read_u64(H_RTS_PREFIX)
    }

    pub fn claim_seq(&self) -> u64 {
        self.read_u64(H_CLAIM_SEQ)
    }

    fn slot_base(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < NSLOTS);
        // SAFETY: slot < NSLOTS keeps the offset inside the mapping.
        unsafe { self.map.as_ptr().add(HEADER + slot * SLOT_STRIDE) }
    }

    fn slot_word(&self, slot: usize, off: usize) -> &AtomicU64 {
        // SAFETY: inside the slot's control line, 8-aligned, atomic-only.
        unsafe { AtomicU64::from_ptr(self.slot_base(slot).add(off) as *mut u64) }
    }

    pub fn ring(&self, slot: usize) -> Ring {
        // SAFETY: the ring lies inside the slot, 64-aligned (slot bases are
        // page-aligned, SLOT_CTL = 64) and lives as long as the mapping; the
        // Ring is used only while the owning Segment is alive (callers keep
        // the Segment next to the Ring).
        unsafe { Ring::new(self.slot_base(slot).add(SLOT_CTL), NCELLS) }
    }

    pub fn slot_state(&self, slot: usize) -> u64 {
        self.slot_word(slot, S_STATE).load(Ordering::Acquire) & 0xff
    }

    /// Sender: claims a free slot and announces itself; returns the slot.
    pub fn claim_slot(&self, me: SlotSender) -> Result<usize> {
        for slot in 0..NSLOTS {
            let w = self.slot_word(slot, S_STATE);
            let cur = w.load(Ordering::Acquire);
            if cur & 0xff != SLOT_FREE {
                continue;
            }
            let gen = (cur >> 8).wrapping_add(1);
            if w.compare_exchange(cur, SLOT_CLAIMED | (gen << 8), Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            self.slot_word(slot, S_TOKEN).store(me.token, Ordering::Relaxed);
            self.slot_word(slot, S_PID)
                .store(me.pid as u32 as u64, Ordering::Relaxed);
            self.slot_word(slot, S_START).store(me.start, Ordering::Relaxed);
            self.ring(slot).reset();
            w.store(SLOT_ACTIVE | (gen << 8), Ordering::Release);
            self.word(H_CLAIM_SEQ).fetch_add(1, Ordering::AcqRel);
            return Ok(slot);
        }
        Err(Error::AGAIN)
    }

    /// Sender: no more records will come in this slot.
    pub fn close_slot(&self, slot: usize) {
        let w = self.slot_word(slot, S_STATE);
        let cur = w.load(Ordering::Acquire);
        if cur & 0xff == SLOT_ACTIVE {
            let _ = w.compare_exchange(cur, SLOT_CLOSED | (cur & !0xff), Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Owner: reads who sends in an active/closed slot.
    pub fn slot_sender(&self, slot: usize) -> SlotSender {
        SlotSender {
            token: self.slot_word(slot, S_TOKEN).load(Ordering::Acquire),
            pid: self.slot_word(slot, S_PID).load(Ordering::Acquire) as u32 as i32,
            start: self.slot_word(slot, S_START).load(Ordering::Acquire),
        }
    }

    /// Owner: returns a drained slot to the free pool.
    pub fn free_slot(&self, slot: usize) {
        let w = self.slot_word(slot, S_STATE);
        let cur = w.load(Ordering::Acquire);
        w.store(SLOT_FREE | (cur & !0xff), Ordering::Release);
    }

    /// The abstract-namespace name of the owner's doorbell socket (without
    /// the kernel's leading NUL: `@rustfab-<uid>-<token>` in `ss -x`).
    pub fn doorbell_name(token: u64) -> Vec<u8> {
        format!("{}{token:016x}", name_prefix()).into_bytes()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            self.mark_closed();
            sys::shm::unlink(&self.name);
            CREATED.lock().retain(|n| n != &self.name);
        }
        // `map` is unmapped after this: Rings taken from the segment are
        // used only while it lives (their users keep both together).
    }
}

/// A segment without a header is only taken for abandoned after this long.
const UNINIT_GRACE_SECS: i64 = 10;

/// Removes `name` if it is ours (uid) and its owner process is gone.
fn remove_if_stale(name: &CString) -> bool {
    let Ok(fd) = sys::shm::open(name, Access::ReadOnly) else {
        return false;
    };
    let Ok(meta) = sys::shm::meta(&fd) else {
        return false;
    };
    if meta.uid != sys::geteuid() {
        return false;
    }
    // The header's first six words: magic, version, ncells|pid, start.
    let mut hdr = [0u8; 48];
    let n = sys::shm::read_at(&fd, &mut hdr, 0).unwrap_or(0);
    drop(fd);
    let word = |i: usize| u64::from_ne_bytes(hdr[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let stale = if n == 48 && word(H_MAGIC / 8) == SEG_MAGIC {
        let pid = (word(H_NCELLS / 8) >> 32) as u32 as i32;
        !sys::process_alive(pid, word(H_START / 8))
    } else {
        // No header yet: either a creator that died between create and
        // init, or one that is initialising right now. Only the first can
        // be old.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64);
        now.is_ok_and(|t| t - meta.ctime > UNINIT_GRACE_SECS)
    };
    if stale {
        sys::shm::unlink(name);
    }
    stale
}

/// Removes our stale segments (owners killed before they could unlink).
fn sweep_stale() {
    for name in sys::shm::list(&name_prefix()) {
        remove_if_stale(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta_of(token: u64) -> Option<sys::shm::Meta> {
        let fd = sys::shm::open(&seg_name(token), Access::ReadOnly).ok()?;
        sys::shm::meta(&fd).ok()
    }

    /// Leaves an object named like `token`'s segment with a complete
    /// header that says `pid`/`start` own it, as a killed owner would.
    fn plant(token: u64, pid: i32, start: u64) {
        let name = seg_name(token);
        let map = SharedMap::new(sys::shm::create(&name, SEG_SIZE).unwrap(), SEG_SIZE).unwrap();
        let w = |off: usize, v: u64| {
            // SAFETY: header words inside the fresh mapping, 8-aligned,
            // accessed atomically only.
            unsafe { AtomicU64::from_ptr(map.as_ptr().add(off).cast()) }.store(v, Ordering::Release)
        };
        w(H_VERSION, SEG_VERSION as u64 | ((NSLOTS as u64) << 32));
        w(H_NCELLS, NCELLS as u64 | ((pid as u32 as u64) << 32));
        w(H_START, start);
        w(H_TOKEN, token);
        w(H_UID, sys::geteuid() as u64);
        w(H_MAGIC, SEG_MAGIC);
    }

    #[test]
    fn create_open_claim_and_cleanup() {
        let token = crate::transport::addr::shm_token_random();
        let owner = Segment::create(token).unwrap();
        let md = meta_of(token).unwrap();
        assert_eq!(md.mode & 0o777, 0o600, "segment must be private");
        assert_eq!(md.uid, sys::geteuid());
        assert_eq!(md.size, SEG_SIZE as u64);
        // A second exclusive create of the same live name fails.
        assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
        let peer = Segment::open(token).unwrap();
        assert_eq!(peer.owner_pid, sys::getpid());
        assert!(peer.owner_alive());
        let me = SlotSender {
            token: 42,
            pid: sys::getpid(),
            start: 7,
        };
        let s = peer.claim_slot(me).unwrap();
        assert_eq!(owner.slot_state(s), SLOT_ACTIVE);
        assert_eq!(owner.slot_sender(s), me);
        assert!(owner.claim_seq() >= 1);
        let s2 = peer.claim_slot(me).unwrap();
        assert_ne!(s, s2);
        peer.close_slot(s);
        assert_eq!(owner.slot_state(s), SLOT_CLOSED);
        owner.free_slot(s);
        assert_eq!(owner.slot_state(s), SLOT_FREE);
        drop(owner);
        assert!(meta_of(token).is_none(), "segment must be unlinked on close");
        assert!(peer.closed());
        assert!(!peer.owner_alive());
        assert!(Segment::open(token).is_err());
    }

    #[test]
    fn garbage_and_foreign_segments_rejected() {
        assert!(Segment::open(0x1234_5678_9abc_def0).is_err());
        // A same-named object that is not a rustfab segment (wrong size).
        let token = crate::transport::addr::shm_token_random();
        let name = seg_name(token);
        drop(sys::shm::create(&name, 4096).unwrap());
        assert!(Segment::open(token).is_err());
        // A name without a header may be a creator still initialising: it
        // is not taken over while young (only after UNINIT_GRACE_SECS).
        assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
        assert!(!remove_if_stale(&name));
        assert!(sys::shm::unlink(&name));
        let s = Segment::create(token).unwrap();
        drop(s);
        // A well-formed segment that others may read is refused.
        let token = crate::transport::addr::shm_token_random();
        let owner = Segment::create(token).unwrap();
        let path = format!("/dev/shm{}", seg_name(token).to_str().unwrap());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Segment::open(token).err(), Some(Error::ADDRNOTAVAIL));
        drop(owner);
    }

    #[test]
    fn dead_owners_segment_is_reclaimed_live_ones_are_not() {
        // This process's first create sweeps once; have it done before
        // planting, so that only this test's own sweep runs below.
        drop(Segment::create(crate::transport::addr::shm_token_random()).unwrap());
        let me = sys::getpid();
        let my_start = sys::proc_start_time(me).unwrap();
        // Same pid, other start time: an earlier incarnation of this pid,
        // i.e. an owner that died (and whose pid was reused).
        let token = crate::transport::addr::shm_token_random();
        plant(token, me, my_start + 1);
        assert!(!Segment::open(token).unwrap().owner_alive());
        let seg = Segment::create(token).unwrap();
        assert_eq!(seg.owner_start, my_start, "ours now");
        drop(seg);
        // A live owner's segment stays.
        let token = crate::transport::addr::shm_token_random();
        plant(token, me, my_start);
        assert_eq!(Segment::create(token).err(), Some(Error::ADDRINUSE));
        assert!(Segment::open(token).unwrap().owner_alive());
        // A sweep (as at the first create of a process) takes only the dead.
        let dead = crate::transport::addr::shm_token_random();
        plant(dead, me, my_start + 1);
        sweep_stale();
        assert!(meta_of(dead).is_none(), "dead owner's segment swept");
        assert!(meta_of(token).is_some(), "live owner's segment kept");
        assert!(sys::shm::unlink(&seg_name(token)));
    }
}
