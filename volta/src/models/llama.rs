//! A Llama-architecture language model (SmolLM2) from a GGUF file: RMSNorm,
//! rotary embeddings, grouped-query causal attention over a KV cache, SwiGLU
//! feed-forward blocks and an output layer tied to the embedding.
//!
//! The weights stay in their quantised blocks on the device ([`QTensor`]); a
//! decoded token runs five kernels per block: the fused QKV projection (with the
//! attention norm as its prologue), attention (which writes the token's key,
//! rotated by RoPE, and value into the cache itself), the output projection (with
//! the residual add), the fused gate-up projection (norm prologue, SwiGLU
//! epilogue) and the down projection (residual). A prompt writes the cache, then
//! runs flash attention.
//! On the GPU, the single-token decode step is captured once and replayed for
//! every later token (see [`Replay`]), so the host records nothing per op.
use super::kv_cache::{Decode, KvCache};
use crate::backend::infer::AttnShape;
use crate::backend::{InferenceBackend, Memory, Replay};
use crate::io::gguf::{Gguf, GgufError, GgufErrorKind};
use crate::layout::Layout;
use crate::tensor::{QMatmulOptions, QTensor, RawTensor};

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
    /// Positions the model was trained on (the KV cache's limit).
    pub context: usize,
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
            context: n("context_length")?,
            eps: gguf.get_f64("llama.attention.layer_norm_rms_epsilon")?,
            rope_base: gguf.get_f64("llama.rope.freq_base").unwrap_or(10_000.0),
        })
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }
}

/// One transformer block's weights.
struct Block<D: InferenceBackend> {
    attn_norm: RawTensor<D, f32>,
    /// Queries, keys and values stacked: `(hidden + 2·kv, hidden)`.
    qkv: QTensor<D>,
    wo: QTensor<D>,
    ffn_norm: RawTensor<D, f32>,
    /// Gate and up projections stacked: `(2·ffn, hidden)`.
    gate_up: QTensor<D>,
    down: QTensor<D>,
}

/// A Llama model on device `D`.
pub struct Llama<D: InferenceBackend + Replay> {
    config: LlamaConfig,
    /// The token embedding, also the output layer (tied).
    embedding: QTensor<D>,
    blocks: Vec<Block<D>>,
    norm: RawTensor<D, f32>,
}

/// Positions a new cache holds before it first grows.
const INITIAL_CAPACITY: usize = 1024;

impl<D: InferenceBackend + Replay> Llama<D> {
    /// Loads the model in `gguf`, checking every weight's shape against the config.
    /// Matrices must be Q4_0, Q4_1 or Q8_0; norms F32 or F16.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        let config = LlamaConfig::from_gguf(gguf)?;
        let c = &config;
        if c.heads == 0 || c.kv_heads == 0 || c.hidden % c.heads != 0 || c.heads % c.kv_heads != 0 {
            return Err(GgufError {
                path: gguf.path().to_path_buf(),
                kind: GgufErrorKind::Inconsistent(format!(
                    "{} heads must divide the width {} and be a multiple of the {} kv heads",
                    c.heads, c.hidden, c.kv_heads
                )),
            });
        }
        let vector = |name: &str, len: usize| -> Result<RawTensor<D, f32>, GgufError> {
            let (shape, values) = gguf.dequantize(name)?;
            if shape != [len] {
                return Err(GgufError {
                    path: gguf.path().to_path_buf(),
                    kind: GgufErrorKind::Dims {
                        name: name.to_string(),
                        dims: shape.iter().rev().map(|&d| d as u64).collect(),
                    },
                });
            }
            Ok(RawTensor::from_vec(values, &[len]))
        };
        let (h, f) = (c.hidden, c.ffn);
        let kv = c.kv_heads * c.head_dim();
        let mut blocks = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let name = |n: &str| format!("blk.{i}.{n}.weight");
            let stacked = |names: &[&str], rows: usize, cols: usize| {
                let names: Vec<String> = names.iter().map(|n| name(n)).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let w = QTensor::from_gguf_stacked(gguf, &refs, cols)?;
                if w.shape().rows != rows {
                    return Err(GgufError {
                        path: gguf.path().to_path_buf(),
                        kind: GgufErrorKind::Dims {
                            name: refs.join("+"),
                            dims: vec![cols as u64, w.shape().rows as u64],
                        },
                    });
                }
                Ok(w)
            };
            blocks.push(Block {
                attn_norm: vector(&name("attn_norm"), h)?,
                qkv: stacked(&["attn_q", "attn_k", "attn_v"], h + 2 * kv, h)?,
                wo: QTensor::from_gguf(gguf, &name("attn_output"), h, h)?,
                ffn_norm: vector(&name("ffn_norm"), h)?,
                gate_up: stacked(&["ffn_gate", "ffn_up"], 2 * f, h)?,
                down: QTensor::from_gguf(gguf, &name("ffn_down"), h, f)?,
            });
        }
        Ok(Llama {
            embedding: QTensor::from_gguf(gguf, "token_embd.weight", c.vocab, h)?,
            norm: vector("output_norm.weight", h)?,
            blocks,
            config,
        })
    }

    /// The model's config.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// An empty cache for this model (it grows as tokens arrive, up to the
    /// context length).
    pub fn cache(&self) -> KvCache<D> {
        let c = &self.config;
        let shape = AttnShape {
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim(),
            capacity: INITIAL_CAPACITY,
        };
        KvCache::new(c.layers, shape, c.rope_base, c.context)
    }

    /// Runs `tokens` after those in `cache` (adding them to it) and returns the
    /// logits of the last one, `(1, vocab)`.
    ///
    /// # Panics
    /// When `tokens` is empty, holds an id outside the vocabulary, or would take
    /// the cache past the model's context length.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache<D>) -> RawTensor<D, f32> {
        assert!(!tokens.is_empty(), "Llama::forward: no tokens");
        let c = &self.config;
        assert!(
            tokens.iter().all(|&t| (t as usize) < c.vocab),
            "Llama::forward: a token id is outside the vocabulary of {}",
            c.vocab
        );
        assert!(
            cache.reserve(tokens.len()),
            "Llama::forward: {} + {} tokens exceed the context length {}",
            cache.len,
            tokens.len(),
            c.context
        );
        let pos = [cache.len as u32];
        let logits = if tokens.len() > 1 {
            let ids = <D as Memory<u32>>::from_vec(tokens.to_vec());
            let len = cache.len + tokens.len();
            let pos = <D as Memory<u32>>::from_vec(pos.to_vec());
            self.step(&ids, tokens.len(), &pos, cache, len)
        } else if let Some(d) = &mut cache.decode {
            D::overwrite(&mut d.token, tokens);
            D::overwrite(&mut d.pos, &pos);
            D::replay(&d.graph);
            copy(&d.logits)
        } else {
            let token = <D as Memory<u32>>::from_vec(tokens.to_vec());
            let pos = <D as Memory<u32>>::from_vec(pos.to_vec());
            let capacity = cache.capacity();
            let (logits, graph) = D::capture(|| self.step(&token, 1, &pos, cache, capacity));
            if let Some(graph) = graph {
                cache.decode = Some(Decode {
                    graph,
                    token,
                    pos,
                    logits: logits.clone(),
                });
                copy(&logits)
            } else {
                logits
            }
        };
        cache.len += tokens.len();
        logits
    }

    /// The kernels of one step: `ids` (`t` tokens) at the position in `pos`;
    /// attention launches cover `max_len` positions.
    fn step(
        &self,
        ids: &<D as Memory<u32>>::Buffer,
        t: usize,
        pos: &<D as Memory<u32>>::Buffer,
        cache: &mut KvCache<D>,
        max_len: usize,
    ) -> RawTensor<D, f32> {
        let c = &self.config;
        let eps = c.eps as f32;
        let ids = RawTensor::<D, u32>::leaf(ids.clone(), Layout::contiguous(&[t]));
        let pos = RawTensor::<D, u32>::leaf(pos.clone(), Layout::contiguous(&[1]));
        let mut x = self.embedding.rows(&ids);
        let shape = cache.shape;
        for (i, b) in self.blocks.iter().enumerate() {
            let qkv = x.qmatmul(
                &b.qkv,
                QMatmulOptions {
                    norm: Some((&b.attn_norm, eps)),
                    ..Default::default()
                },
            );
            let attn = D::attend(
                qkv.view(),
                cache.rope.view(),
                pos.view(),
                &mut cache.layers[i],
                &shape,
                max_len,
            );
            let attn = RawTensor::leaf(attn, Layout::contiguous(&[t, c.hidden]));
            x = attn.qmatmul(
                &b.wo,
                QMatmulOptions {
                    add: Some(&x),
                    ..Default::default()
                },
            );
            let gated = x.qmatmul(
                &b.gate_up,
                QMatmulOptions {
                    norm: Some((&b.ffn_norm, eps)),
                    glu: true,
                    ..Default::default()
                },
            );
            x = gated.qmatmul(
                &b.down,
                QMatmulOptions {
                    add: Some(&x),
                    ..Default::default()
                },
            );
        }
        x.narrow(0, t - 1, 1).qmatmul(
            &self.embedding,
            QMatmulOptions {
                norm: Some((&self.norm, eps)),
                ..Default::default()
            },
        )
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
            if Some(next) == stop || cache.len() >= self.config.context {
                break;
            }
            logits = self.forward(&[next], &mut cache);
        }
        out
    }
}

/// A copy of a captured step's output: the next replay overwrites the original.
fn copy<D: InferenceBackend>(x: &RawTensor<D, f32>) -> RawTensor<D, f32> {
    let l = *x.layout();
    RawTensor::leaf(<D as Memory<f32>>::contiguous(x.buffer(), &l), l)
}
