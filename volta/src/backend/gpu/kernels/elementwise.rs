//! Elementwise kernels (maps, zips, select, fills, strided copies) through the
//! `volta-kernels` WGSL generator.
use super::slices::{self, Part};
use super::{Operand, Small};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use smallvec::smallvec;
use std::sync::{Arc, Mutex};
use volta_kernels::wgsl::{Access, Elem, ElementwiseKernel, Expr, Launch};

/// A thread-layout override for tuning (`None`: [`Launch::DEFAULT`]).
pub(crate) static LAUNCH: Mutex<Option<Launch>> = Mutex::new(None);

/// `expr` over `inputs` (all with dims `dims`) into a new contiguous buffer; every
/// buffer holds `elem`.
pub(crate) fn map(
    rt: &Runtime,
    elem: Elem,
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
) -> Arc<Pooled> {
    convert(rt, (elem, elem), expr, inputs, scalars, dims)
}

/// [`map`] from inputs of one element type to an output of another (both floats):
/// `(F32, F16)` with `Expr::input(0)` is a cast.
pub(crate) fn convert(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    dims: &[usize],
) -> Arc<Pooled> {
    let n: usize = dims.iter().product();
    let out = alloc(rt, n * out_elem.size());
    write_as(
        rt,
        (elem, out_elem),
        expr,
        inputs,
        scalars,
        (&out, &Layout::contiguous(dims)),
    );
    out
}

/// `expr` over `inputs` written through the (possibly strided) view `out`, whose
/// dims the inputs share: strided copies into regions (pad, concat).
pub(crate) fn write(
    rt: &Runtime,
    elem: Elem,
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    out: Operand,
) {
    write_as(rt, (elem, elem), expr, inputs, scalars, out);
}

/// Copies `src` into the view `dst` (same dims), both holding `elem`: how other
/// kernel families place results (see [`slices::Copy`]).
pub(crate) fn copy(rt: &Runtime, elem: Elem, src: Operand, dst: Operand) {
    write(rt, elem, Expr::input(0), &[src], &[], dst);
}

/// [`write`] from inputs of type `elem` into an output of type `out_elem`.
fn write_as(
    rt: &Runtime,
    (elem, out_elem): (Elem, Elem),
    expr: Expr,
    inputs: &[Operand],
    scalars: &[u32],
    out: Operand,
) {
    let dims = &out.1.dims;
    let n: usize = dims.iter().product();
    if n == 0 {
        return;
    }
    // Inline lists: the common path records many small ops.
    let mut views: Small<Operand> = inputs.iter().copied().collect();
    views.push(out);
    if slices::needed(rt, &views) {
        // In slices along the axis that needs the fewest.
        let parts = |a: usize| -> Vec<Part> {
            (0..views.len())
                .map(|i| Part {
                    view: views[i],
                    axis: Some(a),
                    exact: false,
                    elem: if i < inputs.len() { elem } else { out_elem },
                })
                .collect()
        };
        let best = (0..dims.len())
            .filter_map(|a| slices::slice_len(rt, &parts(a), dims[a]).map(|k| (a, k)))
            .min_by_key(|&(a, k)| dims[a].div_ceil(k));
        match best {
            Some((a, k)) => slices::by_slices(rt, &parts(a), (dims[a], k), copy, |ops, _, _| {
                let (ins, out) = ops.split_at(inputs.len());
                write_as(rt, (elem, out_elem), expr.clone(), ins, scalars, out[0]);
            }),
            // No single axis: halve the work and try again.
            None => {
                let halved = slices::bisect(rt, parts, dims, copy, |ops| {
                    let (ins, out) = ops.split_at(inputs.len());
                    write_as(rt, (elem, out_elem), expr.clone(), ins, scalars, out[0]);
                });
                if !halved {
                    rt.report(slices::too_large(rt, "elementwise", &views, elem.size()));
                }
            }
        }
        return;
    }
    // Most launches read and write whole contiguous buffers: one flat index space,
    // without collapsing axes view by view.
    let (dims, strides) = if views.iter().all(|(_, l)| l.is_contiguous()) {
        let flat: Small<usize> = smallvec![n];
        (flat.clone(), views.iter().map(|_| smallvec![1]).collect())
    } else {
        let strides: Small<&[usize]> = views.iter().map(|(_, l)| &l.strides[..]).collect();
        collapse(dims, &strides)
    };
    let contiguous = Layout::contiguous(&dims).strides;
    let offsets: Small<usize> = views.iter().map(|(_, l)| l.offset).collect();
    let access = |s: &Small<usize>| {
        if s[..] == contiguous[..] {
            Access::Contiguous
        } else if s.last() == Some(&0) {
            Access::Broadcast
        } else {
            Access::Strided
        }
    };
    let vector = vectorizable(&dims, &strides, &offsets);
    let layout = LAUNCH
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .unwrap_or(Launch::DEFAULT);
    let (drawn, scalars) = super::draws(inputs, scalars, 0);
    let k = ElementwiseKernel {
        rank: dims.len(),
        elem,
        out_elem,
        inputs: strides[..inputs.len()].iter().map(access).collect(),
        output: access(&strides[inputs.len()]),
        expr,
        vector,
        launch: layout,
        drawn,
    };
    let input_views: Small<(usize, &[usize])> = inputs
        .iter()
        .zip(&strides)
        .map(|((_, l), s)| (l.offset, &s[..]))
        .collect();
    // One parameter buffer per thread, reused (taken, so a nested launch gets its own).
    thread_local!(static PARAMS: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) });
    let mut params = PARAMS.take();
    params.clear();
    k.params_into(
        &mut params,
        &dims,
        &input_views,
        (out.1.offset, &strides[inputs.len()]),
        &scalars,
    );
    let bindings = Bindings {
        reads: inputs.len(),
        writes: 1,
    };
    let key = Key::Elementwise(k);
    let Key::Elementwise(k) = &key else {
        unreachable!()
    };
    let kern = kernel(rt, &key, bindings, "main", || k.source());
    let buffers: Small<&Arc<Pooled>> = views.iter().map(|(b, _)| *b).collect();
    let threads = if vector { n / 4 } else { n };
    let groups = grid(rt, threads.div_ceil(layout.span() as usize));
    launch(rt, &kern, &params, &buffers, groups);
    PARAMS.set(params);
}

/// Whether four elements per thread can move as `vec4`s: the innermost dim is a
/// multiple of 4 and every view either walks it with stride 1 from an aligned start
/// (outer strides aligned too) or broadcasts it (stride 0).
fn vectorizable(dims: &[usize], strides: &[Small<usize>], offsets: &[usize]) -> bool {
    let Some(&inner) = dims.last() else {
        return false;
    };
    inner.is_multiple_of(4)
        && strides
            .iter()
            .zip(offsets)
            .all(|(s, &offset)| match s.last() {
                Some(0) => true,
                Some(1) => {
                    offset.is_multiple_of(4) && s[..s.len() - 1].iter().all(|x| x.is_multiple_of(4))
                }
                _ => false,
            })
}

/// A new buffer of `len` copies of the raw 32-bit `value` (`f32` bits for `F16`,
/// rounded when stored).
pub(crate) fn fill(rt: &Runtime, elem: Elem, len: usize, value: u32) -> Arc<Pooled> {
    map(rt, elem, Expr::scalar(0), &[], &[value], &[len])
}

/// Drops size-1 axes and merges adjacent axes that every stride list walks as one,
/// so that most kernels index with rank 1 or 2.
pub(crate) fn collapse(
    dims: &[usize],
    strides: &[&[usize]],
) -> (Small<usize>, Small<Small<usize>>) {
    let mut cd: Small<usize> = Small::new();
    let mut cs: Small<Small<usize>> = (0..strides.len()).map(|_| Small::new()).collect();
    for (a, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let merge = !cd.is_empty()
            && strides
                .iter()
                .zip(&cs)
                .all(|(s, c)| *c.last().expect("same length as cd") == s[a] * d);
        if merge {
            *cd.last_mut().expect("non-empty") *= d;
            for (s, c) in strides.iter().zip(cs.iter_mut()) {
                *c.last_mut().expect("non-empty") = s[a];
            }
        } else {
            cd.push(d);
            for (s, c) in strides.iter().zip(cs.iter_mut()) {
                c.push(s[a]);
            }
        }
    }
    (cd, cs)
}

#[cfg(test)]
mod tests {
    use super::collapse;

    #[test]
    fn collapses_contiguous_and_keeps_permuted() {
        let (d, s) = collapse(&[2, 3, 4], &[&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(
            (&d[..], &s[0][..], &s[1][..]),
            (&[24][..], &[1][..], &[1][..])
        );
        // A transposed input blocks merging; a broadcast axis merges with its kind.
        let (d, s) = collapse(&[3, 1, 2], &[&[1, 9, 3], &[2, 2, 1]]);
        assert_eq!(
            (&d[..], &s[0][..], &s[1][..]),
            (&[3, 2][..], &[1, 3][..], &[2, 1][..])
        );
        let (d, s) = collapse(&[2, 3], &[&[0, 0], &[3, 1]]);
        assert_eq!(
            (&d[..], &s[0][..], &s[1][..]),
            (&[6][..], &[0][..], &[1][..])
        );
    }
}
