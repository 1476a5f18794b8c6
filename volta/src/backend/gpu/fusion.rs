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
//! A consumer may also read a pending operand *broadcast* (`bias.expand(..)`): the
//! operand's leaves are then read with zero strides on the broadcast axes.
//!
//! Row ops are pending too, so fusion also crosses a reduction: an elementwise
//! consumer of a row op's value (RMSNorm's `x · rsqrt(mean(x²) + eps) · w`, a
//! LayerNorm's affine `n · w + b`, `softmax(x) · mask`) reads it as
//! `Input(ROW_VALUE)` ([`RowRead`]), and when the consumer runs over the row op's
//! own dims and nothing else holds the row op, both are one row kernel with the
//! consumer as its epilogue (`RowKernel::epilogue`). Otherwise the row op is
//! recorded on its own and read from memory.
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
use super::elementwise::{Operand, Small, map};
use super::pool::Pooled;
use super::row;
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use volta_kernels::ReduceOp;
use volta_kernels::wgsl::{Elem, Expr, RowOp};

/// The input index of a pending row op's value in a tree ([`RowRead`]); replaced
/// by a real input before any kernel is built.
const ROW_VALUE: usize = u16::MAX as usize;

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
        Expr::input(index_of(&mut self.leaves, leaf))
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
        Some(op.expr.substitute(
            &|i| {
                if i == ROW_VALUE {
                    Expr::input(ROW_VALUE)
                } else {
                    inputs[i].clone()
                }
            },
            &|j| Expr::scalar(base + j),
        ))
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

/// The index of `leaf` in `leaves`, appended if it is not there (an input bound
/// once however often it is read).
fn index_of<L: PartialEq>(leaves: &mut Vec<L>, leaf: L) -> usize {
    match leaves.iter().position(|l| *l == leaf) {
        Some(i) => i,
        None => {
            leaves.push(leaf);
            leaves.len() - 1
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
    /// The value's tree; with `row`, the tree of the elements the row op reads.
    fused: Fused<Leaf>,
    /// Pending buffers spliced into this one, directly or through others.
    spliced: Vec<Weak<Pending>>,
    /// Set when the value is a row op's (a reduction, softmax, normalisation).
    row: Option<RowSpec>,
    /// The pending row op that `fused` reads as `Input(ROW_VALUE)`, if any.
    reads: Option<RowRead>,
}

/// A row op over `fused`'s elements at every position of `over`, along `axis`.
#[derive(Clone)]
struct RowSpec {
    op: RowOp,
    axis: usize,
    over: Dims,
    /// The element type the op reads (its value has the pending buffer's).
    in_elem: Elem,
    /// The op's own run-time scalars ([`RowOp::scalars`]).
    op_scalars: Vec<u32>,
}

impl RowSpec {
    /// The reduced dims: `over` with the axis set to 1.
    fn reduced(&self) -> Dims {
        let mut d = self.over;
        d[self.axis] = 1;
        d
    }

    /// A reduction's consumer over the reduced dims (once per row), its leaves
    /// re-read over `over` with stride 0 along the axis: when the consumer
    /// (`dims`) reads the value as the plain array it is, and runs over the
    /// reduced dims themselves or over them without the axis (a matmul's
    /// `[1, m, n]` read as `[m, n]`).
    fn per_row_leaves(&self, leaves: &[Leaf], read: &Layout, dims: &Dims) -> Option<Vec<Leaf>> {
        let reduced = self.reduced();
        let plain = read.offset == 0 && read.is_contiguous() && read.numel() == reduced.numel();
        if !matches!(self.op, RowOp::Reduce(_)) || !plain {
            return None;
        }
        let squeezed: Vec<usize> = (0..reduced.len())
            .filter(|&a| a != self.axis)
            .map(|a| reduced[a])
            .collect();
        let insert = if dims[..] == reduced[..] {
            false
        } else if dims[..] == squeezed[..] {
            true
        } else {
            return None;
        };
        let relay = |l: &Layout| {
            let (mut d, mut st) = (l.dims.to_vec(), l.strides.to_vec());
            if insert {
                d.insert(self.axis, 1);
                st.insert(self.axis, 0);
            }
            d[self.axis] = self.over[self.axis];
            st[self.axis] = 0;
            Layout {
                dims: Dims::new(&d),
                strides: Dims::new(&st),
                offset: l.offset,
            }
        };
        Some(
            leaves
                .iter()
                .map(|l| Leaf {
                    buf: l.buf.clone(),
                    layout: relay(&l.layout),
                })
                .collect(),
        )
    }

    /// How a consumer running over `over` reads the op's value when it fuses: as
    /// the op writes it (rows), or a reduction's value broadcast along the axis.
    fn fused_read(&self) -> Layout {
        let mut out = Layout::contiguous(&self.over);
        if !self.op.writes_rows() {
            let mut dims = self.over;
            dims[self.axis] = 1;
            out = Layout::contiguous(&dims);
            out.dims = self.over;
            out.strides[self.axis] = 0;
        }
        out
    }
}

/// How a spliced operand's leaves (of its dims) are read at its consumer's
/// positions.
enum Relay {
    /// As they are (the consumer reads the operand plainly).
    Same,
    /// Reshaped to the consumer's dims (contiguous ones): the index spaces match
    /// element for element only when every leaf is row-major too.
    Reshaped(Layout),
    /// Broadcast: the operand's length-1 axes spread over the consumer's.
    Broadcast { from: Dims, to: Dims },
}

impl Relay {
    /// A leaf's layout at the consumer's positions (`None`: it cannot be re-read).
    fn apply(&self, l: &Layout) -> Option<Layout> {
        match self {
            Relay::Same => Some(*l),
            Relay::Reshaped(flat) => l.is_contiguous().then_some(Layout {
                offset: l.offset,
                ..*flat
            }),
            Relay::Broadcast { from, to } => {
                let mut r = *l;
                r.dims = *to;
                for a in 0..to.len() {
                    if from[a] != to[a] {
                        r.strides[a] = 0;
                    }
                }
                Some(r)
            }
        }
    }
}

/// A tree's read of a pending row op's value: `Input(ROW_VALUE)` through `layout`
/// (the value's memory layout as the tree's positions see it).
#[derive(Clone)]
struct RowRead {
    value: Arc<Pending>,
    layout: Layout,
}

impl RowRead {
    fn same(&self, other: &RowRead) -> bool {
        Arc::ptr_eq(&self.value, &other.value) && self.layout == other.layout
    }

    /// `f` reading the row op's value from memory (recorded now if pending): one
    /// more leaf in place of `Input(ROW_VALUE)`.
    fn in_memory(&self, f: Fused<Leaf>) -> Fused<Leaf> {
        let mut leaves = f.leaves;
        let leaf = Leaf {
            buf: self.value.materialise().clone(),
            layout: self.layout,
        };
        let at = index_of(&mut leaves, leaf);
        let expr = f.expr.substitute(
            &|i| Expr::input(if i == ROW_VALUE { at } else { i }),
            &Expr::scalar,
        );
        Fused {
            expr,
            leaves,
            scalars: f.scalars,
        }
    }
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
            if let Some(spec) = source.row {
                let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
                let scalars = [&spec.op_scalars[..], &f.scalars].concat();
                let elems = (spec.in_elem, self.elem);
                let expr = f.expr;
                return row::rows(
                    ctx(),
                    elems,
                    spec.op,
                    expr,
                    None,
                    &ops,
                    &scalars,
                    &spec.over,
                    spec.axis,
                );
            }
            match source.reads {
                Some(read) => self.with_row_value(f, read),
                None => {
                    let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
                    map(ctx(), self.elem, f.expr, &ops, &f.scalars, &self.dims)
                }
            }
        })
    }

    /// Records a tree that reads a row op's value: the row op with this tree as its
    /// epilogue when they fit one kernel and nothing else holds the row op (else it
    /// would run twice), or else the row op on its own, read from memory. The tree
    /// runs over the row op's own dims (the value broadcast along the row, or the
    /// rows it writes) or, for a reduction, over the reduced dims (once per row).
    fn with_row_value(&self, f: Fused<Leaf>, read: RowRead) -> Arc<Pooled> {
        let c = ctx();
        let alone = Arc::strong_count(&read.value) == 1;
        if let (true, Some((spec, rf))) = (alone, read.value.row_source()) {
            let fused = if spec.over[..] == self.dims[..] && read.layout == spec.fused_read() {
                Some((f.leaves.clone(), false))
            } else {
                spec.per_row_leaves(&f.leaves, &read.layout, &self.dims)
                    .map(|l| (l, true))
            };
            if let Some((mut leaves, per_row)) = fused {
                let at: Vec<usize> = rf
                    .leaves
                    .iter()
                    .map(|l| index_of(&mut leaves, l.clone()))
                    .collect();
                let n_in = leaves.len();
                let limit = c.limits.max_storage_buffers_per_shader_stage as usize;
                let ops: Vec<Operand> = leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
                let out_bytes = (self.dims.numel() * self.elem.size()) as u64;
                // Tensors past a binding's size are left to the kernels that slice.
                let fits = n_in + 2 <= limit.min(MAX_INPUTS + 2)
                    && !super::split::needed(c, &ops)
                    && out_bytes <= c.limits.max_storage_buffer_binding_size;
                if fits {
                    let body = rf.expr.substitute(&|i| Expr::input(at[i]), &Expr::scalar);
                    let skip = rf.scalars.len();
                    let epilogue = f.expr.substitute(
                        &|i| Expr::input(if i == ROW_VALUE { n_in } else { i }),
                        &|j| Expr::scalar(skip + j),
                    );
                    let scalars = [&spec.op_scalars[..], &rf.scalars, &f.scalars].concat();
                    return row::rows(
                        c,
                        (spec.in_elem, self.elem),
                        spec.op,
                        body,
                        Some((&epilogue, per_row)),
                        &ops,
                        &scalars,
                        &spec.over,
                        spec.axis,
                    );
                }
            }
        }
        let f = read.in_memory(f);
        let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
        map(c, self.elem, f.expr, &ops, &f.scalars, &self.dims)
    }

    /// The row op and the tree it reads, while it is pending.
    fn row_source(&self) -> Option<(RowSpec, Fused<Leaf>)> {
        if self.is_materialised() {
            return None;
        }
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let s = guard.as_ref()?;
        Some((s.row.clone()?, s.fused.clone()))
    }

    /// The expression computing this value, if it is still pending and read
    /// through `layout` as the plain row-major array it is.
    fn fused_view(&self, layout: &Layout) -> Option<Fused<Leaf>> {
        if !self.read_plainly(layout) || layout.dims[..] != self.dims[..] {
            return None;
        }
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let s = guard.as_ref().filter(|s| s.row.is_none())?;
        Some(match &s.reads {
            Some(read) => read.in_memory(s.fused.clone()),
            None => s.fused.clone(),
        })
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
    /// are the consumer's) as a plain row-major array, possibly reshaped, or
    /// broadcast, and still pending. A row op's value becomes `Input(ROW_VALUE)`
    /// and the consumer's [`RowRead`] (one per consumer; `reads`).
    fn splice_into(
        self: &Arc<Self>,
        b: &mut Builder<Leaf>,
        layout: &Layout,
        reserve: usize,
        spliced: &mut Vec<Weak<Pending>>,
        reads: &mut Option<RowRead>,
    ) -> Option<Expr> {
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let source = guard.as_ref()?;
        if source.row.is_some() {
            // Read from memory if fusion does not happen: one input in either case.
            let read = RowRead {
                value: self.clone(),
                layout: *layout,
            };
            let free = b.leaves.len() + 1 + reserve <= b.max_inputs;
            return match reads {
                Some(r) if r.same(&read) => Some(Expr::input(ROW_VALUE)),
                None if free => {
                    *reads = Some(read);
                    Some(Expr::input(ROW_VALUE))
                }
                _ => None,
            };
        }
        // How each leaf (of this value's dims) is read at the consumer's positions.
        let relay = if self.read_plainly(layout) {
            if layout.dims[..] == self.dims[..] {
                Relay::Same
            } else {
                Relay::Reshaped(Layout::contiguous(&layout.dims))
            }
        } else if self.broadcast_by(layout) {
            Relay::Broadcast {
                from: self.dims,
                to: layout.dims,
            }
        } else {
            return None;
        };
        let leaves: Option<Vec<Leaf>> = source
            .fused
            .leaves
            .iter()
            .map(|l| {
                relay.apply(&l.layout).map(|layout| Leaf {
                    buf: l.buf.clone(),
                    layout,
                })
            })
            .collect();
        let row_read = match &source.reads {
            Some(r) => Some(RowRead {
                value: r.value.clone(),
                layout: relay.apply(&r.layout)?,
            }),
            None => None,
        };
        // One row value per consumer; it takes an input of its own.
        let extra = match (&row_read, &*reads) {
            (Some(r), Some(mine)) if !r.same(mine) => return None,
            (Some(_), None) => 1,
            _ => 0,
        };
        let relaid = Fused {
            expr: source.fused.expr.clone(),
            leaves: leaves?,
            scalars: source.fused.scalars.clone(),
        };
        let expr = b.splice(&relaid, reserve + extra)?;
        if let Some(r) = row_read {
            *reads = Some(r);
        }
        for w in source.spliced.iter().chain([&Arc::downgrade(self)]) {
            if !spliced.iter().any(|s| s.ptr_eq(w)) {
                spliced.push(w.clone());
            }
        }
        Some(expr)
    }

    /// Whether `layout` reads this value broadcast to more dims: offset 0, each
    /// axis either the value's own (row-major strides) or a length-1 axis spread
    /// with stride 0.
    fn broadcast_by(&self, layout: &Layout) -> bool {
        let own = Layout::contiguous(&self.dims);
        layout.offset == 0
            && layout.dims.len() == self.dims.len()
            && (0..self.dims.len()).all(|a| {
                if layout.dims[a] == self.dims[a] {
                    self.dims[a] == 1 || layout.strides[a] == own.strides[a]
                } else {
                    self.dims[a] == 1 && layout.strides[a] == 0
                }
            })
    }
}

/// `template` at every position of `dims`, with `Input(i)` reading `inputs[i]` (each
/// of dims `dims`) and `Scalar(j)` = `scalars[j]`, as a pending buffer that pending
/// operands were spliced into. With fusion off it is recorded at once. Every
/// buffer holds `elem` (`E`'s kernel type); pending operands of a value have its type,
/// so trees only ever join values of one element type.
pub(crate) fn elementwise<E>(
    elem: Elem,
    template: Expr,
    inputs: &[(&GpuBuffer<E>, &Layout)],
    scalars: &[u32],
    dims: &[usize],
) -> GpuBuffer<E> {
    if !enabled() {
        // Recorded at once: no tree to build, nothing pending.
        let ops: Small<Operand> = inputs.iter().map(|(b, l)| (b.raw(), *l)).collect();
        let out = map(ctx(), elem, template, &ops, scalars, dims);
        return GpuBuffer::new(out, dims.iter().product());
    }
    let limit = ctx().limits.max_storage_buffers_per_shader_stage as usize;
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
        elem,
        dims: Dims::new(dims),
        source: Mutex::new(Some(Source {
            fused,
            spliced,
            row: None,
            reads,
        })),
        done: OnceLock::new(),
    });
    GpuBuffer::pending(pending, dims.iter().product())
}

/// The sum along `axis` of a buffer in memory of `in_elem` (split-K's partial
/// products), as a pending reduction of `elem` values (see [`rows`]).
pub(crate) fn rows_of<E>(
    in_elem: Elem,
    elem: Elem,
    (buf, layout): (Arc<Pooled>, Layout),
    axis: usize,
) -> GpuBuffer<E> {
    let fused = Fused {
        expr: Expr::input(0),
        leaves: vec![Leaf { buf, layout }],
        scalars: Vec::new(),
    };
    pending_row(
        elem,
        fused,
        RowOp::Reduce(ReduceOp::Sum),
        axis,
        layout.dims,
        in_elem,
        &[],
    )
}

/// A pending row op (recorded at once with fusion off).
fn pending_row<E>(
    elem: Elem,
    fused: Fused<Leaf>,
    op: RowOp,
    axis: usize,
    over: Dims,
    in_elem: Elem,
    op_scalars: &[u32],
) -> GpuBuffer<E> {
    let mut dims = over;
    if !op.writes_rows() {
        dims[axis] = 1;
    }
    let pending = Arc::new(Pending {
        elem,
        dims,
        source: Mutex::new(Some(Source {
            fused,
            spliced: Vec::new(),
            row: Some(RowSpec {
                op,
                axis,
                over,
                in_elem,
                op_scalars: op_scalars.to_vec(),
            }),
            reads: None,
        })),
        done: OnceLock::new(),
    });
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
/// some broadcast ones), while materialising costs a write and a read. With fusion
/// off the row kernel is recorded at once.
pub(crate) fn rows<E>(
    elem: Elem,
    op: RowOp,
    x: (&GpuBuffer<E>, &Layout),
    axis: usize,
    op_scalars: &[u32],
) -> GpuBuffer<E> {
    debug_assert_eq!(op_scalars.len(), op.scalars());
    let (buf, layout) = x;
    let on = enabled();
    let fused = match (on, &buf.data) {
        (true, Data::Pending(p)) => p.fused_view(layout),
        _ => None,
    }
    .unwrap_or_else(|| Fused {
        expr: Expr::input(0),
        leaves: vec![Leaf {
            buf: buf.raw().clone(),
            layout: *layout,
        }],
        scalars: Vec::new(),
    });
    pending_row(elem, fused, op, axis, layout.dims, elem, op_scalars)
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
