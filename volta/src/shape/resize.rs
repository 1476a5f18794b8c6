//! Relations that change the size of one axis (keep-dim reductions, concat, pad,
//! shrink, stride, slice, gather) or of size-1 axes (expand).
use super::dim::Dim;
use super::shape::Shape;

/// `Self` with the dim at axis `Ax` replaced by `New`.
#[diagnostic::on_unimplemented(
    message = "axis `{Ax}` does not exist in shape `{Self}`",
    label = "no such axis"
)]
pub trait ReplaceAxis<Ax, New: Dim>: Shape {
    /// The resulting shape.
    type Output: Shape;
    /// The axis index.
    const AXIS: usize;
}

/// `Dst` equals `Self` except, possibly, along axis `Ax`.
#[diagnostic::on_unimplemented(
    message = "shapes `{Self}` and `{Dst}` must agree on every axis except `{Ax}`",
    label = "the other dims differ, or the axis does not exist",
    note = "concat, pad, shrink, stride and gather change the size of one axis only"
)]
pub trait ResizeAxis<Ax, Dst: Shape>: Shape {
    /// The axis index.
    const AXIS: usize;
}

/// `Self` expands to `Dst`: same rank, each dim equal or 1 (sizes checked at compile
/// time where static, else at run time).
#[diagnostic::on_unimplemented(
    message = "cannot expand `{Self}` to `{Dst}`: ranks differ",
    label = "rank mismatch",
    note = "expand keeps the rank; add axes with `.broadcast()` or `.reshape()` first"
)]
pub trait ExpandShapeTo<Dst: Shape>: Shape {}

macro_rules! expand_impl {
    ($($a:ident $b:ident),*) => {
        #[diagnostic::do_not_recommend]
        impl<$($a: Dim, $b: Dim),*> ExpandShapeTo<($($b,)*)> for ($($a,)*) {}
    };
}
expand_impl!();
expand_impl!(A0 B0);
expand_impl!(A0 B0, A1 B1);
expand_impl!(A0 B0, A1 B1, A2 B2);
expand_impl!(A0 B0, A1 B1, A2 B2, A3 B3);
expand_impl!(A0 B0, A1 B1, A2 B2, A3 B3, A4 B4);
expand_impl!(A0 B0, A1 B1, A2 B2, A3 B3, A4 B4, A5 B5);

macro_rules! replace_axis_impl {
    ([$($d:ident),*], $src:ty, $dst:ty, $i:literal) => {
        #[diagnostic::do_not_recommend]
        impl<$($d: $crate::shape::Dim,)* New: $crate::shape::Dim> $crate::shape::ReplaceAxis<$crate::shape::Axis<$i>, New> for $src {
            type Output = $dst;
            const AXIS: usize = $i;
        }
        #[diagnostic::do_not_recommend]
        impl<$($d: $crate::shape::Dim,)* New: $crate::shape::Dim> $crate::shape::ResizeAxis<$crate::shape::Axis<$i>, $dst> for $src {
            const AXIS: usize = $i;
        }
    };
}
pub(super) use replace_axis_impl;
