//! Sliding windows over (N, C, H, W) tensors, im2col (`shaders/unfold2d.wgsl`) and
//! its race-free adjoint col2im (`shaders/fold2d.wgsl`): hand-written kernels, one
//! thread per output element.
use super::Operand;
use super::elementwise::copy;
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::Window2d;
use volta_kernels::wgsl::{Elem, with_elem};

const UNFOLD2D: &str = include_str!("../../../../../shaders/unfold2d.wgsl");
const FOLD2D: &str = include_str!("../../../../../shaders/fold2d.wgsl");
const WG: usize = 256;

/// Launches a hand-written kernel over `n` outputs (`reads` input buffers, then
/// the output).
#[allow(clippy::too_many_arguments)]
fn launch_named(
    rt: &Runtime,
    elem: Elem,
    name: &'static str,
    source: &'static str,
    params: &[u32],
    inputs: &[&Arc<Pooled>],
    out: &Arc<Pooled>,
    n: usize,
) {
    let kern = kernel(
        rt,
        &Key::Named(name, vec![elem as u32]),
        Bindings {
            reads: inputs.len(),
            writes: 1,
        },
        "main",
        || with_elem(source, elem).into_owned(),
    );
    let mut buffers = inputs.to_vec();
    buffers.push(out);
    launch(rt, &kern, params, &buffers, grid(rt, n.div_ceil(WG)));
}

/// Launches a window kernel over the batch of `x` (axis 0) into `out` (`per`
/// elements per batch item), whose parameters `params(len, x_offset)` builds for
/// `len` outputs reading `x` from `x_offset`: in slices of the batch when an
/// operand is larger than one binding.
fn launch_by_batch(
    rt: &Runtime,
    (elem, name, source): (Elem, &'static str, &'static str),
    x: Operand,
    out: &Arc<Pooled>,
    per: usize,
    params: impl Fn(usize, usize) -> Vec<u32>,
) {
    let batch = x.1.dims[0];
    let out_layout = Layout::contiguous(&[batch, per]);
    let views = [x, (out, &out_layout)];
    let run = |ops: &[Operand], items: usize| {
        let len = items * per;
        let p = params(len, ops[0].1.offset);
        launch_named(rt, elem, name, source, &p, &[ops[0].0], ops[1].0, len);
    };
    if !slices::needed(rt, &views) {
        return run(&views, batch);
    }
    let part = |view, exact| Part {
        view,
        axis: Some(0),
        exact,
        elem,
    };
    let parts = [part(views[0], false), part(views[1], true)];
    match slices::slice_len(rt, &parts, batch) {
        Some(k) => slices::by_slices(rt, &parts, (batch, k), copy, |ops, _, items| {
            run(ops, items)
        }),
        None => rt.report(slices::too_large(rt, name, &views, elem.size())),
    }
}

/// The output `[OH, OW]` of a window that the op has checked.
fn output(win: &Window2d, hw: [usize; 2]) -> [usize; 2] {
    win.output(hw).expect("the op checked that the window fits")
}

/// The sizes both window kernels start with (after the output count): C, H, W,
/// OH, OW, then the window.
fn geometry(c: usize, hw: [usize; 2], win: &Window2d) -> Vec<u32> {
    let [oh, ow] = output(win, hw);
    let mut p = vec![u(c), u(hw[0]), u(hw[1]), u(oh), u(ow)];
    for v in [win.kernel, win.stride, win.padding, win.dilation] {
        p.extend([u(v[0]), u(v[1])]);
    }
    p
}

/// im2col of `x` (`elem`); `pad` is the padding value in `f32` (exact in `f16`
/// when it came from an `f16`).
pub(crate) fn unfold2d(
    rt: &Runtime,
    elem: Elem,
    x: (&Arc<Pooled>, &Layout),
    win: &Window2d,
    pad: f32,
) -> (Arc<Pooled>, usize) {
    let l = x.1;
    let (n, c, hw) = (l.dims[0], l.dims[1], [l.dims[2], l.dims[3]]);
    let [oh, ow] = output(win, hw);
    let len = n * oh * ow * c * win.kernel[0] * win.kernel[1];
    let out = alloc(rt, len * elem.size());
    if len == 0 {
        return (out, 0);
    }
    let params = |len: usize, offset: usize| {
        let mut p = vec![u(len)];
        p.extend(geometry(c, hw, win));
        p.push(u(offset));
        p.extend(l.strides[..4].iter().map(|&s| u(s)));
        p.push(pad.to_bits());
        p
    };
    let kernel = (elem, "volta unfold2d", UNFOLD2D);
    launch_by_batch(rt, kernel, x, &out, len / n, params);
    (out, len)
}

pub(crate) fn fold2d(
    rt: &Runtime,
    elem: Elem,
    cols: (&Arc<Pooled>, &Layout),
    win: &Window2d,
    hw: [usize; 2],
) -> (Arc<Pooled>, usize) {
    let l = cols.1;
    let (n, c) = (l.dims[0], l.dims[3]);
    let len = n * c * hw[0] * hw[1];
    let out = alloc(rt, len * elem.size());
    if len == 0 {
        return (out, 0);
    }
    let params = |len: usize, offset: usize| {
        let mut p = vec![u(len)];
        p.extend(geometry(c, hw, win));
        p.push(u(offset));
        p.extend(l.strides[..6].iter().map(|&s| u(s)));
        p
    };
    let kernel = (elem, "volta fold2d", FOLD2D);
    launch_by_batch(rt, kernel, cols, &out, len / n, params);
    (out, len)
}
