//! The bind-group cache: repeated work over pooled buffers creates no bind groups,
//! and buffers the pool released and created anew are bound afresh, never through
//! a cached bind group of the old ones.
#![cfg(feature = "gpu")]

use volta::RawTensor;
use volta::backend::Backend;
use volta::prelude::*;
use volta_kernels::BinaryOp;

// The bind-group counter and the pool are process-wide: one test at a time.

/// A chain of unfused scalar ops (each a dispatch), as the recording benchmark runs.
fn chain<D: Backend<f32>>(x: &RawTensor<D, f32>) -> Vec<f32> {
    let mut y = x.clone();
    for i in 0..20 {
        let op = if i % 2 == 0 {
            BinaryOp::Mul
        } else {
            BinaryOp::Add
        };
        y = y.scalar(op, 0.75);
    }
    y.to_vec()
}

fn input() -> Vec<f32> {
    (0..64).map(|i| i as f32 / 8.0 - 4.0).collect()
}

#[test]
fn repeated_launches_reuse_their_bind_groups() {
    let _turn = crate::support::gpu_alone();
    if let Err(e) = Gpu::init() {
        panic!("no GPU adapter (install Mesa's lavapipe): {e}");
    }
    Gpu::set_fusion(false);
    let x = RawTensor::<Gpu, f32>::from_vec(input(), &[8, 8]);
    // Two runs bind every pair of the buffers the chain alternates between.
    let expected = chain(&x);
    assert_eq!(chain(&x), expected);
    let before = Gpu::bind_groups_created();
    for _ in 0..3 {
        assert_eq!(chain(&x), expected);
    }
    assert_eq!(
        Gpu::bind_groups_created(),
        before,
        "60 launches, all cached"
    );
    Gpu::set_fusion(true);
}

#[test]
fn released_buffers_are_not_bound_through_cached_bind_groups() {
    let _turn = crate::support::gpu_alone();
    if let Err(e) = Gpu::init() {
        panic!("no GPU adapter (install Mesa's lavapipe): {e}");
    }
    Gpu::set_fusion(false);
    let cpu = chain(&RawTensor::<Cpu, f32>::from_vec(input(), &[8, 8]));
    let x = RawTensor::<Gpu, f32>::from_vec(input(), &[8, 8]);
    assert_eq!(chain(&x), cpu);
    Gpu::sync().unwrap();
    // The chain's buffers go back to the device; the next run creates new ones,
    // which need bind groups of their own.
    assert!(Gpu::empty_cache() > 0);
    let before = Gpu::bind_groups_created();
    assert_eq!(chain(&x), cpu);
    assert!(Gpu::bind_groups_created() > before);
    Gpu::set_fusion(true);
}
