//! Fused optimiser steps (`shaders/adam.wgsl`, `shaders/sgd.wgsl`): one dispatch per
//! parameter reads the parameter, its gradient and its state and writes all of
//! them anew. Hyperparameters travel in the parameter block, so changing the
//! learning rate never compiles a kernel.
use super::Operand;
use super::elementwise::{copy, map};
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Kernel, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::optim::{AdamConstants, SgdConstants};
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr, with_elem};

const ADAM: &str = include_str!("../../../../../shaders/adam.wgsl");
const SGD: &str = include_str!("../../../../../shaders/sgd.wgsl");
const WG: usize = 256;

/// An input of a fused step: memory already written (the caller materialised any
/// pending value) and its layout.
pub(crate) type Input<'a> = (&'a Arc<Pooled>, &'a Layout);

/// The buffer and start offset through which the kernels read `x`: contiguous
/// views are read in place, others are copied first (an extra kernel; parameters,
/// gradients and optimiser state are contiguous in practice).
fn flat(rt: &Runtime, elem: Elem, x: Input) -> (Arc<Pooled>, u32) {
    if x.1.is_contiguous() {
        (x.0.clone(), u(x.1.offset))
    } else {
        let packed = map(rt, elem, Expr::input(0), &[x], &[], &x.1.dims);
        (packed, 0)
    }
}

fn bits(x: f32) -> u32 {
    x.to_bits()
}

/// Launches `kern` over `n` elements of the flat inputs `ins` (buffer, start)
/// and the outputs `outs`, whose parameters `params(len, starts)` builds for a
/// run of `len` elements with the inputs at `starts`: in slices when an operand
/// is larger than one binding (each output slice starts on a window boundary,
/// so it is written in place).
fn launch_flat(
    rt: &Runtime,
    (kern, elem): (&Arc<Kernel>, Elem),
    n: usize,
    ins: &[&(Arc<Pooled>, u32)],
    outs: &[&Arc<Pooled>],
    params: impl Fn(usize, &[u32]) -> Vec<u32>,
) {
    let flat = |start: u32| Layout {
        dims: Dims::new(&[n]),
        strides: Dims::new(&[1]),
        offset: start as usize,
    };
    let layouts: Vec<Layout> = ins
        .iter()
        .map(|(_, start)| flat(*start))
        .chain(outs.iter().map(|_| flat(0)))
        .collect();
    let buffers = ins.iter().map(|(b, _)| b).chain(outs.iter().copied());
    let views: Vec<Operand> = buffers.zip(&layouts).collect();
    let run = |ops: &[Operand], len: usize| {
        let starts: Vec<u32> = ops[..ins.len()].iter().map(|(_, l)| u(l.offset)).collect();
        let bound: Vec<&Arc<Pooled>> = ops.iter().map(|(b, _)| *b).collect();
        let groups = grid(rt, len.div_ceil(WG));
        launch(rt, kern, &params(len, &starts), &bound, groups);
    };
    if !slices::needed(rt, &views) {
        return run(&views, n);
    }
    let parts: Vec<Part> = views
        .iter()
        .enumerate()
        .map(|(i, &view)| Part {
            view,
            axis: Some(0),
            exact: i >= ins.len(),
            elem,
        })
        .collect();
    // Slices of whole alignment units keep every output window in place.
    let unit = (rt.gpu.limits.min_storage_buffer_offset_alignment.max(4) as usize) / elem.size();
    match slices::slice_len(rt, &parts, n) {
        Some(k) if k >= n || k >= unit => {
            let k = if k >= n { n } else { k - k % unit };
            slices::by_slices(rt, &parts, (n, k), copy, |ops, _, len| run(ops, len));
        }
        _ => rt.report(slices::too_large(rt, &kern.name, &views, elem.size())),
    }
}

/// `(p', m', v')`, all of `elem` (`F32` or `F16`; the kernel computes in `f32`).
pub(crate) fn adam_step(
    rt: &Runtime,
    elem: Elem,
    p: Input,
    g: Input,
    moments: Option<(Input, Input)>,
    k: &AdamConstants<f32>,
) -> (Arc<Pooled>, Arc<Pooled>, Arc<Pooled>) {
    let n = p.1.numel();
    let bytes = n * elem.size();
    let outs = (alloc(rt, bytes), alloc(rt, bytes), alloc(rt, bytes));
    if n == 0 {
        return outs;
    }
    let (p, g) = (flat(rt, elem, p), flat(rt, elem, g));
    // On the first step the moments are zero: g stands in for them, unread.
    let (m, v) = match moments {
        Some((m, v)) => (flat(rt, elem, m), flat(rt, elem, v)),
        None => (g.clone(), g.clone()),
    };
    let first = u32::from(moments.is_none());
    let params = |len: usize, at: &[u32]| {
        vec![
            u(len),
            at[0],
            at[1],
            at[2],
            at[3],
            first,
            u32::from(k.l2.is_some()),
            u32::from(k.decay.is_some()),
            bits(k.lr),
            bits(k.beta1),
            bits(k.one_minus_beta1),
            bits(k.beta2),
            bits(k.one_minus_beta2),
            bits(k.eps),
            bits(k.l2.unwrap_or(0.0)),
            bits(k.decay.unwrap_or(1.0)),
            bits(k.m_scale),
            bits(k.v_scale),
        ]
    };
    let kern = kernel(
        rt,
        &Key::Named("volta adam", vec![elem as u32]),
        Bindings {
            reads: 4,
            writes: 3,
        },
        "main",
        || with_elem(ADAM, elem).into_owned(),
    );
    let (ins, out) = ([&p, &g, &m, &v], [&outs.0, &outs.1, &outs.2]);
    launch_flat(rt, (&kern, elem), n, &ins, &out, params);
    outs
}

/// `(p', b')` of a step with momentum, both of `elem`.
pub(crate) fn sgd_momentum_step(
    rt: &Runtime,
    elem: Elem,
    p: Input,
    g: Input,
    buf: Option<Input>,
    k: &SgdConstants<f32>,
) -> (Arc<Pooled>, Arc<Pooled>) {
    let momentum = k
        .momentum
        .expect("the fused SGD kernel is for steps with momentum");
    let n = p.1.numel();
    let outs = (alloc(rt, n * elem.size()), alloc(rt, n * elem.size()));
    if n == 0 {
        return outs;
    }
    let (p, g) = (flat(rt, elem, p), flat(rt, elem, g));
    // On the first step there is no buffer: g stands in for it, unread.
    let b = match buf {
        Some(b) => flat(rt, elem, b),
        None => g.clone(),
    };
    let first = u32::from(buf.is_none());
    let params = |len: usize, at: &[u32]| {
        vec![
            u(len),
            at[0],
            at[1],
            at[2],
            first,
            u32::from(k.l2.is_some()),
            u32::from(k.nesterov),
            bits(k.lr),
            bits(momentum),
            bits(k.l2.unwrap_or(0.0)),
        ]
    };
    let kern = kernel(
        rt,
        &Key::Named("volta sgd", vec![elem as u32]),
        Bindings {
            reads: 3,
            writes: 2,
        },
        "main",
        || with_elem(SGD, elem).into_owned(),
    );
    let (ins, out) = ([&p, &g, &b], [&outs.0, &outs.1]);
    launch_flat(rt, (&kern, elem), n, &ins, &out, params);
    outs
}
