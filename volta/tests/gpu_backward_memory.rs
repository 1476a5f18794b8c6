//! A finished backward pass holds its gradients and nothing else on the GPU: a
//! bias's or a norm's gradient (a sum over the batch of a layer's output
//! gradient) and a weight's from split-K partials are computed during the pass,
//! not kept as deferred sums that hold batch-sized operands until the optimiser
//! reads them.
#![cfg(feature = "gpu")]

use volta::nn::loss::cross_entropy;
use volta::prelude::*;

fn in_use() -> u64 {
    Gpu::sync().unwrap();
    let m = Gpu::memory();
    m.reserved_bytes - m.cached_bytes
}

#[test]
fn after_backward_only_the_gradients_stay_on_the_gpu() {
    let _gpu = crate::support::gpu_alone();
    if let Err(e) = Gpu::init() {
        panic!("no GPU adapter (install Mesa's lavapipe): {e}");
    }
    let mut rng = Rng::seed(7);
    let model = (
        Linear::<64, 256, Gpu>::new(&mut rng),
        LayerNorm::<256, Gpu>::new(),
        Linear::<256, 64, Gpu>::new(&mut rng),
    );
    // 4096 rows: each activation or output gradient is 1–4 MiB, the parameters
    // 132 KiB, and the weights' gradients split K (too few output tiles).
    const ROWS: usize = 4096;
    let x = Tensor::<(Const<ROWS>, Const<64>), Gpu>::randn(&mut rng);
    let labels: Vec<u32> = (0..ROWS as u32).map(|i| i % 64).collect();
    let y = Tensor::<(Const<ROWS>,), Gpu, u32>::from_vec(labels).unwrap();
    let params: u64 = 4 * (64 * 256 + 256 + 2 * 256 + 256 * 64 + 64);

    let before = in_use();
    let hidden = model.1.forward(&model.0.forward(&x)).relu();
    let loss = cross_entropy(&model.2.forward(&hidden), &y);
    drop(hidden);
    let forward = in_use() - before;
    let grads = loss.backward();
    let held = in_use() - before;
    assert_eq!(grads.len(), 6);
    assert!(
        forward > 16 * params,
        "the forward pass saves batch-sized values ({forward} bytes)"
    );
    // Each gradient in its pool size class (at most a quarter more).
    assert!(
        held <= params + params / 4 + 6 * 256,
        "after backward {held} bytes stay on the GPU, for {params} bytes of gradients \
         (the forward pass saved {forward})"
    );
    drop(grads);
    assert_eq!(in_use(), before);
}
