//! Strided views as rows: the base offset of every row along the last axis, plus the
//! row length and stride. Kernels loop over rows with a tight inner loop.
use crate::layout::Layout;

/// A view split into rows along its last axis.
pub(crate) struct Rows {
    /// Storage offset of the first element of each row.
    pub starts: Vec<usize>,
    /// Elements per row.
    pub len: usize,
    /// Stride between elements of a row.
    pub stride: usize,
}

impl Rows {
    /// The rows of one view, its axes merged where its strides allow (see
    /// [`of_all`](Self::of_all)).
    pub fn of(layout: &Layout) -> Rows {
        let [rows] = Rows::of_all([layout]);
        rows
    }

    /// The rows of views with equal dims, visited in the same order: neighbouring
    /// axes that every view steps through as one (a contiguous `[H, W]`, or a
    /// broadcast one, stride 0 in both) are merged first, so that a view of
    /// short rows (8×8 images, a per-channel scale) loops over long ones.
    pub fn of_all<const N: usize>(layouts: [&Layout; N]) -> [Rows; N] {
        let merged = merge_axes(layouts);
        std::array::from_fn(|i| Rows::split(&merged[i]))
    }

    fn split(layout: &Layout) -> Rows {
        let rank = layout.rank();
        if rank == 0 {
            return Rows {
                starts: vec![layout.offset],
                len: 1,
                stride: 1,
            };
        }
        let outer = Layout {
            dims: crate::shape::Dims::new(&layout.dims[..rank - 1]),
            strides: crate::shape::Dims::new(&layout.strides[..rank - 1]),
            offset: layout.offset,
        };
        let len = layout.dims[rank - 1];
        let starts = if len == 0 {
            Vec::new()
        } else {
            outer.offsets().collect()
        };
        Rows {
            starts,
            len,
            stride: layout.strides[rank - 1],
        }
    }
}

/// The views with their neighbouring axes merged wherever every view allows it:
/// axis `a` joins the run of axes after it (`m` elements, stride `s` in each
/// view) when its stride is `s·m` in every view; axes of size 1 drop out. The
/// views keep their offsets and visit their elements in the same order.
fn merge_axes<const N: usize>(layouts: [&Layout; N]) -> [Layout; N] {
    let dims = &layouts[0].dims;
    debug_assert!(
        layouts.iter().all(|l| l.dims == *dims),
        "rows of views with other dims"
    );
    // Merged axes, innermost first: (elements, each view's stride).
    let mut runs: Vec<(usize, [usize; N])> = Vec::with_capacity(dims.len());
    for a in (0..dims.len()).rev() {
        let (n, strides) = (dims[a], layouts.map(|l| l.strides[a]));
        if n == 1 {
            continue;
        }
        match runs.last_mut() {
            Some((m, inner)) if (0..N).all(|i| strides[i] == inner[i] * *m) => *m *= n,
            _ => runs.push((n, strides)),
        }
    }
    std::array::from_fn(|i| {
        let d: Vec<usize> = runs.iter().rev().map(|r| r.0).collect();
        let s: Vec<usize> = runs.iter().rev().map(|r| r.1[i]).collect();
        Layout {
            dims: crate::shape::Dims::new(&d),
            strides: crate::shape::Dims::new(&s),
            offset: layouts[i].offset,
        }
    })
}

/// The contiguous slice of a view, when it has one.
pub(crate) fn contiguous_slice<'a, E>(data: &'a [E], layout: &Layout) -> Option<&'a [E]> {
    layout
        .is_contiguous()
        .then(|| &data[layout.offset..layout.offset + layout.numel()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(rows: &Rows) -> Vec<usize> {
        rows.starts
            .iter()
            .flat_map(|&s| (0..rows.len).map(move |j| s + j * rows.stride))
            .collect()
    }

    /// Merged rows visit each view's elements in the order of its own offsets,
    /// and as few rows as the views allow.
    #[test]
    fn merged_rows_keep_every_views_order() {
        let image = Layout::contiguous(&[2, 3, 4, 4]);
        // A per-channel scale [3] as [1, 3, 1, 1], expanded.
        let scale = Layout::contiguous(&[1, 3, 1, 1]).expand(&[2, 3, 4, 4]);
        let [a, b] = Rows::of_all([&image, &scale]);
        assert_eq!((a.starts.len(), a.len, b.len, b.stride), (6, 16, 16, 0));
        assert_eq!(flat(&a), image.offsets().collect::<Vec<_>>());
        assert_eq!(flat(&b), scale.offsets().collect::<Vec<_>>());
        let narrowed = Layout {
            offset: 3,
            ..Layout::contiguous(&[4, 10])
        };
        let narrowed = Layout {
            dims: crate::shape::Dims::new(&[4, 5]),
            ..narrowed
        };
        for views in [
            [
                &Layout::contiguous(&[2, 4, 3]),
                &Layout::contiguous(&[2, 3, 4]).permute(&[0, 2, 1]),
            ],
            [&Layout::contiguous(&[4, 5]), &narrowed],
            [&Layout::contiguous(&[1, 1]), &Layout::contiguous(&[1, 1])],
            [
                &Layout::contiguous(&[3, 0, 2]),
                &Layout::contiguous(&[3, 0, 2]),
            ],
        ] {
            let [a, b] = Rows::of_all(views);
            assert_eq!(
                flat(&a),
                views[0].offsets().collect::<Vec<_>>(),
                "{views:?}"
            );
            assert_eq!(
                flat(&b),
                views[1].offsets().collect::<Vec<_>>(),
                "{views:?}"
            );
        }
        assert_eq!(Rows::of(&Layout::contiguous(&[2, 3, 4])).starts.len(), 1);
    }
}
