//! Softmax and log-softmax along one axis, viewing the (contiguous) input as
//! (outer, n, inner): each row is read three times (max, sum, write), as the GPU
//! kernel does.
use super::PARALLEL_THRESHOLD;
use super::copy::strided_to_vec;
use super::rows::contiguous_slice;
use crate::dtype::{Float, ScalarMath};
use crate::layout::Layout;
use rayon::prelude::*;

pub(crate) fn softmax<E: Float>(data: &[E], layout: &Layout, axis: usize, log: bool) -> Vec<E> {
    let mut out = match contiguous_slice(data, layout) {
        Some(s) => s.to_vec(),
        None => strided_to_vec(data, layout),
    };
    let dims = &layout.dims;
    let n = dims[axis];
    let inner: usize = dims[axis + 1..].iter().product();
    if n == 0 || inner == 0 || out.is_empty() {
        return out;
    }
    // One (outer) block holds `inner` interleaved rows of length `n`; each row is
    // computed in `E::Acc` (`f32` for `f16`) and rounded once.
    let block = |b: &mut [E]| {
        for i in 0..inner {
            let at = |k: usize| i + k * inner;
            let get = |b: &[E], k: usize| b[at(k)].to_acc();
            let m = (0..n).fold(E::Acc::NEG_INFINITY, |m, k| {
                let v = get(b, k);
                if v > m { v } else { m }
            });
            let z = (0..n).fold(E::Acc::ZERO, |z, k| z + (get(b, k) - m).exp());
            let lz = z.ln();
            for k in 0..n {
                let v = get(b, k) - m;
                b[at(k)] = E::from_acc(if log { v - lz } else { v.exp() / z });
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
