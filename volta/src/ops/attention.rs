//! Causal scaled dot-product attention with grouped-query heads, composed from a
//! matmul, a masked softmax and a matmul: the reference semantics (and autograd on
//! both devices) that fused attention kernels must reproduce.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::Dim;
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::BinaryOp;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// `softmax(q·kᵀ/√d + causal mask)·v` for queries `self` `[B, H, T, d]` and keys
    /// and values `[B, Hkv, S, d]`, `H` a multiple of `Hkv`: query head `h` reads kv
    /// head `h / (H/Hkv)` (grouped-query attention, llama.cpp's grouping). Query row
    /// `t` is at position `start + t` and sees keys `0..=start + t`.
    ///
    /// # Panics
    /// When the dims do not fit (rank, batch, head grouping, head dim, key and value
    /// lengths), or when a query would see no key (`S == 0`).
    #[track_caller]
    pub fn causal_attention(&self, k: &Self, v: &Self, start: usize) -> Self {
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
            "causal_attention: queries {q_dims:?} do not fit keys {k_dims:?} and values {:?} \
             (expected [B, H, T, d] and [B, Hkv, S, d] with H a multiple of Hkv)",
            v.dims()
        );
        let [b, h, t, d] = [q_dims[0], q_dims[1], q_dims[2], q_dims[3]];
        let (hkv, s) = (k_dims[1], k_dims[2]);
        let group = h / hkv;
        // The queries of one kv head as one matrix: [B, Hkv, group·T, d].
        let q = self.reshape(&[b, hkv, group * t, d]);
        let scores = q
            .matmul(&k.transpose_last())
            .scalar(BinaryOp::Mul, E::from_f64(1.0 / (d as f64).sqrt()));
        let mask: Vec<E> = (0..group * t)
            .flat_map(|row| {
                let position = start + row % t;
                (0..s).map(move |key| {
                    E::from_f64(if key <= position {
                        0.0
                    } else {
                        f64::NEG_INFINITY
                    })
                })
            })
            .collect();
        let mask = RawTensor::from_vec(mask, &[1, 1, group * t, s]).expand(scores.dims());
        let weights = scores.binary(BinaryOp::Add, &mask).softmax(3);
        weights.matmul(v).reshape(&[b, h, t, d])
    }
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

    #[test]
    #[should_panic(expected = "H a multiple of Hkv")]
    #[track_caller]
    fn heads_that_do_not_group_are_rejected() {
        let q = RawTensor::<Cpu, f32>::from_vec(vec![0.0; 5 * 4], &[1, 5, 1, 4]);
        let kv = RawTensor::<Cpu, f32>::from_vec(vec![0.0; 2 * 4], &[1, 2, 1, 4]);
        let _ = q.causal_attention(&kv, &kv, 0);
    }
}
