//! The non-blocking face the browser needs (`Gpu::init_async`, `to_vec_async`,
//! `try_to_vec_async`, `Gpu::sync_async`), run natively: the same recorded copies
//! and error reports as the blocking calls, awaited.
#![cfg(feature = "gpu")]

use pollster::block_on;
use volta::RawTensor;
use volta::nn::loss::cross_entropy;
use volta::prelude::*;

#[test]
fn async_reads_match_blocking_reads_on_both_devices() {
    let _gpu = crate::support::gpu_shared();
    let info =
        block_on(Gpu::init_async()).expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    assert_eq!(Gpu::init().expect("opened above"), info);

    let data: Vec<f32> = (0..24).map(|i| i as f32 - 11.5).collect();
    let cpu = Tensor::<Rank2<4, 6>>::from_vec(data.clone()).unwrap();
    let gpu = Tensor::<Rank2<4, 6>, Gpu>::from_vec(data).unwrap();
    // A fused chain, and a strided view (packed on the device before the copy).
    let (c, g) = (cpu.relu().mul_scalar(2.0), gpu.relu().mul_scalar(2.0));
    assert_eq!(block_on(g.to_vec_async()), c.to_vec());
    assert_eq!(block_on(g.try_to_vec_async()), Ok(c.to_vec()));
    let (ct, gt): (Tensor<Rank2<6, 4>>, Tensor<Rank2<6, 4>, Gpu>) =
        (c.permute::<_, Axes2<1, 0>>(), g.permute::<_, Axes2<1, 0>>());
    assert_eq!(block_on(gt.to_vec_async()), ct.to_vec());
    assert_eq!(block_on(gt.to_vec_async()), gt.to_vec());
    assert_eq!(block_on(ct.to_vec_async()), ct.to_vec());
    block_on(Gpu::sync_async()).unwrap();
}

#[test]
fn async_reads_report_device_errors() {
    let _gpu = crate::support::gpu_alone();
    block_on(Gpu::init_async()).expect("a GPU adapter");
    let x = RawTensor::<Gpu, f32>::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]);
    let idx = RawTensor::<Gpu, u32>::from_vec(vec![1, 9], &[2]);
    let bad = x.gather(0, &idx);
    let e = block_on(bad.try_to_vec_async()).unwrap_err();
    assert_eq!(e, volta::backend::gpu::GpuError::IndexOutOfRange);
    // The flags were cleared: the next read is clean.
    assert_eq!(block_on(x.try_to_vec_async()), Ok(vec![1.0, 2.0, 3.0, 4.0]));
}

volta::model! {
    /// A small classifier for the loop below.
    pub struct Tiny for (B, 8) -> (B, 4) {
        fc1: Linear<16>,
        relu,
        fc2: Linear<4>,
    }
}

/// A training loop as a page runs it: each step awaits the loss instead of
/// blocking, and the weights end where the CPU's do.
#[test]
fn a_training_loop_awaiting_each_step_matches_the_cpu() {
    let _gpu = crate::support::gpu_shared();
    block_on(Gpu::init_async()).expect("a GPU adapter");
    let mut rng = Rng::seed(3);
    let mut cpu = Tiny::<Cpu>::new(&mut rng);
    let mut gpu: Tiny<Gpu> = cpu.to::<Gpu>();
    let mut opt_c = Adam::<Cpu>::new(0.01);
    let mut opt_g = Adam::<Gpu>::new(0.01);
    let x: Vec<f32> = (0..64)
        .map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5)
        .collect();
    let y: Vec<u32> = (0..8).map(|i| (i % 4) as u32).collect();
    let (xc, yc) = (
        Tensor::<Rank2<8, 8>>::from_vec(x.clone()).unwrap(),
        Tensor::<Rank1<8>, Cpu, u32>::from_vec(y.clone()).unwrap(),
    );
    let (xg, yg) = (
        Tensor::<Rank2<8, 8>, Gpu>::from_vec(x).unwrap(),
        Tensor::<Rank1<8>, Gpu, u32>::from_vec(y).unwrap(),
    );
    block_on(async {
        for _ in 0..5 {
            let lc = cross_entropy(&cpu.forward(&xc), &yc);
            let lg = cross_entropy(&gpu.forward(&xg), &yg);
            let (a, b) = (lc.to_vec_async().await[0], lg.to_vec_async().await[0]);
            assert!((a - b).abs() < 1e-4, "loss {a} on the CPU, {b} on the GPU");
            let gc = lc.backward();
            let gg = lg.backward();
            opt_c.step(&mut cpu, &gc);
            opt_g.step(&mut gpu, &gg);
            Gpu::sync_async().await.unwrap();
        }
        let (wc, wg) = (
            cpu.fc2.weight.to_vec_async().await,
            gpu.fc2.weight.to_vec_async().await,
        );
        for (a, b) in wc.iter().zip(&wg) {
            assert!((a - b).abs() < 1e-4, "weights {a} vs {b}");
        }
    });
}

/// `try_read_into` fills a vector read into again: of another length (a plain
/// copy) and of the same length, large enough (12 MB) for the copy out of the staging
/// memory to run in pieces on several threads.
#[test]
fn reads_into_a_reused_vector_match_to_vec() {
    let _gpu = crate::support::gpu_shared();
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    let n = 3 << 20;
    let data: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 - 0.5).collect();
    let x = RawTensor::<Gpu, f32>::from_vec(data.clone(), &[n]);
    let doubled = x.scalar(volta_kernels::BinaryOp::Mul, 2.0);
    let mut out = vec![7.0f32; 5];
    x.try_read_into(&mut out).unwrap();
    assert!(out == data, "read into a vector of another length");
    doubled.try_read_into(&mut out).unwrap();
    assert!(
        out == doubled.to_vec(),
        "read into a vector of the same length"
    );
    assert_eq!(out[n - 1], 2.0 * data[n - 1]);
}
