//! Fused attention on the CPU (flash attention): tiles of `BQ` query rows by `BK`
//! keys, their products through `gemm`'s kernels and an online softmax between
//! them, in `E::Acc`, so neither pass stores the `T×S` scores and the keys a row
//! does not see (causal, padding) are not computed past their tile. The forward
//! runs one task per (batch, query head); the backward one per (batch, key/value
//! head), which owns that head's `dk`, `dv` and its query heads' `dq`, so no two
//! tasks write the same row. Dropout on the weights follows the spec's
//! [`keep`](AttentionSpec::keep) rule in both passes.
use super::PARALLEL_THRESHOLD;
use super::buffers::zeros_to_add_into;
use super::copy::strided_to_vec;
use super::simd::{sum, vectorized};
use crate::backend::{AttentionDims, AttentionSpec, packed_like};
use crate::dtype::{Float, ScalarMath};
use crate::layout::Layout;
use rayon::prelude::*;

type View<'a, E> = (&'a [E], &'a Layout);

/// A view as contiguous values of the compute type.
fn widen<E: Float>((data, layout): View<E>) -> Vec<E::Acc> {
    strided_to_vec(data, layout)
        .into_iter()
        .map(E::to_acc)
        .collect()
}

fn narrow<E: Float>(values: Vec<E::Acc>) -> Vec<E> {
    values.into_iter().map(E::from_acc).collect()
}

/// Contiguous `[B, H, T, d]` values narrowed to `E` and laid out as
/// [`packed_like`]`(like)`, where the kernels' contract puts each result: the
/// values read with their axes in the packed layout's memory order.
fn laid_out<E: Float>(values: Vec<E::Acc>, like: &Layout) -> Vec<E> {
    let packed = packed_like(like);
    let values = narrow::<E>(values);
    if packed.is_contiguous() {
        return values;
    }
    let mut order = [0, 1, 2, 3];
    order.sort_by_key(|&a| std::cmp::Reverse(packed.strides[a]));
    strided_to_vec(&values, &Layout::contiguous(&packed.dims).permute(&order))
}

/// Query rows and keys per tile: the score tile of `BQ × BK` stays in cache,
/// and each product is large enough for `gemm`'s kernels. (On 2 Zen 3 cores,
/// 2026-12-05, tiles of 64×128, 32×128, 64×256 and 128×128 ran within 10% of
/// these; smaller key tiles waste less of a causal diagonal.)
const BQ: usize = 64;
const BK: usize = 64;

/// A matrix read from `data`: element `(r, c)` at `start + r·rs + c·cs`.
#[derive(Clone, Copy)]
struct Mat<'a, A> {
    data: &'a [A],
    start: usize,
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a, A> Mat<'a, A> {
    /// Rows `r0..r0 + rows` of a row-major matrix of `cols` columns.
    fn rows(data: &'a [A], r0: usize, rows: usize, cols: usize) -> Self {
        Mat {
            data,
            start: r0 * cols,
            rows,
            cols,
            rs: cols,
            cs: 1,
        }
    }

    /// The transpose (a view: no copy).
    fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// `dst = a·b` (or `dst += a·b` with `accumulate`), `dst` row-major with rows of
/// `b.cols`, on this thread (the tasks are spread over the pool already).
fn product<A: Float>(dst: &mut [A], a: Mat<A>, b: Mat<A>, accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(k, b.rows, "attention: a tile product's inner dims differ");
    if m * n == 0 {
        return;
    }
    let last = |x: &Mat<A>| x.start + (x.rows.max(1) - 1) * x.rs + (x.cols.max(1) - 1) * x.cs;
    assert!(
        k == 0 || (last(&a) < a.data.len() && last(&b) < b.data.len()),
        "attention: a tile reads past its operand"
    );
    assert!(
        m * n <= dst.len(),
        "attention: a tile writes past its result"
    );
    // SAFETY: the asserts above keep every element the product reads inside
    // `a.data` and `b.data`, and every element it writes inside `dst`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr().add(a.start),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.start),
            b.cs as isize,
            b.rs as isize,
            A::ONE,
            A::ONE,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Runs `task` on each item (with its index), on the thread pool when the work
/// is large enough to pay for waking it.
fn for_each<I: Send>(items: Vec<I>, work: usize, task: impl Fn(usize, I) + Sync + Send) {
    if work >= PARALLEL_THRESHOLD {
        items
            .into_par_iter()
            .enumerate()
            .for_each(|(i, x)| task(i, x));
    } else {
        items.into_iter().enumerate().for_each(|(i, x)| task(i, x));
    }
}

/// See [`Backend::attention`](crate::backend::Backend::attention).
pub(crate) fn attention<E: Float>(
    q: View<E>,
    k: View<E>,
    v: View<E>,
    spec: &AttentionSpec,
) -> (Vec<E>, Vec<E>) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let (t, s, d) = (n.queries, n.keys, n.head_dim);
    let q_layout = *q.1;
    let (q, k, v) = (widen(q), widen(k), widen(v));
    let scale = E::Acc::from_f64(spec.scale);
    let mut out = zeros_to_add_into::<E::Acc>(n.batch * n.heads * t * d);
    let mut lse = vec![E::Acc::ZERO; n.batch * n.heads * t];
    if out.is_empty() {
        return (laid_out::<E>(out, &q_layout), narrow::<E>(lse));
    }
    let rows: Vec<_> = out.chunks_mut(t * d).zip(lse.chunks_mut(t)).collect();
    for_each(rows, out_work(&n), |bh, (out, lse)| {
        let b = bh / n.heads;
        let kv = b * n.kv_heads + (bh % n.heads) / n.group();
        let (keys, values) = (&k[kv * s * d..][..s * d], &v[kv * s * d..][..s * d]);
        let mut scores = [E::Acc::ZERO; BQ * BK];
        let (mut max, mut sum_of) = ([E::Acc::ZERO; BQ], [E::Acc::ZERO; BQ]);
        let mut factors = [E::Acc::ZERO; BK];
        for t0 in (0..t).step_by(BQ) {
            let rows = BQ.min(t - t0);
            let seen: Vec<_> = (t0..t0 + rows).map(|ti| spec.visible(b, ti, s)).collect();
            let (first, end) = key_span(&seen);
            let acc = &mut out[t0 * d..(t0 + rows) * d];
            max[..rows].fill(E::Acc::NEG_INFINITY);
            sum_of[..rows].fill(E::Acc::ZERO);
            for j0 in (first..end).step_by(BK) {
                let cols = BK.min(end - j0);
                let tile = &mut scores[..rows * cols];
                let queries = Mat::rows(&q, bh * t + t0, rows, d);
                product(tile, queries, Mat::rows(keys, j0, cols, d).t(), false);
                // The row loops below run in the CPU's widest vectors (`exp` inlined).
                vectorized(
                    #[inline(always)]
                    || {
                        for (r, row) in tile.chunks_mut(cols).enumerate() {
                            let live = within(&seen[r], j0, cols);
                            if live.is_empty() {
                                // None of this row's keys in the tile: no weight.
                                row.fill(E::Acc::ZERO);
                                continue;
                            }
                            let weights = &mut row[live.clone()];
                            let mut top = max[r];
                            for x in weights.iter_mut() {
                                *x = *x * scale;
                                top = if *x > top { *x } else { top };
                            }
                            let corr = (max[r] - top).exp();
                            for x in weights.iter_mut() {
                                *x = (*x - top).exp();
                            }
                            let z = sum(weights);
                            // The sum normalises the weights before dropout, as PyTorch's.
                            if spec.dropout > 0.0 {
                                let factors = &mut factors[..weights.len()];
                                let keys = j0 + live.start..j0 + live.end;
                                spec.keep_factors(bh * t + t0 + r, keys, factors);
                                for (x, &f) in weights.iter_mut().zip(&*factors) {
                                    *x = *x * f;
                                }
                            }
                            row[..live.start].fill(E::Acc::ZERO);
                            row[live.end..].fill(E::Acc::ZERO);
                            sum_of[r] = sum_of[r] * corr + z;
                            max[r] = top;
                            for o in &mut acc[r * d..][..d] {
                                *o = *o * corr;
                            }
                        }
                    },
                );
                let weights = Mat::rows(&*tile, 0, rows, cols);
                product(acc, weights, Mat::rows(values, j0, cols, d), true);
            }
            for r in 0..rows {
                // A row that sees no key: zeros, and a log-sum-exp of 0 that the
                // backward does not read.
                if sum_of[r] == E::Acc::ZERO {
                    lse[t0 + r] = E::Acc::ZERO;
                    continue;
                }
                acc[r * d..][..d]
                    .iter_mut()
                    .for_each(|o| *o = *o / sum_of[r]);
                lse[t0 + r] = max[r] + sum_of[r].ln();
            }
        }
    });
    (laid_out::<E>(out, &q_layout), narrow::<E>(lse))
}

/// The columns of a tile of `cols` keys from key `j0` that a row seeing `keys`
/// sees (empty when none).
fn within(keys: &std::ops::Range<usize>, j0: usize, cols: usize) -> std::ops::Range<usize> {
    let clip = |j: usize| j.clamp(j0, j0 + cols) - j0;
    let (start, end) = (clip(keys.start), clip(keys.end));
    start..end.max(start)
}

/// The keys that a block of rows sees together: from the first key any of them
/// sees to the last.
fn key_span(seen: &[std::ops::Range<usize>]) -> (usize, usize) {
    let live = seen.iter().filter(|r| !r.is_empty());
    let first = live.clone().map(|r| r.start).min().unwrap_or(0);
    (first, live.map(|r| r.end).max().unwrap_or(0))
}

fn out_work(n: &AttentionDims) -> usize {
    n.batch * n.heads * n.queries * n.keys * n.head_dim
}

/// See [`Backend::attention_backward`](crate::backend::Backend::attention_backward).
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_backward<E: Float>(
    q: View<E>,
    k: View<E>,
    v: View<E>,
    dout: View<E>,
    lse: View<E>,
    delta: View<E>,
    spec: &AttentionSpec,
) -> (Vec<E>, Vec<E>, Vec<E>) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let (t, s, d, group) = (n.queries, n.keys, n.head_dim, n.group());
    let like = [*q.1, *k.1, *v.1];
    let (q, k, v, g) = (widen(q), widen(k), widen(v), widen(dout));
    let (lse, delta) = (widen(lse), widen(delta));
    let scale = E::Acc::from_f64(spec.scale);
    let mut dq = zeros_to_add_into::<E::Acc>(n.batch * n.heads * t * d);
    let mut dk = zeros_to_add_into::<E::Acc>(n.batch * n.kv_heads * s * d);
    let mut dv = dk.clone();
    if dq.is_empty() || dk.is_empty() {
        return (narrow::<E>(dq), narrow::<E>(dk), narrow::<E>(dv));
    }
    // The query heads of one key/value head are consecutive: one chunk of `dq`.
    let tasks: Vec<_> = dq
        .chunks_mut(group * t * d)
        .zip(dk.chunks_mut(s * d))
        .zip(dv.chunks_mut(s * d))
        .collect();
    for_each(tasks, 2 * out_work(&n), |kv, ((dq, dk), dv)| {
        let b = kv / n.kv_heads;
        let (keys, values) = (&k[kv * s * d..][..s * d], &v[kv * s * d..][..s * d]);
        let first_head = b * n.heads + (kv % n.kv_heads) * group;
        let (mut weights, mut grads) = (vec![E::Acc::ZERO; BQ * BK], vec![E::Acc::ZERO; BQ * BK]);
        let mut factors = [E::Acc::ZERO; BK];
        for gi in 0..group {
            let bh = first_head + gi;
            for t0 in (0..t).step_by(BQ) {
                let rows = BQ.min(t - t0);
                let seen: Vec<_> = (t0..t0 + rows).map(|ti| spec.visible(b, ti, s)).collect();
                let (first, end) = key_span(&seen);
                let (queries, dout) = (
                    Mat::rows(&q, bh * t + t0, rows, d),
                    Mat::rows(&g, bh * t + t0, rows, d),
                );
                for j0 in (first..end).step_by(BK) {
                    let cols = BK.min(end - j0);
                    let (p, ds) = (&mut weights[..rows * cols], &mut grads[..rows * cols]);
                    let (krows, vrows) =
                        (Mat::rows(keys, j0, cols, d), Mat::rows(values, j0, cols, d));
                    product(p, queries, krows.t(), false);
                    product(ds, dout, vrows.t(), false);
                    vectorized(
                        #[inline(always)]
                        || {
                            for r in 0..rows {
                                let row = bh * t + t0 + r;
                                let live = within(&seen[r], j0, cols);
                                let (p, ds) =
                                    (&mut p[r * cols..][..cols], &mut ds[r * cols..][..cols]);
                                let factors = &mut factors[..live.len()];
                                let keys = j0 + live.start..j0 + live.end;
                                spec.keep_factors(row, keys, factors);
                                let (lse, delta) = (lse[row], delta[row]);
                                let live_grads = ds[live.clone()].iter_mut();
                                for ((p, ds), &keep) in
                                    p[live.clone()].iter_mut().zip(live_grads).zip(&*factors)
                                {
                                    let w = (*p * scale - lse).exp();
                                    *ds = w * (keep * *ds - delta) * scale;
                                    *p = w * keep;
                                }
                                for x in [&mut *p, &mut *ds] {
                                    x[..live.start].fill(E::Acc::ZERO);
                                    x[live.end..].fill(E::Acc::ZERO);
                                }
                            }
                        },
                    );
                    let (p, ds) = (
                        Mat::rows(&*p, 0, rows, cols),
                        Mat::rows(&*ds, 0, rows, cols),
                    );
                    product(&mut dv[j0 * d..], p.t(), dout, true);
                    product(&mut dq[(gi * t + t0) * d..], ds, krows, true);
                    product(&mut dk[j0 * d..], ds.t(), queries, true);
                }
            }
        }
    });
    (
        laid_out::<E>(dq, &like[0]),
        laid_out::<E>(dk, &like[1]),
        laid_out::<E>(dv, &like[2]),
    )
}
