//! The buffer pool's memory figures: flat over a repeated training step, and
//! `empty_cache` gives back what is cached. One test per binary, so no other test's
//! buffers move the figures.
#![cfg(feature = "gpu")]

use volta::nn::loss::cross_entropy;
use volta::prelude::*;

#[test]
fn a_repeated_training_step_keeps_device_memory_flat() {
    if let Err(e) = Gpu::init() {
        panic!("no GPU adapter (install Mesa's lavapipe): {e}");
    }
    let mut rng = Rng::seed(0);
    let mut model = (
        Linear::<16, 32, Gpu>::new(&mut rng),
        Linear::<32, 4, Gpu>::new(&mut rng),
    );
    let mut opt = Adam::<Gpu>::new(1e-2);
    let x = Tensor::<Rank2<8, 16>, Gpu>::randn(&mut rng);
    let y = Tensor::<Rank1<8>, Gpu, u32>::from_vec(vec![0, 1, 2, 3, 0, 1, 2, 3]).unwrap();
    let mut step = || {
        let loss = cross_entropy(&model.1.forward(&model.0.forward(&x).relu()), &y);
        let value = loss.item();
        let grads = loss.backward();
        opt.step(&mut model, &grads);
        value
    };
    let first = step();
    for _ in 0..3 {
        step();
    }
    let warm = Gpu::memory();
    assert!(
        warm.reserved_bytes > 0 && warm.buffers_created > 0,
        "{warm}"
    );
    let mut last = 0.0;
    for _ in 0..20 {
        last = step();
    }
    let after = Gpu::memory();
    assert_eq!(
        after.reserved_bytes, warm.reserved_bytes,
        "{warm} then {after}"
    );
    assert_eq!(
        after.buffers_created, warm.buffers_created,
        "{warm} then {after}"
    );
    assert!(last < first, "the loss falls: {first} → {last}");

    Gpu::sync().unwrap();
    let cached = Gpu::memory().cached_bytes;
    assert!(cached > 0);
    assert_eq!(Gpu::empty_cache(), cached);
    let emptied = Gpu::memory();
    assert_eq!(emptied.cached_bytes, 0);
    assert_eq!(emptied.reserved_bytes, after.reserved_bytes - cached);
}
