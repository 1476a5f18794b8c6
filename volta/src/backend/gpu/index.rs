//! Gather along an axis and its race-free adjoint, scatter-add
//! (`shaders/gather.wgsl`, `shaders/scatter_add.wgsl`).
use super::context::Context;
use super::launch::{alloc, grid, kernel, launch, u};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use super::recorder::flags;
use crate::layout::Layout;
use crate::shape::MAX_RANK;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, with_elem};

const GATHER: &str = include_str!("../../../../shaders/gather.wgsl");
const SCATTER_ADD: &str = include_str!("../../../../shaders/scatter_add.wgsl");
const WG: usize = 256;

/// Six slots of `values`, padded with `fill`.
fn slots(values: &[usize], fill: u32) -> [u32; MAX_RANK] {
    let mut out = [fill; MAX_RANK];
    for (o, &v) in out.iter_mut().zip(values) {
        *o = u(v);
    }
    out
}

/// Launches one of the hand-written index kernels: two inputs, the output, and the
/// recorder's error flags (out-of-range indices are reported at the next sync).
#[allow(clippy::too_many_arguments)]
fn launch_index_kernel(
    ctx: &Context,
    elem: Elem,
    name: &'static str,
    source: &'static str,
    params: &[u32],
    inputs: [&Arc<Pooled>; 2],
    out: &Arc<Pooled>,
    n: usize,
) {
    let kern = kernel(
        ctx,
        Key::Named(name, vec![elem as u32]),
        Bindings {
            reads: 2,
            writes: 2,
        },
        "main",
        || with_elem(source, elem).into_owned(),
    );
    let flags = flags(ctx);
    launch(
        ctx,
        &kern,
        params,
        &[inputs[0], inputs[1], out, &flags],
        grid(ctx, n.div_ceil(WG)),
    );
}

pub(crate) fn gather(
    ctx: &Context,
    elem: Elem,
    x: (&Arc<Pooled>, &Layout),
    axis: usize,
    idx: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let li = idx.1;
    let n = li.numel();
    let out = alloc(ctx, n * elem.size());
    if n == 0 {
        return out;
    }
    let mut p = vec![
        u(n),
        u(li.rank()),
        u(axis),
        u(x.1.dims[axis]),
        u(x.1.offset),
        u(li.offset),
    ];
    p.extend(slots(&li.dims, 1));
    p.extend(slots(&x.1.strides, 0));
    p.extend(slots(&li.strides, 0));
    let inputs = [x.0, idx.0];
    launch_index_kernel(ctx, elem, "volta gather", GATHER, &p, inputs, &out, n);
    out
}

pub(crate) fn scatter_add(
    ctx: &Context,
    elem: Elem,
    dims: &[usize],
    axis: usize,
    idx: (&Arc<Pooled>, &Layout),
    src: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let n: usize = dims.iter().product();
    let out = alloc(ctx, n * elem.size());
    if n == 0 {
        return out;
    }
    let mut p = vec![
        u(n),
        u(dims.len()),
        u(axis),
        u(dims[axis]),
        u(idx.1.dims[axis]),
        u(idx.1.offset),
        u(src.1.offset),
    ];
    p.extend(slots(dims, 1));
    p.extend(slots(&idx.1.strides, 0));
    p.extend(slots(&src.1.strides, 0));
    launch_index_kernel(
        ctx,
        elem,
        "volta scatter_add",
        SCATTER_ADD,
        &p,
        [idx.0, src.0],
        &out,
        n,
    );
    out
}
