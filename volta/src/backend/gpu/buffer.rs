//! The buffer handle that `Gpu` tensors hold.
use super::pool::Pooled;
use std::marker::PhantomData;
use std::sync::Arc;

/// A reference-counted device buffer of `len` elements of `E`. Cloning shares it;
/// when the last handle goes, the memory returns to Volta's buffer pool.
pub struct GpuBuffer<E> {
    pub(crate) raw: Arc<Pooled>,
    pub(crate) len: usize,
    _elem: PhantomData<fn() -> E>,
}

impl<E> GpuBuffer<E> {
    pub(crate) fn new(raw: Arc<Pooled>, len: usize) -> Self {
        GpuBuffer {
            raw,
            len,
            _elem: PhantomData,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<E> Clone for GpuBuffer<E> {
    fn clone(&self) -> Self {
        GpuBuffer::new(self.raw.clone(), self.len)
    }
}

impl<E> std::fmt::Debug for GpuBuffer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer({} elements)", self.len)
    }
}
