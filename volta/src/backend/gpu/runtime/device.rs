//! The bottom of the runtime: the adapter, the wgpu device and queue, what the
//! adapter offers ([`GpuInfo`]), and the slot where errors raised while work runs
//! wait for the next sync point.
use super::error::GpuError;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Poll, Waker};

/// An adapter the machine offers, as [`Gpu::adapters`](crate::Gpu::adapters)
/// lists them: [`Gpu::init_on`](crate::Gpu::init_on) (or `VOLTA_ADAPTER`) opens
/// the one at `index` (one process per GPU, e.g. each MPI rank its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuAdapter {
    /// Its place in the list.
    pub index: usize,
    /// Adapter name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Graphics API wgpu drives it through (Vulkan, Metal, Dx12, …).
    pub backend: String,
    /// Discrete, integrated, virtual or CPU.
    pub device_type: String,
}

/// The wgpu instance over the platform's graphics APIs (as the environment
/// configures wgpu).
fn instance() -> wgpu::Instance {
    quiet_device_select();
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

/// Every adapter the machine offers, in wgpu's order (natively: the browser
/// shows a page one adapter, the one it picks).
#[cfg(not(target_arch = "wasm32"))]
pub async fn adapters_async() -> Vec<GpuAdapter> {
    instance()
        .enumerate_adapters(wgpu::Backends::all())
        .await
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let a = a.get_info();
            GpuAdapter {
                index,
                name: a.name,
                backend: format!("{:?}", a.backend),
                device_type: format!("{:?}", a.device_type),
            }
        })
        .collect()
}

/// What [`Gpu::init`](crate::Gpu::init) found: the adapter and the limits of note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// Adapter name, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// Graphics API wgpu drives it through (Vulkan, Metal, Dx12, …).
    pub backend: String,
    /// Discrete, integrated, virtual or CPU.
    pub device_type: String,
    /// Driver name and version, when the driver reports them.
    pub driver: String,
    /// Largest storage buffer one binding can address, in bytes. The environment
    /// variable `VOLTA_GPU_MAX_BINDING` (bytes, a multiple of 256 of at least
    /// 64 KiB) lowers it, so that a large GPU slices tensors as a small one must.
    pub max_storage_buffer_binding_size: u64,
    /// Workgroup (shared) memory per workgroup, in bytes.
    pub max_workgroup_storage_size: u32,
    /// Threads per workgroup.
    pub max_invocations_per_workgroup: u32,
    /// Storage buffers one kernel may bind (inputs and outputs together).
    pub max_storage_buffers_per_kernel: u32,
    /// The optional features Volta enabled (subgroups, f16, timestamps, `f32`
    /// atomics, cooperative matrices) that this adapter supports. The environment variable
    /// `VOLTA_GPU_DISABLE` (comma-separated names, e.g. `shader-f16`) leaves some
    /// off, to test how a program behaves on adapters without them.
    pub features: Vec<&'static str>,
    /// Whether `Gpu` computes on `f16` tensors (the adapter's `shader-f16` feature).
    /// Without it, uploading and reading `f16` data work, but the first `f16`
    /// kernel reports [`GpuError::Unsupported`] at the next sync point
    /// ([`Gpu::sync`](crate::Gpu::sync) or a read-back, which then panics with it).
    pub f16: bool,
    /// The smallest subgroup (warp) the adapter runs, when Volta uses subgroup
    /// operations (the `subgroup` feature): kernels reduce across that many lanes
    /// without shared memory.
    pub subgroup_size: Option<u32>,
    /// Whether products of `f16` operands run on tensor cores: the adapter has
    /// 16×16×16 cooperative matrices with `f16` operands and `f32` accumulation,
    /// and 32-lane subgroups. Also what [`MatmulPrecision::Half`] needs.
    ///
    /// [`MatmulPrecision::Half`]: crate::backend::gpu::MatmulPrecision::Half
    pub tensor_cores: bool,
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}, driver {:?}); max storage binding {} MiB, workgroup memory {} KiB, \
             {} threads/workgroup; features: {}",
            self.name,
            self.backend,
            self.device_type,
            self.driver,
            self.max_storage_buffer_binding_size >> 20,
            self.max_workgroup_storage_size >> 10,
            self.max_invocations_per_workgroup,
            if self.features.is_empty() {
                "none".to_string()
            } else {
                self.features.join(", ")
            }
        )
    }
}

/// The opened device: everything above it in the runtime records onto it.
pub(crate) struct GpuDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: GpuInfo,
    pub limits: wgpu::Limits,
    /// The first asynchronous error (validation, out of memory, device lost), kept
    /// until the next sync point reports it.
    pub error: Arc<Mutex<Option<GpuError>>>,
    /// Set once the device is lost: every later sync point and read-back
    /// returns [`GpuError::DeviceLost`] with this reason, without touching the
    /// device (whose callbacks may never come).
    pub lost: Arc<OnceLock<String>>,
}

/// Optional features Volta uses when the adapter has them.
const WANTED: [(wgpu::Features, &str); 5] = [
    (wgpu::Features::SUBGROUP, "subgroup"),
    (wgpu::Features::SHADER_F16, "shader-f16"),
    (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
    (
        wgpu::Features::SHADER_FLOAT32_ATOMIC,
        "shader-float32-atomic",
    ),
    (
        wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
        "cooperative-matrix",
    ),
];

/// The binding size the environment caps devices at: `VOLTA_GPU_MAX_BINDING`, in
/// bytes (unset or empty: the adapter's own limit; never raised past it). A
/// multiple of 256, so that slices at the binding's end keep storage offsets
/// aligned.
fn max_binding_from_env() -> Result<Option<u64>, GpuError> {
    match std::env::var("VOLTA_GPU_MAX_BINDING") {
        Ok(v) if !v.trim().is_empty() => parse_max_binding(&v).map(Some),
        _ => Ok(None),
    }
}

/// `VOLTA_GPU_MAX_BINDING`'s value as bytes ([`max_binding_from_env`]).
fn parse_max_binding(v: &str) -> Result<u64, GpuError> {
    match v.trim().parse::<u64>() {
        Ok(bytes) if bytes >= 1 << 16 && bytes.is_multiple_of(256) => Ok(bytes),
        _ => Err(GpuError::Unsupported(format!(
            "VOLTA_GPU_MAX_BINDING={v:?} is not a binding size: give bytes, a multiple \
             of 256 of at least 65536"
        ))),
    }
}

impl GpuDevice {
    /// [`open_async`](Self::open_async), waiting for it (not in the browser,
    /// where nothing may block).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(adapter: Option<usize>) -> Result<GpuDevice, GpuError> {
        pollster::block_on(Self::open_async(adapter))
    }

    /// Opens adapter `adapter` of [`adapters_async`]'s list, or (`None`) the one
    /// wgpu prefers for high performance, with every optional feature of
    /// [`WANTED`] it has and its own limits (wgpu's defaults cap bindings at
    /// 128 MiB and shared memory at 16 KiB).
    pub async fn open_async(adapter: Option<usize>) -> Result<GpuDevice, GpuError> {
        let instance = instance();
        let adapter = match adapter {
            Some(index) => {
                let mut all = instance.enumerate_adapters(wgpu::Backends::all()).await;
                let count = all.len();
                if index >= count {
                    return Err(GpuError::NoSuchAdapter { index, count });
                }
                all.swap_remove(index)
            }
            None => instance
                .request_adapter(&wgpu::RequestAdapterOptions {
                    power_preference: wgpu::PowerPreference::HighPerformance,
                    ..Default::default()
                })
                .await
                .map_err(|_| GpuError::NoAdapter)?,
        };
        let available = adapter.features();
        let disabled = std::env::var("VOLTA_GPU_DISABLE").unwrap_or_default();
        let disabled: Vec<&str> = disabled.split(',').map(str::trim).collect();
        let mut features = wgpu::Features::empty();
        let mut names = Vec::new();
        for (f, name) in WANTED {
            if available.contains(f) && !disabled.contains(&name) {
                features |= f;
                names.push(name);
            }
        }
        let experimental = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
            // SAFETY: cooperative matrices are only used by kernels that the parity
            // tests cover; wgpu asks for this token to acknowledge the feature is new.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
        let tensor_cores = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && features.contains(wgpu::Features::SHADER_F16)
            && features.contains(wgpu::Features::SUBGROUP)
            && has_f16_coop_16(&adapter);
        let mut limits = adapter.limits();
        if let Some(cap) = max_binding_from_env()? {
            limits.max_storage_buffer_binding_size =
                limits.max_storage_buffer_binding_size.min(cap);
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("volta"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: experimental,
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;

        let error: Arc<Mutex<Option<GpuError>>> = Arc::default();
        let sink = error.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let e = match e {
                wgpu::Error::OutOfMemory { .. } => GpuError::OutOfMemory {
                    requested: None,
                    in_use: 0,
                    limit: None,
                },
                wgpu::Error::Validation { description, .. } => GpuError::Validation(description),
                wgpu::Error::Internal { description, .. } => GpuError::Validation(description),
            };
            record(&sink, e);
        }));
        let lost: Arc<OnceLock<String>> = Arc::default();
        let flag = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if reason != wgpu::DeviceLostReason::Destroyed {
                let _ = flag.set(message);
            }
        });

        let a = adapter.get_info();
        let info = GpuInfo {
            name: a.name,
            backend: format!("{:?}", a.backend),
            device_type: format!("{:?}", a.device_type),
            driver: format!("{} {}", a.driver, a.driver_info).trim().to_string(),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_storage_buffers_per_kernel: limits
                .max_storage_buffers_per_shader_stage
                .min(limits.max_bindings_per_bind_group),
            features: names,
            f16: features.contains(wgpu::Features::SHADER_F16),
            subgroup_size: features
                .contains(wgpu::Features::SUBGROUP)
                .then_some(a.subgroup_min_size)
                .filter(|&s| s.is_power_of_two()),
            tensor_cores: tensor_cores && a.subgroup_min_size == 32 && a.subgroup_max_size == 32,
        };
        Ok(GpuDevice {
            device,
            queue,
            info,
            limits,
            error,
            lost,
        })
    }
}

/// Keeps Mesa's device-selection layer (an implicit Vulkan layer that only
/// orders adapters for displays) from probing for a Wayland display where no
/// session exists: libwayland prints `error: XDG_RUNTIME_DIR is invalid or not
/// set in the environment.` on every instance, an error a compute program can
/// neither act on nor avoid. libwayland finds a display through an absolute
/// `XDG_RUNTIME_DIR`, an absolute `WAYLAND_DISPLAY` or `WAYLAND_SOCKET`; without
/// any of them the layer's documented switch, `NODEVICE_SELECT=1`, is set, unless
/// the user has set it either way.
fn quiet_device_select() {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let absolute = |k: &str| var(k).is_some_and(|v| std::path::Path::new(&v).is_absolute());
    let session = (absolute("XDG_RUNTIME_DIR")
        && var("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir()))
        || absolute("WAYLAND_DISPLAY")
        || var("WAYLAND_SOCKET").is_some();
    if cfg!(target_os = "linux") && !session && std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called once per process, while the device is opened under
        // `device::init`'s `OnceLock`, before the runtime starts its submitting
        // thread; a thread of the program that reads the environment at this
        // very moment could see it change, as with any `setenv`.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// Whether the adapter multiplies 16×16×16 `f16` cooperative matrices into `f32`.
fn has_f16_coop_16(adapter: &wgpu::Adapter) -> bool {
    use wgpu::CooperativeScalarType as S;
    adapter.cooperative_matrix_properties().iter().any(|p| {
        (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == S::F16 && p.cr_type == S::F32
    })
}

/// Keeps the first error: later ones are usually its consequences.
fn record(sink: &Mutex<Option<GpuError>>, e: GpuError) {
    let mut slot = sink.lock().unwrap_or_else(|p| p.into_inner());
    slot.get_or_insert(e);
}

impl GpuDevice {
    /// Whether kernels may add `f32` values atomically (the adapter's
    /// `shader-float32-atomic`; native Vulkan and Metal, not browsers).
    pub fn float_atomics(&self) -> bool {
        self.device
            .features()
            .contains(wgpu::Features::SHADER_FLOAT32_ATOMIC)
    }

    /// Keeps `e` for the next sync point (unless an earlier error is pending).
    pub fn report(&self, e: GpuError) {
        record(&self.error, e);
    }

    /// The loss of the device, once it happened: it is never taken.
    pub fn check_lost(&self) -> Result<(), GpuError> {
        match self.lost.get() {
            Some(reason) => Err(GpuError::DeviceLost(reason.clone())),
            None => Ok(()),
        }
    }

    /// Takes the pending asynchronous error, if any (a lost device first).
    pub fn take_error(&self) -> Result<(), GpuError> {
        self.check_lost()?;
        match self.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What a `map_async` callback reports.
type Mapped = Result<(), wgpu::BufferAsyncError>;

/// Where a `map_async` callback leaves its result, and the waker of a task
/// awaiting it. Natively the callback runs inside some thread's `device.poll` (not
/// necessarily the waiting one's: wgpu runs the callbacks a poll collected after
/// it returns); in the browser it runs when the page's event loop resolves the
/// mapping.
#[derive(Default)]
pub(crate) struct Callback {
    state: Mutex<(Option<Mapped>, Option<Waker>)>,
    ready: std::sync::Condvar,
}

impl Callback {
    /// The closure to hand to wgpu.
    pub fn sender(self: &Arc<Self>) -> impl FnOnce(Result<(), wgpu::BufferAsyncError>) + 'static {
        let slot = self.clone();
        move |r| {
            let mut state = slot.state.lock().unwrap_or_else(|p| p.into_inner());
            state.0 = Some(r);
            slot.ready.notify_all();
            if let Some(w) = state.1.take() {
                w.wake();
            }
        }
    }

    /// The result, once the callback ran; else `waker` is woken when it does.
    fn take(&self, waker: Option<&Waker>) -> Option<Result<(), wgpu::BufferAsyncError>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let r = state.0.take();
        if r.is_none() {
            state.1 = waker.cloned();
        }
        r
    }

    /// Blocks until the callback ran. Only after the device was polled until idle:
    /// the callback is then either run or about to be, by the thread whose poll
    /// collected it.
    #[cfg(not(target_arch = "wasm32"))]
    fn wait(&self) -> Result<(), wgpu::BufferAsyncError> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = state.0.take() {
                return r;
            }
            state = self.ready.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// How long a read-back polls before it blocks.
#[cfg(not(target_arch = "wasm32"))]
const SPIN: std::time::Duration = std::time::Duration::from_millis(2);

impl GpuDevice {
    /// Waits for a callback. Short waits (a loss read at the end of a step) poll
    /// without sleeping: a blocking wait parks the thread, and waking it costs
    /// more than a small kernel. Long waits block after [`SPIN`].
    #[cfg(not(target_arch = "wasm32"))]
    ///
    /// With `submission`, the blocking wait covers that submission only, not work
    /// other threads submitted after it (a read-back started in the middle of a
    /// backward pass then returns before the rest of the pass has run).
    pub fn wait_for(
        &self,
        done: &Callback,
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<Result<(), wgpu::BufferAsyncError>, GpuError> {
        let lost = |e: wgpu::PollError| GpuError::ReadBack(e.to_string());
        let start = std::time::Instant::now();
        while start.elapsed() < SPIN {
            self.device.poll(wgpu::PollType::Poll).map_err(lost)?;
            if let Some(r) = done.take(None) {
                return Ok(r);
            }
            std::hint::spin_loop();
        }
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: submission,
                timeout: None,
            })
            .map_err(lost)?;
        Ok(done.wait())
    }

    /// In the browser a callback only runs once control returns to the page's
    /// event loop, so a blocking wait would never end: it is an error instead.
    #[cfg(target_arch = "wasm32")]
    pub fn wait_for(
        &self,
        _done: &Callback,
        _submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<Result<(), wgpu::BufferAsyncError>, GpuError> {
        Err(GpuError::WouldBlock)
    }

    /// Awaits a callback: in the browser by yielding to the page until it runs;
    /// natively the first poll waits as [`wait_for`](Self::wait_for) does (the
    /// device's callbacks run inside `device.poll`, which some thread must call).
    pub async fn callback(
        &self,
        done: &Callback,
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<Result<(), wgpu::BufferAsyncError>, GpuError> {
        std::future::poll_fn(|cx| {
            if let Err(e) = self.check_lost() {
                return Poll::Ready(Err(e));
            }
            match done.take(Some(cx.waker())) {
                Some(r) => Poll::Ready(Ok(r)),
                None if cfg!(target_arch = "wasm32") => Poll::Pending,
                None => Poll::Ready(self.wait_for(done, submission.clone())),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::{GpuError, parse_max_binding};

    #[test]
    fn a_binding_cap_is_bytes_aligned_to_256() {
        assert_eq!(parse_max_binding(" 4194304 "), Ok(4 << 20));
        for bad in ["4M", "-1", "65535", "65540", "1024"] {
            match parse_max_binding(bad) {
                Err(GpuError::Unsupported(m)) => assert!(m.contains("VOLTA_GPU_MAX_BINDING")),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
