//! The device layer: the state of the one `Gpu` device (its runtime and the
//! matmul tiles tuned on it), opened on first use, and `Gpu`'s public API.
//!
//! This is the only place that holds the state in a global: the layers below
//! take the runtime as an argument, and pending values keep the one they were
//! recorded on.
use super::kernels::elementwise;
use super::kernels::matmul::coop::CoopTiles;
use super::kernels::matmul::tiled::MatmulTiles;
use super::kernels::matmul::tuning::Tuning;
use super::kernels::matmul::{self, MatmulPrecision};
use super::runtime::Runtime;
#[cfg(not(target_arch = "wasm32"))]
use super::runtime::device::GpuAdapter;
use super::runtime::device::GpuInfo;
use super::runtime::error::GpuError;
use super::runtime::pool::MemoryStats;
use super::runtime::profile::{Profile, Profiler};
use super::runtime::submit::Submission;
use super::runtime::transfer;
use super::{Gpu, fusion};
use std::sync::OnceLock;
use volta_kernels::wgsl::Launch;

/// Everything the `Gpu` device holds.
pub(crate) struct State {
    /// The runtime over the opened adapter.
    pub rt: Runtime,
    /// Matmul tiles tuned on this adapter.
    pub tuning: Tuning,
    /// The adapter asked for (an index of `Gpu::adapters`; `None`: wgpu's
    /// preferred one).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub adapter: Option<usize>,
}

static STATE: OnceLock<Result<State, GpuError>> = OnceLock::new();

/// The adapter the environment asks for: `VOLTA_ADAPTER`, an index of
/// `Gpu::adapters` (unset or empty: wgpu's preferred adapter).
fn adapter_from_env() -> Result<Option<usize>, GpuError> {
    match std::env::var("VOLTA_ADAPTER") {
        Ok(v) if !v.trim().is_empty() => v.trim().parse().map(Some).map_err(|_| {
            GpuError::Unsupported(format!(
                "VOLTA_ADAPTER={v:?} is not an adapter index (Gpu::adapters() lists them)"
            ))
        }),
        _ => Ok(None),
    }
}

/// Opens the device's state on `adapter`, once.
#[cfg(not(target_arch = "wasm32"))]
fn open(adapter: Result<Option<usize>, GpuError>) -> Result<&'static State, GpuError> {
    STATE
        .get_or_init(|| {
            let adapter = adapter?;
            Runtime::open(adapter, Submission::from_env()).map(|rt| State::on(rt, adapter))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The device's state, opened on first use.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn init() -> Result<&'static State, GpuError> {
    open(adapter_from_env())
}

/// The device's state: in the browser it cannot be opened without waiting, so
/// [`Gpu::init_async`] must have opened it.
#[cfg(target_arch = "wasm32")]
pub(crate) fn init() -> Result<&'static State, GpuError> {
    match STATE.get() {
        Some(state) => state.as_ref().map_err(Clone::clone),
        None => Err(GpuError::NotOpened),
    }
}

/// Opens the device's state without blocking, once.
async fn init_async() -> Result<&'static State, GpuError> {
    if STATE.get().is_none() {
        let opened = match adapter_from_env() {
            Ok(adapter) => Runtime::open_async(adapter, Submission::from_env())
                .await
                .map(|rt| State::on(rt, adapter)),
            Err(e) => Err(e),
        };
        // Two tasks that open at once: the first to finish is kept.
        let _ = STATE.set(opened);
    }
    init()
}

impl State {
    fn on(rt: Runtime, adapter: Option<usize>) -> State {
        let tuning = Tuning::new(&rt.gpu.info);
        State {
            rt,
            tuning,
            adapter,
        }
    }
}

/// The state for an op on a `Gpu` tensor: there is no CPU fallback, so failing to
/// open the device is fatal, with the reason and the remedy.
pub(crate) fn state() -> &'static State {
    match init() {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// The runtime for an op on a `Gpu` tensor (see [`state`]).
pub(crate) fn rt() -> &'static Runtime {
    &state().rt
}

/// The state if the device was opened.
fn existing() -> Option<&'static State> {
    STATE.get().and_then(|s| s.as_ref().ok())
}

impl Gpu {
    /// Opens the GPU (once per process) and describes the adapter.
    /// Ops on `Gpu` tensors call it implicitly and panic with the error's text
    /// when it fails; call it first to handle [`GpuError::NoAdapter`] yourself.
    ///
    /// In the browser (wasm32) opening the device cannot block: call
    /// [`init_async`](Self::init_async) first; until then this returns
    /// [`GpuError::NotOpened`] and ops on `Gpu` tensors panic saying so.
    pub fn init() -> Result<GpuInfo, GpuError> {
        init().map(|s| s.rt.gpu.info.clone())
    }

    /// Opens adapter `index` of [`adapters`](Self::adapters) (once per process)
    /// and describes it: a process per GPU, as data-parallel training runs (each
    /// MPI rank its local rank's GPU). Setting `VOLTA_ADAPTER=index` does the
    /// same for [`init`](Self::init) and the first op.
    ///
    /// Errors with [`GpuError::NoSuchAdapter`] past the list, and with
    /// [`GpuError::Unsupported`] when the GPU is already open on another adapter
    /// (call it before the first `Gpu` op).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn init_on(index: usize) -> Result<GpuInfo, GpuError> {
        let state = open(Ok(Some(index)))?;
        match state.adapter {
            Some(i) if i == index => Ok(state.rt.gpu.info.clone()),
            other => Err(GpuError::Unsupported(format!(
                "the GPU is already open on {}: call Gpu::init_on({index}) before the first Gpu op",
                other.map_or("the preferred adapter".to_string(), |i| format!(
                    "adapter {i}"
                ))
            ))),
        }
    }

    /// The adapters this machine offers, in the order [`init_on`](Self::init_on)
    /// takes (it opens none of them).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn adapters() -> Vec<GpuAdapter> {
        pollster::block_on(super::runtime::device::adapters_async())
    }

    /// Opens the GPU (once per process) without blocking, and describes the
    /// adapter: the way to open it in the browser, where the adapter and device
    /// arrive asynchronously. Natively it opens the device as [`init`](Self::init)
    /// does, waiting inside the first poll.
    ///
    /// ```no_run
    /// # async fn page() -> Result<(), volta::backend::gpu::GpuError> {
    /// use volta::prelude::*;
    /// let info = Gpu::init_async().await?;
    /// let x = Tensor::<Rank1<3>, Gpu>::from_array([1.0, -2.0, 3.0]);
    /// assert_eq!(x.relu().try_to_vec_async().await?, vec![1.0, 0.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub async fn init_async() -> Result<GpuInfo, GpuError> {
        init_async().await.map(|s| s.rt.gpu.info.clone())
    }

    /// What the opened adapter offers (name, backend, features, limits), or
    /// `None` before the device is opened; it never opens it. In the browser the
    /// page's WebGPU hides the adapter's name and driver (they are empty) and
    /// reports backend `BrowserWebGpu`.
    pub fn info() -> Option<GpuInfo> {
        existing().map(|s| s.rt.gpu.info.clone())
    }

    /// Destroys the device as a driver reset would, for testing how a program
    /// handles [`GpuError::DeviceLost`]: from then on every sync point and
    /// read-back returns that error (the process must restart to use the GPU
    /// again).
    #[doc(hidden)]
    pub fn simulate_device_loss() {
        if let Ok(c) = init() {
            let _ =
                c.rt.gpu
                    .lost
                    .set("simulated by Gpu::simulate_device_loss".into());
            c.rt.gpu.device.destroy();
        }
    }

    /// Submits all recorded work, waits for it, and reports any error raised
    /// since the last sync point (validation, out of memory, device lost,
    /// out-of-range indices).
    ///
    /// In the browser it returns [`GpuError::WouldBlock`]: use
    /// [`sync_async`](Self::sync_async).
    pub fn sync() -> Result<(), GpuError> {
        transfer::sync(&init()?.rt)
    }

    /// [`sync`](Self::sync) without blocking: in the browser the page keeps
    /// running while the GPU works (a training loop awaits it once per step).
    pub async fn sync_async() -> Result<(), GpuError> {
        transfer::sync_async(&init()?.rt).await
    }

    /// Runs `f` and measures on the GPU, with timestamp queries, the time of
    /// every kernel it records. Work recorded before is synced first and not
    /// counted; values `f` leaves pending (unrealized fused chains) are not
    /// computed, so realize or read what you want measured inside `f`.
    ///
    /// ```no_run
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank2<512, 512>, Gpu>::ones();
    /// let (y, profile) = Gpu::profile(|| x.matmul(&x).relu().sum_all().item())?;
    /// println!("{profile}"); // GPU µs, calls and share per kernel
    /// # Ok::<(), volta::backend::gpu::GpuError>(())
    /// ```
    ///
    /// Each dispatch runs in a compute pass of its own while profiling, so the
    /// total can exceed the time of the same work unprofiled. With
    /// `VOLTA_PROFILE_DETAIL=1` in the environment, each kernel's name carries its
    /// variant (tiles, operand layouts) and each launch's grid. Errors with
    /// [`GpuError::Unsupported`] when the adapter has no timestamp queries.
    pub fn profile<R>(f: impl FnOnce() -> R) -> Result<(R, Profile), GpuError> {
        let c = &init()?.rt;
        transfer::sync(c)?;
        let profiler = Profiler::new(&c.gpu)?;
        if c.recorder().profiler.replace(profiler).is_some() {
            panic!("Gpu::profile called inside Gpu::profile");
        }
        // Profiling stops even if `f` panics.
        struct Stop<'a>(&'a Runtime);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.recorder().profiler = None;
            }
        }
        let stop = Stop(c);
        let out = f();
        let synced = transfer::sync(c);
        let profiler = c.recorder().profiler.take().expect("profiling");
        drop(stop);
        synced?;
        Ok((out, profiler.finish(&c.gpu)?))
    }

    /// Releases the device memory of Volta's buffer pool (buffers no tensor
    /// holds, kept for reuse) and returns how many bytes that was; like
    /// PyTorch's `torch.cuda.empty_cache()`. Useful between phases of a
    /// program: releasing large buffers takes the driver time, which a full
    /// pool would otherwise spend, one eviction at a time, in the next phase.
    pub fn empty_cache() -> u64 {
        existing().map_or(0, |s| {
            let bytes = s.rt.pool.clear();
            // wgpu destroys dropped buffers when it next polls the device
            // (after the GPU is done with them): do it now rather than in the
            // next phase's first steps. A lost device reports at the next sync.
            let _ = s.rt.gpu.device.poll(wgpu::PollType::wait_indefinitely());
            bytes
        })
    }

    /// Caps the device memory Volta's buffer pool may hold (buffers lent to
    /// tensors and cached), like PyTorch's
    /// `torch.cuda.set_per_process_memory_fraction`; `None` lifts the cap. An
    /// allocation past it first releases the cache and retries, then reports
    /// [`GpuError::OutOfMemory`] at the next sync point.
    pub fn set_memory_limit(bytes: Option<u64>) {
        if let Ok(c) = init() {
            c.rt.pool.set_limit(bytes);
        }
    }

    /// Device memory held by Volta's buffer pool: what tensors use and what
    /// is cached for reuse (PyTorch's `memory_allocated`/`memory_reserved`
    /// split). A training loop's figures stay flat once its sizes are cached.
    pub fn memory() -> MemoryStats {
        let (reserved, cached) = existing().map_or((0, 0), |s| s.rt.pool.usage());
        MemoryStats {
            reserved_bytes: reserved,
            cached_bytes: cached,
            buffers_created: existing().map_or(0, |s| s.rt.pool.created()),
            peak_in_use_bytes: existing().map_or(0, |s| s.rt.pool.peak_in_use()),
        }
    }

    /// Starts [`MemoryStats::peak_in_use_bytes`] over from the bytes tensors hold
    /// now (PyTorch's `reset_peak_memory_stats`): what one training step needs
    /// at most is then the peak after the step less the bytes held before it.
    pub fn reset_peak_memory() {
        if let Some(s) = existing() {
            s.rt.pool.reset_peak();
        }
    }

    /// Number of batches submitted so far (a read-back submits one; while
    /// recording, a batch goes when it is full or has gathered launches for
    /// 50 µs while the submitting thread is idle); for tests and profiling.
    pub fn batches_submitted() -> u64 {
        rt().recorder().submitted
    }

    /// Number of times the host has waited for the GPU so far (read-backs,
    /// [`Gpu::sync`], and the first product of a size class while tuning); a
    /// training step that keeps this unchanged never stalls the host.
    pub fn host_waits() -> u64 {
        rt().recorder().waits
    }

    /// Number of kernel dispatches and uploads recorded so far; for profiling.
    pub fn dispatches_recorded() -> u64 {
        rt().recorder().recorded
    }

    /// Number of device buffers created so far (the others came from Volta's
    /// buffer pool); for tests and profiling.
    pub fn buffers_created() -> u64 {
        rt().pool.created()
    }

    /// Number of bind groups (the buffers a kernel launch binds) created so
    /// far; for tests and profiling. Launches over buffers bound before (the
    /// same step again, with buffers from the pool) reuse theirs.
    pub fn bind_groups_created() -> u64 {
        rt().pool.bind_groups().created()
    }

    /// Number of distinct kernels (pipelines) compiled so far; for tests and
    /// profiling. A fused chain compiles once per structure and access pattern:
    /// new scalar values (a learning rate, a `#[scalar]` argument) reuse it.
    pub fn pipelines_compiled() -> usize {
        rt().pipelines.compiled()
    }

    /// Turns the fusion of elementwise chains on (the default) or off, for ops
    /// recorded from now on. With fusion on, an elementwise op returns a pending
    /// value that later elementwise ops fold into their own kernel, so
    /// `relu(a * b + c)` is one kernel that reads each input once and writes once;
    /// reductions, softmax and normalisation compute such a value in their
    /// loads, and it is written to memory when something needs it there (a
    /// matmul, a copy, a read-back, [`GpuBuffer::realize`](super::GpuBuffer::realize)). Results agree with
    /// fusion off up to f32 rounding (for `f16` tensors, up to the rounding of
    /// intermediates, which a fused chain keeps in `f32`); turning it off helps
    /// to profile single ops.
    pub fn set_fusion(on: bool) {
        fusion::set_enabled(on);
    }

    /// Whether elementwise chains fuse (see [`Gpu::set_fusion`]).
    pub fn fusion() -> bool {
        fusion::enabled()
    }

    /// Overrides how elementwise kernels lay out their threads (`None` restores
    /// [`Launch::DEFAULT`]). A tuning knob, swept by the GPU benchmark.
    pub fn set_elementwise_launch(launch: Option<Launch>) -> Result<(), GpuError> {
        let c = init()?;
        if let Some(l) = launch
            && (l.units == 0
                || l.workgroup == 0
                || l.workgroup > c.rt.gpu.limits.max_compute_invocations_per_workgroup
                || l.workgroup > c.rt.gpu.limits.max_compute_workgroup_size_x)
        {
            return Err(GpuError::Validation(format!(
                "elementwise launch {l:?} does not fit this adapter"
            )));
        }
        *elementwise::LAUNCH
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = launch;
        Ok(())
    }

    /// Makes every kernel's result repeat bit for bit from run to run (off by
    /// default), like PyTorch's `torch.use_deterministic_algorithms(True)`.
    /// Today one kernel needs it: the `f32` attention backward, which by default
    /// (on adapters with `f32` atomics) adds each block of keys' share of the
    /// queries' gradient atomically, in whatever order the blocks finish. Set,
    /// it runs as two launches that sum in a fixed order, recomputing the
    /// scores for the second (1.4× the backward's time on an H100).
    pub fn set_deterministic(on: bool) {
        super::kernels::DETERMINISTIC.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The setting of [`Gpu::set_deterministic`].
    pub fn deterministic() -> bool {
        super::kernels::DETERMINISTIC.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Lets products with too few output tiles to fill the GPU split their K
    /// axis (on by default). A tuning switch for benchmarks.
    pub fn set_matmul_split_k(on: bool) {
        matmul::SPLIT_K.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// In half precision, rounds a product's operands that are still pending
    /// (fused values not yet in memory: a norm's rows, an activation) to `f16`
    /// from their trees, keeping the copy for their next product, rather than
    /// writing them in `f32` for the product to round in its loads (on by
    /// default). The values are the same; the products read half the bytes. A
    /// tuning switch for benchmarks.
    pub fn set_matmul_operand_rounding(on: bool) {
        matmul::ROUND_OPERANDS.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// In half precision, rounds a product's operand already in memory to `f16`
    /// by a copy kept with the memory (which its next products read too) when
    /// the product reads it at least `reads` times, once per output tile of the
    /// other axis; others are rounded in the product's loads. `None` restores
    /// the default, 16 (a weight in a product of many rows); `usize::MAX` copies
    /// none. A tuning knob for benchmarks and tests.
    pub fn set_matmul_copy_reads(reads: Option<usize>) {
        let reads = reads.unwrap_or(matmul::DEFAULT_COPY_READS);
        matmul::COPY_READS.store(reads, std::sync::atomic::Ordering::Relaxed);
    }

    /// How `f32` products compute from now on: [`MatmulPrecision::Full`] (the
    /// default) or, on adapters with tensor cores ([`GpuInfo::tensor_cores`]),
    /// [`MatmulPrecision::Half`]: operands rounded to `f16`, products
    /// accumulated in `f32` — like PyTorch's `set_float32_matmul_precision`.
    /// Without tensor cores, `Half` computes as `Full`.
    pub fn set_matmul_precision(precision: MatmulPrecision) {
        matmul::set_precision(precision);
    }

    /// The precision set by [`Gpu::set_matmul_precision`].
    pub fn matmul_precision() -> MatmulPrecision {
        matmul::precision()
    }

    /// Overrides the tensor-core matmul's tiles (`None` restores the size-based
    /// choice). A tuning knob, swept by the GPU benchmark.
    pub fn set_tensor_core_tiles(tiles: Option<CoopTiles>) -> Result<(), GpuError> {
        override_tiles(&matmul::COOP_OVERRIDE, tiles, CoopTiles::check)
    }

    /// Turns matmul tuning on or off. On (the default on GPUs; off on CPU
    /// adapters such as lavapipe; `VOLTA_AUTOTUNE=0` or `1` overrides both), the
    /// first product of each class (sizes rounded up to powers of two, operand
    /// layouts, element types) times every tile candidate on the adapter and
    /// keeps the fastest, like cuDNN's benchmark mode: that waits for the GPU
    /// once per class, in the first training step. Winners are kept on disk per
    /// adapter and driver (in `$VOLTA_CACHE_DIR`, else `$XDG_CACHE_HOME/volta`,
    /// else `~/.cache/volta`), so later runs skip the timing. Off, tiles are
    /// chosen by size (the H100's sweep winners). [`Gpu::set_matmul_tiles`]
    /// overrides both. In the browser timing would block: turning it on there
    /// returns [`GpuError::WouldBlock`].
    pub fn set_autotune(on: bool) -> Result<(), GpuError> {
        if on && cfg!(target_arch = "wasm32") {
            return Err(GpuError::WouldBlock);
        }
        init()?.tuning.set_enabled(on);
        Ok(())
    }

    /// How recorded batches reach the GPU's queue: a submitting thread
    /// ([`Submission::Thread`], the default) or the recording thread itself
    /// ([`Submission::Inline`]: the default on wasm32, or with
    /// `VOLTA_SUBMIT=inline`).
    pub fn submission() -> Result<Submission, GpuError> {
        Ok(init()?.rt.recorder().submission())
    }

    /// Whether matmul tuning is on (see [`Gpu::set_autotune`]).
    pub fn autotune() -> Result<bool, GpuError> {
        Ok(init()?.tuning.enabled())
    }

    /// Product classes this process tuned by timing (not read from the disk
    /// cache): each cost one wait for the GPU.
    pub fn matmul_classes_tuned() -> u64 {
        init().map_or(0, |s| s.tuning.tuned())
    }

    /// Caps the workgroup memory the fused attention kernels plan for (`None`:
    /// what the H100 measured best, 16–24 KiB, or less where the adapter has
    /// less). Less memory, smaller chunks of features per barrier; WebGPU's
    /// default 16 KiB is the browser's plan. A tuning knob, and the way tests
    /// reach the browser's plan on a native adapter.
    pub fn set_attention_workgroup_bytes(bytes: Option<u32>) {
        super::kernels::attention::set_memory_cap(bytes);
    }

    /// Overrides the matmul tile sizes (`None` restores the size-based choice).
    /// A tuning knob: the default choice is what the benchmarks found best.
    pub fn set_matmul_tiles(tiles: Option<MatmulTiles>) -> Result<(), GpuError> {
        override_tiles(&matmul::OVERRIDE, tiles, MatmulTiles::check)
    }
}

/// Sets a tile override after checking it against the adapter's limits
/// (threads per workgroup, shared memory).
fn override_tiles<T>(
    slot: &std::sync::Mutex<Option<T>>,
    tiles: Option<T>,
    check: fn(&T, u32, u32) -> Result<(), String>,
) -> Result<(), GpuError> {
    let c = init()?;
    if let Some(t) = &tiles {
        check(
            t,
            c.rt.gpu.limits.max_compute_invocations_per_workgroup,
            c.rt.gpu.limits.max_compute_workgroup_storage_size,
        )
        .map_err(GpuError::Validation)?;
    }
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = tiles;
    Ok(())
}
