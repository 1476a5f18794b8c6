//! Scaled dot-product attention with grouped-query heads, fused: one kernel per
//! device computes `softmax(q·kᵀ/√d + mask)·v` tile by tile and keeps each row's
//! log-sum-exp, and one backward recomputes the scores from it, so neither pass
//! stores the `T×S` score matrix (flash attention). Shape logic and autograd are
//! here, once; the devices supply the kernels.
use crate::autograd::Op;
use crate::backend::{AttentionSpec, Backend};
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::{Dim, ShapeError};
use crate::tensor::{RawTensor, Tensor};
use std::ops::Range;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// `softmax(q·kᵀ/√d + mask)·v` for queries `self` `[B, H, T, d]` and keys and
    /// values `[B, Hkv, S, d]`, `H` a multiple of `Hkv`: query head `h` reads kv
    /// head `h / (H/Hkv)` (grouped-query attention, llama.cpp's grouping). With
    /// `causal = Some(start)`, query row `t` is at position `start + t` and sees
    /// keys `0..=start + t`; with `None` every query sees every key.
    ///
    /// # Panics
    /// When the dims do not fit (rank, batch, head grouping, head dim, key and value
    /// lengths), or when there is no key (`S == 0`).
    #[track_caller]
    pub fn attention(&self, k: &Self, v: &Self, causal: Option<usize>) -> Self {
        self.attention_with_dropout(k, v, causal, 0.0, 0)
    }

    /// [`attention`](Self::attention) with dropout on the attention weights, as
    /// PyTorch's `scaled_dot_product_attention(dropout_p=p)`: each weight is
    /// zeroed with probability `p` and the others scaled by `1/(1 − p)`, after the
    /// softmax. The mask comes from `seed` by [`AttentionSpec::keep`]'s rule, the
    /// same on every device; neither pass stores it.
    ///
    /// # Panics
    /// As [`attention`](Self::attention), and when `p` is outside `[0, 1]`.
    #[track_caller]
    pub fn attention_with_dropout(
        &self,
        k: &Self,
        v: &Self,
        causal: Option<usize>,
        p: f64,
        seed: u64,
    ) -> Self {
        let d = self.dims().last().copied().unwrap_or(1);
        self.attention_with(
            k,
            v,
            AttentionSpec {
                dropout: p,
                seed,
                ..AttentionSpec::new(1.0 / (d as f64).sqrt(), causal)
            },
        )
    }

    /// Fused attention as `spec` says: its scale, its causal mask, each batch
    /// element's range of keys (padding: `spec.keys`) and its dropout. A query
    /// row that sees no key gives zeros and passes no gradient, as PyTorch's
    /// `scaled_dot_product_attention`.
    ///
    /// ```
    /// use volta::backend::AttentionSpec;
    /// use volta::tensor::RawTensor;
    /// let q = RawTensor::<volta::Cpu, f32>::from_vec(vec![1.0; 2 * 4], &[2, 1, 1, 4]);
    /// let v = RawTensor::from_vec((0..2 * 3 * 4).map(|i| i as f32).collect(), &[2, 1, 3, 4]);
    /// // The first batch element sees its keys 0 and 1, the second its key 2.
    /// let spec = AttentionSpec {
    ///     keys: Some(vec![0..2, 2..3].into()),
    ///     ..AttentionSpec::new(0.5, None)
    /// };
    /// let out = q.attention_with(&q.expand(&[2, 1, 3, 4]), &v, spec).to_vec();
    /// assert_eq!(out, [2.0, 3.0, 4.0, 5.0, 20.0, 21.0, 22.0, 23.0]);
    /// ```
    ///
    /// # Panics
    /// As [`attention`](Self::attention); when the dropout probability is
    /// outside `[0, 1]`; when `spec.keys` does not hold one range per batch
    /// element, each inside `0..S`.
    #[track_caller]
    pub fn attention_with(&self, k: &Self, v: &Self, spec: AttentionSpec) -> Self {
        let p = spec.dropout;
        assert!(
            (0.0..=1.0).contains(&p),
            "attention: the dropout probability must be in [0, 1], got {p}"
        );
        let (q_dims, k_dims) = (self.dims().to_vec(), k.dims().to_vec());
        let fits = q_dims.len() == 4
            && k_dims.len() == 4
            && v.dims() == k_dims.as_slice()
            && q_dims[0] == k_dims[0]
            && k_dims[1] > 0
            && q_dims[1].is_multiple_of(k_dims[1])
            && q_dims[3] == k_dims[3]
            && k_dims[2] > 0;
        assert!(
            fits,
            "attention: queries {q_dims:?} do not fit keys {k_dims:?} and values {:?} \
             (expected [B, H, T, d] and [B, Hkv, S, d] with H a multiple of Hkv and S > 0)",
            v.dims()
        );
        if let Some(ranges) = &spec.keys
            && let Err(e) = check_key_ranges(ranges, q_dims[0], k_dims[2])
        {
            panic!("attention: {e}");
        }
        let (out, lse) = D::attention(self.view(), k.view(), v.view(), &spec);
        let lse = RawTensor::leaf(lse, Layout::contiguous(&q_dims[..3]));
        Self::from_op(
            out,
            crate::backend::packed_like(self.layout()),
            || Op::Attention {
                q: self.clone(),
                k: k.clone(),
                v: v.clone(),
                lse,
                spec,
            },
            &[self, k, v],
        )
    }

    /// Causal [`attention`](Self::attention): query row `t` at position
    /// `start + t` sees keys `0..=start + t`.
    ///
    /// # Panics
    /// As [`attention`](Self::attention).
    #[track_caller]
    pub fn causal_attention(&self, k: &Self, v: &Self, start: usize) -> Self {
        self.attention(k, v, Some(start))
    }
}

/// Scaled dot-product attention over typed tensors, fused (see
/// [`RawTensor::attention`]): queries `[B, H, T, d]`, keys and values
/// `[B, Hkv, S, d]`. `causal` hides from each query the keys after its position,
/// the queries being the last `T` of the `S` positions (query `t` at `S − T + t`,
/// as in a step over a KV cache). Batch and head dims are shared type parameters,
/// so a mismatch of static dims does not compile; `usize` dims and the head
/// grouping are checked at run time.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::attention;
/// let q = Tensor::<Rank4<1, 4, 3, 8>>::ones();
/// let kv = Tensor::<Rank4<1, 2, 5, 8>>::ones();
/// let out = attention(&q, &kv, &kv, true);
/// assert_eq!(out.to_vec(), vec![1.0; 4 * 3 * 8]);
/// ```
///
/// # Panics
/// When `causal` and there are fewer keys than queries (the first queries would
/// see none), or as [`RawTensor::attention`].
#[track_caller]
pub fn attention<B, H, T, Hd, Hkv, S, D, E>(
    q: &Tensor<(B, H, T, Hd), D, E>,
    k: &Tensor<(B, Hkv, S, Hd), D, E>,
    v: &Tensor<(B, Hkv, S, Hd), D, E>,
    causal: bool,
) -> Tensor<(B, H, T, Hd), D, E>
where
    B: Dim,
    H: Dim,
    T: Dim,
    Hd: Dim,
    Hkv: Dim,
    S: Dim,
    D: Backend<E>,
    E: Float,
{
    let (t, s) = (q.raw().dims()[2], k.raw().dims()[2]);
    let start = causal_start(causal, t, s);
    q.map_raw(|r| r.attention(k.raw(), v.raw(), start))
}

/// Causal grouped-query attention over typed tensors: queries `[B, H, T, d]`, keys
/// and values `[B, Hkv, S, d]` (see [`RawTensor::causal_attention`]). The batch and
/// head dims are shared type parameters, so a mismatch of static dims does not
/// compile; `usize` dims and the head grouping are checked at run time.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::causal_attention;
/// let q = Tensor::<Rank4<1, 4, 3, 8>>::ones();
/// let kv = Tensor::<Rank4<1, 2, 3, 8>>::ones();
/// let out = causal_attention(&q, &kv, &kv, 0);
/// assert_eq!(out.to_vec(), vec![1.0; 4 * 3 * 8]);
/// ```
#[track_caller]
pub fn causal_attention<B, H, T, Hd, Hkv, S, D, E>(
    q: &Tensor<(B, H, T, Hd), D, E>,
    k: &Tensor<(B, Hkv, S, Hd), D, E>,
    v: &Tensor<(B, Hkv, S, Hd), D, E>,
    start: usize,
) -> Tensor<(B, H, T, Hd), D, E>
where
    B: Dim,
    H: Dim,
    T: Dim,
    Hd: Dim,
    Hkv: Dim,
    S: Dim,
    D: Backend<E>,
    E: Float,
{
    q.map_raw(|r| r.causal_attention(k.raw(), v.raw(), start))
}

/// Queries or outputs `[B, H, T, d]`.
type Heads<B, H, T, Hd, D, E> = Tensor<(B, H, T, Hd), D, E>;

/// [`attention`] over a padded batch: the queries of batch element `b` see only
/// the keys in `keys[b]` (its tokens; the rest is padding), and, with `causal`,
/// none after their own position (the queries being the last `T` of the `S`
/// positions). A query that sees no key (a padding row under `causal`) gives
/// zeros and passes no gradient, as PyTorch's `scaled_dot_product_attention`.
/// The mask is a range per batch element, not a `T×S` matrix: the fused kernels
/// skip the tiles outside it, so neither pass stores a score.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::padded_attention;
/// let q = Tensor::<Rank4<2, 1, 3, 4>>::ones();
/// let v = Tensor::<Rank4<2, 1, 3, 4>>::from_vec((0..24).map(|i| i as f32).collect()).unwrap();
/// // Two sequences right-padded to 3 tokens: of lengths 3 and 1.
/// let out = padded_attention(&q, &q, &v, false, &[0..3, 0..1]).unwrap();
/// assert_eq!(out.to_vec()[12..16], [12.0, 13.0, 14.0, 15.0]);
/// assert!(padded_attention(&q, &q, &v, false, &[0..3]).is_err());
/// ```
///
/// # Errors
/// [`ShapeError::KeyRanges`] unless `keys` holds one range per batch element,
/// each inside `0..S`.
///
/// # Panics
/// As [`attention`].
#[track_caller]
pub fn padded_attention<B, H, T, Hd, Hkv, S, D, E>(
    q: &Tensor<(B, H, T, Hd), D, E>,
    k: &Tensor<(B, Hkv, S, Hd), D, E>,
    v: &Tensor<(B, Hkv, S, Hd), D, E>,
    causal: bool,
    keys: &[Range<usize>],
) -> Result<Heads<B, H, T, Hd, D, E>, ShapeError>
where
    B: Dim,
    H: Dim,
    T: Dim,
    Hd: Dim,
    Hkv: Dim,
    S: Dim,
    D: Backend<E>,
    E: Float,
{
    let (b, t, s, d) = (
        q.raw().dims()[0],
        q.raw().dims()[2],
        k.raw().dims()[2],
        q.raw().dims()[3],
    );
    check_key_ranges(keys, b, s)?;
    let start = causal_start(causal, t, s);
    let spec = AttentionSpec {
        keys: Some(keys.into()),
        ..AttentionSpec::new(1.0 / (d as f64).sqrt(), start)
    };
    Ok(q.map_raw(|r| r.attention_with(k.raw(), v.raw(), spec)))
}

/// Where causal queries start, the `t` queries being the last of `s` positions
/// (`None`: not causal).
#[track_caller]
fn causal_start(causal: bool, t: usize, s: usize) -> Option<usize> {
    causal.then(|| {
        assert!(
            s >= t,
            "attention: causal attention of {t} queries over {s} keys (the queries are the \
             last positions, so S >= T)"
        );
        s - t
    })
}

/// One range of keys per batch element, each inside `0..keys`.
pub(crate) fn check_key_ranges(
    ranges: &[Range<usize>],
    batch: usize,
    keys: usize,
) -> Result<(), ShapeError> {
    let fits = ranges.len() == batch && ranges.iter().all(|r| r.start <= r.end && r.end <= keys);
    if fits {
        return Ok(());
    }
    Err(ShapeError::KeyRanges {
        batch,
        keys,
        found: ranges.to_vec(),
    })
}

/// The composed reference: matmul, masked softmax, the dropout mask of the fused
/// op materialised (and zeros for the rows that see no key), matmul (it stores
/// the scores).
#[cfg(test)]
pub(crate) fn composed<D: Backend<E>, E: Float>(
    q: &RawTensor<D, E>,
    k: &RawTensor<D, E>,
    v: &RawTensor<D, E>,
    spec: &AttentionSpec,
) -> RawTensor<D, E> {
    use volta_kernels::BinaryOp;
    let [b, h, t, d] = [q.dims()[0], q.dims()[1], q.dims()[2], q.dims()[3]];
    let (hkv, s) = (k.dims()[1], k.dims()[2]);
    let group = h / hkv;
    let q = q.reshape(&[b, hkv, group * t, d]);
    let scores = q
        .matmul(&k.transpose_last())
        .scalar(BinaryOp::Mul, E::from_f64(spec.scale));
    // A row that sees no key takes no mask (a finite softmax), then weight 0.
    let mask: Vec<E> = (0..b * group * t)
        .flat_map(|row| {
            let visible = spec.visible(row / (group * t), row % t, s);
            (0..s).map(move |key| {
                E::from_f64(if visible.is_empty() || visible.contains(&key) {
                    0.0
                } else {
                    f64::NEG_INFINITY
                })
            })
        })
        .collect();
    let mask = RawTensor::from_vec(mask, &[b, 1, group * t, s]).expand(scores.dims());
    let weights = scores.binary(BinaryOp::Add, &mask).softmax(3);
    // Score row (b·H + h)·T + t sits at [b, h / group, (h % group)·T + t] here:
    // in the same order as the flat index over [b, h, t].
    let keep: Vec<E> = (0..b * h * t * s)
        .map(|i| {
            let (row, key) = (i / s, i % s);
            let seen = !spec.visible(row / (h * t), row % t, s).is_empty();
            E::from_f64(if seen { spec.keep(row, key) } else { 0.0 })
        })
        .collect();
    let keep = RawTensor::from_vec(keep, &[b, hkv, group * t, s]);
    weights
        .binary(BinaryOp::Mul, &keep)
        .matmul(v)
        .reshape(&[b, h, t, d])
}

#[cfg(test)]
mod tests {
    use crate::backend::cpu::Cpu;
    use crate::tensor::RawTensor;

    /// Attention by its definition, in f64, one query at a time.
    #[track_caller]
    fn reference(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        [b, h, t, d]: [usize; 4],
        [hkv, s]: [usize; 2],
        start: usize,
    ) -> Vec<f64> {
        let mut out = Vec::new();
        for bi in 0..b {
            for hi in 0..h {
                let kh = hi / (h / hkv);
                for ti in 0..t {
                    let qrow = &q[((bi * h + hi) * t + ti) * d..][..d];
                    let visible = (start + ti + 1).min(s);
                    let scores: Vec<f64> = (0..visible)
                        .map(|j| {
                            let krow = &k[((bi * hkv + kh) * s + j) * d..][..d];
                            qrow.iter().zip(krow).map(|(a, c)| a * c).sum::<f64>()
                                / (d as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let z: f64 = scores.iter().map(|x| (x - max).exp()).sum();
                    for c in 0..d {
                        out.push(
                            (0..visible)
                                .map(|j| {
                                    (scores[j] - max).exp() / z
                                        * v[((bi * hkv + kh) * s + j) * d + c]
                                })
                                .sum(),
                        );
                    }
                }
            }
        }
        out
    }

    #[test]
    #[track_caller]
    fn grouped_queries_at_a_cache_offset_match_the_definition() {
        let (b, h, t, d, hkv, start) = (2, 6, 3, 4, 2, 2);
        let s = start + t;
        let data = |n: usize, seed: f64| -> Vec<f64> {
            (0..n).map(|i| ((i as f64 + seed) * 0.731).sin()).collect()
        };
        let (q, k, v) = (
            data(b * h * t * d, 0.0),
            data(b * hkv * s * d, 1.0),
            data(b * hkv * s * d, 2.0),
        );
        let raw = |x: &Vec<f64>, dims: &[usize]| RawTensor::<Cpu, f64>::from_vec(x.clone(), dims);
        let got = raw(&q, &[b, h, t, d])
            .causal_attention(&raw(&k, &[b, hkv, s, d]), &raw(&v, &[b, hkv, s, d]), start)
            .to_vec();
        let want = reference(&q, &k, &v, [b, h, t, d], [hkv, s], start);
        for (a, w) in got.iter().zip(&want) {
            assert!((a - w).abs() < 1e-12, "{a} vs {w}");
        }
    }

    /// Deterministic values in (−1.5, 1.5).
    fn values(n: usize, seed: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64 + seed) * 0.7131).sin() * 1.5)
            .collect()
    }

    /// The fused op against the composed reference, forward and every gradient, in
    /// f64: grouped heads, a ragged length, strided queries and keys (permuted
    /// `[B, T, H, d]` stores), causal at an offset and not causal, padded batches
    /// (left and right, with rows and a whole batch element that see no key),
    /// without and with dropout on the weights (the reference multiplies by the
    /// mask).
    #[test]
    fn fused_forward_and_gradients_match_the_composed_ops() {
        use super::composed;
        use crate::autograd::Gradients;
        use crate::backend::AttentionSpec;
        let shapes = [
            (2, 4, 2, 5, 5, 8, Some(0), None),
            (1, 3, 1, 3, 7, 4, Some(4), None),
            (2, 2, 2, 4, 6, 3, None, None),
            (1, 1, 1, 1, 1, 2, Some(0), None),
            // Left padding under a causal mask: batch 0's first query sees nothing.
            (2, 4, 2, 5, 5, 8, Some(0), Some(vec![1..5, 0..3])),
            (
                1,
                3,
                1,
                3,
                7,
                4,
                Some(4),
                Some(std::iter::once(0..5).collect()),
            ),
            // Batch 1 is all padding.
            (2, 2, 2, 4, 6, 3, None, Some(vec![2..6, 0..0])),
            // Several tiles of rows and keys (the CPU's are 64 by 128), causal at
            // an offset, padding that starts and ends inside tiles.
            (1, 2, 1, 70, 200, 5, Some(130), None),
            (2, 2, 1, 70, 150, 4, None, Some(vec![3..140, 100..150])),
        ];
        for ((b, h, hkv, t, s, d, causal, keys), p) in shapes
            .iter()
            .flat_map(|shape| [0.0, 0.3].map(|p| (shape.clone(), p)))
        {
            let leaf = |dims: &[usize], seed| {
                RawTensor::<Cpu, f64>::from_vec(values(dims.iter().product(), seed), dims)
                    .tracked_leaf()
            };
            let q_store = leaf(&[b, t, h, d], 0.0);
            // Keys as a permuted `[B, S, H, d]` store too, values contiguous.
            let (k_store, v) = (leaf(&[b, s, hkv, d], 1.0), leaf(&[b, hkv, s, d], 2.0));
            let q = q_store.permute(&[0, 2, 1, 3]);
            let k = k_store.permute(&[0, 2, 1, 3]);
            let w = RawTensor::<Cpu, f64>::from_vec(values(b * h * t * d, 3.0), &[b, h, t, d]);
            let loss = |out: RawTensor<Cpu, f64>| -> (Vec<f64>, Gradients<Cpu, f64>) {
                let values = out.to_vec();
                let total = out
                    .binary(volta_kernels::BinaryOp::Mul, &w)
                    .reduce_all(volta_kernels::ReduceOp::Sum);
                (values, total.backward())
            };
            let spec = AttentionSpec {
                dropout: p,
                seed: 7,
                keys: keys.map(Into::into),
                ..AttentionSpec::new(1.0 / (d as f64).sqrt(), causal)
            };
            let (fused, fg) = loss(q.attention_with(&k, &v, spec.clone()));
            let (reference, rg) = loss(composed(&q, &k, &v, &spec));
            let close = |a: &[f64], b: &[f64], what: &str| {
                assert_eq!(a.len(), b.len());
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!((x - y).abs() < 1e-12, "{what}[{i}]: {x} vs {y} ({b:?})");
                }
            };
            close(&fused, &reference, "out");
            for (name, x) in [("dq", &q_store), ("dk", &k_store), ("dv", &v)] {
                let got = fg.get_raw(x.id()).expect("a gradient").to_vec();
                close(
                    &got,
                    &rg.get_raw(x.id()).expect("a gradient").to_vec(),
                    name,
                );
            }
        }
    }

    /// Dropout zeroes about `p` of the weights, scales the rest, and changes
    /// with the seed; `p = 1` zeroes the output.
    #[test]
    fn dropout_on_the_weights_drops_a_share_p() {
        use crate::backend::AttentionSpec;
        let spec = AttentionSpec {
            dropout: 0.25,
            seed: 3,
            ..AttentionSpec::new(1.0, None)
        };
        let n = 64 * 64;
        let dropped = (0..n).filter(|&i| spec.keep(i / 64, i % 64) == 0.0).count();
        assert!((900..1150).contains(&dropped), "{dropped} of {n} dropped");
        assert!((0..n).all(|i| [0.0, 1.0 / 0.75].contains(&spec.keep(i / 64, i % 64))));
        let other = AttentionSpec {
            seed: 4,
            ..spec.clone()
        };
        assert!((0..n).any(|i| spec.keep(i / 64, i % 64) != other.keep(i / 64, i % 64)));
        let ones = RawTensor::<Cpu, f64>::from_vec(vec![1.0; 2 * 3 * 4], &[1, 2, 3, 4]);
        let out = ones.attention_with_dropout(&ones, &ones, Some(0), 1.0, 5);
        assert_eq!(out.to_vec(), vec![0.0; 24]);
    }

    #[test]
    #[should_panic(expected = "H a multiple of Hkv")]
    #[track_caller]
    fn heads_that_do_not_group_are_rejected() {
        let q = RawTensor::<Cpu, f32>::from_vec(vec![0.0; 5 * 4], &[1, 5, 1, 4]);
        let kv = RawTensor::<Cpu, f32>::from_vec(vec![0.0; 2 * 4], &[1, 2, 1, 4]);
        let _ = q.causal_attention(&kv, &kv, 0);
    }
}
