//! An adapter without `shader-f16`: `VOLTA_GPU_DISABLE=shader-f16` makes Volta leave
//! the feature off, as on such an adapter. `f16` data still moves, the first `f16`
//! kernel reports `GpuError::Unsupported` at the next sync point, and `f32` work
//! goes on. One test in its own binary: the GPU context is created once per process.
#![cfg(feature = "gpu")]

use volta::backend::gpu::GpuError;
use volta::dtype::f16;
use volta::prelude::*;

#[test]
fn f16_kernels_report_unsupported_at_the_next_sync() {
    // SAFETY: the only test of this binary sets it before any thread reads the
    // environment (the GPU context reads it on first use, below).
    unsafe { std::env::set_var("VOLTA_GPU_DISABLE", "shader-f16") };
    let info = Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    assert!(!info.f16, "{info}");
    assert!(!info.features.contains(&"shader-f16"), "{info}");

    // Uploads and contiguous read-backs copy bytes: no kernel, no feature needed.
    let data: Vec<f16> = [1.0, -2.5, 0.1].iter().map(|&v| f16::from_f32(v)).collect();
    let x = Tensor::<Rank1<3>, Gpu, f16>::from_vec(data.clone()).unwrap();
    assert_eq!(x.to_vec(), data);
    Gpu::sync().expect("no f16 kernel ran yet");

    // An f16 op records nothing; the sync reports the typed error.
    let y = x.exp().add_scalar(f16::ONE);
    y.raw().buffer().realize();
    match Gpu::sync() {
        Err(GpuError::Unsupported(msg)) => assert!(msg.contains("shader-f16"), "{msg}"),
        other => panic!("expected GpuError::Unsupported, got {other:?}"),
    }
    // Casts need a kernel too.
    let cast = Tensor::<Rank1<3>, Gpu>::ones().to_dtype::<f16>();
    cast.raw().buffer().realize();
    assert!(matches!(Gpu::sync(), Err(GpuError::Unsupported(_))));

    // The error was reported once; f32 work goes on.
    let z = Tensor::<Rank1<3>, Gpu>::from_array([1.0, 2.0, 3.0]).mul_scalar(2.0);
    assert_eq!(z.to_vec(), vec![2.0, 4.0, 6.0]);
    Gpu::sync().unwrap();
}
