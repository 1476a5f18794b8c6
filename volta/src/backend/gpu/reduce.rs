//! Reduction along one axis (keep-dim): a workgroup tree per output when the axis
//! is long, a thread per output otherwise (`shaders/reduce.wgsl`).
use super::context::Context;
use super::launch::{alloc, grid, kernel, launch, u};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use crate::shape::MAX_RANK;
use crate::tensor::Layout;
use std::sync::Arc;
use volta_kernels::ReduceOp;

const SOURCE: &str = include_str!("../../../../shaders/reduce.wgsl");
const SOURCE_VEC4: &str = include_str!("../../../../shaders/reduce_vec4.wgsl");
const WG: usize = 256;

pub(crate) fn reduce(
    ctx: &Context,
    op: ReduceOp,
    x: (&Arc<Pooled>, &Layout),
    axis: usize,
) -> Arc<Pooled> {
    let l = x.1;
    let n = l.dims[axis];
    let outputs: usize = (0..l.rank())
        .filter(|&a| a != axis)
        .map(|a| l.dims[a])
        .product();
    let out = alloc(ctx, outputs * 4);
    if outputs == 0 {
        return out;
    }
    let mut p = vec![
        u(outputs),
        u(l.rank()),
        u(n),
        u(l.strides[axis]),
        u(l.offset),
    ];
    let mut dims = [1u32; MAX_RANK];
    let mut strides = [0u32; MAX_RANK];
    for a in 0..l.rank() {
        if a != axis {
            dims[a] = u(l.dims[a]);
            strides[a] = u(l.strides[a]);
        }
    }
    p.extend_from_slice(&dims);
    p.extend_from_slice(&strides);
    // A tree pays off on long axes; a thread per output reads coalesced when the
    // axis is not the innermost and there are many outputs.
    let tree = n >= 32 && (l.strides[axis] == 1 || outputs < 4096);
    // Rows that start on a vec4 boundary are read four elements at a time.
    let vec4 = tree
        && l.strides[axis] == 1
        && n.is_multiple_of(4)
        && l.offset.is_multiple_of(4)
        && (0..l.rank()).all(|a| a == axis || l.dims[a] == 1 || l.strides[a].is_multiple_of(4));
    let (variant, entry, groups) = if vec4 {
        (2, "main", outputs)
    } else if tree {
        (1, "tree", outputs)
    } else {
        (0, "serial", outputs.div_ceil(WG))
    };
    let (identity, combine) = match op {
        ReduceOp::Sum => ("0.0", "a + b"),
        ReduceOp::Max => ("bitcast<f32>(0xff800000u)", "select(a, b, b > a)"),
        ReduceOp::Min => ("bitcast<f32>(0x7f800000u)", "select(a, b, b < a)"),
    };
    let kern = kernel(
        ctx,
        Key::Named("volta reduce", vec![op as u32, variant]),
        Bindings {
            reads: 1,
            writes: 1,
        },
        entry,
        || {
            let src = if vec4 { SOURCE_VEC4 } else { SOURCE };
            src.replace("IDENTITY", identity)
                .replace("COMBINE", combine)
        },
    );
    launch(ctx, &kern, &p, &[x.0, &out], grid(ctx, groups));
    out
}
