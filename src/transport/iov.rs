//! Application buffers as the engine and the transports pass them around:
//! a short list of (address, length) segments in this process. Building one
//! from a C `iovec` array is the C face's business; reading and writing
//! through one is done by the code that owns the operation.

use core::mem::MaybeUninit;

/// Most segments an application iov may have (`iov_limit`).
pub(crate) const IOV_MAX: usize = 8;

/// A list of application buffer segments (addresses in this process).
///
/// Only the first `n` segments are ever written or read: the rest of the
/// array is left uninitialised, so building the one-segment list of every
/// `fi_send`/`fi_recv` writes one segment, not eight (136 bytes zeroed per
/// post before; docs/performance-history.md, postcut). Every reader goes through
/// [`IovList::segments`]; equality and `Debug` are those of the segments.
#[derive(Clone, Copy)]
pub(crate) struct IovList {
    /// Segments written: `seg[..n]` is initialised, `n <= IOV_MAX`.
    n: usize,
    seg: [MaybeUninit<(usize, usize)>; IOV_MAX],
}

impl Default for IovList {
    fn default() -> IovList {
        IovList {
            n: 0,
            seg: [MaybeUninit::uninit(); IOV_MAX],
        }
    }
}

impl PartialEq for IovList {
    fn eq(&self, other: &IovList) -> bool {
        self.segments() == other.segments()
    }
}

impl Eq for IovList {}

impl core::fmt::Debug for IovList {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.segments()).finish()
    }
}

impl IovList {
    pub(crate) fn new() -> IovList {
        IovList::default()
    }

    /// The list of one buffer (none if `len` is 0: empty segments are kept
    /// out, as by [`IovList::push`]).
    #[inline]
    pub(crate) fn single(ptr: usize, len: usize) -> IovList {
        let mut l = IovList::new();
        l.seg[0] = MaybeUninit::new((ptr, len));
        l.n = (len != 0) as usize;
        l
    }

    /// A copy of a list of at most one segment with only that segment
    /// written (a copy of the whole list moves 136 bytes, a call to
    /// `memcpy`); `None` for a longer list.
    #[inline]
    pub(crate) fn head(&self) -> Option<IovList> {
        if self.n > 1 {
            return None;
        }
        let mut l = IovList::new();
        l.seg[0] = self.seg[0];
        l.n = self.n;
        Some(l)
    }

    /// Appends a segment; false if the list is full. Empty segments are kept
    /// out (they carry no bytes).
    pub(crate) fn push(&mut self, ptr: usize, len: usize) -> bool {
        if len == 0 {
            return true;
        }
        if self.n == IOV_MAX {
            return false;
        }
        self.seg[self.n] = MaybeUninit::new((ptr, len));
        self.n += 1;
        true
    }

    /// The segments (the only way to read them).
    #[inline]
    pub(crate) fn segments(&self) -> &[(usize, usize)] {
        // SAFETY: `n <= IOV_MAX` and `seg[..n]` is initialised (`single`
        // and `push`, the only writers of `n`, write a segment before
        // counting it and never count past IOV_MAX); `MaybeUninit<T>` has
        // `T`'s layout; the slice borrows `self`.
        unsafe {
            core::hint::assert_unchecked(self.n <= IOV_MAX);
            core::slice::from_raw_parts(self.seg.as_ptr().cast::<(usize, usize)>(), self.n)
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.segments().iter().map(|s| s.1).sum()
    }

    /// Address of byte `off` of the logical buffer (for `buf` in completions).
    pub(crate) fn addr_at(&self, off: usize) -> usize {
        let mut o = off;
        for &(p, l) in self.segments() {
            if o < l {
                return p + o;
            }
            o -= l;
        }
        // Past the end: from the first segment's address (from 0 for an
        // empty list).
        self.segments().first().map_or(off, |s| s.0 + off)
    }

    /// The sub-list covering logical bytes `off .. off + len`.
    pub(crate) fn sub(&self, off: usize, len: usize) -> IovList {
        let mut l = IovList::new();
        self.for_range(off, len, |p, n, _| {
            l.push(p, n);
        });
        l
    }

    /// Calls `f(ptr, len, logical_offset)` for each piece of the logical
    /// range `off .. off + len` (clipped to the buffer).
    pub(crate) fn for_range(&self, off: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) {
        let mut skip = off;
        let mut left = len;
        let mut logical = off;
        for &(p, l) in self.segments() {
            if left == 0 {
                break;
            }
            if skip >= l {
                skip -= l;
                continue;
            }
            let n = (l - skip).min(left);
            f(p + skip, n, logical);
            logical += n;
            left -= n;
            skip = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pushed(segs: &[(usize, usize)]) -> IovList {
        let mut l = IovList::new();
        for &(p, n) in segs {
            assert!(l.push(p, n));
        }
        l
    }

    /// `single` writes one segment and leaves the rest of the array
    /// unwritten: it must be the list `push` builds, an empty buffer
    /// giving the empty list.
    #[test]
    fn single_is_the_list_push_builds() {
        for (p, n) in [(0x1000, 1), (0x2000, 4096), (0x3000, 0), (0, 0)] {
            let s = IovList::single(p, n);
            assert_eq!(s, pushed(&[(p, n)]));
            assert_eq!(s.segments(), pushed(&[(p, n)]).segments());
            assert_eq!(s.total(), n);
            assert_eq!(s.segments().len(), (n != 0) as usize);
            // Past the end: from the first segment, or from 0 when empty.
            let past = if n == 0 { 7 } else { p + 7 };
            assert_eq!(s.addr_at(7), if n > 7 { p + 7 } else { past });
        }
        assert_eq!(IovList::single(0x1000, 0), IovList::new());
        assert_eq!(IovList::single(0x1000, 0).addr_at(3), 3);
    }

    /// Equality and `Debug` are those of the segments: two lists with the
    /// same segments are equal however they were built, lists that differ
    /// in a segment or in their count are not.
    #[test]
    fn equality_sees_only_the_segments() {
        let a = pushed(&[(1, 2), (3, 4), (5, 6)]);
        assert_eq!(a.sub(0, 2), IovList::single(1, 2));
        assert_eq!(a.sub(2, 4), IovList::single(3, 4));
        assert_eq!(a.sub(1, 4), pushed(&[(2, 1), (3, 3)]));
        assert_ne!(a.sub(0, 2), IovList::single(1, 3));
        assert_ne!(a.sub(0, 2), IovList::single(3, 2));
        assert_ne!(a, pushed(&[(1, 2), (3, 4)]));
        assert_ne!(IovList::new(), IovList::single(1, 1));
        assert_eq!(format!("{:?}", a.sub(0, 12)), "[(1, 2), (3, 4), (5, 6)]");
        assert_eq!(format!("{:?}", IovList::new()), "[]");
    }

    /// `head`: the list itself, for a list of at most one segment.
    #[test]
    fn head_is_the_list_up_to_one_segment() {
        for l in [IovList::new(), IovList::single(0x1000, 0), IovList::single(0x1000, 5)] {
            let h = l.head().expect("at most one segment");
            assert_eq!(h, l);
            assert_eq!(h.total(), l.total());
            assert_eq!(h.addr_at(9), l.addr_at(9));
        }
        assert_eq!(pushed(&[(1, 2), (3, 4)]).head(), None);
        assert_eq!(pushed(&[(1, 2), (3, 4)]).sub(0, 2).head(), Some(IovList::single(1, 2)));
    }

    #[test]
    fn a_full_list_refuses_a_ninth_segment() {
        let mut l = IovList::new();
        for i in 0..IOV_MAX {
            assert!(l.push(i * 16, 1 + i));
            assert_eq!(l.segments().len(), i + 1);
        }
        assert!(!l.push(0x9999, 1));
        assert!(l.push(0x9999, 0), "an empty segment is no segment");
        assert_eq!(l.segments().len(), IOV_MAX);
        assert_eq!(l.total(), (1..=IOV_MAX).sum::<usize>());
        assert_eq!(l.addr_at(0), 0);
        assert_eq!(l.addr_at(1), 16);
        assert_eq!(l.addr_at(1000), 1000);
    }
}
