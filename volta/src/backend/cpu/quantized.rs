//! Quantised weights as the CPU's kernels hold them ([`CpuQuantized`]): ggml's
//! Q4_0, Q4_1, Q5_0 and Q8_0 blocks with their f16 scales, or sub-blocks with f32
//! scales, and the kind of 8-bit blocks their activations are quantised to
//! ([`Q8Kind`]). Q5_0 is not a [`QFormat`] the loader makes (the GPU reads it as
//! sub-blocks); the CPU recovers it from sub-blocks that all fit it.
//! Below both users: the exact kernels (`infer`) and the 8-bit ones (`q8`).
use crate::backend::infer::QShape;
use crate::io::quant::{
    BLOCK, BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType, QFormat, SUPER_BLOCK, SubBlock,
};
use half::f16;
use std::sync::Arc;

/// How a matrix's activations are quantised (ggml's `vec_dot_type` of its type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Q8Kind {
    /// `block_q8_0` and `block_q8_1`: per 32 elements, `d = f16(amax/127)` and
    /// `q = round(x·127/amax)` (ties to even, as ggml's AVX2 quantiser rounds).
    Block,
    /// `block_q8_K`: per 256 elements, `d = −max/127` in f32 and
    /// `q = min(127, round(x·(−127/max)))`.
    Super,
}

impl Q8Kind {
    /// The kind for a matrix of type `ty` (its first part's, for a fused matrix
    /// of several types) and `cols` columns. The K-quants need rows of whole
    /// super-blocks, so a matrix with any K-quant part has them.
    pub(crate) fn for_type(ty: GgmlType, cols: usize) -> Q8Kind {
        let k_quant = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K);
        if k_quant && cols.is_multiple_of(SUPER_BLOCK) {
            Q8Kind::Super
        } else {
            Q8Kind::Block
        }
    }
}

/// Quantised weights on the CPU: per block, its scales (`d`, or `d` and `m` for
/// Q4_1, as ggml's f16 halves; `d₀`, `d₁` and `m` as f32 for sub-blocks) and its
/// packed quants (16 bytes of nibbles; Q5_0's 4 bytes of fifth bits, then 16 of
/// nibbles; or 32 signed bytes), and how its activations are quantised. ggml's
/// types keep their f16 scales: a GEMV reads every byte of the matrix, so its
/// bytes bound the speed.
#[derive(Debug)]
pub struct CpuQuantized {
    /// The loader's format, except `Ggml(Q5_0)` for sub-blocks that are all Q5_0
    /// blocks (half the bytes).
    pub(super) format: QFormat,
    pub(super) kind: Q8Kind,
    pub(super) cols: usize,
    /// Sub-blocks' scales.
    pub(super) scales: Vec<f32>,
    /// ggml blocks' scales.
    pub(super) halves: Vec<f16>,
    pub(super) quants: Vec<u8>,
}

/// One row of a [`CpuQuantized`]: its quants and its scales (`scales` for
/// sub-blocks, `halves` for ggml's types; the other is empty).
#[derive(Clone, Copy)]
pub(crate) struct WRow<'a> {
    pub(crate) quants: &'a [u8],
    pub(crate) scales: &'a [f32],
    pub(crate) halves: &'a [f16],
}

impl CpuQuantized {
    pub(super) fn format(&self) -> QFormat {
        self.format
    }
    /// Row `j`.
    #[inline]
    pub(super) fn row(&self, j: usize) -> WRow<'_> {
        let per_row = self.cols / BLOCK;
        let (qb, spb) = (
            self.quant_bytes() * per_row,
            self.scales_per_block() * per_row,
        );
        let (scales, halves) = match self.format {
            QFormat::SubBlocks => (&self.scales[j * spb..(j + 1) * spb], &[][..]),
            QFormat::Ggml(_) => (&[][..], &self.halves[j * spb..(j + 1) * spb]),
        };
        WRow {
            quants: &self.quants[j * qb..(j + 1) * qb],
            scales,
            halves,
        }
    }
    pub(super) fn scales_per_block(&self) -> usize {
        scales_per_block(self.format)
    }
    pub(super) fn quant_bytes(&self) -> usize {
        quant_bytes(self.format)
    }
}

fn quant_bytes(format: QFormat) -> usize {
    match format {
        QFormat::Ggml(GgmlType::Q8_0) | QFormat::SubBlocks => BLOCK,
        QFormat::Ggml(GgmlType::Q5_0) => Q5_0_QUANT_BYTES,
        _ => BLOCK / 2,
    }
}

/// Bytes of a Q5_0 block's quants on the CPU: its fifth bits (a little-endian
/// `u32`, bit `i` for weight `i`), then its nibbles (as Q4_0's).
pub(super) const Q5_0_QUANT_BYTES: usize = 4 + BLOCK / 2;

/// The sub-blocks `subs` (in the [`QFormat::SubBlocks`] layout) as Q5_0 blocks:
/// the f16 scales and the quants, or `None` unless every sub-block is exactly one
/// (`x = (q − 16)·d`, `q` of 5 bits, an f16 `d`, no offset), as every Q5_0 block
/// repacked to a sub-block is. The recovered blocks give the same values to the
/// last bit.
fn q5_0_blocks(subs: &[u8]) -> Option<(Vec<f16>, Vec<u8>)> {
    let blocks = subs.len() / SubBlock::BYTES;
    let (mut halves, mut quants) = (
        Vec::with_capacity(blocks),
        Vec::with_capacity(Q5_0_QUANT_BYTES * blocks),
    );
    for b in subs.chunks_exact(SubBlock::BYTES) {
        let f = |i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
        let (d, d1, m) = (f(0), f(1), f(2));
        let h = f16::from_f32(d);
        // Signed quants of [−16, 16), one scale, exact in f16, and no offset.
        let fits = d.to_bits() == d1.to_bits()
            && h.to_f32().to_bits() == d.to_bits()
            && m.to_bits() == 0
            && b[12..].iter().all(|&q| (-16..16).contains(&(q as i8)));
        if !fits {
            return None;
        }
        let q5 = |i: usize| (b[12 + i] as i8 + 16) as u8;
        let high = (0..BLOCK).fold(0u32, |h, i| h | u32::from(q5(i) >> 4) << i);
        halves.push(h);
        quants.extend(high.to_le_bytes());
        quants.extend((0..BLOCK / 2).map(|i| (q5(i) & 15) | (q5(i + 16) & 15) << 4));
    }
    Some((halves, quants))
}

/// The 32 quants of a Q5_0 block's [`Q5_0_QUANT_BYTES`], less 16.
#[inline(always)]
pub(super) fn q5_0_quants(q: &[u8]) -> [i8; BLOCK] {
    let high = u32::from_le_bytes(q[..4].try_into().unwrap());
    let nibbles = &q[4..4 + BLOCK / 2];
    std::array::from_fn(|i| {
        let low = nibbles[i % 16] >> (i / 16 * 4) & 15;
        (low | ((high >> i) as u8 & 1) << 4) as i8 - 16
    })
}

fn scales_per_block(format: QFormat) -> usize {
    match format {
        QFormat::Ggml(GgmlType::Q4_1) => 2,
        QFormat::SubBlocks => 3,
        _ => 1,
    }
}

/// The matrix of `bytes` (in `shape.format`), sub-blocks that are all Q5_0
/// blocks as Q5_0.
pub(crate) fn upload(shape: &QShape, bytes: &[u8]) -> Arc<CpuQuantized> {
    Arc::new(pack(shape, bytes, true))
}

/// The matrix of `bytes`; `native` recovers Q5_0 blocks from sub-blocks.
pub(super) fn pack(shape: &QShape, bytes: &[u8], native: bool) -> CpuQuantized {
    let blocks = shape.rows * shape.cols / BLOCK;
    let (mut scales, mut halves, mut quants) = (Vec::new(), Vec::new(), Vec::new());
    let mut format = shape.format;
    if native
        && format == QFormat::SubBlocks
        && let Some((h, q)) = q5_0_blocks(&bytes[..bytes.len().min(blocks * SubBlock::BYTES)])
    {
        (halves, quants) = (h, q);
        format = QFormat::Ggml(GgmlType::Q5_0);
    }
    match format {
        // Recovered above (the loader never makes it).
        QFormat::Ggml(GgmlType::Q5_0) if shape.format == QFormat::SubBlocks => {}
        QFormat::SubBlocks => {
            for b in bytes.chunks_exact(SubBlock::BYTES).take(blocks) {
                let f = |i: usize| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
                scales.extend([f(0), f(1), f(2)]);
                quants.extend_from_slice(&b[12..]);
            }
        }
        QFormat::Ggml(GgmlType::Q4_0) => {
            for b in bytes.chunks_exact(BlockQ4_0::BYTES).take(blocks) {
                let b = BlockQ4_0::from_bytes(b.try_into().expect("a block"));
                halves.push(b.d);
                quants.extend_from_slice(&b.qs);
            }
        }
        QFormat::Ggml(GgmlType::Q4_1) => {
            for b in bytes.chunks_exact(BlockQ4_1::BYTES).take(blocks) {
                let b = BlockQ4_1::from_bytes(b.try_into().expect("a block"));
                halves.extend([b.d, b.m]);
                quants.extend_from_slice(&b.qs);
            }
        }
        QFormat::Ggml(GgmlType::Q8_0) => {
            for b in bytes.chunks_exact(BlockQ8_0::BYTES).take(blocks) {
                let b = BlockQ8_0::from_bytes(b.try_into().expect("a block"));
                halves.push(b.d);
                quants.extend(b.qs.iter().map(|&q| q as u8));
            }
        }
        QFormat::Ggml(other) => {
            panic!("upload_quantized: {other} is held as sub-blocks, not as its own blocks")
        }
    }
    assert_eq!(
        scales.len() + halves.len(),
        blocks * scales_per_block(format)
    );
    assert_eq!(quants.len(), blocks * quant_bytes(format));
    CpuQuantized {
        format,
        kind: Q8Kind::for_type(shape.ty, shape.cols),
        cols: shape.cols,
        scales,
        halves,
        quants,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::io::quant::repack_sub_blocks;

    /// `blocks` random Q5_0 blocks as a GGUF file holds them (some scales
    /// negative or zero), `seed` an LCG's state.
    pub(in crate::backend::cpu) fn random_q5_0(blocks: usize, seed: &mut u64) -> Vec<u8> {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (*seed >> 33) as u32
        };
        let mut bytes = Vec::new();
        for b in 0..blocks {
            let d = if b % 7 == 3 {
                0.0
            } else {
                (next() as f32 / u32::MAX as f32 - 0.5) * 0.02
            };
            bytes.extend(f16::from_f32(d).to_le_bytes());
            bytes.extend((0..4 + BLOCK / 2).map(|_| next() as u8));
        }
        bytes
    }

    /// A shape of `rows` and `cols` held as sub-blocks.
    pub(in crate::backend::cpu) fn sub_block_shape(
        ty: GgmlType,
        rows: usize,
        cols: usize,
    ) -> QShape {
        QShape {
            ty,
            format: QFormat::SubBlocks,
            rows,
            cols,
        }
    }

    #[test]
    fn q5_0_blocks_are_recovered_from_their_sub_blocks() {
        let mut seed = 3;
        let ggml = random_q5_0(12, &mut seed);
        let mut subs = Vec::new();
        repack_sub_blocks(GgmlType::Q5_0, &ggml, &mut subs);
        let w = pack(&sub_block_shape(GgmlType::Q5_0, 3, 128), &subs, true);
        assert_eq!(w.format, QFormat::Ggml(GgmlType::Q5_0));
        // ggml's block less its scale: the fifth bits, then the nibbles.
        for (b, block) in ggml.chunks_exact(22).enumerate() {
            assert_eq!(w.halves[b].to_le_bytes(), block[..2]);
            assert_eq!(w.quants[20 * b..20 * (b + 1)], block[2..]);
        }
        // A Q8_0 part (a K-quant mix's V) does not fit: all stay sub-blocks.
        let q8: Vec<u8> = (0..4 * 34).map(|i| (i * 37 % 251) as u8).collect();
        repack_sub_blocks(GgmlType::Q8_0, &q8, &mut subs);
        let w = pack(&sub_block_shape(GgmlType::Q5_0, 4, 128), &subs, true);
        assert_eq!(w.format, QFormat::SubBlocks);
    }
}
