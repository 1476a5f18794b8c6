//! Sliding windows over the last two axes of (N, C, H, W) tensors: `unfold2d`
//! (im2col) and its adjoint `fold2d` (col2im), from which convolutions and pooling
//! are built. Each is the other's backward rule.
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::tensor::RawTensor;
use volta_kernels::Window2d;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// im2col: every window position of an (N, C, H, W) tensor as a row of columns,
    /// (N, OH, OW, C, KH, KW) with `[OH, OW] = win.output([H, W])` and
    /// `out[n, oh, ow, c, kh, kw] = self[n, c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw]`,
    /// or `pad_value` where that position falls in the padding (0 for convolutions,
    /// −∞ for max-pooling). Reads views (permuted, sliced) without a copy; the
    /// gradient is [`fold2d`](Self::fold2d) of the output's gradient.
    ///
    /// Panics unless `self` has rank 4 and the window fits.
    ///
    /// ```
    /// use volta::{Cpu, RawTensor, Window2d};
    /// let x = RawTensor::<Cpu, f32>::from_vec((0..9).map(|v| v as f32).collect(), &[1, 1, 3, 3]);
    /// let cols = x.unfold2d(Window2d::square(2), 0.0);
    /// assert_eq!(cols.dims(), &[1, 2, 2, 1, 2, 2]);
    /// assert_eq!(&cols.to_vec()[..4], &[0.0, 1.0, 3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn unfold2d(&self, win: Window2d, pad_value: E) -> Self {
        let dims = self.dims();
        assert!(
            dims.len() == 4,
            "unfold2d: the input must be (N, C, H, W), got dims {dims:?}"
        );
        let [oh, ow] = win.output([dims[2], dims[3]]).unwrap_or_else(|e| {
            panic!("unfold2d: the window {win:?} does not fit the input {dims:?}: {e}")
        });
        let out = [dims[0], oh, ow, dims[1], win.kernel[0], win.kernel[1]];
        let buf = D::unfold2d(self.view(), &win, pad_value);
        Self::from_op(
            buf,
            Layout::contiguous(&out),
            || Op::Unfold2d(self.clone(), win),
            &[self],
        )
    }

    /// col2im, the adjoint of [`unfold2d`](Self::unfold2d): columns (N, OH, OW, C,
    /// KH, KW) summed back into an (N, C, H, W) image with `[H, W] = input_hw`. Each
    /// image position is the sum of the column entries that read it; entries in the
    /// padding are dropped. The gradient is `unfold2d` of the output's gradient (pad
    /// value 0).
    ///
    /// Panics unless `self` has rank 6 with `[OH, OW] = win.output(input_hw)` and
    /// `[KH, KW] = win.kernel`.
    #[track_caller]
    pub fn fold2d(&self, win: Window2d, input_hw: [usize; 2]) -> Self {
        let dims = self.dims();
        assert!(
            dims.len() == 6,
            "fold2d: the columns must be (N, OH, OW, C, KH, KW), got dims {dims:?}"
        );
        let [oh, ow] = win.output(input_hw).unwrap_or_else(|e| {
            panic!("fold2d: the window {win:?} does not fit the image {input_hw:?}: {e}")
        });
        assert!(
            dims[1..3] == [oh, ow] && dims[4..6] == win.kernel,
            "fold2d: columns {dims:?} do not match the window {win:?} over {input_hw:?}, \
             which needs (N, {oh}, {ow}, C, {}, {})",
            win.kernel[0],
            win.kernel[1]
        );
        let out = [dims[0], dims[3], input_hw[0], input_hw[1]];
        let buf = D::fold2d(self.view(), &win, input_hw);
        Self::from_op(
            buf,
            Layout::contiguous(&out),
            || Op::Fold2d(self.clone(), win),
            &[self],
        )
    }
}
