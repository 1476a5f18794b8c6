//! Errors of the GPU device.

/// What went wrong with the GPU. Errors raised while work runs (validation, out of
/// memory, device lost, bad indices) are reported at the next sync point:
/// [`Gpu::sync`](crate::Gpu::sync) or a read-back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuError {
    /// No adapter (GPU driver or software Vulkan) was found.
    NoAdapter,
    /// [`Gpu::init_on`](crate::Gpu::init_on) (or `VOLTA_ADAPTER`) asked for an
    /// adapter past the machine's list.
    NoSuchAdapter {
        /// The index asked for.
        index: usize,
        /// Adapters the machine has.
        count: usize,
    },
    /// The adapter refused to create a device.
    RequestDevice(String),
    /// The device ran out of memory, even after Volta's buffer pool released
    /// its cache and retried (or the pool reached its
    /// [`Gpu::set_memory_limit`](crate::Gpu::set_memory_limit)).
    OutOfMemory {
        /// Bytes of the allocation that failed, when Volta made it.
        requested: Option<u64>,
        /// Bytes of the pool's buffers that tensors held at the time.
        in_use: u64,
        /// The pool's limit, when one is set.
        limit: Option<u64>,
    },
    /// wgpu rejected a command: a bug in Volta's kernels or a limit was exceeded.
    Validation(String),
    /// The driver lost the device (reset, removal, crash).
    DeviceLost(String),
    /// An op was asked to address more bytes of one tensor than the adapter binds
    /// to a kernel (`max_storage_buffer_binding_size`), and it cannot work in
    /// slices (a softmax or norm over one row longer than a binding, a random fill,
    /// a KV cache past it; the other ops work in slices).
    TooLarge {
        /// The op (its kernel's name).
        op: String,
        /// Bytes of the largest operand.
        bytes: u64,
        /// The adapter's limit per binding.
        limit: u64,
    },
    /// A gather or scatter index was out of range for its axis.
    IndexOutOfRange,
    /// Reading a buffer back failed.
    ReadBack(String),
    /// The adapter lacks a feature the call needs (e.g. timestamp queries for
    /// profiling).
    Unsupported(String),
    /// A blocking call in the browser (wasm32), where waiting would freeze the
    /// page and never end: use the `_async` form (`Gpu::init_async`,
    /// `to_vec_async`, `Gpu::sync_async`).
    WouldBlock,
    /// In the browser, a `Gpu` op before the device was opened: opening it there
    /// is asynchronous, so call `Gpu::init_async().await` first.
    NotOpened,
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuError::NoAdapter if cfg!(target_arch = "wasm32") => f.write_str(
                "no WebGPU adapter: this browser has no WebGPU or has it turned off \
                 (WebGPU is in Chrome and Edge 113+, Safari 26+, Firefox 141+ on Windows; \
                 Chrome on Linux needs --enable-unsafe-webgpu)",
            ),
            GpuError::NoAdapter => f.write_str(
                "no GPU adapter found: install your GPU's driver (Vulkan, Metal or DX12), \
                 or for Vulkan on the CPU install Mesa's lavapipe \
                 (Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libvulkan1`)",
            ),
            GpuError::NoSuchAdapter { index, count } => write!(
                f,
                "no GPU adapter {index}: this machine has {count} (indices from 0; \
                 `Gpu::adapters()` lists them)"
            ),
            GpuError::RequestDevice(e) => write!(f, "the GPU adapter refused a device: {e}"),
            GpuError::OutOfMemory {
                requested,
                in_use,
                limit,
            } => {
                let mib = |b: u64| b as f64 / f64::from(1 << 20);
                f.write_str("the GPU ran out of memory")?;
                if let Some(r) = requested {
                    write!(f, " allocating {:.1} MiB", mib(*r))?;
                }
                write!(
                    f,
                    " ({:.1} MiB held by tensors after the cache was released",
                    mib(*in_use)
                )?;
                if let Some(l) = limit {
                    write!(f, "; limit {:.1} MiB, Gpu::set_memory_limit", mib(*l))?;
                }
                f.write_str("): drop tensors you no longer need or use smaller batches")
            }
            GpuError::Validation(e) => write!(f, "GPU validation error: {e}"),
            GpuError::DeviceLost(e) => write!(f, "the GPU device was lost: {e}"),
            GpuError::IndexOutOfRange => {
                f.write_str("gather/scatter on the GPU: an index was out of range for its axis")
            }
            GpuError::TooLarge { op, bytes, limit } => write!(
                f,
                "`{op}` on a tensor of {:.1} MiB: this adapter binds at most {:.1} MiB of a \
                 buffer to a kernel (max_storage_buffer_binding_size), and this op cannot \
                 work in slices; split the tensor (e.g. with `narrow`) or use an adapter \
                 with a larger limit",
                *bytes as f64 / f64::from(1 << 20),
                *limit as f64 / f64::from(1 << 20)
            ),
            GpuError::ReadBack(e) => write!(f, "reading a GPU buffer back failed: {e}"),
            GpuError::Unsupported(e) => write!(f, "not supported on this GPU: {e}"),
            GpuError::NotOpened => f.write_str(
                "the GPU is not open yet: in the browser call `Gpu::init_async().await` \
                 before the first op on a `Gpu` tensor",
            ),
            GpuError::WouldBlock => f.write_str(
                "a blocking GPU call in the browser, where waiting would freeze the page: \
                 use `Gpu::init_async().await`, `tensor.to_vec_async().await` or \
                 `Gpu::sync_async().await` there",
            ),
        }
    }
}

impl std::error::Error for GpuError {}
