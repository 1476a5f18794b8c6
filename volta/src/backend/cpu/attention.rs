//! Fused attention on the CPU: one query row at a time, its scores in a scratch
//! row of length `S` (never the `T×S` matrix), computed in `E::Acc`. The forward
//! runs one task per (batch, query head); the backward one per (batch, key/value
//! head), which owns that head's `dk`, `dv` and its query heads' `dq`, so no two
//! tasks write the same row. Dropout on the weights follows the spec's
//! [`keep`](AttentionSpec::keep) rule in both passes.
use super::PARALLEL_THRESHOLD;
use super::copy::strided_to_vec;
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

fn dot<A: ScalarMath>(a: &[A], b: &[A]) -> A {
    a.iter().zip(b).fold(A::ZERO, |s, (&x, &y)| s + x * y)
}

/// `y += alpha·x`.
fn axpy<A: ScalarMath>(y: &mut [A], alpha: A, x: &[A]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y = *y + alpha * x;
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
    let mut out = vec![E::Acc::ZERO; n.batch * n.heads * t * d];
    let mut lse = vec![E::Acc::ZERO; n.batch * n.heads * t];
    if out.is_empty() {
        return (laid_out::<E>(out, &q_layout), narrow::<E>(lse));
    }
    let rows: Vec<_> = out.chunks_mut(t * d).zip(lse.chunks_mut(t)).collect();
    for_each(rows, out_work(&n), |bh, (out, lse)| {
        let kv = (bh / n.heads) * n.kv_heads + (bh % n.heads) / n.group();
        let (keys, values) = (&k[kv * s * d..][..s * d], &v[kv * s * d..][..s * d]);
        let mut scores = vec![E::Acc::ZERO; s];
        for ti in 0..t {
            let visible = spec.visible(bh / n.heads, ti, s);
            if visible.is_empty() {
                // No key: zeros (already there), and weights that are all zero.
                lse[ti] = E::Acc::from_f64(f64::INFINITY);
                continue;
            }
            let qrow = &q[(bh * t + ti) * d..][..d];
            let mut max = E::Acc::NEG_INFINITY;
            for j in visible.clone() {
                scores[j] = dot(qrow, &keys[j * d..][..d]) * scale;
                if scores[j] > max {
                    max = scores[j];
                }
            }
            let row = &mut out[ti * d..][..d];
            let mut z = E::Acc::ZERO;
            for j in visible {
                let p = (scores[j] - max).exp();
                // The sum normalises the weights before dropout, as PyTorch's.
                z = z + p;
                let kept = p * E::Acc::from_f64(spec.keep(bh * t + ti, j));
                axpy(row, kept, &values[j * d..][..d]);
            }
            row.iter_mut().for_each(|o| *o = *o / z);
            lse[ti] = max + z.ln();
        }
    });
    (laid_out::<E>(out, &q_layout), narrow::<E>(lse))
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
    let mut dq = vec![E::Acc::ZERO; n.batch * n.heads * t * d];
    let mut dk = vec![E::Acc::ZERO; n.batch * n.kv_heads * s * d];
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
        let (keys, values) = (&k[kv * s * d..][..s * d], &v[kv * s * d..][..s * d]);
        let first_head = (kv / n.kv_heads) * n.heads + (kv % n.kv_heads) * group;
        for gi in 0..group {
            let bh = first_head + gi;
            for ti in 0..t {
                let row = bh * t + ti;
                let (qrow, grow) = (&q[row * d..][..d], &g[row * d..][..d]);
                let dq_row = &mut dq[(gi * t + ti) * d..][..d];
                for j in spec.visible(kv / n.kv_heads, ti, s) {
                    let (krow, vrow) = (&keys[j * d..][..d], &values[j * d..][..d]);
                    let p = (dot(qrow, krow) * scale - lse[row]).exp();
                    let keep = E::Acc::from_f64(spec.keep(row, j));
                    axpy(&mut dv[j * d..][..d], p * keep, grow);
                    let ds = p * (keep * dot(grow, vrow) - delta[row]) * scale;
                    axpy(dq_row, ds, krow);
                    axpy(&mut dk[j * d..][..d], ds, qrow);
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
