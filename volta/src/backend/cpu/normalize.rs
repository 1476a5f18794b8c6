//! Layer and RMS normalisation of rows along one axis, viewing the (contiguous)
//! input as (outer, n, inner): the statistics in two passes (the mean, then the
//! mean squared deviation), as the GPU kernel computes them, then a pass writing;
//! and its gradient, with the statistics recomputed the same way.
use super::PARALLEL_THRESHOLD;
use super::copy::{elements, strided_to_vec};
use super::simd::{sum_of, vectorized};
use crate::dtype::{Float, ScalarMath};
use crate::layout::Layout;
use rayon::prelude::*;

pub(crate) fn normalize<E: Float>(
    data: &[E],
    layout: &Layout,
    axis: usize,
    center: bool,
    eps: E,
) -> Vec<E> {
    let mut out = strided_to_vec(data, layout);
    let dims = &layout.dims;
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    if n == 0 || inner == 0 || out.is_empty() {
        return out;
    }
    let eps = eps.to_acc();
    // One (outer) block holds `inner` interleaved rows of length `n`; each row is
    // computed in `E::Acc` (`f32` for `f16`) and rounded once.
    let block = |b: &mut [E]| {
        if inner == 1 {
            // Rows along the innermost axis: slices, summed in vector lanes.
            return vectorized(
                #[inline(always)]
                || {
                    let (mean, rstd) = stats(|k| b[k].to_acc(), n, center, eps);
                    for v in b.iter_mut() {
                        *v = E::from_acc((v.to_acc() - mean) * rstd);
                    }
                },
            );
        }
        for i in 0..inner {
            let at = |k: usize| i + k * inner;
            let get = |b: &[E], k: usize| b[at(k)].to_acc();
            let (mean, rstd) = stats(|k| get(b, k), n, center, eps);
            for k in 0..n {
                b[at(k)] = E::from_acc((get(b, k) - mean) * rstd);
            }
        }
    };
    if out.len() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(n * inner).for_each(block);
    } else {
        out.chunks_mut(n * inner).for_each(block);
    }
    out
}

/// Each row's statistics: its mean (0 for RMS) and `1/√(var + eps)`, the
/// variance the mean of squared deviations. Summed in vector lanes ([`sum_of`]), and inlined so that a row's loop
/// vectorises where it is contiguous.
#[inline(always)]
fn stats<A: ScalarMath>(x: impl Fn(usize) -> A, n: usize, center: bool, eps: A) -> (A, A) {
    let len = A::from_f64(n as f64);
    let mean = if center { sum_of(n, &x) / len } else { A::ZERO };
    let sq = sum_of(n, |k| {
        let d = x(k) - mean;
        d * d
    });
    (mean, A::ONE / (sq / len + eps).sqrt())
}

/// The gradient of [`normalize`] with respect to `x` given the output's
/// gradient `g`: `rstd·(g − mean(g) − x̂·mean(g·x̂))` (`center`) or
/// `rstd·(g − x̂·mean(g·x̂))` (RMS) per row, contiguous.
pub(crate) fn normalize_grad<E: Float>(
    (x, x_layout): (&[E], &Layout),
    (g, g_layout): (&[E], &Layout),
    axis: usize,
    center: bool,
    eps: E,
) -> Vec<E> {
    let (x, g) = (elements(x, x_layout), elements(g, g_layout));
    let dims = &x_layout.dims;
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    let mut out = vec![E::ZERO; x.len()];
    if n == 0 || inner == 0 || out.is_empty() {
        return out;
    }
    let len = E::Acc::from_f64(n as f64);
    let eps = eps.to_acc();
    let block = |(b, (xb, gb)): (&mut [E], (&[E], &[E]))| {
        if inner == 1 {
            // Rows along the innermost axis: slices, summed in vector lanes.
            return vectorized(
                #[inline(always)]
                || {
                    let (mean, rstd) = stats(|k| xb[k].to_acc(), n, center, eps);
                    let hat = |k: usize| (xb[k].to_acc() - mean) * rstd;
                    let g_mean = if center {
                        sum_of(n, |k| gb[k].to_acc()) / len
                    } else {
                        E::Acc::ZERO
                    };
                    let gx_mean = sum_of(n, |k| gb[k].to_acc() * hat(k)) / len;
                    for (k, o) in b.iter_mut().enumerate() {
                        *o = E::from_acc(rstd * (gb[k].to_acc() - g_mean - hat(k) * gx_mean));
                    }
                },
            );
        }
        for i in 0..inner {
            let at = |k: usize| i + k * inner;
            let xv = |k: usize| xb[at(k)].to_acc();
            let gv = |k: usize| gb[at(k)].to_acc();
            let (mean, rstd) = stats(xv, n, center, eps);
            let hat = |k: usize| (xv(k) - mean) * rstd;
            let g_mean = if center {
                sum_of(n, gv) / len
            } else {
                E::Acc::ZERO
            };
            let gx_mean = sum_of(n, |k| gv(k) * hat(k)) / len;
            for k in 0..n {
                b[at(k)] = E::from_acc(rstd * (gv(k) - g_mean - hat(k) * gx_mean));
            }
        }
    };
    let rows = n * inner;
    if out.len() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(rows)
            .zip(x.par_chunks(rows).zip(g.par_chunks(rows)))
            .for_each(block);
    } else {
        out.chunks_mut(rows)
            .zip(x.chunks(rows).zip(g.chunks(rows)))
            .for_each(block);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_and_rms_norm_of_rows() {
        let x = [1.0f64, 2.0, 3.0, 4.0, -2.0, 0.0, 2.0, 4.0];
        let l = Layout::contiguous(&[2, 4]);
        // Row 0: mean 2.5, variance 1.25.
        let y = normalize(&x, &l, 1, true, 0.0);
        let r = 1.25f64.sqrt();
        let want = [-1.5 / r, -0.5 / r, 0.5 / r, 1.5 / r];
        y[..4]
            .iter()
            .zip(want)
            .for_each(|(a, b)| assert!((a - b).abs() < 1e-12));
        // Row 1: mean 1, variance 5, with eps 1.
        let r = 6.0f64.sqrt();
        let want = [-3.0 / r, -1.0 / r, 1.0 / r, 3.0 / r];
        let y = normalize(&x, &l, 1, true, 1.0);
        y[4..]
            .iter()
            .zip(want)
            .for_each(|(a, b)| assert!((a - b).abs() < 1e-12));
        // RMS of row 0: √(30/4).
        let y = normalize(&x, &l, 1, false, 0.0);
        let r = 7.5f64.sqrt();
        y[..4]
            .iter()
            .zip([1.0, 2.0, 3.0, 4.0])
            .for_each(|(a, b)| assert!((a - b / r).abs() < 1e-12));
    }

    #[test]
    fn columns_of_a_transposed_view() {
        // Along axis 0 of the transposed (4, 2) view: the same rows as above.
        let x = [1.0f32, 2.0, 3.0, 4.0, -2.0, 0.0, 2.0, 4.0];
        let t = Layout::contiguous(&[2, 4]).permute(&[1, 0]);
        let y = normalize(&x, &t, 0, false, 0.0);
        let rows = normalize(&x, &Layout::contiguous(&[2, 4]), 1, false, 0.0);
        for i in 0..4 {
            for j in 0..2 {
                assert_eq!(y[i * 2 + j], rows[j * 4 + i]);
            }
        }
    }
}
