//! Gather along an axis and its race-free adjoint, scatter-add
//! (`shaders/gather.wgsl`, `shaders/scatter_add.wgsl`, and
//! `shaders/scatter_rows.wgsl` for an embedding's backward).
use super::Operand;
use super::elementwise::copy;
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::gpu::runtime::transfer::flags;
use crate::layout::Layout;
use crate::shape::MAX_RANK;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, with_elem};

const GATHER: &str = include_str!("../../../../../shaders/gather.wgsl");
const SCATTER_ADD: &str = include_str!("../../../../../shaders/scatter_add.wgsl");
const SCATTER_ROWS: &str = include_str!("../../../../../shaders/scatter_rows.wgsl");
/// Output rows and lines per workgroup of `scatter_rows.wgsl` (its `R`, `LINES`).
const ROWS_PER_GROUP: usize = 8;
const LINES_PER_GROUP: usize = 16;
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
    rt: &Runtime,
    elem: Elem,
    name: &'static str,
    source: &'static str,
    params: &[u32],
    inputs: [&Arc<Pooled>; 2],
    out: &Arc<Pooled>,
    n: usize,
) {
    let kern = kernel(
        rt,
        &Key::Named(name, vec![elem as u32]),
        Bindings {
            reads: 2,
            writes: 2,
        },
        "main",
        || with_elem(source, elem).into_owned(),
    );
    let flags = flags(rt);
    launch(
        rt,
        &kern,
        params,
        &[inputs[0], inputs[1], out, &flags],
        grid(rt, n.div_ceil(WG)),
    );
}

pub(crate) fn gather(
    rt: &Runtime,
    elem: Elem,
    x: (&Arc<Pooled>, &Layout),
    axis: usize,
    idx: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let n = idx.1.numel();
    let out = alloc(rt, n * elem.size());
    if n == 0 {
        return out;
    }
    let len = x.1.dims[axis];
    let out_layout = Layout::contiguous(&idx.1.dims);
    if slices::needed(rt, &[x, idx]) {
        let o = (&out, &out_layout);
        let parts = |a: usize| {
            [
                Part {
                    view: x,
                    axis: Some(a),
                    exact: false,
                    elem,
                },
                Part {
                    view: idx,
                    axis: Some(a),
                    exact: false,
                    elem: Elem::U32,
                },
                Part {
                    view: o,
                    axis: Some(a),
                    exact: true,
                    elem,
                },
            ]
        };
        // Slices along another axis, or else ranges of the gathered axis (a table
        // too large for one binding), each pass writing the indices in its range.
        let best = (0..idx.1.rank())
            .filter(|&a| a != axis && idx.1.dims[a] > 1)
            .filter_map(|a| slices::slice_len(rt, &parts(a), idx.1.dims[a]).map(|k| (a, k)))
            .min_by_key(|&(a, k)| idx.1.dims[a].div_ceil(k));
        if let Some((a, k)) = best {
            slices::by_slices(rt, &parts(a), (idx.1.dims[a], k), copy, |ops, _, _| {
                record_gather(rt, elem, ops[0], axis, ops[1], ops[2].0, (0, len));
            });
            return out;
        }
        let ranges = [
            Part {
                view: x,
                axis: Some(axis),
                exact: false,
                elem,
            },
            Part {
                view: idx,
                axis: None,
                exact: false,
                elem: Elem::U32,
            },
            Part {
                view: o,
                axis: None,
                exact: false,
                elem,
            },
        ];
        match slices::slice_len(rt, &ranges, len) {
            Some(k) => {
                let mut lo = 0;
                slices::by_slices(rt, &ranges, (len, k), copy, |ops, _, n| {
                    record_gather(rt, elem, ops[0], axis, ops[1], ops[2].0, (lo, len));
                    lo += n;
                });
            }
            None => rt.report(slices::too_large(rt, "gather", &[x, idx], elem.size())),
        }
        return out;
    }
    record_gather(rt, elem, x, axis, idx, &out, (0, len));
    out
}

/// Gathers into `out` (contiguous, from its binding's start) the indices of `idx`
/// in `first..first + x.dims[axis]`, `x` being that range of a tensor whose axis
/// has `whole` positions.
fn record_gather(
    rt: &Runtime,
    elem: Elem,
    x: (&Arc<Pooled>, &Layout),
    axis: usize,
    idx: (&Arc<Pooled>, &Layout),
    out: &Arc<Pooled>,
    (first, whole): (usize, usize),
) {
    let li = idx.1;
    let n = li.numel();
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
    p.extend([u(first), u(whole)]);
    let inputs = [x.0, idx.0];
    launch_index_kernel(rt, elem, "volta gather", GATHER, &p, inputs, out, n);
}

pub(crate) fn scatter_add(
    rt: &Runtime,
    elem: Elem,
    dims: &[usize],
    axis: usize,
    idx: (&Arc<Pooled>, &Layout),
    src: (&Arc<Pooled>, &Layout),
) -> Arc<Pooled> {
    let n: usize = dims.iter().product();
    let out = alloc(rt, n * elem.size());
    if n == 0 {
        return out;
    }
    let whole = dims[axis];
    // `first`: the position along `axis` where this launch's rows start.
    let record = |dims: &[usize], idx: Operand, src: Operand, out: &Arc<Pooled>, first: usize| {
        let mut p = vec![
            u(dims.iter().product()),
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
        p.extend([u(first), u(whole)]);
        let name = "volta scatter_add";
        let len = dims.iter().product();
        launch_index_kernel(rt, elem, name, SCATTER_ADD, &p, [idx.0, src.0], out, len);
    };
    let out_layout = Layout::contiguous(dims);
    let views = [(&out, &out_layout), idx, src];
    if !slices::needed(rt, &views) {
        // One index vector for every line (an embedding's backward): each
        // workgroup scans it for its own rows.
        let (rows, lines) = (dims[0], dims.get(1).copied().unwrap_or(1));
        let groups = [
            rows.div_ceil(ROWS_PER_GROUP),
            lines.div_ceil(LINES_PER_GROUP),
        ];
        if dims.len() == 2 && axis == 0 && idx.1.strides[1] == 0 && groups[0] <= 65_535 {
            let p = [
                u(rows),
                u(lines),
                u(idx.1.dims[0]),
                u(idx.1.offset),
                u(idx.1.strides[0]),
                u(src.1.offset),
                u(src.1.strides[0]),
                u(src.1.strides[1]),
            ];
            let kern = kernel(
                rt,
                &Key::Named("volta scatter_add rows", vec![elem as u32]),
                Bindings {
                    reads: 2,
                    writes: 2,
                },
                "main",
                || with_elem(SCATTER_ROWS, elem).into_owned(),
            );
            let flags = flags(rt);
            let grid = [u(groups[0]), u(groups[1]), 1];
            launch(rt, &kern, &p, &[idx.0, src.0, &out, &flags], grid);
            return out;
        }
        record(dims, idx, src, &out, 0);
        return out;
    }
    // In slices of the result: along the scattered axis, each launch reading
    // every index and keeping those in its rows; or along another axis, with the
    // indices and sources of its own lines.
    let parts = |a: usize| -> [Part; 3] {
        let part = |i: usize| Part {
            view: views[i],
            axis: (i == 0 || a != axis).then_some(a),
            exact: i == 0,
            elem: if i == 1 { Elem::U32 } else { elem },
        };
        [part(0), part(1), part(2)]
    };
    let best = (0..dims.len())
        .filter(|&a| dims[a] > 1)
        .filter_map(|a| slices::slice_len(rt, &parts(a), dims[a]).map(|k| (a, k)))
        .min_by_key(|&(a, k)| dims[a].div_ceil(k));
    match best {
        Some((a, k)) => slices::by_slices(rt, &parts(a), (dims[a], k), copy, |ops, start, len| {
            let mut sub = dims.to_vec();
            sub[a] = len;
            let first = if a == axis { start } else { 0 };
            record(&sub, ops[1], ops[2], ops[0].0, first);
        }),
        None => rt.report(slices::too_large(rt, "scatter_add", &views, elem.size())),
    }
    out
}
