//! Sliding windows over (N, C, H, W) tensors, im2col (`shaders/unfold2d.wgsl`) and
//! its race-free adjoint col2im (`shaders/fold2d.wgsl`), and the counter-based
//! uniform generator (`shaders/uniform.wgsl`): hand-written kernels, one thread per
//! output element.
use super::context::Context;
use super::launch::{alloc, grid, kernel, launch, u};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::Window2d;
use volta_kernels::wgsl::{Elem, with_elem};

const UNFOLD2D: &str = include_str!("../../../../shaders/unfold2d.wgsl");
const FOLD2D: &str = include_str!("../../../../shaders/fold2d.wgsl");
const UNIFORM: &str = include_str!("../../../../shaders/uniform.wgsl");
const WG: usize = 256;

/// Launches a hand-written kernel over `n` outputs (`reads` input buffers, then
/// the output).
#[allow(clippy::too_many_arguments)]
fn launch_named(
    ctx: &Context,
    elem: Elem,
    name: &'static str,
    source: &'static str,
    params: &[u32],
    inputs: &[&Arc<Pooled>],
    out: &Arc<Pooled>,
    n: usize,
) {
    let kern = kernel(
        ctx,
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
    launch(ctx, &kern, params, &buffers, grid(ctx, n.div_ceil(WG)));
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
    ctx: &Context,
    elem: Elem,
    x: (&Arc<Pooled>, &Layout),
    win: &Window2d,
    pad: f32,
) -> (Arc<Pooled>, usize) {
    let l = x.1;
    let (n, c, hw) = (l.dims[0], l.dims[1], [l.dims[2], l.dims[3]]);
    let [oh, ow] = output(win, hw);
    let len = n * oh * ow * c * win.kernel[0] * win.kernel[1];
    let out = alloc(ctx, len * elem.size());
    if len == 0 {
        return (out, 0);
    }
    let mut p = vec![u(len)];
    p.extend(geometry(c, hw, win));
    p.push(u(l.offset));
    p.extend(l.strides[..4].iter().map(|&s| u(s)));
    p.push(pad.to_bits());
    launch_named(ctx, elem, "volta unfold2d", UNFOLD2D, &p, &[x.0], &out, len);
    (out, len)
}

pub(crate) fn fold2d(
    ctx: &Context,
    elem: Elem,
    cols: (&Arc<Pooled>, &Layout),
    win: &Window2d,
    hw: [usize; 2],
) -> (Arc<Pooled>, usize) {
    let l = cols.1;
    let (n, c) = (l.dims[0], l.dims[3]);
    let len = n * c * hw[0] * hw[1];
    let out = alloc(ctx, len * elem.size());
    if len == 0 {
        return (out, 0);
    }
    let mut p = vec![u(len)];
    p.extend(geometry(c, hw, win));
    p.push(u(l.offset));
    p.extend(l.strides[..6].iter().map(|&s| u(s)));
    launch_named(ctx, elem, "volta fold2d", FOLD2D, &p, &[cols.0], &out, len);
    (out, len)
}

pub(crate) fn uniform(ctx: &Context, elem: Elem, len: usize, seed: u64) -> Arc<Pooled> {
    let out = alloc(ctx, len * elem.size());
    if len > 0 {
        let p = [u(len), seed as u32, (seed >> 32) as u32];
        launch_named(ctx, elem, "volta uniform", UNIFORM, &p, &[], &out, len);
    }
    out
}
