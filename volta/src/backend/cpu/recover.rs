//! ggml's own blocks recovered from the sub-blocks the loader repacks every type
//! but Q4_0, Q4_1 and Q8_0 to, so that the CPU reads as few bytes as llama.cpp
//! does: Q5_0 (22 bytes per 32 weights, not 44), Q4_K (148 per 256, not 352) and
//! Q6_K (210 per 256). A matrix is recovered only when every sub-block is exactly
//! one of the type's (the values equal to the last bit), as every block of that
//! type repacked is; else it stays in sub-blocks.
use crate::io::quant::{BLOCK, SUPER_BLOCK, SubBlock};
use half::f16;

/// Bytes of a Q4_K super-block's quants on the CPU: 8 scales, 8 mins, 128 bytes
/// of nibbles.
pub(super) const K_QUANT_BYTES_Q4: usize = 16 + SUPER_BLOCK / 2;

/// Bytes of a Q6_K super-block's quants on the CPU (ggml's block less its
/// scale): 128 bytes of low nibbles, 64 of high bit pairs, 16 scales.
pub(super) const K_QUANT_BYTES_Q6: usize = SUPER_BLOCK / 2 + SUPER_BLOCK / 4 + 16;

/// Bytes of a Q5_0 block's quants on the CPU: its fifth bits (a little-endian
/// `u32`, bit `i` for weight `i`), then its nibbles (as Q4_0's).
pub(super) const Q5_0_QUANT_BYTES: usize = 4 + BLOCK / 2;

/// Recovered blocks: their f16 scales and their quant bytes in the CPU's layout.
pub(super) type Blocks = (Vec<f16>, Vec<u8>);

/// One sub-block's scales and quants.
struct Sub<'a> {
    d: [f32; 2],
    m: f32,
    q: &'a [u8],
}

fn subs(bytes: &[u8]) -> impl Iterator<Item = Sub<'_>> {
    bytes.chunks_exact(SubBlock::BYTES).map(|b| {
        let f = |i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        Sub {
            d: [f(0), f(1)],
            m: f(2),
            q: &b[12..],
        }
    })
}

/// Whether every quant lies in `range` (as `i8`).
fn quants_in(q: &[u8], range: std::ops::Range<i8>) -> bool {
    q.iter().all(|&q| range.contains(&(q as i8)))
}

/// An f16 `d` and integers `k` in `range` with `f32(d)·k` equal to each of
/// `values` to the bit, as a K-quant's super-block scale times its sub-blocks'
/// integer scales gives them; `None` if there are none. The quantisers give the
/// value of largest magnitude the integer of largest magnitude (63 for Q4_K,
/// −128 for Q6_K), so the first candidate tried fits.
fn factor(values: &[f32], range: std::ops::RangeInclusive<i32>) -> Option<(f16, Vec<i32>)> {
    let top = values
        .iter()
        .copied()
        .fold(0.0f32, |a, v| if v.abs() > a.abs() { v } else { a });
    let fits = |d: f32| -> Option<Vec<i32>> {
        values
            .iter()
            .map(|&v| {
                // A zero scale gives ±0, whose sign a signed integer can set.
                let ks = if d == 0.0 {
                    [0, 1, -1]
                } else {
                    [(v / d).round() as i32; 3]
                };
                ks.into_iter()
                    .find(|&k| range.contains(&k) && (d * k as f32).to_bits() == v.to_bits())
            })
            .collect()
    };
    // Integers by decreasing magnitude (the negative first).
    let by_magnitude = (1..=128).rev().flat_map(|k| [-k, k]);
    let candidates = by_magnitude.filter(|k| range.contains(k));
    let zero = (top == 0.0).then_some(0.0f32);
    zero.into_iter()
        .chain(candidates.map(|k| top / k as f32))
        .filter(|&d| f16::from_f32(d).to_f32().to_bits() == d.to_bits())
        .find_map(|d| Some((f16::from_f32(d), fits(d)?)))
}

/// Q5_0 blocks (`x = (q − 16)·d`, `q` of 5 bits, an f16 `d`): per block the
/// scale, and 4 bytes of fifth bits then 16 of nibbles.
pub(super) fn q5_0(bytes: &[u8]) -> Option<Blocks> {
    let blocks = bytes.len() / SubBlock::BYTES;
    let mut halves = Vec::with_capacity(blocks);
    let mut quants = Vec::with_capacity(Q5_0_QUANT_BYTES * blocks);
    for s in subs(bytes) {
        let h = f16::from_f32(s.d[0]);
        // Signed quants of [−16, 16), one scale, exact in f16, and no offset.
        let fits = s.d[0].to_bits() == s.d[1].to_bits()
            && h.to_f32().to_bits() == s.d[0].to_bits()
            && s.m.to_bits() == 0
            && quants_in(s.q, -16..16);
        if !fits {
            return None;
        }
        let q5 = |i: usize| (s.q[i] as i8 + 16) as u8;
        let high = (0..BLOCK).fold(0u32, |h, i| h | u32::from(q5(i) >> 4) << i);
        halves.push(h);
        quants.extend(high.to_le_bytes());
        quants.extend((0..BLOCK / 2).map(|i| (q5(i) & 15) | (q5(i + 16) & 15) << 4));
    }
    Some((halves, quants))
}

/// Q4_K super-blocks (per 32 weights `x = q·d·sc − dmin·m`, 4-bit `q`, 6-bit `sc`
/// and `m`, f16 `d` and `dmin`): per super-block `d` and `dmin`, then 8 bytes of
/// `sc`, 8 of `m` and ggml's 128 bytes of nibbles (32 bytes per two sub-blocks:
/// the first's in the low nibbles).
pub(super) fn q4_k(bytes: &[u8]) -> Option<Blocks> {
    let supers = bytes.len() / (8 * SubBlock::BYTES);
    let mut halves = Vec::with_capacity(2 * supers);
    let mut quants = Vec::with_capacity(K_QUANT_BYTES_Q4 * supers);
    for sb in bytes.chunks_exact(8 * SubBlock::BYTES) {
        let subs: Vec<Sub> = subs(sb).collect();
        if !subs
            .iter()
            .all(|s| s.d[0].to_bits() == s.d[1].to_bits() && quants_in(s.q, 0..16))
        {
            return None;
        }
        let d: Vec<f32> = subs.iter().map(|s| s.d[0]).collect();
        // The offsets are −(dmin·m).
        let m: Vec<f32> = subs.iter().map(|s| -s.m).collect();
        let ((d, sc), (dmin, mins)) = (factor(&d, 0..=63)?, factor(&m, 0..=63)?);
        halves.extend([d, dmin]);
        quants.extend(sc.iter().chain(&mins).map(|&k| k as u8));
        for pair in subs.chunks_exact(2) {
            quants.extend((0..BLOCK).map(|l| pair[0].q[l] | pair[1].q[l] << 4));
        }
    }
    Some((halves, quants))
}

/// Q6_K super-blocks (per 16 weights `x = d·sc·(q − 32)`, 6-bit `q`, signed 8-bit
/// `sc`, an f16 `d`): per super-block `d`, then ggml's 128 bytes of low nibbles,
/// 64 of high bit pairs and 16 scales.
pub(super) fn q6_k(bytes: &[u8]) -> Option<Blocks> {
    let supers = bytes.len() / (8 * SubBlock::BYTES);
    let mut halves = Vec::with_capacity(supers);
    let mut quants = Vec::with_capacity(K_QUANT_BYTES_Q6 * supers);
    for sb in bytes.chunks_exact(8 * SubBlock::BYTES) {
        let subs: Vec<Sub> = subs(sb).collect();
        if !subs
            .iter()
            .all(|s| s.m.to_bits() == 0 && quants_in(s.q, -32..32))
        {
            return None;
        }
        let scales: Vec<f32> = subs.iter().flat_map(|s| s.d).collect();
        let (d, sc) = factor(&scales, -128..=127)?;
        // Group g = 4c + k of 32 (c: which 128): nibble k / 2 of bytes
        // 64c + 32·(k % 2).., bit pair k of bytes 32c.. (see `io::quant::sub_blocks`).
        let q6 = |g: usize, l: usize| (subs[g].q[l] as i8 + 32) as u8;
        let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
        for g in 0..8 {
            let (c, k) = (g / 4, g % 4);
            for l in 0..BLOCK {
                ql[64 * c + 32 * (k % 2) + l] |= (q6(g, l) & 15) << (4 * (k / 2));
                qh[32 * c + l] |= (q6(g, l) >> 4) << (2 * k);
            }
        }
        halves.push(d);
        quants.extend(ql);
        quants.extend(qh);
        quants.extend(sc.iter().map(|&k| k as i8 as u8));
    }
    debug_assert_eq!(bytes.len() % (SUPER_BLOCK / BLOCK * SubBlock::BYTES), 0);
    Some((halves, quants))
}
