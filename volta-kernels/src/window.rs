//! Sliding-window geometry (convolution and pooling over the last two axes).
//!
//! One formula for everyone: the `model!` macro computes layer output sizes with it
//! at expansion time, and the runtime's unfold/fold kernels index with it.

/// A 2-D sliding window: kernel size, stride, zero (or `-∞`) padding on both sides,
/// and dilation, each as `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window2d {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Step between window positions.
    pub stride: [usize; 2],
    /// Padding added before and after the input, per axis.
    pub padding: [usize; 2],
    /// Spacing between kernel taps (1: adjacent).
    pub dilation: [usize; 2],
}

/// Why a window does not fit an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// A kernel, stride or dilation of 0.
    Zero,
    /// The dilated kernel (`extent`) is larger than the padded input (`padded`)
    /// along `axis` (0: height, 1: width).
    KernelTooLarge {
        /// 0 for height, 1 for width.
        axis: usize,
        /// `dilation·(kernel − 1) + 1`.
        extent: usize,
        /// `input + 2·padding`.
        padded: usize,
    },
}

impl std::fmt::Display for WindowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowError::Zero => write!(f, "kernel, stride and dilation must be at least 1"),
            WindowError::KernelTooLarge {
                axis,
                extent,
                padded,
            } => write!(
                f,
                "the kernel spans {extent} along the {}, but the padded input has only {padded}",
                ["height", "width"][*axis]
            ),
        }
    }
}

impl std::error::Error for WindowError {}

impl Window2d {
    /// A `k × k` window with stride 1, no padding, no dilation.
    pub const fn square(k: usize) -> Self {
        Window2d {
            kernel: [k, k],
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        }
    }

    /// The output size along one axis for an input of `input`:
    /// `⌊(input + 2p − d(k − 1) − 1) / s⌋ + 1`, as PyTorch computes it.
    pub const fn output_len(&self, axis: usize, input: usize) -> Result<usize, WindowError> {
        let (k, s, p, d) = (
            self.kernel[axis],
            self.stride[axis],
            self.padding[axis],
            self.dilation[axis],
        );
        if k == 0 || s == 0 || d == 0 {
            return Err(WindowError::Zero);
        }
        let extent = d * (k - 1) + 1;
        let padded = input + 2 * p;
        if extent > padded {
            return Err(WindowError::KernelTooLarge {
                axis,
                extent,
                padded,
            });
        }
        Ok((padded - extent) / s + 1)
    }

    /// Output `[height, width]` for an input of `[height, width]`.
    pub const fn output(&self, input: [usize; 2]) -> Result<[usize; 2], WindowError> {
        let h = match self.output_len(0, input[0]) {
            Ok(h) => h,
            Err(e) => return Err(e),
        };
        let w = match self.output_len(1, input[1]) {
            Ok(w) => w,
            Err(e) => return Err(e),
        };
        Ok([h, w])
    }

    /// Whether the windows tile the padded input exactly along `axis` (the last
    /// window ends at its edge): pooling layers that must not drop rows ask this.
    pub const fn covers(&self, axis: usize, input: usize) -> bool {
        let extent = self.dilation[axis] * (self.kernel[axis] - 1) + 1;
        let padded = input + 2 * self.padding[axis];
        extent <= padded && (padded - extent).is_multiple_of(self.stride[axis])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_sizes_match_pytorch() {
        // nn.Conv2d(k=3, padding=1) keeps 28×28; MaxPool2d(2) halves it.
        let same = Window2d {
            padding: [1, 1],
            ..Window2d::square(3)
        };
        assert_eq!(same.output([28, 28]), Ok([28, 28]));
        let pool = Window2d {
            stride: [2, 2],
            ..Window2d::square(2)
        };
        assert_eq!(pool.output([28, 27]), Ok([14, 13]));
        assert!(pool.covers(0, 28) && !pool.covers(1, 27));
        // k=3, s=2, p=1, d=2 on 7: (7 + 2 − 5)/2 + 1 = 3.
        let odd = Window2d {
            kernel: [3, 3],
            stride: [2, 2],
            padding: [1, 1],
            dilation: [2, 2],
        };
        assert_eq!(odd.output_len(0, 7), Ok(3));
    }

    #[test]
    fn oversized_kernels_and_zeros_are_errors() {
        let w = Window2d::square(5);
        assert_eq!(
            w.output([3, 8]),
            Err(WindowError::KernelTooLarge {
                axis: 0,
                extent: 5,
                padded: 3
            })
        );
        assert_eq!(Window2d::square(0).output([3, 3]), Err(WindowError::Zero));
    }
}
