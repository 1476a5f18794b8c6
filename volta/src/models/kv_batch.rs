//! The KV caches of several sequences decoded together (a server's requests, or
//! `n` completions of one prompt): per layer one [`KvStore`] of `(2, B,
//! kv_heads, capacity, head_dim)`, each sequence with its own length. A sequence
//! enters by copying a prefilled [`KvCache`] into its slot
//! ([`KvBatch::set`]); then every [`Llama::decode_batch`](super::llama::Llama::decode_batch)
//! step decodes one token of each sequence in one pass over the weights.
use super::kv_cache::{Decode, KvCache, KvLayers};
use crate::backend::infer::AttnShape;
use crate::backend::{InferenceBackend, Replay};

/// The keys and values of `B` sequences, per layer `(2, B, kv_heads, capacity,
/// head_dim)` in device memory, with each sequence's length; grows by doubling.
pub struct KvBatch<D: InferenceBackend + Replay> {
    pub(crate) kv: KvLayers<D>,
    pub(crate) lens: Vec<usize>,
    /// The captured batched step, once one has run.
    pub(crate) decode: Option<Decode<D>>,
}

impl<D: InferenceBackend + Replay> KvBatch<D> {
    /// `sequences` empty sequences of `layers` layers, room for `shape.capacity`
    /// positions each, growing (by doubling) up to `limit`.
    ///
    /// # Panics
    /// When `sequences` is 0.
    pub fn new(
        sequences: usize,
        layers: usize,
        shape: AttnShape,
        rope_base: f64,
        limit: usize,
    ) -> Self {
        assert!(sequences > 0, "KvBatch: at least one sequence");
        KvBatch {
            kv: KvLayers::new(sequences, layers, shape, rope_base, limit),
            lens: vec![0; sequences],
            decode: None,
        }
    }

    /// Sequences in the batch.
    pub fn sequences(&self) -> usize {
        self.lens.len()
    }

    /// Tokens in each sequence.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Positions each sequence holds before the batch must grow.
    pub fn capacity(&self) -> usize {
        self.kv.shape.capacity
    }

    /// Puts the tokens of `cache` (a prefilled sequence of the same model) in
    /// slot `seq`, replacing what it held: one copy per layer.
    ///
    /// # Panics
    /// When `seq` is not a slot, or `cache` is of another model (other layers or
    /// head dims).
    #[track_caller]
    pub fn set(&mut self, seq: usize, cache: &KvCache<D>) {
        assert!(
            seq < self.sequences(),
            "KvBatch::set: slot {seq} of a batch of {}",
            self.sequences()
        );
        let (a, b) = (&cache.kv.shape, &self.kv.shape);
        assert!(
            cache.kv.layers.len() == self.kv.layers.len()
                && (a.kv_heads, a.head_dim) == (b.kv_heads, b.head_dim),
            "KvBatch::set: a cache of another model"
        );
        self.reserve(cache.len());
        for (to, from) in self.kv.layers.iter_mut().zip(&cache.kv.layers) {
            to.copy_sequence(seq, from, cache.len());
        }
        self.lens[seq] = cache.len();
    }

    /// Makes room for `need` positions per sequence (dropping the captured step
    /// when the stores grow); `false` past the limit.
    pub(crate) fn reserve(&mut self, need: usize) -> bool {
        match self.kv.reserve(need) {
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
