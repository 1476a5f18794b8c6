//! The typed tensor.

mod create;
mod quant;
mod raw;

pub use create::FromArray;

pub use crate::backend::infer::Activations;
pub use quant::{QMATMUL_GEMV_ROWS, QMatmulOptions, QTensor};
pub use raw::{RawTensor, TensorId};

use crate::backend::cpu::Cpu;
use crate::backend::{Backend, Cast, Device, Memory};
use crate::dtype::{Element, Float};
use crate::layout::Layout;
use crate::shape::{Shape, ShapeError};

/// An n-dimensional array whose shape `S` and device `D` are part of its type.
///
/// `S` is a tuple of dims (`Rank2<3, 4>` = `(Const<3>, Const<4>)`, or with run-time
/// dims such as `(usize, Const<64>)`); `D` is [`Cpu`] or [`Gpu`](crate::Gpu); `E` is
/// the element type. Cloning is cheap (the buffer is shared); every op returns a new
/// tensor.
///
/// ```
/// use volta::prelude::*;
/// let a = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// let b = Tensor::<Rank2<3, 1>>::ones();
/// let c: Tensor<Rank2<2, 1>> = a.matmul(&b);
/// assert_eq!(c.to_vec(), vec![6.0, 15.0]);
/// ```
pub struct Tensor<S: Shape, D: Device + Memory<E> = Cpu, E: Element = f32> {
    shape: S,
    raw: RawTensor<D, E>,
}

impl<S: Shape, D: Device + Memory<E>, E: Element> Clone for Tensor<S, D, E> {
    fn clone(&self) -> Self {
        Tensor {
            shape: self.shape,
            raw: self.raw.clone(),
        }
    }
}

impl<S: Shape, D: Device + Memory<E>, E: Element> std::fmt::Debug for Tensor<S, D, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let data = self.raw.to_vec();
        let shown = &data[..data.len().min(16)];
        let more = if data.len() > 16 { ", …" } else { "" };
        write!(
            f,
            "Tensor<{}, {}>{:?} {:?}{more}",
            D::NAME,
            E::NAME,
            self.dims(),
            shown
        )
    }
}

impl<S: Shape, D: Device + Memory<E>, E: Element> Tensor<S, D, E> {
    /// Wraps a raw tensor whose run-time dims are those of `shape` (unchecked:
    /// callers uphold it).
    pub(crate) fn from_raw(shape: S, raw: RawTensor<D, E>) -> Self {
        debug_assert_eq!(&*shape.dims(), raw.dims());
        Tensor { shape, raw }
    }

    /// Wraps a raw tensor, checking its dims against `S`.
    pub fn try_from_raw(raw: RawTensor<D, E>) -> Result<Self, ShapeError> {
        Ok(Tensor {
            shape: S::from_dims(raw.dims())?,
            raw,
        })
    }

    /// A same-shape result of an op on the raw tensor.
    #[track_caller]
    pub(crate) fn map_raw(&self, f: impl FnOnce(&RawTensor<D, E>) -> RawTensor<D, E>) -> Self {
        let _site = crate::autograd::anomaly::SiteGuard::enter(std::panic::Location::caller());
        Tensor::from_raw(self.shape, f(&self.raw))
    }

    /// The shape value (holds the run-time size of dynamic dims).
    pub fn shape(&self) -> S {
        self.shape
    }
    /// The run-time dims.
    pub fn dims(&self) -> &[usize] {
        self.raw.dims()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.raw.layout().numel()
    }
    /// The untyped tensor underneath.
    pub fn raw(&self) -> &RawTensor<D, E> {
        &self.raw
    }

    /// The untyped tensor, taking this one.
    pub(crate) fn into_raw(self) -> RawTensor<D, E> {
        self.raw
    }
    /// This tensor's id (gradients are keyed by it).
    pub fn id(&self) -> TensorId {
        self.raw.id()
    }

    /// Reads the elements back to the host in row-major order. On the GPU this
    /// waits for pending work.
    ///
    /// # Panics
    /// When the device reports an error; [`try_to_vec`](Self::try_to_vec) returns it.
    pub fn to_vec(&self) -> Vec<E> {
        self.raw.to_vec()
    }

    /// Reads the elements back to the host in row-major order, or returns the
    /// device's error ([`GpuError`](crate::backend::gpu::GpuError) on the GPU:
    /// raised by this work or any since the last sync point, such as out of
    /// memory or a lost device; the CPU's is `Infallible`).
    ///
    /// ```
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank1<2>>::from_array([1.0, 2.0]);
    /// assert_eq!(x.try_to_vec(), Ok(vec![1.0, 2.0]));
    /// ```
    pub fn try_to_vec(&self) -> Result<Vec<E>, <D as Memory<E>>::Error> {
        self.raw.try_to_vec()
    }

    /// [`try_to_vec`](Self::try_to_vec) into `out`, replacing its contents and
    /// reusing its allocation: for what is read back every step (a decoder's
    /// logits), where a fresh vector's pages cost more than the copy.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let mut out = Vec::with_capacity(2);
    /// Tensor::<Rank1<2>>::from_array([1.0, 2.0]).try_read_into(&mut out).unwrap();
    /// assert_eq!(out, [1.0, 2.0]);
    /// ```
    pub fn try_read_into(&self, out: &mut Vec<E>) -> Result<(), <D as Memory<E>>::Error> {
        self.raw.try_read_into(out)
    }

    /// Reads the elements back without blocking: the way to read a `Gpu` tensor
    /// in the browser, where the blocking [`to_vec`](Self::to_vec) cannot wait.
    /// The copy is recorded when this is called; the future completes when the
    /// data has arrived (natively its first poll waits for it; on the CPU it is
    /// ready at once).
    ///
    /// # Panics
    /// When the device reports an error;
    /// [`try_to_vec_async`](Self::try_to_vec_async) returns it.
    pub fn to_vec_async(&self) -> impl Future<Output = Vec<E>> + 'static {
        let read = self.raw.try_to_vec_async();
        async move {
            read.await
                .unwrap_or_else(|e| panic!("{e} (call `try_to_vec_async` to handle this error)"))
        }
    }

    /// [`to_vec_async`](Self::to_vec_async), returning the device's error (see
    /// [`try_to_vec`](Self::try_to_vec)).
    ///
    /// ```
    /// # pollster::block_on(async {
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank1<2>>::from_array([1.0, 2.0]);
    /// assert_eq!(x.try_to_vec_async().await, Ok(vec![1.0, 2.0]));
    /// # });
    /// ```
    pub fn try_to_vec_async(
        &self,
    ) -> impl Future<Output = Result<Vec<E>, <D as Memory<E>>::Error>> + 'static {
        self.raw.try_to_vec_async()
    }

    /// The same data as a leaf that gradients flow to (a trainable parameter).
    pub fn requires_grad(&self) -> Self {
        Tensor {
            shape: self.shape,
            raw: self.raw.tracked_leaf(),
        }
    }
    /// The same data, cut from the autograd graph.
    pub fn detach(&self) -> Self {
        Tensor {
            shape: self.shape,
            raw: self.raw.detach(),
        }
    }
    /// Whether gradients flow to this tensor.
    pub fn is_tracked(&self) -> bool {
        self.raw.is_tracked()
    }

    /// Converts dims to another shape type with the same run-time dims, e.g. a
    /// dynamic `(usize, Const<10>)` batch to `Rank2<32, 10>`.
    pub fn realize<S2: Shape>(&self) -> Result<Tensor<S2, D, E>, ShapeError> {
        Tensor::try_from_raw(self.raw.clone())
    }

    /// Copies the tensor to device `D2`: a new leaf, tracked when `self` is (so a
    /// moved parameter stays trainable); gradients do not flow back across devices.
    pub fn to<D2: Device + Memory<E>>(&self) -> Tensor<S, D2, E> {
        let raw = RawTensor::from_vec(self.to_vec(), self.dims());
        Tensor {
            shape: self.shape,
            raw: if self.is_tracked() {
                raw.tracked_leaf()
            } else {
                raw
            },
        }
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// The tensor converted to element type `E2` on the same device, rounding to
    /// nearest (PyTorch's `x.to(torch.float16)`, `x.half()`, `x.float()`).
    ///
    /// Like [`to`](Self::to), the result is a new leaf, tracked when `self` is (so a
    /// converted parameter stays trainable); gradients do not flow back across
    /// element types.
    ///
    /// ```
    /// use volta::dtype::f16;
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank1<3>>::from_array([1.0, 0.1, 70000.0]);
    /// let h: Tensor<Rank1<3>, Cpu, f16> = x.to_dtype::<f16>();
    /// assert_eq!(h.to_vec()[0], f16::ONE);
    /// assert_eq!(h.to_vec()[2], f16::INFINITY); // beyond f16's range (65504)
    /// assert!((h.to_dtype::<f32>().to_vec()[1] - 0.1).abs() < 1e-4);
    /// ```
    pub fn to_dtype<E2: Float>(&self) -> Tensor<S, D, E2>
    where
        D: Cast<E, E2>,
    {
        let (buf, layout) = self.raw.view();
        let raw = RawTensor::leaf(D::cast((buf, layout)), Layout::contiguous(self.dims()));
        Tensor {
            shape: self.shape,
            raw: if self.is_tracked() {
                raw.tracked_leaf()
            } else {
                raw
            },
        }
    }
}

impl<D: Device + Memory<E>, E: Element> Tensor<(), D, E> {
    /// The value of a scalar tensor.
    ///
    /// # Panics
    /// When the device reports an error; [`try_item`](Self::try_item) returns it.
    pub fn item(&self) -> E {
        self.to_vec()[0]
    }

    /// The value of a scalar tensor, or the device's error (see
    /// [`try_to_vec`](Tensor::try_to_vec)).
    pub fn try_item(&self) -> Result<E, <D as Memory<E>>::Error> {
        Ok(self.try_to_vec()?[0])
    }
}
