//! Elementwise kernels: one thread per output element, strided reads and writes.
use super::Expr;
use super::expr::Printer;
use std::fmt::Write;

/// Threads per workgroup of the default [`Launch`] (a 1-D group; the grid is 2-D so
/// that more than 65 535 groups can be launched).
pub const WORKGROUP_SIZE: u32 = 256;

/// Units (elements, or `vec4`s in a vector kernel) each thread handles in the
/// default [`Launch`]: a workgroup covers `WORKGROUP_SIZE * UNITS_PER_THREAD` units.
pub const UNITS_PER_THREAD: u32 = 4;

/// How the threads of an elementwise kernel cover the index space: a tuning knob
/// (the default is what the benchmarks found best).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Launch {
    /// Threads per workgroup.
    pub workgroup: u32,
    /// Units per thread, spaced a workgroup apart so that warps stay coalesced.
    pub units: u32,
    /// Loads read a clamped index unconditionally (straight-line code; only the
    /// stores are guarded) instead of sitting in a branch each.
    pub branchless: bool,
}

impl Launch {
    /// The default layout.
    pub const DEFAULT: Launch = Launch {
        workgroup: WORKGROUP_SIZE,
        units: UNITS_PER_THREAD,
        branchless: false,
    };

    /// The layouts a benchmark sweeps.
    pub const CANDIDATES: [Launch; 7] = [
        Launch::DEFAULT,
        Launch::new(256, 1, true),
        Launch::new(256, 2, true),
        Launch::new(256, 4, true),
        Launch::new(256, 8, true),
        Launch::new(128, 4, true),
        Launch::new(64, 4, true),
    ];

    const fn new(workgroup: u32, units: u32, branchless: bool) -> Self {
        Launch {
            workgroup,
            units,
            branchless,
        }
    }

    /// Units one workgroup covers.
    pub fn span(&self) -> u32 {
        self.workgroup * self.units
    }
}

/// The storage element type of a kernel's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `f32`: the type arithmetic computes in.
    F32,
    /// `f16` storage (WGSL `enable f16;`, the adapter's `shader-f16` feature):
    /// loaded into `f32`, computed there, rounded to `f16` when stored.
    F16,
    /// `u32`: index buffers; only plain copies and fills ([`Expr::is_plain`]).
    U32,
}

impl Elem {
    /// Its WGSL scalar type.
    pub fn wgsl(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::F16 => "f16",
            Elem::U32 => "u32",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Elem::F16 => 2,
            Elem::F32 | Elem::U32 => 4,
        }
    }

    /// Whether values of this type are floats (computed in `f32`).
    pub fn is_float(self) -> bool {
        self != Elem::U32
    }

    /// The type a kernel computes in for storage of this type: `f32` for floats.
    pub(crate) fn compute(self) -> Elem {
        if self.is_float() { Elem::F32 } else { self }
    }

    /// `value` (of type `compute()`, or a `vec4` of it when `vector`) converted to
    /// this storage type: unchanged unless it is `f16`.
    pub(crate) fn store(self, value: &str, vector: bool) -> String {
        match (self, vector) {
            (Elem::F16, false) => format!("f16({value})"),
            (Elem::F16, true) => format!("vec4<f16>({value})"),
            _ => value.to_string(),
        }
    }

    /// `value` (a load of this storage type, or a `vec4` of them when `vector`)
    /// converted to its compute type: unchanged unless it is `f16`.
    pub(crate) fn load(self, value: &str, vector: bool) -> String {
        match (self, vector) {
            (Elem::F16, false) => format!("f32({value})"),
            (Elem::F16, true) => format!("vec4<f32>({value})"),
            _ => value.to_string(),
        }
    }
}

/// The `enable f16;` directive when any of `elems` is `f16` (it must open the module).
pub(crate) fn enable_f16(elems: &[Elem]) -> &'static str {
    if elems.contains(&Elem::F16) {
        "enable f16;\n"
    } else {
        ""
    }
}

/// How a buffer is addressed at output position `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `offset + i`: row-major with the output's dims.
    Contiguous,
    /// `offset + Σ coordᵢ·strideᵢ` (a stride of 0 broadcasts). In a
    /// [vector](ElementwiseKernel::vector) kernel the innermost stride is 1.
    Strided,
    /// Strided with an innermost stride of 0: in a vector kernel one scalar is read
    /// and splat over the four lanes.
    Broadcast,
}

/// A generated elementwise kernel: `out[i] = expr(inputs at i, scalars)` for every
/// position `i` of a rank-`rank` index space.
///
/// Bindings: 0 = the `u32` parameter block (see [`ParamLayout`]), `1..=n` = the
/// inputs (read-only), `n + 1` = the output.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElementwiseKernel {
    /// Rank of the index space (0..=6).
    pub rank: usize,
    /// Element type of every input buffer.
    pub elem: Elem,
    /// Element type of the output buffer. Differing from `elem` (both floats), a
    /// kernel converts: `Expr::input(0)` from `f32` to `f16` is a cast.
    pub out_elem: Elem,
    /// Addressing of each input; `inputs.len()` must cover [`Expr::inputs`].
    pub inputs: Vec<Access>,
    /// Addressing of the output.
    pub output: Access,
    /// The value at each position.
    pub expr: Expr,
    /// Four elements per thread through `vec4` loads and stores. The caller
    /// guarantees: the innermost dim is a multiple of 4, every contiguous or
    /// strided access has an offset and strides (other than the innermost, which
    /// is 1) that are multiples of 4, and broadcast accesses have innermost stride 0.
    pub vector: bool,
    /// Threads per workgroup and units per thread.
    pub launch: Launch,
    /// The inputs drawn from the counter stream instead of loaded.
    pub drawn: super::Draws,
}

/// Where each field sits in a kernel's `u32` parameter block.
///
/// `p[0]` = element count, `p[1..=rank]` = dims, then per input its offset followed
/// by its strides (strided inputs only), then the output's offset (and strides),
/// then the scalars (f32 bits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    /// Index of each input's offset.
    pub inputs: Vec<usize>,
    /// Index of the output's offset.
    pub output: usize,
    /// Index of the first scalar.
    pub scalars: usize,
}

impl ElementwiseKernel {
    /// Where the parameters of this kernel sit.
    pub fn param_layout(&self) -> ParamLayout {
        let width = |a: Access| match a {
            Access::Contiguous => 1,
            Access::Strided | Access::Broadcast => 1 + self.rank,
        };
        let mut at = 1 + self.rank;
        let inputs = self
            .inputs
            .iter()
            .map(|&a| {
                let start = at;
                at += width(a);
                start
            })
            .collect();
        let output = at;
        at += width(self.output);
        ParamLayout {
            inputs,
            output,
            scalars: at,
        }
    }

    /// Packs the parameter block: `dims` of the index space, `(offset, strides)` of
    /// each input and of the output (strides are ignored for contiguous accesses),
    /// and the scalars as raw bits. A vector kernel counts threads, not elements:
    /// its innermost dim and element count are stored divided by 4.
    ///
    /// Panics if a value does not fit in `u32` (buffers that large cannot be bound).
    pub fn params(
        &self,
        dims: &[usize],
        inputs: &[(usize, &[usize])],
        output: (usize, &[usize]),
        scalars: &[u32],
    ) -> Vec<u32> {
        let mut p = Vec::new();
        self.params_into(&mut p, dims, inputs, output, scalars);
        p
    }

    /// [`params`](Self::params) appended to `p` (a caller recording many launches
    /// reuses one buffer).
    pub fn params_into(
        &self,
        p: &mut Vec<u32>,
        dims: &[usize],
        inputs: &[(usize, &[usize])],
        output: (usize, &[usize]),
        scalars: &[u32],
    ) {
        assert_eq!(dims.len(), self.rank, "params: rank mismatch");
        assert_eq!(inputs.len(), self.inputs.len(), "params: input count");
        let u = |v: usize| u32::try_from(v).expect("GPU index exceeds u32");
        let lanes = if self.vector { 4 } else { 1 };
        // At most: the count, dims, each view's offset and strides, the scalars.
        let views = inputs.len() + 1;
        p.reserve(1 + self.rank + views * (1 + self.rank) + scalars.len());
        p.push(u(dims.iter().product::<usize>() / lanes));
        p.extend(dims.iter().map(|&d| u(d)));
        if let Some(last) = p.last_mut().filter(|_| self.rank > 0) {
            *last /= lanes as u32;
        }
        let mut push = |access: Access, (offset, strides): (usize, &[usize])| {
            p.push(u(offset));
            if access != Access::Contiguous {
                assert_eq!(strides.len(), self.rank, "params: stride rank");
                p.extend(strides.iter().map(|&s| u(s)));
            }
        };
        for (&a, &view) in self.inputs.iter().zip(inputs) {
            push(a, view);
        }
        push(self.output, output);
        p.extend_from_slice(scalars);
    }

    /// The WGSL source, entry point `main`.
    ///
    /// Each thread handles [`Launch::units`] units (elements, or `vec4`s in a
    /// vector kernel) spaced a workgroup apart, so warps stay coalesced: all loads
    /// are issued before any result is stored, giving the memory system several
    /// requests in flight per thread.
    pub fn source(&self) -> String {
        assert!(self.rank <= 6, "elementwise kernels support rank ≤ 6");
        assert!(
            self.expr.inputs() <= self.inputs.len(),
            "the expression reads more inputs than the kernel binds"
        );
        assert!(
            (self.elem.is_float() && self.out_elem.is_float())
                || (self.elem == self.out_elem && self.expr.is_plain()),
            "u32 kernels can only copy or fill"
        );
        let ty = self.elem.wgsl();
        let vty = format!("vec4<{ty}>");
        // Loads are converted to the compute type (f32 for floats) as they are read.
        let cty = self.elem.compute().wgsl();
        let vcty = format!("vec4<{cty}>");
        let out_ty = self.out_elem.wgsl();
        let vector = self.vector;
        // In a vector kernel, contiguous and strided buffers are read as vec4s.
        let wide = |a: Access| vector && a != Access::Broadcast;
        let layout = self.param_layout();
        let mut s = String::new();
        let w = &mut s;
        w.push_str(super::elementwise::enable_f16(&[self.elem, self.out_elem]));
        w.push_str(&self.expr.preamble());
        w.push_str(&self.drawn.preamble());
        writeln!(w, "@group(0) @binding(0) var<storage, read> p: array<u32>;").unwrap();
        for (i, &a) in self.inputs.iter().enumerate() {
            let t = if wide(a) { &vty } else { ty };
            writeln!(
                w,
                "@group(0) @binding({}) var<storage, read> src{i}: array<{t}>;",
                i + 1
            )
            .unwrap();
        }
        writeln!(
            w,
            "@group(0) @binding({}) var<storage, read_write> dst: array<{}>;",
            self.inputs.len() + 1,
            if vector {
                format!("vec4<{out_ty}>")
            } else {
                out_ty.to_string()
            }
        )
        .unwrap();
        let Launch {
            workgroup,
            units,
            branchless,
        } = self.launch;
        writeln!(
            w,
            "@compute @workgroup_size({workgroup})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
    let base = (wid.y * nwg.x + wid.x) * {}u + li;
    let n = p[0];",
            self.launch.span()
        )
        .unwrap();
        self.drawn
            .keys(w, &|j| format!("p[{}]", layout.scalars + j));
        let strided = self.output != Access::Contiguous
            || self.inputs.iter().any(|&a| a != Access::Contiguous);
        let last = self.rank.saturating_sub(1);
        // The element index of an access for unit `j`; a vec4 index is that over 4.
        let index = |access: Access, at: usize, j: u32| match access {
            Access::Contiguous if vector => format!("p[{at}] / 4u + i{j}"),
            Access::Contiguous => format!("p[{at}] + i{j}"),
            Access::Strided | Access::Broadcast => {
                let mut e = format!("p[{at}]");
                for a in 0..self.rank {
                    let c = if vector && a == last {
                        format!("c{a}_{j} * 4u")
                    } else {
                        format!("c{a}_{j}")
                    };
                    write!(e, " + {c} * p[{}]", at + 1 + a).unwrap();
                }
                if wide(access) {
                    format!("({e}) / 4u")
                } else {
                    e
                }
            }
        };
        for j in 0..units {
            let at = j * workgroup;
            if branchless {
                // `n ≥ 1`: empty kernels are never launched.
                writeln!(
                    w,
                    "    let i{j} = min(base + {at}u, n - 1u);\n    let ok{j} = base + {at}u < n;"
                )
            } else {
                writeln!(w, "    let i{j} = base + {at}u;\n    let ok{j} = i{j} < n;")
            }
            .unwrap();
            if strided && self.rank > 0 {
                // Coordinates, last axis fastest (in a vector kernel the last one
                // counts groups of four elements).
                writeln!(w, "    var rem{j} = i{j};").unwrap();
                for a in (1..self.rank).rev() {
                    writeln!(
                        w,
                        "    let c{a}_{j} = rem{j} % p[{d}]; rem{j} = rem{j} / p[{d}];",
                        d = 1 + a
                    )
                    .unwrap();
                }
                writeln!(w, "    let c0_{j} = rem{j};").unwrap();
            }
            for (i, (&a, &at)) in self.inputs.iter().zip(&layout.inputs).enumerate() {
                let t = if wide(a) { &vcty } else { cty };
                let at = index(a, at, j);
                let load = self
                    .drawn
                    .load(i, self.elem, &at, wide(a))
                    .unwrap_or_else(|| self.elem.load(&format!("src{i}[{at}]"), wide(a)));
                if branchless {
                    writeln!(w, "    let x{i}_{j} = {load};")
                } else {
                    writeln!(
                        w,
                        "    var x{i}_{j}: {t};\n    if (ok{j}) {{ x{i}_{j} = {load}; }}"
                    )
                }
                .unwrap();
            }
        }
        let scalar_at = layout.scalars;
        let elem = self.elem;
        let scalar = |i: usize| match elem {
            Elem::F32 | Elem::F16 => format!("bitcast<f32>(p[{}])", scalar_at + i),
            Elem::U32 => format!("p[{}]", scalar_at + i),
        };
        // The value as one graph (equal sub-trees shared), printed once per unit
        // and lane with that unit's loads as inputs.
        let printer = Printer::new(&self.expr);
        let param = |i: u16| scalar(i as usize);
        for j in 0..units {
            writeln!(w, "    if (ok{j}) {{").unwrap();
            let mut lower = |prefix: &str, input: &dyn Fn(u16) -> String| {
                printer.print(w, "        ", prefix, input, &param)
            };
            let value = if vector {
                // The scalar expression once per lane.
                let lanes: Vec<String> = ["x", "y", "z", "w"]
                    .iter()
                    .map(|lane| {
                        let input = |i: u16| {
                            let i = i as usize;
                            if wide(self.inputs[i]) {
                                format!("x{i}_{j}.{lane}")
                            } else {
                                format!("x{i}_{j}")
                            }
                        };
                        lower(&format!("t{j}{lane}_"), &input)
                    })
                    .collect();
                format!("{vcty}({})", lanes.join(", "))
            } else {
                lower(&format!("t{j}_"), &|i| format!("x{i}_{j}"))
            };
            writeln!(
                w,
                "    dst[{}] = {};\n    }}",
                index(self.output, layout.output, j),
                self.out_elem.store(&value, vector)
            )
            .unwrap();
        }
        writeln!(w, "}}").unwrap();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, UnaryOp};

    #[test]
    fn generates_strided_math_and_shared_lets() {
        let k = ElementwiseKernel {
            rank: 2,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Strided, Access::Contiguous],
            output: Access::Contiguous,
            expr: Expr::input(0)
                .binary(BinaryOp::Mul, Expr::input(1))
                .unary(UnaryOp::Gelu),
            vector: false,
            launch: Launch::DEFAULT,
            drawn: Default::default(),
        };
        let src = k.source();
        super::super::assert_valid(&src);
        assert!(src.contains("fn volta_erf"));
        assert!(src.contains("let c1_0 = rem0 % p[2]"));
        assert!(src.contains("src0[p[3] + c0_3 * p[4] + c1_3 * p[5]]"));
        assert!(src.contains("src1[p[6] + i2]"));
        let l = k.param_layout();
        assert_eq!((l.inputs.clone(), l.output, l.scalars), (vec![3, 6], 7, 8));
        let p = k.params(&[2, 3], &[(5, &[1, 2]), (0, &[3, 1])], (0, &[3, 1]), &[]);
        assert_eq!(p, vec![6, 2, 3, 5, 1, 2, 0, 0]);
    }

    #[test]
    fn drawn_inputs_are_hashed_at_their_addresses() {
        // x0 · (x1 ≥ s0): x1 drawn with its seed in scalars 1 and 2.
        for (vector, access) in [
            (false, Access::Contiguous),
            (false, Access::Strided),
            (true, Access::Contiguous),
            (true, Access::Strided),
            (true, Access::Broadcast),
        ] {
            for elem in [Elem::F32, Elem::F16] {
                let k = ElementwiseKernel {
                    rank: 2,
                    elem,
                    out_elem: elem,
                    inputs: vec![Access::Contiguous, access],
                    output: Access::Contiguous,
                    expr: Expr::input(0).binary(
                        BinaryOp::Mul,
                        Expr::input(1).binary(BinaryOp::Ge, Expr::scalar(0)),
                    ),
                    vector,
                    launch: Launch::DEFAULT,
                    drawn: super::super::Draws(vec![(1, 1)]),
                };
                let src = k.source();
                super::super::assert_valid(&src);
                assert!(!src.contains("src1["), "{src}");
                let s = k.param_layout().scalars;
                assert!(src.contains(&format!(
                    "let k1 = stream_keys(p[{}], p[{}]);",
                    s + 1,
                    s + 2
                )));
                // A vector kernel draws four consecutive elements where it loads a vec4.
                let four = vector && access != Access::Broadcast;
                assert_eq!(src.contains("volta_draw4(("), four, "{src}");
            }
        }
    }

    #[test]
    fn lowering_shares_equal_subtrees_but_keeps_ieee_semantics() {
        // (x·2 − x·2) + x·0: the product is computed once; neither `a − a → 0` nor
        // `x·0 → 0` is applied (both differ from IEEE when x is infinite or NaN).
        let x2 = Expr::input(0).binary(BinaryOp::Mul, Expr::constant(2.0));
        let k = ElementwiseKernel {
            rank: 1,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Contiguous],
            output: Access::Contiguous,
            expr: x2.clone().binary(BinaryOp::Sub, x2).binary(
                BinaryOp::Add,
                Expr::input(0).binary(BinaryOp::Mul, Expr::constant(0.0)),
            ),
            vector: false,
            launch: Launch::DEFAULT,
            drawn: Default::default(),
        };
        let src = k.source();
        super::super::assert_valid(&src);
        assert_eq!(src.matches("(x0_0 * 2.0)").count(), 1, "{src}");
        assert!(src.contains("let t0_3 = (t0_2 - t0_2);"), "{src}");
        assert!(src.contains("(x0_0 * 0.0)"), "{src}");
    }

    #[test]
    fn vector_kernels_read_vec4_and_splat_broadcasts() {
        let k = ElementwiseKernel {
            rank: 2,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Contiguous, Access::Broadcast],
            output: Access::Contiguous,
            expr: Expr::input(0).binary(BinaryOp::Sub, Expr::input(1)),
            vector: true,
            launch: Launch::DEFAULT,
            drawn: Default::default(),
        };
        let src = k.source();
        super::super::assert_valid(&src);
        assert!(src.contains("var<storage, read> src0: array<vec4<f32>>"));
        assert!(src.contains("var<storage, read> src1: array<f32>"));
        assert!(src.contains("src0[p[3] / 4u + i1]"));
        assert!(src.contains("src1[p[4] + c0_1 * p[5] + c1_1 * 4u * p[6]]"));
        assert!(src.contains("(x0_2.w - x1_2)"));
        // Branchless loads clamp the index and guard only the store.
        let src = ElementwiseKernel {
            launch: Launch::CANDIDATES[1],
            ..k.clone()
        }
        .source();
        assert!(src.contains("@workgroup_size(256)"));
        assert!(src.contains("let i0 = min(base + 0u, n - 1u);"), "{src}");
        assert!(src.contains("let x0_0 = src0[p[3] / 4u + i0];"), "{src}");
        assert!(!src.contains("i1"), "one unit per thread: {src}");
        // Four threads' worth of elements: 2 × 8 elements are 4 vec4s.
        let p = k.params(&[2, 8], &[(0, &[8, 1]), (4, &[1, 0])], (0, &[8, 1]), &[]);
        assert_eq!(p, vec![4, 2, 2, 0, 4, 1, 0, 0]);
    }

    #[test]
    fn f16_kernels_load_into_f32_and_round_when_stored() {
        for (vector, launch) in [(false, Launch::DEFAULT), (true, Launch::CANDIDATES[1])] {
            let k = ElementwiseKernel {
                rank: 2,
                elem: Elem::F16,
                out_elem: Elem::F16,
                inputs: vec![Access::Contiguous, Access::Broadcast],
                output: Access::Contiguous,
                expr: Expr::input(0)
                    .binary(BinaryOp::Mul, Expr::input(1))
                    .binary(BinaryOp::Add, Expr::scalar(0))
                    .unary(UnaryOp::Gelu),
                vector,
                launch,
                drawn: Default::default(),
            };
            let src = k.source();
            super::super::assert_valid(&src);
            assert!(src.starts_with("enable f16;\n"), "{src}");
            assert!(src.contains("bitcast<f32>(p["), "{src}");
            if vector {
                assert!(src.contains("src0: array<vec4<f16>>"), "{src}");
                assert!(src.contains("src1: array<f16>"), "{src}");
                assert!(
                    src.contains("let x0_0 = vec4<f32>(src0[p[3] / 4u + i0]);"),
                    "{src}"
                );
                assert!(src.contains("let x1_0 = f32(src1["), "{src}");
                assert!(src.contains("] = vec4<f16>(vec4<f32>("), "{src}");
            } else {
                assert!(src.contains("var x0_0: f32;"), "{src}");
                assert!(src.contains("x0_0 = f32(src0[p[3] + i0]);"), "{src}");
                assert!(src.contains("dst[p[7] + i0] = f16("), "{src}");
            }
        }
        // Casts: an f32 input stored as f16, and back.
        for (from, to) in [(Elem::F32, Elem::F16), (Elem::F16, Elem::F32)] {
            let k = ElementwiseKernel {
                rank: 1,
                elem: from,
                out_elem: to,
                inputs: vec![Access::Strided],
                output: Access::Contiguous,
                expr: Expr::input(0),
                vector: false,
                launch: Launch::DEFAULT,
                drawn: Default::default(),
            };
            let src = k.source();
            super::super::assert_valid(&src);
            assert!(
                src.contains(&format!("src0: array<{}>", from.wgsl())),
                "{src}"
            );
            assert!(src.contains(&format!("dst: array<{}>", to.wgsl())), "{src}");
        }
        // f32 kernels are unchanged: no directive, no conversions.
        let k = ElementwiseKernel {
            rank: 1,
            elem: Elem::F32,
            out_elem: Elem::F32,
            inputs: vec![Access::Contiguous],
            output: Access::Contiguous,
            expr: Expr::input(0).unary(UnaryOp::Exp),
            vector: false,
            launch: Launch::DEFAULT,
            drawn: Default::default(),
        };
        let src = k.source();
        assert!(!src.contains("f16") && !src.contains("f32(src"), "{src}");
    }
}
