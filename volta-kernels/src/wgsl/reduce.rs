//! Reduction kernels: one axis reduced (keep-dim) over an elementwise expression of
//! the inputs, so a pending elementwise producer (`exp(x − max)`, `x·x`) is computed
//! inside the reduction's loads instead of being written to memory first.
use super::{Expr, VOLTA_ERF, kernel_modules};
use crate::ReduceOp;
use crate::ir::Graph;
use crate::ir::emit::{self, Lang, Names};
use std::fmt::Write;

/// Threads per workgroup of every reduction variant.
pub const REDUCE_WORKGROUP: u32 = 256;

/// How the threads of a reduction walk the axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceVariant {
    /// One thread per output, walking the axis: coalesced when the axis is not the
    /// innermost and there are many outputs.
    Serial,
    /// One workgroup per output: threads stride over the axis, then a shared-memory
    /// tree.
    Tree,
    /// Like `Tree`, four elements at a time: inputs that walk the axis contiguously
    /// are read as `vec4`s from 16-byte aligned rows; inputs broadcast along it
    /// (stride 0) are read once per output.
    Vec4,
}

/// A reduction kernel: `op` over the reduced axis of `expr` evaluated at every
/// position, `expr` reading `inputs` (each through its own strides) and run-time
/// scalars. Its structure is its pipeline-cache key; sizes, strides and scalars
/// are parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReduceKernel {
    /// The reduction.
    pub op: ReduceOp,
    /// Rank of the reduced tensor (≤ 6).
    pub rank: usize,
    /// Per input: whether it is broadcast along the reduced axis (stride 0). Only
    /// the `Vec4` variant reads such inputs differently.
    pub axis_broadcast: Vec<bool>,
    /// The value reduced, over `Input(i)` and `Scalar(j)`.
    pub expr: Expr,
    /// How threads walk the axis.
    pub variant: ReduceVariant,
}

/// One input of a reduction: its element offset and strides (rank of the kernel).
pub type ReduceView<'a> = (usize, &'a [usize]);

impl ReduceKernel {
    /// Offset of input `i`'s parameters in the parameter block.
    fn input_at(&self, i: usize) -> usize {
        2 + self.rank + i * (self.rank + 2)
    }

    /// Offset of the first scalar in the parameter block.
    fn scalars_at(&self) -> usize {
        self.input_at(self.axis_broadcast.len())
    }

    /// The parameter block: output count, axis length, dims (the axis set to 1),
    /// then per input its offset, axis stride and strides, then the scalars' bits.
    pub fn params(
        &self,
        dims: &[usize],
        axis: usize,
        inputs: &[ReduceView],
        scalars: &[u32],
    ) -> Vec<u32> {
        let u = |v: usize| u32::try_from(v).expect("a GPU tensor index exceeds u32");
        let outputs: usize = (0..dims.len())
            .filter(|&a| a != axis)
            .map(|a| dims[a])
            .product();
        let mut p = vec![u(outputs), u(dims[axis])];
        p.extend((0..dims.len()).map(|a| if a == axis { 1 } else { u(dims[a]) }));
        for (offset, strides) in inputs {
            p.push(u(*offset));
            p.push(u(strides[axis]));
            p.extend(strides.iter().map(|&s| u(s)));
        }
        p.extend_from_slice(scalars);
        p
    }

    /// Workgroups to launch for `outputs` outputs.
    pub fn groups(&self, outputs: usize) -> usize {
        match self.variant {
            ReduceVariant::Serial => outputs.div_ceil(REDUCE_WORKGROUP as usize),
            ReduceVariant::Tree | ReduceVariant::Vec4 => outputs,
        }
    }

    /// The WGSL source (entry point `main`).
    pub fn source(&self) -> String {
        let rank = self.rank;
        assert!((1..=6).contains(&rank), "reductions support rank 1..=6");
        let n_in = self.axis_broadcast.len();
        assert!(
            self.expr.inputs() <= n_in,
            "the expression reads more inputs than the kernel binds"
        );
        let vec4 = self.variant == ReduceVariant::Vec4;
        let wide = |i: usize| vec4 && !self.axis_broadcast[i];
        let mut s = String::new();
        let w = &mut s;
        if self.expr.uses_erf() {
            w.push_str(VOLTA_ERF);
        }
        w.push_str(&kernel_modules(&self.expr.kernels()));
        writeln!(w, "@group(0) @binding(0) var<storage, read> p: array<u32>;").unwrap();
        for i in 0..n_in {
            let t = if wide(i) { "vec4<f32>" } else { "f32" };
            writeln!(
                w,
                "@group(0) @binding({}) var<storage, read> src{i}: array<{t}>;",
                i + 1
            )
            .unwrap();
        }
        writeln!(
            w,
            "@group(0) @binding({}) var<storage, read_write> dst: array<f32>;",
            n_in + 1
        )
        .unwrap();
        let (identity, combine) = match self.op {
            ReduceOp::Sum => ("0.0", "a + b"),
            ReduceOp::Max => ("bitcast<f32>(0xff800000u)", "select(a, b, b > a)"),
            ReduceOp::Min => ("bitcast<f32>(0x7f800000u)", "select(a, b, b < a)"),
        };
        let wg = REDUCE_WORKGROUP;
        writeln!(
            w,
            "fn combine(a: f32, b: f32) -> f32 {{ return {combine}; }}
var<workgroup> partial: array<f32, {wg}>;
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{"
        )
        .unwrap();
        let serial = self.variant == ReduceVariant::Serial;
        if serial {
            writeln!(w, "    let o = (wid.y * nwg.x + wid.x) * {wg}u + li;").unwrap();
        } else {
            writeln!(w, "    let o = wid.y * nwg.x + wid.x;").unwrap();
        }
        // Every thread of a tree must reach the barriers, so excess ones idle
        // instead of returning.
        writeln!(w, "    let live = o < p[0];\n    var rem = o;").unwrap();
        for a in (0..rank).rev() {
            writeln!(
                w,
                "    let c{a} = rem % p[{d}];\n    rem = rem / p[{d}];",
                d = 2 + a
            )
            .unwrap();
        }
        for i in 0..n_in {
            let at = self.input_at(i);
            let terms: String = (0..rank)
                .map(|a| format!(" + c{a} * p[{}]", at + 2 + a))
                .collect();
            writeln!(
                w,
                "    let b{i} = p[{at}]{terms};\n    let s{i} = p[{}];",
                at + 1
            )
            .unwrap();
        }
        let scalars_at = self.scalars_at();
        let param = |j: u16| format!("bitcast<f32>(p[{}])", scalars_at + j as usize);
        let mut graph = Graph::exact();
        let mut callees = Vec::new();
        let root = self.expr.to_graph(&mut graph, &mut callees);
        let callee =
            |c: u16, partial: Option<u16>| callees[c as usize].0.wgsl_fn(partial.map(usize::from));
        let lower = |w: &mut String, prefix: &str, input: &dyn Fn(u16) -> String| {
            let names = Names {
                input,
                param: &param,
                callee: &callee,
            };
            let body = emit::body(&graph, &[root], Lang::Wgsl, prefix, &names);
            for line in body.code.lines() {
                writeln!(w, "        {line}").unwrap();
            }
            body.outputs[0].clone()
        };
        writeln!(w, "    var acc = {identity};").unwrap();
        match self.variant {
            ReduceVariant::Serial => {
                writeln!(w, "    for (var k = 0u; live && k < p[1]; k++) {{").unwrap();
            }
            ReduceVariant::Tree => {
                writeln!(w, "    for (var k = li; live && k < p[1]; k += {wg}u) {{").unwrap();
            }
            ReduceVariant::Vec4 => {
                writeln!(
                    w,
                    "    for (var k = li; live && k < p[1] / 4u; k += {wg}u) {{"
                )
                .unwrap();
            }
        }
        for i in 0..n_in {
            let at = match (vec4, wide(i)) {
                (false, _) => format!("b{i} + k * s{i}"),
                (true, true) => format!("b{i} / 4u + k"),
                (true, false) => format!("b{i}"),
            };
            writeln!(w, "        let x{i} = src{i}[{at}];").unwrap();
        }
        if vec4 {
            let lanes: Vec<String> = ["x", "y", "z", "w"]
                .iter()
                .map(|lane| {
                    let input = |i: u16| {
                        let i = i as usize;
                        if wide(i) {
                            format!("x{i}.{lane}")
                        } else {
                            format!("x{i}")
                        }
                    };
                    lower(w, &format!("t{lane}_"), &input)
                })
                .collect();
            writeln!(
                w,
                "        acc = combine(acc, combine(combine({}, {}), combine({}, {})));",
                lanes[0], lanes[1], lanes[2], lanes[3]
            )
            .unwrap();
        } else {
            let value = lower(w, "t_", &|i| format!("x{i}"));
            writeln!(w, "        acc = combine(acc, {value});").unwrap();
        }
        writeln!(w, "    }}").unwrap();
        if serial {
            writeln!(w, "    if (live) {{ dst[o] = acc; }}").unwrap();
        } else {
            writeln!(
                w,
                "    partial[li] = acc;
    workgroupBarrier();
    for (var h = {half}u; h > 0u; h >>= 1u) {{
        if (li < h) {{
            partial[li] = combine(partial[li], partial[li + h]);
        }}
        workgroupBarrier();
    }}
    if (live && li == 0u) {{ dst[o] = partial[0]; }}",
                half = wg / 2
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

    fn kernel(variant: ReduceVariant) -> ReduceKernel {
        // Σ exp(x − m) along axis 1 of a 2-D x, m broadcast along the axis.
        ReduceKernel {
            op: ReduceOp::Sum,
            rank: 2,
            axis_broadcast: vec![false, true],
            expr: Expr::input(0)
                .binary(BinaryOp::Sub, Expr::input(1))
                .unary(UnaryOp::Exp),
            variant,
        }
    }

    #[test]
    fn producers_are_computed_in_the_loads() {
        for variant in [
            ReduceVariant::Serial,
            ReduceVariant::Tree,
            ReduceVariant::Vec4,
        ] {
            super::super::assert_valid(&kernel(variant).source());
        }
        let src = kernel(ReduceVariant::Tree).source();
        assert!(src.contains("let x0 = src0[b0 + k * s0];"), "{src}");
        assert!(src.contains("let t_2 = (x0 - x1);"), "{src}");
        assert!(src.contains("acc = combine(acc, t_3);"), "{src}");
        assert!(
            src.contains("let b1 = p[8] + c0 * p[10] + c1 * p[11];"),
            "{src}"
        );
        let src = kernel(ReduceVariant::Vec4).source();
        assert!(src.contains("src0: array<vec4<f32>>"), "{src}");
        assert!(src.contains("src1: array<f32>"), "{src}");
        assert!(src.contains("let x0 = src0[b0 / 4u + k];"), "{src}");
        assert!(src.contains("let tw_2 = (x0.w - x1);"), "{src}");
        let src = kernel(ReduceVariant::Serial).source();
        assert!(src.contains("if (live) { dst[o] = acc; }"), "{src}");
    }

    #[test]
    fn params_hold_sizes_then_each_view_then_scalars() {
        let k = kernel(ReduceVariant::Tree);
        // x: 3×5 row-major at offset 2; m: 3×1 expanded to 3×5 (axis stride 0).
        let p = k.params(&[3, 5], 1, &[(2, &[5, 1]), (0, &[1, 0])], &[7]);
        assert_eq!(p, vec![3, 5, 3, 1, 2, 1, 5, 1, 0, 0, 1, 0, 7]);
        assert_eq!(k.groups(3), 3);
        assert_eq!(kernel(ReduceVariant::Serial).groups(300), 2);
    }
}
