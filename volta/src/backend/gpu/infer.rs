//! Transformer-inference kernels on the GPU (`shaders/qmatmul.wgsl`,
//! `qrows.wgsl`, `kv_write.wgsl`, `attention.wgsl`): quantised weights stay in
//! blocks in device memory, repacked to whole `u32` words.
use super::context::Context;
use super::launch::{alloc, grid, kernel, launch, u};
use super::pipelines::{Bindings, Key};
use super::pool::Pooled;
use crate::backend::infer::{AttnShape, QShape};
use crate::io::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType};
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr};

const QMATMUL: &str = include_str!("../../../../shaders/qmatmul.wgsl");
const QROWS: &str = include_str!("../../../../shaders/qrows.wgsl");
const KV_WRITE: &str = include_str!("../../../../shaders/kv_write.wgsl");
const ATTENTION: &str = include_str!("../../../../shaders/attention.wgsl");

/// Quantised weights in device memory: blocks repacked to whole `u32` words
/// (Q4_0 `[d as f32, 4 words]`, Q4_1 ggml's own 5 words, Q8_0 `[d as f32, 8
/// words]`).
#[derive(Clone)]
pub struct GpuQuantized(pub(crate) Arc<Pooled>);

impl std::fmt::Debug for GpuQuantized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuQuantized({} bytes)", self.0.buffer.size())
    }
}

/// Words per repacked block.
fn words(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q4_1 => 5,
        GgmlType::Q8_0 => 9,
        other => panic!("{other} is not a block type (Q4_0, Q4_1, Q8_0)"),
    }
}

fn repack(shape: &QShape, bytes: &[u8]) -> Vec<u32> {
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let mut out = Vec::new();
    match shape.ty {
        GgmlType::Q4_0 => {
            for b in bytes.chunks_exact(BlockQ4_0::BYTES) {
                let blk = BlockQ4_0::from_bytes(b.try_into().expect("a block"));
                out.push(blk.d.to_f32().to_bits());
                out.extend(blk.qs.chunks_exact(4).map(word));
            }
        }
        GgmlType::Q4_1 => out.extend(bytes.chunks_exact(4).map(word)),
        GgmlType::Q8_0 => {
            for b in bytes.chunks_exact(BlockQ8_0::BYTES) {
                let blk = BlockQ8_0::from_bytes(b.try_into().expect("a block"));
                out.push(blk.d.to_f32().to_bits());
                let qs: Vec<u8> = blk.qs.iter().map(|&q| q as u8).collect();
                out.extend(qs.chunks_exact(4).map(word));
            }
        }
        other => panic!("{other} is not a block type (Q4_0, Q4_1, Q8_0)"),
    }
    debug_assert_eq!(BlockQ4_1::BYTES % 4, 0);
    out
}

pub(crate) fn upload(ctx: &Context, shape: &QShape, bytes: &[u8]) -> GpuQuantized {
    let words = repack(shape, bytes);
    let buf = super::transfer::upload(ctx, &words);
    GpuQuantized(buf.raw().clone())
}

/// The source of a kernel specialised to a block type.
fn specialised(src: &str, ty: GgmlType) -> String {
    format!(
        "const WORDS: u32 = {}u;\nconst QTYPE: u32 = {}u;\n{src}",
        words(ty),
        ty.id()
    )
}

/// A view's buffer, offset and row stride, with unit stride along its last axis
/// (copied first if it has not).
fn rows(ctx: &Context, x: (&Arc<Pooled>, &Layout)) -> (Arc<Pooled>, u32, u32) {
    let l = x.1;
    let r = l.rank();
    if l.strides[r - 1] == 1 || l.dims[r - 1] == 1 {
        let stride = if r >= 2 { l.strides[r - 2] } else { 0 };
        (x.0.clone(), u(l.offset), u(stride))
    } else {
        let copy = super::elementwise::map(ctx, Elem::F32, Expr::input(0), &[x], &[], &l.dims);
        (copy, 0, u(l.dims[r - 1]))
    }
}

/// Dequantised rows: `ids = Some` → rows `ids`, else every row.
pub(crate) fn dequantize_rows(
    ctx: &Context,
    w: &GpuQuantized,
    shape: &QShape,
    ids: Option<(&Arc<Pooled>, &Layout)>,
) -> (Arc<Pooled>, usize) {
    let use_ids = ids.is_some();
    let (n, ids, ids_offset) = match ids {
        Some((b, l)) => {
            let (b, o) = if l.is_contiguous() {
                (b.clone(), u(l.offset))
            } else {
                let copy = super::elementwise::map(
                    ctx,
                    Elem::U32,
                    Expr::input(0),
                    &[(b, l)],
                    &[],
                    &l.dims,
                );
                (copy, 0)
            };
            (l.numel(), b, o)
        }
        None => (shape.rows, w.0.clone(), 0),
    };
    let len = n * shape.cols;
    let out = alloc(ctx, len * 4);
    if len == 0 {
        return (out, 0);
    }
    let kern = kernel(
        ctx,
        Key::Named("volta qrows", vec![shape.ty.id()]),
        Bindings {
            reads: 2,
            writes: 1,
        },
        "main",
        || specialised(QROWS, shape.ty),
    );
    let params = [
        u(n),
        u(shape.cols),
        ids_offset,
        u(shape.rows),
        u32::from(use_ids),
    ];
    launch(
        ctx,
        &kern,
        &params,
        &[&w.0, &ids, &out],
        grid(ctx, len.div_ceil(256)),
    );
    (out, len)
}

/// An optional read-only view's buffer and offset (`x`'s buffer, unread, when
/// absent: every binding needs a buffer).
fn optional(x: Option<(Arc<Pooled>, u32, u32)>, stand_in: &Arc<Pooled>) -> (Arc<Pooled>, u32, u32) {
    x.unwrap_or_else(|| (stand_in.clone(), 0, 0))
}

/// See [`InferenceBackend::qmatmul`](crate::backend::InferenceBackend::qmatmul):
/// one workgroup per 8 outputs of one row of `x`.
pub(crate) fn qmatmul(
    ctx: &Context,
    x: (&Arc<Pooled>, &Layout),
    w: &GpuQuantized,
    shape: &QShape,
    norm: Option<((&Arc<Pooled>, &Layout), f32)>,
    glu: bool,
    add: Option<(&Arc<Pooled>, &Layout)>,
) -> (Arc<Pooled>, usize) {
    let m = x.1.dims[0];
    let width = if glu { shape.rows / 2 } else { shape.rows };
    let out = alloc(ctx, m * width * 4);
    if m * width == 0 {
        return (out, 0);
    }
    let (xb, xo, xs) = rows(ctx, x);
    let eps = norm.map_or(0.0, |(_, e)| e);
    let (nb, no, _) = optional(norm.map(|(v, _)| rows(ctx, v)), &xb);
    let (rb, ro, rs) = optional(add.map(|v| rows(ctx, v)), &xb);
    let flags = u32::from(norm.is_some()) | u32::from(glu) << 1 | u32::from(add.is_some()) << 2;
    let params = [
        u(m),
        u(shape.rows),
        u(shape.cols),
        xo,
        xs,
        flags,
        eps.to_bits(),
        no,
        ro,
        rs,
    ];
    let kern = kernel(
        ctx,
        Key::Named("volta qmatmul", vec![shape.ty.id()]),
        Bindings {
            reads: 4,
            writes: 1,
        },
        "main",
        || specialised(QMATMUL, shape.ty),
    );
    launch(
        ctx,
        &kern,
        &params,
        &[&w.0, &xb, &nb, &rb, &out],
        [u(width.div_ceil(8)), u(m), 1],
    );
    (out, m * width)
}

/// The parameters shared by the KV-cache kernels.
fn attn_params(
    ctx: &Context,
    qkv: (&Arc<Pooled>, &Layout),
    rope: (&Arc<Pooled>, &Layout),
    pos: (&Arc<Pooled>, &Layout),
    s: &AttnShape,
) -> (Arc<Pooled>, Vec<u32>) {
    let (qb, qo, qs) = rows(ctx, qkv);
    assert!(
        rope.1.is_contiguous() && pos.1.numel() == 1,
        "kv kernels: a contiguous RoPE table and a one-element position"
    );
    let params = vec![
        u(qkv.1.dims[0]),
        u(s.heads),
        u(s.kv_heads),
        u(s.head_dim),
        u(s.capacity),
        qo,
        qs,
        u(pos.1.offset),
        u(rope.1.offset),
    ];
    (qb, params)
}

pub(crate) fn kv_write(
    ctx: &Context,
    qkv: (&Arc<Pooled>, &Layout),
    rope: (&Arc<Pooled>, &Layout),
    pos: (&Arc<Pooled>, &Layout),
    keys: &Arc<Pooled>,
    values: &Arc<Pooled>,
    s: &AttnShape,
) {
    let threads = qkv.1.dims[0] * s.kv_heads * s.head_dim / 2;
    if threads == 0 {
        return;
    }
    let (qb, params) = attn_params(ctx, qkv, rope, pos, s);
    let kern = kernel(
        ctx,
        Key::Named("volta kv_write", vec![]),
        Bindings {
            reads: 3,
            writes: 2,
        },
        "main",
        || KV_WRITE.to_string(),
    );
    launch(
        ctx,
        &kern,
        &params,
        &[&qb, rope.0, pos.0, keys, values],
        grid(ctx, threads.div_ceil(256)),
    );
}

/// Keys per chunk of the split attention (`CHUNK` in attention.wgsl).
const CHUNK: usize = 64;

#[allow(clippy::too_many_arguments)]
pub(crate) fn cached_attention(
    ctx: &Context,
    qkv: (&Arc<Pooled>, &Layout),
    rope: (&Arc<Pooled>, &Layout),
    pos: (&Arc<Pooled>, &Layout),
    keys: &Arc<Pooled>,
    values: &Arc<Pooled>,
    s: &AttnShape,
    max_len: usize,
) -> (Arc<Pooled>, usize) {
    assert!(
        s.head_dim <= 256 && s.head_dim.is_multiple_of(2),
        "cached_attention: head_dim {} (the GPU kernel takes even widths up to 256)",
        s.head_dim
    );
    let t = qkv.1.dims[0];
    let len = t * s.heads * s.head_dim;
    let out = alloc(ctx, len * 4);
    if len == 0 {
        return (out, 0);
    }
    let chunks = max_len.div_ceil(CHUNK).max(1);
    let partials = alloc(ctx, t * s.heads * chunks * (s.head_dim + 2) * 4);
    let (qb, mut params) = attn_params(ctx, qkv, rope, pos, s);
    params.push(u(chunks));
    params.push((1.0 / (s.head_dim as f32).sqrt()).to_bits());
    let bindings = Bindings {
        reads: 5,
        writes: 2,
    };
    let buffers = [&qb, rope.0, pos.0, keys, values, &partials, &out];
    let partial = kernel(
        ctx,
        Key::Named("volta attention partial", vec![]),
        bindings,
        "partial",
        || ATTENTION.to_string(),
    );
    launch(
        ctx,
        &partial,
        &params,
        &buffers,
        [u(chunks), u(s.heads), u(t)],
    );
    let combine = kernel(
        ctx,
        Key::Named("volta attention combine", vec![]),
        bindings,
        "combine",
        || ATTENTION.to_string(),
    );
    launch(ctx, &combine, &params, &buffers, [u(s.heads), u(t), 1]);
    (out, len)
}
