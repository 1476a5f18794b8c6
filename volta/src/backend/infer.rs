//! The kernels of transformer inference that the generic op set cannot express
//! cheaply: matmuls that read quantised weights (dequantising in their loads, with
//! an RMS-norm prologue and SwiGLU/residual epilogues), and attention over a KV
//! cache written in place, at a position held in device memory.
//!
//! The position lives in a device buffer (not a kernel parameter) and the grids
//! depend only on the cache's capacity, so a decode step's kernels are the same
//! every token: the GPU records them once and replays them (see
//! [`Replay`](super::Replay)).
use super::{Backend, Buf, View};
use crate::io::quant::{GgmlType, QFormat};

/// A quantised weight matrix's geometry: `rows × cols` elements of `ty`, row-major
/// (a GGUF matrix with `cols` as its contiguous axis), held in `format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QShape {
    /// Its block type (the first part's, for a matrix of parts of several types).
    pub ty: GgmlType,
    /// How its blocks sit in device memory (the bytes a backend uploads).
    pub format: QFormat,
    /// Output features (`n`).
    pub rows: usize,
    /// Input features (`k`), a multiple of 32.
    pub cols: usize,
}

/// What a quantised matmul fuses around `x·Wᵀ` (cuBLASLt-style prologue and
/// epilogues), for `x` of dims `(m, k)`:
///
/// 1. `norm: Some((w, eps))`: each row of `x` is first RMS-normalised and scaled by
///    `w` (dims `(k,)`): `x·w/√(mean(x²) + eps)`;
/// 2. the product `y = x·Wᵀ`, `(m, n)`;
/// 3. `glu`: `y = silu(y[:, ..n/2]) · y[:, n/2..]`, `(m, n/2)` (SwiGLU, for a gate
///    and an up projection stored as one matrix);
/// 4. `add: Some(r)`: `y = y + r` (a residual connection), `r` with `y`'s dims.
///
/// `activations` says how the CPU multiplies (see [`Activations`]).
pub struct QFusion<'a, D: Backend<f32>> {
    /// RMS-norm prologue: the scale and epsilon.
    pub norm: Option<(View<'a, D, f32>, f32)>,
    /// SwiGLU epilogue.
    pub glu: bool,
    /// Residual epilogue.
    pub add: Option<View<'a, D, f32>>,
    /// The activations' precision in the product.
    pub activations: Activations,
}

/// How a quantised GEMV (at most
/// [`QMATMUL_GEMV_ROWS`](crate::tensor::QMATMUL_GEMV_ROWS) rows of `x`) multiplies
/// on the CPU. The GPU's kernels and every path for more rows compute with f32
/// activations whichever is asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Activations {
    /// Each row of `x` (after the norm prologue) quantised to 8 bits once per
    /// call, as llama.cpp's CPU backend does: per block of 32 an f16 scale
    /// `amax/127` (`block_q8_0`/`block_q8_1`), or per 256 one f32 scale for the
    /// K-quants (`block_q8_K`); integer dot products, scaled once per block. The
    /// fastest; each output is off by about 1% of its typical size.
    #[default]
    Int8,
    /// `x` kept in f32 and each block's weights dequantised to f32: the product
    /// up to f32 rounding, as an exact reference computes it.
    F32,
}

impl<D: Backend<f32>> Default for QFusion<'_, D> {
    fn default() -> Self {
        QFusion {
            norm: None,
            glu: false,
            add: None,
            activations: Activations::default(),
        }
    }
}

/// The geometry of attention over a KV cache.
///
/// The fused `qkv` activations have dims `(T, (heads + 2·kv_heads)·head_dim)`:
/// queries, then keys, then values. A layer's cache holds `(2, kv_heads,
/// capacity, head_dim)` (keys, then values); the RoPE table `(capacity, head_dim/2, 2)` holds `(cos, sin)` of
/// `p·θᵢ` for every position `p` (adjacent-pair rotation, GGUF's layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AttnShape {
    /// Query heads.
    pub heads: usize,
    /// Key/value heads; `heads` is a multiple (grouped-query attention).
    pub kv_heads: usize,
    /// Width of a head (even).
    pub head_dim: usize,
    /// Positions the cache holds.
    pub capacity: usize,
}

/// Transformer-inference kernels (see the [module](self) docs).
///
/// `pos` arguments are one-element `u32` views: the position of the first of the
/// `T` tokens. Callers keep `pos + T ≤ capacity`.
pub trait InferenceBackend: Backend<f32> {
    /// Quantised weights in device memory (the blocks, repacked as the device's
    /// kernels like them).
    type Quantized: Clone + Send + Sync + 'static;

    /// Uploads a matrix held as `shape.format` says: ggml's blocks (`bytes` as in
    /// a GGUF file) or sub-blocks ([`SubBlock::BYTES`](crate::io::quant::SubBlock::BYTES)
    /// each), `shape.rows × shape.cols / 32` of them, which the caller has checked.
    fn upload_quantized(shape: &QShape, bytes: &[u8]) -> Self::Quantized;

    /// Dequantised rows: `out[i] = W[ids[i]]`, dims `(ids.len, cols)` — an embedding
    /// lookup in a quantised table, or, with `ids = 0..rows`, the whole matrix.
    /// Out-of-range ids read row `rows − 1` (callers check ids first).
    fn dequantize_rows(w: &Self::Quantized, shape: &QShape, ids: View<Self, u32>)
    -> Buf<Self, f32>;

    /// The whole matrix, dequantised: dims `(rows, cols)`.
    fn dequantize(w: &Self::Quantized, shape: &QShape) -> Buf<Self, f32>;

    /// `x·Wᵀ` for `x` of dims `(m, k)` and the quantised `W` of dims `(n, k)`, with
    /// the prologue and epilogues of `fusion`; the result is contiguous.
    fn qmatmul(
        x: View<Self, f32>,
        w: &Self::Quantized,
        shape: &QShape,
        fusion: QFusion<'_, Self>,
    ) -> Buf<Self, f32>;

    /// `x·Wᵀ` for many rows of `x` (a prompt's tokens, a batch of decoded ones)
    /// on the device's matrix units, each tile of `W` dequantised on its way in,
    /// with the prologue and epilogues of `fusion`: dims `(m, n)` (`(m, n/2)`
    /// with `glu`), contiguous. Operands are rounded to `f16` there and products accumulate in
    /// `f32`, as llama.cpp's prefill does. `None` (the default) where the backend
    /// has no such kernel: the caller then multiplies by the dequantised matrix.
    fn qgemm(
        x: View<Self, f32>,
        w: &Self::Quantized,
        shape: &QShape,
        fusion: QFusion<'_, Self>,
    ) -> Option<Buf<Self, f32>> {
        let _ = (x, w, shape, fusion);
        None
    }

    /// Writes keys (rotated by RoPE) and values into `cache` in place, then
    /// returns the causal attention of `qkv`'s `T` queries (rotated by RoPE here),
    /// scaled by `1/√head_dim`: dims `(T, heads·head_dim)`. `pos` holds a position
    /// per sequence of the cache, `(2, sequences, kv_heads, capacity, head_dim)`
    /// (keys, then values):
    /// - one position: `qkv`'s rows are `T` consecutive tokens of one sequence, at
    ///   positions `pos..pos + T`, query `t` over the first `pos + t + 1`;
    /// - `T` positions (a batched decode step of sequences of different lengths):
    ///   row `b` is sequence `b`'s next token, at `pos[b]`, over the first
    ///   `pos[b] + 1` positions of its own sequence.
    ///
    /// `max_len` (at least the last position + 1) bounds the work launched (a
    /// decode step that is replayed passes the most positions it is replayed
    /// for). On the GPU single tokens are one kernel (each writes its own key and
    /// value and attends) up to 256 positions, and past that split along the keys
    /// and combined by a second; a prompt writes the cache, then runs the
    /// flash-attention forward.
    fn attend(
        qkv: View<Self, f32>,
        rope: View<Self, f32>,
        pos: View<Self, u32>,
        cache: &mut Buf<Self, f32>,
        shape: &AttnShape,
        max_len: usize,
    ) -> Buf<Self, f32>;

    /// The `max_len` a captured single-token step passes to
    /// [`attend`](Self::attend), given the positions it `needed` now and the
    /// cache's `capacity`: a model captures the step again when this changes.
    /// The capacity (one capture until the cache grows), unless the backend's
    /// attention launch is shaped by the length (the GPU's: whole keys up to
    /// 256 positions, split past them).
    fn decode_len(needed: usize, capacity: usize) -> usize {
        let _ = needed;
        capacity
    }
}

/// `silu(a)·b`, SwiGLU's gate.
pub(crate) fn swiglu(a: f32, b: f32) -> f32 {
    a / (1.0 + (-a).exp()) * b
}

/// The RoPE table `(capacity, head_dim/2, 2)` of `(cos, sin)` pairs, computed in f64:
/// the pair `i` of position `p` turns by `p·base^(−2i/head_dim)`.
pub fn rope_table(capacity: usize, head_dim: usize, base: f64) -> Vec<f32> {
    let half = head_dim / 2;
    let mut table = Vec::with_capacity(capacity * head_dim);
    for p in 0..capacity {
        for i in 0..half {
            let angle = p as f64 * base.powf(-2.0 * i as f64 / head_dim as f64);
            table.push(angle.cos() as f32);
            table.push(angle.sin() as f32);
        }
    }
    table
}
