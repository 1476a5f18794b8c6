//! WGSL code generation for elementwise kernels.
//!
//! A kernel is described by data, not by pasted strings: an [`Expr`] tree over its
//! inputs and run-time scalars, plus how each input is addressed ([`Access`]). The
//! generator lowers the tree to one `let` per node (so shared sub-expressions are
//! never duplicated) and emits the strided index math for rank ≤ 6 with every loop
//! unrolled. The GPU backend, the `#[kernel]` macro and op fusion all go through
//! [`ElementwiseKernel::source`].

mod elementwise;
mod expr;
mod helpers;

pub use elementwise::{
    Access, Elem, ElementwiseKernel, ParamLayout, UNITS_PER_THREAD, WORKGROUP_SIZE,
};
pub use expr::Expr;
pub use helpers::VOLTA_ERF;
