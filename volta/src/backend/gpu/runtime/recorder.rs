//! Lazy, batched execution. Recording an op appends a dispatch to one open compute
//! pass. The batch goes to the submitting thread (`submit`) when it is full, or
//! once it has gathered launches for [`SUBMIT_AFTER`] while that thread is idle
//! (so the GPU starts while the program records), and is submitted on the spot
//! when a value is read back or [`Gpu::sync`] is called. Each dispatch's parameters go into the batch's parameter
//! arena (one buffer, a slice per dispatch) rather than a buffer per op; bind
//! groups bind the arena at a dynamic offset, so they are cached (`bind_groups`).
//!
//! Every write to a pooled buffer (kernel outputs, uploads) is recorded in this one
//! encoder, in program order, and wgpu places a barrier wherever a buffer changes
//! from being read to being written. So a buffer freed by a dropped tensor may go
//! back to the pool at once and serve a later op of the same batch: the later write
//! is ordered after every earlier read. (Uploads therefore do not use
//! `Queue::write_buffer`, which would land before the whole batch.)
//!
//! Threads: the recorder sits behind the runtime's mutex, so several threads (a
//! data loader's prefetch thread uploading the next batch while the training
//! thread records kernels) record into the same batch. The order argument above
//! still holds across threads: a buffer returns to the pool only after the reads
//! that its owner recorded, so another thread's write into it is recorded later.
//!
//! A captured graph's replay is encoded once more ahead of time: a read-back
//! after a replay (a decode step's logits) encodes and finishes the graph's
//! launches while the GPU runs, and the graph's next replay submits them on the
//! spot, after whatever was recorded before it.
//!
//! [`Gpu::sync`]: crate::Gpu::sync
use super::bind_groups;
use super::device::GpuDevice;
use super::error::GpuError;
use super::pipelines::Kernel;
use super::pool::{Kind, Pool, Pooled};
use super::profile::{MAX_DISPATCHES, Profiler, detail, launch_name};
use super::submit::{Batch, Submission, Submitter};
use std::sync::Arc;
use std::time::Duration;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;
#[cfg(target_arch = "wasm32")]
use web_time::Instant;

/// How long a batch gathers launches before it goes to an idle submitting
/// thread: each submission costs the GPU a pause (a parameter upload and a
/// barrier before the batch), which launches recorded within this time share.
const SUBMIT_AFTER: Duration = Duration::from_micros(50);

/// [`SUBMIT_AFTER`], or `VOLTA_SUBMIT_AFTER_US` (microseconds; for measuring
/// the policy, e.g. a large value submits only full batches and at sync points).
fn submit_after() -> Duration {
    std::env::var("VOLTA_SUBMIT_AFTER_US")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map_or(SUBMIT_AFTER, Duration::from_micros)
}

/// Size of the parameter arena of a batch.
const ARENA_BYTES: u64 = 256 * 1024;

/// Bytes a bind group binds of a parameter block of `bytes` bytes: a few sizes,
/// so that bind groups over the same buffers are shared by most kernels.
fn param_window(bytes: usize) -> u64 {
    (bytes.max(4) as u64).next_power_of_two().max(256)
}

pub(crate) struct Recorder {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    /// Host copy of the arena, written to `arena` just before submission.
    params: Vec<u8>,
    arena: Pooled,
    align: usize,
    dispatches: usize,
    /// The kernel whose pipeline the open pass has set.
    pipeline: Option<Arc<Kernel>>,
    /// Batches submitted so far (tests use it to see that batches split).
    pub submitted: u64,
    /// Dispatches and uploads recorded so far.
    pub recorded: u64,
    /// Times the host waited for the GPU (read-backs and sync points).
    pub waits: u64,
    /// Error flags that kernels raise (e.g. an out-of-range gather index).
    pub flags: Arc<Pooled>,
    /// Set while `Gpu::profile` runs: every dispatch is timed.
    pub profiler: Option<Profiler>,
    /// Set while `Gpu::capture` runs: the dispatches of the capturing thread are
    /// also kept for replays (other threads record as usual meanwhile).
    pub capture: Option<Graph>,
    /// Submits batches while the next one is recorded.
    submitter: Submitter,
    /// The graph replayed last, until a read-back encodes it again.
    last_replayed: Option<(u64, Arc<Vec<Launch>>)>,
    /// A graph's launches encoded and finished while the GPU ran its previous
    /// replay: its next replay submits them at once.
    prepared: Option<(u64, wgpu::CommandBuffer)>,
    /// When the open batch recorded its first command.
    opened: Instant,
    /// How long a batch gathers launches before it may go early.
    submit_after: Duration,
}

/// Launches kept for replay (`Gpu::capture`): each with its own bind group over a
/// parameter buffer of the graph's own, so replays need no parameter uploads.
pub struct Graph {
    /// This graph among all the process's graphs (what a prepared replay is for).
    id: u64,
    /// Shared with the recorder, which encodes the next replay ahead of time.
    launches: Arc<Vec<Launch>>,
    params: Vec<u8>,
    param_buffer: wgpu::Buffer,
    /// Every buffer a launch binds: none returns to the pool while the graph lives,
    /// so nothing else can be written into them between replays.
    buffers: Vec<Arc<Pooled>>,
    /// The thread whose work is captured.
    thread: std::thread::ThreadId,
}

struct Launch {
    kernel: Arc<Kernel>,
    bind_group: wgpu::BindGroup,
    /// Offset of the parameter block in the graph's parameter buffer.
    offset: u32,
    groups: [u32; 3],
}

/// The most parameter bytes a captured graph holds.
const GRAPH_PARAM_BYTES: u64 = 1 << 20;

impl Graph {
    pub fn new(device: &wgpu::Device) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Graph {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            launches: Arc::new(Vec::new()),
            params: Vec::new(),
            param_buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("volta graph params"),
                size: GRAPH_PARAM_BYTES,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            buffers: Vec::new(),
            thread: std::thread::current().id(),
        }
    }

    fn is_capturing_here(capture: &Option<Graph>) -> bool {
        capture
            .as_ref()
            .is_some_and(|g| g.thread == std::thread::current().id())
    }

    /// Kernel launches in the graph.
    pub fn len(&self) -> usize {
        self.launches.len()
    }

    /// Device buffers the graph keeps alive, and their bytes.
    pub fn memory(&self) -> (usize, u64) {
        let mut seen: Vec<*const Pooled> = self.buffers.iter().map(Arc::as_ptr).collect();
        seen.sort();
        seen.dedup();
        let bytes = self
            .buffers
            .iter()
            .filter(|b| seen.binary_search(&Arc::as_ptr(b)).is_ok())
            .map(|b| b.buffer.size())
            .sum::<u64>();
        (seen.len(), bytes)
    }
}

impl Recorder {
    pub fn new(gpu: &GpuDevice, pool: &Pool, submission: Submission) -> Self {
        let (device, queue, limits) = (&gpu.device, &gpu.queue, &gpu.limits);
        let arena = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("volta params"),
            size: ARENA_BYTES,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let flags = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("volta flags"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder {
            encoder: None,
            pass: None,
            params: Vec::new(),
            arena: Pooled::permanent(pool, arena),
            align: limits.min_storage_buffer_offset_alignment.max(4) as usize,
            dispatches: 0,
            pipeline: None,
            submitted: 0,
            recorded: 0,
            waits: 0,
            flags: Arc::new(Pooled::permanent(pool, flags)),
            profiler: None,
            capture: None,
            submitter: Submitter::new(queue, submission),
            last_replayed: None,
            prepared: None,
            opened: Instant::now(),
            submit_after: submit_after(),
        }
    }

    /// Records `kernel` over `buffers` (in binding order after the parameter block)
    /// with `groups` workgroups.
    pub fn dispatch(
        &mut self,
        gpu: &GpuDevice,
        pool: &Pool,
        kernel: &Arc<Kernel>,
        params: &[u32],
        buffers: &[&Arc<Pooled>],
        groups: [u32; 3],
    ) {
        debug_assert_eq!(
            buffers.len(),
            kernel.bindings.reads + kernel.bindings.writes
        );
        let bytes: &[u8] = bytemuck::cast_slice(params);
        let window = param_window(bytes.len());
        // Parameters go to the batch's arena, or while capturing to the graph's
        // own buffer, which replays reuse.
        let capturing = Graph::is_capturing_here(&self.capture);
        if let Some(graph) = &mut self.capture
            && capturing
        {
            let start = graph.params.len().next_multiple_of(self.align);
            assert!(
                start as u64 + window <= GRAPH_PARAM_BYTES,
                "Gpu::capture: the captured work has more than {GRAPH_PARAM_BYTES} bytes \
                 of kernel parameters; capture a smaller step"
            );
            graph.params.resize(start, 0);
            graph.params.extend_from_slice(bytes);
            graph.buffers.extend(buffers.iter().map(|b| (*b).clone()));
            // Not cached: the graph's bind groups live as long as the graph.
            let params = (&graph.param_buffer, window);
            let launch = Launch {
                kernel: kernel.clone(),
                bind_group: bind_groups::create(&gpu.device, &kernel.layout, params, buffers),
                offset: start as u32,
                groups,
            };
            self.record(
                gpu,
                &launch.kernel,
                &launch.bind_group,
                launch.offset,
                groups,
            );
            if let Some(graph) = &mut self.capture {
                Arc::get_mut(&mut graph.launches)
                    .expect("a graph's launches are not shared while it is captured")
                    .push(launch);
            }
            return;
        }
        let start = self.params.len().next_multiple_of(self.align);
        if self.dispatches >= MAX_DISPATCHES || start as u64 + window > ARENA_BYTES {
            self.hand_over(gpu);
            return self.dispatch(gpu, pool, kernel, params, buffers, groups);
        }
        self.params.resize(start, 0);
        self.params.extend_from_slice(bytes);
        let bind_group =
            pool.bind_groups()
                .get(&gpu.device, kernel, (&self.arena, window), buffers);
        self.record(gpu, kernel, &bind_group, start as u32, groups);
    }

    /// Records one launch: in the open compute pass, or, while profiling, in a
    /// pass of its own with a timestamp at its start and its end.
    fn record(
        &mut self,
        gpu: &GpuDevice,
        kernel: &Arc<Kernel>,
        bind_group: &wgpu::BindGroup,
        offset: u32,
        groups: [u32; 3],
    ) {
        if let Some(p) = &mut self.profiler {
            p.batch.push(launch_name(&kernel.name, groups, detail()));
            let at = 2 * (p.batch.len() as u32 - 1);
            self.pass = None;
            let encoder = self.encoder.get_or_insert_with(|| {
                gpu.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
            });
            let queries = &self.profiler.as_ref().expect("profiling").queries;
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: queries,
                    beginning_of_pass_write_index: Some(at),
                    end_of_pass_write_index: Some(at + 1),
                }),
            });
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, bind_group, &[offset]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        } else {
            self.open_pass(gpu);
            // Consecutive launches of one kernel (a chain of ops) set it once.
            let set = !self
                .pipeline
                .as_ref()
                .is_some_and(|k| Arc::ptr_eq(k, kernel));
            if set {
                self.pipeline = Some(kernel.clone());
            }
            let pass = self.pass.as_mut().expect("just opened");
            if set {
                pass.set_pipeline(&kernel.pipeline);
            }
            pass.set_bind_group(0, bind_group, &[offset]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        self.dispatches += 1;
        self.recorded += 1;
        // Keep the GPU fed: once a batch has gathered launches for a while and
        // the submitting thread has nothing left, the batch goes. While that
        // thread is busy, launches gather into the next batch, so batches grow
        // to what submitting them costs. While profiling, batches stay whole
        // (their timestamps are resolved per batch).
        if self.profiler.is_none()
            && self.submitter.idle()
            && self.opened.elapsed() >= self.submit_after
        {
            self.hand_over(gpu);
        }
    }

    /// How this recorder's batches reach the queue.
    pub fn submission(&self) -> Submission {
        self.submitter.strategy()
    }

    /// Whether the calling thread is capturing.
    pub fn is_capturing_here(&self) -> bool {
        Graph::is_capturing_here(&self.capture)
    }

    /// Starts keeping every dispatch for replay (after submitting pending work).
    pub fn begin_capture(&mut self, gpu: &GpuDevice) {
        assert!(
            self.capture.is_none() && self.profiler.is_none(),
            "Gpu::capture cannot run inside Gpu::capture or Gpu::profile"
        );
        self.flush(gpu);
        self.capture = Some(Graph::new(&gpu.device));
    }

    /// Stops capturing. The captured work is recorded and runs with the batch.
    pub fn end_capture(&mut self, gpu: &GpuDevice) -> Option<Graph> {
        let graph = self.capture.take()?;
        self.submitter.wait();
        gpu.queue
            .write_buffer(&graph.param_buffer, 0, &graph.params);
        Some(graph)
    }

    /// Records every launch of `graph` again, after the work recorded so far.
    pub fn replay(&mut self, gpu: &GpuDevice, graph: &Graph) {
        // Another thread's capture goes on meanwhile; this thread's must end first.
        assert!(
            !self.is_capturing_here(),
            "Gpu::replay inside Gpu::capture: replay the graph after capturing"
        );
        if self.profiler.is_some() {
            self.prepared = None;
            for l in graph.launches.iter() {
                // Staging memory and timestamp slots are per batch.
                if self.dispatches >= MAX_DISPATCHES {
                    self.hand_over(gpu);
                }
                self.record(gpu, &l.kernel, &l.bind_group, l.offset, l.groups);
            }
            return;
        }
        self.last_replayed = Some((graph.id, graph.launches.clone()));
        match self.prepared.take() {
            // Encoded ahead: what was recorded before the replay, then the
            // replay, go now. The GPU starts without waiting for the launches
            // to be recorded and finished (a decode step's 150 take longer than
            // its read-back).
            Some((id, commands)) if id == graph.id => {
                let batch = self.take_batch(gpu);
                if batch.is_none() {
                    self.submitted += 1;
                }
                self.submitter.submit_then(batch, commands);
                self.recorded += graph.launches.len() as u64;
            }
            _ => {
                for l in graph.launches.iter() {
                    self.record(gpu, &l.kernel, &l.bind_group, l.offset, l.groups);
                }
            }
        }
    }

    /// Encodes and finishes the graph replayed last, for its next replay: a
    /// read-back calls it once its work is submitted, so this runs while the
    /// GPU computes what is read.
    fn prepare_replay(&mut self, gpu: &GpuDevice) {
        if self.profiler.is_some() || self.capture.is_some() {
            return;
        }
        let Some((id, launches)) = self.last_replayed.take() else {
            return;
        };
        let mut encoder = gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("volta prepared replay"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            let mut pipeline: Option<&Arc<Kernel>> = None;
            for l in launches.iter() {
                if !pipeline.is_some_and(|k| Arc::ptr_eq(k, &l.kernel)) {
                    pass.set_pipeline(&l.kernel.pipeline);
                    pipeline = Some(&l.kernel);
                }
                pass.set_bind_group(0, &l.bind_group, &[l.offset]);
                pass.dispatch_workgroups(l.groups[0], l.groups[1], l.groups[2]);
            }
        }
        self.prepared = Some((id, encoder.finish()));
    }

    fn encoder(&mut self, gpu: &GpuDevice) -> &mut wgpu::CommandEncoder {
        self.pass = None; // a pass must end before the encoder records anything else
        if self.encoder.is_none() {
            self.opened = Instant::now();
        }
        self.encoder.get_or_insert_with(|| {
            gpu.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
        })
    }

    /// Opens a compute pass unless one is open.
    fn open_pass(&mut self, gpu: &GpuDevice) {
        if self.pass.is_none() {
            let pass = self
                .encoder(gpu)
                .begin_compute_pass(&wgpu::ComputePassDescriptor::default())
                .forget_lifetime();
            self.pass = Some(pass);
            self.pipeline = None;
        }
    }

    /// Submits everything recorded so far, on this thread, after the batches
    /// handed over before it: when this returns, a wait on the device covers it.
    /// Returns the submission's index when there was something to submit.
    pub fn flush(&mut self, gpu: &GpuDevice) -> Option<wgpu::SubmissionIndex> {
        let index = match self.take_batch(gpu) {
            Some(batch) => Some(self.submitter.submit(batch)),
            None => {
                self.submitter.wait();
                None
            }
        };
        if let Some(failure) = self.submitter.take_failure() {
            gpu.report(GpuError::Validation(failure));
        }
        index
    }

    /// Hands a full batch to the submitting thread and goes on recording.
    fn hand_over(&mut self, gpu: &GpuDevice) {
        if let Some(batch) = self.take_batch(gpu) {
            self.submitter.hand_over(batch);
        }
    }

    /// Ends the open batch: its commands, and the parameter writes they read.
    fn take_batch(&mut self, gpu: &GpuDevice) -> Option<Batch> {
        self.pass = None;
        if let (Some(p), Some(encoder)) = (&mut self.profiler, &mut self.encoder) {
            p.resolve(gpu, encoder);
        }
        let capacity = self.params.capacity();
        let params = std::mem::replace(&mut self.params, Vec::with_capacity(capacity));
        self.dispatches = 0;
        let encoder = self.encoder.take()?;
        let mut writes = Vec::new();
        if !params.is_empty() {
            writes.push((self.arena.buffer.clone(), params));
        }
        // A capture's launches so far may be in this batch.
        if let Some(g) = &self.capture
            && !g.params.is_empty()
        {
            writes.push((g.param_buffer.clone(), g.params.clone()));
        }
        self.submitted += 1;
        Some(Batch { encoder, writes })
    }

    /// Records the copy of a [`stage`]d upload into `dst` at byte `offset`, in
    /// order with the kernels around it.
    pub fn upload(&mut self, gpu: &GpuDevice, staging: &wgpu::Buffer, dst: &Pooled, offset: u64) {
        if self.dispatches >= MAX_DISPATCHES {
            self.hand_over(gpu);
        }
        self.encoder(gpu)
            .copy_buffer_to_buffer(staging, 0, &dst.buffer, offset, staging.size());
        // Staging memory is held until submission: count uploads toward the batch.
        self.dispatches += 1;
        self.recorded += 1;
    }

    /// Records a copy of `bytes` bytes at `offset` of `src` into a fresh staging
    /// buffer, followed by the error flags, and submits; returns the staging
    /// buffer and the submission to wait for.
    pub fn copy_out(
        &mut self,
        gpu: &GpuDevice,
        pool: &Pool,
        src: &Arc<Pooled>,
        offset: u64,
        bytes: u64,
    ) -> (Pooled, Option<wgpu::SubmissionIndex>) {
        assert!(
            !Graph::is_capturing_here(&self.capture),
            "a value was read back inside Gpu::capture: a captured step cannot read \
             results; read them after the capture"
        );
        let staging = pool.lend(gpu, Kind::Staging, bytes + 16);
        let flags = self.flags.clone();
        let encoder = self.encoder(gpu);
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(&src.buffer, offset, &staging.buffer, 0, bytes);
        }
        encoder.copy_buffer_to_buffer(&flags.buffer, 0, &staging.buffer, bytes, 16);
        let index = self.flush(gpu);
        self.waits += 1;
        self.prepare_replay(gpu);
        (staging, index)
    }
}
