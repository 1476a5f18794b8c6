//! Dimensions: `Const<N>` (known at compile time) and `usize` (known at run time).
use std::fmt::Debug;

/// One dimension of a shape: a compile-time `Const<N>` or a run-time `usize` ([`Dyn`]).
pub trait Dim: 'static + Copy + Debug + Send + Sync {
    /// The size when it is known at compile time.
    const STATIC: Option<usize>;
    /// The size of this dimension.
    fn size(&self) -> usize;
    /// Builds the dim from a run-time size; `None` if a static dim has another size.
    fn from_size(size: usize) -> Option<Self>;
}

/// A dimension whose size `N` is part of the type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Const<const N: usize>;

/// A dimension whose size is only known at run time (sequence length, a last partial batch).
pub type Dyn = usize;

/// Dims whose size is known at compile time.
pub trait ConstDim: Dim + Default {
    /// The size.
    const SIZE: usize;
}

impl<const N: usize> Dim for Const<N> {
    const STATIC: Option<usize> = Some(N);
    fn size(&self) -> usize {
        N
    }
    fn from_size(size: usize) -> Option<Self> {
        (size == N).then_some(Const)
    }
}

impl<const N: usize> ConstDim for Const<N> {
    const SIZE: usize = N;
}

impl Dim for usize {
    const STATIC: Option<usize> = None;
    fn size(&self) -> usize {
        *self
    }
    fn from_size(size: usize) -> Option<Self> {
        Some(size)
    }
}

/// Two dims that may be equal: the same `Const<N>`, or any pair involving a dynamic
/// `usize` (checked at run time).
#[diagnostic::on_unimplemented(
    message = "dimension mismatch: `{Self}` is not `{D}`",
    label = "these dimensions differ"
)]
pub trait DimEq<D: Dim>: Dim {}
// Reflexive for every dim (so generic code over `B: Dim` needs no extra bound), plus
// the static/dynamic mixes; no two of these impls can apply to the same pair.
impl<D: Dim> DimEq<D> for D {}
impl<const N: usize> DimEq<usize> for Const<N> {}
impl<const N: usize> DimEq<Const<N>> for usize {}
