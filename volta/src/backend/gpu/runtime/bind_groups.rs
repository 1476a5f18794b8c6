//! Bind-group cache. Creating a bind group (validation, a descriptor set allocated
//! and written) was most of the host cost of recording a small op. Binding 0, the
//! parameter block, is bound at a dynamic offset, so a bind group depends only on
//! the buffers it binds; those come from the pool and recur (a training step binds
//! the same buffers every step, a chain of ops alternates between two), so bind
//! groups are kept by buffer set.
//!
//! Buffers are known by ids that are never reused ([`Bindable::bound`]), so a cached
//! bind group never stands for a buffer created later. A cached bind group keeps
//! its buffers alive in wgpu, so when the pool releases buffers the bind groups over
//! them go too ([`BindGroups::forget`], [`BindGroups::clear`]): released memory is
//! released on the device, as [`Gpu::memory`](crate::Gpu::memory) reports.
use super::hash::FxHashMap;
use super::pipelines::Kernel;
use std::sync::Mutex;

/// A buffer (or a window of one) that a bind group can bind.
pub(crate) trait Bindable {
    /// What a bind group binds, `[id, offset, size]`, when bind groups over it
    /// may be cached (the id is never reused for another buffer).
    fn bound(&self) -> Option<[u64; 3]>;
    /// The whole buffer.
    fn buffer(&self) -> &wgpu::Buffer;
    /// The binding itself.
    fn binding(&self) -> wgpu::BindingResource<'_>;
}

/// The most bind groups kept; past it the cache starts over (a program that binds
/// ever new buffer sets gains nothing from keeping them).
const MAX_CACHED: usize = 4096;

impl<T: Bindable> Bindable for std::sync::Arc<T> {
    fn bound(&self) -> Option<[u64; 3]> {
        (**self).bound()
    }
    fn buffer(&self) -> &wgpu::Buffer {
        (**self).buffer()
    }
    fn binding(&self) -> wgpu::BindingResource<'_> {
        (**self).binding()
    }
}

/// The cached bind groups, and how many were created.
#[derive(Default)]
pub(crate) struct BindGroups {
    cache: Mutex<Cache<wgpu::BindGroup>>,
}

impl BindGroups {
    /// A bind group of `kernel`'s layout: binding 0 the `window` bytes of `params`
    /// that a dispatch's dynamic offset selects, then `buffers`. Cached when every
    /// buffer has an id.
    pub fn get<P: Bindable, B: Bindable>(
        &self,
        device: &wgpu::Device,
        kernel: &Kernel,
        (params, window): (&P, u64),
        buffers: &[&B],
    ) -> wgpu::BindGroup {
        let mut cache = self.lock();
        let layout = [kernel.bindings.reads as u64, kernel.bindings.writes as u64];
        // The parameter block's binding: its window from a dynamic offset.
        let params_binding = params.bound().map(|[id, _, _]| [id, 0, window]);
        let key = std::iter::once(params_binding).chain(buffers.iter().map(|b| b.bound()));
        let make = || create(device, &kernel.layout, (params.buffer(), window), buffers);
        if cache.key(layout, key) {
            cache.get_or_insert_with(make)
        } else {
            cache.created += 1;
            make()
        }
    }

    /// Drops the bind groups over any buffer of `ids` (buffers the pool released).
    pub fn forget(&self, ids: &[u64]) {
        self.lock().forget(ids);
    }

    /// Drops every cached bind group.
    pub fn clear(&self) {
        self.lock().groups.clear();
    }

    /// Bind groups created so far (each a miss of the cache, or uncacheable).
    pub fn created(&self) -> u64 {
        self.lock().created
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache<wgpu::BindGroup>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A new bind group of `layout`: binding 0 the `window` bytes of `params` that a
/// dispatch's dynamic offset selects, then `buffers`.
pub(crate) fn create<B: Bindable>(
    device: &wgpu::Device,
    layout: &wgpu::BindGroupLayout,
    (params, window): (&wgpu::Buffer, u64),
    buffers: &[&B],
) -> wgpu::BindGroup {
    let params = wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer: params,
        offset: 0,
        size: wgpu::BufferSize::new(window),
    });
    let entries: Vec<wgpu::BindGroupEntry> = std::iter::once(params)
        .chain(buffers.iter().map(|b| b.binding()))
        .enumerate()
        .map(|(i, resource)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource,
        })
        .collect();
    device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout,
        entries: &entries,
    })
}

/// Bind groups (`G`; plain names in tests) by key: the layout's two words, then
/// `[id, offset, size]` of each binding.
struct Cache<G> {
    groups: FxHashMap<Box<[u64]>, G>,
    /// The key being looked up (kept to reuse its allocation).
    key: Vec<u64>,
    created: u64,
}

impl<G> Default for Cache<G> {
    fn default() -> Self {
        Cache {
            groups: FxHashMap::default(),
            key: Vec::new(),
            created: 0,
        }
    }
}

/// Words of a key before the bindings'.
const LAYOUT_WORDS: usize = 2;

impl<G> Cache<G> {
    /// Sets the key to look up; `false` when a binding has no id (not cacheable).
    fn key(
        &mut self,
        layout: [u64; LAYOUT_WORDS],
        bindings: impl Iterator<Item = Option<[u64; 3]>>,
    ) -> bool {
        self.key.clear();
        self.key.extend(layout);
        for b in bindings {
            let Some(b) = b else { return false };
            self.key.extend(b);
        }
        true
    }

    /// The group for the key set last, made on a miss (one lookup on a hit).
    fn get_or_insert_with(&mut self, make: impl FnOnce() -> G) -> G
    where
        G: Clone,
    {
        if let Some(g) = self.groups.get(&self.key[..]) {
            return g.clone();
        }
        if self.groups.len() >= MAX_CACHED {
            self.groups.clear();
        }
        self.created += 1;
        let g = make();
        self.groups.insert(self.key[..].into(), g.clone());
        g
    }

    fn forget(&mut self, ids: &[u64]) {
        self.groups.retain(|key, _| {
            !key[LAYOUT_WORDS..]
                .chunks(3)
                .any(|binding| ids.contains(&binding[0]))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{Cache, MAX_CACHED};

    fn get(cache: &mut Cache<&'static str>, ids: &[u64], g: &'static str) -> &'static str {
        assert!(cache.key([1, 1], ids.iter().map(|&id| Some([id, 0, 256]))));
        cache.get_or_insert_with(|| g)
    }

    #[test]
    fn a_buffer_set_is_bound_once_until_a_buffer_goes() {
        let mut cache = Cache::default();
        assert_eq!(get(&mut cache, &[0, 1, 2], "a"), "a");
        assert_eq!(get(&mut cache, &[0, 2, 1], "b"), "b");
        assert_eq!(get(&mut cache, &[0, 1, 2], "new"), "a");
        assert_eq!(cache.created, 2);
        // Buffer 1 released: both go. Buffer 3 was never bound.
        cache.forget(&[3]);
        assert_eq!(cache.groups.len(), 2);
        cache.forget(&[1]);
        assert!(cache.groups.is_empty());
        assert_eq!(get(&mut cache, &[0, 1, 2], "c"), "c");
        // A binding without an id is not cached.
        assert!(!cache.key([1, 1], [Some([0, 0, 256]), None].into_iter()));
    }

    #[test]
    fn a_full_cache_starts_over() {
        let mut cache = Cache::default();
        for id in 0..MAX_CACHED as u64 {
            get(&mut cache, &[id], "old");
        }
        assert_eq!(cache.groups.len(), MAX_CACHED);
        assert_eq!(get(&mut cache, &[u64::MAX], "new"), "new");
        assert_eq!(cache.groups.len(), 1);
    }
}
