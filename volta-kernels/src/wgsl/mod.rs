//! WGSL code generation for elementwise kernels.
//!
//! A kernel is described by data, not by pasted strings: an [`Expr`] tree over its
//! inputs and run-time scalars, plus how each input is addressed ([`Access`]). The
//! generator turns the tree into an exact [`Graph`](crate::ir::Graph) and prints it
//! with [`ir::emit`](crate::ir::emit), the printer the `#[kernel]` macro uses (one
//! `let` per distinct node, so shared sub-expressions are computed once), and emits
//! the strided index math for rank ≤ 6 with every loop unrolled. User kernels (`#[kernel]` functions) enter a tree as [`Expr::Call`]
//! nodes; their WGSL functions are emitted once per module. The GPU backend, the
//! `#[kernel]` macro and op fusion all go through [`ElementwiseKernel::source`].

mod call;
mod elementwise;
mod expr;
mod helpers;

pub use call::{KernelRef, kernel_modules};
pub use elementwise::{
    Access, Elem, ElementwiseKernel, Launch, ParamLayout, UNITS_PER_THREAD, WORKGROUP_SIZE,
};
pub use expr::Expr;
pub use helpers::VOLTA_ERF;
