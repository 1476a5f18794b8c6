//! A transformer's KV cache in device memory: per layer, a [`KvStore`] of keys and
//! values `(2, 1, kv_heads, capacity, head_dim)` (the same store the `model!`
//! layers' [`AttentionCache`](crate::nn::AttentionCache) holds), written in
//! place by the fused decode kernel at the position of each new token, and the
//! RoPE table for every position it can hold. The cache also keeps the captured
//! decode step of its model (see [`Replay`]): that graph binds these very
//! buffers, so it lives and dies with them.
use crate::backend::infer::{AttnShape, rope_table};
use crate::backend::{Buf, InferenceBackend, Replay};
use crate::nn::KvStore;
use crate::tensor::RawTensor;

/// Per layer a [`KvStore`] of `(2, B, kv_heads, capacity, head_dim)`, and the
/// RoPE table for every position they hold: what [`KvCache`] (B = 1) and
/// [`KvBatch`](super::KvBatch) share.
pub(crate) struct KvLayers<D: InferenceBackend> {
    pub layers: Vec<KvStore<D, f32>>,
    pub rope: RawTensor<D, f32>,
    pub shape: AttnShape,
    rope_base: f64,
    /// The most positions the model takes (its context length).
    pub limit: usize,
}

impl<D: InferenceBackend> KvLayers<D> {
    /// `layers` empty stores of `batch` sequences for `shape.capacity` positions
    /// (at least 1, at most `limit`).
    pub fn new(
        batch: usize,
        layers: usize,
        shape: AttnShape,
        rope_base: f64,
        limit: usize,
    ) -> Self {
        let shape = AttnShape {
            capacity: shape.capacity.clamp(1, limit.max(1)),
            ..shape
        };
        let store = || KvStore::new(batch, shape.kv_heads, shape.head_dim, shape.capacity);
        KvLayers {
            layers: (0..layers).map(|_| store()).collect(),
            rope: rope_table_of::<D>(&shape, rope_base),
            shape,
            rope_base,
            limit,
        }
    }

    /// Room for `need` positions, doubling the capacity as needed: `None` past
    /// the limit, else whether the stores grew (new buffers: a captured step that
    /// bound the old ones must go).
    pub fn reserve(&mut self, need: usize) -> Option<bool> {
        if need > self.limit {
            return None;
        }
        if need <= self.shape.capacity {
            return Some(false);
        }
        let mut cap = self.shape.capacity;
        while cap < need {
            cap = (cap * 2).min(self.limit);
        }
        for layer in &mut self.layers {
            layer.grow(cap);
        }
        self.shape.capacity = cap;
        self.rope = rope_table_of::<D>(&self.shape, self.rope_base);
        Some(true)
    }
}

/// The RoPE table for every position of `s`'s capacity.
fn rope_table_of<D: InferenceBackend>(s: &AttnShape, base: f64) -> RawTensor<D, f32> {
    RawTensor::from_vec(
        rope_table(s.capacity, s.head_dim, base),
        &[s.capacity, s.head_dim / 2, 2],
    )
}

/// The keys and values of the tokens seen so far, per layer `(2, 1, kv_heads,
/// capacity, head_dim)` in device memory, written in place; grows by doubling.
pub struct KvCache<D: InferenceBackend + Replay> {
    pub(crate) kv: KvLayers<D>,
    pub(crate) len: usize,
    /// The captured single-token step, once one has run.
    pub(crate) decode: Option<Decode<D>>,
}

/// A captured decode step: its graph, the inputs it reads, the logits it writes
/// and the positions it was captured for (its attention's `max_len`).
pub(crate) struct Decode<D: InferenceBackend + Replay> {
    pub graph: D::Graph,
    pub token: Buf<D, u32>,
    pub pos: Buf<D, u32>,
    pub logits: RawTensor<D, f32>,
    pub max_len: usize,
}

impl<D: InferenceBackend + Replay> KvCache<D> {
    /// An empty cache of `layers` layers for `capacity` positions, growing (by
    /// doubling) up to `limit`.
    pub fn new(layers: usize, shape: AttnShape, rope_base: f64, limit: usize) -> Self {
        KvCache {
            kv: KvLayers::new(1, layers, shape, rope_base, limit),
            len: 0,
            decode: None,
        }
    }

    /// Tokens in the cache.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions it holds before it must grow.
    pub fn capacity(&self) -> usize {
        self.kv.shape.capacity
    }

    /// The most positions it can grow to: the model's context length.
    pub fn limit(&self) -> usize {
        self.kv.limit
    }

    /// Forgets every token (keeping the memory, and the captured decode step).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Makes room for `extra` more tokens, doubling the capacity as needed (which
    /// drops the captured decode step: it bound the old buffers). `false` when
    /// that would pass the limit.
    pub(crate) fn reserve(&mut self, extra: usize) -> bool {
        match self.kv.reserve(self.len + extra) {
            None => false,
            Some(grew) => {
                if grew {
                    self.decode = None;
                }
                true
            }
        }
    }
}
