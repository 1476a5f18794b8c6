//! The GPT of the `gpt` example and the transformer benchmark: GPT-2's layout
//! with nanoGPT's parameter names (`transformer.wte`, `transformer.h.0.attn.c_attn`,
//! …, `lm_head`), generic over its sizes, the block count chosen at run time.
use volta::nn::{AttentionCache, BlockOptions, PositionalEmbedding, TransformerBlock};
use volta::prelude::*;
use volta::shape::ShapeError;

/// GPT-2's layout at vocabulary `V`, `MAX_T` positions, width `C`, `H` heads and
/// feed-forward width `FF`; the block count is a run-time choice.
#[derive(Module)]
pub struct Transformer<
    const V: usize,
    const MAX_T: usize,
    const C: usize,
    const H: usize,
    const FF: usize,
    D: Backend<f32>,
> {
    /// Token embeddings.
    pub wte: Embedding<V, C, D>,
    /// Learned positions.
    pub wpe: PositionalEmbedding<MAX_T, C, D>,
    /// Dropout on the embeddings.
    pub drop: Dropout,
    /// The blocks.
    pub h: Vec<TransformerBlock<C, H, FF, H, D>>,
    /// The final norm.
    pub ln_f: LayerNorm<C, D>,
}

/// The model: the transformer and its head (nanoGPT's names).
#[derive(Module)]
pub struct Gpt<
    const V: usize,
    const MAX_T: usize,
    const C: usize,
    const H: usize,
    const FF: usize,
    D: Backend<f32>,
> {
    /// Embeddings, blocks and the final norm.
    pub transformer: Transformer<V, MAX_T, C, H, FF, D>,
    /// Features to logits.
    pub lm_head: Linear<C, V, D>,
}

/// Token ids: a batch of sequences.
pub type Ids<D> = Tensor<(usize, usize), D, u32>;

impl<
    const V: usize,
    const MAX_T: usize,
    const C: usize,
    const H: usize,
    const FF: usize,
    D: Backend<f32>,
> Gpt<V, MAX_T, C, H, FF, D>
{
    /// A model of `layers` blocks, dropout `dropout`, PyTorch's initialisation.
    pub fn new(layers: usize, dropout: f64, rng: &mut Rng) -> Self {
        let options = BlockOptions {
            dropout,
            ..BlockOptions::default()
        };
        Gpt {
            transformer: Transformer {
                wte: Embedding::new(rng),
                wpe: PositionalEmbedding::new(rng),
                drop: Dropout::new(dropout, rng),
                h: (0..layers)
                    .map(|_| TransformerBlock::with_options(options, rng))
                    .collect(),
                ln_f: LayerNorm::new(),
            },
            lm_head: Linear::new(rng),
        }
    }

    /// Logits `(B, T, V)` for `ids` `(B, T)`; with `caches` (one per block), the
    /// ids continue the cached positions. A sequence past `MAX_T` is an error.
    pub fn forward(
        &self,
        ids: &Ids<D>,
        mut caches: Option<&mut [AttentionCache<D>]>,
    ) -> Result<Tensor<(usize, usize, Const<V>), D>, ShapeError> {
        let t = &self.transformer;
        let start = caches
            .as_ref()
            .map_or(0, |c| c.first().map_or(0, AttentionCache::len));
        let x = t.wte.forward(ids);
        let mut x = t.drop.forward(&t.wpe.try_forward(&x, start)?);
        for (i, block) in t.h.iter().enumerate() {
            x = match caches.as_deref_mut() {
                Some(c) => block.forward_cached(&x, &mut c[i]),
                None => block.forward(&x),
            };
        }
        let (b, n) = (x.dims()[0], x.dims()[1]);
        let rows = Tensor::<(usize, Const<C>), D>::try_from_raw(
            t.ln_f.forward(&x).raw().reshape(&[b * n, C]),
        )?;
        Tensor::try_from_raw(self.lm_head.forward(&rows).raw().reshape(&[b, n, V]))
    }

    /// One empty KV cache per block.
    pub fn caches(&self) -> Vec<AttentionCache<D>> {
        vec![AttentionCache::new(); self.transformer.h.len()]
    }
}
