//! User kernels on the CPU: the functions `#[kernel]` compiled from the Rust body,
//! mapped over every element.
use super::PARALLEL_THRESHOLD;
use crate::layout::Layout;
use rayon::prelude::*;
use volta_kernels::{ArgKind, KernelDef};

pub(crate) fn call_kernel(
    def: &KernelDef,
    partial: Option<usize>,
    tensors: &[(&[f32], &Layout)],
    scalars: &[f32],
) -> Vec<f32> {
    let f = match partial {
        None => def.forward,
        Some(k) => def.partials[k],
    };
    let n = tensors[0].1.numel();
    // Gather each tensor argument contiguously once, then evaluate per element.
    let columns: Vec<Vec<f32>> = tensors
        .iter()
        .map(|(d, l)| super::copy::strided_to_vec(d, l))
        .collect();
    let eval = |i: usize| {
        let (mut t, mut s) = (0, 0);
        let mut args = [0.0f32; 16];
        for (slot, kind) in args.iter_mut().zip(def.args) {
            *slot = match kind {
                ArgKind::Tensor => {
                    t += 1;
                    columns[t - 1][i]
                }
                ArgKind::Scalar => {
                    s += 1;
                    scalars[s - 1]
                }
            };
        }
        f(&args[..def.args.len()])
    };
    if n >= PARALLEL_THRESHOLD {
        (0..n).into_par_iter().map(eval).collect()
    } else {
        (0..n).map(eval).collect()
    }
}
