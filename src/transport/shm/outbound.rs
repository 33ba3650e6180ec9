//! Outbound: claiming cells of our ring in a peer's segment and writing
//! records into them; a peer's backlog; the end of a ring.

use super::copy::{copy_small_raw, SMALL_COPY};
use super::doorbell::ring_doorbell;
use super::peer::PeerOut;
use super::{ring, segment, sync};
use crate::base::error::Error;
use crate::sys::doorbell::Ringer;
use crate::transport::addr::Addr;
use crate::transport::proto::{self, WireHdr, HDR_LEN};
use crate::transport::{Payload, PeerEvent};
use ring::cells_for;

/// Largest eager message / DATA chunk carried in a ring record.
pub(crate) const EAGER_MAX: usize = 16384;

/// Where a claimed record goes: the cell index `at`, and `rewound`, the
/// producer's tail before it went back to the ring's first cell (where the
/// rewind marker goes once the record is published, ring.rs).
#[derive(Clone, Copy)]
pub(super) struct Spot {
    pub(super) at: u64,
    pub(super) rewound: Option<u64>,
}

/// Claims `cells` cells of `p`'s ring for a record (`eager`: an EAGER
/// record): Ok(None) no room, Err: corrupt. A record of `ring::REWIND_MIN`
/// cells or more goes back to the ring's first cell when the consumer has
/// left room there (`Ring::rewind`). In a ring larger than
/// `ring::REWIND_RING_MAX`: a small record once its tail reached
/// `ring::SMALL_REWIND_AT`, an eager one as `ring::EMPTY_REWIND_MAX` says,
/// a streamed chunk never. A record that would reach past the ring's
/// allocated pages (`PeerOut::reserved`) goes `claim_past_reserved`.
#[inline]
pub(super) fn claim(p: &mut PeerOut, cells: u64, eager: bool) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let rewind = if p.ring.ncells() <= ring::REWIND_RING_MAX {
        cells >= ring::REWIND_MIN
    } else if cells >= ring::REWIND_MIN {
        eager
    } else {
        p.ring.lap_offset(p.tail).wrapping_sub(ring::SMALL_REWIND_AT) < ring::REWIND_MIN
    };
    if rewind {
        if let Some(spot) = claim_rewound(p, cells)? {
            return Ok(Some(spot));
        }
    }
    if p.free < cells {
        p.free = p.ring.free_cells(p.tail)?;
        if p.free < cells {
            return Ok(None);
        }
    }
    // The record and the cell after it (which `publish_at` may write)
    // within the allocated pages.
    if p.ring.lap_offset(p.tail) + cells >= p.reserved {
        return claim_past_reserved(p, cells);
    }
    p.free -= cells;
    Ok(Some(Spot {
        at: p.tail,
        rewound: None,
    }))
}

/// A record that would reach past the ring's allocated pages
/// (`PeerOut::reserved`): the next ones are allocated now, in one system
/// call (`Segment::populate_cells`), in steps — up to
/// `ring::RESERVE_WORKING` cells, then `ring::SMALL_LAP`, then the whole
/// ring, the steps past the first only while /dev/shm keeps
/// `segment::STEP_HEADROOM` free after them (one peer's large ring never
/// takes the room another needs to work) — so that a first contact
/// allocates one page, a sender of small
/// records at most the small lap, and a large ring's first lap takes no
/// page fault per page (224 of them were a third of a 200-message 64 KiB
/// ping-pong); and so that a full /dev/shm is found here, not by a
/// SIGBUS at a store. Without room for `RESERVE_WORKING` cells the peer
/// fails (`no_room`: -FI_ENOMEM). Without room past them the
/// sender stays within the cells it has for good (`confined`): a record
/// that does not fit before them goes back to the lap's first cell once
/// the consumer has left room there, or waits (Ok(None)). Where the
/// kernel cannot populate (before Linux 5.14), the pages fault in as they
/// are written. `p.free >= cells`.
#[cold]
#[inline(never)]
pub(super) fn claim_past_reserved(p: &mut PeerOut, cells: u64) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let ncells = p.ring.ncells();
    while !p.confined {
        let want = if p.reserved < ring::RESERVE_WORKING {
            ring::RESERVE_WORKING
        } else if p.reserved < ring::SMALL_LAP {
            ring::SMALL_LAP
        } else {
            ncells
        }
        .min(ncells);
        // Beyond what the sender needs to work, not into the room others
        // may need for theirs.
        let keep = if want > ring::RESERVE_WORKING {
            segment::STEP_HEADROOM
        } else {
            0
        };
        match p.seg.populate_cells(p.slot, p.reserved, want, keep) {
            Err(Error::NOMEM) => {
                p.seg.unpopulate_cells(p.slot, p.reserved, want);
                if p.reserved < ring::RESERVE_WORKING {
                    crate::base::log::log_warn!(
                        crate::abi::FI_LOG_EP_DATA,
                        "shm: /dev/shm has no room for {want} cells of a peer's ring; the peer is unreachable"
                    );
                    p.no_room = true;
                    return Err(ring::Corrupt);
                }
                p.confined = true;
                crate::base::log::log_warn!(
                    crate::abi::FI_LOG_EP_DATA,
                    "shm: /dev/shm has no room for the rest of a peer's ring; its records stay in the first {} cells",
                    p.reserved
                );
            }
            _ => {
                p.reserved = if want >= ncells { u64::MAX } else { want };
                if p.ring.lap_offset(p.tail) + cells < p.reserved {
                    p.free -= cells;
                    return Ok(Some(Spot {
                        at: p.tail,
                        rewound: None,
                    }));
                }
            }
        }
    }
    // Records are far smaller than the cells the sender has (at most an
    // eager record or chunk and its header: 257 cells, against 1024), so
    // once the consumer has taken everything one fits after the lap's
    // first cell and before the tail, where the marker goes.
    debug_assert!(cells * 2 < p.reserved);
    rewound_spot(p, cells, true)
}

/// `claim` of a large record at the next lap's first cell, if it may go
/// there (`Ring::rewind`). Out of line, so that the small records' path
/// carries none of it.
#[inline(never)]
pub(super) fn claim_rewound(p: &mut PeerOut, cells: u64) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let when_empty = cells <= ring::EMPTY_REWIND_MAX || p.ring.ncells() <= ring::REWIND_RING_MAX;
    rewound_spot(p, cells, when_empty)
}

/// The spot at the next lap's first cell for a record of `cells` cells,
/// if `Ring::rewind` lets it go there.
#[inline]
pub(super) fn rewound_spot(
    p: &mut PeerOut,
    cells: u64,
    when_empty: bool,
) -> core::result::Result<Option<Spot>, ring::Corrupt> {
    let Some((lap, free)) = p.ring.rewind(p.tail, cells, when_empty)? else {
        return Ok(None);
    };
    p.free = free - cells;
    Ok(Some(Spot {
        at: lap,
        rewound: Some(p.tail),
    }))
}

/// After the record at `spot` is published: the rewind marker at the old
/// tail, if the record went back to the ring's first cell; the new tail.
#[inline(always)]
pub(super) fn published(p: &mut PeerOut, spot: Spot, cells: u64) {
    if let Some(old) = spot.rewound {
        // SAFETY: we are the producer, `old` our tail before the rewind
        // (its first word made not to read as published with the record
        // before it), and the record at the lap's first cell is published.
        unsafe { p.ring.publish_rewind(old) };
    }
    p.tail = spot.at.wrapping_add(cells);
}

// The rewind marker reads as published (the magic) but never as a record:
// its version and op bytes are 0, which no record has; no lap tag.
const _: () = assert!(
    ring::REWIND as u16 == proto::MAGIC
        && (ring::REWIND >> 16) as u8 != proto::VERSION
        && (ring::REWIND >> 24) as u8 == 0
        && ring::REWIND & sync::LAP_TAG == 0
);
// No flag lies in the lap tag's bits (the header's flag bits 16..32).
const _: () = assert!(((proto::flag::ALL | proto::flag::LANE) as u64) << 32 & sync::LAP_TAG == 0);

/// A header's first word (the magic, version, op and flags), as the
/// producer gives it to `Ring::publish_at`.
#[inline(always)]
pub(super) fn first_word(cell: &[u8; ring::CELL]) -> u64 {
    u64::from_le_bytes([cell[0], cell[1], cell[2], cell[3], cell[4], cell[5], cell[6], cell[7]])
}

/// Ok(true) written, Ok(false) no room, Err: ring corrupt.
pub(super) fn write_record(
    p: &mut PeerOut,
    hdr: &WireHdr,
    payload: &Payload<'_>,
) -> core::result::Result<bool, ring::Corrupt> {
    if hdr.op == proto::op::EAGER {
        return write_eager(p, hdr, payload);
    }
    let n = payload.len();
    let cells = cells_for(HDR_LEN + n);
    let Some(spot) = claim(p, cells, false)? else {
        return Ok(false);
    };
    let at = spot.at;
    let mut h = *hdr;
    h.payload = n as u32;
    let hb = h.to_bytes();
    let first = first_word(&hb);
    // SAFETY: `cells` cells from `tail` and the one after them are free
    // and ours (producer); the record's first word goes last (publication).
    unsafe {
        if let Some(rec) = p.ring.linear(at, cells) {
            // The record does not wrap (nearly always): the header's last
            // 56 bytes with a fixed-size copy, each payload chunk with one.
            // `rec .. rec + cells * CELL` is ours; the chunks add up to
            // `n`, and HDR_LEN + n <= cells * CELL.
            core::ptr::copy_nonoverlapping(hb.as_ptr().add(8), rec.add(8), HDR_LEN - 8);
            let mut at = HDR_LEN;
            payload.for_each(|chunk| {
                core::ptr::copy_nonoverlapping(chunk.as_ptr(), rec.add(at), chunk.len());
                at += chunk.len();
            });
        } else {
            p.ring.write_at(at, 8, &hb[8..]);
            let mut off = HDR_LEN;
            payload.for_each(|chunk| {
                p.ring.write_at(at, off, chunk);
                off += chunk.len();
            });
        }
        p.ring.publish_at(at, cells, first);
    }
    published(p, spot, cells);
    Ok(true)
}

/// Header words 1.. of a compact EAGER record at `words` (its first cell):
/// the payload length, then the fields `flags` calls for, in order (`off`:
/// `proto::compact_len(flags)`). Word 0 goes last (publication).
///
/// # Safety
/// `words` is the first cell of a record the caller (the producer) owns.
#[inline(always)]
pub(super) unsafe fn write_compact_fields(words: *mut u64, hdr: &WireHdr, flags: u32, off: usize, n: usize) {
    // SAFETY: words 1..5 lie inside the first cell (64 bytes), ours.
    unsafe {
        words.add(1).write(n as u64);
        if off > proto::COMPACT_MIN {
            let mut k = 2;
            if flags & proto::flag::TAGGED != 0 {
                words.add(k).write(hdr.tag);
                k += 1;
            }
            if flags & proto::flag::REMOTE_CQ_DATA != 0 {
                words.add(k).write(hdr.data);
                k += 1;
            }
            if k * 8 < off {
                words.add(k).write(hdr.msg_id);
            }
        }
    }
}

/// The payload of a record as one contiguous source, when it is one: a
/// byte slice, or an iov of one segment read from its start (every
/// message of one buffer). None: walk it with `Payload::for_each`.
#[inline(always)]
pub(super) fn contiguous(payload: &Payload<'_>) -> Option<*const u8> {
    match *payload {
        Payload::Bytes(b) => Some(b.as_ptr()),
        Payload::Iov(iov, 0, len) => match iov.segments() {
            [(ptr, seg)] if *seg >= len => Some(*ptr as *const u8),
            _ => None,
        },
        _ => None,
    }
}

/// An EAGER record that fits one cell with a contiguous payload: its
/// compact flags, header length, payload source and length.
#[inline(always)]
pub(super) fn one_cell_eager(hdr: &WireHdr, payload: &Payload<'_>) -> Option<(u32, usize, *const u8, usize)> {
    if hdr.op != proto::op::EAGER {
        return None;
    }
    let n = payload.len();
    // The shortest header first: a larger payload leaves at once.
    if n > ring::CELL - proto::COMPACT_MIN {
        return None;
    }
    let flags = hdr.flags | proto::flag::COMPACT;
    let off = proto::compact_len(flags);
    if off + n > ring::CELL {
        return None;
    }
    Some((flags, off, contiguous(payload)?, n))
}

/// A compact EAGER record of one cell (`total = off + n <= CELL`) whose
/// payload is contiguous at `src`: a cell never wraps nor goes back to the
/// ring's start, so no `linear` test, no rewind, no chunk walk.
#[inline(always)]
pub(super) fn write_eager_cell(
    p: &mut PeerOut,
    hdr: &WireHdr,
    flags: u32,
    off: usize,
    src: *const u8,
    n: usize,
) -> core::result::Result<bool, ring::Corrupt> {
    debug_assert!(off + n <= ring::CELL);
    let Some(spot) = claim(p, 1, false)? else {
        return Ok(false);
    };
    let rec = p.ring.cell(spot.at);
    // SAFETY: the cell at `spot.at` and the one after it are free and ours
    // (producer); `off + n <= CELL`, so the payload stays inside the
    // record's cell; `src` is readable for `n` bytes (`contiguous`); the
    // record's first word goes last (publication).
    unsafe {
        write_compact_fields(rec.cast::<u64>(), hdr, flags, off, n);
        copy_small_raw(src, rec.add(off), n);
        p.ring.publish_at(
            spot.at,
            1,
            proto::pack_first_word(hdr.magic, hdr.version, hdr.op, flags),
        );
    }
    published(p, spot, 1);
    Ok(true)
}

/// An EAGER record in the compact form (proto.rs, docs/shm.md "Rings"):
/// 16 to 40 header bytes, the payload right after them; up to 48 bytes of
/// payload in one cell, 112 in two, copied with fixed-size moves.
#[inline]
pub(super) fn write_eager(
    p: &mut PeerOut,
    hdr: &WireHdr,
    payload: &Payload<'_>,
) -> core::result::Result<bool, ring::Corrupt> {
    let n = payload.len();
    let flags = hdr.flags | proto::flag::COMPACT;
    let off = proto::compact_len(flags);
    let total = off + n;
    let cells = cells_for(total);
    let Some(spot) = claim(p, cells, true)? else {
        return Ok(false);
    };
    let at = spot.at;
    // SAFETY: `cells` cells from `at` and the one after them are free
    // and ours (producer); the record's first word goes last (publication).
    unsafe {
        if let Some(rec) = p.ring.linear(at, cells) {
            // The record does not wrap (nearly always): header words 1..5
            // (bytes 8..40, inside the first cell, which is ours whatever
            // `n`), then the payload from `off`, over the words the header
            // does not use. Plain stores into our cells (the cell is
            // 64-byte aligned), no reference.
            write_compact_fields(rec.cast::<u64>(), hdr, flags, off, n);
            let mut at = off;
            payload.for_each(|chunk| {
                // `at + chunk.len() <= total <= cells * CELL`.
                copy_payload(chunk.as_ptr(), rec.add(at), chunk.len(), total);
                at += chunk.len();
            });
        } else {
            let (w, _) = hdr.compact(n);
            let mut hb = [0u8; 40];
            for (i, x) in w.iter().enumerate() {
                hb[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            p.ring.write_at(at, 8, &hb[8..off]);
            let mut pos = off;
            payload.for_each(|chunk| {
                p.ring.write_at(at, pos, chunk);
                pos += chunk.len();
            });
        }
        p.ring
            .publish_at(at, cells, proto::pack_first_word(hdr.magic, hdr.version, hdr.op, flags));
    }
    published(p, spot, cells);
    Ok(true)
}

/// One payload chunk of `n` bytes of a record of `total` bytes: with
/// fixed-size moves when the record is small (two cells or less), else
/// `memcpy`.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline(always)]
pub(super) unsafe fn copy_payload(src: *const u8, dst: *mut u8, n: usize, total: usize) {
    // SAFETY: forwarded (`n <= total <= SMALL_COPY` on the first arm).
    unsafe {
        if total <= SMALL_COPY {
            copy_small_raw(src, dst, n)
        } else {
            core::ptr::copy_nonoverlapping(src, dst, n)
        }
    }
}

/// Writes what of `p`'s backlog fits; false if its ring failed
/// (`fail_out` is the caller's).
pub(super) fn flush_backlog(p: &mut PeerOut) -> bool {
    while let Some(h) = p.backlog.front().copied() {
        match write_record(p, &h, &Payload::None) {
            Ok(true) => {
                p.backlog.pop_front();
            }
            Ok(false) => break,
            Err(ring::Corrupt) => return false,
        }
    }
    true
}

/// Our side of the peer `token` failed: its ring broke, or /dev/shm had no
/// room for it (`no_room`). No more records go to it, and the endpoint
/// hears it (`PeerEvent`). Where the cause is ours (no room), the owner is
/// told too, by our slot closed with the code (`Segment::abort_slot`):
/// what it waits on from us never comes, and it fails us in turn
/// (`ShmPort::refuse`). A corrupt ring or a gone owner is the owner's own
/// doing. The error for the send that found it: -FI_ENOMEM where the ring
/// is not at fault, else -FI_ECONNRESET.
#[cold]
#[inline(never)]
pub(super) fn fail_out(ring_tx: &Ringer, p: &mut PeerOut, events: &mut Vec<PeerEvent>, token: u64) -> Error {
    p.failed = true;
    p.backlog.clear();
    let ev = if p.no_room {
        p.seg.abort_slot(p.slot, Error::NOMEM.0 as u32);
        p.seg.signal(p.slot);
        ring_doorbell(ring_tx, &p.seg, &p.bell);
        PeerEvent::NoRoom(Addr::Shm(token))
    } else {
        PeerEvent::Failed(Addr::Shm(token))
    };
    events.push(ev);
    ev.cause()
}

/// Orderly end of our ring to `p`: a `BYE`, the slot closed (the owner
/// frees it), the owner woken to see it.
pub(super) fn leave(ring_tx: &Ringer, p: &mut PeerOut) {
    let _ = write_record(p, &WireHdr::new(proto::op::BYE), &Payload::None);
    p.seg.close_slot(p.slot);
    // A close is always signalled: the owner frees the slot.
    p.seg.signal(p.slot);
    ring_doorbell(ring_tx, &p.seg, &p.bell);
}
