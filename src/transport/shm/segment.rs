//! The shared-memory segment of one shm endpoint: a header, then one ring per
//! sender slot. Senders (other endpoints, possibly in other processes, or
//! this one) claim a slot and produce into its ring; the owner consumes.
//!
//! ```text
//!  0      header (4 KiB): magic, version, geometry, owner pid + start time,
//!         uid, token; `sleepers` (own cache line): >0 while the owner may
//!         sleep, so senders must ring its doorbell; `claim_seq` (own line):
//!         bumped whenever a slot becomes active; the ready list (own
//!         line): a summary word and a bitmap of the slots whose senders
//!         signalled records the owner does not watch for (ready.rs).
//!  4096   the slots' control lines, 64 bytes each (state word: state |
//!         generation | claimer pid; sender token/pid/start time;
//!         `watched`, written by the owner: it polls this ring on every
//!         pass): slot i's at 4096 + 64 * i
//!  20480  (CTL_AREA) slot 0's ring, page-aligned
//!  ...    slot i's ring at CTL_AREA + i * slot_stride(ncells)
//! ```
//!
//! Every page of a segment is allocated before anyone touches it (in a
//! tmpfs mapping a read of a hole allocates a page as a write does, and
//! with /dev/shm full either raises SIGBUS): the header and control lines
//! by the owner at creation, a ring's first page by its claimer, more of
//! the ring in steps by its sender before it writes there; where that
//! fails the operation fails (or the sender stays within what it has),
//! docs/shm.md "Memory".
//!
//! Slots of senders that died without closing are reclaimed by the owner
//! once their death is proven: a claimed-but-not-active slot when its
//! claimer's pid no longer exists, an active one when its sender's pid +
//! start time (kernel-verified through the doorbell when available) no
//! longer name a live process. A sender that finds no free slot bumps
//! `claim_seq`, which makes the owner look (docs/shm.md, "Slots").
//!
//! Naming and security: `/dev/shm/rustfab-<uid>-<token>` created with
//! `O_CREAT|O_EXCL` and mode 0600, so another user can neither open ours nor
//! have us use theirs (an opener checks the file's owner and mode, then the
//! header). The owner unlinks the name on close, at `exit()` (atexit
//! registry) and at provider cleanup; names left by killed processes are
//! swept when their owner is gone. Everything read from a segment is
//! validated before use; control words are only accessed atomically. The
//! owner's doorbell is a socket file in the private directory
//! `/dev/shm/rustfab-<uid>/` (0700), named by the token.
//!
//! Why this file is longer than the others (~1,000 lines of code): it holds
//! the segment's layout (the header's and the control lines' offsets,
//! `H_*` and `S_*`, private here) and every access to those words, each an
//! atomic through a `Segment` method, so that no other file computes an
//! address in memory another process writes. Splitting the accessors by
//! concern would make those offsets visible to every part.

use super::ring::{ring_bytes, Ring, CELL};
use super::sync::Handshake;
use crate::base::error::{Error, Result};
use crate::sys;
use crate::sys::doorbell::Doorbell;
use crate::sys::shm::{Access, SharedMap};
use core::sync::atomic::{AtomicU64, Ordering};
use parking_lot::Mutex;
use std::ffi::CString;

/// The ring size of a segment file of `size` bytes, if that is a size a
/// segment may have.
fn cells_of_size(size: u64) -> Option<usize> {
    let mut n = NCELLS;
    while n <= NCELLS_MAX {
        if seg_size(n) as u64 == size {
            return Some(n);
        }
        n *= 2;
    }
    None
}

pub(crate) const SEG_MAGIC: u64 = u64::from_le_bytes(*b"RFSHMSEG");
/// 2: the slot state word carries a 24-bit generation and the claimer's
/// pid (reclaiming the slots of dead senders); the doorbell is a socket file
/// in a private directory and learns who claims a slot (credentials).
/// 3: a record is published by its first word, written last, which the
/// consumer polls in the cell (the ring's tail word is no longer used; the
/// producer zeroes the first word of the next record's cell); the ready
/// list (a bitmap in the header, a `watched` word per slot): the owner
/// polls only the rings that carried records lately, and a sender signals
/// the others (ready.rs).
/// 4: the header's `handshake` word (offset 48): 1 when the owner makes
/// `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)` on its side of the
/// wake-up and ready-list handshakes, so that registered senders publish
/// without a full fence (sync.rs); anything else, both sides fence.
/// 5: EAGER records carry a compact header (flag `COMPACT`, proto.rs:
/// 16 to 40 bytes, the payload right after it; up to 48 bytes of payload
/// in the record's first cell) instead of the 64-byte header with at most
/// 16 bytes inline (`INLINE`, whose bit it reuses).
/// 6: a producer may go back to the ring's first cell before a record of
/// `ring::REWIND_MIN` cells or more, leaving `ring::REWIND` as the first
/// word of the cell at its old tail (ring.rs, rewinding): a version-5
/// consumer would take the marker for a corrupt record.
/// 7: a record's (and a rewind marker's) first word carries the low 16
/// bits of its cell index's lap in its top 16 bits (the header's flag bits
/// 16..32, `sync::LAP_TAG`), and the consumer takes only a word with the
/// magic and its head's lap tag; the producer no longer zeroes the next
/// record's cell on every send, only when its stale word would read as
/// published (ring.rs). The marker is the magic with version and op 0.
pub(crate) const SEG_VERSION: u32 = 7;
pub(crate) const HEADER: usize = 4096;
/// A slot's control line, in the table after the header.
pub(crate) const SLOT_CTL: usize = 64;
/// The header and the slots' control lines (5 pages), allocated at
/// creation; the rings start here.
pub(crate) const CTL_AREA: usize = HEADER + NSLOTS * SLOT_CTL;
/// Bytes of /dev/shm a sender leaves free when it allocates more of a ring
/// than it needs to work (`Segment::populate_cells`): the room other peers
/// need for their first 64 KiB is never taken by one peer's large ring.
pub(crate) const STEP_HEADROOM: u64 = 1 << 20;
/// Sender slots per endpoint (peers that may send to it at once).
pub(crate) const NSLOTS: usize = 256;
/// Cells per ring (64 bytes each) by default: 128 KiB per sender. The
/// owner chooses its rings' size (`FI_RUSTFAB_SHM_RING_CELLS`, a power of
/// two from NCELLS to NCELLS_MAX), writes it in the header and sizes the
/// segment by it; a sender takes the owner's (docs/shm.md, "Ring size").
pub(crate) const NCELLS: usize = 2048;
pub(crate) const NCELLS_MAX: usize = 65536;
/// Bytes between two slots' rings of a segment whose rings have `ncells`
/// cells (each ring in pages of its own).
pub(crate) const fn slot_stride(ncells: usize) -> usize {
    ring_bytes(ncells).next_multiple_of(sys::shm::PAGE)
}
/// Size of a segment whose rings have `ncells` cells.
pub(crate) const fn seg_size(ncells: usize) -> usize {
    CTL_AREA + NSLOTS * slot_stride(ncells)
}
#[cfg(test)]
pub(crate) const SEG_SIZE: usize = seg_size(NCELLS);
/// Whether `ncells` is a ring size a segment may have.
pub(crate) const fn ring_cells_ok(ncells: usize) -> bool {
    ncells.is_power_of_two() && ncells >= NCELLS && ncells <= NCELLS_MAX
}

// Header offsets.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_NCELLS: usize = 16;
const H_START: usize = 24;
const H_TOKEN: usize = 32;
const H_UID: usize = 40;
/// 1: the owner's side of the handshakes is a membarrier (sync.rs
/// `Handshake::Membarrier`); written before the magic, read once by an
/// opener (a hostile owner that lies only loses its own wake-ups).
const H_HANDSHAKE: usize = 48;
const H_SLEEPERS: usize = 64;
const H_CLAIM_SEQ: usize = 128;
const H_CLOSED: usize = 192;
/// Bytes the owner wants pushed behind every RTS (`Hints::rts_prefix`);
/// 0 (and so in segments of builds without it): none.
const H_RTS_PREFIX: usize = 256;
/// The ready list (ready.rs): the summary word, then one bit per slot.
const H_READY: usize = 512;
const H_READY_BITS: usize = H_READY + 8;
const READY_WORDS: usize = NSLOTS / 64;

// Slot control offsets.
const S_STATE: usize = 0;
const S_TOKEN: usize = 8;
const S_PID: usize = 16;
const S_START: usize = 24;
/// Written by the owner only: non-zero while it polls this ring on every
/// pass (senders then need not signal it).
const S_WATCH: usize = 32;
/// Written by the sender only, before it closes the slot: 0, or the FI_E*
/// code for which it gave the ring up (FI_ENOMEM: /dev/shm had no room for
/// it), so that the owner fails it as a peer instead of taking the close
/// for an orderly one (docs/shm.md, "A full /dev/shm"). Zeroed at a claim.
const S_ABORT: usize = 40;

/// Slot states (low byte of the state word; bits 8..32 the generation,
/// bits 32..64 the pid of the process that claimed it).
pub(crate) const SLOT_FREE: u64 = 0;
pub(crate) const SLOT_CLAIMED: u64 = 1;
pub(crate) const SLOT_ACTIVE: u64 = 2;
pub(crate) const SLOT_CLOSED: u64 = 3;

/// Who is sending in a slot, as the owner reads it (copied, validated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotSender {
    pub token: u64,
    pub pid: i32,
    pub start: u64,
}

pub(crate) struct Segment {
    /// Reached only through raw pointers and atomics (other processes
    /// write it).
    map: SharedMap,
    name: CString,
    token: u64,
    owner: bool,
    /// Cells per ring (the owner's choice, from the header when opened).
    ncells: usize,
    /// `slot_stride(ncells)`, computed once: `slot_base` runs on every send
    /// (`after_publish` reads the slot's `watched` word).
    stride: usize,
    /// Owner identity (copied from the header when opened).
    pub owner_pid: i32,
    pub owner_start: u64,
    /// The barriers of the handshakes with the owner (sync.rs): chosen by
    /// the owner at creation; an opener uses `Membarrier` only if the
    /// header says so and its own process is registered.
    hs: Handshake,
    /// Tests: `populate_cells` up to past this cell finds no room, and with 0
    /// `reserve_slot` too (a full /dev/shm, which a test cannot arrange
    /// for the whole machine).
    #[cfg(test)]
    pub no_room_from: AtomicU64,
}

/// This user's segment names start with it (in the shm namespace).
fn name_prefix() -> String {
    format!("rustfab-{}-", sys::geteuid())
}

pub(super) fn seg_name(token: u64) -> CString {
    CString::new(format!("/{}{token:016x}", name_prefix())).unwrap_or_default()
}

/// The private directory of this user's doorbells (docs/security.md).
pub(crate) fn bell_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/dev/shm/rustfab-{}", sys::geteuid()))
}

/// The socket file of the doorbell of the endpoint with `token`.
pub(crate) fn doorbell_path(token: u64) -> std::path::PathBuf {
    bell_dir().join(format!("{token:016x}"))
}

/// Owner: binds the doorbell of the endpoint with `token`, whose segment it
/// has just created exclusively (so a socket file of that name can only be
/// a dead owner's: it is removed first). The directory must be private and
/// ours (`Err(ACCES)` otherwise, with a warning: another user may have
/// taken its name).
pub(crate) fn bind_doorbell(token: u64) -> Result<Doorbell> {
    let dir = bell_dir();
    if let Err(e) = sys::doorbell::private_dir(&dir) {
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_CTRL,
            "shm: {} is not a private directory of this user (mode 0700, owner uid {}): no shm endpoint can be opened",
            dir.display(),
            sys::geteuid()
        );
        return Err(e);
    }
    let path = doorbell_path(token);
    sys::doorbell::remove(&path);
    Doorbell::bind(&path)
}

/// "Who I am" datagram a sender sends the owner's doorbell between claiming
/// a slot and activating it: magic, the owner's token, slot | generation<<32,
/// the sender's token. The owner believes it only with the kernel's
/// credentials (pid, uid) attached to the datagram.
pub(crate) const HELLO_MAGIC: u64 = u64::from_le_bytes(*b"RFSHMHI1");
pub(crate) const HELLO_LEN: usize = 32;

pub(crate) fn hello_bytes(owner_token: u64, c: Claim, sender_token: u64) -> [u8; HELLO_LEN] {
    datagram(HELLO_MAGIC, owner_token, [c.slot as u64 | (c.gen << 32), sender_token])
}

/// Parses a "who I am" datagram meant for `owner_token`: (claim, sender
/// token); None for anything else (plain rings, garbage).
pub(crate) fn parse_hello(owner_token: u64, b: &[u8]) -> Option<(Claim, u64)> {
    let [w2, w3] = parse_datagram(HELLO_MAGIC, owner_token, b)?;
    let slot = (w2 & 0xffff_ffff) as usize;
    (slot < NSLOTS).then_some((Claim { slot, gen: w2 >> 32 }, w3))
}

/// A doorbell datagram: the magic, the owner's token, two words.
fn datagram(magic: u64, owner_token: u64, rest: [u64; 2]) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    for (i, w) in [magic, owner_token, rest[0], rest[1]].into_iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    b
}

/// The two words of a [`datagram`] with `magic` meant for `owner_token`.
fn parse_datagram(magic: u64, owner_token: u64, b: &[u8]) -> Option<[u64; 2]> {
    if b.len() != HELLO_LEN {
        return None;
    }
    let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    (w(0) == magic && w(1) == owner_token).then(|| [w(2), w(3)])
}

/// "I cannot reach you": a datagram to the owner's doorbell from a process
/// that found no room in /dev/shm for a ring in its segment while it owed
/// it a reply (docs/shm.md, "A full /dev/shm"): owner token, the sender's
/// token, the FI_E* code. Believed only with the kernel's credentials
/// (the sender token's segment must be that pid's).
pub(crate) const REFUSAL_MAGIC: u64 = u64::from_le_bytes(*b"RFSHMNO1");

pub(crate) fn refusal_bytes(owner_token: u64, sender_token: u64, code: u32) -> [u8; HELLO_LEN] {
    datagram(REFUSAL_MAGIC, owner_token, [sender_token, code as u64])
}

/// Parses a refusal meant for `owner_token`: the sender's token.
pub(crate) fn parse_refusal(owner_token: u64, b: &[u8]) -> Option<u64> {
    parse_datagram(REFUSAL_MAGIC, owner_token, b).map(|[t, _]| t)
}

/// A slot claimed by a sender (state CLAIMED until activated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Claim {
    pub slot: usize,
    pub gen: u64,
}

/// A slot's state word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotWord {
    pub state: u64,
    pub gen: u64,
    /// The pid of the process that claimed it (0 if free).
    pub pid: i32,
    raw: u64,
}

impl SlotWord {
    /// The word as read.
    pub(crate) fn raw(&self) -> u64 {
        self.raw
    }
}

const GEN_MASK: u64 = 0xff_ffff;

fn slot_word_of(state: u64, gen: u64, pid: i32) -> u64 {
    state | ((gen & GEN_MASK) << 8) | ((pid as u32 as u64) << 32)
}

/// Tokens of the segments created by this process, unlinked (with their
/// doorbells) at exit if still present.
static CREATED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static ATEXIT: std::sync::Once = std::sync::Once::new();

extern "C" fn unlink_all_at_exit() {
    unlink_all();
}

/// Unlinks every segment name this process still owns (exit, cleanup).
pub(crate) fn unlink_all() {
    if let Some(mut v) = CREATED.try_lock() {
        for t in v.drain(..) {
            sys::shm::unlink(&seg_name(t));
            sys::doorbell::remove(&doorbell_path(t));
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

    /// [`Segment::create_with`] the default ring size (tests).
    #[cfg(test)]
    pub(crate) fn create(token: u64) -> Result<Segment> {
        Segment::create_with(token, NCELLS)
    }

    /// Creates this endpoint's segment (exclusive), its rings of `ncells`
    /// cells (`ring_cells_ok`, else `-FI_EINVAL`). A stale segment of the
    /// same name (owner gone) is removed and creation retried once.
    pub(crate) fn create_with(token: u64, ncells: usize) -> Result<Segment> {
        if !ring_cells_ok(ncells) {
            return Err(Error::INVAL);
        }
        let size = seg_size(ncells);
        ATEXIT.call_once(|| {
            // Without the registration names are still removed on close,
            // at provider cleanup and by the next process's sweep.
            let _ = sys::at_exit(unlink_all_at_exit);
            sweep_stale();
        });
        let name = seg_name(token);
        let mut fd = sys::shm::create(&name, size);
        if fd.as_ref().err() == Some(&Error::ADDRINUSE) && remove_if_stale(&name) {
            fd = sys::shm::create(&name, size);
        }
        // The descriptor is closed once mapped (or on failure). The header
        // is written below and the control lines are read by every pass and
        // claim: their pages are allocated first, so that a full
        // /dev/shm is an error here, not a SIGBUS at the first store
        // ("Memory" in docs/shm.md).
        let map = match SharedMap::new(fd?, size).and_then(|m| m.reserve(0, CTL_AREA).map(|()| m)) {
            Ok(m) => m,
            Err(e) => {
                sys::shm::unlink(&name);
                return Err(e);
            }
        };
        let pid = sys::getpid();
        let start = sys::proc_start_time(pid).unwrap_or(0);
        let hs = if sys::membarrier_register() {
            Handshake::Membarrier
        } else {
            Handshake::Fences
        };
        let seg = Segment {
            map,
            name: name.clone(),
            token,
            owner: true,
            ncells,
            stride: slot_stride(ncells),
            owner_pid: pid,
            owner_start: start,
            hs,
            #[cfg(test)]
            no_room_from: AtomicU64::new(u64::MAX),
        };
        // Geometry and identity first; the magic last (Release), so an opener
        // that sees the magic sees a complete header.
        seg.word(H_VERSION)
            .store(SEG_VERSION as u64 | ((NSLOTS as u64) << 32), Ordering::Relaxed);
        seg.word(H_NCELLS)
            .store(ncells as u64 | ((pid as u32 as u64) << 32), Ordering::Relaxed);
        seg.word(H_START).store(start, Ordering::Relaxed);
        seg.word(H_TOKEN).store(token, Ordering::Relaxed);
        seg.word(H_UID).store(sys::geteuid() as u64, Ordering::Relaxed);
        seg.word(H_HANDSHAKE)
            .store((hs == Handshake::Membarrier) as u64, Ordering::Relaxed);
        seg.word(H_MAGIC).store(SEG_MAGIC, Ordering::Release);
        CREATED.lock().push(token);
        Ok(seg)
    }

    /// Maps a peer's segment and validates it: same owner uid, private
    /// mode, expected magic/version/geometry, matching token, live owner.
    /// A segment that is there but not one we may use is refused with a
    /// warning naming it and what is wrong (`refused`); one that is not
    /// there (its owner closed it) quietly.
    pub(crate) fn open(token: u64) -> Result<Segment> {
        let name = seg_name(token);
        let fd = sys::shm::open(&name, Access::ReadWrite).map_err(|_| Error::ADDRNOTAVAIL)?;
        // The ring size the file's size says (one of the sizes a segment
        // may have); the header must say the same.
        let Ok(meta) = sys::shm::meta(&fd) else {
            return Err(Error::ADDRNOTAVAIL);
        };
        if meta.uid != sys::geteuid() || meta.mode & 0o077 != 0 {
            return Err(refused(&name, "not ours (owner uid, or group/other may use it)"));
        }
        let Some(ncells) = cells_of_size(meta.size) else {
            // Size 0: its creator has not sized it yet.
            if meta.size == 0 {
                return Err(Error::ADDRNOTAVAIL);
            }
            return Err(refused(&name, "a size no segment has"));
        };
        let map = SharedMap::new(fd, seg_size(ncells))?;
        let mut seg = Segment {
            map,
            name,
            token,
            owner: false,
            ncells,
            stride: slot_stride(ncells),
            owner_pid: 0,
            owner_start: 0,
            hs: Handshake::Fences,
            #[cfg(test)]
            no_room_from: AtomicU64::new(u64::MAX),
        };
        match seg.read_u64(H_MAGIC) {
            SEG_MAGIC => {}
            // Its creator has not written the header yet (or died first).
            0 => return Err(Error::ADDRNOTAVAIL),
            _ => return Err(refused(&seg.name, "the header's magic is not RFSHMSEG (overwritten?)")),
        }
        let vs = seg.read_u64(H_VERSION);
        let cp = seg.read_u64(H_NCELLS);
        let wrong = if (vs & 0xffff_ffff) as u32 != SEG_VERSION {
            Some("another segment version")
        } else if (vs >> 32) as usize != NSLOTS || (cp & 0xffff_ffff) as usize != ncells {
            Some("a geometry (slots, ring size) that is not the file's")
        } else if seg.read_u64(H_TOKEN) != token {
            Some("another endpoint's token")
        } else if seg.read_u64(H_UID) != sys::geteuid() as u64 {
            Some("another uid")
        } else {
            None
        };
        if let Some(what) = wrong {
            return Err(refused(&seg.name, what));
        }
        seg.owner_pid = (cp >> 32) as u32 as i32;
        seg.owner_start = seg.read_u64(H_START);
        // Registered before the first record we publish here.
        if seg.read_u64(H_HANDSHAKE) == 1 && sys::membarrier_register() {
            seg.hs = Handshake::Membarrier;
        }
        Ok(seg)
    }

    /// Owner: whether its header still says what it wrote (identity,
    /// geometry, the handshake, not closed); if not — a process of our
    /// user wrote there, and openers are refused meanwhile — rewrites it,
    /// the magic last, with a warning naming the segment. Senders that
    /// opened it before keep their rings (they read the header only at
    /// the open); those it refused may open it again.
    pub(crate) fn repair_header(&self) -> bool {
        let want = [
            (H_VERSION, SEG_VERSION as u64 | ((NSLOTS as u64) << 32)),
            (H_NCELLS, self.ncells as u64 | ((self.owner_pid as u32 as u64) << 32)),
            (H_START, self.owner_start),
            (H_TOKEN, self.token),
            (H_UID, sys::geteuid() as u64),
            (H_HANDSHAKE, (self.hs == Handshake::Membarrier) as u64),
            (H_CLOSED, 0),
            (H_MAGIC, SEG_MAGIC),
        ];
        if !self.owner || want.iter().all(|&(off, v)| self.read_u64(off) == v) {
            return false;
        }
        crate::base::log::log_warn!(
            crate::abi::FI_LOG_EP_CTRL,
            "shm: the header of our segment /dev/shm{} was overwritten (another process of this user wrote into it): rewritten; peers that opened it meanwhile were refused",
            self.name.to_string_lossy()
        );
        self.word(H_MAGIC).store(0, Ordering::Release);
        for (off, v) in want {
            self.word(off).store(v, Ordering::Release);
        }
        true
    }

    /// The mapping's first byte (tests: writing as another process would).
    #[cfg(test)]
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Whether the owning process still exists.
    pub(crate) fn owner_alive(&self) -> bool {
        self.read_u64(H_CLOSED) == 0 && sys::process_alive(self.owner_pid, self.owner_start)
    }

    /// Owner: mark the segment closed (senders stop using it).
    pub(crate) fn mark_closed(&self) {
        self.word(H_CLOSED).store(1, Ordering::Release);
    }

    /// The token of the endpoint whose segment this is.
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// The owner marked the segment closed (its endpoint is gone).
    pub(crate) fn closed(&self) -> bool {
        self.read_u64(H_CLOSED) != 0
    }

    pub(crate) fn sleepers(&self) -> u64 {
        self.word(H_SLEEPERS).load(Ordering::SeqCst)
    }

    /// Owner: `n` threads may sleep; with `n > 0` the caller re-checks its
    /// rings afterwards (the wake-up handshake, sync.rs).
    pub(crate) fn set_sleepers(&self, n: u64) {
        super::sync::announce_sleepers(self.word(H_SLEEPERS), n, self.hs);
    }

    /// The handshakes' barriers with this segment's owner.
    #[cfg(test)]
    pub(crate) fn handshake(&self) -> Handshake {
        self.hs
    }

    /// Tests: the handshake as if chosen so (both sides of a test must
    /// agree: an owner in `Fences` mode against a sender without fences
    /// would lose wake-ups).
    #[cfg(test)]
    pub(crate) fn force_handshake(&mut self, hs: Handshake) {
        self.hs = hs;
        if self.owner {
            self.word(H_HANDSHAKE)
                .store((hs == Handshake::Membarrier) as u64, Ordering::Relaxed);
        }
    }

    /// Sender, after publishing a record: whether the owner may sleep and
    /// its doorbell must be rung (the wake-up handshake, sync.rs).
    pub(crate) fn must_wake(&self) -> bool {
        super::sync::must_wake(self.word(H_SLEEPERS), self.hs)
    }

    /// Sender, after publishing a record in `slot`: (whether the owner may
    /// sleep and its doorbell must be rung, whether the owner does not
    /// watch the slot and it must be [`Segment::signal`]led) — the wake-up
    /// handshake (sync.rs) and the ready list (ready.rs) on one fence.
    #[inline]
    pub(crate) fn after_publish(&self, slot: usize) -> (bool, bool) {
        super::ready::after_publish(self.word(H_SLEEPERS), self.slot_word(slot, S_WATCH), self.hs)
    }

    /// Sender: puts `slot` on the owner's ready list.
    pub(crate) fn signal(&self, slot: usize) {
        let (w, bit) = (slot / 64, slot % 64);
        if w < READY_WORDS {
            super::ready::signal(self.word(H_READY), self.word(H_READY_BITS + w * 8), w, bit);
        }
    }

    /// Owner: whether any slot may be on the ready list (one load).
    #[inline(always)]
    pub(crate) fn any_ready(&self) -> bool {
        super::ready::any(self.word(H_READY))
    }

    /// Owner: takes the ready list, calling `f` with every slot on it.
    pub(crate) fn take_ready(&self, mut f: impl FnMut(usize)) {
        let words: [&AtomicU64; READY_WORDS] = core::array::from_fn(|w| self.word(H_READY_BITS + w * 8));
        super::ready::take(self.word(H_READY), &words, |w, bit| f(w * 64 + bit));
    }

    /// Owner: it polls `slot`'s ring on every pass from now on.
    pub(crate) fn watch(&self, slot: usize) {
        super::ready::watch(self.slot_word(slot, S_WATCH));
    }

    /// Owner: it stops polling `slot`'s ring on every pass; it must make
    /// [`Segment::owner_fence`] and look at the ring once more afterwards
    /// (ready.rs).
    pub(crate) fn unwatch(&self, slot: usize) {
        super::ready::unwatch(self.slot_word(slot, S_WATCH));
    }

    /// Owner: the barrier of its side of the handshakes (sync.rs), after
    /// unwatching rings and before looking at them again.
    pub(crate) fn owner_fence(&self) {
        super::sync::owner_fence::<AtomicU64>(self.hs);
    }

    /// Owner: the RTS prefix it wants (buffered receives).
    pub(crate) fn set_rts_prefix(&self, n: u64) {
        self.word(H_RTS_PREFIX).store(n, Ordering::Release);
    }

    /// The RTS prefix the owner wants (a peer-written value: the caller
    /// clamps it).
    pub(crate) fn rts_prefix(&self) -> u64 {
        self.read_u64(H_RTS_PREFIX)
    }

    pub(crate) fn claim_seq(&self) -> u64 {
        self.read_u64(H_CLAIM_SEQ)
    }

    /// Where `slot`'s ring starts in the mapping (page-aligned).
    fn ring_offset(&self, slot: usize) -> usize {
        debug_assert!(slot < NSLOTS);
        CTL_AREA + slot * self.stride
    }

    /// The first byte of `slot`'s ring.
    fn slot_base(&self, slot: usize) -> *mut u8 {
        // SAFETY: slot < NSLOTS keeps the offset inside the mapping.
        unsafe { self.map.as_ptr().add(self.ring_offset(slot)) }
    }

    fn slot_word(&self, slot: usize, off: usize) -> &AtomicU64 {
        debug_assert!(slot < NSLOTS && off < SLOT_CTL);
        // SAFETY: inside the slot's control line in the table after the
        // header (slot < NSLOTS, off < SLOT_CTL), 8-aligned, atomic-only.
        unsafe { AtomicU64::from_ptr(self.map.as_ptr().add(HEADER + slot * SLOT_CTL + off) as *mut u64) }
    }

    /// Resets `slot`'s ring for a new producer ([`Ring::reset`]) by giving
    /// its pages back to `/dev/shm` (`SharedMap::discard`: the ring has
    /// pages of its own): its indices and cells read zero afterwards, and
    /// a 16384-cell ring's last sender, which may have made its whole MiB
    /// resident, leaves nothing behind. Where the pages cannot be
    /// discarded, every non-zero word is written (a hole is only read).
    pub(crate) fn reset_ring(&self, slot: usize) {
        let base = self.ring_offset(slot);
        if self.map.discard(base, self.stride).is_err() {
            self.ring(slot).reset();
        }
    }

    /// Allocates the pages of `slot`'s ring that hold cells `from .. to`
    /// (`SharedMap::populate`), so that writing them neither faults page by
    /// page nor can fail for want of room in /dev/shm. `-FI_ENOMEM`: no
    /// room, or less free in /dev/shm than the pages asked for (nothing
    /// past the pages allocated before may be written: `unpopulate_cells`
    /// gives back what a failed populate took); `-FI_EOPNOTSUPP`: the
    /// kernel cannot populate (before Linux 5.14; the pages fault in as
    /// they are written); `-FI_EINVAL`: no cell of the ring in the range.
    /// `keep`: bytes /dev/shm must still have free after it (0 for what
    /// the sender needs to work at all; `STEP_HEADROOM` for more, so that
    /// one peer's large ring never takes the room another peer needs to
    /// work).
    pub(crate) fn populate_cells(&self, slot: usize, from: u64, to: u64, keep: u64) -> Result<()> {
        #[cfg(test)]
        if to > self.no_room_from.load(Ordering::Relaxed) {
            return Err(Error::NOMEM);
        }
        let page = sys::shm::PAGE;
        let cells = self.ring_cells(slot).start;
        let (from, to) = ((from as usize).min(self.ncells), (to as usize).min(self.ncells));
        if from >= to {
            return Err(Error::INVAL);
        }
        let start = (cells + from * CELL) / page * page;
        let len = (cells + to * CELL).next_multiple_of(page) - start;
        // Not into the last of /dev/shm's room: a populate that fails
        // half-way has taken pages others may be about to need.
        if sys::shm::free_bytes() < (len as u64).saturating_add(keep) {
            return Err(Error::NOMEM);
        }
        self.map.populate(start, len)
    }

    /// Sender whose `populate_cells(slot, from, to)` found no room: gives
    /// back the pages it may have allocated before it failed (populating
    /// stops at the first page it cannot have), from the first page after
    /// cell `from` on — pages the sender never wrote (it writes no cell
    /// past `from`), which would otherwise hold /dev/shm's last room for
    /// nothing. The page holding cell `from` (allocated before) is left.
    pub(crate) fn unpopulate_cells(&self, slot: usize, from: u64, to: u64) {
        let page = sys::shm::PAGE;
        let cells = self.ring_cells(slot).start;
        let start = (cells + (from as usize).min(self.ncells) * CELL).next_multiple_of(page);
        let end = (cells + (to as usize).min(self.ncells) * CELL).next_multiple_of(page);
        if start < end {
            let _ = self.map.discard(start, end - start);
        }
    }

    /// Sender, once it claimed `slot` (and reset its ring): allocates the
    /// ring's first page (its control lines and `ring::RESERVE_FIRST`
    /// cells), all a first contact writes; more as records reach past it
    /// (`populate_cells`, docs/shm.md "Memory"). `-FI_ENOMEM`: /dev/shm
    /// has no room for it (a store, or the owner's first look, would raise
    /// SIGBUS); where the kernel cannot populate, the pages fault in as
    /// before.
    fn reserve_slot(&self, slot: usize) -> Result<()> {
        #[cfg(test)]
        if self.no_room_from.load(Ordering::Relaxed) == 0 {
            return Err(Error::NOMEM);
        }
        let base = self.ring_offset(slot);
        let len = ring_bytes(super::ring::RESERVE_FIRST as usize).next_multiple_of(sys::shm::PAGE);
        self.map.reserve(base, len)
    }

    /// Where `slot`'s ring cells lie in the mapping (byte offsets).
    fn ring_cells(&self, slot: usize) -> core::ops::Range<usize> {
        let start = self.ring(slot).cell(0) as usize - self.map.as_ptr() as usize;
        start..start + self.ncells * CELL
    }

    pub(crate) fn ring(&self, slot: usize) -> Ring {
        // SAFETY: the ring lies inside the slot's stride, page-aligned, and
        // lives as long as the mapping; the Ring is used only while the
        // owning Segment is alive (callers keep the Segment next to the
        // Ring).
        unsafe { Ring::new(self.slot_base(slot), self.ncells) }
    }

    pub(crate) fn slot_state(&self, slot: usize) -> u64 {
        self.slot_word(slot, S_STATE).load(Ordering::Acquire) & 0xff
    }

    /// Sender: claims a free slot and writes who it is into it; the slot
    /// stays CLAIMED (invisible to the owner) until [`Segment::activate`].
    /// No free slot: `Err(AGAIN)`, after bumping `claim_seq` so that the
    /// owner looks for slots of dead senders to reclaim. No room in
    /// /dev/shm for the slot's first pages (`reserve_slot`): `Err(NOMEM)`.
    pub(crate) fn claim_slot(&self, me: SlotSender) -> Result<Claim> {
        // From where `claim_seq` (one step per activation, mostly) points,
        // round the slots: the k-th sender of a segment finds a free slot at
        // once instead of after reading the k state words before it.
        let first = self.claim_seq() as usize % NSLOTS;
        for slot in (first..NSLOTS).chain(0..first) {
            let w = self.slot_word(slot, S_STATE);
            let cur = w.load(Ordering::Acquire);
            if cur & 0xff != SLOT_FREE {
                continue;
            }
            let old_gen = (cur >> 8) & GEN_MASK;
            // Generation 0 only ever means "never claimed" (a wrap skips it).
            let gen = match (old_gen + 1) & GEN_MASK {
                0 => 1,
                g => g,
            };
            if w.compare_exchange(
                cur,
                slot_word_of(SLOT_CLAIMED, gen, me.pid),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
            {
                continue;
            }
            self.slot_word(slot, S_TOKEN).store(me.token, Ordering::Relaxed);
            self.slot_word(slot, S_PID)
                .store(me.pid as u32 as u64, Ordering::Relaxed);
            self.slot_word(slot, S_START).store(me.start, Ordering::Relaxed);
            self.slot_word(slot, S_ABORT).store(0, Ordering::Relaxed);
            // Whatever the ring holds is not ours: a slot never claimed
            // should have the zeroed ring the segment was created with, and
            // a freed one the ring its owner reset, but any process of the
            // user can have written there since (a stale head or record
            // would fail our first send, or read as ours). One system
            // call per claim (the pages are punched out, nothing is
            // written or allocated).
            self.reset_ring(slot);
            // The ring's first pages before anyone touches them; without
            // room the slot goes back (its generation kept: a later claim
            // takes the next), never seen active by the owner.
            if let Err(e) = self.reserve_slot(slot) {
                w.store(slot_word_of(SLOT_FREE, gen, 0), Ordering::Release);
                return Err(e);
            }
            return Ok(Claim { slot, gen });
        }
        self.word(H_CLAIM_SEQ).fetch_add(1, Ordering::AcqRel);
        Err(Error::AGAIN)
    }

    /// Makes the owner look at its slots and doorbell on its next pass.
    pub(crate) fn nudge(&self) {
        self.word(H_CLAIM_SEQ).fetch_add(1, Ordering::AcqRel);
    }

    /// Sender: makes a claimed slot visible to the owner.
    pub(crate) fn activate(&self, c: Claim, me: SlotSender) {
        self.slot_word(c.slot, S_STATE)
            .store(slot_word_of(SLOT_ACTIVE, c.gen, me.pid), Ordering::Release);
        self.word(H_CLAIM_SEQ).fetch_add(1, Ordering::AcqRel);
    }

    /// A slot's state word (owner: who claimed it, which generation).
    pub(crate) fn slot_word_now(&self, slot: usize) -> SlotWord {
        let raw = self.slot_word(slot, S_STATE).load(Ordering::Acquire);
        SlotWord {
            state: raw & 0xff,
            gen: (raw >> 8) & GEN_MASK,
            pid: (raw >> 32) as u32 as i32,
            raw,
        }
    }

    /// Owner: frees a slot whose claimer died before activating it, if the
    /// slot still is exactly as `seen` (a live claimer's activation wins).
    pub(crate) fn reclaim_claimed(&self, slot: usize, seen: SlotWord) -> bool {
        seen.state == SLOT_CLAIMED
            && self
                .slot_word(slot, S_STATE)
                .compare_exchange(
                    seen.raw,
                    slot_word_of(SLOT_FREE, seen.gen, 0),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Sender: no more records will come in this slot, because of `code`
    /// (an FI_E* code, not 0): the owner fails us as a peer.
    pub(crate) fn abort_slot(&self, slot: usize, code: u32) {
        // Ordered before the close by its Release.
        self.slot_word(slot, S_ABORT).store(code as u64, Ordering::Relaxed);
        self.close_slot(slot);
    }

    /// Owner: why a closed slot's sender gave its ring up (0: an orderly
    /// close). Read after its `SLOT_CLOSED` (Acquire); any value is only
    /// that sender's word about itself.
    pub(crate) fn slot_abort(&self, slot: usize) -> u32 {
        self.slot_word(slot, S_ABORT).load(Ordering::Acquire) as u32
    }

    /// Sender: no more records will come in this slot.
    pub(crate) fn close_slot(&self, slot: usize) {
        let w = self.slot_word(slot, S_STATE);
        let cur = w.load(Ordering::Acquire);
        if cur & 0xff == SLOT_ACTIVE {
            let _ = w.compare_exchange(cur, SLOT_CLOSED | (cur & !0xff), Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Owner: reads who sends in an active/closed slot.
    pub(crate) fn slot_sender(&self, slot: usize) -> SlotSender {
        SlotSender {
            token: self.slot_word(slot, S_TOKEN).load(Ordering::Acquire),
            pid: self.slot_word(slot, S_PID).load(Ordering::Acquire) as u32 as i32,
            start: self.slot_word(slot, S_START).load(Ordering::Acquire),
        }
    }

    /// Owner: returns a drained slot (closed, or its sender dead) to the
    /// free pool, keeping its generation.
    pub(crate) fn free_slot(&self, slot: usize) {
        // Its next sender starts unwatched (it signals its first records).
        self.slot_word(slot, S_WATCH).store(0, Ordering::Relaxed);
        // And with an empty ring: the records its last sender left (their
        // first words are set, only the cell after the last one is zero)
        // must not read as the next sender's, whether or not that one
        // resets the ring as a rustfab sender does (ordered before FREE by
        // the Release store below). Its pages go back to /dev/shm.
        self.reset_ring(slot);
        let w = self.slot_word(slot, S_STATE);
        let cur = w.load(Ordering::Acquire);
        w.store(slot_word_of(SLOT_FREE, (cur >> 8) & GEN_MASK, 0), Ordering::Release);
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            self.mark_closed();
            sys::shm::unlink(&self.name);
            // By token: formatting every name (a geteuid call each) made
            // closing N endpoints cost N² system calls.
            let mut created = CREATED.lock();
            if let Some(i) = created.iter().position(|&t| t == self.token) {
                created.swap_remove(i);
            }
        }
        // `map` is unmapped after this: Rings taken from the segment are
        // used only while it lives (their users keep both together).
    }
}

/// An opener's refusal of the segment `name` that is there but wrong
/// (`what`): a warning, `-FI_EADDRNOTAVAIL` (the address has no endpoint we
/// may send to).
#[cold]
fn refused(name: &CString, what: &str) -> Error {
    crate::base::log::log_warn!(
        crate::abi::FI_LOG_EP_CTRL,
        "shm: segment /dev/shm{} refused: {what}; the endpoint at that address cannot be reached until its owner repairs it",
        name.to_string_lossy()
    );
    Error::ADDRNOTAVAIL
}

/// A segment without a header is only taken for abandoned after this long.
const UNINIT_GRACE_SECS: i64 = 10;

/// Removes `name` if it is ours (uid) and its owner process is gone.
fn remove_if_stale(name: &CString) -> bool {
    // Read-write, to mark it closed through the descriptor that read its
    // header (by name, the object could be a new owner's by then).
    let Ok(fd) = sys::shm::open(name, Access::ReadWrite).or_else(|_| sys::shm::open(name, Access::ReadOnly)) else {
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
        // Its peers may still have it mapped and write records nobody will
        // read: marked closed, their next send notices (a load of the word
        // on every send) and looks for a new owner at the address instead
        // (docs/shm.md, "Restarted peers"). A file without a header has no
        // peers.
        if n == 48 && word(H_MAGIC / 8) == SEG_MAGIC {
            let _ = sys::shm::write_at(&fd, &1u64.to_ne_bytes(), H_CLOSED as u64);
        }
        drop(fd);
        sys::shm::unlink(name);
        if let Some(t) = token_of(name) {
            sys::doorbell::remove(&doorbell_path(t));
        }
    }
    stale
}

/// The token in one of our segment names.
fn token_of(name: &CString) -> Option<u64> {
    let n = name.to_str().ok()?;
    let hex = n.strip_prefix('/')?.strip_prefix(&name_prefix())?;
    u64::from_str_radix(hex, 16).ok()
}

/// Removes our stale segments (owners killed before they could unlink).
fn sweep_stale() {
    for name in sys::shm::list(&name_prefix()) {
        remove_if_stale(&name);
    }
    // Doorbells whose segment is gone (its owner was killed and the segment
    // swept, or it is closing right now: its own removal then finds nothing).
    let dir = bell_dir();
    for n in sys::doorbell::names_in(&dir) {
        let Some(t) = n
            .to_str()
            .filter(|n| n.len() == 16)
            .and_then(|n| u64::from_str_radix(n, 16).ok())
        else {
            continue;
        };
        if sys::shm::open(&seg_name(t), Access::ReadOnly).is_err() {
            sys::doorbell::remove(&dir.join(&n));
        }
    }
}

#[cfg(test)]
mod tests;
