//! Movement ops: permute, broadcast/expand, reshape, shrink/slice, stride, pad, concat.
//! Most are views (no copy); pad and concat write new buffers.
use crate::autograd::Op;
use crate::backend::{Backend, Memory};
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::*;
use crate::tensor::{RawTensor, Tensor};
use std::ops::Range;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Reorders axes: axis `i` of the result is axis `perm[i]` of `self`.
    #[track_caller]
    pub fn permute(&self, perm: &[usize]) -> Self {
        let mut seen = [false; MAX_RANK];
        assert!(
            perm.len() == self.dims().len()
                && perm
                    .iter()
                    .all(|&p| p < perm.len() && !std::mem::replace(&mut seen[p], true)),
            "permute: {perm:?} is not a permutation of {} axes",
            self.dims().len()
        );
        self.view_as(self.layout().permute(perm), || {
            Op::Permute(self.clone(), Dims::new(perm))
        })
    }

    /// Swaps the last two axes.
    #[track_caller]
    pub fn transpose_last(&self) -> Self {
        let r = self.dims().len();
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.permute(&perm)
    }

    /// Broadcasts size-1 axes to `dims` (same rank; a view with stride 0).
    #[track_caller]
    pub fn expand(&self, dims: &[usize]) -> Self {
        assert!(
            self.dims().len() == dims.len()
                && self
                    .dims()
                    .iter()
                    .zip(dims)
                    .all(|(&a, &b)| a == b || a == 1),
            "expand: cannot expand {:?} to {dims:?} (each dim must match or be 1)",
            self.dims()
        );
        if self.dims() == dims {
            return self.clone();
        }
        self.view_as(self.layout().expand(dims), || Op::Expand(self.clone()))
    }

    /// The same elements with new dims (a view when the strides allow, else a copy).
    #[track_caller]
    pub fn reshape(&self, dims: &[usize]) -> Self {
        assert_eq!(
            self.layout().numel(),
            dims.iter().product::<usize>(),
            "reshape: cannot view {:?} as {dims:?} (element counts differ)",
            self.dims()
        );
        if self.dims() == dims {
            return self.clone();
        }
        match self.layout().reshape(dims) {
            Some(layout) => self.view_as(layout, || Op::Reshape(self.clone())),
            None => {
                let buf = <D as Memory<E>>::contiguous(self.buffer(), self.layout());
                Self::from_op(
                    buf,
                    Layout::contiguous(dims),
                    || Op::Reshape(self.clone()),
                    &[self],
                )
            }
        }
    }

    /// A contiguous copy (or `self` when already contiguous).
    #[track_caller]
    pub fn contiguous(&self) -> Self {
        if self.layout().is_contiguous() {
            return self.clone();
        }
        let buf = <D as Memory<E>>::contiguous(self.buffer(), self.layout());
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::Reshape(self.clone()),
            &[self],
        )
    }

    /// Elements `start..start + len` along `axis` (a view).
    #[track_caller]
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Self {
        let n = self.dims()[axis];
        assert!(
            start + len <= n,
            "narrow: {start}..{} is out of bounds for axis {axis} of size {n}",
            start + len
        );
        if start == 0 && len == n {
            return self.clone();
        }
        self.view_as(self.layout().narrow(axis, start, len), || {
            Op::Narrow(self.clone(), axis, start)
        })
    }

    /// Every `step`-th element along `axis`, starting at 0 (a view).
    #[track_caller]
    pub fn step(&self, axis: usize, step: usize) -> Self {
        assert!(step > 0, "stride: the step must be at least 1");
        if step == 1 {
            return self.clone();
        }
        self.view_as(self.layout().step(axis, step), || {
            Op::Step(self.clone(), axis, step)
        })
    }

    /// Pads each axis with `(before, after)` copies of `value`.
    #[track_caller]
    pub fn pad(&self, pads: &[(usize, usize)], value: E) -> Self {
        assert_eq!(
            pads.len(),
            self.dims().len(),
            "pad: one (before, after) pair per axis"
        );
        let dims: Vec<usize> = self
            .dims()
            .iter()
            .zip(pads)
            .map(|(d, (b, a))| d + b + a)
            .collect();
        let buf = D::pad(self.view(), pads, value);
        Self::from_op(
            buf,
            Layout::contiguous(&dims),
            || Op::Pad(self.clone(), pads.to_vec()),
            &[self],
        )
    }

    /// Pads one axis.
    #[track_caller]
    pub fn pad_axis(&self, axis: usize, before: usize, after: usize, value: E) -> Self {
        let mut pads = vec![(0, 0); self.dims().len()];
        pads[axis] = (before, after);
        self.pad(&pads, value)
    }

    /// Concatenates along `axis`; all other dims must agree.
    #[track_caller]
    pub fn cat(parts: &[Self], axis: usize) -> Self {
        let first = parts.first().expect("cat: at least one tensor");
        let mut dims = Dims::new(first.dims());
        dims[axis] = 0;
        for p in parts {
            let ok = p.dims().len() == dims.len()
                && p.dims()
                    .iter()
                    .enumerate()
                    .all(|(i, &d)| i == axis || d == first.dims()[i]);
            assert!(
                ok,
                "cat: {:?} and {:?} differ outside axis {axis}",
                first.dims(),
                p.dims()
            );
            dims[axis] += p.dims()[axis];
        }
        let inputs: Vec<&Self> = parts.iter().collect();
        // Parts that already lie side by side in one buffer, where the
        // concatenation puts them (the gradients of a projection's heads, see
        // `Backend::attention_backward`), are that buffer: a view, not a copy.
        if let Some(whole) = Self::side_by_side(parts, axis, &dims) {
            let buf = first.view().0.clone();
            return Self::from_op(buf, whole, || Op::Cat(parts.to_vec(), axis), &inputs);
        }
        let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
        let buf = D::cat(&views, axis);
        Self::from_op(
            buf,
            Layout::contiguous(&dims),
            || Op::Cat(parts.to_vec(), axis),
            &inputs,
        )
    }

    /// The layout of the concatenation of `parts` along `axis` (of `dims`) in
    /// the parts' memory, when they are views of one buffer laid out as that
    /// concatenation's contiguous rows would hold them.
    fn side_by_side(parts: &[Self], axis: usize, dims: &[usize]) -> Option<Layout> {
        let (memory, first) = parts.first()?.view();
        let whole = Layout {
            offset: first.offset,
            ..Layout::contiguous(dims)
        };
        let mut start = 0;
        for p in parts {
            let (buf, l) = p.view();
            let there = Layout {
                dims: l.dims,
                strides: whole.strides,
                offset: whole.offset + start * whole.strides[axis],
            };
            if !<D as Memory<E>>::same_memory(memory, buf) || *l != there {
                return None;
            }
            start += l.dims[axis];
        }
        Some(whole)
    }

    /// Inserts a size-1 axis at `axis`.
    #[track_caller]
    pub fn unsqueeze(&self, axis: usize) -> Self {
        let mut dims = self.dims().to_vec();
        dims.insert(axis, 1);
        self.reshape(&dims)
    }

    /// Sums over the axes where `dims` has size 1 but `self` does not: the adjoint of
    /// `expand(self.dims)`.
    #[track_caller]
    pub fn sum_to(&self, dims: &[usize]) -> Self {
        let (mut axes, mut n) = ([0; crate::shape::MAX_RANK], 0);
        for (axis, (from, to)) in self.dims().iter().zip(dims).enumerate() {
            if from != to {
                axes[n] = axis;
                n += 1;
            }
        }
        self.reduce_axes(volta_kernels::ReduceOp::Sum, &axes[..n])
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Reorders axes: `Ax` lists, for each output axis, the input axis it takes.
    /// `Dst` is usually inferred.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank3<2, 3, 4>>::zeros();
    /// let y: Tensor<Rank3<4, 2, 3>> = x.permute::<_, Axes3<2, 0, 1>>();
    /// # let _ = y;
    /// ```
    #[track_caller]
    pub fn permute<Dst: Shape, Ax: Axes>(&self) -> Tensor<Dst, D, E>
    where
        S: PermuteShapeTo<Dst, Ax>,
    {
        let raw = self.raw().permute(Ax::LIST);
        Tensor::try_from_raw(raw).expect("permuted dims match the type by construction")
    }

    /// Broadcasts to `Dst` by inserting the axes `Ax` (inferred when unambiguous).
    ///
    /// ```
    /// use volta::prelude::*;
    /// let bias = Tensor::<Rank1<3>>::ones();
    /// let b: Tensor<Rank2<2, 3>> = bias.broadcast();
    /// # let _ = b;
    /// ```
    #[track_caller]
    pub fn broadcast<Dst: ConstShape, Ax: Axes>(&self) -> Tensor<Dst, D, E>
    where
        S: BroadcastShapeTo<Dst, Ax>,
    {
        self.broadcast_to::<Dst, Ax>(Dst::default())
    }

    /// Broadcasts to the run-time shape `dst` (for dynamic dims) by inserting `Ax`.
    #[track_caller]
    pub fn broadcast_to<Dst: Shape, Ax: Axes>(&self, dst: Dst) -> Tensor<Dst, D, E>
    where
        S: BroadcastShapeTo<Dst, Ax>,
    {
        let dims = dst.dims();
        let mut kept = dims.to_vec();
        for &a in Ax::LIST {
            kept[a] = 1;
        }
        let raw = self.raw().reshape(&kept).expand(&dims);
        Tensor::from_raw(dst, raw)
    }

    /// Expands size-1 dims to the sizes of `Dst` (same rank).
    #[track_caller]
    pub fn expand<Dst: ConstShape>(&self) -> Tensor<Dst, D, E>
    where
        S: ExpandShapeTo<Dst>,
    {
        const {
            assert!(
                expand_ok(S::STATIC_DIMS, Dst::STATIC_DIMS),
                "expand: each dim of the source must equal the target dim or be 1"
            )
        };
        self.expand_dyn(Dst::default())
    }

    /// Expands size-1 dims to the run-time shape `dst`. Static sizes are checked at
    /// compile time; dynamic ones panic when neither equal nor 1.
    #[track_caller]
    pub fn expand_to<Dst: Shape>(&self, dst: Dst) -> Tensor<Dst, D, E>
    where
        S: ExpandShapeTo<Dst>,
    {
        const {
            assert!(
                expand_ok(S::STATIC_DIMS, Dst::STATIC_DIMS),
                "expand: each dim of the source must equal the target dim or be 1"
            )
        };
        self.expand_dyn(dst)
    }

    // The run-time part of `expand`/`expand_to`. Each public method holds its own
    // `const` check: rustc names only the innermost instantiation of a failed const,
    // and that must be the caller's line, not a volta body.
    #[track_caller]
    fn expand_dyn<Dst: Shape>(&self, dst: Dst) -> Tensor<Dst, D, E> {
        Tensor::from_raw(dst, self.raw().expand(&dst.dims()))
    }

    /// Views the elements with another shape of the same element count (checked at
    /// compile time for static shapes).
    #[track_caller]
    pub fn reshape<Dst: ConstShape>(&self) -> Tensor<Dst, D, E> {
        const {
            assert!(
                numel_ok(S::STATIC_DIMS, Dst::STATIC_DIMS),
                "reshape: the element counts of the two shapes differ"
            )
        };
        self.reshape_dyn(Dst::default())
    }

    // The run-time part of `reshape`/`flatten` (see `expand_dyn` for why).
    #[track_caller]
    fn reshape_dyn<Dst: Shape>(&self, dst: Dst) -> Tensor<Dst, D, E> {
        assert_eq!(
            self.numel(),
            dst.numel(),
            "reshape: {:?} has {} elements, {:?} needs {}",
            self.dims(),
            self.numel(),
            dst.dims(),
            dst.numel()
        );
        Tensor::from_raw(dst, self.raw().reshape(&dst.dims()))
    }

    /// Reshapes to a run-time shape; an element-count mismatch is an error.
    #[track_caller]
    pub fn reshape_to<Dst: Shape>(&self, dst: Dst) -> Result<Tensor<Dst, D, E>, ShapeError> {
        const {
            assert!(
                numel_ok(S::STATIC_DIMS, Dst::STATIC_DIMS),
                "reshape: the element counts of the two shapes differ"
            )
        };
        if dst.numel() != self.numel() {
            return Err(ShapeError::DataLength {
                expected: dst.numel(),
                found: self.numel(),
            });
        }
        Ok(Tensor::from_raw(dst, self.raw().reshape(&dst.dims())))
    }

    /// Flattens to `Dst` (a reshape that may only lower the rank).
    #[track_caller]
    pub fn flatten<Dst: ConstShape>(&self) -> Tensor<Dst, D, E> {
        const {
            assert!(
                Dst::RANK <= S::RANK,
                "flatten: the target rank must not exceed the source rank"
            );
            assert!(
                numel_ok(S::STATIC_DIMS, Dst::STATIC_DIMS),
                "flatten: the element counts of the two shapes differ"
            )
        };
        self.reshape_dyn(Dst::default())
    }

    /// Keeps `START..START + len` along axis `Ax`, where `len` is the size of that axis
    /// in `Dst` (checked at compile time when static).
    #[track_caller]
    pub fn shrink<Ax, const START: usize, Dst: Shape>(&self) -> Tensor<Dst, D, E>
    where
        S: ResizeAxis<Ax, Dst>,
    {
        let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
        const {
            let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
            if let (Some(s), Some(d)) = (S::STATIC_DIMS[axis], Dst::STATIC_DIMS[axis]) {
                assert!(
                    START + d <= s,
                    "shrink: START + the target size exceeds the source size"
                );
            }
        };
        let len = Dst::STATIC_DIMS[axis].unwrap_or_else(|| self.dims()[axis] - START);
        let raw = self.raw().narrow(axis, START, len);
        Tensor::try_from_raw(raw).expect("shrunk dims match the type by construction")
    }

    /// Elements `range` along axis `Ax`; the result's length on that axis is dynamic.
    /// Panics when the range is out of bounds.
    #[track_caller]
    pub fn slice<Ax>(
        &self,
        range: Range<usize>,
    ) -> Tensor<<S as ReplaceAxis<Ax, usize>>::Output, D, E>
    where
        S: ReplaceAxis<Ax, usize>,
    {
        let axis = <S as ReplaceAxis<Ax, usize>>::AXIS;
        assert!(
            range.start <= range.end,
            "slice: empty or reversed range {range:?}"
        );
        let raw = self
            .raw()
            .narrow(axis, range.start, range.end - range.start);
        Tensor::try_from_raw(raw).expect("sliced dims match the type by construction")
    }

    /// Every `STEP`-th element along axis `Ax`; `Dst`'s size on that axis must be
    /// ⌈n / STEP⌉ (checked at compile time when static).
    #[track_caller]
    pub fn stride<Ax, const STEP: usize, Dst: Shape>(&self) -> Tensor<Dst, D, E>
    where
        S: ResizeAxis<Ax, Dst>,
    {
        const {
            assert!(STEP > 0, "stride: STEP must be at least 1");
            let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
            if let (Some(s), Some(d)) = (S::STATIC_DIMS[axis], Dst::STATIC_DIMS[axis]) {
                assert!(
                    s.div_ceil(STEP) == d,
                    "stride: the target size must be ceil(source size / STEP)"
                );
            }
        };
        let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
        Tensor::try_from_raw(self.raw().step(axis, STEP))
            .expect("strided dims are checked against the type")
    }

    /// Pads axis `Ax` with `BEFORE` and `AFTER` copies of `value`; `Dst`'s size on
    /// that axis must be `BEFORE + n + AFTER` (checked at compile time when static).
    #[track_caller]
    pub fn pad<Ax, const BEFORE: usize, const AFTER: usize, Dst: Shape>(
        &self,
        value: E,
    ) -> Tensor<Dst, D, E>
    where
        S: ResizeAxis<Ax, Dst>,
    {
        let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
        const {
            let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
            if let (Some(s), Some(d)) = (S::STATIC_DIMS[axis], Dst::STATIC_DIMS[axis]) {
                assert!(
                    s + BEFORE + AFTER == d,
                    "pad: the target size must be BEFORE + source size + AFTER"
                );
            }
        };
        Tensor::try_from_raw(self.raw().pad_axis(axis, BEFORE, AFTER, value))
            .expect("padded dims are checked against the type")
    }

    /// Concatenates `self` and `other` along `Ax`. All other dims must be equal
    /// (a type error otherwise); `Dst`'s size on the axis must be the sum (checked at
    /// compile time when static, at run time otherwise).
    #[track_caller]
    pub fn concat<Ax, Dst: Shape, R>(&self, other: &Tensor<R, D, E>) -> Tensor<Dst, D, E>
    where
        S: ResizeAxis<Ax, Dst>,
        R: ResizeAxis<Ax, Dst>,
    {
        let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
        const {
            let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
            if let (Some(x), Some(y), Some(z)) = (
                S::STATIC_DIMS[axis],
                R::STATIC_DIMS[axis],
                Dst::STATIC_DIMS[axis],
            ) {
                assert!(
                    x + y == z,
                    "concat: the target size along the axis must be the sum of the inputs' sizes"
                );
            }
        };
        let raw = RawTensor::cat(&[self.raw().clone(), other.raw().clone()], axis);
        Tensor::try_from_raw(raw).unwrap_or_else(|e| panic!("concat: {e}"))
    }
}

impl<M: Dim, N: Dim, D: Backend<E>, E: Float> Tensor<(M, N), D, E> {
    /// The transpose of a matrix (a view).
    #[track_caller]
    pub fn t(&self) -> Tensor<(N, M), D, E> {
        let (m, n) = self.shape();
        Tensor::from_raw((n, m), self.raw().permute(&[1, 0]))
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::Memory;
    use crate::{Cpu, RawTensor};

    /// Parts that lie side by side in one buffer, where their concatenation
    /// puts them, concatenate to a view of that buffer; parts out of order, or
    /// not adjacent, are copied. The values agree either way.
    #[test]
    fn cat_of_parts_side_by_side_is_a_view() {
        let x = RawTensor::<Cpu, f32>::from_vec((0..24).map(|v| v as f32).collect(), &[4, 6]);
        let parts =
            |starts: &[usize]| -> Vec<_> { starts.iter().map(|&s| x.narrow(1, s, 2)).collect() };
        let same =
            |t: &RawTensor<Cpu, f32>| <Cpu as Memory<f32>>::same_memory(t.buffer(), x.buffer());
        let whole = RawTensor::cat(&parts(&[0, 2, 4]), 1);
        assert!(same(&whole), "side by side: a view");
        assert_eq!(whole.to_vec(), x.to_vec());
        let swapped = RawTensor::cat(&parts(&[2, 0, 4]), 1);
        assert!(!same(&swapped), "out of order: a copy");
        let want: Vec<f32> = x
            .to_vec()
            .chunks(6)
            .flat_map(|r| [r[2], r[3], r[0], r[1], r[4], r[5]])
            .collect();
        assert_eq!(swapped.to_vec(), want);
        let gap = RawTensor::cat(&parts(&[0, 4]), 1);
        assert!(!same(&gap), "not adjacent: a copy");
        // Along the rows: the first two rows and the last two.
        let rows = RawTensor::cat(&[x.narrow(0, 0, 2), x.narrow(0, 2, 2)], 0);
        assert!(same(&rows));
        assert_eq!(rows.to_vec(), x.to_vec());
    }
}
