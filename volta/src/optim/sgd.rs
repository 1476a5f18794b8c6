//! Stochastic gradient descent with momentum and weight decay.
use super::{
    Optimizer, OptimizerState, StateError, check, check_kind, for_each_grad, slot, split_name,
};
use crate::autograd::Gradients;
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::Module;
use crate::tensor::RawTensor;
use volta_kernels::BinaryOp;

/// SGD as PyTorch defines it: `g ← ∇ + λ·p`; with momentum `μ`, `v ← μ·v + g`
/// (`v ← g` on the first step) and `g ← v`; then `p ← p − lr·g`.
#[derive(Clone, Debug)]
pub struct Sgd<D: Backend<E> = Cpu, E: Float = f32> {
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    velocity: Vec<Option<RawTensor<D, E>>>,
    steps: u64,
}

impl<D: Backend<E>, E: Float> Sgd<D, E> {
    /// Plain SGD with learning rate `lr`.
    ///
    /// # Panics
    /// When `lr` is negative or not finite.
    pub fn new(lr: f64) -> Self {
        check("Sgd: lr", lr, lr >= 0.0, "≥ 0");
        Sgd {
            lr,
            momentum: 0.0,
            weight_decay: 0.0,
            velocity: Vec::new(),
            steps: 0,
        }
    }

    /// Adds momentum `μ ∈ [0, 1)`.
    ///
    /// # Panics
    /// When `momentum` is outside `[0, 1)`.
    pub fn with_momentum(mut self, momentum: f64) -> Self {
        check(
            "Sgd: momentum",
            momentum,
            (0.0..1.0).contains(&momentum),
            "in [0, 1)",
        );
        self.momentum = momentum;
        self
    }

    /// Adds L2 weight decay `λ ≥ 0` (added to the gradient).
    ///
    /// # Panics
    /// When `weight_decay` is negative or not finite.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        check(
            "Sgd: weight_decay",
            weight_decay,
            weight_decay >= 0.0,
            "≥ 0",
        );
        self.weight_decay = weight_decay;
        self
    }
}

impl<D: Backend<E>, E: Float> Optimizer<D, E> for Sgd<D, E> {
    fn step<M: Module<D, E> + ?Sized>(&mut self, model: &mut M, grads: &Gradients<D, E>) {
        let c = E::from_f64;
        self.steps += 1;
        for_each_grad(model, grads, |position, param, grad| {
            let p = param.value().clone();
            let mut g = grad;
            if self.weight_decay != 0.0 {
                g = g.binary(
                    BinaryOp::Add,
                    &p.scalar(BinaryOp::Mul, c(self.weight_decay)),
                );
            }
            if self.momentum != 0.0 {
                let v = slot(&mut self.velocity, position, p.dims(), |v| v.dims());
                let next = match v.take() {
                    Some(v) => v
                        .scalar(BinaryOp::Mul, c(self.momentum))
                        .binary(BinaryOp::Add, &g),
                    None => g,
                };
                g = next.clone();
                *v = Some(next);
            }
            let updated = p.binary(BinaryOp::Sub, &g.scalar(BinaryOp::Mul, c(self.lr)));
            param
                .update(updated)
                .expect("an update keeps the parameter's dims");
        });
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) {
        check("Sgd: lr", lr, lr >= 0.0, "≥ 0");
        self.lr = lr;
    }

    fn state(&self) -> OptimizerState<D, E> {
        let tensors = self
            .velocity
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((format!("{i}.momentum_buffer"), v.clone()?)))
            .collect();
        OptimizerState {
            kind: KIND.to_string(),
            step: self.steps,
            tensors,
        }
    }

    fn load_state(&mut self, state: OptimizerState<D, E>) -> Result<(), StateError> {
        check_kind(KIND, &state)?;
        let mut velocity = Vec::new();
        for (name, t) in state.tensors {
            match split_name(&name)? {
                (position, "momentum_buffer") => {
                    if velocity.len() <= position {
                        velocity.resize_with(position + 1, || None);
                    }
                    velocity[position] = Some(t);
                }
                _ => return Err(StateError::UnknownTensor(name)),
            }
        }
        self.velocity = velocity;
        self.steps = state.step;
        Ok(())
    }
}

/// The kind name in saved states.
const KIND: &str = "sgd";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Rank1;
    use crate::tensor::Tensor;

    /// A loss whose gradient with respect to `p` is `coef`.
    fn grads_of(p: &Tensor<Rank1<2>>, coef: [f32; 2]) -> Gradients<Cpu, f32> {
        p.mul(&Tensor::<Rank1<2>>::from_array(coef))
            .sum_all()
            .backward()
    }

    #[test]
    fn plain_step_matches_hand_computation() {
        let mut p = Tensor::<Rank1<2>>::from_array([1.0, -2.0]).requires_grad();
        let mut opt = Sgd::new(0.5);
        let g = grads_of(&p, [0.2, 4.0]);
        opt.step(&mut p, &g);
        assert_eq!(p.to_vec(), vec![1.0 - 0.1, -2.0 - 2.0]);
        assert!(p.is_tracked());
    }

    #[test]
    fn momentum_and_weight_decay_match_hand_computation() {
        let (lr, mu, wd) = (0.1f64, 0.9f64, 0.01f64);
        let mut p = Tensor::<Rank1<2>>::from_array([1.0, 2.0]).requires_grad();
        let mut opt = Sgd::new(lr).with_momentum(mu).with_weight_decay(wd);
        let coef = [0.5f64, -1.0];
        let (mut want, mut v) = ([1.0f64, 2.0], [0.0f64; 2]);
        for step in 0..3 {
            let g = grads_of(&p, coef.map(|x| x as f32));
            opt.step(&mut p, &g);
            for i in 0..2 {
                let gi = coef[i] + wd * want[i];
                v[i] = if step == 0 { gi } else { mu * v[i] + gi };
                want[i] -= lr * v[i];
            }
            let got = p.to_vec();
            for i in 0..2 {
                assert!(
                    (got[i] as f64 - want[i]).abs() < 1e-6,
                    "step {step}: {got:?} vs {want:?}"
                );
            }
        }
    }

    #[test]
    fn parameters_without_gradients_are_untouched() {
        let mut pair = (
            Tensor::<Rank1<2>>::from_array([1.0, 1.0]).requires_grad(),
            Tensor::<Rank1<2>>::from_array([3.0, 3.0]).requires_grad(),
        );
        let g = grads_of(&pair.0, [1.0, 1.0]);
        let before = pair.1.id();
        Sgd::new(1.0).step(&mut pair, &g);
        assert_eq!(pair.0.to_vec(), vec![0.0, 0.0]);
        assert_eq!(pair.1.id(), before);
    }

    #[test]
    #[should_panic(expected = "momentum must be in [0, 1)")]
    fn rejects_bad_momentum() {
        let _ = Sgd::<Cpu, f32>::new(0.1).with_momentum(1.5);
    }
}
