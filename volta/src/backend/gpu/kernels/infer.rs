//! Transformer-inference kernels on the GPU (`shaders/qmatmul.wgsl`,
//! `qrows.wgsl`, `kv_write.wgsl`, `attention.wgsl`): quantised weights stay in
//! blocks in device memory, repacked to whole `u32` words.
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::infer::{AttnShape, QShape};
use crate::io::quant::{BlockQ4_0, BlockQ4_1, BlockQ8_0, GgmlType};
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr};

const QMATMUL: &str = include_str!("../../../../../shaders/qmatmul.wgsl");
const QROWS: &str = include_str!("../../../../../shaders/qrows.wgsl");
const KV_WRITE: &str = include_str!("../../../../../shaders/kv_write.wgsl");
const ATTENTION: &str = include_str!("../../../../../shaders/attention.wgsl");

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

pub(crate) fn upload(rt: &Runtime, shape: &QShape, bytes: &[u8]) -> GpuQuantized {
    let words = repack(shape, bytes);
    let buf = crate::backend::gpu::runtime::transfer::upload(rt, &words);
    GpuQuantized(buf)
}

/// The source of a kernel specialised to a block type.
fn specialised(src: &str, ty: GgmlType) -> String {
    format!(
        "const WORDS: u32 = {}u;\nconst QTYPE: u32 = {}u;\n{src}",
        words(ty),
        ty.id()
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
    let lanes = lanes.unwrap_or_else(|| sub.map_or(32, |s| s.min(32)));
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
fn qmatmul_source(ty: GgmlType, q: QLaunch, flags: u32, n: usize, k: usize) -> String {
    format!(
        "{}const WG: u32 = {}u;\nconst FLAGS: u32 = {flags}u;\n\
         const N: u32 = {n}u;\nconst K: u32 = {k}u;\n{}",
        subgroup_prelude(q.lanes, q.shuffle),
        q.wg,
        specialised(QMATMUL, ty)
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

/// Dequantised rows: `ids = Some` → rows `ids`, else every row.
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
        &Key::Named("volta qrows", vec![shape.ty.id()]),
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
        rt,
        &kern,
        &params,
        &[&w.0, &ids, &out],
        grid(rt, len.div_ceil(256)),
    );
    (out, len)
}

/// An optional read-only view's buffer and offset (`x`'s buffer, unread, when
/// absent: every binding needs a buffer).
fn optional(x: Option<(Arc<Pooled>, u32, u32)>, stand_in: &Arc<Pooled>) -> (Arc<Pooled>, u32, u32) {
    x.unwrap_or_else(|| (stand_in.clone(), 0, 0))
}

/// See [`InferenceBackend::qmatmul`](crate::backend::InferenceBackend::qmatmul):
/// one workgroup per `wg / lanes` outputs (or several such groups) of one row of `x`.
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
    let (xb, xo, xs) = rows(rt, x);
    let eps = norm.map_or(0.0, |(_, e)| e);
    let (nb, no, _) = optional(norm.map(|(v, _)| rows(rt, v)), &xb);
    let (rb, ro, rs) = optional(add.map(|v| rows(rt, v)), &xb);
    let flags = u32::from(norm.is_some()) | u32::from(glu) << 1 | u32::from(add.is_some()) << 2;
    let q = qmatmul_launch(rt);
    let outs = (q.wg / q.lanes) as usize;
    let groups = width.div_ceil(outs);
    let reps = groups.div_ceil(q.max_groups as usize);
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
    let kern = kernel(
        rt,
        &Key::Named(
            qmatmul_name(flags),
            vec![
                shape.ty.id(),
                q.lanes,
                q.wg,
                u32::from(q.shuffle),
                flags,
                u(shape.rows),
                u(shape.cols),
            ],
        ),
        Bindings {
            reads: 4,
            writes: 1,
        },
        "main",
        || qmatmul_source(shape.ty, q, flags, shape.rows, shape.cols),
    );
    launch(
        rt,
        &kern,
        &params,
        &[&w.0, &xb, &nb, &rb, &out],
        [u(groups.div_ceil(reps)), u(m), 1],
    );
    (out, m * width)
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

/// Writes the keys and values of `threads / (kv_heads·head_dim/2)` tokens into
/// the cache (`kv_write.wgsl`; `params` as [`attn_params`] makes them).
fn kv_write(
    rt: &Runtime,
    qkv: &Arc<Pooled>,
    params: &[u32],
    rope: &Arc<Pooled>,
    pos: &Arc<Pooled>,
    cache: &Arc<Pooled>,
    threads: usize,
) {
    let kern = kernel(
        rt,
        &Key::Named("volta kv_write", vec![]),
        Bindings {
            reads: 3,
            writes: 1,
        },
        "main",
        || KV_WRITE.to_string(),
    );
    launch(
        rt,
        &kern,
        params,
        &[qkv, rope, pos, cache],
        grid(rt, threads.div_ceil(256)),
    );
}

/// Keys per split of a single token's attention: one workgroup per head takes
/// up to this many (a replayed step launches for the whole capacity); longer
/// caches split, and a second pass combines the splits.
const SPLIT: usize = 1024;

/// See [`InferenceBackend::attend`](crate::backend::InferenceBackend::attend).
#[allow(clippy::too_many_arguments)]
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
    let len = t * s.heads * d;
    let out = alloc(rt, len * 4);
    if len == 0 {
        return (out, 0);
    }
    let (qb, params) = attn_params(rt, qkv, rope, pos, s);
    let (fresh, splits) = if t == 1 {
        (true, max_len.div_ceil(SPLIT).max(1))
    } else {
        (false, 1)
    };
    if !fresh {
        kv_write(
            rt,
            &qb,
            &params,
            rope.0,
            pos.0,
            cache,
            t * s.kv_heads * d / 2,
        );
    }
    let tile = (1024 / d).min(16);
    let partials = if splits > 1 {
        alloc(rt, t * s.heads * splits * (d + 2) * 4)
    } else {
        alloc(rt, 4) // bound, unused
    };
    let mut params = params;
    params.extend([
        u(splits),
        (1.0 / (d as f32).sqrt()).to_bits(),
        u(SPLIT.min(max_len.max(1))),
        u32::from(fresh),
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
            &Key::Named(name, vec![u(d), u(tile), lanes, u32::from(shuffle)]),
            bindings,
            name.rsplit(' ').next().expect("an entry name"),
            || {
                format!(
                    "const D: u32 = {d}u;\nconst BT: u32 = {tile}u;\n{}{ATTENTION}",
                    subgroup_prelude(lanes, shuffle)
                )
            },
        )
    };
    if fresh {
        let k = entry("volta attention decode");
        launch(rt, &k, &params, &buffers, [u(splits), u(s.heads), 1]);
        if splits > 1 {
            let k = entry("volta attention combine");
            launch(rt, &k, &params, &buffers, [u(s.heads), 1, 1]);
        }
    } else {
        let k = entry("volta attention flash");
        launch(
            rt,
            &k,
            &params,
            &buffers,
            [u(t.div_ceil(tile)), u(s.heads), 1],
        );
    }
    (out, len)
}
