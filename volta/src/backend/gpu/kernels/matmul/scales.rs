//! The largest magnitudes of a split product's operands (`split`): a reduction
//! of each before the product, one partial maximum per workgroup, which the
//! product's workgroups reduce again as they start. (Not `kernels::rows`: a
//! row reduction leaves one maximum per row, thousands for an activation, too
//! many for every workgroup of the product to reduce again.)
use super::super::Small;
use super::split::SLOTS;
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::launch::{alloc, kernel, launch, u};
use crate::backend::gpu::runtime::pipelines::{Bindings, Key};
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use smallvec::smallvec;
use std::sync::Arc;

/// Loads each reducing thread makes at least (fewer workgroups for small
/// operands).
const PER_THREAD: usize = 4;

/// WGSL: the largest magnitudes of both operands' rank-3 views in one launch
/// (one launch, not two, as a product has one before it; each launch in a
/// batch waits on the one before). Workgroups `(g, i)` reduce operand `i`
/// (`x0`, `x1`) with parameters `p[8i..8i + 8] = [batch, rows, cols, offset,
/// s_batch, s_rows, s_cols, workgroups]` and write one partial maximum each, at
/// slot `i·SLOTS + g`; with `vec4[i]`, `cols` counts vectors along a contiguous
/// axis (the offset and the other strides are multiples of 4). Infinities and
/// NaN pass through (`split_exponent` then leaves the operand unscaled, and
/// the product carries them).
fn largest_source(vec4: [bool; 2]) -> String {
    let mut w = String::new();
    for (i, &v) in vec4.iter().enumerate() {
        let (ty, load, best) = if v {
            (
                "vec4<f32>",
                format!("abs(x{i}[(q[3] + z * q[4] + r * q[5]) / 4u + c])"),
                "max(max(best.x, best.y), max(best.z, best.w))",
            )
        } else {
            (
                "f32",
                format!("abs(x{i}[q[3] + z * q[4] + r * q[5] + c * q[6]])"),
                "best",
            )
        };
        w += &format!(
            "@group(0) @binding({b}) var<storage, read> x{i}: array<{ty}>;
fn largest_{i}(g: u32, li: u32) -> f32 {{
    var q: array<u32, 8>;
    for (var j = 0u; j < 8u; j++) {{ q[j] = p[{i}u * 8u + j]; }}
    let rows = q[1]; let cols = q[2];
    let n = q[0] * rows * cols;
    var best = {ty}();
    for (var e = g * 256u + li; e < n; e += q[7] * 256u) {{
        let c = e % cols; let rc = e / cols; let r = rc % rows; let z = rc / rows;
        best = max(best, {load});
    }}
    return {best};
}}
",
            b = i + 1
        );
    }
    format!(
        "@group(0) @binding(0) var<storage, read> p: array<u32>;
{w}@group(0) @binding(3) var<storage, read_write> out: array<f32>;
var<workgroup> m: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
    let i = wid.y;
    let g = wid.x;
    if (g >= p[i * 8u + 7u]) {{ return; }}
    if (i == 0u) {{ m[li] = largest_0(g, li); }} else {{ m[li] = largest_1(g, li); }}
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {{
        if (li < s) {{ m[li] = max(m[li], m[li + s]); }}
        workgroupBarrier();
    }}
    if (li == 0u) {{ out[i * {SLOTS}u + g] = m[0]; }}
}}
"
    )
}

/// Launches the reduction of both operands' largest magnitudes; returns the
/// buffer of partial maxima and how many each operand has (the product's
/// `p[12]` and `p[13]`).
pub(crate) fn largest(
    rt: &Runtime,
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
) -> (Arc<Pooled>, [u32; 2]) {
    let out = alloc(rt, 2 * SLOTS * 4);
    let mut counts = [0; 2];
    let mut vec4 = [false; 2];
    let mut p = [0; 16];
    for (slot, (_, l)) in [a, b].into_iter().enumerate() {
        // The view's axes, outermost first, its contiguous one last where it
        // has one, so that neighbouring threads read neighbouring elements (a
        // maximum ignores order).
        let mut axes: Small<(usize, usize)> = smallvec![];
        axes.extend((0..3).map(|i| (l.dims[i], l.strides[i])));
        axes.sort_by_key(|&(d, s)| match (d, s) {
            (1, _) => 0,
            (_, 1) => 2,
            _ => 1,
        });
        vec4[slot] = axes[2].1 == 1
            && axes[2].0.is_multiple_of(4)
            && l.offset.is_multiple_of(4)
            && axes[..2]
                .iter()
                .all(|&(d, s)| d == 1 || s.is_multiple_of(4));
        if vec4[slot] {
            axes[2].0 /= 4;
        }
        let n: usize = axes.iter().map(|a| a.0).product();
        let groups = n.div_ceil(256 * PER_THREAD).clamp(1, SLOTS);
        p[slot * 8..slot * 8 + 8].copy_from_slice(&[
            u(axes[0].0),
            u(axes[1].0),
            u(axes[2].0),
            u(l.offset),
            u(axes[0].1),
            u(axes[1].1),
            u(axes[2].1),
            u(groups),
        ]);
        counts[slot] = u(groups);
    }
    let kern = kernel(
        rt,
        &Key::Named(
            "volta matmul split scales",
            vec![u32::from(vec4[0]), u32::from(vec4[1])],
        ),
        Bindings {
            reads: 2,
            writes: 1,
        },
        "main",
        || largest_source(vec4),
    );
    let groups = counts[0].max(counts[1]);
    launch(rt, &kern, &p, &[a.0, b.0, &out], [groups, 2, 1]);
    (out, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both reductions parse and validate (lavapipe has no tensor cores, so no
    /// test there runs them; the device's test run does).
    #[test]
    fn both_reductions_validate() {
        use wgpu::naga;
        for vec4 in [[false, true], [true, false]] {
            let src = largest_source(vec4);
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{}\n{src}", e.emit_to_string(&src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}\n{src}", e.emit_to_string(&src)));
        }
    }

    /// The reductions find each view's largest magnitude, and only the view's:
    /// contiguous and transposed views, batches, offsets, views that load as
    /// vectors and views that do not, and operands large enough for many
    /// workgroups. Runs on any adapter (lavapipe in CI).
    #[test]
    fn the_reductions_find_each_views_largest_magnitude() {
        use crate::backend::gpu::runtime::transfer::{download, upload};
        let Ok(state) = crate::backend::gpu::device::init() else {
            return;
        };
        let rt = &state.rt;
        let len = 1_300_000;
        let mut data: Vec<f32> = (0..len).map(|i| ((i as f32) * 0.37).sin()).collect();
        // (dims, strides, offset) of rank-3 views into `data`.
        let views: [([usize; 3], [usize; 3], usize); 6] = [
            ([1, 37, 64], [0, 64, 1], 0),
            ([2, 24, 20], [600, 1, 24], 8),
            ([1, 13, 7], [0, 7, 1], 3),
            ([3, 5, 8], [0, 8, 1], 12),
            ([1, 1000, 1200], [0, 1200, 1], 4),
            ([1, 1200, 1000], [0, 1, 1200], 40),
        ];
        let elements = |(dims, strides, offset): ([usize; 3], [usize; 3], usize)| {
            let mut at = Vec::new();
            for z in 0..dims[0] {
                for r in 0..dims[1] {
                    for c in 0..dims[2] {
                        at.push(offset + z * strides[0] + r * strides[1] + c * strides[2]);
                    }
                }
            }
            at
        };
        for (i, &view) in views.iter().enumerate() {
            let inside = elements(view);
            // A large magnitude inside the view, a larger one just outside it.
            data[inside[inside.len() * 2 / 3]] = -40.0 - i as f32;
            let outside = (0..len).find(|e| !inside.contains(e)).unwrap_or(len - 1);
            data[outside] = 1e6;
            let want = inside.iter().fold(0f32, |m, &e| m.max(data[e].abs()));
            let buf = upload(rt, &data);
            let layout = |(dims, strides, offset): ([usize; 3], [usize; 3], usize)| Layout {
                dims: crate::shape::Dims::new(&dims),
                strides: crate::shape::Dims::new(&strides),
                offset,
            };
            let small = ([1, 2, 4], [0, 4, 1], 16);
            let (out, counts) = largest(rt, (&buf, &layout(view)), (&buf, &layout(small)));
            let partials: Vec<f32> = download(rt, &out, 0, 2 * SLOTS).unwrap();
            let found = partials[..counts[0] as usize]
                .iter()
                .fold(0f32, |m, &x| m.max(x));
            assert_eq!(found, want, "view {view:?}");
            let want_small = elements(small)
                .iter()
                .fold(0f32, |m, &e| m.max(data[e].abs()));
            let found_small = partials[SLOTS..SLOTS + counts[1] as usize]
                .iter()
                .fold(0f32, |m, &x| m.max(x));
            assert_eq!(
                found_small, want_small,
                "the second operand beside {view:?}"
            );
            data[outside] = 0.0;
        }
    }
}
