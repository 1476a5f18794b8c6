//! Loss functions: scalar tensors to call `backward()` on.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{Axis, Const, Dim, SameShape, Shape};
use crate::tensor::Tensor;

/// Mean cross-entropy of `logits` (unnormalised scores, one row per sample) against
/// class indices `targets`: `−mean_b log_softmax(logits)[b, targets[b]]`.
///
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
    assert_eq!(
        targets.dims()[0],
        b.size(),
        "cross_entropy: {} targets for {} rows of logits",
        targets.dims()[0],
        b.size()
    );
    let idx =
        Tensor::<(B, Const<1>), D, u32>::try_from_raw(targets.raw().reshape_any(&[b.size(), 1]))
            .expect("a (B,) index tensor reshapes to (B, 1)");
    let picked = logits.log_softmax::<Axis<1>>().gather::<Axis<1>, _>(&idx);
    picked.mean_all().neg()
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
}
