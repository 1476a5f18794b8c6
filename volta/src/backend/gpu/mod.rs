//! The GPU device, on wgpu (Vulkan, Metal, DX12).
//!
//! Built with the `gpu` cargo feature; without it `Gpu` is only a marker type, so
//! programs mixing `Cpu` and `Gpu` tensors are still rejected at compile time.
//!
//! The runtime is lazy: recording an op appends a dispatch to a batch (one command
//! encoder, one compute pass). A thread of its own submits batches while the
//! program records the next: a batch goes when it fills, or once it has gathered
//! launches for 50 µs while that thread is idle (so the GPU starts while the
//! program records); a read-back or [`Gpu::sync`] submits what remains and waits. Buffers come from a size-class pool,
//! pipelines are compiled once, and errors raised while work runs are reported at
//! the next sync point. Elementwise chains fuse into one generated kernel (see
//! `Gpu::set_fusion`), and `#[kernel]` functions join those chains. The GPU
//! computes on `f32` and `f16` tensors (`f16` needs the adapter's `shader-f16`
//! feature, see [`GpuInfo::f16`]; kernels compute in `f32` and store `f16`), holds
//! `u32` indices, and has no `f64` (`Gpu: Backend<f64>` does not exist).

/// The GPU device (wgpu: Vulkan, Metal, DX12).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gpu;

#[cfg(feature = "gpu")]
mod bind_groups;
#[cfg(feature = "gpu")]
mod buffer;
#[cfg(feature = "gpu")]
mod context;
#[cfg(feature = "gpu")]
mod coop_source;
#[cfg(feature = "gpu")]
mod elementwise;
#[cfg(feature = "gpu")]
mod error;
#[cfg(feature = "gpu")]
mod fusion;
#[cfg(feature = "gpu")]
mod hash;
#[cfg(feature = "gpu")]
mod index;
#[cfg(feature = "gpu")]
mod infer;
#[cfg(feature = "gpu")]
mod kernel;
#[cfg(feature = "gpu")]
mod launch;
#[cfg(feature = "gpu")]
mod matmul;
#[cfg(feature = "gpu")]
mod matmul_source;
#[cfg(feature = "gpu")]
mod optim;
#[cfg(feature = "gpu")]
mod pipelines;
#[cfg(feature = "gpu")]
mod pool;
#[cfg(feature = "gpu")]
mod profile;
#[cfg(feature = "gpu")]
mod recorder;
#[cfg(feature = "gpu")]
mod replay;
#[cfg(feature = "gpu")]
mod row;
#[cfg(feature = "gpu")]
mod split;
#[cfg(feature = "gpu")]
mod submit;
#[cfg(feature = "gpu")]
mod transfer;
#[cfg(feature = "gpu")]
mod tuning;
#[cfg(feature = "gpu")]
mod window;

#[cfg(feature = "gpu")]
pub use buffer::GpuBuffer;
#[cfg(feature = "gpu")]
pub use context::GpuInfo;
#[cfg(feature = "gpu")]
pub use coop_source::CoopTiles;
#[cfg(feature = "gpu")]
pub use error::GpuError;
#[cfg(feature = "gpu")]
pub use infer::GpuQuantized;
#[cfg(feature = "gpu")]
pub use matmul::MatmulPrecision;
#[cfg(feature = "gpu")]
pub use matmul_source::{MatmulTiles, Staging};
#[cfg(feature = "gpu")]
pub use pool::MemoryStats;
#[cfg(feature = "gpu")]
pub use profile::{KernelTime, Profile};
#[cfg(feature = "gpu")]
pub use replay::GpuGraph;
#[cfg(feature = "gpu")]
pub use volta_kernels::wgsl::Launch;

#[cfg(feature = "gpu")]
mod device {
    use super::context::{self, ctx};
    use super::elementwise::{convert, fill, map, write};
    use super::fusion;
    use super::profile::Profiler;
    use super::{
        CoopTiles, Gpu, GpuBuffer, GpuError, GpuInfo, MatmulPrecision, MatmulTiles, MemoryStats,
        Profile, transfer,
    };
    use crate::backend::infer::{AttnShape, QFusion, QShape};
    use crate::backend::{AdamStep, Backend, Buf, Cast, Device, Memory, SgdStep, View};
    use crate::dtype::f16;
    use crate::layout::Layout;
    use volta_kernels::wgsl::{Elem, Expr, Launch, RowOp};
    use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

    impl Gpu {
        /// Creates the GPU context (once per process) and describes the adapter.
        /// Ops on `Gpu` tensors call it implicitly and panic with the error's text
        /// when it fails; call it first to handle [`GpuError::NoAdapter`] yourself.
        pub fn init() -> Result<GpuInfo, GpuError> {
            context::init().map(|c| c.info.clone())
        }

        /// Destroys the device as a driver reset would, for testing how a program
        /// handles [`GpuError::DeviceLost`]: from then on every sync point and
        /// read-back returns that error (the process must restart to use the GPU
        /// again).
        #[doc(hidden)]
        pub fn simulate_device_loss() {
            if let Ok(c) = context::init() {
                let _ = c.lost.set("simulated by Gpu::simulate_device_loss".into());
                c.device.destroy();
            }
        }

        /// Submits all recorded work, waits for it, and reports any error raised
        /// since the last sync point (validation, out of memory, device lost,
        /// out-of-range indices).
        pub fn sync() -> Result<(), GpuError> {
            transfer::sync(context::init()?)
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
        /// total can exceed the time of the same work unprofiled. Errors with
        /// [`GpuError::Unsupported`] when the adapter has no timestamp queries.
        pub fn profile<R>(f: impl FnOnce() -> R) -> Result<(R, Profile), GpuError> {
            let c = context::init()?;
            transfer::sync(c)?;
            let profiler = Profiler::new(c)?;
            let recorder = || c.recorder.lock().unwrap_or_else(|p| p.into_inner());
            if recorder().profiler.replace(profiler).is_some() {
                panic!("Gpu::profile called inside Gpu::profile");
            }
            // Profiling stops even if `f` panics.
            struct Stop<'a>(&'a context::Context);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    let mut r = self.0.recorder.lock().unwrap_or_else(|p| p.into_inner());
                    r.profiler = None;
                }
            }
            let stop = Stop(c);
            let out = f();
            let synced = transfer::sync(c);
            let profiler = recorder().profiler.take().expect("profiling");
            drop(stop);
            synced?;
            Ok((out, profiler.finish(c)?))
        }

        /// Releases the device memory of Volta's buffer pool (buffers no tensor
        /// holds, kept for reuse) and returns how many bytes that was; like
        /// PyTorch's `torch.cuda.empty_cache()`. Useful between phases of a
        /// program: releasing large buffers takes the driver time, which a full
        /// pool would otherwise spend, one eviction at a time, in the next phase.
        pub fn empty_cache() -> u64 {
            context::existing().map_or(0, |c| {
                let bytes = c.pool.clear();
                // wgpu destroys dropped buffers when it next polls the device
                // (after the GPU is done with them): do it now rather than in the
                // next phase's first steps. A lost device reports at the next sync.
                let _ = c.device.poll(wgpu::PollType::wait_indefinitely());
                bytes
            })
        }

        /// Caps the device memory Volta's buffer pool may hold (buffers lent to
        /// tensors and cached), like PyTorch's
        /// `torch.cuda.set_per_process_memory_fraction`; `None` lifts the cap. An
        /// allocation past it first releases the cache and retries, then reports
        /// [`GpuError::OutOfMemory`] at the next sync point.
        pub fn set_memory_limit(bytes: Option<u64>) {
            if let Ok(c) = context::init() {
                c.pool.set_limit(bytes);
            }
        }

        /// Device memory held by Volta's buffer pool: what tensors use and what
        /// is cached for reuse (PyTorch's `memory_allocated`/`memory_reserved`
        /// split). A training loop's figures stay flat once its sizes are cached.
        pub fn memory() -> MemoryStats {
            let (reserved, cached) = context::existing().map_or((0, 0), |c| c.pool.usage());
            MemoryStats {
                reserved_bytes: reserved,
                cached_bytes: cached,
                buffers_created: context::existing().map_or(0, |c| {
                    c.pool.created.load(std::sync::atomic::Ordering::Relaxed)
                }),
            }
        }

        /// Number of batches submitted so far (a read-back submits one; while
        /// recording, a batch goes when it is full or has gathered launches for
        /// 50 µs while the submitting thread is idle); for tests and profiling.
        pub fn batches_submitted() -> u64 {
            ctx()
                .recorder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .submitted
        }

        /// Number of times the host has waited for the GPU so far (read-backs,
        /// [`Gpu::sync`], and the first product of a size class while tuning); a
        /// training step that keeps this unchanged never stalls the host.
        pub fn host_waits() -> u64 {
            ctx()
                .recorder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .waits
        }

        /// Number of kernel dispatches and uploads recorded so far; for profiling.
        pub fn dispatches_recorded() -> u64 {
            ctx()
                .recorder
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .recorded
        }

        /// Number of device buffers created so far (the others came from Volta's
        /// buffer pool); for tests and profiling.
        pub fn buffers_created() -> u64 {
            ctx()
                .pool
                .created
                .load(std::sync::atomic::Ordering::Relaxed)
        }

        /// Number of bind groups (the buffers a kernel launch binds) created so
        /// far; for tests and profiling. Launches over buffers bound before (the
        /// same step again, with buffers from the pool) reuse theirs.
        pub fn bind_groups_created() -> u64 {
            ctx().pool.bind_groups.created()
        }

        /// Number of distinct kernels (pipelines) compiled so far; for tests and
        /// profiling. A fused chain compiles once per structure and access pattern:
        /// new scalar values (a learning rate, a `#[scalar]` argument) reuse it.
        pub fn pipelines_compiled() -> usize {
            ctx().pipelines.compiled()
        }

        /// Turns the fusion of elementwise chains on (the default) or off, for ops
        /// recorded from now on. With fusion on, an elementwise op returns a pending
        /// value that later elementwise ops fold into their own kernel, so
        /// `relu(a * b + c)` is one kernel that reads each input once and writes once;
        /// reductions, softmax and normalisation compute such a value in their
        /// loads, and it is written to memory when something needs it there (a
        /// matmul, a copy, a read-back, [`GpuBuffer::realize`]). Results agree with
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
            let c = context::init()?;
            if let Some(l) = launch
                && (l.units == 0
                    || l.workgroup == 0
                    || l.workgroup > c.limits.max_compute_invocations_per_workgroup
                    || l.workgroup > c.limits.max_compute_workgroup_size_x)
            {
                return Err(GpuError::Validation(format!(
                    "elementwise launch {l:?} does not fit this adapter"
                )));
            }
            *super::elementwise::LAUNCH
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = launch;
            Ok(())
        }

        /// Lets products with too few output tiles to fill the GPU split their K
        /// axis (on by default). A tuning switch for benchmarks.
        pub fn set_matmul_split_k(on: bool) {
            super::matmul::SPLIT_K.store(on, std::sync::atomic::Ordering::Relaxed);
        }

        /// How `f32` products compute from now on: [`MatmulPrecision::Full`] (the
        /// default) or, on adapters with tensor cores ([`GpuInfo::tensor_cores`]),
        /// [`MatmulPrecision::Half`]: operands rounded to `f16`, products
        /// accumulated in `f32` — like PyTorch's `set_float32_matmul_precision`.
        /// Without tensor cores, `Half` computes as `Full`.
        pub fn set_matmul_precision(precision: MatmulPrecision) {
            super::matmul::set_precision(precision);
        }

        /// The precision set by [`Gpu::set_matmul_precision`].
        pub fn matmul_precision() -> MatmulPrecision {
            super::matmul::precision()
        }

        /// Overrides the tensor-core matmul's tiles (`None` restores the size-based
        /// choice). A tuning knob, swept by the GPU benchmark.
        pub fn set_tensor_core_tiles(tiles: Option<CoopTiles>) -> Result<(), GpuError> {
            override_tiles(&super::matmul::COOP_OVERRIDE, tiles, CoopTiles::check)
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
        /// overrides both.
        pub fn set_autotune(on: bool) -> Result<(), GpuError> {
            context::init()?.tuning.set_enabled(on);
            Ok(())
        }

        /// Whether matmul tuning is on (see [`Gpu::set_autotune`]).
        pub fn autotune() -> Result<bool, GpuError> {
            Ok(context::init()?.tuning.enabled())
        }

        /// Product classes this process tuned by timing (not read from the disk
        /// cache): each cost one wait for the GPU.
        pub fn matmul_classes_tuned() -> u64 {
            context::init().map_or(0, |c| c.tuning.tuned())
        }

        /// Overrides the matmul tile sizes (`None` restores the size-based choice).
        /// A tuning knob: the default choice is what the benchmarks found best.
        pub fn set_matmul_tiles(tiles: Option<MatmulTiles>) -> Result<(), GpuError> {
            override_tiles(&super::matmul::OVERRIDE, tiles, MatmulTiles::check)
        }
    }

    /// Sets a tile override after checking it against the adapter's limits
    /// (threads per workgroup, shared memory).
    fn override_tiles<T>(
        slot: &std::sync::Mutex<Option<T>>,
        tiles: Option<T>,
        check: fn(&T, u32, u32) -> Result<(), String>,
    ) -> Result<(), GpuError> {
        let c = context::init()?;
        if let Some(t) = &tiles {
            check(
                t,
                c.limits.max_compute_invocations_per_workgroup,
                c.limits.max_compute_workgroup_storage_size,
            )
            .map_err(GpuError::Validation)?;
        }
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = tiles;
        Ok(())
    }

    impl Device for Gpu {
        const NAME: &'static str = "Gpu";
    }

    macro_rules! memory {
        ($t:ty, $elem:expr) => {
            // Keeps rustc's "other types implement" list (which would quote this
            // macro) out of the error for an unsupported element type.
            #[diagnostic::do_not_recommend]
            impl Memory<$t> for Gpu {
                type Buffer = GpuBuffer<$t>;
                fn from_vec(data: Vec<$t>) -> Self::Buffer {
                    transfer::upload(ctx(), &data)
                }
                fn full(len: usize, value: $t) -> Self::Buffer {
                    GpuBuffer::new(fill(ctx(), $elem, len, value.scalar_bits()), len)
                }
                type Error = GpuError;
                fn try_to_vec(buf: &Self::Buffer, layout: &Layout) -> Result<Vec<$t>, GpuError> {
                    transfer::download(context::init()?, buf.raw(), layout, $elem)
                }
                fn contiguous(buf: &Self::Buffer, layout: &Layout) -> Self::Buffer {
                    let c = ctx();
                    let out = map(
                        c,
                        $elem,
                        Expr::input(0),
                        &[(buf.raw(), layout)],
                        &[],
                        &layout.dims,
                    );
                    GpuBuffer::new(out, layout.numel())
                }
            }
        };
    }
    /// A host scalar as a kernel reads it from the parameter block: `u32` as is,
    /// floats as `f32` bits (an `f16` widens exactly).
    trait Bits {
        fn scalar_bits(self) -> u32;
    }
    impl Bits for u32 {
        fn scalar_bits(self) -> u32 {
            self
        }
    }
    impl Bits for f32 {
        fn scalar_bits(self) -> u32 {
            self.to_bits()
        }
    }
    impl Bits for f16 {
        fn scalar_bits(self) -> u32 {
            self.to_f32().to_bits()
        }
    }
    memory!(f32, Elem::F32);
    memory!(f16, Elem::F16);
    memory!(u32, Elem::U32);

    /// `expr` over same-dims views of `elem`: a pending value (see `fusion`).
    fn elementwise<E>(
        elem: Elem,
        expr: Expr,
        inputs: &[(&GpuBuffer<E>, &Layout)],
        scalars: &[u32],
    ) -> GpuBuffer<E> {
        fusion::elementwise(elem, expr, inputs, scalars, &inputs[0].1.dims)
    }

    /// The float backend for element type `$t` stored as `$elem` (every kernel
    /// computes in `f32`).
    macro_rules! float_backend {
        ($t:ty, $elem:expr) => {
            impl Backend<$t> for Gpu {
                fn unary(op: UnaryOp, x: View<Self, $t>) -> Buf<Self, $t> {
                    elementwise($elem, Expr::input(0).unary(op), &[x], &[])
                }
                fn binary(op: BinaryOp, a: View<Self, $t>, b: View<Self, $t>) -> Buf<Self, $t> {
                    elementwise(
                        $elem,
                        Expr::input(0).binary(op, Expr::input(1)),
                        &[a, b],
                        &[],
                    )
                }
                fn binary_scalar(op: BinaryOp, x: View<Self, $t>, scalar: $t) -> Buf<Self, $t> {
                    let e = Expr::input(0).binary(op, Expr::scalar(0));
                    elementwise($elem, e, &[x], &[scalar.scalar_bits()])
                }
                fn reduce(op: ReduceOp, x: View<Self, $t>, axis: usize) -> Buf<Self, $t> {
                    fusion::rows($elem, RowOp::Reduce(op), x, axis, &[])
                }
                fn softmax(x: View<Self, $t>, axis: usize, log: bool) -> Buf<Self, $t> {
                    let op = if log {
                        RowOp::LogSoftmax
                    } else {
                        RowOp::Softmax
                    };
                    fusion::rows($elem, op, x, axis, &[])
                }
                fn matmul(a: View<Self, $t>, b: View<Self, $t>) -> Buf<Self, $t> {
                    let len = a.1.dims[0] * a.1.dims[1] * b.1.dims[2];
                    let (a, b) = ((a.0.raw(), a.1), (b.0.raw(), b.1));
                    match super::matmul::matmul(ctx(), $elem, a, b) {
                        super::matmul::Product::Done(out) => GpuBuffer::new(out, len),
                        // The sum of split-K's partial products is a pending
                        // reduction: the product's consumer can run in its kernel.
                        super::matmul::Product::Partials(p, dims) => {
                            fusion::rows_of(Elem::F32, $elem, (p, Layout::contiguous(&dims)), 0)
                        }
                    }
                }
                fn pad(x: View<Self, $t>, pads: &[(usize, usize)], value: $t) -> Buf<Self, $t> {
                    let c = ctx();
                    let dims: Vec<usize> =
                        x.1.dims
                            .iter()
                            .zip(pads)
                            .map(|(d, (b, a))| d + b + a)
                            .collect();
                    let out_layout = Layout::contiguous(&dims);
                    let n = out_layout.numel();
                    let out = fill(c, $elem, n, value.scalar_bits());
                    let region = Layout {
                        dims: x.1.dims,
                        strides: out_layout.strides,
                        offset: pads
                            .iter()
                            .zip(out_layout.strides.iter())
                            .map(|((b, _), s)| b * s)
                            .sum(),
                    };
                    write(
                        c,
                        $elem,
                        Expr::input(0),
                        &[(x.0.raw(), x.1)],
                        &[],
                        (&out, &region),
                    );
                    GpuBuffer::new(out, n)
                }
                fn cat(parts: &[View<Self, $t>], axis: usize) -> Buf<Self, $t> {
                    let c = ctx();
                    let mut dims = parts[0].1.dims;
                    dims[axis] = parts.iter().map(|(_, l)| l.dims[axis]).sum();
                    let out_layout = Layout::contiguous(&dims);
                    let n = out_layout.numel();
                    let out = super::launch::alloc(c, n * $elem.size());
                    let mut start = 0;
                    for (buf, l) in parts {
                        let region = Layout {
                            dims: l.dims,
                            strides: out_layout.strides,
                            offset: start * out_layout.strides[axis],
                        };
                        write(
                            c,
                            $elem,
                            Expr::input(0),
                            &[(buf.raw(), l)],
                            &[],
                            (&out, &region),
                        );
                        start += l.dims[axis];
                    }
                    GpuBuffer::new(out, n)
                }
                fn select(
                    cond: View<Self, $t>,
                    a: View<Self, $t>,
                    b: View<Self, $t>,
                ) -> Buf<Self, $t> {
                    let e = Expr::input(0).select(Expr::input(1), Expr::input(2));
                    elementwise($elem, e, &[cond, a, b], &[])
                }
                fn gather(x: View<Self, $t>, axis: usize, idx: View<Self, u32>) -> Buf<Self, $t> {
                    let out = super::index::gather(
                        ctx(),
                        $elem,
                        (x.0.raw(), x.1),
                        axis,
                        (idx.0.raw(), idx.1),
                    );
                    GpuBuffer::new(out, idx.1.numel())
                }
                fn scatter_add(
                    dims: &[usize],
                    axis: usize,
                    idx: View<Self, u32>,
                    src: View<Self, $t>,
                ) -> Buf<Self, $t> {
                    let out = super::index::scatter_add(
                        ctx(),
                        $elem,
                        dims,
                        axis,
                        (idx.0.raw(), idx.1),
                        (src.0.raw(), src.1),
                    );
                    GpuBuffer::new(out, dims.iter().product())
                }
                fn unfold2d(x: View<Self, $t>, win: &Window2d, pad_value: $t) -> Buf<Self, $t> {
                    let (out, len) = super::window::unfold2d(
                        ctx(),
                        $elem,
                        (x.0.raw(), x.1),
                        win,
                        f32::from(pad_value),
                    );
                    GpuBuffer::new(out, len)
                }
                fn fold2d(
                    cols: View<Self, $t>,
                    win: &Window2d,
                    input_hw: [usize; 2],
                ) -> Buf<Self, $t> {
                    let (out, len) =
                        super::window::fold2d(ctx(), $elem, (cols.0.raw(), cols.1), win, input_hw);
                    GpuBuffer::new(out, len)
                }
                fn normalize(
                    x: View<Self, $t>,
                    axis: usize,
                    center: bool,
                    eps: $t,
                ) -> Buf<Self, $t> {
                    let op = RowOp::Normalize { center };
                    fusion::rows($elem, op, x, axis, &[eps.scalar_bits()])
                }
                fn uniform(len: usize, seed: u64) -> Buf<Self, $t> {
                    GpuBuffer::new(super::window::uniform(ctx(), $elem, len, seed), len)
                }
                fn adam_step(
                    p: View<Self, $t>,
                    g: View<Self, $t>,
                    moments: Option<(View<Self, $t>, View<Self, $t>)>,
                    hyper: &AdamStep,
                ) -> (Buf<Self, $t>, Buf<Self, $t>, Buf<Self, $t>) {
                    // Pending inputs (a gradient still a fused expression) are recorded first.
                    let moments = moments.map(|(m, v)| ((m.0.raw(), m.1), (v.0.raw(), v.1)));
                    let (p2, m2, v2) = super::optim::adam_step(
                        ctx(),
                        $elem,
                        (p.0.raw(), p.1),
                        (g.0.raw(), g.1),
                        moments,
                        &hyper.constants(),
                    );
                    let n = p.1.numel();
                    (
                        GpuBuffer::new(p2, n),
                        GpuBuffer::new(m2, n),
                        GpuBuffer::new(v2, n),
                    )
                }
                fn sgd_step(
                    p: View<Self, $t>,
                    g: View<Self, $t>,
                    momentum_buffer: Option<View<Self, $t>>,
                    hyper: &SgdStep,
                ) -> (Buf<Self, $t>, Option<Buf<Self, $t>>) {
                    let k = hyper.constants::<f32>();
                    if k.momentum.is_none() {
                        // No state: an elementwise expression, pending like any other, so it
                        // fuses into its consumer. p − (g + λ·p)·lr.
                        let mut grad = Expr::input(1);
                        let mut scalars = vec![k.lr.to_bits()];
                        if let Some(l2) = k.l2 {
                            let decay = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(1));
                            grad = grad.binary(BinaryOp::Add, decay);
                            scalars.push(l2.to_bits());
                        }
                        let e = Expr::input(0)
                            .binary(BinaryOp::Sub, grad.binary(BinaryOp::Mul, Expr::scalar(0)));
                        return (elementwise($elem, e, &[p, g], &scalars), None);
                    }
                    let buf = momentum_buffer.map(|b| (b.0.raw(), b.1));
                    let (p2, b2) = super::optim::sgd_momentum_step(
                        ctx(),
                        $elem,
                        (p.0.raw(), p.1),
                        (g.0.raw(), g.1),
                        buf,
                        &k,
                    );
                    let n = p.1.numel();
                    (GpuBuffer::new(p2, n), Some(GpuBuffer::new(b2, n)))
                }
            }
        };
    }
    float_backend!(f32, Elem::F32);
    float_backend!(f16, Elem::F16);

    macro_rules! cast {
        ($from:ty, $to:ty, $elems:expr) => {
            impl Cast<$from, $to> for Gpu {
                fn cast(x: View<Self, $from>) -> Buf<Self, $to> {
                    let c = ctx();
                    let input = (x.0.raw(), x.1);
                    let out = convert(c, $elems, Expr::input(0), &[input], &[], &x.1.dims);
                    GpuBuffer::new(out, x.1.numel())
                }
            }
        };
    }
    cast!(f32, f16, (Elem::F32, Elem::F16));
    cast!(f16, f32, (Elem::F16, Elem::F32));
    cast!(f32, f32, (Elem::F32, Elem::F32));
    cast!(f16, f16, (Elem::F16, Elem::F16));

    impl crate::backend::InferenceBackend for Gpu {
        type Quantized = super::GpuQuantized;
        fn upload_quantized(shape: &QShape, bytes: &[u8]) -> Self::Quantized {
            super::infer::upload(ctx(), shape, bytes)
        }
        fn dequantize_rows(
            w: &Self::Quantized,
            shape: &QShape,
            ids: View<Self, u32>,
        ) -> Buf<Self, f32> {
            let (out, n) =
                super::infer::dequantize_rows(ctx(), w, shape, Some((ids.0.raw(), ids.1)));
            GpuBuffer::new(out, n)
        }
        fn dequantize(w: &Self::Quantized, shape: &QShape) -> Buf<Self, f32> {
            let (out, n) = super::infer::dequantize_rows(ctx(), w, shape, None);
            GpuBuffer::new(out, n)
        }
        fn qmatmul(
            x: View<Self, f32>,
            w: &Self::Quantized,
            shape: &QShape,
            fusion: QFusion<'_, Self>,
        ) -> Buf<Self, f32> {
            let norm = fusion.norm.map(|(v, eps)| ((v.0.raw(), v.1), eps));
            let add = fusion.add.map(|v| (v.0.raw(), v.1));
            let (out, n) =
                super::infer::qmatmul(ctx(), (x.0.raw(), x.1), w, shape, norm, fusion.glu, add);
            GpuBuffer::new(out, n)
        }
        fn attend(
            qkv: View<Self, f32>,
            rope: View<Self, f32>,
            pos: View<Self, u32>,
            cache: &mut Buf<Self, f32>,
            shape: &AttnShape,
            max_len: usize,
        ) -> Buf<Self, f32> {
            let (out, n) = super::infer::attend(
                ctx(),
                (qkv.0.raw(), qkv.1),
                (rope.0.raw(), rope.1),
                (pos.0.raw(), pos.1),
                cache.raw(),
                shape,
                max_len,
            );
            GpuBuffer::new(out, n)
        }
    }
}
