//! `RawTensor`: a tensor without its shape type. Run-time shape logic and autograd
//! live at this level, once for every device; [`Tensor`](super::Tensor) adds the
//! compile-time checks on top.
use crate::autograd::{Op, anomaly, grad_enabled};
use crate::backend::{Device, Memory};
use crate::dtype::Element;
use crate::layout::Layout;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// A unique id per tensor node (gradients are keyed by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl TensorId {
    fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        TensorId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A device buffer viewed through a layout, plus the op that produced it (when
/// gradients are tracked). Cloning is cheap: nodes are shared and immutable.
pub struct RawTensor<D: Device + Memory<E>, E: Element>(Arc<Node<D, E>>);

pub(crate) struct Node<D: Device + Memory<E>, E: Element> {
    id: TensorId,
    layout: Layout,
    /// The data; `None` only in a graph edge ([`RawTensor::edge`]), which an op
    /// whose backward rule never reads this input's values holds instead of it.
    buffer: Option<<D as Memory<E>>::Buffer>,
    /// Whether gradients flow to this tensor.
    tracked: bool,
    /// How it was computed; `None` for leaves and untracked results. Shared with
    /// the tensor's graph edges, so that the backward pass, which takes the op
    /// when it has run it, releases what the op saved for every handle at once.
    op: Option<Recorded<D, E>>,
    /// The code that created it (ops carry `#[track_caller]`), for anomaly mode.
    site: &'static std::panic::Location<'static>,
}

/// A tensor's op, until a backward pass has run it (then `None`).
type Recorded<D, E> = Arc<Mutex<Option<Op<D, E>>>>;

/// The op of `cell` if this was its last handle (the op's inputs then go too).
fn last_op<D: Device + Memory<E>, E: Element>(cell: Option<Recorded<D, E>>) -> Option<Op<D, E>> {
    let cell = Arc::try_unwrap(cell?).ok()?;
    cell.into_inner().unwrap_or_else(|p| p.into_inner())
}

impl<D: Device + Memory<E>, E: Element> Drop for Node<D, E> {
    /// Frees the graph below this node iteratively: the default recursive drop of a
    /// chain of 100k ops overflows the stack.
    fn drop(&mut self) {
        let Some(op) = last_op(self.op.take()) else {
            return;
        };
        // Hold the graph inputs here, then release the op: its own references go,
        // ours are unwrapped one at a time below (a condition of `Select` is a
        // detached leaf, whose default drop is shallow).
        let mut pending: Vec<RawTensor<D, E>> = op.inputs().into_iter().cloned().collect();
        drop(op);
        while let Some(input) = pending.pop() {
            // Only inputs nobody else holds are freed now; take their ops first so
            // that dropping them does not recurse.
            if let Ok(mut node) = Arc::try_unwrap(input.0)
                && let Some(op) = last_op(node.op.take())
            {
                pending.extend(op.inputs().into_iter().cloned());
                drop(op);
            }
        }
    }
}

impl<D: Device + Memory<E>, E: Element> Clone for RawTensor<D, E> {
    fn clone(&self) -> Self {
        RawTensor(self.0.clone())
    }
}

impl<D: Device + Memory<E>, E: Element> std::fmt::Debug for RawTensor<D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RawTensor<{}, {}>{:?}", D::NAME, E::NAME, self.dims())
    }
}

impl<D: Device + Memory<E>, E: Element> RawTensor<D, E> {
    /// An untracked tensor over `buffer`.
    #[track_caller]
    pub fn leaf(buffer: <D as Memory<E>>::Buffer, layout: Layout) -> Self {
        RawTensor(Arc::new(Node {
            id: TensorId::next(),
            layout,
            buffer: Some(buffer),
            tracked: false,
            op: None,
            site: std::panic::Location::caller(),
        }))
    }

    /// A contiguous untracked tensor from host data (length already checked).
    pub fn from_vec(data: Vec<E>, dims: &[usize]) -> Self {
        debug_assert_eq!(data.len(), dims.iter().product::<usize>());
        Self::leaf(D::from_vec(data), Layout::contiguous(dims))
    }

    /// A contiguous untracked tensor holding a copy of `data` (length already
    /// checked), which the caller keeps.
    pub fn from_slice(data: &[E], dims: &[usize]) -> Self {
        debug_assert_eq!(data.len(), dims.iter().product::<usize>());
        Self::leaf(D::from_slice(data), Layout::contiguous(dims))
    }

    /// The result of an op: tracked (and remembering `op`) when gradients are
    /// enabled and an input is tracked.
    #[track_caller]
    pub(crate) fn from_op(
        buffer: <D as Memory<E>>::Buffer,
        layout: Layout,
        op: impl FnOnce() -> Op<D, E>,
        inputs: &[&Self],
    ) -> Self {
        let site = anomaly::site(std::panic::Location::caller());
        let tracked = grad_enabled() && inputs.iter().any(|t| t.is_tracked());
        // Each op keeps only the inputs whose values its backward rule reads.
        let op = || op().release_unread();
        let op = if anomaly::check_forward() {
            let op = op();
            if let Some((i, v)) = anomaly::first_bad::<E>(&D::to_vec(&buffer, &layout)) {
                panic!(
                    "detect_anomaly: `{}` at {site} produced {v:?} (element {i} of a \
                     result with dims {:?})",
                    op.name(),
                    layout.dims
                );
            }
            tracked.then_some(op)
        } else {
            tracked.then(op)
        };
        let op = op.map(|op| Arc::new(Mutex::new(Some(op))));
        RawTensor(Arc::new(Node {
            id: TensorId::next(),
            layout,
            buffer: Some(buffer),
            tracked,
            op,
            site,
        }))
    }

    /// This tensor as a node of the graph without its data: the same id, layout
    /// and op, for an op whose backward rule needs only the input's place in the
    /// graph (an addition's inputs, a reshape's). The data then goes as soon as
    /// nothing else holds it, as PyTorch saves no tensors for an addition: a
    /// residual stream's dropout output is never written to memory on the GPU.
    /// A tensor whose own rule reads its output stays whole.
    pub(crate) fn edge(&self) -> Self {
        let reads_output = self
            .op()
            .is_some_and(|op| op.as_ref().is_some_and(Op::reads_output));
        if self.0.buffer.is_none() || reads_output {
            return self.clone();
        }
        RawTensor(Arc::new(Node {
            id: self.0.id,
            layout: self.0.layout,
            buffer: None,
            tracked: self.0.tracked,
            op: self.0.op.clone(),
            site: self.0.site,
        }))
    }

    /// The data, which every tensor a user can reach has.
    fn data(&self) -> &<D as Memory<E>>::Buffer {
        self.0.buffer.as_ref().unwrap_or_else(|| {
            panic!(
                "a backward rule read the values of an input its op keeps only as a graph \
                 edge (dims {:?}): add the op to `Op::release_unread`'s exceptions",
                self.dims()
            )
        })
    }

    /// The code that created this tensor (the caller of the op).
    pub(crate) fn site(&self) -> &'static std::panic::Location<'static> {
        self.0.site
    }

    /// This tensor's id.
    pub fn id(&self) -> TensorId {
        self.0.id
    }
    /// Its layout.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }
    /// Its run-time dims.
    pub fn dims(&self) -> &[usize] {
        &self.0.layout.dims
    }
    /// Its buffer.
    pub fn buffer(&self) -> &<D as Memory<E>>::Buffer {
        self.data()
    }
    /// The buffer and layout, as kernels take them.
    pub fn view(&self) -> (&<D as Memory<E>>::Buffer, &Layout) {
        (self.data(), &self.0.layout)
    }
    /// Whether gradients flow to it.
    pub fn is_tracked(&self) -> bool {
        self.0.tracked
    }
    /// The op it was computed by: `None` for a leaf or an untracked tensor;
    /// inside, `None` once a backward pass has run the op ([`take_op`](Self::take_op)).
    pub(crate) fn op(&self) -> Option<MutexGuard<'_, Option<Op<D, E>>>> {
        let cell = self.0.op.as_ref()?;
        Some(cell.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Takes the op for a backward pass to run, releasing what it saved once the
    /// pass drops it (PyTorch frees a graph's saved tensors the same way unless
    /// told to retain them): `None` for a leaf, `Some(None)` if a backward pass
    /// has run it and released its values.
    pub(crate) fn take_op(&self) -> Option<Option<Op<D, E>>> {
        self.op().map(|mut op| op.take())
    }

    /// Puts back an op that saved no values (a view's, a sum's), so that another
    /// backward pass may go through it, as PyTorch allows for such nodes.
    pub(crate) fn restore_op(&self, op: Op<D, E>) {
        if let Some(mut cell) = self.op() {
            *cell = Some(op);
        }
    }

    /// Whether it holds its data (a graph edge does not).
    pub(crate) fn has_data(&self) -> bool {
        self.0.buffer.is_some()
    }

    /// The same data as a new leaf that gradients flow to.
    #[track_caller]
    pub fn tracked_leaf(&self) -> Self {
        RawTensor(Arc::new(Node {
            id: TensorId::next(),
            layout: self.0.layout,
            buffer: Some(self.data().clone()),
            tracked: true,
            op: None,
            site: std::panic::Location::caller(),
        }))
    }

    /// The same data, cut from the graph.
    pub fn detach(&self) -> Self {
        Self::leaf(self.data().clone(), self.0.layout)
    }

    /// A view sharing the buffer, recorded as `op`.
    pub(crate) fn view_as(&self, layout: Layout, op: impl FnOnce() -> Op<D, E>) -> Self {
        Self::from_op(self.data().clone(), layout, op, &[self])
    }

    /// Reads the elements back to the host in row-major order.
    ///
    /// # Panics
    /// When the device reports an error (see [`try_to_vec`](Self::try_to_vec)).
    pub fn to_vec(&self) -> Vec<E> {
        D::to_vec(self.data(), &self.0.layout)
    }

    /// Reads the elements back to the host in row-major order, or returns the
    /// device's error: on the GPU, one raised by the work that computed them or by
    /// any work since the last sync point (out of memory, a lost device, an index
    /// out of range).
    pub fn try_to_vec(&self) -> Result<Vec<E>, <D as Memory<E>>::Error> {
        D::try_to_vec(self.data(), &self.0.layout)
    }

    /// Starts reading the tensor back into `out` (see [`Memory::read_into_later`]):
    /// the copy is recorded now; the future, which may run on another thread,
    /// hands `out` back filled.
    pub fn read_into_later(
        &self,
        out: Vec<E>,
    ) -> impl Future<Output = Result<Vec<E>, <D as Memory<E>>::Error>> + Send + 'static
    where
        E: Send,
    {
        <D as Memory<E>>::read_into_later(self.data(), &self.0.layout, out)
    }

    /// [`try_to_vec`](Self::try_to_vec) into `out`, replacing its contents and
    /// reusing its allocation (a buffer read back every step).
    pub fn try_read_into(&self, out: &mut Vec<E>) -> Result<(), <D as Memory<E>>::Error> {
        D::try_read_into(self.data(), &self.0.layout, out)
    }

    /// [`try_to_vec`](Self::try_to_vec) without blocking (the browser's
    /// read-back): the copy starts now, the future completes when it arrives.
    pub fn try_to_vec_async(
        &self,
    ) -> impl Future<Output = Result<Vec<E>, <D as Memory<E>>::Error>> + 'static {
        <D as Memory<E>>::try_to_vec_async(self.data(), &self.0.layout)
    }
}
