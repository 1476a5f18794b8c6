//! Buffer pool: device buffers are reused by size class instead of being created
//! and destroyed per op (allocation costs far more than a small kernel).
use super::bind_groups::{BindGroups, Bindable};
use super::device::GpuDevice;
use super::error::GpuError;
use super::hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Usage of a pooled buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Kernel inputs and outputs.
    Storage,
    /// Read-back staging (mappable).
    Staging,
}

impl Kind {
    pub(crate) fn usage(self) -> wgpu::BufferUsages {
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

/// Free buffers are kept up to this many bytes, or up to the most bytes the pool
/// has held at once if that is more (a training step larger than this reuses its
/// buffers every step instead of creating hundreds, as PyTorch's caching
/// allocator keeps its blocks); beyond, the least recently returned ones are
/// released. Out of memory empties the cache and retries (see [`Pool::get`]).
const MAX_POOLED_BYTES: u64 = 2 << 30;

/// Device memory of Volta's buffer pool, from [`Gpu::memory`](crate::Gpu::memory).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of device buffers the pool holds: lent to tensors or cached.
    pub reserved_bytes: u64,
    /// Of those, the bytes cached for reuse (no tensor holds them).
    pub cached_bytes: u64,
    /// Device buffers created since start (each a pool miss).
    pub buffers_created: u64,
    /// The most bytes lent to tensors at once since the start or the last
    /// [`Gpu::reset_peak_memory`](crate::Gpu::reset_peak_memory) (PyTorch's
    /// `max_memory_allocated`), counted in the pool's size classes.
    pub peak_in_use_bytes: u64,
}

impl std::fmt::Display for MemoryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        write!(
            f,
            "{:.1} MiB reserved ({:.1} MiB in use, {:.1} MiB cached), {} buffers created",
            mib(self.reserved_bytes),
            mib(self.reserved_bytes - self.cached_bytes.min(self.reserved_bytes)),
            mib(self.cached_bytes),
            self.buffers_created
        )
    }
}

/// Free buffers by (kind, size class). Lent buffers share its state, so that
/// dropping one returns it without reaching for the runtime.
pub(crate) struct Pool {
    shared: Arc<Shared>,
    max_binding: u64,
}

/// What the pool and the buffers it lent share.
struct Shared {
    free: Mutex<Free<Block>>,
    /// Buffers created so far (a pool miss each).
    created: AtomicU64,
    /// Bytes of the pool's buffers that exist now (lent out or cached).
    allocated: AtomicU64,
    /// The most bytes `allocated` has reached.
    peak: AtomicU64,
    /// Bytes of the buffers lent out now, and the most since the last reset.
    in_use: AtomicU64,
    peak_in_use: AtomicU64,
    /// The most bytes the pool may hold (`u64::MAX`: as many as the device gives).
    limit: AtomicU64,
    /// Source of buffer ids ([`Pooled::id`]).
    ids: AtomicU64,
    /// Bind groups over the pool's buffers; a buffer's go when the pool releases it.
    bind_groups: BindGroups,
}

/// A device buffer and its id.
type Block = (u64, wgpu::Buffer);

/// The free list: buffers (`B`; plain ids in tests) by (kind, size), each with
/// the tick it was returned at, holding at most `cap` bytes.
struct Free<B> {
    buckets: FxHashMap<(Kind, u64), Vec<(u64, B)>>,
    bytes: u64,
    cap: u64,
    /// Counts returns, to find the least recently returned buffer.
    tick: u64,
}

impl<B> Free<B> {
    fn new(cap: u64) -> Self {
        Free {
            buckets: FxHashMap::default(),
            bytes: 0,
            cap,
            tick: 0,
        }
    }

    /// The most recently returned free buffer of this kind and size.
    fn take(&mut self, kind: Kind, size: u64) -> Option<B> {
        let (_, b) = self.buckets.get_mut(&(kind, size))?.pop()?;
        self.bytes -= size;
        Some(b)
    }

    /// Keeps a returned buffer. Past `cap`, the least recently returned buffers
    /// are released (dropped) to make room: the sizes a program uses now (a
    /// training step's) stay cached, those of a finished phase go. Returns the
    /// buffers released, with their sizes.
    fn put(&mut self, kind: Kind, size: u64, buffer: B) -> Vec<(u64, B)> {
        if size > self.cap {
            return vec![(size, buffer)];
        }
        let mut released = Vec::new();
        while self.bytes + size > self.cap {
            let oldest = self
                .buckets
                .iter()
                .filter_map(|(key, list)| list.first().map(|(tick, _)| (*tick, *key)))
                .min_by_key(|(tick, _)| *tick);
            let Some((_, key)) = oldest else { break };
            let (_, b) = self
                .buckets
                .get_mut(&key)
                .expect("the bucket just found")
                .remove(0);
            self.bytes -= key.1;
            released.push((key.1, b));
        }
        self.tick += 1;
        self.bytes += size;
        let tick = self.tick;
        self.buckets
            .entry((kind, size))
            .or_default()
            .push((tick, buffer));
        released
    }
}

/// A buffer on loan from the pool; dropping the last handle returns it at once.
/// That is safe while recorded work still reads it: every later write to it is
/// recorded after that work in the same queue order (see `recorder`), and wgpu keeps
/// the memory alive until the commands using it have run.
pub(crate) struct Pooled {
    pub buffer: wgpu::Buffer,
    /// The buffer's identity for cached bind groups: unique for the life of the
    /// process. `None` for a buffer that is destroyed when its handle drops,
    /// which a cached bind group would keep alive.
    id: Option<u64>,
    /// The pool it returns to, and as what; `None` for buffers that are not the
    /// pool's (released on drop).
    home: Option<(Arc<Shared>, Kind)>,
    /// A window `(offset, size)` in bytes: what kernels bind of the buffer (a
    /// slice of a tensor larger than one binding may address, see `kernels::slices`).
    window: Option<(u64, u64)>,
    /// The buffer a window belongs to, kept out of the pool while the window
    /// lives (a captured graph holds its windows).
    _parent: Option<Arc<Pooled>>,
    /// The values of this memory rounded to `f16` (for products in half
    /// precision), kept while the memory is unchanged: a write in place drops it
    /// ([`Pooled::forget_derived`]).
    rounded: Mutex<Option<Arc<Pooled>>>,
    /// Partial largest magnitudes of views of this memory (a split product's
    /// operands, `kernels::matmul::scales`), by the view's key, kept while the
    /// memory is unchanged, as [`Pooled::rounded`] is: a layer's input and
    /// its output's gradient are each an operand of two products.
    largest: Mutex<Vec<(Vec<usize>, Largest)>>,
    /// `Some(seed)`: a stand-in for the uniform numbers of `seed`, which kernels
    /// draw where they would load them (`volta_kernels::wgsl::Draws`); the
    /// buffer itself is only bound, never read (see [`Pooled::drawing`]).
    draws: Option<u64>,
}

/// Partial largest magnitudes of a view (`kernels::matmul::scales`): a
/// buffer of them and how many it holds.
pub(crate) type Largest = (Arc<Pooled>, u32);

impl Pooled {
    /// A handle to a buffer that does not return to the pool.
    pub fn unpooled(buffer: wgpu::Buffer) -> Self {
        Pooled {
            buffer,
            id: None,
            home: None,
            window: None,
            _parent: None,
            rounded: Mutex::new(None),
            largest: Mutex::new(Vec::new()),
            draws: None,
        }
    }

    /// A handle to a buffer that lives as long as the process (bind groups over
    /// it are cached).
    pub fn permanent(pool: &Pool, buffer: wgpu::Buffer) -> Self {
        let mut p = Self::unpooled(buffer);
        p.id = Some(pool.shared.ids.fetch_add(1, Ordering::Relaxed));
        p
    }

    fn lent(pool: &Pool, (id, buffer): Block, kind: Kind) -> Self {
        let shared = &pool.shared;
        let now = shared.in_use.fetch_add(buffer.size(), Ordering::Relaxed) + buffer.size();
        shared.peak_in_use.fetch_max(now, Ordering::Relaxed);
        Pooled {
            buffer,
            id: Some(id),
            home: Some((pool.shared.clone(), kind)),
            window: None,
            _parent: None,
            rounded: Mutex::new(None),
            largest: Mutex::new(Vec::new()),
            draws: None,
        }
    }

    /// `size` bytes of `parent` from byte `offset` (a multiple of the adapter's
    /// storage offset alignment), bound in its place. A window of a window is a
    /// window of the whole buffer.
    pub fn window(parent: &Arc<Pooled>, offset: u64, size: u64) -> Arc<Pooled> {
        let (base, root) = match (&parent.window, &parent._parent) {
            (Some((base, _)), Some(root)) => (*base, root),
            _ => (0, parent),
        };
        debug_assert!(offset + size <= parent.bound_size());
        debug_assert!(
            parent.draws.is_none(),
            "a drawn input has no memory to window"
        );
        Arc::new(Pooled {
            buffer: root.buffer.clone(),
            id: root.id,
            home: None,
            window: Some((base + offset, size)),
            _parent: Some(root.clone()),
            rounded: Mutex::new(None),
            largest: Mutex::new(Vec::new()),
            draws: None,
        })
    }

    /// This memory's values rounded to `f16`: the copy kept from an earlier call,
    /// or the one `round` records now (and that is kept).
    pub fn rounded(&self, round: impl FnOnce() -> Arc<Pooled>) -> Arc<Pooled> {
        let mut kept = self.rounded.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert_with(round).clone()
    }

    /// Whether this memory has a copy rounded to `f16` ([`Pooled::rounded`]):
    /// a product in half precision has read it.
    pub fn has_rounded(&self) -> bool {
        self.rounded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Keeps `copy` (this memory's values rounded to `f16`, written by the
    /// kernel that wrote this memory) as [`Pooled::rounded`]'s copy.
    pub fn keep_rounded(&self, copy: Arc<Pooled>) {
        *self.rounded.lock().unwrap_or_else(|p| p.into_inner()) = Some(copy);
    }

    /// The partial maxima kept for the view `key` ([`Pooled::keep_largest`]).
    pub fn kept_largest(&self, key: &[usize]) -> Option<Largest> {
        let kept = self.largest.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter().find(|(k, _)| k == key).map(|(_, l)| l.clone())
    }

    /// Keeps the partial maxima of the view `key` of this memory, written by
    /// a reduction recorded before any later reader. Not for windows, which a
    /// write in place of the whole buffer would not reach.
    pub fn keep_largest(&self, key: Vec<usize>, largest: Largest) {
        if self.window.is_some() {
            return;
        }
        let mut kept = self.largest.lock().unwrap_or_else(|p| p.into_inner());
        // A few views at most: a layer's input, its gradient's slices.
        if kept.len() == 4 {
            kept.remove(0);
        }
        kept.push((key, largest));
    }

    /// Drops what was derived from this memory's values ([`Pooled::rounded`],
    /// [`Pooled::kept_largest`]): the memory is about to be written in place,
    /// and they would not follow.
    pub fn forget_derived(&self) {
        *self.rounded.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.largest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// This (small) buffer as the stand-in for the uniform numbers of `seed`
    /// (element `i` is `volta::random::uniform_at(seed, i)`): a fusion leaf that
    /// elementwise and row kernels draw at the addresses they would load, so the
    /// numbers are never written.
    pub fn drawing(mut self, seed: u64) -> Self {
        self.draws = Some(seed);
        self
    }

    /// The seed whose uniform numbers this buffer stands for, if it is a stand-in.
    pub fn draws(&self) -> Option<u64> {
        self.draws
    }

    /// Bytes a kernel binds: the window, or the whole buffer.
    pub fn bound_size(&self) -> u64 {
        self.window.map_or(self.buffer.size(), |(_, size)| size)
    }
}

impl Bindable for Pooled {
    fn buffer(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    fn bound(&self) -> Option<[u64; 3]> {
        let (offset, size) = self.window.unwrap_or((0, self.buffer.size()));
        self.id.map(|id| [id, offset, size])
    }

    fn binding(&self) -> wgpu::BindingResource<'_> {
        match self.window {
            None => self.buffer.as_entire_binding(),
            Some((offset, size)) => wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.buffer,
                offset,
                size: wgpu::BufferSize::new(size),
            }),
        }
    }
}

impl std::fmt::Debug for Pooled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pooled({} bytes)", self.buffer.size())
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let (Some((pool, kind)), Some(id)) = (&self.home, self.id) {
            pool.put(*kind, (id, self.buffer.clone()));
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
            shared: Arc::new(Shared {
                free: Mutex::new(Free::new(MAX_POOLED_BYTES)),
                created: Default::default(),
                allocated: Default::default(),
                peak: AtomicU64::new(0),
                in_use: AtomicU64::new(0),
                peak_in_use: AtomicU64::new(0),
                limit: AtomicU64::new(u64::MAX),
                ids: AtomicU64::new(0),
                bind_groups: BindGroups::default(),
            }),
            max_binding: limits.max_storage_buffer_binding_size,
        }
    }

    /// Buffers created so far (each a pool miss).
    pub fn created(&self) -> u64 {
        self.shared.created.load(Ordering::Relaxed)
    }

    /// The bind groups cached over the pool's buffers.
    pub fn bind_groups(&self) -> &BindGroups {
        &self.shared.bind_groups
    }

    /// A pooled buffer of `kind`, or (out of memory) the error kept for the
    /// next sync point and a small stand-in, so recording goes on until then.
    pub fn lend(&self, gpu: &GpuDevice, kind: Kind, bytes: u64) -> Pooled {
        self.get(&gpu.device, kind, bytes).unwrap_or_else(|e| {
            gpu.report(e);
            Pooled::unpooled(gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("volta out-of-memory stand-in"),
                size: 256,
                usage: kind.usage(),
                mapped_at_creation: false,
            }))
        })
    }

    /// A buffer of at least `bytes` bytes: a cached one of its size class, or a
    /// new one. When a new one does not fit (the device is out of memory, or the
    /// pool would pass its limit), the cache is emptied and the allocation tried
    /// once more, as PyTorch's caching allocator does, before
    /// [`GpuError::OutOfMemory`].
    pub fn get(&self, device: &wgpu::Device, kind: Kind, bytes: u64) -> Result<Pooled, GpuError> {
        let mut size = size_class(bytes);
        if size > self.max_binding {
            // Rounding must not push a bindable size past the binding limit.
            size = bytes.max(4).next_multiple_of(4);
        }
        let reused = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(kind, size);
        if let Some(buffer) = reused {
            return Ok(Pooled::lent(self, buffer, kind));
        }
        for retry in [false, true] {
            if retry {
                self.clear();
            }
            if let Some(buffer) = self.shared.create(device, kind, size) {
                return Ok(Pooled::lent(self, buffer, kind));
            }
        }
        let (allocated, cached) = self.usage();
        let limit = self.shared.limit.load(Ordering::Relaxed);
        Err(GpuError::OutOfMemory {
            requested: Some(size),
            in_use: allocated - cached,
            limit: (limit != u64::MAX).then_some(limit),
        })
    }

    /// Caps the bytes of buffers the pool holds (lent and cached); `None` lifts the
    /// cap.
    pub fn set_limit(&self, bytes: Option<u64>) {
        self.shared
            .limit
            .store(bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The most bytes lent out at once since the last [`reset_peak`](Self::reset_peak).
    pub fn peak_in_use(&self) -> u64 {
        self.shared.peak_in_use.load(Ordering::Relaxed)
    }

    /// Starts the peak over from the bytes lent out now.
    pub fn reset_peak(&self) {
        let now = self.shared.in_use.load(Ordering::Relaxed);
        self.shared.peak_in_use.store(now, Ordering::Relaxed);
    }

    /// Releases every free buffer; returns the bytes released.
    pub fn clear(&self) -> u64 {
        self.shared.clear()
    }

    /// Bytes of the pool's buffers that exist now, and of those the free ones.
    pub fn usage(&self) -> (u64, u64) {
        let cached = self
            .shared
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .bytes;
        let allocated = self.shared.allocated.load(Ordering::Relaxed);
        (allocated, cached)
    }
}

impl Shared {
    /// A new buffer, or `None` when the device or the pool's limit refuses it.
    fn create(&self, device: &wgpu::Device, kind: Kind, size: u64) -> Option<Block> {
        let limit = self.limit.load(Ordering::Relaxed);
        if self.allocated.load(Ordering::Relaxed).saturating_add(size) > limit {
            return None;
        }
        // Out of memory is an error of this call, not one for the next sync point.
        // In the browser an error scope only answers asynchronously: there the
        // device's error handler reports it at the next sync point instead.
        #[cfg(not(target_arch = "wasm32"))]
        let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: kind.usage(),
            mapped_at_creation: false,
        });
        #[cfg(not(target_arch = "wasm32"))]
        if pollster::block_on(scope.pop()).is_some() {
            return None;
        }
        self.created.fetch_add(1, Ordering::Relaxed);
        let now = self.allocated.fetch_add(size, Ordering::Relaxed) + size;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Some((self.ids.fetch_add(1, Ordering::Relaxed), buffer))
    }

    fn clear(&self) -> u64 {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let bytes = free.bytes;
        free.buckets.clear();
        free.bytes = 0;
        drop(free);
        self.allocated.fetch_sub(bytes, Ordering::Relaxed);
        // Cached bind groups would keep the released buffers alive.
        self.bind_groups.clear();
        bytes
    }

    fn put(&self, kind: Kind, block: Block) {
        let size = block.1.size();
        self.in_use.fetch_sub(size, Ordering::Relaxed);
        let released = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.cap = MAX_POOLED_BYTES.max(self.peak.load(Ordering::Relaxed));
            free.put(kind, size, block)
        };
        if released.is_empty() {
            return;
        }
        let bytes: u64 = released.iter().map(|(size, _)| size).sum();
        self.allocated.fetch_sub(bytes, Ordering::Relaxed);
        // Cached bind groups would keep the released buffers alive.
        let ids: Vec<u64> = released.iter().map(|(_, (id, _))| *id).collect();
        self.bind_groups.forget(&ids);
    }
}

#[cfg(test)]
mod tests {
    use super::{Free, Kind, size_class};

    #[test]
    fn a_full_pool_releases_the_least_recently_returned() {
        let mut free = Free::new(1000);
        free.put(Kind::Storage, 400, "a");
        free.put(Kind::Storage, 400, "b");
        free.put(Kind::Storage, 100, "c");
        // 900 held: another 400 releases "a", the oldest.
        assert_eq!(free.put(Kind::Staging, 400, "d"), [(400, "a")]);
        assert_eq!(free.bytes, 900);
        assert_eq!(free.take(Kind::Storage, 400), Some("b"));
        assert_eq!(free.take(Kind::Storage, 400), None);
        assert_eq!(free.take(Kind::Staging, 400), Some("d"));
        // Taking and returning refreshes a buffer: "c" outlives older returns.
        free.put(Kind::Storage, 500, "e");
        let c = free.take(Kind::Storage, 100).unwrap();
        free.put(Kind::Storage, 100, c);
        free.put(Kind::Storage, 500, "f");
        assert_eq!(free.take(Kind::Storage, 500), Some("f"));
        assert_eq!(free.take(Kind::Storage, 100), Some("c"));
        assert_eq!(free.take(Kind::Storage, 500), None);
        // Larger than the whole pool: not kept.
        assert_eq!(free.put(Kind::Storage, 2000, "g"), [(2000, "g")]);
        assert_eq!(free.take(Kind::Storage, 2000), None);
    }

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
