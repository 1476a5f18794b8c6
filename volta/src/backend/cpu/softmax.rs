//! Softmax and log-softmax along one axis, viewing the (contiguous) input as
//! (outer, n, inner): each row is read three times (max, sum, write), as the GPU
//! kernel does.
use super::PARALLEL_THRESHOLD;
use super::copy::strided_to_vec;
use super::rows::contiguous_slice;
use super::simd::vectorized;
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
        if inner == 1 {
            return vectorized(
                #[inline(always)]
                || contiguous_row(b, log),
            );
        }
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

/// One contiguous row, in eight lanes (a single running max or sum is a chain the
/// compiler may not reorder), so that it vectorises.
#[inline(always)]
fn contiguous_row<E: Float>(row: &mut [E], log: bool) {
    let chunks = row.chunks_exact(8);
    let tail = chunks.remainder();
    let larger = |m: E::Acc, v: E::Acc| if v > m { v } else { m };
    let mut lanes = [E::Acc::NEG_INFINITY; 8];
    for chunk in chunks.clone() {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = larger(*lane, x.to_acc());
        }
    }
    let m = lanes
        .into_iter()
        .chain(tail.iter().map(|x| x.to_acc()))
        .fold(E::Acc::NEG_INFINITY, larger);
    let mut lanes = [E::Acc::ZERO; 8];
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = *lane + (x.to_acc() - m).exp();
        }
    }
    let z = lanes
        .into_iter()
        .chain(tail.iter().map(|x| (x.to_acc() - m).exp()))
        .fold(E::Acc::ZERO, |z, v| z + v);
    if log {
        let lz = z.ln();
        for x in row.iter_mut() {
            *x = E::from_acc(x.to_acc() - m - lz);
        }
    } else {
        for x in row.iter_mut() {
            *x = E::from_acc((x.to_acc() - m).exp() / z);
        }
    }
}
