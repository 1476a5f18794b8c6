//! The GPTs of the `gpt` example and the transformer benchmark, written with
//! `model!`: GPT-2's layout, parameters named as nanoGPT names them without its
//! `transformer.` prefix (`wte.weight`, `h.0.attn.c_attn.weight`, `lm_head.weight`).
use volta::prelude::*;

model! {
    /// minGPT's adder: 10 digit tokens, up to 16 positions, 2 blocks of width 64
    /// with 4 heads.
    pub struct Adder for (B, T) -> (B, T, 10) {
        wte: Embedding<10, 64>,
        wpe: PositionalEmbedding<16>,
        h: [TransformerBlock<4, ff = 256>; 2],
        ln_f: LayerNorm,
        lm_head: Linear<10>,
    }
}

model! {
    /// nanoGPT's shakespeare-char configuration over bytes: 256 tokens, 256
    /// positions, 6 blocks of width 384 with 6 heads, dropout 0.2.
    pub struct CharGpt for (B, T) -> (B, T, 256) {
        wte: Embedding<256, 384>,
        wpe: PositionalEmbedding<256>,
        drop: Dropout<0.2>,
        h: [TransformerBlock<6, dropout = 0.2>; 6],
        ln_f: LayerNorm,
        lm_head: Linear<256>,
    }
}

/// Token ids: a batch of sequences.
pub type Ids<D> = Tensor<(usize, usize), D, u32>;

/// The benchmarks' batch of `batch` sequences of `t` byte tokens (`i·7919 mod 256`
/// over rows of `t + 1`, as the PyTorch peers make it): the inputs, and the next
/// token of each as its target.
pub fn benchmark_batch(batch: usize, t: usize) -> (Vec<u32>, Vec<u32>) {
    let data: Vec<u32> = (0..batch * (t + 1))
        .map(|i| (i * 7919 % 256) as u32)
        .collect();
    let inputs = data.chunks(t + 1).flat_map(|c| c[..t].to_vec()).collect();
    let targets = data.chunks(t + 1).flat_map(|c| c[1..].to_vec()).collect();
    (inputs, targets)
}
