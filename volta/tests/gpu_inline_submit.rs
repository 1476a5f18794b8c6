//! Inline submission, the strategy for targets without threads (wasm32 in a
//! browser), run natively: `VOLTA_SUBMIT=inline` makes the recording thread
//! submit each batch itself. Results must match the CPU exactly as with the
//! submitting thread, across many batches, with fusion, split-K sums and
//! read-backs in between. One test, in a process of its own: the strategy is
//! chosen when the device opens.
#![cfg(feature = "gpu")]

use volta::backend::gpu::Submission;
use volta::prelude::*;
use volta::{RawTensor, Rng};
use volta_kernels::BinaryOp;

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// A small training-like workload: products, fused chains, reductions and
/// their gradients, with read-backs in between.
fn work<D: volta::Backend<f32>>(seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::seed(seed);
    let mut data = |n: usize, scale: f64| -> Vec<f32> {
        (0..n).map(|_| (rng.normal() * scale) as f32).collect()
    };
    let x = Tensor::<Rank2<64, 96>, D>::from_vec(data(64 * 96, 1.0)).unwrap();
    let w = Tensor::<Rank2<96, 32>, D>::from_vec(data(96 * 32, 0.1))
        .unwrap()
        .requires_grad();
    let mut outs = Vec::new();
    let mut h = x.clone();
    for _ in 0..6 {
        let y = h.matmul(&w);
        let a = y.tanh().mul(&y);
        outs.push(a.sum::<Rank1<64>, _>().to_vec());
        h = h.add(&x.mul_scalar(0.5));
    }
    let loss = x.matmul(&w).relu().sum_all();
    let grads = loss.backward();
    outs.push(grads.get(&w).expect("w is tracked").to_vec());
    outs
}

#[test]
fn inline_submission_matches_the_cpu() {
    // SAFETY: the only test of this binary, before the device opens.
    unsafe { std::env::set_var("VOLTA_SUBMIT", "inline") };
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    assert_eq!(Gpu::submission().unwrap(), Submission::Inline);
    let before = Gpu::batches_submitted();
    for seed in 0..4 {
        let (cpu, gpu) = (work::<Cpu>(seed), work::<Gpu>(seed));
        for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
            close(g, c, &format!("seed {seed}, output {i}"));
        }
    }
    // Many dispatches: more than one batch each time a value was read.
    let many = RawTensor::<Gpu, f32>::from_vec(vec![1.0; 1024], &[1024]);
    Gpu::set_fusion(false);
    let mut x = many.clone();
    for _ in 0..600 {
        x = x.scalar(BinaryOp::Add, 1.0);
    }
    Gpu::set_fusion(true);
    assert_eq!(x.to_vec(), vec![601.0; 1024]);
    assert!(
        Gpu::batches_submitted() - before > 4 * 7,
        "inline submission submitted {} batches",
        Gpu::batches_submitted() - before
    );
    Gpu::sync().unwrap();
}
