//! Inbound: the records of one sender's ring as the endpoint sees them, the
//! senders an endpoint knows, and the consumer of one ring.

use super::copy::{copy_small_into_one, SMALL_COPY};
use super::{ring, segment};
use crate::transport::addr::Addr;
use crate::transport::iov::IovList;
use crate::transport::proto::{Limits, WireHdr};
use crate::transport::{Disposition, PayloadIn};
use ring::{cells_for, Ring};
use segment::{SlotSender, NSLOTS};

/// A record as the consumer sees it (header copied out and validated).
pub(crate) struct InRecord<'a> {
    pub src: Addr,
    pub src_pid: i32,
    pub hdr: WireHdr,
    pub(super) payload: PayloadRef<'a>,
}

pub(super) struct PayloadRef<'a> {
    pub(super) ring: &'a Ring,
    pub(super) at: u64,
    /// Where the payload starts in the record: after a compact EAGER
    /// header (16 to 40 bytes, `proto::compact_len`) or a full one.
    pub(super) off: usize,
}

impl InRecord<'_> {
    pub(crate) fn payload_len(&self) -> usize {
        self.hdr.payload as usize
    }

    /// Copies payload bytes `off .. off + len` into application memory at
    /// `dst` (logical offset `dst_off` of the iov). Bounds are clipped.
    ///
    /// # Safety
    /// `dst` must describe writable application memory (the fi_recv
    /// contract: buffers stay valid until the receive completes).
    #[inline(always)]
    pub(crate) unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        let len = len.min(self.payload_len().saturating_sub(off));
        let from = self.payload.off + off;
        // The common small message: in the record's first cell (which never
        // wraps), all of it into a one-segment buffer, with fixed-size moves
        // and no call frame; the rest out of line.
        if from + len <= ring::CELL {
            let rec = self.payload.ring.cell(self.payload.at);
            // SAFETY: `rec + from .. + len` lies in the record's published,
            // unreleased first cell; `dst` is application memory per
            // contract.
            if unsafe { copy_small_into_one(rec.add(from), len, dst, dst_off) } {
                return len;
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.copy_to_iov_general(from, len, dst, dst_off) }
    }

    /// [`InRecord::copy_to_iov`] for the other cases: `len` bytes from
    /// byte `from` of the record (already clipped to the payload).
    ///
    /// # Safety
    /// As [`InRecord::copy_to_iov`].
    #[inline(never)]
    pub(super) unsafe fn copy_to_iov_general(&self, from: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        let ring = &self.payload.ring;
        let mut copied = 0;
        // A record's first cell never wraps.
        let one = (from + len <= ring::CELL).then(|| ring.cell(self.payload.at));
        if let Some(rec) = one.or_else(|| ring.linear(self.payload.at, cells_for(from + len))) {
            // The bytes do not wrap (nearly always). A small message into
            // a one-segment buffer: fixed-size moves instead of a call to
            // memcpy.
            // SAFETY: `rec + from .. + len` lies in the record's published,
            // unreleased cells, in one linear run; `dst` is application
            // memory per contract.
            if len <= SMALL_COPY && unsafe { copy_small_into_one(rec.add(from), len, dst, dst_off) } {
                return len;
            }
            // One copy per destination segment, without `read_at`'s loop.
            dst.for_range(dst_off, len, |p, n, _| {
                // SAFETY: as above; `p..p+n` is application memory per
                // contract; raw copy, no reference to shared memory.
                unsafe { core::ptr::copy_nonoverlapping(rec.add(from + copied), p as *mut u8, n) };
                copied += n;
            });
            return copied;
        }
        dst.for_range(dst_off, len, |p, n, _| {
            // SAFETY: the record is published and unreleased (we are inside
            // `poll`'s callback); `p..p+n` is application memory per contract.
            unsafe { ring.read_at(self.payload.at, from + copied, p as *mut u8, n) };
            copied += n;
        });
        copied
    }

    /// Copies the whole payload into a new vector.
    pub(crate) fn payload_vec(&self) -> Vec<u8> {
        let n = self.payload_len();
        let mut v = vec![0u8; n];
        // SAFETY: `v` has `n` bytes; the record is published and unreleased.
        unsafe {
            self.payload
                .ring
                .read_at(self.payload.at, self.payload.off, v.as_mut_ptr(), n)
        };
        v
    }
}

pub(super) struct InSlot {
    pub(super) slot: usize,
    pub(super) ring: Ring,
    pub(super) head: u64,
    /// Who the sender says it is (written by it into the slot).
    pub(super) sender: SlotSender,
    /// Its pid as the kernel told our doorbell (0: not verified); the only
    /// pid records report and CMA reads from.
    pub(super) vpid: i32,
    pub(super) broken: bool,
    /// Its sender is proven dead: freed once drained.
    pub(super) dead: bool,
    /// `head` at the last eviction round (moved since: the ring is busy).
    pub(super) round_head: u64,
    /// Look at its state after the next consume (signalled: it may have
    /// closed; its sender died).
    pub(super) look: bool,
    /// Unwatched by the running eviction round, to be looked at again.
    pub(super) idle: bool,
}

impl InSlot {
    pub(super) fn new(slot: usize, ring: Ring, sender: SlotSender, vpid: i32) -> InSlot {
        InSlot {
            slot,
            ring,
            head: 0,
            sender,
            vpid,
            broken: false,
            dead: false,
            round_head: 0,
            look: false,
            idle: false,
        }
    }

    pub(super) fn has_records(&self) -> bool {
        !self.broken && self.ring.ready(self.head).is_some()
    }
}

/// The senders an endpoint knows, dense, the watched ones first: a pass
/// walks `v[..nhot]` only (ready.rs); `pos` finds a slot's entry.
pub(super) struct Inbound {
    pub(super) v: Vec<InSlot>,
    /// By slot of our segment: the index in `v` (`NONE`: unknown sender).
    pub(super) pos: Box<[u16]>,
    pub(super) nhot: usize,
}

impl Inbound {
    pub(super) const NONE: u16 = u16::MAX;

    pub(super) fn new() -> Inbound {
        Inbound {
            v: Vec::new(),
            pos: vec![Self::NONE; NSLOTS].into_boxed_slice(),
            nhot: 0,
        }
    }

    pub(super) fn find(&self, slot: usize) -> Option<usize> {
        match self.pos.get(slot) {
            Some(&i) if i != Self::NONE => Some(i as usize),
            _ => None,
        }
    }

    pub(super) fn swap(&mut self, a: usize, b: usize) {
        self.v.swap(a, b);
        self.pos[self.v[a].slot] = a as u16;
        self.pos[self.v[b].slot] = b as u16;
    }

    /// A new sender, not watched yet; its index.
    pub(super) fn adopt(&mut self, s: InSlot) -> usize {
        let i = self.v.len();
        self.pos[s.slot] = i as u16;
        self.v.push(s);
        i
    }

    /// Moves entry `i` among the watched ones (marked to be looked at);
    /// whether it was not watched before. Its new index is `pos[slot]`.
    pub(super) fn heat(&mut self, i: usize) -> bool {
        self.v[i].look = true;
        if i < self.nhot {
            return false;
        }
        self.swap(i, self.nhot);
        self.nhot += 1;
        true
    }

    /// Moves watched entry `i` out of the watched ones.
    pub(super) fn cool(&mut self, i: usize) {
        debug_assert!(i < self.nhot);
        self.nhot -= 1;
        self.swap(i, self.nhot);
    }

    /// Forgets entry `i` (its slot is freed).
    pub(super) fn remove(&mut self, mut i: usize) {
        if i < self.nhot {
            self.cool(i);
            i = self.nhot;
        }
        let last = self.v.len() - 1;
        if i != last {
            self.swap(i, last);
        }
        if let Some(s) = self.v.pop() {
            self.pos[s.slot] = Self::NONE;
        }
    }

    pub(super) fn iter(&self) -> core::slice::Iter<'_, InSlot> {
        self.v.iter()
    }
}

impl PayloadIn for InRecord<'_> {
    unsafe fn copy_to_iov(&self, off: usize, len: usize, dst: &IovList, dst_off: usize) -> usize {
        // SAFETY: forwarded contract.
        unsafe { InRecord::copy_to_iov(self, off, len, dst, dst_off) }
    }
    fn to_vec(&self) -> Vec<u8> {
        self.payload_vec()
    }
}

/// The consumer of [`ShmPort::poll_records`] on one ring alone, from
/// `head`: the head it reached and whether it found the ring corrupt (the
/// `shm_ring` fuzz target, `crate::fuzzing`).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn consume_image(
    ring: Ring,
    head: u64,
    lim: &Limits,
    f: &mut dyn FnMut(InRecord<'_>) -> Disposition,
) -> (u64, bool) {
    let sender = SlotSender {
        token: 1,
        pid: 0,
        start: 0,
    };
    let mut s = InSlot::new(0, ring, sender, 0);
    s.head = head;
    let r = consume_slot(&mut s, lim, f, &mut false);
    (s.head, r.is_err())
}

/// Consumes records of one slot; Err(()) if the ring or a record is corrupt.
/// Sets `moved` when it consumed a record or a rewind marker (the producer
/// moved: `ShmPort::poll_records`; a store per record, nothing per empty
/// ring).
pub(super) fn consume_slot(
    s: &mut InSlot,
    lim: &Limits,
    f: &mut dyn FnMut(InRecord<'_>) -> Disposition,
    moved: &mut bool,
) -> core::result::Result<(), ()> {
    // At most one ring's worth per call: a sender that keeps its ring full
    // (or a hostile one that writes records endlessly) leaves the pass to
    // the other peers.
    let mut budget = s.ring.ncells();
    loop {
        if budget == 0 {
            return Ok(());
        }
        let Some(first) = s.ring.ready(s.head) else {
            return Ok(());
        };
        let cell = s.ring.cell(s.head);
        // The common record, a compact EAGER one: its header from the first
        // word as loaded and the four after it, decoded and checked at once
        // (`WireHdr::decode_compact_eager`, which takes nothing the general
        // path would refuse); anything else goes the general way.
        let mut rest = [0u64; 4];
        // SAFETY: a record is published at `head` (its first word, written
        // last, is set): its first cell (64 bytes) is readable; raw copy of
        // bytes 8..40 into our own array, no reference to shared memory.
        unsafe { core::ptr::copy_nonoverlapping(cell.add(8), rest.as_mut_ptr() as *mut u8, 32) };
        let rest = rest.map(u64::from_le);
        let (hdr, off) = match WireHdr::decode_compact_eager(u64::from_le(first), &rest, lim) {
            Some(d) => d,
            None => match general_header(s, first, lim)? {
                Found::Record(h, off) => (h, off),
                Found::Rewound(skip) => {
                    // `head` moved to the ring's first cell.
                    budget = budget.saturating_sub(skip);
                    *moved = true;
                    continue;
                }
            },
        };
        let cells = cells_for(off + hdr.payload as usize);
        if cells >= s.ring.ncells() {
            // A producer keeps one cell free, and `check` bounds the
            // payload far below the ring: corruption.
            return Err(());
        }
        let rec = InRecord {
            src: Addr::Shm(s.sender.token),
            src_pid: s.vpid,
            hdr,
            payload: PayloadRef {
                ring: &s.ring,
                at: s.head,
                off,
            },
        };
        match f(rec) {
            Disposition::Consumed => {
                s.head = s.head.wrapping_add(cells);
                s.ring.release(s.head);
                budget = budget.saturating_sub(cells);
                *moved = true;
            }
            Disposition::Stall => return Ok(()),
        }
    }
}

/// What the general path found at `s.head`: a record's header and where
/// its payload starts, or a rewind marker (the cells skipped).
pub(super) enum Found {
    Record(WireHdr, usize),
    Rewound(u64),
}

/// A record at `s.head` that is not a valid compact EAGER one: its header
/// decoded and checked the general way (`WireHdr::decode`, `check`), or a
/// rewind marker, after which `head` is the ring's first cell again.
/// Err(()): corruption.
/// `first` is its first word as `Ring::ready` returned it (the lap tag
/// cleared), which stands for the cell's first 8 bytes.
#[inline(never)]
pub(super) fn general_header(s: &mut InSlot, first: u64, lim: &Limits) -> core::result::Result<Found, ()> {
    // SAFETY: a record is published at `head` (its first word, written
    // last, is set): its first cell (64 bytes) is readable.
    let mut hb = unsafe { s.ring.read_cell(s.head) };
    hb[..8].copy_from_slice(&first.to_ne_bytes());
    if first == ring::REWIND {
        // The producer went back to the ring's first cell (ring.rs);
        // `head` is released with the record found there. A marker at
        // a lap's first cell would skip a whole lap: corruption.
        let skip = s.ring.cells_to_lap_end(s.head);
        if skip == s.ring.ncells() {
            return Err(());
        }
        s.head = s.head.wrapping_add(skip);
        return Ok(Found::Rewound(skip));
    }
    // A compact EAGER header or a full one; `off`: where its payload
    // starts (at most 64), `payload` bounded by `check`.
    let (hdr, off) = WireHdr::decode(&hb);
    hdr.check(lim).map_err(|_| ())?;
    Ok(Found::Record(hdr, off))
}
