//! The pre-norm transformer block of GPT-2 and Llama: `x + attn(norm(x))`, then
//! `x + mlp(norm(x))`, over sequences `(B, T, C)`. The norm (LayerNorm or
//! RMSNorm), the feed-forward (GELU or SwiGLU), dropout, causality and RoPE are
//! [`BlockOptions`]; parameter names follow nanoGPT (`ln_1`, `attn`, `ln_2`,
//! `mlp.c_fc`, `mlp.c_proj`) and Hugging Face's Llama for SwiGLU
//! (`mlp.gate_proj`, `mlp.up_proj`, `mlp.down_proj`).
use super::Sequence;
use super::attention::{AttentionCache, MultiHeadAttention};
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::{Dropout, LayerNorm, Linear, Module, RmsNorm, ToDevice, Visitor};
use crate::ops::attention::check_key_ranges;
use crate::random::Rng;
use crate::shape::{Const, Dim, ShapeError};
use crate::tensor::Tensor;
use std::ops::Range;
use volta_kernels::{BinaryOp, UnaryOp};

/// Which normalisation a block applies before each branch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NormKind {
    /// LayerNorm with a bias (GPT-2).
    #[default]
    Layer,
    /// RMSNorm (Llama).
    Rms,
}

/// The feed-forward branch's activation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FeedForwardKind {
    /// `c_proj(gelu(c_fc(x)))` (GPT-2; GELU's exact erf form, as nanoGPT's `nn.GELU()`).
    #[default]
    Gelu,
    /// `down_proj(silu(gate_proj(x)) · up_proj(x))` (Llama).
    SwiGlu,
}

/// How a [`TransformerBlock`] is built. `Default`: LayerNorm, GELU, no dropout,
/// causal, no RoPE, biases (GPT-2 with learned positions added before the blocks).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockOptions {
    /// The norm before each branch.
    pub norm: NormKind,
    /// The feed-forward branch.
    pub feed_forward: FeedForwardKind,
    /// Dropout on the attention weights (nanoGPT's `attn_dropout`) and on each
    /// branch's output before it is added back (`resid_dropout`), in training mode.
    pub dropout: f64,
    /// Whether attention is causal.
    pub causal: bool,
    /// RoPE's base, when attention rotates queries and keys by position.
    pub rope: Option<f64>,
    /// Whether the projections and LayerNorms have biases (nanoGPT's `bias`;
    /// Llama's blocks have none).
    pub bias: bool,
}

impl Default for BlockOptions {
    fn default() -> Self {
        BlockOptions {
            norm: NormKind::Layer,
            feed_forward: FeedForwardKind::Gelu,
            dropout: 0.0,
            causal: true,
            rope: None,
            bias: true,
        }
    }
}

/// A block's norm: LayerNorm or RMSNorm of width `C`.
#[derive(Clone, Debug)]
pub enum BlockNorm<const C: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// LayerNorm.
    Layer(LayerNorm<C, D, E>),
    /// RMSNorm.
    Rms(RmsNorm<C, D, E>),
}

impl<const C: usize, D: Backend<E>, E: Float> BlockNorm<C, D, E> {
    fn new(kind: NormKind, bias: bool) -> Self {
        match kind {
            NormKind::Layer if bias => BlockNorm::Layer(LayerNorm::new()),
            NormKind::Layer => BlockNorm::Layer(LayerNorm::without_bias()),
            NormKind::Rms => BlockNorm::Rms(RmsNorm::new()),
        }
    }
    /// Normalises the last axis.
    pub fn forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        match self {
            BlockNorm::Layer(n) => n.forward(x),
            BlockNorm::Rms(n) => n.forward(x),
        }
    }
}

/// A block's feed-forward branch from width `C` through `FF` hidden features.
#[derive(Clone, Debug)]
pub enum FeedForward<const C: usize, const FF: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// `c_proj(gelu(c_fc(x)))`.
    Gelu {
        /// Up to the hidden width.
        c_fc: Linear<C, FF, D, E>,
        /// Back to the model width.
        c_proj: Linear<FF, C, D, E>,
    },
    /// `down_proj(silu(gate_proj(x)) · up_proj(x))`.
    SwiGlu {
        /// The gate.
        gate_proj: Linear<C, FF, D, E>,
        /// The gated values.
        up_proj: Linear<C, FF, D, E>,
        /// Back to the model width.
        down_proj: Linear<FF, C, D, E>,
    },
}

impl<const C: usize, const FF: usize, D: Backend<E>, E: Float> FeedForward<C, FF, D, E> {
    fn new(kind: FeedForwardKind, bias: bool, rng: &mut Rng) -> Self {
        match kind {
            FeedForwardKind::Gelu => FeedForward::Gelu {
                c_fc: linear(bias, rng),
                c_proj: linear(bias, rng),
            },
            FeedForwardKind::SwiGlu => FeedForward::SwiGlu {
                gate_proj: linear(bias, rng),
                up_proj: linear(bias, rng),
                down_proj: linear(bias, rng),
            },
        }
    }
    /// Applies the branch to rows of `C` features.
    pub fn forward<N: Dim>(&self, x: &Tensor<(N, Const<C>), D, E>) -> Tensor<(N, Const<C>), D, E> {
        match self {
            FeedForward::Gelu { c_fc, c_proj } => {
                let h = c_fc.forward(x);
                c_proj.forward(&h.map_raw(|r| r.unary(UnaryOp::Gelu)))
            }
            FeedForward::SwiGlu {
                gate_proj,
                up_proj,
                down_proj,
            } => {
                let gate = gate_proj.forward(x);
                let up = up_proj.forward(x);
                let h = gate.map_raw(|g| g.unary(UnaryOp::Silu).binary(BinaryOp::Mul, up.raw()));
                down_proj.forward(&h)
            }
        }
    }
}

/// A pre-norm transformer block of width `C`, `HEADS` attention heads over
/// `KV_HEADS` key/value heads, and a feed-forward branch of `FF` hidden features:
/// `x + drop(attn(ln_1(x)))`, then `x + drop(mlp(ln_2(x)))`, as nanoGPT's
/// `Block` (GELU, LayerNorm) or Llama's decoder layer (SwiGLU, RMSNorm; see
/// [`BlockOptions`]). `C` must be a multiple of `HEADS`, and `HEADS` of
/// `KV_HEADS`, or `new` does not compile.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::TransformerBlock;
/// let mut rng = Rng::seed(0);
/// let block = TransformerBlock::<16, 4, 64>::new(&mut rng);
/// let x = Tensor::<(Const<2>, usize, Const<16>)>::randn_shaped((Const, 7, Const), &mut rng);
/// assert_eq!(block.forward(&x).dims(), &[2, 7, 16]);
/// ```
#[derive(Clone, Debug)]
pub struct TransformerBlock<
    const C: usize,
    const HEADS: usize,
    const FF: usize,
    const KV_HEADS: usize = HEADS,
    D: Backend<E> = Cpu,
    E: Float = f32,
> {
    /// The norm before attention.
    pub ln_1: BlockNorm<C, D, E>,
    /// Self-attention.
    pub attn: MultiHeadAttention<C, HEADS, KV_HEADS, D, E>,
    /// The norm before the feed-forward branch.
    pub ln_2: BlockNorm<C, D, E>,
    /// The feed-forward branch.
    pub mlp: FeedForward<C, FF, D, E>,
    /// Dropout on each branch's output.
    pub dropout: Dropout,
}

impl<const C: usize, const HEADS: usize, const FF: usize, const KV_HEADS: usize, D, E>
    TransformerBlock<C, HEADS, FF, KV_HEADS, D, E>
where
    D: Backend<E>,
    E: Float,
{
    /// A GPT-2 block: LayerNorm, GELU, causal attention, no dropout.
    pub fn new(rng: &mut Rng) -> Self {
        Self::with_options(BlockOptions::default(), rng)
    }

    /// A block built as `options` say.
    pub fn with_options(options: BlockOptions, rng: &mut Rng) -> Self {
        let mut attn = MultiHeadAttention::new(rng);
        attn.causal = options.causal;
        if let Some(base) = options.rope {
            attn = attn.with_rope(base);
        }
        if !options.bias {
            attn = attn.without_bias();
        }
        let mlp = FeedForward::new(options.feed_forward, options.bias, rng);
        let dropout = Dropout::new(options.dropout, rng);
        attn.attn_dropout = dropout.split(1);
        TransformerBlock {
            ln_1: BlockNorm::new(options.norm, options.bias),
            attn,
            ln_2: BlockNorm::new(options.norm, options.bias),
            mlp,
            dropout,
        }
    }

    /// Applies the block to a sequence `(B, T, C)`.
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        self.run(x, Attend::All)
    }

    /// [`forward`](Self::forward) over a padded batch: the positions of batch
    /// element `b` attend only to its keys `keys[b]` (see
    /// [`MultiHeadAttention::forward_padded`]).
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
        Ok(self.run(x, Attend::Padded(keys)))
    }

    /// [`forward`](Self::forward) over the positions in `cache` and then `x`'s
    /// (see [`MultiHeadAttention::forward_cached`]).
    #[track_caller]
    pub fn forward_cached<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
        cache: &mut AttentionCache<D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        self.run(x, Attend::Cached(cache))
    }

    #[track_caller]
    fn run<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
        attend: Attend<'_, D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        let normed = self.ln_1.forward(x);
        let attended = match attend {
            Attend::All => self.attn.forward(&normed),
            Attend::Cached(c) => self.attn.forward_cached(&normed, c),
            Attend::Padded(keys) => self
                .attn
                .forward_padded(&normed, keys)
                .expect("the key ranges were checked"),
        };
        let x = residual(x, &self.dropout.forward(&attended));
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let normed = self.ln_2.forward(&x).into_raw().reshape(&[b * t, C]);
        let rows = Tensor::<(usize, Const<C>), D, E>::try_from_raw(normed)
            .expect("a sequence flattens to rows of C");
        let fed = Tensor::from_raw(
            x.shape(),
            self.mlp.forward(&rows).into_raw().reshape(&[b, t, C]),
        );
        residual(&x, &self.dropout.forward(&fed))
    }
}

/// What a block's attention sees.
enum Attend<'a, D: Backend<E>, E: Float> {
    /// The whole sequence.
    All,
    /// The cached positions, then the sequence's.
    Cached(&'a mut AttentionCache<D, E>),
    /// Each batch element's range of keys.
    Padded(&'a [Range<usize>]),
}

/// A projection with or without its bias.
fn linear<const I: usize, const O: usize, D: Backend<E>, E: Float>(
    bias: bool,
    rng: &mut Rng,
) -> Linear<I, O, D, E> {
    if bias {
        Linear::new(rng)
    } else {
        Linear::without_bias(rng)
    }
}

/// `x + branch`.
fn residual<S: crate::shape::Shape, D: Backend<E>, E: Float>(
    x: &Tensor<S, D, E>,
    branch: &Tensor<S, D, E>,
) -> Tensor<S, D, E> {
    x.map_raw(|r| r.binary(BinaryOp::Add, branch.raw()))
}

impl<const C: usize, const FF: usize, D: Backend<E>, E: Float> Module<D, E>
    for FeedForward<C, FF, D, E>
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        match self {
            FeedForward::Gelu { c_fc, c_proj } => {
                v.module("c_fc", c_fc);
                v.module("c_proj", c_proj);
            }
            FeedForward::SwiGlu {
                gate_proj,
                up_proj,
                down_proj,
            } => {
                v.module("gate_proj", gate_proj);
                v.module("up_proj", up_proj);
                v.module("down_proj", down_proj);
            }
        }
    }
}

impl<const C: usize, D: Backend<E>, E: Float> Module<D, E> for BlockNorm<C, D, E> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        match self {
            BlockNorm::Layer(n) => n.visit(v),
            BlockNorm::Rms(n) => n.visit(v),
        }
    }
}

impl<const C: usize, const HEADS: usize, const FF: usize, const KV_HEADS: usize, D, E> Module<D, E>
    for TransformerBlock<C, HEADS, FF, KV_HEADS, D, E>
where
    D: Backend<E>,
    E: Float,
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.module("ln_1", &mut self.ln_1);
        v.module("attn", &mut self.attn);
        v.module("ln_2", &mut self.ln_2);
        v.module("mlp", &mut self.mlp);
        v.module("dropout", &mut self.dropout);
    }
}

impl<const C: usize, D: Backend<E>, E: Float> ToDevice<E> for BlockNorm<C, D, E> {
    type On<D2: Backend<E>> = BlockNorm<C, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        match self {
            BlockNorm::Layer(n) => BlockNorm::Layer(n.to::<D2>()),
            BlockNorm::Rms(n) => BlockNorm::Rms(n.to::<D2>()),
        }
    }
}

impl<const C: usize, const FF: usize, D: Backend<E>, E: Float> ToDevice<E>
    for FeedForward<C, FF, D, E>
{
    type On<D2: Backend<E>> = FeedForward<C, FF, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        match self {
            FeedForward::Gelu { c_fc, c_proj } => FeedForward::Gelu {
                c_fc: c_fc.to::<D2>(),
                c_proj: c_proj.to::<D2>(),
            },
            FeedForward::SwiGlu {
                gate_proj,
                up_proj,
                down_proj,
            } => FeedForward::SwiGlu {
                gate_proj: gate_proj.to::<D2>(),
                up_proj: up_proj.to::<D2>(),
                down_proj: down_proj.to::<D2>(),
            },
        }
    }
}

impl<const C: usize, const HEADS: usize, const FF: usize, const KV_HEADS: usize, D, E> ToDevice<E>
    for TransformerBlock<C, HEADS, FF, KV_HEADS, D, E>
where
    D: Backend<E>,
    E: Float,
{
    type On<D2: Backend<E>> = TransformerBlock<C, HEADS, FF, KV_HEADS, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        TransformerBlock {
            ln_1: self.ln_1.to::<D2>(),
            attn: self.attn.to::<D2>(),
            ln_2: self.ln_2.to::<D2>(),
            mlp: self.mlp.to::<D2>(),
            dropout: ToDevice::<E>::to::<D2>(&self.dropout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::AttentionCache;
    use crate::shape::Shape;
    use volta_kernels::ReduceOp;

    type Seq = (Const<2>, usize, Const<8>);

    /// `Σ y·w` with fixed weights, so every output element matters.
    fn weighted<S: Shape>(y: &Tensor<S, Cpu, f64>) -> f64 {
        let w: Vec<f64> = (0..y.numel()).map(|i| (0.37 * i as f64).sin()).collect();
        let w = crate::tensor::RawTensor::<Cpu, f64>::from_vec(w, y.dims());
        y.raw()
            .binary(BinaryOp::Mul, &w)
            .reduce_all(ReduceOp::Sum)
            .to_vec()[0]
    }

    /// A block with dropout drops attention weights too: in training mode the
    /// attention's output differs from the same weights' without dropout, and the
    /// calls draw fresh masks; in evaluation mode it is the plain attention.
    #[test]
    fn attention_dropout_applies_in_training_only() {
        let options = BlockOptions {
            dropout: 0.3,
            ..BlockOptions::default()
        };
        let mut block =
            TransformerBlock::<8, 4, 16, 4, Cpu, f64>::with_options(options, &mut Rng::seed(3));
        assert_eq!(block.attn.attn_dropout.p(), 0.3);
        let x = Tensor::<Seq, Cpu, f64>::randn_shaped((Const, 6, Const), &mut Rng::seed(4));
        let mut plain = block.attn.clone();
        plain.attn_dropout = Dropout::seeded(0.0, 0);
        let want = plain.forward(&x).to_vec();
        let (a, b) = (
            block.attn.forward(&x).to_vec(),
            block.attn.forward(&x).to_vec(),
        );
        assert_ne!(a, want);
        assert_ne!(a, b, "each call draws a new mask");
        Module::<Cpu, f64>::eval(&mut block);
        assert_eq!(block.attn.forward(&x).to_vec(), want);
    }

    /// A padded batch: each sequence's own positions come out as they do alone
    /// (right padding, bidirectional; left padding, causal), and a loss over
    /// those positions passes no gradient to the padding. The ranges must fit.
    #[test]
    // One range per batch element: `[a..b]` is a batch of one.
    #[allow(clippy::single_range_in_vec_init)]
    fn padded_sequences_match_each_sequence_alone() {
        let mut rng = Rng::seed(11);
        for causal in [false, true] {
            let options = BlockOptions {
                causal,
                ..BlockOptions::default()
            };
            let block = TransformerBlock::<8, 4, 16, 2, Cpu, f64>::with_options(options, &mut rng);
            let t = 5;
            let x =
                Tensor::<Seq, Cpu, f64>::randn_shaped((Const, t, Const), &mut rng).requires_grad();
            // Batch 0 is 5 tokens long; batch 1 holds 3, after (causal: before)
            // its padding.
            let own = if causal { 2..5 } else { 0..3 };
            let y = block.forward_padded(&x, &[0..t, own.clone()]).unwrap();
            let alone = |b: usize, r: std::ops::Range<usize>| {
                let raw = x.raw().narrow(0, b, 1).narrow(1, r.start, r.len());
                let one = Tensor::<(Const<1>, usize, Const<8>), Cpu, f64>::try_from_raw(raw);
                block.forward(&one.unwrap()).to_vec()
            };
            let rows = |b: usize, r: std::ops::Range<usize>| {
                y.to_vec()[(b * t + r.start) * 8..(b * t + r.end) * 8].to_vec()
            };
            for (b, r) in [(0, 0..t), (1, own.clone())] {
                let (got, want) = (rows(b, r.clone()), alone(b, r));
                assert!(got.iter().zip(&want).all(|(a, w)| (a - w).abs() < 1e-12));
            }
            // The loss reads batch 1's own positions only.
            let mut w = vec![0.0; 2 * t * 8];
            w[(t + own.start) * 8..(t + own.end) * 8].fill(1.0);
            let w = crate::tensor::RawTensor::<Cpu, f64>::from_vec(w, y.dims());
            let loss = y.raw().binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
            let gx = loss.backward().get(&x).expect("x is used").to_vec();
            for pos in (0..t).filter(|p| !own.contains(p)) {
                let g = &gx[(t + pos) * 8..][..8];
                assert!(g.iter().all(|&v| v == 0.0), "padding {pos} got {g:?}");
            }
            assert!(gx[(t + own.start) * 8..][..8].iter().any(|&v| v != 0.0));
            let err = block.forward_padded(&x, &[0..t]).unwrap_err();
            assert!(
                err.to_string().contains("a batch of 2 over 5 keys"),
                "{err}"
            );
            assert!(block.forward_padded(&x, &[0..t, 2..6]).is_err());
        }
    }

    /// Finite differences of the weighted output against the gradient of the input
    /// and of the fused projection, in f64, for both block flavours.
    #[test]
    fn block_gradients_match_finite_differences() {
        let flavours = [
            BlockOptions::default(),
            BlockOptions {
                norm: NormKind::Rms,
                feed_forward: FeedForwardKind::SwiGlu,
                rope: Some(10_000.0),
                ..BlockOptions::default()
            },
            BlockOptions {
                bias: false,
                ..BlockOptions::default()
            },
        ];
        for options in flavours {
            let mut rng = Rng::seed(7);
            let block = TransformerBlock::<8, 4, 16, 2, Cpu, f64>::with_options(options, &mut rng);
            let x =
                Tensor::<Seq, Cpu, f64>::randn_shaped((Const, 3, Const), &mut rng).requires_grad();
            let y = block.forward(&x);
            let w: Vec<f64> = (0..y.numel()).map(|i| (0.37 * i as f64).sin()).collect();
            let w = crate::tensor::RawTensor::<Cpu, f64>::from_vec(w, y.dims());
            let loss = y.raw().binary(BinaryOp::Mul, &w).reduce_all(ReduceOp::Sum);
            let grads = loss.backward();
            let gx = grads.get(&x).expect("x is used").to_vec();
            let gw = grads
                .get(&block.attn.c_attn_weight)
                .expect("c_attn is used")
                .to_vec();
            let eps = 1e-6;
            let xs = x.to_vec();
            for i in (0..xs.len()).step_by(5) {
                let at = |d: f64| {
                    let mut v = xs.clone();
                    v[i] += d;
                    let xi = Tensor::<Seq, Cpu, f64>::from_vec_shaped(v, x.shape()).unwrap();
                    weighted(&block.forward(&xi))
                };
                let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
                assert!(
                    (numeric - gx[i]).abs() < 1e-6,
                    "{options:?}: dx[{i}] {numeric} vs {}",
                    gx[i]
                );
            }
            let ws = block.attn.c_attn_weight.to_vec();
            for i in (0..ws.len()).step_by(13) {
                let at = |d: f64| {
                    let mut v = ws.clone();
                    v[i] += d;
                    let mut b2 = block.clone();
                    b2.attn.c_attn_weight =
                        Tensor::from_vec_shaped(v, block.attn.c_attn_weight.shape()).unwrap();
                    weighted(&b2.forward(&x.detach()))
                };
                let numeric = (at(eps) - at(-eps)) / (2.0 * eps);
                assert!(
                    (numeric - gw[i]).abs() < 1e-6,
                    "{options:?}: dW[{i}] {numeric} vs {}",
                    gw[i]
                );
            }
        }
    }

    /// A block without biases has none among its parameters, as nanoGPT's with
    /// `bias = False`: weights only, LayerNorms included.
    #[test]
    fn a_block_without_biases_has_weights_only() {
        let options = BlockOptions {
            bias: false,
            ..BlockOptions::default()
        };
        let mut block =
            TransformerBlock::<8, 2, 16, 2, Cpu, f64>::with_options(options, &mut Rng::seed(1));
        let names: Vec<String> = block.named_params().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "ln_1.weight",
                "attn.c_attn.weight",
                "attn.c_proj.weight",
                "ln_2.weight",
                "mlp.c_fc.weight",
                "mlp.c_proj.weight"
            ]
        );
        assert_eq!(
            block.param_count(),
            8 + 24 * 8 + 8 * 8 + 8 + 16 * 8 + 8 * 16
        );
    }

    /// Feeding a sequence one token at a time through the cache gives the rows of
    /// the whole sequence's forward pass.
    #[test]
    fn cached_steps_match_the_whole_sequence() {
        let mut rng = Rng::seed(3);
        let options = BlockOptions {
            rope: Some(10_000.0),
            ..BlockOptions::default()
        };
        let block = TransformerBlock::<8, 2, 16, 1, Cpu, f64>::with_options(options, &mut rng);
        let n = 20;
        let x = Tensor::<Seq, Cpu, f64>::randn_shaped((Const, n, Const), &mut rng);
        let whole = block.forward(&x).to_vec();
        // Steps of several positions and of one, past the first capacity (16):
        // with the parameters tracked (the step's keys join through the graph),
        // and without gradients (as a sampler runs: the store alone).
        for tracked in [true, false] {
            let _guard = (!tracked).then(crate::no_grad);
            let mut cache = AttentionCache::new();
            let mut steps = vec![Vec::new(); 2];
            let mut t = 0;
            for len in [3, 1, 1, 5, 1, 9] {
                let xt = Tensor::<Seq, Cpu, f64>::try_from_raw(x.raw().narrow(1, t, len)).unwrap();
                let y = block.forward_cached(&xt, &mut cache).to_vec();
                for (b, rows) in steps.iter_mut().enumerate() {
                    rows.extend_from_slice(&y[b * len * 8..][..len * 8]);
                }
                t += len;
            }
            assert_eq!((cache.len(), cache.capacity()), (n, 32));
            let stepped: Vec<f64> = steps.concat();
            for (i, (a, b)) in whole.iter().zip(&stepped).enumerate() {
                assert!((a - b).abs() < 1e-12, "tracked {tracked}: [{i}] {a} vs {b}");
            }
        }
    }

    /// With gradients tracked, a cached step's loss reaches the parameters
    /// through the step's own keys and values, as the whole-sequence pass does
    /// for its last position.
    #[test]
    fn cached_steps_keep_the_step_in_the_graph() {
        let mut rng = Rng::seed(5);
        let block = TransformerBlock::<8, 2, 16, 1, Cpu, f64>::new(&mut rng);
        let x = Tensor::<Seq, Cpu, f64>::randn_shaped((Const, 3, Const), &mut rng);
        let last = |y: &Tensor<Seq, Cpu, f64>| {
            let rows = y.raw().narrow(1, y.dims()[1] - 1, 1);
            rows.reduce_all(ReduceOp::Sum)
        };
        let grads = last(&block.forward(&x)).backward();
        let mut cache = AttentionCache::new();
        let head = Tensor::<Seq, Cpu, f64>::try_from_raw(x.raw().narrow(1, 0, 2)).unwrap();
        let tail = Tensor::<Seq, Cpu, f64>::try_from_raw(x.raw().narrow(1, 2, 1)).unwrap();
        let _ = block.forward_cached(&head, &mut cache);
        let cached = last(&block.forward_cached(&tail, &mut cache)).backward();
        // The value projection's gradient flows through this step's values only
        // in both (earlier positions' values enter as constants in the cached
        // run, so compare a weight that reaches the loss through the step alone:
        // the output projection).
        let w = block.attn.c_proj.weight.raw();
        let (a, b) = (
            grads.get_raw(w.id()).expect("a gradient").to_vec(),
            cached.get_raw(w.id()).expect("a gradient").to_vec(),
        );
        for (i, (a, b)) in a.iter().zip(&b).enumerate() {
            assert!((a - b).abs() < 1e-12, "c_proj.weight[{i}]: {a} vs {b}");
        }
        let qkv = block.attn.c_attn_weight.raw();
        assert!(
            cached.get_raw(qkv.id()).is_some(),
            "the step's projection gets a gradient"
        );
    }
}
