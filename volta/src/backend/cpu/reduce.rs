//! Reduction along one axis, viewing the (contiguous) input as (outer, n, inner).
use super::PARALLEL_THRESHOLD;
use super::copy::strided_to_vec;
use super::rows::contiguous_slice;
use crate::dtype::Float;
use crate::layout::Layout;
use rayon::prelude::*;
use volta_kernels::ReduceOp;

pub(crate) fn reduce<E: Float>(op: ReduceOp, data: &[E], layout: &Layout, axis: usize) -> Vec<E> {
    let owned;
    let x = match contiguous_slice(data, layout) {
        Some(s) => s,
        None => {
            owned = strided_to_vec(data, layout);
            &owned[..]
        }
    };
    let dims = &layout.dims;
    let n = dims[axis];
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    // Accumulates in `E::Acc` (`f32` for `f16`), rounding each result once.
    let id = op.identity::<E::Acc>();
    let parallel = x.len() >= PARALLEL_THRESHOLD;
    if inner == 1 {
        let fold = |r: &[E]| r.iter().fold(id, |acc, &v| op.combine(acc, v.to_acc()));
        let row = |r: &[E]| E::from_acc(fold(r));
        if n == 0 {
            return vec![E::from_acc(id); outer];
        }
        if outer == 1 && parallel {
            // One long row: reduce chunks in parallel, then combine the partials.
            let partial: Vec<E::Acc> = x.par_chunks(1 << 14).map(fold).collect();
            let total = partial.iter().fold(id, |acc, &v| op.combine(acc, v));
            return vec![E::from_acc(total)];
        }
        return if parallel {
            x.par_chunks(n).map(row).collect()
        } else {
            x.chunks(n).map(row).collect()
        };
    }
    if n == 0 {
        return vec![E::from_acc(id); outer * inner];
    }
    let mut acc = vec![id; outer * inner];
    let block = |(o, src): (&mut [E::Acc], &[E])| {
        for r in src.chunks(inner) {
            o.iter_mut()
                .zip(r)
                .for_each(|(acc, &v)| *acc = op.combine(*acc, v.to_acc()));
        }
    };
    let out = &mut acc;
    if parallel && outer > 1 {
        out.par_chunks_mut(inner)
            .zip(x.par_chunks(n * inner))
            .for_each(block);
    } else {
        out.chunks_mut(inner)
            .zip(x.chunks(n * inner))
            .for_each(block);
    }
    acc.into_iter().map(E::from_acc).collect()
}
