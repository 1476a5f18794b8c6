//! Optimiser steps on Volta's fused kernels (`Backend::adam_steps`,
//! `Backend::sgd_step`): the same kernels `volta::optim` runs, reading each
//! parameter, its `.grad` and its state in one pass; Adam steps a group's
//! parameters together. The Python
//! classes in `volta/optim.py` keep the state and the step counts.
use crate::errors::{self, guard};
use crate::tensor::Tensor;
use crate::tensor::data::Data;
use pyo3::prelude::*;
use volta::RawTensor;
use volta::backend::{AdamInput, AdamStep, Backend, Layout, SgdStep};
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

/// One parameter's Adam step: the parameter, its gradient, its moments.
type AdamItem<'a, D, E> = (
    &'a RawTensor<D, E>,
    &'a RawTensor<D, E>,
    Option<Moments<'a, D, E>>,
);

/// A parameter's new value and moments.
type Stepped<D, E> = (RawTensor<D, E>, RawTensor<D, E>, RawTensor<D, E>);

/// The new `(p, m, v)` of each of `items`, stepped together
/// (`Backend::adam_steps`: on the GPU many to a launch).
fn adam<D: Backend<E>, E: Float>(
    items: &[AdamItem<'_, D, E>],
    hypers: &[AdamStep],
) -> Vec<Stepped<D, E>> {
    let steps: Vec<AdamInput<'_, D, E>> = items
        .iter()
        .zip(hypers)
        .map(|((p, g, m), hyper)| AdamInput {
            p: p.view(),
            g: g.view(),
            moments: m.map(|(m, v)| (m.view(), v.view())),
            hyper: *hyper,
        })
        .collect();
    D::adam_steps(&steps)
        .into_iter()
        .zip(items)
        .map(|((p2, m2, v2), (p, ..))| {
            let layout = Layout::contiguous(p.dims());
            (
                RawTensor::leaf(p2, layout),
                RawTensor::leaf(m2, layout),
                RawTensor::leaf(v2, layout),
            )
        })
        .collect()
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

/// One Adam/AdamW step of each of `params` (PyTorch's formulas), all at once:
/// updates each in place and returns its new moments `(m, v)`, or `None` for a
/// parameter without a gradient. `m[i]` and `v[i]` are parameter `i`'s moments
/// (`None` before its first step) and `steps[i]` its step count.
#[pyfunction]
#[pyo3(signature = (params, m, v, *, lr, beta1, beta2, eps, weight_decay, decoupled, steps))]
#[allow(clippy::too_many_arguments)]
pub fn adam_steps(
    py: Python<'_>,
    params: Vec<Bound<'_, Tensor>>,
    m: Vec<Option<Bound<'_, Tensor>>>,
    v: Vec<Option<Bound<'_, Tensor>>>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    decoupled: bool,
    steps: Vec<i32>,
) -> PyResult<Vec<Option<(Tensor, Tensor)>>> {
    let n = params.len();
    if m.len() != n || v.len() != n || steps.len() != n {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "adam_steps: {n} parameters but {} m, {} v and {} step counts",
            m.len(),
            v.len(),
            steps.len()
        )));
    }
    // The parameters that have gradients, with their data and state.
    let mut todo = Vec::new();
    for (i, param) in params.iter().enumerate() {
        let p = param.get();
        let Some(g) = p.grad_data() else { continue };
        let pd = p.data();
        let (mi, vi) = (
            state("adam", &pd, m[i].as_ref())?,
            state("adam", &pd, v[i].as_ref())?,
        );
        let hyper = AdamStep::at_step(lr, (beta1, beta2), eps, weight_decay, decoupled, steps[i]);
        todo.push((i, pd, g, mi.zip(vi), hyper));
    }
    let results = py.detach(|| {
        guard(|| {
            let _g = volta::no_grad();
            let mut out: Vec<Option<(Data, Data, Data)>> = (0..todo.len()).map(|_| None).collect();
            // Each device and dtype steps its parameters together.
            macro_rules! run {
                ($($v:ident),*) => {$(
                    let mut at = Vec::new();
                    let mut items = Vec::new();
                    let mut hypers = Vec::new();
                    for (k, (_, pd, g, mv, hyper)) in todo.iter().enumerate() {
                        let Data::$v(pt) = pd else { continue };
                        let Data::$v(gt) = g else {
                            return Err(crate::tensor::data::mismatch("adam", &[pd, g]));
                        };
                        let moments = match mv {
                            Some((Data::$v(m), Data::$v(v))) => Some((m, v)),
                            None => None,
                            Some(_) => return Err(crate::tensor::data::mismatch("adam", &[pd, g])),
                        };
                        at.push(k);
                        items.push((pt, gt, moments));
                        hypers.push(*hyper);
                    }
                    if !items.is_empty() {
                        for (k, (a, b, c)) in at.into_iter().zip(adam(&items, &hypers)) {
                            out[k] = Some((Data::$v(a), Data::$v(b), Data::$v(c)));
                        }
                    }
                )*};
            }
            run!(CpuF32, CpuF64, CpuF16, GpuF32, GpuF16);
            Ok(out)
        })
    })?;
    let mut moments: Vec<Option<(Tensor, Tensor)>> = (0..n).map(|_| None).collect();
    for ((i, ..), r) in todo.iter().zip(results) {
        let (np, nm, nv) = r.expect("every parameter's data is one of the variants");
        params[*i].get().replace(np);
        moments[*i] = Some((Tensor::leaf(nm, false), Tensor::leaf(nv, false)));
    }
    Ok(moments)
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
