//! The CPU device: buffers are `Arc<Vec<E>>`, kernels are strided loops (rayon
//! above a size threshold) and a tuned GEMM.

mod attention;
mod buffers;
mod copy;
mod elementwise;
mod index;
mod infer;
mod kernel;
mod matmul;
mod normalize;
mod optim;
mod pool;
mod q8;
mod quantized;
mod recover;
mod reduce;
mod rows;
mod simd;
mod softmax;
mod window;

use super::infer::{AttnShape, QFusion, QShape};
use super::{
    AdamStep, AttentionSpec, Backend, Buf, Device, InferenceBackend, KernelBackend, Memory, Replay,
    SgdStep, View,
};
use crate::dtype::{Element, Float};
use crate::layout::Layout;
pub use quantized::CpuQuantized;
use rayon::prelude::*;
use std::sync::Arc;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

/// The CPU device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cpu;

/// Work below this many elements runs on one thread (threads cost ~µs to wake).
pub(crate) const PARALLEL_THRESHOLD: usize = 1 << 15;

impl Device for Cpu {
    const NAME: &'static str = "Cpu";
}

impl<E: Element> Memory<E> for Cpu {
    type Buffer = Arc<Vec<E>>;
    fn from_vec(data: Vec<E>) -> Self::Buffer {
        Arc::new(data)
    }
    fn full(len: usize, value: E) -> Self::Buffer {
        Arc::new(vec![value; len])
    }
    type Error = std::convert::Infallible;
    fn try_to_vec(buf: &Self::Buffer, layout: &Layout) -> Result<Vec<E>, Self::Error> {
        Ok(copy::strided_to_vec(buf, layout))
    }
    fn contiguous(buf: &Self::Buffer, layout: &Layout) -> Self::Buffer {
        Arc::new(copy::strided_to_vec(buf, layout))
    }
    fn same_memory(a: &Self::Buffer, b: &Self::Buffer) -> bool {
        Arc::ptr_eq(a, b)
    }
}

impl<E: Float> Backend<E> for Cpu {
    fn unary(op: UnaryOp, x: View<Self, E>) -> Buf<Self, E> {
        Arc::new(elementwise::unary(op, x.0, x.1))
    }
    fn binary(op: BinaryOp, a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E> {
        Arc::new(elementwise::binary(op, (a.0, a.1), (b.0, b.1)))
    }
    fn binary_scalar(op: BinaryOp, x: View<Self, E>, scalar: E) -> Buf<Self, E> {
        Arc::new(elementwise::binary_scalar(op, x.0, x.1, scalar))
    }
    fn reduce(op: ReduceOp, x: View<Self, E>, axis: usize) -> Buf<Self, E> {
        Arc::new(reduce::reduce(op, x.0, x.1, axis))
    }
    fn softmax(x: View<Self, E>, axis: usize, log: bool) -> Buf<Self, E> {
        Arc::new(softmax::softmax(x.0, x.1, axis, log))
    }
    fn matmul(a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E> {
        Arc::new(matmul::matmul((a.0, a.1), (b.0, b.1)))
    }
    fn pad(x: View<Self, E>, pads: &[(usize, usize)], value: E) -> Buf<Self, E> {
        Arc::new(copy::pad(x.0, x.1, pads, value))
    }
    fn cat(parts: &[View<Self, E>], axis: usize) -> Buf<Self, E> {
        let parts: Vec<(&[E], &Layout)> = parts.iter().map(|(b, l)| (b.as_slice(), *l)).collect();
        Arc::new(copy::cat(&parts, axis))
    }
    fn write_into(buf: &mut Buf<Self, E>, dst: &Layout, src: View<Self, E>) {
        let values = copy::strided_to_vec(src.0, src.1);
        let data = Arc::make_mut(buf);
        for (at, v) in dst.offsets().zip(values) {
            data[at] = v;
        }
    }
    fn select(cond: View<Self, E>, a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E> {
        Arc::new(elementwise::select(
            (cond.0, cond.1),
            (a.0, a.1),
            (b.0, b.1),
        ))
    }
    fn gather(x: View<Self, E>, axis: usize, idx: View<Self, u32>) -> Buf<Self, E> {
        Arc::new(index::gather(x.0, x.1, axis, idx.0, idx.1))
    }
    fn scatter_add(
        dims: &[usize],
        axis: usize,
        idx: View<Self, u32>,
        src: View<Self, E>,
    ) -> Buf<Self, E> {
        Arc::new(index::scatter_add(dims, axis, idx.0, idx.1, src.0, src.1))
    }
    fn unfold2d(x: View<Self, E>, win: &Window2d, pad_value: E) -> Buf<Self, E> {
        Arc::new(window::unfold2d(x.0, x.1, win, pad_value))
    }
    fn fold2d(cols: View<Self, E>, win: &Window2d, input_hw: [usize; 2]) -> Buf<Self, E> {
        Arc::new(window::fold2d(cols.0, cols.1, win, input_hw))
    }
    fn normalize(x: View<Self, E>, axis: usize, center: bool, eps: E) -> Buf<Self, E> {
        Arc::new(normalize::normalize(x.0, x.1, axis, center, eps))
    }
    fn normalize_grad(
        x: View<Self, E>,
        g: View<Self, E>,
        axis: usize,
        center: bool,
        eps: E,
    ) -> Buf<Self, E> {
        Arc::new(normalize::normalize_grad(
            (x.0, x.1),
            (g.0, g.1),
            axis,
            center,
            eps,
        ))
    }
    fn uniform(len: usize, seed: u64) -> Buf<Self, E> {
        // Chunks of 8192 draws, each in the CPU's widest vectors (the hash inlined).
        const CHUNK: usize = 1 << 13;
        let fill = |(c, chunk): (usize, &mut [std::mem::MaybeUninit<E>])| {
            simd::vectorized(
                #[inline(always)]
                || {
                    for (j, o) in chunk.iter_mut().enumerate() {
                        let u = crate::random::uniform_at(seed, (c * CHUNK + j) as u64);
                        o.write(E::from_f64(f64::from(u)));
                    }
                },
            )
        };
        // SAFETY: the chunks cover the buffer and each `fill` writes all of its chunk.
        Arc::new(unsafe {
            buffers::filled_by(len, |out| {
                if len >= PARALLEL_THRESHOLD {
                    out.par_chunks_mut(CHUNK).enumerate().for_each(fill);
                } else {
                    out.chunks_mut(CHUNK).enumerate().for_each(fill);
                }
            })
        })
    }
    fn attention(
        q: View<Self, E>,
        k: View<Self, E>,
        v: View<Self, E>,
        spec: &AttentionSpec,
    ) -> (Buf<Self, E>, Buf<Self, E>) {
        let (out, lse) = attention::attention((q.0, q.1), (k.0, k.1), (v.0, v.1), spec);
        (Arc::new(out), Arc::new(lse))
    }
    fn attention_backward(
        q: View<Self, E>,
        k: View<Self, E>,
        v: View<Self, E>,
        dout: View<Self, E>,
        lse: View<Self, E>,
        delta: View<Self, E>,
        spec: &AttentionSpec,
    ) -> [(Buf<Self, E>, Layout); 3] {
        let (dq, dk, dv) = attention::attention_backward(
            (q.0, q.1),
            (k.0, k.1),
            (v.0, v.1),
            (dout.0, dout.1),
            (lse.0, lse.1),
            (delta.0, delta.1),
            spec,
        );
        let packed = |l: &Layout| crate::backend::packed_like(l);
        [
            (Arc::new(dq), packed(q.1)),
            (Arc::new(dk), packed(k.1)),
            (Arc::new(dv), packed(v.1)),
        ]
    }
    fn adam_step(
        p: View<Self, E>,
        g: View<Self, E>,
        moments: Option<(View<Self, E>, View<Self, E>)>,
        hyper: &AdamStep,
    ) -> (Buf<Self, E>, Buf<Self, E>, Buf<Self, E>) {
        let moments = moments.map(|(m, v)| ((&m.0[..], m.1), (&v.0[..], v.1)));
        let k = hyper.constants::<E::Acc>();
        let (p, m, v) = optim::adam_step((p.0, p.1), (g.0, g.1), moments, &k);
        (Arc::new(p), Arc::new(m), Arc::new(v))
    }
    fn sgd_step(
        p: View<Self, E>,
        g: View<Self, E>,
        momentum_buffer: Option<View<Self, E>>,
        hyper: &SgdStep,
    ) -> (Buf<Self, E>, Option<Buf<Self, E>>) {
        let buf = momentum_buffer.map(|b| (&b.0[..], b.1));
        let (p, b) = optim::sgd_step((p.0, p.1), (g.0, g.1), buf, &hyper.constants::<E::Acc>());
        (Arc::new(p), b.map(Arc::new))
    }
}

impl<A: Float, B: Float> super::Cast<A, B> for Cpu {
    fn cast(x: View<Self, A>) -> Buf<Self, B> {
        // Through f64, which holds every f16, f32 and f64 exactly: one rounding.
        let convert = |v: A| B::from_f64(v.to_f64());
        let data = match rows::contiguous_slice(x.0, x.1) {
            Some(s) => s.iter().copied().map(convert).collect(),
            None => copy::strided_to_vec(x.0, x.1)
                .into_iter()
                .map(convert)
                .collect(),
        };
        Arc::new(data)
    }
}

impl KernelBackend for Cpu {
    fn call_kernel(
        def: &'static volta_kernels::KernelDef,
        partial: Option<usize>,
        tensors: &[View<Self, f32>],
        scalars: &[f32],
    ) -> Buf<Self, f32> {
        let views: Vec<(&[f32], &Layout)> =
            tensors.iter().map(|(b, l)| (b.as_slice(), *l)).collect();
        Arc::new(kernel::call_kernel(def, partial, &views, scalars))
    }
}

impl InferenceBackend for Cpu {
    type Quantized = Arc<CpuQuantized>;
    fn upload_quantized(shape: &QShape, bytes: &[u8]) -> Self::Quantized {
        quantized::upload(shape, bytes)
    }
    fn dequantize_rows(
        w: &Self::Quantized,
        shape: &QShape,
        ids: View<Self, u32>,
    ) -> Buf<Self, f32> {
        Arc::new(infer::dequantize_rows(w, shape, (ids.0, ids.1)))
    }
    fn dequantize(w: &Self::Quantized, shape: &QShape) -> Buf<Self, f32> {
        let ids: Vec<u32> = (0..shape.rows as u32).collect();
        let layout = Layout::contiguous(&[shape.rows]);
        Arc::new(infer::dequantize_rows(w, shape, (&ids, &layout)))
    }
    fn qmatmul(
        x: View<Self, f32>,
        w: &Self::Quantized,
        shape: &QShape,
        fusion: QFusion<'_, Self>,
    ) -> Buf<Self, f32> {
        let norm = fusion.norm.map(|(v, eps)| ((&v.0[..], v.1), eps));
        let add = fusion.add.map(|v| (&v.0[..], v.1));
        Arc::new(infer::qmatmul(
            (x.0, x.1),
            w,
            shape,
            norm,
            fusion.glu,
            add,
            fusion.activations,
        ))
    }
    fn attend(
        qkv: View<Self, f32>,
        rope: View<Self, f32>,
        pos: View<Self, u32>,
        cache: &mut Buf<Self, f32>,
        shape: &AttnShape,
        _max_len: usize,
    ) -> Buf<Self, f32> {
        let rows = infer::Rows::of((&pos.0[..], pos.1), qkv.1.dims[0]);
        let (qkv, rope) = ((&qkv.0[..], qkv.1), (&rope.0[..], rope.1));
        Arc::new(infer::attend(qkv, rope, &rows, cache, shape))
    }
}

/// The CPU runs work as it is called: there is nothing to capture.
impl Replay for Cpu {
    type Graph = std::convert::Infallible;
    fn capture<R>(f: impl FnOnce() -> R) -> (R, Option<Self::Graph>) {
        (f(), None)
    }
    fn replay(graph: &Self::Graph) {
        match *graph {}
    }
    fn overwrite(buf: &mut Buf<Self, u32>, data: &[u32]) {
        Arc::make_mut(buf)[..data.len()].copy_from_slice(data);
    }
}
