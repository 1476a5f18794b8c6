//! A lost device (a driver reset, a GPU removed), simulated by destroying it: every
//! later sync point and read-back returns `GpuError::DeviceLost` at once — no hang,
//! no panic — and the panicking `to_vec` names the fallible call. One test in its
//! own binary: the GPU context (and its device) is created once per process.
#![cfg(feature = "gpu")]

use std::time::{Duration, Instant};
use volta::backend::gpu::GpuError;
use volta::prelude::*;

#[test]
fn after_a_lost_device_every_call_returns_the_error() {
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    let x = Tensor::<Rank2<64, 64>, Gpu>::ones();
    let y = x.matmul(&x).relu();
    assert_eq!(y.try_to_vec().expect("the device works")[0], 64.0);

    Gpu::simulate_device_loss();
    let start = Instant::now();
    let lost = |r: Result<(), GpuError>| match r {
        Err(GpuError::DeviceLost(why)) => assert!(why.contains("simulated"), "{why}"),
        other => panic!("expected DeviceLost, got {other:?}"),
    };
    lost(Gpu::sync());
    // Reading a tensor computed before the loss, computing and uploading new ones.
    lost(y.try_to_vec().map(drop));
    let z = y.add_scalar(1.0).sum_all();
    lost(z.try_item().map(drop));
    let w = Tensor::<Rank1<3>, Gpu>::from_array([1.0, 2.0, 3.0]);
    lost(w.try_to_vec().map(drop));
    // The error stays: it is not taken by the first call that sees it.
    lost(Gpu::sync());
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.to_vec()))
        .expect_err("to_vec panics");
    let msg = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    assert!(
        msg.contains("device was lost") && msg.contains("try_to_vec"),
        "{msg}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "calls must not hang"
    );
}
