//! WGSL generation for the tensor-core matmul: 16×16×16 cooperative matrices
//! (`f16` operands, `f32` accumulation) on adapters that expose them.
//!
//! A workgroup of `wm × wn` subgroups computes a `bm × bn` tile of C (`bm = wm·fm·16`,
//! `bn = wn·fn·16`); each subgroup holds `fm × fn` accumulator matrices. K is walked
//! `bk` at a time: the workgroup copies both operand tiles into shared memory (8-byte
//! `vec4<f16>` loads, rounded from `f32` in the mixed-precision mode), and each
//! subgroup loads its fragments from there. Shared tiles keep the operand's own
//! contiguous axis, so the copy is a straight vector copy and the fragment load picks
//! the row- or column-major form. The next tile is fetched into registers while the
//! current one is multiplied. Edges are zero-filled on load and masked on store;
//! results reach C through workgroup memory, four elements a lane where C allows.
use super::split;
use super::tiled::Staging;
use std::fmt::Write;

/// One compiled tensor-core variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopTiles {
    /// Subgroups along M and along N.
    pub wm: u32,
    /// Subgroups along N.
    pub wn: u32,
    /// 16×16 fragments per subgroup along M.
    pub fm: u32,
    /// 16×16 fragments per subgroup along N.
    pub fn_: u32,
    /// K step per shared-memory tile (a multiple of 16).
    pub bk: u32,
    /// Halves of padding at the end of each shared row (bank-conflict relief).
    pub pad: u32,
    /// How K tiles reach shared memory.
    pub staging: Staging,
}

const fn coop(
    wm: u32,
    wn: u32,
    fm: u32,
    fn_: u32,
    bk: u32,
    pad: u32,
    staging: Staging,
) -> CoopTiles {
    CoopTiles {
        wm,
        wn,
        fm,
        fn_,
        bk,
        pad,
        staging,
    }
}

const P: Staging = Staging::Prefetch;

impl CoopTiles {
    /// The configurations the GPU benchmark sweeps.
    pub const CANDIDATES: [CoopTiles; 15] = [
        coop(2, 2, 4, 4, 32, 8, P),
        coop(2, 2, 4, 4, 32, 8, Staging::Double),
        coop(2, 2, 4, 4, 32, 8, Staging::Direct),
        coop(2, 2, 4, 4, 16, 8, Staging::Double),
        coop(2, 4, 4, 4, 32, 8, P),
        coop(2, 4, 4, 4, 16, 8, Staging::Double),
        coop(4, 2, 4, 4, 32, 8, P),
        coop(2, 2, 4, 4, 16, 8, P),
        coop(2, 2, 4, 4, 32, 4, P),
        coop(2, 2, 2, 4, 32, 8, P),
        coop(2, 2, 4, 2, 32, 8, Staging::Double),
        coop(4, 4, 2, 2, 32, 8, P),
        coop(4, 4, 2, 2, 16, 8, Staging::Double),
        coop(2, 2, 2, 2, 32, 8, P),
        // 7–26% faster alone than the large tiles at 288–384 tiles of 128 × 128,
        // not in the GPT step (H200, 2026-12-04; benchmarks/h200-2026-12-04-product-tiles).
        coop(4, 2, 2, 4, 64, 8, P),
    ];

    /// The tiles of large `f32` products split into `f16` halves
    /// (`MatmulPrecision::Split`): 4×2 subgroups of 2×4 fragments, 128 × 128 as
    /// half precision's, with half the accumulators a subgroup (a split product
    /// holds three sets; 4×4 fragments spilled and ran 2× slower, H100,
    /// 2026-12-07) and both halves of its tiles in 48 KiB.
    pub const SPLIT_LARGE: CoopTiles = coop(4, 2, 2, 4, 32, 8, P);

    /// Rows of C per workgroup.
    pub fn bm(&self) -> u32 {
        self.wm * self.fm * 16
    }
    /// Columns of C per workgroup.
    pub fn bn(&self) -> u32 {
        self.wn * self.fn_ * 16
    }
    /// Subgroups per workgroup.
    pub fn subgroups(&self) -> u32 {
        self.wm * self.wn
    }
    /// Bytes of shared memory the kernel declares when it splits its operands
    /// into halves (each tile twice).
    pub(crate) fn split_shared_bytes(&self) -> u32 {
        2 * self.shared_bytes() - self.subgroups() * 256 * 4
    }
    /// Bytes of shared memory the kernel declares.
    pub fn shared_bytes(&self) -> u32 {
        let (bm, bn, bk) = (self.bm(), self.bn(), self.bk);
        // Either layout of a tile: rows × (contiguous + pad) halves.
        let a = (bm * (bk + self.pad)).max(bk * (bm + self.pad)) * 2;
        let b = (bn * (bk + self.pad)).max(bk * (bn + self.pad)) * 2;
        let buffers = if self.staging == Staging::Double {
            2
        } else {
            1
        };
        (a + b) * buffers + self.subgroups() * 256 * 4
    }
    /// Whether the sizes fit the scheme and the device's limits (subgroups of 32).
    pub fn check(&self, max_threads: u32, max_shared: u32) -> Result<(), String> {
        let ok = self.wm > 0
            && self.wn > 0
            && self.fm > 0
            && self.fn_ > 0
            && self.bk > 0
            && self.bk.is_multiple_of(16)
            && self.pad.is_multiple_of(4)
            && self.subgroups() * 32 <= max_threads
            && self.shared_bytes() <= max_shared;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "tensor-core tiles {self:?}: need bk a multiple of 16, pad a multiple of 4, \
                 at most {max_threads} threads and {max_shared} bytes of shared memory"
            ))
        }
    }
}

/// A tensor-core kernel: tiles, operand layouts and element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CoopVariant {
    pub tiles: CoopTiles,
    /// A is contiguous along k (row-major `m × k`); otherwise along m.
    pub a_k: bool,
    /// B is contiguous along n (row-major `k × n`); otherwise along k.
    pub b_n: bool,
    /// A holds `f32`, rounded to `f16` on its way into shared memory.
    pub a_f32: bool,
    /// B holds `f32`, rounded likewise (unused with `b_blocks`).
    pub b_f32: bool,
    /// C holds `f16`; otherwise `f32`.
    pub half_out: bool,
    /// `f16` operands move eight halves per 16-byte load (offsets, strides and the
    /// contiguous extents are multiples of 8); otherwise four per 8-byte load.
    pub wide: bool,
    /// C is written four elements at a time (N a multiple of 4).
    pub c_vec: bool,
    /// B is a quantised `W` (`n × k`, contiguous along k: `b_n` is false), read as
    /// its blocks and dequantised to `f16` on the way into shared memory (`bk` is
    /// 32: one block per row of the tile); A is `f32` (`a_f32`).
    pub b_blocks: Option<Blocks>,
    /// A's columns are multiplied by a vector `s` (binding 3; C moves to 4) on
    /// their way in: `x·diag(s)·Wᵀ`, an RMS norm's weights, whose per-row
    /// `1/rms` then scales the result (linear, so it waits for the product).
    /// `s` starts at element `p[12]`, and a slice `z` of a split K at `z·p[4]`
    /// past it (A's batch stride, its columns being contiguous).
    pub a_scale: bool,
    /// A bias along C's columns, of C's element type (the binding after A's
    /// scale, C moving one on), from element `p[11]`: the accumulators start
    /// from it.
    pub bias: bool,
    /// `f32` operands split into `f16` halves, three products per step (see
    /// `split`); the partial maxima of both operands are bound after A's scale,
    /// and a bias is added after the products.
    pub split: bool,
}

/// A quantised B's blocks as the GPU holds them (see `shaders/qmatmul.wgsl`):
/// 32 weights in `words` u32 words, laid out as ggml type `qtype` (2 Q4_0, 3 Q4_1,
/// 8 Q8_0; 255 sub-blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Blocks {
    pub qtype: u32,
    pub words: u32,
}

impl Blocks {
    /// WGSL that dequantises half `h` (weights `16h..16h + 16`) of the block held
    /// in `{v}_0 .. {v}_{words-1}` to four `vec4<f32>`s, `q{i}` for `i` in 0..4.
    fn dequantize(&self, v: &str) -> String {
        let mut w = String::new();
        match self.qtype {
            // Nibbles: byte j of the 16 holds weight j (low) and weight j + 16 (high).
            2 | 3 => {
                let (scale, offset) = if self.qtype == 2 {
                    (format!("bitcast<f32>({v}_0)"), "-8.0 * d".to_string())
                } else {
                    (
                        format!("unpack2x16float({v}_0).x"),
                        format!("unpack2x16float({v}_0).y"),
                    )
                };
                writeln!(
                    w,
                    "        let d = {scale}; let m = {offset}; let sh = h * 4u;"
                )
                .unwrap();
                for i in 0..4 {
                    writeln!(
                        w,
                        "        let q{i} = vec4<f32>(unpack4xU8(({v}_{} >> sh) & 0x0F0F0F0Fu)) * d + m;",
                        1 + i
                    )
                    .unwrap();
                }
            }
            8 => {
                writeln!(w, "        let d = bitcast<f32>({v}_0);").unwrap();
                for i in 0..4 {
                    writeln!(
                        w,
                        "        let q{i} = vec4<f32>(unpack4xI8(select({v}_{}, {v}_{}, h == 1u))) * d;",
                        1 + i,
                        5 + i
                    )
                    .unwrap();
                }
            }
            _ => {
                writeln!(
                    w,
                    "        let d = bitcast<f32>(select({v}_0, {v}_1, h == 1u)); let m = bitcast<f32>({v}_2);"
                )
                .unwrap();
                for i in 0..4 {
                    writeln!(
                        w,
                        "        let q{i} = vec4<f32>(unpack4xI8(select({v}_{}, {v}_{}, h == 1u))) * d + m;",
                        3 + i,
                        7 + i
                    )
                    .unwrap();
                }
            }
        }
        w
    }
}

/// One operand's shared tile: `rows × len` halves stored row by row, `len`
/// contiguous in global memory as well.
struct Tile<'a> {
    src: &'a str,
    sh: &'a str,
    reg: &'a str,
    base: &'a str,
    /// First global row and column of the tile, and the operand's extents.
    row0: &'a str,
    col0: &'a str,
    rows_total: &'a str,
    cols_total: &'a str,
    /// Global stride between rows (in elements).
    stride: &'a str,
    rows: u32,
    len: u32,
    /// The first element of a vector `s` that multiplies the tile's columns on
    /// load (an `f32` tile contiguous along them), if any.
    scale: Option<&'a str>,
    /// With split operands: the scale that multiplies the tile on its way in,
    /// and where the low halves start (vec4s past the high ones).
    split: Option<(&'a str, u32)>,
}

/// Register declarations, the global fetch of a tile, and its store to shared
/// memory (split so the next fetch overlaps the current multiply).
struct Copy {
    decls: String,
    fetch: String,
    /// The fetch of a tile inside the operand: no bounds tests.
    fetch_inside: String,
    store: String,
}

/// Both operands' fetches, picked by the workgroup-uniform `inside`.
fn fetch_either(a: &Copy, b: &Copy) -> String {
    format!(
        "        if (inside) {{\n{}{}        }} else {{\n{}{}        }}\n",
        a.fetch_inside, b.fetch_inside, a.fetch, b.fetch
    )
}

/// A tile's copy, each thread moving whole loads: four elements per load, held as
/// `vec4<f16>` (`f32` operands as `vec4<f32>`, rounded at the store; scaled ones
/// rounded on the way), or with `wide` eight `f16`s per
/// 16-byte load, held as `vec4<u32>` and stored to the (still `vec4<f16>`) shared
/// tile as two halves, unpacked through `f32`, exactly. (Shared tiles of `vec4<u32>`
/// that fragment loads read as halves would save the unpacking, but the H100's
/// driver (580.159.04) loses the device on such a load, 2026-11-23; and naga 30
/// mistypes the `bitcast`s that change the component count.)
fn copy_tile(t: &Tile, threads: u32, pad: u32, f32_in: bool, wide: bool) -> Copy {
    let per = if wide { 8 } else { 4 };
    let q = t.len / per;
    let row4 = (t.len + pad) / 4;
    let items = t.rows * q;
    let reps = items.div_ceil(threads);
    // f32 operands stay f32 in registers until the store rounds them: converting
    // at the fetch makes the thread wait there for its loads, which are meant to
    // be in flight during the multiply (H100, 2026-11-27: the step's products
    // 3–15% faster). A scaled load converts at the fetch (it multiplies there).
    let hold_f32 = f32_in && !wide && t.scale.is_none();
    let held = if wide {
        "vec4<u32>"
    } else if hold_f32 {
        "vec4<f32>"
    } else {
        "vec4<f16>"
    };
    let load = |at: &str| match t.scale {
        Some(base) => format!("vec4<f16>({}[{at}] * s[({base} + gc) / 4u])", t.src),
        None if f32_in && !wide && !hold_f32 => format!("vec4<f16>({}[{at}])", t.src),
        None => format!("{}[{at}]", t.src),
    };
    let mut c = Copy {
        decls: String::new(),
        fetch: String::new(),
        fetch_inside: String::new(),
        store: String::new(),
    };
    for r in 0..reps {
        let v = format!("{}{r}", t.reg);
        let guarded = !items.is_multiple_of(threads) && r == reps - 1;
        writeln!(c.decls, "    var {v}: {held};").unwrap();
        for w in [&mut c.fetch, &mut c.fetch_inside, &mut c.store] {
            writeln!(w, "        {{ let e = li + {}u;", r * threads).unwrap();
            if guarded {
                writeln!(w, "        if (e < {items}u) {{").unwrap();
            }
        }
        let at = load(&format!("({} + gr * {} + gc) / {per}u", t.base, t.stride));
        let index = format!(
            "        let gr = {} + e / {q}u; let gc = {} + (e % {q}u) * {per}u;",
            t.row0, t.col0
        );
        writeln!(
            c.fetch,
            "{index}
        {v} = {held}();
        if (gr < {} && gc < {}) {{ {v} = {at}; }}",
            t.rows_total, t.cols_total,
        )
        .unwrap();
        writeln!(c.fetch_inside, "{index}\n        {v} = {at};").unwrap();
        let sh = t.sh;
        if wide {
            let half = |a: &str, b: &str| {
                format!("vec4<f16>(vec4<f32>(unpack2x16float({v}.{a}), unpack2x16float({v}.{b})))")
            };
            writeln!(
                c.store,
                "        let si = {sh}_w + (e / {q}u) * {row4}u + (e % {q}u) * 2u;
        {sh}[si] = {};
        {sh}[si + 1u] = {};",
                half("x", "y"),
                half("z", "w")
            )
            .unwrap();
        } else if let Some((scale, lo)) = t.split {
            assert!(hold_f32, "split operands are f32, held as fetched");
            writeln!(
                c.store,
                "        let si = {sh}_w + (e / {q}u) * {row4}u + e % {q}u; let x = {v} * {scale};
        {}",
                split::store_halves(sh, "x", lo)
            )
            .unwrap();
        } else {
            let stored = if hold_f32 {
                format!("vec4<f16>({v})")
            } else {
                v.clone()
            };
            writeln!(
                c.store,
                "        {sh}[{sh}_w + (e / {q}u) * {row4}u + e % {q}u] = {stored};"
            )
            .unwrap();
        }
        for w in [&mut c.fetch, &mut c.fetch_inside, &mut c.store] {
            if guarded {
                writeln!(w, "        }}").unwrap();
            }
            writeln!(w, "        }}").unwrap();
        }
    }
    c
}

/// A tile of a quantised B: its rows are rows of W, each one 32-weight block
/// long (`bk = 32`). A thread fetches one block's words into registers and, at
/// the store, dequantises half of it (16 weights, four `vec4<f16>`s). Rows past N
/// fetch zeros, which dequantise to zero in every layout. `p[11]` is W's blocks
/// per row (K is a slice of the row when K is split).
fn copy_blocks(q: Blocks, t: &Tile, threads: u32, pad: u32) -> Copy {
    let items = t.rows * 2;
    let reps = items.div_ceil(threads);
    let row4 = (t.len + pad) / 4;
    let mut c = Copy {
        decls: String::new(),
        fetch: String::new(),
        fetch_inside: String::new(),
        store: String::new(),
    };
    for r in 0..reps {
        let v = format!("{}{r}", t.reg);
        let guarded = !items.is_multiple_of(threads) && r == reps - 1;
        for i in 0..q.words {
            writeln!(c.decls, "    var {v}_{i}: u32;").unwrap();
        }
        for w in [&mut c.fetch, &mut c.fetch_inside, &mut c.store] {
            writeln!(w, "        {{ let e = li + {}u;", r * threads).unwrap();
            if guarded {
                writeln!(w, "        if (e < {items}u) {{").unwrap();
            }
        }
        let index = format!(
            "        let gr = {} + e % {}u;\n        let blk = {} + (gr * p[11] + {} / 32u) * {}u;",
            t.row0, t.rows, t.base, t.col0, q.words
        );
        let loads: String = (0..q.words)
            .map(|i| format!(" {v}_{i} = {}[blk + {i}u];", t.src))
            .collect();
        let zeros: String = (0..q.words).map(|i| format!(" {v}_{i} = 0u;")).collect();
        writeln!(
            c.fetch,
            "{index}\n        if (gr < {}) {{{loads} }} else {{{zeros} }}",
            t.rows_total
        )
        .unwrap();
        writeln!(c.fetch_inside, "{index}\n       {loads}").unwrap();
        let sh = t.sh;
        writeln!(
            c.store,
            "        let h = e / {}u; let si = {sh}_w + (e % {}u) * {row4}u + h * 4u;\n{}",
            t.rows,
            t.rows,
            q.dequantize(&v)
        )
        .unwrap();
        for i in 0..4 {
            writeln!(c.store, "        {sh}[si + {i}u] = vec4<f16>(q{i});").unwrap();
        }
        for w in [&mut c.fetch, &mut c.fetch_inside, &mut c.store] {
            if guarded {
                writeln!(w, "        }}").unwrap();
            }
            writeln!(w, "        }}").unwrap();
        }
    }
    c
}

/// The kernel's WGSL. Parameters and grid as for the SIMT matmul
/// (`tiled::source`): `p = [M, N, K, a_off, a_sb, a_sm, a_sk, b_off, b_sb,
/// b_sk, b_sn]`, grid `(⌈N/bn⌉, ⌈M/bm⌉, batch)`, C contiguous. Offsets, batch
/// strides and the strides across the contiguous axes must be multiples of 4.
pub(crate) fn source(v: &CoopVariant) -> String {
    let t = v.tiles;
    let (bm, bn, bk, pad) = (t.bm(), t.bn(), t.bk, t.pad);
    let threads = t.subgroups() * 32;
    let ty = |f32_in: bool| match (f32_in, v.wide) {
        (true, _) => "vec4<f32>",
        (false, true) => "vec4<u32>",
        (false, false) => "vec4<f16>",
    };
    let in_ty = ty(v.a_f32);
    let b_ty = if v.b_blocks.is_some() {
        "u32"
    } else {
        ty(v.b_f32)
    };
    let out_ty = match (v.half_out, v.c_vec) {
        (true, true) => "vec4<f16>",
        (true, false) => "f16",
        (false, true) => "vec4<f32>",
        (false, false) => "f32",
    };
    // Shared layouts: (rows, contiguous length) of each tile.
    let (a_rows, a_len) = if v.a_k { (bm, bk) } else { (bk, bm) };
    let (b_rows, b_len) = if v.b_n { (bk, bn) } else { (bn, bk) };
    // Shared tiles are arrays of `vec4<f16>`: strides and offsets of fragment
    // loads count those units.
    let (a4, b4) = ((a_len + pad) / 4, (b_len + pad) / 4);
    let double = t.staging == Staging::Double;
    let buffers = if double { 2 } else { 1 };
    if v.split {
        assert!(
            v.a_f32 && v.b_f32 && !v.half_out && !v.wide && !v.a_scale && v.b_blocks.is_none(),
            "split products: f32 operands and result"
        );
        assert!(
            !double,
            "split products stage one buffer (high and low halves)"
        );
    }
    // A split product's tiles hold high halves, then low ones.
    let halves = if v.split { 2 } else { 1 };
    let mut w = String::new();
    writeln!(
        w,
        "enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<{in_ty}>;
@group(0) @binding(2) var<storage, read> b: array<{b_ty}>;
{scale_binding}{split_binding}{bias_binding}@group(0) @binding({c_binding}) var<storage, read_write> c: array<{out_ty}>;
var<workgroup> As: array<vec4<f16>, {}>;
var<workgroup> Bs: array<vec4<f16>, {}>;
var<workgroup> Cs: array<f32, {}>;
{split_exponent}
@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {{
    let M = p[0]; let N = p[1]; let K = p[2];
    let z = wid.z;
    let m0 = wid.y * {bm}u; let n0 = wid.x * {bn}u;
    let a_base = p[3] + z * p[4]; let a_sm = p[5]; let a_sk = p[6];
    let b_base = p[7] + z * p[8]; let b_sk = p[9]; let b_sn = p[10];
    let sm = (sg / {wn}u) * {fm16}u; let sn = (sg % {wn}u) * {fn16}u;
    // Tiles wholly inside A, B and C load without bounds tests.
    let inside = m0 + {bm}u <= M && n0 + {bn}u <= N && K % {bk}u == 0u;",
        a_rows * a4 * buffers * halves,
        b_rows * b4 * buffers * halves,
        t.subgroups() * 256,
        split_exponent = if v.split {
            split::SPLIT_EXPONENT
        } else {
            ""
        },
        split_binding = if v.split {
            format!(
                "@group(0) @binding({0}) var<storage, read> mxa: array<f32>;
@group(0) @binding({1}) var<storage, read> mxb: array<f32>;\n",
                3 + u32::from(v.a_scale),
                4 + u32::from(v.a_scale)
            )
        } else {
            String::new()
        },
        wn = t.wn,
        fm16 = t.fm * 16,
        fn16 = t.fn_ * 16,
        scale_binding = if v.a_scale {
            "@group(0) @binding(3) var<storage, read> s: array<vec4<f32>>;\n"
        } else {
            ""
        },
        bias_binding = if v.bias {
            format!(
                "@group(0) @binding({}) var<storage, read> bias: array<{}>;\n",
                3 + u32::from(v.a_scale) + 2 * u32::from(v.split),
                if v.half_out { "f16" } else { "f32" }
            )
        } else {
            String::new()
        },
        c_binding = 3 + u32::from(v.a_scale) + 2 * u32::from(v.split) + u32::from(v.bias),
    )
    .unwrap();
    for i in 0..t.fm {
        for j in 0..t.fn_ {
            writeln!(w, "    var acc{i}_{j} = coop_mat16x16<f32, C>();").unwrap();
            if v.split {
                // The small terms' sums, and the large term's in registers.
                writeln!(w, "    var corr{i}_{j} = coop_mat16x16<f32, C>();").unwrap();
                writeln!(w, "    var tot{i}_{j} = coop_mat16x16<f32, C>();").unwrap();
            }
        }
    }
    if v.split {
        w.push_str(&split::prologue(threads));
    }
    // (A split product adds its bias after its sums, at the stores.)
    if v.bias && !v.split {
        assert!(v.b_blocks.is_none(), "a bias is for dense products");
        // The accumulators start from the bias: each subgroup repeats 16 of its
        // columns over the 16 rows of its slice of `Cs` (zero past N) and loads
        // that as every accumulator of those columns. Stored through `Cs`, the
        // product then carries its bias.
        for j in 0..t.fn_ {
            writeln!(
                w,
                "    for (var e = lane; e < 256u; e += lanes) {{
        let gn = n0 + sn + {}u + e % 16u;
        var v = 0.0;
        if (gn < N) {{ v = f32(bias[p[11] + gn]); }}
        Cs[sg * 256u + e] = v;
    }}
    workgroupBarrier();",
                j * 16
            )
            .unwrap();
            for i in 0..t.fm {
                writeln!(
                    w,
                    "    acc{i}_{j} = coopLoadT<coop_mat16x16<f32, C>>(&Cs[sg * 256u], 16u);"
                )
                .unwrap();
            }
            writeln!(w, "    workgroupBarrier();").unwrap();
        }
    }
    let a_split = v.split.then_some(("sa", a_rows * a4));
    let b_split = v.split.then_some(("sb", b_rows * b4));
    let a_tile = if v.a_k {
        Tile {
            src: "a",
            sh: "As",
            reg: "ra",
            base: "a_base",
            row0: "m0",
            col0: "kt",
            rows_total: "M",
            cols_total: "K",
            stride: "a_sm",
            rows: a_rows,
            len: a_len,
            scale: v.a_scale.then_some("p[12] + z * p[4]"),
            split: a_split,
        }
    } else {
        Tile {
            src: "a",
            sh: "As",
            reg: "ra",
            base: "a_base",
            row0: "kt",
            col0: "m0",
            rows_total: "K",
            cols_total: "M",
            stride: "a_sk",
            rows: a_rows,
            len: a_len,
            scale: None,
            split: a_split,
        }
    };
    let b_tile = if v.b_n {
        Tile {
            src: "b",
            sh: "Bs",
            reg: "rb",
            base: "b_base",
            row0: "kt",
            col0: "n0",
            rows_total: "K",
            cols_total: "N",
            stride: "b_sk",
            rows: b_rows,
            len: b_len,
            scale: None,
            split: b_split,
        }
    } else {
        Tile {
            src: "b",
            sh: "Bs",
            reg: "rb",
            base: "b_base",
            row0: "n0",
            col0: "kt",
            rows_total: "N",
            cols_total: "K",
            stride: "b_sn",
            rows: b_rows,
            len: b_len,
            scale: None,
            split: b_split,
        }
    };
    let ca = copy_tile(&a_tile, threads, pad, v.a_f32, v.wide && !v.a_f32);
    let cb = match v.b_blocks {
        Some(q) => {
            assert!(
                bk == 32 && !v.b_n && v.a_f32,
                "quantised B: bk 32, along k, f32 A"
            );
            assert!(!v.a_scale || (v.a_k && !v.wide), "A's scale: f32 A along k");
            copy_blocks(q, &b_tile, threads, pad)
        }
        None => copy_tile(&b_tile, threads, pad, v.b_f32, v.wide && !v.b_f32),
    };
    w.push_str(&ca.decls);
    w.push_str(&cb.decls);
    // Tiles are stored at `As_w`/`Bs_w` and fragments read at `As_r`/`Bs_r`
    // (offsets into the shared arrays: the two buffers of `Double` swap roles).
    if double {
        let (a_size, b_size) = (a_rows * a4, b_rows * b4);
        writeln!(
            w,
            "    var As_r = 0u; var Bs_r = 0u;
    {{ let kt = 0u; let As_w = 0u; let Bs_w = 0u;
{}{}{}    }}
    workgroupBarrier();
    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{
        let kt = k0 + {bk}u;
        let As_w = {a_size}u - As_r; let Bs_w = {b_size}u - Bs_r;
        if (kt < K) {{\n{}        }}",
            fetch_either(&ca, &cb),
            ca.store,
            cb.store,
            fetch_either(&ca, &cb)
        )
        .unwrap();
    } else {
        writeln!(
            w,
            "    let As_r = 0u; let Bs_r = 0u; let As_w = 0u; let Bs_w = 0u;"
        )
        .unwrap();
    }
    if t.staging == Staging::Prefetch {
        writeln!(w, "    {{ let kt = 0u;\n{}    }}", fetch_either(&ca, &cb)).unwrap();
        writeln!(w, "    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{").unwrap();
        w.push_str(&ca.store);
        w.push_str(&cb.store);
        writeln!(
            w,
            "        workgroupBarrier();\n        let kt = k0 + {bk}u;\n        if (kt < K) {{\n{}        }}",
            fetch_either(&ca, &cb)
        )
        .unwrap();
    } else if t.staging == Staging::Direct {
        writeln!(
            w,
            "    for (var k0 = 0u; k0 < K; k0 += {bk}u) {{\n        let kt = k0;\n{}",
            fetch_either(&ca, &cb)
        )
        .unwrap();
        w.push_str(&ca.store);
        w.push_str(&cb.store);
        writeln!(w, "        workgroupBarrier();").unwrap();
    }
    let (a_lo, b_lo) = (a_rows * a4, b_rows * b4);
    for kk in 0..bk / 16 {
        // Fragment loads from the shared tiles (`lo`: the low halves' offset).
        let a_frag = |i: u32, name: &str, lo: u32| {
            let (at, func) = if v.a_k {
                (
                    format!("(sm + {}u) * {a4}u + {}u", i * 16, kk * 4),
                    "coopLoadT",
                )
            } else {
                (
                    format!("{}u + (sm + {}u) / 4u", kk * 16 * a4, i * 16),
                    "coopLoad",
                )
            };
            format!(
                "        let {name}{i} = {func}<coop_mat16x16<f16, A>>(&As[As_r + {lo}u + {at}], {a4}u);\n"
            )
        };
        let b_frag = |j: u32, name: &str, lo: u32| {
            let (at, func) = if v.b_n {
                (
                    format!("{}u + (sn + {}u) / 4u", kk * 16 * b4, j * 16),
                    "coopLoadT",
                )
            } else {
                (
                    format!("(sn + {}u) * {b4}u + {}u", j * 16, kk * 4),
                    "coopLoad",
                )
            };
            format!(
                "        let {name}{j} = {func}<coop_mat16x16<f16, B>>(&Bs[Bs_r + {lo}u + {at}], {b4}u);\n"
            )
        };
        let mma = |a: &str, b: &str, into: &str, i: u32, j: u32| {
            format!("        {into}{i}_{j} = coopMultiplyAdd({a}{i}, {b}{j}, {into}{i}_{j});\n")
        };
        w.push_str("        {\n");
        if v.split {
            // B's halves for the step, then A's a row of fragments at a time
            // (fewer fragments live at once); the small terms first.
            for j in 0..t.fn_ {
                w += &b_frag(j, "fb", 0);
                w += &b_frag(j, "fbl", b_lo);
            }
            for i in 0..t.fm {
                w += &a_frag(i, "fa", 0);
                w += &a_frag(i, "fal", a_lo);
                for j in 0..t.fn_ {
                    w += &mma("fal", "fb", "corr", i, j);
                    w += &mma("fa", "fbl", "corr", i, j);
                    w += &mma("fa", "fb", "acc", i, j);
                }
            }
            if kk == bk / 16 - 1 {
                // The large term leaves the tensor cores after every tile.
                for i in 0..t.fm {
                    for j in 0..t.fn_ {
                        writeln!(
                            w,
                            "        tot{i}_{j} = tot{i}_{j} + acc{i}_{j}; acc{i}_{j} = coop_mat16x16<f32, C>();"
                        )
                        .unwrap();
                    }
                }
            }
        } else {
            (0..t.fm).for_each(|i| w += &a_frag(i, "fa", 0));
            (0..t.fn_).for_each(|j| w += &b_frag(j, "fb", 0));
            for i in 0..t.fm {
                for j in 0..t.fn_ {
                    w += &mma("fa", "fb", "acc", i, j);
                }
            }
        }
        w.push_str("        }\n");
    }
    if double {
        // The next tile goes to the other buffer while this one is read.
        writeln!(
            w,
            "        if (kt < K) {{\n{}{}        }}\n        workgroupBarrier();\n        As_r = As_w; Bs_r = Bs_w;\n    }}",
            ca.store, cb.store
        )
        .unwrap();
    } else {
        writeln!(w, "        workgroupBarrier();\n    }}").unwrap();
    }
    if v.split {
        // (The large term's accumulators are clear: its sums are in `tot`.)
        for i in 0..t.fm {
            for j in 0..t.fn_ {
                writeln!(
                    w,
                    "    acc{i}_{j} = tot{i}_{j} + corr{i}_{j} * {};",
                    1.0 / split::LOW_FACTOR
                )
                .unwrap();
            }
        }
    }
    // Stores: each fragment goes through the subgroup's slice of `Cs` and its
    // lanes write the elements inside C, four at a time where C's rows allow.
    // (Stored straight from the accumulators to an f32 C instead, the half GPT
    // step took 17.3–17.5 ms against 15.6 ms: H100, 2026-12-07,
    // benchmarks/h100-2026-12-07-result-stores.) A split product's sums are
    // unscaled, and its bias added, on their way out.
    let (fix4, fix1) = match (v.split, v.bias) {
        (false, _) => (String::new(), String::new()),
        (true, false) => (" * ua * ub".to_string(), " * ua * ub".to_string()),
        (true, true) => (
            " * ua * ub + vec4<f32>(bias[p[11] + gn], bias[p[11] + gn + 1u], \
             bias[p[11] + gn + 2u], bias[p[11] + gn + 3u])"
                .to_string(),
            " * ua * ub + bias[p[11] + gn]".to_string(),
        ),
    };
    if v.c_vec {
        let out4 = if v.half_out { "vec4<f16>" } else { "vec4<f32>" };
        for i in 0..t.fm {
            for j in 0..t.fn_ {
                writeln!(
                    w,
                    "    {{ let at = sg * 256u; coopStoreT(acc{i}_{j}, &Cs[at], 16u); }}
    workgroupBarrier();
    for (var e = lane; e < 64u; e += lanes) {{
        let gm = m0 + sm + {}u + e / 4u; let gn = n0 + sn + {}u + (e % 4u) * 4u;
        if (gm < M && gn < N) {{
            let at = sg * 256u + e * 4u;
            c[((z * M + gm) * N + gn) / 4u] =
                {out4}(vec4<f32>(Cs[at], Cs[at + 1u], Cs[at + 2u], Cs[at + 3u]){fix4});
        }}
    }}
    workgroupBarrier();",
                    i * 16,
                    j * 16
                )
                .unwrap();
            }
        }
        writeln!(w, "}}").unwrap();
        return w;
    }
    let conv = if v.half_out { "f16" } else { "" };
    for i in 0..t.fm {
        for j in 0..t.fn_ {
            writeln!(
                w,
                "    {{ let at = sg * 256u; coopStoreT(acc{i}_{j}, &Cs[at], 16u); }}
    workgroupBarrier();
    for (var e = lane; e < 256u; e += lanes) {{
        let gm = m0 + sm + {}u + e / 16u; let gn = n0 + sn + {}u + e % 16u;
        if (gm < M && gn < N) {{ c[(z * M + gm) * N + gn] = {conv}(Cs[sg * 256u + e]{fix1}); }}
    }}
    workgroupBarrier();",
                i * 16,
                j * 16,
            )
            .unwrap();
        }
    }
    writeln!(w, "}}").unwrap();
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses, validates and translates `v`'s kernel to SPIR-V, as the runtime
    /// compiles it: without bounds checks.
    fn validate(v: &CoopVariant) {
        use wgpu::naga;
        let src = source(v);
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{v:?}:\n{}\n{src}", e.emit_to_string(&src)));
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{v:?}:\n{}\n{src}", e.emit_to_string(&src)));
        let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
        let options = naga::back::spv::Options {
            bounds_check_policies: naga::proc::BoundsCheckPolicies {
                index: unchecked,
                buffer: unchecked,
                image_load: unchecked,
                binding_array: unchecked,
            },
            ..Default::default()
        };
        naga::back::spv::write_vec(&module, &info, &options, None)
            .unwrap_or_else(|e| panic!("{v:?}: {e}"));
    }

    /// Every candidate, layout and element mode validates (lavapipe has no
    /// cooperative matrices, so the GPU tests cannot compile these; the GPU
    /// benchmark and the device's test run check their results).
    #[test]
    fn every_variant_validates_and_translates() {
        for tiles in CoopTiles::CANDIDATES {
            tiles.check(1024, 48 * 1024).unwrap();
            for bits in 0..128u32 {
                validate(&CoopVariant {
                    tiles,
                    a_k: bits & 1 != 0,
                    b_n: bits & 2 != 0,
                    a_f32: bits & 4 != 0,
                    half_out: bits & 8 != 0,
                    wide: bits & 16 != 0,
                    c_vec: bits & 32 != 0,
                    b_f32: bits & 64 != 0,
                    b_blocks: None,
                    a_scale: false,
                    // Half of the variants with each bit set have a bias.
                    bias: bits.count_ones() % 2 == 1,
                    split: false,
                });
            }
        }
    }

    /// So does every split variant (f32 operands and result, one buffer
    /// staged) whose halves fit in 48 KiB.
    #[test]
    fn every_split_variant_validates_and_translates() {
        let fitting = CoopTiles::CANDIDATES
            .into_iter()
            .chain([CoopTiles::SPLIT_LARGE])
            .filter(|t| t.staging != Staging::Double && t.split_shared_bytes() <= 48 * 1024);
        let mut seen = 0;
        for tiles in fitting {
            for bits in 0..16u32 {
                validate(&CoopVariant {
                    tiles,
                    a_k: bits & 1 != 0,
                    b_n: bits & 2 != 0,
                    a_f32: true,
                    b_f32: true,
                    half_out: false,
                    wide: false,
                    c_vec: bits & 4 != 0,
                    b_blocks: None,
                    a_scale: false,
                    bias: bits & 8 != 0,
                    split: true,
                });
                seen += 1;
            }
        }
        assert!(seen >= 16 * 4, "the split tiles are among them");
    }

    /// So does every block layout of a quantised B, at every candidate with
    /// K steps of one block, with and without a scale on A's columns.
    #[test]
    fn every_quantised_variant_validates_and_translates() {
        let layouts = [(2, 5), (3, 5), (8, 9), (255, 11)];
        for tiles in CoopTiles::CANDIDATES.into_iter().filter(|t| t.bk == 32) {
            for (qtype, words) in layouts {
                for (c_vec, a_scale) in [(false, false), (true, false), (false, true), (true, true)]
                {
                    validate(&CoopVariant {
                        tiles,
                        a_k: true,
                        b_n: false,
                        a_f32: true,
                        b_f32: false,
                        half_out: false,
                        wide: false,
                        c_vec,
                        b_blocks: Some(Blocks { qtype, words }),
                        a_scale,
                        bias: false,
                        split: false,
                    });
                }
            }
        }
    }
}
