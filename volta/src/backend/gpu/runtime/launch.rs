//! Shared plumbing of every kernel launch: output buffers, grids, recording.
use super::Runtime;
use super::error::GpuError;
use super::pipelines::{Bindings, Kernel, Key};
use super::pool::{Kind, Pooled};
use std::sync::Arc;

/// A fresh storage buffer of at least `bytes` bytes (from the pool). When memory
/// runs out, the next sync point reports
/// [`GpuError::OutOfMemory`] and this returns a stand-in buffer, so recording
/// goes on until then.
pub(crate) fn alloc(rt: &Runtime, bytes: usize) -> Arc<Pooled> {
    Arc::new(rt.pool.lend(&rt.gpu, Kind::Storage, bytes as u64))
}

/// A 2-D grid of at least `groups` workgroups (one dimension is capped at
/// `max_compute_workgroups_per_dimension`; shaders flatten `(y, x)` and skip the
/// excess).
pub(crate) fn grid(rt: &Runtime, groups: usize) -> [u32; 3] {
    let max = rt.gpu.limits.max_compute_workgroups_per_dimension as usize;
    let x = groups.clamp(1, max);
    let y = groups.div_ceil(x);
    assert!(
        y <= max,
        "GPU launch of {groups} workgroups exceeds the grid limit"
    );
    [x as u32, y as u32, 1]
}

/// The kernel for `key`, compiled on first use.
pub(crate) fn kernel(
    rt: &Runtime,
    key: &Key,
    bindings: Bindings,
    entry: &str,
    source: impl FnOnce() -> String,
) -> Arc<Kernel> {
    rt.pipelines
        .get(&rt.gpu.device, key, bindings, entry, source)
}

/// Records one dispatch in the current batch. A kernel the device cannot run (`f16`
/// without `shader-f16`) is not recorded: the next sync point reports
/// [`GpuError::Unsupported`](GpuError::Unsupported).
pub(crate) fn launch(
    rt: &Runtime,
    kernel: &Arc<Kernel>,
    params: &[u32],
    buffers: &[&Arc<Pooled>],
    groups: [u32; 3],
) {
    if kernel.missing_f16 {
        rt.report(GpuError::Unsupported(format!(
            "f16 tensors need the shader-f16 feature, which this adapter lacks \
             (kernel: {}); check Gpu::init()?.f16 first, or use f32",
            kernel.name
        )));
        return;
    }
    // Ops that can work in slices bind windows (see `kernels::slices`); others report here,
    // at record time, rather than as a validation error at the next sync.
    let limit = rt.gpu.limits.max_storage_buffer_binding_size;
    if let Some(big) = buffers.iter().find(|b| b.bound_size() > limit) {
        rt.report(GpuError::TooLarge {
            op: kernel.name.to_string(),
            bytes: big.bound_size(),
            limit,
        });
        return;
    }
    rt.recorder()
        .dispatch(&rt.gpu, &rt.pool, kernel, params, buffers, groups);
}

/// `v` as a `u32` kernel parameter.
pub(crate) fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a GPU tensor index exceeds u32")
}
