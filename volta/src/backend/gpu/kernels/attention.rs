//! Fused attention for training (`shaders/flash_attention.wgsl`): the forward
//! with each row's log-sum-exp, and the backward, none of which stores the
//! `T×S` scores. The backward is one launch per block of keys where the adapter
//! adds `f32` atomically (`dq` summed across key blocks,
//! `shaders/flash_attention_atomic.wgsl`; on tensor cores,
//! [`attention_coop_backward`]'s `backward_kv`); else, or when results must repeat
//! bit for bit ([`DETERMINISTIC`](super::DETERMINISTIC)), two (`dq` per block
//! of query rows, `dk` and `dv` per block of keys), which compute the scores
//! twice. Each thread holds a 4×4 tile of scores, as a GEMM does. Views are
//! read through their strides; results are written laid out as their operands
//! ([`packed_like`]), or, for the heads of one projection, all three gradients
//! into one buffer through the operands' own views. Not sliced: an operand past
//! one binding is reported as
//! [`GpuError::TooLarge`](crate::backend::gpu::GpuError::TooLarge) at launch.
//! Heads wider than [`FEATURE_SLICE`] run one launch per slice of their
//! features, each computing the scores over the whole head (PyTorch's SDPA
//! also takes heads of any width).
use super::elementwise::{fill, write};
use super::{Operand, attention_coop, attention_coop_backward};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::{AttentionDims, AttentionSpec, packed_like};
use crate::layout::Layout;
use std::sync::{Arc, Mutex};
use volta_kernels::wgsl::{Elem, Expr, with_elem};

const SHADER: &str = concat!(
    include_str!("../../../../../shaders/flash_attention.wgsl"),
    include_str!("../../../../../shaders/attention_dropout.wgsl"),
    include_str!("../../../../../shaders/counter_hash.wgsl")
);
/// The one-launch backward's `dq_tile` (and its atomic `dq` binding), appended
/// to [`SHADER`] where the adapter has `f32` atomics.
const ATOMIC: &str = include_str!("../../../../../shaders/flash_attention_atomic.wgsl");
/// `dq_tile` everywhere else: `backward_q` computes dq.
const NO_DQ: &str = "fn dq_tile(b: u32, h: u32, kh: vec3<u32>, j0: u32, t0: u32, li: u32) {}\n";
/// Query rows (keys for `backward_kv`) per workgroup, as the shader declares.
const BLOCK: usize = 64;
/// The most features of a head that one launch writes: each thread holds four
/// rows of an eighth of them. A wider head takes one launch per slice of this
/// many features, each computing the scores over the whole head.
const FEATURE_SLICE: usize = 256;
/// WebGPU's default workgroup memory: every entry fits it at every width.
const CHUNKED_BYTES: usize = 16 << 10;

/// A cap on the workgroup memory the kernels plan for (`None`: each entry's
/// [`Entry::wanted_bytes`], up to the adapter's).
static MEMORY_CAP: Mutex<Option<u32>> = Mutex::new(None);

/// See [`Gpu::set_attention_workgroup_bytes`](crate::backend::gpu::Gpu::set_attention_workgroup_bytes).
pub(crate) fn set_memory_cap(bytes: Option<u32>) {
    *MEMORY_CAP.lock().unwrap_or_else(|p| p.into_inner()) = bytes;
}

/// The entries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    Forward,
    BackwardQ,
    BackwardKv,
    /// `BackwardKv` adding `dq` atomically too (a third output).
    Backward,
}

impl Entry {
    fn name(self) -> &'static str {
        match self {
            Entry::Forward => "forward",
            Entry::BackwardQ => "backward_q",
            Entry::BackwardKv | Entry::Backward => "backward_kv",
        }
    }
    /// The kernel's name in profiles.
    fn label(self) -> &'static str {
        match self {
            Entry::Forward => "volta flash_attention forward",
            Entry::BackwardQ => "volta flash_attention backward_q",
            Entry::BackwardKv => "volta flash_attention backward_kv",
            Entry::Backward => "volta flash_attention backward (atomic dq)",
        }
    }
    /// The shader's text for this entry's module.
    fn source(self, d: usize, plan: &Plan, vec: bool) -> String {
        let dq = if self == Entry::Backward {
            ATOMIC
        } else {
            NO_DQ
        };
        constants(d, plan) + &access(vec) + SHADER + dq
    }
    /// The workgroup memory each entry plans for by default. On an H100
    /// (2026-11-27, `bench_transformer --attention-workgroup-bytes`), larger
    /// chunks saved nothing past these: 16 KiB (chunks of 16 features) is the
    /// forward's best, 24 KiB (chunks of 16) the backward's; 40 KiB and more ran
    /// a third slower (fewer workgroups per core).
    fn wanted_bytes(self) -> u32 {
        match self {
            Entry::Forward => 16 << 10,
            Entry::BackwardQ | Entry::BackwardKv | Entry::Backward => 24 << 10,
        }
    }
}

/// How an entry uses workgroup memory (see the shader's header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    /// Features per chunk of the score products.
    dc: usize,
    /// Rows per pass of the output products' operand.
    rc: usize,
    /// vec4s in all: the P region's 512, then the X region.
    smem: usize,
}

/// The largest chunks that fit `limit` bytes (at most the padded row `dp`): the
/// forward's chunk holds transposed q and k tiles (64 + 4 and 32 + 4 floats per
/// feature), the backward's those and the dO and v tiles too.
fn plan(entry: Entry, dp: usize, limit: usize) -> Plan {
    let x = limit / 16 - 512;
    let per_feature = if entry == Entry::Forward { 104 } else { 208 };
    let dc = [64, 32, 16, 8]
        .into_iter()
        .find(|&dc| dc <= dp && dc * per_feature <= 4 * x)
        .expect("16 KiB holds chunks of 8 features");
    let rc = (4 * x / dp).min(32);
    let rc = 1 << rc.ilog2();
    // The one-launch backward's dq takes four keys at a time.
    debug_assert!(rc >= 4, "{limit} bytes give passes of {rc} rows");
    let used = (dc * per_feature).max(rc * dp) / 4;
    Plan {
        dc,
        rc,
        smem: 512 + used,
    }
}

/// The shader's constants for `entry` at head width `d` under `plan`.
fn constants(d: usize, plan: &Plan) -> String {
    let dp = padded(d);
    let nv = dp / 32;
    let dqw = (dp / 64).max(1);
    format!(
        "const D: u32 = {d}u;\nconst DP: u32 = {dp}u;\nconst NV: u32 = {nv}u;\n\
         const ACC: u32 = {}u;\nconst DCF: u32 = {dc}u;\nconst DCB: u32 = {dc}u;\n\
         const RC: u32 = {}u;\nconst SMEM: u32 = {}u;\n\
         const DQW: u32 = {dqw}u;\nconst DQA: u32 = {}u;\nconst SLICED: bool = {};\n",
        4 * nv,
        plan.rc,
        plan.smem,
        4 * dqw,
        d > FEATURE_SLICE,
        dc = plan.dc,
    )
}

/// How the kernels read q, k, v and g (bindings 1 to 4; see the shader's
/// header): with `vec`, as `vec4`s, `operand4` loading four features at once;
/// else element by element, through any strides.
fn access(vec: bool) -> String {
    let ty = if vec { "vec4<T>" } else { "T" };
    let mut w = String::new();
    for (i, x) in ["q", "k", "v", "g"].iter().enumerate() {
        w += &format!(
            "@group(0) @binding({}) var<storage, read> {x}: array<{ty}>;\n",
            i + 1
        );
    }
    let cases = |body: &dyn Fn(&str) -> String| {
        ["q", "k", "v", "g"]
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let label = if i < 3 {
                    format!("case {i}u")
                } else {
                    "default".into()
                };
                format!("        {label}: {{ return {}; }}\n", body(x))
            })
            .collect::<String>()
    };
    let one = cases(&|x| {
        if vec {
            format!("f32({x}[i >> 2u][i & 3u])")
        } else {
            format!("f32({x}[i])")
        }
    });
    let four = if vec {
        format!(
            "    switch which {{\n{}    }}\n",
            cases(&|x| format!("vec4<f32>({x}[i])"))
        )
    } else {
        "    return vec4<f32>(0.0);\n".into()
    };
    w += &format!(
        "const VEC: bool = {vec};\n\
         // Element i of operand `which` (a constant at every call: the branch folds).\n\
         fn operand(which: u32, i: u32) -> f32 {{\n    switch which {{\n{one}    }}\n}}\n\
         // The vec4 i of operand `which` (VEC only).\n\
         fn operand4(which: u32, i: u32) -> vec4<f32> {{\n{four}}}\n"
    );
    w
}

/// Whether every view reads as `vec4`s: features contiguous, offsets and the
/// other strides multiples of 4, and a head width that is whole `vec4`s.
fn vectors(d: usize, views: &[Operand]) -> bool {
    d.is_multiple_of(4) && views.iter().all(|o| attention_coop::loads_as_vectors(o.1))
}

/// A row in workgroup memory: the head's features (at most a
/// [`FEATURE_SLICE`]) rounded up to a power of two of at least 32 floats, so
/// that eight threads cover it in vec4s (zeros past `d`).
fn padded(d: usize) -> usize {
    d.min(FEATURE_SLICE).next_power_of_two().max(32)
}

/// Where the parameter block holds the first feature of a launch's slice.
const FIRST_FEATURE: usize = 43;

/// The parameter block (see the shader's header).
fn params(
    n: &AttentionDims,
    spec: &AttentionSpec,
    views: [Operand; 4],
    lse_delta: [usize; 2],
    results: [&Layout; 3],
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
    p.extend([spec.drop_threshold(), (spec.keep_scale() as f32).to_bits()]);
    p.extend(crate::random::stream_keys(spec.seed));
    for r in results {
        p.extend(r.strides[..3].iter().map(|&s| u(s)));
    }
    // The first feature of the slice a launch writes (see `run`).
    debug_assert_eq!(p.len(), FIRST_FEATURE);
    p.push(0);
    // Each batch element's keys (all of them without padding).
    for b in 0..n.batch {
        let keys = spec.keys.as_ref().map_or(0..n.keys, |k| k[b].clone());
        p.extend([u(keys.start), u(keys.end)]);
    }
    p
}

/// Launches `entry` over `[rows / WG, heads, batch]` workgroups, once per slice
/// of [`FEATURE_SLICE`] features of the head; `buffers` are the six inputs then
/// the outputs (two, or three for [`Entry::Backward`]).
#[allow(clippy::too_many_arguments)]
fn run(
    rt: &Runtime,
    elem: Elem,
    n: &AttentionDims,
    entry: Entry,
    params: &[u32],
    buffers: &[&Arc<Pooled>],
    vec: bool,
    grid: [usize; 3],
) {
    let d = n.head_dim;
    let adapter = rt.gpu.limits.max_compute_workgroup_storage_size;
    let cap = MEMORY_CAP.lock().unwrap_or_else(|p| p.into_inner());
    let limit = cap.unwrap_or(entry.wanted_bytes()).min(adapter) as usize;
    let plan = plan(entry, padded(d), limit.max(CHUNKED_BYTES));
    let kern = kernel(
        rt,
        &Key::Named(
            entry.label(),
            vec![elem as u32, u(d), u(plan.dc), u(plan.rc), u32::from(vec)],
        ),
        Bindings {
            reads: 6,
            writes: buffers.len() - 6,
        },
        entry.name(),
        || with_elem(&entry.source(d, &plan, vec), elem).into_owned(),
    );
    let grid = [u(grid[0].div_ceil(BLOCK)), u(grid[1]), u(grid[2])];
    if d <= FEATURE_SLICE {
        // One slice, from feature 0 as `params` says: no copy of them.
        launch(rt, &kern, params, buffers, grid);
        return;
    }
    let mut sliced = params.to_vec();
    for first in (0..d).step_by(FEATURE_SLICE) {
        sliced[FIRST_FEATURE] = u(first);
        launch(rt, &kern, &sliced, buffers, grid);
    }
}

/// See [`Backend::attention`](crate::backend::Backend::attention). With `half`
/// (f16 products allowed), f32 operands and a head width [`attention_coop`]
/// takes, on an adapter with tensor cores, both products run on cooperative
/// matrices. The output goes `into` a buffer of the caller's where given (laid
/// out as `packed_like(q)`, from its start), else into a new one.
pub(crate) fn forward(
    rt: &Runtime,
    elem: Elem,
    [q, k, v]: [Operand; 3],
    spec: &AttentionSpec,
    half: bool,
    into: Option<&Arc<Pooled>>,
) -> (Arc<Pooled>, Arc<Pooled>) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let rows = n.batch * n.heads * n.queries;
    let out = into
        .cloned()
        .unwrap_or_else(|| alloc(rt, rows * n.head_dim * elem.size()));
    let lse = alloc(rt, rows * elem.size());
    if rows * n.head_dim == 0 {
        return (out, lse);
    }
    let packed = packed_like(q.1);
    let p = params(&n, spec, [q, k, v, q], [0, 0], [&packed; 3]);
    let buffers = [q.0, k.0, v.0, q.0, q.0, q.0, &out, &lse];
    if on_tensor_cores(rt, elem, &n, half, &[q, k, v]) {
        let d = n.head_dim;
        let padded = spec.keys.is_some();
        let kern = kernel(
            rt,
            &Key::Named(
                "volta flash_attention tensor-core",
                vec![
                    u(d),
                    u32::from(attention_coop::prefetch()),
                    u32::from(padded),
                ],
            ),
            Bindings {
                reads: 6,
                writes: 2,
            },
            "forward",
            || attention_coop::source(d, attention_coop::prefetch(), padded),
        );
        let grid = [
            u(n.queries.div_ceil(attention_coop::ROWS)),
            u(n.heads),
            u(n.batch),
        ];
        launch(rt, &kern, &p, &buffers, grid);
        return (out, lse);
    }
    run(
        rt,
        elem,
        &n,
        Entry::Forward,
        &p,
        &buffers,
        vectors(n.head_dim, &[q, k, v]),
        [n.queries, n.heads, n.batch],
    );
    (out, lse)
}

/// Whether attention over `views` runs on cooperative matrices: `half` (f16
/// products allowed), an adapter with tensor cores, f32 operands that read as
/// vec4s, and a head width the kernels take.
fn on_tensor_cores(
    rt: &Runtime,
    elem: Elem,
    n: &AttentionDims,
    half: bool,
    views: &[Operand],
) -> bool {
    half && rt.gpu.info.tensor_cores
        && elem == Elem::F32
        && attention_coop::fits(n.head_dim)
        && views.iter().all(|o| attention_coop::loads_as_vectors(o.1))
}

/// See [`Backend::attention_backward`](crate::backend::Backend::attention_backward).
/// With `half`, on cooperative matrices where the forward may run on them. With
/// `one_buffer` (the length of the memory that q, k and v view: the heads of one
/// projection), dq, dk and dv go into one buffer through q's, k's and v's views
/// where the adapter allows ([`place`]), so that their concatenation is that
/// buffer.
pub(crate) fn backward(
    rt: &Runtime,
    elem: Elem,
    [q, k, v, g]: [Operand; 4],
    [lse, delta]: [Operand; 2],
    spec: &AttentionSpec,
    half: bool,
    one_buffer: Option<usize>,
) -> ([Arc<Pooled>; 3], [Layout; 3]) {
    let n = AttentionDims::of(&q.1.dims, &k.1.dims);
    let d = n.head_dim;
    let q_len = n.batch * n.heads * n.queries * d;
    let kv_len = n.batch * n.kv_heads * n.keys * d;
    let tensor_cores = on_tensor_cores(rt, elem, &n, half, &[q, k, v, g]);
    // dq added atomically by the launch that computes dk and dv (on tensor
    // cores or not).
    let one_launch = elem == Elem::F32
        && rt.gpu.float_atomics()
        && !super::DETERMINISTIC.load(std::sync::atomic::Ordering::Relaxed);
    let empty = q_len == 0 || kv_len == 0;
    let lens = [q_len, kv_len, kv_len];
    let zero_dq = one_launch && !empty;
    let placed = place(
        rt,
        elem,
        [q.1, k.1, v.1],
        lens,
        one_buffer.filter(|_| !empty),
        zero_dq,
    );
    let results = placed.written;
    let [dq, dk, dv] = placed.bound.clone();
    if empty {
        return placed.returned;
    }
    let p = params(
        &n,
        spec,
        [q, k, v, g],
        [lse.1.offset, delta.1.offset],
        [&results[0], &results[1], &results[2]],
    );
    let ins = [q.0, k.0, v.0, g.0, lse.0, delta.0];
    let vec = vectors(d, &[q, k, v, g]);
    let keys = [n.keys, n.kv_heads, n.batch];
    let all = [
        ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], &dk, &dv, &dq,
    ];
    if one_launch && !tensor_cores {
        run(rt, elem, &n, Entry::Backward, &p, &all, vec, keys);
        return placed.returned;
    }
    // The second output binding of the launches that write one result.
    let unused = alloc(rt, 4);
    let with = |a, b| [ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], a, b];
    if tensor_cores {
        // One generated module, an entry (and a pipeline of its own) per launch;
        // the one-launch backward's module has `backward_kv` alone.
        let prefetch = attention_coop::prefetch();
        let padded = spec.keys.is_some();
        let kern = |entry, name, atomic_dq: bool| {
            // dq's atomic sum is a third output.
            let writes = if atomic_dq { 3 } else { 2 };
            kernel(
                rt,
                &Key::Named(name, vec![u(d), u32::from(prefetch), u32::from(padded)]),
                Bindings { reads: 6, writes },
                entry,
                || attention_coop_backward::source(d, prefetch, atomic_dq, padded),
            )
        };
        let rows = attention_coop::ROWS;
        let grid = |len: usize, heads: usize| [u(len.div_ceil(rows)), u(heads), u(n.batch)];
        let kv_grid = grid(n.keys, n.kv_heads);
        if one_launch {
            let name = "volta flash_attention tensor-core backward (atomic dq)";
            launch(rt, &kern("backward_kv", name, true), &p, &all, kv_grid);
            return placed.returned;
        }
        let dq_grid = grid(n.queries, n.heads);
        let dq_kernel = kern(
            "backward_q",
            "volta flash_attention tensor-core backward_q",
            false,
        );
        launch(rt, &dq_kernel, &p, &with(&dq, &unused), dq_grid);
        let kv_kernel = kern(
            "backward_kv",
            "volta flash_attention tensor-core backward_kv",
            false,
        );
        launch(rt, &kv_kernel, &p, &with(&dk, &dv), kv_grid);
        return placed.returned;
    }
    run(
        rt,
        elem,
        &n,
        Entry::BackwardQ,
        &p,
        &with(&dq, &unused),
        vec,
        [n.queries, n.heads, n.batch],
    );
    run(
        rt,
        elem,
        &n,
        Entry::BackwardKv,
        &p,
        &with(&dk, &dv),
        vec,
        keys,
    );
    placed.returned
}

/// Where the backward writes dq, dk and dv.
struct Placement {
    /// The buffers its kernels bind: windows of one buffer, or three buffers.
    bound: [Arc<Pooled>; 3],
    /// The layouts its kernels write through, from each bound buffer's start.
    written: [Layout; 3],
    /// What the caller gets: the buffers and the gradients' layouts in them.
    returned: ([Arc<Pooled>; 3], [Layout; 3]),
}

/// [`Placement`] of the gradients of `views` (q, k, v; `lens` elements each):
/// with `one_buffer` (the length of the memory they view), into one buffer of
/// that length through the views themselves, each bound as a window at its
/// offset where the adapter's offset alignment allows; else each into its own
/// buffer, laid out as `packed_like` its operand. With `zero_dq`, dq starts at
/// zero (a sum over key blocks).
fn place(
    rt: &Runtime,
    elem: Elem,
    views: [&Layout; 3],
    lens: [usize; 3],
    one_buffer: Option<usize>,
    zero_dq: bool,
) -> Placement {
    let align = rt.gpu.limits.min_storage_buffer_offset_alignment.max(4) as usize;
    let aligned = || {
        views
            .iter()
            .all(|l| (l.offset * elem.size()).is_multiple_of(align))
    };
    if let Some(len) = one_buffer.filter(|_| aligned()) {
        let whole = alloc(rt, len * elem.size());
        if zero_dq {
            write(rt, elem, Expr::scalar(0), &[], &[0], (&whole, views[0]));
        }
        let bound = whole.bound_size();
        let window = |l: &Layout| {
            let at = (l.offset * elem.size()) as u64;
            Pooled::window(&whole, at, bound - at)
        };
        return Placement {
            bound: views.map(window),
            written: views.map(|l| Layout { offset: 0, ..*l }),
            returned: ([whole.clone(), whole.clone(), whole], views.map(|l| *l)),
        };
    }
    let dq = if zero_dq {
        fill(rt, elem, lens[0], 0)
    } else {
        alloc(rt, lens[0] * elem.size())
    };
    let bound = [
        dq,
        alloc(rt, lens[1] * elem.size()),
        alloc(rt, lens[2] * elem.size()),
    ];
    let written = views.map(packed_like);
    Placement {
        returned: (bound.clone(), written),
        bound,
        written,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of reading the operands, in f32 and f16, at a narrow and a
    /// wide head, under the default and the browser's plans, translate.
    #[test]
    fn every_access_validates_and_translates() {
        for (elem, d, vec, limit) in [
            (Elem::F32, 64, true, 24 << 10),
            (Elem::F32, 64, false, 24 << 10),
            (Elem::F32, 200, true, CHUNKED_BYTES),
            // Wider than a slice: the launches write 256 features each.
            (Elem::F32, 320, true, 24 << 10),
            (Elem::F32, 258, false, CHUNKED_BYTES),
            (Elem::F16, 12, true, 24 << 10),
            (Elem::F16, 6, false, CHUNKED_BYTES),
        ] {
            for entry in [
                Entry::Forward,
                Entry::BackwardQ,
                Entry::BackwardKv,
                Entry::Backward,
            ] {
                if entry == Entry::Backward && elem != Elem::F32 {
                    continue;
                }
                let plan = plan(entry, padded(d), limit);
                let text = entry.source(d, &plan, vec);
                let src = with_elem(&text, elem);
                attention_coop::assert_translates(
                    &format!("{elem:?} d {d} vec {vec} {}", entry.name()),
                    &src,
                );
            }
        }
    }
}
