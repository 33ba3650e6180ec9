//! A single-producer / single-consumer ring of fixed 64-byte cells living in
//! memory that another process can write.
//!
//! Layout (one ring per sender slot of a segment):
//!
//! ```text
//!  +0    tail: u64  (producer = the sending process writes it)   own cache line
//!  +64   head: u64  (consumer = the segment owner writes it)      own cache line
//!  +128  cells: [ncells × 64 bytes]
//! ```
//!
//! Indices count cells and only grow (wrapping u64); a record starting at
//! index `i` occupies cells `i % ncells ..` and may wrap around the end.
//! Publication (the orderings live in sync.rs, checked by loom): the producer
//! copies the record into free cells, then stores `tail` with Release; the
//! consumer loads `tail` with Acquire, copies the record out, then stores
//! `head` with Release so the producer may reuse the cells. Nothing in the ring is referenced in place: control words are
//! accessed only through `AtomicU64::from_ptr`, payload only by copying.
//! Because the other side may be hostile or dead, every index read from the
//! shared side is checked (`tail - head <= ncells`) before use.

use super::sync;
use core::sync::atomic::{AtomicU64, Ordering};

pub const CELL: usize = 64;
pub const CTL_BYTES: usize = 128;

/// Byte size of a ring with `ncells` cells.
pub const fn ring_bytes(ncells: usize) -> usize {
    CTL_BYTES + ncells * CELL
}

/// Cells needed for a record of `bytes` bytes.
pub const fn cells_for(bytes: usize) -> u64 {
    bytes.div_ceil(CELL) as u64
}

/// The shared side broke the ring invariants (a hostile or corrupted peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// A view of one ring. Copyable handle; all access is through raw pointers.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    base: *mut u8,
    ncells: u64,
    /// `ncells - 1` (a power of two): a cell index is `idx & mask`, not a
    /// division on every access.
    mask: u64,
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
    pub unsafe fn new(base: *mut u8, ncells: usize) -> Ring {
        assert!(ncells.is_power_of_two(), "ring size must be a power of two");
        Ring {
            base,
            ncells: ncells as u64,
            mask: ncells as u64 - 1,
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

    /// Resets both indices (only while no producer is attached).
    pub fn reset(&self) {
        self.tail_word().store(0, Ordering::Relaxed);
        self.head_word().store(0, Ordering::Release);
    }

    // ---------------- producer side ----------------

    /// Free cells as seen by the producer whose own tail is `tail`.
    pub fn free_cells(&self, tail: u64) -> Result<u64, Corrupt> {
        let head = sync::consumed(self.head_word());
        let used = tail.wrapping_sub(head);
        if used > self.ncells {
            return Err(Corrupt);
        }
        Ok(self.ncells - used)
    }

    #[cfg(test)]
    /// Copies `src` into the ring starting at cell index `at` (wrapping).
    ///
    /// # Safety
    /// The caller is the ring's producer and owns cells `at ..
    /// at + cells_for(src.len())` (checked with `free_cells`).
    pub unsafe fn write(&self, at: u64, src: &[u8]) {
        // SAFETY: forwarded; byte offset 0 of the record.
        unsafe { self.write_at(at, 0, src) }
    }

    /// Copies `src` to byte `off` of the record starting at cell `at`.
    ///
    /// # Safety
    /// As for [`Ring::write`], covering bytes `off .. off + src.len()`.
    pub unsafe fn write_at(&self, at: u64, off: usize, src: &[u8]) {
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

    /// Makes everything written before `new_tail` visible to the consumer
    /// (sync.rs; the sender then asks `Segment::must_wake`).
    pub fn publish(&self, new_tail: u64) {
        sync::publish(self.tail_word(), new_tail);
    }

    // ---------------- consumer side ----------------

    /// Cells published beyond the consumer's own `head`.
    pub fn available(&self, head: u64) -> Result<u64, Corrupt> {
        // The consumer's half of the wake-up handshake re-checks the ring
        // with this after `Segment::set_sleepers` (sync.rs).
        let tail = sync::published(self.tail_word());
        let n = tail.wrapping_sub(head);
        if n > self.ncells {
            return Err(Corrupt);
        }
        Ok(n)
    }

    /// Copies `dst.len()` bytes from byte `off` of the record at cell `at`.
    ///
    /// # Safety
    /// The caller is the consumer and the bytes lie within cells published
    /// (checked with `available`) and not yet released.
    pub unsafe fn read_at(&self, at: u64, off: usize, dst: *mut u8, len: usize) {
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

    /// Writes one whole cell (a one-cell record: a header carrying its
    /// payload inline) with a fixed-size copy.
    ///
    /// # Safety
    /// As [`Ring::write_at`]: the cell at `at` is free and ours (producer).
    #[inline]
    pub unsafe fn write_cell(&self, at: u64, src: &[u8; CELL]) {
        // SAFETY: `cell_ptr` points at a whole CELL-byte cell inside the
        // ring (the index is reduced modulo the ring size); the caller owns
        // it; raw copy, no reference to shared memory.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.cell_ptr(at), CELL) }
    }

    /// Reads one whole cell with a fixed-size copy (the peer may be writing
    /// anything there: the bytes are validated after the copy).
    ///
    /// # Safety
    /// As [`Ring::read_at`]: the cell at `at` is published and ours to read.
    #[inline]
    pub unsafe fn read_cell(&self, at: u64) -> [u8; CELL] {
        let mut b = [0u8; CELL];
        // SAFETY: `cell_ptr` points at a whole cell inside the ring; raw
        // copy into our own array, no reference to shared memory.
        unsafe { core::ptr::copy_nonoverlapping(self.cell_ptr(at), b.as_mut_ptr(), CELL) };
        b
    }

    /// Lets the producer reuse every cell before `new_head`.
    pub fn release(&self, new_head: u64) {
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

    #[test]
    fn wraps_and_round_trips() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        let (mut tail, mut head) = (0u64, 0u64);
        for round in 0..100u32 {
            let len = (round as usize * 37) % (3 * CELL) + 1;
            let msg: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
            let cells = cells_for(len);
            assert!(r.free_cells(tail).unwrap() >= cells);
            // SAFETY: cells checked free; we are the producer.
            unsafe { r.write(tail, &msg) };
            tail += cells;
            r.publish(tail);
            assert_eq!(r.available(head).unwrap(), cells);
            let mut out = vec![0u8; len];
            // SAFETY: published, unreleased; `out` has `len` bytes.
            unsafe { r.read_at(head, 0, out.as_mut_ptr(), len) };
            assert_eq!(out, msg);
            head += cells;
            r.release(head);
        }
    }

    #[test]
    fn corrupt_indices_detected() {
        let mut v = backing(8);
        let r = ring_in(&mut v, 8);
        r.publish(100); // tail far beyond head 0
        assert_eq!(r.available(0), Err(Corrupt));
        r.release(200); // head beyond tail
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
                rec[..8].copy_from_slice(&(len as u64).to_le_bytes());
                for (j, b) in rec[8..].iter_mut().enumerate() {
                    *b = (i as usize + j) as u8;
                }
                // SAFETY: producer owns the free cells.
                unsafe { r.write(tail, &rec) };
                tail += cells;
                r.publish(tail);
            }
        });
        let mut head = 0u64;
        for i in 0..n {
            while r.available(head).unwrap() == 0 {
                std::hint::spin_loop();
            }
            let mut lenb = [0u8; 8];
            // SAFETY: at least one cell is published.
            unsafe { r.read_at(head, 0, lenb.as_mut_ptr(), 8) };
            let len = u64::from_le_bytes(lenb) as usize;
            assert_eq!(len, (i % 150 + 1) as usize);
            let cells = cells_for(len + 8);
            assert!(r.available(head).unwrap() >= cells);
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
