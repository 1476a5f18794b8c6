//! The flash-attention forward on tensor cores: `softmax(scale·q·kᵀ + mask)·v`
//! with both products on 16×16×16 cooperative matrices (`f16` operands, `f32`
//! sums), for head widths that are multiples of 16 up to 64, with dropout on the
//! weights as the SIMT kernels draw it. Its backward is
//! [`attention_coop_backward`](super::attention_coop_backward).
//! A prompt's attention runs it, and so does the training forward in
//! half precision ([`MatmulPrecision::Half`](crate::backend::gpu::MatmulPrecision)).
//!
//! A workgroup of four subgroups takes 64 query rows of one head. Per tile of 64
//! keys the workgroup stages keys and values as `f16`; each subgroup multiplies
//! its block of the scores into workgroup memory (a quadrant of 32 rows × 32
//! keys where the head is a multiple of 32 wide, else 16 rows × 64 keys), with
//! its query fragments held in registers; the lanes, two per row, run the online
//! softmax and write the probabilities back as `f16`; the probabilities times
//! the values add to the output's accumulators (each subgroup's block of rows ×
//! features, held in registers). A row's probabilities are taken against a maximum that moves
//! only when a tile's scores pass it by [`RESCALE_AT`]; only then do the
//! accumulators go through workgroup memory to be rescaled. Causal tiles past
//! the block's last row are skipped, and so are the tiles outside a batch
//! element's range of keys (padding). Parameters and bindings are the SIMT kernel's
//! (`shaders/flash_attention.wgsl`), so the backward pass reads its
//! log-sum-exp.
use std::fmt::Write;

/// Query rows (and keys per tile) of a workgroup.
pub(crate) const ROWS: usize = 64;
/// Floats per row of a score tile in workgroup memory: 64 keys and 4 of
/// padding, so that rows start in different banks (and stay 16-byte aligned,
/// as cooperative-matrix stores need).
pub(crate) const SP: usize = ROWS + 4;

/// Whether a view `[B, H, T, d]` reads as `vec4`s: features contiguous, the
/// offset and the other strides multiples of 4.
pub(crate) fn loads_as_vectors(l: &crate::layout::Layout) -> bool {
    l.strides[3] == 1
        && l.offset.is_multiple_of(4)
        && l.strides[..3].iter().all(|s| s.is_multiple_of(4))
}

/// Whether the kernel takes heads of width `d`.
pub(crate) fn fits(d: usize) -> bool {
    d > 0 && d <= 64 && d.is_multiple_of(16)
}

/// `fetch_{x}`: rows first..first + 64 of a head of operand `x` (`q`, `k`, `v`
/// or `g`; zeros past `rows`), this thread's share, as f32 vec4s in registers
/// (all its loads in flight together); `put_{x}` stores a fetched share into the
/// shared tile `tile` as f16 rows of `dp4` vec4s. Split so that the next tile's
/// loads overlap the current tile's products.
pub(crate) fn stage(x: &str, tile: &str, d: usize, dp4: usize) -> String {
    let d4 = d / 4;
    let per = ROWS * d4 / 128;
    let mut w = format!(
        "fn fetch_{x}(hd: vec3<u32>, first: u32, rows: u32, li: u32) -> array<vec4<f32>, {per}> {{
    var x: array<vec4<f32>, {per}>;\n"
    );
    for i in 0..per {
        writeln!(
            w,
            "    {{ let e = li + {}u; let r = e / {d4}u;
    if (first + r < rows) {{ x[{i}] = {x}[(hd.x + (first + r) * hd.y) / 4u + e % {d4}u]; }} }}",
            i * 128
        )
        .unwrap();
    }
    w.push_str("    return x;\n}\n");
    w + &put(x, tile, d, dp4, "f32")
}

/// `put_{x}` alone, taking the share as vec4s of `held` (`f32` as fetched, or
/// `f16`: a share rounded once and kept in registers).
pub(crate) fn put(x: &str, tile: &str, d: usize, dp4: usize, held: &str) -> String {
    let d4 = d / 4;
    let per = ROWS * d4 / 128;
    let mut w = format!("fn put_{x}(x: array<vec4<{held}>, {per}>, li: u32) {{\n");
    for i in 0..per {
        writeln!(
            w,
            "    {{ let e = li + {}u; {tile}[(e / {d4}u) * {dp4}u + e % {d4}u] = vec4<f16>(x[{i}]); }}",
            i * 128
        )
        .unwrap();
    }
    w.push_str("}\n");
    w
}

/// The staging of a loop's tiles (`x` in `xs`, each `(operand, head, rows)`,
/// its functions `fetch_{operand}{suffix}` and `put_{operand}{suffix}`), as WGSL
/// to place before the loop, at its start (between two barriers) and after
/// that: with `prefetch`, the next tile's loads go to registers while this one
/// multiplies (more registers per thread); without, each tile is loaded at its
/// turn and other workgroups on the core hide the wait.
pub(crate) fn tile_loads(
    prefetch: bool,
    xs: &[(&str, &str, &str)],
    suffix: &str,
    (first, at, end): (&str, &str, &str),
) -> [String; 3] {
    let mut out = [String::new(), String::new(), String::new()];
    for &(x, head, rows) in xs {
        let fetch = |from: &str| format!("fetch_{x}{suffix}({head}, {from}, {rows}, li)");
        if prefetch {
            out[0] += &format!("    var n{x} = {};\n", fetch(first));
            out[1] += &format!("        put_{x}{suffix}(n{x}, li);\n");
            out[2] += &format!(
                "        if ({at} + {ROWS}u < {end}) {{ n{x} = {}; }}\n",
                fetch(&format!("{at} + {ROWS}u"))
            );
        } else {
            out[1] += &format!("        put_{x}{suffix}({}, li);\n", fetch(at));
        }
    }
    out
}

/// Whether the tensor-core attention kernels prefetch the next tile into
/// registers (`VOLTA_ATTENTION_PREFETCH=1`; see [`tile_loads`]).
pub(crate) fn prefetch() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("VOLTA_ATTENTION_PREFETCH").is_ok_and(|v| v == "1"))
}

/// What every entry shares: the extensions, the bindings (the SIMT kernels',
/// with `q`, `k`, `v` and `g` read as vec4s), the head of an operand and the
/// keys a row sees. The dropout factors of weights come from [`DROPOUT`],
/// appended at the end. With `padded`, each batch element's range of keys
/// comes from the parameters; without, every batch element's keys are all of
/// them, constants the compiler folds, so unpadded launches run the kernels
/// they ran before padding existed.
pub(crate) fn header(d: usize, padded: bool) -> String {
    let (first, end) = if padded {
        ("p[44u + 2u * b]", "p[45u + 2u * b]")
    } else {
        ("0u", "p[4]")
    };
    format!(
        "enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> lse_in: array<f32>;
@group(0) @binding(6) var<storage, read> delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> out0: array<f32>;
@group(0) @binding(8) var<storage, read_write> out1: array<f32>;

const D: u32 = {d}u;
const LOWEST: f32 = -3.0e38;

// Operand `which` (0 q, 1 k, 2 v, 3 g) of head (b, h): its first element and
// its row and feature strides (p[8 + 5·which..]).
fn head(which: u32, b: u32, h: u32) -> vec3<u32> {{
    let s = 8u + 5u * which;
    return vec3<u32>(p[s] + b * p[s + 1u] + h * p[s + 2u], p[s + 3u], p[s + 4u]);
}}

// Batch element b's keys: first_key(b)..keys_end(b) (padding: p[44 + 2b]
// and p[45 + 2b]).
fn first_key(b: u32) -> u32 {{
    return {first};
}}

fn keys_end(b: u32) -> u32 {{
    return {end};
}}

// The end of the keys that query row t of batch element b sees: they are
// first_key(b)..visible(b, t) (cut at the causal bound), none where that is
// empty.
fn visible(b: u32, t: u32) -> u32 {{
    var end = keys_end(b);
    if (p[6] != 0u) {{
        end = min(p[7] + t + 1u, end);
    }}
    return end;
}}
"
    )
}

/// Dropout's factors of weights (`keep_keys4`, `keep_rows4`) and the
/// counter hash they draw from, as the SIMT kernels have them.
pub(crate) const DROPOUT: &str = concat!(
    include_str!("../../../../../shaders/attention_dropout.wgsl"),
    include_str!("../../../../../shaders/counter_hash.wgsl")
);

/// `{name}{f} = ` the subgroup's 16 rows of `tile`, features 16f.., as an A
/// fragment, for each 16 features.
pub(crate) fn fragments(w: &mut String, name: &str, tile: &str, d: usize, dp4: usize) {
    for f in 0..d / 16 {
        writeln!(
            w,
            "    let {name}{f} = coopLoadT<coop_mat16x16<f16, A>>(&{tile}[(sg * 16u) * {dp4}u + {}u], {dp4}u);",
            4 * f
        )
        .unwrap();
    }
}

/// `Ss` (the subgroup's 16 rows) = `a`-fragments times the transposed rows of
/// `tile` (64 of them): a score tile or its transpose.
pub(crate) fn scores(w: &mut String, a: &str, tile: &str, d: usize, dp4: usize) {
    for j in 0..ROWS / 16 {
        writeln!(w, "        {{ var s = coop_mat16x16<f32, C>();").unwrap();
        for f in 0..d / 16 {
            writeln!(
                w,
                "        s = coopMultiplyAdd({a}{f}, coopLoad<coop_mat16x16<f16, B>>(&{tile}[{}u * {dp4}u + {}u], {dp4}u), s);",
                16 * j,
                4 * f
            )
            .unwrap();
        }
        writeln!(
            w,
            "        coopStoreT(s, &Ss[sg * {}u + {}u], {}u); }}",
            4 * SP,
            4 * j,
            SP / 4
        )
        .unwrap();
    }
}

/// How far (natural log) a row's scores may rise above the maximum its
/// probabilities are taken against before the output is rescaled: the
/// probabilities stay below e⁸ ≈ 2981 (`f16` holds them), and a rescale (the
/// accumulators through workgroup memory) happens only where a tile's scores
/// jump that far.
pub(crate) const RESCALE_AT: f32 = 8.0;

/// How the forward's four subgroups split a tile's two products (64 query rows
/// by 64 keys, then by the head's `d` features). With `quads` (heads a multiple
/// of 32 wide) subgroup `sg` takes a quadrant: rows 32·(sg / 2).., keys
/// 32·(sg % 2).. and features (d / 2)·(sg % 2)..; each fragment of K, P and V
/// it loads serves two products (24 loads for its 32 products of a tile at
/// d = 64, against 36). Otherwise it takes rows 16·sg.., every key and every
/// feature. The backward's products into accumulators split the same way
/// (rows of keys or of queries, by features).
#[derive(Clone, Copy)]
pub(crate) struct Split {
    quads: bool,
    /// Fragments of 16 features in a head.
    frags: usize,
    /// Floats per row of the output in `Ss`.
    dp: usize,
}

impl Split {
    fn of(d: usize) -> Split {
        Split::with_rows(d, d + 4, d.is_multiple_of(32))
    }
    /// The split for heads `d` wide (in quadrants if `quads`), the results'
    /// rows `dp` floats long in `Ss`.
    pub(crate) fn with_rows(d: usize, dp: usize, quads: bool) -> Split {
        Split {
            quads: quads && d.is_multiple_of(32),
            frags: d / 16,
            dp,
        }
    }
    /// Blocks of 16 rows per subgroup.
    pub(crate) fn row_blocks(self) -> usize {
        if self.quads { 2 } else { 1 }
    }
    /// Blocks of 16 keys per subgroup.
    pub(crate) fn key_blocks(self) -> usize {
        if self.quads { 2 } else { 4 }
    }
    /// Blocks of 16 features per subgroup.
    pub(crate) fn col_blocks(self) -> usize {
        if self.quads {
            self.frags / 2
        } else {
            self.frags
        }
    }
    /// The subgroup's first row of block `i` (WGSL).
    pub(crate) fn row(self, i: usize) -> String {
        if self.quads {
            format!("(32u * (sg / 2u) + {}u)", 16 * i)
        } else {
            "(16u * sg)".into()
        }
    }
    /// The subgroup's block `j` of keys (WGSL).
    pub(crate) fn key(self, j: usize) -> String {
        if self.quads {
            format!("(2u * (sg % 2u) + {j}u)")
        } else {
            format!("{j}u")
        }
    }
    /// The subgroup's block `j` of features (WGSL).
    pub(crate) fn col(self, j: usize) -> String {
        if self.quads {
            format!("({}u * (sg % 2u) + {j}u)", self.frags / 2)
        } else {
            format!("{j}u")
        }
    }
    /// `stmt` for each of the subgroup's output accumulators `o{i}_{j}`, with
    /// `AT` the first vec4 of its block in Ss (rows of d + 4 floats) and
    /// `STRIDE` that row length in vec4s.
    pub(crate) fn accumulators(self, w: &mut String, stmt: &str) {
        for i in 0..self.row_blocks() {
            for j in 0..self.col_blocks() {
                let at = format!("{} * {}u + 4u * {}", self.row(i), self.dp / 4, self.col(j));
                let s = stmt
                    .replace("{i}", &i.to_string())
                    .replace("{j}", &j.to_string())
                    .replace("AT", &at)
                    .replace("STRIDE", &format!("{}u", self.dp / 4));
                writeln!(w, "{s}").unwrap();
            }
        }
    }
}

/// The kernel's WGSL for heads of width `d` (see [`fits`]), the next tile
/// loaded into registers ahead with `prefetch`, over padded batches with
/// `padded` (see [`header`]).
///
/// The output's rows stay in accumulators across the key tiles, so `P·V` adds
/// to them in place; a row's probabilities are taken against a maximum that
/// moves only when a tile's scores exceed it by [`RESCALE_AT`], and only then
/// (rarely past the first tile: a flag per subgroup says when) do the
/// accumulators go through workgroup memory to be rescaled.
pub(crate) fn source(d: usize, prefetch: bool, padded: bool) -> String {
    assert!(fits(d), "attention on tensor cores: head width {d}");
    let frags = d / 16;
    // Shared rows in vec4<f16>: the head padded by 8 halves; the P tiles are
    // 64 keys + 8 wide and reuse the query tile's space.
    let dp4 = (d + 8) / 4;
    let p4 = (ROWS + 8) / 4;
    let qp = (ROWS * dp4).max(ROWS * p4);
    let half = d / 2;
    let [init, put, next] = tile_loads(
        prefetch,
        &[("k", "kh", "p[4]"), ("v", "vh", "p[4]")],
        "",
        ("jlo", "j0", "kend"),
    );
    let mut w = header(d, padded);
    writeln!(
        w,
        "var<workgroup> QP: array<vec4<f16>, {qp}>;
var<workgroup> Ks: array<vec4<f16>, {kv}>;
var<workgroup> Vs: array<vec4<f16>, {kv}>;
var<workgroup> Ss: array<vec4<f32>, {ss}>;
// Per subgroup: 1 where one of its rows' maxima moved (its accumulators rescale).
var<workgroup> Moved: array<u32, 4>;

{stages}
@compute @workgroup_size(128)
fn forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
           @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {{
    let b = wid.z;
    let h = wid.y;
    let hk = h / (p[1] / p[2]);
    let r0 = wid.x * {rows}u;
    let scale = bitcast<f32>(p[5]);
    let row0 = (b * p[1] + h) * p[3];
    // This lane's row of the subgroup's 16, and which half of the keys (and of
    // the output's features) it takes.
    let r = lane / 2u;
    let hf = lane % 2u;
    let t = r0 + sg * 16u + r;
    let vis = select(0u, visible(b, t), t < p[3]);
    // Padding: the keys before lo are not seen; tiles start at jlo.
    let lo = first_key(b);
    let jlo = lo / {rows}u * {rows}u;
    let kh = head(1u, b, hk);
    let vh = head(2u, b, hk);
{first}    workgroupBarrier();",
        first = if prefetch {
            "    put_q(fetch_q(head(0u, b, h), r0, p[3], li), li);\n"
        } else {
            // The queries and the first tile of keys and values load together
            // (the forward 1-3% faster, H200).
            "    { let xq = fetch_q(head(0u, b, h), r0, p[3], li);
      let xk = fetch_k(kh, jlo, p[4], li); let xv = fetch_v(vh, jlo, p[4], li);
      put_q(xq, li); put_k(xk, li); put_v(xv, li); }\n"
        },
        kv = ROWS * dp4,
        ss = 16 * SP.max(d + 4),
        rows = ROWS,
        stages = [("q", "QP"), ("k", "Ks"), ("v", "Vs")]
            .map(|(x, tile)| stage(x, tile, d, dp4))
            .concat(),
    )
    .unwrap();
    let at = Split::of(d);
    for i in 0..at.row_blocks() {
        for f in 0..frags {
            writeln!(
                w,
                "    let qf{i}_{f} = coopLoadT<coop_mat16x16<f16, A>>(&QP[{} * {dp4}u + {}u], {dp4}u);",
                at.row(i),
                4 * f
            )
            .unwrap();
        }
        for j in 0..at.col_blocks() {
            writeln!(w, "    var o{i}_{j} = coop_mat16x16<f32, C>();").unwrap();
        }
    }
    writeln!(
        w,
        "    var m = LOWEST;
    var l = 0.0;
    let last = min(r0 + {rows}u, p[3]) - 1u;
    let kend = visible(b, last);
    // The lane's 32 scores: eight vec4s from chunk r on (rows of SP floats: the
    // 32 lanes' reads spread over the banks); its probabilities' vec4s in QP;
    // its half of its output row in Ss.
    let srow = (sg * {srow}u + r * {SP}u + hf * 32u) / 4u;
    let prow = (sg * 16u + r) * {p4}u + hf * 8u;
    let orow = (sg * {od}u + r * {dp}u + hf * {half}u) / 4u;
{init}    for (var j0 = jlo; j0 < kend; j0 += {rows}u) {{
{stage}{next}",
        rows = ROWS,
        srow = 16 * SP,
        od = 16 * (d + 4),
        dp = d + 4,
        // Without prefetching, the first tile is in place already.
        stage = if prefetch {
            format!("        workgroupBarrier();\n{put}        workgroupBarrier();\n")
        } else {
            format!("        if (j0 > jlo) {{\n        workgroupBarrier();\n{put}        workgroupBarrier();\n        }}\n")
        },
    )
    .unwrap();
    // S = Q·Kᵀ, the subgroup's blocks: keys are B's columns, stored along the
    // features (k); each fragment of keys loaded once for all the blocks' rows.
    for j in 0..at.key_blocks() {
        w.push_str("        {\n");
        for i in 0..at.row_blocks() {
            writeln!(w, "        var s{i} = coop_mat16x16<f32, C>();").unwrap();
        }
        for f in 0..frags {
            writeln!(
                w,
                "        {{ let k = coopLoad<coop_mat16x16<f16, B>>(&Ks[{} * {}u + {}u], {dp4}u);",
                at.key(j),
                16 * dp4,
                4 * f
            )
            .unwrap();
            for i in 0..at.row_blocks() {
                writeln!(w, "        s{i} = coopMultiplyAdd(qf{i}_{f}, k, s{i});").unwrap();
            }
            w.push_str("        }\n");
        }
        for i in 0..at.row_blocks() {
            writeln!(
                w,
                "        coopStoreT(s{i}, &Ss[{} * {}u + 4u * {}], {}u);",
                at.row(i),
                SP / 4,
                at.key(j),
                SP / 4
            )
            .unwrap();
        }
        w.push_str("        }\n");
    }
    // Online softmax: two lanes per row, 32 keys each; P as f16 into the
    // subgroup's rows of QP.
    writeln!(
        w,
        "        workgroupBarrier();
        var sr: array<vec4<f32>, 8>;
        var tmax = LOWEST;
        for (var c = 0u; c < 8u; c++) {{
            let q4 = (c + r) % 8u;
            let x = Ss[srow + q4] * scale;
            for (var i = 0u; i < 4u; i++) {{
                let j = j0 + hf * 32u + 4u * q4 + i;
                if (j >= lo && j < vis) {{
                    sr[c][i] = x[i];
                    tmax = max(tmax, x[i]);
                }} else {{
                    sr[c][i] = LOWEST;
                }}
            }}
        }}
        tmax = max(tmax, subgroupShuffleXor(tmax, 1u));
        // The maximum moves when the tile's scores pass it by RESCALE_AT (or
        // on the row's first keys); the accumulators then rescale by corr.
        let grows = tmax > m + {tau:?};
        let mnew = select(m, tmax, grows);
        let corr = exp(m - mnew);
        let moved = subgroupAny(grows && m > LOWEST);
        m = mnew;
        var sum = 0.0;
        // Four columns at a time, from chunk r on: P is written as vec4s.
        for (var c = 0u; c < 8u; c++) {{
            let q4 = (c + r) % 8u;
            // Masked scores hold LOWEST: zero, also while m is LOWEST.
            let e = select(vec4<f32>(0.0), exp(sr[c] - m), sr[c] > vec4<f32>(LOWEST));
            sum += e.x + e.y + e.z + e.w;
            // Dropout after the normalisation's sum, as PyTorch's.
            QP[prow + q4] = vec4<f16>(e * keep_keys4(row0 + t, j0 + hf * 32u + 4u * q4));
        }}
        sum += subgroupShuffleXor(sum, 1u);
        l = l * corr + sum;
        if (lane == 0u) {{
            Moved[sg] = select(0u, 1u, moved);
        }}
        let flags = workgroupUniformLoad(&Moved);
        if (flags[0] + flags[1] + flags[2] + flags[3] != 0u) {{",
        tau = RESCALE_AT,
    )
    .unwrap();
    // The rare rescale: every subgroup's accumulators through Ss (the scores
    // there are read), each lane scaling its half row.
    at.accumulators(&mut w, "            coopStoreT(o{i}_{j}, &Ss[AT], STRIDE);");
    writeln!(
        w,
        "            workgroupBarrier();
            for (var i = 0u; i < {o4}u; i++) {{
                Ss[orow + i] *= corr;
            }}
            workgroupBarrier();",
        o4 = half / 4
    )
    .unwrap();
    at.accumulators(
        &mut w,
        "            o{i}_{j} = coopLoadT<coop_mat16x16<f32, C>>(&Ss[AT], STRIDE);",
    );
    w.push_str(
        "        }
",
    );
    // O += P·V, the subgroup's blocks: values are B's rows (k = keys),
    // contiguous along features; each fragment of P loaded once for all the
    // blocks' columns, each of V once for all their rows.
    for kk in 0..ROWS / 16 {
        w.push_str("        {\n");
        for i in 0..at.row_blocks() {
            writeln!(
                w,
                "        let a{i} = coopLoadT<coop_mat16x16<f16, A>>(&QP[{} * {p4}u + {}u], {p4}u);",
                at.row(i),
                4 * kk
            )
            .unwrap();
        }
        for j in 0..at.col_blocks() {
            writeln!(
                w,
                "        {{ let v = coopLoadT<coop_mat16x16<f16, B>>(&Vs[{}u + 4u * {}], {dp4}u);",
                16 * kk * dp4,
                at.col(j)
            )
            .unwrap();
            for i in 0..at.row_blocks() {
                writeln!(w, "        o{i}_{j} = coopMultiplyAdd(a{i}, v, o{i}_{j});").unwrap();
            }
            w.push_str("        }\n");
        }
        w.push_str("        }\n");
    }
    w.push_str(
        "    }
    workgroupBarrier();
",
    );
    at.accumulators(&mut w, "    coopStoreT(o{i}_{j}, &Ss[AT], STRIDE);");
    writeln!(
        w,
        "    workgroupBarrier();
    // A row at a time, consecutive lanes on consecutive features (each store
    // of the subgroup one row's contiguous memory); lane 2·rr holds row rr's sum.
    // A row that sees no key (padding) has no weight: zeros, and a
    // log-sum-exp of 0 that the backward does not read.
    let inv = select(1.0 / l, 0.0, l == 0.0);
    for (var rr = 0u; rr < 16u; rr++) {{
        let row_inv = subgroupShuffle(inv, 2u * rr);
        let tr = r0 + sg * 16u + rr;
        if (tr < p[3]) {{
            let at = b * p[34] + h * p[35] + tr * p[36];
            for (var f = lane; f < {d}u; f += 32u) {{
                out0[at + f] = Ss[(sg * {od}u + rr * {dp}u + f) / 4u][f % 4u] * row_inv;
            }}
        }}
    }}
    if (t < p[3] && hf == 0u) {{
        out1[row0 + t] = select(m + log(l), 0.0, l == 0.0);
    }}
}}",
        od = 16 * (d + 4),
        dp = d + 4,
    )
    .unwrap();
    w.push_str(DROPOUT);
    w
}

/// Parses, validates and translates `src` to SPIR-V, and checks that its
/// workgroup memory fits 48 KiB (lavapipe has no cooperative matrices: the
/// device tests run the kernels), panicking with the error and the source.
#[cfg(test)]
pub(crate) fn assert_translates(what: &str, src: &str) {
    use wgpu::naga;
    let module = naga::front::wgsl::parse_str(src)
        .unwrap_or_else(|e| panic!("{what}:\n{}\n{src}", e.emit_to_string(src)));
    let info = naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .unwrap_or_else(|e| panic!("{what}:\n{}\n{src}", e.emit_to_string(src)));
    naga::back::spv::write_vec(&module, &info, &Default::default(), None)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    // NVIDIA's Vulkan driver gives a workgroup 48 KiB (a module past it fails
    // on the GPU, not here).
    let mut layouter = naga::proc::Layouter::default();
    layouter
        .update(module.to_ctx())
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let shared: u32 = module
        .global_variables
        .iter()
        .filter(|(_, g)| g.space == naga::AddressSpace::WorkGroup)
        .map(|(_, g)| layouter[g.ty].size)
        .sum();
    assert!(
        shared <= 48 << 10,
        "{what}: {shared} bytes of workgroup memory (48 KiB at most)"
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Every head width the tensor-core kernels take, with and without
    /// prefetching (each generator's validation tests go through them).
    pub(crate) const WIDTHS: [(usize, bool); 5] = [
        (16, false),
        (32, true),
        (48, false),
        (64, true),
        (64, false),
    ];

    /// Every width the kernel takes, with and without prefetching and
    /// padding, translates.
    #[test]
    fn every_width_validates_and_translates() {
        for (d, prefetch) in WIDTHS {
            for padded in [false, true] {
                let src = source(d, prefetch, padded);
                assert_translates(&format!("d {d}, padded {padded}"), &src);
            }
        }
    }
}
