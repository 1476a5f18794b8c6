//! Fused optimiser steps: every output element in one pass over the inputs (rayon
//! above the size threshold; each element depends only on its own inputs, so the
//! result does not depend on the split).
use super::PARALLEL_THRESHOLD;
use super::buffers::Unwritten;
use super::copy::elements;
use crate::backend::optim::{AdamConstants, SgdConstants};
use crate::dtype::Float;
use crate::layout::Layout;
use rayon::prelude::*;

const CHUNK: usize = 1 << 13;

/// A view argument: the buffer and its layout.
type In<'a, E> = (&'a [E], &'a Layout);

/// `f(i, out_a, out_b, out_c)` over chunks of three outputs of `n` elements, where
/// `i` is the chunk's first element; `f` writes every element of its chunks.
fn chunks3<E: Float>(
    n: usize,
    f: impl Fn(usize, Unwritten<E>, Unwritten<E>, Unwritten<E>) + Sync,
) -> (Vec<E>, Vec<E>, Vec<E>) {
    let (mut a, mut b, mut c) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (sa, sb, sc) = (
        &mut a.spare_capacity_mut()[..n],
        &mut b.spare_capacity_mut()[..n],
        &mut c.spare_capacity_mut()[..n],
    );
    if n >= PARALLEL_THRESHOLD {
        sa.par_chunks_mut(CHUNK)
            .zip(sb.par_chunks_mut(CHUNK))
            .zip(sc.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(k, ((a, b), c))| f(k * CHUNK, a, b, c));
    } else {
        f(0, sa, sb, sc);
    }
    // SAFETY: the chunks cover all `n` elements of each output, and `f` wrote
    // every element of each chunk.
    unsafe {
        a.set_len(n);
        b.set_len(n);
        c.set_len(n);
    }
    (a, b, c)
}

pub(crate) fn adam_step<E: Float>(
    p: In<E>,
    g: In<E>,
    moments: Option<(In<E>, In<E>)>,
    k: &AdamConstants<E::Acc>,
) -> (Vec<E>, Vec<E>, Vec<E>) {
    let n = p.1.numel();
    let (p, g) = (elements(p.0, p.1), elements(g.0, g.1));
    let moments = moments.map(|(m, v)| (elements(m.0, m.1), elements(v.0, v.1)));
    chunks3(n, |start, po, mo, vo| {
        for (j, ((po, mo), vo)) in po.iter_mut().zip(mo).zip(vo).enumerate() {
            let i = start + j;
            // In `E::Acc` (`f32` for `f16`), each result rounded once.
            let old = moments
                .as_ref()
                .map(|(m, v)| (m[i].to_acc(), v[i].to_acc()));
            let (np, nm, nv) = k.update(p[i].to_acc(), g[i].to_acc(), old);
            po.write(E::from_acc(np));
            mo.write(E::from_acc(nm));
            vo.write(E::from_acc(nv));
        }
    })
}

/// `(p', b')`; `b'` is `None` without momentum.
pub(crate) fn sgd_step<E: Float>(
    p: In<E>,
    g: In<E>,
    buf: Option<In<E>>,
    k: &SgdConstants<E::Acc>,
) -> (Vec<E>, Option<Vec<E>>) {
    let n = p.1.numel();
    let (p, g) = (elements(p.0, p.1), elements(g.0, g.1));
    let buf = buf.map(|b| elements(b.0, b.1));
    let momentum = k.momentum.is_some();
    let mut po = vec![E::ZERO; n];
    let mut bo = if momentum {
        vec![E::ZERO; n]
    } else {
        Vec::new()
    };
    let body = |start: usize, po: &mut [E], bo: &mut [E]| {
        for (j, po) in po.iter_mut().enumerate() {
            let i = start + j;
            let old = buf.as_ref().map(|b| b[i].to_acc());
            let (np, nb) = k.update(p[i].to_acc(), g[i].to_acc(), old);
            *po = E::from_acc(np);
            if let Some(b) = bo.get_mut(j) {
                *b = E::from_acc(nb);
            }
        }
    };
    if n < PARALLEL_THRESHOLD {
        body(0, &mut po, &mut bo);
    } else if momentum {
        po.par_chunks_mut(CHUNK)
            .zip(bo.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(|(c, (po, bo))| body(c * CHUNK, po, bo));
    } else {
        po.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, po)| body(c * CHUNK, po, &mut []));
    }
    (po, momentum.then_some(bo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::optim::{AdamStep, SgdStep};

    #[test]
    fn adam_reads_views_and_splits_big_tensors_like_small_ones() {
        let n = PARALLEL_THRESHOLD + 5;
        let p: Vec<f64> = (0..n).map(|i| (i % 17) as f64 - 8.0).collect();
        let g: Vec<f64> = (0..n).map(|i| ((i * 7) % 13) as f64 - 6.0).collect();
        let l = Layout::contiguous(&[n]);
        let h = AdamStep::at_step(0.1, (0.9, 0.99), 1e-8, 0.01, true, 2).constants();
        let v: Vec<f64> = p.iter().map(|x| x.abs()).collect();
        let (po, mo, vo) = adam_step((&p, &l), (&g, &l), Some(((&g, &l), (&v, &l))), &h);
        for i in [0, 1, CHUNK + 3, n - 1] {
            assert_eq!(
                (po[i], mo[i], vo[i]),
                h.update(p[i], g[i], Some((g[i], v[i])))
            );
        }
        // A transposed gradient is read in row-major order.
        let (p2, g2) = (vec![1.0f64, 2.0, 3.0, 4.0], vec![1.0f64, 3.0, 2.0, 4.0]);
        let t = Layout::contiguous(&[2, 2]).permute(&[1, 0]);
        let (a, ..) = adam_step((&p2, &Layout::contiguous(&[2, 2])), (&g2, &t), None, &h);
        let l4 = Layout::contiguous(&[4]);
        let (b, ..) = adam_step((&p2, &l4), (&p2, &l4), None, &h);
        assert_eq!(a, b);
    }

    #[test]
    fn sgd_without_momentum_keeps_no_buffer() {
        let l = Layout::contiguous(&[2]);
        let k = SgdStep {
            lr: 0.5,
            momentum: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
        .constants();
        let (p, b) = sgd_step((&[1.0f64, 2.0], &l), (&[2.0, -2.0], &l), None, &k);
        assert_eq!((p, b), (vec![0.0, 3.0], None));
    }
}
