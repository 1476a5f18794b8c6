//! Transformer-inference kernels on the GPU (`shaders/qmatmul.wgsl`,
//! `qrows.wgsl`, `kv_write.wgsl`, `attention.wgsl`): quantised weights stay in
//! blocks in device memory, repacked to whole `u32` words. A weight (or another
//! operand) larger than one binding runs in slices of its rows, each launch
//! binding windows (see `slices`).
use super::Operand;
use super::attention;
use super::elementwise::copy;
use super::matmul::{self, coop::Blocks};
use super::slices::{self, Part};
use crate::backend::AttentionSpec;
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Kernel, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::infer::{AttnShape, QShape};
use crate::io::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType, QFormat};
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr};
use volta_kernels::{BinaryOp, UnaryOp};

const QMATMUL: &str = include_str!("../../../../../shaders/qmatmul.wgsl");
const QROWS: &str = include_str!("../../../../../shaders/qrows.wgsl");
const SPLIT_SUM: &str = include_str!("../../../../../shaders/split_sum.wgsl");
const KV_WRITE: &str = include_str!("../../../../../shaders/kv_write.wgsl");
const ATTENTION: &str = include_str!("../../../../../shaders/attention.wgsl");

/// Quantised weights in device memory: blocks repacked to whole `u32` words
/// (Q4_0 `[d as f32, 4 words]`, Q4_1 ggml's own 5 words, Q8_0 `[d as f32, 8
/// words]`, sub-blocks `[d₀, d₁, m as f32, 8 words]`).
#[derive(Clone)]
pub struct GpuQuantized(pub(crate) Arc<Pooled>);

impl std::fmt::Debug for GpuQuantized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuQuantized({} bytes)", self.0.buffer.size())
    }
}

/// Words per repacked block.
fn words(format: QFormat) -> u32 {
    match format {
        QFormat::Ggml(GgmlType::Q4_0 | GgmlType::Q4_1) => 5,
        QFormat::Ggml(GgmlType::Q8_0) => 9,
        QFormat::SubBlocks => 11,
        QFormat::Ggml(other) => panic!("{other} is held as sub-blocks, not as its own blocks"),
    }
}

/// The shaders' `QTYPE`: ggml's type id, or 255 for sub-blocks.
fn qtype(format: QFormat) -> u32 {
    match format {
        QFormat::Ggml(ty) => ty.id(),
        QFormat::SubBlocks => 255,
    }
}

fn repack(shape: &QShape, bytes: &[u8]) -> Vec<u32> {
    let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
    let mut out = Vec::new();
    match shape.format {
        // Already whole words: three f32, then 32 bytes.
        QFormat::SubBlocks => out.extend(bytes.chunks_exact(4).map(word)),
        QFormat::Ggml(GgmlType::Q4_0) => {
            for b in bytes.chunks_exact(BlockQ4_0::BYTES) {
                let blk = BlockQ4_0::from_bytes(b.try_into().expect("a block"));
                out.push(blk.d.to_f32().to_bits());
                out.extend(blk.qs.chunks_exact(4).map(word));
            }
        }
        QFormat::Ggml(GgmlType::Q4_1) => out.extend(bytes.chunks_exact(4).map(word)),
        QFormat::Ggml(GgmlType::Q8_0) => {
            for b in bytes.chunks_exact(BlockQ8_0::BYTES) {
                let blk = BlockQ8_0::from_bytes(b.try_into().expect("a block"));
                out.push(blk.d.to_f32().to_bits());
                let qs: Vec<u8> = blk.qs.iter().map(|&q| q as u8).collect();
                out.extend(qs.chunks_exact(4).map(word));
            }
        }
        QFormat::Ggml(other) => panic!("{other} is held as sub-blocks, not as its own blocks"),
    }
    debug_assert_eq!(BlockQ4_1::BYTES % 4, 0);
    out
}

pub(crate) fn upload(rt: &Runtime, shape: &QShape, bytes: &[u8]) -> GpuQuantized {
    let words = repack(shape, bytes);
    let buf = crate::backend::gpu::runtime::transfer::upload(rt, &words);
    GpuQuantized(buf)
}

/// The source of a kernel specialised to a block format.
fn specialised(src: &str, format: QFormat) -> String {
    format!(
        "const WORDS: u32 = {}u;\nconst QTYPE: u32 = {}u;\n{src}",
        words(format),
        qtype(format)
    )
}

/// The quantised matmul's launch shape on this adapter.
#[derive(Clone, Copy)]
struct QLaunch {
    /// Threads per workgroup.
    wg: u32,
    /// Threads per output.
    lanes: u32,
    /// Whether lanes sum through subgroup shuffles (else a tree in shared memory).
    shuffle: bool,
    /// Most workgroups per row of x (the grid's limit unless tuned): wider
    /// products give each workgroup several groups of outputs.
    max_groups: u32,
}

impl QLaunch {
    /// Groups of outputs each workgroup computes for a product `width` outputs
    /// wide (one, unless that many groups pass `max_groups`).
    fn reps(&self, width: usize) -> usize {
        let groups = width.div_ceil((self.wg / self.lanes) as usize);
        groups.div_ceil(self.max_groups as usize)
    }
}

/// A tuning knob from the environment: a power of two in `range`.
fn knob(name: &str, range: std::ops::RangeInclusive<u32>) -> Option<u32> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|v| v.is_power_of_two() && range.contains(v))
}

/// Threads per output: the adapter's smallest subgroup (capped at 32) when it has
/// subgroup operations, summed by shuffles, else 32 threads and a tree sum.
/// `VOLTA_QMATMUL_LANES`, `VOLTA_QMATMUL_WG` and `VOLTA_QMATMUL_GROUPS` override
/// the lanes, the workgroup size and the most workgroups per row (tuning knobs;
/// shuffles are used only when the subgroup is at least as wide as the lanes).
fn qmatmul_launch(rt: &Runtime) -> QLaunch {
    static KNOBS: std::sync::OnceLock<[Option<u32>; 3]> = std::sync::OnceLock::new();
    let [lanes, wg, groups] = *KNOBS.get_or_init(|| {
        [
            knob("VOLTA_QMATMUL_LANES", 1..=32),
            knob("VOLTA_QMATMUL_WG", 32..=256),
            knob("VOLTA_QMATMUL_GROUPS", 1..=1 << 20),
        ]
    });
    let sub = rt.gpu.info.subgroup_size.filter(|&s| s >= 4);
    // Without subgroup operations, lanes sum in shared memory between barriers.
    // A CPU-emulated adapter (lavapipe, the browser's SwiftShader) runs each
    // barrier as a switch through every thread of the workgroup, and its memory
    // does not coalesce: one thread per output, summing alone, decodes 3.6× faster
    // there (lavapipe, SmolLM2-135M). A GPU keeps 32 lanes per output.
    let cpu = rt.gpu.info.device_type == "Cpu";
    let lanes = lanes.unwrap_or_else(|| sub.map_or(if cpu { 1 } else { 32 }, |s| s.min(32)));
    QLaunch {
        wg: wg.unwrap_or(256).max(lanes),
        lanes,
        shuffle: sub.is_some_and(|s| s >= lanes),
        max_groups: groups.unwrap_or(65_535),
    }
}

/// The subgroup helpers that qmatmul.wgsl and attention.wgsl expect: `LANES`,
/// `SHUFFLE`, and `lane_sum`/`lane_max` over LANES consecutive threads (shuffle
/// butterflies; without subgroups they return their argument and the shaders
/// reduce in shared memory).
fn subgroup_prelude(lanes: u32, shuffle: bool) -> String {
    let lane_fn = |name: &str, combine: &str| {
        if shuffle {
            format!(
                "fn {name}(v: f32) -> f32 {{\n    var s = v;\n    \
                 for (var o = LANES / 2u; o > 0u; o >>= 1u) {{\n        \
                 s = {combine};\n    }}\n    return s;\n}}\n"
            )
        } else {
            format!("fn {name}(v: f32) -> f32 {{\n    return v;\n}}\n")
        }
    };
    format!(
        "const SHUFFLE: bool = {shuffle};\nconst LANES: u32 = {lanes}u;\n{}{}",
        lane_fn("lane_sum", "s + subgroupShuffleXor(s, o)"),
        lane_fn("lane_max", "max(s, subgroupShuffleXor(s, o))")
    )
}

/// Lanes for workgroup-wide reductions: the adapter's smallest subgroup (capped
/// at 32), or none (tree sums) without subgroup operations.
fn reduce_lanes(rt: &Runtime) -> (u32, bool) {
    match rt.gpu.info.subgroup_size.filter(|&s| s >= 4) {
        Some(s) => (s.min(32), true),
        None => (32, false),
    }
}

/// The quantised matmul's source for a block type, a launch shape, the fused
/// extras (`flags`: 1 norm, 2 glu, 4 add) and W's shape, all constants: each
/// variant compiles without the others' code, and a decode kernel's first
/// weight loads wait for no parameter (a model has a handful of shapes).
fn qmatmul_source(format: QFormat, q: QLaunch, flags: u32, n: usize, k: usize) -> String {
    let width = if flags & 2 != 0 { n / 2 } else { n };
    format!(
        "{}const WG: u32 = {}u;\nconst FLAGS: u32 = {flags}u;\n\
         const N: u32 = {n}u;\nconst K: u32 = {k}u;\nconst REPS: u32 = {}u;\n{}",
        subgroup_prelude(q.lanes, q.shuffle),
        q.wg,
        q.reps(width),
        specialised(QMATMUL, format)
    )
}

/// The kernel's name for `flags`, as profiles show it.
fn qmatmul_name(flags: u32) -> &'static str {
    const NAMES: [&str; 8] = [
        "volta qmatmul",
        "volta qmatmul norm",
        "volta qmatmul glu",
        "volta qmatmul norm glu",
        "volta qmatmul add",
        "volta qmatmul norm add",
        "volta qmatmul glu add",
        "volta qmatmul norm glu add",
    ];
    NAMES[flags as usize & 7]
}

/// A view's buffer, offset and row stride, with unit stride along its last axis
/// (copied first if it has not).
fn rows(rt: &Runtime, x: (&Arc<Pooled>, &Layout)) -> (Arc<Pooled>, u32, u32) {
    let l = x.1;
    let r = l.rank();
    if l.strides[r - 1] == 1 || l.dims[r - 1] == 1 {
        let stride = if r >= 2 { l.strides[r - 2] } else { 0 };
        (x.0.clone(), u(l.offset), u(stride))
    } else {
        let copy = super::elementwise::map(rt, Elem::F32, Expr::input(0), &[x], &[], &l.dims);
        (copy, 0, u(l.dims[r - 1]))
    }
}

/// Dequantised rows: `ids = Some` → rows `ids`, else every row. A weight or an
/// output larger than one binding runs in slices (see [`dequantize_sliced`]).
pub(crate) fn dequantize_rows(
    rt: &Runtime,
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
                let copy =
                    super::elementwise::map(rt, Elem::U32, Expr::input(0), &[(b, l)], &[], &l.dims);
                (copy, 0)
            };
            (l.numel(), b, o)
        }
        None => (shape.rows, w.0.clone(), 0),
    };
    let len = n * shape.cols;
    let out = alloc(rt, len * 4);
    if len == 0 {
        return (out, 0);
    }
    let kern = kernel(
        rt,
        &Key::Named("volta qrows", vec![qtype(shape.format)]),
        Bindings {
            reads: 2,
            writes: 1,
        },
        "main",
        || specialised(QROWS, shape.format),
    );
    let wl = weight_layout(shape);
    let ol = Layout::contiguous(&[n, shape.cols]);
    let il = Layout {
        offset: ids_offset as usize,
        ..Layout::contiguous(&[n])
    };
    let ids = use_ids.then_some((&ids, &il));
    let views = [(&w.0, &wl), (&out, &ol)];
    if !past_limit(rt, [&w.0, &out].into_iter().chain(ids.map(|(b, _)| b))) {
        let ids = ids.map(|(b, _)| (b, ids_offset));
        qrows(
            rt,
            &kern,
            shape,
            (&w.0, 0, 0..shape.rows),
            ids,
            (&out, 0),
            n,
        );
        return (out, len);
    }
    dequantize_sliced(rt, &kern, shape, views, ids);
    (out, len)
}

/// One launch of `qrows.wgsl` writing `n` output rows from `out`'s element
/// `out.1`: `w` binds W's `rows` (their first word at `w.1`), `ids` (buffer,
/// offset) the ids, if any (without, output row i is row i of the bound rows).
fn qrows(
    rt: &Runtime,
    kern: &Arc<Kernel>,
    shape: &QShape,
    w: (&Arc<Pooled>, usize, std::ops::Range<usize>),
    ids: Option<(&Arc<Pooled>, u32)>,
    out: (&Arc<Pooled>, usize),
    n: usize,
) {
    let (wb, at, rows) = w;
    // Without ids W stands in for them, unread: every binding needs a buffer.
    let (ib, io) = ids.unwrap_or((wb, 0));
    let params = [
        u(n),
        u(shape.cols),
        io,
        u(shape.rows),
        u32::from(ids.is_some()),
        u(at),
        u(out.1),
        u(rows.start),
        u(rows.len()),
    ];
    launch(
        rt,
        kern,
        &params,
        &[wb, ib, out.0],
        // A thread per four elements.
        grid(rt, (n * shape.cols / 4).div_ceil(256)),
    );
}

/// Whether any of `buffers` is larger than one binding (the ops then run in
/// slices; else they launch once, binding the buffers whole).
fn past_limit<'a>(rt: &Runtime, buffers: impl IntoIterator<Item = &'a Arc<Pooled>>) -> bool {
    let limit = rt.gpu.limits.max_storage_buffer_binding_size;
    buffers.into_iter().any(|b| b.bound_size() > limit)
}

/// The weight's words as a `(rows, words per row)` view.
fn weight_layout(shape: &QShape) -> Layout {
    Layout::contiguous(&[shape.rows, shape.cols / 32 * words(shape.format) as usize])
}

/// [`dequantize_rows`] past the binding limit: slices of W's rows, each bound as
/// a window (the kernel's word offset says where its rows start in it). Without
/// ids, output row slices go with them. With ids, every slice of the ids (and of
/// their output rows) meets every slice of W, each launch writing the outputs
/// whose id falls in its rows: with W in `s` slices, each output is computed once
/// and `s - 1` launches skip it (an embedding lookup reads a few rows; a table
/// past the limit has a handful of slices).
fn dequantize_sliced(
    rt: &Runtime,
    kern: &Arc<Kernel>,
    shape: &QShape,
    [w, out]: [Operand; 2],
    ids: Option<Operand>,
) {
    let part = |view, elem| Part {
        view,
        axis: Some(0),
        exact: false,
        elem,
    };
    let wp = [part(w, Elem::U32)];
    let Some(per_w) = slices::slice_len(rt, &wp, shape.rows) else {
        return rt.report(slices::too_large(rt, "volta qrows", &[w], 4));
    };
    let Some(ids) = ids else {
        let parts = [wp[0], part(out, Elem::F32)];
        let Some(per) = slices::slice_len(rt, &parts, shape.rows) else {
            return rt.report(slices::too_large(rt, "volta qrows", &[w, out], 4));
        };
        slices::by_slices(rt, &parts, (shape.rows, per), copy, |ops, first, n| {
            let (w, o) = (ops[0], ops[1]);
            let rows = first..first + n;
            qrows(
                rt,
                kern,
                shape,
                (w.0, w.1.offset, rows),
                None,
                (o.0, o.1.offset),
                n,
            );
        });
        return;
    };
    let n = ids.1.dims[0];
    let outer = [part(ids, Elem::U32), part(out, Elem::F32)];
    let Some(per_ids) = slices::slice_len(rt, &outer, n) else {
        return rt.report(slices::too_large(rt, "volta qrows", &[ids, out], 4));
    };
    slices::by_slices(rt, &outer, (n, per_ids), copy, |io, _, count| {
        let (i, o) = (io[0], io[1]);
        slices::by_slices(rt, &wp, (shape.rows, per_w), copy, |ws, first, rows| {
            let w = (ws[0].0, ws[0].1.offset, first..first + rows);
            let ids = Some((i.0, u(i.1.offset)));
            qrows(rt, kern, shape, w, ids, (o.0, o.1.offset), count);
        });
    });
}

/// An optional read-only view's buffer and offset (`x`'s buffer, unread, when
/// absent: every binding needs a buffer).
fn optional(x: Option<(Arc<Pooled>, u32, u32)>, stand_in: &Arc<Pooled>) -> (Arc<Pooled>, u32, u32) {
    x.unwrap_or_else(|| (stand_in.clone(), 0, 0))
}

/// See [`InferenceBackend::qmatmul`](crate::backend::InferenceBackend::qmatmul):
/// one workgroup per `wg / lanes` outputs (or several such groups) of one row of
/// `x`. An operand larger than one binding runs in slices ([`qmatmul_sliced`]).
pub(crate) fn qmatmul(
    rt: &Runtime,
    x: (&Arc<Pooled>, &Layout),
    w: &GpuQuantized,
    shape: &QShape,
    norm: Option<((&Arc<Pooled>, &Layout), f32)>,
    glu: bool,
    add: Option<(&Arc<Pooled>, &Layout)>,
) -> (Arc<Pooled>, usize) {
    let m = x.1.dims[0];
    let width = if glu { shape.rows / 2 } else { shape.rows };
    let out = alloc(rt, m * width * 4);
    if m * width == 0 {
        return (out, 0);
    }
    let extras = [norm.map(|((b, _), _)| b), add.map(|(b, _)| b)];
    let operands = [&w.0, x.0, &out]
        .into_iter()
        .chain(extras.into_iter().flatten());
    if past_limit(rt, operands) {
        qmatmul_sliced(rt, x, (w, shape), norm, glu, add, &out);
        return (out, m * width);
    }
    let (xb, xo, xs) = rows(rt, x);
    let eps = norm.map_or(0.0, |(_, e)| e);
    let (nb, no, _) = optional(norm.map(|(v, _)| rows(rt, v)), &xb);
    let (rb, ro, rs) = optional(add.map(|v| rows(rt, v)), &xb);
    let flags = u32::from(norm.is_some()) | u32::from(glu) << 1 | u32::from(add.is_some()) << 2;
    let q = qmatmul_launch(rt);
    let groups = width.div_ceil((q.wg / q.lanes) as usize);
    let reps = q.reps(width);
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
        u(reps),
    ];
    let kern = qmatmul_kernel(rt, shape.format, q, flags, shape.rows, shape.cols);
    launch(
        rt,
        &kern,
        &params,
        &[&w.0, &xb, &nb, &rb, &out],
        [u(groups.div_ceil(reps)), u(m), 1],
    );
    (out, m * width)
}

/// See [`InferenceBackend::qgemm`](crate::backend::InferenceBackend::qgemm): the
/// tensor-core matmul with W's tiles dequantised on their way in, and x's
/// columns multiplied by `scale` ([`matmul::quantized`]): the product, or its
/// partial products over slices of K to be summed; `None` past the binding
/// limit too.
pub(crate) fn qgemm(
    rt: &Runtime,
    x: (&Arc<Pooled>, &Layout),
    w: &GpuQuantized,
    shape: &QShape,
    scale: Option<(&Arc<Pooled>, &Layout)>,
) -> Option<matmul::Product> {
    if !qgemm_fits(rt, x.1.dims[0], w, shape) || past_limit(rt, [x.0]) {
        return None;
    }
    let blocks = Blocks {
        qtype: qtype(shape.format),
        words: words(shape.format),
    };
    let scale = scale.map(|v| {
        let (b, offset, _) = rows(rt, v);
        (b, offset as usize)
    });
    matmul::quantized(
        rt,
        x,
        &w.0,
        blocks,
        shape.rows,
        scale.as_ref().map(|(b, o)| (b, *o)),
    )
}

/// Whether [`qgemm`] can multiply `m` rows by `w` (given rows that load as
/// vectors): the adapter has tensor cores, and W and the partial products fit
/// one binding.
pub(crate) fn qgemm_fits(rt: &Runtime, m: usize, w: &GpuQuantized, shape: &QShape) -> bool {
    // Split-K's partial products can take up to K/128 times the output.
    let partials = m * shape.rows * (shape.cols / 128).max(1) * 4;
    rt.gpu.info.tensor_cores
        && shape.cols.is_multiple_of(32)
        && !past_limit(rt, [&w.0])
        && !past_limit_len(rt, partials)
}

/// Split-K's partial products `(splits, m, n)` of a quantised product summed,
/// then its RMS norm's `1/rms` (of `norm`'s rows of x, with its epsilon: the
/// product multiplied x's columns by the norm's weights), SwiGLU (`glu`) and
/// residual (`add`) epilogues, in one kernel (`split_sum.wgsl`): `(m, n)`, or
/// `(m, n/2)` with `glu`.
pub(crate) fn split_sum(
    rt: &Runtime,
    partials: &Arc<Pooled>,
    [splits, m, n]: [usize; 3],
    norm: Option<((&Arc<Pooled>, &Layout), f32)>,
    glu: bool,
    add: Option<(&Arc<Pooled>, &Layout)>,
) -> (Arc<Pooled>, usize) {
    let width = if glu { n / 2 } else { n };
    let out = alloc(rt, m * width * 4);
    let (rb, ro, rs) = optional(add.map(|v| rows(rt, v)), partials);
    let (xb, xo, xs) = optional(norm.map(|(v, _)| rows(rt, v)), partials);
    let k = norm.map_or(0, |((_, l), _)| l.dims[l.rank() - 1]);
    let eps = norm.map_or(0.0, |(_, e)| e);
    let flags = u32::from(norm.is_some()) | u32::from(glu) << 1 | u32::from(add.is_some()) << 2;
    let kern = kernel(
        rt,
        &Key::Named("volta qmatmul split-K sum", vec![]),
        Bindings {
            reads: 3,
            writes: 1,
        },
        "main",
        || SPLIT_SUM.to_string(),
    );
    let params = [
        u(splits),
        u(m),
        u(n),
        flags,
        ro,
        rs,
        xo,
        xs,
        u(k),
        eps.to_bits(),
    ];
    let grid = [u(width.div_ceil(256)), u(m), 1];
    launch(rt, &kern, &params, &[partials, &rb, &xb, &out], grid);
    (out, m * width)
}

/// Whether `bytes` of output exceed one binding.
fn past_limit_len(rt: &Runtime, bytes: usize) -> bool {
    bytes as u64 > rt.gpu.limits.max_storage_buffer_binding_size
}

/// The quantised matmul kernel for `flags` over a W of `n × k` (constants of its
/// source).
fn qmatmul_kernel(
    rt: &Runtime,
    format: QFormat,
    q: QLaunch,
    flags: u32,
    n: usize,
    k: usize,
) -> Arc<Kernel> {
    kernel(
        rt,
        &Key::Named(
            qmatmul_name(flags),
            vec![
                qtype(format),
                q.lanes,
                q.wg,
                u32::from(q.shuffle),
                flags,
                u(n),
                u(k),
            ],
        ),
        Bindings {
            reads: 4,
            writes: 1,
        },
        "main",
        || qmatmul_source(format, q, flags, n, k),
    )
}

/// Rows of W per slice are a multiple of this: 64 rows of whole words span a
/// multiple of 256 bytes (every adapter's largest offset alignment), so each
/// window starts exactly at its first row and the kernel needs no word offset;
/// and 64 output columns of one row of `x` start a window of the output in place.
const QMATMUL_SLICE_UNIT: usize = 64;

/// [`qmatmul`] with an operand larger than one binding: the product in slices of
/// W's rows (output features), each a launch of the same kernel compiled for a W
/// of the slice's rows and bound to a window of W (`x`, the norm's scale and the
/// residual bound as windows around their views), its columns of the result
/// written in place (with `m = 1`) or copied there. With `glu` the slices compute
/// the plain product `x·Wᵀ` (`m × rows`, gate and up columns both), and one
/// elementwise kernel then pairs column `j` with column `j + rows/2` and adds the
/// residual: the gate and up rows of one output lie `rows/2` rows apart, further
/// than one window reaches, and the kernel binds a single window of W. W is still
/// read once; the extra traffic is the `m × rows` product.
fn qmatmul_sliced(
    rt: &Runtime,
    x: (&Arc<Pooled>, &Layout),
    (w, shape): (&GpuQuantized, &QShape),
    norm: Option<((&Arc<Pooled>, &Layout), f32)>,
    glu: bool,
    add: Option<(&Arc<Pooled>, &Layout)>,
    out: &Arc<Pooled>,
) {
    let (m, n, k) = (x.1.dims[0], shape.rows, shape.cols);
    let (xb, xo, xs) = rows(rt, x);
    let xl = Layout {
        strides: Dims::new(&[xs as usize, 1]),
        offset: xo as usize,
        ..Layout::contiguous(&[m, k])
    };
    let norm = norm.map(|(v, eps)| (rows(rt, v), eps));
    let nl = norm.as_ref().map(|((_, no, _), _)| Layout {
        offset: *no as usize,
        ..Layout::contiguous(&[k])
    });
    // With glu the residual joins in the epilogue.
    let fused_add = add.filter(|_| !glu).map(|v| rows(rt, v));
    let rl = fused_add.as_ref().map(|(_, ro, rs)| Layout {
        strides: Dims::new(&[*rs as usize, 1]),
        offset: *ro as usize,
        ..Layout::contiguous(&[m, n])
    });
    // The product: `out` itself, or with glu its gate and up halves side by side.
    let y = if glu {
        alloc(rt, m * n * 4)
    } else {
        out.clone()
    };
    let wl = weight_layout(shape);
    let yl = Layout::contiguous(&[m, n]);
    let part = |view, axis, exact, elem| Part {
        view,
        axis,
        exact,
        elem,
    };
    let mut parts = vec![
        part((&w.0, &wl), Some(0), false, Elem::U32),
        part((&y, &yl), Some(1), true, Elem::F32),
        part((&xb, &xl), None, false, Elem::F32),
    ];
    if let (Some(((nb, _, _), _)), Some(nl)) = (&norm, &nl) {
        parts.push(part((nb, nl), None, false, Elem::F32));
    }
    if let (Some((rb, _, _)), Some(rl)) = (&fused_add, &rl) {
        parts.push(part((rb, rl), Some(1), false, Elem::F32));
    }
    let per = match slices::slice_len(rt, &parts, n) {
        Some(per) if per >= n => n,
        Some(per) if per >= QMATMUL_SLICE_UNIT => per - per % QMATMUL_SLICE_UNIT,
        _ => {
            let views: Vec<Operand> = parts.iter().map(|p| p.view).collect();
            return rt.report(slices::too_large(rt, "volta qmatmul", &views, 4));
        }
    };
    let flags = u32::from(norm.is_some()) | u32::from(fused_add.is_some()) << 2;
    let eps = norm.as_ref().map_or(0.0, |(_, e)| *e);
    let q = qmatmul_launch(rt);
    let outs = (q.wg / q.lanes) as usize;
    slices::by_slices(rt, &parts, (n, per), copy, |ops, _, rows| {
        let (wv, yv, xv) = (ops[0], ops[1], ops[2]);
        debug_assert!(wv.1.offset == 0 && yv.1.offset == 0);
        // Absent extras: x stands in for them, unread.
        let (nb, no) = if norm.is_some() {
            (ops[3].0, u(ops[3].1.offset))
        } else {
            (xv.0, 0)
        };
        let (rb, ro, rs) = match &fused_add {
            Some((_, _, rs)) => {
                let r = ops[ops.len() - 1];
                (r.0, u(r.1.offset), *rs)
            }
            None => (xv.0, 0, 0),
        };
        let groups = rows.div_ceil(outs);
        let reps = q.reps(rows);
        let params = [
            u(m),
            u(rows),
            u(k),
            u(xv.1.offset),
            xs,
            flags,
            eps.to_bits(),
            no,
            ro,
            rs,
            u(reps),
        ];
        let kern = qmatmul_kernel(rt, shape.format, q, flags, rows, k);
        launch(
            rt,
            &kern,
            &params,
            &[wv.0, xv.0, nb, rb, yv.0],
            [u(groups.div_ceil(reps)), u(m), 1],
        );
    });
    if glu {
        let half = n / 2;
        let (gate, up) = (
            slices::narrow(&yl, 1, 0, half),
            slices::narrow(&yl, 1, half, half),
        );
        let mut expr = Expr::input(0)
            .unary(UnaryOp::Silu)
            .binary(BinaryOp::Mul, Expr::input(1));
        let mut inputs = vec![(&y, &gate), (&y, &up)];
        if let Some(r) = add {
            expr = expr.binary(BinaryOp::Add, Expr::input(2));
            inputs.push(r);
        }
        let ol = Layout::contiguous(&[m, half]);
        super::elementwise::write(rt, Elem::F32, expr, &inputs, &[], (out, &ol));
    }
}

/// The parameters shared by the KV-cache kernels.
fn attn_params(
    rt: &Runtime,
    qkv: (&Arc<Pooled>, &Layout),
    rope: (&Arc<Pooled>, &Layout),
    pos: (&Arc<Pooled>, &Layout),
    s: &AttnShape,
) -> (Arc<Pooled>, Vec<u32>) {
    let (qb, qo, qs) = rows(rt, qkv);
    assert!(
        rope.1.is_contiguous() && pos.1.is_contiguous(),
        "kv kernels: a contiguous RoPE table and positions"
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

/// Writes the keys and values of `threads / ((heads + kv_heads)·head_dim/2)`
/// tokens into the cache and their rotated queries into `qrot`
/// (`kv_write.wgsl`; `params` as [`attn_params`] makes them).
fn kv_write(
    rt: &Runtime,
    qkv: &Arc<Pooled>,
    params: &[u32],
    (rope, pos): (&Arc<Pooled>, &Arc<Pooled>),
    (cache, qrot): (&Arc<Pooled>, &Arc<Pooled>),
    threads: usize,
) {
    let kern = kernel(
        rt,
        &Key::Named("volta kv_write", vec![]),
        Bindings {
            reads: 3,
            writes: 2,
        },
        "main",
        || KV_WRITE.to_string(),
    );
    launch(
        rt,
        &kern,
        params,
        &[qkv, rope, pos, cache, qrot],
        grid(rt, threads.div_ceil(256)),
    );
}

/// A prompt's attention (`t` tokens, the last at position `max_len − 1`): one
/// kernel writes their keys and values into the cache and their rotated queries
/// into a scratch `(t, heads, d)`, then the training kernels' flash-attention
/// forward (on tensor cores where the adapter has them, f16 products as in the
/// prompt's matmuls; causal tiles skipped) attends over the cache's
/// first `max_len` positions, writing `out`'s `(t, heads, d)`.
#[allow(clippy::too_many_arguments)]
fn prefill(
    rt: &Runtime,
    qkv: &Arc<Pooled>,
    params: &[u32],
    (rope, pos): (&Arc<Pooled>, &Arc<Pooled>),
    cache: &Arc<Pooled>,
    s: &AttnShape,
    (t, max_len): (usize, usize),
    out: &Arc<Pooled>,
) {
    let (h, g, d, cap) = (s.heads, s.kv_heads, s.head_dim, s.capacity);
    let qrot = alloc(rt, t * h * d * 4);
    kv_write(
        rt,
        qkv,
        params,
        (rope, pos),
        (cache, &qrot),
        t * (h + g) * d / 2,
    );
    let view = |dims: [usize; 4], strides: [usize; 4], offset| Layout {
        dims: Dims::new(&dims),
        strides: Dims::new(&strides),
        offset,
    };
    let q = view([1, h, t, d], [t * h * d, d, h * d, 1], 0);
    let k = view([1, g, max_len, d], [g * cap * d, cap * d, d, 1], 0);
    let v = view(
        [1, g, max_len, d],
        [g * cap * d, cap * d, d, 1],
        g * cap * d,
    );
    let spec = AttentionSpec::new(1.0 / (d as f64).sqrt(), Some(max_len - t));
    // The queries' heads are a view of (t, heads, d): the output, laid out as
    // they are, is `out` itself.
    debug_assert_eq!(
        crate::backend::packed_like(&q),
        Layout::contiguous(&[t, h, d])
            .reshape(&[1, t, h, d])
            .unwrap()
            .permute(&[0, 2, 1, 3])
    );
    attention::forward(
        rt,
        Elem::F32,
        [(&qrot, &q), (cache, &k), (cache, &v)],
        &spec,
        true,
        Some(out),
    );
}

/// Keys of a single token's attention that one workgroup per head takes whole:
/// up to this many (`max_len`), one launch. Past it the keys split into
/// [`SPLIT`]-key pieces, a workgroup each, and a second launch combines them.
/// (H100, SmolLM2, 2026-11-27: whole, 897–902 tok/s from an empty cache, where
/// 128-key splits gave 847–856; at 512 keys 557–560 whole against 786–788 split,
/// at 900 keys 441–442 against 783–785.)
const WHOLE: usize = 256;

/// Keys per split past [`WHOLE`] (64 and 256 measured no better).
const SPLIT: usize = 128;

/// See [`InferenceBackend::decode_len`](crate::backend::InferenceBackend::decode_len):
/// [`WHOLE`] at least, else the power of two at or above `needed`, within the
/// capacity, so a sequence's step is captured again as it passes 256, 512,
/// 1024, ... positions and its attention launch fits the keys it reads.
pub(crate) fn decode_len(needed: usize, capacity: usize) -> usize {
    needed.next_power_of_two().max(WHOLE).min(capacity)
}

/// See [`InferenceBackend::attend`](crate::backend::InferenceBackend::attend).
///
/// Not sliced: a layer's cache, `2·kv_heads·capacity·head_dim` f32s, is the
/// largest operand, and grouped-query models keep `kv_heads·head_dim` at 1,024 or
/// less (Llama 3 8B/70B/405B, Mistral, Qwen 2): 8 KiB per position, so a 2 GiB
/// binding (NVIDIA, AMD) holds 262,144 positions, past their context lengths
/// (without grouped queries, Llama 2's 32 KiB per position reach 128 MiB at its
/// 4,096). A 128 MiB binding (lavapipe) holds 16,384 positions of the former; a
/// longer cache there is reported as
/// [`GpuError::TooLarge`](crate::backend::gpu::GpuError::TooLarge) by the launch,
/// not computed wrongly.
/// See [`InferenceBackend::attend`](crate::backend::InferenceBackend::attend):
/// a prompt goes to [`prefill`]; single tokens (one sequence's, or one of each
/// of a batch's) to the `decode` kernel, a workgroup per (split of the keys,
/// head, query row), which writes the token's own key and value.
pub(crate) fn attend(
    rt: &Runtime,
    qkv: (&Arc<Pooled>, &Layout),
    rope: (&Arc<Pooled>, &Layout),
    pos: (&Arc<Pooled>, &Layout),
    cache: &Arc<Pooled>,
    s: &AttnShape,
    max_len: usize,
) -> (Arc<Pooled>, usize) {
    let d = s.head_dim;
    assert!(
        d <= 256 && d.is_multiple_of(2),
        "attend: head_dim {d} (the GPU kernels take even widths up to 256)"
    );
    let t = qkv.1.dims[0];
    let positions = pos.1.numel();
    assert!(
        positions == 1 || positions == t,
        "attend: {positions} positions for {t} rows (one, or one per row)"
    );
    let batched = positions > 1;
    let len = t * s.heads * d;
    let out = alloc(rt, len * 4);
    if len == 0 {
        return (out, 0);
    }
    let (qb, params) = attn_params(rt, qkv, rope, pos, s);
    if t > 1 && !batched {
        prefill(
            rt,
            &qb,
            &params,
            (rope.0, pos.0),
            cache,
            s,
            (t, max_len),
            &out,
        );
        return (out, len);
    }
    let split = if max_len <= WHOLE {
        max_len.max(1)
    } else {
        SPLIT
    };
    let splits = max_len.div_ceil(split).max(1);
    let partials = if splits > 1 {
        alloc(rt, t * s.heads * splits * (d + 2) * 4)
    } else {
        alloc(rt, 4) // bound, unused
    };
    let mut params = params;
    params.extend([
        u(splits),
        (1.0 / (d as f32).sqrt()).to_bits(),
        u(split),
        1,
        if batched { u(t) } else { 0 },
    ]);
    let bindings = Bindings {
        reads: 3,
        writes: 3,
    };
    let buffers = [&qb, rope.0, pos.0, cache, &partials, &out];
    let (lanes, shuffle) = reduce_lanes(rt);
    let entry = |name: &'static str| {
        kernel(
            rt,
            &Key::Named(name, vec![u(d), lanes, u32::from(shuffle)]),
            bindings,
            name.rsplit(' ').next().expect("an entry name"),
            || {
                format!(
                    "const D: u32 = {d}u;\n{}{ATTENTION}",
                    subgroup_prelude(lanes, shuffle)
                )
            },
        )
    };
    let k = entry("volta attention decode");
    launch(rt, &k, &params, &buffers, [u(splits), u(s.heads), u(t)]);
    if splits > 1 {
        let k = entry("volta attention combine");
        launch(rt, &k, &params, &buffers, [u(s.heads), u(t), 1]);
    }
    (out, len)
}

#[cfg(test)]
mod tests {
    use super::SPLIT_SUM;

    /// The split-K sum's shader validates (it runs only where tensor cores
    /// split products, which lavapipe's tests never reach).
    #[test]
    fn split_sum_validates() {
        crate::backend::gpu::kernels::attention_coop::assert_translates("split_sum", SPLIT_SUM);
    }
}
