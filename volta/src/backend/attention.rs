//! What a fused attention kernel computes: the scale, the mask (causal, and each
//! batch element's range of keys) and dropout on the attention weights, shared
//! by the forward and the backward kernels of every device.
use crate::random::uniform_hash;
use std::ops::Range;
use std::sync::Arc;
use volta_kernels::Float;

/// The parameters of [`Backend::attention`](super::Backend::attention) and its
/// backward: `dropout(softmax(scale·q·kᵀ + mask))·v`. A query row that sees no
/// key gives zeros (and passes no gradient), as PyTorch's
/// `scaled_dot_product_attention`.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionSpec {
    /// Multiplies each score `q·k` (usually `1/√d`).
    pub scale: f64,
    /// `Some(start)`: causal, query row `t` sits at position `start + t` and sees
    /// keys `0..=start + t`; `None`: every query sees every key.
    pub causal: Option<usize>,
    /// `Some(ranges)`: the queries of batch element `b` see only the keys in
    /// `ranges[b]` (the rest is padding), within the causal bound; `None`:
    /// every key. One range per batch element, each inside `0..S`.
    pub keys: Option<Arc<[Range<usize>]>>,
    /// The probability that an attention weight is zeroed (the others are scaled
    /// so that each weight keeps its expectation), as PyTorch's
    /// `scaled_dot_product_attention(dropout_p=p)`; 0: none. It is applied to
    /// the nearest 1/256, as FlashAttention's kernels apply it (at least 1/256
    /// when positive): see [`keep`](Self::keep).
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
            keys: None,
            dropout: 0.0,
            seed: 0,
        }
    }

    /// The factor of the weight of key `key` for score row `row` (`row` =
    /// `(b·H + h)·T + t`, over the query heads): 0 where it drops,
    /// [`keep_scale`](Self::keep_scale) elsewhere. One draw of the counter
    /// stream ([`uniform_hash`]) serves a 2×2 block of weights (rows `2i, 2i + 1`,
    /// keys `2j, 2j + 1`: element `j·2³² + i`), a byte each (byte
    /// `2·(row mod 2) + key mod 2`); a weight drops where its byte is below
    /// [`drop_threshold`](Self::drop_threshold). So every device drops the same
    /// weights, the backward pass finds them again without storing a mask, and
    /// a kernel draws once per four weights rather than once per weight.
    pub fn keep(&self, row: usize, key: usize) -> f64 {
        let mut factor = [0.0];
        self.keep_factors(row, key..key + 1, &mut factor);
        factor[0]
    }

    /// [`keep`](Self::keep) of each key in `keys` for score row `row`, written
    /// in order to `factors` (one per key): a CPU kernel's inner loop. Each key
    /// draws its pair's number again, so that the loop has no branch and runs in
    /// vector lanes.
    #[inline(always)]
    pub(crate) fn keep_factors<T: Float>(&self, row: usize, keys: Range<usize>, factors: &mut [T]) {
        let (threshold, scale) = (self.drop_threshold(), self.keep_scale());
        if threshold == 0 {
            factors.fill(T::ONE);
            return;
        }
        let (kept, row_block, row_byte) = (T::from_f64(scale), (row >> 1) as u64, 2 * (row & 1));
        for (key, factor) in keys.zip(factors) {
            let block = (((key >> 1) as u64) << 32) | row_block;
            let byte = (uniform_hash(self.seed, block) >> (8 * (row_byte + (key & 1)))) & 0xff;
            *factor = if byte >= threshold { kept } else { T::ZERO };
        }
    }

    /// The byte below which a weight drops: `p` in 256ths, rounded, at least 1
    /// when `p > 0` (0: no dropout; 256: every weight drops).
    pub fn drop_threshold(&self) -> u32 {
        if self.dropout <= 0.0 {
            0
        } else {
            ((self.dropout.min(1.0) * 256.0).round() as u32).max(1)
        }
    }

    /// What a kept weight is multiplied by: `1/(1 − p)` for the `p` that
    /// [`drop_threshold`](Self::drop_threshold) applies, so that the expectation
    /// is unchanged (0 when every weight drops).
    pub fn keep_scale(&self) -> f64 {
        let threshold = self.drop_threshold();
        if threshold >= 256 {
            0.0
        } else {
            256.0 / f64::from(256 - threshold)
        }
    }

    /// The keys that query row `t` of batch element `b` sees among `s`: a range
    /// of its batch element's keys, cut at the causal bound (empty when the
    /// row sees none).
    pub fn visible(&self, b: usize, t: usize, s: usize) -> Range<usize> {
        let end = match self.causal {
            Some(start) => (start + t + 1).min(s),
            None => s,
        };
        match &self.keys {
            Some(ranges) => {
                let r = &ranges[b];
                r.start..end.min(r.end).max(r.start)
            }
            None => 0..end,
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

/// Whether `q`, `k` and `v` (`[B, H, T, d]` views) are the heads of one packed
/// projection `[B, T, (H + 2·H_kv)·d]`, so that their gradients can be written
/// through the same views into one buffer without overlapping (and the
/// concatenation of those gradients is then that buffer, not a copy): features
/// contiguous, heads adjacent, one batch and one row stride, and each row's
/// runs of `H·d` features apart inside one row stride.
///
/// ```
/// use volta::backend::{Layout, heads_of_one_projection};
/// // [B 2, T 5, 3 · (H 2 · d 4)] split into q, k and v, viewed as [B, H, T, d].
/// let part = |i: usize| {
///     let mut l = Layout::contiguous(&[2, 5, 24]);
///     l.dims[2] = 8;
///     l.offset = 8 * i;
///     l.reshape(&[2, 5, 2, 4]).unwrap().permute(&[0, 2, 1, 3])
/// };
/// assert!(heads_of_one_projection([&part(0), &part(1), &part(2)]));
/// assert!(!heads_of_one_projection([&part(0), &part(0), &part(2)]));
/// ```
pub fn heads_of_one_projection(views: [&crate::layout::Layout; 3]) -> bool {
    let first = views[0];
    if views.iter().any(|l| l.dims.len() != 4) {
        return false;
    }
    let (batch_stride, row_stride) = (first.strides[0], first.strides[2]);
    let rows = views.iter().map(|l| l.dims[2]).max().unwrap_or(0);
    let alike = views.iter().all(|l| {
        let (d, heads) = (l.dims[3], l.dims[1]);
        l.dims[0] == first.dims[0]
            && l.strides[3] == 1
            && (heads == 1 || l.strides[1] == d)
            && l.strides[2] == row_stride
            && l.strides[0] == batch_stride
    });
    // Each view's features of a row: [offset, offset + H·d).
    let mut runs: Vec<(usize, usize)> = views
        .iter()
        .map(|l| (l.offset, l.offset + l.dims[1] * l.dims[3]))
        .collect();
    runs.sort_unstable();
    let apart = runs.windows(2).all(|w| w[0].1 <= w[1].0);
    let in_a_row = runs[2].1 <= runs[0].0 + row_stride;
    let batches_apart = first.dims[0] == 1 || batch_stride >= rows * row_stride;
    alike && apart && in_a_row && batches_apart
}

#[cfg(test)]
mod tests {
    use super::{AttentionSpec, heads_of_one_projection, packed_like};
    use crate::layout::Layout;

    /// `keep_factors` gives each key the factor of its byte of its pair's draw,
    /// from odd and even keys and rows, at every `p`.
    #[test]
    fn keep_factors_gives_each_key_its_byte() {
        for p in [0.0, 0.2, 1.0] {
            let spec = AttentionSpec {
                dropout: p,
                seed: 5,
                ..AttentionSpec::new(1.0, None)
            };
            let (threshold, scale) = (spec.drop_threshold(), spec.keep_scale());
            for (row, keys) in [(0, 0..9), (3, 1..8), (6, 5..5), (7, 2..3)] {
                let mut got = vec![f32::NAN; keys.len()];
                spec.keep_factors(row, keys.clone(), &mut got);
                let want: Vec<f32> = keys
                    .map(|key| {
                        let draw = crate::random::uniform_hash(
                            5,
                            ((key as u64 >> 1) << 32) | (row as u64 >> 1),
                        );
                        let byte = (draw >> (8 * (2 * (row & 1) + (key & 1)))) & 0xff;
                        if threshold > 0 && byte < threshold {
                            0.0
                        } else if threshold > 0 {
                            scale as f32
                        } else {
                            1.0
                        }
                    })
                    .collect();
                assert_eq!(got, want, "p {p} row {row}");
            }
        }
    }

    /// Dropout takes `p` to the nearest 256th (at least one when positive), a
    /// kept weight's factor keeps every weight's expectation at 1, and the four
    /// weights of a draw drop independently: two neighbours both drop about
    /// `p²` of the time, not `p`.
    #[test]
    fn dropout_keeps_the_expectation_and_draws_each_weight_apart() {
        let spec = |p| AttentionSpec {
            dropout: p,
            seed: 9,
            ..AttentionSpec::new(1.0, None)
        };
        for (p, threshold) in [
            (0.0, 0),
            (0.001, 1),
            (0.1, 26),
            (0.2, 51),
            (0.5, 128),
            (1.0, 256),
        ] {
            assert_eq!(spec(p).drop_threshold(), threshold, "p {p}");
        }
        assert_eq!(spec(1.0).keep_scale(), 0.0);
        let (rows, keys) = (256, 256);
        let n = (rows * keys) as f64;
        for p in [0.1, 0.2, 0.5] {
            let s = spec(p);
            let mean = (0..rows * keys)
                .map(|i| s.keep(i / keys, i % keys))
                .sum::<f64>()
                / n;
            assert!((mean - 1.0).abs() < 0.02, "p {p}: mean factor {mean}");
            let dropped = |r: usize, k: usize| s.keep(r, k) == 0.0;
            for (dr, dk) in [(0, 1), (1, 0), (1, 1)] {
                let both = (0..rows / 2)
                    .flat_map(|r| (0..keys / 2).map(move |k| (2 * r, 2 * k)))
                    .filter(|&(r, k)| dropped(r, k) && dropped(r + dr, k + dk))
                    .count() as f64
                    / (n / 4.0);
                let share = f64::from(s.drop_threshold()) / 256.0;
                assert!(
                    (both - share * share).abs() < 0.25 * share * share + 0.005,
                    "p {p}: a weight and its neighbour (+{dr}, +{dk}) both drop {both}"
                );
            }
        }
    }

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

    /// A fused projection's q, k and v heads (and with fewer key/value heads)
    /// are one projection's; overlapping or interleaved views, views a row
    /// stride cannot hold, and heads not adjacent are not.
    #[test]
    fn heads_of_one_projection_are_disjoint_views() {
        // [B 2, T 3, width] split at `starts` into parts of `heads` heads of 4.
        let part = |width: usize, start: usize, heads: usize| {
            let mut l = Layout::contiguous(&[2, 3, width]);
            l.dims[2] = heads * 4;
            l.offset = start;
            l.reshape(&[2, 3, heads, 4]).unwrap().permute(&[0, 2, 1, 3])
        };
        let (q, k, v) = (part(24, 0, 2), part(24, 8, 2), part(24, 16, 2));
        assert!(heads_of_one_projection([&q, &k, &v]));
        assert!(heads_of_one_projection([&v, &q, &k]));
        // Grouped: 4 query heads, 1 key/value head.
        let (q, k, v) = (part(24, 0, 4), part(24, 16, 1), part(24, 20, 1));
        assert!(heads_of_one_projection([&q, &k, &v]));
        // The same view twice, overlapping runs, runs past the row stride.
        let (q, k) = (part(24, 0, 2), part(24, 4, 2));
        assert!(!heads_of_one_projection([&q, &q, &part(24, 16, 2)]));
        assert!(!heads_of_one_projection([&q, &k, &part(24, 16, 2)]));
        assert!(!heads_of_one_projection([
            &q,
            &part(24, 8, 2),
            &part(24, 18, 2)
        ]));
        // Heads not adjacent: [B, H, T, d] contiguous tensors.
        let own = |offset| Layout {
            offset,
            ..Layout::contiguous(&[2, 2, 3, 4])
        };
        assert!(!heads_of_one_projection([&own(0), &own(48), &own(96)]));
    }
}
