//! Same-shape relation for elementwise ops, and the scalar marker for `backward`.
use super::dim::{Dim, DimEq};
use super::shape::Shape;

/// `Self` has the same shape as `S` (dynamic dims are checked at run time).
#[diagnostic::on_unimplemented(
    message = "shape mismatch in an elementwise op: `{S}` and `{Self}` differ",
    label = "this tensor has shape `{Self}`, expected `{S}`",
    note = "elementwise ops need equal shapes; broadcast explicitly with `.broadcast()` or `.expand()`"
)]
pub trait SameShape<S: Shape>: Shape {}

macro_rules! same_shape {
    ($($a:ident $b:ident),*) => {
        #[diagnostic::do_not_recommend]
        impl<$($a: Dim, $b: DimEq<$a>),*> SameShape<($($a,)*)> for ($($b,)*) {}
    };
}
same_shape!();
same_shape!(A0 B0);
same_shape!(A0 B0, A1 B1);
same_shape!(A0 B0, A1 B1, A2 B2);
same_shape!(A0 B0, A1 B1, A2 B2, A3 B3);
same_shape!(A0 B0, A1 B1, A2 B2, A3 B3, A4 B4);
same_shape!(A0 B0, A1 B1, A2 B2, A3 B3, A4 B4, A5 B5);

/// Rank-0 shapes: the only ones `backward()` accepts.
#[diagnostic::on_unimplemented(
    message = "`backward()` needs a scalar loss, but this tensor has shape `{Self}`",
    label = "not a scalar",
    note = "reduce it to a scalar first, e.g. with `.sum_all()` or `.mean_all()`"
)]
pub trait Scalar: Shape {}
impl Scalar for () {}
