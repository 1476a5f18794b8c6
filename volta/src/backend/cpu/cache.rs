//! The CPU's buffers, and a cache of the large ones by element type and length.
//! A training step allocates the same sizes every step. Memory fresh from the OS
//! costs a page fault and the kernel's zeroing of every 4 KiB page: a fifth of a
//! GPT training step on the CPU (`BENCHMARKS.md`). A cached buffer costs neither.
//! Buffers return to the cache when their tensor's last handle drops.
use crate::dtype::Element;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Buffers below this many bytes go back to the allocator, which reuses small
/// blocks well.
const SMALLEST: usize = 1 << 16;

/// The most bytes the cache holds; a buffer that would pass it is freed.
const MOST: usize = 1 << 30;

/// Freed buffers by element type and length, and their bytes in all.
struct Cache {
    free: HashMap<(TypeId, usize), Vec<Box<dyn Any + Send>>>,
    bytes: usize,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// A CPU tensor's elements: a `Vec` that goes back to the cache when dropped.
#[derive(Debug, Default)]
pub struct CpuBuffer<E: Element>(Vec<E>);

impl<E: Element> CpuBuffer<E> {
    /// The elements as a `Vec` (this buffer's memory then leaves the cache's care).
    pub fn into_vec(mut self) -> Vec<E> {
        std::mem::take(&mut self.0)
    }
}

impl<E: Element> Clone for CpuBuffer<E> {
    fn clone(&self) -> Self {
        let mut data = with_capacity(self.0.len());
        data.extend_from_slice(&self.0);
        Self(data)
    }
}

impl<E: Element> From<Vec<E>> for CpuBuffer<E> {
    fn from(data: Vec<E>) -> Self {
        Self(data)
    }
}

impl<E: Element> Deref for CpuBuffer<E> {
    type Target = Vec<E>;
    fn deref(&self) -> &Vec<E> {
        &self.0
    }
}

impl<E: Element> DerefMut for CpuBuffer<E> {
    fn deref_mut(&mut self) -> &mut Vec<E> {
        &mut self.0
    }
}

impl<E: Element> Drop for CpuBuffer<E> {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.0);
        let bytes = data.capacity() * size_of::<E>();
        if bytes < SMALLEST || data.len() != data.capacity() {
            return;
        }
        let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        let cache = guard.get_or_insert_with(|| Cache {
            free: HashMap::new(),
            bytes: 0,
        });
        if cache.bytes + bytes <= MOST {
            cache.bytes += bytes;
            let key = (TypeId::of::<E>(), data.len());
            cache.free.entry(key).or_default().push(Box::new(data));
        }
    }
}

/// A cached buffer of exactly `len` elements, if there is one (its contents are
/// a dropped tensor's).
fn cached<E: Copy + Send + 'static>(len: usize) -> Option<Vec<E>> {
    if len * size_of::<E>() < SMALLEST {
        return None;
    }
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = guard.as_mut()?;
    let data = cache.free.get_mut(&(TypeId::of::<E>(), len))?.pop()?;
    let data = *data
        .downcast::<Vec<E>>()
        .expect("the cache keys buffers by type");
    cache.bytes -= len * size_of::<E>();
    Some(data)
}

/// `len` copies of `value`, in a cached buffer where one fits.
pub(crate) fn filled<E: Copy + Send + 'static>(len: usize, value: E) -> Vec<E> {
    match cached(len) {
        Some(mut data) => {
            data.fill(value);
            data
        }
        None => vec![value; len],
    }
}

/// An empty `Vec` with room for `len` elements, from the cache where one fits.
pub(crate) fn with_capacity<E: Copy + Send + 'static>(len: usize) -> Vec<E> {
    match cached(len) {
        Some(mut data) => {
            data.clear();
            data
        }
        None => Vec::with_capacity(len),
    }
}

/// A copy of `data`, in a cached buffer where one fits.
pub(crate) fn copied<E: Copy + Send + 'static>(data: &[E]) -> Vec<E> {
    let mut copy = with_capacity(data.len());
    copy.extend_from_slice(data);
    copy
}

/// Frees every cached buffer (as `Gpu::empty_cache` does on the GPU).
pub(crate) fn empty() {
    let mut guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    *guard = None;
}

/// The bytes the cache holds.
pub(crate) fn cached_bytes() -> usize {
    let guard = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    guard.as_ref().map_or(0, |c| c.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dropped large buffer is handed out again for the same type and length,
    /// refilled; other lengths and types, and small buffers, are not served from it.
    #[test]
    fn large_buffers_come_back_refilled() {
        let len = SMALLEST + 4321; // a length no other test allocates
        let first = CpuBuffer::from(vec![7.0f32; len]);
        let address = first.as_ptr();
        drop(first);
        assert!(cached::<f32>(len + 1).is_none());
        assert!(cached::<u32>(len).is_none());
        let again = filled(len, 1.0f32);
        assert_eq!(again.as_ptr(), address);
        assert!(again.iter().all(|&x| x == 1.0));
        drop(CpuBuffer::from(vec![0.0f32; 8]));
        assert!(cached::<f32>(8).is_none());
        drop(CpuBuffer::from(again));
        assert!(cached_bytes() >= len * 4);
        empty();
        assert!(cached::<f32>(len).is_none());
    }
}
