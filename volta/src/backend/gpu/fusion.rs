//! Fusion of elementwise chains, invisible above the backend.
//!
//! A GPU elementwise op (unary, binary, scalar, select, user kernel) does not
//! dispatch: it returns a *pending* buffer, an [`Expr`] over buffers already in
//! memory (each with the layout it is read through) and run-time scalars. An
//! elementwise consumer that reads a pending operand through a plain layout (offset
//! 0, row-major, the operand's dims, or any dims when every input of the operand is
//! itself row-major) splices the operand's tree into its own instead of reading
//! memory; equal (buffer, layout) inputs are bound once, so `x * x` reads `x` once.
//! A row kernel (reduction, softmax, normalisation) reading a pending operand
//! through a plain layout computes the operand's tree in its loads ([`rows`]).
//! Every other consumer (matmul, pad and concat, gather and scatter, window ops,
//! copies, read-backs, strided reads, row kernels over views) *materialises* the
//! operand: its fused kernel is recorded once and the result memoised. Trees stop
//! growing at [`MAX_NODES`] nodes or [`MAX_INPUTS`] inputs: the operand is then
//! materialised and read as one input.
//!
//! When a pending buffer is materialised, the pending buffers spliced into it that
//! something still holds (an optimiser's state, a tensor kept for backward) are
//! materialised too, so a value carried from step to step is not recomputed from an
//! ever longer history of inputs.
//!
//! Pipelines are cached by tree structure and access pattern (`pipelines::Key`);
//! scalars are parameters, so a new learning rate reuses the pipeline. Nothing here
//! waits for the GPU.
use super::buffer::{Data, GpuBuffer};
use super::context::ctx;
use super::elementwise::{Operand, map};
use super::pool::Pooled;
use super::row;
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use volta_kernels::wgsl::{Elem, Expr, RowOp};

/// Largest tree a consumer builds by splicing operands in.
pub(crate) const MAX_NODES: usize = 48;
/// Most distinct inputs a consumer binds after splicing operands in.
pub(crate) const MAX_INPUTS: usize = 8;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether elementwise ops fuse (on unless turned off).
pub(crate) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Turns fusion on or off for the ops recorded from now on.
pub(crate) fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// An expression over leaves `L` (read as `Input(i)`) and scalars (`Scalar(j)`, raw
/// `f32` bits).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Fused<L> {
    pub expr: Expr,
    pub leaves: Vec<L>,
    pub scalars: Vec<u32>,
}

/// Builds the tree of one consumer: collects its distinct leaves and its scalars.
/// Generic over the leaf type so that the splicing rules are tested without a GPU.
pub(crate) struct Builder<L> {
    leaves: Vec<L>,
    scalars: Vec<u32>,
    nodes: usize,
    max_nodes: usize,
    max_inputs: usize,
}

impl<L: Clone + PartialEq> Builder<L> {
    /// A builder whose spliced trees may add up to `max_nodes` nodes and whose
    /// leaves may number `max_inputs`.
    pub fn new(max_nodes: usize, max_inputs: usize) -> Self {
        Builder {
            leaves: Vec::new(),
            scalars: Vec::new(),
            nodes: 0,
            max_nodes,
            max_inputs,
        }
    }

    /// Reads `leaf` (once, however often it is read).
    pub fn leaf(&mut self, leaf: L) -> Expr {
        let i = match self.leaves.iter().position(|l| *l == leaf) {
            Some(i) => i,
            None => {
                self.leaves.push(leaf);
                self.leaves.len() - 1
            }
        };
        Expr::input(i)
    }

    /// Splices `op` in, or returns `None` when that would exceed the limits while
    /// keeping one input free for each of the `reserve` operands still to come.
    pub fn splice(&mut self, op: &Fused<L>, reserve: usize) -> Option<Expr> {
        let nodes = op.expr.nodes();
        let new = op
            .leaves
            .iter()
            .filter(|l| !self.leaves.contains(l))
            .count();
        if self.nodes + nodes > self.max_nodes
            || self.leaves.len() + new + reserve > self.max_inputs
        {
            return None;
        }
        self.nodes += nodes;
        let inputs: Vec<Expr> = op.leaves.iter().map(|l| self.leaf(l.clone())).collect();
        let base = self.scalars.len();
        self.scalars.extend_from_slice(&op.scalars);
        Some(
            op.expr
                .substitute(&|i| inputs[i].clone(), &|j| Expr::scalar(base + j)),
        )
    }

    /// The consumer's tree: `template` with `Input(i)` = `args[i]` and `Scalar(j)` =
    /// its own scalar `scalars[j]`.
    pub fn finish(mut self, template: &Expr, args: &[Expr], scalars: &[u32]) -> Fused<L> {
        let base = self.scalars.len();
        self.scalars.extend_from_slice(scalars);
        Fused {
            expr: template.substitute(&|i| args[i].clone(), &|j| Expr::scalar(base + j)),
            leaves: self.leaves,
            scalars: self.scalars,
        }
    }
}

/// A buffer in memory and the layout an expression reads it through.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    buf: Arc<Pooled>,
    layout: Layout,
}

impl PartialEq for Leaf {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.buf, &other.buf)
            && self.layout.offset == other.layout.offset
            && self.layout.dims[..] == other.layout.dims[..]
            && self.layout.strides[..] == other.layout.strides[..]
    }
}

/// What a pending buffer is computed from, until it is materialised.
struct Source {
    fused: Fused<Leaf>,
    /// Pending buffers spliced into this one, directly or through others.
    spliced: Vec<Weak<Pending>>,
}

/// The value of an elementwise op, not recorded yet.
pub(crate) struct Pending {
    /// The element type of the value and of every leaf.
    elem: Elem,
    dims: Dims,
    source: Mutex<Option<Source>>,
    done: OnceLock<Arc<Pooled>>,
}

impl Pending {
    /// The memory holding the value, recording its kernel on first use.
    pub fn materialise(&self) -> &Arc<Pooled> {
        self.done.get_or_init(|| {
            let source = self
                .source
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .expect("a pending buffer has its source until it is materialised");
            for held in source.spliced.iter().filter_map(Weak::upgrade) {
                held.materialise();
            }
            let f = source.fused;
            let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
            map(ctx(), self.elem, f.expr, &ops, &f.scalars, &self.dims)
        })
    }

    /// The expression computing this value, if it is still pending and read
    /// through `layout` as the plain row-major array it is.
    fn fused_view(&self, layout: &Layout) -> Option<Fused<Leaf>> {
        if !self.read_plainly(layout) || layout.dims[..] != self.dims[..] {
            return None;
        }
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|s| s.fused.clone())
    }

    /// Whether `layout` reads this value as the row-major array it is (possibly
    /// reshaped): offset 0, contiguous, every element once.
    fn read_plainly(&self, layout: &Layout) -> bool {
        layout.offset == 0 && layout.is_contiguous() && layout.numel() == self.dims.numel()
    }

    /// Whether its kernel has been recorded.
    pub fn is_materialised(&self) -> bool {
        self.done.get().is_some()
    }

    /// Splices this value into `b`'s tree if it is read through `layout` (whose dims
    /// are the consumer's) as a plain row-major array and still pending.
    fn splice_into(
        self: &Arc<Self>,
        b: &mut Builder<Leaf>,
        layout: &Layout,
        reserve: usize,
        spliced: &mut Vec<Weak<Pending>>,
    ) -> Option<Expr> {
        if !self.read_plainly(layout) {
            return None;
        }
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let source = guard.as_ref()?;
        let expr = if layout.dims[..] == self.dims[..] {
            b.splice(&source.fused, reserve)?
        } else {
            // A reshaped read: the index spaces match element for element only when
            // every input is row-major too; then each is re-read with the new dims.
            let flat = Layout::contiguous(&layout.dims);
            let leaves: Option<Vec<Leaf>> = source
                .fused
                .leaves
                .iter()
                .map(|l| {
                    l.layout.is_contiguous().then(|| Leaf {
                        buf: l.buf.clone(),
                        layout: Layout {
                            offset: l.layout.offset,
                            ..flat
                        },
                    })
                })
                .collect();
            let relaid = Fused {
                expr: source.fused.expr.clone(),
                leaves: leaves?,
                scalars: source.fused.scalars.clone(),
            };
            b.splice(&relaid, reserve)?
        };
        for w in source.spliced.iter().chain([&Arc::downgrade(self)]) {
            if !spliced.iter().any(|s| s.ptr_eq(w)) {
                spliced.push(w.clone());
            }
        }
        Some(expr)
    }
}

/// `template` at every position of `dims`, with `Input(i)` reading `inputs[i]` (each
/// of dims `dims`) and `Scalar(j)` = `scalars[j]`, as a pending buffer that pending
/// operands were spliced into. With fusion off it is materialised at once. Every
/// buffer holds `elem` (`E`'s kernel type); pending operands of a value have its type,
/// so trees only ever join values of one element type.
pub(crate) fn elementwise<E>(
    elem: Elem,
    template: &Expr,
    inputs: &[(&GpuBuffer<E>, &Layout)],
    scalars: &[u32],
    dims: &[usize],
) -> GpuBuffer<E> {
    let on = enabled();
    let limit = ctx().limits.max_storage_buffers_per_shader_stage as usize;
    // Two storage bindings are the parameter block and the output.
    let max_inputs = MAX_INPUTS.min(limit.saturating_sub(2));
    let mut b = Builder::new(MAX_NODES.saturating_sub(template.nodes()), max_inputs);
    let mut spliced = Vec::new();
    let args: Vec<Expr> = inputs
        .iter()
        .enumerate()
        .map(|(i, (buf, layout))| {
            let reserve = inputs.len() - i - 1;
            if let (true, Data::Pending(p)) = (on, &buf.data)
                && let Some(e) = p.splice_into(&mut b, layout, reserve, &mut spliced)
            {
                return e;
            }
            b.leaf(Leaf {
                buf: buf.raw().clone(),
                layout: **layout,
            })
        })
        .collect();
    let fused = b.finish(template, &args, scalars);
    let pending = Arc::new(Pending {
        elem,
        dims: Dims::new(dims),
        source: Mutex::new(Some(Source { fused, spliced })),
        done: OnceLock::new(),
    });
    let out = GpuBuffer::pending(pending, dims.iter().product());
    if !on {
        out.realize();
    }
    out
}

/// `op` over each row along `axis` of `x` (a reduction, keep-dim, softmax or
/// normalisation), with the op's own run-time scalars `op_scalars` (raw `f32`
/// bits, [`RowOp::scalars`] of them). A pending `x` is computed in the row
/// kernel's loads rather than materialised, and stays pending for its other
/// consumers: recomputing it there costs reads of its inputs (often one full-size
/// tensor and some broadcast ones), while materialising costs a write and a read.
pub(crate) fn rows<E>(
    elem: Elem,
    op: RowOp,
    x: (&GpuBuffer<E>, &Layout),
    axis: usize,
    op_scalars: &[u32],
) -> Arc<Pooled> {
    debug_assert_eq!(op_scalars.len(), op.scalars());
    let (buf, layout) = x;
    if let (true, Data::Pending(p)) = (enabled(), &buf.data)
        && let Some(f) = p.fused_view(layout)
    {
        let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
        let scalars = [op_scalars, &f.scalars].concat();
        let elems = (elem, elem);
        return row::rows(ctx(), elems, op, f.expr, &ops, &scalars, &layout.dims, axis);
    }
    let input: Operand = (buf.raw(), layout);
    row::rows(
        ctx(),
        (elem, elem),
        op,
        Expr::input(0),
        &[input],
        op_scalars,
        &layout.dims,
        axis,
    )
}

#[cfg(test)]
mod tests {
    use super::{Builder, Fused};
    use volta_kernels::wgsl::Expr;
    use volta_kernels::{BinaryOp, UnaryOp};

    fn pending(expr: Expr, leaves: &[&'static str], scalars: &[u32]) -> Fused<&'static str> {
        Fused {
            expr,
            leaves: leaves.to_vec(),
            scalars: scalars.to_vec(),
        }
    }

    #[test]
    fn splices_operands_and_binds_equal_inputs_once() {
        // p = a * b (pending); y = relu(p + c): one tree over a, b, c.
        let p = pending(
            Expr::input(0).binary(BinaryOp::Mul, Expr::input(1)),
            &["a", "b"],
            &[],
        );
        let template = Expr::input(0)
            .binary(BinaryOp::Add, Expr::input(1))
            .unary(UnaryOp::Relu);
        let mut b = Builder::new(48, 8);
        let args = [b.splice(&p, 1).unwrap(), b.leaf("c")];
        let y = b.finish(&template, &args, &[]);
        let expect = Expr::input(0)
            .binary(BinaryOp::Mul, Expr::input(1))
            .binary(BinaryOp::Add, Expr::input(2))
            .unary(UnaryOp::Relu);
        assert_eq!(y, pending(expect, &["a", "b", "c"], &[]));

        // q = x * s0 (pending); q * q reads x once and keeps both scalars.
        let q = pending(
            Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(0)),
            &["x"],
            &[7],
        );
        let mut b = Builder::new(48, 8);
        let args = [b.splice(&q, 1).unwrap(), b.splice(&q, 0).unwrap()];
        let sq = b.finish(
            &Expr::input(0)
                .binary(BinaryOp::Mul, Expr::input(1))
                .binary(BinaryOp::Add, Expr::scalar(0)),
            &args,
            &[9],
        );
        assert_eq!(sq.leaves, vec!["x"]);
        assert_eq!(sq.scalars, vec![7, 7, 9]);
        let x0 = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(0));
        let x1 = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(1));
        assert_eq!(
            sq.expr,
            x0.binary(BinaryOp::Mul, x1)
                .binary(BinaryOp::Add, Expr::scalar(2))
        );
    }

    #[test]
    fn refuses_to_grow_past_the_limits() {
        let wide = pending(
            Expr::input(0)
                .binary(BinaryOp::Add, Expr::input(1))
                .binary(BinaryOp::Add, Expr::input(2)),
            &["a", "b", "c"],
            &[],
        );
        // Three new inputs plus one reserved for the next operand exceed three.
        let mut b = Builder::new(48, 3);
        assert!(b.splice(&wide, 1).is_none());
        assert!(b.splice(&wide, 0).is_some());
        // Five nodes do not fit a budget of four.
        let mut b = Builder::<&str>::new(4, 8);
        assert!(b.splice(&wide, 0).is_none());
    }
}
