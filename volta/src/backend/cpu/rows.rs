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
    pub fn of(layout: &Layout) -> Rows {
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

/// The contiguous slice of a view, when it has one.
pub(crate) fn contiguous_slice<'a, E>(data: &'a [E], layout: &Layout) -> Option<&'a [E]> {
    layout
        .is_contiguous()
        .then(|| &data[layout.offset..layout.offset + layout.numel()])
}
