//! Reduction along one axis (keep-dim) of an elementwise expression of some
//! operands, through the `volta-kernels` reduction generator. A plain reduction
//! is the expression `Input(0)`; fusion passes a pending producer's expression
//! so that it is computed in the loads (see `fusion::reduce`).
use super::context::Context;
use super::elementwise::Operand;
use super::launch::{alloc, grid, kernel, launch};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use std::sync::Arc;
use volta_kernels::ReduceOp;
use volta_kernels::wgsl::{Expr, ReduceKernel, ReduceVariant};

/// `op` along `axis` of `expr` evaluated at every position of `dims`, reading
/// `inputs` (each viewed with dims `dims`) and `scalars` (raw `f32` bits).
pub(crate) fn reduce(
    ctx: &Context,
    op: ReduceOp,
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
    axis: usize,
) -> Arc<Pooled> {
    let n = dims[axis];
    let outputs: usize = (0..dims.len())
        .filter(|&a| a != axis)
        .map(|a| dims[a])
        .product();
    let out = alloc(ctx, outputs * 4);
    if outputs == 0 {
        return out;
    }
    let axis_stride = |(_, l): &Operand| if n == 1 { 0 } else { l.strides[axis] };
    // A tree pays off on long axes; a thread per output reads coalesced when the
    // axis is not the innermost and there are many outputs.
    let tree = n >= 32 && (inputs.iter().all(|o| axis_stride(o) <= 1) || outputs < 4096);
    // Rows that start on a vec4 boundary are read four elements at a time; inputs
    // broadcast along the axis are read once per output.
    let vec4 = tree
        && n.is_multiple_of(4)
        && inputs.iter().all(|o| match axis_stride(o) {
            0 => true,
            1 => {
                o.1.offset.is_multiple_of(4)
                    && (0..dims.len())
                        .all(|a| a == axis || dims[a] == 1 || o.1.strides[a].is_multiple_of(4))
            }
            _ => false,
        });
    let variant = match (vec4, tree) {
        (true, _) => ReduceVariant::Vec4,
        (false, true) => ReduceVariant::Tree,
        (false, false) => ReduceVariant::Serial,
    };
    let k = ReduceKernel {
        op,
        rank: dims.len(),
        axis_broadcast: inputs.iter().map(|o| vec4 && axis_stride(o) == 0).collect(),
        expr,
        variant,
    };
    let views: Vec<(usize, &[usize])> = inputs
        .iter()
        .map(|(_, l)| (l.offset, &l.strides[..]))
        .collect();
    let params = k.params(dims, axis, &views, scalars);
    let bindings = Bindings {
        reads: inputs.len(),
        writes: 1,
    };
    let groups = k.groups(outputs);
    let kern = kernel(ctx, Key::Reduce(k.clone()), bindings, "main", || k.source());
    let mut buffers: Vec<&Arc<Pooled>> = inputs.iter().map(|(b, _)| *b).collect();
    buffers.push(&out);
    launch(ctx, &kern, &params, &buffers, grid(ctx, groups));
    out
}
