//! Quantised weights as the CPU's kernels hold them ([`CpuQuantized`]): ggml's
//! Q4_0, Q4_1 and Q8_0 blocks with their f16 scales, or sub-blocks with f32 scales,
//! and the kind of 8-bit blocks their activations are quantised to ([`Q8Kind`]).
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
/// packed quants (16 bytes of nibbles, or 32 signed bytes), and how its activations
/// are quantised. ggml's types keep their f16 scales: a GEMV reads every byte of
/// the matrix, so its bytes bound the speed.
#[derive(Debug)]
pub struct CpuQuantized {
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
        match self.format {
            QFormat::Ggml(GgmlType::Q8_0) | QFormat::SubBlocks => BLOCK,
            _ => BLOCK / 2,
        }
    }
}

fn scales_per_block(format: QFormat) -> usize {
    match format {
        QFormat::Ggml(GgmlType::Q4_1) => 2,
        QFormat::SubBlocks => 3,
        _ => 1,
    }
}

pub(crate) fn upload(shape: &QShape, bytes: &[u8]) -> Arc<CpuQuantized> {
    let blocks = shape.rows * shape.cols / BLOCK;
    let (mut scales, mut halves, mut quants) = (Vec::new(), Vec::new(), Vec::new());
    match shape.format {
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
        blocks * scales_per_block(shape.format)
    );
    Arc::new(CpuQuantized {
        format: shape.format,
        kind: Q8Kind::for_type(shape.ty, shape.cols),
        cols: shape.cols,
        scales,
        halves,
        quants,
    })
}
