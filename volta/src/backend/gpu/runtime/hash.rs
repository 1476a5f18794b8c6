//! A fast hasher for the caches consulted on every launch (kernels, bind groups).
//! Their keys are small and come from Volta itself, so SipHash's resistance to
//! crafted collisions buys nothing, and it was a tenth of the cost of recording an
//! op. This is FxHash, rustc's: a rotate, xor and multiply per word.
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`Fx`] hashing.
pub(crate) type FxHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Fx>>;

/// FxHash state.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Fx {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }

    fn write_u16(&mut self, n: u16) {
        self.add(n.into());
    }

    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fx;
    use std::hash::{Hash, Hasher};

    fn hash(v: impl Hash) -> u64 {
        let mut h = Fx::default();
        v.hash(&mut h);
        h.finish()
    }

    #[test]
    fn keys_that_differ_hash_apart() {
        assert_ne!(hash([1u64, 2, 3]), hash([1u64, 3, 2]));
        assert_ne!(hash("volta matmul"), hash("volta matmuk"));
        assert_eq!(hash((7u32, "a")), hash((7u32, "a")));
    }
}
