//! What a fused attention kernel computes: the scale and the causal mask, shared by
//! the forward and the backward kernels of every device.

/// The parameters of [`Backend::attention`](super::Backend::attention) and its
/// backward: `softmax(scale·q·kᵀ + mask)·v`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    /// Multiplies each score `q·k` (usually `1/√d`).
    pub scale: f64,
    /// `Some(start)`: causal, query row `t` sits at position `start + t` and sees
    /// keys `0..=start + t`; `None`: every query sees every key.
    pub causal: Option<usize>,
}

impl AttentionSpec {
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
