//! Row kernels along one axis (reductions, softmax, normalisation) of an
//! elementwise expression of some operands, through the `volta-kernels` row-kernel
//! generator. A plain reduction is the expression `Input(0)`; fusion passes a
//! pending producer's expression so that it is computed in the loads (see
//! `fusion::rows`).
use super::Operand;
use super::elementwise::{copy, map};
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr, Kept, RowKernel, RowOp, RowVariant};
use volta_kernels::{BinaryOp, ReduceOp};

/// `op` over each row along `axis` of `expr` evaluated at every position of
/// `dims`, reading `inputs` (each viewed with dims `dims`) and `scalars` (raw `f32`
/// bits: the op's own [`RowOp::scalars`] first, then the expression's); `grad`,
/// [`RowOp::NormalizeGrad`]'s second expression, over the same inputs and scalars. The result
/// is contiguous: dims `dims` with the axis set to 1 for a reduction, `dims` for
/// softmax, normalisation and any op with an `epilogue` (see
/// [`RowKernel::epilogue`]: an elementwise consumer of the op's value, whose
/// scalars follow `scalars`) unless it runs per row ([`RowKernel::per_row`], the
/// flag beside it). The inputs hold `elem`, the output `out_elem` (the
/// kernel computes in `f32`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    op: RowOp,
    (expr, grad): (Expr, Option<&Expr>),
    epilogue: Option<(&Expr, bool)>,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
    axis: usize,
) -> Arc<Pooled> {
    let n = dims[axis];
    let rows: usize = (0..dims.len())
        .filter(|&a| a != axis)
        .map(|a| dims[a])
        .product();
    if let (RowOp::Reduce(_), None) = (op, epilogue)
        && let Some(len) = split_len(inputs, dims, axis, rows)
    {
        return split(
            rt,
            (elem, out_elem),
            op,
            expr,
            inputs,
            scalars,
            dims,
            axis,
            len,
        );
    }
    let writes_rows = op.writes_rows() || epilogue.is_some_and(|(_, per_row)| !per_row);
    let len = if writes_rows { rows * n } else { rows };
    let out = alloc(rt, len * out_elem.size());
    if rows == 0 || (writes_rows && n == 0) {
        return out;
    }
    let mut out_dims = Layout::contiguous(dims);
    if !writes_rows {
        out_dims = Layout::contiguous(&{
            let mut d = dims.to_vec();
            d[axis] = 1;
            d
        });
    }
    let mut views: Vec<Operand> = inputs.to_vec();
    views.push((&out, &out_dims));
    if slices::needed(rt, &views) {
        // In slices of rows: along an axis other than the reduced one, the
        // output sliced with them (a reduction's output has no offset parameter).
        let parts = |a: usize| -> Vec<Part> {
            (0..views.len())
                .map(|i| Part {
                    view: views[i],
                    axis: Some(a),
                    exact: i == inputs.len() && !writes_rows,
                    elem: if i < inputs.len() { elem } else { out_elem },
                })
                .collect()
        };
        let best = (0..dims.len())
            .filter(|&a| a != axis && dims[a] > 1)
            .filter_map(|a| slices::slice_len(rt, &parts(a), dims[a]).map(|k| (a, k)))
            .min_by_key(|&(a, k)| dims[a].div_ceil(k));
        match best {
            Some((a, k)) => slices::by_slices(rt, &parts(a), (dims[a], k), copy, |ops, _, len| {
                let (ins, out) = ops.split_at(inputs.len());
                let mut sub = dims.to_vec();
                sub[a] = len;
                let sub_rows = (elem, out_elem);
                record(
                    rt,
                    sub_rows,
                    op,
                    (expr.clone(), grad),
                    epilogue,
                    ins,
                    scalars,
                    &sub,
                    axis,
                    out[0],
                    (Kept::default(), &[]),
                );
            }),
            None => match op {
                // Each output reads more than a binding holds: reduce chunks of
                // the axis that fit, each bound as windows, then combine them.
                RowOp::Reduce(r) if n > 1 && epilogue.is_none() => {
                    let chunks: Vec<Part> = inputs
                        .iter()
                        .map(|&view| Part {
                            view,
                            axis: Some(axis),
                            exact: false,
                            elem,
                        })
                        .collect();
                    if let Some(k) = slices::slice_len(rt, &chunks, n) {
                        let combine = match r {
                            ReduceOp::Sum => BinaryOp::Add,
                            ReduceOp::Max => BinaryOp::Max,
                            ReduceOp::Min => BinaryOp::Min,
                        };
                        let both = Expr::input(0).binary(combine, Expr::input(1));
                        let mut total: Option<Arc<Pooled>> = None;
                        slices::by_slices(rt, &chunks, (n, k), copy, |ins, _, len| {
                            let mut sub = dims.to_vec();
                            sub[axis] = len;
                            let part = self::rows(
                                rt,
                                (elem, out_elem),
                                op,
                                (expr.clone(), None),
                                None,
                                ins,
                                scalars,
                                &sub,
                                axis,
                            );
                            total = Some(match total.take() {
                                None => part,
                                Some(t) => {
                                    let pair = [(&t, &out_dims), (&part, &out_dims)];
                                    map(rt, out_elem, both.clone(), &pair, &[], &out_dims.dims)
                                }
                            });
                        });
                        return total.expect("an axis longer than 1 has a chunk");
                    }
                    rt.report(slices::too_large(rt, "row kernel", &views, elem.size()));
                }
                _ => rt.report(slices::too_large(rt, "row kernel", &views, elem.size())),
            },
        }
        return out;
    }
    record(
        rt,
        (elem, out_elem),
        op,
        (expr, grad),
        epilogue,
        inputs,
        scalars,
        dims,
        axis,
        (&out, &out_dims),
        (Kept::default(), &[]),
    );
    out
}

/// [`rows`] of an op that writes rows (with an elementwise `epilogue` over them,
/// not per row, or none) that also writes what `keeps` asks for ([`Kept`]): the
/// op's own rows beside the epilogue's (a norm's rows, which the backward pass
/// keeps, and their affine), and the row's elements as it loads them (the
/// residual stream a norm computes). Returns the rows and the kept values, in
/// that order (the op's rows first); `None` where the tensors need the kernels
/// that slice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_keeping(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    keeps: Kept,
    op: RowOp,
    (expr, grad): (Expr, Option<&Expr>),
    epilogue: Option<&Expr>,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
    axis: usize,
) -> Option<(Arc<Pooled>, Vec<Arc<Pooled>>)> {
    assert!(op.writes_rows(), "only an op that writes rows keeps them");
    let len: usize = dims.iter().product();
    let layout = Layout::contiguous(dims);
    let out = alloc(rt, len * out_elem.size());
    let kept: Vec<Arc<Pooled>> = [keeps.value, keeps.input]
        .into_iter()
        .flatten()
        .map(|e| alloc(rt, len * e.size()))
        .collect();
    let mut views: Vec<Operand> = inputs.to_vec();
    views.push((&out, &layout));
    views.extend(kept.iter().map(|k| (k, &layout)));
    if slices::needed(rt, &views) {
        return None;
    }
    if len > 0 {
        let bufs: Vec<&Arc<Pooled>> = kept.iter().collect();
        record(
            rt,
            (elem, out_elem),
            op,
            (expr, grad),
            epilogue.map(|e| (e, false)),
            inputs,
            scalars,
            dims,
            axis,
            (&out, &layout),
            (keeps, &bufs),
        );
    }
    Some((out, kept))
}

/// Chunks a strided reduction's first pass should keep busy at once (a thread
/// takes one chunk, or four side by side as `vec4`s): enough loads in flight
/// to stream memory on a large GPU (about 2,000 per core).
const SPLIT_THREADS: usize = 1 << 18;

/// The chunk length for a reduction along an axis that some input walks with a
/// stride (a bias gradient: the sum over a batch's rows of each feature), when
/// it should be split. One workgroup per output would read that axis a strided
/// element at a time, and one thread per output has too few threads to keep
/// memory busy; so the axis is cut into chunks that a thread each reduces
/// (reading as the outputs lie, coalesced), and the chunks' partial values are
/// reduced after. `None`: reduce it in one pass.
fn split_len(inputs: &[Operand], dims: &[usize], axis: usize, rows: usize) -> Option<usize> {
    let n = dims[axis];
    let strided = inputs.iter().any(|(_, l)| l.strides[axis] > 1);
    if !strided || dims.len() >= crate::shape::MAX_RANK || n < 256 || n * rows < 1 << 20 {
        return None;
    }
    // Chunks of at least 16 elements that divide the axis, at least 4 of them.
    let ideal = (n * rows).div_ceil(SPLIT_THREADS).max(16);
    (ideal..=n / 4).find(|&len| n.is_multiple_of(len))
}

/// A reduction along `axis` in two passes: each chunk of `len` elements of the
/// axis to an `f32` partial value, then the partial values (see [`split_len`]).
#[allow(clippy::too_many_arguments)]
fn split(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    op: RowOp,
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
    axis: usize,
    len: usize,
) -> Arc<Pooled> {
    let chunks = dims[axis] / len;
    // The axis as (chunks, len): dims and strides of each view, one axis longer.
    let cut = |l: &Layout| -> Layout {
        let mut d: Vec<usize> = l.dims.to_vec();
        let mut s: Vec<usize> = l.strides.to_vec();
        d.splice(axis..=axis, [chunks, len]);
        let st = s[axis];
        s.splice(axis..=axis, [st * len, st]);
        let mut out = Layout::contiguous(&d);
        out.strides.copy_from_slice(&s);
        out.offset = l.offset;
        out
    };
    let layouts: Vec<Layout> = inputs.iter().map(|(_, l)| cut(l)).collect();
    let views: Vec<Operand> = inputs
        .iter()
        .zip(&layouts)
        .map(|(&(b, _), l)| (b, l))
        .collect();
    let split_dims = cut(&Layout::contiguous(dims)).dims;
    let parts = rows(
        rt,
        (elem, Elem::F32),
        op,
        (expr, None),
        None,
        &views,
        scalars,
        &split_dims,
        axis + 1,
    );
    let mut part_dims = dims.to_vec();
    part_dims[axis] = chunks;
    let part_layout = Layout::contiguous(&part_dims);
    let identity = Expr::input(0);
    let part = [(&parts, &part_layout)];
    rows(
        rt,
        (Elem::F32, out_elem),
        op,
        (identity, None),
        None,
        &part,
        &[],
        &part_dims,
        axis,
    )
}

/// Whether a reduction's rows lie side by side in fours, as
/// [`RowVariant::SerialVec4`] reads them: the innermost dim other than `axis`
/// holds a multiple of 4 rows, and each input walks it contiguously from
/// 16-byte aligned elements (every other stride a multiple of 4) or not at all.
fn side_by_side(inputs: &[Operand], dims: &[usize], axis: usize) -> bool {
    let Some(inner) = (0..dims.len()).rev().find(|&a| a != axis) else {
        return false;
    };
    dims[inner] >= 4
        && dims[inner].is_multiple_of(4)
        && inputs
            .iter()
            .all(|(_, l)| in_fours(l, l.strides[inner], dims, inner))
}

/// Whether `l` can be read four elements at a time along dim `along`, which it
/// walks with `stride`: not at all, or contiguously from 16-byte aligned
/// elements (its offset and every other stride a multiple of 4).
fn in_fours(l: &Layout, stride: usize, dims: &[usize], along: usize) -> bool {
    match stride {
        0 => true,
        1 => {
            l.offset.is_multiple_of(4)
                && (0..dims.len())
                    .all(|a| a == along || dims[a] == 1 || l.strides[a].is_multiple_of(4))
        }
        _ => false,
    }
}

/// Records the row kernel writing `out` (contiguous: the reduced dims, or `dims`
/// for an op that writes rows).
#[allow(clippy::too_many_arguments)]
fn record(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    op: RowOp,
    (expr, grad): (Expr, Option<&Expr>),
    epilogue: Option<(&Expr, bool)>,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
    axis: usize,
    out: Operand,
    (keeps, kept): (Kept, &[&Arc<Pooled>]),
) {
    let writes_rows = op.writes_rows() || epilogue.is_some_and(|(_, per_row)| !per_row);
    let n = dims[axis];
    let rows: usize = (0..dims.len())
        .filter(|&a| a != axis)
        .map(|a| dims[a])
        .product();
    let mut views: Vec<Operand> = inputs.to_vec();
    if writes_rows {
        views.push(out);
    }
    let axis_stride = |(_, l): &Operand| if n == 1 { 0 } else { l.strides[axis] };
    // A tree pays off on long axes; a thread per row reads coalesced when the axis
    // is not the innermost and there are many rows.
    let tree = n >= 32 && (views.iter().all(|v| axis_stride(v) <= 1) || rows < 4096);
    // Rows that start on a vec4 boundary move four elements at a time; inputs
    // broadcast along the axis are read once per row.
    let vec4 = tree
        && n.is_multiple_of(4)
        && views
            .iter()
            .all(|v| in_fours(v.1, axis_stride(v), dims, axis))
        && (!writes_rows || axis_stride(&views[inputs.len()]) == 1);
    let lanes = rt
        .gpu
        .info
        .subgroup_size
        .filter(|&s| s >= 4)
        .map_or(0, |s| s.min(32));
    // Many short rows (a transformer's features): a row per subgroup, or per
    // part of one as wide as the row's vec4s (an attention head's 64 elements
    // take 16 lanes).
    let row_lanes = lanes.min((n.div_ceil(4) as u32).next_power_of_two().max(8));
    let per_lane = (n as u32).div_ceil(4 * row_lanes.max(1));
    let quads = !tree
        && matches!(op, RowOp::Reduce(_))
        && epilogue.is_none()
        && side_by_side(inputs, dims, axis);
    let variant = match (vec4, tree) {
        (true, _) if row_lanes >= 8 && per_lane <= 8 && rows >= 256 => RowVariant::Lanes(per_lane),
        (true, _) => RowVariant::vec4_for(n),
        (false, true) => RowVariant::Tree,
        (false, false) if quads => RowVariant::SerialVec4,
        (false, false) => RowVariant::Serial,
    };
    let inner = (0..dims.len()).rev().find(|&a| a != axis);
    let broadcast = |v: &Operand| match variant {
        RowVariant::SerialVec4 => inner.is_some_and(|a| v.1.strides[a] == 0),
        _ => vec4 && axis_stride(v) == 0,
    };
    let (drawn, scalars) = super::draws(inputs, scalars, op.scalars());
    let k = RowKernel {
        op,
        rank: dims.len(),
        axis_broadcast: inputs.iter().map(broadcast).collect(),
        expr,
        grad: grad.cloned(),
        variant,
        elem,
        out_elem,
        epilogue: epilogue.map(|(e, _)| e.clone()),
        per_row: epilogue.is_some_and(|(_, per_row)| per_row),
        keeps,
        lanes: if matches!(variant, RowVariant::Lanes(_)) {
            row_lanes
        } else {
            lanes
        },
        drawn,
    };
    let params_views: Vec<(usize, &[usize])> = views
        .iter()
        .map(|(_, l)| (l.offset, &l.strides[..]))
        .collect();
    let params = k.params(dims, axis, &params_views, &scalars);
    let bindings = Bindings {
        reads: inputs.len(),
        writes: 1 + keeps.outputs(),
    };
    let groups = k.groups(rows);
    let key = Key::Row(k);
    let Key::Row(k) = &key else { unreachable!() };
    let kern = kernel(rt, &key, bindings, "main", || k.source());
    let mut buffers: Vec<&Arc<Pooled>> = inputs.iter().map(|(b, _)| *b).collect();
    buffers.push(out.0);
    buffers.extend_from_slice(kept);
    launch(rt, &kern, &params, &buffers, grid(rt, groups));
}
