//! Interim versions of the window, normalisation and random ops, composed from
//! existing ops (device-generic, autograd for free). Branch `kernels` replaces
//! them with dedicated kernels (im2col/col2im, one row kernel per norm, a
//! counter-based generator on the device).
use crate::backend::Backend;
use crate::dtype::Float;
use crate::tensor::RawTensor;
use volta_kernels::{BinaryOp, UnaryOp, Window2d};

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// im2col: `(N, C, H, W)` → `(N, OH, OW, C, KH, KW)`, reading `pad_value`
    /// outside the input.
    ///
    /// # Panics
    /// When `self` is not rank 4 or the window does not fit.
    pub fn unfold2d(&self, win: Window2d, pad_value: E) -> Self {
        let d = self.dims().to_vec();
        assert_eq!(d.len(), 4, "unfold2d: expected (N, C, H, W), got {d:?}");
        let [oh, ow] = win
            .output([d[2], d[3]])
            .unwrap_or_else(|e| panic!("unfold2d on {d:?}: {e}"));
        let [ph, pw] = win.padding;
        let padded = if ph + pw > 0 {
            self.pad(&[(0, 0), (0, 0), (ph, ph), (pw, pw)], pad_value)
        } else {
            self.clone()
        };
        let mut taps = Vec::new();
        for kh in 0..win.kernel[0] {
            for kw in 0..win.kernel[1] {
                let tap = padded
                    .narrow(2, kh * win.dilation[0], (oh - 1) * win.stride[0] + 1)
                    .step(2, win.stride[0])
                    .narrow(3, kw * win.dilation[1], (ow - 1) * win.stride[1] + 1)
                    .step(3, win.stride[1]);
                taps.push(tap.permute(&[0, 2, 3, 1]).unsqueeze(4));
            }
        }
        RawTensor::cat(&taps, 4).reshape(&[d[0], oh, ow, d[1], win.kernel[0], win.kernel[1]])
    }

    /// Normalises rows along `axis`: `(x − mean)/√(var + ε)` (biased variance) when
    /// `center`, else `x/√(mean(x²) + ε)`.
    pub fn normalize(&self, axis: usize, center: bool, eps: f64) -> Self {
        let dims = self.dims().to_vec();
        let x = if center {
            self.binary(BinaryOp::Sub, &self.mean_axis(axis).expand(&dims))
        } else {
            self.clone()
        };
        let rstd = x
            .binary(BinaryOp::Mul, &x)
            .mean_axis(axis)
            .scalar(BinaryOp::Add, E::from_f64(eps))
            .unary(UnaryOp::Sqrt)
            .unary(UnaryOp::Recip);
        x.binary(BinaryOp::Mul, &rstd.expand(&dims))
    }

    /// Uniform numbers in `[0, 1)`: element `i` depends only on `(seed, i)`, the same
    /// on every device.
    pub fn uniform(dims: &[usize], seed: u64) -> Self {
        let n: usize = dims.iter().product();
        let values = (0..n as u64)
            .map(|i| E::from_f64(f64::from(hash(seed, i) >> 8) / f64::from(1u32 << 24)))
            .collect();
        RawTensor::from_vec(values, dims)
    }
}

/// A 32-bit hash of `(seed, i)` (SplitMix64's finaliser).
fn hash(seed: u64, i: u64) -> u32 {
    let mut z = seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 32) as u32
}
