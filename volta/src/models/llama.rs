//! A Llama-architecture language model (SmolLM2) from a GGUF file, f32 weights:
//! RMSNorm, rotary embeddings, grouped-query causal attention over a KV cache,
//! SwiGLU feed-forward blocks and an output layer tied to the embedding.
//!
//! This first version dequantises every weight to f32 when loading and composes
//! the forward pass from Volta's ops, so it runs on every device and is the
//! reference the quantised, fused GPU path must match. Its dims come from the
//! file's metadata at run time.
use crate::backend::Backend;
use crate::io::gguf::{Gguf, GgufError, GgufErrorKind};
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, UnaryOp};

/// The dims and constants of a Llama model, from its GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Width of the feed-forward block.
    pub ffn: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// RMSNorm's epsilon.
    pub eps: f64,
    /// RoPE's frequency base.
    pub rope_base: f64,
}

impl LlamaConfig {
    /// Reads the `llama.*` metadata of `gguf`.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        let n = |k: &str| gguf.get_u64(&format!("llama.{k}")).map(|v| v as usize);
        Ok(LlamaConfig {
            layers: n("block_count")?,
            hidden: n("embedding_length")?,
            ffn: n("feed_forward_length")?,
            heads: n("attention.head_count")?,
            kv_heads: n("attention.head_count_kv")?,
            vocab: gguf.get_str_array("tokenizer.ggml.tokens")?.len(),
            eps: gguf.get_f64("llama.attention.layer_norm_rms_epsilon")?,
            rope_base: gguf.get_f64("llama.rope.freq_base").unwrap_or(10_000.0),
        })
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}

/// One transformer block's weights; matrices are `(out, in)`.
struct Block<D: Backend<f32>> {
    attn_norm: RawTensor<D, f32>,
    wq: RawTensor<D, f32>,
    wk: RawTensor<D, f32>,
    wv: RawTensor<D, f32>,
    wo: RawTensor<D, f32>,
    ffn_norm: RawTensor<D, f32>,
    gate: RawTensor<D, f32>,
    up: RawTensor<D, f32>,
    down: RawTensor<D, f32>,
}

/// A Llama model on device `D`.
pub struct Llama<D: Backend<f32>> {
    config: LlamaConfig,
    embedding: RawTensor<D, f32>,
    blocks: Vec<Block<D>>,
    norm: RawTensor<D, f32>,
}

/// The keys and values of the tokens seen so far, per block (`[1, kv_heads, S, d]`).
pub struct KvCache<D: Backend<f32>> {
    keys: Vec<Option<RawTensor<D, f32>>>,
    values: Vec<Option<RawTensor<D, f32>>>,
    len: usize,
}

impl<D: Backend<f32>> KvCache<D> {
    /// Tokens in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<D: Backend<f32>> Llama<D> {
    /// Loads the model in `gguf`, checking every weight's shape against the config.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        let config = LlamaConfig::from_gguf(gguf)?;
        let load = |name: &str, dims: &[usize]| -> Result<RawTensor<D, f32>, GgufError> {
            let (shape, values) = gguf.dequantize(name)?;
            if shape != dims {
                return Err(GgufError {
                    path: gguf.path().to_path_buf(),
                    kind: GgufErrorKind::Dims {
                        name: name.to_string(),
                        dims: shape.iter().rev().map(|&d| d as u64).collect(),
                    },
                });
            }
            Ok(RawTensor::from_vec(values, dims))
        };
        let (h, f) = (config.hidden, config.ffn);
        let kv = config.kv_heads * config.head_dim();
        let mut blocks = Vec::with_capacity(config.layers);
        for i in 0..config.layers {
            let w = |n: &str, dims: &[usize]| load(&format!("blk.{i}.{n}.weight"), dims);
            blocks.push(Block {
                attn_norm: w("attn_norm", &[h])?,
                wq: w("attn_q", &[h, h])?,
                wk: w("attn_k", &[kv, h])?,
                wv: w("attn_v", &[kv, h])?,
                wo: w("attn_output", &[h, h])?,
                ffn_norm: w("ffn_norm", &[h])?,
                gate: w("ffn_gate", &[f, h])?,
                up: w("ffn_up", &[f, h])?,
                down: w("ffn_down", &[h, f])?,
            });
        }
        Ok(Llama {
            embedding: load("token_embd.weight", &[config.vocab, h])?,
            norm: load("output_norm.weight", &[h])?,
            blocks,
            config,
        })
    }

    /// The model's config.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// An empty cache for this model.
    pub fn cache(&self) -> KvCache<D> {
        KvCache {
            keys: vec![None; self.config.layers],
            values: vec![None; self.config.layers],
            len: 0,
        }
    }

    /// Runs `tokens` after those in `cache` (adding them to it) and returns the
    /// logits of the last one, `(1, vocab)`.
    ///
    /// # Panics
    /// When `tokens` is empty or holds an id outside the vocabulary.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache<D>) -> RawTensor<D, f32> {
        assert!(!tokens.is_empty(), "Llama::forward: no tokens");
        let c = &self.config;
        assert!(
            tokens.iter().all(|&t| (t as usize) < c.vocab),
            "Llama::forward: a token id is outside the vocabulary of {}",
            c.vocab
        );
        let (t, d) = (tokens.len(), c.head_dim());
        let start = cache.len;
        let ids = Tensor::<(usize,), D, u32>::from_vec_shaped(tokens.to_vec(), (t,))
            .expect("one id per token");
        let mut x = self.embedding.index_select(ids.raw());
        let rms = |x: &RawTensor<D, f32>, w: &RawTensor<D, f32>| {
            x.normalize(1, false, c.eps)
                .binary(BinaryOp::Mul, &w.reshape(&[1, c.hidden]).expand(x.dims()))
        };
        // (T, n·d) → (1, n, T, d)
        let heads =
            |y: RawTensor<D, f32>, n: usize| y.reshape(&[1, t, n, d]).permute(&[0, 2, 1, 3]);
        for (i, b) in self.blocks.iter().enumerate() {
            let h = rms(&x, &b.attn_norm);
            let q = heads(h.matmul(&b.wq.transpose_last()), c.heads).rope(start, c.rope_base);
            let k = heads(h.matmul(&b.wk.transpose_last()), c.kv_heads).rope(start, c.rope_base);
            let v = heads(h.matmul(&b.wv.transpose_last()), c.kv_heads);
            let k = append(&mut cache.keys[i], k);
            let v = append(&mut cache.values[i], v);
            let attn = q
                .causal_attention(&k, &v, start)
                .permute(&[0, 2, 1, 3])
                .reshape(&[t, c.hidden]);
            x = x.binary(BinaryOp::Add, &attn.matmul(&b.wo.transpose_last()));
            let h = rms(&x, &b.ffn_norm);
            let gate = h.matmul(&b.gate.transpose_last()).unary(UnaryOp::Silu);
            let up = h.matmul(&b.up.transpose_last());
            let ffn = gate
                .binary(BinaryOp::Mul, &up)
                .matmul(&b.down.transpose_last());
            x = x.binary(BinaryOp::Add, &ffn);
        }
        cache.len += t;
        let last = rms(&x.narrow(0, t - 1, 1), &self.norm);
        last.matmul(&self.embedding.transpose_last())
    }

    /// Greedy decoding: the prompt, then up to `max_new` tokens, each the most likely
    /// next one, stopping after `stop` (end of turn). Returns the new tokens.
    pub fn generate_greedy(&self, prompt: &[u32], max_new: usize, stop: Option<u32>) -> Vec<u32> {
        let mut cache = self.cache();
        let mut out = Vec::new();
        let mut logits = self.forward(prompt, &mut cache);
        for _ in 0..max_new {
            let row = logits.to_vec();
            let next = (0..row.len())
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .expect("a non-empty vocabulary") as u32;
            out.push(next);
            if Some(next) == stop {
                break;
            }
            logits = self.forward(&[next], &mut cache);
        }
        out
    }
}

/// Appends `new` (`[1, kv, T, d]`) to a cache slot along the sequence axis.
fn append<D: Backend<f32>>(
    slot: &mut Option<RawTensor<D, f32>>,
    new: RawTensor<D, f32>,
) -> RawTensor<D, f32> {
    let all = match slot.take() {
        Some(old) => RawTensor::cat(&[old, new], 2),
        None => new.contiguous(),
    };
    *slot = Some(all.clone());
    all
}
