//! The GPU device, on wgpu (Vulkan, Metal, DX12).
//!
//! Laid out in layers, each importing only those below it:
//!
//! - `runtime/`: the device and queue, buffer pool, bind groups, pipelines, the
//!   recorder, submission, profiling and transfers. Knows no kernel.
//! - `kernels/`: one file or folder per kernel family, each calling the runtime.
//! - `fusion/`: pending values, the tree builder, and the fused kernels they
//!   become. `GpuBuffer`, the handle a `Gpu` tensor holds, lives there.
//! - `device.rs` (the state of the opened device and `Gpu`'s API),
//!   `backend.rs` (the backend traits mapped to kernels), `user_kernels.rs`
//!   (`#[kernel]` functions), `replay.rs` (capture and replay).
//!
//! See `docs/ARCHITECTURE.md` for the path of one op through these layers.
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
mod backend;
#[cfg(feature = "gpu")]
mod device;
#[cfg(feature = "gpu")]
mod fusion;
#[cfg(feature = "gpu")]
mod kernels;
#[cfg(feature = "gpu")]
mod replay;
#[cfg(feature = "gpu")]
mod runtime;
#[cfg(feature = "gpu")]
mod user_kernels;

#[cfg(feature = "gpu")]
pub use fusion::GpuBuffer;
#[cfg(feature = "gpu")]
pub use kernels::infer::GpuQuantized;
#[cfg(feature = "gpu")]
pub use kernels::matmul::MatmulPrecision;
#[cfg(feature = "gpu")]
pub use kernels::matmul::coop::CoopTiles;
#[cfg(feature = "gpu")]
pub use kernels::matmul::tiled::{MatmulTiles, Staging};
#[cfg(feature = "gpu")]
pub use replay::GpuGraph;
#[cfg(feature = "gpu")]
pub use runtime::device::{GpuAdapter, GpuInfo};
#[cfg(feature = "gpu")]
pub use runtime::error::GpuError;
#[cfg(feature = "gpu")]
pub use runtime::pool::MemoryStats;
#[cfg(feature = "gpu")]
pub use runtime::profile::{KernelTime, Profile};
#[cfg(feature = "gpu")]
pub use runtime::submit::Submission;
#[cfg(feature = "gpu")]
pub use volta_kernels::wgsl::Launch;
