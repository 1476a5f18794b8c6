//! Matrix products: 2-D, vector-matrix, batched and broadcast-batched.
use super::dim::{Dim, DimEq};
use super::shape::Shape;

/// `L × Self` is a valid matrix product (`(.., M, K) × (.., K, N)`).
#[diagnostic::on_unimplemented(
    message = "matmul shape mismatch: cannot multiply `{L}` by `{Self}`",
    label = "inner dimensions must agree",
    note = "valid forms: (M, K)×(K, N), (K,)×(K, N), (B, M, K)×(B, K, N), (B, M, K)×(K, N), (B, H, M, K)×(B, H, K, N)"
)]
pub trait MatMulRhs<L: Shape>: Shape {
    /// The product's shape.
    type Output: Shape;
    /// The product's run-time shape.
    fn output(l: &L, r: &Self) -> Self::Output;
}

#[diagnostic::do_not_recommend]
impl<M: Dim, K: Dim, K2: DimEq<K>, N: Dim> MatMulRhs<(M, K)> for (K2, N) {
    type Output = (M, N);
    fn output(l: &(M, K), r: &Self) -> (M, N) {
        (l.0, r.1)
    }
}
#[diagnostic::do_not_recommend]
impl<K: Dim, K2: DimEq<K>, N: Dim> MatMulRhs<(K,)> for (K2, N) {
    type Output = (N,);
    fn output(_: &(K,), r: &Self) -> (N,) {
        (r.1,)
    }
}
#[diagnostic::do_not_recommend]
impl<B: Dim, B2: DimEq<B>, M: Dim, K: Dim, K2: DimEq<K>, N: Dim> MatMulRhs<(B, M, K)>
    for (B2, K2, N)
{
    type Output = (B, M, N);
    fn output(l: &(B, M, K), r: &Self) -> (B, M, N) {
        (l.0, l.1, r.2)
    }
}
#[diagnostic::do_not_recommend]
impl<B: Dim, M: Dim, K: Dim, K2: DimEq<K>, N: Dim> MatMulRhs<(B, M, K)> for (K2, N) {
    type Output = (B, M, N);
    fn output(l: &(B, M, K), r: &Self) -> (B, M, N) {
        (l.0, l.1, r.1)
    }
}
#[diagnostic::do_not_recommend]
impl<B: Dim, B2: DimEq<B>, H: Dim, H2: DimEq<H>, M: Dim, K: Dim, K2: DimEq<K>, N: Dim>
    MatMulRhs<(B, H, M, K)> for (B2, H2, K2, N)
{
    type Output = (B, H, M, N);
    fn output(l: &(B, H, M, K), r: &Self) -> (B, H, M, N) {
        (l.0, l.1, l.2, r.3)
    }
}
