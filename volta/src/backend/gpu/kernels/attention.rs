//! Fused attention for training (`shaders/flash_attention.wgsl`): the forward
//! with each row's log-sum-exp, and the backward as three launches (one thread
//! per query row for `dq`, one per key row for `dk`, and for `dv`), none of which
//! stores the `T×S` scores. Views are read through their strides; outputs are
//! contiguous. Not sliced: an operand past one binding is reported as
//! [`GpuError::TooLarge`](crate::backend::gpu::GpuError::TooLarge) at launch.
use super::Operand;
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::{AttentionDims, AttentionSpec};
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, with_elem};

const SHADER: &str = include_str!("../../../../../shaders/flash_attention.wgsl");
/// Threads (rows) per workgroup, as the shader declares.
const WG: usize = 64;
/// The widest head the kernels take: each thread holds up to four rows of it.
const MAX_HEAD_DIM: usize = 256;

/// A row as vec4s (features past `d` are zeros).
fn vec4s(d: usize) -> usize {
    d.div_ceil(4)
}

/// Rows per tile in workgroup memory: two tiles of `TILE·⌈d/4⌉` vec4s fill 16 KiB.
fn tile(d: usize) -> usize {
    (512 / vec4s(d)).min(WG)
}

/// The parameter block (see the shader's header).
fn params(
    n: &AttentionDims,
    spec: &AttentionSpec,
    views: [Operand; 4],
    lse_delta: [usize; 2],
) -> Vec<u32> {
    let mut p = vec![
        u(n.batch),
        u(n.heads),
        u(n.kv_heads),
        u(n.queries),
        u(n.keys),
        (spec.scale as f32).to_bits(),
        u32::from(spec.causal.is_some()),
        u(spec.causal.unwrap_or(0)),
    ];
    for (_, l) in views {
        p.push(u(l.offset));
        p.extend(l.strides.iter().map(|&s| u(s)));
    }
    p.extend(lse_delta.map(u));
    p
}

/// Launches `entry` over `[rows / WG, heads, batch]` workgroups; `buffers` are the
/// six inputs then the two outputs.
fn run(
    rt: &Runtime,
    elem: Elem,
    n: &AttentionDims,
    entry: &'static str,
    params: &[u32],
    buffers: &[&Arc<Pooled>; 8],
    grid: [usize; 3],
) {
    let d = n.head_dim;
    assert!(
        d <= MAX_HEAD_DIM,
        "attention on the GPU: head width {d} (the kernels take up to {MAX_HEAD_DIM})"
    );
    let name = match entry {
        "forward" => "volta flash_attention forward",
        "backward_q" => "volta flash_attention backward_q",
        "backward_k" => "volta flash_attention backward_k",
        _ => "volta flash_attention backward_v",
    };
    let kern = kernel(
        rt,
        &Key::Named(name, vec![elem as u32, u(d)]),
        Bindings {
            reads: 6,
            writes: 2,
        },
        entry,
        || {
            let consts = format!(
                "const D: u32 = {d}u;\nconst DV: u32 = {}u;\nconst TILE: u32 = {}u;\n",
                vec4s(d),
                tile(d)
            );
            with_elem(&(consts + SHADER), elem).into_owned()
        },
    );
    launch(
        rt,
        &kern,
        params,
        buffers,
        [u(grid[0].div_ceil(WG)), u(grid[1]), u(grid[2])],
    );
}

/// See [`Backend::attention`](crate::backend::Backend::attention).
pub(crate) fn forward(
    rt: &Runtime,
    elem: Elem,
    [q, k, v]: [Operand; 3],
    spec: &AttentionSpec,
) -> (Arc<Pooled>, Arc<Pooled>) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let rows = n.batch * n.heads * n.queries;
    let out = alloc(rt, rows * n.head_dim * elem.size());
    let lse = alloc(rt, rows * elem.size());
    if rows * n.head_dim == 0 {
        return (out, lse);
    }
    let p = params(&n, spec, [q, k, v, q], [0, 0]);
    let buffers = [q.0, k.0, v.0, q.0, q.0, q.0, &out, &lse];
    run(
        rt,
        elem,
        &n,
        "forward",
        &p,
        &buffers,
        [n.queries, n.heads, n.batch],
    );
    (out, lse)
}

/// See [`Backend::attention_backward`](crate::backend::Backend::attention_backward).
pub(crate) fn backward(
    rt: &Runtime,
    elem: Elem,
    [q, k, v, g]: [Operand; 4],
    [lse, delta]: [Operand; 2],
    spec: &AttentionSpec,
) -> (Arc<Pooled>, Arc<Pooled>, Arc<Pooled>) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let d = n.head_dim;
    let dq = alloc(rt, n.batch * n.heads * n.queries * d * elem.size());
    let kv_len = n.batch * n.kv_heads * n.keys * d;
    let (dk, dv) = (
        alloc(rt, kv_len * elem.size()),
        alloc(rt, kv_len * elem.size()),
    );
    if n.batch * n.heads * n.queries * d == 0 || kv_len == 0 {
        return (dq, dk, dv);
    }
    let p = params(&n, spec, [q, k, v, g], [lse.1.offset, delta.1.offset]);
    let ins = [q.0, k.0, v.0, g.0, lse.0, delta.0];
    let unused = alloc(rt, 4);
    let with = |a, b| [ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], a, b];
    run(
        rt,
        elem,
        &n,
        "backward_q",
        &p,
        &with(&dq, &unused),
        [n.queries, n.heads, n.batch],
    );
    let keys = [n.keys, n.kv_heads, n.batch];
    run(rt, elem, &n, "backward_k", &p, &with(&dk, &unused), keys);
    run(rt, elem, &n, "backward_v", &p, &with(&unused, &dv), keys);
    (dq, dk, dv)
}
