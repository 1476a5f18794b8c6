//! Fusion of elementwise chains, invisible above the backend.
//!
//! A GPU elementwise op (unary, binary, scalar, select, user kernel) does not
//! dispatch: it returns a *pending* buffer, an [`Expr`] over buffers already in
//! memory (each with the layout it is read through) and run-time scalars. An
//! elementwise consumer that reads a pending operand through a plain layout (offset
//! 0, row-major, the operand's dims, or any dims when every input of the operand is
//! itself row-major) splices the operand's tree into its own instead of reading
//! memory; equal (buffer, layout) inputs are bound once, so `x * x` reads `x` once.
//! A row kernel (reduction, softmax, normalisation, a norm's gradient) reading a
//! pending operand through a plain layout, possibly reshaped (a sum over several
//! axes reads `(B, T, C)` as `(B·T, C)`), computes the operand's tree in its loads ([`rows`]),
//! unless another consumer records the operand first (a bias's gradient, summed
//! from the gradient a product reads): then it reads that memory. The backward
//! pass records each parameter's gradient two nodes after finishing it
//! (`Memory::compute_deferred`), so such a sum does not hold its operand until the
//! optimiser reads it.
//! A consumer may also read a pending operand *broadcast* (`bias.expand(..)`): the
//! operand's leaves are then read with zero strides on the broadcast axes.
//!
//! Row ops are pending too, so fusion also crosses a reduction: an elementwise
//! consumer of a row op's value (RMSNorm's `x · rsqrt(mean(x²) + eps) · w`, a
//! LayerNorm's affine `n · w + b`, `softmax(x) · mask`) reads it as
//! `Input(ROW_VALUE)` ([`RowRead`]), and when the consumer runs over the row op's
//! own dims and nothing else holds the row op, both are one row kernel with the
//! consumer as its epilogue (`RowKernel::epilogue`). When something else holds a
//! row op that writes rows (a norm's rows, kept for the backward pass), that
//! kernel writes the rows too (`Kept::value`). Otherwise the row op is recorded on
//! its own and read from memory. A row op that writes rows also writes the
//! pending operand it computes in its loads when something else holds it (the
//! residual stream a norm reads, which the next residual sum reads again:
//! `Kept::input`), instead of that operand taking a kernel of its own first.
//! Every other consumer (matmul, pad and concat, gather and scatter, window ops,
//! copies, read-backs, strided reads, row kernels over views) *materialises* the
//! operand: its fused kernel is recorded once and the result memoised. In half
//! precision a product reads a pending operand's `f16` copy instead, recorded from
//! its tree once and kept while the value stays pending ([`half_operand`]); a sum of
//! such a value (a bias's gradient, after the weight's) reads that copy too. Trees stop
//! growing at [`MAX_NODES`] nodes or [`MAX_INPUTS`] inputs: the operand is then
//! materialised and read as one input.
//!
//! When a pending buffer is materialised, the pending buffers spliced into it (or
//! computed in a row kernel's loads) that something still holds (an optimiser's
//! state, a tensor kept for backward, the residual stream) are materialised too, so
//! a value carried from step to step is not recomputed from an ever longer history
//! of inputs: after an elementwise kernel, before a row kernel (which then reads
//! that memory). A held value that is a small tree of at most one buffer of its own
//! size, small broadcast ones and drawn numbers (dropout's mask; a product plus its
//! bias; a norm's rows times its scale) stays pending: a later consumer recomputes
//! it for what reading it would cost.
//!
//! Uniform numbers ([`uniform`]) are drawn, not stored: their leaf stands for the
//! counter stream of a seed ([`Pooled::drawing`]), and each kernel that reads them
//! hashes the addresses it would load. Dropout's mask is thus never written, in
//! the forward pass or in its gradient.
//!
//! Pipelines are cached by tree structure and access pattern (`pipelines::Key`);
//! scalars are parameters, so a new learning rate reuses the pipeline. Nothing here
//! waits for the GPU.
mod buffer;
mod builder;
mod pending;

pub use buffer::GpuBuffer;

use super::kernels::elementwise::{convert, map};
use super::kernels::{Operand, Small};
use super::runtime::Runtime;
use super::runtime::pool::{Kind, Pooled};
use crate::layout::Layout;
use crate::shape::Dims;
use buffer::Data;
use builder::{Builder, Fused, MAX_INPUTS, MAX_NODES};
use pending::{Leaf, Pending, RowSpec, Source};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use volta_kernels::ReduceOp;
use volta_kernels::wgsl::{Elem, Expr, RowOp};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether elementwise ops fuse (on unless turned off).
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Turns fusion on or off for the ops recorded from now on.
pub(crate) fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// `template` at every position of `dims`, with `Input(i)` reading `inputs[i]` (each
/// of dims `dims`) and `Scalar(j)` = `scalars[j]`, as a pending buffer that pending
/// operands were spliced into. With fusion off it is recorded at once. Every
/// buffer holds `elem` (`E`'s kernel type); pending operands of a value have its type,
/// so trees only ever join values of one element type.
pub(crate) fn elementwise<E>(
    rt: &'static Runtime,
    elem: Elem,
    template: Expr,
    inputs: &[(&GpuBuffer<E>, &Layout)],
    scalars: &[u32],
    dims: &[usize],
) -> GpuBuffer<E> {
    if !enabled() {
        // Recorded at once: no tree to build, nothing pending.
        let ops: Small<Operand> = inputs.iter().map(|(b, l)| (b.raw(), *l)).collect();
        let out = map(rt, elem, template, &ops, scalars, dims);
        return GpuBuffer::new(out, dims.iter().product());
    }
    let limit = rt.gpu.limits.max_storage_buffers_per_shader_stage as usize;
    // Two storage bindings are the parameter block and the output.
    let max_inputs = MAX_INPUTS.min(limit.saturating_sub(2));
    let mut b = Builder::new(MAX_NODES.saturating_sub(template.nodes()), max_inputs);
    let mut spliced = Vec::new();
    let mut reads = None;
    let args: Vec<Expr> = inputs
        .iter()
        .enumerate()
        .map(|(i, (buf, layout))| {
            let reserve = inputs.len() - i - 1 + usize::from(reads.is_some());
            if let Data::Pending(p) = &buf.data
                && let Some(e) = p.splice_into(&mut b, layout, reserve, &mut spliced, &mut reads)
            {
                return e;
            }
            b.leaf(Leaf {
                buf: buf.raw().clone(),
                layout: **layout,
            })
        })
        .collect();
    let fused = b.finish(&template, &args, scalars);
    let pending = Arc::new(Pending {
        rt,
        elem,
        dims: Dims::new(dims),
        source: Mutex::new(Some(Source {
            fused,
            spliced,
            row: None,
            reads,
            computes: None,
        })),
        done: OnceLock::new(),
        readers: Mutex::new(Vec::new()),
        half: Mutex::new(None),
    });
    GpuBuffer::pending(pending, dims.iter().product())
}

/// `len` uniform numbers in `[0, 1)` of `elem` from the counter stream of
/// `seed` (element `i` is `volta::random::uniform_at(seed, i)`, rounded to
/// `elem`), as a pending value over a drawn leaf ([`Pooled::drawing`]): the
/// kernels that read it (dropout's mask, in its forward and its gradient) draw
/// its elements where they would load them, and it is written to memory only
/// when a consumer that fuses nothing wants it there.
pub(crate) fn uniform<E>(rt: &'static Runtime, elem: Elem, len: usize, seed: u64) -> GpuBuffer<E> {
    let stand_in = rt.pool.lend(&rt.gpu, Kind::Storage, 16).drawing(seed);
    let drawn = GpuBuffer::new(Arc::new(stand_in), len);
    let all = Layout::contiguous(&[len]);
    elementwise(rt, elem, Expr::input(0), &[(&drawn, &all)], &[], &[len])
}

/// What a product in half precision reads for `x` (`f32`), and its type: a
/// pending value rounded to `f16` from its tree ([`Pending::half_copy`]), the
/// copy kept for its next product (a weight's gradient reads the forward's input
/// again) while the value stays pending. The product then reads half the bytes,
/// and the value is never written in `f32` unless another consumer wants it. A
/// value in memory is rounded when `copy` says the product reads it often enough
/// to pay for it (`matmul::copies_operands`: a weight), by a copy kept with its
/// memory ([`Pooled::rounded`]) until that is written in place, so that its next
/// products read the copy too (the forward's, then its input's gradient's).
/// Otherwise the product reads it as it is, rounding it in its loads.
pub(crate) fn half_operand<E>(rt: &Runtime, x: &GpuBuffer<E>, copy: bool) -> (Arc<Pooled>, Elem) {
    if let Data::Pending(p) = &x.data
        && let Some(h) = p.half_copy()
    {
        return (h, Elem::F16);
    }
    let raw = x.raw();
    if !copy {
        return (raw.clone(), Elem::F32);
    }
    let round = || {
        let all = Layout::contiguous(&[x.len]);
        let cast = Expr::input(0);
        convert(
            rt,
            (Elem::F32, Elem::F16),
            cast,
            &[(raw, &all)],
            &[],
            &[x.len],
        )
    };
    (raw.rounded(round), Elem::F16)
}

/// The sum along `axis` of a buffer in memory of `in_elem` (split-K's partial
/// products), as a pending reduction of `elem` values (see [`rows`]).
pub(crate) fn rows_of<E>(
    rt: &'static Runtime,
    in_elem: Elem,
    elem: Elem,
    (buf, layout): (Arc<Pooled>, Layout),
    axis: usize,
) -> GpuBuffer<E> {
    let fused = Fused::read(Leaf { buf, layout });
    pending_row(
        rt,
        (in_elem, elem),
        (fused, None, Vec::new()),
        (RowOp::Reduce(ReduceOp::Sum), None),
        axis,
        layout.dims,
        &[],
    )
}

/// What a pending row op reads: its tree, the pending value that tree is (and
/// the layout it is read through), and the pending values computed in its loads.
type RowReads<'a> = (
    Fused<Leaf>,
    Option<(&'a Arc<Pending>, Layout)>,
    Vec<std::sync::Weak<Pending>>,
);

/// A pending row op over `fused` (leaves of `in_elem`), its value of `elem`
/// (recorded at once with fusion off); `grad`, the op's second tree over the
/// same leaves ([`RowOp::NormalizeGrad`]). With `from`, `fused` is that pending
/// value's tree (read through the layout): the row op then reads the value's
/// memory instead, if the value is recorded first (`Pending::readers`).
/// `spliced`: the pending values computed in its loads ([`Source::spliced`]).
fn pending_row<E>(
    rt: &'static Runtime,
    (in_elem, elem): (Elem, Elem),
    (fused, from, spliced): RowReads,
    (op, grad): (RowOp, Option<Expr>),
    axis: usize,
    over: Dims,
    op_scalars: &[u32],
) -> GpuBuffer<E> {
    let mut dims = over;
    if !op.writes_rows() {
        dims[axis] = 1;
    }
    let pending = Arc::new(Pending {
        rt,
        elem,
        dims,
        source: Mutex::new(Some(Source {
            fused,
            spliced,
            row: Some(RowSpec {
                op,
                axis,
                over,
                in_elem,
                op_scalars: op_scalars.to_vec(),
                grad,
            }),
            reads: None,
            computes: from.map(|(v, _)| Arc::downgrade(v)),
        })),
        done: OnceLock::new(),
        readers: Mutex::new(Vec::new()),
        half: Mutex::new(None),
    });
    if let Some((value, layout)) = from {
        let mut readers = value.readers.lock().unwrap_or_else(|p| p.into_inner());
        readers.retain(|(r, _)| r.strong_count() > 0);
        readers.push((Arc::downgrade(&pending), layout));
    }
    let out = GpuBuffer::pending(pending, dims.numel());
    if !enabled() {
        out.realize();
    }
    out
}

/// `op` over each row along `axis` of `x` (a reduction, keep-dim, softmax or
/// normalisation), with the op's own run-time scalars `op_scalars` (raw `f32`
/// bits, [`RowOp::scalars`] of them), as a pending value: recorded when something
/// reads it from memory, or as the prologue of an elementwise consumer's kernel
/// (see the module's notes). A pending `x` is computed in the row kernel's loads
/// rather than materialised, and stays pending for its other consumers:
/// recomputing it there costs reads of its inputs (often one full-size tensor and
/// some broadcast ones), while materialising costs a write and a read. If another
/// consumer records `x` before the row kernel is, the kernel reads that memory
/// instead. With fusion off the row kernel is recorded at once.
pub(crate) fn rows<E>(
    rt: &'static Runtime,
    elem: Elem,
    op: RowOp,
    x: (&GpuBuffer<E>, &Layout),
    axis: usize,
    op_scalars: &[u32],
) -> GpuBuffer<E> {
    debug_assert_eq!(op_scalars.len(), op.scalars());
    let (buf, layout) = x;
    let on = enabled();
    if let (RowOp::Reduce(ReduceOp::Sum), Data::Pending(p)) = (op, &buf.data)
        && let Some(half) = p.kept_half(layout)
    {
        // A bias's gradient in half precision: the weight's gradient multiplied
        // the value's f16 copy, so the sum reads it too, a quarter of the bytes
        // its tree would read (a gradient and an activation in f32), as
        // `autocast` sums the f16 gradient PyTorch's product returns.
        let leaf = Leaf {
            buf: half,
            layout: *layout,
        };
        let reads = (Fused::read(leaf), None, Vec::new());
        return pending_row(
            rt,
            (Elem::F16, elem),
            reads,
            (op, None),
            axis,
            layout.dims,
            op_scalars,
        );
    }
    let tree = match (on, &buf.data) {
        (true, Data::Pending(p)) => p
            .fused_view(layout)
            .map(|(f, spliced)| (f, Some((p, *layout)), spliced)),
        _ => None,
    };
    let (fused, from, spliced) = tree.unwrap_or_else(|| {
        let leaf = Leaf {
            buf: buf.raw().clone(),
            layout: *layout,
        };
        (Fused::read(leaf), None, Vec::new())
    });
    pending_row(
        rt,
        (elem, elem),
        (fused, from, spliced),
        (op, None),
        axis,
        layout.dims,
        op_scalars,
    )
}

/// The gradient of a normalisation along `axis` with respect to its input `x`,
/// given the output's gradient `g` ([`RowOp::NormalizeGrad`], `eps` as raw `f32`
/// bits), as a pending row op. Pending `x` and `g` are computed in the kernel's
/// loads, as [`rows`] computes one operand (a LayerNorm's input is often the
/// residual stream's sum, its gradient `dy·γ`); when both trees do not fit one
/// kernel, the second is read from memory.
pub(crate) fn normalize_grad<E>(
    rt: &'static Runtime,
    elem: Elem,
    x: (&GpuBuffer<E>, &Layout),
    g: (&GpuBuffer<E>, &Layout),
    axis: usize,
    center: bool,
    eps: u32,
) -> GpuBuffer<E> {
    let limit = rt.gpu.limits.max_storage_buffers_per_shader_stage as usize;
    let mut b = Builder::new(MAX_NODES, MAX_INPUTS.min(limit.saturating_sub(2)));
    let mut spliced = Vec::new();
    let mut read = |(buf, layout): (&GpuBuffer<E>, &Layout), reserve: usize| {
        let tree = match (enabled(), &buf.data) {
            (true, Data::Pending(p)) => p.fused_view(layout),
            _ => None,
        };
        if let Some((e, held)) = tree.and_then(|(t, held)| Some((b.splice(&t, reserve)?, held))) {
            spliced.extend(held);
            return e;
        }
        b.leaf(Leaf {
            buf: buf.raw().clone(),
            layout: *layout,
        })
    };
    let x_expr = read(x, 1);
    let g_expr = read(g, 0);
    let fused = b.finish(&Expr::input(0), &[x_expr], &[]);
    pending_row(
        rt,
        (elem, elem),
        (fused, None, spliced),
        (RowOp::NormalizeGrad { center }, Some(g_expr)),
        axis,
        x.1.dims,
        &[eps],
    )
}
