//! A small seedable generator (xoshiro256**), so that a seed gives the same values
//! on every platform and Volta version.

/// Seedable pseudo-random generator for initialisation, dropout and shuffling.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
    spare_normal: Option<f64>,
}

impl Rng {
    /// A generator from a seed (expanded with SplitMix64).
    pub fn seed(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
            spare_normal: None,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let u1 = 1.0 - self.uniform(); // (0, 1]: log is finite
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        self.spare_normal = Some(r * theta.sin());
        r * theta.cos()
    }

    /// Shuffles a slice in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// lowbias32 (Chris Wellons' integer hash): a bijection of `u32` with good avalanche.
#[inline(always)]
const fn mix(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb_352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846c_a68b);
    h ^= h >> 16;
    h
}

/// The counter-based hash behind [`Backend::uniform`](crate::Backend::uniform): 32
/// random bits that depend only on `(seed, index)`, from integer operations that the
/// GPU kernels (`shaders/counter_hash.wgsl`) repeat exactly. The seed's halves make two
/// keys; three rounds of mixing fold the index in.
#[inline(always)]
pub const fn uniform_hash(seed: u64, index: u64) -> u32 {
    let (i0, i1) = (index as u32, (index >> 32) as u32);
    let [k0, k1] = stream_keys(seed);
    let h = mix(i0 ^ k0);
    let h = mix(h ^ i1 ^ k1);
    mix(h ^ k0)
}

/// The two keys [`uniform_hash`] derives from the seed's halves (kernels that
/// hash many elements take them precomputed).
#[inline(always)]
pub(crate) const fn stream_keys(seed: u64) -> [u32; 2] {
    let k0 = mix(seed as u32 ^ 0x9e37_79b9);
    [k0, mix((seed >> 32) as u32 ^ k0 ^ 0x7f4a_7c15)]
}

/// Element `index` of the stream `seed` of [`Backend::uniform`](crate::Backend::uniform):
/// the top 24 bits of [`uniform_hash`] scaled into `[0, 1)`, exact in `f32`.
#[inline(always)]
pub fn uniform_at(seed: u64, index: u64) -> f32 {
    (uniform_hash(seed, index) >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_stream_is_pinned() {
        // Changing the hash changes every dropout mask: make it deliberate.
        let first: Vec<u32> = (0..4).map(|i| uniform_hash(0, i)).collect();
        assert_eq!(first, PINNED);
        assert_eq!(uniform_at(0, 0), (PINNED[0] >> 8) as f32 / 16_777_216.0);
        // The index's and the seed's high words matter.
        assert_ne!(uniform_hash(0, 1 << 32), uniform_hash(0, 0));
        assert_ne!(uniform_hash(1 << 32, 0), uniform_hash(0, 0));
    }
    // Also computed by an independent Python transcription of the hash.
    const PINNED: [u32; 4] = [3_001_957_412, 2_295_340_389, 1_740_472_400, 1_600_468_577];

    #[test]
    fn streams_are_uniform_and_unrelated() {
        let n = 1 << 16;
        for seed in [0, 1, 2, u64::MAX] {
            let u: Vec<f64> = (0..n).map(|i| f64::from(uniform_at(seed, i))).collect();
            assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
            let mean = u.iter().sum::<f64>() / n as f64;
            let var = u.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            assert!((mean - 0.5).abs() < 0.01, "seed {seed}: mean {mean}");
            assert!((var - 1.0 / 12.0).abs() < 0.005, "seed {seed}: var {var}");
            // 16 buckets, χ² with 15 degrees of freedom: 37.7 is p = 0.001.
            let mut buckets = [0usize; 16];
            u.iter().for_each(|v| buckets[(v * 16.0) as usize] += 1);
            let e = n as f64 / 16.0;
            let chi2: f64 = buckets.iter().map(|&b| (b as f64 - e).powi(2) / e).sum();
            assert!(chi2 < 37.7, "seed {seed}: χ² {chi2}");
        }
        // Neighbouring seeds and neighbouring elements are uncorrelated.
        let corr = |a: &dyn Fn(u64) -> f64, b: &dyn Fn(u64) -> f64| {
            let s: f64 = (0..n).map(|i| (a(i) - 0.5) * (b(i) - 0.5)).sum();
            s / n as f64 * 12.0
        };
        let c = corr(&|i| f64::from(uniform_at(1, i)), &|i| {
            f64::from(uniform_at(2, i))
        });
        assert!(c.abs() < 0.02, "seeds 1, 2: correlation {c}");
        let c = corr(&|i| f64::from(uniform_at(1, i)), &|i| {
            f64::from(uniform_at(1, i + 1))
        });
        assert!(c.abs() < 0.02, "elements i, i + 1: correlation {c}");
    }
}
