//! Stochastic gradient descent with momentum and weight decay.
use super::{
    Optimizer, OptimizerState, StateError, check, check_kind, for_each_grad, slot, split_name,
};
use crate::autograd::Gradients;
use crate::backend::cpu::Cpu;
use crate::backend::{Backend, SgdStep};
use crate::dtype::Float;
use crate::layout::Layout;
use crate::nn::Module;
use crate::tensor::RawTensor;

/// SGD as PyTorch defines it: `g ← ∇ + λ·p`; with momentum `μ`, `v ← μ·v + g`
/// (`v ← g` on the first step) and `g ← v`, or `g ← g + μ·v` with
/// [Nesterov momentum](Sgd::with_nesterov); then `p ← p − lr·g`.
///
/// Each parameter's step is one kernel ([`Backend::sgd_step`]) that reads the
/// parameter, its gradient and its momentum buffer once.
#[derive(Clone, Debug)]
pub struct Sgd<D: Backend<E> = Cpu, E: Float = f32> {
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
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
            nesterov: false,
            velocity: Vec::new(),
            steps: 0,
        }
    }

    /// Adds momentum `μ ∈ [0, 1)`.
    ///
    /// # Panics
    /// When `momentum` is outside `[0, 1)`, or 0 with Nesterov momentum on.
    pub fn with_momentum(mut self, momentum: f64) -> Self {
        check(
            "Sgd: momentum",
            momentum,
            (0.0..1.0).contains(&momentum),
            "in [0, 1)",
        );
        assert!(
            momentum > 0.0 || !self.nesterov,
            "Sgd: Nesterov momentum requires momentum > 0"
        );
        self.momentum = momentum;
        self
    }

    /// Turns Nesterov momentum on or off (PyTorch's `nesterov=True`): after
    /// `v ← μ·v + g`, the step uses `g + μ·v` rather than `v`.
    ///
    /// # Panics
    /// When turning it on without momentum: call
    /// [`with_momentum`](Self::with_momentum) (with `μ > 0`) first.
    pub fn with_nesterov(mut self, nesterov: bool) -> Self {
        assert!(
            !nesterov || self.momentum > 0.0,
            "Sgd: Nesterov momentum requires momentum > 0 (call with_momentum first), got momentum {}",
            self.momentum
        );
        self.nesterov = nesterov;
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
        // The count may come from a checkpoint: saturate rather than overflow.
        self.steps = self.steps.saturating_add(1);
        let hyper = SgdStep {
            lr: self.lr,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            nesterov: self.nesterov,
        };
        for_each_grad(model, grads, |position, param, grad| {
            let p = param.value().clone();
            let layout = Layout::contiguous(p.dims());
            let updated = if self.momentum != 0.0 {
                let v = slot(&mut self.velocity, position, p.dims(), |v| v.dims());
                let old = v.take();
                let (p, next) = D::sgd_step(
                    p.view(),
                    grad.view(),
                    old.as_ref().map(|b| b.view()),
                    &hyper,
                );
                let next = next.expect("a step with momentum returns its buffer");
                *v = Some(RawTensor::leaf(next, layout));
                p
            } else {
                D::sgd_step(p.view(), grad.view(), None, &hyper).0
            };
            param
                .update(RawTensor::leaf(updated, layout))
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

    /// Hand reference of PyTorch's Nesterov SGD in f64 over `steps` gradients
    /// `coef` (the loss is linear, so the gradient is `coef`), from `p`.
    fn nesterov_reference(
        p: [f64; 2],
        coef: &[[f64; 2]],
        (lr, mu, wd): (f64, f64, f64),
    ) -> Vec<[f64; 2]> {
        let (mut p, mut buf) = (p, None::<[f64; 2]>);
        let mut out = Vec::new();
        for c in coef {
            let g: [f64; 2] = std::array::from_fn(|i| c[i] + wd * p[i]);
            let b: [f64; 2] = match buf {
                None => g,
                Some(b) => std::array::from_fn(|i| mu * b[i] + g[i]),
            };
            buf = Some(b);
            for i in 0..2 {
                p[i] -= lr * (g[i] + mu * b[i]);
            }
            out.push(p);
        }
        out
    }

    const COEFS: [[f64; 2]; 4] = [[0.5, -1.0], [0.25, 2.0], [-1.5, 0.75], [1.0, -0.5]];

    #[test]
    fn nesterov_matches_hand_computation() {
        let hyper = (0.1, 0.9, 0.01);
        let want = nesterov_reference([1.0, 2.0], &COEFS, hyper);
        // First step by hand: g = (0.51, −0.98), b = g, p −= 0.1·(g + 0.9·g).
        assert!((want[0][0] - (1.0 - 0.1 * 1.9 * 0.51)).abs() < 1e-12);
        let mut p = Tensor::<Rank1<2>>::from_array([1.0, 2.0]).requires_grad();
        let mut opt = Sgd::new(0.1)
            .with_momentum(0.9)
            .with_nesterov(true)
            .with_weight_decay(0.01);
        for (step, coef) in COEFS.iter().enumerate() {
            let g = grads_of(&p, coef.map(|x| x as f32));
            opt.step(&mut p, &g);
            let got = p.to_vec();
            for i in 0..2 {
                assert!(
                    (got[i] as f64 - want[step][i]).abs() < 1e-6,
                    "step {step}: {got:?} vs {:?}",
                    want[step]
                );
            }
        }
        // Nesterov differs from plain momentum from the first step.
        let mut q = Tensor::<Rank1<2>>::from_array([1.0, 2.0]).requires_grad();
        let g = grads_of(&q, [0.5, -1.0]);
        Sgd::new(0.1).with_momentum(0.9).step(&mut q, &g);
        assert_ne!(
            q.to_vec(),
            Tensor::<Rank1<2>>::from_array([1.0, 2.0]).to_vec()
        );
        assert!((q.to_vec()[0] as f64 - (1.0 - 0.1 * 0.5)).abs() < 1e-7);
    }

    #[test]
    fn a_loaded_nesterov_state_continues_exactly() {
        let make = || Sgd::new(0.05).with_momentum(0.8).with_nesterov(true);
        let run = |opt: &mut Sgd, p: &mut Tensor<Rank1<2>>, coefs: &[[f64; 2]]| {
            for c in coefs {
                let g = grads_of(p, c.map(|x| x as f32));
                opt.step(p, &g);
            }
        };
        let mut straight = Tensor::<Rank1<2>>::from_array([1.0, -1.0]).requires_grad();
        run(&mut make(), &mut straight, &COEFS);

        let mut p = Tensor::<Rank1<2>>::from_array([1.0, -1.0]).requires_grad();
        let mut first = make();
        run(&mut first, &mut p, &COEFS[..2]);
        let state = first.state();
        assert_eq!((state.kind.as_str(), state.step), ("sgd", 2));
        let names: Vec<&str> = state.tensors.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["0.momentum_buffer"]);
        let mut resumed = make();
        resumed
            .load_state(state)
            .expect("an SGD state loads into SGD");
        run(&mut resumed, &mut p, &COEFS[2..]);
        assert_eq!(p.to_vec(), straight.to_vec());
        assert_eq!(resumed.state().step, 4);
        // Unknown slots are refused.
        let mut bad = resumed.state();
        bad.tensors[0].0 = "0.exp_avg".into();
        assert_eq!(
            make().load_state(bad).unwrap_err(),
            StateError::UnknownTensor("0.exp_avg".into())
        );
    }

    #[test]
    #[should_panic(expected = "Nesterov momentum requires momentum > 0")]
    fn nesterov_without_momentum_panics() {
        let _ = Sgd::<Cpu, f32>::new(0.1).with_nesterov(true);
    }

    #[test]
    #[should_panic(expected = "Nesterov momentum requires momentum > 0")]
    fn removing_the_momentum_of_nesterov_panics() {
        let _ = Sgd::<Cpu, f32>::new(0.1)
            .with_momentum(0.9)
            .with_nesterov(true)
            .with_momentum(0.0);
    }

    #[test]
    #[should_panic(expected = "momentum must be in [0, 1)")]
    fn rejects_bad_momentum() {
        let _ = Sgd::<Cpu, f32>::new(0.1).with_momentum(1.5);
    }
}
