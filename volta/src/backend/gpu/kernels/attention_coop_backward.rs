//! The flash-attention backward on tensor cores, the two launches of the SIMT
//! kernels (`shaders/flash_attention.wgsl`) with every product on 16×16×16
//! cooperative matrices (`f16` operands, `f32` sums): `backward_q` per block of
//! 64 query rows, `backward_kv` per block of 64 keys. The training backward in
//! half precision runs them where the forward ran on tensor cores
//! ([`attention_coop`](super::attention_coop)), dropout included.
//!
//! Both keep their block's own operands as matrix fragments in registers (q and
//! dO, or k and v) and stage the other side's tiles as `f16` in workgroup
//! memory, the next tile's loads in flight while the current one multiplies.
//! Each subgroup owns 16 rows of the block: it stores its scores (or their
//! transpose) to workgroup memory, where its lanes, two per row, turn them into
//! probabilities and score gradients (`dS = P·(dP − delta)·scale`) written back
//! as `f16`, the operand of the next product. The products that add to
//! accumulators (dq, dk, dv) split as the forward's `P·V` does: each subgroup
//! takes a quadrant of the results (32 rows by half the features) where the
//! head is a multiple of 32 wide.
//!
//! Where the adapter adds `f32` atomically (and results need not repeat bit for
//! bit), `backward_kv` alone is the backward, as the SIMT kernels' one launch:
//! per tile of query rows it also multiplies the score gradients of all 64 keys
//! by the keys (`dq = dS·k`, the keys' rows staged again as `f16` where dO was)
//! and adds its rows of dq atomically, so `backward_q` does not compute the
//! scores and `dO·vᵀ` a second time.
use super::attention_coop::{
    DROPOUT, ROWS, Split, fragments, header, put, scores, stage, tile_loads,
};
use std::fmt::Write;

use super::attention_coop::SP;

/// The two entries' WGSL for heads of width `d`
/// ([`attention_coop::fits`](super::attention_coop::fits)); with `atomic_dq`,
/// `backward_kv` alone, adding dq to binding 9 atomically (it starts at zero);
/// over padded batches with `padded` (see [`header`]).
pub(crate) fn source(d: usize, prefetch: bool, atomic_dq: bool, padded: bool) -> String {
    assert!(
        super::attention_coop::fits(d),
        "attention on tensor cores: head width {d}"
    );
    let mut w = header(d, padded);
    let dp4 = (d + 8) / 4;
    let p4 = (ROWS + 8) / 4;
    writeln!(
        w,
        "var<workgroup> T0: array<vec4<f16>, {tile}>;
var<workgroup> T1: array<vec4<f16>, {tile}>;
var<workgroup> T2: array<vec4<f16>, {tile}>;
var<workgroup> Ss: array<vec4<f32>, {ss}>;
var<workgroup> Ls: array<vec4<f32>, {rows4}>;
var<workgroup> Dl: array<vec4<f32>, {rows4}>;
",
        tile = ROWS * dp4.max(p4),
        ss = 16 * SP,
        rows4 = ROWS / 4,
    )
    .unwrap();
    if atomic_dq {
        w.push_str("@group(0) @binding(9) var<storage, read_write> dq_sum: array<atomic<f32>>;\n");
    }
    // backward_q stages q and dO through T0 (then its score gradients), keys
    // in T1, values in T2;
    // backward_kv stages k and q through T0, v and dO through T1, and keeps its
    // probabilities and score gradients in T2.
    if !atomic_dq {
        for (x, tile) in [("q", "T0"), ("k", "T1"), ("v", "T2")] {
            w.push_str(&stage(x, tile, d, dp4).replace(&format!("_{x}("), &format!("_{x}_q(")));
        }
        w.push_str(&stage("g", "T0", d, dp4).replace("_g(", "_g_q("));
    }
    for (x, tile) in [("k", "T0"), ("q", "T0"), ("v", "T1"), ("g", "T1")] {
        w.push_str(&stage(x, tile, d, dp4).replace(&format!("_{x}("), &format!("_{x}_kv(")));
    }
    if atomic_dq {
        // dq's operand: the block's keys as rows, in T1 once dO·vᵀ is done (the
        // workgroup memory has no room for a fourth tile within 48 KiB), stored
        // there per tile from registers, where they stay as f16.
        w.push_str(&put("k_dq", "T1", d, dp4, "f16"));
    } else {
        backward_q(&mut w, d, dp4, p4, prefetch);
    }
    backward_kv(&mut w, d, (dp4, p4), prefetch, atomic_dq);
    w.push_str(DROPOUT);
    w
}

/// `acc{i}_{j} += a · (the 64 rows of `b`)` over the subgroup's blocks
/// ([`Split`]: its 16 rows (or a quadrant of 32 rows) of `a`, 64 wide, by the
/// head's features (or half of them)), each fragment of `a` loaded once for
/// all the blocks' columns and each of `b` once for all their rows.
/// `Columns(a)`: the columns of `a` instead (its transpose's rows).
fn accumulate(w: &mut String, acc: &str, (a, b): (Left, &str), at: Split, dp4: usize, p4: usize) {
    for kk in 0..ROWS / 16 {
        w.push_str("        {\n");
        for i in 0..at.row_blocks() {
            let a = match a {
                Left::Rows(a) => format!(
                    "coopLoadT<coop_mat16x16<f16, A>>(&{a}[{} * {p4}u + {}u], {p4}u)",
                    at.row(i),
                    4 * kk
                ),
                Left::Columns(a) => format!(
                    "coopLoad<coop_mat16x16<f16, A>>(&{a}[{}u * {p4}u + {} / 4u], {p4}u)",
                    16 * kk,
                    at.row(i)
                ),
            };
            writeln!(w, "        let a{i} = {a};").unwrap();
        }
        for j in 0..at.col_blocks() {
            writeln!(
                w,
                "        {{ let b = coopLoadT<coop_mat16x16<f16, B>>(&{b}[{}u * {dp4}u + 4u * {}], {dp4}u);",
                16 * kk,
                at.col(j)
            )
            .unwrap();
            for i in 0..at.row_blocks() {
                writeln!(
                    w,
                    "        {acc}{i}_{j} = coopMultiplyAdd(a{i}, b, {acc}{i}_{j});"
                )
                .unwrap();
            }
            w.push_str("        }\n");
        }
        w.push_str("        }\n");
    }
}

/// How the backward's products into accumulators split among the subgroups:
/// in quadrants where the head is a multiple of 32 wide (1–2% faster than 16
/// rows a subgroup on the H200, at the same 255 registers).
fn split(d: usize) -> Split {
    Split::with_rows(d, SP, true)
}

/// Declares the accumulators `acc{i}_{j}` of the subgroup's blocks.
fn declare(w: &mut String, indent: &str, acc: &str, at: Split) {
    for i in 0..at.row_blocks() {
        for j in 0..at.col_blocks() {
            writeln!(w, "{indent}var {acc}{i}_{j} = coop_mat16x16<f32, C>();").unwrap();
        }
    }
}

/// How [`accumulate`] reads its left operand from a tile of `f16` rows 64 wide.
#[derive(Clone, Copy)]
enum Left<'a> {
    /// The subgroup's 16 rows.
    Rows(&'a str),
    /// The subgroup's 16 columns, as rows (the tile transposed).
    Columns(&'a str),
}

/// Writes the accumulators `acc{j}` of the subgroup's 16 rows `first + row`
/// (those below `rows`) to `out`, row `row` starting at `row_at` (an expression
/// of `row`: the result's layout, see `shaders/flash_attention.wgsl`), through
/// `Ss`.
fn write_rows(w: &mut String, acc: &str, out: &str, d: usize, rows: (&str, &str, &str)) {
    w.push_str("    workgroupBarrier();\n");
    put_rows(w, acc, d, rows, &|at, x| format!("{out}[{at}] = {x};"));
}

/// Stores the accumulators `acc{j}` to the subgroup's rows of `Ss`; then the
/// subgroup's lanes run `put(index, value)` for each element of its rows
/// `first + row` (those below `rows`), the row starting at `row_at`: a row at
/// a time, consecutive lanes on consecutive features, so that each store (or
/// atomic add) of the subgroup touches one row's contiguous memory.
fn put_rows(
    w: &mut String,
    acc: &str,
    d: usize,
    (row_at, first, rows): (&str, &str, &str),
    put: &dyn Fn(&str, &str) -> String,
) {
    split(d).accumulators(
        w,
        &format!("    coopStoreT({acc}{{i}}_{{j}}, &Ss[AT], STRIDE);"),
    );
    writeln!(
        w,
        "    workgroupBarrier();
    for (var rr = 0u; rr < 16u; rr++) {{
        let row = {first} + sg * 16u + rr;
        if (row < {rows}) {{
            let at = {row_at};
            for (var f = lane; f < {d}u; f += 32u) {{
                let x = Ss[(sg * {srow}u + rr * {SP}u + f) / 4u][f % 4u];
                {}
            }}
        }}
    }}",
        put("at + f", "x"),
        srow = 16 * SP,
    )
    .unwrap();
}

/// `dq += dS·k` per block of 64 query rows: the rows' q and dO as fragments;
/// per tile of 64 keys, S = q·kᵀ and dP = dO·vᵀ into `Ss`, dS into T0.
fn backward_q(w: &mut String, d: usize, dp4: usize, p4: usize, prefetch: bool) {
    let [init, put, next] = tile_loads(
        prefetch,
        &[("k", "kh", "p[4]"), ("v", "vh", "p[4]")],
        "_q",
        ("jlo", "j0", "kend"),
    );
    writeln!(
        w,
        "@compute @workgroup_size(128)
fn backward_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
              @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {{
    let b = wid.z;
    let h = wid.y;
    let hk = h / (p[1] / p[2]);
    let r0 = wid.x * {rows}u;
    let scale = bitcast<f32>(p[5]);
    let row0 = (b * p[1] + h) * p[3];
    // This lane's row of the subgroup's 16 and which half of the keys it takes.
    let r = lane / 2u;
    let hf = lane % 2u;
    let t = r0 + sg * 16u + r;
    let live = t < p[3];
    let vis = select(0u, visible(b, t), live);
    // Padding: the keys before lo are not seen; tiles start at jlo.
    let lo = first_key(b);
    let jlo = lo / {rows}u * {rows}u;
    var lse = 0.0;
    var dl = 0.0;
    if (live) {{
        lse = lse_in[p[28] + row0 + t];
        dl = delta[p[29] + row0 + t];
    }}
    put_q_q(fetch_q_q(head(0u, b, h), r0, p[3], li), li);
    workgroupBarrier();",
        rows = ROWS
    )
    .unwrap();
    fragments(w, "qf", "T0", d, dp4);
    w.push_str("    workgroupBarrier();\n    put_g_q(fetch_g_q(head(3u, b, h), r0, p[3], li), li);\n    workgroupBarrier();\n");
    fragments(w, "gf", "T0", d, dp4);
    declare(w, "    ", "dq", split(d));
    writeln!(
        w,
        "    let kend = visible(b, min(r0 + {rows}u, p[3]) - 1u);
    let kh = head(1u, b, hk);
    let vh = head(2u, b, hk);
{init}    let srow = (sg * {srow}u + r * {SP}u + hf * 32u) / 4u;
    let prow = (sg * 16u + r) * {p4}u + hf * 8u;
    for (var j0 = jlo; j0 < kend; j0 += {rows}u) {{
        workgroupBarrier();
{put}        workgroupBarrier();
{next}",
        rows = ROWS,
        srow = 16 * SP,
    )
    .unwrap();
    scores(w, "qf", "T1", d, dp4);
    // P in registers: chunk c of the lane's 32 keys is vec4 (c + r) % 8 of its
    // row (the skew spreads the lanes' reads over the banks).
    w.push_str(
        "        workgroupBarrier();
        var pr: array<vec4<f32>, 8>;
        for (var c = 0u; c < 8u; c++) {
            let q4 = (c + r) % 8u;
            let x = Ss[srow + q4];
            for (var i = 0u; i < 4u; i++) {
                let j = j0 + hf * 32u + 4u * q4 + i;
                if (j >= lo && j < vis) {
                    pr[c][i] = exp(x[i] * scale - lse);
                } else {
                    pr[c][i] = 0.0;
                }
            }
        }
        workgroupBarrier();\n",
    );
    scores(w, "gf", "T2", d, dp4);
    w.push_str(
        "        workgroupBarrier();
        for (var c = 0u; c < 8u; c++) {
            let q4 = (c + r) % 8u;
            let f = keep_keys4(row0 + t, j0 + hf * 32u + 4u * q4);
            T0[prow + q4] = vec4<f16>(pr[c] * (Ss[srow + q4] * f - dl) * scale);
        }
        workgroupBarrier();\n",
    );
    accumulate(w, "dq", (Left::Rows("T0"), "T1"), split(d), dp4, p4);
    w.push_str("    }\n");
    write_rows(
        w,
        "dq",
        "out0",
        d,
        ("b * p[34] + h * p[35] + row * p[36]", "r0", "p[3]"),
    );
    w.push_str("}\n");
}

/// `dk += dSᵀ·q` and `dv += Pᵀ·dO` per block of 64 keys: the keys' k and v as
/// fragments; per tile of 64 query rows (of every query head sharing the key
/// head), Sᵀ = k·qᵀ and dPᵀ = v·dOᵀ into `Ss`, P (dropped) then dS into T2.
/// With `atomic_dq`, also `dq += dS·k` for the tile's rows, added atomically.
fn backward_kv(
    w: &mut String,
    d: usize,
    (dp4, p4): (usize, usize),
    prefetch: bool,
    atomic_dq: bool,
) {
    let [init, put, next] = tile_loads(
        prefetch,
        &[("q", "qh", "p[3]"), ("g", "gh", "p[3]")],
        "_kv",
        ("t_first", "t0", "p[3]"),
    );
    writeln!(
        w,
        "@compute @workgroup_size(128)
fn backward_kv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
               @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {{
    let b = wid.z;
    let hk = wid.y;
    let j0 = wid.x * {rows}u;
    let scale = bitcast<f32>(p[5]);
    let group = p[1] / p[2];
    // This lane's key of the subgroup's 16 and which half of the query rows.
    let r = lane / 2u;
    let hf = lane % 2u;
    let key = j0 + sg * 16u + r;
    // The first query row that sees this key (causal), and a kept weight's
    // factor (1 without dropout).
    // A key outside its batch element's range (padding) is seen by no row.
    let key_live = key < p[4] && key >= first_key(b) && key < keys_end(b);
    var t_sees = 0u;
    if (p[6] != 0u && key > p[7]) {{
        t_sees = key - p[7];
    }}
    let factor = select(1.0, bitcast<f32>(p[31]), p[30] != 0u);",
        rows = ROWS
    )
    .unwrap();
    // Keys and values load together. dq's keys are the same loads, rounded and
    // held in registers, to be stored again per tile (faster than reloading
    // them: the backward 6%, H200); their own fetch took a third round trip
    // before the first tile.
    if atomic_dq {
        writeln!(w, "    var kd: array<vec4<f16>, {}>;", d / 8).unwrap();
    }
    writeln!(
        w,
        "    {{ let xk = fetch_k_kv(head(1u, b, hk), j0, p[4], li);
      let xv = fetch_v_kv(head(2u, b, hk), j0, p[4], li);
      put_k_kv(xk, li); put_v_kv(xv, li);{}
    }}
    workgroupBarrier();",
        if atomic_dq {
            format!(
                "\n      for (var i = 0u; i < {}u; i++) {{ kd[i] = vec4<f16>(xk[i]); }}",
                d / 8
            )
        } else {
            String::new()
        }
    )
    .unwrap();
    fragments(w, "kf", "T0", d, dp4);
    fragments(w, "vf", "T1", d, dp4);
    declare(w, "    ", "dk", split(d));
    declare(w, "    ", "dv", split(d));
    writeln!(
        w,
        "    // Causal: the first query row that sees key j0 sits at j0 − start.
    var t_first = 0u;
    if (p[6] != 0u && j0 > p[7]) {{
        t_first = (j0 - p[7]) / {rows}u * {rows}u;
    }}
    // A block of keys outside the batch element's range has no gradient.
    if (j0 + {rows}u <= first_key(b) || j0 >= keys_end(b)) {{
        t_first = p[3];
    }}
    let srow = (sg * {srow}u + r * {SP}u + hf * 32u) / 4u;
    let prow = (sg * 16u + r) * {p4}u + hf * 8u;
    for (var gi = 0u; gi < group; gi++) {{
        let h = hk * group + gi;
        let qh = head(0u, b, h);
        let gh = head(3u, b, h);
        let row0 = (b * p[1] + h) * p[3];
    {init}        for (var t0 = t_first; t0 < p[3]; t0 += {rows}u) {{
            workgroupBarrier();
    {put}            if (li < {rows}u) {{
                var x = 0.0;
                var y = 0.0;
                if (t0 + li < p[3]) {{
                    x = lse_in[p[28] + row0 + t0 + li];
                    y = delta[p[29] + row0 + t0 + li];
                }}
                Ls[li / 4u][li % 4u] = x;
                Dl[li / 4u][li % 4u] = y;
            }}
            workgroupBarrier();
    {next}",
        rows = ROWS,
        srow = 16 * SP,
    )
    .unwrap();
    scores(w, "kf", "T0", d, dp4);
    // Pᵀ: the lane's key against its 32 query rows, chunk c as vec4 (c + r) % 8.
    w.push_str(
        "        workgroupBarrier();
        var pr: array<vec4<f32>, 8>;
        // Bit 4c + i: the weight is kept (dS reads the mask again from here).
        var kept_bits = 0u;
        for (var c = 0u; c < 8u; c++) {
            let q4 = (c + r) % 8u;
            let x = Ss[srow + q4];
            var kept = vec4<f32>(0.0);
            let fs = keep_rows4(row0 + t0 + hf * 32u + 4u * q4, key);
            let ls = Ls[hf * 8u + q4];
            for (var i = 0u; i < 4u; i++) {
                let tl = hf * 32u + 4u * q4 + i;
                let tq = t0 + tl;
                if (key_live && tq >= t_sees && tq < p[3]) {
                    pr[c][i] = exp(x[i] * scale - ls[i]);
                    let f = fs[i];
                    kept[i] = pr[c][i] * f;
                    kept_bits |= select(0u, 1u << (4u * c + i), f != 0.0);
                } else {
                    pr[c][i] = 0.0;
                }
            }
            T2[prow + q4] = vec4<f16>(kept);
        }
        workgroupBarrier();\n",
    );
    accumulate(w, "dv", (Left::Rows("T2"), "T1"), split(d), dp4, p4);
    scores(w, "vf", "T1", d, dp4);
    w.push_str(
        "        workgroupBarrier();
        for (var c = 0u; c < 8u; c++) {
            let q4 = (c + r) % 8u;
            let x = Ss[srow + q4];
            let dl = Dl[hf * 8u + q4];
            var ds = vec4<f32>(0.0);
            for (var i = 0u; i < 4u; i++) {
                let f = select(0.0, factor, (kept_bits & (1u << (4u * c + i))) != 0u);
                ds[i] = pr[c][i] * (x[i] * f - dl[i]) * scale;
            }
            T2[prow + q4] = vec4<f16>(ds);
        }
        workgroupBarrier();\n",
    );
    if atomic_dq {
        // T1's dO is spent: the keys' rows take its place for dq's product.
        w.push_str("        put_k_dq(kd, li);\n        workgroupBarrier();\n");
    }
    accumulate(w, "dk", (Left::Rows("T2"), "T0"), split(d), dp4, p4);
    if atomic_dq {
        add_dq(w, "T1", d, dp4, p4);
    }
    w.push_str("        }\n    }\n    let kv0 = (b * p[2] + hk) * p[4];\n");
    write_rows(
        w,
        "dk",
        "out0",
        d,
        ("b * p[37] + hk * p[38] + row * p[39]", "j0", "p[4]"),
    );
    write_rows(
        w,
        "dv",
        "out1",
        d,
        ("b * p[40] + hk * p[41] + row * p[42]", "j0", "p[4]"),
    );
    w.push_str("}\n");
}

/// `dq` rows `t0 + 16·sg ..` (the subgroup's 16 of the tile) `+= dS·k` over the
/// block's 64 keys: dS is T2 read by columns (T2 holds dSᵀ, a row per key), k
/// the rows of `keys`; the rows are added to `dq_sum` atomically (laid out as
/// the forward's output, `p[34..37]`).
fn add_dq(w: &mut String, keys: &str, d: usize, dp4: usize, p4: usize) {
    let at = split(d);
    declare(w, "        ", "dq", at);
    accumulate(w, "dq", (Left::Columns("T2"), keys), at, dp4, p4);
    let rows = ("b * p[34] + h * p[35] + row * p[36]", "t0", "p[3]");
    put_rows(w, "dq", d, rows, &|at, x| {
        format!("atomicAdd(&dq_sum[{at}], {x});")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width, with and without prefetching, the atomic dq and padding,
    /// translates (see
    /// [`assert_translates`](super::super::attention_coop::assert_translates)).
    #[test]
    fn every_width_validates_and_translates() {
        for (d, prefetch) in super::super::attention_coop::tests::WIDTHS {
            for (atomic_dq, padded) in [(false, false), (true, false), (false, true), (true, true)]
            {
                let src = source(d, prefetch, atomic_dq, padded);
                super::super::attention_coop::assert_translates(
                    &format!("d {d}, atomic dq {atomic_dq}, padded {padded}"),
                    &src,
                );
            }
        }
    }
}
