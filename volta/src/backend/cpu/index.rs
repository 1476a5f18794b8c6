//! Gather along an axis and its adjoint, scatter-add.
use crate::dtype::Float;
use crate::layout::Layout;

/// Offsets into `x` of every output position, leaving out the axis being indexed.
fn base_layout(dims: &[usize], x: &Layout, axis: usize) -> Layout {
    let mut strides = x.strides;
    strides[axis] = 0;
    Layout {
        dims: crate::shape::Dims::new(dims),
        strides,
        offset: x.offset,
    }
}

pub(crate) fn gather<E: Float>(
    x: &[E],
    lx: &Layout,
    axis: usize,
    idx: &[u32],
    li: &Layout,
) -> Vec<E> {
    let base = base_layout(&li.dims, lx, axis);
    let (n, step) = (lx.dims[axis], lx.strides[axis]);
    base.offsets()
        .zip(li.offsets())
        .map(|(b, io)| {
            let i = idx[io] as usize;
            assert!(
                i < n,
                "gather: index {i} is out of range for an axis of size {n}"
            );
            x[b + i * step]
        })
        .collect()
}

pub(crate) fn scatter_add<E: Float>(
    dims: &[usize],
    axis: usize,
    idx: &[u32],
    li: &Layout,
    src: &[E],
    ls: &Layout,
) -> Vec<E> {
    let out_layout = Layout::contiguous(dims);
    // Sums in `E::Acc` (`f32` for `f16`), rounded once.
    let mut out = super::buffers::zeros_to_add_into::<E::Acc>(out_layout.numel());
    let base = base_layout(&li.dims, &out_layout, axis);
    let (n, step) = (dims[axis], out_layout.strides[axis]);
    for ((b, io), so) in base.offsets().zip(li.offsets()).zip(ls.offsets()) {
        let i = idx[io] as usize;
        assert!(
            i < n,
            "scatter_add: index {i} is out of range for an axis of size {n}"
        );
        out[b + i * step] = out[b + i * step] + src[so].to_acc();
    }
    out.into_iter().map(E::from_acc).collect()
}
