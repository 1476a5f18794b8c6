//! Multi-head self-attention over sequences `(B, T, C)`, on the fused attention
//! op: one projection to queries, keys and values, optional RoPE, causal or not,
//! grouped key/value heads, and an output projection. Parameter names follow
//! nanoGPT (`c_attn`, `c_proj`), so a PyTorch user recognises a checkpoint.
use super::Sequence;
use crate::backend::cpu::Cpu;
use crate::backend::{AttentionSpec, Backend};
use crate::dtype::Float;
use crate::nn::{Dropout, KvStore, Linear, Module, ToDevice, Visitor};
use crate::ops::attention::check_key_ranges;
use crate::random::Rng;
use crate::shape::{Const, Dim, ShapeError};
use crate::tensor::{RawTensor, Tensor};
use std::ops::Range;

/// Multi-head self-attention of width `C` with `HEADS` query heads sharing
/// `KV_HEADS` key/value heads (grouped-query attention; `KV_HEADS = HEADS` is
/// classic multi-head attention), as nanoGPT's `CausalSelfAttention` or PyTorch's
/// `nn.MultiheadAttention` with `batch_first=True`. `C` must be a multiple of
/// `HEADS` and `HEADS` of `KV_HEADS`, or `new` does not compile (the error names
/// the instance, e.g. `MultiHeadAttention::<10, 3>::new`).
///
/// The sequence length `T` is any `Dim` (usually a run-time `usize`); attention is
/// the fused kernel (flash attention), so neither pass stores the `T×T` scores.
/// [`with_dropout`](Self::with_dropout) drops attention weights in training mode
/// (nanoGPT's `attn_dropout`), inside the fused kernel.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::MultiHeadAttention;
/// let mut rng = Rng::seed(0);
/// let attn = MultiHeadAttention::<16, 4>::new(&mut rng); // causal
/// let x = Tensor::<(Const<2>, usize, Const<16>)>::randn_shaped((Const, 5, Const), &mut rng);
/// let y = attn.forward(&x);
/// assert_eq!(y.dims(), &[2, 5, 16]);
/// ```
#[derive(Clone, Debug)]
pub struct MultiHeadAttention<
    const C: usize,
    const HEADS: usize,
    const KV_HEADS: usize = HEADS,
    D: Backend<E> = Cpu,
    E: Float = f32,
> {
    /// The fused projection's weight (nanoGPT's `c_attn.weight`):
    /// `C + 2·KV_HEADS·C/HEADS` rows, the queries' `C` first, then the keys',
    /// then the values'. (Its row count is a run-time dim: stable Rust cannot
    /// compute it in a type.)
    pub c_attn_weight: Tensor<(usize, Const<C>), D, E>,
    /// The fused projection's bias (`c_attn.bias`; `None` after
    /// [`without_bias`](Self::without_bias)).
    pub c_attn_bias: Option<Tensor<(usize,), D, E>>,
    /// The output projection (`c_proj`).
    pub c_proj: Linear<C, C, D, E>,
    /// Whether each position sees only itself and earlier ones.
    pub causal: bool,
    /// RoPE's base when queries and keys are rotated by position (`None`: no RoPE).
    pub rope: Option<f64>,
    /// Dropout on the attention weights, in training mode (`p` = 0 by default).
    pub attn_dropout: Dropout,
}

/// The keys and values of the positions seen so far, per attention layer: a
/// sampler feeds one new token at a time and attends over the cache. It is a
/// [`KvStore`], as each layer of the language model's
/// [`KvCache`](crate::models::KvCache): each step writes its keys and values in
/// place, and the capacity doubles when full (16 positions first).
///
/// The store holds values, not a graph: with gradients tracked, a step's own keys
/// and values take part in its attention through the autograd graph (so its
/// gradients reach them), the earlier positions as constants.
#[derive(Clone, Debug)]
pub struct AttentionCache<D: Backend<E> = Cpu, E: Float = f32> {
    store: Option<KvStore<D, E>>,
    len: usize,
}

impl<D: Backend<E>, E: Float> Default for AttentionCache<D, E> {
    fn default() -> Self {
        AttentionCache {
            store: None,
            len: 0,
        }
    }
}

impl<D: Backend<E>, E: Float> AttentionCache<D, E> {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Positions it holds before it must grow.
    pub fn capacity(&self) -> usize {
        self.store.as_ref().map_or(0, KvStore::capacity)
    }
    /// Forgets every position (and the memory: views taken before keep theirs).
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Appends keys and values `(B, kv_heads, T, head_dim)` and returns those of
    /// every position held, the new ones last.
    ///
    /// # Panics
    /// When the batch, heads or head width differ from the earlier steps'.
    #[track_caller]
    pub fn append(
        &mut self,
        keys: &RawTensor<D, E>,
        values: &RawTensor<D, E>,
    ) -> (RawTensor<D, E>, RawTensor<D, E>) {
        let d = keys.dims();
        let (dims, t) = ([d[0], d[1], d[3]], d[2]);
        let start = self.len;
        let need = start + t;
        let store = self
            .store
            .get_or_insert_with(|| KvStore::new(dims[0], dims[1], dims[2], need.max(16)));
        assert_eq!(
            store.dims(),
            dims,
            "AttentionCache::append: keys {d:?} do not continue a cache of [batch, kv_heads, head_dim] {:?}; clear it first",
            store.dims()
        );
        if need > store.capacity() {
            store.grow(need.next_power_of_two());
        }
        store.write(start, keys, values);
        self.len = need;
        if crate::autograd::grad_enabled() && (keys.is_tracked() || values.is_tracked()) {
            // The earlier positions as constants, this step's through its graph.
            let cat = |old: RawTensor<D, E>, new: &RawTensor<D, E>| {
                if start == 0 {
                    new.clone()
                } else {
                    RawTensor::cat(&[old, new.clone()], 2)
                }
            };
            return (
                cat(store.keys(start), keys),
                cat(store.values(start), values),
            );
        }
        (store.keys(need), store.values(need))
    }
}

impl<const C: usize, const HEADS: usize, const KV_HEADS: usize, D: Backend<E>, E: Float>
    MultiHeadAttention<C, HEADS, KV_HEADS, D, E>
{
    /// Evaluated by `new`: dims that cannot split into heads do not compile.
    const HEADS_FIT: () = {
        assert!(
            HEADS > 0 && C.is_multiple_of(HEADS),
            "MultiHeadAttention<C, HEADS>: the width C must be a multiple of HEADS"
        );
        assert!(
            KV_HEADS > 0 && HEADS.is_multiple_of(KV_HEADS),
            "MultiHeadAttention<C, HEADS, KV_HEADS>: HEADS must be a multiple of KV_HEADS"
        );
    };
    /// Evaluated by `with_rope`: RoPE rotates pairs of a head's features.
    const EVEN_HEADS: () = assert!(
        (C / HEADS).is_multiple_of(2),
        "MultiHeadAttention::with_rope: RoPE needs an even head width C / HEADS"
    );
    /// Features per head.
    pub const HEAD_DIM: usize = C / HEADS;
    /// Rows of the fused projection: queries, keys, values.
    pub const QKV: usize = C + 2 * KV_HEADS * (C / HEADS);

    /// A causal layer without RoPE, its projections initialised as
    /// [`Linear::new`] does (uniform in `±1/√C`).
    pub fn new(rng: &mut Rng) -> Self {
        let () = Self::HEADS_FIT;
        let bound = 1.0 / (C as f64).sqrt();
        let (lo, hi) = (E::from_f64(-bound), E::from_f64(bound));
        MultiHeadAttention {
            c_attn_weight: Tensor::uniform_shaped((Self::QKV, Const), lo, hi, rng).requires_grad(),
            c_attn_bias: Some(Tensor::uniform_shaped((Self::QKV,), lo, hi, rng).requires_grad()),
            c_proj: Linear::new(rng),
            causal: true,
            rope: None,
            attn_dropout: Dropout::seeded(0.0, 0),
        }
    }

    /// Drops attention weights with probability `p` in training mode (the others
    /// scaled by `1/(1 − p)`), as nanoGPT's `attn_dropout` or PyTorch's
    /// `scaled_dot_product_attention(dropout_p=p)`; the mask's seed is drawn from
    /// `rng`.
    ///
    /// # Panics
    /// When `p` is outside `[0, 1]`.
    pub fn with_dropout(mut self, p: f64, rng: &mut Rng) -> Self {
        self.attn_dropout = Dropout::new(p, rng);
        self
    }

    /// Drops the projections' biases (nanoGPT's `bias = False`; Llama has none).
    pub fn without_bias(mut self) -> Self {
        self.c_attn_bias = None;
        self.c_proj.bias = None;
        self
    }

    /// Every position sees every other (an encoder's attention).
    pub fn bidirectional(mut self) -> Self {
        self.causal = false;
        self
    }

    /// Rotates queries and keys by position (RoPE with `base`, e.g. 10,000).
    /// An odd head width does not compile.
    pub fn with_rope(mut self, base: f64) -> Self {
        let () = Self::EVEN_HEADS;
        self.rope = Some(base);
        self
    }

    /// Attends over the sequence `x` `(B, T, C)`.
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        x.map_raw(|r| self.attend(r, None, None))
    }

    /// Attends over a padded batch `x` `(B, T, C)`: the positions of batch
    /// element `b` attend only to its keys `keys[b]` (e.g. `0..len` for a
    /// sequence right-padded from `len`), as PyTorch's `key_padding_mask`; a
    /// position that sees no key (left padding under a causal mask) gives
    /// zeros. The fused kernels skip the padding rather than masking a `T×T`
    /// matrix. RoPE rotates by the position in `x`.
    ///
    /// ```
    /// use volta::prelude::*;
    /// use volta::nn::MultiHeadAttention;
    /// let mut rng = Rng::seed(0);
    /// let attn = MultiHeadAttention::<8, 2>::new(&mut rng).bidirectional();
    /// let x = Tensor::<(Const<2>, usize, Const<8>)>::randn_shaped((Const, 4, Const), &mut rng);
    /// // The second sequence is 2 tokens long: its padding does not change them.
    /// let y = attn.forward_padded(&x, &[0..4, 0..2]).unwrap();
    /// let short = x.raw().narrow(0, 1, 1).narrow(1, 0, 2);
    /// let alone = Tensor::<(Const<1>, usize, Const<8>)>::try_from_raw(short).unwrap();
    /// let want = attn.forward(&alone).to_vec();
    /// let got = &y.to_vec()[32..48];
    /// assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-5));
    /// ```
    ///
    /// # Errors
    /// [`ShapeError::KeyRanges`] unless `keys` holds one range per batch
    /// element, each inside `0..T`.
    #[track_caller]
    pub fn forward_padded<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
        keys: &[Range<usize>],
    ) -> Result<Sequence<B, T, C, D, E>, ShapeError> {
        check_key_ranges(keys, x.dims()[0], x.dims()[1])?;
        Ok(x.map_raw(|r| self.attend(r, None, Some(keys))))
    }

    /// Attends over the cached positions and `x`'s, which are appended to
    /// `cache` (queries at positions `cache.len()..`). Sampling feeds one token
    /// at a time this way.
    #[track_caller]
    pub fn forward_cached<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
        cache: &mut AttentionCache<D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        x.map_raw(|r| self.attend(r, Some(cache), None))
    }

    /// Attention over `x`, after the positions in `cache` where given, each
    /// batch element over its `keys` where given.
    #[track_caller]
    fn attend(
        &self,
        x: &RawTensor<D, E>,
        cache: Option<&mut AttentionCache<D, E>>,
        keys: Option<&[Range<usize>]>,
    ) -> RawTensor<D, E> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let (hd, kv) = (Self::HEAD_DIM, KV_HEADS * Self::HEAD_DIM);
        let rows = self.c_attn_weight.dims()[0];
        assert_eq!(
            rows,
            Self::QKV,
            "MultiHeadAttention<{C}, {HEADS}, {KV_HEADS}>: c_attn.weight has {rows} rows, it needs {}",
            Self::QKV
        );
        let flat = x.reshape(&[b * t, C]);
        // One product for the fused projection; the queries, keys and values are
        // views of its columns (attention reads strided heads), and their
        // gradients come back as one matrix (`narrow`'s gradients that tile an
        // axis are concatenated), so the backward is one product each for the
        // input's and the weight's gradients too.
        let weight = self.c_attn_weight.raw().transpose_last();
        let qkv = match &self.c_attn_bias {
            Some(bias) => {
                let bias = bias
                    .raw()
                    .reshape(&[1, Self::QKV])
                    .expand(&[b * t, Self::QKV]);
                flat.matmul_add(&weight, &bias)
            }
            None => flat.matmul(&weight),
        };
        let heads = |from: usize, n: usize| {
            qkv.narrow(1, from, n * hd)
                .reshape(&[b, t, n, hd])
                .permute(&[0, 2, 1, 3])
        };
        let (mut q, mut k, mut v) = (heads(0, HEADS), heads(C, KV_HEADS), heads(C + kv, KV_HEADS));
        let start = cache.as_ref().map_or(0, |c| c.len());
        if let Some(base) = self.rope {
            q = q.rope(start, base);
            k = k.rope(start, base);
        }
        if let Some(cache) = cache {
            (k, v) = cache.append(&k, &v);
        }
        let (dropout, seed) = self
            .attn_dropout
            .next_seed()
            .map_or((0.0, 0), |seed| (self.attn_dropout.p(), seed));
        let spec = AttentionSpec {
            dropout,
            seed,
            keys: keys.map(Into::into),
            ..AttentionSpec::new(1.0 / (hd as f64).sqrt(), self.causal.then_some(start))
        };
        let y = q
            .attention_with(&k, &v, spec)
            .permute(&[0, 2, 1, 3])
            .reshape(&[b * t, C]);
        let proj = Tensor::<(usize, Const<C>), D, E>::try_from_raw(y)
            .expect("the heads concatenate to C features");
        self.c_proj.forward(&proj).into_raw().reshape(&[b, t, C])
    }
}

impl<const C: usize, const HEADS: usize, const KV_HEADS: usize, D: Backend<E>, E: Float>
    Module<D, E> for MultiHeadAttention<C, HEADS, KV_HEADS, D, E>
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("c_attn.weight", &mut self.c_attn_weight);
        if let Some(bias) = &mut self.c_attn_bias {
            v.param("c_attn.bias", bias);
        }
        v.module("c_proj", &mut self.c_proj);
        v.module("attn_dropout", &mut self.attn_dropout);
    }
}

impl<const C: usize, const HEADS: usize, const KV_HEADS: usize, D: Backend<E>, E: Float> ToDevice<E>
    for MultiHeadAttention<C, HEADS, KV_HEADS, D, E>
{
    type On<D2: Backend<E>> = MultiHeadAttention<C, HEADS, KV_HEADS, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        MultiHeadAttention {
            c_attn_weight: self.c_attn_weight.to::<D2>(),
            c_attn_bias: self.c_attn_bias.as_ref().map(|b| b.to::<D2>()),
            c_proj: self.c_proj.to::<D2>(),
            causal: self.causal,
            rope: self.rope,
            attn_dropout: self.attn_dropout.clone(),
        }
    }
}
