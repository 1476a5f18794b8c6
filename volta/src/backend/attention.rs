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

/// Where attention writes a result that matches the view `like` (the output and
/// `dq` match the queries, `dk` and `dv` the keys and values): a dense buffer
/// whose rows of features lie in the order `like`'s strides give its batch, head
/// and row axes. Heads split off a `[B, T, H·d]` projection (`[B, T, H, d]`
/// permuted) give an output laid out as `[B, T, H, d]`, so merging the heads back
/// is a free view rather than a copy. Contiguous when `like`'s features are not
/// its innermost axis.
///
/// ```
/// use volta::backend::{Layout, packed_like};
/// // Heads of a [B 2, T 5, H 3 · d 4] projection, viewed as [B, H, T, d].
/// let heads = Layout::contiguous(&[2, 5, 3, 4]).permute(&[0, 2, 1, 3]);
/// assert_eq!(packed_like(&heads), heads);
/// assert_eq!(packed_like(&Layout::contiguous(&[2, 3, 5, 4])), Layout::contiguous(&[2, 3, 5, 4]));
/// ```
pub fn packed_like(like: &crate::layout::Layout) -> crate::layout::Layout {
    use crate::layout::Layout;
    let d = &like.dims;
    if d.len() != 4 || (like.strides[3] != 1 && d[3] > 1) {
        return Layout::contiguous(d);
    }
    // The batch, head and row axes, outermost first (ties keep their order;
    // size-1 axes, whose strides mean nothing, outermost).
    let mut order = [0, 1, 2];
    order.sort_by_key(|&a| {
        std::cmp::Reverse(if d[a] == 1 {
            usize::MAX
        } else {
            like.strides[a]
        })
    });
    let mut out = Layout::contiguous(d);
    let mut stride = d[3];
    for &a in order.iter().rev() {
        out.strides[a] = stride;
        stride *= d[a];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::packed_like;
    use crate::layout::Layout;

    #[test]
    fn results_are_packed_in_the_order_of_their_view() {
        // Heads split off a [2, 5, 3·4] projection: [2, 3, 5, 4] viewed from
        // [2, 5, 3, 4]; the result is laid out as [2, 5, 3, 4] too.
        let heads = Layout::contiguous(&[2, 5, 3, 4]).permute(&[0, 2, 1, 3]);
        assert_eq!(packed_like(&heads), heads);
        // The same heads read from a fused [2, 5, 3·12] projection (a narrow):
        // packed without the other parts' columns.
        let fused = Layout::contiguous(&[2, 5, 9, 4])
            .narrow(2, 3, 3)
            .permute(&[0, 2, 1, 3]);
        assert_eq!(packed_like(&fused), heads);
        // Contiguous views, and views whose features are not innermost.
        let plain = Layout::contiguous(&[2, 3, 5, 4]);
        assert_eq!(packed_like(&plain), plain);
        let transposed = Layout::contiguous(&[2, 3, 4, 5]).permute(&[0, 1, 3, 2]);
        assert_eq!(packed_like(&transposed), Layout::contiguous(&[2, 3, 5, 4]));
        // Size-1 axes take no part in the order.
        let one = Layout::contiguous(&[1, 5, 3, 4]).permute(&[0, 2, 1, 3]);
        assert_eq!(packed_like(&one), one);
    }
}
