//! The registry of live handles: the address of every `Obj` rustfab has
//! handed to C and not yet freed.
//!
//! A pointer from C is dereferenced only once it is found here, so a foreign
//! fid (another provider's object, or a struct the application made), a
//! handle already closed, or any other pointer is refused with `-FI_EINVAL`
//! without a single read of the memory behind it.
//!
//! Lookups are on every call (`fi_send`, `fi_cq_read`, ...), so they take no
//! lock and write nothing: an open-addressing table of atomic words (linear
//! probing, 0 = empty), read with plain loads. Insertions and removals
//! (object open and close) take a mutex and bump a sequence number around
//! each change; removal shifts the following entries back (no tombstones),
//! so a lookup racing with it may miss an entry that is being moved — a miss
//! is therefore believed only if the sequence number did not move meanwhile
//! (a seqlock, read only on the rare miss path). A hit is always right: a
//! key is in the table only while its object is live.
//!
//! The table grows (doubling, at half full) and never shrinks; a grown-out
//! table is kept, because a lookup may still be probing it. What is kept is
//! at most the size of the current table, itself at most four times the
//! largest number of objects ever live at once.

use core::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use parking_lot::Mutex;

struct Table {
    slots: Box<[AtomicUsize]>,
    /// log2 of the number of slots.
    bits: u32,
}

impl Table {
    fn new(bits: u32) -> Table {
        Table {
            slots: (0..1usize << bits).map(|_| AtomicUsize::new(0)).collect(),
            bits,
        }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        (1usize << self.bits) - 1
    }

    /// Where `key`'s probe sequence starts (Fibonacci hashing; objects are
    /// at least 16-byte aligned, the low bits carry nothing).
    #[inline(always)]
    fn home(&self, key: usize) -> usize {
        ((key as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - self.bits)) as usize
    }

    /// Whether `key` is in the table, or None when an empty slot ended the
    /// probe (a miss, to be confirmed by the caller).
    fn find(&self, key: usize) -> Option<usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        for _ in 0..=mask {
            let k = self.slots[i].load(Ordering::Acquire);
            if k == key {
                return Some(i);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Puts `key` in the first empty slot of its probe sequence (the caller
    /// keeps the table at most half full, so there is one).
    fn put(&self, key: usize) {
        let mask = self.mask();
        let mut i = self.home(key);
        while self.slots[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i].store(key, Ordering::Release);
    }

    /// Removes the key at slot `i`, shifting back the entries of the same
    /// cluster that would become unreachable.
    fn take(&self, i: usize) {
        let mask = self.mask();
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].load(Ordering::Relaxed);
            if k == 0 {
                break;
            }
            let h = self.home(k);
            // `k` may fill the hole when the hole lies on its probe path
            // (cyclically between its home and j).
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole].store(k, Ordering::Release);
                hole = j;
            }
        }
        self.slots[hole].store(0, Ordering::Release);
    }
}

/// The table lookups read (NULL until the first object).
static CURRENT: AtomicPtr<Table> = AtomicPtr::new(core::ptr::null_mut());
/// Odd while a writer changes the table.
static SEQ: AtomicU64 = AtomicU64::new(0);

struct Writer {
    len: usize,
    /// Tables grown out of, kept for lookups still probing them. Boxed:
    /// lookups hold `&Table` to the box's contents, which must not move.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<Table>>,
}

static WRITER: Mutex<Writer> = Mutex::new(Writer {
    len: 0,
    retired: Vec::new(),
});

const FIRST_BITS: u32 = 10;

/// Runs a change of the table inside the sequence number's odd phase.
fn changing<R>(f: impl FnOnce() -> R) -> R {
    let s = SEQ.load(Ordering::Relaxed);
    SEQ.store(s.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    let r = f();
    SEQ.store(s.wrapping_add(2), Ordering::Release);
    r
}

#[inline(always)]
fn current() -> Option<&'static Table> {
    let t = CURRENT.load(Ordering::Acquire);
    // SAFETY: a published table is never freed (grown-out ones are kept in
    // WRITER.retired for the life of the process).
    unsafe { t.as_ref() }
}

/// Records a new live object at `addr` (non-zero).
pub(crate) fn insert(addr: usize) {
    debug_assert!(addr != 0);
    let mut w = WRITER.lock();
    let t = match current() {
        Some(t) if (w.len + 1) * 2 <= t.slots.len() => t,
        old => {
            let bits = old.map_or(FIRST_BITS, |t| t.bits + 1);
            let new = Box::new(Table::new(bits));
            if let Some(o) = old {
                for s in o.slots.iter() {
                    let k = s.load(Ordering::Relaxed);
                    if k != 0 {
                        new.put(k);
                    }
                }
            }
            let p = Box::into_raw(new);
            let prev = changing(|| CURRENT.swap(p, Ordering::AcqRel));
            if !prev.is_null() {
                // SAFETY: `prev` came from Box::into_raw below or above and
                // is no longer published; kept, never freed.
                w.retired.push(unsafe { Box::from_raw(prev) });
            }
            // SAFETY: just published; never freed.
            unsafe { &*p }
        }
    };
    t.put(addr);
    w.len += 1;
}

/// Forgets the object at `addr`; false if it was not live.
pub(crate) fn remove(addr: usize) -> bool {
    let mut w = WRITER.lock();
    let Some(t) = current() else { return false };
    let Some(i) = t.find(addr) else { return false };
    changing(|| t.take(i));
    w.len -= 1;
    true
}

/// Whether `addr` is a live rustfab object. Lock-free; no write.
///
/// The common case, `addr` in its home slot or the next, is inlined into the
/// caller: the table pointer, the hash, one or two slot loads. Those are the
/// first steps of [`contains_probing`]'s walk without its sequence number,
/// which a hit never needs (a key is in a table only while its object is live, the
/// same argument as for a hit further along the walk); anything else (a
/// collision, a miss, NULL, no table yet) takes the full walk.
#[inline(always)]
pub(crate) fn contains(addr: usize) -> bool {
    if let Some(t) = current() {
        let i = t.home(addr);
        // SAFETY: `home` is below 2^bits, the number of slots.
        let k = unsafe { t.slots.get_unchecked(i) }.load(Ordering::Acquire);
        if k == addr && addr != 0 {
            return true;
        }
        if k != 0 {
            // A collision at home: the next slot is the second step.
            let j = (i + 1) & t.mask();
            // SAFETY: masked, below the number of slots.
            let k = unsafe { t.slots.get_unchecked(j) }.load(Ordering::Acquire);
            if k == addr && addr != 0 {
                return true;
            }
        }
    }
    contains_probing(addr)
}

/// [`contains`] by the probe sequence, a miss confirmed by the sequence
/// number.
#[inline(never)]
fn contains_probing(addr: usize) -> bool {
    if addr == 0 {
        return false;
    }
    loop {
        let s1 = SEQ.load(Ordering::Acquire);
        let Some(t) = current() else { return false };
        if t.find(addr).is_some() {
            return true;
        }
        fence(Ordering::Acquire);
        let s2 = SEQ.load(Ordering::Relaxed);
        if s1 == s2 && s1 & 1 == 0 {
            return false;
        }
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    // The registry is process-wide: each test uses its own address range
    // (never a real object's: odd multiples of 16 far above the heap).
    fn key(test: usize, i: usize) -> usize {
        (0x7fff_0000_0000 + (test << 32)) | (i << 4)
    }

    #[test]
    fn insert_find_remove_and_grow() {
        let n = 5000; // grows the first table (1024 slots) three times
        for i in 1..=n {
            insert(key(1, i));
        }
        for i in 1..=n {
            assert!(contains(key(1, i)), "{i}");
        }
        assert!(!contains(key(1, n + 1)));
        for i in (1..=n).step_by(2) {
            assert!(remove(key(1, i)));
        }
        for i in 1..=n {
            assert_eq!(contains(key(1, i)), i % 2 == 0, "{i}");
        }
        assert!(!remove(key(1, 1)), "removed twice");
        for i in (2..=n).step_by(2) {
            assert!(remove(key(1, i)));
        }
        assert!((1..=n).all(|i| !contains(key(1, i))));
    }

    /// The one-probe fast path: NULL is never live (slot 0, NULL's home, is
    /// empty or holds another key), nor is a key whose home slot holds
    /// another key, and a live key away from its home is still found.
    #[test]
    fn fast_path_hits_only_live_keys() {
        insert(key(4, 1));
        let t = current().unwrap();
        assert!(!contains(0));
        // Keys sharing key(4, 1)'s home slot: not live, then live (placed
        // further along the probe sequence, found by the walk).
        let home = t.home(key(4, 1));
        let twins: Vec<usize> = (2..1 << 16)
            .map(|i| key(4, i))
            .filter(|&k| t.home(k) == home)
            .take(2)
            .collect();
        assert_eq!(twins.len(), 2);
        assert!(!contains(twins[0]));
        insert(twins[0]);
        assert!(contains(twins[0]) && contains(key(4, 1)));
        assert!(!contains(twins[1]));
        insert(twins[1]); // third in the cluster: past the inlined steps
        assert!(contains(twins[1]) && contains(twins[0]));
        assert!(remove(twins[1]));
        assert!(!contains(twins[1]));
        assert!(remove(key(4, 1)));
        assert!(!contains(key(4, 1)) && contains(twins[0]));
        assert!(remove(twins[0]));
        assert!(!contains(twins[0]));
    }

    /// Backward-shift removal keeps every other key of a cluster reachable.
    #[test]
    fn removal_keeps_clusters_reachable() {
        let t = Table::new(4);
        // Keys that collide, and some wrapping around the end.
        let keys: Vec<usize> = (1..200).map(|i| i << 4).filter(|&k| t.home(k) >= 13).take(7).collect();
        for &k in &keys {
            t.put(k);
        }
        for (n, &k) in keys.iter().enumerate() {
            let i = t.find(k).expect("present");
            t.take(i);
            assert_eq!(t.find(k), None);
            for &other in &keys[n + 1..] {
                assert!(t.find(other).is_some(), "{other:#x} lost");
            }
        }
        assert!(t.slots.iter().all(|s| s.load(Ordering::Relaxed) == 0));
    }

    /// A lookup racing with other threads' opens and closes never misses a
    /// live object (the seqlock retry) and never finds a closed one.
    #[test]
    fn lookups_race_with_changes() {
        let stable: Vec<usize> = (1..=300).map(|i| key(2, i)).collect();
        for &k in &stable {
            insert(k);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut round = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..500 {
                        insert(key(3, round % 4 * 1000 + i + 1));
                    }
                    for i in 0..500 {
                        assert!(remove(key(3, round % 4 * 1000 + i + 1)));
                    }
                    round += 1;
                }
            })
        };
        for _ in 0..200 {
            for &k in &stable {
                assert!(contains(k));
            }
            assert!(!contains(key(2, 301)));
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
        for &k in &stable {
            assert!(remove(k));
        }
    }
}
