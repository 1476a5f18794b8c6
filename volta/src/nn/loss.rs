//! Loss functions: scalar tensors to call `backward()` on.
//!
//! Each loss follows PyTorch's function of the same name (`torch.nn.functional`)
//! with its default `reduction='mean'`, and is composed from the typed op set, so
//! it runs on every device and differentiates with respect to every float input.
//!
//! | here | PyTorch |
//! |---|---|
//! | [`cross_entropy`] | `F.cross_entropy(logits, targets)` |
//! | [`cross_entropy_smoothed`] | `F.cross_entropy(logits, targets, label_smoothing=ε)` |
//! | [`nll`] | `F.nll_loss(log_probs, targets)` |
//! | [`binary_cross_entropy_with_logits`] | `F.binary_cross_entropy_with_logits(logits, targets)` |
//! | [`mse`] | `F.mse_loss(prediction, target)` |
//! | [`l1`] | `F.l1_loss(prediction, target)` |
//! | [`huber`] | `F.huber_loss(prediction, target, delta=δ)` |
//!
//! Class targets are `u32` indices in `0..C`. An index `≥ C` panics on the CPU and
//! is reported at the next read-back on the GPU (checking it up front would need a
//! read-back of the targets every step). Hyperparameters out of their domain
//! (`ε ∉ [0, 1]`, `δ ≤ 0`) are programmer errors and panic.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{Axis, Const, Dim, SameShape, Shape};
use crate::tensor::Tensor;

/// `targets` as a `(B, 1)` index tensor for a gather along the classes, after
/// checking that there is one target per row (dynamic batch dims can differ).
#[track_caller]
fn class_index<B: Dim, D: Backend<E>, E: Float>(
    what: &str,
    b: B,
    targets: &Tensor<(B,), D, u32>,
) -> Tensor<(B, Const<1>), D, u32> {
    assert_eq!(
        targets.dims()[0],
        b.size(),
        "{what}: {} targets for {} rows of logits",
        targets.dims()[0],
        b.size()
    );
    Tensor::<(B, Const<1>), D, u32>::try_from_raw(targets.raw().reshape_any(&[b.size(), 1]))
        .expect("a (B,) index tensor reshapes to (B, 1)")
}

/// The elements of `x` as a rank-1 tensor (a view when contiguous; differentiable),
/// so that generic-shape losses can combine intermediate results: `S` itself is not
/// known to be `SameShape<S>` in generic code.
fn flat<S: Shape, D: Backend<E>, E: Float>(x: &Tensor<S, D, E>) -> Tensor<(usize,), D, E> {
    let n = x.numel();
    Tensor::from_raw((n,), x.raw().reshape(&[n]))
}

/// Mean negative log-likelihood of class indices `targets` under `log_probs`
/// (log-probabilities, one row per sample, e.g. from
/// [`log_softmax`](Tensor::log_softmax)): `−mean_b log_probs[b, targets[b]]`.
///
/// Shapes: `log_probs` is `(B, C)`, `targets` is `(B,)` with values in `0..C`.
/// The gradient with respect to `log_probs` is `−1/B` at each target and 0
/// elsewhere. `nll(&x.log_softmax::<Axis<1>>(), t)` is [`cross_entropy`]`(&x, t)`.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::nll;
/// let log_probs = Tensor::<Rank2<2, 2>>::from_array([[-0.5, -2.0], [-1.0, -3.0]]);
/// let targets = Tensor::<Rank1<2>, Cpu, u32>::from_array([0, 1]);
/// assert_eq!(nll(&log_probs, &targets).item(), (0.5 + 3.0) / 2.0);
/// ```
pub fn nll<B: Dim, C: Dim, D: Backend<E>, E: Float>(
    log_probs: &Tensor<(B, C), D, E>,
    targets: &Tensor<(B,), D, u32>,
) -> Tensor<(), D, E> {
    let (b, _) = log_probs.shape();
    let idx = class_index("nll", b, targets);
    log_probs.gather::<Axis<1>, _>(&idx).mean_all().neg()
}

/// Mean cross-entropy of `logits` (unnormalised scores, one row per sample) against
/// class indices `targets`: `−mean_b log_softmax(logits)[b, targets[b]]`.
///
/// Shapes: `logits` is `(B, C)`, `targets` is `(B,)` with values in `0..C`.
/// Computed with a stable log-softmax and a gather; the gradient with respect to the
/// logits is `(softmax − onehot) / B`. A target `≥ C` panics on the CPU.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::cross_entropy;
/// let logits = Tensor::<Rank2<1, 2>>::from_array([[0.0, 0.0]]);
/// let targets = Tensor::<Rank1<1>, Cpu, u32>::from_array([1]);
/// let loss = cross_entropy(&logits, &targets);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// ```
pub fn cross_entropy<B: Dim, C: Dim, D: Backend<E>, E: Float>(
    logits: &Tensor<(B, C), D, E>,
    targets: &Tensor<(B,), D, u32>,
) -> Tensor<(), D, E> {
    let (b, _) = logits.shape();
    let idx = class_index("cross_entropy", b, targets);
    let picked = logits.log_softmax::<Axis<1>>().gather::<Axis<1>, _>(&idx);
    picked.mean_all().neg()
}

/// Cross-entropy with label smoothing `ε` (PyTorch's `label_smoothing`): the target
/// distribution puts `1 − ε + ε/C` on the target class and `ε/C` on every other, so
///
/// `loss = (1 − ε) · nll + ε · mean_b mean_c(−log_softmax(logits)[b, c])`
///
/// where `nll` is [`cross_entropy`]. `ε = 0` is plain cross-entropy, `ε = 1` the
/// cross-entropy against the uniform distribution. The gradient with respect to the
/// logits is `(softmax − (1 − ε)·onehot − ε/C) / B`.
///
/// Shapes: `logits` is `(B, C)`, `targets` is `(B,)` with values in `0..C`.
///
/// # Panics
///
/// If `label_smoothing` is not in `[0, 1]` (or is NaN).
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::cross_entropy_smoothed;
/// let logits = Tensor::<Rank2<1, 2>>::from_array([[0.0, 0.0]]);
/// let targets = Tensor::<Rank1<1>, Cpu, u32>::from_array([1]);
/// // Uniform logits: every class costs ln 2, whatever the smoothing.
/// let loss = cross_entropy_smoothed(&logits, &targets, 0.1);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn cross_entropy_smoothed<B: Dim, C: Dim, D: Backend<E>, E: Float>(
    logits: &Tensor<(B, C), D, E>,
    targets: &Tensor<(B,), D, u32>,
    label_smoothing: f64,
) -> Tensor<(), D, E> {
    let eps = label_smoothing;
    assert!(
        (0.0..=1.0).contains(&eps),
        "cross_entropy_smoothed: label_smoothing must be in [0, 1], got {eps}"
    );
    let (b, _) = logits.shape();
    let idx = class_index("cross_entropy_smoothed", b, targets);
    let log_probs = logits.log_softmax::<Axis<1>>();
    let nll = log_probs.gather::<Axis<1>, _>(&idx).mean_all();
    if eps == 0.0 {
        return nll.neg();
    }
    // mean over rows and classes = mean over rows of the mean over classes.
    let uniform = log_probs.mean_all();
    nll.mul_scalar(E::from_f64(eps - 1.0))
        .sub(&uniform.mul_scalar(E::from_f64(eps)))
}

/// Mean binary cross-entropy of `logits` (unnormalised scores) against `targets`
/// (probabilities in `[0, 1]`, usually 0 or 1) of the same shape, computed in the
/// numerically stable form
///
/// `loss = mean(max(x, 0) − x·y + log(1 + exp(−|x|)))`
///
/// which equals `−mean(y·log σ(x) + (1 − y)·log(1 − σ(x)))` without overflow for
/// large `|x|`. The gradient with respect to the logits is `(σ(x) − y) / n`,
/// exactly, at `x = 0` too (the max splits its gradient on the tie); with respect
/// to the targets it is `−x / n`. (Without a `log1p` op, `log(1 + exp(−|x|))` rounds
/// to 0 once `exp(−|x|)` is below the element type's epsilon: an absolute error
/// under `1e-7` in f32.)
///
/// Shapes: any, equal for both (at compile time for static dims, at run time for
/// dynamic ones).
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::binary_cross_entropy_with_logits;
/// let x = Tensor::<Rank1<2>>::from_array([0.0, 0.0]);
/// let y = Tensor::<Rank1<2>>::from_array([1.0, 0.0]);
/// let loss = binary_cross_entropy_with_logits(&x, &y);
/// assert!((loss.item() - 2f32.ln()).abs() < 1e-6);
/// ```
pub fn binary_cross_entropy_with_logits<S: Shape, T: SameShape<S>, D: Backend<E>, E: Float>(
    logits: &Tensor<S, D, E>,
    targets: &Tensor<T, D, E>,
) -> Tensor<(), D, E> {
    // `x·y` checks the dims (dynamic ones at run time) before both are flattened.
    let xy = flat(&logits.mul(targets));
    let x = flat(logits);
    // max(x, 0) rather than relu: on a tie the max gives each side half the
    // gradient, which makes the total at x = 0 the exact σ(0) − y.
    let positive = x.max_scalar(E::ZERO);
    let tail = x.abs().neg().exp().add_scalar(E::ONE).log();
    positive.sub(&xy).add(&tail).mean_all()
}

/// Mean squared error: `mean((prediction − target)²)` over all elements.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::mse;
/// let p = Tensor::<Rank1<2>>::from_array([1.0, 3.0]);
/// let t = Tensor::<Rank1<2>>::from_array([0.0, 1.0]);
/// assert_eq!(mse(&p, &t).item(), 2.5);
/// ```
pub fn mse<S: Shape, T: SameShape<S>, D: Backend<E>, E: Float>(
    prediction: &Tensor<S, D, E>,
    target: &Tensor<T, D, E>,
) -> Tensor<(), D, E> {
    prediction.sub(target).square().mean_all()
}

/// Mean absolute error: `mean(|prediction − target|)` over all elements.
///
/// Shapes: any, equal for both. The gradient with respect to the prediction is
/// `sign(prediction − target) / n` (0 where they are equal, as in PyTorch).
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::l1;
/// let p = Tensor::<Rank1<2>>::from_array([1.0, 3.0]);
/// let t = Tensor::<Rank1<2>>::from_array([0.0, 1.0]);
/// assert_eq!(l1(&p, &t).item(), 1.5);
/// ```
pub fn l1<S: Shape, T: SameShape<S>, D: Backend<E>, E: Float>(
    prediction: &Tensor<S, D, E>,
    target: &Tensor<T, D, E>,
) -> Tensor<(), D, E> {
    prediction.sub(target).abs().mean_all()
}

/// Mean Huber loss with threshold `δ` (PyTorch's `huber_loss`): with
/// `d = |prediction − target|` elementwise,
///
/// `loss = mean(d < δ ? ½·d² : δ·(d − ½·δ))`
///
/// quadratic near zero, linear (slope `δ`) beyond `δ`. The gradient with respect to
/// the prediction is `clamp(prediction − target, −δ, δ) / n`. Computed as
/// `½·m² + δ·(d − m)` with `m = min(d, δ)`.
///
/// Shapes: any, equal for both.
///
/// # Panics
///
/// If `delta` is not positive and finite.
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::loss::huber;
/// let p = Tensor::<Rank1<2>>::from_array([0.5, 3.0]);
/// let t = Tensor::<Rank1<2>>::from_array([0.0, 0.0]);
/// // ½·0.5² = 0.125 and 1·(3 − ½) = 2.5.
/// assert_eq!(huber(&p, &t, 1.0).item(), (0.125 + 2.5) / 2.0);
/// ```
#[track_caller]
pub fn huber<S: Shape, T: SameShape<S>, D: Backend<E>, E: Float>(
    prediction: &Tensor<S, D, E>,
    target: &Tensor<T, D, E>,
    delta: f64,
) -> Tensor<(), D, E> {
    assert!(
        delta > 0.0 && delta.is_finite(),
        "huber: delta must be positive and finite, got {delta}"
    );
    let d = flat(&prediction.sub(target)).abs();
    let m = d.min_scalar(E::from_f64(delta));
    m.square()
        .mul_scalar(E::from_f64(0.5))
        .add(&d.sub(&m).mul_scalar(E::from_f64(delta)))
        .mean_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::Cpu;
    use crate::shape::{Rank1, Rank2};

    #[test]
    fn cross_entropy_matches_hand_values_and_gradient() {
        let logits =
            Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]).requires_grad();
        let targets = Tensor::<Rank1<2>, Cpu, u32>::from_array([2, 0]);
        let loss = cross_entropy(&logits, &targets);
        let lse0 = (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        let expected = ((lse0 - 3.0) + 3f64.ln()) / 2.0;
        assert!(
            (loss.item() as f64 - expected).abs() < 1e-6,
            "{}",
            loss.item()
        );

        let g = loss
            .backward()
            .get(&logits)
            .expect("logits are tracked")
            .to_vec();
        let z0 = lse0.exp();
        let want = [
            1f64.exp() / z0 / 2.0,
            2f64.exp() / z0 / 2.0,
            (3f64.exp() / z0 - 1.0) / 2.0,
            (1.0 / 3.0 - 1.0) / 2.0,
            1.0 / 6.0,
            1.0 / 6.0,
        ];
        for (a, b) in g.iter().zip(want) {
            assert!((*a as f64 - b).abs() < 1e-6, "{g:?}");
        }
    }

    #[test]
    fn cross_entropy_with_dynamic_batch() {
        let logits = Tensor::<(usize, Const<2>)>::from_vec_shaped(vec![0.0, 0.0], (1, Const))
            .expect("2 values");
        let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![0], (1,)).expect("1");
        assert!((cross_entropy(&logits, &targets).item() - 2f32.ln()).abs() < 1e-6);
    }

    #[test]
    fn mse_value_and_gradient() {
        let p = Tensor::<Rank2<2, 2>>::from_array([[1.0, 2.0], [3.0, 4.0]]).requires_grad();
        let t = Tensor::<Rank2<2, 2>>::from_array([[0.0, 2.0], [5.0, 4.0]]);
        let loss = mse(&p, &t);
        assert_eq!(loss.item(), (1.0 + 0.0 + 4.0 + 0.0) / 4.0);
        let g = loss.backward().get(&p).expect("tracked").to_vec();
        // d/dp = 2 (p − t) / n.
        assert_eq!(g, vec![0.5, 0.0, -1.0, 0.0]);
    }

    /// `|got − want| ≤ tol·(1 + |want|)`, element by element.
    #[track_caller]
    fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                g.is_finite() && (g - w).abs() <= tol * (1.0 + w.abs()),
                "{what}[{i}]: got {g}, want {w}\n got {got:?}\nwant {want:?}"
            );
        }
    }

    fn f64s(v: Vec<f32>) -> Vec<f64> {
        v.into_iter().map(f64::from).collect()
    }

    /// log Σ exp, shifted by the max (the f64 reference).
    fn log_sum_exp(row: &[f64]) -> f64 {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + row.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
    }

    /// The f64 reference of label-smoothed cross-entropy and its gradient.
    fn smoothed_reference(rows: &[Vec<f64>], targets: &[usize], eps: f64) -> (f64, Vec<f64>) {
        let (b, c) = (rows.len() as f64, rows[0].len() as f64);
        let mut loss = 0.0;
        let mut grad = Vec::new();
        for (row, &t) in rows.iter().zip(targets) {
            let lse = log_sum_exp(row);
            let nll = lse - row[t];
            let uniform = row.iter().map(|x| lse - x).sum::<f64>() / c;
            loss += ((1.0 - eps) * nll + eps * uniform) / b;
            for (k, x) in row.iter().enumerate() {
                let onehot = if k == t { 1.0 } else { 0.0 };
                grad.push(((x - lse).exp() - (1.0 - eps) * onehot - eps / c) / b);
            }
        }
        (loss, grad)
    }

    #[test]
    fn nll_picks_the_targets_and_matches_cross_entropy() {
        let lp =
            Tensor::<Rank2<2, 3>, Cpu, f64>::from_array([[-0.1, -2.0, -3.0], [-1.5, -0.7, -4.0]])
                .requires_grad();
        let targets = Tensor::<Rank1<2>, Cpu, u32>::from_array([2, 1]);
        let loss = nll(&lp, &targets);
        assert_close("nll", &[loss.item()], &[(3.0 + 0.7) / 2.0], 1e-15);
        let g = loss.backward().get(&lp).expect("tracked").to_vec();
        assert_eq!(g, vec![0.0, 0.0, -0.5, 0.0, -0.5, 0.0]);

        let logits = Tensor::<Rank2<2, 3>>::from_array([[1.0, -2.0, 0.5], [3.0, 3.0, -1.0]]);
        let a = nll(&logits.log_softmax::<Axis<1>>(), &targets).item();
        let b = cross_entropy(&logits, &targets).item();
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }

    #[test]
    #[should_panic(expected = "nll: 3 targets for 2 rows of logits")]
    fn nll_rejects_a_target_count_that_differs_from_the_rows() {
        let lp = Tensor::<(usize, Const<2>)>::zeros_shaped((2, Const));
        let targets = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![0, 1, 1], (3,)).unwrap();
        let _ = nll(&lp, &targets);
    }

    #[test]
    fn cross_entropy_smoothed_matches_the_f64_formula_with_large_logits() {
        // Row 1 would overflow exp in f32 without the max shift; row 2 is saturated.
        let rows = [
            [0.3f32, -1.2, 2.0, 0.0],
            [1000.0, -1000.0, 0.0, 500.0],
            [-80.0, 90.0, 88.0, -100.0],
        ];
        let targets = [2usize, 3, 0];
        let rows64: Vec<Vec<f64>> = rows
            .iter()
            .map(|r| r.iter().map(|&x| x as f64).collect())
            .collect();
        let logits = Tensor::<Rank2<3, 4>>::from_array(rows).requires_grad();
        let t = Tensor::<Rank1<3>, Cpu, u32>::from_array(targets.map(|t| t as u32));
        for eps in [0.0, 0.1, 0.5, 1.0] {
            let loss = cross_entropy_smoothed(&logits, &t, eps);
            let (want, want_grad) = smoothed_reference(&rows64, &targets, eps);
            assert_close(
                &format!("eps {eps} loss"),
                &[loss.item() as f64],
                &[want],
                1e-6,
            );
            let g = loss.backward().get(&logits).expect("tracked").to_vec();
            assert_close(&format!("eps {eps} grad"), &f64s(g), &want_grad, 1e-6);
        }
        // ε = 0 is plain cross-entropy.
        assert_eq!(
            cross_entropy_smoothed(&logits, &t, 0.0).item(),
            cross_entropy(&logits, &t).item()
        );
    }

    #[test]
    fn cross_entropy_smoothed_in_f64_with_a_dynamic_batch() {
        let rows = vec![vec![0.25, -0.5, 1.75], vec![2.0, 2.0, -3.0]];
        let targets = [1usize, 0];
        let logits =
            Tensor::<(usize, Const<3>), Cpu, f64>::from_vec_shaped(rows.concat(), (2, Const))
                .unwrap()
                .requires_grad();
        let t = Tensor::<(usize,), Cpu, u32>::from_vec_shaped(vec![1, 0], (2,)).unwrap();
        let loss = cross_entropy_smoothed(&logits, &t, 0.2);
        let (want, want_grad) = smoothed_reference(&rows, &targets, 0.2);
        assert_close("loss", &[loss.item()], &[want], 1e-14);
        let g = loss.backward().get(&logits).expect("tracked").to_vec();
        assert_close("grad", &g, &want_grad, 1e-14);
    }

    #[test]
    #[should_panic(expected = "cross_entropy_smoothed: label_smoothing must be in [0, 1], got 1.5")]
    fn cross_entropy_smoothed_rejects_smoothing_above_one() {
        let logits = Tensor::<Rank2<1, 2>>::zeros();
        let t = Tensor::<Rank1<1>, Cpu, u32>::from_array([0]);
        let _ = cross_entropy_smoothed(&logits, &t, 1.5);
    }

    #[test]
    #[should_panic(expected = "label_smoothing must be in [0, 1], got -0.1")]
    fn cross_entropy_smoothed_rejects_negative_smoothing() {
        let logits = Tensor::<Rank2<1, 2>>::zeros();
        let t = Tensor::<Rank1<1>, Cpu, u32>::from_array([0]);
        let _ = cross_entropy_smoothed(&logits, &t, -0.1);
    }

    #[test]
    #[should_panic(expected = "label_smoothing must be in [0, 1], got NaN")]
    fn cross_entropy_smoothed_rejects_nan_smoothing() {
        let logits = Tensor::<Rank2<1, 2>>::zeros();
        let t = Tensor::<Rank1<1>, Cpu, u32>::from_array([0]);
        let _ = cross_entropy_smoothed(&logits, &t, f64::NAN);
    }

    /// σ(x) in f64 without overflow.
    fn sigmoid(x: f64) -> f64 {
        if x >= 0.0 {
            1.0 / (1.0 + (-x).exp())
        } else {
            x.exp() / (1.0 + x.exp())
        }
    }

    #[test]
    fn binary_cross_entropy_with_logits_matches_the_f64_formula_with_large_logits() {
        let xs = [
            -1e4f32, -100.0, -30.0, -2.5, -0.5, 0.0, 0.0, 0.75, 3.0, 40.0, 100.0, 1e4,
        ];
        let ys = [
            0.0f32, 1.0, 0.0, 1.0, 0.3, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0,
        ];
        let x = Tensor::<Rank2<3, 4>>::from_vec(xs.to_vec())
            .unwrap()
            .requires_grad();
        let y = Tensor::<Rank2<3, 4>>::from_vec(ys.to_vec())
            .unwrap()
            .requires_grad();
        let loss = binary_cross_entropy_with_logits(&x, &y);
        let n = xs.len() as f64;
        let pairs = || xs.iter().zip(&ys).map(|(&x, &y)| (x as f64, y as f64));
        let want: f64 = pairs()
            .map(|(x, y)| x.max(0.0) - x * y + (-x.abs()).exp().ln_1p())
            .sum::<f64>()
            / n;
        assert_close("loss", &[loss.item() as f64], &[want], 1e-6);
        let grads = loss.backward();
        let gx = grads.get(&x).expect("tracked").to_vec();
        let want_gx: Vec<f64> = pairs().map(|(x, y)| (sigmoid(x) - y) / n).collect();
        // Includes x = 0 exactly: σ(0) − y, not −y.
        assert_close("d/dx", &f64s(gx), &want_gx, 1e-6);
        let gy = grads.get(&y).expect("tracked").to_vec();
        let want_gy: Vec<f64> = pairs().map(|(x, _)| -x / n).collect();
        assert_close("d/dy", &f64s(gy), &want_gy, 1e-6);
    }

    #[test]
    fn binary_cross_entropy_with_logits_in_f64_with_a_dynamic_shape() {
        let xs = vec![0.4, -1.3, 2.2, 0.0, -0.1, 5.0];
        let ys = vec![1.0, 0.0, 0.5, 1.0, 0.0, 0.25];
        let x = Tensor::<(usize, Const<3>), Cpu, f64>::from_vec_shaped(xs.clone(), (2, Const))
            .unwrap()
            .requires_grad();
        let y =
            Tensor::<(usize, Const<3>), Cpu, f64>::from_vec_shaped(ys.clone(), (2, Const)).unwrap();
        let loss = binary_cross_entropy_with_logits(&x, &y);
        // The textbook form, fine in f64 for these magnitudes.
        let want = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| -(y * sigmoid(x).ln() + (1.0 - y) * (1.0 - sigmoid(x)).ln()))
            .sum::<f64>()
            / 6.0;
        assert_close("loss", &[loss.item()], &[want], 1e-14);
        let g = loss.backward().get(&x).expect("tracked").to_vec();
        let want_g: Vec<f64> = xs
            .iter()
            .zip(&ys)
            .map(|(&x, &y)| (sigmoid(x) - y) / 6.0)
            .collect();
        assert_close("grad", &g, &want_g, 1e-14);
    }

    #[test]
    fn l1_value_and_gradient() {
        let p =
            Tensor::<Rank2<2, 2>, Cpu, f64>::from_array([[1.0, 2.0], [3.0, -4.0]]).requires_grad();
        let t = Tensor::<Rank2<2, 2>, Cpu, f64>::from_array([[0.0, 2.0], [5.0, 4.0]]);
        let loss = l1(&p, &t);
        assert_eq!(loss.item(), (1.0 + 0.0 + 2.0 + 8.0) / 4.0);
        let g = loss.backward().get(&p).expect("tracked").to_vec();
        // sign(p − t) / n, 0 on the tie.
        assert_eq!(g, vec![0.25, 0.0, -0.25, -0.25]);
    }

    #[test]
    fn huber_value_and_gradient_on_both_sides_of_delta() {
        let delta = 0.5;
        let ps = [0.1, -0.3, 0.5, 2.0, -7.0, 1.0];
        let ts = [0.0, 0.0, 0.0, 0.5, 0.0, 1.0];
        let p = Tensor::<Rank1<6>, Cpu, f64>::from_array(ps).requires_grad();
        let t = Tensor::<Rank1<6>, Cpu, f64>::from_array(ts);
        let loss = huber(&p, &t, delta);
        let (want, want_g): (Vec<f64>, Vec<f64>) = ps
            .iter()
            .zip(&ts)
            .map(|(p, t)| {
                let r: f64 = p - t;
                let v = if r.abs() < delta {
                    0.5 * r * r
                } else {
                    delta * (r.abs() - 0.5 * delta)
                };
                (v / 6.0, r.clamp(-delta, delta) / 6.0)
            })
            .unzip();
        assert_close("loss", &[loss.item()], &[want.iter().sum()], 1e-15);
        let g = loss.backward().get(&p).expect("tracked").to_vec();
        assert_close("grad", &g, &want_g, 1e-15);

        // In f32, with large residuals: linear, no overflow of the square.
        let p = Tensor::<Rank1<2>>::from_array([1e20, -3e19]);
        let t = Tensor::<Rank1<2>>::zeros();
        let want = (1.0 * (1e20 - 0.5) + 1.0 * (3e19 - 0.5)) / 2.0;
        assert_close("large", &[huber(&p, &t, 1.0).item() as f64], &[want], 1e-6);
    }

    #[test]
    #[should_panic(expected = "huber: delta must be positive and finite, got 0")]
    fn huber_rejects_a_zero_delta() {
        let p = Tensor::<Rank1<2>>::zeros();
        let _ = huber(&p, &p, 0.0);
    }

    #[test]
    #[should_panic(expected = "huber: delta must be positive and finite, got -1")]
    fn huber_rejects_a_negative_delta() {
        let p = Tensor::<Rank1<2>>::zeros();
        let _ = huber(&p, &p, -1.0);
    }

    #[test]
    #[should_panic(expected = "huber: delta must be positive and finite, got inf")]
    fn huber_rejects_an_infinite_delta() {
        let p = Tensor::<Rank1<2>>::zeros();
        let _ = huber(&p, &p, f64::INFINITY);
    }
}
