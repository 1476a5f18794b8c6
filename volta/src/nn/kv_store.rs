//! The keys and values of the positions one attention layer has seen, in device
//! memory: one buffer `(2, B, kv_heads, capacity, head_dim)` (keys, then values),
//! written in place at the next positions, its capacity grown (one copy) when
//! full. The language model's [`KvCache`](crate::models::KvCache) holds one per
//! layer, written by its fused decode kernel; [`AttentionCache`](crate::nn::AttentionCache)
//! holds one per `MultiHeadAttention`, written by [`KvStore::write`].
use crate::backend::{Backend, Buf};
use crate::dtype::Float;
use crate::layout::Layout;
use crate::tensor::RawTensor;

/// Keys and values of one attention layer, `(2, B, kv_heads, capacity,
/// head_dim)` in one buffer. Its owner tracks how many positions are filled.
pub struct KvStore<D: Backend<E>, E: Float> {
    buf: Buf<D, E>,
    batch: usize,
    kv_heads: usize,
    head_dim: usize,
    capacity: usize,
}

impl<D: Backend<E>, E: Float> Clone for KvStore<D, E> {
    fn clone(&self) -> Self {
        KvStore {
            buf: self.buf.clone(),
            ..*self
        }
    }
}

impl<D: Backend<E>, E: Float> std::fmt::Debug for KvStore<D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KvStore<{}>(batch {}, {} kv heads × {}, capacity {})",
            D::NAME,
            self.batch,
            self.kv_heads,
            self.head_dim,
            self.capacity
        )
    }
}

impl<D: Backend<E>, E: Float> KvStore<D, E> {
    /// Zeros for `capacity` positions of `batch` sequences.
    pub fn new(batch: usize, kv_heads: usize, head_dim: usize, capacity: usize) -> Self {
        KvStore {
            buf: D::full(2 * batch * kv_heads * capacity * head_dim, E::ZERO),
            batch,
            kv_heads,
            head_dim,
            capacity,
        }
    }

    /// Positions it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// `[batch, kv_heads, head_dim]`.
    pub fn dims(&self) -> [usize; 3] {
        [self.batch, self.kv_heads, self.head_dim]
    }

    fn layout(&self) -> Layout {
        Layout::contiguous(&[2, self.batch, self.kv_heads, self.capacity, self.head_dim])
    }

    /// Grows to `capacity` positions (at least the current one), keeping what it
    /// holds: one copy into a new buffer, so views taken before keep the old one.
    pub fn grow(&mut self, capacity: usize) {
        if capacity <= self.capacity {
            return;
        }
        let old = RawTensor::<D, E>::leaf(self.buf.clone(), self.layout());
        let extra = capacity - self.capacity;
        let padded = old.pad(&[(0, 0), (0, 0), (0, 0), (0, extra), (0, 0)], E::ZERO);
        self.buf = padded.buffer().clone();
        self.capacity = capacity;
    }

    /// Writes keys and values `(B, kv_heads, T, head_dim)` at positions
    /// `at..at + T`, in place.
    ///
    /// # Panics
    /// When the dims differ from the store's, or `at + T` passes the capacity
    /// (grow first).
    #[track_caller]
    pub fn write(&mut self, at: usize, keys: &RawTensor<D, E>, values: &RawTensor<D, E>) {
        let t = keys.dims().get(2).copied().unwrap_or(0);
        let want = [self.batch, self.kv_heads, t, self.head_dim];
        assert!(
            keys.dims() == want && values.dims() == want,
            "KvStore::write: keys {:?} and values {:?} do not fit a store of {:?} (B, kv_heads, T, head_dim)",
            keys.dims(),
            values.dims(),
            [self.batch, self.kv_heads, t, self.head_dim]
        );
        assert!(
            at + t <= self.capacity,
            "KvStore::write: positions {at}..{} pass the capacity {} (grow first)",
            at + t,
            self.capacity
        );
        let whole = self.layout();
        for (part, x) in [keys, values].into_iter().enumerate() {
            let region = whole.narrow(0, part, 1).narrow(3, at, t);
            let region = region
                .reshape(&want)
                .expect("one part of the store is its dims without the leading 1");
            D::write_into(&mut self.buf, &region, x.view());
        }
    }

    /// Copies the first `len` positions of a one-sequence store `from` into
    /// sequence `seq` of this one, in place.
    ///
    /// # Panics
    /// When `from` holds more than one sequence or other head dims, `seq` is not
    /// a sequence of this store, or `len` passes either capacity.
    #[track_caller]
    pub fn copy_sequence(&mut self, seq: usize, from: &KvStore<D, E>, len: usize) {
        assert!(
            from.batch == 1
                && [from.kv_heads, from.head_dim] == [self.kv_heads, self.head_dim]
                && seq < self.batch
                && len <= self.capacity.min(from.capacity),
            "KvStore::copy_sequence: {len} positions of {from:?} into sequence {seq} of {self:?}"
        );
        let whole = self.layout();
        let dims = [1, self.kv_heads, len, self.head_dim];
        for part in 0..2 {
            let region = whole.narrow(0, part, 1).narrow(1, seq, 1).narrow(3, 0, len);
            let region = region
                .reshape(&dims)
                .expect("one sequence of one part is its dims without the leading 1");
            D::write_into(&mut self.buf, &region, from.part(part, len).view());
        }
    }

    /// The keys of positions `0..len`, `(B, kv_heads, len, head_dim)`: a view of
    /// the store (later writes at these positions show through it).
    pub fn keys(&self, len: usize) -> RawTensor<D, E> {
        self.part(0, len)
    }

    /// The values of positions `0..len`, as [`keys`](Self::keys).
    pub fn values(&self, len: usize) -> RawTensor<D, E> {
        self.part(1, len)
    }

    fn part(&self, part: usize, len: usize) -> RawTensor<D, E> {
        assert!(
            len <= self.capacity,
            "KvStore: {len} positions asked of a capacity of {}",
            self.capacity
        );
        let layout = self.layout().narrow(0, part, 1).narrow(3, 0, len);
        let layout = layout
            .reshape(&[self.batch, self.kv_heads, len, self.head_dim])
            .expect("one part of the store is its dims without the leading 1");
        RawTensor::leaf(self.buf.clone(), layout)
    }

    /// The buffer, for kernels that write the store themselves.
    pub(crate) fn buffer_mut(&mut self) -> &mut Buf<D, E> {
        &mut self.buf
    }
}
