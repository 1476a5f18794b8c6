//! A Llama-architecture language model (SmolLM2) from a GGUF file: RMSNorm,
//! rotary embeddings, grouped-query causal attention over a KV cache, SwiGLU
//! feed-forward blocks and an output layer tied to the embedding.
//!
//! The model's dims are constants in its type ([`Llama`]'s const parameters;
//! [`SmolLM2_135M`] is SmolLM2-135M's), checked against the file when it loads;
//! the sequence length is a run-time dim.
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
use super::kv_batch::KvBatch;
use super::kv_cache::{Decode, KvCache, KvLayers};
use crate::backend::infer::AttnShape;
use crate::backend::{InferenceBackend, Memory, Replay};
use crate::io::gguf::{Gguf, GgufError, GgufErrorKind};
use crate::layout::Layout;
use crate::shape::{Const, Rank1};
use crate::tensor::{Activations, QMatmulOptions, QTensor, RawTensor, Tensor};

/// What a Llama model's type leaves open, read from its GGUF metadata: the dims are
/// in the type ([`Llama`]'s const parameters), these values in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Positions the model was trained on (the KV cache's limit).
    pub context: usize,
    /// RMSNorm's epsilon.
    pub eps: f64,
    /// RoPE's frequency base.
    pub rope_base: f64,
}

impl LlamaConfig {
    /// Reads `llama.context_length`, `llama.attention.layer_norm_rms_epsilon` and
    /// `llama.rope.freq_base` (10 000 when absent) from `gguf`.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        Ok(LlamaConfig {
            context: gguf.get_u64("llama.context_length")? as usize,
            eps: gguf.get_f64("llama.attention.layer_norm_rms_epsilon")?,
            rope_base: gguf.get_f64("llama.rope.freq_base").unwrap_or(10_000.0),
        })
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

/// A Llama model on device `D` whose dims are part of its type: `LAYERS`
/// transformer blocks over a residual stream of `HIDDEN` features, feed-forward
/// blocks `FFN` wide, `HEADS` query heads sharing `KV_HEADS` key/value heads
/// (grouped-query attention), and a vocabulary of `VOCAB` tokens. Only the sequence
/// length is a run-time dim: [`forward`](Self::forward) takes any number of tokens
/// and returns the last one's logits as a `Tensor<Rank1<VOCAB>, D>`.
///
/// [`SmolLM2_135M`] is SmolLM2-135M's type. Another Llama-architecture GGUF model
/// needs its own alias, with the dims of its `llama.*` metadata (the length of
/// `tokenizer.ggml.tokens` for `VOCAB`); [`from_gguf`](Self::from_gguf) checks them
/// against the file, and a mismatch is a [`GgufErrorKind::ModelDims`] error that
/// names the type the file would load into:
///
/// ```no_run
/// use volta::Cpu;
/// use volta::io::gguf::Gguf;
/// use volta::models::llama::Llama;
///
/// /// TinyLlama-1.1B: 22 blocks of width 2048, feed-forward 5632, 32 heads over
/// /// 4 key/value heads, 32 000 tokens.
/// type TinyLlama<D> = Llama<D, 22, 2048, 5632, 32, 4, 32000>;
///
/// let gguf = Gguf::open("tinyllama-1.1b-chat-v1.0.Q4_0.gguf")?;
/// let model = TinyLlama::<Cpu>::from_gguf(&gguf)?;
/// let mut cache = model.cache();
/// let logits = model.forward(&[1, 15043], &mut cache); // Tensor<Rank1<32000>, Cpu>
/// assert_eq!(logits.dims(), &[32000]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The dims must fit together: all at least 1, `HIDDEN` a multiple of `HEADS`,
/// `HEADS` a multiple of `KV_HEADS`, and an even head width `HIDDEN / HEADS`. An
/// alias that breaks one of these does not build: loading it is a compile error
/// naming the rule (see [`HEAD_DIM`](Self::HEAD_DIM)).
pub struct Llama<
    D: InferenceBackend + Replay,
    const LAYERS: usize,
    const HIDDEN: usize,
    const FFN: usize,
    const HEADS: usize,
    const KV_HEADS: usize,
    const VOCAB: usize,
> {
    config: LlamaConfig,
    /// The token embedding, also the output layer (tied).
    embedding: QTensor<D>,
    blocks: Vec<Block<D>>,
    norm: RawTensor<D, f32>,
    /// How its decode steps' matmuls multiply on the CPU.
    activations: Activations,
}

/// SmolLM2-135M (base or Instruct) on device `D`: 30 blocks of width 576,
/// feed-forward 1536, 9 query heads over 3 key/value heads, 49 152 tokens.
///
/// ```no_run
/// use volta::io::gguf::Gguf;
/// use volta::models::llama::SmolLM2_135M;
/// use volta::{Cpu, Rank1, Tensor};
///
/// let gguf = Gguf::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
/// let model = SmolLM2_135M::<Cpu>::from_gguf(&gguf)?;
/// let mut cache = model.cache();
/// let logits: Tensor<Rank1<49152>, Cpu> = model.forward(&[1, 2, 3], &mut cache);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(non_camel_case_types)] // the model's name
pub type SmolLM2_135M<D> = Llama<D, 30, 576, 1536, 9, 3, 49152>;

/// Positions a new cache holds before it first grows.
const INITIAL_CAPACITY: usize = 1024;

impl<
    D: InferenceBackend + Replay,
    const LAYERS: usize,
    const HIDDEN: usize,
    const FFN: usize,
    const HEADS: usize,
    const KV_HEADS: usize,
    const VOCAB: usize,
> Llama<D, LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB>
{
    /// Transformer blocks.
    pub const LAYERS: usize = LAYERS;
    /// Width of the residual stream.
    pub const HIDDEN: usize = HIDDEN;
    /// Width of the feed-forward blocks.
    pub const FFN: usize = FFN;
    /// Query heads.
    pub const HEADS: usize = HEADS;
    /// Key/value heads (grouped-query attention).
    pub const KV_HEADS: usize = KV_HEADS;
    /// Vocabulary size.
    pub const VOCAB: usize = VOCAB;

    /// Width of one attention head, `HIDDEN / HEADS`.
    ///
    /// Its definition checks, at compile time, that the dims fit together: each at
    /// least 1, `HIDDEN` a multiple of `HEADS`, `HEADS` a multiple of `KV_HEADS`,
    /// and `HIDDEN / HEADS` even (RoPE rotates pairs of features).
    /// [`from_gguf`](Self::from_gguf) evaluates it, so loading an alias that breaks
    /// a rule fails `cargo build` with the rule, e.g. for `Llama<Cpu, 30, 577, 1536,
    /// 9, 3, 49152>`:
    ///
    /// ```text
    /// error[E0080]: evaluation panicked: Llama: HIDDEN must be a multiple of HEADS (a head is HIDDEN / HEADS wide)
    ///   = note: evaluation of `volta::models::llama::Llama::<volta::Cpu, 30, 577, 1536, 9, 3, 49152>::HEAD_DIM` failed here
    /// ```
    pub const HEAD_DIM: usize = {
        assert!(
            LAYERS > 0 && HIDDEN > 0 && FFN > 0 && HEADS > 0 && KV_HEADS > 0 && VOCAB > 0,
            "Llama: every dim (LAYERS, HIDDEN, FFN, HEADS, KV_HEADS, VOCAB) must be at least 1"
        );
        assert!(
            HIDDEN.is_multiple_of(HEADS),
            "Llama: HIDDEN must be a multiple of HEADS (a head is HIDDEN / HEADS wide)"
        );
        assert!(
            HEADS.is_multiple_of(KV_HEADS),
            "Llama: HEADS must be a multiple of KV_HEADS (each key/value head serves a group)"
        );
        assert!(
            (HIDDEN / HEADS).is_multiple_of(2),
            "Llama: the head width HIDDEN / HEADS must be even (RoPE rotates pairs)"
        );
        HIDDEN / HEADS
    };

    /// Loads the model in `gguf`: checks its dims against the type's (a
    /// [`GgufErrorKind::ModelDims`] error names the first that differs), then every
    /// weight's shape. Matrices must be Q4_0, Q4_1 or Q8_0; norms F32 or F16.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self, GgufError> {
        let head_dim = Self::HEAD_DIM; // the compile-time checks
        Self::check_dims(gguf)?;
        let config = LlamaConfig::from_gguf(gguf)?;
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
        let (h, f) = (HIDDEN, FFN);
        let kv = KV_HEADS * head_dim;
        let mut blocks = Vec::with_capacity(LAYERS);
        for i in 0..LAYERS {
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
            embedding: QTensor::from_gguf(gguf, "token_embd.weight", VOCAB, h)?,
            norm: vector("output_norm.weight", h)?,
            blocks,
            config,
            activations: Activations::default(),
        })
    }

    /// Compares the dims in `gguf`'s metadata with the type's.
    fn check_dims(gguf: &Gguf) -> Result<(), GgufError> {
        const TOKENS: &str = "tokenizer.ggml.tokens";
        let dims = [
            ("layers", "llama.block_count", LAYERS),
            ("embedding features", "llama.embedding_length", HIDDEN),
            ("feed-forward features", "llama.feed_forward_length", FFN),
            ("attention heads", "llama.attention.head_count", HEADS),
            ("key/value heads", "llama.attention.head_count_kv", KV_HEADS),
            ("tokens", TOKENS, VOCAB),
        ];
        let mut found = [0; 6];
        for (f, (_, key, _)) in found.iter_mut().zip(dims) {
            *f = match key {
                TOKENS => gguf.get_str_array(TOKENS)?.len() as u64,
                _ => gguf.get_u64(key)?,
            };
        }
        let expected = dims.map(|(_, _, n)| n as u64);
        let Some(i) = (0..dims.len()).find(|&i| found[i] != expected[i]) else {
            return Ok(());
        };
        let ty = |d: [u64; 6]| {
            format!(
                "Llama<{}, {}>",
                D::NAME,
                d.map(|n| n.to_string()).join(", ")
            )
        };
        Err(GgufError {
            path: gguf.path().to_path_buf(),
            kind: GgufErrorKind::ModelDims {
                what: dims[i].0,
                key: dims[i].1,
                found: found[i],
                expected: expected[i],
                ty: ty(expected),
                file_ty: ty(found),
            },
        })
    }

    /// The model's run-time values (context length, norm epsilon, RoPE base).
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Sets how the quantised matmuls of steps of at most
    /// [`QMATMUL_GEMV_ROWS`](crate::tensor::QMATMUL_GEMV_ROWS) tokens (decoding)
    /// multiply on the CPU: [`Activations::Int8`] (the default, as llama.cpp's CPU
    /// backend) or [`Activations::F32`] (an exact reference's products). The GPU
    /// computes in f32 either way.
    pub fn set_activations(&mut self, activations: Activations) {
        self.activations = activations;
    }

    /// How the CPU's quantised matmuls multiply (see
    /// [`set_activations`](Self::set_activations)).
    pub fn activations(&self) -> Activations {
        self.activations
    }

    /// The attention's geometry, at the caches' initial capacity.
    fn attn_shape() -> AttnShape {
        AttnShape {
            heads: HEADS,
            kv_heads: KV_HEADS,
            head_dim: Self::HEAD_DIM,
            capacity: INITIAL_CAPACITY,
        }
    }

    /// An empty cache for this model (it grows as tokens arrive, up to the
    /// context length).
    pub fn cache(&self) -> KvCache<D> {
        let c = &self.config;
        let shape = Self::attn_shape();
        KvCache::new(LAYERS, shape, c.rope_base, c.context)
    }

    /// Runs `tokens` (any number of them: the sequence length is a run-time dim)
    /// after those in `cache`, adding them to it, and returns the logits of the
    /// last one.
    ///
    /// # Panics
    /// When `tokens` is empty, holds an id outside the vocabulary, or would take
    /// the cache past the model's context length.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache<D>) -> Tensor<Rank1<VOCAB>, D> {
        assert!(!tokens.is_empty(), "Llama::forward: no tokens");
        let c = &self.config;
        assert!(
            tokens.iter().all(|&t| (t as usize) < VOCAB),
            "Llama::forward: a token id is outside the vocabulary of {}",
            VOCAB
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
            self.step(&ids, tokens.len(), &pos, &mut cache.kv, Rows::Tokens(len))
        } else {
            let max_len = D::decode_len(cache.len + 1, cache.capacity());
            self.replayed(tokens, &pos, max_len, &mut cache.decode, |ids, pos| {
                self.step(ids, 1, pos, &mut cache.kv, Rows::Tokens(max_len))
            })
        };
        cache.len += tokens.len();
        Tensor::from_raw(Default::default(), logits.reshape(&[VOCAB]))
    }

    /// An empty batch of `sequences` KV caches for this model, to decode together
    /// ([`decode_batch`](Self::decode_batch)); sequences enter by
    /// [`KvBatch::set`] from a prefilled [`KvCache`].
    pub fn batch(&self, sequences: usize) -> KvBatch<D> {
        let c = &self.config;
        let shape = Self::attn_shape();
        KvBatch::new(sequences, LAYERS, shape, c.rope_base, c.context)
    }

    /// One decode step of every sequence in `batch`: `tokens[b]` follows
    /// sequence `b` (whatever its length), and is added to it. Returns the
    /// next-token logits of every sequence, `(B, VOCAB)`: row `b` is sequence
    /// `b`'s (one read brings them all to the host). The weights are read once for the whole
    /// batch (products of many rows run on the GPU's tensor cores); on the GPU
    /// the step is captured once and replayed, as [`forward`](Self::forward)'s.
    ///
    /// # Panics
    /// When `tokens` is not one token per sequence, holds an id outside the
    /// vocabulary, or a sequence would pass the model's context length.
    pub fn decode_batch(
        &self,
        tokens: &[u32],
        batch: &mut KvBatch<D>,
    ) -> Tensor<(usize, Const<VOCAB>), D> {
        let b = batch.sequences();
        assert_eq!(
            tokens.len(),
            b,
            "Llama::decode_batch: {} tokens for {b} sequences",
            tokens.len()
        );
        assert!(
            tokens.iter().all(|&t| (t as usize) < VOCAB),
            "Llama::decode_batch: a token id is outside the vocabulary of {VOCAB}"
        );
        let longest = batch.lens.iter().max().copied().unwrap_or(0);
        assert!(
            batch.reserve(longest + 1),
            "Llama::decode_batch: a sequence of {longest} tokens is at the context length {}",
            self.config.context
        );
        let pos: Vec<u32> = batch.lens.iter().map(|&l| l as u32).collect();
        let max_len = D::decode_len(longest + 1, batch.capacity());
        let logits = self.replayed(tokens, &pos, max_len, &mut batch.decode, |ids, pos| {
            self.step(ids, b, pos, &mut batch.kv, Rows::Sequences(max_len))
        });
        for l in &mut batch.lens {
            *l += 1;
        }
        Tensor::from_raw((b, Const), logits)
    }

    /// A single-token step (of one sequence, or of each in a batch) through its
    /// captured graph: replayed with new tokens and positions once captured for
    /// `max_len` positions (on backends that capture), else run and captured by
    /// `step`.
    fn replayed(
        &self,
        tokens: &[u32],
        pos: &[u32],
        max_len: usize,
        decode: &mut Option<Decode<D>>,
        step: impl FnOnce(&<D as Memory<u32>>::Buffer, &<D as Memory<u32>>::Buffer) -> RawTensor<D, f32>,
    ) -> RawTensor<D, f32> {
        if let Some(d) = decode
            && d.max_len == max_len
        {
            D::overwrite(&mut d.token, tokens);
            D::overwrite(&mut d.pos, pos);
            D::replay(&d.graph);
            return copy(&d.logits);
        }
        let token = <D as Memory<u32>>::from_vec(tokens.to_vec());
        let pos = <D as Memory<u32>>::from_vec(pos.to_vec());
        let (logits, graph) = D::capture(|| step(&token, &pos));
        match graph {
            Some(graph) => {
                *decode = Some(Decode {
                    graph,
                    token,
                    pos,
                    logits: logits.clone(),
                    max_len,
                });
                copy(&logits)
            }
            None => logits,
        }
    }

    /// The kernels of one step: `ids` (`t` tokens) at the positions in `pos`,
    /// as `rows` says, attending over `kv`. Returns the logits of the last token
    /// (one sequence) or of every row (a batch).
    fn step(
        &self,
        ids: &<D as Memory<u32>>::Buffer,
        t: usize,
        pos: &<D as Memory<u32>>::Buffer,
        kv: &mut KvLayers<D>,
        rows: Rows,
    ) -> RawTensor<D, f32> {
        let c = &self.config;
        let eps = c.eps as f32;
        let ids = RawTensor::<D, u32>::leaf(ids.clone(), Layout::contiguous(&[t]));
        let (max_len, positions) = match rows {
            Rows::Tokens(len) => (len, 1),
            Rows::Sequences(len) => (len, t),
        };
        let pos = RawTensor::<D, u32>::leaf(pos.clone(), Layout::contiguous(&[positions]));
        let mut x = self.embedding.rows(&ids);
        let shape = kv.shape;
        for (i, b) in self.blocks.iter().enumerate() {
            let qkv = x.qmatmul(
                &b.qkv,
                QMatmulOptions {
                    norm: Some((&b.attn_norm, eps)),
                    activations: self.activations,
                    ..Default::default()
                },
            );
            let attn = D::attend(
                qkv.view(),
                kv.rope.view(),
                pos.view(),
                kv.layers[i].buffer_mut(),
                &shape,
                max_len,
            );
            let attn = RawTensor::leaf(attn, Layout::contiguous(&[t, HIDDEN]));
            x = attn.qmatmul(
                &b.wo,
                QMatmulOptions {
                    add: Some(&x),
                    activations: self.activations,
                    ..Default::default()
                },
            );
            let gated = x.qmatmul(
                &b.gate_up,
                QMatmulOptions {
                    norm: Some((&b.ffn_norm, eps)),
                    glu: true,
                    activations: self.activations,
                    ..Default::default()
                },
            );
            x = gated.qmatmul(
                &b.down,
                QMatmulOptions {
                    add: Some(&x),
                    activations: self.activations,
                    ..Default::default()
                },
            );
        }
        let last = match rows {
            Rows::Tokens(_) => x.narrow(0, t - 1, 1),
            Rows::Sequences(_) => x,
        };
        last.qmatmul(
            &self.embedding,
            QMatmulOptions {
                norm: Some((&self.norm, eps)),
                activations: self.activations,
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

/// What a step's rows are; each holds the positions attention launches cover.
#[derive(Clone, Copy)]
enum Rows {
    /// Consecutive tokens of one sequence.
    Tokens(usize),
    /// One token of each sequence of a batch.
    Sequences(usize),
}

/// A copy of a captured step's output: the next replay overwrites the original.
fn copy<D: InferenceBackend>(x: &RawTensor<D, f32>) -> RawTensor<D, f32> {
    let l = *x.layout();
    RawTensor::leaf(<D as Memory<f32>>::contiguous(x.buffer(), &l), l)
}
