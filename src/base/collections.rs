//! Small data structures for the data path: maps with a fast
//! non-cryptographic hash for our own identifiers (message ids, peer tokens — all
//! bounded in number, so hash flooding cannot grow them), and a slab that
//! hands out small integer handles without hashing at all.

/// Maps and sets keyed by our own identifiers, with rustc's fast hash
/// (`rustc-hash` 2: a few cycles per word plus a finishing step that
/// spreads aligned keys, such as 64-byte-aligned buffer addresses, over the
/// whole table).
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(crate) type FastSet<K> = rustc_hash::FxHashSet<K>;

/// Values addressed by small non-zero `u32` handles (index + 1); freed
/// slots are reused. Lookups are an index, not a hash.
pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    pub(crate) fn insert(&mut self, v: T) -> u32 {
        self.len += 1;
        if let Some(h) = self.free.pop() {
            self.slots[h as usize - 1] = Some(v);
            return h;
        }
        self.slots.push(Some(v));
        self.slots.len() as u32
    }

    pub(crate) fn get(&self, h: u32) -> Option<&T> {
        self.slots.get((h as usize).checked_sub(1)?)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        self.slots.get_mut((h as usize).checked_sub(1)?)?.as_mut()
    }

    pub(crate) fn remove(&mut self, h: u32) -> Option<T> {
        let v = self.slots.get_mut((h as usize).checked_sub(1)?)?.take()?;
        self.free.push(h);
        self.len -= 1;
        Some(v)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Handles of every live value.
    pub(crate) fn handles(&self) -> Vec<u32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as u32 + 1)
            .collect()
    }

    /// Every live value.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.as_mut().map(|v| (i as u32 + 1, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_keys_spread_over_the_buckets() {
        // Buffered-receive keys are 64-byte-aligned addresses. A table of
        // 2,048 buckets picks one by the hash's low bits: the hash must
        // spread such keys (a bare multiply-rotate put 1,024 of them in 32).
        use std::hash::BuildHasher;
        let b = rustc_hash::FxBuildHasher;
        let buckets: FastSet<u64> = (0..1024u64)
            .map(|i| b.hash_one(0x7f00_0000_0000 + i * 64) & 2047)
            .collect();
        assert!(buckets.len() > 600, "{} buckets used", buckets.len());
    }

    #[test]
    fn slab_reuses_and_rejects_stale() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_ne!(a, b);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get_mut(0), None);
        assert_eq!(s.get_mut(99), None);
        let c = s.insert("c");
        assert_eq!(c, a);
        assert_eq!(s.len(), 2);
        assert_eq!(s.handles(), vec![a, b]);
    }

    #[test]
    fn fast_map_works() {
        let mut m: FastMap<u64, u32> = FastMap::default();
        for i in 0..1000u64 {
            m.insert(i * 7919, i as u32);
        }
        for i in 0..1000u64 {
            assert_eq!(m.get(&(i * 7919)), Some(&(i as u32)));
        }
    }
}
