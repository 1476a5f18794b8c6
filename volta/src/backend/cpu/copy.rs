//! Copies between strided views: reading back, making contiguous, pad, concat.
use super::rows::{Rows, contiguous_slice};
use crate::layout::Layout;

/// The elements of a view, row-major.
pub(crate) fn strided_to_vec<E: Copy>(data: &[E], layout: &Layout) -> Vec<E> {
    if let Some(s) = contiguous_slice(data, layout) {
        return s.to_vec();
    }
    let rows = Rows::of(layout);
    let mut out = Vec::with_capacity(layout.numel());
    if rows.stride == 1 {
        // Contiguous rows (the heads of a permuted view): one copy each.
        for &start in &rows.starts {
            out.extend_from_slice(&data[start..start + rows.len]);
        }
        return out;
    }
    for &start in &rows.starts {
        out.extend((0..rows.len).map(|j| data[start + j * rows.stride]));
    }
    out
}

/// Copies the view `src` into the region `dst_region` of `dst` (equal dims).
fn copy_into<E: Copy>(src: &[E], src_layout: &Layout, dst: &mut [E], dst_region: &Layout) {
    let [s, d] = Rows::of_all([src_layout, dst_region]);
    for (&ss, &ds) in s.starts.iter().zip(&d.starts) {
        for j in 0..s.len {
            dst[ds + j * d.stride] = src[ss + j * s.stride];
        }
    }
}

pub(crate) fn pad<E: Copy>(
    data: &[E],
    layout: &Layout,
    pads: &[(usize, usize)],
    value: E,
) -> Vec<E> {
    let dims: Vec<usize> = layout
        .dims
        .iter()
        .zip(pads)
        .map(|(d, (b, a))| d + b + a)
        .collect();
    let out_layout = Layout::contiguous(&dims);
    let mut out = vec![value; out_layout.numel()];
    let offset = pads
        .iter()
        .zip(out_layout.strides.iter())
        .map(|((b, _), s)| b * s)
        .sum();
    let region = Layout {
        dims: layout.dims,
        strides: out_layout.strides,
        offset,
    };
    copy_into(data, layout, &mut out, &region);
    out
}

pub(crate) fn cat<E: Copy + Default>(parts: &[(&[E], &Layout)], axis: usize) -> Vec<E> {
    let mut dims = parts[0].1.dims;
    dims[axis] = parts.iter().map(|(_, l)| l.dims[axis]).sum();
    let out_layout = Layout::contiguous(&dims);
    let mut out = vec![E::default(); out_layout.numel()];
    let mut start = 0;
    for (data, layout) in parts {
        let region = Layout {
            dims: layout.dims,
            strides: out_layout.strides,
            offset: start * out_layout.strides[axis],
        };
        copy_into(data, layout, &mut out, &region);
        start += layout.dims[axis];
    }
    out
}
