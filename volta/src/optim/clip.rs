//! Gradient clipping by global norm.
use super::check;
use crate::autograd::{Gradients, no_grad};
use crate::backend::Backend;
use crate::dtype::Float;
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

/// Scales every gradient in `grads` by `min(1, max_norm / (‖g‖ + 10⁻⁶))`, where
/// `‖g‖` is the 2-norm of all gradients taken together, and returns `‖g‖` (before
/// clipping), as PyTorch's `clip_grad_norm_`.
///
/// Nothing is read back: the norm and the scale are device scalars and the scale
/// is broadcast-multiplied into each gradient, so a GPU step stays on the device
/// (read the returned norm only when you log it). Gradients are summed in a fixed
/// order (by tensor id), so the result is deterministic. A non-finite norm makes
/// the gradients non-finite too (PyTorch's default, `error_if_nonfinite=False`).
///
/// ```
/// use volta::prelude::*;
/// use volta::optim::clip_grad_norm;
///
/// let w = Tensor::<Rank1<2>>::from_array([0.0, 0.0]).requires_grad();
/// let mut grads = w.mul(&Tensor::<Rank1<2>>::from_array([3.0, 4.0])).sum_all().backward();
/// let norm = clip_grad_norm(&mut grads, 1.0);
/// assert_eq!(norm.item(), 5.0);
/// let g = grads.get(&w).unwrap().to_vec();
/// assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6);
/// ```
///
/// # Panics
/// When `max_norm` is negative or not finite.
pub fn clip_grad_norm<D: Backend<E>, E: Float>(
    grads: &mut Gradients<D, E>,
    max_norm: f64,
) -> Tensor<(), D, E> {
    check("clip_grad_norm: max_norm", max_norm, max_norm >= 0.0, "≥ 0");
    let _guard = no_grad();
    let mut entries: Vec<_> = grads.iter_mut().collect();
    entries.sort_by_key(|(id, _)| *id);
    let mut total: Option<RawTensor<D, E>> = None;
    for (_, g) in &entries {
        // Flattened first, so that a GPU reduction computes the pending square in
        // its loads: one kernel per gradient.
        let flat = g.reshape(&[g.layout().numel()]);
        let squares = flat
            .binary(BinaryOp::Mul, &flat)
            .reduce(ReduceOp::Sum, 0)
            .reshape(&[]);
        total = Some(match total {
            Some(t) => t.binary(BinaryOp::Add, &squares),
            None => squares,
        });
    }
    let norm = match total {
        Some(t) => t.unary(UnaryOp::Sqrt),
        None => RawTensor::full_like_dims(&[], E::ZERO),
    };
    let scale = RawTensor::full_like_dims(&[], E::from_f64(max_norm))
        .binary(
            BinaryOp::Div,
            &norm.scalar(BinaryOp::Add, E::from_f64(1e-6)),
        )
        .scalar(BinaryOp::Min, E::ONE);
    for (_, g) in entries {
        let ones = vec![1; g.dims().len()];
        let s = scale.reshape(&ones).expand(g.dims());
        *g = g.binary(BinaryOp::Mul, &s);
    }
    Tensor::from_raw((), norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;
    use crate::shape::{Rank1, Rank2};

    /// Gradients `[3, 4]` and `[[12]]`: a global norm of 13.
    fn setup() -> (Tensor<Rank1<2>>, Tensor<Rank2<1, 1>>, Gradients<Cpu, f32>) {
        let a = Tensor::<Rank1<2>>::from_array([1.0, 1.0]).requires_grad();
        let b = Tensor::<Rank2<1, 1>>::from_array([[2.0]]).requires_grad();
        let loss = a
            .mul(&Tensor::<Rank1<2>>::from_array([3.0, 4.0]))
            .sum_all()
            .add(&b.mul_scalar(12.0).sum_all());
        let g = loss.backward();
        (a, b, g)
    }

    #[test]
    fn clips_to_the_global_norm() {
        let (a, b, mut g) = setup();
        let norm = clip_grad_norm(&mut g, 6.5);
        assert_eq!(norm.item(), 13.0);
        let scale = 6.5f32 / (13.0f32 + 1e-6f32);
        assert_eq!(g.get(&a).unwrap().to_vec(), vec![3.0 * scale, 4.0 * scale]);
        assert_eq!(g.get(&b).unwrap().to_vec(), vec![12.0 * scale]);
        // Clipping again: now (just) under the norm, nothing changes but rounding.
        let again = clip_grad_norm(&mut g, 6.5).item();
        assert!((again - 6.5).abs() < 1e-5, "{again}");
    }

    #[test]
    fn is_a_no_op_under_the_norm() {
        let (a, b, mut g) = setup();
        assert_eq!(clip_grad_norm(&mut g, 100.0).item(), 13.0);
        assert_eq!(g.get(&a).unwrap().to_vec(), vec![3.0, 4.0]);
        assert_eq!(g.get(&b).unwrap().to_vec(), vec![12.0]);
        let mut empty = Gradients::<Cpu, f32>::new();
        assert_eq!(clip_grad_norm(&mut empty, 1.0).item(), 0.0);
    }

    #[test]
    #[should_panic(expected = "max_norm must be ≥ 0")]
    fn rejects_a_negative_max_norm() {
        let (_, _, mut g) = setup();
        clip_grad_norm(&mut g, -1.0);
    }
}
