//! Row kernels: each row along one axis is reduced to a value (sum, max, min) or
//! normalised in place of the row (softmax, log-softmax, layer/RMS normalisation).
//! The row's elements are an
//! elementwise expression of the inputs, so a pending producer (`exp(x − max)`,
//! `x·x`, `logits + bias`) is computed in the loads instead of being written to
//! memory first.
use super::Expr;
use super::elementwise::{Elem, enable_f16};
use super::expr::Printer;
use crate::ReduceOp;
use std::fmt::Write;

/// Threads per workgroup of every row-kernel variant.
pub const ROW_WORKGROUP: u32 = 256;

/// What a row kernel computes from each row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowOp {
    /// One value per row (keep-dim).
    Reduce(ReduceOp),
    /// `exp(x − max) / Σ exp(x − max)` over the row, written as a row.
    Softmax,
    /// `x − max − ln Σ exp(x − max)` over the row, written as a row.
    LogSoftmax,
    /// `center`: `(x − mean)/√(var + eps)` with the biased variance computed in a
    /// second pass (mean of squared deviations); else (RMS) `x/√(mean(x²) + eps)`.
    /// Written as a row; `eps` is the op's run-time scalar (see [`RowOp::scalars`]),
    /// so a new `eps` reuses the pipeline.
    Normalize {
        /// Subtract the mean (layer norm) or not (RMS norm).
        center: bool,
    },
    /// The gradient of [`Normalize`](RowOp::Normalize) with respect to its input,
    /// with the statistics recomputed from the row: the kernel's `expr` gives the
    /// input `x`, its [`grad`](RowKernel::grad) the output's gradient `g`; with
    /// `x̂ = (x − mean)·rstd`, writes `rstd·(g − mean(g) − x̂·mean(g·x̂))`
    /// (`center`) or `rstd·(g − x̂·mean(g·x̂))` (RMS). Same `eps` scalar.
    NormalizeGrad {
        /// As `Normalize`'s.
        center: bool,
    },
}

impl RowOp {
    /// Whether the output is a row per row (else a value per row).
    pub fn writes_rows(self) -> bool {
        !matches!(self, RowOp::Reduce(_))
    }

    /// How many run-time scalars the op itself reads (`eps` of `Normalize`). They
    /// come first in the parameter block's scalars, before the expression's.
    pub fn scalars(self) -> usize {
        match self {
            RowOp::Normalize { .. } | RowOp::NormalizeGrad { .. } => 1,
            _ => 0,
        }
    }
}

/// What a row kernel that writes rows also writes ([`RowKernel::keeps`]), each
/// to an output of its own laid out as the rows, as the element type given:
/// values that something else holds and that would otherwise take a kernel of
/// their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Kept {
    /// Beside an epilogue: the op's own rows (a norm's rows, which the backward
    /// pass keeps, while the kernel writes their affine for the products).
    pub value: Option<Elem>,
    /// The row's elements, the expression's values, from the first pass that
    /// loads them (the residual stream that a norm computes in its loads, which
    /// the next residual sum reads again).
    pub input: Option<Elem>,
}

impl Kept {
    /// How many outputs they take.
    pub fn outputs(self) -> usize {
        usize::from(self.value.is_some()) + usize::from(self.input.is_some())
    }
}

/// How the threads of a row kernel walk the axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowVariant {
    /// One thread per row, walking the axis: coalesced when the axis is not the
    /// innermost and there are many rows.
    Serial,
    /// Like `Serial` for a reduction, four rows per thread: rows that lie side by
    /// side (the features of a bias gradient, summed over the batch) are read
    /// as a `vec4` of every input per step, four times the bytes per load.
    /// Needs rows in fours along the innermost other dim, each input walking
    /// it contiguously (or not at all) from 16-byte aligned elements.
    SerialVec4,
    /// One workgroup per row: threads stride over the axis, then a shared-memory
    /// tree.
    Tree,
    /// Like `Tree`, four elements at a time: inputs (and a row output) that walk the
    /// axis contiguously move as `vec4`s from 16-byte aligned rows; inputs broadcast
    /// along it (stride 0) are read once per row.
    Vec4,
    /// Like `Vec4` for rows of at most `4 × 256 × n` elements: each thread keeps
    /// its `n` `vec4`s of every input in registers, so a row is read from memory
    /// once however many passes the op makes (softmax three, a norm two or three).
    Registers(u32),
    /// Like `Registers` with a row per subgroup (or part of one) instead of per
    /// workgroup: the kernel's `lanes` threads hold the row's vec4s, `n` each,
    /// and combine through shuffles alone (no shared memory, no barrier). Short
    /// rows (a transformer's features, an attention head's) then keep every
    /// thread busy: a workgroup of 256 threads per 384-element row leaves most
    /// of them idle, and a subgroup of 32 per 64-element row half of them.
    Lanes(u32),
}

impl RowVariant {
    /// The variant for a row of `len` elements that `Vec4` could walk: rows of up
    /// to 4096 elements are held in registers.
    pub fn vec4_for(len: usize) -> RowVariant {
        let per_thread = len.div_ceil(4 * ROW_WORKGROUP as usize);
        if per_thread <= 4 {
            RowVariant::Registers(per_thread.max(1) as u32)
        } else {
            RowVariant::Vec4
        }
    }
}

/// A row kernel: `op` over each row along an axis of `expr` evaluated at every
/// position, `expr` reading `inputs` (each through its own strides) and run-time
/// scalars. Its structure is its pipeline-cache key; sizes, strides and scalars
/// are parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowKernel {
    /// What each row becomes.
    pub op: RowOp,
    /// Rank of the tensor (1..=6).
    pub rank: usize,
    /// Per input: whether it is broadcast (stride 0) along the dim that the
    /// `vec4` variants walk four elements at a time: the axis, or for
    /// [`RowVariant::SerialVec4`] the innermost other dim. Such an input is read
    /// once per step instead of as a `vec4`.
    pub axis_broadcast: Vec<bool>,
    /// The row's elements, over `Input(i)` and `Scalar(j)`.
    pub expr: Expr,
    /// A second value per element over the same inputs and scalars, for the ops
    /// that read two ([`RowOp::NormalizeGrad`]'s gradient); `None` for the others.
    pub grad: Option<Expr>,
    /// How threads walk the axis.
    pub variant: RowVariant,
    /// Element type of the inputs (`F32` or `F16`; the kernel computes in `f32`).
    pub elem: Elem,
    /// Element type of the output (`F32` or `F16`).
    pub out_elem: Elem,
    /// An elementwise consumer of the op's value, computed in the same kernel
    /// (fusion across the reduction: RMSNorm's `x · rsqrt(mean(x²) + eps) · w` is
    /// one kernel): `Input(i)` reads input `i` at each element's position and
    /// `Input(inputs)` is the op's value there (the row's reduction, broadcast
    /// along the row, or the softmax/normalised element). Its scalars share the
    /// expression's numbering. With one, every op writes rows.
    pub epilogue: Option<Expr>,
    /// Outputs beside the rows, after them in the bindings ([`Kept`]).
    pub keeps: Kept,
    /// With an epilogue of a reduction: run it once per row on the reduced value
    /// and write one value per row (a consumer over the reduced dims, such as the
    /// bias add after split-K's sum of partial products). Its inputs are then read
    /// at the row's position (the host passes them with stride 0 along the axis).
    pub per_row: bool,
    /// Threads whose partial results combine through subgroup shuffles before
    /// meeting in shared memory (the adapter's subgroup size, at most 32: one
    /// barrier per reduction instead of a tree's nine), or 0 without subgroup
    /// operations. For [`RowVariant::Lanes`], the threads that share a row: a
    /// power of two up to the subgroup size, so that a subgroup may take
    /// several short rows.
    pub lanes: u32,
    /// The inputs drawn from the counter stream instead of loaded; their seeds
    /// among the expression's scalars.
    pub drawn: super::Draws,
}

/// What a pass over a row does per step with the lanes' values: each an
/// element's value and its gradient's (empty without a second expression).
type Each<'a> = dyn Fn(&mut String, &[(String, String)]) + 'a;

/// A view in a row kernel's parameters: element offset and strides (one per axis).
pub type RowView<'a> = (usize, &'a [usize]);

impl RowKernel {
    /// Whether the output is a row per row (else a value per row).
    pub fn writes_rows(&self) -> bool {
        self.op.writes_rows() || (self.epilogue.is_some() && !self.per_row)
    }

    /// Offset of view `i`'s parameters (the inputs, then a row output).
    fn view_at(&self, i: usize) -> usize {
        2 + self.rank + i * (self.rank + 2)
    }

    /// Offset of the first scalar in the parameter block.
    fn scalars_at(&self) -> usize {
        let views = self.axis_broadcast.len() + usize::from(self.writes_rows());
        self.view_at(views)
    }

    /// The parameter block: row count, axis length, dims (the axis set to 1), then
    /// per view (each input, then the output when it is a row per row) its offset,
    /// axis stride and strides, then the scalars' bits: the op's own
    /// ([`RowOp::scalars`]) first, then the expression's `Scalar(0)`, `Scalar(1)`, ….
    pub fn params(
        &self,
        dims: &[usize],
        axis: usize,
        views: &[RowView],
        scalars: &[u32],
    ) -> Vec<u32> {
        let u = |v: usize| u32::try_from(v).expect("a GPU tensor index exceeds u32");
        let rows: usize = (0..dims.len())
            .filter(|&a| a != axis)
            .map(|a| dims[a])
            .product();
        let mut p = vec![u(rows), u(dims[axis])];
        p.extend((0..dims.len()).map(|a| if a == axis { 1 } else { u(dims[a]) }));
        for (offset, strides) in views {
            p.push(u(*offset));
            p.push(u(strides[axis]));
            p.extend(strides.iter().map(|&s| u(s)));
        }
        p.extend_from_slice(scalars);
        p
    }

    /// Input `i` at `index` (a `vec4` index when `wide`) in the compute type:
    /// loaded, or drawn.
    fn load(&self, i: usize, index: &str, wide: bool) -> String {
        self.drawn
            .load(i, self.elem, index, wide)
            .unwrap_or_else(|| self.elem.load(&format!("src{i}[{index}]"), wide))
    }

    /// Workgroups to launch for `rows` rows.
    pub fn groups(&self, rows: usize) -> usize {
        match self.variant {
            RowVariant::Serial => rows.div_ceil(ROW_WORKGROUP as usize),
            RowVariant::SerialVec4 => rows.div_ceil(4 * ROW_WORKGROUP as usize),
            RowVariant::Tree | RowVariant::Vec4 | RowVariant::Registers(_) => rows,
            RowVariant::Lanes(_) => rows.div_ceil((ROW_WORKGROUP / self.lanes) as usize),
        }
    }

    /// The WGSL source (entry point `main`).
    pub fn source(&self) -> String {
        let rank = self.rank;
        assert!((1..=6).contains(&rank), "row kernels support rank 1..=6");
        let n_in = self.axis_broadcast.len();
        assert!(
            self.expr.inputs() <= n_in
                && self
                    .epilogue
                    .as_ref()
                    .is_none_or(|e| e.inputs() <= n_in + 1),
            "the expression reads more inputs than the kernel binds"
        );
        let vec4 = matches!(
            self.variant,
            RowVariant::Vec4 | RowVariant::Registers(_) | RowVariant::Lanes(_)
        );
        let per_lane = matches!(self.variant, RowVariant::Lanes(_));
        assert!(
            !per_lane || self.lanes > 1,
            "a row per subgroup needs subgroup operations"
        );
        let held = match self.variant {
            RowVariant::Registers(n) | RowVariant::Lanes(n) => n,
            _ => 0,
        };
        // Four rows per thread, side by side.
        let quads = self.variant == RowVariant::SerialVec4;
        let serial = quads || self.variant == RowVariant::Serial;
        let rows_out = self.writes_rows();
        assert!(
            !quads || (matches!(self.op, RowOp::Reduce(_)) && self.epilogue.is_none()),
            "four rows per thread is a plain reduction's variant"
        );
        assert!(
            (self.keeps.value.is_none() || self.epilogue.is_some())
                && (self.keeps.outputs() == 0 || self.op.writes_rows()),
            "a kept value is a row op's rows beside its epilogue's, or its row's elements"
        );
        let wide = |i: usize| (vec4 || quads) && !self.axis_broadcast[i];
        assert!(
            self.elem.is_float() && self.out_elem.is_float(),
            "row kernels compute in floats"
        );
        let (ty, out_ty) = (self.elem.wgsl(), self.out_elem.wgsl());
        let mut w = String::new();
        let kept = [self.keeps.value, self.keeps.input].map(|e| e.unwrap_or(self.out_elem));
        w.push_str(enable_f16(&[self.elem, self.out_elem, kept[0], kept[1]]));
        match &self.epilogue {
            // One preamble for both trees: a function they share is defined once.
            Some(e) => w.push_str(
                &self
                    .expr
                    .clone()
                    .binary(crate::BinaryOp::Add, e.clone())
                    .preamble(),
            ),
            None => w.push_str(&self.expr.preamble()),
        }
        w.push_str(&self.drawn.preamble());
        writeln!(w, "@group(0) @binding(0) var<storage, read> p: array<u32>;").unwrap();
        for i in 0..n_in {
            let t = if wide(i) {
                format!("vec4<{ty}>")
            } else {
                ty.to_string()
            };
            writeln!(
                w,
                "@group(0) @binding({}) var<storage, read> src{i}: array<{t}>;",
                i + 1
            )
            .unwrap();
        }
        let dst_ty = if (vec4 && rows_out) || quads {
            format!("vec4<{out_ty}>")
        } else {
            out_ty.to_string()
        };
        writeln!(
            w,
            "@group(0) @binding({}) var<storage, read_write> dst: array<{dst_ty}>;",
            n_in + 1
        )
        .unwrap();
        let kept_outputs = [
            ("kept_value", self.keeps.value),
            ("kept_input", self.keeps.input),
        ];
        for (at, (name, kept)) in kept_outputs
            .iter()
            .filter_map(|&(name, e)| e.map(|e| (name, e)))
            .enumerate()
        {
            let t = if vec4 && rows_out {
                format!("vec4<{}>", kept.wgsl())
            } else {
                kept.wgsl().to_string()
            };
            writeln!(
                w,
                "@group(0) @binding({}) var<storage, read_write> {name}: array<{t}>;",
                n_in + 2 + at
            )
            .unwrap();
        }
        if quads {
            w.push_str(
                "fn add4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return a + b; }
fn greater4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return select(a, b, b > a); }
fn less4(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> { return select(a, b, b < a); }
",
            );
        }
        let wg = ROW_WORKGROUP;
        writeln!(
            w,
            "fn add(a: f32, b: f32) -> f32 {{ return a + b; }}
// Infinity read from a variable: WGSL makes an infinite constant expression a
// shader-creation error (Tint, the browser's compiler, enforces it).
var<private> inf_bits: u32 = 0x7f800000u;
fn greater(a: f32, b: f32) -> f32 {{ return select(a, b, b > a); }}
fn less(a: f32, b: f32) -> f32 {{ return select(a, b, b < a); }}
var<workgroup> partial: array<f32, {wg}>;
@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{"
        )
        .unwrap();
        // `lt`: the thread's place among the row's threads (their stride).
        let stride = if per_lane { self.lanes } else { wg };
        if quads {
            writeln!(
                w,
                "    let o = ((wid.y * nwg.x + wid.x) * {wg}u + li) * 4u;"
            )
            .unwrap();
        } else if serial {
            writeln!(w, "    let o = (wid.y * nwg.x + wid.x) * {wg}u + li;").unwrap();
        } else if per_lane {
            writeln!(
                w,
                "    let o = (wid.y * nwg.x + wid.x) * {}u + li / {stride}u;",
                wg / stride
            )
            .unwrap();
        } else {
            writeln!(w, "    let o = wid.y * nwg.x + wid.x;").unwrap();
        }
        writeln!(w, "    let lt = li % {stride}u;").unwrap();
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
        let views = n_in + usize::from(rows_out);
        for i in 0..views {
            let at = self.view_at(i);
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

        // The row's element expression, printed once per pass (and lane); the op's
        // own scalars precede the expression's.
        let scalars_at = self.scalars_at();
        let expr_scalars_at = scalars_at + self.op.scalars();
        let param = |j: u16| format!("bitcast<f32>(p[{}])", expr_scalars_at + j as usize);
        self.drawn
            .keys(&mut w, &|j| format!("p[{}]", expr_scalars_at + j));
        let printer = Printer::new(&self.expr);
        let grad_printer = self.grad.as_ref().map(Printer::new);
        assert_eq!(
            grad_printer.is_some(),
            matches!(self.op, RowOp::NormalizeGrad { .. }),
            "a second element expression is NormalizeGrad's gradient, and it needs one"
        );
        // Both values of an element: `(x, g)`, `g` empty without a second expression.
        let lower = |w: &mut String, prefix: &str, input: &dyn Fn(u16) -> String| {
            let x = printer.print(w, "        ", prefix, input, &param);
            let g = match &grad_printer {
                Some(gp) => gp.print(w, "        ", &format!("{prefix}g"), input, &param),
                None => String::new(),
            };
            (x, g)
        };
        // Registers holding the row (`Registers`): the first pass fills them.
        let filled = std::cell::Cell::new(false);
        // Inputs that only an epilogue reads (a norm's weight) are not held: the
        // pass that writes the row loads them, and the registers go to occupancy.
        let hold = |i: usize| {
            held > 0
                && wide(i)
                && (self.expr.any_input(|j| j == i)
                    || self.grad.as_ref().is_some_and(|g| g.any_input(|j| j == i)))
        };
        for j in 0..held {
            for i in (0..n_in).filter(|&i| hold(i)) {
                writeln!(w, "    var r{i}_{j} = vec4<f32>();").unwrap();
            }
        }
        // The four lanes' values of a step's loads `x{i}{suffix}`: wide inputs'
        // components, the others' one value.
        let lanes_of = |w: &mut String, prefix: &str, suffix: &str| -> Vec<(String, String)> {
            ["x", "y", "z", "w"]
                .iter()
                .map(|lane| {
                    let input = |i: u16| {
                        let i = i as usize;
                        if wide(i) {
                            format!("x{i}{suffix}.{lane}")
                        } else {
                            format!("x{i}{suffix}")
                        }
                    };
                    lower(w, &format!("{prefix}{lane}_"), &input)
                })
                .collect()
        };
        // A reduction with a thread per row walks it four elements per step, so
        // that four loads are in flight (a split-K sum is 16 loads a thread).
        let unrolled = serial && !rows_out;
        // One pass over the row: loads, then `each(w, lane values)` per step (each
        // value with its gradient's, see `lower`).
        let pass = |w: &mut String, pass: &str, each: &Each| {
            if unrolled {
                writeln!(
                    w,
                    "    var k = 0u;\n    for (; live && k + 4u <= p[1]; k += 4u) {{"
                )
                .unwrap();
                // Input `i` at step `k` (an expression of `k`), a `vec4` of the
                // four rows' elements where it is wide.
                let load_at = |i: usize, k: &str| {
                    let at = format!("b{i} + {k} * s{i}");
                    if wide(i) {
                        self.load(i, &format!("({at}) / 4u"), true)
                    } else {
                        self.load(i, &at, false)
                    }
                };
                // The step's value from `x{i}{suffix}`: the four rows' values as
                // one `vec4` when the thread takes four.
                let step = |w: &mut String, prefix: &str, suffix: &str| {
                    if !quads {
                        return lower(w, prefix, &|i| format!("x{i}{suffix}"));
                    }
                    let lanes: Vec<String> = lanes_of(w, prefix, suffix)
                        .into_iter()
                        .map(|(x, _)| x)
                        .collect();
                    (format!("vec4<f32>({})", lanes.join(", ")), String::new())
                };
                for u in 0..4 {
                    for i in 0..n_in {
                        let load = load_at(i, &format!("(k + {u}u)"));
                        writeln!(w, "        let x{i}_{u} = {load};").unwrap();
                    }
                }
                let values: Vec<(String, String)> = (0..4)
                    .map(|u| step(w, &format!("{pass}u{u}_"), &format!("_{u}")))
                    .collect();
                each(w, &values);
                writeln!(w, "    }}\n    for (; live && k < p[1]; k += 1u) {{").unwrap();
                for i in 0..n_in {
                    let load = load_at(i, "k");
                    writeln!(w, "        let x{i} = {load};").unwrap();
                }
                let value = step(w, &format!("{pass}_"), "");
                each(w, &[value]);
                writeln!(w, "    }}").unwrap();
                return;
            }
            let steps = held.max(1);
            for j in 0..steps {
                if held > 0 {
                    writeln!(
                        w,
                        "    {{ let k = lt + {}u; if (live && k < p[1] / 4u) {{",
                        j * stride
                    )
                    .unwrap();
                } else {
                    let (start, end, step) = match self.variant {
                        RowVariant::Serial => ("0u", "p[1]", "1u".to_string()),
                        RowVariant::Tree => ("lt", "p[1]", format!("{wg}u")),
                        _ => ("lt", "p[1] / 4u", format!("{wg}u")),
                    };
                    writeln!(
                        w,
                        "    for (var k = {start}; live && k < {end}; k += {step}) {{"
                    )
                    .unwrap();
                }
                for i in 0..n_in {
                    let at = match (vec4, wide(i)) {
                        (false, _) => format!("b{i} + k * s{i}"),
                        (true, true) => format!("b{i} / 4u + k"),
                        (true, false) => format!("b{i}"),
                    };
                    let load = self.load(i, &at, wide(i));
                    if hold(i) {
                        if filled.get() {
                            writeln!(w, "        let x{i} = r{i}_{j};").unwrap();
                        } else {
                            writeln!(w, "        let x{i} = {load};\n        r{i}_{j} = x{i};")
                                .unwrap();
                        }
                    } else {
                        writeln!(w, "        let x{i} = {load};").unwrap();
                    }
                }
                let values: Vec<(String, String)> = if vec4 {
                    lanes_of(w, pass, "")
                } else {
                    vec![lower(w, &format!("{pass}_"), &|i| format!("x{i}"))]
                };
                if let (Some(kept), false) = (self.keeps.input, filled.get()) {
                    // The first pass loads each element once: it writes them.
                    let out = n_in;
                    if vec4 {
                        let xs: Vec<&str> = values.iter().map(|(x, _)| x.as_str()).collect();
                        let v = kept.store(&format!("vec4<f32>({})", xs.join(", ")), true);
                        writeln!(w, "        kept_input[b{out} / 4u + k] = {v};").unwrap();
                    } else {
                        let v = kept.store(&values[0].0, false);
                        writeln!(w, "        kept_input[b{out} + k * s{out}] = {v};").unwrap();
                    }
                }
                each(w, &values);
                if held > 0 {
                    writeln!(w, "    }} }}").unwrap();
                } else {
                    writeln!(w, "    }}").unwrap();
                }
            }
            filled.set(true);
        };
        // Folds `f(v)` over the row with `combine` into `name` (shared by the
        // workgroup unless serial).
        let fold = |w: &mut String,
                    name: &str,
                    identity: &str,
                    combine: &str,
                    f: &dyn Fn(&str, &str) -> String| {
            // Four rows per thread fold as `vec4`s.
            let (identity, combine) = if quads {
                (format!("vec4<f32>({identity})"), format!("{combine}4"))
            } else {
                (identity.to_string(), combine.to_string())
            };
            writeln!(w, "    var {name} = {identity};").unwrap();
            pass(w, name, &|w, v| {
                let terms: Vec<String> = v.iter().map(|(x, g)| f(x, g)).collect();
                let folded = match &terms[..] {
                    [t] => t.clone(),
                    [a, b, c, d] => {
                        format!("{combine}({combine}({a}, {b}), {combine}({c}, {d}))")
                    }
                    _ => unreachable!("one value per step, or one per lane"),
                };
                writeln!(w, "        {name} = {combine}({name}, {folded});").unwrap();
            });
            if per_lane {
                writeln!(
                    w,
                    "    for (var o = {half}u; o > 0u; o >>= 1u) {{
        {name} = {combine}({name}, subgroupShuffleXor({name}, o));
    }}",
                    half = self.lanes / 2,
                )
                .unwrap();
            } else if !serial && self.lanes > 1 {
                writeln!(
                    w,
                    "    for (var o = {half}u; o > 0u; o >>= 1u) {{
        {name} = {combine}({name}, subgroupShuffleXor({name}, o));
    }}
    if (li % {lanes}u == 0u) {{
        partial[li / {lanes}u] = {name};
    }}
    workgroupBarrier();
    {name} = partial[0];
    for (var i = 1u; i < {parts}u; i++) {{
        {name} = {combine}({name}, partial[i]);
    }}
    workgroupBarrier();",
                    half = self.lanes / 2,
                    lanes = self.lanes,
                    parts = wg / self.lanes
                )
                .unwrap();
            } else if !serial {
                writeln!(
                    w,
                    "    partial[li] = {name};
    workgroupBarrier();
    for (var h = {half}u; h > 0u; h >>= 1u) {{
        if (li < h) {{
            partial[li] = {combine}(partial[li], partial[li + h]);
        }}
        workgroupBarrier();
    }}
    {name} = partial[0];
    workgroupBarrier();",
                    half = wg / 2
                )
                .unwrap();
            }
        };
        const NEG_INF: &str = "-bitcast<f32>(inf_bits)";
        const POS_INF: &str = "bitcast<f32>(inf_bits)";
        // A last pass writing `value(v)` for each element `v` of the row, or the
        // epilogue of it.
        let out = n_in;
        // A reduction's value is the same along the row: the epilogue's parts
        // that read only it (and scalars) are computed once, before the pass.
        let (epilogue, hoisted) = match (&self.epilogue, self.op) {
            (Some(e), RowOp::Reduce(_)) => {
                let mut parts = Vec::new();
                let e = hoist(e, n_in, &mut parts);
                (Some(e), parts)
            }
            (e, _) => (e.clone(), Vec::new()),
        };
        let epilogue = epilogue.as_ref().map(Printer::new);
        let write_row = |w: &mut String, value: &dyn Fn(&str, &str) -> String| {
            pass(w, "y", &|w, v| {
                let lanes: Vec<String> = v
                    .iter()
                    .enumerate()
                    .map(|(l, (x, g))| {
                        let Some(e) = &epilogue else {
                            return value(x, g);
                        };
                        let lane = ["x", "y", "z", "w"][l];
                        writeln!(w, "        let v{lane} = {};", value(x, g)).unwrap();
                        let input = |i: u16| {
                            let i = i as usize;
                            if i == n_in {
                                format!("v{lane}")
                            } else if i > n_in {
                                format!("h{}", i - n_in - 1)
                            } else if wide(i) {
                                format!("x{i}.{lane}")
                            } else {
                                format!("x{i}")
                            }
                        };
                        e.print(w, "        ", &format!("e{lane}_"), &input, &param)
                    })
                    .collect();
                // The op's own values (`v{lane}`, named where there is an
                // epilogue), kept beside it.
                let values: Vec<String> = ["vx", "vy", "vz", "vw"][..lanes.len()]
                    .iter()
                    .map(|v| v.to_string())
                    .collect();
                if vec4 {
                    let row = format!("vec4<f32>({})", lanes.join(", "));
                    let row = self.out_elem.store(&row, true);
                    writeln!(w, "        dst[b{out} / 4u + k] = {row};").unwrap();
                    if let Some(kept) = self.keeps.value {
                        let v = kept.store(&format!("vec4<f32>({})", values.join(", ")), true);
                        writeln!(w, "        kept_value[b{out} / 4u + k] = {v};").unwrap();
                    }
                } else {
                    let y = self.out_elem.store(&lanes[0], false);
                    writeln!(w, "        dst[b{out} + k * s{out}] = {y};").unwrap();
                    if let Some(kept) = self.keeps.value {
                        let v = kept.store(&values[0], false);
                        writeln!(w, "        kept_value[b{out} + k * s{out}] = {v};").unwrap();
                    }
                }
            })
        };
        match self.op {
            RowOp::Reduce(op) => {
                let (identity, combine) = match op {
                    ReduceOp::Sum => ("0.0", "add"),
                    ReduceOp::Max => (NEG_INF, "greater"),
                    ReduceOp::Min => (POS_INF, "less"),
                };
                fold(&mut w, "acc", identity, combine, &|v, _| v.to_string());
                if let (true, Some(e)) = (self.per_row, &self.epilogue) {
                    // Inputs read at the row's start (stride 0 along the axis).
                    let first = if serial { "" } else { " && lt == 0u" };
                    writeln!(w, "    if (live{first}) {{").unwrap();
                    for i in (0..n_in).filter(|&i| e.any_input(|j| j == i)) {
                        let load = self.load(i, &format!("b{i}"), false);
                        writeln!(w, "        let x{i} = {load};").unwrap();
                    }
                    let input = |i: u16| {
                        if i as usize == n_in {
                            "acc".to_string()
                        } else {
                            format!("x{i}")
                        }
                    };
                    let v = Printer::new(e).print(&mut w, "        ", "e_", &input, &param);
                    let v = self.out_elem.store(&v, false);
                    writeln!(w, "        dst[o] = {v};\n    }}").unwrap();
                } else if self.epilogue.is_some() {
                    for (j, h) in hoisted.iter().enumerate() {
                        let acc = |_: u16| "acc".to_string();
                        let v =
                            Printer::new(h).print(&mut w, "    ", &format!("h{j}_"), &acc, &param);
                        writeln!(w, "    let h{j} = {v};").unwrap();
                    }
                    write_row(&mut w, &|_, _| "acc".to_string());
                } else {
                    let first = if serial { "" } else { " && lt == 0u" };
                    let acc = self.out_elem.store("acc", quads);
                    let at = if quads { "o / 4u" } else { "o" };
                    writeln!(w, "    if (live{first}) {{ dst[{at}] = {acc}; }}").unwrap();
                }
            }
            RowOp::Softmax | RowOp::LogSoftmax => {
                // Three passes over the row; the second and third re-read it from
                // cache (a row is at most a few tens of KiB).
                fold(&mut w, "m", NEG_INF, "greater", &|v, _| v.to_string());
                fold(&mut w, "z", "0.0", "add", &|v, _| format!("exp({v} - m)"));
                if self.op == RowOp::LogSoftmax {
                    writeln!(w, "    let lz = log(z);").unwrap();
                }
                write_row(&mut w, &|v, _| match self.op {
                    RowOp::Softmax => format!("exp({v} - m) / z"),
                    _ => format!("{v} - m - lz"),
                });
            }
            RowOp::Normalize { center } | RowOp::NormalizeGrad { center } => {
                // Two passes for the statistics (the mean, then the mean squared
                // deviation: no cancellation); for the gradient, its two row means
                // next; a last pass writes the row.
                writeln!(
                    w,
                    "    let eps = bitcast<f32>(p[{scalars_at}]);\n    let len = f32(p[1]);"
                )
                .unwrap();
                // An element's deviation: from the mean, or (RMS) the element.
                let dev = |v: &str| {
                    if center {
                        format!("({v} - mean)")
                    } else {
                        v.to_string()
                    }
                };
                if center {
                    fold(&mut w, "sum", "0.0", "add", &|v, _| v.to_string());
                    writeln!(w, "    let mean = sum / len;").unwrap();
                }
                fold(&mut w, "sq", "0.0", "add", &|v, _| {
                    format!("({} * {})", dev(v), dev(v))
                });
                writeln!(w, "    let rstd = 1.0 / sqrt(sq / len + eps);").unwrap();
                if self.op == (RowOp::Normalize { center }) {
                    write_row(&mut w, &|v, _| format!("{} * rstd", dev(v)));
                } else {
                    let mut gmean = "";
                    if center {
                        fold(&mut w, "gsum", "0.0", "add", &|_, g| g.to_string());
                        writeln!(w, "    let gmean = gsum / len;").unwrap();
                        gmean = " - gmean";
                    }
                    fold(&mut w, "gx", "0.0", "add", &|v, g| {
                        format!("({g} * {})", dev(v))
                    });
                    // mean(g·x̂) = rstd·mean(g·(x − mean)).
                    writeln!(w, "    let gxmean = gx / len * rstd;").unwrap();
                    write_row(&mut w, &|v, g| {
                        format!("rstd * ({g}{gmean} - {} * rstd * gxmean)", dev(v))
                    });
                }
            }
        }
        writeln!(w, "}}").unwrap();
        w
    }
}

/// `e` with each largest part that reads `Input(row)` and otherwise only scalars
/// and constants (RMSNorm's `1/√(Σ/n + eps)`) replaced by `Input(row + 1 + j)`,
/// the part pushed as `parts[j]` (equal parts once).
fn hoist(e: &Expr, row: usize, parts: &mut Vec<Expr>) -> Expr {
    if !matches!(e, Expr::Input(_) | Expr::Scalar(_) | Expr::Const(_))
        && e.any_input(|i| i == row)
        && !e.any_input(|i| i != row)
    {
        let j = parts.iter().position(|p| p == e).unwrap_or_else(|| {
            parts.push(e.clone());
            parts.len() - 1
        });
        return Expr::Input(row + 1 + j);
    }
    let h = |x: &Expr, parts: &mut Vec<Expr>| Box::new(hoist(x, row, parts));
    match e {
        Expr::Unary(op, x) => Expr::Unary(*op, h(x, parts)),
        Expr::Binary(op, a, b) => {
            let a = h(a, parts);
            Expr::Binary(*op, a, h(b, parts))
        }
        Expr::Select(c, a, b) => {
            let c = h(c, parts);
            let a = h(a, parts);
            Expr::Select(c, a, h(b, parts))
        }
        Expr::Call {
            kernel,
            partial,
            args,
        } => Expr::Call {
            kernel: *kernel,
            partial: *partial,
            args: args.iter().map(|a| hoist(a, row, parts)).collect(),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinaryOp, UnaryOp};

    /// Every way of walking a row, registers holding one `vec4` per thread and three.
    const VARIANTS: [RowVariant; 5] = [
        RowVariant::Serial,
        RowVariant::Tree,
        RowVariant::Vec4,
        RowVariant::Registers(1),
        RowVariant::Registers(3),
    ];

    fn kernel(op: RowOp, variant: RowVariant) -> RowKernel {
        // exp(x − m) along axis 1 of a 2-D x, m broadcast along the axis.
        RowKernel {
            op,
            rank: 2,
            axis_broadcast: vec![false, true],
            expr: Expr::input(0)
                .binary(BinaryOp::Sub, Expr::input(1))
                .unary(UnaryOp::Exp),
            grad: None,
            variant,
            elem: Elem::F32,
            out_elem: Elem::F32,
            epilogue: None,
            per_row: false,
            keeps: Kept::default(),
            lanes: 0,
            drawn: Default::default(),
        }
    }

    #[test]
    fn drawn_inputs_are_hashed_where_they_would_be_loaded() {
        // Input 0 drawn (seed in scalars 0 and 1), in every variant and type.
        for variant in VARIANTS.into_iter().chain([RowVariant::Lanes(2)]) {
            for elem in [Elem::F32, Elem::F16] {
                let k = RowKernel {
                    elem,
                    lanes: if matches!(variant, RowVariant::Lanes(_)) {
                        32
                    } else {
                        0
                    },
                    drawn: crate::wgsl::Draws(vec![(0, 0)]),
                    ..kernel(RowOp::Reduce(ReduceOp::Sum), variant)
                };
                let src = k.source();
                super::super::assert_valid(&src);
                assert!(!src.contains("src0["), "{variant:?}: {src}");
                assert!(src.contains("src1["), "{variant:?}: {src}");
                let at = k.scalars_at();
                assert!(src.contains(&format!("let k0 = stream_keys(p[{at}], p[{}]);", at + 1)));
                assert!(src.contains("volta_draw"), "{src}");
            }
        }
    }

    #[test]
    fn every_variant_validates() {
        for op in [
            RowOp::Reduce(ReduceOp::Sum),
            RowOp::Reduce(ReduceOp::Max),
            RowOp::Softmax,
            RowOp::LogSoftmax,
            RowOp::Normalize { center: true },
            RowOp::Normalize { center: false },
        ] {
            for variant in VARIANTS {
                super::super::assert_valid(&kernel(op, variant).source());
            }
        }
    }

    #[test]
    fn four_rows_per_thread_load_vec4s_and_fold_them() {
        // Input 1 broadcast along the rows (read once per step), input 0 wide;
        // every reduction, in f32 and f16, and with input 0 drawn.
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
            for (elem, drawn) in [(Elem::F32, false), (Elem::F16, false), (Elem::F32, true)] {
                let k = RowKernel {
                    elem,
                    out_elem: elem,
                    drawn: if drawn {
                        crate::wgsl::Draws(vec![(0, 0)])
                    } else {
                        Default::default()
                    },
                    ..kernel(RowOp::Reduce(op), RowVariant::SerialVec4)
                };
                let src = k.source();
                super::super::assert_valid(&src);
                assert!(src.contains("li) * 4u;"), "{src}");
                assert!(src.contains("src1[b1 + (k + 3u) * s1]"), "{src}");
                if drawn {
                    assert!(
                        src.contains("volta_draw4(((b0 + (k + 3u) * s0) / 4u) * 4u"),
                        "{src}"
                    );
                } else {
                    assert!(src.contains("src0[(b0 + (k + 3u) * s0) / 4u]"), "{src}");
                }
                assert!(src.contains("dst[o / 4u] = "), "{src}");
                assert_eq!(k.groups(4 * 256 + 4), 2);
            }
        }
    }

    #[test]
    fn the_norm_gradient_validates_with_a_second_expression() {
        // x = exp(x0 − x1) (x1 broadcast along the row), g = x0 · x1.
        for center in [true, false] {
            for variant in VARIANTS.into_iter().chain([RowVariant::Lanes(2)]) {
                let k = RowKernel {
                    grad: Some(Expr::input(0).binary(BinaryOp::Mul, Expr::input(1))),
                    lanes: if matches!(variant, RowVariant::Lanes(_)) {
                        32
                    } else {
                        0
                    },
                    ..kernel(RowOp::NormalizeGrad { center }, variant)
                };
                let src = k.source();
                super::super::assert_valid(&src);
                assert!(src.contains("let gxmean = gx / len * rstd;"), "{src}");
                assert_eq!(src.contains("gsum"), center, "{src}");
            }
        }
    }

    #[test]
    fn a_row_per_subgroup_validates_and_shuffles_alone() {
        for op in [
            RowOp::Reduce(ReduceOp::Sum),
            RowOp::Softmax,
            RowOp::Normalize { center: true },
        ] {
            // A row per subgroup of 32, and per half of one.
            for (n, lanes, groups) in [(1, 32, 38), (3, 32, 38), (1, 16, 19)] {
                let k = RowKernel {
                    lanes,
                    drawn: Default::default(),
                    ..kernel(op, RowVariant::Lanes(n))
                };
                let src = k.source();
                super::super::assert_valid(&src);
                assert!(src.contains(&format!("li / {lanes}u")), "{src}");
                assert!(
                    src.contains(&format!("o = {}u; o > 0u", lanes / 2)),
                    "{src}"
                );
                assert!(!src.contains("workgroupBarrier"), "{src}");
                assert_eq!(k.groups(300), groups);
            }
        }
    }

    #[test]
    fn producers_are_computed_in_the_loads() {
        let src = kernel(RowOp::Reduce(ReduceOp::Sum), RowVariant::Tree).source();
        assert!(src.contains("let x0 = src0[b0 + k * s0];"), "{src}");
        assert!(src.contains("let acc_2 = (x0 - x1);"), "{src}");
        assert!(src.contains("acc = add(acc, acc_3);"), "{src}");
        assert!(
            src.contains("let b1 = p[8] + c0 * p[10] + c1 * p[11];"),
            "{src}"
        );
        let src = kernel(RowOp::Reduce(ReduceOp::Sum), RowVariant::Vec4).source();
        assert!(src.contains("src0: array<vec4<f32>>"), "{src}");
        assert!(src.contains("src1: array<f32>"), "{src}");
        assert!(src.contains("dst: array<f32>"), "{src}");
        assert!(src.contains("let x0 = src0[b0 / 4u + k];"), "{src}");
        assert!(src.contains("let accw_2 = (x0.w - x1);"), "{src}");
        let src = kernel(RowOp::Reduce(ReduceOp::Sum), RowVariant::Serial).source();
        assert!(src.contains("if (live) { dst[o] = acc; }"), "{src}");
    }

    #[test]
    fn softmax_writes_rows() {
        let src = kernel(RowOp::Softmax, RowVariant::Vec4).source();
        assert!(src.contains("dst: array<vec4<f32>>"), "{src}");
        assert!(src.contains("z = add(z, add(add(exp("), "{src}");
        assert!(src.contains("dst[b2 / 4u + k] = vec4<f32>(exp("), "{src}");
        let src = kernel(RowOp::LogSoftmax, RowVariant::Serial).source();
        assert!(src.contains("let lz = log(z);"), "{src}");
        assert!(src.contains("dst[b2 + k * s2] = y_3 - m - lz;"), "{src}");
    }

    #[test]
    fn normalize_reads_eps_before_the_expression_scalars() {
        // Normalise rows of 2·x0 + s: eps is p[scalars_at], the expression's
        // Scalar(0) the next parameter.
        let k = |center, variant| RowKernel {
            op: RowOp::Normalize { center },
            rank: 2,
            axis_broadcast: vec![false],
            expr: Expr::input(0)
                .binary(BinaryOp::Mul, Expr::constant(2.0))
                .binary(BinaryOp::Add, Expr::scalar(0)),
            grad: None,
            variant,
            elem: Elem::F32,
            out_elem: Elem::F32,
            epilogue: None,
            per_row: false,
            keeps: Kept::default(),
            lanes: 0,
            drawn: Default::default(),
        };
        let layer = k(true, RowVariant::Tree);
        // One input and the output: 2 + 2 + 2·(2 + 2) = 12.
        assert_eq!(layer.scalars_at(), 12);
        let src = layer.source();
        super::super::assert_valid(&src);
        assert!(src.contains("let eps = bitcast<f32>(p[12]);"), "{src}");
        assert!(src.contains("bitcast<f32>(p[13])"), "{src}");
        assert!(src.contains("let mean = sum / len;"), "{src}");
        assert!(src.contains("sq = add(sq, (("), "{src}");
        assert!(
            src.contains("let rstd = 1.0 / sqrt(sq / len + eps);"),
            "{src}"
        );
        assert!(src.contains(" - mean) * rstd;"), "{src}");
        let p = layer.params(&[2, 3], 1, &[(0, &[3, 1]), (0, &[3, 1])], &[11, 22]);
        assert_eq!(&p[12..], &[11, 22]);
        for variant in VARIANTS {
            let rms = k(false, variant).source();
            super::super::assert_valid(&rms);
            assert!(!rms.contains("mean"), "{rms}");
            assert!(rms.contains("* rstd"), "{rms}");
        }
        let vec4 = k(false, RowVariant::Vec4).source();
        assert!(vec4.contains("dst[b1 / 4u + k] = vec4<f32>("), "{vec4}");
        // A softmax reads no scalar of its own: the expression's start at once.
        let soft = RowKernel {
            op: RowOp::Softmax,
            ..k(true, RowVariant::Tree)
        };
        assert!(soft.source().contains("bitcast<f32>(p[12])"));
    }

    #[test]
    fn an_epilogue_consumes_the_reduction_in_the_same_kernel() {
        // RMSNorm: Σ x0² per row, then x0 · 1/√(Σ/n + eps) · x1 written as a row
        // (x1 = the weight, read along the row); Input(2) is the sum.
        let sum = Expr::input(2)
            .binary(BinaryOp::Mul, Expr::scalar(0))
            .binary(BinaryOp::Add, Expr::scalar(1))
            .unary(UnaryOp::Sqrt)
            .unary(UnaryOp::Recip);
        let rms = |variant| RowKernel {
            op: RowOp::Reduce(ReduceOp::Sum),
            rank: 2,
            axis_broadcast: vec![false, false],
            expr: Expr::input(0).binary(BinaryOp::Mul, Expr::input(0)),
            grad: None,
            variant,
            elem: Elem::F32,
            out_elem: Elem::F32,
            epilogue: Some(
                Expr::input(0)
                    .binary(BinaryOp::Mul, sum.clone())
                    .binary(BinaryOp::Mul, Expr::input(1)),
            ),
            per_row: false,
            keeps: Kept::default(),
            lanes: 0,
            drawn: Default::default(),
        };
        for variant in VARIANTS {
            let k = rms(variant);
            assert!(k.writes_rows());
            let src = k.source();
            super::super::assert_valid(&src);
            assert!(src.contains("acc = add(acc, "), "{src}");
            assert!(!src.contains("dst[o]"), "{src}");
        }
        let src = rms(RowVariant::Vec4).source();
        assert!(src.contains("dst: array<vec4<f32>>"), "{src}");
        // 1/√(Σ/n + eps) once per row, before the pass that writes it.
        assert!(src.contains("let h0 = "), "{src}");
        assert_eq!(src.matches("sqrt(").count(), 1, "{src}");
        assert!(src.find("let h0 = ").unwrap() < src.find("dst[b2 / 4u + k]").unwrap());
        assert!(src.contains("dst[b2 / 4u + k] = vec4<f32>("), "{src}");
        // Two inputs and the output: scalars after 2 + 2 + 3·(2 + 2).
        assert_eq!(rms(RowVariant::Tree).scalars_at(), 16);
        // Rows in registers: x (which the sum reads) is held; the weight, read
        // by the epilogue only, is loaded where the row is written.
        let src = rms(RowVariant::Registers(2)).source();
        assert!(src.contains("var r0_1 = vec4<f32>();"), "{src}");
        assert!(!src.contains("var r1_"), "{src}");
        let write = src.rfind("let x0 = r0_1;").unwrap();
        assert!(
            src[write..].contains("let x1 = src1[b1 / 4u + k];"),
            "{src}"
        );
    }

    /// The subgroup lanes a kernel of `variant` needs: 32 for a row per
    /// subgroup, none otherwise.
    fn subgroup_lanes(variant: RowVariant) -> u32 {
        if matches!(variant, RowVariant::Lanes(_)) {
            32
        } else {
            0
        }
    }

    #[test]
    fn a_kept_value_is_written_beside_the_epilogue() {
        // LayerNorm's rows (kept for the backward pass, f32) and their affine
        // x̂ · x1 + x2 (for the products, f16) from one pass.
        let affine = Expr::input(3)
            .binary(BinaryOp::Mul, Expr::input(1))
            .binary(BinaryOp::Add, Expr::input(2));
        for variant in VARIANTS.into_iter().chain([RowVariant::Lanes(3)]) {
            let k = RowKernel {
                rank: 2,
                axis_broadcast: vec![false; 3],
                expr: Expr::input(0),
                out_elem: Elem::F16,
                epilogue: Some(affine.clone()),
                // The residual stream it normalises is kept too.
                keeps: Kept {
                    value: Some(Elem::F32),
                    input: Some(Elem::F32),
                },
                lanes: subgroup_lanes(variant),
                ..kernel(RowOp::Normalize { center: true }, variant)
            };
            let src = k.source();
            super::super::assert_valid(&src);
            let (dst, kept) = match variant {
                RowVariant::Serial | RowVariant::Tree => {
                    ("dst[b3 + k * s3] = f16(", "kept_value[b3 + k * s3] = vx;")
                }
                _ => (
                    "dst[b3 / 4u + k] = vec4<f16>(",
                    "kept_value[b3 / 4u + k] = vec4<f32>(vx, vy, vz, vw);",
                ),
            };
            assert!(src.contains(dst), "{variant:?}: {src}");
            assert!(src.contains(kept), "{variant:?}: {src}");
            assert!(
                src.contains("@binding(5) var<storage, read_write> kept_value")
                    && src.contains("@binding(6) var<storage, read_write> kept_input"),
                "{src}"
            );
        }
    }

    #[test]
    fn a_kept_input_is_written_by_the_first_pass() {
        // A norm of x0 + x1 (the residual stream, in f32) writes that sum once.
        for variant in VARIANTS.into_iter().chain([RowVariant::Lanes(3)]) {
            let k = RowKernel {
                rank: 2,
                axis_broadcast: vec![false; 2],
                expr: Expr::input(0).binary(BinaryOp::Add, Expr::input(1)),
                keeps: Kept {
                    value: None,
                    input: Some(Elem::F32),
                },
                lanes: subgroup_lanes(variant),
                ..kernel(RowOp::Normalize { center: true }, variant)
            };
            let src = k.source();
            super::super::assert_valid(&src);
            let kept = match variant {
                RowVariant::Serial | RowVariant::Tree => "kept_input[b2 + k * s2] = ",
                _ => "kept_input[b2 / 4u + k] = vec4<f32>(",
            };
            // Once per step of the first pass: one, or one per vec4 held.
            let steps = match variant {
                RowVariant::Registers(n) | RowVariant::Lanes(n) => n as usize,
                _ => 1,
            };
            assert_eq!(src.matches(kept).count(), steps, "{variant:?}: {src}");
            assert!(
                src.contains("@binding(4) var<storage, read_write> kept_input"),
                "{src}"
            );
        }
    }

    #[test]
    fn a_per_row_epilogue_writes_one_value_per_row() {
        // Split-K: Σ over the splits of partial products (input 0, along axis 0),
        // then relu(Σ + bias) with the bias (input 1) read once per output.
        for variant in [RowVariant::Serial, RowVariant::Tree] {
            let k = RowKernel {
                op: RowOp::Reduce(ReduceOp::Sum),
                rank: 3,
                axis_broadcast: vec![false, true],
                expr: Expr::input(0),
                grad: None,
                variant,
                elem: Elem::F32,
                out_elem: Elem::F32,
                epilogue: Some(
                    Expr::input(2)
                        .binary(BinaryOp::Add, Expr::input(1))
                        .unary(UnaryOp::Relu),
                ),
                per_row: true,
                keeps: Kept::default(),
                lanes: 0,
                drawn: Default::default(),
            };
            assert!(!k.writes_rows());
            let src = k.source();
            super::super::assert_valid(&src);
            assert!(src.contains("let x1 = src1[b1];"), "{src}");
            assert!(!src.contains("let x0 = src0[b0];"), "{src}");
            assert!(src.contains("dst[o] = "), "{src}");
            assert!(src.contains("(acc + x1)"), "{src}");
        }
    }

    #[test]
    fn subgroup_lanes_reduce_by_shuffles_before_shared_memory() {
        for op in [RowOp::Reduce(ReduceOp::Max), RowOp::Softmax] {
            let k = RowKernel {
                lanes: 32,
                drawn: Default::default(),
                ..kernel(op, RowVariant::Vec4)
            };
            let src = k.source();
            super::super::assert_valid(&src);
            assert!(src.contains("subgroupShuffleXor("), "{src}");
            assert!(src.contains("partial[li / 32u] = "), "{src}");
            assert!(src.contains("for (var i = 1u; i < 8u; i++)"), "{src}");
            assert!(!src.contains("partial[li] = "), "{src}");
            let serial = RowKernel {
                lanes: 32,
                drawn: Default::default(),
                ..kernel(op, RowVariant::Serial)
            };
            assert!(!serial.source().contains("subgroup"));
        }
    }

    #[test]
    fn params_hold_sizes_then_each_view_then_scalars() {
        let k = kernel(RowOp::Reduce(ReduceOp::Sum), RowVariant::Tree);
        // x: 3×5 row-major at offset 2; m: 3×1 expanded to 3×5 (axis stride 0).
        let p = k.params(&[3, 5], 1, &[(2, &[5, 1]), (0, &[1, 0])], &[7]);
        assert_eq!(p, vec![3, 5, 3, 1, 2, 1, 5, 1, 0, 0, 1, 0, 7]);
        assert_eq!(k.scalars_at(), 12);
        assert_eq!(kernel(RowOp::Softmax, RowVariant::Tree).scalars_at(), 16);
        assert_eq!(k.groups(3), 3);
        let serial = kernel(RowOp::Reduce(ReduceOp::Sum), RowVariant::Serial);
        assert_eq!(serial.groups(300), 2);
    }

    #[test]
    fn rows_held_in_registers_are_read_from_memory_once() {
        for (op, passes) in [
            (RowOp::Softmax, 3),
            (RowOp::Normalize { center: true }, 3),
            (RowOp::Normalize { center: false }, 2),
        ] {
            let src = kernel(op, RowVariant::Registers(2)).source();
            super::super::assert_valid(&src);
            // Two vec4s per thread: each loaded once, then read from registers
            // in every later pass.
            assert_eq!(src.matches("src0[b0 / 4u + k]").count(), 2, "{src}");
            assert_eq!(src.matches("let x0 = r0_1;").count(), passes - 1, "{src}");
            assert!(src.contains("let k = lt + 256u;"), "{src}");
        }
        assert_eq!(RowVariant::vec4_for(4096), RowVariant::Registers(4));
        assert_eq!(RowVariant::vec4_for(1000), RowVariant::Registers(1));
        assert_eq!(RowVariant::vec4_for(4100), RowVariant::Vec4);
    }

    #[test]
    fn f16_rows_compute_in_f32() {
        for op in [
            RowOp::Reduce(ReduceOp::Sum),
            RowOp::Reduce(ReduceOp::Min),
            RowOp::Softmax,
            RowOp::LogSoftmax,
            RowOp::Normalize { center: true },
            RowOp::Normalize { center: false },
        ] {
            for variant in VARIANTS {
                for out_elem in [Elem::F16, Elem::F32] {
                    let k = RowKernel {
                        elem: Elem::F16,
                        out_elem,
                        ..kernel(op, variant)
                    };
                    let src = k.source();
                    super::super::assert_valid(&src);
                    assert!(src.starts_with("enable f16;"), "{src}");
                    assert!(src.contains("var<workgroup> partial: array<f32, 256>;"));
                    let wide = matches!(variant, RowVariant::Vec4 | RowVariant::Registers(_));
                    let load = if wide {
                        "let x0 = vec4<f32>(src0[b0 / 4u + k]);"
                    } else {
                        "let x0 = f32(src0[b0 + k * s0]);"
                    };
                    assert!(src.contains(load), "{src}");
                    if out_elem == Elem::F16 {
                        let store = match (op, variant) {
                            (RowOp::Reduce(_), _) => "dst[o] = f16(acc);",
                            _ if wide => "] = vec4<f16>(vec4<f32>(",
                            _ => "] = f16(",
                        };
                        assert!(src.contains(store), "{src}");
                    }
                }
            }
        }
    }
}
