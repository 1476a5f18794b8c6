//! Fused optimiser steps (Adam's kernel generated here, `shaders/sgd.wgsl`): each
//! parameter's step reads the parameter, its gradient and its state and writes all
//! of them anew; Adam steps a model's parameters many to a launch, writing the
//! `f16` copy of each weight that products in half precision read. Hyperparameters
//! travel in the parameter block, so changing the learning rate never compiles a
//! kernel.
use super::Operand;
use super::elementwise::{copy, map};
use super::slices::{self, Part};
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, grid, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Kernel, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::backend::optim::{AdamConstants, SgdConstants};
use crate::layout::Layout;
use crate::shape::Dims;
use std::sync::Arc;
use volta_kernels::wgsl::{Elem, Expr, with_elem};

const SGD: &str = include_str!("../../../../../shaders/sgd.wgsl");
const WG: usize = 256;

/// An input of a fused step: memory already written (the caller materialised any
/// pending value) and its layout.
pub(crate) type Input<'a> = (&'a Arc<Pooled>, &'a Layout);

/// An input of a step as the kernels read it: a buffer and the start of its
/// elements ([`flat`]).
type Flat = (Arc<Pooled>, u32);

/// The buffer and start offset through which the kernels read `x`: contiguous
/// views are read in place, others are copied first (an extra kernel; parameters,
/// gradients and optimiser state are contiguous in practice).
fn flat(rt: &Runtime, elem: Elem, x: Input) -> Flat {
    if x.1.is_contiguous() {
        (x.0.clone(), u(x.1.offset))
    } else {
        let packed = map(rt, elem, Expr::input(0), &[x], &[], &x.1.dims);
        (packed, 0)
    }
}

fn bits(x: f32) -> u32 {
    x.to_bits()
}

/// Launches `kern` over `n` elements of the flat inputs `ins` (buffer, start)
/// and the outputs `outs`, whose parameters `params(len, starts)` builds for a
/// run of `len` elements with the inputs at `starts`: in slices when an operand
/// is larger than one binding (each output slice starts on a window boundary,
/// so it is written in place).
fn launch_flat(
    rt: &Runtime,
    (kern, elem): (&Arc<Kernel>, Elem),
    n: usize,
    ins: &[&Flat],
    outs: &[&Arc<Pooled>],
    params: impl Fn(usize, &[u32]) -> Vec<u32>,
) {
    let flat = |start: u32| Layout {
        dims: Dims::new(&[n]),
        strides: Dims::new(&[1]),
        offset: start as usize,
    };
    let layouts: Vec<Layout> = ins
        .iter()
        .map(|(_, start)| flat(*start))
        .chain(outs.iter().map(|_| flat(0)))
        .collect();
    let buffers = ins.iter().map(|(b, _)| b).chain(outs.iter().copied());
    let views: Vec<Operand> = buffers.zip(&layouts).collect();
    let run = |ops: &[Operand], len: usize| {
        let starts: Vec<u32> = ops[..ins.len()].iter().map(|(_, l)| u(l.offset)).collect();
        let bound: Vec<&Arc<Pooled>> = ops.iter().map(|(b, _)| *b).collect();
        let groups = grid(rt, len.div_ceil(WG));
        launch(rt, kern, &params(len, &starts), &bound, groups);
    };
    if !slices::needed(rt, &views) {
        return run(&views, n);
    }
    let parts: Vec<Part> = views
        .iter()
        .enumerate()
        .map(|(i, &view)| Part {
            view,
            axis: Some(0),
            exact: i >= ins.len(),
            elem,
        })
        .collect();
    // Slices of whole alignment units keep every output window in place.
    let unit = (rt.gpu.limits.min_storage_buffer_offset_alignment.max(4) as usize) / elem.size();
    match slices::slice_len(rt, &parts, n) {
        Some(k) if k >= n || k >= unit => {
            let k = if k >= n { n } else { k - k % unit };
            slices::by_slices(rt, &parts, (n, k), copy, |ops, _, len| run(ops, len));
        }
        _ => rt.report(slices::too_large(rt, &kern.name, &views, elem.size())),
    }
}

/// Words of one parameter's block in [`adam_source`]'s parameter buffer.
const ADAM_BLOCK: usize = 19;

/// The most parameters one multi-tensor Adam launch steps (its shader has a
/// case, and seven bindings, for each).
const ADAM_PER_LAUNCH: usize = 32;

/// The Adam kernel for `count` parameters: PyTorch's formulas, one pass, one
/// thread per element, or per four side by side as `vec4`s with `vector` (where
/// every parameter's length and offsets are multiples of 4: a quarter of the
/// threads and of the index arithmetic per byte); each workgroup belongs to one
/// parameter. Lengths and offsets count the kernel's elements (`vec4`s with
/// `vector`).
///   decoupled: p ← p·(1 − lr·λ)        L2: g ← g + λ·p
///   m ← β₁·m + (1 − β₁)·g               v ← β₂·v + (1 − β₂)·g²
///   p ← p − lr · (m·c₁) / (√(v·c₂) + ε)   with c₁ = 1/(1 − β₁ᵗ), c₂ = 1/(1 − β₂ᵗ)
/// Parameter `i` reads p, g, m, v at bindings 1 + 4i.. and writes p', m', v' at
/// 1 + 4·count + 3i... On its first step m and v are bound to g and read as 0.
/// The `f32` parameters marked in `halves` also write p' rounded to `f16`, at
/// the bindings after those, in order: the copy that products in half
/// precision read (`Pooled::rounded`), which a kernel of its own would
/// otherwise write from p' before the next forward pass.
/// Every hyperparameter is a run-time parameter, so a new learning rate reuses
/// the pipeline.
///
/// p: [0] count, [1] workgroups in all, then a block of [`ADAM_BLOCK`] words per
/// parameter: [0] its first workgroup, [1] elements, [2] p offset, [3] g offset,
/// [4] m offset, [5] v offset, [6] 1 on the first step, [7] 1 to apply L2 decay,
/// [8] 1 to apply decoupled decay; then f32 bits: [9] lr, [10] β₁, [11] 1 − β₁,
/// [12] β₂, [13] 1 − β₂, [14] ε, [15] λ, [16] 1 − lr·λ, [17] c₁, [18] c₂.
fn adam_source(count: usize, elem: Elem, vector: bool, halves: &[bool]) -> String {
    // V: an element in memory; S: the same in f32, as the step computes it.
    let (v, s) = if vector {
        ("vec4<T>", "vec4<f32>")
    } else {
        ("T", "f32")
    };
    let mut w = format!(
        "alias T = f32;\nalias V = {v};\nalias S = {s};
@group(0) @binding(0) var<storage, read> p: array<u32>;\n"
    );
    let names = ["param", "grad", "exp_avg", "exp_avg_sq"];
    for i in 0..count {
        for (j, name) in names.iter().enumerate() {
            let at = 1 + 4 * i + j;
            w += &format!("@group(0) @binding({at}) var<storage, read> {name}{i}: array<V>;\n");
        }
    }
    for i in 0..count {
        for (j, name) in ["param_out", "exp_avg_out", "exp_avg_sq_out"]
            .iter()
            .enumerate()
        {
            let at = 1 + 4 * count + 3 * i + j;
            w += &format!(
                "@group(0) @binding({at}) var<storage, read_write> {name}{i}: array<V>;\n"
            );
        }
    }
    let half = if vector { "vec4<f16>" } else { "f16" };
    let with_half: Vec<usize> = (0..count).filter(|&i| halves[i]).collect();
    for (j, i) in with_half.iter().enumerate() {
        let at = 1 + 7 * count + j;
        w += &format!(
            "@group(0) @binding({at}) var<storage, read_write> param_half{i}: array<{half}>;\n"
        );
    }
    w += &format!(
        "
fn f(i: u32) -> f32 {{
    return bitcast<f32>(p[i]);
}}

struct Stepped {{
    p: S,
    m: S,
    v: S,
}}

// One element's (p', m', v') from p, g and the moments, with block `b`'s constants.
fn step(p0: S, g0: S, m0: S, v0: S, b: u32) -> Stepped {{
    var x = p0;
    var g = g0;
    if (p[b + 7u] != 0u) {{
        g = g + x * f(b + 15u);
    }}
    if (p[b + 8u] != 0u) {{
        x = x * f(b + 16u);
    }}
    let m = m0 * f(b + 10u) + g * f(b + 11u);
    let v = v0 * f(b + 12u) + (g * g) * f(b + 13u);
    let denom = sqrt(v * f(b + 18u)) + f(b + 14u);
    return Stepped(x - ((m * f(b + 17u)) / denom) * f(b + 9u), m, v);
}}

@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {{
    let w = wid.y * nwg.x + wid.x;
    if (w >= p[1]) {{
        return;
    }}
    // The parameter that workgroup w belongs to: the last whose first workgroup
    // is at most w (block 0 starts at 0), by bisection.
    var i = 0u;
    var end = p[0];
    while (end - i > 1u) {{
        let mid = (i + end) / 2u;
        if (p[2u + {ADAM_BLOCK}u * mid] <= w) {{
            i = mid;
        }} else {{
            end = mid;
        }}
    }}
    let b = 2u + {ADAM_BLOCK}u * i;
    let o = (w - p[b]) * {WG}u + li;
    if (o >= p[b + 1u]) {{
        return;
    }}
    let first = p[b + 6u] != 0u;
    switch i {{
"
    );
    for (i, &with_copy) in halves.iter().enumerate().take(count) {
        w += &format!(
            "        case {i}u: {{
            var m = S(0.0);
            var v = S(0.0);
            if (!first) {{
                m = S(exp_avg{i}[p[b + 4u] + o]);
                v = S(exp_avg_sq{i}[p[b + 5u] + o]);
            }}
            let r = step(S(param{i}[p[b + 2u] + o]), S(grad{i}[p[b + 3u] + o]), m, v, b);
            param_out{i}[o] = V(r.p);
            exp_avg_out{i}[o] = V(r.m);
            exp_avg_sq_out{i}[o] = V(r.v);
{half_store}        }}
",
            half_store = if with_copy {
                format!("            param_half{i}[o] = {half}(r.p);\n")
            } else {
                String::new()
            }
        );
    }
    w += "        default: {}\n    }\n}\n";
    if with_half.is_empty() {
        return with_elem(&w, elem).into_owned();
    }
    assert_eq!(elem, Elem::F32, "f16 copies are of f32 parameters");
    format!("enable f16;\n{}", with_elem(&w, elem))
}

/// The compiled [`adam_source`] for `count` parameters.
/// (`halves`: see there; at most [`ADAM_PER_LAUNCH`] parameters, so that the
/// marks fit the key's one word).
fn adam_kernel(
    rt: &Runtime,
    elem: Elem,
    count: usize,
    vector: bool,
    halves: &[bool],
) -> Arc<Kernel> {
    let marks = halves
        .iter()
        .enumerate()
        .fold(0u32, |m, (i, &h)| m | (u32::from(h) << i));
    kernel(
        rt,
        &Key::Named(
            "volta adam",
            vec![elem as u32, count as u32, u32::from(vector), marks],
        ),
        Bindings {
            reads: 4 * count,
            writes: 3 * count + marks.count_ones() as usize,
        },
        "main",
        || adam_source(count, elem, vector, halves),
    )
}

/// A parameter's block of [`adam_source`]'s parameters: `first_group` (its first
/// workgroup), `n` elements, the offsets `at` of p, g, m, v.
fn adam_block(
    first_group: usize,
    n: usize,
    at: [u32; 4],
    first: bool,
    k: &AdamConstants<f32>,
) -> [u32; ADAM_BLOCK] {
    [
        u(first_group),
        u(n),
        at[0],
        at[1],
        at[2],
        at[3],
        u32::from(first),
        u32::from(k.l2.is_some()),
        u32::from(k.decay.is_some()),
        bits(k.lr),
        bits(k.beta1),
        bits(k.one_minus_beta1),
        bits(k.beta2),
        bits(k.one_minus_beta2),
        bits(k.eps),
        bits(k.l2.unwrap_or(0.0)),
        bits(k.decay.unwrap_or(1.0)),
        bits(k.m_scale),
        bits(k.v_scale),
    ]
}

/// One parameter's Adam step: its inputs and constants.
pub(crate) struct AdamArgs<'a> {
    pub p: Input<'a>,
    pub g: Input<'a>,
    pub moments: Option<(Input<'a>, Input<'a>)>,
    pub k: AdamConstants<f32>,
}

/// The new `(p, m, v)` of an Adam step.
pub(crate) type AdamOuts = (Arc<Pooled>, Arc<Pooled>, Arc<Pooled>);

/// `(p', m', v')`, all of `elem` (`F32` or `F16`; the kernel computes in `f32`).
pub(crate) fn adam_step(rt: &Runtime, elem: Elem, a: &AdamArgs) -> AdamOuts {
    let n = a.p.1.numel();
    let bytes = n * elem.size();
    let outs = (alloc(rt, bytes), alloc(rt, bytes), alloc(rt, bytes));
    if n == 0 {
        return outs;
    }
    let (p, g, m, v) = flatten(rt, elem, a);
    let (first, k) = (a.moments.is_none(), a.k);
    let params = |len: usize, at: &[u32]| {
        let mut words = vec![1, u(len.div_ceil(WG))];
        words.extend(adam_block(0, len, [at[0], at[1], at[2], at[3]], first, &k));
        words
    };
    let kern = adam_kernel(rt, elem, 1, false, &[false]);
    let (ins, out) = ([&p, &g, &m, &v], [&outs.0, &outs.1, &outs.2]);
    launch_flat(rt, (&kern, elem), n, &ins, &out, params);
    outs
}

/// The flat `(p, g, m, v)` of a step; on the first step g stands in for the
/// moments, unread.
fn flatten(rt: &Runtime, elem: Elem, a: &AdamArgs) -> (Flat, Flat, Flat, Flat) {
    let (p, g) = (flat(rt, elem, a.p), flat(rt, elem, a.g));
    let (m, v) = match a.moments {
        Some((m, v)) => (flat(rt, elem, m), flat(rt, elem, v)),
        None => (g.clone(), g.clone()),
    };
    (p, g, m, v)
}

/// [`adam_step`] for each of `steps`, in order: parameters that fit one binding
/// each go up to [`ADAM_PER_LAUNCH`] to a launch (as many as the adapter's
/// bindings allow), so that a model's small parameters do not cost a launch
/// each; larger ones step alone, in slices.
pub(crate) fn adam_steps(rt: &Runtime, elem: Elem, steps: &[AdamArgs]) -> Vec<AdamOuts> {
    let bindings = rt.gpu.info.max_storage_buffers_per_kernel as usize;
    // Seven bindings a parameter, eight with an f16 copy.
    let per = 7 + usize::from(steps.iter().any(|a| rounded_by_products(elem, a)));
    let per_launch = (bindings.saturating_sub(1) / per).min(ADAM_PER_LAUNCH);
    // Outputs no larger than p fit when p does.
    let fits = |a: &AdamArgs| {
        let mut views = vec![a.p, a.g];
        views.extend(a.moments.into_iter().flat_map(|(m, v)| [m, v]));
        a.p.1.numel() > 0 && !slices::needed(rt, &views)
    };
    let mut outs: Vec<Option<AdamOuts>> = (0..steps.len()).map(|_| None).collect();
    let batched: Vec<usize> = (0..steps.len())
        .filter(|&i| per_launch >= 2 && fits(&steps[i]))
        .collect();
    for chunk in batched.chunks(per_launch.max(1)) {
        for (i, o) in chunk.iter().zip(adam_launch(rt, elem, steps, chunk)) {
            outs[*i] = Some(o);
        }
    }
    outs.into_iter()
        .zip(steps)
        .map(|(o, a)| o.unwrap_or_else(|| adam_step(rt, elem, a)))
        .collect()
}

/// Whether products in half precision read `a`'s parameter rounded to `f16`
/// (its memory has a kept copy): its step then writes the new copy too.
fn rounded_by_products(elem: Elem, a: &AdamArgs) -> bool {
    elem == Elem::F32 && a.p.0.has_rounded()
}

/// One launch of [`adam_source`] over the parameters `which` of `steps`.
fn adam_launch(rt: &Runtime, elem: Elem, steps: &[AdamArgs], which: &[usize]) -> Vec<AdamOuts> {
    let flats: Vec<[Flat; 4]> = which
        .iter()
        .map(|&i| {
            let (p, g, m, v) = flatten(rt, elem, &steps[i]);
            [p, g, m, v]
        })
        .collect();
    // Four elements a thread (vec4s: a quarter of the index arithmetic) where
    // every parameter of the launch lies in fours, as a model's usually do.
    let vector = which.iter().zip(&flats).all(|(&i, f)| {
        steps[i].p.1.numel().is_multiple_of(4) && f.iter().all(|(_, at)| at.is_multiple_of(4))
    });
    let per = if vector { 4 } else { 1 };
    let mut params = vec![u(which.len()), 0];
    let mut reads: Vec<Flat> = Vec::with_capacity(4 * which.len());
    let mut outs: Vec<AdamOuts> = Vec::with_capacity(which.len());
    let mut groups = 0;
    for (&i, flat) in which.iter().zip(flats) {
        let a = &steps[i];
        let n = a.p.1.numel() / per;
        let at = flat.each_ref().map(|(_, at)| at / per as u32);
        params.extend(adam_block(groups, n, at, a.moments.is_none(), &a.k));
        reads.extend(flat);
        let bytes = a.p.1.numel() * elem.size();
        outs.push((alloc(rt, bytes), alloc(rt, bytes), alloc(rt, bytes)));
        groups += n.div_ceil(WG);
    }
    params[1] = u(groups);
    let halves: Vec<bool> = which
        .iter()
        .map(|&i| rounded_by_products(elem, &steps[i]))
        .collect();
    let copies: Vec<(usize, Arc<Pooled>)> = which
        .iter()
        .enumerate()
        .filter(|&(j, _)| halves[j])
        .map(|(j, &i)| (j, alloc(rt, steps[i].p.1.numel() * Elem::F16.size())))
        .collect();
    let kern = adam_kernel(rt, elem, which.len(), vector, &halves);
    let buffers: Vec<&Arc<Pooled>> = reads
        .iter()
        .map(|(b, _)| b)
        .chain(outs.iter().flat_map(|(p, m, v)| [p, m, v]))
        .chain(copies.iter().map(|(_, c)| c))
        .collect();
    launch(rt, &kern, &params, &buffers, grid(rt, groups));
    for (j, copy) in copies {
        outs[j].0.keep_rounded(copy);
    }
    outs
}

/// `(p', b')` of a step with momentum, both of `elem`.
pub(crate) fn sgd_momentum_step(
    rt: &Runtime,
    elem: Elem,
    p: Input,
    g: Input,
    buf: Option<Input>,
    k: &SgdConstants<f32>,
) -> (Arc<Pooled>, Arc<Pooled>) {
    let momentum = k
        .momentum
        .expect("the fused SGD kernel is for steps with momentum");
    let n = p.1.numel();
    let outs = (alloc(rt, n * elem.size()), alloc(rt, n * elem.size()));
    if n == 0 {
        return outs;
    }
    let (p, g) = (flat(rt, elem, p), flat(rt, elem, g));
    // On the first step there is no buffer: g stands in for it, unread.
    let b = match buf {
        Some(b) => flat(rt, elem, b),
        None => g.clone(),
    };
    let first = u32::from(buf.is_none());
    let params = |len: usize, at: &[u32]| {
        vec![
            u(len),
            at[0],
            at[1],
            at[2],
            first,
            u32::from(k.l2.is_some()),
            u32::from(k.nesterov),
            bits(k.lr),
            bits(momentum),
            bits(k.l2.unwrap_or(0.0)),
        ]
    };
    let kern = kernel(
        rt,
        &Key::Named("volta sgd", vec![elem as u32]),
        Bindings {
            reads: 3,
            writes: 2,
        },
        "main",
        || with_elem(SGD, elem).into_owned(),
    );
    let (ins, out) = ([&p, &g, &b], [&outs.0, &outs.1]);
    launch_flat(rt, (&kern, elem), n, &ins, &out, params);
    outs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::kernels::attention_coop::assert_translates;

    /// A parameter whose memory has an `f16` copy (a product in half precision
    /// read it) gets the new copy from its Adam step, equal to the new values
    /// rounded; a parameter without one gets none. Runs where an adapter has
    /// `f16` (lavapipe in CI).
    #[test]
    fn adam_writes_the_f16_copy_that_products_read() {
        use crate::backend::gpu::runtime::transfer::{download, upload};
        let Ok(state) = crate::backend::gpu::device::init() else {
            return;
        };
        let rt = &state.rt;
        if !rt.gpu.info.f16 {
            return;
        }
        let n = 1000;
        let values = |k: f32| (0..n).map(|i| (i as f32 * k).sin()).collect::<Vec<f32>>();
        let (p, g) = (upload(rt, &values(0.37)), upload(rt, &values(0.11)));
        let (q, h) = (upload(rt, &values(0.23)), upload(rt, &values(0.71)));
        // The copy's contents do not matter: that it exists does.
        p.rounded(|| upload(rt, &[half::f16::ZERO; 4]));
        let layout = Layout::contiguous(&[n]);
        let k = crate::backend::optim::AdamStep {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.1,
            decoupled: true,
            bias_correction1: 0.1,
            bias_correction2: 0.001,
        }
        .constants::<f32>();
        let args = |p, g| AdamArgs {
            p: (p, &layout),
            g: (g, &layout),
            moments: None,
            k,
        };
        let outs = adam_steps(rt, Elem::F32, &[args(&p, &g), args(&q, &h)]);
        assert!(!outs[1].0.has_rounded(), "no copy where none was read");
        let stepped: Vec<f32> = download(rt, &outs[0].0, 0, n).unwrap();
        let copy = outs[0].0.rounded(|| panic!("the step kept a copy"));
        let copy: Vec<half::f16> = download(rt, &copy, 0, n).unwrap();
        for (i, (c, s)) in copy.iter().zip(&stepped).enumerate() {
            assert_eq!(*c, half::f16::from_f32(*s), "element {i}");
        }
    }

    /// The Adam kernel for one parameter and for a full launch, in both element
    /// types (the device tests run them on lavapipe's limits, four to a launch).
    #[test]
    fn the_adam_kernels_validate() {
        for count in [1, 2, ADAM_PER_LAUNCH] {
            for elem in [Elem::F32, Elem::F16] {
                for vector in [false, true] {
                    let none = vec![false; count];
                    let src = adam_source(count, elem, vector, &none);
                    assert_translates(&format!("adam for {count}, {elem:?}, {vector}"), &src);
                    if elem == Elem::F32 {
                        // Every other parameter with its f16 copy.
                        let halves: Vec<bool> = (0..count).map(|i| i % 2 == 0).collect();
                        let src = adam_source(count, elem, vector, &halves);
                        assert!(src.contains("param_half0[o] = "), "{src}");
                        assert_translates(&format!("adam with copies, {vector}"), &src);
                    }
                }
            }
        }
    }
}
