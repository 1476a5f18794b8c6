//! Ops on tensors larger than one binding, in a process of their own: the GPU
//! opens with its binding size capped at [`BINDING`] (`VOLTA_GPU_MAX_BINDING`, set by [`alone`]),
//! so tensors of a few MiB take the sliced paths that an adapter's own limit
//! (128 MiB on lavapipe, 2 GiB on NVIDIA) reaches only with tensors that large,
//! which took minutes of every test run on lavapipe. Slicing reads the limit from
//! the device, so the paths are the same.
#![cfg(feature = "gpu")]

mod gpu_limits;
mod gpu_limits_quant;

use std::sync::{Mutex, MutexGuard};
use volta::Gpu;

/// The binding size of this binary's GPU.
const BINDING: u64 = 4 << 20;

/// Held by each test for its whole run: errors are reported at the next sync
/// point of whichever test syncs, so the tests here take turns. Opens the GPU
/// with its bindings capped at [`BINDING`] first.
fn alone() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    static CAP: std::sync::Once = std::sync::Once::new();
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: set once, by the first test, before this process opens the GPU (so
    // before wgpu and the driver start threads of their own); the other tests
    // wait for the turn meanwhile, and the harness reads no environment then.
    CAP.call_once(|| unsafe { std::env::set_var("VOLTA_GPU_MAX_BINDING", BINDING.to_string()) });
    assert!(
        limit() <= BINDING,
        "VOLTA_GPU_MAX_BINDING did not cap the bindings"
    );
    turn
}

/// The binding size of the GPU, as the device reports it.
fn limit() -> u64 {
    Gpu::init()
        .expect("a GPU adapter (mesa-vulkan-drivers gives lavapipe)")
        .max_storage_buffer_binding_size
}
