//! The buffer handle that `Gpu` tensors hold.
use super::pending::Pending;
use crate::backend::gpu::runtime::pool::Pooled;
use std::marker::PhantomData;
use std::sync::Arc;

/// A reference-counted device buffer of `len` elements of `E`. Cloning shares it;
/// when the last handle goes, the memory returns to Volta's buffer pool.
///
/// The result of an elementwise op may still be *pending* (see
/// [`Gpu::set_fusion`](crate::Gpu::set_fusion)): an expression that later
/// elementwise ops splice into their own kernel, and that reductions, softmax and
/// normalisation compute in their loads. It is computed once, when a kernel needs
/// it in memory (a matmul, a copy, a read-back, …), or when
/// [`realize`](GpuBuffer::realize) is called.
pub struct GpuBuffer<E> {
    pub(crate) data: Data,
    pub(crate) len: usize,
    _elem: PhantomData<fn() -> E>,
}

/// What a handle holds: device memory, or the fused expression that computes it.
#[derive(Clone)]
pub(crate) enum Data {
    Ready(Arc<Pooled>),
    Pending(Arc<Pending>),
}

impl<E> GpuBuffer<E> {
    /// A handle to memory that kernels have written (or will, in recording order).
    pub(crate) fn new(raw: Arc<Pooled>, len: usize) -> Self {
        Self::with(Data::Ready(raw), len)
    }

    /// A handle to a value not recorded yet.
    pub(crate) fn pending(p: Arc<Pending>, len: usize) -> Self {
        Self::with(Data::Pending(p), len)
    }

    fn with(data: Data, len: usize) -> Self {
        GpuBuffer {
            data,
            len,
            _elem: PhantomData,
        }
    }

    /// The device memory, recording the fused kernel first if the value is pending.
    pub(crate) fn raw(&self) -> &Arc<Pooled> {
        match &self.data {
            Data::Ready(raw) => raw,
            Data::Pending(p) => p.materialise(),
        }
    }

    /// The device memory, for a kernel that writes it in place (a cache's rows):
    /// what was derived from its values (an `f16` copy, largest magnitudes) is
    /// dropped first.
    pub(crate) fn raw_mut(&mut self) -> &Arc<Pooled> {
        let raw = self.raw();
        raw.forget_derived();
        raw
    }

    /// Whether `other` is a handle to this memory (or to this pending value).
    pub(crate) fn same_memory(&self, other: &Self) -> bool {
        match (&self.data, &other.data) {
            (Data::Ready(a), Data::Ready(b)) => Arc::ptr_eq(a, b),
            (Data::Pending(a), Data::Pending(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Records the kernel that computes this buffer if it is still pending, so that
    /// the next [`Gpu::sync`](crate::Gpu::sync) runs it (for timing, or to fix the
    /// point where a long fused chain is cut). Does not wait for the GPU.
    pub fn realize(&self) {
        self.raw();
    }

    /// Records the kernel of a pending value that reads a pending row op no one
    /// else holds (a norm's gradient plus the residual's): as that row op's
    /// epilogue, one kernel. Deferred, the value's consumers would each read the
    /// row op's value and the value's other operands, the row op recorded
    /// alone, and the value recorded after them for whoever keeps it.
    pub(crate) fn settle(&self) {
        if let Data::Pending(p) = &self.data
            && p.reads_a_lone_row_op()
        {
            p.materialise();
        }
    }

    /// Whether the value is still an unrecorded fused expression.
    pub fn is_pending(&self) -> bool {
        matches!(&self.data, Data::Pending(p) if !p.is_materialised())
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
        Self::with(self.data.clone(), self.len)
    }
}

impl<E> std::fmt::Debug for GpuBuffer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.is_pending() { ", pending" } else { "" };
        write!(f, "GpuBuffer({} elements{state})", self.len)
    }
}
