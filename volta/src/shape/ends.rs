//! Relations on a shape's first and last axes: the batch axis that layers keep, the
//! feature axis that norms work along, an axis appended by an embedding lookup.
use super::dim::Dim;
use super::shape::Shape;

/// Shapes whose first axis is a batch axis (rank ≥ 1).
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no batch axis",
    label = "expected a shape of rank 1 or more, batch first"
)]
pub trait BatchFirst: Shape {
    /// The batch dim.
    type Batch: Dim;
    /// Its run-time value.
    fn batch(&self) -> Self::Batch;
}

/// Shapes whose last axis is `L` (layer and RMS norms normalise along it).
#[diagnostic::on_unimplemented(
    message = "the last axis of `{Self}` is not `{L}`",
    label = "this layer normalises a last axis of `{L}`"
)]
pub trait LastDim<L: Dim>: Shape {}

/// `Self` with the dim `N` appended (`(B, T)` → `(B, T, N)`).
#[diagnostic::on_unimplemented(
    message = "cannot append an axis to `{Self}`",
    label = "its rank is already the maximum"
)]
pub trait AppendDim<N: Dim>: Shape {
    /// The longer shape.
    type Output: Shape;
    /// The run-time value of the longer shape.
    fn append(&self, n: N) -> Self::Output;
}

/// `Self` with the dim `N` put in front (`(C, H, W)` → `(N, C, H, W)`): a batch of
/// samples of shape `Self`.
#[diagnostic::on_unimplemented(
    message = "cannot put a batch axis in front of `{Self}`",
    label = "its rank is already the maximum"
)]
pub trait PrependDim<N: Dim>: Shape {
    /// The longer shape.
    type Output: Shape;
    /// The run-time value of the longer shape.
    fn prepend(&self, n: N) -> Self::Output;
}

macro_rules! ends {
    ($($d:ident $i:tt),*) => {
        #[diagnostic::do_not_recommend]
        impl<N: Dim, $($d: Dim),*> AppendDim<N> for ($($d,)*) {
            type Output = ($($d,)* N,);
            fn append(&self, n: N) -> Self::Output {
                ($(self.$i,)* n,)
            }
        }
        #[diagnostic::do_not_recommend]
        impl<N: Dim, $($d: Dim),*> PrependDim<N> for ($($d,)*) {
            type Output = (N, $($d,)*);
            fn prepend(&self, n: N) -> Self::Output {
                (n, $(self.$i,)*)
            }
        }
    };
}
ends!();
ends!(A 0);
ends!(A 0, B 1);
ends!(A 0, B 1, C 2);
ends!(A 0, B 1, C 2, F 3);
ends!(A 0, B 1, C 2, F 3, G 4);

macro_rules! first_last {
    ($first:ident $(, $d:ident)*; $last:ident) => {
        #[diagnostic::do_not_recommend]
        impl<$first: Dim $(, $d: Dim)*> BatchFirst for ($first, $($d,)*) {
            type Batch = $first;
            fn batch(&self) -> $first {
                self.0
            }
        }
        #[diagnostic::do_not_recommend]
        impl<$first: Dim $(, $d: Dim)*> LastDim<$last> for ($first, $($d,)*) {}
    };
}
first_last!(A; A);
first_last!(A, B; B);
first_last!(A, B, C; C);
first_last!(A, B, C, F; F);
first_last!(A, B, C, F, G; G);
first_last!(A, B, C, F, G, H; H);
