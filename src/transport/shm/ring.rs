//! A single-producer / single-consumer ring of fixed 64-byte cells living in
//! memory that another process can write.
//!
//! Layout (one ring per sender slot of a segment):
//!
//! ```text
//!  +0    (unused since segment version 3: was the producer's tail)  own cache line
//!  +64   head: u64  (consumer = the segment owner writes it)        own cache line
//!  +128  cells: [ncells × 64 bytes]
//! ```
//!
//! Indices count cells and only grow (wrapping u64); a record starting at
//! index `i` occupies cells `i % ncells ..` and may wrap around the end.
//!
//! Readiness lives in the cell (segment version 3): the first 8 bytes of a
//! record's first cell — its header's magic, version, op and flags, never
//! zero — are written last ([`Ring::publish_at`]); the consumer polls that
//! word of the cell at its head ([`Ring::ready`]), so one cache line brings
//! both "a record is here" and the record (a separate tail word cost a
//! second cross-core transfer per message). The word is tagged with its
//! cell index's lap (segment version 7, [`sync::READY_BITS`]): the
//! consumer takes only a word with the header's magic and the tag of the
//! lap its head is in, so a stale word of an earlier lap (another record's
//! header or payload) does not read as a record, and the consumer writes
//! no cell. Before publishing a record the producer looks at the first
//! word of the cell after it, where the next record will start, and zeroes
//! it only if it would read as published (payload that happens to carry
//! the magic and the right tag): until version 7 it zeroed that word on
//! every send, a store into a second line per message. So the producer
//! keeps one cell free: at most `ncells - 1` are in use. The
//! consumer copies a record out, then stores `head` with Release
//! ([`Ring::release`]); the producer reuses cells only below `head`.
//! Nothing in the ring is referenced in place: control words are accessed
//! only through `AtomicU64::from_ptr`, payload only by copying. Because the
//! other side may be hostile or dead, every index read from the shared
//! side is checked (`tail - head < ncells`), and every record is validated
//! after the copy.
//!
//! Rewinding (segment version 6): a producer about to write a large record
//! ([`REWIND_MIN`] cells or more) goes back to the ring's first cell instead
//! of going on round the ring when the consumer has left enough cells there
//! (more than twice the record's cells, [`Ring::rewind`]): it writes and
//! publishes the record at the next lap's
//! first cell, then stores [`REWIND`] as the first word of the cell at its
//! old tail (which it zeroed with the record before): the consumer, finding
//! that word at its head, goes on at the next lap's first cell. The sender
//! so reuses the cells the consumer has just left, still in both cores'
//! caches, instead of cells the consumer read a lap (128 KiB) earlier —
//! what libfabric 2.6's shm gets from its last-freed-first inject buffers
//! (docs/performance-history.md, shmbw "4 KiB (shm4k)").

use super::sync;
use crate::transport::proto;
use core::sync::atomic::{AtomicU64, Ordering};

pub(crate) const CELL: usize = 64;
pub(crate) const CTL_BYTES: usize = 128;

/// The first word of a rewind marker: the consumer goes on at the next
/// lap's first cell (sync.rs; never a record's first word, whose low 16
/// bits are the header's magic: checked in mod.rs).
pub(crate) use super::sync::REWIND;

/// Records of at least this many cells (1 KiB) go back to the ring's first
/// cell when they can ([`Ring::rewind`]): below it the gain (cells hot in
/// both caches) does not pay for reading `head` on every send.
pub(crate) const REWIND_MIN: u64 = 16;

/// Rings of more cells than this are not rewound: an owner that chose
/// large rings (`FI_RUSTFAB_SHM_RING_CELLS`) did so that a cell is written
/// again only after the consumer's cache has let it go (a lap of 1 MiB or
/// more: docs/performance-history.md "bigring"), which going back to the first
/// cell would undo.
pub(crate) const REWIND_RING_MAX: u64 = 2048;

/// In rings of more than [`REWIND_RING_MAX`] cells, small records (below
/// [`REWIND_MIN`]) go back to the first cell once their tail nears this
/// cell ([`SMALL_REWIND_AT`]), when they can ([`Ring::rewind`]): they
/// keep the default ring's lap (128 KiB) while large records go round the
/// whole ring. A small record's cell a MiB lap later has left every
/// cache, and a 1-byte ping-pong waits for it (docs/performance-history.md
/// "smalllap"). Records start less than `REWIND_MIN` cells apart, so a run
/// of small records lands one start in the `REWIND_MIN` cells from
/// `SMALL_REWIND_AT`: that is where the producer tries, once a lap, not on
/// every send.
pub(crate) const SMALL_LAP: u64 = REWIND_RING_MAX;

/// Cells in a ring's first page (after its two control lines): what a
/// sender's claim allocates (`Segment::reserve_slot`), so that a first
/// contact costs one page; more is allocated as records reach past it.
pub(crate) const RESERVE_FIRST: u64 = ((4096 - CTL_BYTES) / CELL) as u64;

/// Cells a sender must have allocated to work at all: about four times
/// the largest record (an eager record or streamed chunk of 16 KiB and its
/// header, 257 cells), so that a sender confined to them (no room in
/// /dev/shm for more) can always go back to the first cell (which needs
/// more than twice the record) and need not wait for the consumer on
/// every record.
pub(crate) const RESERVE_WORKING: u64 = 1024;

/// Where in a lap small records try going back to the first cell (in
/// rings of more than [`REWIND_RING_MAX`] cells): [`SMALL_LAP`] less two
/// [`REWIND_MIN`]s, so that a small record and the cell after it stay
/// below `SMALL_LAP`, the cells a sender of small records needs allocated
/// (`claim_past_reserved`'s steps), whether it rewinds there or not.
pub(crate) const SMALL_REWIND_AT: u64 = SMALL_LAP - 2 * REWIND_MIN;

/// In rings of more than [`REWIND_RING_MAX`] cells, an eager record of
/// [`REWIND_MIN`] to this many cells (8 KiB) rewinds as in a default ring;
/// a larger one, or a streamed chunk, goes round the whole ring when the
/// consumer has taken everything (a ping-pong: the cells it lands on were
/// read a MiB earlier), and an eager one rewinds only in a stream (records
/// behind it not yet consumed: rewinding keeps a stream within the cells
/// the consumer works in, twice as fast at 4 KiB). Measured in Open MPI's
/// ping-pong and `fi_rdm_tagged_bw` (docs/performance-history.md "smalllap").
pub(crate) const EMPTY_REWIND_MAX: u64 = 128;

/// Byte size of a ring with `ncells` cells.
pub(crate) const fn ring_bytes(ncells: usize) -> usize {
    CTL_BYTES + ncells * CELL
}

/// Cells needed for a record of `bytes` bytes.
pub(crate) const fn cells_for(bytes: usize) -> u64 {
    bytes.div_ceil(CELL) as u64
}

/// The shared side broke the ring invariants (a hostile or corrupted peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// A view of one ring. Copyable handle; all access is through raw pointers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring {
    base: *mut u8,
    ncells: u64,
    /// `ncells - 1` (a power of two): a cell index is `idx & mask`, not a
    /// division on every access.
    mask: u64,
    /// `log2(ncells)`: an index's lap is `idx >> lap_shift`.
    lap_shift: u32,
}

// SAFETY: the ring is a view of shared memory whose control words are only
// touched atomically; which thread produces/consumes is governed by the
// owners (one producer and one consumer per ring, each behind a lock).
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// # Safety
    /// `base` must point to `ring_bytes(ncells)` bytes, 64-byte aligned, that
    /// stay mapped for the lifetime of every copy of this `Ring`.
    pub(crate) unsafe fn new(base: *mut u8, ncells: usize) -> Ring {
        assert!(ncells.is_power_of_two(), "ring size must be a power of two");
        Ring {
            base,
            ncells: ncells as u64,
            mask: ncells as u64 - 1,
            lap_shift: ncells.trailing_zeros(),
        }
    }

    fn tail_word(&self) -> &AtomicU64 {
        // SAFETY: offset 0 is inside the ring, 8-aligned (base is 64-aligned);
        // the word is only ever accessed atomically by both processes.
        unsafe { AtomicU64::from_ptr(self.base as *mut u64) }
    }

    fn head_word(&self) -> &AtomicU64 {
        // SAFETY: offset 64 is inside the ring and 8-aligned; atomic-only.
        unsafe { AtomicU64::from_ptr(self.base.add(64) as *mut u64) }
    }

    fn cell_ptr(&self, idx: u64) -> *mut u8 {
        let i = (idx & self.mask) as usize;
        // SAFETY: i < ncells, so the cell lies inside the mapped ring.
        unsafe { self.base.add(CTL_BYTES + i * CELL) }
    }

    /// The first byte of the `cells` cells from index `at` when they lie in
    /// one linear run (the record does not wrap past the ring's end): one
    /// plain copy then moves a record's bytes, without `write_at`'s or
    /// `read_at`'s loop (using the pointer is the caller's `unsafe`, under
    /// those functions' contracts).
    #[inline]
    pub(crate) fn linear(&self, at: u64, cells: u64) -> Option<*mut u8> {
        ((at & self.mask) + cells <= self.ncells).then(|| self.cell_ptr(at))
    }

    /// The first byte of the cell at index `at` (using it is the caller's
    /// `unsafe`, as for [`Ring::linear`]).
    #[inline]
    pub(crate) fn cell(&self, at: u64) -> *mut u8 {
        self.cell_ptr(at)
    }

    /// Resets the ring for a new producer (only while none is attached):
    /// both indices, and the first word of every cell (segments punch their
    /// rings' pages out instead, `Segment::reset_ring`, and come here only
    /// where they cannot). A word that reads zero is not written: a page
    /// never written (a hole in the file) stays one, and costs neither
    /// memory nor, in a full /dev/shm, a SIGBUS.
    pub(crate) fn reset(&self) {
        let clear = |w: &AtomicU64| {
            if w.load(Ordering::Relaxed) != 0 {
                w.store(0, Ordering::Relaxed);
            }
        };
        clear(self.tail_word());
        for i in 0..self.ncells {
            clear(self.first_word(i));
        }
        if self.head_word().load(Ordering::Relaxed) != 0 {
            self.head_word().store(0, Ordering::Release);
        }
    }

    /// Cells in the ring.
    #[inline]
    pub(crate) fn ncells(&self) -> u64 {
        self.ncells
    }

    /// The bits a first word published at index `idx` has under
    /// [`sync::READY_BITS`]: the header's magic and the low 16 bits of the
    /// index's lap.
    #[inline(always)]
    fn ready_bits(&self, idx: u64) -> u64 {
        (idx >> self.lap_shift) << sync::LAP_TAG_SHIFT | proto::MAGIC as u64
    }

    /// The first 8 bytes of the cell at index `idx`.
    fn first_word(&self, idx: u64) -> &AtomicU64 {
        // SAFETY: every cell lies inside the mapped ring and is 64-byte
        // aligned; the word is only ever accessed atomically or copied.
        unsafe { AtomicU64::from_ptr(self.cell_ptr(idx) as *mut u64) }
    }

    // ---------------- producer side ----------------

    /// Cells the producer whose own tail is `tail` may fill (one cell is
    /// always kept free: where the next record starts, which the producer checks).
    pub(crate) fn free_cells(&self, tail: u64) -> Result<u64, Corrupt> {
        let head = sync::consumed(self.head_word());
        let used = tail.wrapping_sub(head);
        if used >= self.ncells {
            return Err(Corrupt);
        }
        Ok(self.ncells - 1 - used)
    }

    /// Whether a record of `cells` cells may start at the next lap's first
    /// cell instead of at `tail`: every cell in use lies between the
    /// consumer's head and `tail` (none wraps), and the head has left more
    /// than `2 * cells` cells at the start of the ring — the record, the
    /// free cell after it, and room for one more record of its size, so
    /// that the producer does not wait for the consumer right after it
    /// rewound (rewinding whenever the record alone fits made sender and
    /// receiver take turns: docs/performance-history.md, shmbw). Then
    /// `Some((lap, free))`: the index of the next lap's first cell, and the
    /// cells free from there (as [`Ring::free_cells`] of `lap`). An empty
    /// ring (head at `tail`) needs only the record and the free cell after it
    /// before `tail`: nothing is behind to take turns with, and the record
    /// reuses the cells the last one left (a ping-pong's large records
    /// then take two places in turn, not three: docs/performance-history.md
    /// "emptyrewind") — unless `when_empty` is false: then never into an
    /// empty ring (large records of large rings, [`EMPTY_REWIND_MAX`]).
    /// Reads `head` (Acquire) unless `tail` itself is within `cells` of
    /// the ring's start.
    #[inline]
    pub(crate) fn rewind(&self, tail: u64, cells: u64, when_empty: bool) -> Result<Option<(u64, u64)>, Corrupt> {
        let tp = tail & self.mask;
        // The record and the free cell after it lie before the marker's
        // cell (`tail`) in any case.
        if tp <= cells {
            return Ok(None);
        }
        let head = sync::consumed(self.head_word());
        let used = tail.wrapping_sub(head);
        if used >= self.ncells {
            return Err(Corrupt);
        }
        let hp = head & self.mask;
        // An empty ring (the consumer took everything: a ping-pong, or a
        // consumer faster than us) rewinds whenever the record fits: no
        // runway is needed, and the record lands on the very cells the
        // last one used, hot in both caches.
        if used == 0 && !when_empty {
            return Ok(None);
        }
        if used != 0 && (tp <= 2 * cells || hp <= 2 * cells || tp.wrapping_sub(hp) != used) {
            return Ok(None);
        }
        Ok(Some((tail.wrapping_add(self.ncells - tp), hp - 1)))
    }

    /// Marks the cell at `at` (the producer's tail before it rewound,
    /// zeroed with the record before) as a rewind: stored after the record
    /// at the next lap's first cell is published (Release, sync.rs).
    ///
    /// # Safety
    /// The caller is the producer; `at` is its old tail and the record at
    /// the next lap's first cell is published.
    #[inline]
    pub(crate) unsafe fn publish_rewind(&self, at: u64) {
        sync::rewind(self.first_word(at), self.ready_bits(at) & sync::LAP_TAG);
    }

    /// The cell `at` within its lap (0 at a lap's first cell).
    #[inline]
    pub(crate) fn lap_offset(&self, at: u64) -> u64 {
        at & self.mask
    }

    /// Cells from `at` to the end of the ring (`ncells` at a lap's first
    /// cell): where a consumer that finds [`REWIND`] at `at` goes on.
    #[inline]
    pub(crate) fn cells_to_lap_end(&self, at: u64) -> u64 {
        self.ncells - (at & self.mask)
    }

    /// Copies `src` to byte `off` of the record starting at cell `at`.
    ///
    /// # Safety
    /// The caller is the ring's producer and owns the cells of the record
    /// at `at` covering bytes `off .. off + src.len()` (checked with
    /// `free_cells`).
    pub(crate) unsafe fn write_at(&self, at: u64, off: usize, src: &[u8]) {
        let mut done = 0;
        while done < src.len() {
            let pos = off + done;
            let cell = at.wrapping_add((pos / CELL) as u64);
            let in_cell = pos % CELL;
            // Copy up to the end of the ring's linear run.
            let run_cells = self.ncells - (cell & self.mask);
            let room = run_cells as usize * CELL - in_cell;
            let n = room.min(src.len() - done);
            // SAFETY: `n` bytes from `in_cell` stay within the linear run of
            // cells before the ring wraps, which the caller owns.
            unsafe { core::ptr::copy_nonoverlapping(src.as_ptr().add(done), self.cell_ptr(cell).add(in_cell), n) };
            done += n;
        }
    }

    /// Publishes the record of `cells` cells whose first cell is `at`,
    /// every other byte of which is written: makes sure the first word of
    /// the cell after it does not read as published (zeroes it in the rare
    /// case that it would), then stores its first word `first` (the
    /// header's first 8 bytes: the magic, no lap tag) with `at`'s lap tag,
    /// last.
    ///
    /// A Release store (sync.rs; the sender then asks
    /// `Segment::after_publish`, whose barrier is its half of the wake-up
    /// handshake: a compiler barrier with membarrier, segment version 4).
    /// The line is the record's own, already in the producer's cache.
    ///
    /// # Safety
    /// The caller is the producer and owns the record's cells and the one
    /// after them (`free_cells` keeps it free).
    #[inline(always)]
    pub(crate) unsafe fn publish_at(&self, at: u64, cells: u64, first: u64) {
        debug_assert!(
            first & sync::READY_BITS == proto::MAGIC as u64,
            "a first word: the magic, no tag"
        );
        let next = at.wrapping_add(cells);
        let word = first | self.ready_bits(at) & sync::LAP_TAG;
        sync::publish(self.first_word(next), self.ready_bits(next), self.first_word(at), word);
    }

    // ---------------- consumer side ----------------

    /// The first word of a record (or rewind marker) published at the
    /// consumer's `head`, its lap tag cleared, or None (sync.rs: Acquire;
    /// the consumer's half of the wake-up handshake re-checks the ring
    /// with this after `Segment::set_sleepers`).
    #[inline]
    pub(crate) fn ready(&self, head: u64) -> Option<u64> {
        sync::published(self.first_word(head), self.ready_bits(head))
    }

    /// Copies `dst.len()` bytes from byte `off` of the record at cell `at`.
    ///
    /// # Safety
    /// The caller is the consumer and the bytes lie within cells published
    /// (checked with `available`) and not yet released.
    pub(crate) unsafe fn read_at(&self, at: u64, off: usize, dst: *mut u8, len: usize) {
        let mut done = 0;
        while done < len {
            let pos = off + done;
            let cell = at.wrapping_add((pos / CELL) as u64);
            let in_cell = pos % CELL;
            let run_cells = self.ncells - (cell & self.mask);
            let room = run_cells as usize * CELL - in_cell;
            let n = room.min(len - done);
            // SAFETY: source stays within the published linear run; the
            // destination is the caller's buffer of `len` bytes.
            unsafe { core::ptr::copy_nonoverlapping(self.cell_ptr(cell).add(in_cell), dst.add(done), n) };
            done += n;
        }
    }

    /// Reads one whole cell with a fixed-size copy (the peer may be writing
    /// anything there: the bytes are validated after the copy).
    ///
    /// # Safety
    /// As [`Ring::read_at`]: the cell at `at` is published and ours to read.
    #[inline]
    pub(crate) unsafe fn read_cell(&self, at: u64) -> [u8; CELL] {
        let mut b = [0u8; CELL];
        // SAFETY: `cell_ptr` points at a whole cell inside the ring; raw
        // copy into our own array, no reference to shared memory.
        unsafe { core::ptr::copy_nonoverlapping(self.cell_ptr(at), b.as_mut_ptr(), CELL) };
        b
    }

    /// The consumer's head as it is now, unchecked: the producer only
    /// compares it with the value it saw last, to tell a consumer that is
    /// moving from one that is not (`ShmPort::poll_records`, the CQ's idle
    /// rule); a hostile consumer gains nothing by faking it. Relaxed: no
    /// cell is reused on its word ([`Ring::free_cells`] reads it for that).
    pub(crate) fn head_now(&self) -> u64 {
        self.head_word().load(Ordering::Relaxed)
    }

    /// Lets the producer reuse every cell before `new_head`.
    #[inline]
    pub(crate) fn release(&self, new_head: u64) {
        sync::release(self.head_word(), new_head);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(ncells: usize) -> Vec<u64> {
        vec![0u64; ring_bytes(ncells) / 8 + 8]
    }

    fn ring_in(v: &mut [u64], ncells: usize) -> Ring {
        let p = v.as_mut_ptr() as *mut u8;
        // Strict provenance (the pointer stays derived from the vector's,
        // which Miri checks, `make miri`).
        let aligned = p.wrapping_add(p.align_offset(64));
        // SAFETY: the vector is large enough for the aligned ring and outlives
        // the test's use of it.
        unsafe { Ring::new(aligned, ncells) }
    }

    /// A record's first word as the transport gives it to `publish_at`:
    /// the record's first 8 bytes with the magic in place of bytes 0..2
    /// and no lap tag (bytes 6..8 zero).
    fn first_of(rec: &[u8]) -> u64 {
        let w = u64::from_le_bytes(rec[..8].try_into().unwrap());
        w & !sync::READY_BITS | proto::MAGIC as u64
    }

    /// Writes a record as the transport does: all but its first word, then
    /// the first word ([`first_of`]) last.
    fn produce(r: &Ring, tail: u64, rec: &[u8]) {
        // SAFETY: the callers checked the cells free; we are the producer.
        unsafe {
            r.write_at(tail, 8, &rec[8..]);
            r.publish_at(tail, cells_for(rec.len()), first_of(rec));
        }
    }

    /// The raw first word of the cell at `idx` (the test's own memory).
    fn raw_first(r: &Ring, idx: u64) -> u64 {
        r.first_word(idx).load(Ordering::Relaxed)
    }

    #[test]
    fn wraps_and_round_trips() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        let (mut tail, mut head) = (0u64, 0u64);
        for round in 0..100u32 {
            let len = (round as usize * 37) % (3 * CELL) + 8;
            let msg: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
            let cells = cells_for(len);
            assert!(r.free_cells(tail).unwrap() >= cells);
            assert_eq!(r.ready(head), None);
            produce(&r, tail, &msg);
            tail += cells;
            assert_eq!(r.ready(head), Some(first_of(&msg)), "the word as published, untagged");
            let mut out = vec![0u8; len - 8];
            // SAFETY: published, unreleased; `out` has `len - 8` bytes.
            unsafe { r.read_at(head, 8, out.as_mut_ptr(), len - 8) };
            assert_eq!(out, msg[8..]);
            head += cells;
            r.release(head);
        }
    }

    /// A record's later cells hold payload; when a later lap starts a
    /// record at one of those cells, the stale payload word must not read
    /// as "a record is here", nor a stale header of an earlier lap.
    #[test]
    fn a_stale_payload_word_never_reads_as_a_record() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        let big = vec![0xffu8; 3 * CELL]; // cells 0..3, every word non-zero
        produce(&r, 0, &big);
        r.release(3);
        let one = [0x11u8; CELL];
        for at in 3..9 {
            produce(&r, at, &one);
            assert_eq!(r.ready(at + 1), None, "the next record's cell");
            r.release(at + 1);
        }
        // Index 9 is cell 1: the middle of the first record one lap ago.
        assert_eq!(r.ready(9), None);
        produce(&r, 9, &one);
        assert_eq!(r.ready(9), Some(first_of(&one)));
        // And a stale header: index 11 is cell 3, where a record started
        // one lap ago (lap 0's tag; this is lap 1).
        produce(&r, 10, &one);
        assert_ne!(raw_first(&r, 11), 0, "the stale header is left in place");
        assert_eq!(r.ready(11), None);
    }

    /// The producer writes nothing into the next record's cell when its
    /// stale word cannot read as published there (what segment version 7
    /// saves: a store into a second line per message), and zeroes it when
    /// it would — payload that happens to carry the magic and the next
    /// lap's tag — so that it never reads as a record.
    #[test]
    fn the_next_cell_is_zeroed_only_when_its_stale_word_would_read_as_published() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        // Cells 0..3: a record whose payload word at cell 2 reads as a
        // record published at index 10 (cell 2 of lap 1): the magic and
        // tag 1.
        let mut big = vec![0x33u8; 3 * CELL];
        let lookalike = proto::MAGIC as u64 | 0x0000_4444_4444_0000 | 1 << sync::LAP_TAG_SHIFT;
        big[2 * CELL..2 * CELL + 8].copy_from_slice(&lookalike.to_le_bytes());
        produce(&r, 0, &big);
        r.release(3);
        // Lap 0's records up to index 8 (cell 0 of lap 1).
        let one = [0x22u8; CELL];
        for at in 3..8 {
            produce(&r, at, &one);
            r.release(at + 1);
        }
        // The record at index 8 (cell 0): the next cell (index 9, cell 1)
        // holds plain payload — left as it is.
        let stale = raw_first(&r, 9);
        produce(&r, 8, &one);
        assert_eq!(
            raw_first(&r, 9),
            stale,
            "a stale word that cannot read as published is not written"
        );
        r.release(9);
        // The record at index 9: the next cell, index 10, holds the
        // look-alike; it must not read as a record.
        assert_eq!(
            r.ready(10),
            Some(lookalike & !sync::LAP_TAG),
            "the look-alike reads as published"
        );
        produce(&r, 9, &one);
        assert_eq!(r.ready(10), None, "zeroed with the record before it");
        assert_eq!(raw_first(&r, 10), 0);
    }

    #[test]
    fn one_cell_stays_free() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        assert_eq!(r.free_cells(0), Ok(7));
        produce(&r, 0, &[0x33u8; 7 * CELL]);
        assert_eq!(r.free_cells(7), Ok(0));
        assert_eq!(r.free_cells(8), Err(Corrupt), "a full ring is corrupt");
    }

    /// `rewind`: only with more than twice the record's cells left free at
    /// the ring's start by the consumer, the cells in use not wrapping, and
    /// the tail not itself near the start; an empty ring whenever the
    /// record and the free cell after it fit before the tail.
    #[test]
    fn rewind_only_with_room_behind_the_record_and_no_wrap() {
        let mut v = backing(64);
        let r = ring_in(&mut v, 64);
        // (tail, head, cells) -> where the record goes and the cells free
        // from there.
        type Case = (u64, u64, u64, Option<(u64, u64)>);
        let cases: [Case; 12] = [
            (40, 40, 10, Some((64, 39))),            // empty ring, head at 40 > 20
            (40, 21, 10, Some((64, 20))),            // 19 cells in use between them
            (40, 20, 10, None),                      // head not past 2 * cells
            (18, 15, 10, None),                      // in use, tail within 2 * cells
            (20, 20, 10, Some((64, 19))),            // empty: the record fits before 20
            (11, 11, 10, Some((64, 10))),            // empty: the record and the free cell after it
            (10, 10, 10, None),                      // empty, but the free cell would be the marker's
            (64 + 15, 64 + 15, 10, Some((128, 14))), // empty, a lap on
            (64, 64, 10, None),                      // tail at a lap's first cell
            (100, 90, 10, Some((128, 25))),          // a lap on: cells 26..36 in use
            (94, 60, 10, None),                      // in use wraps: cells 60..63, 0..30
            (128 + 50, 128 + 30, 12, Some((192, 29))),
        ];
        for (tail, head, cells, want) in cases {
            r.release(head);
            assert_eq!(
                r.rewind(tail, cells, true),
                Ok(want),
                "tail {tail} head {head} cells {cells}"
            );
            // Not into an empty ring when asked so; the rest the same.
            let want_not_empty = if tail == head { None } else { want };
            assert_eq!(
                r.rewind(tail, cells, false),
                Ok(want_not_empty),
                "not when empty: tail {tail} head {head}"
            );
            if let Some((lap, free)) = want {
                assert_eq!(r.free_cells(lap), Ok(free));
                if tail != head {
                    assert!(free >= 2 * cells, "room for the record and one more");
                } else {
                    assert!(free >= cells, "room for the record");
                }
            }
        }
        r.release(0);
        assert_eq!(r.rewind(100, 10, true), Err(Corrupt), "head more than a ring behind");
    }

    #[test]
    fn reset_clears_unconsumed_records() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        produce(&r, 0, &[0x22u8; CELL]);
        produce(&r, 1, &[0x22u8; 2 * CELL]);
        r.reset();
        for i in 0..8 {
            assert_eq!(r.ready(i), None);
        }
    }

    #[test]
    fn corrupt_indices_detected() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        r.release(200); // head beyond anything produced
        assert_eq!(r.free_cells(100), Err(Corrupt));
    }

    #[test]
    fn spsc_threads() {
        let mut v = backing(16);
        let r = ring_in(&mut v, 16);
        // Under Miri (`make miri`) a few hundred records: enough to wrap the
        // 16-cell ring many times at a fraction of the interpreter's cost.
        let n = if cfg!(miri) { 300 } else { 20_000u64 };
        let prod = std::thread::spawn(move || {
            let mut tail = 0u64;
            for i in 0..n {
                let len = (i % 150 + 1) as usize;
                let cells = cells_for(len + 8);
                while r.free_cells(tail).unwrap() < cells {
                    std::hint::spin_loop();
                }
                let mut rec = vec![0u8; len + 8];
                rec[..8].copy_from_slice(&((len as u64) << 16).to_le_bytes());
                for (j, b) in rec[8..].iter_mut().enumerate() {
                    *b = (i as usize + j) as u8;
                }
                produce(&r, tail, &rec);
                tail += cells;
            }
        });
        let mut head = 0u64;
        for i in 0..n {
            let first = loop {
                if let Some(w) = r.ready(head) {
                    break w;
                }
                std::hint::spin_loop();
            };
            let len = (first >> 16 & 0xffff_ffff) as usize;
            assert_eq!(len, (i % 150 + 1) as usize);
            let cells = cells_for(len + 8);
            let mut body = vec![0u8; len];
            // SAFETY: the whole record is published.
            unsafe { r.read_at(head, 8, body.as_mut_ptr(), len) };
            for (j, b) in body.iter().enumerate() {
                assert_eq!(*b, (i as usize + j) as u8);
            }
            head += cells;
            r.release(head);
        }
        prod.join().unwrap();
    }
}
