//! Small data structures for the data path: a fast non-cryptographic hash
//! for maps keyed by our own identifiers (message ids, peer tokens — all
//! bounded in number, so hash flooding cannot grow them), and a slab that
//! hands out small integer handles without hashing at all.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash used by rustc ("Fx"): a few cycles per word.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

/// Values addressed by small non-zero `u32` handles (index + 1); freed
/// slots are reused. Lookups are an index, not a hash.
pub struct Slab<T> {
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
    pub fn insert(&mut self, v: T) -> u32 {
        self.len += 1;
        if let Some(h) = self.free.pop() {
            self.slots[h as usize - 1] = Some(v);
            return h;
        }
        self.slots.push(Some(v));
        self.slots.len() as u32
    }

    pub fn get(&self, h: u32) -> Option<&T> {
        self.slots.get((h as usize).checked_sub(1)?)?.as_ref()
    }

    pub fn get_mut(&mut self, h: u32) -> Option<&mut T> {
        self.slots.get_mut((h as usize).checked_sub(1)?)?.as_mut()
    }

    pub fn remove(&mut self, h: u32) -> Option<T> {
        let v = self.slots.get_mut((h as usize).checked_sub(1)?)?.take()?;
        self.free.push(h);
        self.len -= 1;
        Some(v)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Handles of every live value.
    pub fn handles(&self) -> Vec<u32> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| i as u32 + 1)
            .collect()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
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
