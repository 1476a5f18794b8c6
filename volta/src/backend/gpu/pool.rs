//! Buffer pool: device buffers are reused by size class instead of being created
//! and destroyed per op (allocation costs far more than a small kernel).
use super::context;
use std::collections::HashMap;
use std::sync::Mutex;

/// Usage of a pooled buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Kernel inputs and outputs.
    Storage,
    /// Read-back staging (mappable).
    Staging,
}

impl Kind {
    fn usage(self) -> wgpu::BufferUsages {
        match self {
            Kind::Storage => {
                wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST
            }
            Kind::Staging => wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        }
    }
}

/// Free buffers are kept up to this many bytes; beyond, dropped ones are released.
const MAX_POOLED_BYTES: u64 = 2 << 30;

/// Free buffers by (kind, size class).
pub(crate) struct Pool {
    free: Mutex<Free>,
    max_binding: u64,
    /// Buffers created so far (a pool miss each).
    pub created: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Free {
    buckets: HashMap<(Kind, u64), Vec<wgpu::Buffer>>,
    bytes: u64,
}

/// A buffer on loan from the pool; dropping the last handle returns it at once.
/// That is safe while recorded work still reads it: every later write to it is
/// recorded after that work in the same queue order (see `recorder`), and wgpu keeps
/// the memory alive until the commands using it have run.
pub(crate) struct Pooled {
    pub buffer: wgpu::Buffer,
    /// `None` for buffers that are not the pool's (released on drop).
    kind: Option<Kind>,
}

impl Pooled {
    /// A handle to a buffer that does not return to the pool.
    pub fn unpooled(buffer: wgpu::Buffer) -> Self {
        Pooled { buffer, kind: None }
    }
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pooled({} bytes)", self.buffer.size())
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some(kind), Some(ctx)) = (self.kind, context::existing()) {
            ctx.pool.put(kind, self.buffer.clone());
        }
    }
}

/// Size class of a request: quarter steps between powers of two (at most 25% waste),
/// at least 256 bytes.
pub(crate) fn size_class(bytes: u64) -> u64 {
    if bytes <= 256 {
        return 256;
    }
    let quarter = (1u64 << (63 - bytes.leading_zeros())) / 4;
    bytes.div_ceil(quarter) * quarter
}

impl Pool {
    pub fn new(limits: &wgpu::Limits) -> Self {
        Pool {
            free: Mutex::default(),
            max_binding: limits.max_storage_buffer_binding_size,
            created: Default::default(),
        }
    }

    /// A buffer of at least `bytes` bytes.
    pub fn get(&self, device: &wgpu::Device, kind: Kind, bytes: u64) -> Pooled {
        let mut size = size_class(bytes);
        if size > self.max_binding {
            // Rounding must not push a bindable size past the binding limit.
            size = bytes.max(4).next_multiple_of(4);
        }
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let b = free.buckets.get_mut(&(kind, size)).and_then(Vec::pop);
            if b.is_some() {
                free.bytes -= size;
            }
            b
        };
        let buffer = reused.unwrap_or_else(|| {
            self.created
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: kind.usage(),
                mapped_at_creation: false,
            })
        });
        Pooled {
            buffer,
            kind: Some(kind),
        }
    }

    fn put(&self, kind: Kind, buffer: wgpu::Buffer) {
        let size = buffer.size();
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.bytes + size <= MAX_POOLED_BYTES {
            free.bytes += size;
            free.buckets.entry((kind, size)).or_default().push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_a_quarter() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(1000), 1024);
        assert_eq!(size_class(5000), 5120);
        assert_eq!(size_class(1 << 26), 1 << 26);
        for b in [300u64, 777, 4097, 123_456_789] {
            let c = size_class(b);
            assert!(c >= b && c * 4 <= b * 5 + 3 * 256, "{b} -> {c}");
        }
    }
}
