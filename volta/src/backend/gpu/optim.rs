//! Fused optimiser steps (`shaders/adam.wgsl`, `shaders/sgd.wgsl`): one dispatch per
//! parameter reads the parameter, its gradient and its state and writes all of
//! them anew. Hyperparameters travel in the parameter block, so changing the
//! learning rate never compiles a kernel.
use super::context::Context;
use super::launch::{alloc, grid, kernel, launch, u};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use crate::backend::optim::{AdamConstants, SgdConstants};
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr, with_elem};

const ADAM: &str = include_str!("../../../../shaders/adam.wgsl");
const SGD: &str = include_str!("../../../../shaders/sgd.wgsl");
const WG: usize = 256;

/// An input of a fused step: memory already written (the caller materialised any
/// pending value) and its layout.
pub(crate) type Input<'a> = (&'a Arc<Pooled>, &'a Layout);

/// The buffer and start offset through which the kernels read `x`: contiguous
/// views are read in place, others are copied first (an extra kernel; parameters,
/// gradients and optimiser state are contiguous in practice).
fn flat(ctx: &Context, elem: Elem, x: Input) -> (Arc<Pooled>, u32) {
    if x.1.is_contiguous() {
        (x.0.clone(), u(x.1.offset))
    } else {
        let copy = super::elementwise::map(ctx, elem, Expr::input(0), &[x], &[], &x.1.dims);
        (copy, 0)
    }
}

fn bits(x: f32) -> u32 {
    x.to_bits()
}

/// `(p', m', v')`, all of `elem` (`F32` or `F16`; the kernel computes in `f32`).
pub(crate) fn adam_step(
    ctx: &Context,
    elem: Elem,
    p: Input,
    g: Input,
    moments: Option<(Input, Input)>,
    k: &AdamConstants<f32>,
) -> (Arc<Pooled>, Arc<Pooled>, Arc<Pooled>) {
    let n = p.1.numel();
    let bytes = n * elem.size();
    let outs = (alloc(ctx, bytes), alloc(ctx, bytes), alloc(ctx, bytes));
    if n == 0 {
        return outs;
    }
    let (p, g) = (flat(ctx, elem, p), flat(ctx, elem, g));
    // On the first step the moments are zero: g stands in for them, unread.
    let (m, v) = match moments {
        Some((m, v)) => (flat(ctx, elem, m), flat(ctx, elem, v)),
        None => (g.clone(), g.clone()),
    };
    let params = [
        u(n),
        p.1,
        g.1,
        m.1,
        v.1,
        u32::from(moments.is_none()),
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
    ];
    let kern = kernel(
        ctx,
        &Key::Named("volta adam", vec![elem as u32]),
        Bindings {
            reads: 4,
            writes: 3,
        },
        "main",
        || with_elem(ADAM, elem).into_owned(),
    );
    let buffers = [&p.0, &g.0, &m.0, &v.0, &outs.0, &outs.1, &outs.2];
    launch(ctx, &kern, &params, &buffers, grid(ctx, n.div_ceil(WG)));
    outs
}

/// `(p', b')` of a step with momentum, both of `elem`.
pub(crate) fn sgd_momentum_step(
    ctx: &Context,
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
    let outs = (alloc(ctx, n * elem.size()), alloc(ctx, n * elem.size()));
    if n == 0 {
        return outs;
    }
    let (p, g) = (flat(ctx, elem, p), flat(ctx, elem, g));
    // On the first step there is no buffer: g stands in for it, unread.
    let b = match buf {
        Some(b) => flat(ctx, elem, b),
        None => g.clone(),
    };
    let params = [
        u(n),
        p.1,
        g.1,
        b.1,
        u32::from(buf.is_none()),
        u32::from(k.l2.is_some()),
        u32::from(k.nesterov),
        bits(k.lr),
        bits(momentum),
        bits(k.l2.unwrap_or(0.0)),
    ];
    let kern = kernel(
        ctx,
        &Key::Named("volta sgd", vec![elem as u32]),
        Bindings {
            reads: 3,
            writes: 2,
        },
        "main",
        || with_elem(SGD, elem).into_owned(),
    );
    let buffers = [&p.0, &g.0, &b.0, &outs.0, &outs.1];
    launch(ctx, &kern, &params, &buffers, grid(ctx, n.div_ceil(WG)));
    outs
}
