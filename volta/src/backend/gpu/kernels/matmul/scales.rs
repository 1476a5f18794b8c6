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
use crate::backend::gpu::runtime::pool::{Largest, Pooled};
use crate::layout::Layout;
use smallvec::smallvec;
use std::sync::Arc;

/// Loads each reducing thread makes at least (fewer workgroups for small
/// operands).
const PER_THREAD: usize = 4;

/// WGSL: the largest magnitudes of one or two views (`vec4.len()`) in one
/// launch (a product needs both operands', and each launch in a batch waits
/// on the one before). Workgroups `(g, i)` reduce view `i` (`x{i}`) with
/// parameters `p[8i..8i + 8] = [batch, rows, cols, offset, s_batch, s_rows,
/// s_cols, workgroups]` and write one partial maximum each, at `out{i}[g]`;
/// with `vec4[i]`, `cols` counts vectors along a contiguous axis (the offset
/// and the other strides are multiples of 4). Infinities and NaN pass through
/// (`split_exponent` then leaves the operand unscaled, and the product carries
/// them).
fn largest_source(vec4: &[bool]) -> String {
    let mut w = String::from("@group(0) @binding(0) var<storage, read> p: array<u32>;\n");
    let mut pick = String::new();
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
        pick += &format!("    if (i == {i}u) {{ m[li] = largest_{i}(g, li); }}\n");
    }
    let mut store = String::new();
    for i in 0..vec4.len() {
        w += &format!(
            "@group(0) @binding({}) var<storage, read_write> out{i}: array<f32>;\n",
            vec4.len() + 1 + i
        );
        store += &format!("        if (i == {i}u) {{ out{i}[g] = m[0]; }}\n");
    }
    format!(
        "{w}var<workgroup> m: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
    let i = wid.y;
    let g = wid.x;
    if (g >= p[i * 8u + 7u]) {{ return; }}
{pick}    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {{
        if (li < s) {{ m[li] = max(m[li], m[li + s]); }}
        workgroupBarrier();
    }}
    if (li == 0u) {{
{store}    }}
}}
"
    )
}

/// A view's axes, `(extent, stride)` each.
type Axes = Small<(usize, usize)>;

/// A view's elements as `(extent, stride)` axes: outermost first, axes of
/// one element dropped, and neighbours that step as one axis merged. Views of
/// the same elements get the same axes (a matrix and its transpose, K split
/// in slices or not), so they share a kept reduction; the contiguous axis, if
/// any, comes last, so that neighbouring threads read neighbouring elements.
fn canonical_axes(l: &Layout) -> Axes {
    let mut axes: Axes = (0..l.dims.len())
        .map(|i| (l.dims[i], l.strides[i]))
        .filter(|&(d, _)| d != 1)
        .collect();
    axes.sort_by_key(|&(_, s)| std::cmp::Reverse(s));
    let mut merged: Axes = smallvec![];
    for (d, s) in axes {
        match merged.last_mut() {
            Some(last) if last.1 == d * s => *last = (last.0 * d, s),
            _ => merged.push((d, s)),
        }
    }
    merged
}

/// The partial largest magnitudes of both operands of a split product: for
/// each, a buffer of partial maxima and how many it holds (the product's
/// `p[12]` and `p[13]`). Each is the one kept with the operand's memory where
/// an earlier product reduced the same elements ([`Pooled::kept_largest`]; not
/// inside a capture), else reduced now, both operands in one launch.
pub(crate) fn largest(
    rt: &Runtime,
    a: (&Arc<Pooled>, &Layout),
    b: (&Arc<Pooled>, &Layout),
) -> [Largest; 2] {
    // A capture records what runs: a reduction kept from before it would not
    // follow the memory's next contents on a replay.
    let keeps = !rt.recorder().is_capturing_here();
    let mut found: [Option<Largest>; 2] = [None, None];
    // (operand, key, axes) of each operand with nothing kept.
    let mut missing: Small<(usize, Vec<usize>, Axes)> = smallvec![];
    for (slot, (buf, l)) in [a, b].into_iter().enumerate() {
        let axes = canonical_axes(l);
        let mut key = vec![l.offset];
        key.extend(axes.iter().flat_map(|&(d, s)| [d, s]));
        found[slot] = buf.kept_largest(&key).filter(|_| keeps);
        if found[slot].is_none() {
            missing.push((slot, key, axes));
        }
    }
    if !missing.is_empty() {
        let mut vec4: Small<bool> = smallvec![];
        let mut p: Small<u32> = smallvec![];
        let mut outs = Vec::new();
        let mut groups = 0;
        for (slot, key, mut axes) in missing {
            assert!(
                axes.len() <= 3,
                "a product's operand spans at most three axes (a caller of `matmul` bug)"
            );
            while axes.len() < 3 {
                axes.insert(0, (1, 0));
            }
            let offset = key[0];
            let v = axes[2].1 == 1
                && axes[2].0.is_multiple_of(4)
                && offset.is_multiple_of(4)
                && axes[..2].iter().all(|&(_, s)| s.is_multiple_of(4));
            if v {
                axes[2].0 /= 4;
            }
            let n: usize = axes.iter().map(|a| a.0).product();
            let count = u(n.div_ceil(256 * PER_THREAD).clamp(1, SLOTS));
            p.extend([
                u(axes[0].0),
                u(axes[1].0),
                u(axes[2].0),
                u(offset),
                u(axes[0].1),
                u(axes[1].1),
                u(axes[2].1),
                count,
            ]);
            vec4.push(v);
            groups = groups.max(count);
            let out = (alloc(rt, SLOTS * 4), count);
            if keeps {
                [a, b][slot].0.keep_largest(key, out.clone());
            }
            found[slot] = Some(out.clone());
            outs.push((slot, out.0));
        }
        let kern = kernel(
            rt,
            &Key::Named(
                "volta matmul split scales",
                vec4.iter().map(|&v| u32::from(v)).collect(),
            ),
            Bindings {
                reads: vec4.len(),
                writes: vec4.len(),
            },
            "main",
            || largest_source(&vec4),
        );
        let mut bound: Small<&Arc<Pooled>> = outs.iter().map(|(slot, _)| [a, b][*slot].0).collect();
        bound.extend(outs.iter().map(|(_, out)| out));
        launch(rt, &kern, &p, &bound, [groups, u(vec4.len()), 1]);
    }
    found.map(|f| f.expect("reduced"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant of the reduction parses and validates.
    #[test]
    fn the_reductions_validate() {
        use wgpu::naga;
        let variants: [&[bool]; 4] = [&[false], &[true], &[false, true], &[true, false]];
        for vec4 in variants {
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
            // Fresh memory for the second operand: nothing kept for it.
            let other = upload(rt, &data);
            let kept = largest(rt, (&buf, &layout(view)), (&other, &layout(small)));
            let most = |(out, count): &Largest| {
                let partials: Vec<f32> = download(rt, out, 0, *count as usize).unwrap();
                partials.iter().fold(0f32, |m, &x| m.max(x))
            };
            assert_eq!(most(&kept[0]), want, "view {view:?}");
            let want_small = elements(small)
                .iter()
                .fold(0f32, |m, &e| m.max(data[e].abs()));
            assert_eq!(
                most(&kept[1]),
                want_small,
                "the second operand beside {view:?}"
            );
            data[outside] = 0.0;
        }
    }

    /// Views of the same elements share axes: a matrix and its transpose, a
    /// batch of one, K split in slices; other views do not.
    #[test]
    fn views_of_the_same_elements_share_axes() {
        let l = |dims: [usize; 3], strides: [usize; 3]| Layout {
            dims: crate::shape::Dims::new(&dims),
            strides: crate::shape::Dims::new(&strides),
            offset: 0,
        };
        let whole = canonical_axes(&l([1, 64, 96], [0, 96, 1]));
        assert_eq!(whole.as_slice(), &[(64 * 96, 1)]);
        for same in [
            l([1, 96, 64], [0, 1, 96]),
            l([4, 64, 24], [24, 96, 1]),
            l([4, 24, 64], [24, 1, 96]),
        ] {
            assert_eq!(canonical_axes(&same), whole, "{same:?}");
        }
        let columns = canonical_axes(&l([1, 64, 48], [0, 96, 1]));
        assert_eq!(columns.as_slice(), &[(64, 96), (48, 1)]);
    }

    /// A product's operands keep their reductions with their memory: a later
    /// product over the same elements (a transposed view) reuses them, a view
    /// of other elements does not, and a write in place forgets them. Runs on
    /// any adapter (lavapipe in CI).
    #[test]
    fn reductions_are_kept_until_the_memory_is_written() {
        use crate::backend::gpu::runtime::transfer::{download, upload};
        let Ok(state) = crate::backend::gpu::device::init() else {
            return;
        };
        let rt = &state.rt;
        let data: Vec<f32> = (0..64 * 96).map(|i| (i as f32 * 0.37).sin()).collect();
        let (x, w) = (upload(rt, &data), upload(rt, &data));
        let l = |dims: [usize; 3], strides: [usize; 3]| Layout {
            dims: crate::shape::Dims::new(&dims),
            strides: crate::shape::Dims::new(&strides),
            offset: 0,
        };
        let (x_view, w_view) = (l([1, 64, 96], [0, 96, 1]), l([1, 96, 64], [0, 64, 1]));
        let first = largest(rt, (&x, &x_view), (&w, &w_view));
        let transposed = l([1, 96, 64], [0, 1, 96]);
        let again = largest(rt, (&w, &w_view), (&x, &transposed));
        assert!(Arc::ptr_eq(&again[0].0, &first[1].0), "B's reduction, kept");
        assert!(
            Arc::ptr_eq(&again[1].0, &first[0].0),
            "A's, over its transpose"
        );
        let part = largest(rt, (&x, &l([1, 32, 96], [0, 96, 1])), (&w, &w_view));
        assert!(!Arc::ptr_eq(&part[0].0, &first[0].0), "other elements");
        let (out, count) = &part[0];
        let partials: Vec<f32> = download(rt, out, 0, *count as usize).unwrap();
        let want = data[..32 * 96].iter().fold(0f32, |m, &v| m.max(v.abs()));
        assert_eq!(partials.iter().fold(0f32, |m, &v| m.max(v)), want);
        x.forget_derived();
        let written = largest(rt, (&x, &x_view), (&w, &w_view));
        assert!(
            !Arc::ptr_eq(&written[0].0, &first[0].0),
            "forgotten on a write"
        );
        assert!(
            Arc::ptr_eq(&written[1].0, &first[1].0),
            "the other operand's kept"
        );
    }
}
