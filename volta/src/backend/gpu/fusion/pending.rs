//! Pending values: what an elementwise or row op computes, kept as a tree until a
//! consumer splices it into its own kernel or needs it in memory.
use super::builder::{Builder, Fused, MAX_INPUTS, ROW_VALUE, index_of};
use crate::backend::gpu::kernels::elementwise::{convert, map};
use crate::backend::gpu::kernels::{Operand, rows as row, slices};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use volta_kernels::wgsl::{Elem, Expr, Kept, RowOp};

/// The largest tree of one buffer that a held value may keep instead of being
/// written (see [`Pending::cheap_to_recompute`]).
const CHEAP_NODES: usize = 8;

/// A broadcast leaf such a tree may read besides its one buffer: at most this
/// fraction of the value's elements (a bias or a norm's scale, cached when read).
const SMALL_PART: usize = 16;

/// The distinct elements `layout` reads: its dims without the broadcast ones.
fn distinct(layout: &Layout) -> usize {
    layout
        .dims
        .iter()
        .zip(layout.strides.iter())
        .filter(|&(_, &s)| s != 0)
        .map(|(&d, _)| d)
        .product()
}

/// A buffer in memory and the layout an expression reads it through.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    pub(crate) buf: Arc<Pooled>,
    pub(crate) layout: Layout,
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
pub(crate) struct Source {
    /// The value's tree; with `row`, the tree of the elements the row op reads.
    pub(crate) fused: Fused<Leaf>,
    /// Pending buffers spliced into this one, directly or through others.
    pub(crate) spliced: Vec<Weak<Pending>>,
    /// Set when the value is a row op's (a reduction, softmax, normalisation).
    pub(crate) row: Option<RowSpec>,
    /// The pending row op that `fused` reads as `Input(ROW_VALUE)`, if any.
    pub(crate) reads: Option<RowRead>,
    /// For a row op: the pending value whose tree `fused` is (read plainly), which
    /// the row kernel writes as it loads it when something else holds it.
    pub(crate) computes: Option<Weak<Pending>>,
}

/// A row op over `fused`'s elements at every position of `over`, along `axis`.
#[derive(Clone)]
pub(crate) struct RowSpec {
    pub(crate) op: RowOp,
    pub(crate) axis: usize,
    pub(crate) over: Dims,
    /// The element type the op reads (its value has the pending buffer's).
    pub(crate) in_elem: Elem,
    /// The op's own run-time scalars ([`RowOp::scalars`]).
    pub(crate) op_scalars: Vec<u32>,
    /// [`RowOp::NormalizeGrad`]'s gradient: a second tree over `fused`'s leaves
    /// and scalars (see [`RowKernel::grad`](volta_kernels::wgsl::RowKernel::grad)).
    pub(crate) grad: Option<Expr>,
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
pub(crate) enum Relay {
    /// As they are (the consumer reads the operand plainly).
    Same,
    /// Reshaped to the consumer's dims (contiguous ones): each leaf re-read with
    /// those dims through strides that visit its elements in the same order
    /// (`Layout::reshape`: a row-major leaf, a bias broadcast along whole rows),
    /// or not at all when no such strides exist.
    Reshaped(Layout),
    /// Broadcast: the operand's length-1 axes spread over the consumer's.
    Broadcast { from: Dims, to: Dims },
}

impl Relay {
    /// The leaves as the consumer reads them (`None`: one cannot be re-read).
    fn leaves(&self, leaves: &[Leaf]) -> Option<Vec<Leaf>> {
        leaves
            .iter()
            .map(|l| {
                self.apply(&l.layout).map(|layout| Leaf {
                    buf: l.buf.clone(),
                    layout,
                })
            })
            .collect()
    }

    /// A leaf's layout at the consumer's positions (`None`: it cannot be re-read).
    fn apply(&self, l: &Layout) -> Option<Layout> {
        match self {
            Relay::Same => Some(*l),
            Relay::Reshaped(flat) => l.reshape(&flat.dims),
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
pub(crate) struct RowRead {
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

/// Records the values of `spliced` that something still holds and that are not
/// cheap to recompute (see [`Source::spliced`]).
fn materialise_held(spliced: &[Weak<Pending>]) {
    for held in spliced.iter().filter_map(Weak::upgrade) {
        if !held.cheap_to_recompute() {
            held.materialise();
        }
    }
}

/// The value of an elementwise op, not recorded yet.
pub(crate) struct Pending {
    /// The runtime that records it.
    pub(crate) rt: &'static Runtime,
    /// The element type of the value and of every leaf.
    pub(crate) elem: Elem,
    pub(crate) dims: Dims,
    pub(crate) source: Mutex<Option<Source>>,
    pub(crate) done: OnceLock<Arc<Pooled>>,
    /// Pending row ops that compute this value in their loads (each reading it
    /// through the layout): when this value is recorded first, they read its
    /// memory instead (a bias's gradient, summed from the gradient a product
    /// reads), which costs no more than its tree's inputs and frees them.
    pub(crate) readers: Mutex<Vec<(Weak<Pending>, Layout)>>,
    /// The value rounded to `f16` for products in half precision ([`half_copy`]),
    /// kept while the value itself is not in memory.
    ///
    /// [`half_copy`]: Pending::half_copy
    pub(crate) half: Mutex<Option<Arc<Pooled>>>,
}

impl Pending {
    /// The memory holding the value, recording its kernel on first use.
    pub fn materialise(&self) -> &Arc<Pooled> {
        let mut first = false;
        let buf = self.done.get_or_init(|| {
            first = true;
            self.record()
        });
        if first {
            self.now_in(buf);
        }
        buf
    }

    /// Records this pending row op by `record` (a kernel that writes its value
    /// among others), if it is still pending: see [`record_row`].
    ///
    /// [`record_row`]: Pending::record_row
    fn record_with(&self, record: impl FnOnce(Source, Option<Arc<Pending>>) -> Arc<Pooled>) {
        let mut first = false;
        let buf = self.done.get_or_init(|| {
            first = true;
            self.record_row(record)
        });
        if first {
            self.now_in(buf);
        }
    }

    /// What changes once the value is in `buf`: in memory it may be written in
    /// place, which a copy made before would not follow; and the row ops that
    /// computed it in their loads read that memory instead.
    fn now_in(&self, buf: &Arc<Pooled>) {
        *self.half.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.hand_to_readers(buf);
    }

    /// The value rounded to `f16`, for a product in half precision: recorded from
    /// the value's tree on first use and kept, while the value itself stays
    /// pending for its other consumers. Those may never come: a norm's rows or an
    /// activation that only products read (forward and for a weight's gradient)
    /// are then never written in `f32`. `None` once the value is in memory, for a
    /// value that is not `f32`, and for one that a pending row op computes in its
    /// loads (a bias's gradient, summed from the gradient the product reads): that
    /// value is better written once in `f32`, for both (the row op would otherwise
    /// keep the value's inputs until it is recorded, and compute the value again).
    /// The caller reads the value's memory instead.
    pub(crate) fn half_copy(&self) -> Option<Arc<Pooled>> {
        if self.elem != Elem::F32 || self.is_materialised() || self.has_readers() {
            return None;
        }
        if let Some(h) = &*self.half.lock().unwrap_or_else(|p| p.into_inner()) {
            return Some(h.clone());
        }
        let (is_row, spliced) = {
            let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
            let source = guard.as_ref()?;
            (source.row.is_some(), source.spliced.clone())
        };
        // As `record` orders them: a row op reads what the held values write.
        if is_row {
            materialise_held(&spliced);
        }
        let buf = {
            let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
            let source = guard.as_ref()?;
            let f = &source.fused;
            let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
            match (&source.row, &source.reads) {
                (None, Some(read)) => self.with_row_value(f.clone(), read, Elem::F16),
                (Some(spec), _) => {
                    let scalars = [&spec.op_scalars[..], &f.scalars].concat();
                    let exprs = (f.expr.clone(), spec.grad.as_ref());
                    let elems = (spec.in_elem, Elem::F16);
                    row::rows(
                        self.rt, elems, spec.op, exprs, None, &ops, &scalars, &spec.over, spec.axis,
                    )
                }
                (None, None) => {
                    let elems = (self.elem, Elem::F16);
                    convert(self.rt, elems, f.expr.clone(), &ops, &f.scalars, &self.dims)
                }
            }
        };
        if !is_row {
            materialise_held(&spliced);
        }
        *self.half.lock().unwrap_or_else(|p| p.into_inner()) = Some(buf.clone());
        Some(buf)
    }

    /// The `f16` copy a product in half precision made of this value
    /// ([`half_copy`](Pending::half_copy)), while the value is pending, for a
    /// reader whose `layout` reads it as the plain array it is (the copy's
    /// layout).
    pub(crate) fn kept_half(&self, layout: &Layout) -> Option<Arc<Pooled>> {
        if self.is_materialised() || !self.read_plainly(layout) {
            return None;
        }
        self.half.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether a pending row op still computes this value in its loads.
    fn has_readers(&self) -> bool {
        let readers = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        readers
            .iter()
            .any(|(r, _)| r.upgrade().is_some_and(|r| !r.is_materialised()))
    }

    /// Points the pending row ops that computed this value in their loads at
    /// its memory, `buf`.
    fn hand_to_readers(&self, buf: &Arc<Pooled>) {
        let readers = std::mem::take(&mut *self.readers.lock().unwrap_or_else(|p| p.into_inner()));
        for (reader, layout) in readers {
            let Some(reader) = reader.upgrade() else {
                continue;
            };
            let mut guard = reader.source.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(source) = guard.as_mut() {
                source.fused = Fused::read(Leaf {
                    buf: buf.clone(),
                    layout,
                });
            }
        }
    }

    /// Records the value's kernel (`materialise`'s first call) and the held
    /// values spliced into it that are not cheap to recompute. An elementwise
    /// value's come after its kernel, so that a row op's value that this kernel
    /// wrote counts as memory they read; a row op's come first, so that it reads
    /// the operand they write (`hand_to_readers`) rather than computing it again.
    ///
    /// A row op that writes rows and computes, in its loads, a value that must be
    /// written (held, not cheap) writes that value itself as it loads it
    /// ([`Kept::input`]): a norm of the residual stream writes the stream.
    fn record(&self) -> Arc<Pooled> {
        if self.with_source(|source| source.row.is_some()) {
            return self.record_row(|source, input| self.record_plain_row(source, input));
        }
        let mut source = self.take_source();
        let spliced = std::mem::take(&mut source.spliced);
        let buf = self.record_source(source);
        materialise_held(&spliced);
        buf
    }

    /// `f` of the source, which a value being recorded still has.
    fn with_source<R>(&self, f: impl FnOnce(&Source) -> R) -> R {
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        f(guard
            .as_ref()
            .expect("a pending buffer has its source until it is materialised"))
    }

    /// The source, taken to record the value's kernel.
    fn take_source(&self) -> Source {
        self.source
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .expect("a pending buffer has its source until it is materialised")
    }

    /// Records this row op by `record`, given its source and the value its tree
    /// computes that the kernel should write ([`input_to_write`]): the held
    /// values spliced into it first, but for that one.
    ///
    /// [`input_to_write`]: Pending::input_to_write
    fn record_row(
        &self,
        record: impl FnOnce(Source, Option<Arc<Pending>>) -> Arc<Pooled>,
    ) -> Arc<Pooled> {
        let (held, input) =
            self.with_source(|source| (source.spliced.clone(), self.input_to_write(source)));
        let others: Vec<Weak<Pending>> = match &input {
            Some(v) => {
                let v = Arc::downgrade(v);
                held.into_iter().filter(|w| !w.ptr_eq(&v)).collect()
            }
            None => held,
        };
        materialise_held(&others);
        let mut source = self.take_source();
        source.spliced.clear();
        // (Recording the others may have written it: this kernel then reads it.)
        record(source, input.filter(|v| !v.is_materialised()))
    }

    /// Records the row op of `source` on its own, writing `input` too if given.
    fn record_plain_row(&self, source: Source, input: Option<Arc<Pending>>) -> Arc<Pooled> {
        if let Some(v) = input
            && let Some(buf) = self.record_writing_input(&source, &v)
        {
            return buf;
        }
        self.record_source(source)
    }

    /// The value this row op (with `source`) computes in its loads, if the row
    /// kernel should write it ([`Kept::input`]): something else holds it, it is
    /// not cheap to recompute (so it would be written anyway), the op writes
    /// rows, and every tensor fits a binding.
    fn input_to_write(&self, source: &Source) -> Option<Arc<Pending>> {
        let spec = source.row.as_ref()?;
        let v = source.computes.as_ref()?.upgrade()?;
        let limit = self.rt.gpu.limits.max_storage_buffer_binding_size;
        let bytes = |e: Elem| (spec.over.numel() * e.size()) as u64;
        let ops: Vec<Operand> = source
            .fused
            .leaves
            .iter()
            .map(|l| (&l.buf, &l.layout))
            .collect();
        let fits = bytes(self.elem).max(bytes(v.elem)) <= limit && !slices::needed(self.rt, &ops);
        let binds = self.rt.gpu.limits.max_storage_buffers_per_shader_stage as usize;
        let writes = spec.op.writes_rows() && spec.grad.is_none() && spec.in_elem == v.elem;
        (writes
            && fits
            && ops.len() + 3 <= binds
            && v.dims.numel() == spec.over.numel()
            && !v.is_materialised()
            && !v.cheap_to_recompute())
        .then_some(v)
    }

    /// Records this row op's kernel from `source`, writing `v` (the value its
    /// tree computes) too, which takes that memory; `None` (nothing recorded)
    /// where the tensors need the kernels that slice.
    fn record_writing_input(&self, source: &Source, v: &Pending) -> Option<Arc<Pooled>> {
        let spec = source.row.as_ref()?;
        let f = &source.fused;
        let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
        let scalars = [&spec.op_scalars[..], &f.scalars].concat();
        let keeps = Kept {
            value: None,
            input: Some(v.elem),
        };
        let (rows, kept) = row::rows_keeping(
            self.rt,
            (spec.in_elem, self.elem),
            keeps,
            spec.op,
            (f.expr.clone(), None),
            None,
            &ops,
            &scalars,
            &spec.over,
            spec.axis,
        )?;
        v.adopt(kept.into_iter().next().expect("the kept input"));
        Some(rows)
    }

    /// Takes `buf`, written by another value's kernel, as this value's memory
    /// (it was pending), then records its held values as [`record`] does after
    /// an elementwise kernel.
    ///
    /// [`record`]: Pending::record
    fn adopt(&self, buf: Arc<Pooled>) {
        let spliced = self
            .source
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .map(|s| s.spliced)
            .unwrap_or_default();
        if self.done.set(buf).is_ok()
            && let Some(buf) = self.done.get()
        {
            self.now_in(buf);
        }
        materialise_held(&spliced);
    }

    /// Records the kernel of `source`, this value's.
    fn record_source(&self, source: Source) -> Arc<Pooled> {
        let f = source.fused;
        if let Some(spec) = source.row {
            let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
            let scalars = [&spec.op_scalars[..], &f.scalars].concat();
            let elems = (spec.in_elem, self.elem);
            let exprs = (f.expr, spec.grad.as_ref());
            return row::rows(
                self.rt, elems, spec.op, exprs, None, &ops, &scalars, &spec.over, spec.axis,
            );
        }
        match source.reads {
            Some(read) => self.with_row_value(f, &read, self.elem),
            None => {
                let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
                map(self.rt, self.elem, f.expr, &ops, &f.scalars, &self.dims)
            }
        }
    }

    /// Records a tree that reads a row op's value: the row op with this tree as its
    /// epilogue when they fit one kernel (which, when something else holds the
    /// row op, writes the row op's rows too: [`with_held_rows`]), or else the row
    /// op on its own, read from memory. The tree runs over the row op's own dims
    /// (the value broadcast along the row, or the rows it writes) or, for a
    /// reduction nothing else holds, over the reduced dims (once per row). The
    /// value is stored as `out_elem`.
    ///
    /// [`with_held_rows`]: Pending::with_held_rows
    fn with_row_value(&self, f: Fused<Leaf>, read: &RowRead, out_elem: Elem) -> Arc<Pooled> {
        if Arc::strong_count(&read.value) == 1 {
            if let Some(source) = read.value.row_source()
                && let Some((out, _)) =
                    self.as_epilogue(&f, read, source, out_elem, Kept::default())
            {
                return out;
            }
        } else if let Some(out) = self.with_held_rows(&f, read, out_elem) {
            return out;
        }
        let f = read.in_memory(f);
        let ops: Vec<Operand> = f.leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
        convert(
            self.rt,
            (self.elem, out_elem),
            f.expr,
            &ops,
            &f.scalars,
            &self.dims,
        )
    }

    /// A row op that writes rows and that something else holds (a norm's rows,
    /// kept for the backward pass) recorded with this tree as its epilogue, in
    /// one kernel that writes both: the row op's rows become its memory, and the
    /// tree's values (its affine) the result. Against recording the row op and
    /// then the tree, this saves reading the rows back and a launch. `None`
    /// (nothing recorded) where they do not fit one kernel, or the tree does not
    /// run over the rows.
    fn with_held_rows(
        &self,
        f: &Fused<Leaf>,
        read: &RowRead,
        out_elem: Elem,
    ) -> Option<Arc<Pooled>> {
        let rows = &read.value;
        let (spec, _) = rows.row_source()?;
        if !spec.op.writes_rows()
            || spec.over[..] != self.dims[..]
            || read.layout != spec.fused_read()
        {
            return None;
        }
        let mut out = None;
        rows.record_with(|source, input| {
            let spec = source.row.clone().expect("a pending row op has its spec");
            // The rows, and the value the row op computes where it writes that.
            let keeps = Kept {
                value: Some(rows.elem),
                input: input.as_ref().map(|v| v.elem),
            };
            match self.as_epilogue(f, read, (spec, source.fused.clone()), out_elem, keeps) {
                Some((epilogue, kept)) => {
                    let mut kept = kept.into_iter();
                    let value = kept.next().expect("the kept rows");
                    if let (Some(v), Some(buf)) = (input, kept.next()) {
                        v.adopt(buf);
                    }
                    out = Some(epilogue);
                    value
                }
                None => rows.record_plain_row(source, input),
            }
        });
        out
    }

    /// The row op `(spec, rf)` with `f` (read through `read`) as its epilogue, in
    /// one kernel, if they fit one: its value stored as `out_elem`, and what
    /// `keeps` asks for too (see [`with_held_rows`]), returned in its order.
    /// The leaves that the epilogue reads are bound once with the row op's.
    ///
    /// [`with_held_rows`]: Pending::with_held_rows
    fn as_epilogue(
        &self,
        f: &Fused<Leaf>,
        read: &RowRead,
        (spec, rf): (RowSpec, Fused<Leaf>),
        out_elem: Elem,
        keeps: Kept,
    ) -> Option<(Arc<Pooled>, Vec<Arc<Pooled>>)> {
        let c = self.rt;
        let (mut leaves, per_row) =
            if spec.over[..] == self.dims[..] && read.layout == spec.fused_read() {
                (f.leaves.clone(), false)
            } else if keeps.outputs() == 0 {
                (
                    spec.per_row_leaves(&f.leaves, &read.layout, &self.dims)?,
                    true,
                )
            } else {
                return None;
            };
        let at: Vec<usize> = rf
            .leaves
            .iter()
            .map(|l| index_of(&mut leaves, l.clone()))
            .collect();
        let n_in = leaves.len();
        let outputs = 1 + keeps.outputs();
        let limit = c.gpu.limits.max_storage_buffers_per_shader_stage as usize;
        let ops: Vec<Operand> = leaves.iter().map(|l| (&l.buf, &l.layout)).collect();
        let out_bytes = (self.dims.numel() * out_elem.size()) as u64;
        // Tensors past a binding's size are left to the kernels that slice.
        // The kernel reads every leaf as the row op's input type: the
        // tree's own leaves (of this value's type) must be of it too
        // (split-K's f32 partials summed into an f16 value plus its bias
        // are not).
        let fits = (spec.in_elem == self.elem || f.leaves.is_empty())
            && n_in + 1 + outputs <= limit.min(MAX_INPUTS + 2)
            && !slices::needed(c, &ops)
            && out_bytes <= c.gpu.limits.max_storage_buffer_binding_size;
        if !fits {
            return None;
        }
        let body = rf.expr.substitute(&|i| Expr::input(at[i]), &Expr::scalar);
        let grad = spec
            .grad
            .as_ref()
            .map(|g| g.substitute(&|i| Expr::input(at[i]), &Expr::scalar));
        let skip = rf.scalars.len();
        let epilogue = f.expr.substitute(
            &|i| Expr::input(if i == ROW_VALUE { n_in } else { i }),
            &|j| Expr::scalar(skip + j),
        );
        let scalars = [&spec.op_scalars[..], &rf.scalars, &f.scalars].concat();
        let exprs = (body, grad.as_ref());
        if keeps.outputs() == 0 {
            let out = row::rows(
                c,
                (spec.in_elem, out_elem),
                spec.op,
                exprs,
                Some((&epilogue, per_row)),
                &ops,
                &scalars,
                &spec.over,
                spec.axis,
            );
            return Some((out, Vec::new()));
        }
        row::rows_keeping(
            c,
            (spec.in_elem, out_elem),
            keeps,
            spec.op,
            exprs,
            Some(&epilogue),
            &ops,
            &scalars,
            &spec.over,
            spec.axis,
        )
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
    /// through `layout` as the plain row-major array it is, possibly reshaped (a
    /// sum over several axes reads `(B, T, C)` as `(B·T, C)`): its leaves are then
    /// re-read at the reshaped positions ([`Relay::Reshaped`]), or it is `None`.
    /// With it, what its consumer must treat as spliced in (see
    /// [`Source::spliced`]): the pending values in it, and itself.
    pub(crate) fn fused_view(
        self: &Arc<Self>,
        layout: &Layout,
    ) -> Option<(Fused<Leaf>, Vec<Weak<Pending>>)> {
        if !self.read_plainly(layout) {
            return None;
        }
        let relay = if layout.dims[..] == self.dims[..] {
            Relay::Same
        } else {
            Relay::Reshaped(Layout::contiguous(&layout.dims))
        };
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let s = guard.as_ref().filter(|s| s.row.is_none())?;
        let f = match &s.reads {
            Some(read) => read.in_memory(s.fused.clone()),
            None => s.fused.clone(),
        };
        let leaves = relay.leaves(&f.leaves)?;
        let mut spliced = s.spliced.clone();
        spliced.push(Arc::downgrade(self));
        Some((Fused { leaves, ..f }, spliced))
    }

    /// Whether `layout` reads this value as the row-major array it is (possibly
    /// reshaped): offset 0, contiguous, every element once.
    fn read_plainly(&self, layout: &Layout) -> bool {
        layout.offset == 0 && layout.is_contiguous() && layout.numel() == self.dims.numel()
    }

    /// Whether a later consumer recomputes this value for what reading it from
    /// memory would cost: a small tree of at most one buffer of its own size,
    /// read element for element, at most a few small broadcast ones, and drawn
    /// numbers (dropout's mask, a function of the drawn uniform numbers alone,
    /// and its product with the value it drops from; a product plus its bias; a
    /// normalised row times its scale). A row op's value it reads counts as such
    /// a buffer once that value is in memory. Such a value stays pending when a
    /// consumer it was spliced into is recorded, though something still holds it
    /// (an autograd node's input): writing it would only add a kernel and its
    /// bytes, while its one full-size buffer is held either way.
    fn cheap_to_recompute(&self) -> bool {
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        let numel = self.dims.numel();
        guard.as_ref().is_some_and(|s| {
            let read = match &s.reads {
                None => Some(0),
                Some(r) if r.value.is_materialised() => {
                    Some(usize::from(r.value.dims.numel() == numel))
                }
                Some(_) => None,
            };
            let Some(row_values) = read else {
                return false;
            };
            let whole = |l: &Leaf| l.layout.numel() == numel && !l.layout.strides.contains(&0);
            let small = |l: &Leaf| SMALL_PART * distinct(&l.layout) <= numel;
            // Drawn numbers cost no reads: they count as neither.
            let drawn = |l: &Leaf| l.buf.draws().is_some();
            let full = s
                .fused
                .leaves
                .iter()
                .filter(|l| whole(l) && !drawn(l))
                .count();
            s.row.is_none()
                && s.fused.expr.nodes() <= CHEAP_NODES
                && full + row_values <= 1
                && s.fused
                    .leaves
                    .iter()
                    .all(|l| whole(l) || small(l) || drawn(l))
        })
    }

    /// Whether this pending elementwise value reads a pending row op that
    /// nothing else holds, so that recording it now makes them one kernel.
    pub(crate) fn reads_a_lone_row_op(&self) -> bool {
        let guard = self.source.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().is_some_and(|s| {
            s.row.is_none()
                && s.reads
                    .as_ref()
                    .is_some_and(|r| !r.value.is_materialised() && Arc::strong_count(&r.value) == 1)
        })
    }

    /// Whether its kernel has been recorded.
    pub fn is_materialised(&self) -> bool {
        self.done.get().is_some()
    }

    /// Splices this value into `b`'s tree if it is read through `layout` (whose dims
    /// are the consumer's) as a plain row-major array, possibly reshaped, or
    /// broadcast, and still pending. A row op's value becomes `Input(ROW_VALUE)`
    /// and the consumer's [`RowRead`] (one per consumer; `reads`).
    pub(crate) fn splice_into(
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
            let free = b.has_room_for(1 + reserve);
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
        // A row op's value already in memory is read as a leaf: the consumer's one
        // row value stays free for a pending one.
        let (fused, source_reads) = match &source.reads {
            Some(r) if r.value.is_materialised() => (r.in_memory(source.fused.clone()), None),
            r => (source.fused.clone(), r.as_ref()),
        };
        let leaves = relay.leaves(&fused.leaves);
        let row_read = match source_reads {
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
            expr: fused.expr,
            leaves: leaves?,
            scalars: fused.scalars,
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
