//! The generic halves of the Python-facing ops: each a function of one
//! `RawTensor<D, E>`, written once and dispatched over `Data`'s variants. Shapes
//! are already checked when these run.
use volta::RawTensor;
use volta::backend::Backend;
use volta::dtype::Float;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// `op(t, c)` with a host scalar.
pub fn scalar<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    op: BinaryOp,
    c: f64,
) -> RawTensor<D, E> {
    t.scalar(op, E::from_f64(c))
}

/// `c op t` (the reflected forms: `2 - x`, `1 / x`).
pub fn scalar_left<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    op: BinaryOp,
    c: f64,
) -> RawTensor<D, E> {
    RawTensor::full_like_dims(t.dims(), E::from_f64(c)).binary(op, t)
}

/// `t` broadcast to `dims` (numpy's rule; checked by the caller).
pub fn broadcast_to<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    dims: &[usize],
) -> RawTensor<D, E> {
    if t.dims() == dims {
        return t.clone();
    }
    let mut padded = vec![1; dims.len() - t.dims().len()];
    padded.extend_from_slice(t.dims());
    let t = if padded == t.dims() {
        t.clone()
    } else {
        t.reshape(&padded)
    };
    t.expand(dims)
}

/// `x ** k` for a host exponent. WGSL's `pow` is NaN for every negative base, so
/// integer exponents (where numpy gives a real answer) are built from `|x|`.
pub fn powf<D: Backend<E>, E: Float>(t: &RawTensor<D, E>, k: f64) -> RawTensor<D, E> {
    if k == 1.0 {
        return t.scalar(BinaryOp::Mul, E::ONE);
    }
    if k == 2.0 {
        return t.binary(BinaryOp::Mul, t);
    }
    if k.fract() != 0.0 || !k.is_finite() {
        return t.scalar(BinaryOp::Pow, E::from_f64(k));
    }
    if k == 0.0 {
        // 1 everywhere (NaN and ∞ included), yet recorded, as in PyTorch: `x ** 0`
        // of a tensor that requires grad requires grad, with gradient 0 (`select`
        // passes none to the branch it never picks).
        let ones = RawTensor::full_like_dims(t.dims(), E::ONE);
        return RawTensor::select(&ones, &ones, t);
    }
    let abs = t.unary(UnaryOp::Abs);
    if (k as i64) % 2 == 0 {
        abs.scalar(BinaryOp::Pow, E::from_f64(k))
    } else {
        // x·|x|^(k−1), with k − 1 even: the sign comes from x.
        t.binary(
            BinaryOp::Mul,
            &abs.scalar(BinaryOp::Pow, E::from_f64(k - 1.0)),
        )
    }
}

/// The sum (or max/min) over `axes`, keeping them as size 1 when `keepdim`.
pub fn reduce<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    op: ReduceOp,
    axes: &[usize],
    keepdim: bool,
) -> RawTensor<D, E> {
    let dims = t.dims().to_vec();
    let kept: Vec<usize> = dims
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let out = if axes.is_empty() {
        t.clone()
    } else if dims.iter().product::<usize>() == 0 {
        // Sums of nothing: the identity, as numpy gives.
        RawTensor::full_like_dims(&kept, op.identity::<E>())
    } else {
        t.reduce_axes(op, axes).reshape(&kept)
    };
    if keepdim {
        out
    } else {
        let squeezed: Vec<usize> = dims
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        out.reshape(&squeezed)
    }
}

/// The mean over `axes`.
pub fn mean<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    axes: &[usize],
    keepdim: bool,
) -> RawTensor<D, E> {
    let n: usize = axes.iter().map(|&a| t.dims()[a]).product();
    scalar(
        &reduce(t, ReduceOp::Sum, axes, keepdim),
        BinaryOp::Div,
        n as f64,
    )
}

/// The variance over `axes` with `correction` (1: unbiased, as PyTorch's default).
pub fn var<D: Backend<E>, E: Float>(
    t: &RawTensor<D, E>,
    axes: &[usize],
    correction: f64,
    keepdim: bool,
) -> RawTensor<D, E> {
    let n: usize = axes.iter().map(|&a| t.dims()[a]).product();
    let centred = t.binary(BinaryOp::Sub, &mean(t, axes, true).expand(t.dims()));
    let sq = centred.binary(BinaryOp::Mul, &centred);
    scalar(
        &reduce(&sq, ReduceOp::Sum, axes, keepdim),
        BinaryOp::Div,
        (n as f64 - correction).max(0.0),
    )
}

/// `t` with the value of every element, as a new tensor of the same dims.
pub fn full_like<D: Backend<E>, E: Float>(t: &RawTensor<D, E>, value: f64) -> RawTensor<D, E> {
    RawTensor::full_like_dims(t.dims(), E::from_f64(value))
}

/// `values` as a tensor of dims `dims` on `like`'s device, in its element type.
pub fn values_like<D: Backend<E>, E: Float>(
    _like: &RawTensor<D, E>,
    values: &[f64],
    dims: &[usize],
) -> RawTensor<D, E> {
    RawTensor::from_vec(values.iter().map(|&v| E::from_f64(v)).collect(), dims)
}

/// `u32` indices on `t`'s device (gather, embedding lookups, targets).
pub fn indices<D: Backend<E>, E: Float>(
    _like: &RawTensor<D, E>,
    ids: Vec<u32>,
    dims: &[usize],
) -> RawTensor<D, u32> {
    RawTensor::from_vec(ids, dims)
}
