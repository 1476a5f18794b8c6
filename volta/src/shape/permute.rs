//! Permutations of axes.
use super::axes::*;
use super::shape::Shape;

/// `Self` with its axes reordered by `Ax` is `Dst` (axis `i` of `Dst` is axis `Ax[i]`
/// of `Self`). Implemented for every permutation up to rank 4.
#[diagnostic::on_unimplemented(
    message = "`{Ax}` is not a valid permutation from `{Self}` to `{Dst}`",
    label = "invalid permutation",
    note = "`{Ax}` must list each axis of `{Self}` exactly once, and the result must be `{Self}` reordered by it"
)]
pub trait PermuteShapeTo<Dst: Shape, Ax: Axes>: Shape {}

macro_rules! permute_impl {
    ([$($d:ident),*], $src:ty, $dst:ty, $ax:ty, [$($i:literal),*]) => {
        #[diagnostic::do_not_recommend]
        impl<$($d: $crate::shape::Dim),*> $crate::shape::PermuteShapeTo<$dst, $ax> for $src {}
    };
}
pub(super) use permute_impl;
