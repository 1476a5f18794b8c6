//! WGSL code generation for elementwise kernels and for row kernels (reductions,
//! softmax) over elementwise expressions.
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
mod draw;
mod elementwise;
mod expr;
mod helpers;
mod row;

pub use call::{KernelRef, kernel_modules};
pub use draw::Draws;
pub use elementwise::{
    Access, Elem, ElementwiseKernel, Launch, ParamLayout, UNITS_PER_THREAD, WORKGROUP_SIZE,
};
pub use expr::Expr;
pub use helpers::VOLTA_ERF;
pub use row::{Kept, ROW_WORKGROUP, RowKernel, RowOp, RowVariant, RowView};

/// The `elem` variant of a hand-written float kernel (`shaders/*.wgsl`) that names
/// its element type `T` through `alias T = f32;` and converts loads to `f32` and
/// stores to `T`: unchanged for [`Elem::F32`]; for [`Elem::F16`], `T` becomes `f16`
/// under `enable f16;`.
///
/// Panics for `Elem::U32`, or if the source lacks the alias.
pub fn with_elem(source: &str, elem: Elem) -> std::borrow::Cow<'_, str> {
    const ALIAS: &str = "alias T = f32;";
    assert!(source.contains(ALIAS), "the kernel names no element type");
    match elem {
        Elem::F32 => source.into(),
        Elem::F16 => format!("enable f16;\n{}", source.replace(ALIAS, "alias T = f16;")).into(),
        Elem::U32 => panic!("float kernels have no u32 variant"),
    }
}

/// Parses and validates generated WGSL with naga (unit tests run without a GPU).
#[cfg(test)]
pub(crate) fn assert_valid(source: &str) {
    let module = naga::front::wgsl::parse_str(source)
        .unwrap_or_else(|e| panic!("invalid WGSL:\n{}\n{source}", e.emit_to_string(source)));
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| {
        panic!(
            "WGSL does not validate:\n{}\n{source}",
            e.emit_to_string(source)
        )
    });
}

#[cfg(test)]
mod tests {
    /// The runtime's hand-written kernels (`shaders/`) pass the same validation as
    /// the generated ones.
    #[test]
    fn hand_written_shaders_validate() {
        for source in [
            include_str!("../../../shaders/gather.wgsl"),
            include_str!("../../../shaders/scatter_add.wgsl"),
            include_str!("../../../shaders/scatter_rows.wgsl"),
            include_str!("../../../shaders/unfold2d.wgsl"),
            include_str!("../../../shaders/fold2d.wgsl"),
            include_str!("../../../shaders/sgd.wgsl"),
        ] {
            super::assert_valid(source);
            let half = super::with_elem(source, super::Elem::F16);
            super::assert_valid(&half);
            assert!(half.contains("alias T = f16;") && !half.contains("array<f32>"));
        }
    }
}
