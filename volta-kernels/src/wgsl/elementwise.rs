//! Elementwise kernels: one thread per output element, strided reads and writes.
use super::{Expr, VOLTA_ERF};
use std::fmt::Write;

/// Threads per workgroup of every elementwise kernel (a 1-D group; the grid is 2-D
/// so that more than 65 535 groups can be launched).
pub const WORKGROUP_SIZE: u32 = 256;

/// The storage element type of a kernel's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `f32`: the type of every arithmetic kernel.
    F32,
    /// `u32`: index buffers; only plain copies and fills ([`Expr::is_plain`]).
    U32,
}

impl Elem {
    fn wgsl(self) -> &'static str {
        match self {
            Elem::F32 => "f32",
            Elem::U32 => "u32",
        }
    }
}

/// How a buffer is addressed at output position `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `offset + i`: row-major with the output's dims.
    Contiguous,
    /// `offset + Σ coordᵢ·strideᵢ` (a stride of 0 broadcasts).
    Strided,
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
    /// Element type of every buffer.
    pub elem: Elem,
    /// Addressing of each input; `inputs.len()` must cover [`Expr::inputs`].
    pub inputs: Vec<Access>,
    /// Addressing of the output.
    pub output: Access,
    /// The value at each position.
    pub expr: Expr,
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
            Access::Strided => 1 + self.rank,
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
    /// and the scalars as raw bits.
    ///
    /// Panics if a value does not fit in `u32` (buffers that large cannot be bound).
    pub fn params(
        &self,
        dims: &[usize],
        inputs: &[(usize, &[usize])],
        output: (usize, &[usize]),
        scalars: &[u32],
    ) -> Vec<u32> {
        assert_eq!(dims.len(), self.rank, "params: rank mismatch");
        assert_eq!(inputs.len(), self.inputs.len(), "params: input count");
        let u = |v: usize| u32::try_from(v).expect("GPU index exceeds u32");
        let mut p = vec![u(dims.iter().product())];
        p.extend(dims.iter().map(|&d| u(d)));
        let mut push = |access: Access, (offset, strides): (usize, &[usize])| {
            p.push(u(offset));
            if access == Access::Strided {
                assert_eq!(strides.len(), self.rank, "params: stride rank");
                p.extend(strides.iter().map(|&s| u(s)));
            }
        };
        for (&a, &view) in self.inputs.iter().zip(inputs) {
            push(a, view);
        }
        push(self.output, output);
        p.extend_from_slice(scalars);
        p
    }

    /// The WGSL source, entry point `main`.
    pub fn source(&self) -> String {
        assert!(self.rank <= 6, "elementwise kernels support rank ≤ 6");
        assert!(
            self.expr.inputs() <= self.inputs.len(),
            "the expression reads more inputs than the kernel binds"
        );
        assert!(
            self.elem == Elem::F32 || self.expr.is_plain(),
            "u32 kernels can only copy or fill"
        );
        let ty = self.elem.wgsl();
        let layout = self.param_layout();
        let mut s = String::new();
        let w = &mut s;
        if self.expr.uses_erf() {
            w.push_str(VOLTA_ERF);
        }
        writeln!(w, "@group(0) @binding(0) var<storage, read> p: array<u32>;").unwrap();
        for i in 0..self.inputs.len() {
            writeln!(
                w,
                "@group(0) @binding({}) var<storage, read> src{i}: array<{ty}>;",
                i + 1
            )
            .unwrap();
        }
        writeln!(
            w,
            "@group(0) @binding({}) var<storage, read_write> dst: array<{ty}>;",
            self.inputs.len() + 1
        )
        .unwrap();
        writeln!(
            w,
            "@compute @workgroup_size({WORKGROUP_SIZE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WORKGROUP_SIZE}u + li;
    if (i >= p[0]) {{ return; }}"
        )
        .unwrap();
        let strided = self.output == Access::Strided || self.inputs.contains(&Access::Strided);
        if strided && self.rank > 0 {
            // Coordinates of `i`, last axis fastest.
            writeln!(w, "    var rem = i;").unwrap();
            for a in (1..self.rank).rev() {
                writeln!(
                    w,
                    "    let c{a} = rem % p[{d}]; rem = rem / p[{d}];",
                    d = 1 + a
                )
                .unwrap();
            }
            writeln!(w, "    let c0 = rem;").unwrap();
        }
        let index = |access: Access, at: usize| match access {
            Access::Contiguous => format!("p[{at}] + i"),
            Access::Strided => {
                let mut e = format!("p[{at}]");
                for a in 0..self.rank {
                    write!(e, " + c{a} * p[{}]", at + 1 + a).unwrap();
                }
                e
            }
        };
        for (i, (&a, &at)) in self.inputs.iter().zip(&layout.inputs).enumerate() {
            writeln!(w, "    let x{i} = src{i}[{}];", index(a, at)).unwrap();
        }
        let mut next = 0;
        let scalar_at = layout.scalars;
        let elem = self.elem;
        let value = self
            .expr
            .lower(w, &mut next, &|i| format!("x{i}"), &|i| match elem {
                Elem::F32 => format!("bitcast<f32>(p[{}])", scalar_at + i),
                Elem::U32 => format!("p[{}]", scalar_at + i),
            });
        writeln!(
            w,
            "    dst[{}] = {value};\n}}",
            index(self.output, layout.output)
        )
        .unwrap();
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
            inputs: vec![Access::Strided, Access::Contiguous],
            output: Access::Contiguous,
            expr: Expr::input(0)
                .binary(BinaryOp::Mul, Expr::input(1))
                .unary(UnaryOp::Gelu),
        };
        let src = k.source();
        assert!(src.contains("fn volta_erf"));
        assert!(src.contains("let c1 = rem % p[2]"));
        assert!(src.contains("src0[p[3] + c0 * p[4] + c1 * p[5]]"));
        assert!(src.contains("src1[p[6] + i]"));
        let l = k.param_layout();
        assert_eq!((l.inputs.clone(), l.output, l.scalars), (vec![3, 6], 7, 8));
        let p = k.params(&[2, 3], &[(5, &[1, 2]), (0, &[3, 1])], (0, &[3, 1]), &[]);
        assert_eq!(p, vec![6, 2, 3, 5, 1, 2, 0, 0]);
    }
}
