//! The GPU runtime: everything between a kernel's WGSL source and the GPU, and
//! nothing about what kernels compute.
//!
//! Layers, each importing only those below it:
//!
//! ```text
//! transfer, launch    uploads, read-backs and sync points; allocating and launching
//! Runtime (this file) the state one opened device owns, passed down to kernels
//! recorder            batches of dispatches in one compute pass; capture for replay
//! profile             timestamp queries per dispatch
//! submit              handing finished batches to the queue (a thread, or inline)
//! pool                device buffers by size class, returned when the last handle drops
//! bind_groups         bind groups cached by the buffers they bind
//! pipelines           compiled kernels by key
//! device              adapter, wgpu device and queue, limits, the pending-error slot
//! error, hash         GpuError; the fast hasher of the caches
//! ```
//!
//! A [`Runtime`] is a value: the device layer above (`backend::gpu::device`) owns
//! it and passes it to every kernel; nothing here reaches a global.
pub(crate) mod bind_groups;
pub(crate) mod device;
pub(crate) mod error;
pub(crate) mod hash;
pub(crate) mod launch;
pub(crate) mod pipelines;
pub(crate) mod pool;
pub(crate) mod profile;
pub(crate) mod recorder;
pub(crate) mod submit;
pub(crate) mod transfer;

use device::GpuDevice;
use error::GpuError;
use pipelines::Pipelines;
use pool::Pool;
use recorder::Recorder;
use std::sync::{Mutex, MutexGuard};
use submit::Submission;

/// What one opened device holds: the device itself, the recorder that batches
/// work for it, its buffer pool and its compiled kernels.
pub(crate) struct Runtime {
    pub gpu: GpuDevice,
    recorder: Mutex<Recorder>,
    pub pool: Pool,
    pub pipelines: Pipelines,
}

impl Runtime {
    /// Opens adapter `adapter` (`None`: the preferred one) and the runtime over
    /// it, submitting batches as `submission` says.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(adapter: Option<usize>, submission: Submission) -> Result<Runtime, GpuError> {
        GpuDevice::open(adapter).map(|gpu| Runtime::on(gpu, submission))
    }

    /// [`open`](Self::open) without blocking (the browser's way).
    pub async fn open_async(
        adapter: Option<usize>,
        submission: Submission,
    ) -> Result<Runtime, GpuError> {
        GpuDevice::open_async(adapter)
            .await
            .map(|gpu| Runtime::on(gpu, submission))
    }

    /// The runtime over an opened device.
    fn on(gpu: GpuDevice, submission: Submission) -> Runtime {
        let pool = Pool::new(&gpu.limits);
        let recorder = Recorder::new(&gpu, &pool, submission);
        Runtime {
            gpu,
            recorder: Mutex::new(recorder),
            pool,
            pipelines: Pipelines::default(),
        }
    }

    /// The recorder, for one step of recording (a poisoned lock is taken over:
    /// the recorder's state stays consistent between its calls).
    pub fn recorder(&self) -> MutexGuard<'_, Recorder> {
        self.recorder.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `e` for the next sync point (unless an earlier error is pending).
    pub fn report(&self, e: GpuError) {
        self.gpu.report(e);
    }
}
