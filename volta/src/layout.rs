//! How a tensor's elements sit in its buffer: dims, strides and an offset.
use crate::shape::Dims;

/// Dims, strides (in elements) and offset of a view into a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Size of each axis.
    pub dims: Dims,
    /// Elements to skip for one step along each axis (0 for a broadcast axis).
    pub strides: Dims,
    /// Index of the first element.
    pub offset: usize,
}

impl Layout {
    /// Row-major contiguous layout of `dims`.
    pub fn contiguous(dims: &[usize]) -> Self {
        let mut strides = Dims::new(dims);
        let mut acc = 1;
        for (s, d) in strides.iter_mut().zip(dims).rev() {
            *s = acc;
            acc *= d;
        }
        Layout {
            dims: Dims::new(dims),
            strides,
            offset: 0,
        }
    }

    /// Number of elements in the view.
    pub fn numel(&self) -> usize {
        self.dims.numel()
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Whether the view is row-major contiguous (size-1 axes may have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut acc = 1;
        for (&d, &s) in self.dims.iter().zip(self.strides.iter()).rev() {
            if d != 1 && s != acc {
                return false;
            }
            acc *= d;
        }
        true
    }

    /// Reorders the axes: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Self {
        let mut dims = self.dims;
        let mut strides = self.strides;
        for (i, &p) in perm.iter().enumerate() {
            dims[i] = self.dims[p];
            strides[i] = self.strides[p];
        }
        Layout {
            dims,
            strides,
            offset: self.offset,
        }
    }

    /// Broadcasts size-1 axes to `dims` (stride 0).
    pub fn expand(&self, dims: &[usize]) -> Self {
        let mut strides = self.strides;
        for (i, (&from, &to)) in self.dims.iter().zip(dims).enumerate() {
            if from != to {
                debug_assert_eq!(from, 1);
                strides[i] = 0;
            }
        }
        Layout {
            dims: Dims::new(dims),
            strides,
            offset: self.offset,
        }
    }

    /// The sub-view `start..start + len` along `axis`.
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Self {
        let mut l = *self;
        l.offset += start * self.strides[axis];
        l.dims[axis] = len;
        l
    }

    /// Every `step`-th element along `axis`.
    pub fn step(&self, axis: usize, step: usize) -> Self {
        let mut l = *self;
        l.dims[axis] = self.dims[axis].div_ceil(step);
        l.strides[axis] *= step;
        l
    }

    /// Storage offsets of every element, in row-major order of the view.
    pub fn offsets(&self) -> Offsets<'_> {
        Offsets {
            layout: self,
            index: Dims::new(&[0; crate::shape::MAX_RANK][..self.rank()]),
            next: self.offset,
            left: self.numel(),
        }
    }
}

/// Iterator over the storage offsets of a view (see [`Layout::offsets`]).
pub struct Offsets<'a> {
    layout: &'a Layout,
    index: Dims,
    next: usize,
    left: usize,
}

impl Iterator for Offsets<'_> {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let current = self.next;
        // Odometer step: bump the last axis, carrying into earlier ones.
        for axis in (0..self.index.len()).rev() {
            self.index[axis] += 1;
            self.next += self.layout.strides[axis];
            if self.index[axis] < self.layout.dims[axis] {
                break;
            }
            self.next -= self.layout.strides[axis] * self.index[axis];
            self.index[axis] = 0;
        }
        Some(current)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}
impl ExactSizeIterator for Offsets<'_> {}

impl Layout {
    /// The same elements viewed with `dims`, without copying, when the strides allow
    /// it (PyTorch's `computeStride`); `None` means the data must be copied first.
    pub fn reshape(&self, dims: &[usize]) -> Option<Self> {
        debug_assert_eq!(self.numel(), dims.iter().product::<usize>());
        if self.is_contiguous() || self.numel() <= 1 {
            let mut l = Layout::contiguous(dims);
            l.offset = self.offset;
            return Some(l);
        }
        let (old_d, old_s) = (&*self.dims, &*self.strides);
        let mut strides = Dims::new(dims);
        let mut view_d = dims.len() as isize - 1;
        let mut chunk_base = *old_s.last()?;
        let (mut tensor_numel, mut view_numel) = (1, 1);
        for td in (0..old_d.len()).rev() {
            tensor_numel *= old_d[td];
            if td == 0 || (old_d[td - 1] != 1 && old_s[td - 1] != tensor_numel * chunk_base) {
                while view_d >= 0 && (view_numel < tensor_numel || dims[view_d as usize] == 1) {
                    strides[view_d as usize] = view_numel * chunk_base;
                    view_numel *= dims[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if td > 0 {
                    chunk_base = old_s[td - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        (view_d == -1).then_some(Layout {
            dims: Dims::new(dims),
            strides,
            offset: self.offset,
        })
    }
}
