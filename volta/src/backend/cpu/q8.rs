//! 8-bit activations for the CPU's quantised GEMV, as llama.cpp's CPU backend
//! computes it: each row of `x` is quantised once per matmul to `i8` quants with
//! one scale per block, and each weight block's dot product with it is a sum of
//! integer products, scaled once per block. The integer sums run on AVX2
//! (`maddubs`/`madd`) where the CPU has it (detected at run time) and in scalar
//! code elsewhere; both compute the same integer sums.
//!
//! The activations' blocks follow the weights' type, as ggml's `vec_dot_type`
//! does: `block_q8_0`/`block_q8_1` (an f16 scale `amax/127` per 32, and the f16 of
//! `d·Σq` for the offset terms of Q4_1 and Q5_1) for the 32-weight types, and
//! `block_q8_K` (one f32 scale `−max/127` per 256, `max` being the element of
//! largest magnitude) for the K-quants.
pub(crate) use super::quantized::Q8Kind;
use super::quantized::{CpuQuantized, WRow};
use crate::io::quant::{BLOCK, SUPER_BLOCK};
use half::f16;

/// Rows of `k` quantised activations: the quants, and per 32-element block the
/// scale `d` and `d·Σq` (the factor of a weight block's offset `m`).
pub(crate) struct Q8Rows {
    qs: Vec<i8>,
    d: Vec<f32>,
    sums: Vec<f32>,
    k: usize,
}

/// One row of [`Q8Rows`].
#[derive(Clone, Copy)]
pub(crate) struct Q8Row<'a> {
    qs: &'a [i8],
    d: &'a [f32],
    sums: &'a [f32],
}

impl Q8Rows {
    /// `x` (rows of `k`, a multiple of 32, or of 256 for [`Q8Kind::Super`])
    /// quantised.
    pub(crate) fn quantize(x: &[f32], k: usize, kind: Q8Kind) -> Q8Rows {
        let blocks = x.len() / BLOCK;
        let mut rows = Q8Rows {
            qs: vec![0; x.len()],
            d: vec![0.0; blocks],
            sums: vec![0.0; blocks],
            k,
        };
        match kind {
            Q8Kind::Block => {
                for (((x, q), d), s) in x
                    .chunks_exact(BLOCK)
                    .zip(rows.qs.chunks_exact_mut(BLOCK))
                    .zip(&mut rows.d)
                    .zip(&mut rows.sums)
                {
                    (*d, *s) = block_q8_1(x, q);
                }
            }
            Q8Kind::Super => {
                const SUBS: usize = SUPER_BLOCK / BLOCK;
                for (((x, q), d), s) in x
                    .chunks_exact(SUPER_BLOCK)
                    .zip(rows.qs.chunks_exact_mut(SUPER_BLOCK))
                    .zip(rows.d.chunks_exact_mut(SUBS))
                    .zip(rows.sums.chunks_exact_mut(SUBS))
                {
                    block_q8_k(x, q, d, s);
                }
            }
        }
        rows
    }

    /// Row `i`.
    pub(crate) fn row(&self, i: usize) -> Q8Row<'_> {
        let b = self.k / BLOCK;
        Q8Row {
            qs: &self.qs[i * self.k..(i + 1) * self.k],
            d: &self.d[i * b..(i + 1) * b],
            sums: &self.sums[i * b..(i + 1) * b],
        }
    }
}

/// ggml's `quantize_row_q8_1` (AVX2) for one block: the quants into `q`; returns
/// the f16-rounded scale and the f16-rounded `d·Σq` (its `s`).
fn block_q8_1(x: &[f32], q: &mut [i8]) -> (f32, f32) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, v) in q.iter_mut().zip(x) {
        let r = nearest_int(v * id);
        *q = r as i8;
        sum += r;
    }
    let half = |v: f32| f16::from_f32(v).to_f32();
    (half(d), half(d * sum as f32))
}

/// `v` rounded to the nearest integer, ties to even, for `|v| < 2²²` (ggml's
/// `nearest_int`): adding 1.5·2²³ leaves the integer in the mantissa. Unlike
/// `round_ties_even`, no library call without SSE4.1.
fn nearest_int(v: f32) -> i32 {
    ((v + 12_582_912.0).to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// ggml's `quantize_row_q8_K_ref` for one super-block of 256: the quants into
/// `q`, and per sub-block of 32 the scale (the same for all eight) and `d·Σq`.
fn block_q8_k(x: &[f32], q: &mut [i8], d: &mut [f32], sums: &mut [f32]) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            (amax, max) = (v.abs(), v);
        }
    }
    if amax == 0.0 {
        q.fill(0);
        d.fill(0.0);
        sums.fill(0.0);
        return;
    }
    let iscale = -127.0 / max;
    let scale = 1.0 / iscale;
    for (((x, q), d), s) in x
        .chunks_exact(BLOCK)
        .zip(q.chunks_exact_mut(BLOCK))
        .zip(d)
        .zip(sums)
    {
        let mut sum = 0i32;
        for (q, v) in q.iter_mut().zip(x) {
            let r = nearest_int(iscale * v).min(127);
            *q = r as i8;
            sum += r;
        }
        *d = scale;
        *s = scale * sum as f32;
    }
}

/// `out[r·m + i] = Σ W[j0 + r]·x[i]` for the rows of a chunk, `x` as `m` rows of
/// 8-bit activations.
pub(crate) fn dot_rows(w: &CpuQuantized, j0: usize, x: &Q8Rows, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
        && std::is_x86_feature_detected!("f16c")
    {
        // SAFETY: the CPU has the features the function was compiled for.
        return unsafe { avx2::dot_rows(w, j0, x, out) };
    }
    let m = x.qs.len() / x.k;
    for (r, col) in out.chunks_exact_mut(m).enumerate() {
        let row = w.row(j0 + r);
        for (i, o) in col.iter_mut().enumerate() {
            *o = scalar::dot(w.format(), row, x.row(i));
        }
    }
}

/// The dot products in scalar code: per block, integer sums of products, then
/// the block's scales.
mod scalar {
    use super::super::quantized::{Q5_0_QUANT_BYTES, k_sub_block, q5_0_quants};
    use super::{Q8Row, WRow};
    use crate::io::quant::{BLOCK, GgmlType, QFormat, SUPER_BLOCK};

    /// Q4_0's and Q4_1's 32 nibbles: weight i of a block is byte i's low
    /// nibble, weight i + 16 its high one.
    fn nibbles(q: &[u8]) -> impl Iterator<Item = i32> + '_ {
        (0..BLOCK).map(move |i| i32::from((q[i % 16] >> (i / 16 * 4)) & 15))
    }

    /// `Σ w·x` over the pairs.
    fn isum(w: impl Iterator<Item = i32>, x: &[i8]) -> i32 {
        w.zip(x).map(|(w, &x)| w * i32::from(x)).sum()
    }

    /// One weight row times one activation row.
    pub(super) fn dot(format: QFormat, w: WRow, a: Q8Row) -> f32 {
        let (q, s, h) = (w.quants, w.scales, w.halves);
        let blocks = a.qs.chunks_exact(BLOCK).zip(a.d).zip(a.sums);
        let mut total = 0.0;
        match format {
            QFormat::SubBlocks => {
                for ((q, s), ((x, d), xs)) in
                    q.chunks_exact(BLOCK).zip(s.chunks_exact(3)).zip(blocks)
                {
                    let w = |r: std::ops::Range<usize>| q[r].iter().map(|&q| i32::from(q as i8));
                    let low = isum(w(0..16), &x[..16]);
                    let high = isum(w(16..32), &x[16..]);
                    total += d * (s[0] * low as f32 + s[1] * high as f32) + s[2] * xs;
                }
            }
            QFormat::Ggml(GgmlType::Q8_0) => {
                for ((q, s), ((x, d), _)) in q.chunks_exact(BLOCK).zip(h).zip(blocks) {
                    total += s.to_f32() * d * isum(q.iter().map(|&q| i32::from(q as i8)), x) as f32;
                }
            }
            // As sub-blocks: the same integer sums and scales.
            QFormat::Ggml(GgmlType::Q4_K | GgmlType::Q6_K) => {
                let supers = a.qs.len() / SUPER_BLOCK;
                let (qb, hb) = (q.len() / supers, h.len() / supers);
                for (b, ((x, d), xs)) in blocks.enumerate() {
                    let (i, j) = (b / 8, b % 8);
                    let (s, m, w) = k_sub_block(format, &q[i * qb..][..qb], &h[i * hb..][..hb], j);
                    let w = |r: std::ops::Range<usize>| w[r].iter().map(|&q| i32::from(q));
                    let low = isum(w(0..16), &x[..16]);
                    let high = isum(w(16..32), &x[16..]);
                    total += d * (s[0] * low as f32 + s[1] * high as f32) + m * xs;
                }
            }
            QFormat::Ggml(GgmlType::Q5_0) => {
                for ((q, s), ((x, d), _)) in q.chunks_exact(Q5_0_QUANT_BYTES).zip(h).zip(blocks) {
                    let w = q5_0_quants(q).map(i32::from);
                    total += s.to_f32() * d * isum(w.into_iter(), x) as f32;
                }
            }
            QFormat::Ggml(GgmlType::Q4_1) => {
                for ((q, s), ((x, d), xs)) in
                    q.chunks_exact(BLOCK / 2).zip(h.chunks_exact(2)).zip(blocks)
                {
                    let (d_w, m) = (s[0].to_f32(), s[1].to_f32());
                    total += d_w * d * isum(nibbles(q), x) as f32 + m * xs;
                }
            }
            _ => {
                for ((q, s), ((x, d), _)) in q.chunks_exact(BLOCK / 2).zip(h).zip(blocks) {
                    total += s.to_f32() * d * isum(nibbles(q).map(|q| q - 8), x) as f32;
                }
            }
        }
        total
    }
}

/// The dot products on AVX2: per block, 32 byte products summed in pairs to 16
/// `i16` (`maddubs`, unsigned × signed; signed weights through the sign trick),
/// then to 8 `i32` (`madd`), converted to f32 and scaled into a running vector.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::quantized::{K_QUANT_BYTES_Q4, K_QUANT_BYTES_Q6, Q5_0_QUANT_BYTES};
    use super::{CpuQuantized, Q8Row, Q8Rows};
    use crate::io::quant::{BLOCK, GgmlType, QFormat, SUPER_BLOCK};
    use half::f16;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn dot_rows(w: &CpuQuantized, j0: usize, x: &Q8Rows, out: &mut [f32]) {
        let m = x.qs.len() / x.k;
        for (r, col) in out.chunks_exact_mut(m).enumerate() {
            let row = w.row(j0 + r);
            let (q, s, h) = (row.quants, row.scales, row.halves);
            for (i, o) in col.iter_mut().enumerate() {
                let a = x.row(i);
                *o = match w.format() {
                    QFormat::SubBlocks => sub_blocks(q, s, a),
                    QFormat::Ggml(GgmlType::Q8_0) => symmetric::<BLOCK>(q, h, a, |q| load(q)),
                    QFormat::Ggml(GgmlType::Q5_0) => {
                        symmetric::<Q5_0_QUANT_BYTES>(q, h, a, |q| q5_0(q))
                    }
                    QFormat::Ggml(GgmlType::Q4_1) => q4_1(q, h, a),
                    QFormat::Ggml(GgmlType::Q4_K) => q4_k(q, h, a),
                    QFormat::Ggml(GgmlType::Q6_K) => q6_k(q, h, a),
                    _ => symmetric::<{ BLOCK / 2 }>(q, h, a, |q| {
                        _mm256_sub_epi8(nibbles(q), _mm256_set1_epi8(8))
                    }),
                };
            }
        }
    }

    /// Up to four f16 halves as f32 lanes (the rest zero).
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    fn halves(h: &[f16]) -> __m128 {
        let mut bits = 0u64;
        for (i, h) in h.iter().take(4).enumerate() {
            bits |= u64::from(h.to_bits()) << (16 * i);
        }
        _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
    }

    /// 32 bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load(b: &[u8]) -> __m256i {
        assert!(b.len() >= 32);
        // SAFETY: `b` holds the 32 bytes read (checked above).
        unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
    }

    /// 32 signed bytes.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn load_i8(b: &[i8]) -> __m256i {
        assert!(b.len() >= 32);
        // SAFETY: `b` holds the 32 bytes read (checked above).
        unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }
    }

    /// 16 bytes of nibbles as 32 bytes: the low nibbles, then the high ones
    /// (ggml's `bytes_from_nibbles_32`).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn nibbles(b: &[u8]) -> __m256i {
        assert!(b.len() >= 16);
        // SAFETY: `b` holds the 16 bytes read (checked above).
        let low = unsafe { _mm_loadu_si128(b.as_ptr().cast()) };
        let both =
            _mm256_insertf128_si256::<1>(_mm256_castsi128_si256(low), _mm_srli_epi16::<4>(low));
        _mm256_and_si256(both, _mm256_set1_epi8(15))
    }

    /// A Q5_0 block's quants (fifth bits, then nibbles) as 32 signed bytes less
    /// 16: the nibbles, with −16 (`0xf0`) or'd in where the fifth bit is clear
    /// (ggml's `bytes_from_bits_32` and `andnot`).
    #[target_feature(enable = "avx2")]
    #[inline]
    fn q5_0(q: &[u8]) -> __m256i {
        let high = u32::from_le_bytes(q[..4].try_into().unwrap());
        // Byte i takes byte i / 8 of the bits and sets every bit but bit i % 8:
        // all ones exactly where weight i's fifth bit is.
        let pick = _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        );
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(high as i32), pick);
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        let set = _mm256_cmpeq_epi8(_mm256_or_si256(bytes, others), _mm256_set1_epi64x(-1));
        let low = nibbles(&q[4..]);
        _mm256_or_si256(
            low,
            _mm256_andnot_si256(set, _mm256_set1_epi8(0xf0u8 as i8)),
        )
    }

    /// Sums of 4 adjacent products of unsigned `u` and signed `s` bytes: lane `l`
    /// of the result sums bytes `4l..4l + 4`.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn sum_us(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }

    /// The same for two signed operands: `|a|` times `b` with `a`'s sign.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn sum_ss(a: __m256i, b: __m256i) -> __m256i {
        sum_us(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a))
    }

    #[target_feature(enable = "avx")]
    #[inline]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
    }

    /// Two f32 (`b[0]`, `b[1]`) in lanes 0 and 1.
    #[target_feature(enable = "avx")]
    #[inline]
    fn pair(b: &[f32]) -> __m128 {
        assert!(b.len() >= 2);
        // SAFETY: `b` holds the 8 bytes read (checked above).
        unsafe { _mm_castpd_ps(_mm_load_sd(b.as_ptr().cast())) }
    }

    /// Two blocks' activation scales and offset factors: `[d₀, s₀, d₁, s₁]`.
    #[target_feature(enable = "avx")]
    #[inline]
    fn scales(d: &[f32], s: &[f32]) -> __m128 {
        _mm_unpacklo_ps(pair(d), pair(s))
    }

    /// Lanes 0 and 2 of `v`, each broadcast to 8.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lanes02(v: __m128) -> (__m256, __m256) {
        (
            _mm256_broadcastss_ps(v),
            _mm256_broadcastss_ps(_mm_movehl_ps(v, v)),
        )
    }

    /// Lane 1 plus lane 3.
    #[target_feature(enable = "avx")]
    #[inline]
    fn lanes13(v: __m128) -> f32 {
        let o = _mm_movehdup_ps(v);
        _mm_cvtss_f32(_mm_add_ss(o, _mm_movehl_ps(o, o)))
    }

    /// Two f16 scales as lanes 0 and 2 (lanes 1 and 3 zero).
    #[target_feature(enable = "avx,f16c")]
    #[inline]
    fn spread(h: &[f16]) -> __m128 {
        let bits = u64::from(h[0].to_bits()) | u64::from(h[1].to_bits()) << 32;
        _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
    }

    // The kernels take blocks two at a time, into two accumulators (a chain of
    // FMAs is otherwise the bound), then a last odd block.

    /// Q4_1: `d·x_d·Σq·x_q + m·s` per block (ggml's `vec_dot_q4_1_q8_1`).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn q4_1(q: &[u8], h: &[f16], a: Q8Row) -> f32 {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        // Lanes 1 and 3: the offset terms m·s.
        let mut offsets = _mm_setzero_ps();
        for ((((q, h), x), d), s) in q
            .chunks_exact(BLOCK)
            .zip(h.chunks_exact(4))
            .zip(a.qs.chunks_exact(2 * BLOCK))
            .zip(a.d.chunks_exact(2))
            .zip(a.sums.chunks_exact(2))
        {
            // [d₀·x_d₀, m₀·s₀, d₁·x_d₁, m₁·s₁]
            let p = _mm_mul_ps(halves(h), scales(d, s));
            offsets = _mm_add_ps(offsets, p);
            let (s0, s1) = lanes02(p);
            let p0 = sum_us(nibbles(&q[..16]), load_i8(&x[..BLOCK]));
            let p1 = sum_us(nibbles(&q[16..]), load_i8(&x[BLOCK..]));
            acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(p1), acc1);
        }
        let mut total = lanes13(offsets);
        let b = a.d.len();
        if b % 2 == 1 {
            let dm = halves(&h[2 * (b - 1)..]);
            let p = sum_us(
                nibbles(&q[16 * (b - 1)..]),
                load_i8(&a.qs[BLOCK * (b - 1)..]),
            );
            let d = _mm_cvtss_f32(dm) * a.d[b - 1];
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc0);
            total += _mm_cvtss_f32(_mm_movehdup_ps(dm)) * a.sums[b - 1];
        }
        hsum(_mm256_add_ps(acc0, acc1)) + total
    }

    /// The types without offsets, `WIDTH` bytes of quants per block that
    /// `weights` makes signed bytes of (Q4_0, Q5_0, Q8_0): `d·x_d·Σq·x_q` (ggml's
    /// `vec_dot_q4_0_q8_0`, `…q5_0_q8_0`, `…q8_0_q8_0`).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn symmetric<const WIDTH: usize>(
        q: &[u8],
        h: &[f16],
        a: Q8Row,
        weights: impl Fn(&[u8]) -> __m256i,
    ) -> f32 {
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        for ((((q, h), x), d), s) in q
            .chunks_exact(2 * WIDTH)
            .zip(h.chunks_exact(2))
            .zip(a.qs.chunks_exact(2 * BLOCK))
            .zip(a.d.chunks_exact(2))
            .zip(a.sums.chunks_exact(2))
        {
            let (s0, s1) = lanes02(_mm_mul_ps(spread(h), scales(d, s)));
            let p0 = sum_ss(weights(&q[..WIDTH]), load_i8(&x[..BLOCK]));
            let p1 = sum_ss(weights(&q[WIDTH..]), load_i8(&x[BLOCK..]));
            acc0 = _mm256_fmadd_ps(s0, _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(s1, _mm256_cvtepi32_ps(p1), acc1);
        }
        let b = a.d.len();
        if b % 2 == 1 {
            let p = sum_ss(
                weights(&q[WIDTH * (b - 1)..]),
                load_i8(&a.qs[BLOCK * (b - 1)..]),
            );
            let d = h[b - 1].to_f32() * a.d[b - 1];
            acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc0);
        }
        hsum(_mm256_add_ps(acc0, acc1))
    }

    /// Q4_K (ggml's `vec_dot_q4_K_q8_K`): per super-block, each sub-block's
    /// nibble-times-byte sums times its 6-bit scale, summed as integers, times
    /// `d·x_d`; the offsets `−dmin·m` times the activations' `d·Σq` per sub-block.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn q4_k(q: &[u8], h: &[f16], a: Q8Row) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let mut offsets = 0.0;
        for ((((q, h), x), d), xs) in q
            .chunks_exact(K_QUANT_BYTES_Q4)
            .zip(h.chunks_exact(2))
            .zip(a.qs.chunks_exact(SUPER_BLOCK))
            .zip(a.d.chunks_exact(8))
            .zip(a.sums.chunks_exact(8))
        {
            let (sc, mins, qs) = (&q[..8], &q[8..16], &q[16..]);
            let mut sum = _mm256_setzero_si256();
            for c in 0..4 {
                let bits = load(&qs[32 * c..]);
                let low = _mm256_and_si256(bits, _mm256_set1_epi8(15));
                let high = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), _mm256_set1_epi8(15));
                let pl = _mm256_maddubs_epi16(low, load_i8(&x[64 * c..]));
                let ph = _mm256_maddubs_epi16(high, load_i8(&x[64 * c + BLOCK..]));
                let pl = _mm256_madd_epi16(pl, _mm256_set1_epi16(i16::from(sc[2 * c])));
                let ph = _mm256_madd_epi16(ph, _mm256_set1_epi16(i16::from(sc[2 * c + 1])));
                sum = _mm256_add_epi32(sum, _mm256_add_epi32(pl, ph));
            }
            let dd = _mm256_set1_ps(h[0].to_f32() * d[0]);
            acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sum), acc);
            let dmin = h[1].to_f32();
            for (&m, &xs) in mins.iter().zip(xs) {
                offsets += -(dmin * f32::from(m)) * xs;
            }
        }
        hsum(acc) + offsets
    }

    /// Q6_K (ggml's `vec_dot_q6_K_q8_K`): per group of 32, the 6-bit quants (a
    /// nibble and a bit pair) times the bytes, less 32 times the bytes, times the
    /// signed scale of each 16, summed as integers, times `d·x_d`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn q6_k(q: &[u8], h: &[f16], a: Q8Row) -> f32 {
        let mut acc = _mm256_setzero_ps();
        let (m15, m3) = (_mm256_set1_epi8(15), _mm256_set1_epi8(3));
        for (((q, h), x), d) in q
            .chunks_exact(K_QUANT_BYTES_Q6)
            .zip(h)
            .zip(a.qs.chunks_exact(SUPER_BLOCK))
            .zip(a.d.chunks_exact(8))
        {
            let (ql, qh, sc) = (&q[..128], &q[128..192], &q[192..]);
            let mut sum = _mm256_setzero_si256();
            for c in 0..2 {
                let (b0, b1) = (load(&ql[64 * c..]), load(&ql[64 * c + 32..]));
                let bh = load(&qh[32 * c..]);
                let low = [
                    _mm256_and_si256(b0, m15),
                    _mm256_and_si256(b1, m15),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(b0), m15),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(b1), m15),
                ];
                for (k, low) in low.into_iter().enumerate() {
                    let shift = _mm_cvtsi32_si128(2 * k as i32);
                    let pair = _mm256_and_si256(_mm256_srl_epi16(bh, shift), m3);
                    let w = _mm256_or_si256(low, _mm256_slli_epi16::<4>(pair));
                    let xk = load_i8(&x[128 * c + BLOCK * k..]);
                    let p = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(w, xk),
                        _mm256_maddubs_epi16(_mm256_set1_epi8(32), xk),
                    );
                    let g = 4 * c + k;
                    let s = |i: usize| _mm_set1_epi16(i16::from(sc[i] as i8));
                    let scale = _mm256_set_m128i(s(2 * g + 1), s(2 * g));
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(scale, p));
                }
            }
            let dd = _mm256_set1_ps(h.to_f32() * d[0]);
            acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(sum), acc);
        }
        hsum(acc)
    }

    /// Sub-blocks: lanes 0–3 of a block's sums cover its first 16 weights (scale
    /// `d₀`), lanes 4–7 the rest (`d₁`).
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn sub_blocks(q: &[u8], s: &[f32], a: Q8Row) -> f32 {
        let scale =
            |s: &[f32], d: f32| _mm256_set_m128(_mm_set1_ps(s[1] * d), _mm_set1_ps(s[0] * d));
        let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let (mut off0, mut off1) = (0.0, 0.0);
        for ((((q, s), x), d), xs) in q
            .chunks_exact(2 * BLOCK)
            .zip(s.chunks_exact(6))
            .zip(a.qs.chunks_exact(2 * BLOCK))
            .zip(a.d.chunks_exact(2))
            .zip(a.sums.chunks_exact(2))
        {
            let p0 = sum_ss(load(&q[..BLOCK]), load_i8(&x[..BLOCK]));
            let p1 = sum_ss(load(&q[BLOCK..]), load_i8(&x[BLOCK..]));
            acc0 = _mm256_fmadd_ps(scale(s, d[0]), _mm256_cvtepi32_ps(p0), acc0);
            acc1 = _mm256_fmadd_ps(scale(&s[3..], d[1]), _mm256_cvtepi32_ps(p1), acc1);
            off0 += s[2] * xs[0];
            off1 += s[5] * xs[1];
        }
        let b = a.d.len();
        if b % 2 == 1 {
            let (q, s) = (&q[BLOCK * (b - 1)..], &s[3 * (b - 1)..]);
            let p = sum_ss(load(q), load_i8(&a.qs[BLOCK * (b - 1)..]));
            acc0 = _mm256_fmadd_ps(scale(s, a.d[b - 1]), _mm256_cvtepi32_ps(p), acc0);
            off0 += s[2] * a.sums[b - 1];
        }
        hsum(_mm256_add_ps(acc0, acc1)) + off0 + off1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::quantized::tests::{NATIVE, native_and_sub_blocks};
    use crate::backend::cpu::quantized::upload;
    use crate::backend::infer::QShape;
    use crate::io::quant::{GgmlType, QFormat, SubBlock};
    use half::f16;

    /// A small deterministic generator (an LCG's high bits).
    fn next(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (*seed >> 33) as u32
    }

    fn unit(seed: &mut u64) -> f32 {
        next(seed) as f32 / (1u64 << 31) as f32 * 2.0 - 1.0
    }

    #[test]
    fn activations_quantise_as_ggml_does() {
        // Q8_K: the scale is −max/127 for the element of largest magnitude, which
        // becomes −127 (here a positive one).
        let x: Vec<f32> = (0..256).map(|j| (j as f32 - 100.0) / 10.0).collect();
        let q = Q8Rows::quantize(&x, 256, Q8Kind::Super);
        assert_eq!(q.qs[255], -127);
        assert_eq!(q.d[0], 1.0 / (-127.0 / 15.5));
        assert_eq!(q.qs[100], 0);
        // Q8_1: amax/127 as f16, round half to even, s = f16(d·Σq).
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        let q = Q8Rows::quantize(&x, 32, Q8Kind::Block);
        assert_eq!(&q.qs[..3], [127, 2, -4]);
        assert_eq!(q.d[0], 1.0);
        assert_eq!(q.sums[0], 125.0);
    }

    /// Random weights of each layout, as `upload` takes them.
    fn weights(format: QFormat, blocks: usize, seed: &mut u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        let half = |seed: &mut u64| f16::from_f32(unit(seed) * 0.1).to_le_bytes();
        for _ in 0..blocks {
            match format {
                QFormat::SubBlocks => {
                    let signed = next(seed).is_multiple_of(2);
                    SubBlock {
                        d: [unit(seed), unit(seed)],
                        m: if signed { 0.0 } else { unit(seed) },
                        q: std::array::from_fn(|_| {
                            let q = next(seed) as u8;
                            if signed { q } else { q % 32 }
                        }),
                        signed,
                    }
                    .write(&mut bytes);
                }
                QFormat::Ggml(ty) => {
                    bytes.extend(half(seed));
                    if ty == GgmlType::Q4_1 {
                        bytes.extend(half(seed));
                    }
                    let n = if ty == GgmlType::Q8_0 { 32 } else { 16 };
                    bytes.extend((0..n).map(|_| next(seed) as u8));
                }
            }
        }
        bytes
    }

    /// Whether the CPU has the AVX2 kernels' features.
    fn has_avx2() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// `dot_rows` (AVX2 where the CPU has it) against the scalar fallback.
    fn assert_matches_scalar(w: &CpuQuantized, a: &Q8Rows, n: usize, m: usize, what: &str) {
        let mut simd = vec![0.0; n * m];
        dot_rows(w, 0, a, &mut simd);
        for j in 0..n {
            for i in 0..m {
                let s = scalar::dot(w.format(), w.row(j), a.row(i));
                let v = simd[j * m + i];
                assert!(
                    (s - v).abs() <= 1e-4 * (1.0 + s.abs()),
                    "{what}: row {j}, x {i}: {s} vs {v}"
                );
            }
        }
    }

    /// The scalar fallback against the AVX2 kernels (where the CPU has them):
    /// the same integer sums, so the same values up to f32 rounding; rows of an
    /// even and an odd number of blocks (the kernels take them in pairs).
    #[test]
    fn the_scalar_fallback_matches_the_simd_kernels() {
        if !has_avx2() {
            return;
        }
        let mut seed = 7;
        let (n, m) = (6, 2);
        for (ty, format, kind) in [
            (GgmlType::Q4_0, QFormat::Ggml(GgmlType::Q4_0), Q8Kind::Block),
            (GgmlType::Q4_1, QFormat::Ggml(GgmlType::Q4_1), Q8Kind::Block),
            (GgmlType::Q8_0, QFormat::Ggml(GgmlType::Q8_0), Q8Kind::Block),
            (GgmlType::Q5_0, QFormat::SubBlocks, Q8Kind::Block),
            (GgmlType::Q4_K, QFormat::SubBlocks, Q8Kind::Super),
        ] {
            // An odd number of blocks per row for the 32-element activations.
            let k = if kind == Q8Kind::Super { 512 } else { 544 };
            let shape = QShape {
                ty,
                format,
                rows: n,
                cols: k,
            };
            let w = upload(&shape, &weights(format, n * k / BLOCK, &mut seed));
            assert_eq!(w.format(), format, "{ty}: random sub-blocks are no Q5_0");
            let x: Vec<f32> = (0..m * k).map(|_| unit(&mut seed)).collect();
            let a = Q8Rows::quantize(&x, k, kind);
            assert_matches_scalar(&w, &a, n, m, ty.name());
        }
    }

    /// ggml's blocks held natively (`vec_dot_q5_0_q8_0`, `…q4_K_q8_K`,
    /// `…q6_K_q8_K`): AVX2 and scalar agree, and give the integer sums that the
    /// same weights as sub-blocks give; odd numbers of blocks included.
    #[test]
    fn native_blocks_match_the_scalar_fallback_and_their_sub_blocks() {
        let (n, m) = (6, 2);
        let mut seed = 5;
        for (ty, k) in NATIVE {
            let (native, reference) = native_and_sub_blocks(ty, (n, k), &mut seed);
            let x: Vec<f32> = (0..m * k).map(|_| unit(&mut seed)).collect();
            let a = Q8Rows::quantize(&x, k, native.kind);
            if has_avx2() {
                assert_matches_scalar(&native, &a, n, m, ty.name());
            }
            for j in 0..n {
                for i in 0..m {
                    let v = scalar::dot(native.format(), native.row(j), a.row(i));
                    let r = scalar::dot(reference.format(), reference.row(j), a.row(i));
                    assert!((v - r).abs() <= 1e-5 * (1.0 + r.abs()), "{ty}: {v} vs {r}");
                }
            }
        }
    }
}
