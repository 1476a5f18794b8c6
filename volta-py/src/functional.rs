//! `volta.functional`: the layers' computations on run-time shapes (convolution,
//! pooling, norms, embedding, dropout, losses, attention). Each checks its arguments, then
//! calls `volta::nn::functional` or a `RawTensor` op — the code the typed layers run.
use crate::errors::{self, Kind, guard};
use crate::tensor::data::{Data, map, zip};
use crate::tensor::{Tensor, ops};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use volta::Window2d;
use volta::backend::AttentionSpec;
use volta::nn::functional as f;
use volta_kernels::{BinaryOp, ReduceOp};

/// A `(h, w)` pair from an int or a 2-sequence.
fn pair(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<[usize; 2]> {
    if let Ok(n) = obj.extract::<usize>() {
        return Ok([n, n]);
    }
    let v: Vec<usize> = obj.extract().map_err(|_| {
        PyValueError::new_err(format!(
            "{name} must be a non-negative int or a pair of them"
        ))
    })?;
    match v.as_slice() {
        [h, w] => Ok([*h, *w]),
        _ => Err(PyValueError::new_err(format!(
            "{name} must be an int or a pair, got {v:?}"
        ))),
    }
}

fn window(
    op: &str,
    x: &Data,
    kernel: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
) -> PyResult<Window2d> {
    if x.dims().len() != 4 {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "{op}: expected an (N, C, H, W) input, got shape {:?}",
                x.dims()
            ),
        ));
    }
    let win = Window2d {
        kernel,
        stride,
        padding,
        dilation,
    };
    let d = x.dims();
    win.output([d[2], d[3]]).map_err(|e| {
        errors::error(Kind::Shape, format!("{op}: a {kernel:?} window (stride {stride:?}, padding {padding:?}, dilation {dilation:?}) does not fit an input of shape {d:?}: {e}"))
    })?;
    Ok(win)
}

/// 2-D convolution of `input (N, C, H, W)` with `weight (O, C/groups, KH, KW)` and
/// an optional `bias (O,)` (PyTorch's `F.conv2d`).
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None, stride=None, padding=None, dilation=None, groups=1))]
pub fn conv2d(
    input: &Bound<'_, Tensor>,
    weight: &Bound<'_, Tensor>,
    bias: Option<&Bound<'_, Tensor>>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    dilation: Option<&Bound<'_, PyAny>>,
    groups: usize,
) -> PyResult<Tensor> {
    let (x, w) = (input.get().data(), weight.get().data());
    let b = bias.map(|b| b.get().data());
    let get = |o: Option<&Bound<'_, PyAny>>, name, default| {
        o.map_or(Ok([default, default]), |o| pair(name, o))
    };
    let (stride, padding, dilation) = (
        get(stride, "stride", 1)?,
        get(padding, "padding", 0)?,
        get(dilation, "dilation", 1)?,
    );
    let wd = w.dims().to_vec();
    if wd.len() != 4 {
        return Err(errors::error(
            Kind::Shape,
            format!("conv2d: weight must be (O, C/groups, KH, KW), got shape {wd:?}"),
        ));
    }
    let win = window("conv2d", &x, [wd[2], wd[3]], stride, padding, dilation)?;
    let c = x.dims()[1];
    if groups == 0 || c % groups != 0 || wd[0] % groups != 0 || wd[1] * groups != c {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "conv2d: input of shape {:?} and weight of shape {wd:?} do not fit with groups={groups} \
             (input channels must equal weight.shape[1]·groups, and both channel counts divide by groups)",
                x.dims()
            ),
        ));
    }
    if let Some(b) = &b
        && b.dims() != [wd[0]]
    {
        return Err(errors::shape_error("conv2d (bias)", b.dims(), &[wd[0]]));
    }
    // The long CPU op of a CNN: the GIL is released while it runs.
    input
        .py()
        .detach(|| {
            guard(|| match &b {
                Some(b) => zip!("conv2d", (&x, &w, b), |x, w, b| f::conv2d(
                    x,
                    w,
                    Some(b),
                    &win,
                    groups
                )),
                None => zip!("conv2d", (&x, &w), |x, w| f::conv2d(
                    x, w, None, &win, groups
                )),
            })
        })
        .map(Tensor::result)
}

fn pool(
    op: &str,
    input: &Bound<'_, Tensor>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
    max: bool,
) -> PyResult<Tensor> {
    let x = input.get().data();
    let kernel = pair("kernel_size", kernel_size)?;
    let stride = match stride {
        Some(s) if !s.is_none() => pair("stride", s)?,
        _ => kernel,
    };
    let padding = padding.map_or(Ok([0, 0]), |p| pair("padding", p))?;
    if padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1] {
        return Err(PyValueError::new_err(format!(
            "{op}: padding {padding:?} must be at most half the kernel size {kernel:?}"
        )));
    }
    let win = window(op, &x, kernel, stride, padding, [1, 1])?;
    guard(|| Ok(map!(&x, t => if max { f::max_pool2d(t, &win) } else { f::avg_pool2d(t, &win) })))
        .map(Tensor::result)
}

/// The maximum of each window of `input (N, C, H, W)`; stride defaults to the kernel.
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=None))]
pub fn max_pool2d(
    input: &Bound<'_, Tensor>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    pool("max_pool2d", input, kernel_size, stride, padding, true)
}

/// The mean of each window of `input (N, C, H, W)` (padding counted as zeros).
#[pyfunction]
#[pyo3(signature = (input, kernel_size, stride=None, padding=None))]
pub fn avg_pool2d(
    input: &Bound<'_, Tensor>,
    kernel_size: &Bound<'_, PyAny>,
    stride: Option<&Bound<'_, PyAny>>,
    padding: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    pool("avg_pool2d", input, kernel_size, stride, padding, false)
}

fn check_eps(op: &str, eps: f64) -> PyResult<()> {
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{op}: eps must be finite and ≥ 0, got {eps}"
        )));
    }
    Ok(())
}

/// Normalises over the last `k` axes (whose dims `normalized_shape` names): with
/// `center` layer norm, without RMS norm; then `·weight + bias`.
fn last_axes_norm(
    op: &str,
    input: &Bound<'_, Tensor>,
    normalized_shape: Vec<usize>,
    weight: Option<&Bound<'_, Tensor>>,
    bias: Option<&Bound<'_, Tensor>>,
    eps: f64,
    center: bool,
) -> PyResult<Tensor> {
    check_eps(op, eps)?;
    let x = input.get().data();
    let dims = x.dims().to_vec();
    let k = normalized_shape.len();
    if k == 0 || k > dims.len() || dims[dims.len() - k..] != normalized_shape[..] {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "{op}: normalized_shape {normalized_shape:?} does not match the last dims of an input of shape {dims:?}"
            ),
        ));
    }
    let n: usize = normalized_shape.iter().product();
    let rows = dims[..dims.len() - k].iter().product::<usize>();
    let params: Vec<Data> = [weight, bias]
        .into_iter()
        .flatten()
        .map(|p| p.get().data())
        .collect();
    for p in &params {
        if p.dims() != normalized_shape.as_slice() {
            return Err(errors::shape_error(op, p.dims(), &normalized_shape));
        }
    }
    let y = guard(|| {
        Ok(map!(&x, t => t.reshape(&[rows, n]).normalize(1, center, eps).reshape(&dims)))
    })?;
    let y = match weight {
        Some(w) => crate::tensor::binary_data(BinaryOp::Mul, op, &y, &w.get().data())?,
        None => y,
    };
    let y = match bias {
        Some(b) => crate::tensor::binary_data(BinaryOp::Add, op, &y, &b.get().data())?,
        None => y,
    };
    Ok(Tensor::result(y))
}

fn shape_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(n) = obj.extract::<usize>() {
        return Ok(vec![n]);
    }
    obj.extract()
        .map_err(|_| PyValueError::new_err("normalized_shape must be an int or a tuple of ints"))
}

/// Layer normalisation over the last dims (PyTorch's `F.layer_norm`).
#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight=None, bias=None, eps=1e-5))]
pub fn layer_norm(
    input: &Bound<'_, Tensor>,
    normalized_shape: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, Tensor>>,
    bias: Option<&Bound<'_, Tensor>>,
    eps: f64,
) -> PyResult<Tensor> {
    last_axes_norm(
        "layer_norm",
        input,
        shape_arg(normalized_shape)?,
        weight,
        bias,
        eps,
        true,
    )
}

/// RMS normalisation over the last dims (PyTorch's `F.rms_norm`).
#[pyfunction]
#[pyo3(signature = (input, normalized_shape, weight=None, eps=1e-6))]
pub fn rms_norm(
    input: &Bound<'_, Tensor>,
    normalized_shape: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, Tensor>>,
    eps: f64,
) -> PyResult<Tensor> {
    last_axes_norm(
        "rms_norm",
        input,
        shape_arg(normalized_shape)?,
        weight,
        None,
        eps,
        false,
    )
}

/// Batch normalisation of `input (N, C, H, W)` per channel (PyTorch's
/// `F.batch_norm`): in training with the batch's statistics, moving
/// `running_mean`/`running_var` (updated in place) by `momentum`; in evaluation
/// with the running statistics.
#[pyfunction]
#[pyo3(signature = (input, running_mean, running_var, weight=None, bias=None, training=false, momentum=0.1, eps=1e-5))]
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    input: &Bound<'_, Tensor>,
    running_mean: Option<&Bound<'_, Tensor>>,
    running_var: Option<&Bound<'_, Tensor>>,
    weight: Option<&Bound<'_, Tensor>>,
    bias: Option<&Bound<'_, Tensor>>,
    training: bool,
    momentum: f64,
    eps: f64,
) -> PyResult<Tensor> {
    check_eps("batch_norm", eps)?;
    if !(0.0..=1.0).contains(&momentum) {
        return Err(PyValueError::new_err(format!(
            "batch_norm: momentum must be in [0, 1], got {momentum}"
        )));
    }
    let x = input.get().data();
    if x.dims().len() != 4 {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "batch_norm: expected an (N, C, H, W) input, got shape {:?}",
                x.dims()
            ),
        ));
    }
    let c = x.dims()[1];
    for p in [running_mean, running_var, weight, bias]
        .into_iter()
        .flatten()
    {
        let d = p.get().data();
        if d.dims() != [c] {
            return Err(errors::shape_error("batch_norm", d.dims(), &[c]));
        }
    }
    let y = if training {
        if x.dims()[0] * x.dims()[2] * x.dims()[3] < 2 {
            return Err(PyValueError::new_err(format!(
                "batch_norm: training needs more than one value per channel, got input shape {:?}",
                x.dims()
            )));
        }
        let (y, mean, var) = guard(|| {
            Ok(match &x {
                Data::CpuF32(t) => {
                    let (a, b, c) = f::batch_norm_train(t, eps);
                    (Data::CpuF32(a), Data::CpuF32(b), Data::CpuF32(c))
                }
                Data::CpuF64(t) => {
                    let (a, b, c) = f::batch_norm_train(t, eps);
                    (Data::CpuF64(a), Data::CpuF64(b), Data::CpuF64(c))
                }
                Data::CpuF16(t) => {
                    let (a, b, c) = f::batch_norm_train(t, eps);
                    (Data::CpuF16(a), Data::CpuF16(b), Data::CpuF16(c))
                }
                Data::GpuF32(t) => {
                    let (a, b, c) = f::batch_norm_train(t, eps);
                    (Data::GpuF32(a), Data::GpuF32(b), Data::GpuF32(c))
                }
                Data::GpuF16(t) => {
                    let (a, b, c) = f::batch_norm_train(t, eps);
                    (Data::GpuF16(a), Data::GpuF16(b), Data::GpuF16(c))
                }
            })
        })?;
        for (running, new) in [(running_mean, mean), (running_var, var)] {
            if let Some(r) = running {
                let old = r.get().data();
                r.get()
                    .replace(zip!("batch_norm", (&old, &new), |o, n| f::blend(
                        o, n, momentum
                    ))?);
            }
        }
        y
    } else {
        let (Some(m), Some(v)) = (running_mean, running_var) else {
            return Err(PyValueError::new_err(
                "batch_norm: evaluation needs running_mean and running_var",
            ));
        };
        let (m, v) = (m.get().data(), v.get().data());
        guard(|| {
            zip!("batch_norm", (&x, &m, &v), |x, m, v| f::batch_norm_eval(
                x, m, v, eps
            ))
        })?
    };
    let y = match (weight, bias) {
        (Some(w), b) => {
            let w = w.get().data();
            let b = b.map(|b| b.get().data());
            guard(|| match &b {
                Some(b) => zip!("batch_norm", (&y, &w, b), |y, w, b| f::affine(
                    y,
                    1,
                    w,
                    Some(b)
                )),
                None => zip!("batch_norm", (&y, &w), |y, w| f::affine(y, 1, w, None)),
            })?
        }
        (None, Some(b)) => {
            let b = b.get().data();
            let ones = map!(&b, t => ops::full_like(t, 1.0));
            guard(|| {
                zip!("batch_norm", (&y, &ones, &b), |y, w, b| f::affine(
                    y,
                    1,
                    w,
                    Some(b)
                ))
            })?
        }
        (None, None) => y,
    };
    Ok(Tensor::result(y))
}

/// Integer ids from a tensor, checked against `0..limit`.
fn ids(op: &str, t: &Data, limit: usize) -> PyResult<Vec<u32>> {
    let v = t.to_f64()?;
    v.iter()
        .map(|&x| {
            if x.fract() != 0.0 || x < 0.0 || x >= limit as f64 {
                Err(PyIndexError::new_err(format!(
                    "{op}: index {x} is out of range 0..{limit}"
                )))
            } else {
                Ok(x as u32)
            }
        })
        .collect()
}

/// Rows `input` (integer ids, any shape) of `weight (V, M)`: result shape
/// `input.shape + (M,)`. Positions holding `padding_idx` (negative: from the end)
/// pass no gradient to its row, as PyTorch's.
#[pyfunction]
#[pyo3(signature = (input, weight, padding_idx=None))]
pub fn embedding(
    input: &Bound<'_, PyAny>,
    weight: &Bound<'_, Tensor>,
    padding_idx: Option<isize>,
) -> PyResult<Tensor> {
    let w = weight.get().data();
    if w.dims().len() != 2 {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "embedding: weight must be (num_embeddings, dim), got shape {:?}",
                w.dims()
            ),
        ));
    }
    let idx = crate::tensor::create::data_from_object(
        input,
        Some(crate::tensor::data::DType::F64),
        crate::device::Where::Cpu,
    )?;
    let rows = w.dims()[0];
    let pad = match padding_idx {
        None => None,
        Some(p) if (-(rows as isize)..rows as isize).contains(&p) => {
            Some(p.rem_euclid(rows as isize) as u32)
        }
        Some(p) => {
            return Err(PyValueError::new_err(format!(
                "embedding: padding_idx {p} is out of range for {rows} rows"
            )));
        }
    };
    let ids = ids("embedding", &idx, rows)?;
    let mut dims = idx.dims().to_vec();
    dims.push(w.dims()[1]);
    let n = ids.len();
    // 1 where a position takes part in its row's gradient, 0 at `padding_idx`.
    let keep: Option<Vec<f64>> =
        pad.map(|p| ids.iter().map(|&i| f64::from(u8::from(i != p))).collect());
    let mut keep_dims = idx.dims().to_vec();
    keep_dims.push(1);
    guard(|| {
        Ok(map!(&w, t => {
            let out = t.index_select(&ops::indices(t, ids.clone(), &[n])).reshape(&dims);
            match &keep {
                None => out,
                // The padding positions' values, through no gradient.
                Some(keep) => {
                    let keep = ops::values_like(t, keep, &keep_dims);
                    volta::RawTensor::select(&ops::broadcast_to(&keep, &dims), &out, &out.detach())
                }
            }
        }))
    })
    .map(Tensor::result)
}

/// Zeroes each element with probability `p` and scales the rest by `1/(1 − p)` when
/// `training`; the identity otherwise. The mask comes from volta's seeded generator
/// (`manual_seed`), drawn on the tensor's device.
#[pyfunction]
#[pyo3(signature = (input, p=0.5, training=true))]
pub fn dropout(input: &Bound<'_, Tensor>, p: f64, training: bool) -> PyResult<Tensor> {
    if !(0.0..=1.0).contains(&p) {
        return Err(PyValueError::new_err(format!(
            "dropout: p must be in [0, 1], got {p}"
        )));
    }
    let x = input.get().data();
    if !training || p == 0.0 {
        return Ok(Tensor::result(x));
    }
    let seed = crate::tensor::create::with_rng(|r| r.next_u64());
    guard(|| Ok(map!(&x, t => f::dropout(t, p, seed)))).map(Tensor::result)
}

/// The loss reduction: `"mean"`, `"sum"` or `"none"`.
fn reduce(op: &str, x: Data, reduction: &str) -> PyResult<Data> {
    let all: Vec<usize> = (0..x.dims().len()).collect();
    match reduction {
        "mean" => guard(|| Ok(map!(&x, t => ops::mean(t, &all, false)))),
        "sum" => guard(|| Ok(map!(&x, t => ops::reduce(t, ReduceOp::Sum, &all, false)))),
        "none" => Ok(x),
        r => Err(PyValueError::new_err(format!(
            "{op}: reduction must be 'mean', 'sum' or 'none', got {r:?}"
        ))),
    }
}

/// Cross-entropy of `input (N, C)` logits against class indices `target (N,)`
/// (ints), optionally label-smoothed (PyTorch's `F.cross_entropy`).
#[pyfunction]
#[pyo3(signature = (input, target, reduction="mean", label_smoothing=0.0))]
pub fn cross_entropy(
    input: &Bound<'_, Tensor>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
    label_smoothing: f64,
) -> PyResult<Tensor> {
    let x = input.get().data();
    let lp = guard(|| Ok(map!(&x, t => t.log_softmax(1)))).and_then(|lp| {
        if x.dims().len() == 2 {
            Ok(lp)
        } else {
            Err(errors::error(
                Kind::Shape,
                format!(
                    "cross_entropy: input must be (N, C) logits, got shape {:?}",
                    x.dims()
                ),
            ))
        }
    })?;
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(PyValueError::new_err(format!(
            "cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}"
        )));
    }
    let picked = nll_rows("cross_entropy", &lp, target)?;
    let per_row = if label_smoothing > 0.0 {
        let c = x.dims()[1] as f64;
        let uniform = guard(|| {
            Ok(
                map!(&lp, t => ops::scalar(&ops::reduce(t, ReduceOp::Sum, &[1], false), BinaryOp::Mul, -1.0 / c)),
            )
        })?;
        let a =
            guard(|| Ok(map!(&picked, t => ops::scalar(t, BinaryOp::Mul, 1.0 - label_smoothing))))?;
        let b = guard(|| Ok(map!(&uniform, t => ops::scalar(t, BinaryOp::Mul, label_smoothing))))?;
        crate::tensor::binary_data(BinaryOp::Add, "cross_entropy", &a, &b)?
    } else {
        picked
    };
    reduce("cross_entropy", per_row, reduction).map(Tensor::result)
}

/// `−log_probs[n, target[n]]` per row.
fn nll_rows(op: &str, lp: &Data, target: &Bound<'_, PyAny>) -> PyResult<Data> {
    let dims = lp.dims().to_vec();
    if dims.len() != 2 {
        return Err(errors::error(
            Kind::Shape,
            format!("{op}: input must be (N, C), got shape {dims:?}"),
        ));
    }
    let tgt = crate::tensor::create::data_from_object(
        target,
        Some(crate::tensor::data::DType::F64),
        crate::device::Where::Cpu,
    )?;
    if tgt.dims() != [dims[0]] {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "{op}: input of shape {dims:?} needs a target of shape [{}], got {:?}",
                dims[0],
                tgt.dims()
            ),
        ));
    }
    let ids = ids(op, &tgt, dims[1])?;
    guard(|| {
        Ok(
            map!(lp, t => ops::scalar(&t.gather(1, &ops::indices(t, ids.clone(), &[dims[0], 1])).reshape(&[dims[0]]), BinaryOp::Mul, -1.0)),
        )
    })
}

/// Negative log-likelihood of `input (N, C)` log-probabilities against class
/// indices `target (N,)` (PyTorch's `F.nll_loss`).
#[pyfunction]
#[pyo3(signature = (input, target, reduction="mean"))]
pub fn nll_loss(
    input: &Bound<'_, Tensor>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
) -> PyResult<Tensor> {
    let rows = nll_rows("nll_loss", &input.get().data(), target)?;
    reduce("nll_loss", rows, reduction).map(Tensor::result)
}

fn pointwise_loss(
    op: &str,
    input: &Bound<'_, Tensor>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
    square: bool,
) -> PyResult<Tensor> {
    let x = input.get().data();
    let y = match target.cast::<Tensor>() {
        Ok(t) => t.get().data(),
        Err(_) => crate::tensor::create::data_from_object(target, Some(x.dtype()), x.place())?,
    };
    if x.dims() != y.dims() {
        return Err(errors::shape_error(op, x.dims(), y.dims()));
    }
    let diff = zip!(op, (&x, &y), |a, b| a.binary(BinaryOp::Sub, b))?;
    let e = guard(|| {
        Ok(if square {
            map!(&diff, t => t.binary(BinaryOp::Mul, t))
        } else {
            map!(&diff, t => t.unary(volta_kernels::UnaryOp::Abs))
        })
    })?;
    reduce(op, e, reduction).map(Tensor::result)
}

/// Mean squared error (PyTorch's `F.mse_loss`); shapes must match.
#[pyfunction]
#[pyo3(signature = (input, target, reduction="mean"))]
pub fn mse_loss(
    input: &Bound<'_, Tensor>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
) -> PyResult<Tensor> {
    pointwise_loss("mse_loss", input, target, reduction, true)
}

/// Mean absolute error (PyTorch's `F.l1_loss`); shapes must match.
#[pyfunction]
#[pyo3(signature = (input, target, reduction="mean"))]
pub fn l1_loss(
    input: &Bound<'_, Tensor>,
    target: &Bound<'_, PyAny>,
    reduction: &str,
) -> PyResult<Tensor> {
    pointwise_loss("l1_loss", input, target, reduction, false)
}

/// `x @ weight.T + bias` (PyTorch's `F.linear`): `weight (out, in)`, `bias (out,)`.
#[pyfunction]
#[pyo3(signature = (input, weight, bias=None))]
pub fn linear(
    input: &Bound<'_, Tensor>,
    weight: &Bound<'_, Tensor>,
    bias: Option<&Bound<'_, Tensor>>,
) -> PyResult<Tensor> {
    let x = input.get().data();
    let w = weight.get().data();
    if w.dims().len() != 2 || x.dims().last() != Some(&w.dims()[1]) {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "linear: input of shape {:?} does not fit a weight of shape {:?} (its last dim must be weight.shape[1])",
                x.dims(),
                w.dims()
            ),
        ));
    }
    let wt = guard(|| Ok(map!(&w, t => t.transpose_last())))?;
    let Some(b) = bias else {
        return Ok(Tensor::result(
            input.py().detach(|| crate::tensor::matmul(&x, &wt))?,
        ));
    };
    let b = b.get().data();
    let n = w.dims()[0];
    if b.dims() != [n] {
        return Err(errors::shape_error("linear (bias)", b.dims(), &[n]));
    }
    // One product that starts from the bias (`addmm`; a vector `x` is a product
    // then a sum).
    let mut out = x.dims().to_vec();
    *out.last_mut().expect("x's last dim is weight.shape[1]") = n;
    let mut row = vec![1; out.len() - 1];
    row.push(n);
    let y = input.py().detach(|| {
        guard(|| {
            zip!("linear", (&x, &wt, &b), |x, w, b| x
                .matmul_add(w, &b.reshape(&row).expand(&out)))
        })
    })?;
    Ok(Tensor::result(y))
}

/// The fused attention of `query (B, H, L, E)` over `key` and `value (B, Hkv, S, E)`
/// (`H` a multiple of `Hkv`), scaled by `scale` (default `1/√E`): the
/// flash-attention kernels the typed layers run, forward and backward, which never
/// store the `L × S` weights. With `causal_start`, query `i` sees the keys up to
/// `causal_start + i`; with `key_ranges` (one `(start, end)` per batch element),
/// the queries of batch element `b` see only its keys `start..end` (padding); a
/// query that sees no key gives zeros. With `dropout_p`, the weights are dropped
/// from volta's seeded generator (`manual_seed`).
/// `volta.functional.scaled_dot_product_attention` is the PyTorch-shaped entry.
#[pyfunction]
#[pyo3(signature = (query, key, value, causal_start=None, dropout_p=0.0, key_ranges=None, scale=None))]
#[allow(clippy::too_many_arguments)]
pub fn attention(
    query: &Bound<'_, Tensor>,
    key: &Bound<'_, Tensor>,
    value: &Bound<'_, Tensor>,
    causal_start: Option<usize>,
    dropout_p: f64,
    key_ranges: Option<Vec<(usize, usize)>>,
    scale: Option<f64>,
) -> PyResult<Tensor> {
    if !(0.0..=1.0).contains(&dropout_p) {
        return Err(PyValueError::new_err(format!(
            "attention: dropout_p must be in [0, 1], got {dropout_p}"
        )));
    }
    if let Some(scale) = scale
        && !scale.is_finite()
    {
        return Err(PyValueError::new_err(format!(
            "attention: scale must be finite, got {scale}"
        )));
    }
    let (q, k, v) = (query.get().data(), key.get().data(), value.get().data());
    let (qd, kd) = (q.dims(), k.dims());
    let fits = qd.len() == 4
        && kd.len() == 4
        && v.dims() == kd
        && qd[0] == kd[0]
        && kd[1] > 0
        && qd[1].is_multiple_of(kd[1])
        && qd[3] == kd[3]
        && kd[2] > 0;
    if !fits {
        return Err(errors::error(
            Kind::Shape,
            format!(
                "attention: query {qd:?} does not fit key {kd:?} and value {:?} (expected \
                 (B, H, L, E) and (B, Hkv, S, E), H a multiple of Hkv, S > 0)",
                v.dims()
            ),
        ));
    }
    let keys: Option<Vec<std::ops::Range<usize>>> =
        key_ranges.map(|r| r.into_iter().map(|(a, b)| a..b).collect());
    if let Some(keys) = &keys {
        let fit = keys.len() == qd[0] && keys.iter().all(|r| r.start <= r.end && r.end <= kd[2]);
        if !fit {
            return Err(errors::error(
                Kind::Shape,
                format!(
                    "attention: key_ranges {keys:?} do not fit a batch of {} over {} keys (one \
                     (start, end) per batch element, 0 <= start <= end <= {})",
                    qd[0], kd[2], kd[2]
                ),
            ));
        }
    }
    let seed = if dropout_p > 0.0 {
        crate::tensor::create::with_rng(|r| r.next_u64())
    } else {
        0
    };
    let spec = AttentionSpec {
        dropout: dropout_p,
        seed,
        keys: keys.map(Into::into),
        ..AttentionSpec::new(scale.unwrap_or(1.0 / (qd[3] as f64).sqrt()), causal_start)
    };
    guard(|| {
        zip!("attention", (&q, &k, &v), |q, k, v| q.attention_with(
            k,
            v,
            spec.clone()
        ))
    })
    .map(Tensor::result)
}

/// Registers the functions on `m` (the `volta._volta.functional` submodule).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for func in [
        wrap_pyfunction!(conv2d, m)?,
        wrap_pyfunction!(max_pool2d, m)?,
        wrap_pyfunction!(avg_pool2d, m)?,
        wrap_pyfunction!(layer_norm, m)?,
        wrap_pyfunction!(rms_norm, m)?,
        wrap_pyfunction!(batch_norm, m)?,
        wrap_pyfunction!(embedding, m)?,
        wrap_pyfunction!(dropout, m)?,
        wrap_pyfunction!(cross_entropy, m)?,
        wrap_pyfunction!(nll_loss, m)?,
        wrap_pyfunction!(mse_loss, m)?,
        wrap_pyfunction!(l1_loss, m)?,
        wrap_pyfunction!(linear, m)?,
        wrap_pyfunction!(attention, m)?,
    ] {
        m.add_function(func)?;
    }
    Ok(())
}
