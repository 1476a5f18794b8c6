//! Element types. `f32` everywhere; `f16` (`half::f16`) on the CPU and on GPUs with
//! the `shader-f16` feature (see [`GpuInfo::f16`](crate::backend::gpu::GpuInfo));
//! `f64` on the CPU (gradient checks, science); `u32` for indices. Tensors carry the
//! element type as a parameter (default `f32`), and
//! [`Tensor::to_dtype`](crate::Tensor::to_dtype) converts between float types.
//!
//! `f16` is a storage type: every device computes each element in `f32` and rounds
//! the result to `f16` once, and reductions, softmax, normalisation and matmul
//! accumulate in `f32` (PyTorch's CPU and CUDA kernels do the same).

pub use half::f16;
pub use volta_kernels::Float as ScalarMath;

/// A type tensors can hold. Each converts exactly from a `u8` (`E::from(1)`), which
/// gives every element type, `u32` indices included, its zero and one
/// ([`Tensor::zeros`](crate::Tensor::zeros), [`Tensor::ones`](crate::Tensor::ones)).
pub trait Element:
    'static + Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + From<u8>
{
    /// Its name in messages.
    const NAME: &'static str;
    /// Whether the value is neither NaN nor infinite (always, for integers).
    fn is_finite(self) -> bool {
        true
    }
}

/// An element type with arithmetic, autograd and the full op set.
pub trait Float: Element + ScalarMath {
    /// The type this element computes in: itself for `f32` and `f64`, `f32` for
    /// `f16`. Kernels convert each loaded element to it, compute (and accumulate
    /// sums) there, and round the result back once.
    type Acc: Float;
    /// Converts to the compute type (exact).
    fn to_acc(self) -> Self::Acc;
    /// Rounds a value of the compute type to this type.
    fn from_acc(acc: Self::Acc) -> Self;
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}
impl Element for f64 {
    const NAME: &'static str = "f64";
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}
impl Element for f16 {
    const NAME: &'static str = "f16";
    fn is_finite(self) -> bool {
        f16::is_finite(self)
    }
}
impl Element for u32 {
    const NAME: &'static str = "u32";
}

macro_rules! computes_in_itself {
    ($($t:ty),*) => {$(
        impl Float for $t {
            type Acc = $t;
            #[inline(always)]
            fn to_acc(self) -> $t {
                self
            }
            #[inline(always)]
            fn from_acc(acc: $t) -> $t {
                acc
            }
        }
    )*};
}
computes_in_itself!(f32, f64);

impl Float for f16 {
    type Acc = f32;
    #[inline(always)]
    fn to_acc(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_acc(acc: f32) -> f16 {
        f16::from_f32(acc)
    }
}
