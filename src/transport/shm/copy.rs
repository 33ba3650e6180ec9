//! Small copies by fixed-size moves, shared by the producer and the consumer
//! of a ring.

use super::ring;
use crate::transport::iov::IovList;
use crate::transport::proto::HDR_LEN;

// A record header is exactly one ring cell (read and written whole).
const _: () = assert!(HDR_LEN == ring::CELL);

/// Largest copy made with fixed-size moves (`copy_small_raw`): a two-cell
/// record's payload.
pub(super) const SMALL_COPY: usize = 2 * ring::CELL;

/// `len <= SMALL_COPY` bytes from `src` into a one-segment `dst` at
/// `dst_off`, with fixed-size moves; false (nothing copied) when `dst` is
/// not one segment with room for them.
///
/// # Safety
/// `src` readable for `len` bytes; `dst` describes application memory.
#[inline(always)]
pub(super) unsafe fn copy_small_into_one(src: *const u8, len: usize, dst: &IovList, dst_off: usize) -> bool {
    let [(p, cap)] = dst.segments() else {
        return false;
    };
    if *cap < dst_off + len {
        return false;
    }
    // SAFETY: `p + dst_off .. + len` lies within the segment (`cap`); raw
    // copy, no reference to shared memory.
    unsafe { copy_small_raw(src, (*p as *mut u8).add(dst_off), len) };
    true
}

/// `n <= SMALL_COPY` bytes from `src` to `dst`: two overlapping fixed-size
/// moves of the largest power of two not above `n` (64, 32, 16, 8 or 4
/// bytes) cover any length from 4 to 128, three single bytes any below.
/// A call to `memcpy` costs more than the copy at these sizes.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline]
pub(super) unsafe fn copy_small_raw(src: *const u8, dst: *mut u8, n: usize) {
    debug_assert!(n <= SMALL_COPY);
    /// Two moves of `T`: the first and the last `size_of::<T>()` bytes.
    ///
    /// # Safety
    /// `size_of::<T>() <= n`, and the contract of `copy_small_raw`.
    #[inline(always)]
    pub(super) unsafe fn two<T: Copy>(src: *const u8, dst: *mut u8, n: usize) {
        let k = core::mem::size_of::<T>();
        // SAFETY: `0 .. k` and `n - k .. n` lie below `n`; unaligned reads
        // and writes of plain data.
        unsafe {
            dst.cast::<T>().write_unaligned(src.cast::<T>().read_unaligned());
            dst.add(n - k)
                .cast::<T>()
                .write_unaligned(src.add(n - k).cast::<T>().read_unaligned());
        }
    }
    // SAFETY (every access): offsets below `n`, per the contract.
    unsafe {
        if n >= 64 {
            two::<[u64; 8]>(src, dst, n)
        } else if n >= 32 {
            two::<[u64; 4]>(src, dst, n)
        } else if n >= 16 {
            two::<u128>(src, dst, n)
        } else if n >= 8 {
            two::<u64>(src, dst, n)
        } else if n >= 4 {
            two::<u32>(src, dst, n)
        } else if n > 0 {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
    }
}
