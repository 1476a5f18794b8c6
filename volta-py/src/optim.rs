//! One optimiser step of one parameter on Volta's fused kernels
//! (`Backend::adam_step`, `Backend::sgd_step`): the same kernels `volta::optim`
//! runs, reading the parameter, its `.grad` and its state in one pass. The Python
//! classes in `volta/optim.py` keep the state and the step counts.
use crate::errors::{self, guard};
use crate::tensor::Tensor;
use crate::tensor::data::Data;
use pyo3::prelude::*;
use volta::RawTensor;
use volta::backend::{AdamStep, Backend, Layout, SgdStep};
use volta::dtype::Float;

fn state(op: &str, p: &Data, s: Option<&Bound<'_, Tensor>>) -> PyResult<Option<Data>> {
    let Some(s) = s else { return Ok(None) };
    let s = s.get().data();
    if s.dims() != p.dims() {
        return Err(errors::shape_error(op, p.dims(), s.dims()));
    }
    if s.place() != p.place() || s.dtype() != p.dtype() {
        return Err(crate::tensor::data::mismatch(op, &[p, &s]));
    }
    Ok(Some(s))
}

/// Adam's first and second moments of one parameter.
type Moments<'a, D, E> = (&'a RawTensor<D, E>, &'a RawTensor<D, E>);

fn adam<D: Backend<E>, E: Float>(
    p: &RawTensor<D, E>,
    g: &RawTensor<D, E>,
    m: Option<Moments<'_, D, E>>,
    hyper: &AdamStep,
) -> (RawTensor<D, E>, RawTensor<D, E>, RawTensor<D, E>) {
    let moments = m.map(|(m, v)| (m.view(), v.view()));
    let (p2, m2, v2) = D::adam_step(p.view(), g.view(), moments, hyper);
    let layout = Layout::contiguous(p.dims());
    (
        RawTensor::leaf(p2, layout),
        RawTensor::leaf(m2, layout),
        RawTensor::leaf(v2, layout),
    )
}

fn sgd<D: Backend<E>, E: Float>(
    p: &RawTensor<D, E>,
    g: &RawTensor<D, E>,
    buf: Option<&RawTensor<D, E>>,
    hyper: &SgdStep,
) -> (RawTensor<D, E>, Option<RawTensor<D, E>>) {
    let (p2, b2) = D::sgd_step(p.view(), g.view(), buf.map(RawTensor::view), hyper);
    let layout = Layout::contiguous(p.dims());
    (
        RawTensor::leaf(p2, layout),
        b2.map(|b| RawTensor::leaf(b, layout)),
    )
}

/// One Adam/AdamW step of `param` (PyTorch's formulas): updates it in place and
/// returns the new moments `(m, v)`, or `None` when it has no gradient.
#[pyfunction]
#[pyo3(signature = (param, m, v, *, lr, beta1, beta2, eps, weight_decay, decoupled, step))]
#[allow(clippy::too_many_arguments)]
pub fn adam_step(
    py: Python<'_>,
    param: &Bound<'_, Tensor>,
    m: Option<&Bound<'_, Tensor>>,
    v: Option<&Bound<'_, Tensor>>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
    step: i32,
) -> PyResult<Option<(Tensor, Tensor)>> {
    let p = param.get();
    let Some(g) = p.grad_data() else {
        return Ok(None);
    };
    let pd = p.data();
    let (m, v) = (state("adam", &pd, m)?, state("adam", &pd, v)?);
    let hyper = AdamStep::at_step(lr, (beta1, beta2), eps, weight_decay, decoupled, step);
    let (np, nm, nv) = py.detach(|| {
        guard(|| {
            let _g = volta::no_grad();
            macro_rules! run {
                ($($v:ident),*) => {
                    match (&pd, &g, &m, &v) {
                        $(
                            (Data::$v(p), Data::$v(g), Some(Data::$v(m)), Some(Data::$v(v))) => {
                                let (a, b, c) = adam(p, g, Some((m, v)), &hyper);
                                (Data::$v(a), Data::$v(b), Data::$v(c))
                            }
                            (Data::$v(p), Data::$v(g), None, None) => {
                                let (a, b, c) = adam(p, g, None, &hyper);
                                (Data::$v(a), Data::$v(b), Data::$v(c))
                            }
                        )*
                        _ => return Err(crate::tensor::data::mismatch("adam", &[&pd, &g])),
                    }
                };
            }
            Ok(run!(CpuF32, CpuF64, CpuF16, GpuF32, GpuF16))
        })
    })?;
    p.replace(np);
    Ok(Some((Tensor::leaf(nm, false), Tensor::leaf(nv, false))))
}

/// One SGD step of `param` (momentum, Nesterov, weight decay as PyTorch, without
/// dampening): updates it in place and returns the new momentum buffer (or `None`).
#[pyfunction]
#[pyo3(signature = (param, buf, *, lr, momentum, weight_decay, nesterov))]
#[allow(clippy::too_many_arguments)]
pub fn sgd_step(
    py: Python<'_>,
    param: &Bound<'_, Tensor>,
    buf: Option<&Bound<'_, Tensor>>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
) -> PyResult<Option<Tensor>> {
    let p = param.get();
    let Some(g) = p.grad_data() else {
        return Ok(None);
    };
    let pd = p.data();
    let b = state("sgd", &pd, buf)?;
    let hyper = SgdStep {
        lr,
        momentum,
        weight_decay,
        nesterov,
    };
    let (np, nb) = py.detach(|| {
        guard(|| {
            let _g = volta::no_grad();
            macro_rules! run {
                ($($v:ident),*) => {
                    match (&pd, &g, &b) {
                        $(
                            (Data::$v(pt), Data::$v(gt), bt) => {
                                let bt = match bt { Some(Data::$v(x)) => Some(x), None => None, Some(_) => return Err(crate::tensor::data::mismatch("sgd", &[&pd, &g])) };
                                let (a, c) = sgd(pt, gt, bt, &hyper);
                                (Data::$v(a), c.map(Data::$v))
                            }
                        )*
                        _ => return Err(crate::tensor::data::mismatch("sgd", &[&pd, &g])),
                    }
                };
            }
            Ok(run!(CpuF32, CpuF64, CpuF16, GpuF32, GpuF16))
        })
    })?;
    p.replace(np);
    Ok(nb.map(|b| Tensor::leaf(b, false)))
}
