//! WGSL generation for the register-tiled matmul. Each workgroup computes a
//! `bm × bn` tile of C, stepping through K `bk` at a time via shared memory; each
//! thread accumulates `tm × tn` outputs in registers (as `vec4`s). Loops over the
//! tile are unrolled in the generated text (WGSL compilers do not unroll), and
//! operand loads are `vec4` when the operand's contiguous axis allows it.
use std::fmt::Write;

/// How a matmul kernel moves K tiles of its operands into shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Staging {
    /// Load, store, multiply: two barriers per tile, no registers held.
    Direct,
    /// Fetch the next tile into registers while multiplying the current one
    /// (latency hidden within a workgroup, at the cost of registers that would
    /// otherwise let more workgroups share a core); two barriers per tile.
    Prefetch,
    /// As `Prefetch`, into a second shared buffer: one barrier per tile, twice
    /// the shared memory.
    Double,
}

/// Tile sizes of the GPU matmul (a tuning knob; see
/// [`Gpu::set_matmul_tiles`](crate::Gpu::set_matmul_tiles)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulTiles {
    /// Rows of C per workgroup.
    pub bm: u32,
    /// Columns of C per workgroup.
    pub bn: u32,
    /// K step per shared-memory tile.
    pub bk: u32,
    /// Rows per thread (a multiple of 4).
    pub tm: u32,
    /// Columns per thread (a multiple of 4).
    pub tn: u32,
    /// How K tiles reach shared memory.
    pub staging: Staging,
    /// How threads map onto the workgroup's grid of `(bm/tm) × (bn/tn)` thread
    /// tiles: 0 numbers them row by row; otherwise each run of 32 threads (a
    /// subgroup on NVIDIA GPUs) covers a block `warp_cols` wide and `32 / warp_cols`
    /// high. Blocks of 8×4 read fewer distinct shared-memory words per step than a
    /// 16×2 strip: 4096² went from 41.3 to 45.3 TFLOP/s with 128×128 tiles on an
    /// H100 (2026-11-24). Results do not depend on it.
    pub warp_cols: u32,
}

const fn tiles(
    bm: u32,
    bn: u32,
    bk: u32,
    tm: u32,
    tn: u32,
    staging: Staging,
    warp_cols: u32,
) -> MatmulTiles {
    MatmulTiles {
        bm,
        bn,
        bk,
        tm,
        tn,
        staging,
        warp_cols,
    }
}

const P: Staging = Staging::Prefetch;
const D: Staging = Staging::Direct;
const DOUBLE: Staging = Staging::Double;

impl MatmulTiles {
    /// The configurations the GPU benchmark sweeps (and the parity tests check).
    pub const CANDIDATES: [MatmulTiles; 17] = [
        tiles(128, 128, 8, 16, 8, P, 8),
        tiles(128, 128, 8, 16, 8, DOUBLE, 0),
        tiles(256, 128, 8, 16, 8, P, 8),
        tiles(128, 128, 8, 8, 16, P, 0),
        tiles(64, 128, 8, 8, 16, P, 8),
        tiles(128, 128, 8, 8, 8, P, 0),
        tiles(128, 128, 16, 8, 8, P, 0),
        tiles(128, 128, 16, 8, 8, DOUBLE, 0),
        tiles(64, 64, 8, 4, 4, P, 0),
        tiles(64, 64, 16, 8, 8, P, 0),
        tiles(128, 64, 16, 8, 8, P, 0),
        tiles(64, 128, 8, 4, 8, P, 0),
        tiles(64, 128, 16, 4, 8, D, 0),
        tiles(256, 128, 8, 16, 8, P, 0),
        tiles(256, 128, 8, 16, 8, DOUBLE, 0),
        tiles(128, 128, 8, 8, 8, DOUBLE, 0),
        tiles(128, 64, 8, 16, 8, P, 4),
    ];

    /// Shared-memory copies of each operand tile.
    fn buffers(&self) -> u32 {
        if self.staging == Staging::Double {
            2
        } else {
            1
        }
    }

    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    /// Whether the sizes fit the kernel's scheme and the device's limits.
    pub fn check(&self, max_threads: u32, max_shared: u32) -> Result<(), String> {
        let ok = self.tm > 0
            && self.tn > 0
            && self.bk > 0
            && self.tm.is_multiple_of(4)
            && self.tn.is_multiple_of(4)
            && self.bk.is_multiple_of(4)
            && self.bm.is_multiple_of(self.tm)
            && self.bn.is_multiple_of(self.tn)
            && self.threads() <= max_threads
            && (self.warp_cols == 0
                || (32 % self.warp_cols == 0
                    && (self.bn / self.tn).is_multiple_of(self.warp_cols)
                    && (self.bm / self.tm).is_multiple_of(32 / self.warp_cols)))
            && (self.bm + self.bn) * self.bk * 4 * self.buffers() <= max_shared;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "matmul tiles {self:?}: need tm, tn, bk multiples of 4 dividing bm, bn; \
                 warp_cols 0 or a divisor of 32 that tiles the thread grid; at most {max_threads} threads and {max_shared} bytes of shared memory"
            ))
        }
    }
}

/// How an operand tile is read from global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Load {
    /// `vec4` along the tile's inner (output) axis: m for A, n for B.
    Outer4,
    /// `vec4` along k.
    K4,
    /// Scalars, consecutive threads walking k.
    ScalarK,
    /// Scalars, consecutive threads walking m (A) or n (B).
    ScalarOuter,
}

impl Load {
    fn is_vec(self) -> bool {
        matches!(self, Load::Outer4 | Load::K4)
    }
}

/// One compiled variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Variant {
    pub tiles: MatmulTiles,
    pub a: Load,
    pub b: Load,
    /// `vec4` stores of C (N divisible by 4).
    pub c_vec: bool,
    /// A and B hold `f16` (converted to `f32` as they are loaded; shared memory and
    /// accumulators stay `f32`).
    pub half: bool,
    /// C holds `f16` (the `f32` accumulators are rounded when stored).
    pub half_out: bool,
    /// A bias along C's columns, of C's element type (binding 3; C moves to 4),
    /// from element `p[11]`, added as the accumulators are stored.
    pub bias: bool,
}

/// One operand as the loader sees it: a `bo × bk` tile (`bo` = bm for A, bn for B)
/// copied into the shared array `sh`, laid out `[k][outer]` as `vec4`s along outer.
struct Operand<'a> {
    load: Load,
    /// The buffer holds `f16`.
    half: bool,
    bo: u32,
    /// Names in the generated source: buffer, shared array, register prefix, base
    /// offset, first outer index of the tile, outer length, outer and k strides.
    src: &'a str,
    sh: &'a str,
    /// Where the tile being stored starts in `sh` (a second buffer when double).
    st: &'a str,
    reg: &'a str,
    base: &'a str,
    outer0: &'a str,
    outer_len: &'a str,
    s_outer: &'a str,
    s_k: &'a str,
}

/// The three parts of a tile load: register declarations, the global fetch of the
/// tile starting at `kt` into registers, and the store of the registers into shared
/// memory. Split so that the next tile's fetch can overlap the current compute.
struct TileLoad {
    decls: String,
    fetch: String,
    /// The fetch for tiles that lie inside the operand: no bounds tests.
    fetch_inside: String,
    store: String,
}

impl TileLoad {
    /// Both fetches, picked by the workgroup-uniform `inside`.
    fn fetch_either(&self, other: &TileLoad) -> String {
        format!(
            "        if (inside) {{\n{}{}        }} else {{\n{}{}        }}\n",
            self.fetch_inside, other.fetch_inside, self.fetch, other.fetch
        )
    }
}

fn load_tile(op: &Operand, threads: u32, bk: u32) -> TileLoad {
    let Operand {
        load,
        half,
        bo,
        src,
        sh,
        st,
        reg,
        base,
        outer0,
        outer_len,
        s_outer,
        s_k,
    } = *op;
    let items = if load.is_vec() { bo * bk / 4 } else { bo * bk };
    let reps = items.div_ceil(threads);
    let q = bo / 4;
    // A global load, converted to f32 when the buffer holds f16.
    let ld = |at: String| match (half, load.is_vec()) {
        (false, _) => format!("{src}[{at}]"),
        (true, true) => format!("vec4<f32>({src}[{at}])"),
        (true, false) => format!("f32({src}[{at}])"),
    };
    let mut t = TileLoad {
        decls: String::new(),
        fetch: String::new(),
        fetch_inside: String::new(),
        store: String::new(),
    };
    for r in 0..reps {
        let v = format!("{reg}{r}");
        let guard = items % threads != 0 && r == reps - 1;
        let open = |w: &mut String| {
            writeln!(w, "        {{ let e = li + {}u;", r * threads).unwrap();
            if guard {
                writeln!(w, "        if (e < {items}u) {{").unwrap();
            }
        };
        let close = |w: &mut String| {
            if guard {
                writeln!(w, "        }}").unwrap();
            }
            writeln!(w, "        }}").unwrap();
        };
        let ty = if load.is_vec() { "vec4<f32>" } else { "f32" };
        writeln!(t.decls, "    var {v}: {ty};").unwrap();
        open(&mut t.fetch);
        open(&mut t.fetch_inside);
        open(&mut t.store);
        match load {
            Load::Outer4 => {
                writeln!(
                    t.fetch,
                    "        let kk = e / {q}u; let go = {outer0} + (e % {q}u) * 4u; let gk = kt + kk;
        {v} = vec4<f32>(0.0);
        if (go < {outer_len} && gk < K) {{ {v} = {}; }}",
                    ld(format!("({base} + gk * {s_k} + go) / 4u"))
                )
                .unwrap();
                writeln!(
                    t.fetch_inside,
                    "        let kk = e / {q}u; let go = {outer0} + (e % {q}u) * 4u; let gk = kt + kk;
        {v} = {};",
                    ld(format!("({base} + gk * {s_k} + go) / 4u"))
                )
                .unwrap();
                writeln!(
                    t.store,
                    "        {sh}[{st} + (e / {q}u) * {q}u + e % {q}u] = {v};"
                )
                .unwrap();
            }
            Load::K4 => {
                let k4 = bk / 4;
                writeln!(
                    t.fetch,
                    "        let go = {outer0} + e / {k4}u; let gk = kt + (e % {k4}u) * 4u;
        {v} = vec4<f32>(0.0);
        if (go < {outer_len} && gk < K) {{ {v} = {}; }}",
                    ld(format!("({base} + go * {s_outer} + gk) / 4u"))
                )
                .unwrap();
                writeln!(
                    t.fetch_inside,
                    "        let go = {outer0} + e / {k4}u; let gk = kt + (e % {k4}u) * 4u;
        {v} = {};",
                    ld(format!("({base} + go * {s_outer} + gk) / 4u"))
                )
                .unwrap();
                writeln!(
                    t.store,
                    "        let o = e / {k4}u; let si = {st} + (e % {k4}u) * {q4}u + o / 4u; let comp = o % 4u;
        {sh}[si][comp] = {v}.x; {sh}[si + {q}u][comp] = {v}.y;
        {sh}[si + {q2}u][comp] = {v}.z; {sh}[si + {q3}u][comp] = {v}.w;",
                    q4 = 4 * q,
                    q2 = 2 * q,
                    q3 = 3 * q
                )
                .unwrap();
            }
            Load::ScalarK | Load::ScalarOuter => {
                let (o, kk) = if load == Load::ScalarK {
                    (format!("e / {bk}u"), format!("e % {bk}u"))
                } else {
                    (format!("e % {bo}u"), format!("e / {bo}u"))
                };
                writeln!(
                    t.fetch,
                    "        let go = {outer0} + {o}; let gk = kt + {kk};
        {v} = 0.0;
        if (go < {outer_len} && gk < K) {{ {v} = {}; }}",
                    ld(format!("{base} + go * {s_outer} + gk * {s_k}"))
                )
                .unwrap();
                writeln!(
                    t.fetch_inside,
                    "        let go = {outer0} + {o}; let gk = kt + {kk};
        {v} = {};",
                    ld(format!("{base} + go * {s_outer} + gk * {s_k}"))
                )
                .unwrap();
                writeln!(
                    t.store,
                    "        let o = {o}; {sh}[{st} + ({kk}) * {q}u + o / 4u][o % 4u] = {v};"
                )
                .unwrap();
            }
        }
        close(&mut t.fetch);
        close(&mut t.fetch_inside);
        close(&mut t.store);
    }
    t
}

/// Where thread `li` sits in the workgroup's grid of thread tiles (`tx` along N,
/// `txn` of them; `ty` along M): see [`MatmulTiles::warp_cols`].
fn thread_mapping(txn: u32, warp_cols: u32) -> String {
    if warp_cols == 0 {
        return format!("let tx = li % {txn}u; let ty = li / {txn}u;");
    }
    let (wx, wy, blocks) = (warp_cols, 32 / warp_cols, txn / warp_cols);
    format!(
        "let warp = li / 32u; let lane = li % 32u;
    let tx = (warp % {blocks}u) * {wx}u + lane % {wx}u; let ty = (warp / {blocks}u) * {wy}u + lane / {wx}u;"
    )
}

/// The kernel's WGSL. Parameters: `p = [M, N, K, a_off, a_sb, a_sm, a_sk, b_off,
/// b_sb, b_sk, b_sn]` (and the bias's offset); the grid is `(⌈N/bn⌉, ⌈M/bm⌉,
/// batch)`; C is contiguous.
pub(crate) fn source(v: &Variant) -> String {
    let t = v.tiles;
    let (bm, bn, bk, tm, tn) = (t.bm, t.bn, t.bk, t.tm, t.tn);
    let threads = t.threads();
    let txn = bn / tn;
    let elem = |half: bool| if half { "f16" } else { "f32" };
    let ty_ = |vec: bool, half: bool| {
        if vec {
            format!("vec4<{}>", elem(half))
        } else {
            elem(half).to_string()
        }
    };
    let mut w = String::new();
    if v.half || v.half_out {
        w.push_str("enable f16;\n");
    }
    writeln!(
        w,
        "@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<{}>;
@group(0) @binding(2) var<storage, read> b: array<{}>;
{bias_binding}@group(0) @binding({c_binding}) var<storage, read_write> c: array<{}>;
var<workgroup> As: array<vec4<f32>, {}>;
var<workgroup> Bs: array<vec4<f32>, {}>;

@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
    let M = p[0]; let N = p[1]; let K = p[2];
    let z = wid.z;
    let m0 = wid.y * {bm}u; let n0 = wid.x * {bn}u;
    let a_base = p[3] + z * p[4]; let a_sm = p[5]; let a_sk = p[6];
    let b_base = p[7] + z * p[8]; let b_sk = p[9]; let b_sn = p[10];
    {mapping}
    // Tiles wholly inside A, B and C load without bounds tests.
    let inside = m0 + {bm}u <= M && n0 + {bn}u <= N && K % {bk}u == 0u;",
        ty_(v.a.is_vec(), v.half),
        ty_(v.b.is_vec(), v.half),
        ty_(v.c_vec, v.half_out),
        bk * bm / 4 * t.buffers(),
        bk * bn / 4 * t.buffers(),
        mapping = thread_mapping(txn, t.warp_cols),
        bias_binding = if v.bias {
            format!(
                "@group(0) @binding(3) var<storage, read> bias: array<{}>;\n",
                elem(v.half_out)
            )
        } else {
            String::new()
        },
        c_binding = if v.bias { 4 } else { 3 },
    )
    .unwrap();
    for i in 0..tm {
        for j in 0..tn / 4 {
            writeln!(w, "    var acc{i}_{j} = vec4<f32>(0.0);").unwrap();
        }
    }
    let a_tile = load_tile(
        &Operand {
            load: v.a,
            half: v.half,
            bo: bm,
            src: "a",
            sh: "As",
            st: "a_st",
            reg: "ra",
            base: "a_base",
            outer0: "m0",
            outer_len: "M",
            s_outer: "a_sm",
            s_k: "a_sk",
        },
        threads,
        bk,
    );
    let b_tile = load_tile(
        &Operand {
            load: v.b,
            half: v.half,
            bo: bn,
            src: "b",
            sh: "Bs",
            st: "b_st",
            reg: "rb",
            base: "b_base",
            outer0: "n0",
            outer_len: "N",
            s_outer: "b_sn",
            s_k: "b_sk",
        },
        threads,
        bk,
    );
    w.push_str(&a_tile.decls);
    w.push_str(&b_tile.decls);
    let (a_size, b_size) = (bk * bm / 4, bk * bn / 4);
    match t.staging {
        Staging::Prefetch => {
            // Registers hold the next tile while the current one is multiplied.
            writeln!(
                w,
                "    let a_st = 0u; let b_st = 0u; let a_rd = 0u; let b_rd = 0u;
    {{ let kt = 0u;
{}    }}",
                a_tile.fetch_either(&b_tile)
            )
            .unwrap();
            writeln!(w, "    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{").unwrap();
            w.push_str(&a_tile.store);
            w.push_str(&b_tile.store);
            writeln!(
                w,
                "        workgroupBarrier();\n        let kt = k0 + {bk}u;\n        if (kt < K) {{\n{}        }}",
                a_tile.fetch_either(&b_tile)
            )
            .unwrap();
        }
        Staging::Direct => {
            writeln!(
                w,
                "    let a_st = 0u; let b_st = 0u; let a_rd = 0u; let b_rd = 0u;
    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{\n        let kt = k0;"
            )
            .unwrap();
            w.push_str(&a_tile.fetch_either(&b_tile));
            w.push_str(&a_tile.store);
            w.push_str(&b_tile.store);
            writeln!(w, "        workgroupBarrier();").unwrap();
        }
        Staging::Double => {
            // The first tile into buffer 0; then each step fetches the next tile,
            // multiplies the current buffer and stores into the other: the one
            // barrier per step orders both.
            writeln!(
                w,
                "    {{ let kt = 0u;
{}    }}
    {{ let a_st = 0u; let b_st = 0u;
{}{}    }}
    workgroupBarrier();
    var cur = 0u;
    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{
        let kt = k0 + {bk}u;
        let more = kt < K;
        if (more) {{
{}        }}
        let a_rd = cur * {a_size}u; let b_rd = cur * {b_size}u;",
                a_tile.fetch_either(&b_tile),
                a_tile.store,
                b_tile.store,
                a_tile.fetch_either(&b_tile)
            )
            .unwrap();
        }
    }
    for kk in 0..bk {
        for bi in 0..tm / 4 {
            writeln!(
                w,
                "        let a{kk}_{bi} = As[a_rd + {}u + ty];",
                kk * bm / 4 + bi * (bm / tm)
            )
            .unwrap();
        }
        for bj in 0..tn / 4 {
            writeln!(
                w,
                "        let b{kk}_{bj} = Bs[b_rd + {}u + tx];",
                kk * bn / 4 + bj * (bn / tn)
            )
            .unwrap();
        }
        for bi in 0..tm / 4 {
            for r in 0..4 {
                let comp = ["x", "y", "z", "w"][r];
                let i = bi * 4 + r as u32;
                for bj in 0..tn / 4 {
                    writeln!(
                        w,
                        "        acc{i}_{bj} = fma(vec4<f32>(a{kk}_{bi}.{comp}), b{kk}_{bj}, acc{i}_{bj});"
                    )
                    .unwrap();
                }
            }
        }
    }
    if t.staging == Staging::Double {
        writeln!(
            w,
            "        if (more) {{\n        let a_st = (1u - cur) * {a_size}u; let b_st = (1u - cur) * {b_size}u;\n{}{}        }}\n        cur = 1u - cur;",
            a_tile.store, b_tile.store
        )
        .unwrap();
    }
    writeln!(w, "        workgroupBarrier();\n    }}").unwrap();
    // An f32 accumulator (plus its column's bias) as C's element type.
    let store = |acc: String, vec: bool| {
        let acc = match (v.bias, vec) {
            (false, _) => acc,
            (true, true) => format!(
                "({acc} + vec4<f32>(f32(bias[p[11] + gn]), f32(bias[p[11] + gn + 1u]), \
                 f32(bias[p[11] + gn + 2u]), f32(bias[p[11] + gn + 3u])))"
            ),
            (true, false) => format!("({acc} + f32(bias[p[11] + gn + q]))"),
        };
        match (v.half_out, vec) {
            (false, _) => acc,
            (true, true) => format!("vec4<f16>({acc})"),
            (true, false) => format!("f16({acc})"),
        }
    };
    for bi in 0..tm / 4 {
        for r in 0..4u32 {
            let i = bi * 4 + r;
            writeln!(
                w,
                "    {{ let gm = m0 + {}u + ty * 4u; if (gm < M) {{ let row = (z * M + gm) * N;",
                bi * (4 * bm / tm) + r
            )
            .unwrap();
            for bj in 0..tn / 4 {
                let gn = format!("n0 + {}u + tx * 4u", bj * (4 * bn / tn));
                if v.c_vec {
                    writeln!(
                        w,
                        "        {{ let gn = {gn}; if (gn < N) {{ c[(row + gn) / 4u] = {}; }} }}",
                        store(format!("acc{i}_{bj}"), true)
                    )
                    .unwrap();
                } else {
                    writeln!(w, "        {{ let gn = {gn};").unwrap();
                    for (q, comp) in ["x", "y", "z", "w"].iter().enumerate() {
                        writeln!(
                            w,
                            "        {{ let q = {q}u; if (gn + q < N) {{ c[row + gn + q] = {}; }} }}",
                            store(format!("acc{i}_{bj}.{comp}"), false)
                        )
                        .unwrap();
                    }
                    writeln!(w, "        }}").unwrap();
                }
            }
            writeln!(w, "    }} }}").unwrap();
        }
    }
    writeln!(w, "}}").unwrap();
    w
}
