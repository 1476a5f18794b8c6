//! Pooling over the last two axes of NCHW images: max, average, global average.
use super::conv::output_dims;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::functional;
use crate::nn::{Module, ToDevice, Visitor};
use crate::shape::Dim;
use crate::tensor::Tensor;
use volta_kernels::Window2d;

macro_rules! pool_layer {
    ($(#[$doc:meta])* $name:ident, $op:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $name {
            window: Window2d,
        }

        impl $name {
            /// A `k × k` window moving by `k` (PyTorch's default stride), no padding.
            pub fn new(k: usize) -> Self {
                $name {
                    window: Window2d {
                        stride: [k, k],
                        ..Window2d::square(k)
                    },
                }
            }
            /// Any window (kernel, stride, padding, dilation).
            pub fn from_window(window: Window2d) -> Self {
                $name { window }
            }
            /// The same stride along both axes.
            pub fn stride(mut self, s: usize) -> Self {
                self.window.stride = [s, s];
                self
            }
            /// The same padding along both axes.
            pub fn padding(mut self, p: usize) -> Self {
                self.window.padding = [p, p];
                self
            }
            /// The window this layer slides.
            pub fn window(&self) -> Window2d {
                self.window
            }

            /// Pools a batch of images, `(B, C, H, W) → (B, C, OH, OW)`; `OH`/`OW`
            /// are named by the result type.
            ///
            /// # Panics
            /// When the window does not fit the padded input, or the result type
            /// names another output size.
            pub fn forward<B: Dim, C: Dim, H: Dim, W: Dim, OH: Dim, OW: Dim, D: Backend<E>, E: Float>(
                &self,
                x: &Tensor<(B, C, H, W), D, E>,
            ) -> Tensor<(B, C, OH, OW), D, E> {
                let (b, c, h, w) = x.shape();
                let (oh, ow) = output_dims::<OH, OW>(&self.window, [h.size(), w.size()], || {
                    format!(concat!(stringify!($name), "<{:?}>"), self.window.kernel)
                });
                Tensor::from_raw((b, c, oh, ow), $op(x.raw(), &self.window))
            }
        }

        impl<D: Backend<E>, E: Float> Module<D, E> for $name {
            fn visit(&mut self, _: &mut Visitor<'_, D, E>) {}
        }

        impl<E: Float> ToDevice<E> for $name {
            type On<D2: Backend<E>> = $name;
            fn to<D2: Backend<E>>(&self) -> $name {
                *self
            }
        }
    };
}

pool_layer!(
    /// The maximum of each window (padding never wins: it is `−∞`), as PyTorch's
    /// `nn.MaxPool2d`. Its gradient goes to the window's maximum, shared evenly
    /// among ties.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank4<1, 1, 2, 2>>::from_array([[[[1.0, 4.0], [3.0, 2.0]]]]);
    /// let y: Tensor<Rank4<1, 1, 1, 1>> = MaxPool2d::new(2).forward(&x);
    /// assert_eq!(y.to_vec(), vec![4.0]);
    /// ```
    MaxPool2d,
    functional::max_pool2d
);

pool_layer!(
    /// The mean of each window, padding counted as zeros (PyTorch's `nn.AvgPool2d`
    /// with `count_include_pad=True`, its default).
    ///
    /// ```
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank4<1, 1, 2, 2>>::from_array([[[[1.0, 4.0], [3.0, 2.0]]]]);
    /// let y: Tensor<Rank4<1, 1, 1, 1>> = AvgPool2d::new(2).forward(&x);
    /// assert_eq!(y.to_vec(), vec![2.5]);
    /// ```
    AvgPool2d,
    functional::avg_pool2d
);

/// The mean over each channel's whole image, `(B, C, H, W) → (B, C)` (global
/// average pooling, as at the end of a ResNet).
///
/// ```
/// use volta::prelude::*;
/// let x = Tensor::<Rank4<1, 2, 1, 2>>::from_array([[[[1.0, 3.0]], [[0.0, 4.0]]]]);
/// let y: Tensor<Rank2<1, 2>> = GlobalAvgPool2d.forward(&x);
/// assert_eq!(y.to_vec(), vec![2.0, 2.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GlobalAvgPool2d;

impl GlobalAvgPool2d {
    /// Averages each channel over height and width.
    pub fn forward<B: Dim, C: Dim, H: Dim, W: Dim, D: Backend<E>, E: Float>(
        &self,
        x: &Tensor<(B, C, H, W), D, E>,
    ) -> Tensor<(B, C), D, E> {
        let (b, c, _, _) = x.shape();
        let d = x.dims();
        let raw = x
            .raw()
            .reshape(&[d[0], d[1], d[2] * d[3]])
            .mean_axis(2)
            .reshape(&[d[0], d[1]]);
        Tensor::from_raw((b, c), raw)
    }
}

impl<D: Backend<E>, E: Float> Module<D, E> for GlobalAvgPool2d {
    fn visit(&mut self, _: &mut Visitor<'_, D, E>) {}
}

impl<E: Float> ToDevice<E> for GlobalAvgPool2d {
    type On<D2: Backend<E>> = GlobalAvgPool2d;
    fn to<D2: Backend<E>>(&self) -> GlobalAvgPool2d {
        *self
    }
}
