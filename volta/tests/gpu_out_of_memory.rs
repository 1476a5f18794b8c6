//! Out of memory, with the buffer pool's limit lowered (as on a full GPU): an
//! allocation that does not fit first releases the pool's cache and retries; when
//! it still does not fit, the next sync point returns `GpuError::OutOfMemory` with
//! the size asked for, and the program goes on once tensors are dropped. One test
//! in its own binary: the limit is process-wide.
#![cfg(feature = "gpu")]

use volta::backend::gpu::GpuError;
use volta::data::{DataLoader, Labelled};
use volta::prelude::*;

const MIB: u64 = 1 << 20;

/// A tensor of `mib` MiB of ones, realized on the device.
fn block(mib: usize) -> Tensor<(usize,), Gpu> {
    let x = Tensor::<(usize,), Gpu>::full_shaped((mib << 18,), 1.0);
    x.sum_all().item(); // realizes it (4-byte read-back)
    x
}

#[test]
fn allocations_past_the_limit_empty_the_cache_then_report_out_of_memory() {
    Gpu::init().expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)");
    Gpu::set_memory_limit(Some(64 * MIB));

    // 40 MiB, then dropped: it stays cached.
    drop(block(40));
    assert!(Gpu::memory().cached_bytes >= 40 * MIB, "{}", Gpu::memory());
    // 48 MiB more does not fit beside the cache: the cache goes, the allocation
    // succeeds.
    let held = block(48);
    assert!(Gpu::memory().cached_bytes < 40 * MIB, "{}", Gpu::memory());
    Gpu::sync().expect("the retry after emptying the cache fits");

    // Another 48 MiB while those are held does not fit at all.
    let over = Tensor::<(usize,), Gpu>::full_shaped((48 << 18,), 1.0);
    match over.sum_all().try_item() {
        Err(GpuError::OutOfMemory {
            requested: Some(r),
            in_use,
            limit: Some(l),
        }) => {
            assert!(
                r >= 48 * MIB && in_use >= 48 * MIB && l == 64 * MIB,
                "{r} {in_use} {l}"
            );
            let msg = GpuError::OutOfMemory {
                requested: Some(r),
                in_use,
                limit: Some(l),
            }
            .to_string();
            assert!(msg.contains("allocating 48.0 MiB"), "{msg}");
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }

    // The error was reported once; with the big tensors dropped, work goes on.
    drop((held, over));
    let x = block(8);
    assert_eq!(
        x.sum_all().try_item().expect("memory is free again"),
        (8 << 18) as f32
    );

    // A data loader's device upload that does not fit comes back the same way:
    // from the next sync point, as an error, not a panic on the prefetch thread.
    drop(x);
    Gpu::empty_cache();
    Gpu::set_memory_limit(Some(8 * MIB));
    let samples = 64;
    let features = vec![0.5; samples * (64 << 10)];
    let data =
        Labelled::new(features, &[64 << 10], vec![0; samples], 2).expect("a consistent dataset");
    let loader = DataLoader::new(data).batch_size(samples).device::<Gpu>();
    let batch = loader.epoch(0).next().expect("one batch");
    match batch.inputs.sum_all().try_item() {
        Err(GpuError::OutOfMemory { .. }) => {}
        other => panic!("expected OutOfMemory from the 16 MiB batch, got {other:?}"),
    }
    drop(batch);
    Gpu::set_memory_limit(None);
    let batch = loader.epoch(1).next().expect("one batch");
    let total = (samples * (64 << 10)) as f32 * 0.5;
    assert_eq!(batch.inputs.sum_all().try_item(), Ok(total));
}
