//! The shape algebra: dims, shapes, axes, and the traits that relate shapes.
//!
//! Everything here is type-level bookkeeping. A relation between shapes (matmul,
//! reduce, permute, …) is a trait implemented only for the pairs that are valid, so
//! an invalid program fails `cargo check` with the message in the trait's
//! `#[diagnostic::on_unimplemented]`. Sizes that stable Rust cannot compute in types
//! (`A + B` for concat, element counts for reshape) are named by the caller and
//! checked with `const { assert!(..) }` (a `cargo build` error) and, for dynamic
//! dims, at run time.

mod axes;
mod checks;
mod dim;
mod ends;
mod generated;
mod matmul;
mod permute;
mod reduce;
mod resize;
mod same;
#[allow(clippy::module_inception)]
mod shape;

pub use axes::{Axes, Axes2, Axes3, Axes4, Axes5, Axes6, Axis};
pub use checks::ShapeError;
pub(crate) use checks::{expand_ok, numel_ok};
pub use dim::{Const, ConstDim, Dim, DimEq, Dyn};
pub use ends::{AppendDim, BatchFirst, LastDim, PrependDim};
pub use matmul::MatMulRhs;
pub use permute::PermuteShapeTo;
pub use reduce::{BroadcastShapeTo, ReduceShapeTo};
pub use resize::{ExpandShapeTo, ReplaceAxis, ResizeAxis};
pub use same::{SameShape, Scalar};
pub use shape::{
    ConstShape, Dims, MAX_RANK, Rank0, Rank1, Rank2, Rank3, Rank4, Rank5, Rank6, Shape,
};
