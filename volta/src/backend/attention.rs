//! What a fused attention kernel computes: the scale, the causal mask and dropout
//! on the attention weights, shared by the forward and the backward kernels of
//! every device.
use crate::random::uniform_at;

/// The parameters of [`Backend::attention`](super::Backend::attention) and its
/// backward: `dropout(softmax(scale·q·kᵀ + mask))·v`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    /// Multiplies each score `q·k` (usually `1/√d`).
    pub scale: f64,
    /// `Some(start)`: causal, query row `t` sits at position `start + t` and sees
    /// keys `0..=start + t`; `None`: every query sees every key.
    pub causal: Option<usize>,
    /// The probability that an attention weight is zeroed (the others are scaled
    /// by `1/(1 − p)`), as PyTorch's `scaled_dot_product_attention(dropout_p=p)`;
    /// 0: none. Which weights drop is [`keep`](Self::keep)'s rule.
    pub dropout: f64,
    /// The dropout mask's stream.
    pub seed: u64,
}

impl AttentionSpec {
    /// No dropout, the given scale and mask.
    pub fn new(scale: f64, causal: Option<usize>) -> Self {
        AttentionSpec {
            scale,
            causal,
            dropout: 0.0,
            seed: 0,
        }
    }

    /// The factor of the weight of key `key` for score row `row` (`row` =
    /// `(b·H + h)·T + t`, over the query heads): 0 where it drops, `1/(1 − p)`
    /// elsewhere. It drops where element `key·2³² + row` of the counter stream
    /// [`uniform_at`] is below `p`, in `f32` as the GPU compares, so every device
    /// drops the same weights and the backward pass finds them again without
    /// storing a mask.
    pub fn keep(&self, row: usize, key: usize) -> f64 {
        if self.dropout == 0.0 {
            return 1.0;
        }
        let u = uniform_at(self.seed, ((key as u64) << 32) | row as u64);
        if u >= self.dropout as f32 {
            self.keep_scale()
        } else {
            0.0
        }
    }

    /// What a kept weight is multiplied by: `1/(1 − p)` (0 when `p` is 1, where
    /// every weight drops).
    pub fn keep_scale(&self) -> f64 {
        if self.dropout >= 1.0 {
            0.0
        } else {
            1.0 / (1.0 - self.dropout)
        }
    }

    /// How many keys (from key 0) query row `t` sees among `s`.
    pub fn visible(&self, t: usize, s: usize) -> usize {
        match self.causal {
            Some(start) => (start + t + 1).min(s),
            None => s,
        }
    }
}

/// The dims of an attention call, read off its views: queries `[B, H, T, d]`,
/// keys and values `[B, Hkv, S, d]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttentionDims {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub queries: usize,
    pub keys: usize,
    pub head_dim: usize,
}

impl AttentionDims {
    /// From the query and key dims (checked by the op).
    pub fn of(q: &[usize], k: &[usize]) -> Self {
        AttentionDims {
            batch: q[0],
            heads: q[1],
            kv_heads: k[1],
            queries: q[2],
            keys: k[2],
            head_dim: q[3],
        }
    }
    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }
}
