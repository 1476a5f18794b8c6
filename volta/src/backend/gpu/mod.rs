//! The GPU device type. Its wgpu runtime is being built (issue #3); until then the
//! type exists so that programs mixing `Cpu` and `Gpu` tensors are rejected at
//! compile time, and it cannot yet hold or compute tensors.

/// The GPU device (wgpu: Vulkan, Metal, DX12, WebGPU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gpu;
