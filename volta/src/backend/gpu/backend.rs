//! `Gpu` as a backend: each tensor-level op of the `Backend` traits mapped to a
//! kernel family (`kernels`), through fusion for elementwise and row ops. Shape
//! logic and autograd live above, shared with the CPU; this file only chooses
//! kernels.
use super::Gpu;
use super::device::{self, rt, state};
use super::fusion::{self, GpuBuffer};
use super::kernels::elementwise::{convert, fill, map, write};
use super::kernels::infer::{self, GpuQuantized};
use super::kernels::{attention, index, matmul, optim, window};
use super::runtime::Runtime;
use super::runtime::error::GpuError;
use super::runtime::launch::alloc;
use super::runtime::pool::Pooled;
use super::runtime::transfer;
use crate::backend::infer::{AttnShape, QFusion, QShape};
use crate::backend::{
    AdamInput, AdamOutput, AdamStep, AttentionSpec, Backend, Buf, Cast, Device, Memory, SgdStep,
    View,
};
use crate::dtype::f16;
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr, RowOp};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

impl Device for Gpu {
    const NAME: &'static str = "Gpu";
}

/// The contiguous device buffer holding a view, and the view's first element in
/// it: a strided view is made contiguous on the device first.
fn packed<E>(
    rt: &Runtime,
    buf: &GpuBuffer<E>,
    layout: &Layout,
    elem: Elem,
) -> (Arc<Pooled>, usize) {
    if layout.numel() == 0 || layout.is_contiguous() {
        return (buf.raw().clone(), layout.offset);
    }
    let packed = map(
        rt,
        elem,
        Expr::input(0),
        &[(buf.raw(), layout)],
        &[],
        &layout.dims,
    );
    (packed, 0)
}

/// `a × b` (plus `bias`, a view along the product's columns) of tensors holding
/// `elem`. In half precision, pending `f32` operands are rounded to `f16` from
/// their trees rather than written in `f32` and rounded in the product's loads
/// (the same values, half the bytes), and operands in memory that the product
/// reads many times (weights) by a copy kept for their next products. (Operands
/// past a binding's size keep the product that slices.)
fn product<E>(
    elem: Elem,
    a: (&GpuBuffer<E>, &Layout),
    b: (&GpuBuffer<E>, &Layout),
    bias: Option<(&GpuBuffer<E>, &Layout)>,
) -> GpuBuffer<E> {
    let dims = [a.1.dims[0], a.1.dims[1], b.1.dims[2]];
    let len = dims.iter().product();
    let s = state();
    let limit = s.rt.gpu.limits.max_storage_buffer_binding_size;
    let bound = |x: &GpuBuffer<E>| (x.len() * elem.size()) as u64 <= limit;
    let half =
        elem == Elem::F32 && bound(a.0) && bound(b.0) && matmul::rounds_operands(&s.rt, a.1, b.1);
    let with = bias.map(|(buf, l)| (buf.raw(), l.offset));
    let product = if half {
        let [ca, cb] = matmul::copies_operands(dims[0], dims[1], a.1.dims[2], dims[2]);
        let ha = fusion::half_operand(&s.rt, a.0, ca);
        let hb = fusion::half_operand(&s.rt, b.0, cb);
        let elems = ([ha.1, hb.1], elem);
        matmul::matmul(&s.rt, &s.tuning, elems, (&ha.0, a.1), (&hb.0, b.1), with)
    } else {
        let (a, b) = ((a.0.raw(), a.1), (b.0.raw(), b.1));
        matmul::matmul(&s.rt, &s.tuning, ([elem; 2], elem), a, b, with)
    };
    let sum = match product {
        // With its bias, if it had one.
        matmul::Product::Done(out) => return GpuBuffer::new(out, len),
        // The sum of split-K's partial products is a pending reduction: the
        // product's consumer (its bias included) can run in its kernel.
        matmul::Product::Partials(p, dims) => {
            fusion::rows_of(rt(), Elem::F32, elem, (p, Layout::contiguous(&dims)), 0)
        }
    };
    match bias {
        // Split: the bias follows the sum, pending like it.
        Some(c) => {
            let e = Expr::input(0).binary(BinaryOp::Add, Expr::input(1));
            elementwise(elem, e, &[(&sum, &Layout::contiguous(&dims)), c], &[])
        }
        None => sum,
    }
}

macro_rules! memory {
    ($t:ty, $elem:expr) => {
        // Keeps rustc's "other types implement" list (which would quote this
        // macro) out of the error for an unsupported element type.
        #[diagnostic::do_not_recommend]
        impl Memory<$t> for Gpu {
            type Buffer = GpuBuffer<$t>;
            fn from_vec(data: Vec<$t>) -> Self::Buffer {
                Self::from_slice(&data)
            }
            fn from_slice(data: &[$t]) -> Self::Buffer {
                GpuBuffer::new(transfer::upload(rt(), data), data.len())
            }
            fn full(len: usize, value: $t) -> Self::Buffer {
                GpuBuffer::new(fill(rt(), $elem, len, value.scalar_bits()), len)
            }
            type Error = GpuError;
            fn try_to_vec(buf: &Self::Buffer, layout: &Layout) -> Result<Vec<$t>, GpuError> {
                let rt = &device::init()?.rt;
                let (packed, offset) = packed(rt, buf, layout, $elem);
                transfer::download(rt, &packed, offset, layout.numel())
            }
            fn try_read_into(
                buf: &Self::Buffer,
                layout: &Layout,
                out: &mut Vec<$t>,
            ) -> Result<(), GpuError> {
                let rt = &device::init()?.rt;
                let (packed, offset) = packed(rt, buf, layout, $elem);
                transfer::download_into(rt, &packed, offset, layout.numel(), out)
            }
            fn read_into_later(
                buf: &Self::Buffer,
                layout: &Layout,
                out: Vec<$t>,
            ) -> impl Future<Output = Result<Vec<$t>, GpuError>> + Send + 'static {
                let n = layout.numel();
                let read = device::init().and_then(|s| {
                    let (packed, offset) = packed(&s.rt, buf, layout, $elem);
                    transfer::Reading::start::<$t>(&s.rt, &packed, offset, n)
                });
                async move { read?.finish(out).await }
            }
            fn try_to_vec_async(
                buf: &Self::Buffer,
                layout: &Layout,
            ) -> impl Future<Output = Result<Vec<$t>, GpuError>> + 'static {
                // The packing is recorded now, while `buf` is borrowed.
                let start = device::init().map(|s| (&s.rt, packed(&s.rt, buf, layout, $elem)));
                let n = layout.numel();
                async move {
                    let (rt, (packed, offset)) = start?;
                    transfer::download_async(rt, &packed, offset, n).await
                }
            }
            fn contiguous(buf: &Self::Buffer, layout: &Layout) -> Self::Buffer {
                let c = rt();
                let out = map(
                    c,
                    $elem,
                    Expr::input(0),
                    &[(buf.raw(), layout)],
                    &[],
                    &layout.dims,
                );
                GpuBuffer::new(out, layout.numel())
            }
            fn same_memory(a: &Self::Buffer, b: &Self::Buffer) -> bool {
                a.same_memory(b)
            }
            fn compute_deferred(buf: &Self::Buffer) {
                buf.realize();
            }
            fn settle_gradient(buf: &Self::Buffer) {
                buf.settle();
            }
        }
    };
}
/// A host scalar as a kernel reads it from the parameter block: `u32` as is,
/// floats as `f32` bits (an `f16` widens exactly).
trait Bits {
    fn scalar_bits(self) -> u32;
}
impl Bits for u32 {
    fn scalar_bits(self) -> u32 {
        self
    }
}
impl Bits for f32 {
    fn scalar_bits(self) -> u32 {
        self.to_bits()
    }
}
impl Bits for f16 {
    fn scalar_bits(self) -> u32 {
        self.to_f32().to_bits()
    }
}
memory!(f32, Elem::F32);
memory!(f16, Elem::F16);
memory!(u32, Elem::U32);

/// `expr` over same-dims views of `elem`: a pending value (see `fusion`).
fn elementwise<E>(
    elem: Elem,
    expr: Expr,
    inputs: &[(&GpuBuffer<E>, &Layout)],
    scalars: &[u32],
) -> GpuBuffer<E> {
    fusion::elementwise(rt(), elem, expr, inputs, scalars, &inputs[0].1.dims)
}

/// The float backend for element type `$t` stored as `$elem` (every kernel
/// computes in `f32`).
macro_rules! float_backend {
    ($t:ty, $elem:expr) => {
        impl Backend<$t> for Gpu {
            fn unary(op: UnaryOp, x: View<Self, $t>) -> Buf<Self, $t> {
                elementwise($elem, Expr::input(0).unary(op), &[x], &[])
            }
            fn binary(op: BinaryOp, a: View<Self, $t>, b: View<Self, $t>) -> Buf<Self, $t> {
                elementwise(
                    $elem,
                    Expr::input(0).binary(op, Expr::input(1)),
                    &[a, b],
                    &[],
                )
            }
            fn binary_scalar(op: BinaryOp, x: View<Self, $t>, scalar: $t) -> Buf<Self, $t> {
                let e = Expr::input(0).binary(op, Expr::scalar(0));
                elementwise($elem, e, &[x], &[scalar.scalar_bits()])
            }
            fn reduce(op: ReduceOp, x: View<Self, $t>, axis: usize) -> Buf<Self, $t> {
                fusion::rows(rt(), $elem, RowOp::Reduce(op), x, axis, &[])
            }
            fn softmax(x: View<Self, $t>, axis: usize, log: bool) -> Buf<Self, $t> {
                let op = if log {
                    RowOp::LogSoftmax
                } else {
                    RowOp::Softmax
                };
                fusion::rows(rt(), $elem, op, x, axis, &[])
            }
            fn matmul(a: View<Self, $t>, b: View<Self, $t>) -> Buf<Self, $t> {
                product($elem, a, b, None)
            }
            fn matmul_add(
                a: View<Self, $t>,
                b: View<Self, $t>,
                c: View<Self, $t>,
            ) -> Buf<Self, $t> {
                // A bias along the columns (broadcast along the batch and the rows)
                // starts the product; anything else is added after it.
                let l = c.1;
                let along_columns = (l.dims[0] == 1 || l.strides[0] == 0)
                    && (l.dims[1] == 1 || l.strides[1] == 0)
                    && (l.dims[2] == 1 || l.strides[2] == 1);
                if along_columns {
                    return product($elem, a, b, Some(c));
                }
                let dims = Layout::contiguous(&[a.1.dims[0], a.1.dims[1], b.1.dims[2]]);
                let p = product($elem, a, b, None);
                <Self as Backend<$t>>::binary(BinaryOp::Add, (&p, &dims), c)
            }
            fn pad(x: View<Self, $t>, pads: &[(usize, usize)], value: $t) -> Buf<Self, $t> {
                let c = rt();
                let dims: Vec<usize> =
                    x.1.dims
                        .iter()
                        .zip(pads)
                        .map(|(d, (b, a))| d + b + a)
                        .collect();
                let out_layout = Layout::contiguous(&dims);
                let n = out_layout.numel();
                let out = fill(c, $elem, n, value.scalar_bits());
                let region = Layout {
                    dims: x.1.dims,
                    strides: out_layout.strides,
                    offset: pads
                        .iter()
                        .zip(out_layout.strides.iter())
                        .map(|((b, _), s)| b * s)
                        .sum(),
                };
                write(
                    c,
                    $elem,
                    Expr::input(0),
                    &[(x.0.raw(), x.1)],
                    &[],
                    (&out, &region),
                );
                GpuBuffer::new(out, n)
            }
            fn cat(parts: &[View<Self, $t>], axis: usize) -> Buf<Self, $t> {
                let c = rt();
                let mut dims = parts[0].1.dims;
                dims[axis] = parts.iter().map(|(_, l)| l.dims[axis]).sum();
                let out_layout = Layout::contiguous(&dims);
                let n = out_layout.numel();
                let out = alloc(c, n * $elem.size());
                let mut start = 0;
                for (buf, l) in parts {
                    let region = Layout {
                        dims: l.dims,
                        strides: out_layout.strides,
                        offset: start * out_layout.strides[axis],
                    };
                    write(
                        c,
                        $elem,
                        Expr::input(0),
                        &[(buf.raw(), l)],
                        &[],
                        (&out, &region),
                    );
                    start += l.dims[axis];
                }
                GpuBuffer::new(out, n)
            }
            fn write_into(buf: &mut Buf<Self, $t>, dst: &Layout, src: View<Self, $t>) {
                write(
                    rt(),
                    $elem,
                    Expr::input(0),
                    &[(src.0.raw(), src.1)],
                    &[],
                    (buf.raw_mut(), dst),
                );
            }
            fn select(cond: View<Self, $t>, a: View<Self, $t>, b: View<Self, $t>) -> Buf<Self, $t> {
                let e = Expr::input(0).select(Expr::input(1), Expr::input(2));
                elementwise($elem, e, &[cond, a, b], &[])
            }
            fn gather(x: View<Self, $t>, axis: usize, idx: View<Self, u32>) -> Buf<Self, $t> {
                let out = index::gather(rt(), $elem, (x.0.raw(), x.1), axis, (idx.0.raw(), idx.1));
                GpuBuffer::new(out, idx.1.numel())
            }
            fn scatter_add(
                dims: &[usize],
                axis: usize,
                idx: View<Self, u32>,
                src: View<Self, $t>,
            ) -> Buf<Self, $t> {
                let out = index::scatter_add(
                    rt(),
                    $elem,
                    dims,
                    axis,
                    (idx.0.raw(), idx.1),
                    (src.0.raw(), src.1),
                );
                GpuBuffer::new(out, dims.iter().product())
            }
            fn unfold2d(x: View<Self, $t>, win: &Window2d, pad_value: $t) -> Buf<Self, $t> {
                let (out, len) =
                    window::unfold2d(rt(), $elem, (x.0.raw(), x.1), win, f32::from(pad_value));
                GpuBuffer::new(out, len)
            }
            fn fold2d(cols: View<Self, $t>, win: &Window2d, input_hw: [usize; 2]) -> Buf<Self, $t> {
                let (out, len) = window::fold2d(rt(), $elem, (cols.0.raw(), cols.1), win, input_hw);
                GpuBuffer::new(out, len)
            }
            fn normalize(x: View<Self, $t>, axis: usize, center: bool, eps: $t) -> Buf<Self, $t> {
                let op = RowOp::Normalize { center };
                fusion::rows(rt(), $elem, op, x, axis, &[eps.scalar_bits()])
            }
            fn normalize_grad(
                x: View<Self, $t>,
                g: View<Self, $t>,
                axis: usize,
                center: bool,
                eps: $t,
            ) -> Buf<Self, $t> {
                fusion::normalize_grad(rt(), $elem, x, g, axis, center, eps.scalar_bits())
            }
            fn uniform(len: usize, seed: u64) -> Buf<Self, $t> {
                fusion::uniform(rt(), $elem, len, seed)
            }
            fn attention(
                q: View<Self, $t>,
                k: View<Self, $t>,
                v: View<Self, $t>,
                spec: &AttentionSpec,
            ) -> (Buf<Self, $t>, Buf<Self, $t>) {
                let (out, lse) = attention::forward(
                    rt(),
                    $elem,
                    [(q.0.raw(), q.1), (k.0.raw(), k.1), (v.0.raw(), v.1)],
                    spec,
                    matmul::precision() == matmul::MatmulPrecision::Half,
                    None,
                );
                let rows = q.1.dims[..3].iter().product();
                (GpuBuffer::new(out, q.1.numel()), GpuBuffer::new(lse, rows))
            }
            fn attention_backward(
                q: View<Self, $t>,
                k: View<Self, $t>,
                v: View<Self, $t>,
                dout: View<Self, $t>,
                lse: View<Self, $t>,
                delta: View<Self, $t>,
                spec: &AttentionSpec,
            ) -> [(Buf<Self, $t>, Layout); 3] {
                let (qb, kb, vb) = (q.0.raw(), k.0.raw(), v.0.raw());
                // The heads of one projection: their gradients in one buffer.
                let one = Arc::ptr_eq(qb, kb)
                    && Arc::ptr_eq(qb, vb)
                    && crate::backend::heads_of_one_projection([q.1, k.1, v.1]);
                let (bufs, layouts) = attention::backward(
                    rt(),
                    $elem,
                    [(qb, q.1), (kb, k.1), (vb, v.1), (dout.0.raw(), dout.1)],
                    [(lse.0.raw(), lse.1), (delta.0.raw(), delta.1)],
                    spec,
                    matmul::precision() == matmul::MatmulPrecision::Half,
                    one.then_some(q.0.len()),
                );
                // (Placed apart where the offsets do not align for windows.)
                let placed_in_one = Arc::ptr_eq(&bufs[0], &bufs[1]);
                std::array::from_fn(|i| {
                    let len = if placed_in_one {
                        q.0.len()
                    } else {
                        layouts[i].numel()
                    };
                    (GpuBuffer::new(bufs[i].clone(), len), layouts[i])
                })
            }
            fn adam_step(
                p: View<Self, $t>,
                g: View<Self, $t>,
                moments: Option<(View<Self, $t>, View<Self, $t>)>,
                hyper: &AdamStep,
            ) -> (Buf<Self, $t>, Buf<Self, $t>, Buf<Self, $t>) {
                let step: AdamInput<'_, Self, $t> = AdamInput {
                    p,
                    g,
                    moments,
                    hyper: *hyper,
                };
                <Self as Backend<$t>>::adam_steps(std::slice::from_ref(&step))
                    .pop()
                    .expect("one step in, one out")
            }
            fn adam_steps(steps: &[AdamInput<'_, Self, $t>]) -> Vec<AdamOutput<Self, $t>> {
                // Pending inputs (a gradient still a fused expression) are recorded first.
                let args: Vec<optim::AdamArgs> = steps
                    .iter()
                    .map(|s| optim::AdamArgs {
                        p: (s.p.0.raw(), s.p.1),
                        g: (s.g.0.raw(), s.g.1),
                        moments: s.moments.map(|(m, v)| ((m.0.raw(), m.1), (v.0.raw(), v.1))),
                        k: s.hyper.constants(),
                    })
                    .collect();
                let outs = optim::adam_steps(rt(), $elem, &args);
                outs.into_iter()
                    .zip(steps)
                    .map(|((p, m, v), s)| {
                        let n = s.p.1.numel();
                        (
                            GpuBuffer::new(p, n),
                            GpuBuffer::new(m, n),
                            GpuBuffer::new(v, n),
                        )
                    })
                    .collect()
            }
            fn sgd_step(
                p: View<Self, $t>,
                g: View<Self, $t>,
                momentum_buffer: Option<View<Self, $t>>,
                hyper: &SgdStep,
            ) -> (Buf<Self, $t>, Option<Buf<Self, $t>>) {
                let k = hyper.constants::<f32>();
                if k.momentum.is_none() {
                    // No state: an elementwise expression, pending like any other, so it
                    // fuses into its consumer. p − (g + λ·p)·lr.
                    let mut grad = Expr::input(1);
                    let mut scalars = vec![k.lr.to_bits()];
                    if let Some(l2) = k.l2 {
                        let decay = Expr::input(0).binary(BinaryOp::Mul, Expr::scalar(1));
                        grad = grad.binary(BinaryOp::Add, decay);
                        scalars.push(l2.to_bits());
                    }
                    let e = Expr::input(0)
                        .binary(BinaryOp::Sub, grad.binary(BinaryOp::Mul, Expr::scalar(0)));
                    return (elementwise($elem, e, &[p, g], &scalars), None);
                }
                let buf = momentum_buffer.map(|b| (b.0.raw(), b.1));
                let (p2, b2) = optim::sgd_momentum_step(
                    rt(),
                    $elem,
                    (p.0.raw(), p.1),
                    (g.0.raw(), g.1),
                    buf,
                    &k,
                );
                let n = p.1.numel();
                (GpuBuffer::new(p2, n), Some(GpuBuffer::new(b2, n)))
            }
        }
    };
}
float_backend!(f32, Elem::F32);
float_backend!(f16, Elem::F16);

macro_rules! cast {
    ($from:ty, $to:ty, $elems:expr) => {
        impl Cast<$from, $to> for Gpu {
            fn cast(x: View<Self, $from>) -> Buf<Self, $to> {
                let c = rt();
                let input = (x.0.raw(), x.1);
                let out = convert(c, $elems, Expr::input(0), &[input], &[], &x.1.dims);
                GpuBuffer::new(out, x.1.numel())
            }
        }
    };
}
cast!(f32, f16, (Elem::F32, Elem::F16));
cast!(f16, f32, (Elem::F16, Elem::F32));
cast!(f32, f32, (Elem::F32, Elem::F32));
cast!(f16, f16, (Elem::F16, Elem::F16));

impl crate::backend::InferenceBackend for Gpu {
    type Quantized = GpuQuantized;
    fn upload_quantized(shape: &QShape, bytes: &[u8]) -> Self::Quantized {
        infer::upload(rt(), shape, bytes)
    }
    fn dequantize_rows(
        w: &Self::Quantized,
        shape: &QShape,
        ids: View<Self, u32>,
    ) -> Buf<Self, f32> {
        let (out, n) = infer::dequantize_rows(rt(), w, shape, Some((ids.0.raw(), ids.1)));
        GpuBuffer::new(out, n)
    }
    fn dequantize(w: &Self::Quantized, shape: &QShape) -> Buf<Self, f32> {
        let (out, n) = infer::dequantize_rows(rt(), w, shape, None);
        GpuBuffer::new(out, n)
    }
    fn qmatmul(
        x: View<Self, f32>,
        w: &Self::Quantized,
        shape: &QShape,
        fusion: QFusion<'_, Self>,
    ) -> Buf<Self, f32> {
        let norm = fusion.norm.map(|(v, eps)| ((v.0.raw(), v.1), eps));
        let add = fusion.add.map(|v| (v.0.raw(), v.1));
        let (out, n) = infer::qmatmul(rt(), (x.0.raw(), x.1), w, shape, norm, fusion.glu, add);
        GpuBuffer::new(out, n)
    }
    fn qgemm(
        x: View<Self, f32>,
        w: &Self::Quantized,
        shape: &QShape,
        fusion: QFusion<'_, Self>,
    ) -> Option<Buf<Self, f32>> {
        let (m, k, n) = (x.1.dims[0], x.1.dims[1], shape.rows);
        if !infer::qgemm_fits(rt(), m, w, shape) {
            return None;
        }
        // Where K splits (a batch of decoded tokens), the norm is fused: the
        // product multiplies x's columns by its weights, the sum of the splits
        // each row by its 1/rms. Elsewhere x is normalised first (a pending op
        // that fuses with whatever made x).
        let split = matmul::quantized_splits(m, n, k) > 1;
        let (fused, first) = match fusion.norm {
            Some((scale, eps)) if split && scale.1.offset % 4 == 0 && scale.1.is_contiguous() => {
                (Some((scale, eps)), None)
            }
            Some((scale, eps)) => {
                let normed = <Self as Backend<f32>>::normalize(x, 1, false, eps);
                let mut across = Layout::contiguous(&[m, k]);
                across.strides = Dims::new(&[0, scale.1.strides[0]]);
                across.offset = scale.1.offset;
                let e = Expr::input(0).binary(BinaryOp::Mul, Expr::input(1));
                let plain = Layout::contiguous(&[m, k]);
                let xn = elementwise(Elem::F32, e, &[(&normed, &plain), (scale.0, &across)], &[]);
                (None, Some((xn, plain)))
            }
            None => (None, None),
        };
        let x = match &first {
            Some((xn, plain)) => (xn.raw(), plain),
            None => (x.0.raw(), x.1),
        };
        let add = fusion.add.map(|v| (v.0.raw(), v.1));
        let scale = fused.map(|(v, _)| (v.0.raw(), v.1));
        Some(match infer::qgemm(rt(), x, w, shape, scale)? {
            // Split-K (a few rows): one kernel sums the partial products and
            // applies the epilogues.
            matmul::Product::Partials(p, dims) => {
                let norm = fused.map(|(_, eps)| (x, eps));
                let (out, len) = infer::split_sum(rt(), &p, dims, norm, fusion.glu, add);
                GpuBuffer::new(out, len)
            }
            // The epilogues as pending elementwise ops, which fuse with what
            // reads them (the next norm, the next residual).
            matmul::Product::Done(out) => {
                let y = GpuBuffer::new(out, m * n);
                let mut dims = [m, n];
                let mut y = if fusion.glu {
                    let half = n / 2;
                    dims = [m, half];
                    let part = |offset| Layout {
                        dims: Dims::new(&dims),
                        strides: Dims::new(&[n, 1]),
                        offset,
                    };
                    let (gate, up) = (part(0), part(half));
                    let e = Expr::input(0)
                        .unary(UnaryOp::Silu)
                        .binary(BinaryOp::Mul, Expr::input(1));
                    elementwise(Elem::F32, e, &[(&y, &gate), (&y, &up)], &[])
                } else {
                    y
                };
                if let Some(r) = fusion.add {
                    let plain = Layout::contiguous(&dims);
                    let e = Expr::input(0).binary(BinaryOp::Add, Expr::input(1));
                    y = elementwise(Elem::F32, e, &[(&y, &plain), r], &[]);
                }
                y
            }
        })
    }
    fn attend(
        qkv: View<Self, f32>,
        rope: View<Self, f32>,
        pos: View<Self, u32>,
        cache: &mut Buf<Self, f32>,
        shape: &AttnShape,
        max_len: usize,
    ) -> Buf<Self, f32> {
        let (out, n) = infer::attend(
            rt(),
            (qkv.0.raw(), qkv.1),
            (rope.0.raw(), rope.1),
            (pos.0.raw(), pos.1),
            cache.raw_mut(),
            shape,
            max_len,
        );
        GpuBuffer::new(out, n)
    }
    fn decode_len(needed: usize, capacity: usize) -> usize {
        infer::decode_len(needed, capacity)
    }
}
