//! Application buffers as the engine and the transports pass them around:
//! a short list of (address, length) segments in this process. Building one
//! from a C `iovec` array is the C face's business; reading and writing
//! through one is done by the code that owns the operation.

/// Most segments an application iov may have (`iov_limit`).
pub const IOV_MAX: usize = 8;

/// A list of application buffer segments (addresses in this process).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IovList {
    n: usize,
    seg: [(usize, usize); IOV_MAX],
}

impl IovList {
    pub fn new() -> IovList {
        IovList::default()
    }

    pub fn single(ptr: usize, len: usize) -> IovList {
        let mut l = IovList::new();
        l.push(ptr, len);
        l
    }

    /// Appends a segment; false if the list is full. Empty segments are kept
    /// out (they carry no bytes).
    pub fn push(&mut self, ptr: usize, len: usize) -> bool {
        if len == 0 {
            return true;
        }
        if self.n == IOV_MAX {
            return false;
        }
        self.seg[self.n] = (ptr, len);
        self.n += 1;
        true
    }

    pub fn segments(&self) -> &[(usize, usize)] {
        &self.seg[..self.n]
    }

    pub fn total(&self) -> usize {
        self.segments().iter().map(|s| s.1).sum()
    }

    /// Address of byte `off` of the logical buffer (for `buf` in completions).
    pub fn addr_at(&self, off: usize) -> usize {
        let mut o = off;
        for &(p, l) in self.segments() {
            if o < l {
                return p + o;
            }
            o -= l;
        }
        self.seg.first().map(|s| s.0 + off).unwrap_or(0)
    }

    /// The sub-list covering logical bytes `off .. off + len`.
    pub fn sub(&self, off: usize, len: usize) -> IovList {
        let mut l = IovList::new();
        self.for_range(off, len, |p, n, _| {
            l.push(p, n);
        });
        l
    }

    /// Calls `f(ptr, len, logical_offset)` for each piece of the logical
    /// range `off .. off + len` (clipped to the buffer).
    pub fn for_range(&self, off: usize, len: usize, mut f: impl FnMut(usize, usize, usize)) {
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
