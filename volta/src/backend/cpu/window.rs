//! Sliding windows over the last two axes of (N, C, H, W) tensors: im2col
//! (`unfold2d`) and its adjoint col2im (`fold2d`).
use super::PARALLEL_THRESHOLD;
use crate::dtype::Float;
use crate::layout::Layout;
use rayon::prelude::*;
use volta_kernels::Window2d;

/// The input position a kernel tap reads along one axis, or `None` in the padding:
/// `o·s − p + k·d` for output position `o` and tap `k`.
#[inline]
fn source(o: usize, k: usize, axis: usize, win: &Window2d, len: usize) -> Option<usize> {
    let at = o * win.stride[axis] + k * win.dilation[axis];
    let p = win.padding[axis];
    (at >= p && at - p < len).then(|| at - p)
}

/// The output `[OH, OW]` of a window that the caller has checked.
fn output(win: &Window2d, hw: [usize; 2]) -> [usize; 2] {
    win.output(hw).expect("the op checked that the window fits")
}

pub(crate) fn unfold2d<E: Float>(x: &[E], l: &Layout, win: &Window2d, pad: E) -> Vec<E> {
    let [n, c, h, w] = [l.dims[0], l.dims[1], l.dims[2], l.dims[3]];
    let [sn, sc, sh, sw] = [l.strides[0], l.strides[1], l.strides[2], l.strides[3]];
    let [oh, ow] = output(win, [h, w]);
    let [kh, kw] = win.kernel;
    // One chunk of C·KH·KW per output position (n, oh, ow).
    let chunk = c * kh * kw;
    let mut out = vec![pad; n * oh * ow * chunk];
    if out.is_empty() {
        return out;
    }
    let fill = |(r, o): (usize, &mut [E])| {
        let (b, y, xo) = (r / (oh * ow), r / ow % oh, r % ow);
        for ki in 0..kh {
            let Some(ih) = source(y, ki, 0, win, h) else {
                continue;
            };
            for kj in 0..kw {
                let Some(iw) = source(xo, kj, 1, win, w) else {
                    continue;
                };
                let base = l.offset + b * sn + ih * sh + iw * sw;
                for ci in 0..c {
                    o[(ci * kh + ki) * kw + kj] = x[base + ci * sc];
                }
            }
        }
    };
    if out.len() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(chunk).enumerate().for_each(fill);
    } else {
        out.chunks_mut(chunk).enumerate().for_each(fill);
    }
    out
}

pub(crate) fn fold2d<E: Float>(
    cols: &[E],
    l: &Layout,
    win: &Window2d,
    [h, w]: [usize; 2],
) -> Vec<E> {
    let [n, oh, ow, c, kh, kw] = [
        l.dims[0], l.dims[1], l.dims[2], l.dims[3], l.dims[4], l.dims[5],
    ];
    let s = &l.strides;
    // Sums in `E::Acc` (`f32` for `f16`), rounded once.
    let mut out = super::buffers::zeros_to_add_into::<E::Acc>(n * c * h * w);
    if out.is_empty() {
        return Vec::new();
    }
    // Each (n, c) plane is summed by one task, in a fixed order: race-free and
    // deterministic.
    let plane = |(p, o): (usize, &mut [E::Acc])| {
        let (b, ci) = (p / c, p % c);
        let base = l.offset + b * s[0] + ci * s[3];
        for y in 0..oh {
            for xo in 0..ow {
                let at = base + y * s[1] + xo * s[2];
                for ki in 0..kh {
                    let Some(ih) = source(y, ki, 0, win, h) else {
                        continue;
                    };
                    for kj in 0..kw {
                        if let Some(iw) = source(xo, kj, 1, win, w) {
                            let v = cols[at + ki * s[4] + kj * s[5]].to_acc();
                            o[ih * w + iw] = o[ih * w + iw] + v;
                        }
                    }
                }
            }
        }
    };
    if l.numel() >= PARALLEL_THRESHOLD {
        out.par_chunks_mut(h * w).enumerate().for_each(plane);
    } else {
        out.chunks_mut(h * w).enumerate().for_each(plane);
    }
    out.into_iter().map(E::from_acc).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x = 0..12 as (1, 1, 3, 4).
    fn x() -> (Vec<f64>, Layout) {
        (
            (0..12).map(f64::from).collect(),
            Layout::contiguous(&[1, 1, 3, 4]),
        )
    }

    #[test]
    fn unfold_a_2x2_window_with_stride_2() {
        let (x, l) = x();
        let win = Window2d {
            stride: [1, 2],
            ..Window2d::square(2)
        };
        // Output 2×2 positions, each a 2×2 patch.
        let cols = unfold2d(&x, &l, &win, -1.0);
        #[rustfmt::skip]
        assert_eq!(cols, vec![
            0.0, 1.0, 4.0, 5.0,    2.0, 3.0, 6.0, 7.0,
            4.0, 5.0, 8.0, 9.0,    6.0, 7.0, 10.0, 11.0,
        ]);
    }

    #[test]
    fn unfold_pads_with_the_value_and_dilates() {
        let (x, l) = x();
        // 2×2 taps two apart, padding 1: output (3 + 2 − 3)/1 + 1 = 3 by 4.
        let win = Window2d {
            padding: [1, 1],
            dilation: [2, 2],
            ..Window2d::square(2)
        };
        let cols = unfold2d(&x, &l, &win, -1.0);
        assert_eq!(cols.len(), 3 * 4 * 4);
        // Position (0, 0) reads rows −1, 1 and columns −1, 1.
        assert_eq!(&cols[..4], &[-1.0, -1.0, -1.0, 5.0]);
        // Position (1, 2) reads rows 0, 2 and columns 1, 3.
        assert_eq!(&cols[(4 + 2) * 4..][..4], &[1.0, 3.0, 9.0, 11.0]);
    }

    #[test]
    fn unfold_reads_through_strides_and_channels_last() {
        // The channels of (1, 2, 2, 2) stored as NHWC: x[0, c, i, j] = 10c + 2i + j.
        let data: Vec<f64> = (0..2)
            .flat_map(|i| {
                (0..2).flat_map(move |j| (0..2).map(move |c| f64::from(10 * c + 2 * i + j)))
            })
            .collect();
        let l = Layout::contiguous(&[1, 2, 2, 2]).permute(&[0, 3, 1, 2]);
        let cols = unfold2d(&data, &l, &Window2d::square(2), 0.0);
        // One position; (c, kh, kw) order.
        assert_eq!(cols, vec![0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0]);
    }

    #[test]
    fn fold_sums_overlapping_taps() {
        // Ones through a 2×2 window with stride 1 on 3×3: each input position is
        // read by as many windows as cover it.
        let win = Window2d::square(2);
        let cols = vec![1.0f64; 2 * 2 * 4];
        let l = Layout::contiguous(&[1, 2, 2, 1, 2, 2]);
        let img = fold2d(&cols, &l, &win, [3, 3]);
        assert_eq!(img, vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
        // Padding taps are dropped.
        let pad = Window2d {
            padding: [1, 1],
            stride: [2, 2],
            ..Window2d::square(3)
        };
        // Input 2×2, output (2 + 2 − 3)/2 + 1 = 1 position of 3×3 taps.
        let cols: Vec<f64> = (0..9).map(f64::from).collect();
        let l = Layout::contiguous(&[1, 1, 1, 1, 3, 3]);
        assert_eq!(fold2d(&cols, &l, &pad, [2, 2]), vec![4.0, 5.0, 7.0, 8.0]);
    }
}
