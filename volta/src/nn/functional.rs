//! The layers' computations on run-time shapes: what a typed layer's `forward`
//! calls once its shape types have checked the wiring, and what code without shape
//! types (the Python package) calls directly. One path per op: a typed `Conv2d` and
//! Python's `conv2d` record the same kernels and the same backward.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::tensor::RawTensor;
use volta_kernels::{BinaryOp, ReduceOp, Window2d};

/// `x (N, C, H, W) ⊛ weight (O, C/g, KH, KW) + bias`: im2col, one (batched over
/// groups) product, and a permuted view back to NCHW.
///
/// # Panics
/// When the window does not fit the input or the channels do not divide into
/// `groups` (callers check both first).
pub fn conv2d<D: Backend<E>, E: Float>(
    x: &RawTensor<D, E>,
    weight: &RawTensor<D, E>,
    bias: Option<&RawTensor<D, E>>,
    win: &Window2d,
    groups: usize,
) -> RawTensor<D, E> {
    let (n, c) = (x.dims()[0], x.dims()[1]);
    let o = weight.dims()[0];
    let kk = win.kernel[0] * win.kernel[1];
    let cols = x.unfold2d(*win, E::ZERO); // (N, OH, OW, C, KH, KW)
    let (oh, ow) = (cols.dims()[1], cols.dims()[2]);
    let rows = n * oh * ow;
    let y = if groups == 1 {
        let w = weight.reshape(&[o, c * kk]).transpose_last();
        cols.reshape(&[rows, c * kk]).matmul(&w)
    } else {
        // (G, rows, C/g·KK) × (G, C/g·KK, O/g) → (G, rows, O/g) → (rows, O)
        let (cg, og) = (c / groups, o / groups);
        let cols = cols.reshape(&[rows, groups, cg * kk]).permute(&[1, 0, 2]);
        let w = weight.reshape(&[groups, og, cg * kk]).transpose_last();
        cols.matmul(&w).permute(&[1, 0, 2]).reshape(&[rows, o])
    };
    let y = y.reshape(&[n, oh, ow, o]).permute(&[0, 3, 1, 2]);
    match bias {
        Some(bias) => y.binary(
            BinaryOp::Add,
            &bias.reshape(&[1, o, 1, 1]).expand(&[n, o, oh, ow]),
        ),
        None => y,
    }
}

/// The maximum of each window of `x (N, C, H, W)`; padding counts as −∞.
pub fn max_pool2d<D: Backend<E>, E: Float>(x: &RawTensor<D, E>, win: &Window2d) -> RawTensor<D, E> {
    pool(x, win, true)
}

/// The mean of each window of `x (N, C, H, W)`; padding counts as 0 and is
/// included in the count (PyTorch's `count_include_pad=True`).
pub fn avg_pool2d<D: Backend<E>, E: Float>(x: &RawTensor<D, E>, win: &Window2d) -> RawTensor<D, E> {
    pool(x, win, false)
}

/// Unfolds the windows into the last axis of `(N, OH, OW, C, KH·KW)` and reduces it.
fn pool<D: Backend<E>, E: Float>(
    x: &RawTensor<D, E>,
    win: &Window2d,
    max: bool,
) -> RawTensor<D, E> {
    let pad = if max { E::NEG_INFINITY } else { E::ZERO };
    let cols = x.unfold2d(*win, pad);
    let d = cols.dims().to_vec();
    let kk = d[4] * d[5];
    let rows = cols.reshape(&[d[0], d[1], d[2], d[3], kk]);
    let pooled = if max {
        rows.reduce(ReduceOp::Max, 4)
    } else {
        rows.reduce(ReduceOp::Sum, 4)
            .scalar(BinaryOp::Mul, E::from_f64(1.0 / kk as f64))
    };
    pooled
        .reshape(&[d[0], d[1], d[2], d[3]])
        .permute(&[0, 3, 1, 2])
}

/// `x·scale + shift` with `(N,)` parameters broadcast along every other axis of `x`
/// (whose axis `axis` has size `N`): the learned part of every norm.
pub fn affine<D: Backend<E>, E: Float>(
    x: &RawTensor<D, E>,
    axis: usize,
    scale: &RawTensor<D, E>,
    shift: Option<&RawTensor<D, E>>,
) -> RawTensor<D, E> {
    let mut kept = vec![1; x.dims().len()];
    kept[axis] = x.dims()[axis];
    let along = |p: &RawTensor<D, E>| p.reshape(&kept).expand(x.dims());
    let y = x.binary(BinaryOp::Mul, &along(scale));
    match shift {
        Some(b) => y.binary(BinaryOp::Add, &along(b)),
        None => y,
    }
}

/// Dropout's mask for call `seed`: each element 0 with probability `p`, else
/// `1/(1 − p)`, drawn on `x`'s device by a counter-based generator (so a CPU run
/// and a GPU run drop the same elements), applied to `x`.
pub fn dropout<D: Backend<E>, E: Float>(x: &RawTensor<D, E>, p: f64, seed: u64) -> RawTensor<D, E> {
    let keep = if p >= 1.0 {
        RawTensor::full_like_dims(x.dims(), E::ZERO)
    } else {
        RawTensor::<D, E>::uniform(x.dims(), seed)
            .scalar(BinaryOp::Ge, E::from_f64(p))
            .scalar(BinaryOp::Mul, E::from_f64(1.0 / (1.0 - p)))
    };
    x.binary(BinaryOp::Mul, &keep)
}

/// Batch normalisation of `x (N, C, H, W)` with the batch's own statistics
/// (training): the normalised `x` (before the affine part), and each channel's batch
/// mean and unbiased variance `(C,)` for the running statistics (detached).
pub fn batch_norm_train<D: Backend<E>, E: Float>(
    x: &RawTensor<D, E>,
    eps: f64,
) -> (RawTensor<D, E>, RawTensor<D, E>, RawTensor<D, E>) {
    let d = x.dims().to_vec();
    let (n, c, hw) = (d[0], d[1], d[2] * d[3]);
    // Each channel as one row of (C, B·H·W): one row kernel normalises it.
    let rows = x.permute(&[1, 0, 2, 3]).reshape(&[c, n * hw]);
    let y = rows
        .normalize(1, true, eps)
        .reshape(&[c, n, d[2], d[3]])
        .permute(&[1, 0, 2, 3]);
    let _guard = crate::autograd::no_grad();
    let rows = rows.detach();
    let m = rows.dims()[1];
    let mean = rows.mean_axis(1); // (C, 1)
    let dev = rows.binary(BinaryOp::Sub, &mean.expand(rows.dims()));
    let var = dev
        .binary(BinaryOp::Mul, &dev)
        .reduce(ReduceOp::Sum, 1)
        .scalar(BinaryOp::Mul, E::from_f64(1.0 / (m.max(2) - 1) as f64));
    (y, mean.reshape(&[c]), var.reshape(&[c]))
}

/// Batch normalisation of `x (N, C, H, W)` with fixed statistics `mean`, `var`
/// `(C,)` (evaluation), before the affine part.
pub fn batch_norm_eval<D: Backend<E>, E: Float>(
    x: &RawTensor<D, E>,
    mean: &RawTensor<D, E>,
    var: &RawTensor<D, E>,
    eps: f64,
) -> RawTensor<D, E> {
    let d = x.dims().to_vec();
    let c = |t: &RawTensor<D, E>| t.reshape(&[1, d[1], 1, 1]).expand(&d);
    let rstd = var
        .scalar(BinaryOp::Add, E::from_f64(eps))
        .unary(volta_kernels::UnaryOp::Sqrt)
        .unary(volta_kernels::UnaryOp::Recip);
    x.binary(BinaryOp::Sub, &c(mean))
        .binary(BinaryOp::Mul, &c(&rstd))
}

/// `old·(1 − momentum) + new·momentum`: a running statistic's update (untracked).
pub fn blend<D: Backend<E>, E: Float>(
    old: &RawTensor<D, E>,
    new: &RawTensor<D, E>,
    momentum: f64,
) -> RawTensor<D, E> {
    let _guard = crate::autograd::no_grad();
    old.scalar(BinaryOp::Mul, E::from_f64(1.0 - momentum))
        .binary(
            BinaryOp::Add,
            &new.scalar(BinaryOp::Mul, E::from_f64(momentum)),
        )
}
