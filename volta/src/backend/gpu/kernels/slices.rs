//! Tensors larger than one binding: an adapter binds at most
//! `max_storage_buffer_binding_size` bytes of a buffer to a kernel (128 MiB on
//! lavapipe, 2 GiB on NVIDIA), while buffers may be larger. An op over such tensors
//! runs in slices along an axis where the work is independent (the rows of an
//! elementwise op or of a reduction, the rows of a matmul), each slice binding a
//! window of every operand that holds what the slice reads or writes.
//!
//! This helper knows no kernel: a kernel family calls [`by_slices`] with a
//! closure that launches one slice, and passes its way of copying between
//! layouts for outputs that must be written from a window's start.
use super::Operand;
use crate::backend::gpu::runtime::Runtime;
use crate::backend::gpu::runtime::error::GpuError;
use crate::backend::gpu::runtime::launch::alloc;
use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use std::sync::Arc;
use volta_kernels::wgsl::Elem;

/// Copies `src` into the view `dst` (same dims), both holding `elem`.
pub(crate) type Copy = fn(&Runtime, Elem, Operand, Operand);

/// One operand of a split op.
#[derive(Clone, Copy)]
pub(crate) struct Part<'a> {
    /// The buffer and its view, with the op's full dims.
    pub view: Operand<'a>,
    /// The axis of this view that is sliced; `None`: every slice reads it whole.
    pub axis: Option<usize>,
    /// The kernel writes it from its binding's start (an output without an offset
    /// parameter): a slice that does not start on a window boundary is written to
    /// a scratch buffer, then copied into place.
    pub exact: bool,
    /// Its element type.
    pub elem: Elem,
}

/// Whether any of `views` is larger than one binding.
pub(crate) fn needed(rt: &Runtime, views: &[Operand]) -> bool {
    let limit = rt.gpu.limits.max_storage_buffer_binding_size;
    views.iter().any(|(b, _)| b.bound_size() > limit)
}

/// Elements a view spans: from its offset to its last element, inclusive.
fn span(l: &Layout) -> usize {
    if l.dims.contains(&0) {
        return 0;
    }
    1 + l
        .dims
        .iter()
        .zip(l.strides.iter())
        .map(|(&d, &s)| (d - 1) * s)
        .sum::<usize>()
}

/// `l` narrowed to `[start, start + len)` along `axis`.
pub(crate) fn narrow(l: &Layout, axis: usize, start: usize, len: usize) -> Layout {
    let mut out = *l;
    out.offset += start * l.strides[axis];
    out.dims[axis] = len;
    out
}

/// The most slices of `len` along the parts' axes one launch can take with every
/// window within the binding limit, or `None` when not even one fits.
pub(crate) fn slice_len(rt: &Runtime, parts: &[Part], len: usize) -> Option<usize> {
    let limit = rt.gpu.limits.max_storage_buffer_binding_size as usize;
    let align = rt.gpu.limits.min_storage_buffer_offset_alignment.max(4) as usize;
    let mut most = len.max(1);
    // Drawn inputs have no memory to bind: any slice of them fits.
    for p in parts.iter().filter(|p| p.view.0.draws().is_none()) {
        let l = p.view.1;
        let size = p.elem.size();
        let cap = limit / size;
        // A window may start up to one alignment unit before the slice.
        let slack = align / size;
        match p.axis {
            None => {
                if span(l) + slack > cap {
                    return None;
                }
            }
            Some(a) => {
                let one = span(&narrow(l, a, 0, 1.min(l.dims[a])));
                if one + slack > cap {
                    return None;
                }
                if let Some(k) = (cap - one - slack).checked_div(l.strides[a]) {
                    most = most.min(k + 1);
                }
            }
        }
    }
    Some(most)
}

/// Runs `f` once per slice of `len` along the parts' axes, `per` at a time, with
/// every part bound as a window (its view rebased on the window) and the slice's
/// start and length. An exact part whose slice does not start on a window
/// boundary is written to a scratch buffer, which `copy` then puts in place.
pub(crate) fn by_slices(
    rt: &Runtime,
    parts: &[Part],
    (len, per): (usize, usize),
    copy: Copy,
    mut f: impl FnMut(&[Operand], usize, usize),
) {
    let align = rt.gpu.limits.min_storage_buffer_offset_alignment.max(4) as usize;
    let mut start = 0;
    while start < len {
        let n = per.min(len - start);
        // Each part's window and view, and for a misaligned exact part the scratch
        // buffer it is written to.
        let mut scratch: Vec<Option<Arc<Pooled>>> = Vec::new();
        let views: Vec<(Arc<Pooled>, Layout)> = parts
            .iter()
            .map(|p| {
                let l = match p.axis {
                    Some(a) if p.view.1.dims[a] > 1 => narrow(p.view.1, a, start, n),
                    _ => *p.view.1,
                };
                if p.view.0.draws().is_some() {
                    // Drawn at the slice's own addresses, through no window.
                    scratch.push(None);
                    return (p.view.0.clone(), l);
                }
                let size = p.elem.size();
                let unit = align / size;
                let lo = l.offset - l.offset % unit;
                let bytes = ((l.offset + span(&l) - lo) * size).next_multiple_of(4);
                let window = Pooled::window(p.view.0, (lo * size) as u64, bytes.max(4) as u64);
                let rebased = Layout {
                    offset: l.offset - lo,
                    ..l
                };
                if p.exact && (lo != l.offset || !l.is_contiguous()) {
                    scratch.push(Some(alloc(rt, span(&l) * size)));
                } else {
                    scratch.push(None);
                }
                (window, rebased)
            })
            .collect();
        let contiguous: Vec<Layout> = views
            .iter()
            .map(|(_, l)| Layout::contiguous(&l.dims))
            .collect();
        let ops: Vec<Operand> = views
            .iter()
            .zip(&scratch)
            .zip(&contiguous)
            .map(|(((w, l), s), c)| match s {
                Some(s) => (s, c),
                None => (w, l),
            })
            .collect();
        f(&ops, start, n);
        for ((p, (w, l)), (s, c)) in parts
            .iter()
            .zip(&views)
            .zip(scratch.iter().zip(&contiguous))
        {
            if let Some(s) = s {
                copy(rt, p.elem, (s, c), (w, l));
            }
        }
        start += n;
    }
}

/// The error for an op that cannot split its operands into bindable slices.
pub(crate) fn too_large(rt: &Runtime, op: &str, views: &[Operand], size: usize) -> GpuError {
    let bytes = views
        .iter()
        .map(|(b, l)| b.bound_size().min((span(l) * size) as u64))
        .max()
        .unwrap_or(0);
    GpuError::TooLarge {
        op: op.to_string(),
        bytes,
        limit: rt.gpu.limits.max_storage_buffer_binding_size,
    }
}

/// Runs `f` on the two halves of `parts` (views that share `dims`) along the
/// longest axis, each bound as windows, for work no single axis can slice (a
/// transposed copy, whose rows read columns); `false` when every axis has
/// length 1. A half still past the binding limit is halved again by `f`'s own
/// call into this helper: the windows shrink with every halving.
pub(crate) fn bisect<'a>(
    rt: &Runtime,
    parts: impl Fn(usize) -> Vec<Part<'a>>,
    dims: &[usize],
    copy: Copy,
    mut f: impl FnMut(&[Operand]),
) -> bool {
    let Some(a) = (0..dims.len())
        .filter(|&a| dims[a] > 1)
        .max_by_key(|&a| dims[a])
    else {
        return false;
    };
    let halves = (dims[a], dims[a].div_ceil(2));
    by_slices(rt, &parts(a), halves, copy, |ops, _, _| f(ops));
    true
}
