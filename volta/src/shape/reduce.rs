//! Reductions and their inverse, broadcasting.
use super::axes::*;
use super::shape::Shape;

/// `Self` reduced over the axes `Ax` is `Dst` (the axes are removed).
/// `Dst` and `Ax` are usually inferred from each other.
#[diagnostic::on_unimplemented(
    message = "cannot reduce `{Self}` over `{Ax}`",
    label = "no such reduction",
    note = "every axis in `{Ax}` must exist in `{Self}`; the result `{Dst}` must be `{Self}` without those axes"
)]
pub trait ReduceShapeTo<Dst: Shape, Ax: Axes>: Shape {}

/// `Self` broadcast along the new axes `Ax` becomes `Dst` (the inverse of a reduction).
#[diagnostic::on_unimplemented(
    message = "cannot broadcast `{Self}` to `{Dst}` along `{Ax}`",
    label = "no such broadcast",
    note = "broadcasting inserts the axes `{Ax}`; the other dims of `{Dst}` must equal `{Self}`"
)]
pub trait BroadcastShapeTo<Dst: Shape, Ax: Axes>: Shape {}

// Without `do_not_recommend` rustc reports the failed `ReduceShapeTo` bound instead,
// so a broadcast error would read "cannot reduce".
#[diagnostic::do_not_recommend]
impl<Src: Shape, Dst: Shape, Ax: Axes> BroadcastShapeTo<Dst, Ax> for Src where
    Dst: ReduceShapeTo<Src, Ax>
{
}

macro_rules! reduce_impl {
    ([$($d:ident),*], $src:ty, $dst:ty, $ax:ty, [$($i:literal),*]) => {
        #[diagnostic::do_not_recommend]
        impl<$($d: $crate::shape::Dim),*> $crate::shape::ReduceShapeTo<$dst, $ax> for $src {}
    };
}
pub(super) use reduce_impl;
