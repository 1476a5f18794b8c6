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

/// The elements of a view as a row-major slice: borrowed when the view is
/// contiguous, else copied.
pub(crate) fn elements<'a, E: Copy>(data: &'a [E], layout: &Layout) -> std::borrow::Cow<'a, [E]> {
    match contiguous_slice(data, layout) {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(strided_to_vec(data, layout)),
    }
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
    // Contiguous parts: each outer index appends one block of every part, and
    // the output is never zeroed only to be overwritten.
    let blocks: Option<Vec<&[E]>> = parts.iter().map(|&(d, l)| contiguous_slice(d, l)).collect();
    if let Some(blocks) = blocks {
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = Vec::with_capacity(out_layout.numel());
        for i in 0..outer {
            for (block, (_, l)) in blocks.iter().zip(parts) {
                let len = l.dims[axis] * inner;
                out.extend_from_slice(&block[i * len..(i + 1) * len]);
            }
        }
        return out;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The concatenation of `parts` (row-major `dims` each) along `axis`, one
    /// element at a time.
    fn naive(parts: &[(Vec<f32>, Vec<usize>)], axis: usize) -> Vec<f32> {
        let outer: usize = parts[0].1[..axis].iter().product();
        let mut out = Vec::new();
        for i in 0..outer {
            for (data, dims) in parts {
                let len: usize = dims[axis..].iter().product();
                out.extend_from_slice(&data[i * len..(i + 1) * len]);
            }
        }
        out
    }

    #[test]
    fn cat_of_contiguous_and_strided_parts_matches_the_naive_order() {
        for axis in 0..3 {
            let mut dims_a = vec![2, 3, 4];
            let mut dims_b = vec![2, 3, 4];
            dims_a[axis] = 1;
            dims_b[axis] = 2;
            let numel = |d: &[usize]| d.iter().product::<usize>();
            let a: Vec<f32> = (0..numel(&dims_a)).map(|x| x as f32).collect();
            let b: Vec<f32> = (0..numel(&dims_b)).map(|x| 100.0 + x as f32).collect();
            let want = naive(
                &[(a.clone(), dims_a.clone()), (b.clone(), dims_b.clone())],
                axis,
            );
            let (la, lb) = (Layout::contiguous(&dims_a), Layout::contiguous(&dims_b));
            assert_eq!(
                cat(&[(&a, &la), (&b, &lb)], axis),
                want,
                "contiguous, axis {axis}"
            );
            // `b` read through a transposed view of its transpose: strided.
            let mut t_dims = dims_b.clone();
            t_dims.swap(1, 2);
            let mut bt = vec![0.0; b.len()];
            for i in 0..dims_b[0] {
                for j in 0..dims_b[1] {
                    for k in 0..dims_b[2] {
                        bt[(i * t_dims[1] + k) * t_dims[2] + j] =
                            b[(i * dims_b[1] + j) * dims_b[2] + k];
                    }
                }
            }
            let lt = Layout::contiguous(&t_dims).permute(&[0, 2, 1]);
            assert_eq!(
                cat(&[(&a, &la), (&bt, &lt)], axis),
                want,
                "strided, axis {axis}"
            );
        }
    }
}
