//! GPU time per kernel, measured with timestamp queries ([`Gpu::profile`]).
//!
//! While profiling, the recorder gives every dispatch its own compute pass with a
//! timestamp at its start and end; each batch resolves its timestamps into a buffer
//! that is read after the profiled work has been synced. Separate passes order the
//! dispatches one after another, so a profile shows where time goes rather than the
//! exact overlap of an unprofiled run.
//!
//! [`Gpu::profile`]: crate::Gpu::profile
use super::device::{Callback, GpuDevice};
use super::error::GpuError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// GPU time of the kernels recorded while profiling, by kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// One entry per kernel name, the most time first.
    pub kernels: Vec<KernelTime>,
}

/// The dispatches of one kernel in a [`Profile`].
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The kernel: the op and, for generated kernels, the expression they compute
    /// (`elementwise relu(((x0 * x1) + x2))`, `softmax rows`, `matmul`).
    pub name: String,
    /// How many times it ran.
    pub calls: u64,
    /// GPU time over all its calls.
    pub total: Duration,
}

impl Profile {
    /// GPU time of every kernel together.
    pub fn total(&self) -> Duration {
        self.kernels.iter().map(|k| k.total).sum()
    }

    /// Number of dispatches.
    pub fn calls(&self) -> u64 {
        self.kernels.iter().map(|k| k.calls).sum()
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.total().as_secs_f64();
        writeln!(f, "{:>10} {:>6} {:>6}  kernel", "GPU µs", "calls", "share")?;
        for k in &self.kernels {
            let t = k.total.as_secs_f64();
            writeln!(
                f,
                "{:>10.1} {:>6} {:>5.1}%  {}",
                t * 1e6,
                k.calls,
                if total > 0.0 { 100.0 * t / total } else { 0.0 },
                k.name
            )?;
        }
        write!(f, "{:>10.1} {:>6}         total", total * 1e6, self.calls())
    }
}

/// Dispatches per submitted batch (each profiled dispatch takes two timestamp
/// slots of the batch's query set).
pub(crate) const MAX_DISPATCHES: usize = 256;

/// Timestamps per batch: a start and an end per dispatch.
pub(crate) const QUERIES: u32 = 2 * MAX_DISPATCHES as u32;

/// The recorder's profiling state.
pub(crate) struct Profiler {
    pub queries: wgpu::QuerySet,
    /// Kernel names of the current batch's dispatches, in query order.
    pub batch: Vec<Arc<str>>,
    /// Resolved batches: a mappable copy of their timestamps, and their names.
    pub resolved: Vec<(wgpu::Buffer, Vec<Arc<str>>)>,
}

/// Whether `VOLTA_PROFILE_DETAIL` is set: profiles then name each kernel with its
/// variant's parameters (tile sizes, operand layouts) and each launch's grid.
pub(crate) fn detail() -> bool {
    static DETAIL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DETAIL.get_or_init(|| std::env::var_os("VOLTA_PROFILE_DETAIL").is_some_and(|v| v != "0"))
}

/// The name a profile records for one launch of kernel `name` on grid `groups`:
/// the kernel's own, or with `detail` its grid too.
pub(crate) fn launch_name(name: &Arc<str>, groups: [u32; 3], detail: bool) -> Arc<str> {
    if detail {
        let [x, y, z] = groups;
        format!("{name} grid {x}×{y}×{z}").into()
    } else {
        name.clone()
    }
}

impl Profiler {
    pub fn new(gpu: &GpuDevice) -> Result<Self, GpuError> {
        if !gpu
            .device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
        {
            return Err(GpuError::Unsupported(
                "profiling needs timestamp queries, which this adapter does not offer".into(),
            ));
        }
        Ok(Profiler {
            queries: gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("volta profile"),
                ty: wgpu::QueryType::Timestamp,
                count: QUERIES,
            }),
            batch: Vec::new(),
            resolved: Vec::new(),
        })
    }

    /// Records, at the end of a batch, the copy of its timestamps into a buffer the
    /// host can map.
    pub fn resolve(&mut self, gpu: &GpuDevice, encoder: &mut wgpu::CommandEncoder) {
        if self.batch.is_empty() {
            return;
        }
        let n = 2 * self.batch.len() as u32;
        let bytes = u64::from(n) * u64::from(wgpu::QUERY_SIZE);
        let buffer = |usage| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("volta profile"),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let resolve = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let read = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        encoder.resolve_query_set(&self.queries, 0..n, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, bytes);
        self.resolved.push((read, std::mem::take(&mut self.batch)));
    }

    /// Reads every resolved batch (the work must have been synced) into a profile.
    pub fn finish(self, gpu: &GpuDevice) -> Result<Profile, GpuError> {
        let period = f64::from(gpu.queue.get_timestamp_period());
        let mut by_name: HashMap<Arc<str>, (u64, f64)> = HashMap::new();
        for (buffer, names) in self.resolved {
            let ticks = read(gpu, &buffer)?;
            for (name, pair) in names.iter().zip(ticks.chunks_exact(2)) {
                let ns = pair[1].saturating_sub(pair[0]) as f64 * period;
                let e = by_name.entry(name.clone()).or_default();
                e.0 += 1;
                e.1 += ns;
            }
        }
        let mut kernels: Vec<KernelTime> = by_name
            .into_iter()
            .map(|(name, (calls, ns))| KernelTime {
                name: name.to_string(),
                calls,
                total: Duration::from_secs_f64(ns * 1e-9),
            })
            .collect();
        kernels.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
        Ok(Profile { kernels })
    }
}

/// Maps a buffer of timestamps whose copy has completed.
fn read(gpu: &GpuDevice, buffer: &wgpu::Buffer) -> Result<Vec<u64>, GpuError> {
    let done = std::sync::Arc::new(Callback::default());
    buffer
        .slice(..)
        .map_async(wgpu::MapMode::Read, done.sender());
    gpu.wait_for(&done, None)?
        .map_err(|e| GpuError::ReadBack(e.to_string()))?;
    let ticks = {
        let view = buffer
            .slice(..)
            .get_mapped_range()
            .map_err(|e| GpuError::ReadBack(e.to_string()))?;
        bytemuck::pod_collect_to_vec(&view)
    };
    buffer.unmap();
    Ok(ticks)
}

#[cfg(test)]
mod tests {
    use super::launch_name;
    use std::sync::Arc;

    #[test]
    fn detailed_launches_are_named_with_their_grid() {
        let name: Arc<str> = "matmul".into();
        assert!(Arc::ptr_eq(&launch_name(&name, [3, 128, 1], false), &name));
        assert_eq!(
            &*launch_name(&name, [3, 128, 1], true),
            "matmul grid 3×128×1"
        );
    }
}
