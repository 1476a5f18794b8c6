//! Quantised weights as the CPU's kernels hold them ([`CpuQuantized`]): ggml's
//! Q4_0, Q4_1, Q5_0 and Q8_0 blocks with their f16 scales, or sub-blocks with f32
//! scales, and the kind of 8-bit blocks their activations are quantised to
//! ([`Q8Kind`]). Q5_0, Q4_K and Q6_K are no [`QFormat`] the loader makes (the GPU
//! reads them as sub-blocks); the CPU recovers them from sub-blocks that all fit
//! one of them (see the CPU backend's `recover` module).
//! Below both users: the exact kernels (`infer`) and the 8-bit ones (`q8`).
use super::recover;
pub(super) use super::recover::{K_QUANT_BYTES_Q4, K_QUANT_BYTES_Q6, Q5_0_QUANT_BYTES};
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
/// Q4_1, `d` and `dmin` for Q4_K, as ggml's f16 halves; `d₀`, `d₁` and `m` as f32
/// for sub-blocks) and its packed quants (16 bytes of nibbles; Q5_0's 4 bytes of
/// fifth bits, then 16 of nibbles; 32 signed bytes; a K-quant super-block's
/// integer scales and quants, see the CPU backend's `recover` module), and how its
/// activations are quantised. ggml's
/// types keep their f16 scales: a GEMV reads every byte of the matrix, so its
/// bytes bound the speed.
#[derive(Debug)]
pub struct CpuQuantized {
    /// The loader's format, except `Ggml(Q5_0)`, `Ggml(Q4_K)` or `Ggml(Q6_K)` for
    /// sub-blocks that are all blocks of that type.
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
        let (len, bytes, scales) = geometry(self.format);
        let per_row = self.cols / len;
        let (qb, spb) = (bytes * per_row, scales * per_row);
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
    /// Sub-block `b` (the `b`-th 32 weights) of a K-quant, as [`k_sub_block`].
    pub(super) fn k_sub_block_at(&self, b: usize) -> ([f32; 2], f32, [i8; BLOCK]) {
        let (_, bytes, scales) = geometry(self.format);
        let (i, j) = (b / (SUPER_BLOCK / BLOCK), b % (SUPER_BLOCK / BLOCK));
        let q = &self.quants[i * bytes..(i + 1) * bytes];
        k_sub_block(
            self.format,
            q,
            &self.halves[i * scales..(i + 1) * scales],
            j,
        )
    }
    /// Scales per block of 32 (not for the K-quants).
    pub(super) fn scales_per_block(&self) -> usize {
        geometry(self.format).2
    }
    /// Quant bytes per block of 32 (not for the K-quants).
    pub(super) fn quant_bytes(&self) -> usize {
        geometry(self.format).1
    }
}

/// Weights, quant bytes and scales per block of `format`: 32 weights, but a
/// K-quant's super-block of 256.
fn geometry(format: QFormat) -> (usize, usize, usize) {
    match format {
        QFormat::SubBlocks => (BLOCK, BLOCK, 3),
        QFormat::Ggml(GgmlType::Q8_0) => (BLOCK, BLOCK, 1),
        QFormat::Ggml(GgmlType::Q5_0) => (BLOCK, Q5_0_QUANT_BYTES, 1),
        QFormat::Ggml(GgmlType::Q4_1) => (BLOCK, BLOCK / 2, 2),
        QFormat::Ggml(GgmlType::Q4_K) => (SUPER_BLOCK, K_QUANT_BYTES_Q4, 2),
        QFormat::Ggml(GgmlType::Q6_K) => (SUPER_BLOCK, K_QUANT_BYTES_Q6, 1),
        QFormat::Ggml(_) => (BLOCK, BLOCK / 2, 1),
    }
}

/// Sub-block `j` (0..8) of a K-quant super-block (`q` its quant bytes, `h` its
/// f16 scales) as `(d₀, d₁, m, quants)`: the values its [`SubBlock`] holds, to
/// the bit.
#[inline(always)]
pub(super) fn k_sub_block(
    format: QFormat,
    q: &[u8],
    h: &[f16],
    j: usize,
) -> ([f32; 2], f32, [i8; BLOCK]) {
    match format {
        QFormat::Ggml(GgmlType::Q4_K) => {
            let d = h[0].to_f32() * f32::from(q[j]);
            let m = -(h[1].to_f32() * f32::from(q[8 + j]));
            let qs = &q[16 + 32 * (j / 2)..][..32];
            (
                [d; 2],
                m,
                std::array::from_fn(|l| (qs[l] >> (4 * (j % 2)) & 15) as i8),
            )
        }
        QFormat::Ggml(GgmlType::Q6_K) => {
            let (ql, qh, sc) = (&q[..128], &q[128..192], &q[192..208]);
            let (c, k) = (j / 4, j % 4);
            let low = &ql[64 * c + 32 * (k % 2)..][..32];
            let high = &qh[32 * c..][..32];
            let d = |half: usize| h[0].to_f32() * f32::from(sc[2 * j + half] as i8);
            let q = std::array::from_fn(|l| {
                let lo = low[l] >> (4 * (k / 2)) & 15;
                let hi = (high[l] >> (2 * k)) & 3;
                (lo | hi << 4) as i8 - 32
            });
            ([d(0), d(1)], 0.0, q)
        }
        other => panic!("k_sub_block: {other:?} is no K-quant"),
    }
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

/// The matrix of `bytes` (in `shape.format`), sub-blocks that are all Q5_0, Q4_K
/// or Q6_K blocks as those.
pub(crate) fn upload(shape: &QShape, bytes: &[u8]) -> Arc<CpuQuantized> {
    Arc::new(pack(shape, bytes, true))
}

/// The matrix of `bytes`; `native` recovers ggml's blocks from sub-blocks.
pub(super) fn pack(shape: &QShape, bytes: &[u8], native: bool) -> CpuQuantized {
    let blocks = shape.rows * shape.cols / BLOCK;
    let kind = Q8Kind::for_type(shape.ty, shape.cols);
    let (mut scales, mut halves, mut quants) = (Vec::new(), Vec::new(), Vec::new());
    let mut format = shape.format;
    if native && format == QFormat::SubBlocks {
        let subs = &bytes[..bytes.len().min(blocks * SubBlock::BYTES)];
        // The K-quants' kernels take one activation scale per 256 (`block_q8_K`).
        let k_quant = kind == Q8Kind::Super;
        let recovered = [
            (
                GgmlType::Q5_0,
                true,
                recover::q5_0 as fn(&[u8]) -> Option<recover::Blocks>,
            ),
            (GgmlType::Q4_K, k_quant, recover::q4_k),
            (GgmlType::Q6_K, k_quant, recover::q6_k),
        ]
        .into_iter()
        .filter(|&(_, allowed, _)| allowed)
        .find_map(|(ty, _, recover)| Some((ty, recover(subs)?)));
        if let Some((ty, (h, q))) = recovered {
            (halves, quants) = (h, q);
            format = QFormat::Ggml(ty);
        }
    }
    match format {
        // Recovered above (the loader never makes these).
        QFormat::Ggml(GgmlType::Q5_0 | GgmlType::Q4_K | GgmlType::Q6_K)
            if shape.format == QFormat::SubBlocks => {}
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
    let (len, quant_bytes, per_block) = geometry(format);
    let blocks = blocks * BLOCK / len;
    assert_eq!(scales.len() + halves.len(), blocks * per_block);
    assert_eq!(quants.len(), blocks * quant_bytes);
    CpuQuantized {
        format,
        kind,
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

    /// Random blocks of `ty` (Q5_0, Q4_K or Q6_K) for `n` weights as a GGUF
    /// file holds them, repacked to sub-blocks (some scales negative or zero),
    /// `seed` an LCG's state.
    pub(in crate::backend::cpu) fn random_sub_blocks(
        ty: GgmlType,
        n: usize,
        seed: &mut u64,
    ) -> Vec<u8> {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (*seed >> 33) as u32
        };
        let (len, size) = ty.block().expect("a block type");
        let mut ggml = Vec::new();
        for b in 0..n / len as usize {
            let mut block: Vec<u8> = (0..size).map(|_| next() as u8).collect();
            let mut scale = |at: usize, signed: bool| {
                let u = next() as f32 / u32::MAX as f32;
                let d = if b % 7 == 3 {
                    0.0
                } else if signed {
                    (u - 0.5) * 0.02
                } else {
                    u * 0.01
                };
                block[at..at + 2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
            };
            match ty {
                GgmlType::Q5_0 => scale(0, true),
                GgmlType::Q4_K => {
                    scale(0, false);
                    scale(2, false);
                }
                GgmlType::Q6_K => scale(208, true),
                other => panic!("{other}"),
            }
            ggml.extend(block);
        }
        let mut subs = Vec::new();
        repack_sub_blocks(ty, &ggml, &mut subs);
        subs
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

    /// The types the CPU holds in ggml's own blocks after recovering them, each
    /// with a row length of an odd number of its blocks.
    pub(in crate::backend::cpu) const NATIVE: [(GgmlType, usize); 3] = [
        (GgmlType::Q5_0, 544),
        (GgmlType::Q4_K, 768),
        (GgmlType::Q6_K, 768),
    ];

    /// Random sub-blocks of `ty` for an `n × k` matrix packed twice: in ggml's
    /// blocks (recovered, checked) and as the sub-blocks themselves.
    pub(in crate::backend::cpu) fn native_and_sub_blocks(
        ty: GgmlType,
        (n, k): (usize, usize),
        seed: &mut u64,
    ) -> (CpuQuantized, CpuQuantized) {
        let subs = random_sub_blocks(ty, n * k, seed);
        let shape = sub_block_shape(ty, n, k);
        let (native, reference) = (pack(&shape, &subs, true), pack(&shape, &subs, false));
        assert_eq!(native.format, QFormat::Ggml(ty), "recovered as {ty}");
        (native, reference)
    }

    #[test]
    fn ggml_blocks_are_recovered_from_their_sub_blocks() {
        let mut seed = 3;
        for ty in [GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K] {
            let subs = random_sub_blocks(ty, 3 * 512, &mut seed);
            let shape = sub_block_shape(ty, 3, 512);
            let (native, reference) = (pack(&shape, &subs, true), pack(&shape, &subs, false));
            assert_eq!(native.format, QFormat::Ggml(ty));
            assert_eq!(reference.format, QFormat::SubBlocks);
        }
        // Q5_0: ggml's block less its scale (the fifth bits, then the nibbles).
        let mut ggml = vec![0u8; 22];
        ggml[..2].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        ggml[2..]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i * 37 % 256) as u8);
        let mut subs = Vec::new();
        repack_sub_blocks(GgmlType::Q5_0, &ggml, &mut subs);
        let w = pack(&sub_block_shape(GgmlType::Q5_0, 1, 32), &subs, true);
        assert_eq!(
            (w.halves[0].to_le_bytes(), &w.quants[..]),
            ([ggml[0], ggml[1]], &ggml[2..])
        );
        // A Q8_0 part (a K-quant mix's V) does not fit: all stay sub-blocks.
        let q8: Vec<u8> = (0..34).map(|i| (i * 37 % 251) as u8).collect();
        repack_sub_blocks(GgmlType::Q8_0, &q8, &mut subs);
        let w = pack(&sub_block_shape(GgmlType::Q5_0, 2, 32), &subs, true);
        assert_eq!(w.format, QFormat::SubBlocks);
        // Nor does a K-quant of rows that are not whole super-blocks.
        let subs = random_sub_blocks(GgmlType::Q4_K, 256, &mut seed);
        let w = pack(&sub_block_shape(GgmlType::Q5_0, 2, 128), &subs, true);
        assert_eq!(w.format, QFormat::SubBlocks);
    }
}
